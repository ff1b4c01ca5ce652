"""Every dialect's topology request read into Berth's one Constraint
(berth/gangs/topology.py), and the configuration's ``topology:`` spelling."""

from __future__ import annotations

from typing import Any

import pytest

from berth import config
from berth.cluster import model
from berth.gangs import InvalidGang
from berth.gangs import topology as tp

HOST = tp.HOSTNAME
LEVELS = ("zone", "block", "rack", HOST)
TOPOLOGIES = [tp.TopologySpec(name="dc", levels=[tp.TopologyLevelSpec(node_label=lv) for lv in LEVELS])]


def nt(**raw: Any) -> model.NetworkTopologySpec:
    return model.NetworkTopologySpec(**raw)


@pytest.mark.parametrize(
    ("annotations", "extra", "levels", "required", "slices"),
    [
        # Kueue (topology_types.go): required is one level; preferred climbs to the widest.
        ({tp.REQUIRED_ANNOTATION: "rack"}, {}, ("rack",), True, None),
        ({tp.PREFERRED_ANNOTATION: "rack"}, {}, ("rack", "block", "zone"), False, None),
        ({tp.UNCONSTRAINED_ANNOTATION: "true"}, {}, None, False, None),
        # Kueue slices: each 4 members in one rack, the gang in one block.
        (
            {tp.REQUIRED_ANNOTATION: "block", tp.SLICE_REQUIRED_ANNOTATION: "rack", tp.SLICE_SIZE_ANNOTATION: "4"},
            {},
            ("block",),
            True,
            ("rack", 4),
        ),
        # Slices alone: the gang anywhere, each slice in one rack.
        (
            {tp.SLICE_REQUIRED_ANNOTATION: "rack", tp.SLICE_SIZE_ANNOTATION: "2"},
            {},
            ("zone",),
            False,
            ("rack", 2),
        ),
        # Berth's own, Kueue's shape.
        ({tp.BERTH_REQUIRED_ANNOTATION: "block"}, {}, ("block",), True, None),
        ({tp.BERTH_PREFERRED_ANNOTATION: "block"}, {}, ("block", "zone"), False, None),
        # KAI: preferred within required (required = the widest level allowed).
        (
            {tp.KAI_REQUIRED_ANNOTATION: "zone", tp.KAI_PREFERRED_ANNOTATION: "rack", tp.KAI_TOPOLOGY_ANNOTATION: "dc"},
            {},
            ("rack", "block", "zone"),
            True,
            None,
        ),
        ({tp.KAI_REQUIRED_ANNOTATION: "rack", tp.KAI_TOPOLOGY_ANNOTATION: "dc"}, {}, ("rack",), True, None),
        ({tp.KAI_PREFERRED_ANNOTATION: "block"}, {}, ("block", "zone"), False, None),
        # Volcano: tier 1 = rack (the narrowest non-host level), hard by default, highestTierAllowed 1.
        ({}, {"network_topology": nt()}, ("rack",), True, None),
        ({}, {"network_topology": nt(mode="hard", highest_tier_allowed=2)}, ("rack", "block"), True, None),
        ({}, {"network_topology": nt(mode="soft")}, ("rack", "block", "zone"), False, None),
        # The Workload API (v1alpha3 TopologyConstraint.key): one required level.
        ({}, {"workload_keys": ["block"]}, ("block",), True, None),
        # Two dialects asking the same: fine.
        ({tp.REQUIRED_ANNOTATION: "rack", tp.BERTH_REQUIRED_ANNOTATION: "rack"}, {}, ("rack",), True, None),
    ],
)
def test_each_dialect_reads_into_one_constraint(
    annotations: dict[str, str],
    extra: dict[str, Any],
    levels: tuple[str, ...] | None,
    required: bool,
    slices: tuple[str, int] | None,
) -> None:
    c = tp.constraint_of(annotations, TOPOLOGIES, **extra)
    if levels is None:
        assert c is None
        return
    assert c is not None
    assert (c.levels, c.required) == (levels, required)
    assert (None if c.slice_level is None else (c.slice_level, c.slice_size)) == slices


@pytest.mark.parametrize(
    ("annotations", "extra", "message"),
    [
        (
            {tp.REQUIRED_ANNOTATION: "rack", tp.PREFERRED_ANNOTATION: "rack"},
            {},
            f"{tp.REQUIRED_ANNOTATION} and {tp.PREFERRED_ANNOTATION} are both set",
        ),
        ({tp.BERTH_REQUIRED_ANNOTATION: "row"}, {}, "'row' is not a level of any configured topology"),
        (
            {tp.REQUIRED_ANNOTATION: "rack", tp.BERTH_REQUIRED_ANNOTATION: "block"},
            {},
            "ask for different topologies: keep one",
        ),
        (
            {tp.KAI_REQUIRED_ANNOTATION: "rack", tp.KAI_PREFERRED_ANNOTATION: "zone"},
            {},
            "'zone' is wider than the required level 'rack'",
        ),
        ({tp.KAI_REQUIRED_ANNOTATION: "rack", tp.KAI_TOPOLOGY_ANNOTATION: "other"}, {}, "no topology named 'other'"),
        ({tp.SLICE_REQUIRED_ANNOTATION: "rack"}, {}, f"{tp.SLICE_SIZE_ANNOTATION}: required"),
        (
            {tp.SLICE_REQUIRED_ANNOTATION: "rack", tp.SLICE_SIZE_ANNOTATION: "0"},
            {},
            "'0' must be an integer greater than 0",
        ),
        (
            {tp.SLICE_REQUIRED_ANNOTATION: "rack", tp.SLICE_SIZE_ANNOTATION: "x"},
            {},
            "'x' must be an integer greater than 0",
        ),
        (
            {tp.REQUIRED_ANNOTATION: "rack", tp.SLICE_REQUIRED_ANNOTATION: "block", tp.SLICE_SIZE_ANNOTATION: "2"},
            {},
            "must be at or below the podset's level 'rack'",
        ),
        ({}, {"network_topology": nt(mode="loose")}, "mode: 'loose' must be hard or soft"),
        ({}, {"network_topology": nt(highest_tier_allowed=4)}, "highestTierAllowed: 4 is not a tier (1..3"),
        ({}, {"network_topology": nt(highest_tier_name="leaf")}, "highestTierName: tier names come from HyperNodes"),
        ({}, {"workload_keys": ["rack", "block"]}, "at most 1 item, got 2"),
        ({}, {"workload_keys": ["row"]}, "topology[0].key: 'row' is not a level"),
    ],
)
def test_a_bad_request_names_the_key_and_why(annotations: dict[str, str], extra: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidGang) as e:
        tp.constraint_of(annotations, TOPOLOGIES, **extra)
    assert message in str(e.value)


def test_volcano_tiers_count_up_from_the_narrowest_level_that_is_not_the_host() -> None:
    assert tp.volcano_tiers(TOPOLOGIES[0]) == ("rack", "block", "zone")


def test_the_issues_topology_key_is_one_topology_named_default() -> None:
    cfg = config.parse({"topology": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": HOST}]}})
    assert [(t.name, t.labels) for t in cfg.topologies] == [("default", ("rack", HOST))]
    assert cfg.topology is None


def test_topology_and_a_topology_named_default_conflict() -> None:
    with pytest.raises(config.ConfigError, match="a topology named 'default' is already in topologies"):
        config.parse(
            {
                "topology": {"levels": [{"nodeLabel": "rack"}]},
                "topologies": [{"name": "default", "levels": [{"nodeLabel": "block"}]}],
            }
        )


def test_a_bad_topology_level_is_refused_with_its_path() -> None:
    with pytest.raises(config.ConfigError, match=r"topologies\[0\]\.levels\[0\]\.nodeLabel: 'Bad Label'"):
        config.parse({"topology": {"levels": [{"nodeLabel": "Bad Label"}]}})
