"""SchedulerPopFromBackoffQ in the scheduling queue (kube-scheduler v1.34's
``scheduling_queue_test.go``: TestPriorityQueue_Pop, _moveToActiveQ,
_moveToBackoffQ, TestBackOffFlow), on an injected clock."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable

import pytest

from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.framework import interface as fw
from berth.metrics import Metrics
from berth.queue.scheduling_queue import SchedulingQueue
from berth.testing import make_pod

NODE_ADD = fw.ClusterEvent("Node", fw.ActionType.ADD)
GATES = [True, False]
GATE_IDS = ["gate on", "gate off"]


class Clock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class ByNamespace:
    """Lanes: one per namespace, picked alphabetically."""

    def lane_of(self, pod: model.Pod) -> str:
        return pod.metadata.namespace

    def pick(self, lanes: Iterable[str]) -> str:
        return min(lanes)

    def pending_entered(self, pi: PodInfo) -> None:
        pass

    def pending_left(self, uid: str) -> None:
        pass


def make_queue(
    clock: Clock,
    *,
    pop_from_backoff: bool = True,
    gated: set[str] | None = None,
    metrics: Metrics | None = None,
    lanes: ByNamespace | None = None,
) -> SchedulingQueue:
    gate = gated if gated is not None else set()

    def pre_enqueue(pod: PodInfo, profile: str) -> fw.Status:
        if pod.pod.metadata.name in gate:
            return fw.Status(fw.Code.PENDING, ("waiting",), "Gate")
        return fw.SUCCESS

    return SchedulingQueue(
        sort_key=lambda q: (-q.info.priority, q.timestamp),
        pre_enqueue=pre_enqueue,
        events={"NodeResourcesFit": [NODE_ADD]},
        initial_backoff=1.0,
        max_backoff=10.0,
        clock=clock,
        pop_from_backoff=pop_from_backoff,
        metrics=metrics,
        lanes=lanes,
    )


def pod(name: str, priority: int = 0, namespace: str = "default") -> PodInfo:
    return PodInfo.of(make_pod(name, priority=priority, namespace=namespace))


def to_backoff(q: SchedulingQueue, name: str, priority: int = 0, *, error: bool = False, namespace: str = "") -> str:
    """Add ``name``, pop it and fail it so that it lands in backoffQ: an
    error, or a rejection with an event during the attempt (moveRequestCycle)."""
    p = pod(name, priority, namespace or "default")
    q.add(p, "berth")
    qpi = q.pop_nowait()
    assert qpi is not None and qpi.info.uid == p.uid
    if error:
        q.add_unschedulable(qpi, q.scheduling_cycle, error=True)
    else:
        qpi.unschedulable_plugins = {"NodeResourcesFit"}
        q.on_event(NODE_ADD)  # arrives while the pod is in flight
        q.add_unschedulable(qpi, q.scheduling_cycle)
    assert q.phase(p.uid) == "Backoff"
    return p.uid


def names(q: SchedulingQueue, n: int) -> list[str]:
    out = []
    for _ in range(n):
        qpi = q.pop_nowait()
        if qpi is None:
            break
        out.append(qpi.info.pod.metadata.name)
    return out


@pytest.mark.parametrize(
    ("pop_from_backoff", "want"),
    [
        pytest.param(True, ["med", "high"], id="pops activeQ then backoffQ with the gate"),
        pytest.param(False, ["med"], id="pops activeQ only without the gate"),
    ],
)
def test_pop_takes_backoffqs_head_when_activeq_is_empty(pop_from_backoff: bool, want: list[str]) -> None:
    """TestPriorityQueue_Pop: an error pod (podErrorBackoffQ) and an
    unschedulable pod are never popped early."""
    clock = Clock()
    metrics = Metrics()
    q = make_queue(clock, pop_from_backoff=pop_from_backoff, metrics=metrics)
    to_backoff(q, "high", 100)
    to_backoff(q, "high2", 100, error=True)
    unsched = pod("unsched", 100)
    q.add(unsched, "berth")
    qpi = q.pop_nowait()
    assert qpi is not None
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    q.add_unschedulable(qpi, q.scheduling_cycle)
    q.add(pod("med", 50), "berth")
    assert names(q, len(want) + 1) == want
    popped = metrics.registry.get_sample_value(
        "scheduler_queue_incoming_pods_total", {"queue": "active", "event": "PopFromBackoffQ"}
    )
    assert (popped or 0.0) == (1.0 if pop_from_backoff else 0.0)
    assert q.phase(unsched.uid) == "Unschedulable"
    assert q.counts()["backoff"] == (1 if pop_from_backoff else 2)


def test_a_pod_popped_from_backoff_is_an_attempt_like_any_other() -> None:
    clock = Clock()
    q = make_queue(clock)
    uid = to_backoff(q, "p")
    cycle = q.scheduling_cycle
    qpi = q.pop_nowait()
    assert qpi is not None and qpi.info.uid == uid
    assert (qpi.attempts, q.scheduling_cycle, q.phase(uid)) == (2, cycle + 1, "InFlight")
    assert q.counts()["backoff"] == 0 and q.counts()["in_flight"] == 1
    assert q.next_backoff_deadline() is None


@pytest.mark.parametrize(
    ("priorities", "starts", "want"),
    [
        pytest.param({"low": 1, "high": 9}, {"low": 0.1, "high": 0.6}, ["high", "low"], id="one window: by priority"),
        pytest.param(
            {"low": 1, "high": 9}, {"low": 0.1, "high": 1.2}, ["low", "high"], id="earlier window first, any priority"
        ),
    ],
)
def test_pods_pop_from_backoff_in_window_then_priority_order(
    priorities: dict[str, int], starts: dict[str, float], want: list[str]
) -> None:
    clock = Clock()
    q = make_queue(clock)
    for name in sorted(starts, key=starts.__getitem__):
        clock.now = starts[name]
        to_backoff(q, name, priorities[name])
    assert names(q, 3) == want


def test_backoff_waits_while_any_lanes_activeq_has_pods() -> None:
    """With lanes, backoffQ is popped only when every lane's activeQ is empty."""
    clock = Clock()
    q = make_queue(clock, lanes=ByNamespace())
    to_backoff(q, "waiting", 100, namespace="a")
    q.add(pod("active", 0, namespace="b"), "berth")
    assert names(q, 3) == ["active", "waiting"]


@pytest.mark.parametrize(
    ("pop_from_backoff", "phase"),
    [
        # moveToBackoffQ: with the gate PreEnqueue runs on the way in, and a pod it rejects is parked.
        pytest.param(True, "Gated", id="gate on: PreEnqueue rejects, the pod is gated"),
        pytest.param(False, "Backoff", id="gate off: PreEnqueue not run, the pod backs off"),
    ],
)
def test_preenqueue_runs_on_the_way_into_backoff(pop_from_backoff: bool, phase: str) -> None:
    """TestPriorityQueue_moveToBackoffQ."""
    clock = Clock()
    gated: set[str] = set()
    q = make_queue(clock, pop_from_backoff=pop_from_backoff, gated=gated)
    p = pod("p")
    q.add(p, "berth")
    qpi = q.pop_nowait()
    assert qpi is not None
    gated.add("p")  # PreEnqueue now says no
    q.add_unschedulable(qpi, q.scheduling_cycle, error=True)
    assert q.phase(p.uid) == phase
    assert q.pop_nowait() is None


@pytest.mark.parametrize(
    ("pop_from_backoff", "phase"),
    [
        # moveToActiveQ(BackoffComplete): PreEnqueue already ran on the way into backoffQ.
        pytest.param(True, "Active", id="gate on: not re-run at backoff completion"),
        pytest.param(False, "Gated", id="gate off: re-run at backoff completion"),
    ],
)
def test_preenqueue_is_not_rerun_when_backoff_completes(pop_from_backoff: bool, phase: str) -> None:
    """TestPriorityQueue_moveToActiveQ's BackoffComplete cases."""
    clock = Clock()
    gated: set[str] = set()
    q = make_queue(clock, pop_from_backoff=pop_from_backoff, gated=gated)
    uid = to_backoff(q, "p", error=True)
    gated.add("p")
    clock.now += 2.0
    q.flush()
    assert q.phase(uid) == phase


@pytest.mark.parametrize("pop_from_backoff", GATES, ids=GATE_IDS)
def test_backoff_flow_rounds_up_to_the_window_with_the_gate(pop_from_backoff: bool) -> None:
    """TestBackOffFlow: each failure doubles the backoff up to the maximum;
    with the gate it completes at the window after its expiry's."""
    clock = Clock(1000.3)  # off a window boundary, like time.Now()
    q = make_queue(clock, pop_from_backoff=pop_from_backoff)
    p = pod("p")
    q.add(p, "berth")
    for i, want in enumerate([1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]):
        started = clock.now
        qpi = q.pop_nowait()
        assert qpi is not None and qpi.attempts == i + 1
        qpi.unschedulable_plugins = {"NodeResourcesFit"}
        q.add_unschedulable(qpi, q.scheduling_cycle)
        q.on_event(NODE_ADD)  # an event happens: to backoffQ, still backing off
        assert q.phase(p.uid) == "Backoff"
        deadline = q.next_backoff_deadline()
        assert deadline is not None
        if pop_from_backoff:
            # The deadline is the window after the aligned expiry; upstream:
            # "the actual backoff can be calculated by rounding up to the ordering window".
            assert math.trunc(deadline - 1.0 - started) + 1.0 == want
        else:
            assert deadline - started == pytest.approx(want)
        clock.now += 1.0  # an early flush leaves it in backoffQ
        q.flush()
        assert q.phase(p.uid) == "Backoff"
        # Moved out after the timeout; the clock stays off window boundaries.
        clock.now = deadline + (0.3 if pop_from_backoff else 0.001)
        q.flush()
        assert q.phase(p.uid) == "Active"


@pytest.mark.looptime
async def test_pop_does_not_wait_for_backoff_when_activeq_is_empty() -> None:
    loop = asyncio.get_running_loop()
    q = make_queue(Clock())  # the queue's clock stands still: only a pop from backoff can answer
    uid = to_backoff(q, "p")
    started = loop.time()
    qpi = await asyncio.wait_for(q.pop(), timeout=30)
    assert qpi.info.uid == uid and loop.time() == started


@pytest.mark.parametrize(
    ("error", "wakes"),
    [
        pytest.param(False, True, id="a rejected pod entering backoffQ wakes it"),
        pytest.param(True, False, id="an error pod entering podErrorBackoffQ does not"),
    ],
)
@pytest.mark.looptime
async def test_a_waiting_pop_wakes_for_a_pod_it_may_pop_from_backoff(error: bool, wakes: bool) -> None:
    q = make_queue(Clock())  # the queue's clock stands still: no backoff completes
    p = pod("p")
    q.add(p, "berth")
    qpi = q.pop_nowait()
    assert qpi is not None
    waiter = asyncio.ensure_future(q.pop())
    await asyncio.sleep(0.25)
    assert not waiter.done()
    if not error:
        qpi.unschedulable_plugins = {"NodeResourcesFit"}
        q.on_event(NODE_ADD)  # during the attempt: straight to backoffQ
    q.add_unschedulable(qpi, q.scheduling_cycle, error=error)
    assert q.phase(p.uid) == "Backoff"
    await asyncio.sleep(0.25)
    assert waiter.done() is wakes
    if not wakes:
        waiter.cancel()
        q.close()


@pytest.mark.timeout(10)
async def test_a_waiting_pop_is_cancelled_even_when_woken_at_the_same_moment() -> None:
    # asyncio.wait_for on Python 3.11 swallows a cancellation that arrives as
    # the awaited event fires (cpython gh-86296): the scheduling loop then
    # never stopped (a gang's backoff ending as a test tore its Berth down;
    # SIGTERM under load). The wakeup here finds no pod, so pop waits again.
    q = make_queue(Clock())
    task = asyncio.create_task(q.pop())
    await asyncio.sleep(0)
    q._wakeup.set()  # what any queue change does
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
