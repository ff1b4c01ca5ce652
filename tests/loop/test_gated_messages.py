"""A gated pod says what gates it now, not what gated it first (issue 31).

The queue re-runs PreEnqueue whenever it moves a pod or an event wakes the
gated ones (a gang member arriving, a gang's backoff ending); the message
``get pods``, ``get podgroups`` and the queue state show must follow it.
"""

from __future__ import annotations

import asyncio

from berth.cluster import model
from berth.framework.decision import DecisionKind
from berth.scheduling import visibility
from berth.testing import make_node, make_pod
from tests.loop.conftest import Berth, running

MEMBER = {"scheduling.x-k8s.io/pod-group": "g"}


def add_gang(berth: Berth, min_member: int) -> None:
    group = model.PodGroup(
        metadata=model.ObjectMeta(name="g", namespace="default"), spec=model.PodGroupSpec(min_member=min_member)
    )
    berth.core.on_pod_group(group)


def member(name: str, cpu: str = "1") -> model.Pod:
    return make_pod(name, scheduler_name="berth", labels=MEMBER, requests={"cpu": cpu})


def reasons(berth: Berth) -> dict[str, str]:
    return {r.key: r.reason for r in visibility.list_pods(berth.core)}


async def test_a_gated_gang_member_shows_the_current_count_as_members_arrive() -> None:
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="4", pods=110))
        add_gang(berth, 3)
        berth.pods(member("m0"))
        await asyncio.sleep(0.1)
        one = 'pod group "default/g" has 1 of 3 required pods'
        assert reasons(berth) == {"default/m0": one}
        berth.pods(member("m1"))
        await asyncio.sleep(0.1)
        two = 'pod group "default/g" has 2 of 3 required pods'
        assert reasons(berth) == {"default/m0": two, "default/m1": two}
        uid = berth.cluster.pods["default/m0"].metadata.uid
        assert berth.scheduler.queue_state(uid).message == two
        (row,) = visibility.list_pod_groups(berth.core)
        assert row.reason == two
        # One Gated decision per pod, not one per count: a gang of N arriving
        # would otherwise stream N*N/2 of them.
        assert berth.decision("default/m0").kind == DecisionKind.GATED


async def test_a_gang_held_for_its_backoff_is_gated_with_the_backoffs_message() -> None:
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="4", pods=110))
        add_gang(berth, 3)
        # Two members fit, the third does not: the gang fails and Coscheduling
        # holds its members for the group's backoff, at PreEnqueue.
        berth.pods(*(member(f"m{i}", cpu="2") for i in range(3)))
        await asyncio.sleep(125)
        assert {berth.phase(f"default/m{i}") for i in range(3)} == {"Gated"}
        for i in range(3):
            d = berth.decision(f"default/m{i}")
            assert d.kind == DecisionKind.GATED, d
            assert d.message.startswith('pod group "default/g" failed recently'), d
        assert set(reasons(berth).values()) == {
            'pod group "default/g" failed recently: its members are tried again when its 10s backoff ends'
        }
