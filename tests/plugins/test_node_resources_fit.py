"""NodeResourcesFit, ported from kube-scheduler v1.34's own tables (unchanged in
v1.37.2 for what Berth follows), and v1.37.2's per-release args validation.

Sources (pkg/scheduler/framework/plugins/noderesources/): fit_test.go
(TestEnoughRequests, TestNotEnoughRequests, TestStorageRequests,
TestRestartableInitContainers, TestPreFilterDisabled, TestFitScore,
TestEventsToRegister), least_allocated_test.go, most_allocated_test.go,
requested_to_capacity_ratio_test.go (incl. TestBrokenLinearFunction,
TestResourceBinPacking*), resource_allocation_test.go
(TestResourceAllocationScorerCalculateRequests). Each row names its Go case.

Go quantities are kept as written: ``Capacity({"cpu": "4000"})`` is 4000
cores, ``framework.Resource{MilliCPU: 10}`` is "10m". ``st.MakePod().Obj()``
has no containers (so no 100m / 200Mi non-zero defaults), which is why the
helpers here build pods with exactly the containers Go's do.

Not ported: DRA-backed extended resources (DRAExtendedResource is alpha and
off in v1.34; Berth has no DRA), the SidecarContainers-disabled PreFilter
cases (the gate is locked on since v1.33), queueing-hint tests
(isSchedulableAfter*, haveAnyRequestedResourcesIncreased: Berth has no
queueing hints) and SignPod (not in v1.34).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import numpy as np
import pytest

from berth import features
from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework import registry
from berth.plugins.noderesources import (
    NodeResourcesFit,
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
)
from berth.plugins.noderesources.args import LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO
from berth.plugins.noderesources.fit import STATE_KEY
from berth.plugins.noderesources.strategies import broken_linear, non_missing_requests
from berth.testing import Cluster, filter_statuses, make_node, make_pod
from tests.support import table

EXT_A = "example.com/aaa"
EXT_B = "example.com/bbb"
K8S_IO_A = "kubernetes.io/something"
K8S_IO_B = "subdomain.kubernetes.io/something"
HUGE_A = "hugepages-2Mi"
DRA_EXT = "extended.resource.dra.io/something"
EXT_RES = "abc.com/xyz"  # least/most_allocated_test.go extendedRes

U = fw.Code.UNSCHEDULABLE
UU = fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE


# ---------------------------------------------------------------- builders


def containers(reqs: Sequence[Mapping[str, Any]], prefix: str = "c") -> list[dict[str, Any]]:
    return [{"name": f"{prefix}{k}", "resources": {"requests": dict(r)}} for k, r in enumerate(reqs)]


def pod(
    *reqs: Mapping[str, Any],
    init: Sequence[Mapping[str, Any]] = (),
    sidecars: Sequence[Mapping[str, Any]] = (),
    overhead: Mapping[str, Any] | None = None,
    pod_level: Mapping[str, Any] | None = None,
    name: str = "p",
    node: str = "",
) -> model.Pod:
    """A pod with one container per request map (Go newResourcePod / st.MakePod().Req()...)."""
    spec: dict[str, Any] = {}
    inits = containers(init, "init")
    inits += [{**c, "restartPolicy": "Always"} for c in containers(sidecars, "sidecar")]
    if inits:
        spec["initContainers"] = inits
    if overhead:
        spec["overhead"] = dict(overhead)
    if pod_level:
        spec["resources"] = {"requests": dict(pod_level)}
    return make_pod(name, containers=containers(reqs), node_name=node, spec=spec)


Verdict = tuple[fw.Code, tuple[str, ...]] | None


def statuses_of(
    plugin: NodeResourcesFit, incoming: model.Pod, nodes: list[model.Node], existing: list[model.Pod]
) -> dict[str, Verdict]:
    got = filter_statuses(plugin, incoming, table(nodes, existing))
    return {n: None if st.ok else (st.code, st.reasons) for n, st in got.items()}


def run_scores(
    plugin: Any,
    incoming: model.Pod,
    nodes: list[model.Node],
    existing: Sequence[model.Pod] = (),
    *,
    pre_score: bool = True,
) -> list[int]:
    t = table(nodes, existing)
    state, pi, rows = fw.CycleState(), PodInfo.of(incoming), t.alive_rows()
    if pre_score:
        assert plugin.pre_score(state, pi, t, rows).ok
    return [int(s) for s in plugin.score(state, pi, t, rows)]


def fit(
    strategy: str = LEAST_ALLOCATED,
    resources: Sequence[ResourceSpec] = (),
    shape: Sequence[tuple[int, int]] | None = None,
) -> NodeResourcesFit:
    rtcr = None
    if shape is not None:
        rtcr = RequestedToCapacityRatioParam(shape=[UtilizationShapePoint(utilization=u, score=s) for u, s in shape])
    return NodeResourcesFit(
        NodeResourcesFitArgs(
            scoring_strategy=ScoringStrategy(type=strategy, resources=list(resources), requested_to_capacity_ratio=rtcr)
        )
    )


def specs(*pairs: tuple[str, int]) -> list[ResourceSpec]:
    return [ResourceSpec(name=n, weight=w) for n, w in pairs]


DEFAULT_RESOURCES = specs(("cpu", 1), ("memory", 1))
EXTENDED_RESOURCE_SET = specs(("cpu", 1), ("memory", 1), (EXT_RES, 1))


# ---------------------------------------------------------------- Filter: TestEnoughRequests

# makeAllocatableResources(10, 20, 32, 5, 20, 5)
ENOUGH_ALLOC = {"cpu": "10m", "memory": 20, "pods": 32, EXT_A: 5, "ephemeral-storage": 20, HUGE_A: 5}


def r(cpu: int = 0, mem: int = 0, **scalars: int) -> dict[str, Any]:
    """framework.Resource{MilliCPU, Memory, ScalarResources} as a request map."""
    out: dict[str, Any] = {}
    if cpu:
        out["cpu"] = f"{cpu}m"
    if mem:
        out["memory"] = mem
    out.update(scalars)
    return out


def s(**scalars: int) -> dict[str, Any]:
    return dict(scalars)


ENOUGH_CASES = [
    # (id, incoming pod, existing pod's requests, args, expected)
    ("no resources requested always fits", pod(), r(10, 20), None, None),
    ("too many resources fails", pod(r(1, 1)), r(10, 20), None, (U, ("Insufficient cpu", "Insufficient memory"))),
    (
        "too many resources fails due to init container cpu",
        pod(r(1, 1), init=[r(3, 1)]),
        r(8, 19),
        None,
        (U, ("Insufficient cpu",)),
    ),
    (
        "too many resources fails due to highest init container cpu",
        pod(r(1, 1), init=[r(3, 1), r(2, 1)]),
        r(8, 19),
        None,
        (U, ("Insufficient cpu",)),
    ),
    (
        "too many resources fails due to init container memory",
        pod(r(1, 1), init=[r(1, 3)]),
        r(9, 19),
        None,
        (U, ("Insufficient memory",)),
    ),
    (
        "too many resources fails due to highest init container memory",
        pod(r(1, 1), init=[r(1, 3), r(1, 2)]),
        r(9, 19),
        None,
        (U, ("Insufficient memory",)),
    ),
    (
        "init container fits because it's the max, not sum, of containers and init containers",
        pod(r(1, 1), init=[r(1, 1)]),
        r(9, 19),
        None,
        None,
    ),
    (
        "multiple init containers fit because it's the max, not sum, of containers and init containers",
        pod(r(1, 1), init=[r(1, 1), r(1, 1)]),
        r(9, 19),
        None,
        None,
    ),
    ("both resources fit", pod(r(1, 1)), r(5, 5), None, None),
    ("one resource memory fits", pod(r(2, 1)), r(9, 5), None, (U, ("Insufficient cpu",))),
    ("one resource cpu fits", pod(r(1, 2)), r(5, 19), None, (U, ("Insufficient memory",))),
    ("equal edge case", pod(r(5, 1)), r(5, 19), None, None),
    ("equal edge case for init container", pod(r(4, 1), init=[r(5, 1)]), r(5, 19), None, None),
    ("extended resource fits", pod(s(**{EXT_A: 1})), r(), None, None),
    ("extended resource fits for init container", pod(r(), init=[s(**{EXT_A: 1})]), r(), None, None),
    (
        "extended resource capacity enforced",
        pod(r(1, 1, **{EXT_A: 10})),
        r(**{EXT_A: 0}),
        None,
        (UU, (f"Insufficient {EXT_A}",)),
    ),
    (
        "extended resource capacity enforced for init container",
        pod(r(), init=[r(1, 1, **{EXT_A: 10})]),
        r(**{EXT_A: 0}),
        None,
        (UU, (f"Insufficient {EXT_A}",)),
    ),
    (
        "extended resource allocatable enforced",
        pod(r(1, 1, **{EXT_A: 1})),
        r(**{EXT_A: 5}),
        None,
        (U, (f"Insufficient {EXT_A}",)),
    ),
    (
        "extended resource allocatable enforced for init container",
        pod(r(), init=[r(1, 1, **{EXT_A: 1})]),
        r(**{EXT_A: 5}),
        None,
        (U, (f"Insufficient {EXT_A}",)),
    ),
    (
        "extended resource allocatable enforced for multiple containers",
        pod(r(1, 1, **{EXT_A: 3}), r(1, 1, **{EXT_A: 3})),
        r(**{EXT_A: 2}),
        None,
        (UU, (f"Insufficient {EXT_A}",)),
    ),
    (
        "extended resource allocatable admits multiple init containers",
        pod(r(), init=[r(1, 1, **{EXT_A: 3}), r(1, 1, **{EXT_A: 3})]),
        r(**{EXT_A: 2}),
        None,
        None,
    ),
    (
        "extended resource allocatable enforced for multiple init containers",
        pod(r(), init=[r(1, 1, **{EXT_A: 6}), r(1, 1, **{EXT_A: 3})]),
        r(**{EXT_A: 2}),
        None,
        (UU, (f"Insufficient {EXT_A}",)),
    ),
    (
        "extended resource allocatable enforced for unknown resource",
        pod(r(1, 1, **{EXT_B: 1})),
        r(),
        None,
        (UU, (f"Insufficient {EXT_B}",)),
    ),
    (
        "extended resource allocatable enforced for unknown resource for init container",
        pod(r(), init=[r(1, 1, **{EXT_B: 1})]),
        r(),
        None,
        (UU, (f"Insufficient {EXT_B}",)),
    ),
    (
        "kubernetes.io resource capacity enforced",
        pod(r(1, 1, **{K8S_IO_A: 10})),
        r(),
        None,
        (UU, (f"Insufficient {K8S_IO_A}",)),
    ),
    (
        "kubernetes.io resource capacity enforced for init container",
        pod(r(), init=[r(1, 1, **{K8S_IO_B: 10})]),
        r(),
        None,
        (UU, (f"Insufficient {K8S_IO_B}",)),
    ),
    (
        "hugepages resource capacity enforced",
        pod(r(1, 1, **{HUGE_A: 10})),
        r(**{HUGE_A: 0}),
        None,
        (UU, (f"Insufficient {HUGE_A}",)),
    ),
    (
        "hugepages resource capacity enforced for init container",
        pod(r(), init=[r(1, 1, **{HUGE_A: 10})]),
        r(**{HUGE_A: 0}),
        None,
        (UU, (f"Insufficient {HUGE_A}",)),
    ),
    (
        "hugepages resource allocatable enforced for multiple containers",
        pod(r(1, 1, **{HUGE_A: 3}), r(1, 1, **{HUGE_A: 3})),
        r(**{HUGE_A: 2}),
        None,
        (UU, (f"Insufficient {HUGE_A}",)),
    ),
    (
        "skip checking ignored extended resource",
        pod(r(1, 1, **{EXT_B: 1})),
        r(),
        NodeResourcesFitArgs(ignored_resources=[EXT_B]),
        None,
    ),
    (
        "resources + pod overhead fits",
        pod(r(1, 1), overhead={"cpu": "3m", "memory": "13"}),
        r(5, 5),
        None,
        None,
    ),
    (
        "requests + overhead does not fit for memory",
        pod(r(1, 1), overhead={"cpu": "1m", "memory": "15"}),
        r(5, 5),
        None,
        (U, ("Insufficient memory",)),
    ),
    (
        "skip checking ignored extended resource via resource groups",
        pod(r(1, 1, **{EXT_B: 1, K8S_IO_A: 1})),
        r(),
        NodeResourcesFitArgs(ignored_resource_groups=["example.com"]),
        (UU, (f"Insufficient {K8S_IO_A}",)),
    ),
    (
        "skip checking extended resource request with quantity zero via resource groups",
        pod(r(1, 1, **{EXT_A: 0})),
        r(**{EXT_A: 6}),
        None,
        None,
    ),
    ("skip checking resource request with quantity zero", pod(s(**{EXT_A: 1})), r(20, 30, **{EXT_A: 1}), None, None),
    (
        "both pod-level and container-level resources fit",
        pod(r(1, 1), pod_level={"cpu": "1m", "memory": "2"}),
        r(5, 5),
        None,
        None,
    ),
    (
        "pod-level cpu resource not fit",
        pod(r(1, 1), pod_level={"cpu": "7m", "memory": "2"}),
        r(5, 5),
        None,
        (U, ("Insufficient cpu",)),
    ),
    (
        "pod-level memory resource not fit",
        pod(r(1, 1), pod_level={"cpu": "3m", "memory": "2"}),
        r(5, 19),
        None,
        (U, ("Insufficient memory",)),
    ),
    (
        "pod-level hugepages resource fit",
        pod(pod_level={"cpu": "3m", "memory": "2", HUGE_A: 5}),
        None,
        None,
        None,
    ),
    (
        "both pod-level and container-level hugepages resource fit",
        pod(r(1, 1, **{HUGE_A: 3}), pod_level={"cpu": "3m", "memory": "2", HUGE_A: 5}),
        None,
        None,
        None,
    ),
    pytest.param(
        "pod-level hugepages resource not fit",
        pod(pod_level={"cpu": "3m", "memory": "2", HUGE_A: 10}),
        None,
        None,
        (UU, (f"Insufficient {HUGE_A}",)),
        id="pod-level hugepages resource not fit",
    ),
    (
        "one pod-level cpu resource fits and all init and non-init containers resources fit",
        pod(r(1, 1), init=[r(1, 1)], pod_level={"cpu": "3m", "memory": "2"}),
        r(5, 19),
        None,
        (U, ("Insufficient memory",)),
    ),
    (
        "extended resource backed by DRA not enabled",
        pod(r(1, 1, **{DRA_EXT: 1})),
        r(),
        None,
        (UU, (f"Insufficient {DRA_EXT}",)),
    ),
    (
        "extended resource NOT backed by DRA",
        pod(r(1, 1, **{EXT_B: 1})),
        r(),
        None,
        (UU, (f"Insufficient {EXT_B}",)),
    ),
]


def _ids(cases: list[Any]) -> list[str]:
    return [c.id if hasattr(c, "id") else c[0] for c in cases]


@pytest.mark.parametrize(("name", "incoming", "existing", "args", "want"), ENOUGH_CASES, ids=_ids(ENOUGH_CASES))
def test_enough_requests(
    name: str,
    incoming: model.Pod,
    existing: dict[str, Any] | None,
    args: NodeResourcesFitArgs | None,
    want: Verdict,
) -> None:
    # fit_test.go TestEnoughRequests
    node = make_node("node", allocatable=ENOUGH_ALLOC)
    placed = [] if existing is None else [pod(existing, name="existing", node="node")]
    assert statuses_of(NodeResourcesFit(args), incoming, [node], placed) == {"node": want}


NOT_ENOUGH_CASES = [
    ("even without specified resources, predicate fails when there's no space for additional pod", pod(), r(10, 20)),
    ("even if both resources fit, predicate fails when there's no space for additional pod", pod(r(1, 1)), r(5, 5)),
    ("even for equal edge case, predicate fails when there's no space for additional pod", pod(r(5, 1)), r(5, 19)),
    (
        "even for equal edge case, predicate fails when there's no space for additional pod due to init container",
        pod(r(5, 1), init=[r(5, 1)]),
        r(5, 19),
    ),
]


@pytest.mark.parametrize(("name", "incoming", "existing"), NOT_ENOUGH_CASES, ids=_ids(NOT_ENOUGH_CASES))
def test_not_enough_requests_too_many_pods(name: str, incoming: model.Pod, existing: dict[str, Any]) -> None:
    # fit_test.go TestNotEnoughRequests: makeAllocatableResources(10, 20, 1, 0, 0, 0)
    node = make_node("node", allocatable={"cpu": "10m", "memory": 20, "pods": 1, EXT_A: 0, HUGE_A: 0})
    placed = [pod(existing, name="existing", node="node")]
    assert statuses_of(NodeResourcesFit(None), incoming, [node], placed) == {"node": (U, ("Too many pods",))}


STORAGE_CASES = [
    ("empty storage requested, and pod fits", pod(r(1, 1)), r(2, 10), None),
    (
        "storage ephemeral local storage request exceeds allocatable",
        pod({"ephemeral-storage": 25}),
        r(2, 2),
        (UU, ("Insufficient ephemeral-storage",)),
    ),
    (
        "ephemeral local storage is sufficient",
        pod({"ephemeral-storage": 5}),
        {**r(2, 2), "ephemeral-storage": 10},
        None,
    ),
    ("pod fits", pod({"ephemeral-storage": 10}), r(2, 2), None),
]


@pytest.mark.parametrize(("name", "incoming", "existing", "want"), STORAGE_CASES, ids=_ids(STORAGE_CASES))
def test_storage_requests(name: str, incoming: model.Pod, existing: dict[str, Any], want: Verdict) -> None:
    # fit_test.go TestStorageRequests
    node = make_node("node", allocatable=ENOUGH_ALLOC)
    placed = [pod(existing, name="existing", node="node")]
    assert statuses_of(NodeResourcesFit(None), incoming, [node], placed) == {"node": want}


SIDECAR_CASES = [
    ("allow pod without restartable init containers if sidecar containers is enabled", pod({}), None),
    ("allow pod with restartable init containers if sidecar containers is enabled", pod({}, sidecars=[{}]), None),
    (
        "allow pod if the total requested resources do not exceed the node's allocatable resources",
        pod({"cpu": "1m"}, sidecars=[{"cpu": "1m"}]),
        None,
    ),
    (
        "not allow pod if the total requested resources do exceed the node's allocatable resources",
        pod({"cpu": "1m"}, sidecars=[{"cpu": "2m"}]),
        (UU, ("Insufficient cpu",)),
    ),
]


@pytest.mark.parametrize(("name", "incoming", "want"), SIDECAR_CASES, ids=_ids(SIDECAR_CASES))
def test_restartable_init_containers(name: str, incoming: model.Pod, want: Verdict) -> None:
    # fit_test.go TestRestartableInitContainers (SidecarContainers enabled; makeAllocatableResources(2, 0, 1, 0, 0, 0))
    node = make_node("node", allocatable={"cpu": "2m", "memory": 0, "pods": 1, EXT_A: 0, HUGE_A: 0})
    assert statuses_of(NodeResourcesFit(None), incoming, [node], []) == {"node": want}


def test_filter_without_prefilter_is_an_error() -> None:
    # fit_test.go TestPreFilterDisabled: Filter with no PreFilter state -> Error
    t = table([make_node("node")])
    verdicts = NodeResourcesFit(None).filter(fw.CycleState(), PodInfo.of(make_pod()), t, t.alive_rows())
    st = verdicts.status_at(0)
    assert st.code == fw.Code.ERROR and STATE_KEY.name in st.message()


def _failing_differently() -> tuple[list[model.Node], list[model.Pod], model.Pod]:
    """Five nodes an incoming pod fails in different ways (or fits), the pods on them, the pod."""
    nodes = [
        make_node("roomy", cpu="4", memory="4Gi", pods=10, allocatable={EXT_A: 4}),
        make_node("tight-cpu", cpu="1", memory="4Gi", pods=10, allocatable={EXT_A: 4}),
        make_node("full", cpu="1", memory="1Gi", pods=1),
        make_node("tight-cpu-2", cpu="1500m", memory="4Gi", pods=10, allocatable={EXT_A: 4}),
        make_node("busy", cpu="4", memory="4Gi", pods=10, allocatable={EXT_A: 4}),
    ]
    placed = [
        pod({"cpu": "500m"}, name="a", node="full"),
        pod({"cpu": "1", EXT_A: 3}, name="b", node="busy"),
    ]
    return nodes, placed, pod({"cpu": "2", "memory": "2Gi", EXT_A: 2})


def test_nodes_failing_differently_get_their_own_reasons_in_one_call() -> None:
    # Berth: one vectorised Filter call groups rows by failure set (fitsRequest per node in Go).
    nodes, placed, incoming = _failing_differently()
    assert statuses_of(NodeResourcesFit(None), incoming, nodes, placed) == {
        "roomy": None,
        "tight-cpu": (UU, ("Insufficient cpu",)),
        "full": (UU, ("Too many pods", "Insufficient cpu", "Insufficient memory", f"Insufficient {EXT_A}")),
        "tight-cpu-2": (UU, ("Insufficient cpu",)),
        "busy": (U, (f"Insufficient {EXT_A}",)),
    }


@pytest.mark.parametrize("order", [[0, 1, 2, 3, 4], [4, 2, 0], [3, 3, 1], [1], [2, 4, 1, 3, 0]])
def test_rows_in_any_order_or_subset_get_the_reasons_they_get_one_by_one(order: list[int]) -> None:
    # Only the full rows' reasons are worked out: a subset, in any order and
    # with repeats, answers row for row as each row asked alone.
    nodes, placed, incoming = _failing_differently()
    t = table(nodes, placed)
    plugin, state, pi = NodeResourcesFit(None), fw.CycleState(), PodInfo.of(incoming)
    assert plugin.pre_filter(state, pi, t).status.ok
    alive = t.alive_rows()

    def verdict(v: fw.NodeVerdicts, k: int) -> Verdict:
        st = v.status_at(k)
        return None if st.ok else (st.code, st.reasons)

    alone = [verdict(plugin.filter(state, pi, t, alive[[i]]), 0) for i in range(len(nodes))]
    together = plugin.filter(state, pi, t, alive[order])
    assert [verdict(together, k) for k in range(len(order))] == [alone[i] for i in order]


def test_prefilter_writes_the_request_vector_in_column_order() -> None:
    t = table([make_node("n", cpu="1", allocatable={EXT_A: 1})])
    state = fw.CycleState()
    pi = PodInfo.of(pod({"cpu": "250m", EXT_A: 1, "memory": "1Ki"}))
    NodeResourcesFit(None).pre_filter(state, pi, t)
    st = state.read(STATE_KEY)
    idx = t.columns.index
    assert st.request[idx["cpu"]] == 250 and st.request[idx[EXT_A]] == 1 and st.request[idx["memory"]] == 1024
    assert st.names == ("cpu", "memory", EXT_A)


# ---------------------------------------------------------------- Score: TestFitScore

FIT_SCORE_NODES = [
    make_node("node1", cpu="4000", memory="10000"),
    make_node("node2", cpu="6000", memory="10000"),
]
FIT_SCORE_EXISTING = [
    pod({"cpu": "2000", "memory": "4000"}, name="e1", node="node1"),
    pod({"cpu": "1000", "memory": "2000"}, name="e2", node="node2"),
]
SIDECAR_NODES = [make_node("node1", cpu="4000", memory="10000"), make_node("node2", cpu="4000", memory="10000")]
SIDECAR_EXISTING = [
    pod({"cpu": "1000", "memory": "2000"}, sidecars=[{"cpu": "1000", "memory": "2000"}], name="e1", node="node1"),
    pod({"cpu": "1000", "memory": "2000"}, name="e2", node="node2"),
]
SHAPE_DOWN = [(0, 10), (100, 0)]
SHAPE_UP = [(0, 0), (100, 10)]

FIT_SCORE_CASES = [
    # (Go case, strategy, shape, incoming, nodes, existing, runPreScore, want)
    (
        "test case for ScoringStrategy RequestedToCapacityRatio case1",
        REQUESTED_TO_CAPACITY_RATIO,
        SHAPE_DOWN,
        pod({"cpu": "3000", "memory": "5000"}),
        FIT_SCORE_NODES,
        FIT_SCORE_EXISTING,
        True,
        [10, 32],
    ),
    (
        "test case for ScoringStrategy RequestedToCapacityRatio case2",
        REQUESTED_TO_CAPACITY_RATIO,
        SHAPE_UP,
        pod({"cpu": "3000", "memory": "5000"}),
        FIT_SCORE_NODES,
        FIT_SCORE_EXISTING,
        True,
        [95, 68],
    ),
    (
        "test case for ScoringStrategy MostAllocated",
        MOST_ALLOCATED,
        None,
        pod({"cpu": "1000", "memory": "2000"}),
        FIT_SCORE_NODES,
        FIT_SCORE_EXISTING,
        True,
        [67, 36],
    ),
    (
        "test case for ScoringStrategy LeastAllocated",
        LEAST_ALLOCATED,
        None,
        pod({"cpu": "1000", "memory": "2000"}),
        FIT_SCORE_NODES,
        FIT_SCORE_EXISTING,
        True,
        [32, 63],
    ),
    (
        "test case for ScoringStrategy RequestedToCapacityRatio case1 if PreScore is not called",
        REQUESTED_TO_CAPACITY_RATIO,
        SHAPE_DOWN,
        pod({"cpu": "3000", "memory": "5000"}),
        FIT_SCORE_NODES,
        FIT_SCORE_EXISTING,
        False,
        [10, 32],
    ),
    (
        "test case for ScoringStrategy MostAllocated if PreScore is not called",
        MOST_ALLOCATED,
        None,
        pod({"cpu": "1000", "memory": "2000"}),
        FIT_SCORE_NODES,
        FIT_SCORE_EXISTING,
        False,
        [67, 36],
    ),
    (
        "test case for ScoringStrategy LeastAllocated if PreScore is not called",
        LEAST_ALLOCATED,
        None,
        pod({"cpu": "1000", "memory": "2000"}),
        FIT_SCORE_NODES,
        FIT_SCORE_EXISTING,
        False,
        [32, 63],
    ),
    (
        "test case for ScoringStrategy MostAllocated with sidecar container",
        MOST_ALLOCATED,
        None,
        pod({"cpu": "1000", "memory": "2000"}),
        SIDECAR_NODES,
        SIDECAR_EXISTING,
        True,
        [67, 45],
    ),
    (
        "test case for ScoringStrategy LeastAllocated with sidecar container",
        LEAST_ALLOCATED,
        None,
        pod({"cpu": "1000", "memory": "2000"}),
        SIDECAR_NODES,
        SIDECAR_EXISTING,
        True,
        [32, 55],
    ),
]


@pytest.mark.parametrize(
    ("name", "strategy", "shape", "incoming", "nodes", "existing", "pre_score", "want"),
    FIT_SCORE_CASES,
    ids=_ids(FIT_SCORE_CASES),
)
def test_fit_score(
    name: str,
    strategy: str,
    shape: list[tuple[int, int]] | None,
    incoming: model.Pod,
    nodes: list[model.Node],
    existing: list[model.Pod],
    pre_score: bool,
    want: list[int],
) -> None:
    # fit_test.go TestFitScore
    plugin = fit(strategy, DEFAULT_RESOURCES, shape)
    assert run_scores(plugin, incoming, nodes, existing, pre_score=pre_score) == want


# ---------------------------------------------------------------- least_allocated_test.go

N4_10 = [make_node("node1", cpu="4000", memory="10000"), make_node("node2", cpu="4000", memory="10000")]
N4_6 = [make_node("node1", cpu="4000", memory="10000"), make_node("node2", cpu="6000", memory="10000")]
N10_20 = [make_node("node1", cpu="10000", memory="20000"), make_node("node2", cpu="10000", memory="20000")]
N10_50 = [make_node("node1", cpu="10000", memory="20000"), make_node("node2", cpu="10000", memory="50000")]
N6_EXT = [
    make_node("node1", cpu="6000", memory="10000"),
    make_node("node2", cpu="6000", memory="10000", allocatable={EXT_RES: "4"}),
]
N6_EXT_BOTH = [
    make_node("node1", cpu="6000", memory="10000", allocatable={EXT_RES: "4"}),
    make_node("node2", cpu="6000", memory="10000", allocatable={EXT_RES: "10"}),
]
TWO_CONTAINERS = ({"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"})
NO_CONTAINER_PODS = [pod(name=f"e{k}", node=n) for k, n in enumerate(("node1", "node1", "node2", "node2"))]
CPU_ONLY_PODS = [
    pod({"cpu": "3000", "memory": "0"}, name="e0", node="node1"),
    pod({"cpu": "3000", "memory": "0"}, name="e1", node="node1"),
    pod({"cpu": "3000", "memory": "0"}, name="e2", node="node2"),
    pod({"cpu": "3000", "memory": "5000"}, name="e3", node="node2"),
]
ONE_EACH_PODS = [
    pod({"cpu": "3000", "memory": "0"}, name="e0", node="node1"),
    pod({"cpu": "3000", "memory": "5000"}, name="e1", node="node2"),
]
W_MEM2_CPU1 = specs(("memory", 2), ("cpu", 1))

LEAST_CASES = [
    # (Go case, resources, incoming, nodes, existing, want)
    ("nothing scheduled, nothing requested", DEFAULT_RESOURCES, pod(), N4_10, [], [100, 100]),
    (
        "nothing scheduled, resources requested, differently sized nodes",
        DEFAULT_RESOURCES,
        pod(*TWO_CONTAINERS),
        N4_6,
        [],
        [37, 50],
    ),
    ("no resources requested, pods scheduled", DEFAULT_RESOURCES, pod(), N4_10, NO_CONTAINER_PODS, [100, 100]),
    pytest.param(
        "no resources requested, pods scheduled with resources",
        DEFAULT_RESOURCES,
        pod(),
        N10_20,
        CPU_ONLY_PODS,
        [70, 57],
        id="no resources requested, pods scheduled with resources",
    ),
    pytest.param(
        "resources requested, pods scheduled with resources",
        DEFAULT_RESOURCES,
        pod(*TWO_CONTAINERS),
        N10_20,
        ONE_EACH_PODS,
        [57, 45],
        id="resources requested, pods scheduled with resources",
    ),
    pytest.param(
        "resources requested, pods scheduled with resources, differently sized nodes",
        DEFAULT_RESOURCES,
        pod(*TWO_CONTAINERS),
        N10_50,
        ONE_EACH_PODS,
        [57, 60],
        id="resources requested, pods scheduled with resources, differently sized nodes",
    ),
    pytest.param(
        "requested resources exceed node capacity",
        DEFAULT_RESOURCES,
        pod({"cpu": "3000", "memory": "0"}),
        N4_10,
        ONE_EACH_PODS,
        [50, 25],
        id="requested resources exceed node capacity",
    ),
    (
        "zero node resources, pods scheduled with resources",
        DEFAULT_RESOURCES,
        pod(),
        [make_node("node1"), make_node("node2")],
        ONE_EACH_PODS,
        [0, 0],
    ),
    (
        "nothing scheduled, resources requested with different weight on CPU and memory, differently sized nodes",
        W_MEM2_CPU1,
        pod(*TWO_CONTAINERS),
        N4_6,
        [],
        [41, 50],
    ),
    (
        "bypass extended resource if the pod does not request",
        EXTENDED_RESOURCE_SET,
        pod(*TWO_CONTAINERS),
        N6_EXT,
        [],
        [50, 50],
    ),
    (
        "honor extended resource if the pod requests",
        EXTENDED_RESOURCE_SET,
        pod({"cpu": "3000", "memory": "5000", EXT_RES: "2"}),
        N6_EXT_BOTH,
        [],
        [50, 60],
    ),
    (
        "if the node doesn't have a resource",
        specs((EXT_RES, 2), ("cpu", 1), ("memory", 1)),
        pod({"cpu": "3000", "memory": "4000"}),
        N6_EXT,
        [],
        [55, 55],
    ),
]


@pytest.mark.parametrize(
    ("name", "resources", "incoming", "nodes", "existing", "want"), LEAST_CASES, ids=_ids(LEAST_CASES)
)
def test_least_allocated(
    name: str,
    resources: list[ResourceSpec],
    incoming: model.Pod,
    nodes: list[model.Node],
    existing: list[model.Pod],
    want: list[int],
) -> None:
    # least_allocated_test.go TestLeastAllocatedScoringStrategy
    assert run_scores(fit(LEAST_ALLOCATED, resources), incoming, nodes, existing) == want


# ---------------------------------------------------------------- most_allocated_test.go

MOST_CASES = [
    ("nothing scheduled, nothing requested", DEFAULT_RESOURCES, pod(), N4_10, [], [0, 0]),
    (
        "nothing scheduled, resources requested, differently sized nodes",
        DEFAULT_RESOURCES,
        pod(*TWO_CONTAINERS),
        N4_6,
        [],
        [62, 50],
    ),
    pytest.param(
        "no resources requested, pods scheduled with resources",
        DEFAULT_RESOURCES,
        pod(),
        N10_20,
        CPU_ONLY_PODS,
        [30, 42],
        id="no resources requested, pods scheduled with resources",
    ),
    pytest.param(
        "resources requested, pods scheduled with resources",
        DEFAULT_RESOURCES,
        pod(*TWO_CONTAINERS),
        N10_20,
        ONE_EACH_PODS,
        [42, 55],
        id="resources requested, pods scheduled with resources",
    ),
    (
        "resources requested equal node capacity",
        DEFAULT_RESOURCES,
        pod({"cpu": "2000", "memory": "4000"}, {"cpu": "3000", "memory": "5000"}),
        [make_node("node1", cpu="5000", memory="10000"), make_node("node2", cpu="10000", memory="9000")],
        [],
        [95, 75],
    ),
    (
        "nothing scheduled, resources requested, differently sized nodes (weights memory:2 cpu:1)",
        W_MEM2_CPU1,
        pod(*TWO_CONTAINERS),
        N4_6,
        [],
        [58, 50],
    ),
    (
        "no resources requested, pods scheduled, nonzero request for resource",
        DEFAULT_RESOURCES,
        pod({}),
        [make_node("node1", cpu="250m", memory="1000Mi"), make_node("node2", cpu="250m", memory="1000Mi")],
        [pod({}, name="e0", node="node1"), pod({}, name="e1", node="node1")],
        [80, 30],
    ),
    (
        "bypass extended resource if the pod does not request",
        EXTENDED_RESOURCE_SET,
        pod(*TWO_CONTAINERS),
        N6_EXT,
        [],
        [50, 50],
    ),
    (
        "honor extended resource if the pod request",
        EXTENDED_RESOURCE_SET,
        pod({"cpu": "3000", "memory": "5000", EXT_RES: "2"}),
        N6_EXT_BOTH,
        [],
        [50, 40],
    ),
    (
        "if the node doesn't have a resource",
        specs((EXT_RES, 2), ("cpu", 1), ("memory", 1)),
        pod({"cpu": "3000", "memory": "4000"}),
        N6_EXT,
        [],
        [45, 45],
    ),
]


@pytest.mark.parametrize(
    ("name", "resources", "incoming", "nodes", "existing", "want"), MOST_CASES, ids=_ids(MOST_CASES)
)
def test_most_allocated(
    name: str,
    resources: list[ResourceSpec],
    incoming: model.Pod,
    nodes: list[model.Node],
    existing: list[model.Pod],
    want: list[int],
) -> None:
    # most_allocated_test.go TestMostAllocatedScoringStrategy
    assert run_scores(fit(MOST_ALLOCATED, resources), incoming, nodes, existing) == want


# ---------------------------------------------------------------- requested_to_capacity_ratio_test.go

RTCR_CASES = [
    (
        "nothing scheduled, nothing requested (default - least requested nodes have priority)",
        pod(),
        N4_10,
        [pod(name="e0", node="node1"), pod(name="e1", node="node1")],
        [100, 100],
    ),
    (
        "nothing scheduled, resources requested, differently sized nodes "
        "(default - least requested nodes have priority)",
        pod(*TWO_CONTAINERS),
        N4_6,
        [pod(name="e0", node="node1"), pod(name="e1", node="node1")],
        [38, 50],
    ),
    (
        "no resources requested, pods scheduled with resources (default - least requested nodes have priority)",
        pod(),
        N4_6,
        [
            pod({"cpu": "3000", "memory": "5000"}, name="e0", node="node1"),
            pod({"cpu": "3000", "memory": "5000"}, name="e1", node="node2"),
        ],
        [38, 50],
    ),
]


@pytest.mark.parametrize(("name", "incoming", "nodes", "existing", "want"), RTCR_CASES, ids=_ids(RTCR_CASES))
def test_requested_to_capacity_ratio(
    name: str, incoming: model.Pod, nodes: list[model.Node], existing: list[model.Pod], want: list[int]
) -> None:
    # requested_to_capacity_ratio_test.go TestRequestedToCapacityRatioScoringStrategy
    plugin = fit(REQUESTED_TO_CAPACITY_RATIO, DEFAULT_RESOURCES, SHAPE_DOWN)
    assert run_scores(plugin, incoming, nodes, existing) == want


BROKEN_LINEAR_CASES = [
    (
        "case_0",
        [(10, 1), (90, 9)],
        [(-10, 1), (0, 1), (9, 1), (10, 1), (15, 1), (19, 1), (20, 2), (89, 8), (90, 9), (99, 9), (100, 9), (110, 9)],
    ),
    (
        "case_1",
        [(0, 2), (40, 10), (100, 0)],
        [(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)],
    ),
    ("case_2", [(0, 2), (40, 2), (100, 2)], [(-10, 2), (0, 2), (20, 2), (30, 2), (40, 2), (70, 2), (100, 2), (110, 2)]),
    # Berth: Go's integer division truncates toward zero on a falling segment (-33.3 -> -33).
    ("falling segment truncates toward zero", [(0, 100), (30, 0)], [(10, 67), (20, 34), (29, 4)]),
]


@pytest.mark.parametrize(("name", "shape", "assertions"), BROKEN_LINEAR_CASES, ids=_ids(BROKEN_LINEAR_CASES))
def test_broken_linear_function(name: str, shape: list[tuple[int, int]], assertions: list[tuple[int, int]]) -> None:
    # requested_to_capacity_ratio_test.go TestBrokenLinearFunction (helper.BuildBrokenLinearFunction)
    p = np.asarray([a for a, _ in assertions], dtype=np.int64)
    assert broken_linear(shape, p).tolist() == [want for _, want in assertions]


def _ext_node(name: str, ext: Mapping[str, int]) -> model.Node:
    # test_util.go makeNode(name, 4000 (milli), 10000*1024*1024, extendedResource)
    return make_node(name, cpu="4000m", memory=10000 * 1024 * 1024, allocatable={k: str(v) for k, v in ext.items()})


SINGLE_EXT_NODES = [_ext_node("node1", {"intel.com/foo": 8}), _ext_node("node2", {"intel.com/foo": 4})]
SINGLE_EXT_CASES = [
    ("nothing scheduled, nothing requested", pod(), [], [0, 0]),
    ("resources requested, pods scheduled with less resources", pod({"intel.com/foo": "2"}), [], [2, 5]),
    (
        "resources requested, pods scheduled with resources, on node with existing pod running",
        pod({"intel.com/foo": "2"}),
        [pod({"intel.com/foo": "2"}, name="e", node="node2")],
        [2, 10],
    ),
    ("resources requested, pods scheduled with more resources", pod({"intel.com/foo": "4"}), [], [5, 10]),
]


@pytest.mark.parametrize(("name", "incoming", "existing", "want"), SINGLE_EXT_CASES, ids=_ids(SINGLE_EXT_CASES))
def test_resource_bin_packing_single_extended(
    name: str, incoming: model.Pod, existing: list[model.Pod], want: list[int]
) -> None:
    # requested_to_capacity_ratio_test.go TestResourceBinPackingSingleExtended
    plugin = fit(REQUESTED_TO_CAPACITY_RATIO, specs(("intel.com/foo", 1)), [(0, 0), (100, 1)])
    assert run_scores(plugin, incoming, SINGLE_EXT_NODES, existing) == want


MULTI_EXT_NODES = [
    _ext_node("node1", {"intel.com/foo": 8, "intel.com/bar": 4}),
    _ext_node("node2", {"intel.com/foo": 4, "intel.com/bar": 8}),
]
POD1 = {"intel.com/foo": "2", "intel.com/bar": "2"}
POD2 = {"intel.com/foo": "4", "intel.com/bar": "2"}
MULTI_EXT_CASES = [
    ("nothing scheduled, nothing requested", pod(), [], [0, 0]),
    ("resources requested, pods scheduled with less resources", pod(POD1), [], [4, 3]),
    (
        "resources requested, pods scheduled with resources, on node with existing pod running",
        pod(POD1),
        [pod(POD2, name="e", node="node2")],
        [4, 7],
    ),
    ("resources requested, pods scheduled with more resources", pod(POD2), [], [5, 5]),
]


@pytest.mark.parametrize(("name", "incoming", "existing", "want"), MULTI_EXT_CASES, ids=_ids(MULTI_EXT_CASES))
def test_resource_bin_packing_multiple_extended(
    name: str, incoming: model.Pod, existing: list[model.Pod], want: list[int]
) -> None:
    # requested_to_capacity_ratio_test.go TestResourceBinPackingMultipleExtended
    plugin = fit(REQUESTED_TO_CAPACITY_RATIO, specs(("intel.com/foo", 3), ("intel.com/bar", 5)), [(0, 0), (100, 1)])
    assert run_scores(plugin, incoming, MULTI_EXT_NODES, existing) == want


# ---------------------------------------------------------------- resource_allocation_test.go

ONE_MI = 1048576
REQUEST_CASES = [
    ("overhead only", make_pod(containers=[], spec={"overhead": {"cpu": "1", "memory": "1Mi"}}), 1000, ONE_MI),
    ("1x requestless container", pod({}), 100, 200 * ONE_MI),
    ("2x requestless container", pod({}, {}), 200, 400 * ONE_MI),
    ("request container + requestless container", pod({"cpu": "1", "memory": "1Mi"}, {}), 1100, ONE_MI + 200 * ONE_MI),
    (
        "container + requestless container + overhead",
        pod({"cpu": "1", "memory": "1Mi"}, {}, overhead={"cpu": "1", "memory": "1Mi"}),
        2100,
        2 * ONE_MI + 200 * ONE_MI,
    ),
    (
        "init container + container + requestless container + overhead",
        pod({"cpu": "1", "memory": "1Mi"}, {}, init=[{"cpu": "3"}], overhead={"cpu": "1", "memory": "1Mi"}),
        4000,
        2 * ONE_MI + 200 * ONE_MI,
    ),
    (
        "requestless init container + small init container + small container",
        pod({"cpu": "3m", "memory": "3"}, init=[{}, {"cpu": "1m", "memory": "1"}]),
        100,
        200 * ONE_MI,
    ),
    (
        "requestless init container + small init container + small container + requestless container",
        pod({"cpu": "3m", "memory": "3"}, {}, init=[{}, {"cpu": "1m", "memory": "1"}]),
        103,
        3 + 200 * ONE_MI,
    ),
    # Berth: an explicit zero is not missing (component-helpers applyNonMissing).
    ("explicit zero request stays zero", pod({"cpu": "0", "memory": "0"}), 0, 0),
    (
        "limit stands in for a missing request",
        make_pod(containers=[{"name": "c", "resources": {"limits": {"cpu": "2"}}}]),
        2000,
        200 * ONE_MI,
    ),
]


@pytest.mark.parametrize(("name", "incoming", "cpu", "memory"), REQUEST_CASES, ids=_ids(REQUEST_CASES))
def test_pod_requests_with_non_missing_defaults(name: str, incoming: model.Pod, cpu: int, memory: int) -> None:
    # resource_allocation_test.go TestResourceAllocationScorerCalculateRequests
    got = non_missing_requests(incoming)
    assert (got.get("cpu", 0), got.get("memory", 0)) == (cpu, memory)


# ---------------------------------------------------------------- arguments

ARG_ERROR_CASES = [
    # (id, raw pluginConfig args, substring naming the field)
    (
        "resource with negative weight",  # least/most_allocated_test.go
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "memory", "weight": -1}, {"name": "cpu", "weight": 1}],
            }
        },
        "scoringStrategy.resources[0].weight: Invalid value: -1: resource weight of memory not in valid range (0, 100]",
    ),
    (
        "resource weight larger than MaxNodeScore",  # least_allocated_test.go
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "memory", "weight": 1}, {"name": "cpu", "weight": 101}],
            }
        },
        "scoringStrategy.resources[1].weight: Invalid value: 101",
    ),
    (
        "resource weight larger than MaxNodeScore (most allocated)",  # most_allocated_test.go
        {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "memory", "weight": 101}]}},
        "scoringStrategy.resources[0].weight: Invalid value: 101",
    ),
    (
        "unsupported scoring strategy type",  # validation_pluginargs.go NotSupported
        {"scoringStrategy": {"type": "Bogus"}},
        'scoringStrategy.type: Unsupported value: "Bogus": '
        'supported values: "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"',
    ),
    (
        "scoring strategy without type",
        {"scoringStrategy": {"resources": [{"name": "cpu"}]}},
        'scoringStrategy.type: Unsupported value: ""',
    ),
    (
        "ignored resource is not a qualified name",
        {"ignoredResources": ["example.com/a/b"]},
        'ignoredResources[0]: Invalid value: "example.com/a/b": a valid label key must consist of',
    ),
    (
        "ignored resource group contains a slash",
        {"ignoredResourceGroups": ["example.com/aaa"]},
        "ignoredResourceGroups[0]: Invalid value: \"example.com/aaa\": resource group name can't contain '/'",
    ),
    (
        "shape utilization not increasing",
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]
                },
            }
        },
        "scoringStrategy.requestedToCapacityRatio.shape[1].utilization: Invalid value: 50: "
        "values must be sorted in increasing order",
    ),
    (
        "shape utilization out of range",
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": [{"utilization": 101, "score": 1}]},
            }
        },
        "scoringStrategy.requestedToCapacityRatio.shape[0].utilization: Invalid value: 101: "
        "not in valid range [0, 100]",
    ),
    (
        "shape score out of range",
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 11}]},
            }
        },
        "scoringStrategy.requestedToCapacityRatio.shape[0].score: Invalid value: 11: not in valid range [0, 10]",
    ),
    (
        "empty shape",
        {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": []}}},
        "scoringStrategy.requestedToCapacityRatio.shape: Required value: at least one point must be specified",
    ),
    (
        "RequestedToCapacityRatio without a shape",
        {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
        "scoringStrategy.requestedToCapacityRatio: Required value",
    ),
]


@pytest.mark.parametrize(("name", "raw", "message"), ARG_ERROR_CASES, ids=_ids(ARG_ERROR_CASES))
def test_invalid_args_are_rejected_naming_the_field(name: str, raw: dict[str, Any], message: str) -> None:
    args = msgspec.convert(raw, NodeResourcesFitArgs)
    with pytest.raises(ValueError) as err:
        args.validate()
    assert message in str(err.value)
    with pytest.raises(ValueError):
        NodeResourcesFit(args)
    with pytest.raises(registry.RegistryError) as rerr:
        registry._decode_args(NodeResourcesFit, raw, "pluginConfig[0].args")
    assert str(rerr.value).startswith("pluginConfig[0].args: ") and message in str(rerr.value)


FORBIDDEN_SHAPE = (
    "scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when type is not RequestedToCapacityRatio"
)


@pytest.mark.parametrize(
    ("version", "message"),
    [
        # validation_pluginargs.go v1.36.3 / v1.37.2: a shape only with RequestedToCapacityRatio.
        (features.KubeVersion(1, 37), FORBIDDEN_SHAPE),
        (features.KubeVersion(1, 36), FORBIDDEN_SHAPE),
        # v1.35.4: the shape is validated whatever the type, and a valid one is accepted.
        (features.KubeVersion(1, 35), None),
    ],
    ids=str,
)
def test_a_shape_with_another_strategy_per_release(version: features.KubeVersion, message: str | None) -> None:
    raw = {
        "scoringStrategy": {
            "type": "LeastAllocated",
            "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10}]},
        }
    }
    feats = features.Features.of(version)
    if message is None:
        registry._decode_args(NodeResourcesFit, raw, "pluginConfig[0].args", feats)
        return
    with pytest.raises(registry.RegistryError) as err:
        registry._decode_args(NodeResourcesFit, raw, "pluginConfig[0].args", feats)
    assert str(err.value) == f"pluginConfig[0].args: {message}"


def test_a_shape_is_validated_with_another_strategy_in_1_35() -> None:
    raw = {"scoringStrategy": {"type": "MostAllocated", "requestedToCapacityRatio": {"shape": []}}}
    args = msgspec.convert(raw, NodeResourcesFitArgs)
    with pytest.raises(ValueError, match=r"requestedToCapacityRatio\.shape: Required value"):
        args.validate(features.Features.of(features.KubeVersion(1, 35)))


def test_several_invalid_fields_are_reported_together() -> None:
    raw = {"ignoredResourceGroups": ["a/b"], "scoringStrategy": {"type": "X"}}
    with pytest.raises(ValueError) as err:
        msgspec.convert(raw, NodeResourcesFitArgs).validate()
    text = str(err.value)
    assert text.startswith("[") and "ignoredResourceGroups[0]" in text and "scoringStrategy.type" in text


def test_unknown_args_field_is_rejected() -> None:
    with pytest.raises(msgspec.ValidationError, match="scoringStrateg"):
        msgspec.convert({"scoringStrategi": {}}, NodeResourcesFitArgs)


DEFAULTING_CASES = [
    # v1 SetDefaults_NodeResourcesFitArgs: what kube-scheduler does to KubeSchedulerConfiguration args.
    ("no args: LeastAllocated over cpu and memory", {}, LEAST_ALLOCATED, [("cpu", 1), ("memory", 1)]),
    (
        "Resources not set (least/most_allocated_test.go): cpu and memory",
        {"scoringStrategy": {"type": "MostAllocated", "resources": []}},
        MOST_ALLOCATED,
        [("cpu", 1), ("memory", 1)],
    ),
    (
        "resource with zero weight (least/most_allocated_test.go): weight defaults to 1",
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "memory", "weight": 1}, {"name": "cpu", "weight": 0}],
            }
        },
        LEAST_ALLOCATED,
        [("memory", 1), ("cpu", 1)],
    ),
]


@pytest.mark.parametrize(("name", "raw", "strategy", "resources"), DEFAULTING_CASES, ids=_ids(DEFAULTING_CASES))
def test_args_defaults(name: str, raw: dict[str, Any], strategy: str, resources: list[tuple[str, int]]) -> None:
    args = msgspec.convert(raw, NodeResourcesFitArgs)
    args.validate()
    assert args.scoring_strategy is not None
    assert args.scoring_strategy.type == strategy
    assert [(r.name, r.weight) for r in args.scoring_strategy.resources] == resources


def test_unset_resources_score_like_cpu_and_memory() -> None:
    # least_allocated_test.go "Resources not set, pods scheduled with error": Go's internal API errors at Score;
    # through the v1 defaults the plugin scores cpu and memory.
    plugin = NodeResourcesFit(msgspec.convert({"scoringStrategy": {"type": "LeastAllocated"}}, NodeResourcesFitArgs))
    assert run_scores(plugin, pod(*TWO_CONTAINERS), N4_6) == [37, 50]


@pytest.mark.parametrize("version", features.SUPPORTED, ids=str)
def test_events_to_register(version: features.KubeVersion) -> None:
    # fit_test.go TestEventsToRegister, InPlacePodVerticalScaling enabled, no
    # queueing hints; DeviceClass add / update with DRAExtendedResource (v1.37.2:
    # on by default from 1.36).
    A = fw.ActionType
    handle = dataclasses.replace(Cluster().handle(), features=features.Features.of(version))
    want = [
        fw.ClusterEvent("AssignedPod", A.DELETE | A.UPDATE_POD_SCALE_DOWN),
        fw.ClusterEvent("Node", A.ADD | A.UPDATE_NODE_ALLOCATABLE | A.UPDATE_NODE_TAINT | A.UPDATE_NODE_LABEL),
    ]
    if version >= features.KubeVersion(1, 36):
        want.append(fw.ClusterEvent("DeviceClass", A.ADD | A.UPDATE))
    assert list(NodeResourcesFit(None, handle).events_to_register()) == want


def test_plugin_is_registered_in_tree() -> None:
    assert registry.plugin_class("NodeResourcesFit") is NodeResourcesFit
    assert NodeResourcesFit.Args is NodeResourcesFitArgs


# ---------------------------------------------------------------- vectorised == per-node Go loops


def _go_broken_linear(shape: Sequence[tuple[int, int]], p: int) -> int:
    def go_div(a: int, b: int) -> int:
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b > 0) else -q

    for i, (u, sc) in enumerate(shape):
        if p <= u:
            if i == 0:
                return sc
            u0, s0 = shape[i - 1]
            return s0 + go_div((sc - s0) * (p - u0), u - u0)
    return shape[-1][1]


def _go_score(strategy: str, requested: list[int], allocable: list[int], weights: list[int], shape: Any) -> int:
    """least_allocated.go / most_allocated.go / requested_to_capacity_ratio.go, line for line (one node)."""
    node_score = weight_sum = 0
    for req, cap, w in zip(requested, allocable, weights, strict=True):
        if cap == 0:
            continue
        if strategy == LEAST_ALLOCATED:
            sc = 0 if req > cap else (cap - req) * 100 // cap
        elif strategy == MOST_ALLOCATED:
            sc = min(req, cap) * 100 // cap
        else:
            scaled = [(u, v * 10) for u, v in shape]
            sc = _go_broken_linear(scaled, 100 if req > cap else req * 100 // cap)
            if sc <= 0:
                continue
        node_score += sc * w
        weight_sum += w
    if weight_sum == 0:
        return 0
    if strategy == REQUESTED_TO_CAPACITY_RATIO:
        return math.floor(node_score / weight_sum + 0.5)  # math.Round, non-negative
    return node_score // weight_sum


@pytest.mark.parametrize("strategy", [LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO])
def test_vectorised_scorers_match_the_per_node_go_loops(strategy: str) -> None:
    rng = np.random.default_rng(11)
    nodes = [
        make_node(f"n{k}", cpu=f"{int(c)}m", memory=int(m), allocatable={EXT_A: int(e)} if e else None)
        for k, (c, m, e) in enumerate(rng.integers(0, 10**6, size=(200, 3)))
    ]
    placed = [
        pod({"cpu": f"{int(c)}m", "memory": int(m), EXT_A: int(e)}, name=f"e{k}", node=f"n{k % 200}")
        for k, (c, m, e) in enumerate(rng.integers(1, 4 * 10**5, size=(300, 3)))
    ]
    shape = [(0, 2), (35, 9), (70, 1), (100, 6)]
    weights = specs(("cpu", 3), ("memory", 1), (EXT_A, 7))
    plugin = fit(strategy, weights, shape if strategy == REQUESTED_TO_CAPACITY_RATIO else None)
    incoming = pod({"cpu": "150m", "memory": 123456, EXT_A: 3})
    t = table(nodes, placed)
    rows = t.alive_rows()
    got = run_scores(plugin, incoming, nodes, placed)
    want_req = non_missing_requests(incoming)
    want = []
    for row in rows.tolist():
        alloc = [int(t.alloc[row, t.columns.index[n]]) for n in ("cpu", "memory", EXT_A)]
        used = [
            int(t.req_nz[row, t.columns.index["cpu"]]),
            int(t.req_nz[row, t.columns.index["memory"]]),
            int(t.req[row, t.columns.index[EXT_A]]),
        ]
        requested = [u + want_req.get(n, 0) for u, n in zip(used, ("cpu", "memory", EXT_A), strict=True)]
        want.append(_go_score(strategy, requested, alloc, [3, 1, 7], shape))
    assert got == want
