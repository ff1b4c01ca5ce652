"""Topology-aware gangs (TopologyGang with Coscheduling) placed by the running loop, in virtual time."""

from __future__ import annotations

import asyncio

import pytest

from berth import config
from berth.cluster import model
from berth.testing import make_node, make_pod
from tests.loop.conftest import Berth, make_config, running

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
HOST = "kubernetes.io/hostname"


def topology_config(*levels: str) -> config.BerthConfiguration:
    return make_config(topologies=[{"name": "dc", "levels": [{"nodeLabel": lv} for lv in levels]}])


def node(name: str, cpu: str, **labels: str) -> model.Node:
    return make_node(name, cpu=cpu, pods=110, labels={HOST: name, **labels})


def member(
    gang: str,
    i: int,
    count: int,
    *,
    cpu: str = "2",
    priority: int | None = None,
    topology: dict[str, str] | None = None,
) -> model.Pod:
    """A member of a Kueue pod group (its own annotations define the gang)."""
    return make_pod(
        f"{gang}-{i}",
        scheduler_name="berth",
        labels={"kueue.x-k8s.io/pod-group-name": gang},
        annotations={"kueue.x-k8s.io/pod-group-total-count": str(count), **(topology or {})},
        requests={"cpu": cpu},
        priority=priority,
    )


def racks_of(berth: Berth, gang: str) -> set[str]:
    nodes = berth.cluster.nodes
    return {nodes[n].metadata.labels["rack"] for k, n in berth.bound().items() if k.startswith(f"default/{gang}-")}


async def test_a_required_rack_gang_lands_in_one_rack_the_fullest_that_fits() -> None:
    async with running(topology_config("rack", HOST)) as berth:
        berth.nodes(
            node("a1", "8", rack="r1"),
            node("a2", "8", rack="r1"),  # 16 cpu: the big rack, kept free
            node("b1", "4", rack="r2"),
            node("b2", "4", rack="r2"),  # 8 cpu: exactly the gang
            node("c1", "6", rack="r3"),
            node("c2", "6", rack="r3"),
        )
        berth.pods(*(member("g", i, 4, topology={REQUIRED: "rack"}) for i in range(4)))
        await berth.settle()
        assert len(berth.bound()) == 4
        assert racks_of(berth, "g") == {"r2"}


async def test_a_required_rack_gang_no_rack_can_hold_binds_nothing_and_says_why() -> None:
    async with running(topology_config("rack", HOST)) as berth:
        # 12 cpu in all hold the 8 the gang needs, but no rack has more than 6.
        berth.nodes(*(node(f"n{r}{i}", "3", rack=f"r{r}") for r in (1, 2, 3) for i in range(2)))
        berth.pods(*(member("g", i, 4, topology={REQUIRED: "rack"}) for i in range(4)))
        await asyncio.sleep(30)
        assert berth.bound() == {}
        assert berth.cluster.bindings == []
        message = berth.scheduler.last_message(berth.cluster.pods["default/g-0"].metadata.uid)
        assert "no domain of topology level rack can hold the gang's 4 unplaced pods" in message
        assert "the largest free, rack=r1, holds 2" in message
        # Room in one rack: the gang is placed there, whole.
        berth.nodes(node("n13", "4", rack="r3"))
        await asyncio.sleep(30)
        assert len(berth.bound()) == 4
        assert racks_of(berth, "g") == {"r3"}


@pytest.mark.parametrize(
    ("block_cpu", "want_blocks"),
    [
        pytest.param("3", {"b1"}, id="no rack holds it: one block does"),
        pytest.param("1", {"b1", "b2"}, id="no block holds it either: anywhere"),
    ],
)
async def test_a_preferred_rack_gang_falls_back_to_the_next_level_then_anywhere(
    block_cpu: str, want_blocks: set[str]
) -> None:
    async with running(topology_config("block", "rack", HOST)) as berth:
        berth.nodes(
            node("n1", "4", block="b1", rack="r1"),
            node("n2", block_cpu, block="b1", rack="r2"),
            node("n3", "3", block="b2", rack="r3"),
            node("n4", "3", block="b2", rack="r4"),
        )
        berth.pods(*(member("g", i, 3, topology={PREFERRED: "rack"}) for i in range(3)))
        await berth.settle()
        bound = berth.bound()
        assert len(bound) == 3
        assert {berth.cluster.nodes[n].metadata.labels["block"] for n in bound.values()} == want_blocks


async def test_two_gangs_do_not_both_claim_the_last_racks_room() -> None:
    """Only r1 holds a 4-pod gang; g's first member is assumed there when h
    chooses, so h counts the room g's other three still need and finds none."""
    async with running(topology_config("rack", HOST)) as berth:
        berth.nodes(
            node("a1", "8", rack="r1"),
            node("a2", "6", rack="r1"),  # room for 7 pods of 2 cpu
            node("b1", "6", rack="r2"),  # room for 3
        )
        # Priorities interleave the two gangs in activeQ: g-0, h-0, g-1, h-1, ...
        g = [member("g", i, 4, priority=100 - 2 * i, topology={REQUIRED: "rack"}) for i in range(4)]
        h = [member("h", i, 4, priority=99 - 2 * i, topology={REQUIRED: "rack"}) for i in range(4)]
        berth.pods(*g, *h)
        await asyncio.sleep(5)
        assert racks_of(berth, "g") == {"r1"}
        assert sum(k.startswith("default/g-") for k in berth.bound()) == 4
        assert not any(k.startswith("default/h-") for k in berth.bound())
        message = berth.scheduler.last_message(berth.cluster.pods["default/h-0"].metadata.uid)
        assert "no domain of topology level rack can hold the gang's 4 unplaced pods" in message


async def test_gangs_without_a_topology_annotation_place_anywhere() -> None:
    async with running(topology_config("rack", HOST)) as berth:
        berth.nodes(node("n1", "4", rack="r1"), node("n2", "4", rack="r2"))
        berth.pods(*(member("g", i, 4) for i in range(4)))
        await berth.settle()
        assert racks_of(berth, "g") == {"r1", "r2"}


async def test_a_required_gang_no_rack_holds_preempts_in_one_rack_only_and_keeps_it() -> None:
    """Issue 30: a higher-priority required-rack gang that no rack holds
    while lower-priority pods run clears room in one rack — every victim
    there, none in the other rack — and all its members land in that rack
    (the domain chosen for preemption sticks across the members' attempts)."""
    async with running(topology_config("rack", HOST)) as berth:
        berth.nodes(*(node(f"{r}{i}", "4", rack=r) for r in ("r1", "r2") for i in (1, 2)))
        # One 3-cpu low-priority pod per node: 1 cpu free per node, 2 per rack.
        berth.pods(
            *(
                make_pod(f"low-{r}{i}", requests={"cpu": "3"}, node_name=f"{r}{i}", priority=0)
                for r in ("r1", "r2")
                for i in (1, 2)
            )
        )
        berth.pods(*(member("g", i, 4, priority=100, topology={REQUIRED: "rack"}) for i in range(4)))
        await asyncio.sleep(60)
        assert len([k for k in berth.bound() if k.startswith("default/g-")]) == 4
        (rack,) = racks_of(berth, "g")
        evicted = {key for key, _ in berth.cluster.evictions}
        assert evicted == {f"default/low-{rack}1", f"default/low-{rack}2"}
