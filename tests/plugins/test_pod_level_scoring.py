"""Pod-level resources (``spec.resources``) in scoring, as kube-scheduler v1.37.2 does it (unchanged since v1.34.4).

NodeResourcesFit's scorer never enables pod-level resources: fit.go's
``nodeResourceStrategyTypeMap`` builds ``resourceAllocationScorer`` with only
Name, scorer and resources, so ``calculatePodResourceRequest``
(resource_allocation.go) passes ``SkipPodLevelResources: true`` and scores the
pod by its containers (with the 100m / 200Mi non-zero defaults) plus overhead.
NodeResourcesBalancedAllocation sets ``enablePodLevelResources`` (the
PodLevelResources gate, beta and on in 1.35-1.37) and ``useRequested``, so it
scores the pod-level request. Filter uses the pod-level request in both
(``computePodResourceRequest``), covered in test_node_resources_fit.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.plugins.noderesources import NodeResourcesBalancedAllocation, NodeResourcesFit
from berth.testing import make_node, make_pod, scores
from tests.support import table

MI = 1024 * 1024


def pod(
    *containers: Mapping[str, Any],
    pod_level: Mapping[str, Any] | None = None,
    overhead: Mapping[str, Any] | None = None,
) -> model.Pod:
    spec: dict[str, Any] = {}
    if pod_level is not None:
        spec["resources"] = {"requests": dict(pod_level)}
    if overhead is not None:
        spec["overhead"] = dict(overhead)
    cs = [{"name": f"c{k}", "resources": {"requests": dict(r)}} for k, r in enumerate(containers)]
    return make_pod("p", containers=cs, spec=spec)


REQUEST_CASES = [
    # (id, pod, Fit's [cpu, memory], BalancedAllocation's [cpu, memory])
    (
        "no pod-level resources: both score the containers",
        pod({"cpu": "1", "memory": "2Mi"}),
        [1000, 2 * MI],
        [1000, 2 * MI],
    ),
    (
        "pod-level and container requests: Fit the containers, BalancedAllocation the pod",
        pod({"cpu": "1", "memory": "2Mi"}, pod_level={"cpu": "3", "memory": "5Mi"}),
        [1000, 2 * MI],
        [3000, 5 * MI],
    ),
    (
        "pod-level only, a requestless container: Fit counts the non-zero defaults",
        pod({}, pod_level={"cpu": "3", "memory": "5Mi"}),
        [100, 200 * MI],
        [3000, 5 * MI],
    ),
    (
        "pod-level cpu only, container memory only",
        pod({"memory": "8Mi"}, pod_level={"cpu": "2"}),
        [100, 8 * MI],
        [2000, 8 * MI],
    ),
    (
        "overhead is added on top in both",
        pod({"cpu": "1", "memory": "2Mi"}, pod_level={"cpu": "3", "memory": "5Mi"}, overhead={"cpu": "500m"}),
        [1500, 2 * MI],
        [3500, 5 * MI],
    ),
]


@pytest.mark.parametrize(("name", "incoming", "fit", "balanced"), REQUEST_CASES, ids=[c[0] for c in REQUEST_CASES])
def test_pod_request_used_for_scoring(name: str, incoming: model.Pod, fit: list[int], balanced: list[int]) -> None:
    pi = PodInfo.of(incoming)
    assert NodeResourcesFit().scorer.pod_requests(pi) == fit
    assert NodeResourcesBalancedAllocation().scorer.pod_requests(pi) == balanced


NODES = [make_node("n", cpu="4", memory=10 * MI, pods=110)]
POD_LEVEL = pod({"cpu": "1", "memory": "2Mi"}, pod_level={"cpu": "3", "memory": "5Mi"})

SCORE_CASES = [
    # (id, plugin, score) on a 4-cpu / 10Mi node; the pod asks 1 cpu / 2Mi in
    # its container and 3 cpu / 5Mi at pod level.
    # LeastAllocated from the containers: ((4-1)*100/4 + (10-2)*100/10) / 2 = (75 + 80) / 2.
    ("NodeResourcesFit LeastAllocated scores the containers", NodeResourcesFit, 77),
    # Balanced from the pod level: fractions 0.75 and 0.5, std 0.125, (1 - 0.125) * 100 = 87
    # with the pod, 100 on the empty node without it: 50 + (50 + 87 - 100) / 2 (1.36+).
    ("NodeResourcesBalancedAllocation scores the pod level", NodeResourcesBalancedAllocation, 68),
]


@pytest.mark.parametrize(("name", "plugin", "want"), SCORE_CASES, ids=[c[0] for c in SCORE_CASES])
def test_scores_of_a_pod_with_pod_level_resources(name: str, plugin: Any, want: int) -> None:
    assert scores(plugin(), POD_LEVEL, table(NODES), normalize=False) == {"n": want}
