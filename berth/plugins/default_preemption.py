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
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Sequence
from typing import ClassVar

import msgspec

from berth.cache.infos import NodeInfo, PodInfo
from berth.cache.table import NodeTable
from berth.features import KubeVersion
from berth.framework import interface as fw
from berth.framework import preemption
from berth.framework.decision import Decision, DecisionKind
from berth.framework.handle import Handle
from berth.metrics import STATUS_CODES

__all__ = ["Candidate", "DefaultPreemption", "DefaultPreemptionArgs", "pick_one_node"]

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


def pick_one_node(candidates: list[Candidate]) -> Candidate:
    """pickOneNodeForPreemption's criteria, in order."""

    def key(c: Candidate) -> tuple[int, int, int, int, str]:
        vs = c.victims.victims
        highest = max(v.priority for v in vs)
        total = sum(v.priority + (1 << 31) for v in vs)  # shifted like MaxInt32+1 to keep it positive
        start_of_highest = min((v.pod.metadata.creation_timestamp or "") for v in vs if v.priority == highest)
        # Latest start time wins: negate by sorting on the inverted string later.
        return (c.victims.num_pdb_violations, highest, total, len(vs), _invert(start_of_highest))

    return min(candidates, key=key)


def _invert(ts: str) -> str:
    """A key that sorts later timestamps first (RFC 3339 strings compare lexically)."""
    return "".join(chr(0x10FFFF - ord(ch)) for ch in ts)
