"""ImageLocality, ported from kube-scheduler v1.37.2's
pkg/scheduler/framework/plugins/imagelocality/image_locality_test.go
(TestImageLocalityPriority, TestNormalizedImageName), with the image-volume
cases per release (1.35: not counted; 1.36: in the sum only; 1.37: in the sum
and the image count). Not ported: TestImageSignature (Berth has no SignPod).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence

import numpy as np
import pytest

from berth import features
from berth.cache.infos import PodInfo
from berth.cache.table import normalize_image
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework import registry
from berth.plugins.image_locality import MAX_CONTAINER_THRESHOLD, MIN_THRESHOLD, ImageLocality, calculate_priority
from berth.testing import Cluster, make_node, make_pod
from tests.support import table

MB = 1024 * 1024


def image(size_mb: int, *names: str) -> model.ContainerImage:
    return model.ContainerImage(names=list(names), size_bytes=size_mb * MB)


def pod(images: Sequence[str], init: Sequence[str] = (), volumes: Sequence[str] = ()) -> model.Pod:
    containers = [{"name": f"c{k}", "image": img} for k, img in enumerate(images)]
    spec: dict[str, object] = {"initContainers": [{"name": f"i{k}", "image": img} for k, img in enumerate(init)]}
    spec["volumes"] = [{"name": f"v{k}", "image": {"reference": ref}} for k, ref in enumerate(volumes)]
    return make_pod(containers=containers, spec=spec)


# The node statuses of TestImageLocalityPriority.
NODE_40_300_2000 = [
    image(40, "gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"),
    image(300, "gcr.io/300:latest", "gcr.io/300:v1"),
    image(2000, "gcr.io/2000:latest"),
]
NODE_250_10 = [image(250, "gcr.io/250:latest"), image(10, "gcr.io/10:latest", "gcr.io/10:v1")]
NODE_600_40_900 = [image(600, "gcr.io/600:latest"), image(40, "gcr.io/40:latest"), image(900, "gcr.io/900:latest")]
NODE_300_600_900 = [image(300, "gcr.io/300:latest"), image(600, "gcr.io/600:latest"), image(900, "gcr.io/900:latest")]
NODE_4000_30 = [image(4000, "gcr.io/4000:latest"), image(30, "gcr.io/30:latest")]
NODE_20_30_40 = [image(20, "gcr.io/20:latest"), image(30, "gcr.io/30:latest"), image(40, "gcr.io/40:latest")]

CASES = [
    # (Go case, pod, node image lists in node order, expected scores)
    (
        "two images spread on two nodes, prefer the larger image one",
        pod(["gcr.io/40", "gcr.io/250"]),
        [NODE_40_300_2000, NODE_250_10],
        [0, 5],
    ),
    (
        "two images on one node, prefer this node",
        pod(["gcr.io/40", "gcr.io/300"]),
        [NODE_40_300_2000, NODE_250_10],
        [7, 0],
    ),
    ("if exceed limit, use limit", pod(["gcr.io/10", "gcr.io/4000"]), [NODE_4000_30, NODE_250_10], [100, 0]),
    (
        "if exceed limit, use limit (with node which has no images present)",
        pod(["gcr.io/10", "gcr.io/4000"]),
        [NODE_4000_30, NODE_250_10, []],
        [66, 0, 0],
    ),
    (
        "pod with multiple large images, node2 is preferred",
        pod(["gcr.io/300", "gcr.io/600", "gcr.io/900"]),
        [NODE_600_40_900, NODE_300_600_900, []],
        [32, 36, 0],
    ),
    ("pod with multiple small images", pod(["gcr.io/30", "gcr.io/40"]), [NODE_20_30_40, NODE_4000_30], [1, 0]),
    (
        "include InitContainers: two images spread on two nodes, prefer the larger image one",
        pod(["gcr.io/30"], init=["gcr.io/300"]),
        [NODE_40_300_2000, NODE_20_30_40],
        [6, 0],
    ),
    (
        "pod with ImageVolume",
        pod(["gcr.io/30"], volumes=["gcr.io/300"]),
        [NODE_300_600_900, NODE_4000_30],
        [6, 0],
    ),
    (
        "same images as ImageVolume pod but as regular container images",
        pod(["gcr.io/30", "gcr.io/300"]),
        [NODE_300_600_900, NODE_4000_30],
        [6, 0],
    ),
    # Berth: a tagged pod image matches only that tag; a node listing a name twice counts once.
    ("a tag matches only that tag", pod(["gcr.io/40:v1", "gcr.io/250:v2"]), [NODE_40_300_2000, NODE_250_10], [0, 0]),
    (
        "a name listed twice on a node counts once",
        pod(["gcr.io/600"]),
        [[image(600, "gcr.io/600:latest"), image(600, "gcr.io/600:latest", "gcr.io/600:v1")], [], []],
        [18, 0, 0],
    ),
    ("a pod without containers scores 0", make_pod(containers=[]), [NODE_40_300_2000], [0]),
]


@pytest.mark.parametrize(("name", "incoming", "images", "want"), CASES, ids=[c[0] for c in CASES])
def test_image_locality(
    name: str, incoming: model.Pod, images: list[list[model.ContainerImage]], want: list[int]
) -> None:
    # image_locality_test.go TestImageLocalityPriority
    t = table([make_node(f"node{k + 1}", images=imgs) for k, imgs in enumerate(images)])
    rows = t.alive_rows()
    got = ImageLocality().score(fw.CycleState(), PodInfo.of(incoming), t, rows)
    assert got.tolist() == want


@pytest.mark.parametrize(
    ("version", "want"),
    [
        # v1.35.4: image volumes are not images; node1 holds none of the pod's.
        (features.KubeVersion(1, 35), [0, 0]),
        # v1.36.3: gcr.io/300 (300MB on one node of two) adds to the sum, the
        # count stays 1: 100 * (150MB - 23MB) / (1000MB - 23MB) = 12.
        (features.KubeVersion(1, 36), [12, 0]),
        # v1.37.2: and counts as an image: 100 * (150MB - 23MB) / (2000MB - 23MB) = 6.
        (features.KubeVersion(1, 37), [6, 0]),
    ],
    ids=str,
)
def test_image_volumes_per_release(version: features.KubeVersion, want: list[int]) -> None:
    # image_locality_test.go "pod with ImageVolume" (v1.37.2), per release.
    cluster = Cluster([make_node("node1", images=NODE_300_600_900), make_node("node2", images=NODE_4000_30)])
    handle = dataclasses.replace(cluster.handle(), features=features.Features.of(version))
    t = cluster.snapshot
    incoming = PodInfo.of(pod(["gcr.io/30"], volumes=["gcr.io/300"]))
    assert ImageLocality(handle=handle).score(fw.CycleState(), incoming, t, t.alive_rows()).tolist() == want


def test_spread_counts_every_node_but_scores_only_the_given_rows() -> None:
    # totalNumNodes is the snapshot's node count, not the number of rows scored.
    t = table([make_node(f"node{k}", images=[image(2000, "gcr.io/x:latest")] if k < 2 else []) for k in range(4)])
    rows = t.alive_rows()[:1]
    got = ImageLocality().score(fw.CycleState(), PodInfo.of(pod(["gcr.io/x"])), t, rows)
    # 2000MB * 2/4 = 1000MB -> 100 * (1000 - 23) / (1000 - 23)
    assert got.tolist() == [100]


def test_calculate_priority_clamps_to_thresholds() -> None:
    sums = np.asarray([0, MIN_THRESHOLD, MIN_THRESHOLD + 1, 500 * MB, MAX_CONTAINER_THRESHOLD, 10**12], dtype=np.int64)
    assert calculate_priority(sums, 1).tolist() == [0, 0, 0, 48, 100, 100]


def fake_digest(content: str) -> str:
    return "sha256:" + hashlib.sha256(content.encode()).hexdigest()


@pytest.mark.parametrize(
    ("name", "given", "want"),
    [
        ("add :latest postfix 1", "root", "root:latest"),
        ("add :latest postfix 2", "gcr.io:5000/root", "gcr.io:5000/root:latest"),
        ("keep it as is 1", "root:tag", "root:tag"),
        ("keep it as is 2", "root@" + fake_digest("root"), "root@" + fake_digest("root")),
    ],
    ids=["add :latest postfix 1", "add :latest postfix 2", "keep it as is 1", "keep it as is 2"],
)
def test_normalized_image_name(name: str, given: str, want: str) -> None:
    # image_locality_test.go TestNormalizedImageName
    assert normalize_image(given) == want


def test_an_untagged_name_on_the_node_does_not_match() -> None:
    # kube-scheduler: pod "gcr.io/x" looks up "gcr.io/x:latest"; a node reporting bare "gcr.io/x" has no such key.
    t = table([make_node("node1", images=[image(2000, "gcr.io/x")])])
    got = ImageLocality().score(fw.CycleState(), PodInfo.of(pod(["gcr.io/x"])), t, t.alive_rows())
    assert got.tolist() == [0]


def test_plugin_is_registered_in_tree() -> None:
    assert registry.plugin_class("ImageLocality") is ImageLocality
