"""Reclaim: a pod of a queue below its guarantee takes back what other
queues borrowed (Volcano's ``reclaim`` action; Kueue's
``reclaimWithinCohort: Any``; YuniKorn's preemption to restore guarantees).

Run by the scheduling loop when no node fits the pod and the profile's
PostFilter (priority preemption, within the pod's own queue) nominated
nothing. On each node that failed Filter as Unschedulable, the candidates
are the pods of queues above their guarantee (off the pod's path), best
victim first — the queue furthest above its fair share, lowest priority,
newest — cut where taking one more would bring its queue below its
guarantee; then kube-scheduler's ``SelectVictimsOnNode`` keeps only what the
pod needs (giving the least preferred victims back first, PodDisruptionBudget
violators before the others), victims' gangs are taken whole or kept at
their minimum (:func:`berth.plugins.default_preemption.whole_gangs`), and
``pickOneNodeForPreemption`` chooses the node, exactly as for priority
preemption.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model, resources
from berth.framework import interface as fw
from berth.framework import preemption
from berth.framework.runtime import Framework
from berth.plugins.default_preemption import Candidate, pick_one_node, whole_gangs
from berth.quota.tree import QueueTree

__all__ = ["Reclaim", "select"]

#: As DefaultPreemption's minCandidateNodesAbsolute: enough nodes to choose from.
_MIN_CANDIDATES = 100


@dataclasses.dataclass(slots=True)
class Reclaim:
    node: str
    victims: list[PodInfo]
    #: victim uid -> its leaf queue
    queues: dict[str, str]

    def summary(self, pod: PodInfo, guaranteed: Collection[str] = ()) -> str:
        """``waiting to reclaim 8 cpu from queue batch``: the victims' amounts
        of what the pod requests and its queue guarantees (all it requests
        when ``guaranteed`` is empty)."""
        total: dict[str, int] = {}
        for v in self.victims:
            for name, amount in v.requests.items():
                if pod.requests.get(name) and (not guaranteed or name in guaranteed):
                    total[name] = total.get(name, 0) + amount
        if not self.victims:
            return "waiting for the pods reclaimed before to terminate"
        amounts = ", ".join(f"{resources.format_quantity(n, a)} {n}" for n, a in sorted(total.items()) if a)
        names = sorted(set(self.queues.values()))
        return f"waiting to reclaim {amounts or 'room'} from queue{'s' if len(names) > 1 else ''} {', '.join(names)}"


def _least_preferred_first(rank: dict[str, int]) -> Callable[[PodInfo], int]:
    return lambda p: -rank[p.uid]


def select(
    fwk: Framework,
    state: fw.CycleState,
    pod: PodInfo,
    snap: NodeTable,
    failures: dict[int, fw.Status],
    tree: QueueTree,
    pdbs: Sequence[model.PodDisruptionBudget],
) -> Reclaim | None:
    """The node and victims that let ``pod`` reclaim, or None."""
    if not tree.may_reclaim(pod):
        return None
    rows = sorted(r for r, st in failures.items() if st.code == fw.Code.UNSCHEDULABLE)
    want = min(len(rows), max(_MIN_CANDIDATES, len(rows) // 10))
    found: list[Candidate] = []
    for r in rows:
        info = snap.infos[r]
        if info is None or not info.pods:
            continue
        ordered = tree.reclaim_order(pod, info.pods.values())
        allowed = tree.reclaimable(pod, ordered)
        if not allowed:
            continue
        rank = {v.uid: i for i, v in enumerate(allowed)}
        # Give back the least preferred victim first.
        v = preemption.select_victims_on_node(
            fwk,
            pod,
            snap,
            info,
            allowed,
            pdbs,
            restrict_to_candidates=True,
            state=state,
            any_priority=True,
            reprieve_order=_least_preferred_first(rank),
        )
        if v is not None and v.victims:
            # Gangs go whole or keep their minimum, as for priority
            # preemption; a member that must go with its gang must itself be
            # reclaimable.
            whole = whole_gangs(
                fwk.handle, pod, Candidate(info.name, v), snap, lambda p: bool(tree.reclaimable(pod, [p]))
            )
            if whole is None:
                continue
            found.append(whole)
            if len(found) >= want:
                break
    if not found:
        return None
    best = pick_one_node(found)
    # Victims already leaving (an earlier reclaim's, still terminating) make
    # room here too, but are neither evicted nor counted again.
    fresh = [v for v in best.victims.victims if not tree.is_leaving(v)]
    return Reclaim(best.node, fresh, {v.uid: tree.victim_leaf(v) for v in fresh})
