"""TopologyGang: a gang whose members ask for a topology level (any dialect
of :mod:`berth.gangs.topology`) is placed whole inside one domain of that
level, or not at all.

Coscheduling keeps a gang all or nothing; this plugin decides *where*:

- PreFilter, for a member of a gang with no domain yet: every domain of the
  asked level (nodes sharing the label's value) is tried for the gang's
  unplaced members — first-fit-decreasing of their requests (a pod counted
  in ``pods``) into the domain's schedulable nodes' free allocatable, less
  the room other gangs' chosen domains still owe their unplaced members;
  with slices, every slice must also fit in one domain of the slice level
  inside it. Among the domains that hold the whole gang, ``domainChoice``
  picks:

  - ``BestFit`` (default): the one with the fewest free pod slots (kueue
    ``pkg/cache/scheduler/tas_flavor_snapshot.go`` ``findBestFitDomainBy``
    at ff69552e: the smallest ``podCount`` ≥ needed, ties by domain value;
    KAI's "domain with the least free capacity that holds the job"),
    keeping big domains free for big gangs;
  - ``Balanced``: the one with the most free pod slots (Kueue's former
    ``TASProfileMostFreeCapacity``, dropped in Kueue v0.13), spreading gangs
    over domains so each keeps headroom.

  It is a profile argument (``pluginConfig: [{name: TopologyGang, args:
  {domainChoice: Balanced}}]``) where Kueue had a cluster-wide feature gate.
  Members already placed pin the domain to theirs. A gang keeps the domain
  it was last given (*sticky*) across failed attempts — a retry after a
  partial preemption or a Permit timeout goes back to it while it still
  holds the gang, and moves only when it does not (Kueue's #12478: a
  preemptor that switches domains wastes its evictions). ``preferred`` tries
  the next level up when none fits, then places anywhere; ``required``
  answers UnschedulableAndUnresolvable naming the level and, per domain,
  how many members fit; Coscheduling's PostFilter fails the gang.
- Filter: every node outside the chosen domain (or the member's slice's
  domain) fails with ``node(s) didn't match the gang's topology domain
  rack=r3`` (UnschedulableAndUnresolvable: preemption elsewhere would not help).
- Score: inside the domain members are packed (MostAllocated on what the
  member requests), so a domain's free room stays in whole nodes.
- Reserve records the choice for the gang, once its first member is assumed
  (so a dry run — ``berth why`` — chooses but never records); later members
  reuse it, and another gang choosing meanwhile counts the room it owes.
  The record goes back to a sticky preference when the gang fails
  (Unreserve, PostFilter, a Permit timeout) and is dropped when every member
  is placed or the gang is gone.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import ClassVar

import msgspec
import numpy as np
import numpy.typing as npt

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model, resources, workload_api
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.gangs import GangIndex, GangKey, InvalidGang
from berth.gangs import topology as tp

__all__ = [
    "ERR_NO_DOMAIN",
    "ERR_OUTSIDE_DOMAIN",
    "Choice",
    "DomainChoice",
    "DomainReport",
    "TopologyGang",
    "TopologyGangArgs",
]

#: Filter's reason on a node outside the gang's domain (``{domain}``: ``rack=r3``).
ERR_OUTSIDE_DOMAIN = "node(s) didn't match the gang's topology domain {domain}"
#: PreFilter's reason when no domain of a required level holds the gang.
ERR_NO_DOMAIN = "no domain of topology level {level} can hold the gang's {count} unplaced pods; {largest}"
#: How many domains a message names (the ones that come closest).
_REPORTED = 3

IntArray = npt.NDArray[np.int64]
#: A gang of berth/gangs' dialects, or a Workload API group (scheduling.k8s.io).
GroupRef = GangKey | workload_api.GroupKey


class DomainChoice(enum.StrEnum):
    BEST_FIT = "BestFit"
    BALANCED = "Balanced"


class TopologyGangArgs(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    #: Among the domains that hold a gang: the tightest (BestFit) or the
    #: emptiest (Balanced).
    domain_choice: str = DomainChoice.BEST_FIT.value

    def validate(self) -> None:
        if self.domain_choice not in {c.value for c in DomainChoice}:
            raise ValueError(
                f"domainChoice: {self.domain_choice!r} must be one of {', '.join(c.value for c in DomainChoice)}"
            )


@dataclasses.dataclass(frozen=True, slots=True)
class Choice:
    """The domain a gang is placed in: ``level`` (a node label) = ``value``;
    ``level`` None: anywhere (a preferred gang no domain could hold). With
    slices, ``slices[i]`` is slice i's domain of ``slice_level``."""

    level: str | None
    value: str = ""
    slice_level: str | None = None
    slices: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.level}={self.value}" if self.level is not None else "anywhere"


@dataclasses.dataclass(frozen=True, slots=True)
class DomainReport:
    """How close one domain came: ``held`` of ``count`` unplaced members fit."""

    level: str
    value: str
    held: int
    count: int
    slots: int

    def __str__(self) -> str:
        return f"{self.level}={self.value}: {self.held} of {self.count} members fit"


class _Reports:
    """How close each domain of one level came, built into
    :class:`DomainReport` rows only when a message or ``berth why`` asks."""

    def __init__(
        self, level: str, values: list[str], present: npt.NDArray[np.bool_], held: IntArray, slots: IntArray, count: int
    ) -> None:
        self.level, self.values, self.present, self.slots, self.count = level, values, present, slots, count
        self.held = held.copy()
        self.chosen = -1

    def top(self, k: int) -> list[DomainReport]:
        """The ``k`` closest domains that do not hold the gang (most members, then most slots, then name)."""
        rows = [
            (-int(self.held[c]), -int(self.slots[c]), self.values[c], int(c))
            for c in np.flatnonzero(self.present)
            if c != self.chosen
        ]
        return [
            DomainReport(self.level, value, -held, self.count, -slots) for held, slots, value, _ in sorted(rows)[:k]
        ]


_CHOICE: fw.StateKey[Choice] = fw.StateKey("TopologyGang.choice")
#: berth/gangs' name for the Workload API's groups (``sources.WORKLOAD_API``).
_WORKLOAD_API = "workload-api"


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


def _row_slots(free: IntArray, need: IntArray) -> IntArray:
    """Kueue's ``podCount`` per row: how many pods of ``need`` each row holds."""
    cols = need > 0
    if not cols.any() or free.shape[0] == 0:
        return np.zeros(free.shape[0], dtype=np.int64)
    out: IntArray = (free[:, cols] // need[cols]).min(axis=1)
    return out


def _groups(codes: npt.NDArray[np.int32], rows: IntArray) -> dict[int, IntArray]:
    """``rows`` grouped by their code (absent, -1, left out)."""
    if rows.size == 0:
        return {}
    c = codes[rows]
    order = np.argsort(c, kind="stable")
    sorted_rows, sorted_codes = rows[order], c[order]
    cut = np.flatnonzero(np.diff(sorted_codes)) + 1
    out: dict[int, IntArray] = {}
    for chunk_rows, chunk_codes in zip(np.split(sorted_rows, cut), np.split(sorted_codes, cut), strict=True):
        if chunk_codes.size and chunk_codes[0] >= 0:
            out[int(chunk_codes[0])] = chunk_rows
    return out


@dataclasses.dataclass(slots=True)
class _Gang:
    """What choosing needs about one gang, computed once per attempt."""

    key: GroupRef
    constraint: tp.Constraint
    vecs: list[IntArray]
    #: Each unplaced member's slice (parallel to ``vecs``); empty: no slices.
    slice_of: list[int]
    #: slice -> the slice-level value its placed members pinned.
    pinned_slices: dict[int, str]
    #: Rows of the placed members.
    placed_rows: list[int]
    need: IntArray
    slice_count: int = 0


class TopologyGang:
    NAME: ClassVar[str] = "TopologyGang"
    Args: ClassVar[type] = TopologyGangArgs

    def __init__(self, args: TopologyGangArgs | None, handle: Handle) -> None:
        self.args = args or TopologyGangArgs()
        self.handle = handle
        self.gangs: GangIndex = handle.gangs if handle.gangs is not None else GangIndex()
        #: Live: Kueue Topology objects join and leave it (berth.gangs.topology.TopologySet).
        self.topologies: Sequence[tp.TopologySpec] = handle.topologies
        self._balanced = self.args.domain_choice == DomainChoice.BALANCED
        #: gang -> its domain, from its first member's Reserve until it fails or is placed.
        self._chosen: dict[GroupRef, Choice] = {}
        #: gang -> the domain it was last given: preferred again while it holds the gang.
        self._sticky: dict[GroupRef, Choice] = {}

    # ------------------------------------------------------------ lookups

    def _key(self, pod: model.Pod) -> GroupRef | None:
        try:
            m = self.gangs.member_of(pod)
        except InvalidGang:
            return None  # Coscheduling holds such a pod at PreEnqueue
        if m is not None:
            return m.key
        if self.handle.scheduling_groups is not None:
            return workload_api.group_of(pod, self.handle.features.version)
        return None

    def gang_members(self, pod: model.Pod) -> list[model.Pod]:
        """The members of ``pod``'s gang (none: not in a gang)."""
        key = self._key(pod)
        return self._members(key) if key is not None else []

    def _members(self, key: GroupRef) -> list[model.Pod]:
        if isinstance(key, GangKey):
            return self.gangs.members(key)
        store = self.handle.scheduling_groups
        return store.members(key) if store is not None else []

    def chosen(self, key: GroupRef) -> Choice | None:
        """The domain recorded for the gang, if any (views, tests)."""
        return self._chosen.get(key)

    def sticky(self, key: GroupRef) -> Choice | None:
        """The domain the gang was last given (placed, failed or timed out)."""
        return self._chosen.get(key) or self._sticky.get(key)

    def pin(self, key: GroupRef, choice: Choice) -> None:
        """Make ``choice`` the gang's sticky domain (a preemptor that cleared
        it: the next attempt goes back there while it holds the gang)."""
        self._sticky[key] = choice

    def _unplaced(self, key: GroupRef) -> list[model.Pod]:
        cache = self.handle.cache
        return [m for m in self._members(key) if cache.get_pod(m.metadata.uid) is None]

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

    def constraint(self, pod: model.Pod) -> tp.Constraint | None:
        """The constraint ``pod``'s gang asks for (pod annotations, its
        Volcano PodGroup's ``networkTopology``, its Workload API PodGroup's
        ``schedulingConstraints``); raises InvalidGang."""
        network: model.NetworkTopologySpec | None = None
        keys: list[str] = []
        key = self._key(pod)
        store = self.handle.scheduling_groups
        # A Workload API group: keyed by the index (source workload-api) or by its own store.
        standalone = (
            (key.namespace, key.name)
            if (isinstance(key, GangKey) and key.source == _WORKLOAD_API)
            or (isinstance(key, workload_api.GroupKey) and not key.workload)
            else None
        )
        if standalone is not None and store is not None:
            pg = store.pod_group(*standalone)
            if pg is not None and pg.spec.scheduling_constraints is not None:
                keys = [t.key for t in pg.spec.scheduling_constraints.topology]
        elif isinstance(key, GangKey):
            group = self.gangs.group_of(key)
            if group is not None:
                network = group.spec.network_topology
        return tp.constraint_of(
            pod.metadata.annotations or {}, self.topologies, network_topology=network, workload_keys=keys
        )

    @staticmethod
    def _rank(pod: model.Pod) -> tuple[int, str]:
        """A member's rank for slices: its Job completion index, else its name."""
        text = (pod.metadata.annotations or {}).get(tp.COMPLETION_INDEX_ANNOTATION) or pod.metadata.labels.get(
            tp.COMPLETION_INDEX_ANNOTATION, ""
        )
        return (int(text), pod.metadata.name) if text.isdigit() else (1 << 62, pod.metadata.name)

    def _gang(self, key: GroupRef, constraint: tp.Constraint, nodes: NodeTable) -> _Gang | str:
        members = sorted(self._members(key), key=self._rank)
        cache = self.handle.cache
        vecs: list[IntArray] = []
        slice_of: list[int] = []
        pinned: dict[int, str] = {}
        placed_rows: list[int] = []
        size = constraint.slice_size
        slice_col = nodes.label_column(constraint.slice_level) if constraint.slice_level is not None else None
        for i, m in enumerate(members):
            node = cache.pod_node(m.metadata.uid)
            if node is not None:
                if node in nodes.index:
                    row = nodes.index[node]
                    placed_rows.append(row)
                    if slice_col is not None and (c := int(slice_col.codes[row])) >= 0:
                        pinned.setdefault(i // size, slice_col.values[c])
                continue
            if cache.get_pod(m.metadata.uid) is not None:
                continue
            v = self._vector(nodes, PodInfo.of(m).requests)
            if v is None:
                return f"gang member {m.key} requests a resource no node has"
            vecs.append(v)
            if size:
                slice_of.append(i // size)
        need = np.max(np.stack(vecs), axis=0) if vecs else np.zeros(nodes.alloc.shape[1], dtype=np.int64)
        count = -(-len(members) // size) if size else 0
        return _Gang(key, constraint, vecs, slice_of, pinned, placed_rows, need, count)

    # ------------------------------------------------------------ choosing

    def _free(self, nodes: NodeTable, exclude: GroupRef) -> tuple[IntArray, npt.NDArray[np.bool_]]:
        """Free allocatable per row, less what other gangs' chosen domains owe
        their unplaced members; and which rows may take a member at all."""
        n = nodes.size
        free = np.clip(nodes.alloc[:n] - nodes.req[:n], 0, None)
        usable = nodes.alive[:n] & ~nodes.unschedulable[:n]
        for other, choice in list(self._chosen.items()):
            if other == exclude or choice.level is None:
                continue
            owed = self._unplaced(other)
            if not owed and not self._members(other):
                del self._chosen[other]  # the gang is gone
                self._sticky.pop(other, None)
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

    def _holds(self, g: _Gang, nodes: NodeTable, free: IntArray, rows: IntArray) -> tuple[int, tuple[str, ...]]:
        """How many of the gang's unplaced members ``rows`` hold (all of them:
        ``len(g.vecs)``), and with slices each slice's domain."""
        if g.constraint.slice_level is None:
            held, _ = _fits(free[rows].copy(), g.vecs)
            return held, ()
        col = nodes.label_column(g.constraint.slice_level)
        by_value = {col.values[c]: r for c, r in _groups(col.codes, rows).items()}
        room = {value: free[r].copy() for value, r in by_value.items()}
        slices: dict[int, list[IntArray]] = {}
        for s, v in zip(g.slice_of, g.vecs, strict=True):
            slices.setdefault(s, []).append(v)
        assigned = dict(g.pinned_slices)
        held = 0
        # Biggest slices first; each in the tightest sub-domain that holds it whole.
        for s, vecs in sorted(slices.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            options = [assigned[s]] if s in assigned else sorted(room)
            best: tuple[int, str, IntArray] | None = None
            for value in options:
                if value not in room:
                    continue
                got, left = _fits(room[value].copy(), vecs)
                if got < len(vecs):
                    continue
                slots = int(_row_slots(room[value], g.need).sum())
                if best is None or slots < best[0]:
                    best = (slots, value, left)
            if best is None:
                continue
            room[best[1]] = best[2]
            assigned[s] = best[1]
            held += len(vecs)
        return held, tuple(assigned.get(i, "") for i in range(g.slice_count))

    def _choose_level(
        self, g: _Gang, level: str, nodes: NodeTable, free: IntArray, usable: npt.NDArray[np.bool_]
    ) -> tuple[Choice | None, _Reports]:
        """The domain of ``level`` the gang gets, if one holds it; and how
        close the others came. Per-domain sums are one ``bincount`` each; rows
        are gathered only for the domains tried, tightest (or emptiest) first."""
        n = nodes.size
        col = nodes.label_column(level)
        codes = col.codes[:n]
        ok = usable & (codes >= 0)
        if g.placed_rows:
            pinned = {int(codes[r]) for r in g.placed_rows}
            ok &= codes == (pinned.pop() if len(pinned) == 1 else -2)
        m = len(col.values)
        idx = codes[ok]
        count = len(g.vecs)
        # An upper bound on what a domain holds: slots of the smallest member
        # (exact for a gang of equal members, the common case).
        least = np.min(np.stack(g.vecs), axis=0)
        slots = np.bincount(idx, weights=_row_slots(free[ok], g.need), minlength=m).astype(np.int64)
        upper = np.bincount(idx, weights=_row_slots(free[ok], least), minlength=m).astype(np.int64)
        present = np.bincount(idx, minlength=m) > 0
        reports = _Reports(level, col.values, present, np.minimum(upper, count), slots, count)
        candidates = np.flatnonzero(present & (upper >= count))
        sign = -1 if self._balanced else 1
        ranked = sorted((sign * int(slots[c]), col.values[c], int(c)) for c in candidates)
        sticky = self._sticky.get(g.key)
        if sticky is not None and sticky.level == level:
            first = sticky.value
            ranked.sort(key=lambda t: t[1] != first)  # stable: the sticky domain first
        for _, value, c in ranked:
            rows = np.flatnonzero(ok & (codes == c))
            held, slices = self._holds(g, nodes, free, rows)
            if held == count:
                reports.chosen = c
                return Choice(level, value, g.constraint.slice_level, slices), reports
            reports.held[c] = held
        return None, reports

    def best_domain(self, pod: model.Pod, nodes: NodeTable) -> Choice | str | None:
        """The domain the gang of ``pod`` would be given now (its recorded
        one if it has one), the reason there is none (required), or None when
        it asks for no topology. For reservations and preemption (HH)."""
        key = self._key(pod)
        if key is None:
            return None
        try:
            constraint = self.constraint(pod)
        except InvalidGang as e:
            return f"gang: {e}"
        if constraint is None:
            return None
        choice = self._chosen.get(key)
        if choice is not None:
            return choice
        found, _ = self._choose(key, constraint, nodes)
        return found

    def whatif_domain(self, pod: model.Pod, count: int, nodes: NodeTable) -> Choice | str | None:
        """The domain ``count`` copies of ``pod`` would be given as one gang on
        ``nodes`` (a what-if copy), the reason there is none, or None when
        ``pod`` asks for no topology. Other gangs' recorded domains still
        count the room they owe."""
        try:
            constraint = self.constraint(pod)
        except InvalidGang as e:
            return f"gang: {e}"
        if constraint is None or count <= 0:
            return None
        v = self._vector(nodes, PodInfo.of(pod).requests)
        if v is None:
            return f"pod {pod.metadata.name} requests a resource no node has"
        size = constraint.slice_size
        g = _Gang(
            GangKey("whatif", pod.metadata.namespace, pod.metadata.name),
            constraint,
            [v] * count,
            [i // size for i in range(count)] if size else [],
            {},
            [],
            v,
            -(-count // size) if size else 0,
        )
        return self._choose_gang(g, nodes)[0]

    def gang_size(self, pod: model.Pod) -> int:
        """How many members ``pod``'s gang asks for (0: not in a gang)."""
        key = self._key(pod)
        if not isinstance(key, GangKey):
            return len(self.gang_members(pod))
        try:
            gang = self.gangs.gang(key)
        except InvalidGang:
            gang = None
        return gang.min_member if gang is not None else len(self.gangs.members(key))

    def domain_reports(self, pod: model.Pod, nodes: NodeTable) -> list[DomainReport]:
        """Per domain, how many of the gang's unplaced members fit (closest
        first): what ``berth why`` shows for a topology gang."""
        key = self._key(pod)
        if key is None:
            return []
        try:
            constraint = self.constraint(pod)
        except InvalidGang:
            return []
        if constraint is None:
            return []
        _, reports = self._choose(key, constraint, nodes, explain=True)
        return reports

    def _choose(
        self,
        key: GroupRef,
        constraint: tp.Constraint,
        nodes: NodeTable,
        *,
        explain: bool = False,
        preemptor: PodInfo | None = None,
    ) -> tuple[Choice | str, list[DomainReport]]:
        """The gang's domain, or why there is none (for a required level); and
        per level tried, the closest domains that do not hold it."""
        g = self._gang(key, constraint, nodes)
        if isinstance(g, str):
            return g, []
        return self._choose_gang(g, nodes, explain=explain, preemptor=preemptor)

    def _preemptible(self, nodes: NodeTable, usable: npt.NDArray[np.bool_], priority: int) -> IntArray:
        """Per row, what the pods that are leaving or that DefaultPreemption
        could evict for a pod of ``priority`` request (terminating ones of any
        priority — earlier victims whose room is on its way back — and
        lower-priority ones): the room a domain would have once they are
        gone. Counting the terminating ones keeps a domain whose victims are
        still terminating the best choice, so no second domain is cleared."""
        n = nodes.size
        out = np.zeros_like(nodes.req[:n])
        # Summed in Python ints, row by row, and written once per row: a
        # numpy vector per pod cost ~3.5 us, 178 ms on 5000 nodes of 10
        # pods, on every attempt of a member of a gang no domain holds.
        index, width = nodes.columns.index, out.shape[1]
        pods_col = index[resources.PODS]
        infos = nodes.infos
        # Pods share their requests maps (model.shared_map): each distinct
        # map is resolved to columns once per call.
        resolved: dict[int, tuple[tuple[int, int], ...] | None] = {}

        def columns_of(requests: Mapping[str, int]) -> tuple[tuple[int, int], ...] | None:
            cols: list[tuple[int, int]] = [(pods_col, 1)]
            for name, amount in requests.items():
                c = index.get(name)
                if c is None or c >= width:
                    if amount > 0:
                        return None  # a resource no node has (as _vector: not counted)
                    continue
                cols.append((c, amount))
            return tuple(cols)

        for row in np.flatnonzero(usable[:n]).tolist():
            info = infos[row] if row < len(infos) else None
            if info is None or not info.pods:
                continue
            acc: dict[int, int] = {}
            for p in info.pods.values():
                if p.priority >= priority and p.pod.metadata.deletion_timestamp is None:
                    continue
                key = id(p.requests)
                if key in resolved:
                    cols = resolved[key]
                else:
                    cols = resolved[key] = columns_of(p.requests)
                if cols is not None:
                    for c, amount in cols:
                        acc[c] = acc.get(c, 0) + amount
            for c, amount in acc.items():
                out[row, c] = amount
        return out

    def _choose_by_preemption(
        self, g: _Gang, nodes: NodeTable, free: IntArray, usable: npt.NDArray[np.bool_], preemptor: PodInfo
    ) -> Choice | None:
        """A required gang no domain holds now: the domain of its widest
        allowed level that would hold it once lower-priority pods there are
        evicted (the tightest such, as ever; its sticky domain first). Its
        members then fail Filter on resources only inside that domain, so
        DefaultPreemption (gang-atomic, berth/plugins/default_preemption.py)
        clears room in one domain instead of on scattered nodes; the choice
        sticks to the gang across its attempts (:meth:`post_filter`), so
        evictions made for it are not wasted on another domain. Volcano's
        network-topology preemption and KAI's do the same within a domain."""
        if preemptor.pod.spec.preemption_policy == "Never":
            return None
        lower = self._preemptible(nodes, usable, preemptor.priority)
        if not lower.any():
            return None
        choice, _ = self._choose_level(g, g.constraint.levels[-1], nodes, free + lower, usable)
        return choice

    def _choose_gang(
        self, g: _Gang, nodes: NodeTable, *, explain: bool = False, preemptor: PodInfo | None = None
    ) -> tuple[Choice | str, list[DomainReport]]:
        """``explain``: the closest domains of the levels tried, even when one
        holds the gang. ``preemptor``: a required gang may get a domain that
        holds it only after preemption (:meth:`_choose_by_preemption`)."""
        constraint = g.constraint
        if not g.vecs:
            return Choice(None), []
        free, usable = self._free(nodes, g.key)
        last = ""
        all_reports: list[DomainReport] = []
        for level in constraint.levels:
            choice, reports = self._choose_level(g, level, nodes, free, usable)
            if choice is not None:
                if explain:
                    all_reports.extend(reports.top(_REPORTED))
                return choice, all_reports
            closest = reports.top(_REPORTED)
            all_reports.extend(closest)
            if not closest:
                what = (
                    "its placed members' domain has no room"
                    if g.placed_rows
                    else f"no schedulable node has the label {level}"
                )
            else:
                largest = closest[0]
                what = f"the largest free, {largest.level}={largest.value}, holds {largest.held}"
                if constraint.slice_level is not None:
                    what += f" in slices of {constraint.slice_size} by {constraint.slice_level}"
                if len(closest) > 1:
                    what += " (" + "; ".join(str(r) for r in closest[1:]) + ")"
            last = ERR_NO_DOMAIN.format(level=level, count=len(g.vecs), largest=what)
        if constraint.required and preemptor is not None:
            found = self._choose_by_preemption(g, nodes, free, usable, preemptor)
            if found is not None:
                return found, all_reports
        if not constraint.required:
            if constraint.slice_level is None:
                return Choice(None), all_reports
            # Slices are required even when the gang's level is not: anywhere,
            # as long as every slice has its own domain.
            held, slices = self._holds(g, nodes, free, np.flatnonzero(usable))
            if held == len(g.vecs):
                return Choice(None, "", constraint.slice_level, slices), all_reports
            return (
                f"no placement holds the gang's {len(g.vecs)} unplaced pods in slices of "
                f"{constraint.slice_size} by {constraint.slice_level}; {held} fit",
                all_reports,
            )
        return last, all_reports

    # ------------------------------------------------------------ extension points

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        return (
            fw.ClusterEvent("Node", fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_LABEL),
            fw.ClusterEvent("Node", fw.ActionType.UPDATE_NODE_ALLOCATABLE),
            fw.ClusterEvent("AssignedPod", fw.ActionType.DELETE),
            # A Kueue Topology object added, changed or deleted (core.on_topology).
            fw.ClusterEvent("Topology", fw.ActionType.ADD | fw.ActionType.UPDATE | fw.ActionType.DELETE),
        )

    @staticmethod
    def pin_cycle(state: fw.CycleState, choice: Choice) -> None:
        """Give one attempt its domain up front (what-if's replicas): PreFilter
        keeps it instead of choosing for the pod's real gang."""
        state.write(_CHOICE, choice)

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        if state.get(_CHOICE) is not None:
            return fw.PreFilterResult()  # pinned by the caller (what-if); Filter keeps to it
        key = self._key(pod.pod)
        if key is None:
            return fw.PreFilterResult(fw.Status.skip())
        try:
            constraint = self.constraint(pod.pod)
        except InvalidGang as e:
            return fw.PreFilterResult(fw.Status.unresolvable(f"gang: {e}", plugin=self.NAME))
        if constraint is None:
            return fw.PreFilterResult(fw.Status.skip())
        choice = self._chosen.get(key)
        if choice is None:
            found, _ = self._choose(key, constraint, nodes, preemptor=pod)
            if isinstance(found, str):
                return fw.PreFilterResult(fw.Status.unresolvable(found, plugin=self.NAME))
            choice = found
        state.write(_CHOICE, choice)
        if choice.level is None:
            if choice.slice_level is None:
                return fw.PreFilterResult(fw.Status.skip())
            return fw.PreFilterResult()
        # Only the domain's nodes are worth filtering (kube-scheduler's
        # PreFilterResult.NodeNames): a rack of 10 among 5000 nodes.
        rows = np.flatnonzero(nodes.label_column(choice.level).codes[: nodes.size] == self._code(nodes, choice))
        return fw.PreFilterResult(node_names=frozenset(nodes.name(int(r)) for r in rows))

    def _slice_value(self, pod: model.Pod, choice: Choice) -> str | None:
        """The slice-level domain of ``pod``'s slice, None without slices."""
        if choice.slice_level is None or not choice.slices:
            return None
        key = self._key(pod)
        if key is None:
            return None
        ranked = sorted(self._members(key), key=self._rank)
        size = -(-len(ranked) // len(choice.slices))
        i = next((j for j, m in enumerate(ranked) if m.metadata.uid == pod.metadata.uid), None)
        if i is None or size <= 0:
            return None
        s = i // size
        return choice.slices[s] if s < len(choice.slices) and choice.slices[s] else None

    def filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.int64]
    ) -> fw.NodeVerdicts:
        choice = state.get(_CHOICE)
        if choice is None or (choice.level is None and choice.slice_level is None):
            return fw.NodeVerdicts.all_ok(len(rows))
        if choice.level is not None:
            inside = nodes.label_column(choice.level).codes[rows] == self._code(nodes, choice)
        else:
            inside = np.ones(len(rows), dtype=bool)
        domain = str(choice)
        slice_value = self._slice_value(pod.pod, choice)
        if slice_value is not None and choice.slice_level is not None:
            col = nodes.label_column(choice.slice_level)
            inside &= col.codes[rows] == col.code_of.get(slice_value, -2)
            domain = f"{choice} (slice {choice.slice_level}={slice_value})"
        status = fw.Status.unresolvable(ERR_OUTSIDE_DOMAIN.format(domain=domain), plugin=self.NAME)
        return fw.NodeVerdicts(np.asarray(inside, dtype=bool), [status])

    def pre_score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.Status:
        choice = state.get(_CHOICE)
        placed_in = choice is not None and (choice.level is not None or choice.slice_level is not None)
        return fw.SUCCESS if placed_in else fw.Status.skip()

    def score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> IntArray:
        """Members packed inside their domain: MostAllocated (kube-scheduler
        ``noderesources/most_allocated.go``, equal weights) over what the
        member requests, its pod slot included."""
        v = self._vector(nodes, pod.requests)
        if v is None or rows.size == 0:
            return np.zeros(rows.size, dtype=np.int64)
        cols = np.flatnonzero(v > 0)
        alloc = nodes.alloc[rows][:, cols].astype(np.float64)
        used = (nodes.req[rows][:, cols] + v[cols]).astype(np.float64)
        frac = np.divide(used, alloc, out=np.zeros_like(used), where=alloc > 0)
        out: IntArray = (np.clip(frac, 0.0, 1.0).mean(axis=1) * fw.MAX_NODE_SCORE).astype(np.int64)
        return out

    def post_filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, failures: dict[int, fw.Status]
    ) -> fw.PostFilterResult:
        """A member that cannot be placed fails its gang (Coscheduling rejects
        the siblings): the gang chooses again next time, its last domain first
        — also the domain this attempt was given and not yet recorded (one
        chosen for preemption: the victims evicted now free room there)."""
        key = self._key(pod.pod)
        if key is not None:
            self._release(key)
            tried = state.get(_CHOICE)
            if isinstance(tried, Choice) and tried.level is not None:
                self._sticky[key] = tried
        return fw.PostFilterResult(fw.Status.unschedulable())

    def _release(self, key: GroupRef) -> None:
        choice = self._chosen.pop(key, None)
        if choice is not None and (choice.level is not None or choice.slice_level is not None):
            self._sticky[key] = choice

    def reserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        choice = state.get(_CHOICE)
        key = self._key(pod.pod)
        if choice is None or key is None:
            return fw.SUCCESS
        if self._unplaced(key):
            self._chosen.setdefault(key, choice)
        else:
            self._chosen.pop(key, None)  # the gang is placed whole
            self._sticky.pop(key, None)
        return fw.SUCCESS

    def unreserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> None:
        key = self._key(pod.pod)
        if key is not None:
            self._release(key)
