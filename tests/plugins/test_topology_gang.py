"""TopologyGang: the configuration's topologies, the members' annotations, and
the domain a gang is given (Kueue's BestFit, kueue ``tas_flavor_snapshot.go``
``findBestFitDomainBy`` at ff69552e: the fitting domain with the fewest free
pod slots, ties by value)."""

from __future__ import annotations

from typing import Any

import pytest

from berth import config
from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework import registry
from berth.gangs import GangKey, InvalidGang
from berth.gangs import topology as tp
from berth.plugins.topology_gang import TopologyGang
from berth.testing import Cluster, make_node, make_pod

REQUIRED = tp.REQUIRED_ANNOTATION
PREFERRED = tp.PREFERRED_ANNOTATION
HOST = "kubernetes.io/hostname"


def cfg(*levels: str) -> config.BerthConfiguration:
    return config.parse({"topologies": [{"name": "dc", "levels": [{"nodeLabel": lv} for lv in levels]}]})


def node(name: str, cpu: str, pods: int = 110, **labels: str) -> model.Node:
    return make_node(name, cpu=cpu, pods=pods, labels={HOST: name, **labels})


def members(gang: str, count: int, *, cpu: str = "2", **ann: str) -> list[model.Pod]:
    return [
        make_pod(
            f"{gang}-{i}",
            uid=f"{gang}-{i}",
            labels={"kueue.x-k8s.io/pod-group-name": gang},
            annotations={"kueue.x-k8s.io/pod-group-total-count": str(count), **ann},
            requests={"cpu": cpu},
        )
        for i in range(count)
    ]


def plugin_of(cluster: Cluster) -> TopologyGang:
    p = cluster.handle().framework.plugins["TopologyGang"]
    assert isinstance(p, TopologyGang)
    return p


def pre_filter(cluster: Cluster, pod: model.Pod) -> tuple[fw.CycleState, fw.PreFilterResult]:
    state = fw.CycleState()
    return state, plugin_of(cluster).pre_filter(state, PodInfo.of(pod), cluster.snapshot)


# ---------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("topologies", "error"),
    [
        pytest.param(
            [{"name": "dc", "levels": []}], "topologies[0].levels: must have between 1 and 16", id="no levels"
        ),
        pytest.param(
            [{"name": "dc", "levels": [{"nodeLabel": "rack"}, {"nodeLabel": "rack"}]}],
            "topologies[0].levels[1].nodeLabel: 'rack' is already level 0",
            id="duplicate level",
        ),
        pytest.param(
            [{"name": "dc", "levels": [{"nodeLabel": "bad label!"}]}],
            "topologies[0].levels[0].nodeLabel: 'bad label!' is not a valid node label key",
            id="label syntax",
        ),
        pytest.param(
            [{"name": "dc", "levels": [{"nodeLabel": HOST}, {"nodeLabel": "rack"}]}],
            "topologies[0].levels[0].nodeLabel: kubernetes.io/hostname can only be the lowest",
            id="hostname not last",
        ),
        pytest.param(
            [{"name": "dc", "levels": [{"nodeLabel": "a"}]}, {"name": "dc", "levels": [{"nodeLabel": "b"}]}],
            "topologies[1].name: duplicate topology 'dc'",
            id="duplicate name",
        ),
        pytest.param(
            [{"name": "dc", "levels": [{"label": "rack"}]}],
            "topologies[0].levels[0].label: unknown field",
            id="unknown field",
        ),
    ],
)
def test_invalid_topologies_are_config_errors(topologies: list[dict[str, Any]], error: str) -> None:
    with pytest.raises(config.ConfigError) as e:
        config.parse({"topologies": topologies})
    assert error in str(e.value)


@pytest.mark.parametrize(
    ("topologies", "enabled"), [([], False), ([{"name": "dc", "levels": [{"nodeLabel": "rack"}]}], True)]
)
def test_the_plugin_runs_by_default_only_when_topologies_are_configured(
    topologies: list[dict[str, Any]], enabled: bool
) -> None:
    c = config.parse({"topologies": topologies})
    resolved = registry.resolve_profile(c.profiles[0], topology_aware=bool(c.topologies))
    assert ("TopologyGang" in resolved.points["filter"]) is enabled
    assert ("TopologyGang" in resolved.points["reserve"]) is enabled


# ---------------------------------------------------------------- annotations


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        pytest.param({}, None, id="none"),
        pytest.param({tp.UNCONSTRAINED_ANNOTATION: "true"}, None, id="unconstrained"),
        pytest.param({REQUIRED: "rack"}, tp.Constraint(REQUIRED, "rack", ("rack",), True), id="required"),
        pytest.param(
            {PREFERRED: "rack"}, tp.Constraint(PREFERRED, "rack", ("rack", "block"), False), id="preferred goes up"
        ),
        pytest.param({PREFERRED: "block"}, tp.Constraint(PREFERRED, "block", ("block",), False), id="preferred top"),
    ],
)
def test_a_members_annotations_give_its_constraint(annotations: dict[str, str], want: tp.Constraint | None) -> None:
    assert tp.constraint_of(annotations, cfg("block", "rack", HOST).topologies) == want


@pytest.mark.parametrize(
    ("annotations", "error"),
    [
        pytest.param({REQUIRED: "zone"}, "'zone' is not a level of any configured topology", id="unknown level"),
        pytest.param({REQUIRED: "rack", PREFERRED: "rack"}, "are both set", id="both"),
    ],
)
def test_bad_annotations_are_refused_naming_the_key(annotations: dict[str, str], error: str) -> None:
    with pytest.raises(InvalidGang, match=error):
        tp.constraint_of(annotations, cfg("block", "rack", HOST).topologies)


# ---------------------------------------------------------------- choosing a domain

#: Three racks of two nodes; members of 2 cpu.
RACKS = [
    node("a1", "8", rack="r1"),
    node("a2", "8", rack="r1"),  # 8 slots
    node("b1", "4", rack="r2"),
    node("b2", "4", rack="r2"),  # 4 slots
    node("c1", "6", rack="r3"),
    node("c2", "6", rack="r3"),  # 6 slots
]


@pytest.mark.parametrize(
    ("nodes", "count", "want"),
    [
        pytest.param(RACKS, 4, "rack=r2", id="best fit: the fullest rack that holds the gang"),
        pytest.param(RACKS, 5, "rack=r3", id="too big for r2: the next tightest"),
        pytest.param(RACKS, 8, "rack=r1", id="only the big rack holds it"),
        pytest.param(
            [node("x1", "4", rack="r2"), node("x2", "4", rack="r1")], 2, "rack=r1", id="ties go to the first value"
        ),
        pytest.param(
            [node("p1", "8", pods=2, rack="r1"), node("p2", "4", rack="r2"), node("p3", "2", rack="r2")],
            3,
            "rack=r2",
            id="the pods limit counts",
        ),
    ],
)
def test_a_required_gang_gets_the_best_fitting_domain(nodes: list[model.Node], count: int, want: str) -> None:
    gang = members("g", count, **{REQUIRED: "rack"})
    cluster = Cluster(nodes, gang, config=cfg("rack", HOST))
    _, res = pre_filter(cluster, gang[0])
    assert res.status.ok, res.status
    statuses = cluster.filter(plugin_of(cluster), gang[0])
    inside = {n for n, st in statuses.items() if st.ok}
    assert inside == {n.metadata.name for n in nodes if f"rack={n.metadata.labels['rack']}" == want}
    outside = [st for st in statuses.values() if not st.ok]
    assert all(
        st.code == fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        and st.message() == f"node(s) didn't match the gang's topology domain {want}"
        for st in outside
    )


def test_no_domain_holds_the_gang_every_member_is_unresolvable_naming_the_largest() -> None:
    gang = members("g", 4, **{REQUIRED: "rack"})
    nodes = [node(f"n{r}{i}", "3", rack=f"r{r}") for r in (1, 2) for i in range(2)]
    cluster = Cluster([*nodes, node("n31", "5", rack="r3")], gang, config=cfg("rack", HOST))
    for pod in gang:
        _, res = pre_filter(cluster, pod)
        assert res.status.code == fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert res.status.message() == (
            "no domain of topology level rack can hold the gang's 4 unplaced pods; the largest free, rack=r1, holds 2 "
            "(rack=r2: 2 of 4 members fit; rack=r3: 2 of 4 members fit)"
        )


def test_a_preferred_gang_no_domain_holds_is_placed_anywhere() -> None:
    gang = members("g", 3, **{PREFERRED: "rack"})
    cluster = Cluster([node("n1", "4", rack="r1"), node("n2", "2", rack="r2")], gang, config=cfg("rack", HOST))
    _, res = pre_filter(cluster, gang[0])
    assert res.status.code == fw.Code.SKIP
    assert all(st.ok for st in cluster.filter(plugin_of(cluster), gang[0]).values())


def test_members_already_placed_pin_the_domain() -> None:
    gang = members("g", 3, **{REQUIRED: "rack"})
    gang[0].spec.node_name = "c1"  # bound in r3 though r2 is the tighter fit
    cluster = Cluster(RACKS, gang, config=cfg("rack", HOST))
    _, res = pre_filter(cluster, gang[1])
    assert res.status.ok
    assert {n for n, st in cluster.filter(plugin_of(cluster), gang[1]).items() if st.ok} == {"c1", "c2"}


# ---------------------------------------------------------------- the gang's record


def test_reserve_records_the_domain_until_the_gang_is_placed_or_fails() -> None:
    gang = members("g", 2, **{REQUIRED: "rack"})
    cluster = Cluster(RACKS, gang, config=cfg("rack", HOST))
    plugin, key = plugin_of(cluster), GangKey("kueue", "default", "g")
    state, _ = pre_filter(cluster, gang[0])
    assert plugin.chosen(key) is None  # a PreFilter alone (a dry run, `berth why`) records nothing
    cluster.berth.core.cache.assume_pod(PodInfo.of(gang[0]), "b1")
    plugin.reserve(state, PodInfo.of(gang[0]), "b1")
    assert str(plugin.chosen(key)) == "rack=r2"
    plugin.unreserve(state, PodInfo.of(gang[0]), "b1")  # a member failed, or the Permit wait timed out
    assert plugin.chosen(key) is None
    plugin.reserve(state, PodInfo.of(gang[0]), "b1")
    cluster.berth.core.cache.assume_pod(PodInfo.of(gang[1]), "b2")
    plugin.reserve(state, PodInfo.of(gang[1]), "b2")  # the last member: the gang is placed whole
    assert plugin.chosen(key) is None


def test_a_second_gang_counts_the_room_the_first_still_owes() -> None:
    """r1 alone holds four members; g has one assumed there and three owed."""
    g = members("g", 4, **{REQUIRED: "rack"})
    h = members("h", 4, **{REQUIRED: "rack"})
    racks = [node("a1", "8", rack="r1"), node("a2", "6", rack="r1"), node("b1", "4", rack="r2")]
    cluster = Cluster(racks, [*g, *h], config=cfg("rack", HOST))
    plugin = plugin_of(cluster)
    state, _ = pre_filter(cluster, g[0])
    cluster.berth.core.cache.assume_pod(PodInfo.of(g[0]), "a1")
    plugin.reserve(state, PodInfo.of(g[0]), "a1")
    _, res = pre_filter(cluster, h[0])
    assert res.status.message() == (
        "no domain of topology level rack can hold the gang's 4 unplaced pods; the largest free, rack=r1, holds 3 "
        "(rack=r2: 2 of 4 members fit)"
    )


def test_explain_shows_the_topology_reason() -> None:
    gang = members("g", 4, **{REQUIRED: "rack"})
    cluster = Cluster(RACKS, gang, config=cfg("rack", HOST))
    ex = cluster.explain(gang[0])
    reasons = {n.node: [(r.plugin, r.reason) for r in n.reasons] for n in ex.nodes}
    # PreFilter narrowed the nodes to the domain (PreFilterResult.NodeNames); Filter says which.
    assert reasons["a1"] == [
        ("PreFilter", "node(s) didn't satisfy plugin(s) [TopologyGang]"),
        ("TopologyGang", "node(s) didn't match the gang's topology domain rack=r2"),
    ]
    assert ex.summary == "2/6 nodes are available"
    big = members("big", 9, **{REQUIRED: "rack"})
    cluster.add(*big)
    ex = cluster.explain(big[0])
    assert [(r.plugin, r.reason) for r in ex.pre_filter_reasons] == [
        (
            "TopologyGang",
            "no domain of topology level rack can hold the gang's 9 unplaced pods; the largest free, rack=r1, holds 8 "
            "(rack=r3: 6 of 9 members fit; rack=r2: 4 of 9 members fit)",
        )
    ]


# ---------------------------------------------------------------- preemption


def _low(name: str, node_name: str) -> model.Pod:
    return make_pod(name, uid=name, requests={"cpu": "3"}, node_name=node_name, priority=0)


def _racks() -> Cluster:
    """r1: 2 nodes, r2: 3 nodes, 4 cpu each, a 3-cpu low-priority pod on each."""
    names = [("r1", f"a{i}") for i in range(2)] + [("r2", f"b{i}") for i in range(3)]
    return Cluster(
        [node(n, "4", rack=r) for r, n in names],
        [_low(f"low-{n}", n) for _, n in names],
        config=cfg("rack", HOST),
    )


@pytest.mark.parametrize(
    ("priority", "policy", "domain"),
    [
        pytest.param(100, None, "rack=r1", id="the tightest rack that holds it once low pods go"),
        pytest.param(0, None, None, id="nothing lower to preempt"),
        pytest.param(100, "Never", None, id="preemptionPolicy Never"),
    ],
)
def test_a_required_gang_no_domain_holds_gets_the_domain_preemption_would_clear(
    priority: int, policy: str | None, domain: str | None
) -> None:
    c = _racks()
    gang = members("g", 4, **{REQUIRED: "rack"})
    for m in gang:
        m.spec.priority = priority
        m.spec.preemption_policy = policy
    c.add(*gang)
    _, res = pre_filter(c, gang[0])
    if domain is None:
        assert res.status.code == fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert "no domain of topology level rack can hold the gang's 4 unplaced pods" in res.status.message()
        return
    assert res.status.ok and res.node_names == {"a0", "a1"}


def test_a_domain_whose_victims_are_still_terminating_stays_the_gangs_domain() -> None:
    """Evictions are not wasted: while r1's victims terminate (still using
    their cpu), the next member's attempt picks r1 again, not r2."""
    c = _racks()
    gang = members("g", 4, **{REQUIRED: "rack"})
    for m in gang:
        m.spec.priority = 100
    c.add(*gang)
    state, res = pre_filter(c, gang[0])
    assert res.node_names == {"a0", "a1"}
    plugin_of(c).post_filter(state, PodInfo.of(gang[0]), c.snapshot, {})
    for n in ("a0", "a1"):
        victim = _low(f"low-{n}", n)
        victim.metadata.deletion_timestamp = "2026-11-28T00:00:00Z"
        c.add(victim)
    _, again = pre_filter(c, gang[1])
    assert again.status.ok and again.node_names == {"a0", "a1"}
