"""Gang-atomic preemption in the running loop, in virtual time: victims are
taken as whole gangs (``single``: never below the gang's minimum; ``all``:
every member), the fewest gangs first, and the preemptor keeps its node."""

from __future__ import annotations

import asyncio

import pytest

from berth.cluster import model, workload_api
from berth.testing import make_node, make_pod
from tests.loop.conftest import Berth, make_config, running

HOST = "kubernetes.io/hostname"
GATES = {"featureGates": {"GenericWorkload": True}}


def node(name: str, cpu: str = "4") -> model.Node:
    return make_node(name, cpu=cpu, pods=110, labels={HOST: name})


def kueue_member(
    gang: str, i: int, count: int, *, priority: int | None = None, node_name: str = "", cpu: str = "2"
) -> model.Pod:
    """A member of a Kueue pod group of ``count`` (its minimum is all of them)."""
    return make_pod(
        f"{gang}-{i}",
        scheduler_name="berth",
        labels={"kueue.x-k8s.io/pod-group-name": gang},
        annotations={"kueue.x-k8s.io/pod-group-total-count": str(count)},
        requests={"cpu": cpu},
        priority=priority,
        node_name=node_name,
    )


def group_member(name: str, group: str, *, priority: int, node_name: str = "") -> model.Pod:
    return make_pod(
        name,
        scheduler_name="berth",
        requests={"cpu": "2"},
        priority=priority,
        node_name=node_name,
        spec={"schedulingGroup": {"podGroupName": group}},
    )


def add_group(berth: Berth, name: str, *, min_count: int, disruption: str | None) -> None:
    spec: dict[str, object] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if disruption is not None:
        spec["disruptionMode"] = {disruption: {}}
    berth.core.on_scheduling_group(
        workload_api.decode(
            {
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "default", "generation": 1},
                "spec": spec,
            }
        )
    )


def evicted(berth: Berth) -> set[str]:
    return {key for key, _ in berth.cluster.evictions}


async def test_a_high_priority_pod_takes_a_whole_gang_never_half_of_one() -> None:
    async with running() as berth:
        berth.nodes(node("n0"), node("n1"))
        # A 4-member gang, two members on each node: its minimum is all four.
        berth.pods(*(kueue_member("low", i, 4, priority=0, node_name=f"n{i % 2}") for i in range(4)))
        await berth.settle()
        berth.pods(make_pod("high", scheduler_name="berth", requests={"cpu": "2"}, priority=100))
        await asyncio.sleep(30)
        # One member's room was enough, but taking it would leave the gang
        # below its minimum: the whole gang goes.
        assert evicted(berth) == {f"default/low-{i}" for i in range(4)}
        assert "default/high" in berth.bound()


async def test_the_fewest_gangs_are_preempted_a_lone_pod_before_a_gang_member() -> None:
    async with running() as berth:
        berth.nodes(node("n0"), node("n1"))
        # Upstream's criteria alone would take the gang's lower-priority
        # member on n0; touching no gang comes first.
        berth.pods(
            *(kueue_member("low", i, 2, priority=0, node_name="n0") for i in range(2)),
            make_pod("lone", scheduler_name="berth", requests={"cpu": "2"}, priority=50, node_name="n1"),
            make_pod("filler", scheduler_name="berth", requests={"cpu": "2"}, priority=50, node_name="n1"),
        )
        await berth.settle()
        berth.pods(make_pod("high", scheduler_name="berth", requests={"cpu": "2"}, priority=100))
        await asyncio.sleep(30)
        [victim] = evicted(berth)
        assert victim in {"default/lone", "default/filler"}
        assert berth.node_of("default/high") == "n1"


@pytest.mark.parametrize(
    ("disruption", "min_count", "victims"),
    [
        # single, with room above the minimum: one member is enough.
        ("single", 2, 1),
        (None, 2, 1),  # single is the default
        # single, at its minimum: the whole gang or none of it.
        ("single", 4, 4),
        # all: taking any member evicts every member.
        ("all", 1, 4),
    ],
)
async def test_a_workload_api_gangs_disruption_mode_decides_how_many_members_go(
    disruption: str | None, min_count: int, victims: int
) -> None:
    async with running(make_config(**GATES)) as berth:
        berth.nodes(node("n0"), node("n1"))
        add_group(berth, "low", min_count=min_count, disruption=disruption)
        berth.pods(*(group_member(f"low-{i}", "low", priority=0, node_name=f"n{i % 2}") for i in range(4)))
        await berth.settle()
        berth.pods(make_pod("high", scheduler_name="berth", requests={"cpu": "2"}, priority=100))
        await asyncio.sleep(30)
        assert len(evicted(berth)) == victims
        assert "default/high" in berth.bound()


async def test_a_gang_member_of_higher_priority_than_the_preemptor_protects_its_gang() -> None:
    async with running() as berth:
        berth.nodes(node("n0"))
        # The gang's members have priorities 0 and 200; taking the first
        # would leave the gang below its minimum, and the second may not go.
        berth.pods(
            kueue_member("mixed", 0, 2, priority=0, node_name="n0"),
            kueue_member("mixed", 1, 2, priority=200, node_name="n0"),
        )
        await berth.settle()
        berth.pods(make_pod("high", scheduler_name="berth", requests={"cpu": "2"}, priority=100))
        await asyncio.sleep(30)
        assert evicted(berth) == set()
        assert "default/high" not in berth.bound()
        message = berth.scheduler.last_message(berth.cluster.pods["default/high"].metadata.uid)
        assert "No preemption victims found for incoming pod" in message


async def test_a_preemptor_keeps_its_nominated_node_while_its_victims_leave() -> None:
    async with running() as berth:
        berth.nodes(node("n0"), node("n1"))
        berth.pods(*(kueue_member("low", i, 2, priority=0, node_name="n0") for i in range(2)))
        berth.pods(*(kueue_member("other", i, 2, priority=0, node_name="n1") for i in range(2)))
        await berth.settle()
        berth.pods(make_pod("high", scheduler_name="berth", requests={"cpu": "4"}, priority=100))
        await asyncio.sleep(30)
        # One gang was taken whole; the preemptor lands where it was
        # nominated, and no other gang was touched across its retries.
        gone = evicted(berth)
        assert gone in ({"default/low-0", "default/low-1"}, {"default/other-0", "default/other-1"})
        where = "n0" if "default/low-0" in gone else "n1"
        assert berth.node_of("default/high") == where
