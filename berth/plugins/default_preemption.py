"""DefaultPreemption: when no node fits, evict lower-priority pods somewhere
(``plugins/defaultpreemption/default_preemption.go`` and
``framework/preemption/preemption.go``).

1. The pod must be eligible (``PodEligibleToPreemptOthers``): its
   preemptionPolicy is not Never, and it is not already waiting on a
   nominated node where lower-priority victims are still terminating.
2. Candidates: nodes that failed with Unschedulable (not unresolvable), a
   sample of at least ``minCandidateNodesAbsolute`` (100) or
   ``minCandidateNodesPercentage`` (10%) of them from a random offset; on
   each, :func:`berth.framework.preemption.select_victims_on_node` (run for
   a batch of nodes at once by ``select_victims_on_nodes``).
3. ``pickOneNodeForPreemption``: fewest PDB violations, then the lowest
   highest-victim priority, the smallest sum of victim priorities, the
   fewest victims, the latest start of the highest-priority victims, then
   the first.
4. Victims are evicted through the pod's source with the preemption reason
   — except those still in their binding cycle, stopped in memory instead
   (at Permit; in PreBind from 1.36) — lower-priority pods nominated to that
   node lose their nomination; the preemptor is nominated to the node and
   retried when victims are gone. From 1.37 the success says so:
   ``preemption: found a potential placement for pod on node X, preempting
   N victims``, the end of the preemptor's FailedScheduling message.

Gangs are taken whole or not touched below their minimum
(:func:`whole_gangs`): a victim in a gang whose
disruption mode is ``all`` (the Workload API's PodGroup
``spec.disruptionMode.all``, v1.37.2 ``scheduling/v1beta1/types.go``;
1.36's ``PodGroup``) brings every placed member with it; one in a gang
disrupted ``single`` (the Workload API's default, and every other dialect's,
as Volcano's and scheduler-plugins') is taken only if the members left are
still at least ``minMember`` (Volcano's gang ``preemptableFn``:
``job.MinAvailable <= occupied-1``, ``pkg/scheduler/plugins/gang/gang.go``),
else the whole gang goes with it. A member that would go with its gang but
has the preemptor's priority or more (or is in another queue) makes the
candidate void: DefaultPreemption's rules hold for every pod taken. Among
the candidates, after PDB violations, the fewest gangs touched and then the
fewest domains (nodes; the preemptor's topology level's domains when it
asks for one) win, before upstream's criteria.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import ClassVar

import msgspec

from berth.cache.infos import NodeInfo, PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model, workload_api
from berth.features import KubeVersion
from berth.framework import interface as fw
from berth.framework import preemption
from berth.framework.decision import Decision, DecisionKind
from berth.framework.handle import Handle
from berth.gangs import InvalidGang
from berth.gangs import topology as tp
from berth.metrics import STATUS_CODES

__all__ = [
    "Candidate",
    "DefaultPreemption",
    "DefaultPreemptionArgs",
    "VictimGang",
    "pick_one_node",
    "victim_gang",
    "whole_gangs",
]

log = logging.getLogger(__name__)


class DefaultPreemptionArgs(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100

    def validate(self) -> None:
        if not 0 <= self.min_candidate_nodes_percentage <= 100:
            raise ValueError("minCandidateNodesPercentage: must be in the range [0, 100]")
        if self.min_candidate_nodes_absolute < 0:
            raise ValueError("minCandidateNodesAbsolute: must not be negative")
        if self.min_candidate_nodes_percentage == 0 and self.min_candidate_nodes_absolute == 0:
            raise ValueError("minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be zero")


@dataclasses.dataclass(slots=True)
class Candidate:
    node: str
    victims: preemption.Victims
    #: Gangs the victims belong to, and the domains (nodes, or the
    #: preemptor's topology level's domains) they run in.
    gangs: int = 0
    domains: int = 1


@dataclasses.dataclass(frozen=True, slots=True)
class VictimGang:
    """The gang a victim runs in: its name for messages, ``min_member``,
    whether it is disrupted whole (``all``) and its placed members."""

    name: str
    min_member: int
    whole: bool
    placed: tuple[PodInfo, ...]


class DefaultPreemption:
    NAME: ClassVar[str] = "DefaultPreemption"
    Args: ClassVar[type] = DefaultPreemptionArgs

    def __init__(self, args: DefaultPreemptionArgs | None, handle: Handle) -> None:
        self.args = args or DefaultPreemptionArgs()
        self.handle = handle
        self.rng = random.Random()

    def eligible(self, pod: PodInfo, nodes: NodeTable) -> tuple[bool, str]:
        if pod.pod.spec.preemption_policy == "Never":
            return False, "not eligible due to preemptionPolicy=Never."
        nominated = pod.pod.status.nominated_node_name
        if nominated and nominated in nodes.index:
            info = nodes.infos[nodes.index[nominated]]
            if info is not None:
                for p in info.pods.values():
                    if p.pod.metadata.deletion_timestamp and p.priority < pod.priority:
                        return False, "not eligible due to a terminating pod on the nominated node."
        return True, ""

    def num_candidates(self, num_nodes: int) -> int:
        n = num_nodes * self.args.min_candidate_nodes_percentage // 100
        n = max(n, self.args.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def post_filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, failures: dict[int, fw.Status]
    ) -> fw.PostFilterResult:
        m = self.handle.metrics
        m.preemption_attempts.inc()
        started = time.perf_counter()
        best = self._evaluate(state, pod, nodes, failures)
        if m.preemption_evaluation_duration is not None:
            code = best.status.code if isinstance(best, fw.PostFilterResult) else fw.Code.SUCCESS
            m.preemption_evaluation_duration.labels("pod", STATUS_CODES[code]).observe(time.perf_counter() - started)
        if isinstance(best, fw.PostFilterResult):
            return best
        started = time.perf_counter()
        self._prepare(pod, best)
        if m.preemption_execution_duration is not None:
            m.preemption_execution_duration.labels("pod", "success").observe(time.perf_counter() - started)
        # observeVictims (executor.go v1.37.2).
        m.preemption_victims.observe(len(best.victims.victims))
        if m.preemption_pdb_violations is not None and best.victims.num_pdb_violations > 0:
            m.preemption_pdb_violations.labels("pod").inc(best.victims.num_pdb_violations)
        return fw.PostFilterResult(fw.Status(fw.Code.SUCCESS, self._success_reasons(best)), nominated_node=best.node)

    def _evaluate(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, failures: dict[int, fw.Status]
    ) -> Candidate | fw.PostFilterResult:
        """Evaluator.evaluate: the best candidate, or the PostFilter result
        saying why there is none."""
        ok, why = self.eligible(pod, nodes)
        if not ok:
            return fw.PostFilterResult(fw.Status.unschedulable(f"preemption: {why}", plugin=self.NAME))
        rows = [r for r, st in failures.items() if st.code == fw.Code.UNSCHEDULABLE]
        if not rows:
            # No candidates: the result clears the pod's nomination (preemption.go
            # Evaluate, NewPostFilterResultWithNominatedNode("")).
            return fw.PostFilterResult(
                fw.Status.unschedulable(
                    f"preemption: 0/{len(failures)} nodes are available: "
                    f"{len(failures)} Preemption is not helpful for scheduling.",
                    plugin=self.NAME,
                ),
                nominated_node="",
            )
        rows.sort()
        offset = self.rng.randrange(len(rows))
        rows = rows[offset:] + rows[:offset]
        want = self.num_candidates(len(rows))
        pdbs = self.handle.pdbs.list()
        fwk = self.handle.framework
        candidates: list[Candidate] = []
        queues = self.handle.queues
        # DryRunPreemption: nodes in offset order until ``want`` candidates
        # (upstream cancels the rest once enough are found). Taken in
        # batches of as many nodes as candidates are still wanted, each
        # batch's dry runs done together (select_victims_on_nodes); the
        # candidates kept are the first ``want`` in node order, as one by one.
        at = 0
        while at < len(rows) and len(candidates) < want:
            batch = rows[at : at + want - len(candidates)]
            at += len(batch)
            infos: list[NodeInfo] = []
            allowed: list[list[PodInfo] | None] = []
            for r in batch:
                info = nodes.infos[r]
                if info is None:
                    continue
                mine = None
                if queues is not None and queues.enabled:
                    # Batch queues: priority preemption stays within the pod's
                    # own leaf queue (Kueue's withinClusterQueue); taking from
                    # other queues is reclaim's, by guarantees.
                    mine = [p for p in info.pods.values() if queues.within_queue(pod, p)]
                    if not mine:
                        continue
                infos.append(info)
                allowed.append(mine)
            found = preemption.select_victims_on_nodes(fwk, pod, nodes, infos, allowed, pdbs, state=state)
            for info, v in zip(infos, found, strict=True):
                if v is not None and v.victims:
                    candidates.append(Candidate(info.name, v))
                    if len(candidates) >= want:
                        break
        whole = (whole_gangs(self.handle, pod, c, nodes, self._may_take(pod)) for c in candidates)
        candidates = [c for c in whole if c is not None]
        if not candidates:
            return fw.PostFilterResult(
                fw.Status.unschedulable(
                    f"preemption: 0/{len(nodes.alive_rows())} nodes are available: "
                    f"{len(failures)} No preemption victims found for incoming pod.",
                    plugin=self.NAME,
                ),
                nominated_node="",
            )
        return pick_one_node(candidates)

    def _may_take(self, pod: PodInfo) -> Callable[[PodInfo], bool]:
        """Whether a gang member going with a victim may be taken for
        ``pod``: of lower priority, and in its queue when queues restrict
        priority preemption."""
        queues = self.handle.queues

        def ok(p: PodInfo) -> bool:
            if p.priority >= pod.priority:
                return False
            return queues is None or not queues.enabled or queues.within_queue(pod, p)

        return ok

    def _success_reasons(self, best: Candidate) -> tuple[str, ...]:
        """Evaluator.Preempt's success status (``preemption.go`` v1.37.2),
        prefixed by PostFilter; none before 1.37."""
        if self.handle.features.version < KubeVersion(1, 37):
            return ()
        n = len(best.victims.victims)
        return (f"preemption: found a potential placement for pod on node {best.node}, preempting {n} victims",)

    def _prepare(self, pod: PodInfo, cand: Candidate) -> None:
        """prepareCandidate: preempt the victims and clear lower-priority
        nominations on the node. A victim already terminating is left alone
        (its deletion is under way); one still in its binding cycle is
        stopped in memory (:meth:`_preempt_in_memory`), any other is evicted
        (DisruptionTarget condition, then deleted). Each preempted victim
        gets a Preempted event (``executor.go`` v1.37.2)."""
        h = self.handle
        reason = f"Preempted by pod {pod.uid} on node {cand.node}"
        for v in cand.victims.victims:
            if v.pod.metadata.deletion_timestamp:
                continue
            in_memory = self._preempt_in_memory(v)
            message = reason
            if in_memory and h.features.version >= KubeVersion(1, 36):
                message += " (in kube-scheduler memory)."
            h.recorder.emit(
                Decision(
                    DecisionKind.PREEMPTED,
                    v.key,
                    v.uid,
                    node=cand.node,
                    message=message,
                    timestamp_ms=int(time.time() * 1000),
                )
            )
            if in_memory:
                h.client.report_preempted(v.pod, message)
            else:
                h.client.evict(v.pod, message)
        for other in h.nominator.pods_on(cand.node):
            if other.priority < pod.priority and other.uid != pod.uid:
                h.nominator.delete(other.uid)
                h.client.nominate(other.pod, "")

    def _preempt_in_memory(self, victim: PodInfo) -> bool:
        """Stop a victim still in its binding cycle without deleting it; it
        goes back to the queue. At Permit: rejected (1.35: ``waitingPod.Reject``,
        ``preemption.go`` v1.35.4) or, from 1.36, preempted (an error: retried
        after backoff, not parked as unschedulable). In PreBind (1.36, when
        PreBind has work): its PreBind is cancelled. Whether it was."""
        h = self.handle
        if h.features.version < KubeVersion(1, 36):
            if h.waiting_pods.get(victim.uid) is None:
                return False
            h.waiting_pods.reject(victim.uid, self.NAME, "preempted")
            return True
        if h.waiting_pods.get(victim.uid) is not None:
            return h.waiting_pods.preempt(victim.uid, self.NAME, "preempted")
        in_pre_bind = h.pods_in_pre_bind
        return in_pre_bind is not None and in_pre_bind.cancel(victim.uid, f"preempted by {self.NAME}")

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        return (fw.ClusterEvent("AssignedPod", fw.ActionType.DELETE),)


def victim_gang(h: Handle, victim: PodInfo) -> VictimGang | None:
    """The gang ``victim`` runs in (None: none): a Workload API group
    first, else any dialect of :class:`berth.gangs.GangIndex`."""
    cache = h.cache

    def placed(members: Sequence[model.Pod]) -> tuple[PodInfo, ...]:
        out = (cache.get_pod(m.metadata.uid) for m in members)
        return tuple(p for p in out if p is not None)

    groups = h.scheduling_groups
    if groups is not None:
        key = workload_api.group_of(victim.pod, h.features.version)
        gang = groups.gang(key) if key is not None else None
        if key is not None and gang is not None and gang.min_count is not None:
            mode = gang.pod_group.spec.disruption_mode if gang.pod_group is not None else None
            whole = mode == "PodGroup" or (isinstance(mode, workload_api.DisruptionMode) and mode.all is not None)
            return VictimGang(f'pod group "{key}"', gang.min_count, whole, placed(groups.members(key)))
    index = h.gangs
    if index is None:
        return None
    try:
        m = index.member_of(victim.pod)
        g = index.gang(m.key) if m is not None else None
    except InvalidGang:
        return None
    if m is None or g is None:
        return None
    return VictimGang(m.key.described, g.min_member, False, placed(index.members(m.key)))


def whole_gangs(
    h: Handle, pod: PodInfo, cand: Candidate, nodes: NodeTable, may_take: Callable[[PodInfo], bool]
) -> Candidate | None:
    """``cand`` with its victims' gangs taken whole where their disruption
    mode asks (see the module docstring); None when a member that would have
    to go may not be taken (``may_take``: DefaultPreemption's rules, or
    reclaim's)."""
    victims = list(cand.victims.victims)
    taken = {v.uid for v in victims}
    seen: set[str] = set()
    added: list[PodInfo] = []
    for v in cand.victims.victims:
        g = victim_gang(h, v)
        if g is None or g.name in seen:
            continue
        seen.add(g.name)
        left = [p for p in g.placed if p.uid not in taken]
        if not left or (not g.whole and len(left) >= g.min_member):
            continue
        if not all(may_take(p) for p in left):
            return None
        added.extend(left)
        taken.update(p.uid for p in left)
    victims.extend(added)
    violations = cand.victims.num_pdb_violations
    if added:
        extra, _ = preemption.pdb_violations(added, h.pdbs.list())
        violations += len(extra)
    return Candidate(cand.node, preemption.Victims(victims, violations), len(seen), _domains(h, pod, victims, nodes))


def _domains(h: Handle, pod: PodInfo, victims: Sequence[PodInfo], nodes: NodeTable) -> int:
    """How many domains the victims run in: of the preemptor's topology
    level when it asks for one, else nodes."""
    cache = h.cache
    where = {n for v in victims if (n := cache.pod_node(v.uid)) is not None}
    try:
        constraint = tp.constraint_of(pod.pod.metadata.annotations or {}, h.topologies)
    except InvalidGang:
        constraint = None
    if constraint is None or not where:
        return max(1, len(where))
    codes = nodes.label_column(constraint.level).codes
    return len({int(codes[nodes.index[n]]) if n in nodes.index else -1 for n in where})


def pick_one_node(candidates: list[Candidate]) -> Candidate:
    """pickOneNodeForPreemption's criteria, in order, with the fewest gangs
    and then the fewest domains right after the fewest PDB violations (both
    0 and 1 for candidates without gangs: upstream's order is unchanged)."""

    def key(c: Candidate) -> tuple[int, int, int, int, int, int, str]:
        vs = c.victims.victims
        highest = max(v.priority for v in vs)
        total = sum(v.priority + (1 << 31) for v in vs)  # shifted like MaxInt32+1 to keep it positive
        start_of_highest = min((v.pod.metadata.creation_timestamp or "") for v in vs if v.priority == highest)
        # Latest start time wins: negate by sorting on the inverted string later.
        return (
            c.victims.num_pdb_violations,
            c.gangs,
            c.domains,
            highest,
            total,
            len(vs),
            _invert(start_of_highest),
        )

    return min(candidates, key=key)


def _invert(ts: str) -> str:
    """A key that sorts later timestamps first (RFC 3339 strings compare lexically)."""
    return "".join(chr(0x10FFFF - ord(ch)) for ch in ts)
