"""NodeName, NodeUnschedulable, TaintToleration, NodeAffinity and their shared
helpers: cases ported from kube-scheduler v1.34's *_test.go, and v1.37.2's
for what changed since (the Lt / Gt toleration operators of
TaintTolerationComparisonOperators, NodeName's PreFilter)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from berth import config, features
from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.plugins.helpers import default_normalize_score, tolerates
from berth.plugins.node_affinity import NodeAffinity, NodeAffinityArgs
from berth.plugins.node_name import NodeName
from berth.plugins.node_unschedulable import NodeUnschedulable
from berth.plugins.taint_toleration import ERR_REASON_NOT_MATCH as UNTOLERATED
from berth.plugins.taint_toleration import TaintToleration
from berth.testing import Cluster, filter_statuses, make_node, make_pod, scores
from tests.support import table

UU = fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def taint(key: str, value: str, effect: str) -> model.Taint:
    return model.Taint(key=key, value=value, effect=effect)


def tol(**kw: Any) -> dict[str, Any]:
    return kw


# ---------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("given", "reverse", "want"),
    [
        ([0, 0, 0], False, [0, 0, 0]),
        ([0, 0, 0], True, [100, 100, 100]),
        ([1, 2, 4], False, [25, 50, 100]),
        ([1, 2, 4], True, [75, 50, 0]),
        ([3, 3, 7], False, [42, 42, 100]),
    ],
    ids=["all zero", "all zero reversed", "scaled by max", "reversed", "integer division"],
)
def test_default_normalize_score(given: list[int], reverse: bool, want: list[int]) -> None:
    assert default_normalize_score(np.asarray(given), 100, reverse).tolist() == want


@pytest.mark.parametrize(
    ("toleration", "t", "want"),
    [
        (tol(key="foo", operator="Equal", value="bar", effect="NoSchedule"), taint("foo", "bar", "NoSchedule"), True),
        (tol(key="foo", operator="Equal", value="baz", effect="NoSchedule"), taint("foo", "bar", "NoSchedule"), False),
        (tol(key="foo", operator="Exists", effect="NoSchedule"), taint("foo", "bar", "NoSchedule"), True),
        (tol(key="foo", operator="Exists", effect="NoExecute"), taint("foo", "bar", "NoSchedule"), False),
        (tol(operator="Exists"), taint("anything", "x", "NoExecute"), True),
        (tol(key="foo", value="bar"), taint("foo", "bar", "PreferNoSchedule"), True),
        (tol(key="foo", operator="Lt", value="3"), taint("foo", "2", "NoSchedule"), False),
    ],
    ids=[
        "equal key value effect",
        "different value",
        "exists ignores value",
        "effect must match when set",
        "empty key with Exists tolerates everything",
        "empty operator means Equal, empty effect any",
        "unknown operator tolerates nothing",
    ],
)
def test_toleration_tolerates_taint(toleration: dict[str, Any], t: model.Taint, want: bool) -> None:
    import msgspec

    assert tolerates(msgspec.convert(toleration, model.Toleration), t) is want


# ---------------------------------------------------------------- NodeName


@pytest.mark.parametrize(
    ("node_name", "want_ok"),
    [("", {"foo": True, "bar": True}), ("foo", {"foo": True, "bar": False}), ("baz", {"foo": False, "bar": False})],
    ids=["no node name: every node", "names this node", "names an unknown node"],
)
def test_node_name_filter(node_name: str, want_ok: dict[str, bool]) -> None:
    t = table([make_node("foo"), make_node("bar")])
    got = filter_statuses(NodeName(), make_pod(spec={"nodeName": node_name} if node_name else {}), t)
    assert {n: s.ok for n, s in got.items()} == want_ok
    for s in got.values():
        if not s.ok:
            assert (s.code, s.reasons) == (UU, ("node(s) didn't match the requested node name",))


# ---------------------------------------------------------------- NodeUnschedulable


@pytest.mark.parametrize(
    ("unschedulable", "tolerations", "want_ok"),
    [
        (False, [], True),
        (True, [], False),
        (True, [tol(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule")], True),
        (True, [tol(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoExecute")], False),
    ],
    ids=["schedulable node", "cordoned node", "tolerates the unschedulable taint", "toleration of another effect"],
)
def test_node_unschedulable_filter(unschedulable: bool, tolerations: list[dict[str, Any]], want_ok: bool) -> None:
    t = table([make_node("n", unschedulable=unschedulable)])
    st = filter_statuses(NodeUnschedulable(), make_pod(spec={"tolerations": tolerations}), t)["n"]
    assert st.ok is want_ok
    if not want_ok:
        assert (st.code, st.reasons) == (UU, ("node(s) were unschedulable",))


# ---------------------------------------------------------------- TaintToleration


@pytest.mark.parametrize(
    ("taints", "tolerations", "want"),
    [
        ([taint("dedicated", "user1", "NoSchedule")], [], UNTOLERATED),
        (
            [taint("dedicated", "user1", "NoSchedule")],
            [tol(key="dedicated", value="user1", effect="NoSchedule")],
            None,
        ),
        (
            [taint("dedicated", "user1", "NoSchedule")],
            [tol(key="dedicated", operator="Equal", value="user2", effect="NoSchedule")],
            UNTOLERATED,
        ),
        ([taint("foo", "bar", "NoSchedule")], [tol(key="foo", operator="Exists", effect="NoSchedule")], None),
        (
            [taint("dedicated", "user2", "NoSchedule"), taint("foo", "bar", "NoSchedule")],
            [tol(key="dedicated", value="user2", effect="NoSchedule"), tol(key="foo", operator="Exists")],
            None,
        ),
        ([taint("foo", "bar", "PreferNoSchedule")], [tol(key="foo", value="bar", effect="NoSchedule")], None),
        ([taint("foo", "bar", "NoExecute")], [], UNTOLERATED),
        ([taint("node-role.kubernetes.io/control-plane", "", "NoSchedule")], [], UNTOLERATED),
    ],
    ids=[
        "a pod with no tolerations on a tainted node",
        "a toleration that matches",
        "a toleration with another value",
        "Exists tolerates any value",
        "every taint tolerated",
        "PreferNoSchedule is not enforced",
        "NoExecute is enforced",
        "a taint with an empty value",
    ],
)
def test_taint_toleration_filter(
    taints: list[model.Taint], tolerations: list[dict[str, Any]], want: str | None
) -> None:
    t = table([make_node("n", taints=taints)])
    st = filter_statuses(TaintToleration(), make_pod(spec={"tolerations": tolerations}), t)["n"]
    if want is None:
        assert st.ok
    else:
        assert (st.code, st.reasons, st.plugin) == (UU, (want,), "TaintToleration")


def test_taint_toleration_gives_every_untolerating_node_the_same_reason() -> None:
    # v1.34.4 no longer names the taint, so nodes with different taints share
    # one FailedScheduling histogram entry ("2 node(s) had untolerated taint(s)").
    nodes = [
        make_node("a", taints=[taint("x", "1", "NoSchedule"), taint("y", "2", "NoSchedule")]),
        make_node("b", taints=[taint("y", "2", "NoExecute")]),
        make_node("c"),
        make_node("d", taints=[taint("z", "3", "PreferNoSchedule")]),
    ]
    got = filter_statuses(TaintToleration(), make_pod(), table(nodes))
    assert {n: (s.code, s.reasons) for n, s in got.items()} == {
        "a": (UU, (UNTOLERATED,)),
        "b": (UU, (UNTOLERATED,)),
        "c": (fw.Code.SUCCESS, ()),
        "d": (fw.Code.SUCCESS, ()),
    }
    assert UNTOLERATED == "node(s) had untolerated taint(s)"


# taint_toleration_test.go TestTaintTolerationScore
@pytest.mark.parametrize(
    ("tolerations", "node_taints", "want"),
    [
        (
            [tol(key="foo", operator="Equal", value="bar", effect="PreferNoSchedule")],
            {"A": [], "B": [taint("foo", "bar", "PreferNoSchedule")], "C": [taint("foo", "blah", "PreferNoSchedule")]},
            {"A": 100, "B": 100, "C": 0},
        ),
        (
            [
                tol(key="cpu-type", operator="Equal", value="arm64", effect="PreferNoSchedule"),
                tol(key="disk-type", operator="Equal", value="ssd", effect="PreferNoSchedule"),
            ],
            {
                "A": [],
                "B": [taint("cpu-type", "arm64", "PreferNoSchedule")],
                "C": [taint("cpu-type", "arm64", "PreferNoSchedule"), taint("disk-type", "ssd", "PreferNoSchedule")],
            },
            {"A": 100, "B": 100, "C": 100},
        ),
        (
            [tol(key="foo", operator="Equal", value="bar", effect="NoSchedule")],
            {
                "A": [],
                "B": [taint("cpu-type", "arm64", "NoSchedule")],
                "C": [taint("cpu-type", "arm64", "PreferNoSchedule"), taint("cpu-type", "arm64", "PreferNoSchedule")],
            },
            {"A": 100, "B": 100, "C": 0},
        ),
        (
            [],
            {
                "A": [taint("a", "1", "PreferNoSchedule")],
                "B": [taint("a", "1", "PreferNoSchedule"), taint("b", "1", "PreferNoSchedule")],
                "C": [],
            },
            {"A": 50, "B": 0, "C": 100},
        ),
    ],
    ids=[
        "tolerated taints score like untainted nodes",
        "all PreferNoSchedule taints tolerated",
        "NoSchedule tolerations do not count for scoring",
        "fewer intolerable taints score higher",
    ],
)
def test_taint_toleration_score(
    tolerations: list[dict[str, Any]], node_taints: dict[str, list[model.Taint]], want: dict[str, int]
) -> None:
    t = table([make_node(n, taints=ts) for n, ts in node_taints.items()])
    assert scores(TaintToleration(), make_pod(spec={"tolerations": tolerations}), t) == want


# ---------------------------------------------------------------- NodeAffinity


def req_terms(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
        }
    }


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)}


FILTER_CASES: list[tuple[str, dict[str, Any], dict[str, str], bool]] = [
    ("no selector", {}, {}, True),
    ("nodeSelector missing label", {"nodeSelector": {"foo": "bar"}}, {}, False),
    ("nodeSelector matches", {"nodeSelector": {"foo": "bar"}}, {"foo": "bar"}, True),
    ("nodeSelector other value", {"nodeSelector": {"foo": "bar"}}, {"foo": "baz"}, False),
    ("In matches", req_terms({"matchExpressions": [expr("foo", "In", "bar", "value2")]}), {"foo": "bar"}, True),
    (
        "Gt matches",
        req_terms({"matchExpressions": [expr("kernel-version", "Gt", "0204")]}),
        {"kernel-version": "0206"},
        True,
    ),
    (
        "Gt not greater",
        req_terms({"matchExpressions": [expr("kernel-version", "Gt", "0206")]}),
        {"kernel-version": "0206"},
        False,
    ),
    ("Lt on a non-integer label", req_terms({"matchExpressions": [expr("v", "Lt", "10")]}), {"v": "abc"}, False),
    ("NotIn with label absent", req_terms({"matchExpressions": [expr("mem-type", "NotIn", "DDR", "DDR2")]}), {}, True),
    ("NotIn listed", req_terms({"matchExpressions": [expr("mem-type", "NotIn", "DDR")]}), {"mem-type": "DDR"}, False),
    ("Exists", req_terms({"matchExpressions": [expr("GPU", "Exists")]}), {"GPU": "NVIDIA-GRID-K1"}, True),
    ("DoesNotExist", req_terms({"matchExpressions": [expr("GPU", "DoesNotExist")]}), {"GPU": "x"}, False),
    ("empty terms match nothing", req_terms(), {"foo": "bar"}, False),
    ("an empty term matches nothing", req_terms({}), {"foo": "bar"}, False),
    (
        "terms are ORed",
        req_terms(
            {"matchExpressions": [expr("foo", "In", "x")]}, {"matchExpressions": [expr("diffkey", "In", "wrong")]}
        ),
        {"foo": "x"},
        True,
    ),
    (
        "requirements are ANDed",
        req_terms({"matchExpressions": [expr("foo", "In", "x"), expr("bar", "Exists")]}),
        {"foo": "x"},
        False,
    ),
    (
        "nodeSelector and affinity both required",
        {"nodeSelector": {"foo": "bar"}, **req_terms({"matchExpressions": [expr("foo", "Exists")]})},
        {"foo": "baz"},
        False,
    ),
    (
        "an invalid requirement makes its term match nothing",
        req_terms({"matchExpressions": [expr("foo", "In")]}, {"matchExpressions": [expr("foo", "Exists")]}),
        {"foo": "bar"},
        True,
    ),
    ("matchFields by node name", req_terms({"matchFields": [expr("metadata.name", "In", "node1")]}), {}, True),
    ("matchFields another name", req_terms({"matchFields": [expr("metadata.name", "In", "node2")]}), {}, False),
    ("matchFields NotIn", req_terms({"matchFields": [expr("metadata.name", "NotIn", "node1")]}), {}, False),
]


@pytest.mark.parametrize(("case", "spec", "node_labels", "want_ok"), FILTER_CASES, ids=[c[0] for c in FILTER_CASES])
def test_node_affinity_filter(case: str, spec: dict[str, Any], node_labels: dict[str, str], want_ok: bool) -> None:
    t = table([make_node("node1", labels=node_labels)])
    st = filter_statuses(NodeAffinity(), make_pod(spec=spec), t)["node1"]
    assert st.ok is want_ok
    if not want_ok:
        assert (st.code, st.reasons) == (UU, ("node(s) didn't match Pod's node affinity/selector",))


def test_node_affinity_pre_filter_skips_pods_without_node_constraints() -> None:
    res = NodeAffinity().pre_filter(fw.CycleState(), PodInfo.of(make_pod()), table([]))
    assert res.status.code == fw.Code.SKIP


@pytest.mark.parametrize(
    ("terms", "want_names", "want_code"),
    [
        ([{"matchFields": [expr("metadata.name", "In", "a", "b")]}], {"a", "b"}, fw.Code.SUCCESS),
        (
            [{"matchFields": [expr("metadata.name", "In", "a")]}, {"matchFields": [expr("metadata.name", "In", "b")]}],
            {"a", "b"},
            fw.Code.SUCCESS,
        ),
        (
            [{"matchFields": [expr("metadata.name", "In", "a"), expr("metadata.name", "In", "b")]}],
            None,
            UU,
        ),
        (
            [{"matchFields": [expr("metadata.name", "In", "a")]}, {"matchExpressions": [expr("foo", "Exists")]}],
            None,
            fw.Code.SUCCESS,
        ),
    ],
    ids=["one term names nodes", "union over terms", "conflicting names in one term", "a term without names"],
)
def test_node_affinity_pre_filter_narrows_to_named_nodes(
    terms: list[dict[str, Any]], want_names: set[str] | None, want_code: fw.Code
) -> None:
    res = NodeAffinity().pre_filter(fw.CycleState(), PodInfo.of(make_pod(spec=req_terms(*terms))), table([]))
    assert res.status.code == want_code
    if want_code == UU:
        assert res.status.reasons == ("pod affinity terms conflict",)
    assert (set(res.node_names) if res.node_names is not None else None) == want_names


def test_added_affinity_is_enforced_with_its_own_reason() -> None:
    import msgspec

    args = msgspec.convert(
        {
            "addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expr("zone", "In", "foo")]}]
                }
            }
        },
        NodeAffinityArgs,
    )
    t = table([make_node("in", labels={"zone": "foo"}), make_node("out", labels={"zone": "bar"})])
    got = filter_statuses(NodeAffinity(args), make_pod(), t)
    assert got["in"].ok
    assert got["out"].reasons == ("node(s) didn't match scheduler-enforced node affinity",)


# node_affinity_test.go TestNodeAffinityPriority
def pref(*terms: tuple[int, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": w, "preference": {"matchExpressions": exprs}} for w, exprs in terms
                ]
            }
        }
    }


@pytest.mark.parametrize(
    ("spec", "node_labels", "want"),
    [
        ({}, {"m1": {"foo": "bar"}, "m2": {"key": "value"}}, {"m1": 0, "m2": 0}),
        (pref((2, [expr("foo", "In", "bar")])), {"m1": {"foo": "bar"}, "m2": {"key": "value"}}, {"m1": 100, "m2": 0}),
        (
            pref(
                (2, [expr("foo", "In", "bar")]),
                (4, [expr("key", "In", "value")]),
                (5, [expr("foo", "In", "bar"), expr("key", "In", "value"), expr("az", "In", "az1")]),
            ),
            {"m1": {"foo": "bar"}, "m5": {"foo": "bar", "key": "value", "az": "az1"}, "m2": {"key": "value"}},
            {"m1": 18, "m5": 100, "m2": 36},
        ),
        (pref((0, [expr("foo", "In", "bar")])), {"m1": {"foo": "bar"}}, {"m1": 0}),
    ],
    ids=["no preferences", "one matching preference", "weights summed and normalised", "weight 0 counts nothing"],
)
def test_node_affinity_score(
    spec: dict[str, Any], node_labels: dict[str, dict[str, str]], want: dict[str, int]
) -> None:
    t = table([make_node(n, labels=lbl) for n, lbl in node_labels.items()])
    assert scores(NodeAffinity(), make_pod(spec=spec), t) == want


# ---------------------------------------------------------------- 1.37: comparison operators, NodeName's PreFilter


def _handle(version: features.KubeVersion = features.NEWEST, **gates: bool) -> Handle:
    """A Handle whose features are ``version``'s defaults with ``gates`` set."""
    return dataclasses.replace(Cluster().handle(), features=features.Features.of(version, gates))


COMPARISON_OPS = _handle(TaintTolerationComparisonOperators=True)


# k8s.io/api v0.37.2 core/v1/toleration_test.go TestCompareNumericValues (the Lt / Gt cases).
NUMERIC_CASES = [
    ("Gt", "100", "200", True),
    ("Gt", "200", "100", False),
    ("Gt", "100", "100", False),
    ("Gt", "-100", "-50", True),
    ("Gt", "-50", "-100", False),
    ("Gt", "0", "1", True),
    ("Gt", "9223372036854775806", "9223372036854775807", True),
    ("Lt", "200", "100", True),
    ("Lt", "100", "200", False),
    ("Lt", "100", "100", False),
    ("Lt", "-50", "-100", True),
    ("Lt", "-100", "-50", False),
    ("Lt", "0", "-1", True),
    ("Gt", "abc", "100", False),
    ("Gt", "", "100", False),
    ("Gt", "0100", "200", False),
    ("Gt", "+100", "200", False),
    ("Gt", "100.5", "200", False),
    ("Gt", "-", "100", False),
    ("Gt", "100", "xyz", False),
    ("Gt", "100", "", False),
    ("Gt", "100", "0200", False),
    ("Lt", "100", "+200", False),
    ("Lt", "100", " 200 ", False),
    ("Gt", "0", "0", False),
    ("Lt", "0", "0", False),
    ("Gt", "0", "9223372036854775807", True),
    ("Lt", "0", "-9223372036854775808", True),
    # Berth: past int64 (strconv.ParseInt fails) and non-ASCII digits (IsDecimalInteger).
    ("Gt", "0", "9223372036854775808", False),
    ("Gt", "0", "\u0661", False),
    ("Gt", "0", "9" * 5000, False),
]


@pytest.mark.parametrize(
    ("op", "toleration_value", "taint_value", "want"),
    NUMERIC_CASES,
    ids=[f"{op} {tv!r} taint {tn[:24]!r}" for op, tv, tn, _ in NUMERIC_CASES],
)
def test_lt_and_gt_compare_the_values_as_int64(op: str, toleration_value: str, taint_value: str, want: bool) -> None:
    t = model.Toleration(key="sla", operator=op, value=toleration_value, effect="NoSchedule")
    assert tolerates(t, taint("sla", taint_value, "NoSchedule"), comparison_operators=True) is want
    # Without TaintTolerationComparisonOperators they tolerate nothing (ToleratesTaint's rule 5).
    assert tolerates(t, taint("sla", taint_value, "NoSchedule")) is False


SLA = "node.kubernetes.io/sla"
PRIORITY = "node.example.com/priority-level"

# taint_toleration_test.go (v1.37.2) TestTaintTolerationFilter's comparison cases and
# TestTaintTolerationFilterWithFeatureGate: (case, tolerations, taints, gate on, tolerated)
COMPARISON_FILTER_CASES = [
    (
        "Pod with Gt toleration cannot be scheduled on node when taint value is lower than threshold",
        [tol(key=PRIORITY, operator="Gt", value="950", effect="NoSchedule")],
        [taint(PRIORITY, "800", "NoSchedule")],
        True,
        False,
    ),
    (
        "Pod with Gt toleration can be scheduled on node when taint value is higher than threshold",
        [tol(key=SLA, operator="Gt", value="750", effect="NoSchedule")],
        [taint(SLA, "950", "NoSchedule")],
        True,
        True,
    ),
    (
        "Pod with Lt toleration cannot be scheduled on node when taint value is higher than threshold",
        [tol(key=PRIORITY, operator="Lt", value="800", effect="NoSchedule")],
        [taint(PRIORITY, "950", "NoSchedule")],
        True,
        False,
    ),
    (
        "Pod with Lt toleration can be scheduled on node when taint value is lower than threshold",
        [tol(key=SLA, operator="Lt", value="950", effect="NoSchedule")],
        [taint(SLA, "800", "NoSchedule")],
        True,
        True,
    ),
    (
        "Pod with Gt toleration cannot be scheduled on node with non-numeric taint value",
        [tol(key=SLA, operator="Gt", value="950", effect="NoSchedule")],
        [taint(SLA, "high", "NoSchedule")],
        True,
        False,
    ),
    (
        "Pod with Gt toleration cannot be scheduled when feature gate is disabled",
        [tol(key=SLA, operator="Gt", value="750", effect="NoSchedule")],
        [taint(SLA, "950", "NoSchedule")],
        False,
        False,
    ),
    (
        "Pod with Lt toleration cannot be scheduled when feature gate is disabled",
        [tol(key=SLA, operator="Lt", value="950", effect="NoSchedule")],
        [taint(SLA, "800", "NoSchedule")],
        False,
        False,
    ),
    (
        "Pod with mixed tolerations (Equal and Gt) when feature gate is disabled - only Equal is honored",
        [
            tol(key="dedicated", operator="Equal", value="user1", effect="NoSchedule"),
            tol(key=SLA, operator="Gt", value="750", effect="NoSchedule"),
        ],
        [taint("dedicated", "user1", "NoSchedule")],
        False,
        True,
    ),
    (
        "Pod with mixed tolerations, Gt toleration needed but filtered out when feature gate is disabled",
        [
            tol(key="dedicated", operator="Equal", value="user1", effect="NoSchedule"),
            tol(key=SLA, operator="Gt", value="750", effect="NoSchedule"),
        ],
        [taint("dedicated", "user1", "NoSchedule"), taint(SLA, "950", "NoSchedule")],
        False,
        False,
    ),
]


@pytest.mark.parametrize(
    ("name", "tolerations", "taints", "gate", "tolerated"),
    COMPARISON_FILTER_CASES,
    ids=[c[0] for c in COMPARISON_FILTER_CASES],
)
def test_taint_toleration_filter_with_comparison_operators(
    name: str, tolerations: list[dict[str, Any]], taints: list[model.Taint], gate: bool, tolerated: bool
) -> None:
    plugin = TaintToleration(handle=_handle(TaintTolerationComparisonOperators=gate))
    st = filter_statuses(
        plugin, make_pod(spec={"tolerations": tolerations}), table([make_node("nodeA", taints=taints)])
    )
    got = st["nodeA"]
    assert got.ok is tolerated
    if not tolerated:
        assert (got.code, got.reasons) == (UU, (UNTOLERATED,))


@pytest.mark.parametrize(
    ("toleration", "node_taints", "want"),
    [
        (
            # "Numeric Gt operator: pod with Gt toleration prefers nodes with matching SLA taint"
            tol(key=SLA, operator="Gt", value="950", effect="PreferNoSchedule"),
            {"nodeA": [taint(SLA, "800", "PreferNoSchedule")], "nodeB": [taint(SLA, "999", "PreferNoSchedule")]},
            {"nodeA": 0, "nodeB": 100},
        ),
        (
            # "Numeric Lt operator: pod with Lt toleration prefers nodes with matching SLA taint"
            tol(key=SLA, operator="Lt", value="800", effect="PreferNoSchedule"),
            {"nodeA": [taint(SLA, "950", "PreferNoSchedule")], "nodeB": [taint(SLA, "700", "PreferNoSchedule")]},
            {"nodeA": 0, "nodeB": 100},
        ),
    ],
    ids=["Gt", "Lt"],
)
def test_taint_toleration_score_with_comparison_operators(
    toleration: dict[str, Any], node_taints: dict[str, list[model.Taint]], want: dict[str, int]
) -> None:
    # taint_toleration_test.go (v1.37.2) TestTaintTolerationScore, the numeric cases.
    t = table([make_node(n, taints=ts) for n, ts in node_taints.items()])
    pod = make_pod(spec={"tolerations": [toleration]})
    assert scores(TaintToleration(handle=COMPARISON_OPS), pod, t) == want
    # Off (the default in every release): neither node's taint is tolerated, one each.
    assert scores(TaintToleration(), pod, t) == {n: 0 for n in node_taints}


def test_node_unschedulable_reads_the_gate_but_the_taint_has_no_number() -> None:
    # node_unschedulable.go passes the gate to TolerationsTolerateTaint; the
    # unschedulable taint's value is empty, never a decimal integer.
    pod = make_pod(spec={"tolerations": [tol(key="node.kubernetes.io/unschedulable", operator="Gt", value="0")]})
    t = table([make_node("n", unschedulable=True)])
    assert not filter_statuses(NodeUnschedulable(handle=COMPARISON_OPS), pod, t)["n"].ok


@pytest.mark.parametrize(
    ("version", "node_name", "want"),
    [
        # node_name_test.go (v1.37.2) TestNodeName_PreFilter
        (features.KubeVersion(1, 37), "foo", frozenset({"foo"})),
        (features.KubeVersion(1, 37), "", None),
        # v1.35.4 / v1.36.3 have no PreFilter: every node is filtered.
        (features.KubeVersion(1, 36), "foo", None),
        (features.KubeVersion(1, 35), "foo", None),
    ],
    ids=["1.37 assigned pod", "1.37 unassigned pod", "1.36", "1.35"],
)
def test_node_name_pre_filter_narrows_to_the_named_node_from_1_37(
    version: features.KubeVersion, node_name: str, want: frozenset[str] | None
) -> None:
    pod = PodInfo.of(make_pod(spec={"nodeName": node_name} if node_name else {}))
    res = NodeName(handle=_handle(version)).pre_filter(fw.CycleState(), pod, table([make_node("foo")]))
    assert res.status.ok
    assert res.node_names == want


@pytest.mark.parametrize(
    ("version", "want"),
    [
        (
            features.KubeVersion(1, 37),
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeName].",
        ),
        (
            features.KubeVersion(1, 36),
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match the requested node name.",
        ),
    ],
    ids=str,
)
def test_a_pod_naming_a_full_node_is_told_why_per_release(version: features.KubeVersion, want: str) -> None:
    # The other nodes are not filtered in 1.37 (schedule_one.go: the PreFilter
    # result's absent nodes get "node(s) didn't satisfy plugin(s) [...]").
    cfg = config.parse({"kubernetesVersion": str(version)})
    cluster = Cluster([make_node(n, cpu="1", pods=110) for n in ("a", "b", "c")], config=cfg)
    pod = make_pod("p", requests={"cpu": "2"}, spec={"nodeName": "a"})
    assert cluster.explain(pod).summary == want
