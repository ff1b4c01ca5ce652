"""Choosing preemption victims on one node (kube-scheduler's
``plugins/defaultpreemption/default_preemption.go: SelectVictimsOnNode``).

Remove every potential victim, check the pod fits; then give victims back
one at a time — most important first, PDB-violating ones before the others —
keeping each one whose return still lets the pod fit. What is left are the
victims. Shared by the DefaultPreemption plugin and the extender's Preempt
verb.

Filter plugins whose PreFilter state counts pods across nodes (topology
spread, inter-pod affinity) keep that state right through the optional
``PreFilterExtensions`` methods ``add_pod``/``remove_pod``, as in
kube-scheduler.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from berth.cache.infos import NodeInfo, PodInfo
from berth.cache.table import NodeTable
from berth.cluster import labels, model
from berth.framework import interface as fw
from berth.framework.runtime import Framework

__all__ = [
    "ScratchNode",
    "Victims",
    "fits_with_nominated",
    "more_important",
    "select_victims_on_node",
]


@dataclasses.dataclass(slots=True)
class Victims:
    victims: list[PodInfo]
    num_pdb_violations: int


def more_important(pod: PodInfo) -> tuple[int, str]:
    """Sort key: higher priority first, then the earlier-created (MoreImportantPod)."""
    return (-pod.priority, pod.pod.metadata.creation_timestamp or "")


def _pdb_violations(
    victims: Sequence[PodInfo], pdbs: Sequence[model.PodDisruptionBudget]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """(violating, non-violating), each keeping the input order (filterPodsWithPDBViolation)."""
    allowed = {id(b): b.status.disruptions_allowed for b in pdbs}
    violating: list[PodInfo] = []
    ok: list[PodInfo] = []
    for v in victims:
        hit = False
        for b in pdbs:
            if b.metadata.namespace != v.namespace:
                continue
            sel = b.spec.selector
            # An empty selector matches nothing for PDBs (policy/v1 semantics).
            if sel is None or (not sel.match_labels and not sel.match_expressions):
                continue
            if not labels.match_label_selector(sel, v.labels):
                continue
            allowed[id(b)] -= 1
            if allowed[id(b)] < 0:
                hit = True
        (violating if hit else ok).append(v)
    return violating, ok


class ScratchNode:
    """A one-row table of ``info``'s node whose pods can be removed and added back."""

    def __init__(self, snap: NodeTable, info: NodeInfo) -> None:
        assert info.node is not None
        self.table = NodeTable.of_nodes([info.node], snap.columns)
        self.table.ensure_columns()
        src = snap.index[info.name]
        width = min(self.table.req.shape[1], snap.req.shape[1])
        self.table.req[0, :width] = snap.req[src, :width]
        self.table.req_nz[0, :width] = snap.req_nz[src, :width]
        clone = info.clone()
        self.table.infos[0] = clone
        self.info = clone
        self.rows = np.zeros(1, dtype=np.int64)

    def remove(self, pi: PodInfo) -> None:
        self.info.remove_pod(pi)
        self.table.add_pod_usage(0, pi, -1)

    def add(self, pi: PodInfo) -> None:
        self.info.add_pod(pi)
        self.table.add_pod_usage(0, pi, 1)


def select_victims_on_node(
    fwk: Framework,
    pod: PodInfo,
    snap: NodeTable,
    info: NodeInfo,
    candidates: Sequence[PodInfo] | None,
    pdbs: Sequence[model.PodDisruptionBudget],
    *,
    restrict_to_candidates: bool = False,
    state: fw.CycleState | None = None,
    any_priority: bool = False,
    reprieve_order: Callable[[PodInfo], Any] = more_important,
) -> Victims | None:
    """Victims on ``info``'s node that make ``pod`` fit, or None when none do.

    ``candidates``: the pods that may be evicted; None means every pod of
    lower priority than ``pod`` (DefaultPreemption). With
    ``restrict_to_candidates`` (the extender verb) only those are considered
    even if others are of lower priority. ``any_priority`` (reclaim by
    queue guarantees) lifts the lower-priority rule; ``reprieve_order`` is
    the order victims are given back in (most worth keeping first).
    """
    if info.node is None:
        return None
    if state is None:
        state = fw.CycleState()
        st, _ = fwk.run_pre_filter(state, pod, snap)
        if not st.ok:
            return None
    # A caller's state (the cycle's PreFilter result, shared by every
    # candidate node, as kube-scheduler shares it through CycleState.Clone)
    # is restored before returning: whatever the extensions were told was
    # removed is added back.
    if candidates is None or not restrict_to_candidates:
        potential = [p for p in info.pods.values() if p.priority < pod.priority]
        if candidates is not None:
            wanted = {c.uid for c in candidates}
            potential = [p for p in potential if p.uid in wanted]
    else:
        potential = [p for p in candidates if any_priority or p.priority < pod.priority]
    if not potential:
        return None

    scratch = ScratchNode(snap, info)
    extensions = fwk.pre_filter_extensions

    def remove(v: PodInfo) -> None:
        if v.uid in scratch.info.pods:
            scratch.remove(v)
            for ext in extensions:
                ext.remove_pod(state, pod, v, scratch.info)

    def add(v: PodInfo) -> None:
        scratch.add(v)
        for ext in extensions:
            ext.add_pod(state, pod, v, scratch.info)

    # RunFilterPluginsWithNominatedPods, as upstream's SelectVictimsOnNode
    # calls it: the room must also hold the pods already nominated to this
    # node with at least the pod's priority (else two preemptors would count
    # on the same freed room).
    nominated = [
        p
        for p in fwk.handle.nominator.pods_on(info.name)
        if p.uid != pod.uid and p.priority >= pod.priority and p.uid not in info.pods
    ]

    def fits() -> bool:
        if not fwk.run_filter(state, pod, scratch.table, scratch.rows).ok[0]:
            return False
        if not nominated:
            return True
        for p in nominated:
            add(p)
        try:
            return bool(fwk.run_filter(state, pod, scratch.table, scratch.rows).ok[0])
        finally:
            for p in nominated:
                remove(p)

    def restore(gone: Sequence[PodInfo]) -> None:
        for v in gone:
            for ext in extensions:
                ext.add_pod(state, pod, v, scratch.info)

    for v in potential:
        remove(v)
    if not fits():
        restore(potential)
        return None
    potential.sort(key=reprieve_order)
    violating, non_violating = _pdb_violations(potential, pdbs)
    victims: list[PodInfo] = []
    violations = 0

    def reprieve(v: PodInfo) -> bool:
        add(v)
        if fits():
            return True
        remove(v)
        victims.append(v)
        return False

    for v in violating:
        if not reprieve(v):
            violations += 1
    for v in non_violating:
        reprieve(v)
    restore(victims)
    return Victims(victims, violations)


def fits_with_nominated(
    fwk: Framework,
    state: fw.CycleState,
    pod: PodInfo,
    snap: NodeTable,
    info: NodeInfo,
    nominated: Sequence[PodInfo],
) -> fw.Status:
    """Filter ``pod`` on ``info``'s node with the nominated pods of equal or
    higher priority counted there (``RunFilterPluginsWithNominatedPods``:
    kube-scheduler also checks without them, which the caller's ordinary
    Filter pass already did)."""
    added = [p for p in nominated if p.uid != pod.uid and p.priority >= pod.priority and p.uid not in info.pods]
    if not added or info.node is None:
        return fw.SUCCESS
    scratch = ScratchNode(snap, info)
    extensions = fwk.pre_filter_extensions
    for p in added:
        scratch.add(p)
        for ext in extensions:
            ext.add_pod(state, pod, p, scratch.info)
    try:
        out = fwk.run_filter(state, pod, scratch.table, scratch.rows)
    finally:
        for p in added:
            for ext in extensions:
                ext.remove_pod(state, pod, p, scratch.info)
    return fw.SUCCESS if out.ok[0] else out.statuses[int(out.reason[0])]
