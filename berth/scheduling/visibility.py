"""Why is it waiting: one answer across queue, quota, gang and node fit.

``list_pods`` is what ``berth get pods`` lists: every pod Berth schedules that
is pending or that Berth placed, with its phase and its place in its queue.
``why`` combines, for one pod, everything that holds it back — scheduling
gates and gangs (PreEnqueue, Permit), its position in its queue, the batch
queues' quota, node fit (kube-scheduler's ``0/N nodes are available: ...``
and the nodes closest to fitting), and a preemption in flight — each with
what would let it run when Berth can tell.

Pure core: read-only (it changes nothing in the core), no transport. The
CLI, the gRPC adapter and the dashboard use these dataclasses as they are.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import time
from collections.abc import AsyncIterator, Iterable

from berth.cache.infos import PodInfo
from berth.cache.snapshot import Snapshot
from berth.cluster import model
from berth.cluster.resources import format_quantity
from berth.errors import InvalidArgument, NotFound
from berth.framework import interface as fw
from berth.framework.decision import Decision, DecisionKind
from berth.framework.plugin_errors import PluginError
from berth.framework.runtime import Framework
from berth.gangs import GangKey, InvalidGang
from berth.plugins import topology_gang
from berth.quota.tree import QUOTA_PLUGIN, Verdict
from berth.scheduling import algorithm, reservations
from berth.scheduling.core import Core
from berth.scheduling.loop import quota_verdict

__all__ = [
    "PHASES",
    "Blocker",
    "PodGroupRow",
    "PodRow",
    "Why",
    "closest_nodes",
    "fit_summary",
    "gang_id",
    "gang_of",
    "list_pod_groups",
    "list_pods",
    "why",
]

PHASES = ("Gated", "Active", "Backoff", "Unschedulable", "WaitingOnPermit", "Assumed", "Bound", "Rejected")
_PENDING = frozenset({"Gated", "Active", "Backoff", "Unschedulable", "Rejected"})
#: How many nodes ``Why.closest_nodes`` names.
CLOSEST = 3
#: The plugins whose PreEnqueue holds a gang member (every dialect's; the Workload API's).
_GANG_PLUGINS = frozenset({"Coscheduling", "GangScheduling"})


@dataclasses.dataclass(slots=True)
class PodRow:
    namespace: str
    name: str
    uid: str
    queue: str  # leaf queue name, "" when unqueued
    phase: str  # Gated | Active | Backoff | Unschedulable | WaitingOnPermit | Assumed | Bound | Rejected
    node: str  # bound/assumed/nominated node ("" none)
    nominated_node: str
    attempts: int
    created: float  # unix seconds when Berth first saw it pending (age = now - created)
    reason: str  # last message (decision / unschedulable message), "" none
    position: int  # 1-based position in its queue lane among pending pods (0 when not pending)
    priority: int
    requests: dict[str, int]

    @property
    def key(self) -> str:
        return model.pod_key(self.namespace, self.name)


@dataclasses.dataclass(slots=True)
class Blocker:
    kind: str  # error | gate | queue | quota | topology | gang | fit | preemption | reservation
    message: str
    # what would let it run, when known ("frees when 3 cpu are released on node n1", "needs 2 more members of gang g")
    unblocks_when: str = ""


@dataclasses.dataclass(slots=True)
class Why:
    pod: str  # NAMESPACE/NAME
    phase: str
    summary: str  # one line; for a pod no node fits, kube-scheduler's "0/N nodes are available: ..." form
    blockers: list[Blocker]
    queue: str = ""
    position: int = 0
    node: str = ""
    closest_nodes: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (node, what it lacks)


# ---------------------------------------------------------------- list_pods


def _placed_by_berth(core: Core, pod: model.Pod) -> bool:
    d = core.decisions.latest.get(pod.key)
    return d is not None and d.uid == pod.metadata.uid and d.kind == DecisionKind.BOUND


def _latest(core: Core, pod: model.Pod) -> Decision | None:
    d = core.decisions.latest.get(pod.key)
    return d if d is not None and d.uid == pod.metadata.uid else None


def _rejected(d: Decision | None) -> bool:
    """Refused for good: the last attempt's reasons are all the queues'
    unresolvable ones (an unknown or non-leaf queue, a request above a max)
    — waiting cannot help until the queues are changed."""
    return (
        d is not None
        and d.kind == DecisionKind.UNSCHEDULABLE
        and bool(d.reasons)
        and all(r.unresolvable and r.plugin == QUOTA_PLUGIN for r in d.reasons)
    )


def _unix(ts: str | None) -> float:
    if not ts:
        return 0.0
    try:
        return dt.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _phase(core: Core, pod: model.Pod) -> tuple[str, str]:
    """(phase, node) of a pod Berth schedules; ("", "") when it is not one
    ``list_pods`` shows (finished, or bound by someone else)."""
    uid = pod.metadata.uid
    if pod.status.phase in ("Succeeded", "Failed"):
        return "", ""
    if pod.spec.node_name:
        return ("Bound", pod.spec.node_name) if _placed_by_berth(core, pod) else ("", "")
    waiting = core.waiting.get(uid)
    if waiting is not None:
        return "WaitingOnPermit", waiting.pod.spec.node_name or core.cache.pod_node(uid) or ""
    if core.cache.get_pod(uid) is not None:
        return "Assumed", core.cache.pod_node(uid) or ""
    sched = core.scheduler
    if sched is None:
        return ("Active", "") if core.responsible_for(pod) is not None else ("", "")
    phase = sched.queue.phase(uid)
    if not phase:
        return "", ""
    if phase == "InFlight":
        phase = "Active"  # being attempted right now
    if phase == "Unschedulable" and _rejected(_latest(core, pod)):
        phase = "Rejected"
    return phase, ""


def _positions(core: Core) -> dict[str, int]:
    """uid -> 1-based rank among the pending pods of its lane (leaf queue),
    by the profile's QueueSort key (:meth:`SchedulingQueue.positions`)."""
    sched = core.scheduler
    return {} if sched is None else sched.queue.positions()


def _reason(core: Core, uid: str, phase: str, d: Decision | None) -> str:
    """The row's reason: the last decision's message, or for a gated pod
    what gates it now (the queue re-runs PreEnqueue without a decision
    each time, e.g. as a gang's members arrive)."""
    if phase == "Gated" and core.scheduler is not None:
        now = core.scheduler.last_message(uid)
        if now:
            return now
    return d.message if d is not None else ""


def _row(core: Core, pod: model.Pod, phase: str, node: str, positions: dict[str, int]) -> PodRow:
    uid = pod.metadata.uid
    sched = core.scheduler
    qpi = sched.queue.get(uid) if sched is not None else None
    d = _latest(core, pod)
    created = _unix(pod.metadata.creation_timestamp)
    if qpi is not None:
        created = time.time() - max(0.0, core.clock() - qpi.enqueued)
    nominated = core.nominator.node_of(uid) or pod.status.nominated_node_name
    pi = PodInfo.of(pod)
    return PodRow(
        namespace=pod.metadata.namespace or "default",
        name=pod.metadata.name,
        uid=uid,
        queue=core.quota.leaf_of(pod)[0] if core.quota.enabled else "",
        phase=phase,
        node=node or nominated,
        nominated_node=nominated,
        attempts=qpi.attempts if qpi is not None else (d.attempts if d is not None else 0),
        created=created,
        reason=_reason(core, uid, phase, d),
        position=positions.get(uid, 0) if phase in _PENDING else 0,
        priority=pi.priority,
        requests=dict(pi.requests),
    )


def _ours(core: Core, pods: Iterable[model.Pod]) -> Iterable[tuple[model.Pod, str, str]]:
    for pod in pods:
        if core.responsible_for(pod) is None:
            continue
        phase, node = _phase(core, pod)
        if phase:
            yield pod, phase, node


#: How long building rows works before the event loop gets a turn (as
#: WhatIf's slices): 50 000 pending pods are ~1.4 s of rows.
SLICE_SECONDS = 0.01


def _listed(core: Core, namespace: str | None, phase: str | None) -> list[model.Pod]:
    if phase is not None and phase not in PHASES:
        raise InvalidArgument(f"phase: {phase!r} is not one of {', '.join(PHASES)}")
    pods = core.pods.all()
    if namespace:
        pods = [p for p in pods if (p.metadata.namespace or "default") == namespace]
    return pods


def _kept(rows: list[PodRow], queue: str | None, phase: str | None) -> list[PodRow]:
    rows = [r for r in rows if (queue is None or r.queue == queue) and (phase is None or r.phase == phase)]
    rows.sort(key=lambda r: (r.namespace, r.name))
    return rows


def list_pods(
    core: Core, *, namespace: str | None = None, queue: str | None = None, phase: str | None = None
) -> list[PodRow]:
    """Every pod Berth schedules (its profiles) that is pending or was placed by it, sorted by namespace/name."""
    pods = _listed(core, namespace, phase)
    positions = _positions(core)
    return _kept([_row(core, pod, ph, node, positions) for pod, ph, node in _ours(core, pods)], queue, phase)


async def list_pods_in_slices(
    core: Core,
    *,
    namespace: str | None = None,
    queue: str | None = None,
    phase: str | None = None,
    slice_seconds: float | None = None,
) -> list[PodRow]:
    """:func:`list_pods` built in slices (:func:`walk_rows`), for a door."""
    pods = _listed(core, namespace, phase)
    return _kept([row async for _, row in walk_rows(core, pods, slice_seconds=slice_seconds)], queue, phase)


async def walk_rows(
    core: Core, pods: Iterable[model.Pod], *, slice_seconds: float | None = None
) -> AsyncIterator[tuple[model.Pod, PodRow]]:
    """Each pod of ``pods`` Berth schedules with its :func:`list_pods` row,
    a slice of ``slice_seconds`` (default :data:`SLICE_SECONDS`) at a time
    (the consumer's work between two rows counts in the slice): the loop
    goes on between slices, so a row is its pod's as the walk reached it."""
    if slice_seconds is None:
        slice_seconds = SLICE_SECONDS
    positions = _positions(core)
    walk = iter(pods)
    while True:
        await asyncio.sleep(0)
        started = time.perf_counter()
        for pod in walk:
            for p, phase, node in _ours(core, (pod,)):
                yield p, _row(core, p, phase, node, positions)
            if time.perf_counter() - started >= slice_seconds:
                break
        else:
            return


# ---------------------------------------------------------------- list_pod_groups


def gang_of(core: Core, pod: model.Pod) -> GangKey | None:
    """The pod's gang in the enabled dialects (None: none, or keys Berth refuses)."""
    try:
        m = core.gangs.member_of(pod)
    except InvalidGang:
        return None
    return m.key if m is not None else None


def gang_id(key: GangKey) -> str:
    """How the views name a gang: ``ns/name`` for scheduler-plugins' (as
    always), ``ns/name (volcano)`` for the other dialects, so groups of one
    name in two dialects stay apart."""
    return str(key) if key.source == "scheduler-plugins" else f"{key} ({key.source})"


@dataclasses.dataclass(slots=True)
class PodGroupRow:
    namespace: str
    name: str
    min_member: int
    members: int  # pods labelled with the group, not finished
    placed: int  # bound, assumed or waiting at Permit
    waiting: int  # waiting at Permit
    bound: int
    pending: int  # members not placed
    phase: str  # Pending | Scheduling | Scheduled (scheduler-plugins' PodGroup phases)
    reason: str  # the latest decision's message about a pending member
    schedule_timeout_seconds: int
    min_resources: dict[str, int]
    #: The gang source (berth.gangs): workload-api, scheduler-plugins, volcano, kai, kueue, yunikorn.
    dialect: str = "scheduler-plugins"

    @property
    def gang(self) -> str:
        """The gang as the views name it (:func:`gang_id`)."""
        return gang_id(GangKey(self.dialect, self.namespace, self.name))


def list_pod_groups(core: Core, *, namespace: str | None = None) -> list[PodGroupRow]:
    """Every gang of every enabled dialect (berth.gangs: its PodGroup, or
    its members for Kueue's and YuniKorn's), sorted by namespace, name and
    dialect. A gang whose definition is missing or refused lists with
    minimum 0 and phase Pending; its members' reason says why."""
    rows = []
    every = core.gangs.keys()
    for key in every:
        ns = key.namespace
        if namespace and ns != namespace:
            continue
        try:
            gang = core.gangs.gang(key)
        except InvalidGang:
            gang = None
        pods = core.gangs.members(key)
        placed = waiting = bound = 0
        latest: Decision | None = None
        latest_reason = ""
        for p in pods:
            uid = p.metadata.uid
            if p.spec.node_name:
                bound += 1
            elif core.waiting.get(uid) is not None:
                waiting += 1
            elif core.cache.get_pod(uid) is None:
                d = _latest(core, p)
                if d is not None and d.message and (latest is None or d.timestamp_ms > latest.timestamp_ms):
                    latest = d
                    gated = core.scheduler is not None and core.scheduler.queue.phase(uid) == "Gated"
                    latest_reason = _reason(core, uid, "Gated" if gated else "", d)
                continue
            placed += 1
        need = gang.min_member if gang is not None else 0
        if gang is None or len(pods) < need:
            phase = "Pending"
        else:
            phase = "Scheduled" if placed >= need else "Scheduling"
        timeout = gang.timeout_seconds if gang is not None else None
        rows.append(
            PodGroupRow(
                namespace=ns,
                name=key.name,
                min_member=need,
                members=len(pods),
                placed=placed,
                waiting=waiting,
                bound=bound,
                pending=len(pods) - placed,
                phase=phase,
                reason=latest_reason if latest is not None else "",
                schedule_timeout_seconds=int(timeout or 0),
                min_resources=dict(gang.min_resources) if gang is not None else {},
                dialect=key.source,
            )
        )
    rows.sort(key=lambda r: (r.namespace, r.name, r.dialect))
    return rows


# ---------------------------------------------------------------- why


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _amounts(amounts: dict[str, int]) -> str:
    return ", ".join(f"{format_quantity(name, v)} {name}" for name, v in sorted(amounts.items()))


def _loop_time() -> float | None:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return None


def _gang_blockers(core: Core, pod: model.Pod, phase: str) -> list[Blocker]:
    """Coscheduling or GangScheduling, in whichever dialect the pod's gang is:
    members present vs minMember (PreEnqueue), or placed vs minMember and
    the time left (a member waiting at Permit)."""
    key = gang_of(core, pod)
    if key is None:
        return []
    gang = gang_id(key)
    try:
        group = core.gangs.gang(key)
    except InvalidGang as e:
        return [Blocker("gang", f"gang {gang}: {e}", "needs its definition fixed")]
    if group is None:
        missing = core.gangs.missing(key)
        if missing != "its PodGroup is not found":  # Kueue's, YuniKorn's: no object
            return [Blocker("gang", f"gang {gang}: {missing}", "")]
        dialect = "" if key.source == "scheduler-plugins" else f"{key.source} "
        return [Blocker("gang", f'{dialect}pod group "{key}" not found', f"needs the PodGroup {gang} to be created")]
    members = core.gangs.members(key)
    need = group.min_member
    if phase == "Gated":
        if len(members) >= need:
            return []
        more = need - len(members)
        return [
            Blocker(
                "gang",
                f"gang {gang} has {len(members)} of {need} required pods",
                f"needs {_plural(more, 'more member')} of gang {gang}",
            )
        ]
    placed = sum(1 for m in members if core.cache.get_pod(m.metadata.uid) is not None)
    if placed >= need:
        return []
    more = need - placed
    msg = f"gang {gang}: {placed} of {need} members placed"
    if phase == "WaitingOnPermit":
        msg += ", this one waiting at Permit"
        deadline, now = core.waiting.deadline(pod.metadata.uid), _loop_time()
        if deadline is not None and now is not None:
            msg += f" ({max(0.0, deadline - now):.0f}s left before the gang times out)"
    return [Blocker("gang", msg, f"needs {_plural(more, 'more member')} of gang {gang} placed")]


def _gate_blockers(core: Core, pod: model.Pod, fwk: Framework) -> list[Blocker]:
    st = fwk.run_pre_enqueue(PodInfo.of(pod))
    if st.ok:
        return []
    if st.plugin in _GANG_PLUGINS:
        return _gang_blockers(core, pod, "Gated") or [Blocker("gang", st.message())]
    unblocks = ""
    if pod.spec.scheduling_gates:
        names = ", ".join(g.name for g in pod.spec.scheduling_gates)
        unblocks = f"frees when the scheduling gates are removed ({names})"
    return [Blocker("gate", st.message(), unblocks)]


def _queue_blocker(core: Core, pod: model.Pod, phase: str, position: int, queue: str) -> list[Blocker]:
    where = f"queue {queue}" if queue else "the scheduling queue"
    sched = core.scheduler
    qpi = sched.queue.get(pod.metadata.uid) if sched is not None else None
    attempts = qpi.attempts if qpi is not None else 0
    if phase == "Backoff":
        return [
            Blocker(
                "queue",
                f"backing off after {_plural(attempts, 'failed attempt')}; position {position} in {where}",
                "retried when its backoff ends",
            )
        ]
    if phase == "Active" and position > 1:
        return [
            Blocker(
                "queue",
                f"position {position} in {where} ({_plural(position - 1, 'pod')} ahead)",
                "runs when the pods ahead of it have been attempted",
            )
        ]
    return []


def _quota_blocker(core: Core, pi: PodInfo) -> list[Blocker]:
    if not core.quota.enabled:
        return []
    verdict = quota_verdict(core, pi)
    if verdict.ok:
        return []
    return [Blocker("quota", verdict.message, _quota_unblocks(core, pi, verdict))]


def _topology_blocker(core: Core, pod: model.Pod, fwk: Framework, quota: list[Blocker]) -> list[Blocker]:
    """A topology gang, per domain (TopologyGang): how many members each
    closest domain holds, and — when one holds the whole gang but the queue
    does not admit it — that one, with the quota's reason ("rack=r7: 6 of 8
    members fit; block=b2: all 8 fit but queue research is over max")."""
    plugin = fwk.plugins.get(topology_gang.TopologyGang.NAME)
    if not isinstance(plugin, topology_gang.TopologyGang):
        return []
    snap = core.snapshot()
    best = plugin.best_domain(pod, snap)
    if not isinstance(best, topology_gang.Choice) or best.level is None or not quota:
        return []  # no constraint; or no domain holds it, which the fit blocker says per domain
    tighter = [str(r) for r in plugin.domain_reports(pod, snap)[:3]]
    count = len([m for m in plugin.gang_members(pod) if core.cache.get_pod(m.metadata.uid) is None])
    message = "; ".join([*tighter, f"{best}: all {count} members fit but {quota[0].message}"])
    return [Blocker("topology", message, quota[0].unblocks_when)]


def _quota_unblocks(core: Core, pi: PodInfo, verdict: Verdict) -> str:
    if not verdict.queue or not verdict.resource:
        return "frees when the queues are changed" if verdict.unresolvable else ""
    status = core.quota.get(verdict.queue)
    res = verdict.resource
    if verdict.unresolvable:
        return f"runs only if queue {verdict.queue}'s max for {res} is raised"
    if status is None:
        return ""
    demand = pi.requests.get(res, 0)
    if "over max" in verdict.message and res in status.max:
        key = gang_of(core, pi.pod)
        if key is not None:  # a gang's members still to place count too
            demand = sum(
                PodInfo.of(m).requests.get(res, 0)
                for m in core.gangs.members(key)
                if core.cache.get_pod(m.metadata.uid) is None
            )
        excess = status.allocated.get(res, 0) + demand - status.max[res]
        if excess > 0:
            return f"frees when {format_quantity(res, excess)} {res} is released in queue {verdict.queue}"
    return f"frees when {res} is released in the cluster or the queues waiting for their guarantee are served"


@dataclasses.dataclass(slots=True)
class _Fit:
    summary: str
    feasible: int
    nodes: int
    closest: list[tuple[str, str]]
    lacks: dict[str, dict[str, int]]
    #: resource -> (the pod's request, the node with the most allocatable, that amount),
    #: for each resource the pod requests more of than any node has.
    too_big: dict[str, tuple[int, str, int]] = dataclasses.field(default_factory=dict)


def _evaluate_fit(core: Core, fwk: Framework, pi: PodInfo) -> _Fit:
    """PreFilter and Filter over every node, as Explain runs them: the
    FitError summary, and the nodes failing only for resources."""
    snap = core.snapshot()
    rows = snap.order()
    state = fw.CycleState()
    diagnosis = algorithm.Diagnosis(num_all_nodes=len(rows))
    status, allowed = fwk.run_pre_filter(state, pi, snap)
    if not status.ok:
        diagnosis.pre_filter_msg = status.message()
        return _Fit(str(algorithm.FitError(pi, diagnosis)), 0, len(rows), [], {})
    out = fwk.run_filter(state, pi, snap, rows, all_reasons=True)
    if allowed is not None:
        diagnosis.absent_nodes_status = fw.Status.unresolvable(algorithm.absent_nodes_reason(state))
    feasible = 0
    resource_only: list[int] = []
    for k, r in enumerate(rows.tolist()):
        name = snap.name(r)
        if allowed is not None and name not in allowed:
            continue
        if out.ok[k]:
            feasible += 1
            continue
        if out.statuses:
            diagnosis.node_to_status[name] = out.statuses[int(out.reason[k])]
        failures = out.all_failures(r)
        # Unresolvable too: a node smaller than the pod is still the closest one when no node is bigger.
        if failures and all(
            st.plugin == "NodeResourcesFit"
            and st.code in (fw.Code.UNSCHEDULABLE, fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
            for st in failures
        ):
            resource_only.append(r)
    lacks: dict[str, dict[str, int]] = {}
    ranked: list[tuple[float, str]] = []
    small: dict[str, dict[str, int]] = {}  # node -> resource -> its whole allocatable, where the pod asks more
    cols = snap.columns.index
    for r in resource_only:
        lack: dict[str, int] = {}
        share = 0.0
        for res, (need, _) in pi.usage.items():
            c = cols.get(res)
            alloc = int(snap.alloc[r, c]) if c is not None and c < snap.alloc.shape[1] else 0
            used = int(snap.req[r, c]) if c is not None and c < snap.req.shape[1] else 0
            short = need - (alloc - used)
            if need > 0 and short > 0:
                lack[res] = short
                share += short / max(alloc, 1)
                if need > alloc:
                    small.setdefault(snap.name(r), {})[res] = alloc
        if lack:
            name = snap.name(r)
            lacks[name] = lack
            ranked.append((share, name))
    ranked.sort()
    # A node smaller than the pod is "close" only when no node is big enough:
    # then the largest ones are, with their whole allocatable.
    near = [name for _, name in ranked if name not in small] or [name for _, name in ranked]
    closest = [(name, _lacks_text(lacks[name], small.get(name, {}))) for name in near[:CLOSEST]]
    summary = str(algorithm.FitError(pi, diagnosis)) if feasible == 0 else f"{feasible}/{len(rows)} nodes are available"
    return _Fit(summary, feasible, len(rows), closest, lacks, _too_big(snap, rows, pi) if not feasible else {})


def _lacks_text(lack: dict[str, int], allocatable: dict[str, int]) -> str:
    """``lacks 500m cpu``; for a node too small for the pod even when
    empty, with its whole allocatable (``lacks 60 cpu, 4 cpu allocatable``)."""
    text = "lacks " + _amounts(lack)
    if allocatable:
        text += ", " + _amounts(allocatable) + " allocatable"
    return text


def _too_big(snap: Snapshot, rows: fw.IntArray, pi: PodInfo) -> dict[str, tuple[int, str, int]]:
    """Each resource the pod requests more of than any node's whole
    allocatable, with the node that has the most of it."""
    out: dict[str, tuple[int, str, int]] = {}
    cols = snap.columns.index
    for res, (need, _) in sorted(pi.usage.items()):
        if need <= 0:
            continue
        c = cols.get(res)
        largest, most = "", 0
        if len(rows) and c is not None and c < snap.alloc.shape[1]:
            column = snap.alloc[rows, c]
            k = int(column.argmax())
            largest, most = snap.name(int(rows[k])), int(column[k])
        if need > most:
            out[res] = (need, largest, most)
    return out


def fit_summary(core: Core, pod: model.Pod) -> str:
    """The node-fit part of ``why`` alone: kube-scheduler's ``0/N nodes are
    available: ...`` (or ``K/N nodes are available``)."""
    fwk = core.responsible_for(pod) or core.framework_for("")
    return _evaluate_fit(core, fwk, PodInfo.of(pod)).summary


def closest_nodes(core: Core, pod: model.Pod) -> list[tuple[str, str]]:
    """Up to three nodes failing only for resources, the smallest shortfall first."""
    fwk = core.responsible_for(pod) or core.framework_for("")
    return _evaluate_fit(core, fwk, PodInfo.of(pod)).closest


_ERROR_UNBLOCKS = "a plugin failed, not the pod: retried after backoff; the traceback is in Berth's log"


def _error_blocker(core: Core, pod: model.Pod) -> list[Blocker]:
    """The pod's last attempt ended in a plugin's error (the decision's
    reasons say so): its message names the plugin and extension point."""
    d = _latest(core, pod)
    if d is None or d.kind not in (DecisionKind.UNSCHEDULABLE, DecisionKind.BIND_FAILED, DecisionKind.GATED):
        return []
    if not any(r.error for r in d.reasons):
        return []
    return [Blocker("error", d.message, _ERROR_UNBLOCKS)]


def _fit_blocker(fit: _Fit) -> list[Blocker]:
    if fit.feasible:
        return []
    unblocks = ""
    if fit.too_big:
        # Releasing nothing helps: say how big a node must be and how big the largest is.
        needs = _amounts({res: need for res, (need, _, _) in fit.too_big.items()})
        largest = "; ".join(
            f"the largest, {name}, has {format_quantity(res, most)} {res}" if name else f"no node has any {res}"
            for res, (_, name, most) in fit.too_big.items()
        )
        unblocks = f"runs only on a node with at least {needs} allocatable ({largest})"
    elif fit.closest:
        name = fit.closest[0][0]
        unblocks = f"frees when {_amounts(fit.lacks[name])} is released on {name}"
    return [Blocker("fit", fit.summary, unblocks)]


def _victims(core: Core, pod: model.Pod, node: str) -> list[str]:
    """The pods preemption is waiting for on ``node``: those terminating
    there (deletionTimestamp set), else those the decisions say were
    preempted for it and that are still there."""
    on_node = [
        p
        for p in core.pods.all()
        if p.spec.node_name == node
        and p.metadata.uid != pod.metadata.uid
        and p.status.phase not in ("Succeeded", "Failed")
    ]
    terminating = sorted(p.key for p in on_node if p.metadata.deletion_timestamp)
    if terminating:
        return terminating
    alive = {p.key for p in on_node}
    return sorted(
        key
        for key, d in core.decisions.latest.items()
        if d.kind == DecisionKind.PREEMPTED and d.node == node and key in alive
    )


def _preemption_blocker(core: Core, pod: model.Pod) -> list[Blocker]:
    node = core.nominator.node_of(pod.metadata.uid) or pod.status.nominated_node_name
    if not node:
        return []
    victims = _victims(core, pod, node)
    if victims:
        msg = f"waiting on node {node} for {_plural(len(victims), 'victim')} to terminate ({', '.join(victims[:5])})"
        if len(victims) > 5:
            msg = msg[:-1] + f", ... and {len(victims) - 5} more)"
        return [Blocker("preemption", msg, f"runs on {node} once the victims are gone")]
    return [Blocker("preemption", f"nominated to node {node}", f"runs on {node} at its next attempt")]


def why(core: Core, key: str) -> Why:
    """raises berth.errors.NotFound for an unknown NAMESPACE/NAME"""
    if "/" not in key:
        key = model.pod_key("default", key)
    pod = core.pods.by_key(key)
    if pod is None:
        raise NotFound(f"pod {key} not found")
    fwk = core.responsible_for(pod)
    if fwk is None:
        raise NotFound(f"pod {key} is not scheduled by Berth (schedulerName {pod.spec.scheduler_name!r})")
    phase, node = _phase(core, pod)
    if not phase:
        if pod.spec.node_name:
            return Why(key, "Bound", f"bound to {pod.spec.node_name} (not by Berth)", [], node=pod.spec.node_name)
        return Why(key, pod.status.phase or "", f"pod {pod.status.phase.lower() or 'finished'}", [])
    sched = core.scheduler
    uid = pod.metadata.uid
    ranked = {uid: sched.queue.position(uid)} if sched is not None and phase in _PENDING else {}
    row = _row(core, pod, phase, node, ranked)
    out = Why(key, phase, "", [], queue=row.queue, position=row.position, node=node)
    if phase == "Bound":
        out.summary = f"bound to {node}"
        return out
    if phase == "Assumed":
        out.summary = f"assumed on {node}, binding"
        return out
    if phase == "WaitingOnPermit":
        out.blockers = _gang_blockers(core, pod, phase) or [Blocker("gate", f"waiting at Permit on {node}")]
        out.summary = out.blockers[0].message
        return out
    pi = PodInfo.of(pod)
    blockers: list[Blocker] = _error_blocker(core, pod)
    if phase == "Gated":
        blockers += _gate_blockers(core, pod, fwk)
    blockers += _queue_blocker(core, pod, phase, row.position, row.queue)
    quota = _quota_blocker(core, pi)
    blockers += _topology_blocker(core, pod, fwk, quota) or quota
    try:
        fit = _evaluate_fit(core, fwk, pi)
    except PluginError as e:  # a Filter or PreFilter plugin fails now too
        fit = _Fit(str(e), 0, 0, [], {})
        if not any(b.message == str(e) for b in blockers):
            blockers.append(Blocker("error", str(e), _ERROR_UNBLOCKS))
    else:
        blockers += _fit_blocker(fit)
    out.closest_nodes = fit.closest if not fit.feasible else []
    blockers += _preemption_blocker(core, pod)
    held = reservations.of_pod(core, pod)
    if held is not None:  # capacity held for its gang (or itself): what, and when it starts
        blockers.append(Blocker("reservation", held[0], held[1]))
    out.blockers = blockers
    out.summary = _summary(blockers, row, fit)
    return out


def _summary(blockers: list[Blocker], row: PodRow, fit: _Fit) -> str:
    main = [b for b in blockers if b.kind != "queue"]
    pre = next((b for b in blockers if b.kind == "preemption"), None)
    if main:
        first = main[0]
        if pre is not None and first is not pre:
            return f"{first.message}; {pre.message}"
        return first.message
    if blockers:
        return blockers[0].message
    where = f" in queue {row.queue}" if row.queue else ""
    return f"next to be scheduled{where}; {fit.summary}"
