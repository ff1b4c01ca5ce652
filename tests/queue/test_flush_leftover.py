"""The unschedulable pool's leftovers and a pending pod's own updates, per
release (``backend/queue/scheduling_queue_test.go`` and
``framework/events.go`` of kube-scheduler v1.35.4, v1.36.3, v1.37.2)."""

from __future__ import annotations

import msgspec
import pytest

from berth.cache.infos import PodInfo
from berth.features import KubeVersion
from berth.framework import interface as fw
from berth.queue.scheduling_queue import SchedulingQueue, pod_update_label, pod_updated
from berth.testing import make_pod
from tests.support import ManualClock as Clock

V135, V136, V137 = KubeVersion(1, 35), KubeVersion(1, 36), KubeVersion(1, 37)
MAX_STAY = 300.0  # DefaultPodMaxInUnschedulablePodsDuration


def make_queue(clock: Clock, gated: set[str], *, backoff: float = 1.0, version: KubeVersion = V137) -> SchedulingQueue:
    def pre_enqueue(pod: PodInfo, profile: str) -> fw.Status:
        if pod.key in gated:
            return fw.Status(fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("not allowed",), "preEnqueuePlugin")
        return fw.SUCCESS

    return SchedulingQueue(
        sort_key=lambda q: (-q.info.priority, q.timestamp),
        pre_enqueue=pre_enqueue,
        events={"foo": []},
        initial_backoff=backoff,
        max_backoff=backoff,
        max_in_unschedulable=MAX_STAY,
        clock=clock,
        version=version,
    )


def pod(name: str = "pod1", **kw: object) -> PodInfo:
    return PodInfo.of(make_pod(name, **kw))  # type: ignore[arg-type]


def park(q: SchedulingQueue, name: str = "pod1") -> fw.QueuedPodInfo:
    """Pop the pod and report it unschedulable by plugin "foo"."""
    qpi = q.pop_nowait()
    assert qpi is not None and qpi.info.key == f"default/{name}"
    qpi.unschedulable_plugins = {"foo"}
    q.add_unschedulable(qpi, q.scheduling_cycle)
    return qpi


def test_a_flushed_pod_is_marked_and_the_mark_is_cleared_when_it_comes_back() -> None:
    """TestFlushUnschedulableEntitiesLeftoverSetsFlag."""
    clock = Clock()
    q = make_queue(clock, set())
    q.add(pod(), "p")
    qpi = park(q)
    assert not qpi.was_flushed_from_unschedulable
    clock.now = MAX_STAY + 1
    assert q.pop_nowait() is qpi
    assert qpi.was_flushed_from_unschedulable
    qpi.unschedulable_plugins = {"foo"}
    q.add_unschedulable(qpi, q.scheduling_cycle)
    assert q.phase(qpi.info.uid) == "Unschedulable"
    assert not qpi.was_flushed_from_unschedulable


@pytest.mark.parametrize(
    ("gated_before", "gated_after", "backing_off", "want_flag", "want_phase"),
    [
        pytest.param(False, False, False, True, "Active", id="flag is set when pod is not gated"),
        pytest.param(True, False, False, True, "Active", id="flag is set when pod is no longer gated"),
        pytest.param(False, True, False, False, "Gated", id="flag is unset when pod is newly gated"),
        pytest.param(True, True, False, False, "Gated", id="flag is unset when pod is still gated"),
        pytest.param(
            False, False, True, True, "Backoff", id="flag is set when pod is not gated and backoff is not complete"
        ),
        pytest.param(
            True,
            False,
            True,
            True,
            "Backoff",
            id="flag is set when pod is no longer gated and backoff is not complete",
        ),
        pytest.param(
            False, True, True, False, "Gated", id="flag is unset when pod is newly gated and backoff is not complete"
        ),
        pytest.param(
            True, True, True, False, "Gated", id="flag is unset when pod is still gated and backoff is not complete"
        ),
    ],
)
def test_the_flush_flag_follows_where_the_pod_ends_up(
    gated_before: bool, gated_after: bool, backing_off: bool, want_flag: bool, want_phase: str
) -> None:
    """TestFlushUnschedulablePodsLeftoverSetsFlag_GatedPod (scheduling_queue_test.go v1.37.2)."""
    clock = Clock()
    gated: set[str] = set()
    q = make_queue(clock, gated, backoff=MAX_STAY + 60 if backing_off else 1.0)
    q.add(pod(), "p")
    qpi = q.pop_nowait()
    assert qpi is not None
    if gated_before:
        # A gated pod's plugins: the gate's (setQueuedPodInfoGated).
        qpi.pending_plugins = {"preEnqueuePlugin"}
    if gated_after:
        gated.add("default/pod1")
    qpi.unschedulable_plugins = {"foo"}
    q.add_unschedulable(qpi, q.scheduling_cycle)
    clock.now = MAX_STAY + 1
    q.flush()
    assert q.phase(qpi.info.uid) == want_phase
    assert qpi.was_flushed_from_unschedulable is want_flag


@pytest.mark.parametrize(
    ("version", "flushed_again_at_9_01"),
    [
        # 1.37 (FlushTimestamp): once per podMaxInUnschedulablePodsDuration.
        (V137, False),
        # Before: at every pass once the pod is older than that (its Timestamp never moves).
        (V136, True),
        (V135, True),
    ],
)
def test_a_gated_pod_is_flushed_once_per_maximum_stay_from_1_37(
    version: KubeVersion, flushed_again_at_9_01: bool
) -> None:
    """TestGatedPodFlushFrequency (scheduling_queue_test.go v1.37.2), and
    the releases before it."""
    clock = Clock()
    runs: list[float] = []
    gated = {"default/pod1"}

    def pre_enqueue(p: PodInfo, profile: str) -> fw.Status:
        runs.append(clock.now)
        return (
            fw.Status(fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("gated",), "preEnqueuePlugin")
            if p.key in gated
            else fw.SUCCESS
        )

    q = SchedulingQueue(
        sort_key=lambda x: x.timestamp,
        pre_enqueue=pre_enqueue,
        events={},
        max_in_unschedulable=MAX_STAY,
        clock=clock,
        version=version,
    )
    q.add(pod(), "p")
    assert q.phase("uid-default-pod1") == "Gated"
    runs.clear()
    clock.now = MAX_STAY + 1  # T=5:01
    q.flush()
    assert runs == [MAX_STAY + 1]
    clock.now += 4 * 60  # T=9:01
    q.flush()
    assert (len(runs) == 2) is flushed_again_at_9_01
    clock.now += 61  # T=10:02
    q.flush()
    assert runs[-1] == clock.now
    assert q.phase("uid-default-pod1") == "Gated"


def test_the_leftover_flush_runs_every_30_seconds() -> None:
    clock = Clock()
    q = make_queue(clock, set())
    q.add(pod(), "p")
    qpi = park(q)
    clock.now = MAX_STAY + 1  # due, but the first pass (at 30 s) is what counts
    assert q.pop_nowait() is qpi
    qpi.unschedulable_plugins = {"foo"}
    q.add_unschedulable(qpi, q.scheduling_cycle)  # parked again at 301 s
    clock.now = 2 * MAX_STAY + 2  # more than 300 s later, but the last pass was at 301 s ...
    q.flush()
    assert q.phase(qpi.info.uid) == "Active"  # ... and 30 s have passed since: flushed


# ---------------------------------------------------------------- a pending pod's own updates


def updated(p: PodInfo, **spec: object) -> PodInfo:
    return PodInfo.of(msgspec.structs.replace(p.pod, spec=msgspec.structs.replace(p.pod.spec, **spec)))


GATED = pod(spec={"schedulingGates": [{"name": "g"}]})
PLAIN = pod(requests={"cpu": "1"})


RELABELLED = PodInfo.of(
    msgspec.structs.replace(PLAIN.pod, metadata=msgspec.structs.replace(PLAIN.pod.metadata, labels={"a": "b"}))
)
TOLERATING = pod(requests={"cpu": "1"}, spec={"tolerations": [{"key": "k", "operator": "Exists"}]})


@pytest.mark.parametrize(
    ("old", "new", "action", "since_1_37"),
    [
        pytest.param(PLAIN, RELABELLED, "UpdatePodLabel", False, id="labels"),
        pytest.param(PLAIN, pod(requests={"cpu": "500m"}), "UpdatePodScaleDown", False, id="scale down"),
        # extractPodScaleUp is new in 1.37; before, a scale-up is the general update.
        pytest.param(PLAIN, pod(requests={"cpu": "2"}), "UpdatePodScaleUp", True, id="scale up"),
        pytest.param(
            GATED, updated(GATED, scheduling_gates=[]), "UpdatePodSchedulingGatesEliminated", False, id="gates gone"
        ),
        pytest.param(PLAIN, TOLERATING, "UpdatePodToleration", False, id="toleration"),
        pytest.param(PLAIN, pod(requests={"cpu": "1"}, spec={"priority": 5}), "Update", False, id="anything else"),
    ],
)
def test_a_pending_pods_update_is_labelled_by_what_changed(
    old: PodInfo, new: PodInfo, action: str, since_1_37: bool
) -> None:
    """PodSchedulingPropertiesChange (events.go): the resource is
    UnschedulablePod until 1.36, TargetPod in 1.37 (the pod's update of itself)."""
    assert pod_update_label(old, new, V137) == f"TargetPod{action}"
    before = "Update" if since_1_37 else action
    assert pod_update_label(old, new, V136) == f"UnschedulablePod{before}"
    assert pod_update_label(old, new, V135) == f"UnschedulablePod{before}"


def test_an_update_of_the_status_alone_leaves_an_unschedulable_pod_parked() -> None:
    """isPodUpdated: resourceVersion, finalizers and status (but its
    ResourceClaim statuses) are no reason to retry a pod."""
    clock = Clock()
    q = make_queue(clock, set())
    q.add(PLAIN, "p")
    park(q)
    p = PLAIN.pod
    nominated = msgspec.structs.replace(
        p,
        metadata=msgspec.structs.replace(p.metadata, resource_version="7"),
        status=msgspec.structs.replace(p.status, nominated_node_name="n0"),
    )
    assert not pod_updated(p, nominated)
    q.update(PodInfo.of(nominated))
    assert q.phase(PLAIN.uid) == "Unschedulable"
    relabelled = msgspec.structs.replace(nominated, metadata=msgspec.structs.replace(p.metadata, labels={"x": "y"}))
    assert pod_updated(nominated, relabelled)
    q.update(PodInfo.of(relabelled))
    assert q.phase(PLAIN.uid) == "Backoff"  # retried, once its 1 s of backoff is over
