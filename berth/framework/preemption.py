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
from berth.cache.table import IntArray, NodeTable
from berth.cluster import labels, model
from berth.framework import interface as fw
from berth.framework.runtime import Framework

__all__ = [
    "ScratchNode",
    "ScratchNodes",
    "Victims",
    "active_extensions",
    "fits_with_nominated",
    "fits_with_nominated_rows",
    "more_important",
    "pdb_violations",
    "select_victims_on_node",
    "select_victims_on_nodes",
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
        self.table = snap.take([snap.index[info.name]])
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


class ScratchNodes:
    """A table of copies of ``infos``' nodes (row k is ``infos[k]``) whose pods
    can be removed and added back, each row on its own."""

    def __init__(self, snap: NodeTable, infos: Sequence[NodeInfo]) -> None:
        assert all(info.node is not None for info in infos)
        # Rows copied from the snapshot (NodeTable.take), not rebuilt from the
        # nodes: rebuilding was a fifth of PreemptionBasic's CPU.
        self.table = snap.take([snap.index[info.name] for info in infos])
        self.infos = [info.clone() for info in infos]
        self.table.infos[: len(self.infos)] = self.infos

    def remove(self, row: int, pi: PodInfo) -> None:
        self.infos[row].remove_pod(pi)
        self.table.add_pod_usage(row, pi, -1)

    def add(self, row: int, pi: PodInfo) -> None:
        self.infos[row].add_pod(pi)
        self.table.add_pod_usage(row, pi, 1)

    def shift(self, moves: Sequence[tuple[int, PodInfo]], sign: int) -> None:
        """Take off (sign -1) or give back (sign 1) each of these pods of
        their own rows, in one numpy update (``add_pod_usage`` a pod at a
        time was a third of a dry run). Only for pods counted on the row in
        the snapshot: their usage cannot overflow what it was."""
        table = self.table
        rows: list[int] = []
        cols: list[int] = []
        req: list[int] = []
        nz: list[int] = []
        index, width = table.columns.index, table.req.shape[1]
        for row, pi in moves:
            if sign > 0:
                self.infos[row].add_pod(pi)
            else:
                self.infos[row].remove_pod(pi)
            for name, (r, z) in pi.usage.items():
                c = index.get(name)
                if c is None or c >= width:
                    c = table.columns.column(name)
                    table.ensure_columns()
                    index, width = table.columns.index, table.req.shape[1]
                rows.append(row)
                cols.append(c)
                req.append(r)
                nz.append(z)
        if rows:
            at = (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))
            np.add.at(table.req, at, np.asarray(req, dtype=np.int64) * sign)
            np.add.at(table.req_nz, at, np.asarray(nz, dtype=np.int64) * sign)


def active_extensions(fwk: Framework, state: fw.CycleState) -> list[fw.PreFilterExtensions]:
    """The PreFilterExtensions to tell about removed and added pods: those
    whose plugin's PreFilter did not Skip this pod (upstream's
    ``RunPreFilterExtensionAddPod``/``RemovePod`` skip the plugins in
    ``SkipFilterPlugins`` the same way)."""
    return [e for e in fwk.pre_filter_extensions if getattr(e, "NAME", None) not in state.skip_filter]


def _potential_victims(
    pod: PodInfo, info: NodeInfo, candidates: Sequence[PodInfo] | None, restrict: bool, any_priority: bool
) -> list[PodInfo]:
    if candidates is None or not restrict:
        potential = [p for p in info.pods.values() if p.priority < pod.priority]
        if candidates is not None:
            wanted = {c.uid for c in candidates}
            potential = [p for p in potential if p.uid in wanted]
        return potential
    return [p for p in candidates if any_priority or p.priority < pod.priority]


def _nominated_on(fwk: Framework, pod: PodInfo, info: NodeInfo) -> list[PodInfo]:
    """The pods nominated to this node with at least the pod's priority, not yet on it."""
    return [
        p
        for p in fwk.handle.nominator.pods_on(info.name)
        if p.uid != pod.uid and p.priority >= pod.priority and p.uid not in info.pods
    ]


@dataclasses.dataclass(slots=True)
class _Plan:
    at: int  # index into the caller's infos
    order: list[PodInfo]  # victims in reprieve order: PDB-violating first
    violating: int  # how many of ``order`` violate a PDB
    nominated: list[PodInfo]
    victims: list[PodInfo] = dataclasses.field(default_factory=list)
    violations: int = 0


#: Public name: (violating, non-violating) — DefaultPreemption counts the
#: violations of the gang members it adds to a node's victims.
pdb_violations = _pdb_violations


def select_victims_on_nodes(
    fwk: Framework,
    pod: PodInfo,
    snap: NodeTable,
    infos: Sequence[NodeInfo],
    candidates: Sequence[Sequence[PodInfo] | None],
    pdbs: Sequence[model.PodDisruptionBudget],
    *,
    state: fw.CycleState,
) -> list[Victims | None]:
    """:func:`select_victims_on_node` for each of ``infos`` (``candidates[k]``
    for ``infos[k]``), with the same answers.

    kube-scheduler's DryRunPreemption runs SelectVictimsOnNode on 16
    goroutines; one Python thread instead runs the nodes in lockstep over
    one scratch table: all potential victims off every node, one Filter
    pass over all of them, then the k-th victim of every node given back
    and one Filter pass for all — about as many passes as the most victims
    on one node, instead of that many per node. Rows are independent as
    long as no PreFilterExtension is active for the pod (those count pods
    across nodes in the cycle's state); otherwise the nodes are run one by
    one.
    """
    if active_extensions(fwk, state):
        return [
            select_victims_on_node(fwk, pod, snap, info, c, pdbs, state=state)
            for info, c in zip(infos, candidates, strict=True)
        ]
    out: list[Victims | None] = [None] * len(infos)
    plans: list[_Plan] = []
    for k, (info, c) in enumerate(zip(infos, candidates, strict=True)):
        if info.node is None:
            continue
        potential = _potential_victims(pod, info, c, False, False)
        if potential:
            potential.sort(key=more_important)
            violating, ok = _pdb_violations(potential, pdbs)
            plans.append(_Plan(k, violating + ok, len(violating), _nominated_on(fwk, pod, info)))
    if not plans:
        return out
    scratch = ScratchNodes(snap, [infos[p.at] for p in plans])

    def fits(rows: list[int]) -> list[bool]:
        """RunFilterPluginsWithNominatedPods for each of ``rows``."""
        ok: list[bool] = fwk.run_filter(state, pod, scratch.table, np.asarray(rows, dtype=np.int64)).ok.tolist()
        again = [i for i, r in enumerate(rows) if ok[i] and plans[r].nominated]
        if again:
            for i in again:
                for p in plans[rows[i]].nominated:
                    scratch.add(rows[i], p)
            with_nominated = fwk.run_filter(
                state, pod, scratch.table, np.asarray([rows[i] for i in again], dtype=np.int64)
            ).ok.tolist()
            for i, good in zip(again, with_nominated, strict=True):
                for p in plans[rows[i]].nominated:
                    scratch.remove(rows[i], p)
                ok[i] = good
        return ok

    scratch.shift([(r, v) for r, plan in enumerate(plans) for v in plan.order], -1)
    everything = list(range(len(plans)))
    live = [r for r, good in zip(everything, fits(everything), strict=True) if good]
    step = 0
    while rows := [r for r in live if step < len(plans[r].order)]:
        scratch.shift([(r, plans[r].order[step]) for r in rows], 1)
        kept: list[tuple[int, PodInfo]] = []
        for r, good in zip(rows, fits(rows), strict=True):
            if not good:  # this victim's return keeps the pod out: it stays a victim
                plan = plans[r]
                v = plan.order[step]
                kept.append((r, v))
                plan.victims.append(v)
                plan.violations += step < plan.violating
        scratch.shift(kept, -1)
        step += 1
    for r in live:
        out[plans[r].at] = Victims(plans[r].victims, plans[r].violations)
    return out


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
    potential = _potential_victims(pod, info, candidates, restrict_to_candidates, any_priority)
    if not potential:
        return None

    scratch = ScratchNode(snap, info)
    extensions = active_extensions(fwk, state)

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
    nominated = _nominated_on(fwk, pod, info)

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


def fits_with_nominated_rows(
    fwk: Framework, state: fw.CycleState, pod: PodInfo, snap: NodeTable, rows: IntArray | Sequence[int]
) -> dict[int, fw.Status]:
    """:func:`fits_with_nominated` for each of ``rows``, answered by
    exception: the failures only, by position in ``rows`` (every other row
    fits). The rows with nominated pods to add share one scratch table and
    one Filter pass (a scratch table per row was most of a cycle once a
    thousand preemptors were nominated: PreemptionBasic). Rows are
    independent as long as no PreFilterExtension is active for the pod
    (those count pods across nodes in the cycle's state); otherwise the
    rows are checked one by one."""
    # Only the rows of nodes with nominated pods can fail: found by reading
    # a mask of them at the rows given (np.isin sorts, and was slower than
    # this), as every ordinary pod's Filter passes its hundreds of feasible
    # rows here while some preemptor waits (PreemptionAsync).
    index = snap.index
    nominated = [index[n] for n in fwk.handle.nominator.nodes() if n in index]
    if not nominated:
        return {}
    given = np.asarray(rows, dtype=np.int64)
    mark = np.zeros(snap.size, dtype=bool)
    mark[nominated] = True
    at = np.flatnonzero(mark[given])
    if not at.size:
        return {}
    hit = given[at].tolist()
    # One entry per distinct row with pods to add: (row, its info, the pods).
    todo: dict[int, tuple[NodeInfo, list[PodInfo]]] = {}
    for row in sorted(set(hit)):
        info = snap.infos[row]
        if info is None or info.node is None:
            continue
        added = _nominated_on(fwk, pod, info)
        if added:
            todo[row] = (info, added)
    if not todo:
        return {}
    failed: dict[int, fw.Status] = {}
    if active_extensions(fwk, state):
        for row, (info, added) in todo.items():
            st = fits_with_nominated(fwk, state, pod, snap, info, added)
            if not st.ok:
                failed[row] = st
    else:
        scratch = ScratchNodes(snap, [info for info, _ in todo.values()])
        for j, (_, added) in enumerate(todo.values()):
            for p in added:
                scratch.add(j, p)
        res = fwk.run_filter(state, pod, scratch.table, np.arange(len(todo), dtype=np.int64))
        for j, row in enumerate(todo):
            if not res.ok[j]:
                failed[row] = res.statuses[int(res.reason[j])]
    if not failed:
        return {}
    return {k: failed[row] for k, row in zip(at.tolist(), hit, strict=True) if row in failed}


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
    extensions = active_extensions(fwk, state)
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
