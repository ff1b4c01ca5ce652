"""The scheduling queue and the nominator on their own, on an injected clock
(kube-scheduler's ``backend/queue/scheduling_queue_test.go`` behaviours)."""

from __future__ import annotations

import msgspec
import pytest

from berth.cache.infos import PodInfo
from berth.framework import interface as fw
from berth.queue.nominator import Nominator
from berth.queue.scheduling_queue import SchedulingQueue
from berth.testing import make_pod

NODE_ADD = fw.ClusterEvent("Node", fw.ActionType.ADD)
POD_DELETE = fw.ClusterEvent("AssignedPod", fw.ActionType.DELETE)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_queue(clock: Clock, gate: set[str] | None = None, *, pop_from_backoff: bool = True) -> SchedulingQueue:
    gated = gate if gate is not None else set()

    def pre_enqueue(pod: PodInfo, profile: str) -> fw.Status:
        if pod.key in gated:
            return fw.Status(fw.Code.PENDING, ("waiting",), "Gate")
        return fw.SUCCESS

    return SchedulingQueue(
        sort_key=lambda q: (-q.info.priority, q.timestamp),
        pre_enqueue=pre_enqueue,
        events={"NodeResourcesFit": [NODE_ADD], "Gate": [POD_DELETE]},
        initial_backoff=1.0,
        max_backoff=10.0,
        max_in_unschedulable=300.0,
        clock=clock,
        pop_from_backoff=pop_from_backoff,
    )


def pod(name: str, priority: int = 0) -> PodInfo:
    return PodInfo.of(make_pod(name, priority=priority))


def fail(q: SchedulingQueue, name: str, plugin: str = "NodeResourcesFit") -> fw.QueuedPodInfo:
    """Pop ``name`` and report it unschedulable by ``plugin``."""
    qpi = q.pop_nowait()
    assert qpi is not None and qpi.info.key == f"default/{name}"
    qpi.unschedulable_plugins = {plugin}
    q.add_unschedulable(qpi, q.scheduling_cycle)
    return qpi


@pytest.mark.parametrize(
    ("attempts", "backoff"),
    # calculateBackoffDuration: initial * 2^(attempts-1), capped at max.
    [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (9, 10.0)],
)
@pytest.mark.parametrize(
    ("pop_from_backoff", "completes_after", "deadline_ahead"),
    [
        # SchedulerPopFromBackoffQ: the expiry (here on a window boundary, as
        # the clock is) still backs off through its own window, and completes
        # at the next one (TestBackOffFlow: "rounding up to the ordering window").
        (True, 1.0, 0.001),
        # Gate off: isPodBackingoff is !expiry.Before(now), so done just after
        # it; the deadline is the expiry itself (pop waits at least 1 ms).
        (False, 0.001, 0.0),
    ],
)
def test_backoff_doubles_per_attempt_up_to_the_maximum(
    attempts: int, backoff: float, pop_from_backoff: bool, completes_after: float, deadline_ahead: float
) -> None:
    """Errors go to podErrorBackoffQ, which is never popped early, so only
    the flush at backoff completion releases the pod."""
    clock = Clock()
    q = make_queue(clock, pop_from_backoff=pop_from_backoff)
    q.add(pod("p"), "berth")
    for _ in range(attempts):
        qpi = q.pop_nowait()
        assert qpi is not None
        q.add_unschedulable(qpi, q.scheduling_cycle, error=True)  # errors go straight to backoff
        clock.now += 100
    clock.now -= 100
    assert q.phase(qpi.info.uid) == "Backoff"
    clock.now += backoff + completes_after - 0.001
    assert q.pop_nowait() is None
    assert q.next_backoff_deadline() == pytest.approx(clock.now + deadline_ahead)
    clock.now += 0.001
    assert q.pop_nowait() is qpi


def test_active_pods_pop_by_priority_then_age() -> None:
    clock = Clock()
    q = make_queue(clock)
    for name, prio in (("old-low", 1), ("high", 10), ("new-low", 1)):
        q.add(pod(name, prio), "berth")
        clock.now += 1
    assert [q.pop_nowait().info.key for _ in range(3)] == ["default/high", "default/old-low", "default/new-low"]  # type: ignore[union-attr]


@pytest.mark.parametrize("woken_by", ["event", "unschedulable flush"])
def test_a_pod_that_comes_back_goes_behind_equal_priority_pods_not_tried_yet(woken_by: str) -> None:
    """AddUnschedulableIfNotPresent refreshes Timestamp ("since the pod is
    re-added"): a returning pod (a preemptor waiting for its victims, say)
    sorts by the time it came back, not by when it was first added."""
    clock = Clock()
    q = make_queue(clock)
    for name in ("first", "second", "third"):
        q.add(pod(name), "berth")
        clock.now += 1
    returning = fail(q, "first")
    assert returning.timestamp == clock.now and returning.enqueued == 0.0
    clock.now += 301  # past its backoff (and the unschedulable pool's maximum stay)
    if woken_by == "event":
        q.on_event(NODE_ADD)
    else:
        q.flush()
    assert q.phase(returning.info.uid) == "Active"
    assert [q.pop_nowait().info.key for _ in range(3)] == ["default/second", "default/third", "default/first"]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("event", "moves"),
    [
        (NODE_ADD, True),  # NodeResourcesFit registered Node/Add
        (POD_DELETE, False),  # nobody that rejected the pod registered for it
        (fw.ClusterEvent("Node", fw.ActionType.UPDATE_NODE_LABEL), False),
    ],
)
def test_only_an_event_a_rejecting_plugin_registered_for_wakes_an_unschedulable_pod(
    event: fw.ClusterEvent, moves: bool
) -> None:
    clock = Clock()
    q = make_queue(clock)
    q.add(pod("p"), "berth")
    qpi = fail(q, "p")
    assert q.phase(qpi.info.uid) == "Unschedulable"
    clock.now += 5  # past the 1 s backoff
    assert q.on_event(event) == int(moves)
    assert q.phase(qpi.info.uid) == ("Active" if moves else "Unschedulable")


@pytest.mark.parametrize(
    ("pop_from_backoff", "waits"),
    [
        # SchedulerPopFromBackoffQ: activeQ is empty, so backoffQ's head pops at once.
        pytest.param(True, 0.0, id="popped at once from backoffQ with the gate"),
        # Gate off: until the 1 s backoff is over (isPodBackingoff: expiry not before now).
        pytest.param(False, 1.001, id="waits out its backoff without the gate"),
    ],
)
def test_a_woken_pod_still_in_backoff_goes_to_the_backoff_queue(pop_from_backoff: bool, waits: float) -> None:
    clock = Clock()
    q = make_queue(clock, pop_from_backoff=pop_from_backoff)
    q.add(pod("p"), "berth")
    qpi = fail(q, "p")
    q.on_event(NODE_ADD)
    assert q.phase(qpi.info.uid) == "Backoff"
    if waits:
        clock.now += waits - 0.002
        assert q.pop_nowait() is None
    clock.now += waits
    assert q.pop_nowait() is qpi


def test_an_event_during_the_attempt_sends_the_pod_to_backoff_not_the_unschedulable_pool() -> None:
    """moveRequestCycle: a wake-up that arrives while the pod is in flight is not lost."""
    clock = Clock()
    q = make_queue(clock)
    q.add(pod("p"), "berth")
    qpi = q.pop_nowait()
    assert qpi is not None
    q.on_event(POD_DELETE)
    q.add_unschedulable(qpi, q.scheduling_cycle)
    assert q.phase(qpi.info.uid) == "Backoff"


def test_the_unschedulable_pool_is_flushed_after_its_maximum_stay_at_the_next_30s_pass() -> None:
    """flushUnschedulableEntitiesLeftover runs every 30 s and moves a pod
    parked for more than podMaxInUnschedulablePodsDuration (``>``)."""
    clock = Clock()
    q = make_queue(clock)
    q.add(pod("p"), "berth")
    qpi = fail(q, "p")
    clock.now = 300.0
    assert q.pop_nowait() is None  # a pass, but not more than 300 s yet
    clock.now = 300.5
    assert q.pop_nowait() is None  # more, but the next pass is at 330 s
    clock.now = 330.0
    assert q.pop_nowait() is qpi
    assert qpi.was_flushed_from_unschedulable


def test_a_gated_pod_is_released_by_an_update_or_by_its_gates_event() -> None:
    clock = Clock()
    gate = {"default/g"}
    q = make_queue(clock, gate)
    q.add(pod("g"), "berth")
    uid = "uid-default-g"
    assert q.phase(uid) == "Gated"
    assert q.counts()["gated"] == 1
    assert q.on_event(POD_DELETE) == 0  # still gated: PreEnqueue says no
    gate.clear()
    assert q.on_event(NODE_ADD) == 0  # the Gate plugin did not register for Node/Add
    assert q.on_event(POD_DELETE) == 1
    assert q.phase(uid) == "Active"


@pytest.mark.parametrize("moved_by", ["event", "unschedulable flush", "activate"])
def test_a_pod_moved_to_activeq_runs_preenqueue_again_and_parks_gated_if_it_now_says_no(moved_by: str) -> None:
    """moveToActiveQ runs PreEnqueue (all but a backoff completion with
    SchedulerPopFromBackoffQ): a pod that passed it once, failed an attempt
    and meanwhile lost what PreEnqueue needs (a gang member, a claim) waits
    gated instead of being attempted."""
    clock = Clock()
    gate: set[str] = set()
    q = make_queue(clock, gate)
    q.add(pod("p"), "berth")
    qpi = fail(q, "p")
    gate.add("default/p")
    clock.now += 301  # past its backoff and the unschedulable pool's maximum stay
    if moved_by == "event":
        assert q.on_event(NODE_ADD) == 0
    elif moved_by == "unschedulable flush":
        q.flush()
    else:
        q.activate([qpi.info.uid])
    assert q.phase(qpi.info.uid) == "Gated"
    assert q.pop_nowait() is None
    gate.clear()
    assert q.on_event(POD_DELETE) == 1  # the Gate plugin's event releases it
    assert q.pop_nowait() is qpi


def test_deleting_a_pod_forgets_it_and_its_nomination() -> None:
    clock = Clock()
    q = make_queue(clock)
    p = pod("p")
    q.add(p, "berth")
    q.nominator.add(p, "n1")
    q.delete(p.uid)
    assert p.uid not in q
    assert q.nominator.node_of(p.uid) == ""
    assert q.pop_nowait() is None


def test_the_nominator_keeps_one_node_per_pod() -> None:
    n = Nominator()
    a, b = pod("a"), pod("b")
    n.add(a, "n1")
    n.add(b, "n1")
    assert sorted(p.key for p in n.pods_on("n1")) == ["default/a", "default/b"]
    n.add(a, "n2")  # re-nominated: moves
    assert [p.key for p in n.pods_on("n1")] == ["default/b"]
    assert n.node_of(a.uid) == "n2"
    n.add(b, "")  # an empty node clears the nomination
    assert n.nodes() == ["n2"]
    n.delete(a.uid)
    assert n.nodes() == [] and n.node_of(a.uid) == ""


@pytest.mark.parametrize(
    ("kept", "old", "new", "after"),
    [
        # updateNominatedPodUnlocked (backend/queue/nominator.go v1.37.2)
        ("", "", "n1", "n1"),  # added
        ("n1", "n1", "n2", "n2"),  # moved
        ("n1", "n1", "", ""),  # removed
        ("n1", "", "", "n1"),  # made here, not yet written: kept
        ("", "", "", ""),  # never nominated
        ("n1", "", "n2", "n2"),  # another writer's nomination wins
    ],
)
def test_a_pod_update_sets_the_nomination_as_kube_scheduler_does(kept: str, old: str, new: str, after: str) -> None:
    n = Nominator()
    a = pod("a")
    if kept:
        n.add(a, kept)
    obj = make_pod("a")
    status = msgspec.structs.replace(obj.status, nominated_node_name=new)
    updated = PodInfo.of(msgspec.structs.replace(obj, status=status))
    n.update(old, updated)
    assert n.node_of(a.uid) == after
    assert [p.key for p in n.pods_on(after)] == (["default/a"] if after else [])


def test_positions_follow_every_change_of_the_queue() -> None:
    """Ranks by the QueueSort key, kept between questions and recomputed
    after an add, a priority update, an attempt and a delete."""
    clock = Clock()
    q = make_queue(clock)
    for name in ("a", "b", "c"):
        q.add(pod(name), "")
        clock.now += 1
    ranks = q.positions()
    assert ranks == {pod(n).uid: i for i, n in enumerate("abc", 1)}
    assert q.positions() is ranks  # nothing changed: the same answer

    q.add(pod("d", priority=10), "")
    assert q.positions()[pod("d").uid] == 1
    q.update(pod("c", priority=20))
    assert [q.positions()[pod(n).uid] for n in "cdab"] == [1, 2, 3, 4]
    fail(q, "c")  # popped and back: still first by priority, with a new timestamp
    assert q.positions()[pod("c").uid] == 1
    q.delete(pod("d").uid)
    assert [q.positions()[pod(n).uid] for n in "cab"] == [1, 2, 3]


def test_one_position_is_the_same_whether_the_ranks_are_kept_or_not() -> None:
    clock = Clock()
    q = make_queue(clock)
    for name, prio in (("a", 0), ("b", 5), ("c", 0), ("d", 5)):
        q.add(pod(name, priority=prio), "")
        clock.now += 1
    counted = {n: q.position(pod(n).uid) for n in "abcd"}  # nothing kept yet: counted
    kept = q.positions()
    assert counted == {n: kept[pod(n).uid] for n in "abcd"} == {"b": 1, "d": 2, "a": 3, "c": 4}
    assert q.position(pod("zz").uid) == 0
