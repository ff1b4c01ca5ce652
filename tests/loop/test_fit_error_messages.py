"""The FailedScheduling message is kube-scheduler v1.34.4's, byte for byte.

Sources: ``pkg/scheduler/framework/types.go`` ``FitError.Error()`` and its
table ``TestFitError_Error`` (types_test.go), ``schedule_one.go``
``findNodesThatFitPod`` (the nodes a PreFilter result leaves out get
``node(s) didn't satisfy plugin(s) %v`` as NodeToStatus's absent-nodes
status) and ``framework/runtime/framework.go`` ``RunPreFilterPlugins`` (the
message when the PreFilter results do not intersect). The same text reaches
the extender's FailedAndUnresolvableNodes and Explain's summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework import runtime
from berth.scheduling import algorithm
from berth.scheduling.verbs import Extender
from berth.testing import Cluster, make_node, make_pod

U = fw.Code.UNSCHEDULABLE
UU = fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
NO_REASONS = fw.Status(UU)  # NewDefaultNodeToStatus's absent-nodes status

PRE = "Node(s) failed PreFilter plugin FalsePreFilter"
F1 = "Node(s) failed Filter plugin FalseFilter-1"
F2 = "Node(s) failed Filter plugin FalseFilter-2"
POST = "Error running PostFilter plugin FailedPostFilter"
AFFINITY = "node(s) didn't satisfy plugin(s) [NodeAffinity]"


def diagnosis(
    num_all_nodes: int,
    statuses: dict[str, tuple[fw.Code, str]],
    *,
    absent: fw.Status = NO_REASONS,
    pre_filter_msg: str = "",
    post_filter_msg: str = "",
) -> algorithm.Diagnosis:
    return algorithm.Diagnosis(
        num_all_nodes=num_all_nodes,
        node_to_status={n: fw.Status(code, (reason,)) for n, (code, reason) in statuses.items()},
        absent_nodes_status=absent,
        pre_filter_msg=pre_filter_msg,
        post_filter_msg=post_filter_msg,
    )


def three(reason: str, third: str | None = None) -> dict[str, tuple[fw.Code, str]]:
    return {"node1": (U, reason), "node2": (U, reason), "node3": (U, third or reason)}


FIT_ERROR_CASES = [
    # types_test.go TestFitError_Error, case by case.
    pytest.param(
        diagnosis(3, three(PRE), pre_filter_msg=PRE),
        "0/3 nodes are available: Node(s) failed PreFilter plugin FalsePreFilter.",
        id="nodes failed Prefilter plugin",
    ),
    pytest.param(
        diagnosis(3, three(PRE), pre_filter_msg=PRE, post_filter_msg=POST),
        "0/3 nodes are available: Node(s) failed PreFilter plugin FalsePreFilter. "
        "Error running PostFilter plugin FailedPostFilter",
        id="nodes failed Prefilter plugin and the preemption also failed",
    ),
    pytest.param(
        diagnosis(3, three(F1)),
        "0/3 nodes are available: 3 Node(s) failed Filter plugin FalseFilter-1.",
        id="nodes failed one Filter plugin with an empty PostFilterMsg",
    ),
    pytest.param(
        diagnosis(3, three(F1), post_filter_msg=POST),
        "0/3 nodes are available: 3 Node(s) failed Filter plugin FalseFilter-1. "
        "Error running PostFilter plugin FailedPostFilter",
        id="nodes failed one Filter plugin with a non-empty PostFilterMsg",
    ),
    pytest.param(
        diagnosis(3, three(F1, F2)),
        "0/3 nodes are available: 1 Node(s) failed Filter plugin FalseFilter-2, "
        "2 Node(s) failed Filter plugin FalseFilter-1.",
        id="nodes failed two Filter plugins with an empty PostFilterMsg",
    ),
    pytest.param(
        diagnosis(3, three(F1, F2), post_filter_msg=POST),
        "0/3 nodes are available: 1 Node(s) failed Filter plugin FalseFilter-2, "
        "2 Node(s) failed Filter plugin FalseFilter-1. Error running PostFilter plugin FailedPostFilter",
        id="nodes failed two Filter plugins with a non-empty PostFilterMsg",
    ),
    pytest.param(
        diagnosis(1, {"node1": (U, "Node failed Permit plugin Permit-1")}),
        "0/1 nodes are available: 1 Node failed Permit plugin Permit-1.",
        id="failed to Permit on node",
    ),
    pytest.param(
        diagnosis(1, {"node1": (U, "Node failed Reserve plugin Reserve-1")}),
        "0/1 nodes are available: 1 Node failed Reserve plugin Reserve-1.",
        id="failed to Reserve on node",
    ),
    # Berth: the absent-nodes status (ForEachExplicitNode + AbsentNodesStatus).
    pytest.param(
        diagnosis(5, {"node1": (U, "Insufficient cpu")}, absent=fw.Status(UU, (AFFINITY,))),
        "0/5 nodes are available: 1 Insufficient cpu, 4 node(s) didn't satisfy plugin(s) [NodeAffinity].",
        id="nodes a PreFilter result left out are counted under the absent status",
    ),
    pytest.param(
        diagnosis(5, {"node1": (U, "Insufficient cpu")}),
        "0/5 nodes are available: 1 Insufficient cpu.",
        id="the default absent status has no reasons and adds nothing",
    ),
    pytest.param(
        diagnosis(2, {}, absent=fw.Status(UU, (AFFINITY,))),
        "0/2 nodes are available: 2 node(s) didn't satisfy plugin(s) [NodeAffinity].",
        id="every node left out by PreFilter",
    ),
    pytest.param(
        diagnosis(12, {f"n{i}": (U, "Insufficient cpu") for i in range(10)}, absent=fw.Status(UU, (AFFINITY,))),
        "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity].",
        id="counts sort as strings, as Go's sort.Strings does",
    ),
]


@pytest.mark.parametrize(("diag", "want"), FIT_ERROR_CASES)
def test_fit_error_message_is_kube_schedulers(diag: algorithm.Diagnosis, want: str) -> None:
    assert str(algorithm.FitError(PodInfo.of(make_pod()), diag)) == want


# ---------------------------------------------------------------- through the default profile


def names_affinity(*names: str) -> dict[str, Any]:
    """Required node affinity on metadata.name: NodeAffinity's PreFilter narrows to these nodes."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(names)}]}
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    }


def untolerated(key: str) -> model.Taint:
    return model.Taint(key=key, value="x", effect="NoSchedule")


NODES = [
    make_node("n0", cpu="4", pods=110),
    make_node("n1", cpu="1", pods=110),
    make_node("n2", cpu="1", pods=110, taints=[untolerated("dedicated")]),
    make_node("n3", cpu="4", pods=110, taints=[untolerated("gpu")]),
]

SCHEDULE_CASES = [
    # (id, nodes, pod spec, FitError message)
    (
        "PreFilter narrows, Filter rejects the rest",
        NODES,
        names_affinity("n1", "n2"),
        "0/4 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s), "
        "2 node(s) didn't satisfy plugin(s) [NodeAffinity].",
    ),
    (
        "PreFilter keeps only nodes that do not exist",
        NODES,
        names_affinity("gone"),
        "0/4 nodes are available: 4 node(s) didn't satisfy plugin(s) [NodeAffinity].",
    ),
    (
        "no narrowing: nodes with different taints share one reason",
        NODES[1:],
        {},
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint(s).",
    ),
]


def _schedule(c: Cluster, pod: model.Pod) -> tuple[algorithm.Diagnosis, str]:
    fwk = c.berth.core.framework_for("berth")
    with pytest.raises(algorithm.FitError) as err:
        algorithm.schedule_pod(
            fwk, fw.CycleState(), PodInfo.of(pod), c.snapshot, percentage=0, sampler=algorithm.Sampler()
        )
    return err.value.diagnosis, str(err.value)


@pytest.mark.parametrize(("name", "nodes", "spec", "want"), SCHEDULE_CASES, ids=[c[0] for c in SCHEDULE_CASES])
def test_failed_scheduling_message_counts_nodes_prefilter_left_out(
    name: str, nodes: list[model.Node], spec: dict[str, Any], want: str
) -> None:
    c = Cluster(nodes)
    _, got = _schedule(c, make_pod("p", requests={"cpu": "2"}, spec=spec))
    assert got == want


def test_plugins_that_narrowed_the_nodes_are_unschedulable_plugins() -> None:
    # findNodesThatFitPod: diagnosis.UnschedulablePlugins = RunPreFilterPlugins' pluginsWithNodes,
    # so NodeAffinity's events requeue the pod.
    diag, _ = _schedule(Cluster(NODES), make_pod("p", requests={"cpu": "2"}, spec=names_affinity("n1", "n2")))
    assert diag.unschedulable_plugins == {"NodeAffinity", "NodeResourcesFit", "TaintToleration"}


def test_extender_reports_left_out_nodes_with_kube_schedulers_reason() -> None:
    c = Cluster(NODES)
    pod = make_pod("p", requests={"cpu": "2"}, spec=names_affinity("n0", "n1"))
    res = Extender(c.berth.core).filter(pod, names=["n0", "n1", "n2", "n3"])
    assert res.passed == ["n0"]
    # 2 cpu > n1's whole allocatable: unresolvable (InsufficientResource.Unresolvable).
    assert res.unresolvable == {"n1": "Insufficient cpu", "n2": AFFINITY, "n3": AFFINITY}
    assert res.failed == {}


def test_explain_summary_matches_the_failed_scheduling_message() -> None:
    c = Cluster(NODES)
    pod = make_pod("p", requests={"cpu": "2"}, spec=names_affinity("n1", "n2"))
    e = c.explain(pod, profile="berth")
    assert e.summary == SCHEDULE_CASES[0][3]
    left_out = {n.node: [r.reason for r in n.reasons] for n in e.nodes if n.node in ("n0", "n3")}
    # Explain (Berth's own API) adds each left-out node's own Filter reasons after it.
    assert left_out["n0"] == [AFFINITY, "node(s) didn't match Pod's node affinity/selector"]
    assert left_out["n3"][0] == AFFINITY


# ---------------------------------------------------------------- RunPreFilterPlugins


class _Narrowing:
    """A PreFilter plugin that keeps only ``keep`` (None: every node)."""

    def __init__(self, name: str, keep: Sequence[str] | None) -> None:
        self.NAME = name
        self.keep = None if keep is None else frozenset(keep)

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        return fw.PreFilterResult(node_names=self.keep)


PRE_FILTER_CASES = [
    # (id, plugins as (name, kept nodes), status message or "" for success, pluginsWithNodes)
    ("no plugin narrows", [("A", None), ("B", None)], "", ()),
    ("one plugin narrows", [("A", None), ("B", ["n0"])], "", ("B",)),
    ("two plugins intersect", [("B", ["n0", "n1"]), ("A", ["n1"])], "", ("A", "B")),
    ("one plugin keeps nothing", [("A", None), ("B", [])], "node(s) didn't satisfy plugin B", ("B",)),
    (
        "two plugins do not intersect",
        [("Zeta", ["n0"]), ("Alpha", ["n1"])],
        "node(s) didn't satisfy plugin(s) [Alpha Zeta] simultaneously",
        ("Alpha", "Zeta"),
    ),
]


@pytest.mark.parametrize(
    ("name", "plugins", "message", "with_nodes"), PRE_FILTER_CASES, ids=[c[0] for c in PRE_FILTER_CASES]
)
def test_run_pre_filter_names_the_plugins_that_narrowed(
    name: str, plugins: list[tuple[str, list[str] | None]], message: str, with_nodes: tuple[str, ...]
) -> None:
    c = Cluster(NODES)
    fwk = c.berth.core.framework_for("berth")
    fwk.pre_filter = [_Narrowing(n, keep) for n, keep in plugins]  # type: ignore[misc]
    state = fw.CycleState()
    status, _ = fwk.run_pre_filter(state, PodInfo.of(make_pod()), c.snapshot)
    if message:
        assert (status.code, status.message()) == (UU, message)
        # FitError carries it as the PreFilter message, once, not per node.
        with pytest.raises(algorithm.FitError) as err:
            algorithm.schedule_pod(fwk, fw.CycleState(), PodInfo.of(make_pod()), c.snapshot, percentage=0, sampler=None)
        assert str(err.value) == f"0/4 nodes are available: {message}."
    else:
        assert status.ok
    assert (state.get(runtime.PRE_FILTER_PLUGINS_WITH_NODES) or ()) == with_nodes
