"""The scheduling queue (kube-scheduler's ``backend/queue/scheduling_queue.go``).

Three places a pending pod can be::

    add ──PreEnqueue ok──► activeQ ──pop──► (in flight) ──unschedulable──► unschedulablePods
      │                      ▲  ▲                 │                          │   │
      │                      │  └──backoff over── backoffQ ◄──error / event──┘   │
      └──PreEnqueue fails──► gated (kept in unschedulablePods, counted "gated")  │
                             ▲                                                   │
                             └────── an event a rejecting plugin registered ─────┘
                                     for, or podMaxInUnschedulablePodsDuration

- activeQ is ordered by the profile's QueueSort plugin (priority, then age).
- backoffQ (:mod:`berth.queue.backoff`) holds pods until ``initial *
  2^(attempts-1)`` (capped) has passed since their last attempt.
- SchedulerPopFromBackoffQ (kube-scheduler v1.34, beta, on by default; the
  ``pop_from_backoff`` argument): when activeQ is empty the next pop takes
  the head of backoffQ's plugin-rejected heap (not the error one) instead
  of waiting; backoff expiries align to 1 s windows, a pod enters backoffQ
  only past PreEnqueue, and leaves it for activeQ without re-running it.
- A pod rejected by plugins waits in unschedulablePods until a cluster event
  one of those plugins registered for arrives (``EventsToRegister``); if such
  an event arrived while the pod was being scheduled, it goes to backoffQ at
  once instead (``moveRequestCycle``), so no wake-up is lost.
- Gated pods (PreEnqueue said no) are re-checked when they are updated or an
  event their gating plugin registered for arrives.
- Unschedulable and gated pods left alone longer than
  podMaxInUnschedulablePodsDuration are flushed out anyway (as if by an
  event); from 1.37 a pod flushed and parked again waits that long anew
  (``FlushTimestamp``), not only since its last attempt.
- The nominator remembers nominated nodes so Filter accounts for them.
- With batch queues (:class:`Lanes`), activeQ is one heap per leaf queue
  ("lane"): each pop first picks the lane (the fair order: lowest weighted
  dominant share, hierarchically), then the best pod in it by QueueSort. A
  pod that cannot be placed parks as usual, so it never blocks its lane.
  backoffQ is one queue for all lanes: it is popped early only when every
  lane's activeQ is empty, and then by upstream's order (expiry window,
  then QueueSort) — any lane's pod is better than an idle scheduler, and a
  lane with active pods is always served from activeQ first.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import heapq
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

import msgspec

from berth import features
from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.framework import interface as fw
from berth.metrics import Metrics, QueueRecorder
from berth.queue import backoff as bq
from berth.queue.nominator import Nominator

__all__ = ["Lanes", "SchedulingQueue"]

log = logging.getLogger(__name__)

#: flushUnschedulablePodsLeftover runs every 30 s; backoff completions every 1 s.
UNSCHEDULABLE_FLUSH_INTERVAL = 30.0
BACKOFF_FLUSH_INTERVAL = 1.0

PHASE_ACTIVE = "Active"
PHASE_BACKOFF = "Backoff"
PHASE_UNSCHEDULABLE = "Unschedulable"
PHASE_GATED = "Gated"
PHASE_IN_FLIGHT = "InFlight"


_COUNT_KEYS = {
    PHASE_ACTIVE: "active",
    PHASE_BACKOFF: "backoff",
    PHASE_UNSCHEDULABLE: "unschedulable",
    PHASE_GATED: "gated",
    PHASE_IN_FLIGHT: "in_flight",
}
_PARKED = (PHASE_UNSCHEDULABLE, PHASE_GATED)

# scheduler_queue_incoming_pods_total's event labels for the queue's own
# moves (``pkg/scheduler/framework/events.go``); a cluster event's label is
# ``ClusterEvent.Label()``: resource then action ("NodeAdd"). A pending pod's
# own add and update are the resource "UnschedulablePod" until 1.36;
# 1.37 renames it "UnscheduledPod" and calls a pod's update of itself
# "TargetPod" (``k8s.io/kube-scheduler/framework/types.go`` v0.37.2).
EVENT_POD_ADD = "UnscheduledPodAdd"
EVENT_POD_ADD_BEFORE_1_37 = "UnschedulablePodAdd"
EVENT_POD_UPDATE = "TargetPodUpdate"
EVENT_POD_UPDATE_BEFORE_1_37 = "UnschedulablePodUpdate"
EVENT_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
EVENT_BACKOFF_COMPLETE = "BackoffComplete"
EVENT_FORCE_ACTIVATE = "ForceActivate"
EVENT_UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"
EVENT_POP_FROM_BACKOFF = "PopFromBackoffQ"


def event_label(event: fw.ClusterEvent) -> str:
    """``ClusterEvent.Label()``: the custom label, else resource + action
    ("NodeAdd", "AssignedPodDelete"); a union of update actions is "Update",
    as upstream names its general Update type."""
    if event.label:
        return event.label
    action = event.action
    if action == fw.ActionType.ALL:
        name = "All"
    elif action.name is not None and "|" not in action.name:
        name = "".join(w.capitalize() for w in action.name.split("_"))
    elif action & fw.ActionType.UPDATE == action:
        name = "Update"
    else:  # e.g. ADD | UPDATE: each part, as upstream's ActionType.String() has no name for it
        name = "|".join("".join(w.capitalize() for w in (a.name or "").split("_")) for a in action)
    return f"{event.resource}{name}"


def pod_updated(old: model.Pod, new: model.Pod) -> bool:
    """``isPodUpdated`` (``scheduling_queue.go``): whether an update changed
    more than the pod's resourceVersion, finalizers and status (its
    ResourceClaim statuses excepted). Queueing hints, which Berth does not
    run, ignore such updates too: no plugin's hint asks for them."""
    if old is new:
        return False
    if old.spec != new.spec or old.status.resource_claim_statuses != new.status.resource_claim_statuses:
        return True
    om, nm = old.metadata, new.metadata
    if om.resource_version == nm.resource_version and om.finalizers == nm.finalizers:
        return bool(om != nm)
    strip = {"resource_version": "", "finalizers": []}
    return bool(msgspec.structs.replace(om, **strip) != msgspec.structs.replace(nm, **strip))


def pod_update_label(old: PodInfo, new: PodInfo, version: features.KubeVersion) -> str:
    """The label of a pending pod's update of itself: the first of the
    changes ``PodSchedulingPropertiesChange`` looks for (``events.go``:
    labels, requests scaled down, scaled up (1.37), scheduling gates all
    removed, a toleration added, generated ResourceClaims), else the
    general update. Berth requeues the pod once, so it names one event."""
    before_1_37 = version < features.KubeVersion(1, 37)
    resource = "UnschedulablePod" if before_1_37 else "TargetPod"
    o, n = old.pod, new.pod
    if o.metadata.labels != n.metadata.labels:
        return f"{resource}UpdatePodLabel"
    if any(name not in new.requests or v > new.requests[name] for name, v in old.requests.items()):
        return f"{resource}UpdatePodScaleDown"
    if not before_1_37 and any(name not in old.requests or v > old.requests[name] for name, v in new.requests.items()):
        return f"{resource}UpdatePodScaleUp"
    if o.spec.scheduling_gates and not n.spec.scheduling_gates:
        return f"{resource}UpdatePodSchedulingGatesEliminated"
    if len(o.spec.tolerations) != len(n.spec.tolerations):
        return f"{resource}UpdatePodToleration"
    if o.status.resource_claim_statuses != n.status.resource_claim_statuses:
        return f"{resource}UpdatePodGeneratedResourceClaim"
    return EVENT_POD_UPDATE_BEFORE_1_37 if before_1_37 else EVENT_POD_UPDATE


class Lanes(Protocol):
    """How pending pods split into lanes (leaf queues) and which lane goes
    next (:class:`berth.quota.QueueTree`); the queue also reports which
    pods it holds, so the lanes know their pending demand."""

    def lane_of(self, pod: model.Pod) -> str: ...

    def pick(self, lanes: Iterable[str]) -> str: ...

    def pending_entered(self, pi: PodInfo) -> None: ...

    def pending_left(self, uid: str) -> None: ...


@dataclasses.dataclass(slots=True)
class _Entry:
    qpi: fw.QueuedPodInfo
    phase: str | None  # None only while being created
    # BackoffExpiration (getBackoffTime), aligned to its window with the gate on.
    backoff_expiry: float = bq.NO_BACKOFF
    # The last failure was an error (podErrorBackoffQ, never popped early).
    error: bool = False
    # When podMaxInUnschedulablePodsDuration last flushed it (FlushTimestamp, 1.37).
    flush_timestamp: float = 0.0
    lane: str = ""
    # The plugins this pod counts for in scheduler_unschedulable_pods.
    counted: frozenset[str] = frozenset()


class SchedulingQueue:
    """See the module docstring. One event loop owns it."""

    def __init__(
        self,
        *,
        sort_key: Callable[[fw.QueuedPodInfo], Any],
        pre_enqueue: Callable[[PodInfo, str], fw.Status],
        events: dict[str, Sequence[fw.ClusterEvent]],
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_in_unschedulable: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[dict[str, int]], None] | None = None,
        nominator: Nominator | None = None,
        lanes: Lanes | None = None,
        metrics: Metrics | None = None,
        pop_from_backoff: bool = True,
        version: features.KubeVersion = features.NEWEST,
    ) -> None:
        self._sort_key = sort_key
        self._pre_enqueue = pre_enqueue
        # plugin name -> events that may make pods it rejected schedulable
        self._events = events
        self.max_in_unschedulable = max_in_unschedulable
        self._clock = clock
        self._on_change = on_change
        self._entries: dict[str, _Entry] = {}
        # positions(), until the next change (any phase change, update, relane).
        self._positions: dict[str, int] | None = None
        # Unschedulable and gated pods: the only ones an event can move, kept
        # apart so an event costs O(parked), not O(queue).
        self._parked: dict[str, _Entry] = {}
        self._counts: dict[str, int] = dict.fromkeys(_COUNT_KEYS.values(), 0)
        self._lanes = lanes
        # activeQ: a heap per lane ("" only, without batch queues), and how
        # many live entries each holds (heaps keep stale entries until popped).
        self._active: dict[str, list[tuple[Any, int, str]]] = {"": []}
        self._active_count: dict[str, int] = {}
        self._seq = itertools.count()
        # SchedulerPopFromBackoffQ (the loop passes the gate; on by default since v1.33).
        self.pop_from_backoff = pop_from_backoff
        #: The release whose queue Berth follows (event labels, flushing).
        self.version = version
        before_1_37 = version < features.KubeVersion(1, 37)
        self._event_pod_add = EVENT_POD_ADD_BEFORE_1_37 if before_1_37 else EVENT_POD_ADD
        self._backoff = bq.BackoffQueue(
            initial=initial_backoff, maximum=max_backoff, sort_key=sort_key, pop_from_backoff=pop_from_backoff
        )
        self._wakeup = asyncio.Event()
        self.scheduling_cycle = 0
        self._move_request_cycle = -1
        self.nominator = nominator if nominator is not None else Nominator()
        self._closed = False
        # flushUnschedulableEntitiesLeftover runs on a ticker, not at every pop.
        self._next_leftover_flush = clock() + UNSCHEDULABLE_FLUSH_INTERVAL
        self._metrics = QueueRecorder(metrics)
        self._event_labels: dict[fw.ClusterEvent, str] = {}

    # ------------------------------------------------------------ introspection

    def __contains__(self, uid: str) -> bool:
        return uid in self._entries

    def phase(self, uid: str) -> str:
        e = self._entries.get(uid)
        return "" if e is None or e.phase is None else e.phase

    def get(self, uid: str) -> fw.QueuedPodInfo | None:
        e = self._entries.get(uid)
        return None if e is None else e.qpi

    def counts(self) -> dict[str, int]:
        return dict(self._counts)

    def sort_key(self, qpi: fw.QueuedPodInfo) -> Any:
        """The QueueSort key activeQ orders ``qpi`` by (smallest first)."""
        return self._sort_key(qpi)

    def pending(self) -> Iterator[fw.QueuedPodInfo]:
        for e in self._entries.values():
            yield e.qpi

    def positions(self) -> dict[str, int]:
        """uid -> 1-based rank among the pending pods of its lane by the
        QueueSort key: the order activeQ pops them in once they are all
        active. Kept until the queue changes: ``berth why`` asks it for one
        pod, and sorting thousands of pending pods for each question was
        most of its cost."""
        if self._positions is None:
            lanes: dict[str, list[fw.QueuedPodInfo]] = {}
            for e in self._entries.values():
                lanes.setdefault(e.lane, []).append(e.qpi)
            out: dict[str, int] = {}
            for members in lanes.values():
                members.sort(key=lambda q: (self._sort_key(q), q.info.key))
                for i, q in enumerate(members, 1):
                    out[q.info.uid] = i
            self._positions = out
        return self._positions

    def position(self, uid: str) -> int:
        """One pod's entry of :meth:`positions` (0: not queued), without
        sorting the queue when it changed since: one pass over its lane."""
        if self._positions is not None:
            return self._positions.get(uid, 0)
        e = self._entries.get(uid)
        if e is None:
            return 0
        mine = (self._sort_key(e.qpi), e.qpi.info.key)
        return 1 + sum(
            1
            for other in self._entries.values()
            if other.lane == e.lane and other is not e and (self._sort_key(other.qpi), other.qpi.info.key) < mine
        )

    def _changed(self) -> None:
        self._positions = None
        if self._on_change is not None:
            self._on_change(self.counts())

    # ------------------------------------------------------------ moves

    def _set_phase(self, e: _Entry, phase: str) -> None:
        """Every phase change goes through here, so counts and parking stay exact."""
        uid = e.qpi.info.uid
        self._positions = None
        if e.phase is not None and uid in self._entries:
            self._counts[_COUNT_KEYS[e.phase]] -= 1
            if e.phase == PHASE_ACTIVE:
                self._lane_count(e.lane, -1)
            elif e.phase == PHASE_BACKOFF:
                self._backoff.delete(uid)
        e.phase = phase
        self._counts[_COUNT_KEYS[phase]] += 1
        if phase == PHASE_ACTIVE:
            self._lane_count(e.lane, 1)
        if phase in _PARKED:
            self._parked[uid] = e
        else:
            self._parked.pop(uid, None)

    def _lane_count(self, lane: str, delta: int) -> None:
        n = self._active_count.get(lane, 0) + delta
        if n:
            self._active_count[lane] = n
        else:
            # No live entry left: drop the lane's stale ones with it.
            self._active_count.pop(lane, None)
            self._active.pop(lane, None)

    def _forget(self, uid: str) -> _Entry | None:
        e = self._entries.pop(uid, None)
        self._positions = None
        if e is not None:
            self._count_rejectors(e, frozenset())
        if e is not None and e.phase is not None:
            self._counts[_COUNT_KEYS[e.phase]] -= 1
            if e.phase == PHASE_ACTIVE:
                self._lane_count(e.lane, -1)
            elif e.phase == PHASE_BACKOFF:
                self._backoff.delete(uid)
            self._parked.pop(uid, None)
        if e is not None and self._lanes is not None:
            self._lanes.pending_left(uid)
        return e

    def _enter(self, e: _Entry) -> None:
        """A new or changed pod: its lane, and the lanes' pending demand."""
        self._positions = None
        if self._lanes is None:
            return
        lane = self._lanes.lane_of(e.qpi.info.pod)
        if lane != e.lane and e.phase == PHASE_ACTIVE:
            self._lane_count(e.lane, -1)
            self._lane_count(lane, 1)
        e.lane = lane
        self._lanes.pending_entered(e.qpi.info)

    def relane(self) -> None:
        """The lanes changed (queues reloaded): place every pod anew."""
        for e in list(self._entries.values()):
            self._enter(e)
            if e.phase == PHASE_ACTIVE:
                self._to_active(e)

    def _count_rejectors(self, e: _Entry, plugins: frozenset[str]) -> None:
        """scheduler_unschedulable_pods: a pod counts for the plugins that
        rejected (or gate) it while it waits in the queue — added when it
        comes back from an attempt or is gated, removed when it is popped
        (``unlockedPop``) or leaves. Upstream does not remove a deleted
        pod's count; Berth does, so the gauge never drifts."""
        if plugins == e.counted:
            return
        profile = e.qpi.profile
        self._metrics.unschedulable(e.counted - plugins, profile, -1)
        self._metrics.unschedulable(plugins - e.counted, profile, 1)
        e.counted = plugins

    def _to_active(self, e: _Entry, event: str = "") -> None:
        if event:
            self._metrics.incoming("active", event)
        if e.qpi.initial_attempt_timestamp is None:
            # moveToActiveQ: the SLI's start, when the pod first becomes schedulable.
            e.qpi.initial_attempt_timestamp = self._clock()
        if e.phase != PHASE_ACTIVE:
            self._set_phase(e, PHASE_ACTIVE)
        heap = self._active.get(e.lane)
        if heap is None:
            heap = self._active[e.lane] = []
        heapq.heappush(heap, (self._sort_key(e.qpi), next(self._seq), e.qpi.info.uid))
        self._wakeup.set()

    def _to_backoff(self, e: _Entry, event: str = "") -> None:
        """backoffQueue.add; the pod has passed PreEnqueue (gate on)."""
        if event:
            self._metrics.incoming("backoff", event)
        self._set_phase(e, PHASE_BACKOFF)
        self._backoff.add(e.qpi, e.backoff_expiry, error=e.error)
        if self.pop_from_backoff and not e.error:
            # A pod activeQ may pop at once: wake a waiting pop (upstream
            # broadcasts when queue == backoffQ with the gate on).
            self._wakeup.set()

    def _move_to_backoff(self, e: _Entry, event: str) -> bool:
        """moveToBackoffQ: with SchedulerPopFromBackoffQ, PreEnqueue runs on
        the way into backoffQ (not on the way out), and a pod it rejects
        parks as gated instead. True if the pod is in backoffQ."""
        if self.pop_from_backoff and not self._pre_enqueue_ok(e, event):
            return False
        self._to_backoff(e, event)
        return True

    def _backing_off(self, e: _Entry, now: float) -> bool:
        return self._backoff.backing_off(e.backoff_expiry, now)

    def _gate_or_activate(self, e: _Entry, event: str) -> None:
        """Run PreEnqueue; park the pod as gated, or move it on."""
        if not self._pre_enqueue_ok(e, event):
            return
        if self._backing_off(e, self._clock()):
            self._to_backoff(e, event)
        else:
            self._to_active(e, event)

    def _activate(self, e: _Entry, event: str) -> bool:
        """moveToActiveQ: PreEnqueue runs first (a gang that lost a member,
        a claim deleted meanwhile), and a pod it rejects parks as gated.
        Only a backoff completion with SchedulerPopFromBackoffQ skips it
        (PreEnqueue ran on the way into backoffQ; see :meth:`flush`)."""
        if not self._pre_enqueue_ok(e, event):
            return False
        self._to_active(e, event)
        return True

    def _pre_enqueue_ok(self, e: _Entry, event: str) -> bool:
        """Run PreEnqueue; a pod it rejects parks as gated (False)."""
        started = time.perf_counter()
        st = self._pre_enqueue(e.qpi.info, e.qpi.profile)
        self._metrics.pre_enqueue(e.qpi.profile, st.code, time.perf_counter() - started)
        if not st.ok:
            # A flushed pod gated again never attempts scheduling: the flag
            # must not outlive this move (scheduling_queue.go v1.37.2).
            e.qpi.was_flushed_from_unschedulable = False
            if e.phase not in _PARKED:
                self._metrics.incoming("unschedulable", event)  # unschedulablePods.addOrUpdate
            if st.plugin:
                self._count_rejectors(e, e.counted | {st.plugin})
            self._set_phase(e, PHASE_GATED)
            e.qpi.gated_by = st.plugin
            e.qpi.pending_plugins = {st.plugin} if st.plugin else set()
            return False
        e.qpi.gated_by = ""
        return True

    def add(self, pod: PodInfo, profile: str) -> None:
        """A new pending pod (or a newer version of one the queue holds)."""
        uid = pod.uid
        e = self._entries.get(uid)
        if e is not None:
            self.update(pod)
            return
        now = self._clock()
        qpi = fw.QueuedPodInfo(info=pod, timestamp=now, enqueued=now, profile=profile)
        e = self._entries[uid] = _Entry(qpi, None)
        self._enter(e)
        self._gate_or_activate(e, self._event_pod_add)
        self._changed()

    def update(self, pod: PodInfo) -> None:
        e = self._entries.get(pod.uid)
        if e is None:
            return
        old, e.qpi.info = e.qpi.info, pod
        self._enter(e)
        if e.phase == PHASE_ACTIVE:
            # Re-push so a changed priority re-sorts; stale heap entries are skipped on pop.
            self._to_active(e)
        elif e.phase == PHASE_BACKOFF:
            self._backoff.update(e.qpi)  # backoffQueue.update: re-sorts too
        elif e.phase in (PHASE_GATED, PHASE_UNSCHEDULABLE) and pod_updated(old.pod, pod.pod):
            # kube-scheduler: an update to an unschedulable pod may make it
            # schedulable; a gated pod is re-checked. One that changed only
            # its status (its nominatedNodeName, say) stays where it is.
            self._gate_or_activate(e, pod_update_label(old, pod, self.version))
        self._changed()

    def delete(self, uid: str) -> None:
        if self._forget(uid) is not None:
            self._changed()
        self.nominator.delete(uid)

    def activate(self, uids: Sequence[str]) -> None:
        """Move these pods to activeQ now (e.g. a gang became complete)."""
        for uid in uids:
            e = self._entries.get(uid)
            if e is not None and e.phase in (PHASE_UNSCHEDULABLE, PHASE_BACKOFF, PHASE_GATED):
                if e.phase == PHASE_GATED:
                    self._gate_or_activate(e, EVENT_FORCE_ACTIVATE)
                else:
                    self._activate(e, EVENT_FORCE_ACTIVATE)
        self._changed()

    def add_unschedulable(self, qpi: fw.QueuedPodInfo, cycle: int, *, error: bool = False) -> None:
        """After a failed attempt (AddUnschedulableIfNotPresent)."""
        uid = qpi.info.uid
        e = self._entries.get(uid)
        if e is None or e.phase != PHASE_IN_FLIGHT:
            return  # deleted meanwhile, or re-added by an update
        now = self._clock()
        # AddUnschedulableIfNotPresent refreshes Timestamp ("since the pod is
        # re-added", scheduling_queue.go) and clears the cached
        # BackoffExpiration; Berth counts attempts where upstream counts
        # UnschedulableCount / ConsecutiveErrorsCount. The refreshed Timestamp
        # is what PrioritySort orders by, so a pod that comes back (after a
        # preemption, say) goes behind equal-priority pods never tried yet.
        qpi.timestamp = now
        # Back after an attempt: a flush before it no longer counts (v1.36, v1.37).
        qpi.was_flushed_from_unschedulable = False
        e.flush_timestamp = 0.0
        e.backoff_expiry = self._backoff.expiry(now, qpi.attempts)
        rejectors = frozenset(qpi.unschedulable_plugins | qpi.pending_plugins)
        # backoffQueue.add: no rejecting plugin means an error (podErrorBackoffQ).
        e.error = error or not rejectors
        if not error:
            self._count_rejectors(e, rejectors)
        if error or self._move_request_cycle >= cycle:
            # An error, or a cluster event arrived while this pod was in flight.
            self._move_to_backoff(e, EVENT_ATTEMPT_FAILURE)
        else:
            self._metrics.incoming("unschedulable", EVENT_ATTEMPT_FAILURE)
            self._set_phase(e, PHASE_UNSCHEDULABLE)
        self._changed()

    def add_back(self, qpi: fw.QueuedPodInfo, cycle: int, *, error: bool = False) -> None:
        """A pod that failed after it left the queue (Reserve, Permit, binding)
        returns through the failure path, so backoff applies."""
        uid = qpi.info.uid
        if uid in self._entries:
            return
        e = self._entries[uid] = _Entry(qpi, None)
        self._enter(e)
        self._set_phase(e, PHASE_IN_FLIGHT)
        self.add_unschedulable(qpi, cycle, error=error)

    def done(self, uid: str) -> None:
        """A pod's attempt succeeded: it leaves the queue (assumed)."""
        e = self._entries.get(uid)
        if e is not None and e.phase == PHASE_IN_FLIGHT:
            self._forget(uid)
            self._changed()

    def requeue_in_flight(self, uid: str) -> None:
        """A pod popped but not attempted (e.g. its profile is busy): back to activeQ."""
        e = self._entries.get(uid)
        if e is not None and e.phase == PHASE_IN_FLIGHT:
            self._to_active(e)

    # ------------------------------------------------------------ events

    def _interested(self, qpi: fw.QueuedPodInfo, event: fw.ClusterEvent) -> bool:
        plugins = qpi.unschedulable_plugins | qpi.pending_plugins
        if not plugins:
            return True  # rejected for an unknown reason: any event may help
        for name in plugins:
            for registered in self._events.get(name, ()):
                if registered.matches(event):
                    return True
        return False

    def on_event(
        self,
        event: fw.ClusterEvent,
        *,
        pred: Callable[[fw.QueuedPodInfo], bool] | None = None,
        uids: Iterable[str] | None = None,
    ) -> int:
        """MoveAllToActiveOrBackoffQueue: wake the pods this event may help
        (``uids``: only these, when the caller knows who the event concerns —
        a gang's members: a scan of every parked pod per added member made a
        feed of gang pods quadratic)."""
        self._move_request_cycle = self.scheduling_cycle
        moved = 0
        now = self._clock()
        label = ""
        if uids is None:
            candidates = list(self._parked.values())
        else:
            candidates = [e for e in map(self._parked.get, uids) if e is not None]
        for e in candidates:
            if not self._interested(e.qpi, event) or (pred is not None and not pred(e.qpi)):
                continue
            if not label:
                label = self._event_labels.get(event) or self._event_labels.setdefault(event, event_label(event))
            if e.phase == PHASE_GATED:
                self._gate_or_activate(e, label)
                moved += e.phase != PHASE_GATED
                continue
            # requeuePodWithQueueingStrategy: backoffQ only while backing off.
            if self._backing_off(e, now):
                moved += self._move_to_backoff(e, label)
            else:
                moved += self._activate(e, label)
        if moved:
            self._changed()
        return moved

    def flush(self) -> None:
        """Backoff completions to activeQ; leftovers of the unschedulable pool out."""
        now = self._clock()
        moved = False
        # flushBackoffQCompleted. Berth flushes at every pop and wakes at
        # next_backoff_deadline, which with the gate on is a window's start,
        # so whole windows move at once as upstream's aligned ticker does.
        for qpi in self._backoff.pop_all_completed(now):
            e = self._entries.get(qpi.info.uid)
            if e is None or e.phase != PHASE_BACKOFF:
                continue
            # moveToActiveQ: PreEnqueue already ran on the way in (gate on).
            if self.pop_from_backoff or self._pre_enqueue_ok(e, EVENT_BACKOFF_COMPLETE):
                self._to_active(e, EVENT_BACKOFF_COMPLETE)
            moved = True
        if now >= self._next_leftover_flush:
            self._next_leftover_flush = now + UNSCHEDULABLE_FLUSH_INTERVAL
            moved = self._flush_leftover(now) or moved
        if moved:
            self._changed()

    def _flush_leftover(self, now: float) -> bool:
        """flushUnschedulableEntitiesLeftover (every 30 s): every parked pod,
        gated ones too, whose last attempt (or add) is older than
        podMaxInUnschedulablePodsDuration — from 1.37, older than its last
        flush too (FlushTimestamp, ``scheduling_queue.go`` v1.37.2), so a
        pod parked again at once is not flushed at every pass."""
        moved = False
        with_flush_time = self.version >= features.KubeVersion(1, 37)
        for e in list(self._parked.values()):
            last = e.qpi.timestamp
            if with_flush_time and e.flush_timestamp > last:
                last = e.flush_timestamp
            if now - last <= self.max_in_unschedulable:
                continue
            e.qpi.was_flushed_from_unschedulable = True
            e.flush_timestamp = now
            if e.phase == PHASE_GATED:
                self._gate_or_activate(e, EVENT_UNSCHEDULABLE_TIMEOUT)
            elif self._backing_off(e, now):
                self._move_to_backoff(e, EVENT_UNSCHEDULABLE_TIMEOUT)
            else:
                self._activate(e, EVENT_UNSCHEDULABLE_TIMEOUT)
            moved = True
        return moved

    def next_backoff_deadline(self) -> float | None:
        """When the next pod completes its backoff (a flush is due)."""
        return self._backoff.next_completion()

    # ------------------------------------------------------------ pop

    def _pop_ready(self) -> fw.QueuedPodInfo | None:
        if not self._active_count:
            return self._pop_from_backoff() if self.pop_from_backoff else None
        if len(self._active_count) == 1 or self._lanes is None:
            lane = next(iter(self._active_count))
        else:
            lane = self._lanes.pick(self._active_count)
        heap = self._active.get(lane, [])
        while heap:
            _, _, uid = heapq.heappop(heap)
            e = self._entries.get(uid)
            if e is None or e.phase != PHASE_ACTIVE or e.lane != lane:
                continue  # stale heap entry
            return self._start_attempt(e)
        return None

    def _pop_from_backoff(self) -> fw.QueuedPodInfo | None:
        """activeQueue.unlockedPop with every lane's activeQ empty: backoffQ's
        head (popBackoff), counted as incoming to activeQ by PopFromBackoffQ."""
        while (qpi := self._backoff.pop_backoff()) is not None:
            e = self._entries.get(qpi.info.uid)
            if e is None or e.phase != PHASE_BACKOFF:
                continue  # cannot happen: leaving backoff deletes from backoffQ
            self._metrics.incoming("active", EVENT_POP_FROM_BACKOFF)
            if e.qpi.initial_attempt_timestamp is None:
                e.qpi.initial_attempt_timestamp = self._clock()
            return self._start_attempt(e)
        return None

    def _start_attempt(self, e: _Entry) -> fw.QueuedPodInfo:
        """unlockedPop's tail: in flight, one more attempt, a new cycle."""
        self._set_phase(e, PHASE_IN_FLIGHT)
        e.qpi.attempts += 1
        self._count_rejectors(e, frozenset())
        self.scheduling_cycle += 1
        self._changed()
        return e.qpi

    def pop_nowait(self) -> fw.QueuedPodInfo | None:
        self.flush()
        return self._pop_ready()

    async def pop(self) -> fw.QueuedPodInfo:
        """The next pod to schedule, waiting (and flushing backoff) as needed."""
        while True:
            if self._closed:
                raise asyncio.CancelledError
            qpi = self.pop_nowait()
            if qpi is not None:
                return qpi
            self._wakeup.clear()
            deadline = self.next_backoff_deadline()
            timeout = BACKOFF_FLUSH_INTERVAL
            if deadline is not None:
                # At least a millisecond: a deadline a rounding error away
                # (3.0300000000000002 against a clock at 3.03) would
                # otherwise spin with zero timeouts on a virtual clock
                # whose resolution cannot express it.
                timeout = max(0.001, min(timeout, deadline - self._clock()))
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a
            # cancellation that arrives as the wakeup fires (cpython gh-86296),
            # and the loop would then never stop (a test's teardown, SIGTERM).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wakeup.wait()

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()
