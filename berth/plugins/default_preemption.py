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
4. Victims are evicted through the pod's source with the preemption reason;
   lower-priority pods nominated to that node lose their nomination; the
   preemptor is nominated to the node and retried when victims are gone.
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
from berth.framework import interface as fw
from berth.framework import preemption
from berth.framework.decision import Decision, DecisionKind
from berth.framework.handle import Handle

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
        metrics = self.handle.metrics
        metrics.preemption_attempts.inc()
        ok, why = self.eligible(pod, nodes)
        if not ok:
            return fw.PostFilterResult(fw.Status.unschedulable(f"preemption: {why}", plugin=self.NAME))
        rows = [r for r, st in failures.items() if st.code == fw.Code.UNSCHEDULABLE]
        if not rows:
            return fw.PostFilterResult(
                fw.Status.unschedulable(
                    f"preemption: 0/{len(failures)} nodes are available: "
                    f"{len(failures)} Preemption is not helpful for scheduling.",
                    plugin=self.NAME,
                )
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
                )
            )
        best = pick_one_node(candidates)
        self._prepare(pod, best)
        metrics.preemption_victims.observe(len(best.victims.victims))
        return fw.PostFilterResult(fw.SUCCESS, nominated_node=best.node)

    def _prepare(self, pod: PodInfo, cand: Candidate) -> None:
        """Evict the victims and clear lower-priority nominations on the node (prepareCandidate)."""
        h = self.handle
        reason = f"Preempted by pod {pod.uid} on node {cand.node}"
        for v in cand.victims.victims:
            h.recorder.emit(
                Decision(
                    DecisionKind.PREEMPTED,
                    v.key,
                    v.uid,
                    node=cand.node,
                    message=reason,
                    timestamp_ms=int(time.time() * 1000),
                )
            )
            h.client.evict(v.pod, reason)
        for other in h.nominator.pods_on(cand.node):
            if other.priority < pod.priority and other.uid != pod.uid:
                h.nominator.delete(other.uid)
                h.client.nominate(other.pod, "")

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
