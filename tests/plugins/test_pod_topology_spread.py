"""PodTopologySpread: cases ported from kube-scheduler v1.34's
podtopologyspread/filtering_test.go and scoring_test.go."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from berth import features
from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.plugins.podtopologyspread import PodTopologySpread
from berth.testing import filter_statuses, make_node, make_pod, scores
from tests.support import cached

U = fw.Code.UNSCHEDULABLE
UU = fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
SKEW = "node(s) didn't match pod topology spread constraints"
MISSING = SKEW + " (missing required label)"


def spread(key: str, max_skew: int = 1, when: str = "DoNotSchedule", **kw: Any) -> dict[str, Any]:
    c = {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"foo": ""}},
    }
    c.update(kw)
    return c


def incoming(*constraints: dict[str, Any], labels: dict[str, str] | None = None, **spec: Any) -> Any:
    return make_pod(
        "p",
        labels={"foo": ""} if labels is None else labels,
        spec={"topologySpreadConstraints": list(constraints), **spec},
    )


def node(name: str, zone: str | None, **kw: Any) -> Any:
    lbl = {"node": name}
    if zone is not None:
        lbl["zone"] = zone
    return make_node(name, labels={**lbl, **kw.pop("labels", {})}, **kw)


def existing(name: str, on: str, labels: dict[str, str] | None = None, **kw: Any) -> Any:
    return make_pod(name, node_name=on, labels={"foo": ""} if labels is None else labels, **kw)


def cluster(nodes: list[Any], pods: list[Any]) -> tuple[Any, Handle]:
    return cached(nodes, pods)


FOUR_NODES = [node("node-a", "zone1"), node("node-b", "zone1"), node("node-x", "zone2"), node("node-y", "zone2")]

FILTER_CASES: list[tuple[str, Any, list[Any], list[Any], dict[str, Any]]] = [
    (
        "no existing pods: every node fits",
        incoming(spread("zone")),
        FOUR_NODES,
        [],
        {"node-a": None, "node-b": None, "node-x": None, "node-y": None},
    ),
    (
        "zone skew: the emptier zone only",
        incoming(spread("zone")),
        FOUR_NODES,
        [existing("p-a1", "node-a"), existing("p-b1", "node-b"), existing("p-x1", "node-x")],
        {"node-a": SKEW, "node-b": SKEW, "node-x": None, "node-y": None},
    ),
    (
        "pods not matching the selector do not count",
        incoming(spread("zone")),
        FOUR_NODES,
        [existing("p-a1", "node-a", labels={"bar": ""}), existing("p-b1", "node-b", labels={"bar": ""})],
        {"node-a": None, "node-b": None, "node-x": None, "node-y": None},
    ),
    (
        "pods of another namespace do not count",
        incoming(spread("zone")),
        FOUR_NODES,
        [existing("p-a1", "node-a", namespace="other"), existing("p-b1", "node-b", namespace="other")],
        {"node-a": None, "node-b": None, "node-x": None, "node-y": None},
    ),
    (
        "a node without the key is unresolvable",
        incoming(spread("zone")),
        [node("node-a", "zone1"), node("node-n", None)],
        [],
        {"node-a": None, "node-n": MISSING},
    ),
    (
        "maxSkew 2 tolerates one more",
        incoming(spread("zone", 2)),
        FOUR_NODES,
        [existing("p-a1", "node-a"), existing("p-b1", "node-b"), existing("p-x1", "node-x")],
        {"node-a": None, "node-b": None, "node-x": None, "node-y": None},
    ),
    (
        "per-node spread on the node key",
        incoming(spread("node")),
        FOUR_NODES,
        [existing("p-a1", "node-a"), existing("p-b1", "node-b"), existing("p-x1", "node-x")],
        {"node-a": SKEW, "node-b": SKEW, "node-x": SKEW, "node-y": None},
    ),
    (
        "the incoming pod not matching its own selector adds nothing",
        incoming(spread("node"), labels={"bar": ""}),
        FOUR_NODES,
        [existing("p-a1", "node-a"), existing("p-b1", "node-b"), existing("p-x1", "node-x")],
        {"node-a": None, "node-b": None, "node-x": None, "node-y": None},
    ),
    (
        "two constraints: both must hold",
        incoming(spread("zone"), spread("node")),
        FOUR_NODES,
        [existing("p-a1", "node-a"), existing("p-y1", "node-y"), existing("p-y2", "node-y")],
        {"node-a": SKEW, "node-b": None, "node-x": SKEW, "node-y": SKEW},
    ),
    (
        "minDomains above the domain count makes the global minimum 0",
        incoming(spread("zone", minDomains=3)),
        FOUR_NODES,
        [existing("p-a1", "node-a"), existing("p-x1", "node-x")],
        {"node-a": SKEW, "node-b": SKEW, "node-x": SKEW, "node-y": SKEW},
    ),
    (
        "terminating pods do not count",
        incoming(spread("zone")),
        FOUR_NODES,
        [existing("p-a1", "node-a"), existing("p-b1", "node-b")],
        {"node-a": SKEW, "node-b": SKEW, "node-x": None, "node-y": None},
    ),
    (
        "nodeAffinityPolicy Honor: nodes the pod cannot use do not form domains",
        incoming(spread("zone"), nodeSelector={"zone": "zone1"}),
        FOUR_NODES,
        [existing("p-a1", "node-a"), existing("p-a2", "node-a"), existing("p-x1", "node-x")],
        {"node-a": None, "node-b": None, "node-x": None, "node-y": None},
    ),
    (
        "nodeAffinityPolicy Ignore: they do",
        incoming(spread("zone", nodeAffinityPolicy="Ignore"), nodeSelector={"zone": "zone1"}),
        FOUR_NODES,
        [existing("p-a1", "node-a"), existing("p-a2", "node-a"), existing("p-x1", "node-x")],
        {"node-a": SKEW, "node-b": SKEW, "node-x": None, "node-y": None},
    ),
]


@pytest.mark.parametrize(("case", "pod", "nodes", "pods", "want"), FILTER_CASES, ids=[c[0] for c in FILTER_CASES])
@pytest.mark.parametrize("indexed", [True, False], ids=["cache index", "scan"])
def test_filter(
    case: str, pod: Any, nodes: list[Any], pods: list[Any], want: dict[str, str | None], indexed: bool
) -> None:
    if case == "terminating pods do not count":
        pods = [*pods, existing("p-x1", "node-x"), existing("p-y1", "node-y")]
        for p in pods[-2:]:
            p.metadata.deletion_timestamp = "2026-01-01T00:00:00Z"
    snap, handle = cluster(nodes, pods)
    plugin = PodTopologySpread(None, handle if indexed else None)
    got = filter_statuses(plugin, pod, snap)
    assert {n: (st.reasons[0] if st.reasons else None) for n, st in got.items()} == want
    for st in got.values():
        if st.reasons:
            assert st.code == (UU if st.reasons[0] == MISSING else U)


def test_pre_filter_skips_pods_without_hard_constraints() -> None:
    snap, handle = cluster(FOUR_NODES, [])
    res = PodTopologySpread(None, handle).pre_filter(
        fw.CycleState(), PodInfo.of(incoming(spread("zone", when="ScheduleAnyway"))), snap
    )
    assert res.status.code == fw.Code.SKIP


def test_preemption_extensions_add_and_remove_a_pod() -> None:
    snap, handle = cluster(
        FOUR_NODES, [existing("p-a1", "node-a"), existing("p-b1", "node-b"), existing("p-x1", "node-x")]
    )
    plugin = PodTopologySpread(None, handle)
    state = fw.CycleState()
    pod = PodInfo.of(incoming(spread("zone")))
    plugin.pre_filter(state, pod, snap)
    info_a = snap.infos[snap.index["node-a"]]
    assert info_a is not None
    victim = info_a.pods["uid-default-p-a1"]
    plugin.remove_pod(state, pod, victim, info_a)
    rows = snap.alive_rows()
    assert plugin.filter(state, pod, snap, rows).ok.tolist() == [True, True, True, True]
    plugin.add_pod(state, pod, victim, info_a)
    assert plugin.filter(state, pod, snap, rows).ok.tolist() == [False, False, True, True]


# scoring_test.go: ScheduleAnyway prefers the domains with fewer matching pods.
@pytest.mark.parametrize(
    ("constraints", "pods", "want"),
    [
        ([spread("zone", when="ScheduleAnyway")], [], {"node-a": 100, "node-b": 100, "node-x": 100, "node-y": 100}),
        (
            [spread("node", when="ScheduleAnyway")],
            [existing("p-a1", "node-a"), existing("p-a2", "node-a"), existing("p-b1", "node-b")],
            {"node-a": 0, "node-b": 50, "node-x": 100, "node-y": 100},
        ),
        (
            [spread("zone", when="ScheduleAnyway")],
            [existing("p-a1", "node-a"), existing("p-a2", "node-a"), existing("p-b1", "node-b")],
            {"node-a": 0, "node-b": 0, "node-x": 100, "node-y": 100},
        ),
    ],
    ids=["no pods: all equal", "per node", "per zone"],
)
def test_score(constraints: list[dict[str, Any]], pods: list[Any], want: dict[str, int]) -> None:
    snap, handle = cluster(FOUR_NODES, pods)
    assert scores(PodTopologySpread(None, handle), incoming(*constraints), snap) == want


def test_score_ignores_nodes_without_the_key() -> None:
    snap, handle = cluster([node("node-a", "zone1"), node("node-n", None)], [existing("p-a1", "node-a")])
    got = scores(PodTopologySpread(None, handle), incoming(spread("zone", when="ScheduleAnyway")), snap)
    assert got == {"node-a": 100, "node-n": 0}


@pytest.mark.parametrize(("gate", "want_x"), [(False, None), (True, SKEW)], ids=["gate off", "gate on"])
def test_node_taints_policy_honor_matches_lt_gt_tolerations_with_the_gate(gate: bool, want_x: str | None) -> None:
    # common.go matchNodeInclusionPolicies (v1.37.2): FindMatchingUntoleratedTaint
    # with TaintTolerationComparisonOperators. zone2's nodes carry sla=950; the
    # pod tolerates it only through `Gt 750`. Off: zone2 is not a domain, so
    # zone1 (2 pods) is the only one and the minimum — every zone1 node fits
    # (zone2's nodes are then refused by TaintToleration, not this plugin).
    # On: zone2 counts with 0 pods, and zone1's nodes break maxSkew 1.
    sla = [model.Taint(key="sla", value="950", effect="NoSchedule")]
    nodes = [
        node("node-a", "zone1"),
        node("node-b", "zone1"),
        node("node-x", "zone2", taints=sla),
        node("node-y", "zone2", taints=sla),
    ]
    pods = [existing("p-a1", "node-a"), existing("p-b1", "node-b")]
    snap, handle = cluster(nodes, pods)
    feats = features.Features.of(features.NEWEST, {"TaintTolerationComparisonOperators": gate})
    plugin = PodTopologySpread(None, dataclasses.replace(handle, features=feats))
    pod = incoming(
        spread("zone", nodeTaintsPolicy="Honor"),
        tolerations=[{"key": "sla", "operator": "Gt", "value": "750", "effect": "NoSchedule"}],
    )
    got = {n: (st.reasons[0] if st.reasons else None) for n, st in filter_statuses(plugin, pod, snap).items()}
    assert got == {"node-a": want_x, "node-b": want_x, "node-x": None, "node-y": None}
