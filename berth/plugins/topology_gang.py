"""TopologyGang: a gang whose members ask for a topology level (Kueue's TAS
annotations, :mod:`berth.gangs.topology`) is placed whole inside one domain
of that level, or not at all.

Coscheduling keeps a gang all or nothing; this plugin decides *where*:

- PreFilter, for a member of a gang with no domain yet: every domain of the
  asked level (nodes sharing the label's value) is tried for the gang's
  unplaced members — first-fit-decreasing of their requests (a pod counted
  in ``pods``) into the domain's schedulable nodes' free allocatable, less
  the room other gangs' chosen domains still owe their unplaced members.
  Among the domains that hold the whole gang, Kueue's BestFit picks the one
  with the fewest free pod slots (kueue ``pkg/cache/scheduler/tas_flavor_snapshot.go``
  ``findBestFitDomainBy`` at ff69552e: the smallest ``podCount`` ≥ needed,
  ties by domain value), keeping big domains free for big gangs.
  Members already placed pin the domain to theirs. ``preferred`` tries the
  next level up when none fits, then places anywhere; ``required`` answers
  UnschedulableAndUnresolvable naming the level and the largest domain, and
  Coscheduling's PostFilter fails the gang.
- Filter: every node outside the chosen domain fails with
  ``node(s) didn't match the gang's topology domain rack=r3``
  (UnschedulableAndUnresolvable: preemption elsewhere would not help).
- Reserve records the choice for the gang, once its first member is assumed
  (so a dry run — ``berth why`` — chooses but never records); later members
  reuse it, and another gang choosing meanwhile counts the room it owes.
  The record goes when the gang fails (Unreserve of a member, PostFilter),
  when its Permit wait times out (Unreserve) and when every member is placed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model, resources
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.gangs import GangIndex, GangKey, InvalidGang
from berth.gangs import topology as tp

__all__ = ["ERR_NO_DOMAIN", "ERR_OUTSIDE_DOMAIN", "Choice", "TopologyGang"]

#: Filter's reason on a node outside the gang's domain (``{domain}``: ``rack=r3``).
ERR_OUTSIDE_DOMAIN = "node(s) didn't match the gang's topology domain {domain}"
#: PreFilter's reason when no domain of a required level holds the gang.
ERR_NO_DOMAIN = "no domain of topology level {level} can hold the gang's {count} unplaced pods; {largest}"

IntArray = npt.NDArray[np.int64]


@dataclasses.dataclass(frozen=True, slots=True)
class Choice:
    """The domain a gang is placed in: ``level`` (a node label) = ``value``;
    ``level`` None: anywhere (a preferred gang no domain could hold)."""

    level: str | None
    value: str = ""

    def __str__(self) -> str:
        return f"{self.level}={self.value}" if self.level is not None else "anywhere"


_CHOICE: fw.StateKey[Choice] = fw.StateKey("TopologyGang.choice")


def _fits(free: IntArray, vecs: Sequence[IntArray]) -> tuple[int, IntArray]:
    """First-fit-decreasing of ``vecs`` into the rows of ``free`` (mutated):
    how many were placed, and what is left."""
    placed = 0
    for v in sorted(vecs, key=lambda a: tuple(int(x) for x in a), reverse=True):
        ok = np.flatnonzero((free >= v).all(axis=1))
        if ok.size == 0:
            continue
        free[ok[0]] -= v
        placed += 1
    return placed, free


def _pod_slots(free: IntArray, need: IntArray) -> int:
    """Kueue's ``podCount``: how many pods of ``need`` the rows hold, node by node."""
    cols = need > 0
    if not cols.any() or free.shape[0] == 0:
        return 0
    per_row = (free[:, cols] // need[cols]).min(axis=1)
    return int(per_row.sum())


class TopologyGang:
    NAME: ClassVar[str] = "TopologyGang"
    Args: ClassVar[None] = None

    def __init__(self, args: None, handle: Handle) -> None:
        self.handle = handle
        self.gangs: GangIndex = handle.gangs if handle.gangs is not None else GangIndex()
        self.topologies: tuple[tp.TopologySpec, ...] = handle.topologies
        #: gang -> its domain, from its first member's Reserve until it fails or is placed.
        self._chosen: dict[GangKey, Choice] = {}

    # ------------------------------------------------------------ lookups

    def _key(self, pod: model.Pod) -> GangKey | None:
        try:
            m = self.gangs.member_of(pod)
        except InvalidGang:
            return None  # Coscheduling holds such a pod at PreEnqueue
        return m.key if m is not None else None

    def chosen(self, key: GangKey) -> Choice | None:
        """The domain recorded for the gang, if any (views, tests)."""
        return self._chosen.get(key)

    def _unplaced(self, key: GangKey) -> list[model.Pod]:
        cache = self.handle.cache
        return [m for m in self.gangs.members(key) if cache.get_pod(m.metadata.uid) is None]

    @staticmethod
    def _vector(nodes: NodeTable, requests: dict[str, int]) -> IntArray | None:
        """A member's requests (and one pod) in the table's columns; None when
        it asks for a resource no node has."""
        v = np.zeros(nodes.alloc.shape[1], dtype=np.int64)
        for name, amount in requests.items():
            col = nodes.columns.index.get(name)
            if col is None or col >= v.shape[0]:
                if amount > 0:
                    return None
                continue
            v[col] += amount
        v[nodes.columns.index[resources.PODS]] += 1
        return v

    # ------------------------------------------------------------ choosing

    def _free(self, nodes: NodeTable, exclude: GangKey) -> tuple[IntArray, npt.NDArray[np.bool_]]:
        """Free allocatable per row, less what other gangs' chosen domains owe
        their unplaced members; and which rows may take a member at all."""
        n = nodes.size
        free = np.clip(nodes.alloc[:n] - nodes.req[:n], 0, None)
        usable = nodes.alive[:n] & ~nodes.unschedulable[:n]
        for other, choice in list(self._chosen.items()):
            if other == exclude or choice.level is None:
                continue
            owed = self._unplaced(other)
            if not owed and not self.gangs.members(other):
                del self._chosen[other]  # the gang is gone
                continue
            rows = np.flatnonzero(usable & (nodes.label_column(choice.level).codes[:n] == self._code(nodes, choice)))
            vecs = [v for p in owed if (v := self._vector(nodes, PodInfo.of(p).requests)) is not None]
            _, left = _fits(free[rows].copy(), vecs)
            free[rows] = left
        return free, usable

    @staticmethod
    def _code(nodes: NodeTable, choice: Choice) -> int:
        assert choice.level is not None
        return nodes.label_column(choice.level).code_of.get(choice.value, -2)

    def _choose(self, key: GangKey, constraint: tp.Constraint, nodes: NodeTable) -> Choice | str:
        """The gang's domain, or why there is none (for a required level)."""
        n = nodes.size
        members = self.gangs.members(key)
        cache = self.handle.cache
        placed_rows = [
            nodes.index[node]
            for m in members
            if (node := cache.pod_node(m.metadata.uid)) is not None and node in nodes.index
        ]
        vecs: list[IntArray] = []
        unplaced = [m for m in members if cache.get_pod(m.metadata.uid) is None]
        for m in unplaced:
            v = self._vector(nodes, PodInfo.of(m).requests)
            if v is None:
                return f"gang member {m.key} requests a resource no node has"
            vecs.append(v)
        if not vecs:
            return Choice(None)
        need = np.max(np.stack(vecs), axis=0)
        free, usable = self._free(nodes, key)
        last = ""
        for level in constraint.levels:
            col = nodes.label_column(level)
            codes = col.codes[:n]
            candidates = sorted({int(c) for c in np.unique(codes[usable]) if c >= 0}, key=lambda c: col.values[c])
            if placed_rows:
                pinned = {int(codes[r]) for r in placed_rows}
                candidates = [c for c in candidates if pinned == {c}]
            best: tuple[int, str] | None = None
            largest: tuple[int, int, str] | None = None
            for c in candidates:
                rows = np.flatnonzero(usable & (codes == c))
                held, _ = _fits(free[rows].copy(), vecs)
                slots = _pod_slots(free[rows], need)
                value = col.values[c]
                if held == len(vecs) and (best is None or slots < best[0]):
                    best = (slots, value)
                if largest is None or (held, slots) > largest[:2]:
                    largest = (held, slots, value)
            if best is not None:
                return Choice(level, best[1])
            if largest is None:
                what = (
                    "its placed members' domain has no room"
                    if placed_rows
                    else f"no schedulable node has the label {level}"
                )
            else:
                what = f"the largest free, {level}={largest[2]}, holds {largest[0]}"
            last = ERR_NO_DOMAIN.format(level=level, count=len(vecs), largest=what)
        if not constraint.required:
            return Choice(None)
        return last

    # ------------------------------------------------------------ extension points

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        return (
            fw.ClusterEvent("Node", fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_LABEL),
            fw.ClusterEvent("Node", fw.ActionType.UPDATE_NODE_ALLOCATABLE),
            fw.ClusterEvent("AssignedPod", fw.ActionType.DELETE),
        )

    def _constraint(self, pod: model.Pod) -> tp.Constraint | None:
        return tp.constraint_of(pod.metadata.annotations or {}, self.topologies)

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        key = self._key(pod.pod)
        if key is None:
            return fw.PreFilterResult(fw.Status.skip())
        try:
            constraint = self._constraint(pod.pod)
        except InvalidGang as e:
            return fw.PreFilterResult(fw.Status.unresolvable(f"gang: {e}", plugin=self.NAME))
        if constraint is None:
            return fw.PreFilterResult(fw.Status.skip())
        choice = self._chosen.get(key)
        if choice is None:
            found = self._choose(key, constraint, nodes)
            if isinstance(found, str):
                return fw.PreFilterResult(fw.Status.unresolvable(found, plugin=self.NAME))
            choice = found
        state.write(_CHOICE, choice)
        if choice.level is None:
            return fw.PreFilterResult(fw.Status.skip())
        return fw.PreFilterResult()

    def filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.int64]
    ) -> fw.NodeVerdicts:
        choice = state.get(_CHOICE)
        if choice is None or choice.level is None:
            return fw.NodeVerdicts.all_ok(len(rows))
        inside = nodes.label_column(choice.level).codes[rows] == self._code(nodes, choice)
        status = fw.Status.unresolvable(ERR_OUTSIDE_DOMAIN.format(domain=choice), plugin=self.NAME)
        return fw.NodeVerdicts(np.asarray(inside, dtype=bool), [status])

    def post_filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, failures: dict[int, fw.Status]
    ) -> fw.PostFilterResult:
        """A member that cannot be placed fails its gang (Coscheduling rejects
        the siblings): the gang chooses again next time."""
        key = self._key(pod.pod)
        if key is not None:
            self._chosen.pop(key, None)
        return fw.PostFilterResult(fw.Status.unschedulable())

    def reserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        choice = state.get(_CHOICE)
        key = self._key(pod.pod)
        if choice is None or key is None:
            return fw.SUCCESS
        if self._unplaced(key):
            self._chosen.setdefault(key, choice)
        else:
            self._chosen.pop(key, None)  # the gang is placed whole
        return fw.SUCCESS

    def unreserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> None:
        key = self._key(pod.pod)
        if key is not None:
            self._chosen.pop(key, None)
