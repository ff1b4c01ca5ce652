"""Batch queues in the running loop, on an embedded cluster, in virtual time:
the issue's scenarios (borrow then reclaim, weights, max, gangs, head of line)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import msgspec
import pytest

from berth.cluster import model
from berth.framework.decision import Decision, DecisionKind
from berth.quota import QueueSpec
from berth.quota.tree import LABEL_QUEUE
from berth.scheduling import explain
from berth.testing import make_node, make_pod
from tests.loop.conftest import Berth, make_config, running


def queued(name: str, queue: str, cpu: str = "1", **kw: Any) -> model.Pod:
    labels = {LABEL_QUEUE: queue, **kw.pop("labels", {})}
    return make_pod(name, scheduler_name="berth", labels=labels, requests={"cpu": cpu}, **kw)


def cluster(berth: Berth, nodes: int = 4, cpu: str = "4") -> None:
    berth.nodes(*(make_node(f"n{i}", cpu=cpu, memory="64Gi", pods=110) for i in range(nodes)))


def bound_in(berth: Berth, prefix: str) -> int:
    return sum(1 for k in berth.bound() if k.startswith(f"default/{prefix}"))


def evicted(berth: Berth) -> list[str]:
    return [k for k, _ in berth.cluster.evictions]


async def test_a_borrower_fills_the_idle_cluster_then_the_owner_reclaims_exactly_its_guarantee() -> None:
    # Volcano reclaim / Kueue reclaimWithinCohort: half the cluster each.
    cfg = make_config(queues=[{"name": "a", "guaranteed": {"cpu": "8"}}, {"name": "b", "guaranteed": {"cpu": "8"}}])
    async with running(cfg) as berth:
        cluster(berth)
        berth.pods(*(queued(f"a{i}", "a") for i in range(16)))
        await berth.settle()
        assert bound_in(berth, "a") == 16  # borrowing b's idle guarantee
        seen: list[Decision] = []
        emit = berth.core.decisions.emit
        berth.core.decisions.emit = lambda d: (seen.append(d), emit(d))[1]  # type: ignore[method-assign]
        berth.pods(*(queued(f"b{i}", "b") for i in range(10)))
        await berth.settle()
        await berth.settle()
        nominated = [d for d in seen if d.kind == DecisionKind.NOMINATED]
        assert len(nominated) == 8
        # As after a successful preemption, the PostFilter part is what was done.
        assert (
            nominated[0].message == "0/4 nodes are available: 4 Insufficient cpu. waiting to reclaim 1 cpu from queue a"
        )
        preempted = [d for d in seen if d.kind == DecisionKind.PREEMPTED]
        assert len(preempted) == 8 and all("reclaimed for queue b" in d.message for d in preempted)
        assert bound_in(berth, "b") == 8
        assert bound_in(berth, "a") == 8
        assert len(evicted(berth)) == 8 and all(k.startswith("default/a") for k in evicted(berth))
        status = {s.name: s for s in berth.core.quota.status()}
        assert status["a"].allocated == {"cpu": 8000}
        assert status["b"].allocated == {"cpu": 8000}
        assert status["b"].pending_pods == 2
        assert berth.core.quota.reclaims == {"a": 8}


async def test_reclaim_never_takes_the_victims_queue_below_its_guarantee() -> None:
    cfg = make_config(queues=[{"name": "a", "guaranteed": {"cpu": "8"}}, {"name": "b", "guaranteed": {"cpu": "8"}}])
    async with running(cfg) as berth:
        cluster(berth)
        berth.pods(*(queued(f"a{i}", "a") for i in range(10)), *(queued(f"b{i}", "b") for i in range(6)))
        await berth.settle()
        assert (bound_in(berth, "a"), bound_in(berth, "b")) == (10, 6)
        berth.pods(*(queued(f"b-more{i}", "b") for i in range(4)))
        await berth.settle()
        await berth.settle()
        assert len(evicted(berth)) == 2  # a back to its guarantee, b up to its own
        assert (bound_in(berth, "a"), bound_in(berth, "b")) == (8, 8)


async def test_weights_one_to_three_without_guarantees_split_a_contended_cluster_one_to_three() -> None:
    cfg = make_config(queues=[{"name": "x", "weight": 1}, {"name": "y", "weight": 3}])
    async with running(cfg) as berth:
        cluster(berth)
        berth.pods(*(queued(f"x{i}", "x") for i in range(20)), *(queued(f"y{i}", "y") for i in range(20)))
        await berth.settle()
        assert (bound_in(berth, "x"), bound_in(berth, "y")) == (4, 12)


async def test_max_caps_a_queue_while_the_cluster_is_idle() -> None:
    cfg = make_config(queues=[{"name": "c", "max": {"cpu": "4"}}])
    async with running(cfg) as berth:
        cluster(berth)
        berth.pods(*(queued(f"c{i}", "c") for i in range(8)))
        await berth.settle()
        assert bound_in(berth, "c") == 4
        waiting = [k for k in (f"default/c{i}" for i in range(8)) if k not in berth.bound()]
        d = berth.decision(waiting[0])
        assert d.kind == DecisionKind.UNSCHEDULABLE
        assert d.message == "0/4 nodes are available: queue c: cpu 5/4 over max."
        assert [(r.plugin, r.reason) for r in d.reasons] == [("BerthQueues", "queue c: cpu 5/4 over max")]
        # Room in the queue: a bound pod leaves, a waiting one takes its place.
        gone = next(k for k in berth.bound())
        berth.cluster.delete_pods([gone])
        await berth.settle()
        assert bound_in(berth, "c") == 4 and len(berth.bound()) == 4


async def test_a_child_counts_against_its_parents_max() -> None:
    cfg = make_config(
        queues=[
            {"name": "research", "max": {"cpu": "6"}},
            {"name": "vision", "parent": "research"},
            {"name": "nlp", "parent": "research"},
        ]
    )
    async with running(cfg) as berth:
        cluster(berth)
        berth.pods(*(queued(f"v{i}", "vision") for i in range(5)), *(queued(f"l{i}", "nlp") for i in range(5)))
        await berth.settle()
        assert len(berth.bound()) == 6
        status = {s.name: s for s in berth.core.quota.status()}
        assert status["research"].allocated == {"cpu": 6000}
        assert status["vision"].allocated["cpu"] + status["nlp"].allocated["cpu"] == 6000


async def test_a_gang_that_fits_the_nodes_but_not_the_quota_places_no_member() -> None:
    cfg = make_config(queues=[{"name": "g", "max": {"cpu": "4"}}])
    async with running(cfg) as berth:
        cluster(berth)
        group = model.PodGroup(
            metadata=model.ObjectMeta(name="job", namespace="default"), spec=model.PodGroupSpec(min_member=3)
        )
        berth.core.on_pod_group(group)
        member = {"scheduling.x-k8s.io/pod-group": "job"}
        berth.pods(*(queued(f"m{i}", "g", cpu="2", labels=member) for i in range(3)))
        await berth.settle()
        assert berth.bound() == {}
        assert berth.core.cache.assumed_count == 0
        assert berth.cluster.bindings == []
        assert berth.decision("default/m0").message == (
            "0/4 nodes are available: gang default/job (3 pods): queue g: requests 6 cpu, more than its max 4."
        )
        assert berth.core.quota.get("g").allocated == {}  # type: ignore[union-attr]


async def test_a_small_pod_behind_a_big_unplaceable_one_in_the_same_queue_still_runs() -> None:
    cfg = make_config(queues=[{"name": "q"}])
    async with running(cfg) as berth:
        cluster(berth)
        berth.pods(queued("big", "q", cpu="100", priority=1000), queued("small", "q", cpu="1"))
        await berth.settle()
        assert berth.node_of("default/small")
        assert not berth.node_of("default/big")


async def test_a_pod_naming_an_unknown_or_parent_queue_is_never_placed_and_told_why() -> None:
    cfg = make_config(queues=[{"name": "research"}, {"name": "vision", "parent": "research"}])
    async with running(cfg) as berth:
        cluster(berth)
        berth.pods(queued("lost", "nope"), queued("parent", "research"))
        await berth.settle()
        assert berth.bound() == {}
        assert berth.decision("default/lost").message == (
            '0/4 nodes are available: pod names queue "nope" (berth.dev/queue), which does not exist.'
        )
        assert berth.decision("default/parent").reasons[0].unresolvable
        assert "which is not a leaf (its children: vision)" in berth.decision("default/parent").message


async def test_without_queues_berth_schedules_as_before() -> None:
    async with running() as berth:
        cluster(berth, nodes=1)
        berth.pods(queued("any", "whatever"))
        await berth.settle()
        assert berth.node_of("default/any") == "n0"


async def test_namespaces_and_default_choose_the_leaf_when_no_label_does() -> None:
    cfg = make_config(
        queues=[{"name": "vision", "namespaces": ["vision", "vision-*"], "max": {"cpu": "1"}}, {"name": "default"}]
    )
    async with running(cfg) as berth:
        cluster(berth)
        berth.pods(
            make_pod("a", namespace="vision-x", scheduler_name="berth", requests={"cpu": "1"}),
            make_pod("b", namespace="vision", scheduler_name="berth", requests={"cpu": "1"}),
            make_pod("c", namespace="other", scheduler_name="berth", requests={"cpu": "1"}),
        )
        await berth.settle()
        status = {s.name: s for s in berth.core.quota.status()}
        assert status["vision"].allocated == {"cpu": 1000} and status["vision"].pending_pods == 1
        assert status["default"].allocated == {"cpu": 1000}


async def test_priority_preemption_stays_within_the_queue() -> None:
    cfg = make_config(
        queues=[
            {"name": "a", "guaranteed": {"cpu": "2"}},
            {"name": "b", "guaranteed": {"cpu": "2"}, "preemption": {"withinQueue": "Never", "reclaim": False}},
        ]
    )
    async with running(cfg) as berth:
        cluster(berth, nodes=1)
        berth.pods(queued("a-low", "a", cpu="2", priority=1), queued("b-low", "b", cpu="2", priority=1))
        await berth.settle()
        berth.pods(queued("a-high", "a", cpu="2", priority=100), queued("b-high", "b", cpu="2", priority=100))
        await berth.settle()
        await berth.settle()
        assert evicted(berth) == ["default/a-low"]  # b's withinQueue: Never keeps b-low
        assert berth.node_of("default/a-high") == "n0"
        assert not berth.node_of("default/b-high")


async def test_quota_a_waiting_gang_holds_is_released_when_its_timeout_runs_out() -> None:
    cfg = make_config(queues=[{"name": "g", "max": {"cpu": "4"}}, {"name": "other", "max": {"cpu": "4"}}])
    async with running(cfg) as berth:
        cluster(berth)
        group = model.PodGroup(
            metadata=model.ObjectMeta(name="job", namespace="default"),
            spec=model.PodGroupSpec(min_member=3, schedule_timeout_seconds=5),
        )
        berth.core.on_pod_group(group)
        member = {"scheduling.x-k8s.io/pod-group": "job"}
        gated = {"schedulingGates": [{"name": "example.com/hold"}]}
        berth.pods(
            queued("m0", "g", labels=member),
            queued("m1", "g", labels=member),
            queued("m2", "g", labels=member, spec=gated),
        )
        await asyncio.sleep(1)
        assert berth.core.quota.get("g").allocated == {"cpu": 2000}  # type: ignore[union-attr]  # two wait at Permit
        await asyncio.sleep(10)
        assert berth.core.quota.get("g").allocated == {}  # type: ignore[union-attr]
        assert berth.bound() == {} and berth.core.cache.assumed_count == 0


async def test_shrinking_a_queue_below_its_usage_evicts_nothing_and_stops_new_placements() -> None:
    cfg = make_config(queues=[{"name": "q"}])
    async with running(cfg) as berth:
        cluster(berth)
        berth.pods(*(queued(f"q{i}", "q") for i in range(6)))
        await berth.settle()
        assert len(berth.bound()) == 6
        berth.core.reload_queues([QueueSpec(name="q", max={"cpu": "2"})])
        berth.pods(queued("late", "q"))
        await berth.settle()
        assert berth.cluster.evictions == [] and len(berth.bound()) == 6
        assert berth.decision("default/late").message == "0/4 nodes are available: queue q: cpu 7/2 over max."
        # Raised again: the waiting pod is retried at once (a Queue event).
        berth.core.reload_queues([QueueSpec(name="q")])
        await berth.settle()
        assert berth.node_of("default/late")


async def test_explain_says_what_the_queues_hold_back_and_what_the_nodes_would_allow() -> None:
    cfg = make_config(queues=[{"name": "c", "max": {"cpu": "1"}}])
    async with running(cfg) as berth:
        cluster(berth, nodes=2)
        berth.pods(queued("first", "c"))
        await berth.settle()
        e = explain.explain(berth.core, queued("second", "c"))
        assert e.summary == "0/2 nodes are available: queue c: cpu 2/1 over max. 2/2 nodes would fit the pod."
        assert [(r.plugin, r.reason) for r in e.pre_filter_reasons] == [("BerthQueues", "queue c: cpu 2/1 over max")]
        assert e.feasible_nodes == 2


@pytest.mark.parametrize(
    ("lag", "two_steps"),
    [(0.0, False), (0.05, False), (0.0, True), (0.05, True)],
    ids=["at-once", "after-a-round-trip", "condition-first", "condition-first-after-round-trips"],
)
async def test_victims_still_terminating_are_waited_for_not_added_to(lag: float, two_steps: bool) -> None:
    # Kubernetes deletes victims gracefully, after API round trips (the
    # DisruptionTarget patch, then the DELETE, each seen through the watch):
    # they stay on their node while the reclaiming pods are retried. Exactly
    # the guarantee is taken back, never a fresh victim for one leaving
    # (kube-scheduler's PodEligibleToPreemptOthers; Volcano's Releasing).
    cfg = make_config(queues=[{"name": "a", "guaranteed": {"cpu": "8"}}, {"name": "b", "guaranteed": {"cpu": "8"}}])
    async with running(cfg) as berth:
        cluster(berth)
        berth.pods(*(queued(f"a{i}", "a") for i in range(16)))
        await berth.settle()
        marked: list[str] = []

        async def graceful(pod: model.Pod, reason: str) -> None:
            await asyncio.sleep(lag)
            current = berth.cluster.pods[pod.key]
            if current.metadata.deletion_timestamp:
                return
            if two_steps:  # the DisruptionTarget patch: an update first
                berth.core.on_pod(current, source=berth.cluster)
                await asyncio.sleep(lag)
                current = berth.cluster.pods[pod.key]
                if current.metadata.deletion_timestamp:
                    return
            marked.append(pod.key)
            meta = msgspec.structs.replace(current.metadata, deletion_timestamp="2026-11-23T00:00:00Z")
            berth.cluster.pods[pod.key] = updated = msgspec.structs.replace(current, metadata=meta)
            berth.core.on_pod(updated, source=berth.cluster)

        berth.cluster.evict = graceful  # type: ignore[method-assign]
        berth.pods(*(queued(f"b{i}", "b") for i in range(10)))
        await asyncio.sleep(60)  # many retries while the victims terminate
        assert len(marked) == 8
        assert all(not berth.cluster.pods[k].metadata.deletion_timestamp for k in berth.bound() if k not in marked)
        waiting = berth.decision("default/b0").message
        # b0 says what it waits for: the reclaim it started (an assigned pod's
        # update that frees nothing requeues no pod: v1.37.2 NodeResourcesFit's
        # hint for AssignedPodUpdate), or, when retried before its victims
        # carry a deletionTimestamp, the reclaimed pods.
        assert re.search(
            r"(waiting on node n0 for \d pod\(s\) to terminate|waiting for the pods reclaimed before to terminate"
            r"|waiting to reclaim \d+ cpu from queue a)\.?$",
            waiting,
        ), waiting
        berth.cluster.delete_pods(marked)
        await berth.settle()
        assert (bound_in(berth, "a"), bound_in(berth, "b")) == (8, 8)
        beyond = berth.decision("default/b9").message
        assert beyond.endswith("queue b: cpu 9/8 over guaranteed, so nothing is reclaimed for it.")


async def test_queues_added_by_a_reload_see_the_pods_already_waiting() -> None:
    async with running() as berth:
        cluster(berth, nodes=1, cpu="1")
        berth.pods(*(queued(f"q{i}", "q") for i in range(3)))
        await berth.settle()
        berth.core.reload_queues([QueueSpec(name="q", max={"cpu": "5"})])
        status = berth.core.quota.get("q")
        assert status is not None
        assert (status.allocated, status.pending_pods, status.pending) == ({"cpu": 1000}, 2, {"cpu": 2000})
