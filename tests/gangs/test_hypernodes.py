"""Volcano HyperNodes as node tier labels (berth/cluster/hypernodes.py): which
HyperNode of each tier holds each node, and which HyperNodes are left out.

Cases marked "volcano" port volcano-sh/volcano (commit ed72c7c8)
``pkg/scheduler/api/hyper_node_info_test.go`` and
``pkg/util/hypernode/member_selector_test.go``."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from berth.cache.table import NodeTable
from berth.cluster import hypernodes, manifests, model
from berth.cluster.documents import ManifestError
from berth.errors import InvalidArgument
from berth.gangs import topology as tp
from berth.gangs.model import InvalidGang

T1, T2, T3, T4 = (hypernodes.tier_label(t) for t in (1, 2, 3, 4))


def node(name: str, **labels: str) -> model.Node:
    return model.Node(metadata=model.ObjectMeta(name=name, labels=labels))


def exact(name: str, kind: str = "Node") -> dict[str, Any]:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def regex(pattern: str) -> dict[str, Any]:
    return {"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}


def labelled(**match: Any) -> dict[str, Any]:
    return {"type": "Node", "selector": {"labelMatch": match}}


def hn(name: str, tier: int, *members: dict[str, Any], tier_name: str = "") -> hypernodes.HyperNode:
    spec = {"tier": tier, "tierName": tier_name, "members": list(members)}
    return msgspec.convert(
        {"apiVersion": hypernodes.API_VERSION, "kind": "HyperNode", "metadata": {"name": name}, "spec": spec},
        hypernodes.HyperNode,
    )


NODES = [
    node("node-0"),
    node("node-1"),
    node("node-2", role="worker"),
    node("prefix-1", role="worker"),
    node("node-5", role="worker", rack="r1"),
    node("node-6", role="master"),
]


def tiers_of(objs: list[hypernodes.HyperNode], nodes: list[model.Node] = NODES) -> dict[str, dict[str, str]]:
    s = hypernodes.HyperNodeSet()
    for obj in objs:
        s.put(obj)
    return s.compute(nodes)


@pytest.mark.parametrize(
    ("objs", "want"),
    [
        pytest.param(
            [hn("s0", 1, exact("node-0"), exact("node-1"))], {T1: {"node-0": "s0", "node-1": "s0"}}, id="exact"
        ),
        pytest.param(
            # volcano TestGetMembers "regex": unanchored, as Go's MatchString.
            [hn("s1", 1, regex("^prefix|node-2"))],
            {T1: {"node-2": "s1", "prefix-1": "s1"}},
            id="regex",
        ),
        pytest.param(
            # volcano TestGetMembers "Label match success with MatchLabels".
            [hn("s4", 1, labelled(matchLabels={"role": "worker"}))],
            {T1: {"node-2": "s4", "prefix-1": "s4", "node-5": "s4"}},
            id="label-match-labels",
        ),
        pytest.param(
            # volcano TestGetMembers "MatchExpressions NotIn operator match success".
            [hn("s6", 1, labelled(matchExpressions=[{"key": "role", "operator": "NotIn", "values": ["worker"]}]))],
            {T1: {"node-0": "s6", "node-1": "s6", "node-6": "s6"}},
            id="label-match-expressions",
        ),
        pytest.param(
            # volcano TestGetMembers "Label selector is not nil, but MatchLabels and MatchExpressions is empty".
            [hn("s5", 1, labelled())],
            {},
            id="empty-label-selector-selects-nothing",
        ),
        pytest.param(
            [
                hn("leaf-a", 1, exact("node-0"), exact("node-1")),
                hn("leaf-b", 1, regex("^node-[256]$")),
                hn("spine", 2, exact("leaf-a", "HyperNode"), exact("leaf-b", "HyperNode"), tier_name="spine"),
                hn("core", 3, exact("spine", "HyperNode")),
            ],
            {
                T1: {
                    "node-0": "leaf-a",
                    "node-1": "leaf-a",
                    "node-2": "leaf-b",
                    "node-5": "leaf-b",
                    "node-6": "leaf-b",
                },
                T2: {n: "spine" for n in ("node-0", "node-1", "node-2", "node-5", "node-6")},
                T3: {n: "core" for n in ("node-0", "node-1", "node-2", "node-5", "node-6")},
            },
            id="nesting-through-ancestors",
        ),
        pytest.param(
            [hn("s0", 1, exact("node-0")), hn("s1", 2, exact("s0", "HyperNode"), exact("missing", "HyperNode"))],
            {T1: {"node-0": "s0"}, T2: {"node-0": "s1"}},
            id="a-missing-member-hypernode-is-skipped",
        ),
        pytest.param(
            # Volcano's exactMatchMember: a HyperNode member by regex is skipped, not an error.
            [
                hn("s0", 1, exact("node-0")),
                hn(
                    "s1",
                    2,
                    exact("s0", "HyperNode"),
                    {"type": "HyperNode", "selector": {"regexMatch": {"pattern": "s.*"}}},
                ),
            ],
            {T1: {"node-0": "s0"}, T2: {"node-0": "s1"}},
            id="hypernode-member-by-regex-is-skipped",
        ),
        pytest.param(
            [hn("s0", 1, exact("ghost"))],
            {},
            id="a-node-not-in-the-cluster-gets-nothing",
        ),
    ],
)
def test_each_node_gets_its_hypernode_per_tier(
    objs: list[hypernodes.HyperNode], want: dict[str, dict[str, str]]
) -> None:
    assert tiers_of(objs) == want


def left_out(
    objs: list[hypernodes.HyperNode], nodes: list[model.Node] = NODES
) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    s = hypernodes.HyperNodeSet()
    for obj in objs:
        s.put(obj)
    labels = s.compute(nodes)
    return dict(s.left_out()), labels


@pytest.mark.parametrize(
    ("objs", "reasons", "want"),
    [
        pytest.param(
            # volcano TestHyperNodesInfo_UpdateHyperNode_WithCycle: s1 -> s3 -> s2 -> s1.
            [
                hn("s2", 3, exact("s1", "HyperNode")),
                hn("s0", 1, exact("node-0"), exact("node-1")),
                hn("s1", 2, exact("s0", "HyperNode"), exact("s3", "HyperNode")),
                hn("s3", 4, exact("s2", "HyperNode")),
            ],
            {n: "cyclic dependency detected: s1 -> s3 -> s2 -> s1" for n in ("s1", "s2", "s3")},
            {T1: {"node-0": "s0", "node-1": "s0"}},
            id="volcano-cycle",
        ),
        pytest.param(
            # volcano TestHyperNodesInfo_UpdateHyperNode_MultipleParents: s1 and s2 both claim s0.
            [
                hn("s0", 1, exact("node-0"), exact("node-1")),
                hn("s1", 2, exact("s0", "HyperNode")),
                hn("s2", 3, exact("s0", "HyperNode")),
            ],
            {"s2": "HyperNode s0 already has a parent s1"},
            {T1: {"node-0": "s0", "node-1": "s0"}, T2: {"node-0": "s1", "node-1": "s1"}},
            id="volcano-multiple-parents",
        ),
        pytest.param(
            [hn("s0", 2, exact("node-0")), hn("s1", 2, exact("s0", "HyperNode"))],
            {"s1": "member HyperNode s0 has tier 2, not below this tier 2"},
            {T2: {"node-0": "s0"}},
            id="member-tier-not-lower",
        ),
        pytest.param(
            [hn("a", 1, regex("^node-[01]$")), hn("b", 1, exact("node-1"))],
            {"b": "node node-1 is also in HyperNode a of tier 1"},
            {T1: {"node-0": "a", "node-1": "a"}},
            id="a-node-in-two-hypernodes-of-one-tier",
        ),
        pytest.param(
            [
                hn("s0", 1, {"type": "Switch", "selector": {"exactMatch": {"name": "node-0"}}}),
                hn("s1", 1, exact("node-1")),
            ],
            {"s0": "spec.members[0].type: 'Switch' must be Node or HyperNode"},
            {T1: {"node-1": "s1"}},
            id="unknown-member-type",
        ),
        pytest.param(
            # volcano TestGetMembers "invalid regex"; the webhook refuses it (admit_hypernode.go).
            [hn("s0", 1, regex("["))],
            {
                "s0": "spec.members[0].selector.regexMatch.pattern: member regexMatch pattern is invalid: "
                "unterminated character set at position 0"
            },
            {},
            id="bad-regex",
        ),
        pytest.param(
            [hn("s0", 1)],
            {"s0": "spec.members: member must have at least one member"},
            {},
            id="no-members",
        ),
        pytest.param(
            [
                hn(
                    "s0",
                    1,
                    {"type": "Node", "selector": {"exactMatch": {"name": "node-0"}, "regexMatch": {"pattern": "x"}}},
                )
            ],
            {"s0": "spec.members[0].selector: must have exactly one of exactMatch, regexMatch, labelMatch"},
            {},
            id="two-selector-kinds",
        ),
        pytest.param(
            [hn("s0", 1, labelled(matchExpressions=[{"key": "role", "operator": "Near"}]))],
            {
                "s0": "spec.members[0].selector.labelMatch.matchExpressions[0].operator: "
                'Invalid value: "Near": not a valid selector operator'
            },
            {},
            id="bad-label-operator",
        ),
    ],
)
def test_a_hypernode_volcano_would_refuse_is_left_out_with_its_reason(
    objs: list[hypernodes.HyperNode], reasons: dict[str, str], want: dict[str, dict[str, str]]
) -> None:
    got_reasons, labels = left_out(objs)
    assert (got_reasons, labels) == (reasons, want)


def test_fixing_the_cycle_brings_the_whole_tree_back() -> None:
    # volcano TestHyperNodesInfo_UpdateHyperNode_WithCycle: "cycle dependency and finally corrected".
    s = hypernodes.HyperNodeSet()
    for obj in (
        hn("s2", 3, exact("s1", "HyperNode")),
        hn("s0", 1, exact("node-0"), exact("node-1")),
        hn("s1", 2, exact("s0", "HyperNode"), exact("s3", "HyperNode")),
        hn("s3", 4, exact("s2", "HyperNode")),
    ):
        s.put(obj)
    before = s.version
    s.put(hn("s1", 2, exact("s0", "HyperNode")))
    assert s.version > before
    assert s.left_out() == {}
    assert s.tiers() == (1, 2, 3, 4)
    got = s.compute(NODES)
    assert {k: v["node-0"] for k, v in got.items()} == {T1: "s0", T2: "s1", T3: "s2", T4: "s3"}
    assert s.remove("s3") and not s.remove("s3")
    assert s.tiers() == (1, 2, 3)


def test_the_node_table_reads_the_tiers_as_labels_a_node_does_not_carry() -> None:
    s = hypernodes.HyperNodeSet()
    s.put(hn("r1", 1, exact("node-0")))
    table = NodeTable.of_nodes([node("node-0"), node("node-1"), node("node-2", **{T1: "own"})])
    assert table.label_column(T1).values == ["own"]  # no derived labels yet
    table.derived = s
    col = table.label_column(T1)
    assert [col.values[c] if c >= 0 else None for c in col.codes[: table.size]] == ["r1", None, "own"]
    s.put(hn("r2", 1, exact("node-1")))  # version moves: the column is rebuilt
    col = table.label_column(T1)
    assert [col.values[c] if c >= 0 else None for c in col.codes[: table.size]] == ["r1", "r2", "own"]
    taken = table.take([1])
    assert taken.label_column(T1).values == ["r2"]


def test_the_topology_lists_the_tiers_highest_first_and_maps_volcano_tiers_exactly() -> None:
    spec = tp.from_hypernodes((1, 3), {"leaf": 1, "spine": 3})
    assert (spec.name, spec.labels) == ("volcano-hypernodes", (T3, T1, tp.HOSTNAME))
    tops = [tp.TopologySpec(name="dc", levels=[tp.TopologyLevelSpec(node_label="rack")]), spec]
    hard = tp.volcano_constraint(model.NetworkTopologySpec(mode="hard", highest_tier_allowed=1), tops)
    assert (hard.levels, hard.required) == ((T1,), True)
    by_name = tp.volcano_constraint(model.NetworkTopologySpec(highest_tier_name="spine"), tops)
    assert (by_name.levels, by_name.level) == ((T1, T3), T3)
    soft = tp.volcano_constraint(model.NetworkTopologySpec(mode="soft"), tops)
    assert (soft.levels, soft.required) == ((T1, T3), False)
    with pytest.raises(InvalidGang, match="failed to find hypernode tier name 'row'"):
        tp.volcano_constraint(model.NetworkTopologySpec(highest_tier_name="row"), tops)
    with pytest.raises(InvalidGang, match=r"highestTierAllowed: 4 is not a tier \(1..3"):
        tp.volcano_constraint(model.NetworkTopologySpec(highest_tier_allowed=4), tops)


def test_the_cluster_file_refuses_a_hypernode_volcano_admission_refuses() -> None:
    doc = {"apiVersion": hypernodes.API_VERSION, "kind": "HyperNode", "metadata": {"name": "s0"}}
    good = {**doc, "spec": {"tier": 1, "members": [exact("node-0")]}}
    assert [h.metadata.name for h in manifests.parse_documents([good]).hypernodes] == ["s0"]
    with pytest.raises(ManifestError, match="member regexMatch pattern is required"):
        manifests.parse_documents([{**doc, "spec": {"tier": 1, "members": [regex("")]}}])
    with pytest.raises(InvalidArgument):
        hypernodes.check(hn("s0", -1, exact("node-0")))


def test_nodes_that_come_go_or_change_labels_follow_their_selectors() -> None:
    s = hypernodes.HyperNodeSet()
    s.put(hn("r1", 1, labelled(matchLabels={"rack": "r1"})))
    s.put(hn("r2", 1, labelled(matchLabels={"rack": "r2"}), regex("^late-")))
    s.put(hn("row", 2, exact("r1", "HyperNode"), exact("r2", "HyperNode")))
    nodes = [node("a", rack="r1"), node("b", rack="r1")]
    assert s.compute(nodes) == {T1: {"a": "r1", "b": "r1"}, T2: {"a": "row", "b": "row"}}
    nodes = [node("a", rack="r2"), node("late-c")]  # a relabelled, b gone, late-c new
    assert s.compute(nodes) == {T1: {"a": "r2", "late-c": "r2"}, T2: {"a": "row", "late-c": "row"}}
    s.put(hn("r2", 1, labelled(matchLabels={"rack": "r2"})))  # the regex member dropped
    assert s.compute(nodes) == {T1: {"a": "r2"}, T2: {"a": "row"}}
    s.remove("row")
    assert s.compute(nodes) == {T1: {"a": "r2"}}
