"""backoffQ on its own (kube-scheduler v1.34's ``backend/queue/backoff_queue_test.go``)."""

from __future__ import annotations

import math

import pytest

from berth.cache.infos import PodInfo
from berth.framework import interface as fw
from berth.queue.backoff import NO_BACKOFF, BackoffQueue
from berth.testing import make_pod


def sort_key(q: fw.QueuedPodInfo) -> tuple[int, float]:
    """The default QueueSort: higher priority, then older."""
    return (-q.info.priority, q.timestamp)


def make_bq(
    initial: float = 1.0, maximum: float = 10.0, *, pop_from_backoff: bool = True
) -> BackoffQueue:  # DefaultPodInitialBackoffDuration / DefaultPodMaxBackoffDuration
    return BackoffQueue(initial=initial, maximum=maximum, sort_key=sort_key, pop_from_backoff=pop_from_backoff)


def qpi(name: str, timestamp: float, priority: int = 0) -> fw.QueuedPodInfo:
    return fw.QueuedPodInfo(info=PodInfo.of(make_pod(name, priority=priority)), timestamp=timestamp)


@pytest.mark.parametrize(
    ("initial", "maximum", "count", "timestamp", "pop_from_backoff", "want"),
    [
        # TestBackoffQueue_getBackoffTime
        pytest.param(1.0, 32.0, 0, 100.0, True, NO_BACKOFF, id="no backoff without a failure"),
        pytest.param(1.0, 32.0, 16, 100.0, True, 132.0, id="backoff by the failure count, capped"),
        pytest.param(0.0, 0.0, 16, 100.0, True, NO_BACKOFF, id="zero max backoff means no backoff"),
        # alignToWindow
        pytest.param(1.0, 32.0, 2, 100.3, True, 102.0, id="expiry truncated to its window with the gate"),
        pytest.param(1.0, 32.0, 2, 100.3, False, 102.3, id="expiry kept as is without the gate"),
    ],
)
def test_backoff_expiry(
    initial: float, maximum: float, count: int, timestamp: float, pop_from_backoff: bool, want: float
) -> None:
    bq = make_bq(initial, maximum, pop_from_backoff=pop_from_backoff)
    assert bq.expiry(timestamp, count) == pytest.approx(want)


@pytest.mark.parametrize(
    ("initial", "maximum", "count", "want"),
    [
        # TestBackoffQueue_calculateBackoffDuration (nanoseconds there, seconds here)
        pytest.param(1.0, 32.0, 0, 0.0, id="no backoff"),
        pytest.param(3.0, 1000.0, 5, 48.0, id="normal: 3 * 2^4"),
        pytest.param(1.0, 32.0, 16, 32.0, id="hitting max backoff duration"),
        pytest.param(1.0, float(2**31 - 1), 32, float(2**31 - 1), id="overflow_32bit"),
        pytest.param(1.0, float(2**63 - 1), 64, float(2**63 - 1), id="overflow_64bit"),
        pytest.param(1.0, 10.0, 100_000, 10.0, id="a huge count does not overflow the float"),
    ],
)
def test_backoff_duration_doubles_up_to_the_maximum(initial: float, maximum: float, count: int, want: float) -> None:
    assert make_bq(initial, maximum).duration(count) == want


@pytest.mark.parametrize(("initial", "maximum"), [(-1.0, 10.0), (1.0, -10.0)])
def test_negative_backoff_durations_are_refused(initial: float, maximum: float) -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        make_bq(initial, maximum)


NOW = 1000.5  # off a window boundary, like time.Now() in upstream's fake clock

# TestBackoffQueue_popAllBackoffCompleted's pods: name -> (timestamp, error).
POP_ALL_PODS = {
    "pod0": (NOW - 2, False),  # rejected by a plugin, backoff over
    "pod1": (NOW + 1, False),  # rejected by a plugin, still backing off
    "pod2": (NOW - 2, True),  # an error, backoff over
    "pod3": (NOW + 1, True),  # an error, still backing off
}


@pytest.mark.parametrize("pop_from_backoff", [True, False], ids=["gate on", "gate off"])
@pytest.mark.parametrize(
    ("in_backoff", "want"),
    [
        pytest.param([], [], id="both queues empty, nothing moves"),
        pytest.param(["pod0", "pod1"], ["pod0"], id="only backoffQ, the completed pod moves"),
        pytest.param(["pod2", "pod3"], ["pod2"], id="only errorBackoffQ, the completed pod moves"),
        pytest.param(["pod0", "pod1", "pod2", "pod3"], ["pod0", "pod2"], id="both queues, completed pods move"),
        pytest.param(["pod0", "pod2"], ["pod0", "pod2"], id="both queues, all pods move"),
        pytest.param(["pod1", "pod3"], [], id="both queues, no pod moves"),
    ],
)
def test_pop_all_completed_takes_each_queues_completed_pods(
    in_backoff: list[str], want: list[str], pop_from_backoff: bool
) -> None:
    bq = make_bq(pop_from_backoff=pop_from_backoff)
    for name in in_backoff:
        timestamp, error = POP_ALL_PODS[name]
        bq.add(qpi(name, timestamp), bq.expiry(timestamp, 1), error=error)
    got = [q.info.pod.metadata.name for q in bq.pop_all_completed(NOW)]
    assert got == want
    assert len(bq) == len(in_backoff) - len(want)


# TestBackoffQueueOrdering's pods on a window-aligned clock: (name, priority, timestamp).
ALIGNED = 1000.0
ORDERING_PODS = [
    ("pod0", 1, ALIGNED),
    ("pod1", 1, ALIGNED - 1),
    ("pod2", 2, ALIGNED - 2 + 0.001),
    ("pod3", 1, ALIGNED - 2),
    ("pod4", 2, ALIGNED - 2),
    ("pod5", 1, ALIGNED - 3),
]


@pytest.mark.parametrize(
    ("pop_from_backoff", "want"),
    [
        pytest.param(True, ["pod5", "pod4", "pod2", "pod3"], id="one window orders by priority with the gate"),
        pytest.param(False, ["pod5", "pod3", "pod4", "pod2"], id="priority does not matter without the gate"),
    ],
)
def test_backoff_completions_come_out_in_window_then_priority_order(pop_from_backoff: bool, want: list[str]) -> None:
    bq = make_bq(pop_from_backoff=pop_from_backoff)
    for name, priority, timestamp in ORDERING_PODS:
        bq.add(qpi(name, timestamp, priority), bq.expiry(timestamp, 1), error=False)
    assert [q.info.pod.metadata.name for q in bq.pop_all_completed(ALIGNED)] == want


@pytest.mark.parametrize(
    ("now", "backing_off"),
    [
        pytest.param(101.0, True, id="expiry window equal to the current one: still backing off"),
        pytest.param(101.999, True, id="end of the expiry's window: still backing off"),
        pytest.param(102.0, False, id="next window: done"),
    ],
)
def test_a_pod_backs_off_through_its_expiry_window(now: float, backing_off: bool) -> None:
    bq = make_bq()
    expiry = bq.expiry(100.4, 1)  # 101.4 aligned to 101
    assert expiry == 101.0
    assert bq.backing_off(expiry, now) is backing_off
    assert bq.completes_at(expiry) == 102.0


def test_pop_backoff_takes_backoffqs_head_never_an_error_pod() -> None:
    bq = make_bq()
    bq.add(qpi("err", 0.0, priority=100), bq.expiry(0.0, 1), error=True)
    bq.add(qpi("later", 0.0, priority=100), bq.expiry(5.0, 1), error=False)
    bq.add(qpi("low", 0.0, priority=1), bq.expiry(0.0, 1), error=False)
    bq.add(qpi("high", 0.0, priority=5), bq.expiry(0.0, 1), error=False)
    assert bq.len_backoff() == 3 and len(bq) == 4
    got = []
    while (q := bq.pop_backoff()) is not None:
        got.append(q.info.pod.metadata.name)
    assert got == ["high", "low", "later"]  # window first, then priority
    assert len(bq) == 1 and "uid-default-err" in bq and bq.len_backoff() == 0


def test_update_resorts_and_delete_removes() -> None:
    bq = make_bq()
    a, b = qpi("a", 0.0, priority=1), qpi("b", 0.0, priority=2)
    for q in (a, b):
        bq.add(q, bq.expiry(0.0, 1), error=False)
    a.info = PodInfo.of(make_pod("a", priority=9))  # upstream backoffQueue.update: AddOrUpdate re-sorts
    assert bq.update(a) is True
    assert bq.update(qpi("absent", 0.0)) is False
    assert bq.pop_backoff() is a
    assert bq.delete(b.info.uid) is True and bq.delete(b.info.uid) is False
    assert bq.pop_backoff() is None and len(bq) == 0
    assert bq.next_completion() is None


def test_next_completion_is_the_earliest_live_pods() -> None:
    bq = make_bq()
    early, late = qpi("early", 0.0), qpi("late", 0.0)
    bq.add(early, bq.expiry(0.2, 1), error=False)  # expiry 1, done at 2
    bq.add(late, bq.expiry(3.2, 2), error=True)  # expiry 5, done at 6
    assert bq.next_completion() == 2.0
    bq.delete(early.info.uid)
    assert bq.next_completion() == 6.0
    assert not math.isinf(bq.completes_at(5.0))
