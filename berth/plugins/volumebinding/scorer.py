"""VolumeBinding's Score: how full the pod's volumes leave each node's storage,
per storage class (kube-scheduler v1.37.2
``pkg/scheduler/framework/plugins/volumebinding/scorer.go`` and
``volume_binding.go`` Score).

A class's utilization is ``requested * 100 / capacity`` (100 when the
capacity is 0 or too small) mapped through the configured broken-linear
``shape`` (scores 0..10 scaled to 0..100); the node's score is the mean over
the classes, rounded half away from zero (all classes weigh the same).
What counts, per node (:func:`class_resources`): the PVs the pod would bind
there (their claims' requests against the PVs' capacity) when there are any,
else the claims to provision against the CSIStorageCapacity that admitted
them in Filter.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from berth.cluster import storage
from berth.framework import interface as fw
from berth.plugins.noderesources import args as nr_args
from berth.plugins.noderesources import strategies
from berth.plugins.volumebinding.binder import PodVolumes

__all__ = ["StorageResource", "build_scorer", "class_resources"]

#: scorer.go maxUtilization.
MAX_UTILIZATION = 100


@dataclasses.dataclass(slots=True)
class StorageResource:
    """binder.go StorageResource: bytes requested and available, in one class."""

    requested: int = 0
    capacity: int = 0


def build_scorer(
    shape: Sequence[nr_args.UtilizationShapePoint],
) -> Callable[[dict[str, StorageResource]], int]:
    """buildScorerFunction over ``shape`` as configured (scores 0..10, scaled
    by MaxNodeScore / MaxCustomPriorityScore as volume_binding.go New does)."""
    scale = fw.MAX_NODE_SCORE // nr_args.MAX_CUSTOM_PRIORITY_SCORE
    points = [(p.utilization, p.score * scale) for p in shape]

    def score(classes: dict[str, StorageResource]) -> int:
        if not classes:
            return 0
        util = np.array(
            [
                MAX_UTILIZATION
                if r.capacity == 0 or r.requested > r.capacity
                else r.requested * MAX_UTILIZATION // r.capacity
                for r in classes.values()
            ],
            dtype=np.int64,
        )
        total = int(strategies.broken_linear(points, util).sum())
        # math.Round: the scores are not negative, so half rounds up.
        return math.floor(total / len(classes) + 0.5)

    return score


def class_resources(found: PodVolumes) -> dict[str, StorageResource]:
    """What Score weighs on one node, by storage class (volume_binding.go
    Score with StorageCapacityScoring on, the only way it scores)."""
    out: dict[str, StorageResource] = {}
    if found.static_bindings:
        for b in found.static_bindings:
            r = out.setdefault(b.pv.spec.storage_class_name, StorageResource())
            r.requested += storage.storage_bytes(b.pvc.spec.resources.requests) or 0
            r.capacity += storage.storage_bytes(b.pv.spec.capacity) or 0
        return out
    for p in found.dynamic_provisions:
        cap = p.node_capacity
        if cap is None:
            continue
        # Upstream reads spec.storageClassName (a claim named its class only
        # through the beta annotation would crash it; Berth takes the annotation).
        r = out.setdefault(p.pvc.spec.storage_class_name or storage.pvc_class(p.pvc), StorageResource())
        # "=", not "+=": two claims of a class on one node share its capacity.
        capacity = storage.storage_bytes({"storage": cap.capacity}) if cap.capacity is not None else None
        r.capacity = capacity or 0
        r.requested += storage.storage_bytes(p.pvc.spec.resources.requests) or 0
    return out
