"""Reservation: capacity held for a gang or pod that has waited longer than
its queue's ``reservation.after``, with backfill
(:mod:`berth.gangs.reservations` says what is held and when it ends).

Without it, Berth's rule that a head-of-line pod that cannot fit must not
block smaller pods lets a 64-pod gang wait for ever while single pods take
every core as it frees (kueue#8309). With it (kai-scheduler#1969's
semantics, which no anchor ships):

- PostFilter, for a pod (a gang's member) that did not fit, and the next
  PreFilter of one let go after Reserve (a gang whose members found room one
  by one but timed out at Permit waiting for the rest): when its gang or
  itself has waited longer than its queue's ``reservation.after`` and the
  queue holds fewer than ``reservation.maxPerQueue`` reservations, one is
  made: its nodes are the domain of the gang's topology constraint with the
  most free room among those whose allocatable holds it, else the fewest of
  the freest nodes whose allocatable holds it. Its message says what is held.
- PreFilter, for every other pod: each reservation holds, node by node, what
  is free on its nodes up to what its owner still needs (refreshed every
  cycle), and estimates when it can start. A pod that declares a runtime
  ending before that start ignores it (backfill).
- Filter: on a node of a reservation, a pod fits only in what is free beyond
  the held amount: else ``node(s) held for gang research/train-64 (reserved
  48 of 64 cpu)`` (Unschedulable: it fits once the reservation is released).
- Reserve: a pod placed is remembered with its declared runtime (what the
  start estimates read); the owner placed whole releases its reservation.
  Owners gone and reservations past ``reservation.timeout`` are released at
  the next cycle.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.gangs import GangIndex, GangKey, InvalidGang
from berth.gangs import reservations as rsv
from berth.gangs import topology as tp

__all__ = ["ERR_HELD", "Reservation"]

log = logging.getLogger(__name__)

#: Filter's reason on a node whose free room is held for another gang or pod.
ERR_HELD = "node(s) held for {owner} (reserved {reserved})"

IntArray = npt.NDArray[np.int64]


@dataclasses.dataclass(slots=True)
class _Held:
    """One reservation as Filter sees it for one pod: ``held[k]`` is held on ``rows[k]``."""

    rows: IntArray
    held: IntArray
    status: fw.Status


_VIEW: fw.StateKey[list[_Held]] = fw.StateKey("Reservation.held")


@dataclasses.dataclass(frozen=True, slots=True)
class _Owner:
    """Who a pod waits as: its gang (``kind`` "gang") or itself."""

    name: str
    kind: str
    gang: GangKey | None


class Reservation:
    NAME: ClassVar[str] = "Reservation"
    Args: ClassVar[None] = None

    def __init__(self, args: None, handle: Handle) -> None:
        self.handle = handle
        self.gangs: GangIndex = handle.gangs if handle.gangs is not None else GangIndex()
        #: owner -> its reservation.
        self.book: dict[str, rsv.Reservation] = {}
        #: owner -> when it was first tried (handle.clock).
        self.waiting_since: dict[str, float] = {}
        #: pod uid -> (when it was placed, its declared runtime): what ends when.
        self.placed: dict[str, tuple[float, float | None]] = {}
        #: owner name -> its gang, for the owners in waiting_since that are gangs.
        self._gang_names: dict[str, GangKey] = {}
        self._cycles = 0
        #: Owners whose pods were let go after Reserve (a gang's wait at
        #: Permit timed out): considered for a reservation at their next PreFilter.
        self._due: set[str] = set()
        #: pod uid -> its requests (a gang's members are read on every refresh).
        self._request_memo: dict[str, dict[str, int]] = {}

    # ------------------------------------------------------------ lookups

    def _owner(self, pod: model.Pod) -> _Owner:
        try:
            m = self.gangs.member_of(pod)
        except InvalidGang:
            m = None
        if m is not None:
            return _Owner(str(m.key), "gang", m.key)
        return _Owner(pod.key, "pod", None)

    def _unplaced(self, owner: _Owner, pod: model.Pod | None) -> list[model.Pod] | None:
        """The owner's pods not yet assumed or bound; None when it is gone."""
        cache = self.handle.cache
        if owner.gang is not None:
            members = self.gangs.members(owner.gang)
            if not members:
                return None
            return [m for m in members if cache.get_pod(m.metadata.uid) is None]
        live = pod if pod is not None else self.handle.pods.by_key(owner.name)
        if live is None:
            return None
        return [] if cache.get_pod(live.metadata.uid) is not None or live.spec.node_name else [live]

    def reservation_of(self, pod: model.Pod) -> rsv.Reservation | None:
        """The reservation held for ``pod``'s gang (or itself), if any."""
        return self.book.get(self._owner(pod).name)

    def reservations(self) -> list[rsv.Reservation]:
        """Every reservation held now (views, metrics, tests)."""
        return list(self.book.values())

    # ------------------------------------------------------------ the book

    def _release(self, owner: str, why: str) -> None:
        r = self.book.pop(owner, None)
        if r is not None:
            log.info("reservation for %s %s released: %s", r.kind, owner, why)
            self._publish()

    def _publish(self) -> None:
        """``berth_reservations`` and ``berth_reservation_held_resources``
        from the book (cpu in cores, the rest in canonical units)."""
        m = self.handle.metrics
        m.reservations.clear()
        m.reservation_held.clear()
        for r in self.book.values():
            m.reservations.labels(r.queue).inc()
            for name, amount in r.held_total().items():
                m.reservation_held.labels(r.queue, name).inc(amount / 1000 if name == "cpu" else amount)

    def _expire(self, now: float) -> None:
        for name, r in list(self.book.items()):
            if now >= r.expires:
                self._release(name, "timed out")
                self.waiting_since.pop(name, None)  # it waits again from now, behind the others
            elif self._unplaced(_Owner(name, r.kind, r.gang), None) is None:
                self._release(name, "its pods are gone")
                self.waiting_since.pop(name, None)

    def _forget_gone(self) -> None:
        """Drop the waiting clocks of owners placed or gone."""
        for name in list(self.waiting_since):
            if name in self.book:
                continue
            gang = self._gang_names.get(name)
            if not self._unplaced(_Owner(name, "gang" if gang else "pod", gang), None):
                del self.waiting_since[name]
                self._gang_names.pop(name, None)
        pods = self.handle.pods
        self._request_memo = {u: r for u, r in self._request_memo.items() if pods.get(u) is not None}

    @staticmethod
    def _free(nodes: NodeTable, names: Sequence[str], need: Sequence[str]) -> dict[str, dict[str, int]]:
        """Node -> resource -> free amount, for ``names`` in the table."""
        out: dict[str, dict[str, int]] = {}
        cols = [(n, nodes.columns.index.get(n)) for n in need]
        for name in names:
            row = nodes.index.get(name)
            if row is None or not nodes.alive[row] or nodes.unschedulable[row]:
                continue
            out[name] = {
                n: int(nodes.alloc[row, c] - nodes.req[row, c]) if c is not None and c < nodes.alloc.shape[1] else 0
                for n, c in cols
            }
        return out

    def _requests(self, pod: model.Pod) -> dict[str, int]:
        hit = self._request_memo.get(pod.metadata.uid)
        if hit is None:
            hit = self._request_memo[pod.metadata.uid] = PodInfo.of(pod).requests
        return hit

    def _refresh(self, r: rsv.Reservation, nodes: NodeTable, now: float) -> None:
        """Hold what is free on ``r``'s nodes now; estimate its start.

        The owner's own pods count for it, not against it: those assumed
        (a gang's members waiting at Permit for the rest) hold their room
        already, so it is added to what is free; what it needs is what its
        pods not yet bound request; and its pods never count as ending."""
        cache = self.handle.cache
        members = self.gangs.members(r.gang) if r.gang is not None else []
        if r.gang is None and (mine := self.handle.pods.by_key(r.owner)) is not None:
            members = [mine]
        need: dict[str, int] = {}
        waiting: dict[str, dict[str, int]] = {}  # node -> the owner's assumed requests there
        own: set[str] = set()
        for m in members:
            own.add(m.metadata.uid)
            if m.spec.node_name:
                continue
            req = self._requests(m)
            for k, a in req.items():
                if a > 0:
                    need[k] = need.get(k, 0) + a
            node = cache.pod_node(m.metadata.uid)
            if node is not None:
                at = waiting.setdefault(node, {})
                for k, a in req.items():
                    at[k] = at.get(k, 0) + a
        if need:
            r.need = need
        free = self._free(nodes, r.nodes, list(r.need))
        for node, amounts in waiting.items():
            if node in free:
                for k in free[node]:
                    free[node][k] += amounts.get(k, 0)
        r.refresh(free)
        total: dict[str, int] = {}
        for amounts in free.values():
            for n, a in amounts.items():
                total[n] = total.get(n, 0) + max(0, a)
        ends: list[tuple[float | None, dict[str, int]]] = []
        for name in r.nodes:
            row = nodes.index.get(name)
            info = nodes.infos[row] if row is not None else None
            if info is None:
                continue
            for pi in info.pods.values():
                if pi.uid in own:
                    continue
                when = self.placed.get(pi.uid)
                end = when[0] + when[1] if when is not None and when[1] is not None else None
                ends.append((end, pi.requests))
        r.starts_at = rsv.estimate_start(r.need, total, ends, now)

    def _choose_nodes(self, pod: model.Pod, need: dict[str, int], nodes: NodeTable) -> tuple[tuple[str, ...], str]:
        """The nodes to hold for ``need``, and the domain they make ("" for
        none): see the module docstring. Empty when none could ever hold it."""
        n = nodes.size
        usable = np.flatnonzero(nodes.alive[:n] & ~nodes.unschedulable[:n])
        names = [nodes.infos[r].name for r in usable.tolist() if nodes.infos[r] is not None]  # type: ignore[union-attr]
        alloc = self._free(nodes, names, list(need))
        # allocatable: free + requested
        capacity = {
            name: {
                k: int(nodes.alloc[nodes.index[name], c]) if (c := nodes.columns.index.get(k)) is not None else 0
                for k in need
            }
            for name in names
        }

        def covers(group: Sequence[str]) -> bool:
            return all(sum(capacity[g][k] for g in group) >= a for k, a in need.items())

        def freeness(name: str) -> float:
            return sum(alloc[name][k] / a for k, a in need.items() if a > 0)

        try:
            constraint = tp.constraint_of(pod.metadata.annotations or {}, self.handle.topologies)
        except InvalidGang:
            constraint = None
        if constraint is not None:
            level = constraint.levels[0]
            col = nodes.label_column(level)
            domains: dict[str, list[str]] = {}
            for name in names:
                code = int(col.codes[nodes.index[name]])
                if code >= 0:
                    domains.setdefault(col.values[code], []).append(name)
            fitting = [(sum(freeness(m) for m in members), v) for v, members in domains.items() if covers(members)]
            if not fitting:
                return (), ""
            _, value = min(fitting, key=lambda f: (-f[0], f[1]))
            members = sorted(domains[value], key=lambda m: (-freeness(m), m))
            return tuple(members), f"{level}={value}"
        chosen: list[str] = []
        for name in sorted(names, key=lambda m: (-freeness(m), m)):
            chosen.append(name)
            if covers(chosen):
                return tuple(chosen), ""
        return (), ""

    def _make(self, pod: PodInfo, owner: _Owner, nodes: NodeTable, now: float) -> rsv.Reservation | None:
        queues = self.handle.queues
        policy = queues.reservation_of(pod.pod) if queues is not None else None
        if policy is None or owner.name in self.book:
            return None
        if now - self.waiting_since.get(owner.name, now) < policy.after:
            return None
        if sum(1 for r in self.book.values() if r.queue == policy.queue) >= policy.max_per_queue:
            return None
        unplaced = self._unplaced(owner, pod.pod)
        if not unplaced:
            return None
        need: dict[str, int] = {}
        for m in unplaced:
            for k, a in (pod if m.metadata.uid == pod.uid else PodInfo.of(m)).requests.items():
                need[k] = need.get(k, 0) + a
        need = {k: a for k, a in need.items() if a > 0}
        if not need:
            return None
        chosen, domain = self._choose_nodes(pod.pod, need, nodes)
        if not chosen:
            return None
        r = rsv.Reservation(
            owner.name, owner.kind, policy.queue, need, chosen, domain, now, now + policy.timeout, gang=owner.gang
        )
        self._refresh(r, nodes, now)
        self.book[owner.name] = r
        self._publish()
        log.info("reservation for %s %s: %s", owner.kind, owner.name, r.summary(now))
        return r

    # ------------------------------------------------------------ extension points

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        # A held node frees for others when its owner is placed (AssignedPod
        # Add) or gone, and when pods there end (AssignedPod Delete).
        return (fw.ClusterEvent("AssignedPod", fw.ActionType.ADD | fw.ActionType.DELETE),)

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        now = self.handle.clock()
        owner = self._owner(pod.pod)
        queues = self.handle.queues
        if queues is not None and queues.reservation_of(pod.pod) is not None:
            self.waiting_since.setdefault(owner.name, now)
            if owner.gang is not None:
                self._gang_names[owner.name] = owner.gang
        self._cycles += 1
        if self._cycles % 1024 == 0:
            self._forget_gone()
        if owner.name in self._due:
            self._due.discard(owner.name)
            self._make(pod, owner, nodes, now)
        if not self.book:
            return fw.PreFilterResult(fw.Status.skip())
        self._expire(now)
        runtime = rsv.declared_runtime(pod.pod)
        width = nodes.alloc.shape[1]
        view: list[_Held] = []
        for r in self.book.values():
            if r.owner == owner.name:
                continue
            self._refresh(r, nodes, now)
            if runtime is not None and r.starts_at is not None and now + runtime <= r.starts_at:
                continue  # backfill: it ends before the reservation can start
            rows: list[int] = []
            held: list[IntArray] = []
            for name, amounts in r.held.items():
                row = nodes.index.get(name)
                if row is None:
                    continue
                v = np.zeros(width, dtype=np.int64)
                for k, a in amounts.items():
                    c = nodes.columns.index.get(k)
                    if c is not None and c < width:
                        v[c] = a
                rows.append(row)
                held.append(v)
            if rows:
                what = f"{r.kind} {r.owner}"
                status = fw.Status.unschedulable(ERR_HELD.format(owner=what, reserved=r.reserved()), plugin=self.NAME)
                view.append(_Held(np.asarray(rows, dtype=np.int64), np.stack(held), status))
        self._publish()
        if not view:
            return fw.PreFilterResult(fw.Status.skip())
        state.write(_VIEW, view)
        return fw.PreFilterResult()

    def filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.int64]
    ) -> fw.NodeVerdicts:
        view = state.get(_VIEW)
        if not view:
            return fw.NodeVerdicts.all_ok(len(rows))
        width = view[0].held.shape[1]
        want = np.zeros(width, dtype=np.int64)
        for k, a in pod.requests.items():
            c = nodes.columns.index.get(k)
            if c is not None and c < width:
                want[c] = a
        ok = np.ones(len(rows), dtype=bool)
        reason = np.zeros(len(rows), dtype=np.int32)
        at = np.full(nodes.size, -1, dtype=np.int64)
        for i, h in enumerate(view):
            at[:] = -1
            at[h.rows] = np.arange(len(h.rows))
            pos = at[rows]
            hit = np.flatnonzero(pos >= 0)
            if hit.size == 0:
                continue
            r = rows[hit]
            left = nodes.alloc[r, :width] - nodes.req[r, :width] - want
            bad = ~(left >= h.held[pos[hit]]).all(axis=1)
            newly = hit[bad & ok[hit]]
            ok[newly] = False
            reason[newly] = i
        return fw.NodeVerdicts(ok, [h.status for h in view], reason)

    def post_filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, failures: dict[int, fw.Status]
    ) -> fw.PostFilterResult:
        """A pod that did not fit, waiting long enough: hold capacity for it."""
        now = self.handle.clock()
        owner = self._owner(pod.pod)
        r = self.book.get(owner.name) or self._make(pod, owner, nodes, now)
        if r is None:
            return fw.PostFilterResult(fw.Status.unschedulable())
        return fw.PostFilterResult(fw.Status.unschedulable(f"reservation: {r.summary(now)}"))

    def reserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        self.placed[pod.uid] = (self.handle.clock(), rsv.declared_runtime(pod.pod))
        if len(self.placed) > 4096 and len(self.placed) & 1023 == 0:
            cache = self.handle.cache
            self.placed = {u: w for u, w in self.placed.items() if cache.get_pod(u) is not None}
        owner = self._owner(pod.pod)
        if self._unplaced(owner, pod.pod) == []:
            self._release(owner.name, "placed")
            self.waiting_since.pop(owner.name, None)
            self._gang_names.pop(owner.name, None)
        return fw.SUCCESS

    def unreserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> None:
        """A pod let go after Reserve: a gang whose members found room one by
        one but never all at once (their wait at Permit timed out) starves
        as surely as one that never fits, so it may get a reservation too."""
        self.placed.pop(pod.uid, None)
        owner = self._owner(pod.pod)
        if owner.name in self.waiting_since and owner.name not in self.book:
            self._due.add(owner.name)
