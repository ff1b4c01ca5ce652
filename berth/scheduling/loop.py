"""The scheduling loop (kube-scheduler's ``schedule_one.go``).

``run`` pops one pod at a time and runs its **scheduling cycle**
synchronously — snapshot, PreFilter, Filter, PostFilter on failure,
PreScore/Score, select, assume, Reserve, Permit — then starts its **binding
cycle** — WaitOnPermit, PreBind, Bind, PostBind — at once, and from where it
first waits (Permit, an API call) as a separate task, so the next pod is
scheduled while the previous one binds. A binding that never waits (the
embedded cluster's) is over before the next pod is popped, and such pods are
scheduled back to back within one event-loop turn (``Scheduler.run``). Any
failure after assume runs Unreserve, forgets the pod in the cache and
requeues it with backoff.

It publishes a :class:`~berth.framework.decision.Decision` at every step
(``core.decisions``) and reports the queue state Explain shows.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Coroutine, Sequence
from typing import Any

import msgspec

from berth import metrics
from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model, workload_api
from berth.cluster.sources import BindConflict
from berth.features import KubeVersion
from berth.framework import interface as fw
from berth.framework.decision import Decision, Reason
from berth.framework.decision import DecisionKind as Kind
from berth.framework.plugin_errors import PluginError
from berth.framework.runtime import Framework
from berth.gangs import GangKey, InvalidGang
from berth.queue.scheduling_queue import SchedulingQueue
from berth.quota import reclaim
from berth.quota.tree import QUOTA_PLUGIN, Verdict
from berth.scheduling import algorithm
from berth.scheduling.core import Core
from berth.scheduling.gang_status import GangPhases

__all__ = ["TURN_SECONDS", "QueueState", "Scheduler", "quota_verdict"]

log = logging.getLogger(__name__)

#: How long the loop may schedule pods back to back before it lets the
#: servers and other tasks run (:meth:`Scheduler.run`).
TURN_SECONDS = 0.002


def _start_eagerly(coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None] | None:
    """Run ``coro`` now, up to where it first waits: None when it finished
    without waiting, else a task (named ``name``) that carries it on from
    there. Python 3.12's ``asyncio.eager_task_factory`` does this; 3.11 has
    no eager tasks, hence these few lines. An exception ``coro`` raises is
    logged, as a task's would be."""
    try:
        awaited = coro.send(None)
    except StopIteration:
        return None
    except Exception:
        log.exception("%s failed", name)
        return None
    return asyncio.get_running_loop().create_task(_carry_on(coro, awaited), name=name)


async def _carry_on(coro: Coroutine[Any, Any, None], awaited: Any) -> None:
    """Drive ``coro``, suspended on ``awaited`` (the future it yielded, or
    None for a bare yield), as a task's steps would: it reads the future's
    outcome itself when resumed; a cancellation of this task reaches it
    through the future it waits on, or is thrown into it."""
    while True:
        try:
            if awaited is None:
                await asyncio.sleep(0)
            else:
                awaited._asyncio_future_blocking = False  # taken, as Task.__step takes a yielded future
                await awaited
        except asyncio.CancelledError:
            if awaited is None or not awaited.cancelled():
                # This task was cancelled, not the future it waits on.
                try:
                    awaited = coro.throw(asyncio.CancelledError())
                except StopIteration:
                    return
                continue
        except Exception:
            pass  # the coroutine reads the future's exception when resumed
        try:
            awaited = coro.send(None)
        except StopIteration:
            return


@dataclasses.dataclass(slots=True)
class QueueState:
    """Where a pod is in Berth's queue (empty phase: Berth does not hold it)."""

    phase: str = ""
    attempts: int = 0
    unschedulable_plugins: list[str] = dataclasses.field(default_factory=list)
    message: str = ""
    nominated_node: str = ""
    gates: list[str] = dataclasses.field(default_factory=list)


def quota_verdict(core: Core, pod: PodInfo) -> Verdict:
    """The batch queues' verdict on placing ``pod`` now. A gang member,
    while its gang is short of ``minMember`` placed, is judged with the
    members still to place: a gang is admitted against quota as a whole
    (scheduler-plugins' Coscheduling admits a PodGroup's minResources the
    same way), so no member holds quota the rest cannot get."""
    key = gang_key(core, pod.pod)
    try:
        group = core.gangs.gang(key) if key is not None else None
    except InvalidGang:
        group = None  # Coscheduling's PreEnqueue holds such a pod
    demand = [pod]
    if key is not None and group is not None:
        members = core.gangs.members(key)
        placed = sum(1 for m in members if core.cache.get_pod(m.metadata.uid) is not None)
        need = group.min_member - placed - 1
        if need > 0:
            rest = sorted(
                (m for m in members if m.metadata.uid != pod.uid and core.cache.get_pod(m.metadata.uid) is None),
                key=lambda m: (m.metadata.creation_timestamp or "", m.key),
            )
            demand += [PodInfo.of(m) for m in rest[:need]]
    verdict = core.quota.check(demand)
    if not verdict.ok and len(demand) > 1:
        return dataclasses.replace(verdict, message=f"gang {key} ({len(demand)} pods): {verdict.message}")
    return verdict


def gang_key(core: Core, pod: model.Pod) -> GangKey | None:
    """The pod's gang in the enabled dialects; None for none or for keys
    Berth cannot use (Coscheduling's PreEnqueue says why)."""
    try:
        m = core.gangs.member_of(pod)
    except InvalidGang:
        return None
    return m.key if m is not None else None


class Scheduler:
    def __init__(self, core: Core) -> None:
        self.core = core
        cfg = core.cfg
        frameworks = core.frameworks
        first = next(iter(frameworks.values()))
        events: dict[str, Sequence[fw.ClusterEvent]] = {}
        for fwk in frameworks.values():
            events.update(fwk.events_to_register())
        # A pod the queues held back is retried when usage drops, queues
        # change, or the cluster grows.
        events[QUOTA_PLUGIN] = (
            fw.ClusterEvent("Queue", fw.ActionType.ALL),
            fw.ClusterEvent("AssignedPod", fw.ActionType.DELETE),
            fw.ClusterEvent("Node", fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_ALLOCATABLE),
        )
        #: The release and gates Berth follows (every profile's Handle has the same).
        self.features = core.features
        self.queue = SchedulingQueue(
            sort_key=first.queue_sort.sort_key,
            pre_enqueue=self._pre_enqueue,
            events=events,
            initial_backoff=cfg.pod_initial_backoff_seconds,
            max_backoff=cfg.pod_max_backoff_seconds,
            max_in_unschedulable=cfg.pod_max_in_unschedulable_pods_seconds,
            clock=core.clock,
            nominator=core.nominator,
            lanes=core.quota,
            metrics=core.metrics,
            pop_from_backoff=self.features.pop_from_backoff_q,
            version=self.features.version,
        )
        core.quota.on_release = self._quota_released
        self._release_pending = False
        self.waiting = core.waiting
        self._binding: set[asyncio.Task[None]] = set()
        self._last_info: PodInfo | None = None  # on_pod's, lent to the next pod's PodInfo.of
        self._last_message: dict[str, str] = {}
        #: PodGroup phases written back (scheduler-plugins', Volcano's).
        self.gang_phases = GangPhases(core)
        #: What PreEnqueue said of a pod the queue was gating while it had
        #: no phase yet or was in flight (see :meth:`_pre_enqueue`).
        self._gating: dict[str, fw.Status] = {}
        self._attempt_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._sli_children: dict[str, Any] = {}
        # scheduler_goroutines{operation="binding"}: the binding cycles in flight, read at scrape time.
        core.metrics.goroutines.labels("binding").set_function(lambda: len(self._binding))
        # scheduler_pending_pods{queue} (and, from 1.37, scheduler_queued_entities{queue,
        # type="pod"}: every pod is an entity of its own), read at scrape time
        # too (the queue changes on every pod).
        for q in metrics.QUEUES:
            count = functools.partial(self._pending_count, q)
            core.metrics.pending_pods.labels(q).set_function(count)
            if core.metrics.queued_entities is not None:
                core.metrics.queued_entities.labels(q, metrics.ENTITY_POD).set_function(count)
        # Histograms observed through batches (metrics.Observations): once per pod or more.
        self._algorithm_duration = core.metrics.observations(core.metrics.algorithm_duration)
        self._pod_scheduling_attempts = core.metrics.observations(core.metrics.pod_scheduling_attempts)

    # ------------------------------------------------------------ metrics & decisions

    def _pending_count(self, queue: str) -> int:
        return self.queue.counts()[queue]

    def _count_attempt(self, result: str, profile: str, started: float) -> None:
        """scheduler_schedule_attempts_total and the attempt duration; the
        labelled children are looked up once (labels() is slow per pod)."""
        key = (result, profile)
        children = self._attempt_children.get(key)
        if children is None:
            m = self.core.metrics
            children = self._attempt_children[key] = (
                m.schedule_attempts.labels(result, profile),
                m.observations(m.attempt_duration.labels(result, profile)),
            )
        children[0].inc()
        children[1].observe(time.perf_counter() - started)

    def _count_scheduled(self, qpi: fw.QueuedPodInfo) -> None:
        """A pod bound (bindingCycle): its attempts, whether a flush of the
        unschedulable pool (not an event) had sent it (1.36), and the SLI
        latency from when it first entered activeQ, by attempts capped at "15+"."""
        m = self.core.metrics
        self._pod_scheduling_attempts.observe(qpi.attempts)
        if qpi.was_flushed_from_unschedulable and m.pod_scheduled_after_flush is not None:
            m.pod_scheduled_after_flush.inc()
        if qpi.initial_attempt_timestamp is None:
            return
        label = "15+" if qpi.attempts >= 15 else str(qpi.attempts)
        child = self._sli_children.get(label)
        if child is None:
            child = self._sli_children[label] = m.observations(m.pod_scheduling_sli_duration.labels(label))
        child.observe(self.core.clock() - qpi.initial_attempt_timestamp)

    def emit(
        self,
        kind: Kind,
        pod: model.Pod,
        *,
        node: str = "",
        message: str = "",
        reasons: Sequence[fw.Status] = (),
        attempts: int = 0,
    ) -> None:
        self.core.decisions.emit(
            Decision(
                kind=kind,
                pod=pod.key,
                uid=pod.metadata.uid,
                node=node,
                message=message,
                reasons=tuple(
                    Reason(
                        st.plugin,
                        st.message(),
                        st.code == fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                        error=st.code == fw.Code.ERROR,
                    )
                    for st in reasons
                )
                if reasons
                else (),
                attempts=attempts,
                timestamp_ms=int(time.time() * 1000),
            )
        )

    def queue_state(self, uid: str) -> QueueState:
        qs = QueueState()
        qpi = self.queue.get(uid)
        if qpi is not None:
            qs.phase = self.queue.phase(uid)
            qs.attempts = qpi.attempts
            qs.unschedulable_plugins = sorted(qpi.unschedulable_plugins)
            qs.message = self._last_message.get(uid, "")
            if qpi.gated_by:
                qs.gates.append(qpi.gated_by)
            qs.gates.extend(g.name for g in qpi.pod.spec.scheduling_gates)
        elif self.waiting.get(uid) is not None:
            qs.phase = "Assumed"
        elif self.core.cache.get_pod(uid) is not None:
            qs.phase = "Assumed" if self.core.cache.is_assumed(uid) else "Bound"
        qs.nominated_node = self.queue.nominator.node_of(uid)
        return qs

    # ------------------------------------------------------------ attaching

    def attach(self) -> None:
        """Become the core's scheduling loop and queue every pending pod it knows."""
        self.core.scheduler = self
        for pod in self.core.pods.all():
            self.on_pod(None, pod)

    async def detach(self) -> None:
        """Stop being the core's loop (leadership lost): finish the binding
        cycles in flight and forget what is still assumed, so the next
        leader's view is the API server's."""
        core = self.core
        if core.scheduler is self:
            core.scheduler = None
        await self.drain()
        for pi, _node, assumed in list(core.cache.pods()):
            if assumed:
                core.cache.forget_pod(pi.uid)

    # ------------------------------------------------------------ cluster events

    def on_pod(self, old: model.Pod | None, pod: model.Pod) -> None:
        uid = pod.metadata.uid
        self.gang_phases.touch_pod(pod)
        fwk = self.core.responsible_for(pod)
        if pod.spec.node_name or pod.status.phase in ("Succeeded", "Failed"):
            # Bound (by us or anyone): no longer pending.
            if uid in self.queue:
                self.queue.delete(uid)
            self.queue.nominator.delete(uid)
            if old is None or not old.spec.node_name:
                self.queue.on_event(fw.ClusterEvent("AssignedPod", fw.ActionType.ADD))
            elif old.metadata.labels != pod.metadata.labels:
                self.queue.on_event(fw.ClusterEvent("AssignedPod", fw.ActionType.UPDATE_POD_LABEL))
            return
        if fwk is None:
            return  # another scheduler's pod; it stays pending for them
        if self.core.cache.get_pod(uid) is not None:
            # Assumed and binding: nothing to queue, unless its deletion began.
            if pod.metadata.deletion_timestamp and (old is None or not old.metadata.deletion_timestamp):
                self._assumed_pod_deleting(uid)
            return
        if pod.metadata.deletion_timestamp:
            return
        # The last pod's info lends its derived requests when this pod's
        # spec holds the very same containers, overhead and resources
        # (model.share_containers makes a ReplicaSet's pods share them):
        # PodInfo.of checks that identity, and the requests derive from nothing else.
        pi = self._last_info = PodInfo.of(pod, like=self._last_info)
        self.queue.nominator.update(old.status.nominated_node_name if old is not None else "", pi)
        was = self.queue.phase(uid)
        if was:
            self.queue.update(pi)
        else:
            self.queue.add(pi, fwk.name)
            self.emit(Kind.QUEUED, pod)
        if self.queue.phase(uid) == "Gated" and was != "Gated":
            self._emit_gated(pod)
        self._wake_gang(pod)
        self._wake_scheduling_group(pod)

    def _assumed_pod_deleting(self, uid: str) -> None:
        """handleAssumedPodDeletion (``eventhandlers.go``, v1.35): the room an
        assumed pod holds is freed at once rather than when its binding
        fails — rejected at Permit (its binding cycle cleans up), else
        dropped from the cache — and the pods that room may help are woken."""
        if self.features.version < KubeVersion(1, 35) or not self.core.cache.is_assumed(uid):
            return
        if not self.waiting.reject(uid, "", "removed"):
            self.core.cache.forget_pod(uid)
        self.queue.on_event(fw.ClusterEvent("AssignedPod", fw.ActionType.DELETE))

    def _pre_enqueue(self, pod: PodInfo, profile: str) -> fw.Status:
        """PreEnqueue for the queue, which runs it whenever it moves a pod
        (an add, an update, an event that wakes gated pods). A pod it gates
        keeps the newest message, not the one it was first gated with (a
        gang member said "1 of 3" after the second member came); a pod the
        queue held elsewhere (backing off, unschedulable) that it gates now
        gets a Gated decision. A new pod's, or one back from a failed
        attempt, gets it from :meth:`_emit_gated` or :meth:`_record_failure`
        (kept meanwhile in ``_gating``: the queue has not parked it yet); one
        already gated gets none for a new count: a gang of N arriving would
        emit N*N/2 of them."""
        st = self.core.frameworks[profile].run_pre_enqueue(pod)
        if st.ok:
            return st
        self._last_message[pod.uid] = st.message()
        was = self.queue.phase(pod.uid)
        if was in ("", "InFlight"):
            self._gating[pod.uid] = st
        elif was != "Gated":
            qpi = self.queue.get(pod.uid)
            self.emit(Kind.GATED, pod.pod, message=st.message(), reasons=[st], attempts=qpi.attempts if qpi else 0)
        return st

    def last_message(self, uid: str) -> str:
        """The message of the pod's last failed attempt or of what gates it now ("" none)."""
        return self._last_message.get(uid, "")

    def _emit_gated(self, pod: model.Pod) -> None:
        qpi = self.queue.get(pod.metadata.uid)
        if qpi is None:
            return
        st = self._gating.pop(pod.metadata.uid, None) or self.core.frameworks[qpi.profile].run_pre_enqueue(qpi.info)
        self._last_message[pod.metadata.uid] = st.message()
        self.emit(Kind.GATED, pod, message=st.message(), reasons=[st], attempts=qpi.attempts)

    def on_pod_delete(self, pod: model.Pod, removed: PodInfo | None) -> None:
        uid = pod.metadata.uid
        self.gang_phases.touch_pod(pod)
        self.queue.delete(uid)
        self._last_message.pop(uid, None)  # bounded by the pods alive, not by those ever seen
        self._gating.pop(uid, None)
        if self.waiting.get(uid) is not None:
            self.waiting.reject(uid, "", "pod deleted")
        if removed is not None:
            self.queue.on_event(fw.ClusterEvent("AssignedPod", fw.ActionType.DELETE))

    def queues_changed(self) -> None:
        """The queues were reloaded: every pending pod to its new lane, and
        those the queues held back are retried."""
        self.queue.relane()
        self.queue.on_event(fw.ClusterEvent("Queue", fw.ActionType.UPDATE))

    def _quota_released(self) -> None:
        """Usage dropped or a waiting queue's demand left: once per loop
        iteration, retry the pods waiting for quota."""
        if self._release_pending or not self.core.quota.enabled:
            return
        self._release_pending = True

        def fire() -> None:
            self._release_pending = False
            self.queue.on_event(fw.ClusterEvent("Queue", fw.ActionType.UPDATE))

        try:
            asyncio.get_running_loop().call_soon(fire)
        except RuntimeError:  # no loop (a synchronous test): at once
            fire()

    def on_node(self, node: model.Node) -> None:
        self.queue.on_event(fw.ClusterEvent("Node", fw.ActionType.ADD | fw.ActionType.UPDATE))

    def on_gang(self, key: GangKey) -> None:
        """A gang's PodGroup (of any dialect) added or updated: its members may pass PreEnqueue now."""
        self.gang_phases.touch(key)
        self.queue.on_event(
            fw.ClusterEvent("PodGroup", fw.ActionType.ADD | fw.ActionType.UPDATE),
            pred=lambda q: gang_key(self.core, q.pod) == key,
        )

    def on_scheduling_group(self, obj: workload_api.PodGroup | workload_api.Workload) -> None:
        """A Workload API PodGroup (or 1.35 Workload) added or updated: its
        members may pass GangScheduling's PreEnqueue now."""
        ns, name, version = obj.metadata.namespace, obj.metadata.name, self.features.version

        def member(q: fw.QueuedPodInfo) -> bool:
            key = workload_api.group_of(q.pod, version)
            if key is None or key.namespace != ns:
                return False
            if isinstance(obj, workload_api.Workload):
                return key.workload == name
            return key.name == name and not key.workload

        self.queue.on_event(fw.ClusterEvent("PodGroup", fw.ActionType.ADD | fw.ActionType.UPDATE), pred=member)

    def _wake_scheduling_group(self, pod: model.Pod) -> None:
        """A new member of a Workload API group may complete its minCount
        (GangScheduling's UnscheduledPod/Add hint: same group only). The
        group store's member index names them; scanning every parked pod
        per new member was quadratic."""
        key = workload_api.group_of(pod, self.features.version)
        if key is not None:
            siblings = [m.metadata.uid for m in self.core.scheduling_groups.members(key)]
            self.queue.on_event(fw.ClusterEvent("Pod", fw.ActionType.ADD), uids=siblings)

    def _wake_gang(self, pod: model.Pod) -> None:
        """A new member may complete its gang: wake its parked siblings (the
        gang index knows them; scanning every parked pod was quadratic)."""
        key = gang_key(self.core, pod)
        if key is not None:
            siblings = [m.metadata.uid for m in self.core.gangs.members(key)]
            self.queue.on_event(fw.ClusterEvent("Pod", fw.ActionType.ADD), uids=siblings)

    # ------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Pop and schedule pods for ever. Pods are scheduled back to back
        within one turn of the event loop (at most :data:`TURN_SECONDS`) as
        long as each one's binding cycle finishes at once (the embedded
        cluster binds without waiting) and left nothing behind (no
        background report or eviction, no quota release pending): the pods
        see the same cache and queue, in the same order, as with a turn per
        pod, minus a loop turn, a task and a wakeup each. Any pod that
        waits (Permit, an API call) or fails ends the turn."""
        janitor = asyncio.create_task(self._janitor(), name="assumed-pod-janitor")
        try:
            while True:
                qpi: fw.QueuedPodInfo | None = await self.queue.pop()
                # No cycle sees half of a feed batch (berth/scheduling/feeding.py).
                await self.core.feeding.quiet()
                ends = time.perf_counter() + TURN_SECONDS
                while qpi is not None:
                    try:
                        settled = self.schedule_one(qpi, eager=True)
                    except Exception:
                        log.exception("scheduling %s failed unexpectedly", qpi.info.key)
                        self.queue.add_unschedulable(qpi, self.queue.scheduling_cycle, error=True)
                        settled = False
                    if not settled or self._release_pending or self.core.client.busy:
                        break
                    if time.perf_counter() >= ends:
                        break
                    qpi = self.queue.pop_nowait()
                # Let servers and binding tasks run between turns.
                await asyncio.sleep(0)
        finally:
            janitor.cancel()
            for t in list(self._binding):
                t.cancel()

    async def _janitor(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            for pi in self.core.cache.cleanup_expired():
                pod = self.core.pods.get(pi.uid)
                if pod is not None and not pod.spec.node_name:
                    self.on_pod(None, pod)

    async def drain(self) -> None:
        """Wait for the binding cycles and background reports in flight (tests, shutdown)."""
        while self._binding or self.core.client.busy:
            await asyncio.gather(*list(self._binding), return_exceptions=True)
            await self.core.client.drain()
        await self.gang_phases.drain()

    @property
    def busy(self) -> bool:
        """Pods binding or waiting at Permit, or reports still being written."""
        return bool(self._binding or self.waiting.uids() or self.core.client.busy)

    def schedule_one(self, qpi: fw.QueuedPodInfo, *, eager: bool = False) -> bool:
        """One scheduling cycle; the binding cycle is started as a task.
        With ``eager``, the binding cycle runs at once up to where it first
        waits, and a task carries it on from there (:func:`_start_eagerly`).
        Returns whether the pod placed is done with: bound, or its binding
        failed and it was requeued, with nothing left running (False after
        a scheduling failure too)."""
        core = self.core
        pod = qpi.info
        current = core.pods.get(pod.uid)
        if current is None or current.spec.node_name or current.metadata.deletion_timestamp:
            self.queue.done(pod.uid)  # deleted, bound meanwhile, or terminating (skipPodSchedule)
            return True
        fwk = core.frameworks[qpi.profile]
        started = time.perf_counter()
        cycle = self.queue.scheduling_cycle
        state = fw.CycleState()
        fwk.begin_cycle(state)
        snap = core.snapshot()
        prof = core.cfg.profile(fwk.name)
        percentage = (
            prof.percentage_of_nodes_to_score
            if prof is not None and prof.percentage_of_nodes_to_score is not None
            else core.cfg.percentage_of_nodes_to_score
        )
        if core.quota.enabled:
            verdict = quota_verdict(core, pod)
            if not verdict.ok:
                self._quota_failure(fwk, qpi, verdict, snap, cycle, started)
                return False
        try:
            result = algorithm.schedule_pod(
                fwk,
                state,
                pod,
                snap,
                percentage=percentage,
                sampler=core.samplers[fwk.name],
                top_n=prof.randomize_top_n if prof is not None else 0,
                rng=core.rng,
            )
        except algorithm.FitError as err:
            self._algorithm_duration.observe(time.perf_counter() - started)
            self._handle_fit_error(fwk, state, qpi, err, snap, cycle, started)
            return False
        except PluginError as err:
            # The runtime logged a raising plugin's traceback; this is
            # schedule_one.go's one "Error scheduling pod; retrying" line.
            log.error("error scheduling pod %s; retrying: %s", pod.key, err)
            self._failure(fwk, qpi, cycle, str(err), error=True, reasons=[err.status], started=started)
            return False
        except Exception as err:
            log.exception("scheduling %s", pod.key)
            self._failure(fwk, qpi, cycle, str(err), error=True, started=started)
            return False
        self._algorithm_duration.observe(time.perf_counter() - started)

        # Assume: the next cycle must see this pod on its node.
        assumed = msgspec.structs.replace(pod.pod, spec=msgspec.structs.replace(pod.pod.spec, node_name=result.node))
        assumed_info = dataclasses.replace(pod, pod=assumed)
        core.cache.assume_pod(assumed_info, result.node)
        self.queue.done(pod.uid)
        # An assumed pod counts on its node: no longer as nominated (assume's
        # DeleteNominatedPodIfExists).
        self.queue.nominator.delete(pod.uid)

        st = fwk.run_reserve(state, assumed_info, result.node)
        if not st.ok:
            fwk.run_unreserve(state, assumed_info, result.node)
            core.cache.forget_pod(pod.uid)
            self._requeue(fwk, qpi, cycle, st, started, result.node)
            return False
        st, waits = fwk.run_permit(state, assumed_info, result.node)
        if not st.ok and st.code != fw.Code.WAIT:
            fwk.run_unreserve(state, assumed_info, result.node)
            core.cache.forget_pod(pod.uid)
            self._requeue(fwk, qpi, cycle, st, started, result.node)
            return False
        permit = self.waiting.add(assumed_info, result.node, waits) if st.code == fw.Code.WAIT else None
        self.emit(Kind.ASSUMED, pod.pod, node=result.node, attempts=qpi.attempts)
        binding = self._binding_cycle(fwk, state, qpi, assumed_info, result.node, permit, cycle, started)
        name = f"bind {pod.key}"
        if eager:
            task = _start_eagerly(binding, name)
            if task is None:
                return True
        else:
            task = asyncio.get_running_loop().create_task(binding, name=name)
        self._binding.add(task)
        task.add_done_callback(self._binding.discard)
        return False

    def _quota_failure(
        self,
        fwk: Framework,
        qpi: fw.QueuedPodInfo,
        verdict: Verdict,
        snap: NodeTable,
        cycle: int,
        started: float,
    ) -> None:
        """The queues hold the pod back: a failure as a PreFilter rejection
        is (``0/N nodes are available: queue research: cpu 130/128 over
        max.``); a gang member releases the siblings waiting at Permit."""
        pod = qpi.info
        code = fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE if verdict.unresolvable else fw.Code.UNSCHEDULABLE
        st = fw.Status(code, (verdict.message,), QUOTA_PLUGIN)
        diagnosis = algorithm.Diagnosis(num_all_nodes=len(snap.alive_rows()), pre_filter_msg=verdict.message)
        qpi.unschedulable_plugins = {QUOTA_PLUGIN}
        qpi.pending_plugins = set()
        key = gang_key(self.core, pod.pod)
        if key is not None:
            for uid in self.waiting.uids():
                other = self.waiting.get(uid)
                if other is not None and gang_key(self.core, other.pod) == key:
                    self.waiting.reject(uid, QUOTA_PLUGIN, f"gang member {pod.key}: {verdict.message}")
        self._algorithm_duration.observe(time.perf_counter() - started)
        self._failure(
            fwk, qpi, cycle, str(algorithm.FitError(pod, diagnosis)), reasons=[st], started=started, nominated=None
        )

    def _reclaim(
        self, fwk: Framework, state: fw.CycleState, pod: PodInfo, snap: NodeTable, failures: dict[int, fw.Status]
    ) -> tuple[str | None, str]:
        """Take back borrowed room for a pod within its queue's guarantee:
        evict the victims (as preemption does) and nominate the pod. Returns
        (nominated node, or "" for none, or None while the pod waits for the
        victims of its current nomination, which then stays; what to say
        about the queues)."""
        core = self.core
        quota = core.quota
        refusal = quota.reclaim_refusal(pod)
        if refusal:
            return "", "" if refusal == "-" else refusal
        # PodEligibleToPreemptOthers, for reclaim: a pod whose victims are
        # still terminating on its nominated node waits for them rather than
        # taking more (whatever their priority: reclaim ignores it).
        nominated = core.nominator.node_of(pod.uid) or pod.pod.status.nominated_node_name
        row = snap.index.get(nominated) if nominated else None
        info = snap.infos[row] if row is not None else None
        if info is not None:
            leaving = sum(1 for p in info.pods.values() if p.pod.metadata.deletion_timestamp)
            if leaving:
                return None, f"waiting on node {nominated} for {leaving} pod(s) to terminate"
        found = reclaim.select(fwk, state, pod, snap, failures, quota, core.pdbs.list())
        if found is None:
            return "", ""
        leaf = quota.lane_of(pod.pod)
        for v in found.victims:
            # The victim's DisruptionTarget message is read from this (writes.disruption_message).
            reason = f"Preempted by pod {pod.uid} on node {found.node}: reclaimed for queue {leaf}"
            self.emit(Kind.PREEMPTED, v.pod, node=found.node, message=reason)
            quota.count_reclaim(found.queues.get(v.uid, ""))
            quota.mark_leaving(v.uid)
            core.client.evict(v.pod, reason)
        for other in core.nominator.pods_on(found.node):
            if other.priority < pod.priority and other.uid != pod.uid:
                core.nominator.delete(other.uid)
                core.client.nominate(other.pod, "")
        return found.node, found.summary(pod, quota.guaranteed_of(leaf))

    def _handle_fit_error(
        self,
        fwk: Framework,
        state: fw.CycleState,
        qpi: fw.QueuedPodInfo,
        err: algorithm.FitError,
        snap: NodeTable,
        cycle: int,
        started: float,
    ) -> None:
        pod = qpi.info
        diagnosis = err.diagnosis
        nominated = ""
        # The nomination to write: None leaves it, "" clears it. Without a
        # PostFilter result it is cleared (schedule_one.go: clearNominatedNode
        # when no PostFilter plugin runs, v1.35; the same with the
        # NominatedNodeNameForExpectation gate off before).
        nominating: str | None = ""
        post_filter_error: list[fw.Status] = []  # a PostFilter plugin failed: the decision says which
        if fwk.post_filter and not diagnosis.pre_filter_msg:
            failures = {snap.index[n]: st for n, st in diagnosis.node_to_status.items() if n in snap.index}
            res = fwk.run_post_filter(state, pod, snap, failures)
            nominating = res.nominated_node
            if res.status.ok and res.nominated_node:
                nominated = res.nominated_node
            # Whatever PostFilter said ends the message, a success's too: from
            # 1.37 a preemption says where it found room (schedule_one.go
            # schedulingAlgorithm, PostFilterMsg = status.Message()).
            diagnosis.post_filter_msg = res.status.message()
            if res.status.code == fw.Code.ERROR:
                post_filter_error.append(res.status)
        if not nominated and not diagnosis.pre_filter_msg and self.core.quota.enabled:
            fwk.dry_runs_follow(state)
            failures = {snap.index[n]: st for n, st in diagnosis.node_to_status.items() if n in snap.index}
            reclaimed, said = self._reclaim(fwk, state, pod, snap, failures)
            nominated = reclaimed or ""
            if reclaimed is None:
                # Waiting for the victims it reclaimed before: its nomination
                # holds the room they leave (whatever DefaultPreemption, which
                # found nothing to evict, said about clearing it).
                nominating = None
                diagnosis.post_filter_msg = f"{diagnosis.post_filter_msg} {said}.".lstrip()
            elif reclaimed:
                nominating = reclaimed
                diagnosis.post_filter_msg = said  # as after a preemption: what was done
            elif said:
                # Why the queues take nothing back for it (kube-scheduler's
                # PostFilter message, then the queues').
                diagnosis.post_filter_msg = f"{diagnosis.post_filter_msg} {said}.".lstrip()
        qpi.unschedulable_plugins = set(diagnosis.unschedulable_plugins)
        qpi.pending_plugins = set(diagnosis.pending_plugins)
        message = str(err)
        if nominated:
            self.queue.nominator.add(pod, nominated)
            self.emit(Kind.NOMINATED, pod.pod, node=nominated, message=message, attempts=qpi.attempts)
        reasons = list({st.reasons: st for st in diagnosis.node_to_status.values()}.values()) + post_filter_error
        # The nomination is written with the PodScheduled condition, in one
        # status patch (handleSchedulingFailure's updatePod).
        self._failure(fwk, qpi, cycle, message, reasons=reasons, started=started, nominated=nominating)

    def _requeue(
        self,
        fwk: Framework,
        qpi: fw.QueuedPodInfo,
        cycle: int,
        st: fw.Status,
        started: float,
        node: str,
        *,
        nominated: bool = False,
    ) -> None:
        """A failure after assume (Reserve, Permit, the binding cycle): the
        pod returns to the queue, its nomination cleared (clearNominatedNode)
        — written even when the pod as last seen names no node, if the
        binding cycle wrote one (``nominated``): its watch event may not have
        arrived yet, and a nomination left on the object would keep the
        node's room for a pod that no longer goes there.
        A rejection reads as a FitError on the one node (schedule_one.go:
        ``0/1 nodes are available: 1 <reason>.``) and parks the pod for its
        plugin's events; anything else is an error, retried after backoff."""
        pod = qpi.info
        current = self.core.pods.get(pod.uid)
        if current is None or current.spec.node_name:
            return  # deleted, or bound after all (e.g. by a conflicting scheduler)
        # Diagnosis.AddPluginStatus: a Pending plugin is a pending one, any
        # other rejector an unschedulable one; an error names none
        # (ClearRejectorPlugins, v1.36).
        named = {st.plugin} if st.plugin and st.is_rejection else set()
        pending = st.code == fw.Code.PENDING
        qpi.unschedulable_plugins = set() if pending else named
        qpi.pending_plugins = named if pending else set()
        if st.is_rejection:
            message = str(algorithm.FitError(pod, algorithm.Diagnosis(num_all_nodes=1, node_to_status={node: st})))
        else:
            message = st.message() or "scheduling failed"
        qpi.info = PodInfo.of(current)
        self.queue.add_back(qpi, cycle, error=not st.is_rejection)
        self._record_failure(
            fwk, qpi, message, [st], started, error=not st.is_rejection, nominated="", written=node if nominated else ""
        )

    def _failure(
        self,
        fwk: Framework,
        qpi: fw.QueuedPodInfo,
        cycle: int,
        message: str,
        *,
        error: bool = False,
        reasons: list[fw.Status] | None = None,
        started: float,
        nominated: str | None = "",
    ) -> None:
        """A failed scheduling cycle: the pod back to the queue and the
        failure reported; ``nominated`` as in :meth:`_record_failure`
        (default: cleared, schedule_one.go's clearNominatedNode)."""
        self.queue.add_unschedulable(qpi, cycle, error=error)
        self._record_failure(fwk, qpi, message, reasons or [], started, error=error, nominated=nominated)

    def _record_failure(
        self,
        fwk: Framework,
        qpi: fw.QueuedPodInfo,
        message: str,
        reasons: list[fw.Status],
        started: float,
        *,
        error: bool = False,
        nominated: str | None = None,
        written: str = "",
    ) -> None:
        """Count and report a failed attempt. ``nominated``: the pod's new
        nomination ("" clears it, None leaves it), kept by the nominator and
        written with the report when it differs from the pod's
        (handleSchedulingFailure's AddNominatedPod and updatePod), or from
        ``written``, the node this process wrote last, which the pod as seen
        here may not show yet."""
        pod = qpi.info
        if nominated == "":
            self.queue.nominator.delete(pod.uid)
        current = self.core.pods.get(pod.uid)
        if (
            nominated is not None
            and current is not None
            and current.status.nominated_node_name == nominated
            and written in ("", nominated)
        ):
            nominated = None  # nothing to write
        result = "error" if error else "unschedulable"
        self._count_attempt(result, fwk.name, started)
        self._last_message[pod.uid] = message
        gate = self._gating.pop(pod.uid, None)
        gated = self.queue.phase(pod.uid) == "Gated"
        kind = Kind.GATED if gated else Kind.UNSCHEDULABLE
        self.emit(kind, pod.pod, message=message, reasons=reasons, attempts=qpi.attempts)
        self.core.client.report_unschedulable(pod.pod, message, nominated)
        if gated and gate is not None and gate.message() != message:
            # Parked by PreEnqueue on the way back (a gang's backoff): what
            # gates it now is its latest word, not the attempt's failure.
            self._last_message[pod.uid] = gate.message()
            self.emit(Kind.GATED, pod.pod, message=gate.message(), reasons=[gate], attempts=qpi.attempts)

    async def _binding_cycle(
        self,
        fwk: Framework,
        state: fw.CycleState,
        qpi: fw.QueuedPodInfo,
        pod: PodInfo,
        node: str,
        permit: asyncio.Future[fw.Status] | None,
        cycle: int,
        started: float,
    ) -> None:
        """bindingCycle (``schedule_one.go`` v1.37.2): with
        NominatedNodeNameForExpectation, PreBind's pre-flight, and the
        pod's nominatedNodeName written first when it will wait at Permit
        or PreBind has work (so the cluster autoscaler knows where it goes);
        then WaitOnPermit, PreBind (cancellable by a preemptor from 1.36
        when it has work), Bind; any failure unreserves, forgets and requeues."""
        core = self.core
        feats = self.features
        nominated = False  # whether this cycle wrote the pod's nominatedNodeName
        try:
            st = fw.SUCCESS
            pre_flight = fw.Status(fw.Code.SKIP)
            if feats.nominated_node_name_for_expectation:
                pre_flight = fwk.run_pre_bind_pre_flights(state, pod, node)
                if pre_flight.code == fw.Code.ERROR:
                    st = pre_flight
                    if permit is not None:  # no longer waited on: drop it
                        self.waiting.reject(pod.uid, "", pre_flight.message())
                elif pre_flight.ok or permit is not None:
                    nominated = True
                    await core.client.nominate_now(pod.pod, node)
            if st.ok and permit is not None:
                waited = core.clock()
                st = await permit
                core.metrics.permit_wait_duration.labels(metrics.STATUS_CODES[st.code]).observe(core.clock() - waited)
                if not st.ok and not st.is_rejection:
                    # WaitOnPermit: an error (a preempted victim's) says where it came from.
                    st = fw.Status.error(f"waiting on permit for pod: {st.message()}", plugin=st.plugin)
            if st.ok:
                if pre_flight.ok and feats.version >= KubeVersion(1, 36):
                    # A preemptor may cancel this PreBind (podsInPreBindMap).
                    core.in_pre_bind.add(pod.uid)
                    try:
                        st = await core.in_pre_bind.run(pod.uid, fwk.run_pre_bind(state, pod, node))
                    finally:
                        core.in_pre_bind.remove(pod.uid)
                else:
                    st = await fwk.run_pre_bind(state, pod, node)
            if st.ok:
                st = await fwk.run_bind(state, pod, node)
        except asyncio.CancelledError:
            raise
        except BindConflict as e:
            st = fw.Status.error(str(e))
        except Exception as e:
            log.exception("binding %s to %s", pod.key, node)
            st = fw.Status.error(str(e))
        if not st.ok:
            self._binding_failed(fwk, state, qpi, pod, node, st, cycle, started, nominated=nominated)
            return
        core.cache.finish_binding(pod.uid)
        self._count_attempt("scheduled", fwk.name, started)
        self._count_scheduled(qpi)
        fwk.run_post_bind(state, pod, node)
        self._last_message.pop(pod.uid, None)
        self.emit(Kind.BOUND, pod.pod, node=node, attempts=qpi.attempts)
        await core.client.report_scheduled(pod.pod, node)

    def _binding_failed(
        self,
        fwk: Framework,
        state: fw.CycleState,
        qpi: fw.QueuedPodInfo,
        pod: PodInfo,
        node: str,
        st: fw.Status,
        cycle: int,
        started: float,
        *,
        nominated: bool = False,
    ) -> None:
        """handleBindingCycleError: unreserve and forget the pod, requeue it,
        and — its room being free again, as after a deletion — wake the
        pods an AssignedPod deletion may help (not the pod itself, when it
        was rejected: it waits for an event of its own)."""
        core = self.core
        fwk.run_unreserve(state, pod, node)
        forgotten = core.cache.is_assumed(pod.uid)
        if forgotten:
            core.cache.forget_pod(pod.uid)
        self.emit(Kind.BIND_FAILED, pod.pod, node=node, message=st.message(), attempts=qpi.attempts)
        self._requeue(fwk, qpi, cycle, st, started, node, nominated=nominated)
        if forgotten:
            uid = pod.uid
            self.queue.on_event(fw.ClusterEvent("AssignedPod", fw.ActionType.DELETE), pred=lambda q: q.info.uid != uid)
