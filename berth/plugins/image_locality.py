"""ImageLocality: prefer nodes that already hold the pod's container images.

Mirrors kube-scheduler v1.37.2
``pkg/scheduler/framework/plugins/imagelocality/image_locality.go``:

- every init container and container image (``normalizedImageName``: an
  untagged name gets ``:latest``) and, since 1.36, every image volume's
  reference (``volumes[].image.reference``) that a node has adds
  ``int64(float64(size) * spread)`` to that node's sum, where spread is the
  number of nodes holding the image over the number of nodes in the snapshot
  — an image present everywhere counts fully, a rare one little, so pods are
  not all drawn to the few nodes that happen to have pulled an image;
- ``calculatePriority`` clamps the sum to [23 MiB, 1000 MiB x number of
  images] and scales it to 0..MaxNodeScore with integer arithmetic. The
  number of images is the containers' in 1.35 and 1.36, the containers' and
  image volumes' from 1.37 (``sumImageScores`` returns it since v1.37.0).

The loop is over the pod's images; each image's rows come from
:meth:`NodeTable.images`, so the work per node is a few numpy operations.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import numpy.typing as npt

from berth import features
from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable, normalize_image
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework.handle import Handle

__all__ = ["MAX_CONTAINER_THRESHOLD", "MIN_THRESHOLD", "ImageLocality", "calculate_priority", "pod_images"]

IntArray = npt.NDArray[np.int64]

MB = 1024 * 1024
#: image_locality.go minThreshold: images smaller than this in total score 0.
MIN_THRESHOLD = 23 * MB
#: image_locality.go maxContainerThreshold: the per-container cap of the sum.
MAX_CONTAINER_THRESHOLD = 1000 * MB
#: At most this many images' terms remembered per image index.
_MAX_TERMS = 1024


def calculate_priority(sum_scores: IntArray, image_count: int) -> IntArray:
    """image_locality.go calculatePriority, over an array of per-node sums."""
    if image_count <= 0:
        # maxThreshold 0: every sum clamps to minThreshold, which scores 0.
        return np.zeros_like(sum_scores)
    max_threshold = MAX_CONTAINER_THRESHOLD * image_count
    clamped = np.clip(sum_scores, MIN_THRESHOLD, max_threshold)
    # Both operands are non-negative, so floor division is Go's truncating one.
    out: IntArray = fw.MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)
    return out


def pod_images(spec: model.PodSpec, version: features.KubeVersion) -> tuple[list[str], int]:
    """image_locality.go sumImageScores' images of a pod and the image count
    calculatePriority scales by, as ``version`` has them: image volumes count
    towards the sum since v1.36.0 and towards the count since v1.37.0
    (compare v1.35.4, v1.36.3 and v1.37.2; no feature gate)."""
    names = [c.image for c in (*spec.init_containers, *spec.containers)]
    count = len(names)
    if version >= features.KubeVersion(1, 36):
        for volume in spec.volumes:
            if volume.image is None:
                continue
            names.append(volume.image.reference)
            if version >= features.KubeVersion(1, 37):
                count += 1
    return names, count


class ImageLocality:
    """kube-scheduler's ImageLocality score plugin."""

    NAME: ClassVar[str] = "ImageLocality"
    Args: ClassVar[None] = None

    def __init__(self, args: None = None, handle: Handle | None = None) -> None:
        self.handle = handle
        self.version = handle.features.version if handle is not None else features.NEWEST
        # (image index, {(name, number of nodes, cap): (rows, scaled sizes)}):
        # each image's per-node terms depend only on the index (rebuilt, as
        # a new object, whenever the nodes change: NodeTable.images), the
        # node count and the sum's cap, so they are worked out once, not per
        # cycle (np.unique over every row holding the image). Replaced whole
        # when the index changes; bounded in entries.
        self._terms_of: tuple[object, dict[tuple[str, int, int], tuple[IntArray, IntArray]]] | None = None

    def _terms(
        self, images: object, name: str, entry: tuple[IntArray, IntArray], total_nodes: int, cap: int
    ) -> tuple[IntArray, IntArray]:
        """The rows holding image ``name`` and ``int64(float64(size) * spread)`` on each, clamped to [0, cap]."""
        memo = self._terms_of
        if memo is None or memo[0] is not images:
            memo = self._terms_of = (images, {})
        key = (name, total_nodes, cap)
        hit = memo[1].get(key)
        if hit is None:
            img_rows, sizes = entry
            # One ImageStateSummary per node: a node listing a name twice counts once.
            uniq, first = np.unique(img_rows, return_index=True)
            spread = float(len(uniq)) / float(total_nodes)
            # int64(float64(imageState.Size) * spread): truncation toward
            # zero. Terms and the running sum are bounded by the sum's cap
            # (a size is never negative, and calculatePriority caps the
            # sum anyway): absurd sizes neither wrap the sum nor the cast.
            scaled = np.clip(sizes[first].astype(np.float64) * spread, 0.0, float(cap)).astype(np.int64)
            hit = (uniq, scaled)
            if len(memo[1]) < _MAX_TERMS:
                memo[1][key] = hit
        return hit

    def score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> IntArray:
        names, count = pod_images(pod.pod.spec, self.version)
        images = nodes.images()
        present = [(name, f) for image in names if (f := images.get(name := normalize_image(image))) is not None]
        if not present:
            # No node has any of the pod's images: every sum is 0, which
            # calculatePriority scores 0 (below minThreshold).
            return np.zeros(len(rows), dtype=np.int64)
        total_nodes = len(nodes.alive_rows())
        sums = np.zeros(nodes.size, dtype=np.int64)
        cap = MAX_CONTAINER_THRESHOLD * max(count, 1)
        if total_nodes:
            for name, entry in present:
                uniq, scaled = self._terms(images, name, entry, total_nodes, cap)
                sums[uniq] = np.minimum(sums[uniq] + scaled, cap)
        return calculate_priority(sums[rows], count)
