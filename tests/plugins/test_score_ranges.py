"""Every in-tree score stays in [0, MaxNodeScore], however absurd the (well-formed) request.

The attacker's report: ``plugin NodeResourcesFit returned scores outside [0,
100]`` and ``NodeResourcesBalancedAllocation ... -N`` from pods whose
requests, added to a node's, wrapped int64. Where upstream clamps
(``mostRequestedScore``/``leastRequestedScore``: requested > capacity;
``requested_to_capacity_ratio.go`` ``scaledUtilization``: requested in [0,
capacity], exact through a 128-bit intermediate; ``balancedResourceScorer``:
fraction capped at 1) Berth clamps the same way with exact arithmetic; where
upstream relies on the API server's validation (weights 1..100, maxSkew >= 1,
image sizes >= 0) the plugin bounds the value so it cannot leave its range.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from berth import testing
from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model
from berth.framework import interface as fw
from berth.plugins.helpers import default_normalize_score
from berth.plugins.image_locality import ImageLocality
from berth.plugins.interpodaffinity import InterPodAffinity
from berth.plugins.node_affinity import NodeAffinity
from berth.plugins.noderesources import (
    NodeResourcesBalancedAllocation,
    NodeResourcesFit,
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
    strategies,
)
from berth.plugins.noderesources.balanced_allocation import balanced_resource_scorer, balanced_resource_scorer_v1_35
from berth.plugins.podtopologyspread import PodTopologySpread
from berth.plugins.taint_toleration import TaintToleration
from berth.testing import Cluster, make_node, make_pod, scores
from tests.support import cached

MAX_CPU = "9223372036854775.807"  # the largest cpu quantity: MilliValue() == 2^63-1
MAX_MEMORY = "9223372036854775"  # the largest memory quantity in whole bytes
GPU = "example.com/gpu"
IntArray = npt.NDArray[np.int64]


def _fit(kind: str) -> NodeResourcesFit:
    rtcr = None
    if kind == "RequestedToCapacityRatio":
        rtcr = RequestedToCapacityRatioParam(
            shape=[UtilizationShapePoint(utilization=0, score=10), UtilizationShapePoint(utilization=100, score=0)]
        )
    resources = [ResourceSpec(name=n, weight=w) for n, w in (("cpu", 1), ("memory", 3), (GPU, 100))]
    strategy = ScoringStrategy(type=kind, resources=resources, requested_to_capacity_ratio=rtcr)
    return NodeResourcesFit(NodeResourcesFitArgs(scoring_strategy=strategy))


RESOURCE_PLUGINS: dict[str, Callable[[], Any]] = {
    "LeastAllocated": lambda: _fit("LeastAllocated"),
    "MostAllocated": lambda: _fit("MostAllocated"),
    "RequestedToCapacityRatio": lambda: _fit("RequestedToCapacityRatio"),
    "BalancedAllocation": lambda: NodeResourcesBalancedAllocation(),
}

NODES = [
    make_node("zero", cpu=0, memory=0),
    make_node("small", cpu="1", memory="1Gi", allocatable={GPU: 1}),
    make_node("huge", cpu=MAX_CPU, memory=MAX_MEMORY, allocatable={GPU: MAX_MEMORY}),
    make_node("full", cpu=MAX_CPU, memory=MAX_MEMORY, allocatable={GPU: MAX_MEMORY}),
    make_node("tiny", cpu="1m", memory=1),
]
# "full" already carries pods requesting all of it (each quantity fits; node sums stay in int64).
EXISTING = [
    make_pod("hog", requests={"cpu": MAX_CPU, "memory": MAX_MEMORY, GPU: MAX_MEMORY}, node_name="full"),
]

ABSURD_PODS = {
    "nothing": make_pod("a"),
    "more than any node": make_pod("b", requests={"cpu": "64", "memory": "1Ti", GPU: 5}),
    "the int64 maximum": make_pod("c", requests={"cpu": MAX_CPU, "memory": MAX_MEMORY, GPU: MAX_MEMORY}),
    "one nano": make_pod("d", requests={"cpu": "1n", "memory": "1n"}),
    "the maximum in every container": make_pod(
        "e",
        containers=[{"name": f"c{i}", "resources": {"requests": {"cpu": "4611686018427387.903"}}} for i in range(2)],
    ),
    "explicit zeros": make_pod("f", requests={"cpu": 0, "memory": 0, GPU: 0}),
}


@pytest.mark.parametrize("plugin", RESOURCE_PLUGINS)
@pytest.mark.parametrize("pod", ABSURD_PODS)
def test_resource_scores_stay_in_range_for_absurd_requests(plugin: str, pod: str) -> None:
    got = scores(RESOURCE_PLUGINS[plugin](), ABSURD_PODS[pod], Cluster(NODES, EXISTING).snapshot)
    assert set(got) == {n.metadata.name for n in NODES}
    assert all(fw.MIN_NODE_SCORE <= s <= fw.MAX_NODE_SCORE for s in got.values()), got


@pytest.mark.parametrize(
    ("plugin", "want"),
    [
        # requested (max + max) > capacity on every resource of "full":
        # leastRequestedScore 0, mostRequestedScore capped at 100,
        # RequestedToCapacityRatio at maxUtilization (shape score 0 -> not counted -> 0),
        # BalancedAllocation: every fraction capped at 1 -> std 0 -> 100, as
        # before the pod: no change in balance, 50 + (50 + 100 - 100) / 2 (1.36+).
        ("LeastAllocated", 0),
        ("MostAllocated", 100),
        ("RequestedToCapacityRatio", 0),
        ("BalancedAllocation", 75),
    ],
)
def test_requests_beyond_int64_on_a_node_clamp_as_upstream(plugin: str, want: int) -> None:
    got = scores(RESOURCE_PLUGINS[plugin](), ABSURD_PODS["the int64 maximum"], Cluster(NODES, EXISTING).snapshot)
    assert got["full"] == want


@pytest.mark.parametrize(
    ("plugin", "want"),
    [
        # "huge" is empty; the pod asks for all of it: utilization exactly 100 %.
        # BalancedAllocation: balanced before (all 0) and after (all 1): 75 (1.36+).
        ("LeastAllocated", 0),
        ("MostAllocated", 100),
        ("RequestedToCapacityRatio", 0),
        ("BalancedAllocation", 75),
    ],
)
def test_the_int64_maximum_on_an_empty_node_scores_full_utilization(plugin: str, want: int) -> None:
    got = scores(RESOURCE_PLUGINS[plugin](), ABSURD_PODS["the int64 maximum"], Cluster(NODES, EXISTING).snapshot)
    assert got["huge"] == want


def test_half_of_a_huge_node_is_scored_exactly() -> None:
    # cpu: 2^62 of 2^63-1 milli; memory: the non-zero default 200Mi of
    # ~9.2e15 bytes; gpu not requested (left out). leastRequestedScore in
    # exact integers, as Go computes it where it does not overflow.
    pod = make_pod("h", requests={"cpu": "4611686018427387.904"})
    got = scores(RESOURCE_PLUGINS["LeastAllocated"](), pod, Cluster([NODES[2]]).snapshot)
    cpu_cap, mem_cap = 2**63 - 1, int(MAX_MEMORY)
    cpu = (cpu_cap - 2**62) * 100 // cpu_cap
    memory = (mem_cap - 200 * 2**20) * 100 // mem_cap
    assert (cpu, memory) == (49, 99)
    assert got == {"huge": (cpu * 1 + memory * 3) // 4}


int64s = st.integers(min_value=0, max_value=2**40)


@given(
    req=st.lists(st.tuples(int64s, int64s, int64s), min_size=1, max_size=4),
    alloc=st.lists(st.tuples(int64s, int64s, int64s), min_size=1, max_size=4),
)
def test_exact_arithmetic_agrees_with_int64_where_int64_suffices(
    req: Sequence[tuple[int, int, int]], alloc: Sequence[tuple[int, int, int]]
) -> None:
    n = min(len(req), len(alloc))
    r = np.asarray(req[:n], dtype=np.int64)
    a = np.asarray(alloc[:n], dtype=np.int64)
    w = np.asarray([1, 3, 100], dtype=np.int64)
    shaped = strategies._requested_to_capacity_ratio(
        [
            UtilizationShapePoint(utilization=0, score=0),
            UtilizationShapePoint(utilization=50, score=7),
            UtilizationShapePoint(utilization=100, score=10),
        ]
    )
    # A node's allocated amount: up to what the pod's request is added to.
    d = r // 2
    for scorer in (
        strategies._least_allocated,
        strategies._most_allocated,
        shaped,
        balanced_resource_scorer,
        balanced_resource_scorer_v1_35,
    ):
        fast = np.asarray(scorer(r, d, a, w), dtype=np.int64)
        exact = np.asarray(scorer(r.astype(object), d.astype(object), a.astype(object), w), dtype=np.int64)
        assert fast.tolist() == exact.tolist()
        assert ((fast >= 0) & (fast <= 100)).all()


# -------------------------------------------------------------- weights, skews, sizes


def _preferred_node_affinity(weights: Sequence[int]) -> dict[str, Any]:
    terms = [
        {"weight": w, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": [z]}]}}
        for w, z in zip(weights, ("a", "b", "a"), strict=False)
    ]
    return {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}}


ZONED = [make_node(f"n{i}", cpu="4", memory="4Gi", labels={"zone": "ab"[i % 2], "host": f"n{i}"}) for i in range(4)]


@pytest.mark.parametrize(
    "weights",
    [[10**30, 1], [-(10**30), 5], [-5, -7], [2**31 - 1, 2**31 - 1, 2**31 - 1], [0, -1], [2**63 - 1, -(2**63)]],
)
def test_node_affinity_scores_stay_in_range_for_any_weight(weights: list[int]) -> None:
    pod = make_pod("p", spec=_preferred_node_affinity(weights))
    got = scores(NodeAffinity(), pod, Cluster(ZONED).snapshot)
    assert all(0 <= s <= 100 for s in got.values()), got


def _inter_pod(weight: int, anti_weight: int) -> dict[str, Any]:
    term = {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "x"}}}
    return {
        "affinity": {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": weight, "podAffinityTerm": term}]
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": anti_weight, "podAffinityTerm": {**term, "topologyKey": "host"}}
                ]
            },
        }
    }


@pytest.mark.parametrize(("weight", "anti_weight"), [(10**30, 10**30), (-(10**30), 1), (2**63 - 1, -(2**63)), (1, 100)])
def test_inter_pod_affinity_scores_stay_in_range_for_any_weight(weight: int, anti_weight: int) -> None:
    # Existing pods carry the same absurd terms, so both directions are summed.
    existing = [
        make_pod(f"x{i}", labels={"app": "x"}, node_name=f"n{i}", spec=_inter_pod(weight, anti_weight))
        for i in range(3)
    ]
    snap, handle = cached(ZONED, existing)
    pod = make_pod("p", labels={"app": "x"}, spec=_inter_pod(weight, anti_weight))
    got = scores(InterPodAffinity(None, handle), pod, snap)
    assert all(0 <= s <= 100 for s in got.values()), got


@pytest.mark.parametrize("max_skew", [0, -5, 1, 2**31 - 1, 2**62, 10**30])
def test_pod_topology_spread_scores_stay_in_range_for_any_max_skew(max_skew: int) -> None:
    existing = [make_pod(f"x{i}", labels={"app": "x"}, node_name=f"n{i % 3}") for i in range(5)]
    snap, handle = cached(ZONED, existing)
    spread = {
        "maxSkew": max_skew,
        "topologyKey": "zone",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "x"}},
    }
    host = {**spread, "topologyKey": "host"}
    pod = make_pod("p", labels={"app": "x"}, spec={"topologySpreadConstraints": [spread, host]})
    got = scores(PodTopologySpread(None, handle), pod, snap)
    assert all(0 <= s <= 100 for s in got.values()), got


@pytest.mark.parametrize("size", [2**63 - 1, -(2**63), 10**18, 0])
def test_image_locality_scores_stay_in_range_for_any_image_size(size: int) -> None:
    images = [model.ContainerImage(names=[f"img{i}:latest"], size_bytes=size) for i in range(8)]
    nodes = [make_node(f"n{i}", cpu="1", images=images if i else images[:1]) for i in range(3)]
    pod = make_pod("p", containers=[{"name": f"c{i}", "image": f"img{i}"} for i in range(8)])
    got = scores(ImageLocality(), pod, Cluster(nodes).snapshot)
    assert all(0 <= s <= 100 for s in got.values()), got
    if size == 2**63 - 1:
        assert got["n1"] == 100  # capped at maxContainerThreshold x containers


def test_taint_toleration_scores_stay_in_range_with_many_taints() -> None:
    taints = [model.Taint(key=f"k{i}", value="v", effect="PreferNoSchedule") for i in range(500)]
    nodes = [make_node("clean", cpu="1"), make_node("tainted", cpu="1", taints=taints)]
    got = scores(TaintToleration(), make_pod("p"), Cluster(nodes).snapshot)
    assert got == {"clean": 100, "tainted": 0}


@pytest.mark.parametrize(
    ("raw", "reverse", "want"),
    [
        ([0, 5, 10], False, [0, 50, 100]),
        ([0, 5, 10], True, [100, 50, 0]),
        ([-5, -1], False, [0, 0]),  # Go would hand these back unchanged
        ([-5, 10], False, [0, 100]),
        ([2**62, 2**61, 0], False, [100, 50, 0]),  # 100 * 2^62 does not fit int64
        ([2**63 - 1, 1], True, [0, 100]),
    ],
)
def test_default_normalize_score_stays_in_range(raw: list[int], reverse: bool, want: list[int]) -> None:
    got = default_normalize_score(np.asarray(raw, dtype=np.int64), 100, reverse=reverse)
    assert got.tolist() == want


def test_the_default_profile_scores_absurd_pods_without_a_plugin_error() -> None:
    # The framework's range check (runtime.run_score) is reached only by a plugin bug.
    cluster = Cluster(NODES + ZONED, EXISTING)
    for pod in ABSURD_PODS.values():
        explanation = cluster.explain(pod)
        assert explanation is not None


class _Broken:
    """A plugin with a bug: a score of 101."""

    NAME = "BrokenScoreForTest"
    Args = None

    def __init__(self, args: None = None, handle: object = None) -> None:
        pass

    def score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> IntArray:
        return np.full(len(rows), 101, dtype=np.int64)


def test_a_plugin_scoring_out_of_range_is_a_bug_not_a_client_error() -> None:
    testing.register(_Broken)
    cfg = testing.parse_config({"profiles": [{"plugins": {"score": {"enabled": [{"name": _Broken.NAME}]}}}]})
    cluster = Cluster(ZONED, config=cfg)
    fwk = cluster.berth.core.framework_for("")
    snap = cluster.snapshot
    with pytest.raises(
        RuntimeError,
        match=r'plugin "BrokenScoreForTest" returns an invalid score 101, it should in the range of \[0, 100\] '
        r"after normalizing \(scores 101\.\.101\)",
    ) as e:
        fwk.run_score(fw.CycleState(), PodInfo.of(make_pod()), snap, snap.alive_rows())
    assert not isinstance(e.value, ValueError)
