"""PodTopologySpread's default constraints: the arguments (ported from
kube-scheduler v1.34 ``apis/config/validation/validation_pluginargs_test.go``
TestValidatePodTopologySpreadArgs), the selector deduced from Services and
controllers (``plugins/helper/spread_test.go`` TestDefaultSelector), and
scoring and filtering with defaults (``podtopologyspread/scoring_test.go``
TestPreScoreSkip, TestPreScoreStateEmptyNodes, TestPodTopologySpreadScore;
``filtering_test.go`` TestPreFilterState's default-constraint cases)."""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest

from berth import config, errors
from berth.cache.infos import PodInfo
from berth.cache.table import HOSTNAME_LABEL, ZONE_LABEL
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework import registry
from berth.plugins.podtopologyspread import PodTopologySpread, PodTopologySpreadArgs
from berth.plugins.podtopologyspread.common import default_selector
from berth.plugins.podtopologyspread.scoring import PRE_SCORE_KEY
from berth.scheduling.state import WorkloadStore
from berth.testing import Cluster, filter_statuses, make_node, make_pod, scores

SKEW = "node(s) didn't match pod topology spread constraints"

# ---------------------------------------------------------------- objects


def meta(name: str, namespace: str = "default") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}}


def service(name: str, selector: dict[str, str] | None, namespace: str = "default") -> model.Service:
    return msgspec.convert({**meta(name, namespace), "spec": {"selector": selector}}, model.Service)


def rc(name: str, selector: dict[str, str]) -> model.ReplicationController:
    return msgspec.convert({**meta(name), "spec": {"selector": selector}}, model.ReplicationController)


def rs(name: str, selector: dict[str, Any] | None) -> model.ReplicaSet:
    return msgspec.convert({**meta(name), "spec": {"selector": selector}}, model.ReplicaSet)


def sts(name: str, selector: dict[str, Any]) -> model.StatefulSet:
    return msgspec.convert({**meta(name), "spec": {"selector": selector}}, model.StatefulSet)


OWNED_BY = {"rc": ("v1", "ReplicationController"), "rs": ("apps/v1", "ReplicaSet"), "sts": ("apps/v1", "StatefulSet")}


def pod(
    labels: dict[str, str],
    *,
    owner: tuple[str, str] | None = None,
    name: str = "p",
    node: str = "",
    controller: bool = True,
    constraints: list[dict[str, Any]] | None = None,
) -> model.Pod:
    p = make_pod(name, labels=labels, node_name=node, spec={"topologySpreadConstraints": constraints or []})
    if owner is not None:
        (api_version, kind), owner_name = OWNED_BY[owner[0]], owner[1]
        p.metadata.owner_references = [
            model.OwnerReference(api_version=api_version, kind=kind, name=owner_name, controller=controller)
        ]
    return p


def store(*objs: model.Workload) -> WorkloadStore:
    s = WorkloadStore()
    for o in objs:
        s.put(o)
    return s


# ---------------------------------------------------------------- arguments


def tsc(key: str, when: str = "ScheduleAnyway", max_skew: int = 1, **kw: Any) -> dict[str, Any]:
    return {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when, **kw}


ARGS_CASES: list[tuple[str, dict[str, Any], str | None]] = [
    (
        "valid config",
        {"defaultingType": "List", "defaultConstraints": [tsc("node", max_skew=1), tsc("zone", "DoNotSchedule", 2)]},
        None,
    ),
    ("system defaulting with no constraints (the default)", {}, None),
    ("list defaulting with no constraints", {"defaultingType": "List"}, None),
    (
        "maxSkew less than zero",
        {"defaultingType": "List", "defaultConstraints": [tsc("node", max_skew=-1)]},
        "defaultConstraints[0].maxSkew: Invalid value: -1: not in valid range (0, inf)",
    ),
    (
        "empty topology key",
        {"defaultingType": "List", "defaultConstraints": [tsc("")]},
        "defaultConstraints[0].topologyKey: Required value: can not be empty",
    ),
    (
        "topology key not a qualified name",
        {"defaultingType": "List", "defaultConstraints": [tsc("-zone")]},
        'defaultConstraints[0].topologyKey: Invalid value: "-zone": name part must consist of',
    ),
    (
        "whenUnsatisfiable is empty",
        {"defaultingType": "List", "defaultConstraints": [tsc("node", "")]},
        "defaultConstraints[0].whenUnsatisfiable: Required value: can not be empty",
    ),
    (
        "whenUnsatisfiable contains unsupported action",
        {"defaultingType": "List", "defaultConstraints": [tsc("node", "none")]},
        'defaultConstraints[0].whenUnsatisfiable: Unsupported value: "none": '
        'supported values: "DoNotSchedule", "ScheduleAnyway"',
    ),
    (
        "duplicated constraints",
        {"defaultingType": "List", "defaultConstraints": [tsc("node"), tsc("node", max_skew=2)]},
        'defaultConstraints[1]: Duplicate value: "{node, ScheduleAnyway}"',
    ),
    (
        "label selector present",
        {"defaultingType": "List", "defaultConstraints": [tsc("node", labelSelector={"matchLabels": {"a": "b"}})]},
        "defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector, "
        "as they deduced for each pod",
    ),
    (
        "system default constraints, but has constraints",
        {"defaultingType": "System", "defaultConstraints": [tsc("node")]},
        'defaultingType: Invalid value: "System": when .defaultConstraints are not empty',
    ),
    (
        "wrong constraints",
        {"defaultingType": "Unknown"},
        'defaultingType: Unsupported value: "Unknown": supported values: "System", "List"',
    ),
    (
        "several errors are aggregated",
        {"defaultingType": "List", "defaultConstraints": [tsc("", max_skew=0)]},
        "[defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf), "
        "defaultConstraints[0].topologyKey: Required value: can not be empty]",
    ),
]


@pytest.mark.parametrize(("case", "raw", "want"), ARGS_CASES, ids=[c[0] for c in ARGS_CASES])
def test_args_are_validated_as_upstream(case: str, raw: dict[str, Any], want: str | None) -> None:
    args = msgspec.convert(raw, PodTopologySpreadArgs)
    if want is None:
        args.validate()
        return
    with pytest.raises(errors.InvalidArgument) as e:
        args.validate()
    assert str(e.value).startswith(want)


def test_bad_args_in_a_profile_name_the_plugin_config() -> None:
    cfg = {
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": "Nope"}}],
            }
        ]
    }
    with pytest.raises(ValueError, match=r'defaultingType: Unsupported value: "Nope"'):
        registry.resolve_profile(config.parse(cfg).profiles[0])


def test_system_defaulting_uses_hostname_3_and_zone_5() -> None:
    got = PodTopologySpread(PodTopologySpreadArgs()).default_constraints
    assert [(c.topology_key, c.max_skew, c.when_unsatisfiable) for c in got] == [
        (HOSTNAME_LABEL, 3, "ScheduleAnyway"),
        (ZONE_LABEL, 5, "ScheduleAnyway"),
    ]


# ---------------------------------------------------------------- DefaultSelector


def sel(labels: dict[str, str] | None = None, *exprs: tuple[str, str, list[str]]) -> model.LabelSelector:
    return model.LabelSelector(
        match_labels=labels or {},
        match_expressions=[model.LabelSelectorRequirement(key=k, operator=op, values=v) for k, op, v in exprs],
    )


SELECTOR_CASES: list[tuple[str, model.Pod, list[model.Workload], model.LabelSelector | None]] = [
    ("no objects: nothing", pod({"foo": "bar"}), [], None),
    (
        "a service selecting the pod",
        pod({"foo": "bar", "baz": "sup"}),
        [service("s1", {"foo": "bar"})],
        sel({"foo": "bar"}),
    ),
    ("a service not selecting it", pod({"foo": "bar"}), [service("s1", {"foo": "other"})], None),
    ("a service without a selector selects nothing", pod({"foo": "bar"}), [service("s1", None)], None),
    ("a service of another namespace", pod({"foo": "bar"}), [service("s1", {"foo": "bar"}, "other")], None),
    (
        "two services: selectors merged",
        pod({"foo": "bar", "baz": "sup"}),
        [service("s1", {"foo": "bar"}), service("s2", {"baz": "sup"})],
        sel({"foo": "bar", "baz": "sup"}),
    ),
    (
        "a replication controller owning the pod",
        pod({"foo": "bar", "baz": "sup"}, owner=("rc", "rc1")),
        [rc("rc1", {"foo": "bar"})],
        sel({"foo": "bar"}),
    ),
    (
        "a replica set owning the pod: its requirements",
        pod({"foo": "bar", "baz": "sup"}, owner=("rs", "rs1")),
        [rs("rs1", {"matchLabels": {"foo": "bar"}, "matchExpressions": [{"key": "baz", "operator": "Exists"}]})],
        sel({}, ("foo", "In", ["bar"]), ("baz", "Exists", [])),
    ),
    (
        "a stateful set owning the pod, and a service",
        pod({"foo": "bar", "baz": "sup"}, owner=("sts", "ss1")),
        [sts("ss1", {"matchLabels": {"baz": "sup"}}), service("s1", {"foo": "bar"})],
        sel({"foo": "bar"}, ("baz", "In", ["sup"])),
    ),
    (
        "an owner that is not the controller does not count",
        pod({"foo": "bar"}, owner=("rs", "rs1"), controller=False),
        [rs("rs1", {"matchLabels": {"foo": "bar"}})],
        None,
    ),
    ("the owning replica set is unknown", pod({"foo": "bar"}, owner=("rs", "rs2")), [rs("rs1", {})], None),
    ("an empty replica set selector adds nothing", pod({"foo": "bar"}, owner=("rs", "rs1")), [rs("rs1", {})], None),
]


@pytest.mark.parametrize(("case", "p", "objs", "want"), SELECTOR_CASES, ids=[c[0] for c in SELECTOR_CASES])
def test_default_selector(
    case: str, p: model.Pod, objs: list[model.Workload], want: model.LabelSelector | None
) -> None:
    assert default_selector(p, store(*objs)) == want


# ---------------------------------------------------------------- scoring and filtering


def host(name: str, zone: str | None = None, **extra: str) -> model.Node:
    labels = {HOSTNAME_LABEL: name, **extra}
    if zone is not None:
        labels[ZONE_LABEL] = zone
    return make_node(name, labels=labels)


def cluster(nodes: list[model.Node], pods: list[model.Pod], objs: list[model.Workload]) -> Cluster:
    c = Cluster(nodes, pods)
    for o in objs:
        c.berth.core.on_workload(o)
    return c


FOO = {"matchLabels": {"foo": ""}}
SPREAD_4_3_2_1 = [
    pod({"foo": ""}, name=f"p-{n}{i}", node=f"node-{n}")
    for n, k in zip("abcd", (4, 3, 2, 1), strict=True)
    for i in range(k)
]
NO_ZONE = [host("node-a"), host("node-b"), host("node-c"), host("node-d")]

SCORE_CASES: list[tuple[str, dict[str, Any], model.Pod, list[model.Node], list[model.Pod], list[Any], Any]] = [
    (
        "system defaulting, nodes don't have zone, pods match service",
        {},
        pod({"foo": ""}),
        NO_ZONE,
        SPREAD_4_3_2_1,
        [service("s1", {"foo": ""})],
        # Same scores as if we were using one spreading constraint.
        {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100},
    ),
    (
        "system defaulting, pods owned by a replica set",
        {},
        pod({"foo": ""}, owner=("rs", "rs1")),
        NO_ZONE,
        SPREAD_4_3_2_1,
        [rs("rs1", FOO)],
        {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100},
    ),
    (
        "system defaulting, nothing selects the pod: skipped",
        {},
        pod({"foo": ""}),
        NO_ZONE,
        SPREAD_4_3_2_1,
        [service("s1", {"foo": "other"})],
        {"node-a": 0, "node-b": 0, "node-c": 0, "node-d": 0},
    ),
    (
        "the pod's own constraints replace the defaults",
        {},
        pod({"foo": ""}, constraints=[tsc("zone", labelSelector={"matchLabels": {"bar": ""}})]),
        NO_ZONE,
        SPREAD_4_3_2_1,
        [service("s1", {"foo": ""})],
        # No node has "zone": every node is ignored.
        {"node-a": 0, "node-b": 0, "node-c": 0, "node-d": 0},
    ),
    (
        "the pod doesn't have soft topology spread constraints (List, none)",
        {"defaultingType": "List"},
        pod({"foo": ""}),
        NO_ZONE,
        SPREAD_4_3_2_1,
        [service("s1", {"foo": ""})],
        {"node-a": 0, "node-b": 0, "node-c": 0, "node-d": 0},
    ),
    (
        "default constraints and a replicaset that doesn't match",
        {"defaultingType": "List", "defaultConstraints": [tsc("planet", max_skew=2)]},
        pod({"foo": "bar", "baz": "sup"}, owner=("rs", "rs2")),
        [make_node("node-a", labels={"planet": "mars"})],
        [],
        [rs("rs1", {"matchExpressions": [{"key": "tar", "operator": "Exists"}]})],
        {"node-a": 0},
    ),
    (
        "List defaults spread by their own key",
        {"defaultingType": "List", "defaultConstraints": [tsc("planet")]},
        pod({"foo": ""}, owner=("rs", "rs1")),
        [host("node-a", planet="mars"), host("node-b", planet="mars"), host("node-x", planet="venus")],
        [pod({"foo": ""}, name="p-a1", node="node-a"), pod({"bar": ""}, name="p-x1", node="node-x")],
        [rs("rs1", FOO)],
        {"node-a": 0, "node-b": 0, "node-x": 100},
    ),
    (
        "List defaults require every key: a node without it is ignored",
        {"defaultingType": "List", "defaultConstraints": [tsc("planet")]},
        pod({"foo": ""}, owner=("rs", "rs1")),
        [host("node-a", planet="mars"), host("node-n")],
        [pod({"foo": ""}, name="p-a1", node="node-a")],
        [rs("rs1", FOO)],
        {"node-a": 100, "node-n": 0},
    ),
]


@pytest.mark.parametrize(
    ("case", "args", "p", "nodes", "pods", "objs", "want"), SCORE_CASES, ids=[c[0] for c in SCORE_CASES]
)
def test_score_with_default_constraints(
    case: str,
    args: dict[str, Any],
    p: model.Pod,
    nodes: list[model.Node],
    pods: list[model.Pod],
    objs: list[Any],
    want: dict[str, int],
) -> None:
    c = cluster(nodes, pods, objs)
    plugin = PodTopologySpread(msgspec.convert(args, PodTopologySpreadArgs), c.handle())
    assert scores(plugin, p, c.snapshot) == want


def test_system_defaults_count_nodes_without_a_zone_as_one_more_zone() -> None:
    """TestPreScoreStateEmptyNodes "system default constraints and a replicaset":
    no node is ignored; the zone weight counts "mars" and the unlabelled "" zone."""
    nodes = [host("node-a", "mars"), host("node-b", "mars"), host("node-c"), host("node-d")]
    c = cluster(nodes, [], [rs("rs1", FOO)])
    plugin = PodTopologySpread(None, c.handle())
    state = fw.CycleState()
    snap = c.snapshot
    assert plugin.pre_score(state, PodInfo.of(pod({"foo": "tar"}, owner=("rs", "rs1"))), snap, snap.alive_rows()).ok
    s = state.get(PRE_SCORE_KEY)
    assert s is not None
    assert [(x.key, x.max_skew) for x in s.constraints] == [(HOSTNAME_LABEL, 3), (ZONE_LABEL, 5)]
    assert not s.ignored.any()
    assert s.weights == pytest.approx([math.log(4 + 2), math.log(2 + 2)])


FILTER_CASES: list[tuple[str, dict[str, Any], list[Any], dict[str, str | None]]] = [
    (
        "System defaults never filter",
        {},
        [service("s1", {"foo": ""})],
        {"node-a": None, "node-b": None},
    ),
    (
        "List DoNotSchedule defaults filter",
        {"defaultingType": "List", "defaultConstraints": [tsc(HOSTNAME_LABEL, "DoNotSchedule")]},
        [service("s1", {"foo": ""})],
        {"node-a": SKEW, "node-b": None},
    ),
    (
        "List DoNotSchedule defaults, nothing selects the pod",
        {"defaultingType": "List", "defaultConstraints": [tsc(HOSTNAME_LABEL, "DoNotSchedule")]},
        [],
        {"node-a": None, "node-b": None},
    ),
]


@pytest.mark.parametrize(("case", "args", "objs", "want"), FILTER_CASES, ids=[c[0] for c in FILTER_CASES])
def test_filter_with_default_constraints(
    case: str, args: dict[str, Any], objs: list[Any], want: dict[str, str | None]
) -> None:
    existing = [pod({"foo": ""}, name="p-a1", node="node-a")]
    c = cluster([host("node-a"), host("node-b")], existing, objs)
    plugin = PodTopologySpread(msgspec.convert(args, PodTopologySpreadArgs), c.handle())
    got = filter_statuses(plugin, pod({"foo": ""}), c.snapshot)
    assert {n: (None if s.ok else s.reasons[0]) for n, s in got.items()} == want


# ---------------------------------------------------------------- the store


def test_an_invalid_workload_from_an_informer_is_ignored() -> None:
    c = Cluster([], [])
    core = c.berth.core
    core.on_workload(rs("rs1", FOO))
    bad = rs("rs1", {"matchExpressions": [{"key": "foo", "operator": "Near"}]})
    core.on_workload(bad)
    assert core.workloads.get("ReplicaSet", "default", "rs1") is None


def test_a_deleted_workload_stops_selecting() -> None:
    s = store(service("s1", {"foo": "bar"}))
    s.remove("Service", "default", "s1")
    assert default_selector(pod({"foo": "bar"}), s) is None
