"""The loop places a Workload API gang (GenericWorkload) all or nothing, in virtual time."""

from __future__ import annotations

import asyncio

from berth.cluster import model, workload_api
from berth.plugins.gangscheduling import MAX_BACKOFF_SECONDS
from berth.testing import make_node, make_pod
from tests.loop.conftest import Berth, Looks, make_config, running

GATES = {"featureGates": {"GenericWorkload": True}}


def add_group(berth: Berth, name: str, *, min_count: int) -> None:
    berth.core.on_scheduling_group(
        workload_api.decode(
            {
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "default", "generation": 1},
                "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
            }
        )
    )


def member(name: str, group: str, cpu: str) -> model.Pod:
    return make_pod(
        name, scheduler_name="berth", requests={"cpu": cpu}, spec={"schedulingGroup": {"podGroupName": group}}
    )


def condition(berth: Berth, name: str) -> workload_api.Condition | None:
    pg = berth.core.scheduling_groups.pod_group("default", name)
    assert pg is not None
    return next((c for c in pg.status.conditions if c.type == "PodGroupInitiallyScheduled"), None)


async def test_members_wait_before_the_gang_is_complete_then_bind_together() -> None:
    async with running(make_config(**GATES)) as berth:
        berth.nodes(make_node("n0", cpu="8", pods=110))
        add_group(berth, "g", min_count=3)
        berth.pods(member("m0", "g", "1"), member("m1", "g", "1"))
        await berth.settle()
        assert berth.bound() == {}
        assert berth.phase("default/m0") == "Gated"
        assert berth.decision("default/m0").message == (
            "waiting for minCount pods from a gang to appear in scheduling queue"
        )
        berth.pods(member("m2", "g", "1"))
        await berth.settle()
        assert sorted(berth.bound()) == ["default/m0", "default/m1", "default/m2"]
        cond = condition(berth, "g")
        assert cond is not None and (cond.status, cond.reason) == ("True", "Scheduled")


async def test_a_gang_with_room_for_two_of_three_binds_none_and_says_why() -> None:
    async with running(make_config(**GATES)) as berth:
        berth.nodes(make_node("n0", cpu="4", pods=110))
        add_group(berth, "g", min_count=3)
        berth.pods(*(member(f"m{i}", "g", "2") for i in range(3)))
        await asyncio.sleep(120)
        assert berth.bound() == {}
        assert berth.cluster.bindings == []
        gang_msg = "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"
        # The members that fit say why the gang did not (the pod that fit
        # nowhere says why it did not), as upstream's pod-group cycle does;
        # Berth rejects them at Permit, which reads as a FitError on one node.
        failed = {msg for key, reason, msg in berth.cluster.events if reason == "FailedScheduling"}
        assert f"0/1 nodes are available: 1 {gang_msg}." in failed, failed
        assert any("Insufficient cpu" in m for m in failed), failed
        assert berth.decision("default/m0").message == (
            f'pod group "default/g" is backing off ({gang_msg}): its members are tried again when it ends'
        )
        cond = condition(berth, "g")
        assert cond is not None and (cond.status, cond.reason, cond.message) == ("False", "Unschedulable", gang_msg)
        # The gang backs off as one (1 s doubling to 10 s): bounded attempts.
        attempts = [berth.scheduler.queue.get(berth.cluster.pods[f"default/m{i}"].metadata.uid) for i in range(3)]
        assert all(a is not None and a.attempts <= 2 * 120 / 10 + 8 for a in attempts), [
            a and a.attempts for a in attempts
        ]
        # Room for the third: the gang binds whole.
        berth.nodes(make_node("n1", cpu="2", pods=110))
        await asyncio.sleep(MAX_BACKOFF_SECONDS)  # held at PreEnqueue until the group's backoff ends
        await berth.settle()
        assert sorted(berth.bound()) == ["default/m0", "default/m1", "default/m2"]
        cond = condition(berth, "g")
        assert cond is not None and (cond.status, cond.reason) == ("True", "Scheduled")


async def test_without_generic_workload_the_reference_is_ignored() -> None:
    async with running(make_config()) as berth:
        berth.nodes(make_node("n0", cpu="4", pods=110))
        add_group(berth, "g", min_count=3)
        berth.pods(member("m0", "g", "1"))
        await berth.settle()
        assert berth.bound() == {"default/m0": "n0"}


async def test_a_new_member_wakes_only_its_own_group_so_a_feed_of_groups_stays_linear(queue_looks: Looks) -> None:
    """Each arriving member wakes its group's parked members, looked up in
    the group store's member index; a scan of every parked pod per member
    was quadratic in the pods fed."""
    groups, size = 60, 5
    async with running(make_config(**GATES)) as berth:
        berth.nodes(make_node("n0", cpu="500m", pods=110))  # room for no member
        for g in range(groups):
            add_group(berth, f"g{g}", min_count=size)
        # All but one member of each group: held at PreEnqueue (parked)...
        berth.pods(*(member(f"g{g}-{i}", f"g{g}", "1") for g in range(groups) for i in range(size - 1)))
        await berth.settle()
        assert berth.scheduler.queue.counts()["gated"] == groups * (size - 1)
        queue_looks.count = 0
        # ... then each group's last: every one wakes its own group only.
        berth.pods(*(member(f"g{g}-{size - 1}", f"g{g}", "1") for g in range(groups)))
        await asyncio.sleep(1)
    assert queue_looks.count <= groups * size  # a scan per member: 60 x 240 parked pods = 14 400
