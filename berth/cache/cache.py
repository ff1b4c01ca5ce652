"""The scheduler cache: what is on which node, including what Berth assumed.

Mirrors kube-scheduler's ``pkg/scheduler/backend/cache/cache.go``. A pod
moves through these states::

      +-------------------------------------------+  +----+
      |                            Add            |  |    |
      |                                           |  |    | Update
      +      Assume                Add            v  v    |
    Initial +--------> Assumed +------------+---> Added <--+
      ^                +   +               |       +
      |                |   |               |       |
      |                |   |     Add       |       | Remove
      |                |   |               |       |
      |                |   |               +       |
      +----------------+   +-----------> Expired   +----> Deleted
            Forget             Expire

- ``assume_pod``: the scheduling cycle chose a node; the pod's resources are
  counted there at once so the next cycle sees them.
- ``finish_binding``: the bind call returned; if the confirming Add never
  arrives within ``assumed_ttl`` the pod expires (``cleanup_expired``) and
  its resources are released; with ``assumed_ttl`` 0 (the default, as
  kube-scheduler) it waits for its Add however late.
- ``forget_pod``: binding failed; undo the assumption.
- ``add_pod``: the pod is confirmed bound (informer Add, or the embedded
  binder). An assumed pod that shows up on another node moves there.

Every change bumps the touched node's generation, so :meth:`update_snapshot`
copies only those rows. A change that would carry a node's requested amount
past int64 raises :class:`UsageOverflow` before anything moves
(:meth:`check_usage` asks the same question without changing anything).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Iterator

from berth.cache.infos import NodeInfo, PodInfo
from berth.cache.podindex import PodIndex
from berth.cache.snapshot import Snapshot
from berth.cache.table import NodeTable, ResourceColumns, UsageOverflow
from berth.cluster import model

__all__ = ["Cache", "CacheError", "UsageOverflow"]

log = logging.getLogger(__name__)


class CacheError(Exception):
    """A cache operation that contradicts the cache's state (a bug or a race)."""


@dataclasses.dataclass(slots=True)
class _PodState:
    info: PodInfo
    node: str
    assumed: bool = False
    binding_finished: bool = False
    deadline: float | None = None


PodListener = Callable[[PodInfo, str, int], None]


class Cache:
    """See the module docstring. Not thread-safe: one event loop owns it."""

    def __init__(self, *, assumed_ttl: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.assumed_ttl = assumed_ttl
        self._clock = clock
        self.table = NodeTable(ResourceColumns())
        self._pods: dict[str, _PodState] = {}
        self._assumed: set[str] = set()
        self._generation = 0
        # Called with (pod, node, +1/-1) whenever a pod starts or stops counting
        # on a node; indexes that need pods (affinity, spread) subscribe.
        self._listeners: list[PodListener] = []
        # Pods by namespace and label, kept up to date through subscribe()
        # (spread and inter-pod affinity count with it).
        self.pod_index = PodIndex(self)

    # ------------------------------------------------------------ bookkeeping

    def subscribe(self, listener: PodListener) -> None:
        self._listeners.append(listener)
        for st in self._pods.values():
            listener(st.info, st.node, 1)

    def _touch(self, row: int) -> None:
        self._generation += 1
        self.table.stamp(row, self._generation)
        info = self.table.infos[row]
        if info is not None:
            info.generation = self._generation

    def _count(self, pi: PodInfo, node: str, sign: int) -> None:
        row = self.table.row(node)
        info = self.table.infos[row]
        assert info is not None
        # The columns first: the one step that can refuse (UsageOverflow),
        # before anything else has changed.
        self.table.add_pod_usage(row, pi, sign)
        if sign > 0:
            info.add_pod(pi)
        else:
            info.remove_pod(pi)
        self._touch(row)
        for listener in self._listeners:
            listener(pi, node, sign)
        if sign < 0:
            self._drop_ghost(row)

    def _drop_ghost(self, row: int) -> None:
        """A row with neither a node nor pods stays only as an empty, dead slot."""
        info = self.table.infos[row]
        if info is not None and info.node is None and not info.pods:
            self.table.alive[row] = False

    # ------------------------------------------------------------ nodes

    def add_node(self, node: model.Node) -> None:
        row = self.table.row(node.metadata.name)
        self.table.set_node(row, node)
        self._touch(row)

    update_node = add_node

    def remove_node(self, name: str) -> None:
        row = self.table.index.get(name)
        if row is None:
            return
        self.table.clear_node(row)
        self._touch(row)

    def node_info(self, name: str) -> NodeInfo | None:
        row = self.table.index.get(name)
        return None if row is None else self.table.infos[row]

    def nodes(self) -> Iterator[model.Node]:
        for i in self.table.alive_rows().tolist():
            yield self.table.node(i)

    def allocatable_total(self) -> dict[str, int]:
        """The alive nodes' allocatable amounts, summed per resource."""
        t = self.table
        alive = t.alive[: t.size]
        sums = t.alloc[: t.size][alive].sum(axis=0, dtype=object) if alive.any() else []
        names = t.columns.names
        return {names[c]: int(v) for c, v in enumerate(sums) if v}

    @property
    def node_count(self) -> int:
        return int(self.table.alive[: self.table.size].sum())

    # ------------------------------------------------------------ pods

    @property
    def pod_count(self) -> int:
        return len(self._pods)

    @property
    def assumed_count(self) -> int:
        return len(self._assumed)

    def get_pod(self, uid: str) -> PodInfo | None:
        st = self._pods.get(uid)
        return None if st is None else st.info

    def pod_node(self, uid: str) -> str | None:
        st = self._pods.get(uid)
        return None if st is None else st.node

    def is_assumed(self, uid: str) -> bool:
        return uid in self._assumed

    def check_usage(self, node: str, pods_in: Iterable[PodInfo], pods_out: Iterable[PodInfo] = ()) -> None:
        """Raise UsageOverflow when ``node`` cannot count ``pods_in`` once
        ``pods_out`` have left it (a requested column would pass int64);
        changes nothing either way."""
        self.check_steps([[*((node, -1, pi) for pi in pods_out), *((node, 1, pi) for pi in pods_in)]])

    def check_steps(
        self,
        steps: Iterable[Iterable[tuple[str, int, PodInfo]]],
        running: dict[tuple[str, str], list[int]] | None = None,
    ) -> None:
        """:meth:`check_usage` for a sequence of changes made in this order,
        each a list of ``(node, +1 | -1, pod)`` (see ``NodeTable.usage_overflow``,
        and its ``running`` sums for a sequence checked in parts)."""
        why = self.table.usage_overflow(steps, running)
        if why is not None:
            raise UsageOverflow(why)

    def _leaving(self, st: _PodState | None, node: str) -> list[PodInfo]:
        """The pod that stops counting on ``node`` when ``st`` is replaced."""
        return [st.info] if st is not None and st.node == node else []

    def assume_pod(self, pi: PodInfo, node: str) -> None:
        if pi.uid in self._pods:
            raise CacheError(f"pod {pi.key} ({pi.uid}) is already in the cache")
        self._count(pi, node, 1)  # first: it refuses an overflow before anything changes
        self._pods[pi.uid] = _PodState(pi, node, assumed=True)
        self._assumed.add(pi.uid)

    def finish_binding(self, uid: str) -> None:
        st = self._pods.get(uid)
        if st is None or not st.assumed:
            return
        st.binding_finished = True
        st.deadline = self._clock() + self.assumed_ttl if self.assumed_ttl > 0 else None

    def forget_pod(self, uid: str) -> None:
        st = self._pods.get(uid)
        if st is None:
            return
        if not st.assumed:
            raise CacheError(f"pod {st.info.key} was confirmed; only an assumed pod can be forgotten")
        del self._pods[uid]
        self._assumed.discard(uid)
        self._count(st.info, st.node, -1)

    def add_pod(self, pi: PodInfo) -> None:
        """A pod bound to ``spec.nodeName`` (informer Add or a confirmed bind)."""
        node = pi.pod.spec.node_name
        if not node:
            raise CacheError(f"pod {pi.key} has no nodeName")
        st = self._pods.get(pi.uid)
        if st is not None and st.assumed:
            # Assumed -> Added; it may have landed elsewhere than assumed.
            # The new count is checked before the old one goes.
            if not self._same_usage(st, pi, node):
                self.check_usage(node, [pi], self._leaving(st, node))
            self._assumed.discard(pi.uid)
            self._replace(st, pi, node)
            return
        if st is not None:
            self.update_pod(pi)
            return
        self._count(pi, node, 1)  # first: it refuses an overflow before anything changes
        self._pods[pi.uid] = _PodState(pi, node)

    def update_pod(self, pi: PodInfo) -> None:
        st = self._pods.get(pi.uid)
        if st is None or st.assumed:
            self.add_pod(pi)
            return
        node = pi.pod.spec.node_name or st.node
        if not self._same_usage(st, pi, node):
            self.check_usage(node, [pi], self._leaving(st, node))
        self._replace(st, pi, node)

    @staticmethod
    def _same_usage(st: _PodState, pi: PodInfo, node: str) -> bool:
        """``pi`` replaces ``st``'s pod on the same node with the same
        requests (a binding's confirmation, a status update): the node's
        requested amounts do not move, so nothing can overflow."""
        return st.node == node and st.info.usage == pi.usage

    def _replace(self, st: _PodState, pi: PodInfo, node: str) -> None:
        """``st``'s pod stops counting on its node and ``pi`` counts on
        ``node`` (the caller checked the overflow). When the amounts are the
        same on the same node, the columns are left as they are (subtracting
        and adding them back would leave the same numbers); the node's pods,
        its generation and the listeners see the same two steps either way."""
        if not self._same_usage(st, pi, node):
            self._count(st.info, st.node, -1)
            self._pods[pi.uid] = _PodState(pi, node)
            self._count(pi, node, 1)
            return
        row = self.table.row(node)
        info = self.table.infos[row]
        assert info is not None
        info.remove_pod(st.info)
        self._touch(row)
        for listener in self._listeners:
            listener(st.info, node, -1)
        self._pods[pi.uid] = _PodState(pi, node)
        info.add_pod(pi)
        self._touch(row)
        for listener in self._listeners:
            listener(pi, node, 1)

    def remove_pod(self, uid: str) -> PodInfo | None:
        st = self._pods.pop(uid, None)
        if st is None:
            return None
        self._assumed.discard(uid)
        self._count(st.info, st.node, -1)
        return st.info

    def cleanup_expired(self) -> list[PodInfo]:
        """Release assumed pods whose binding finished but never confirmed."""
        now = self._clock()
        expired: list[PodInfo] = []
        for uid in list(self._assumed):
            st = self._pods[uid]
            if st.binding_finished and st.deadline is not None and now >= st.deadline:
                log.warning("assumed pod %s expired on %s: its binding never confirmed", st.info.key, st.node)
                self.remove_pod(uid)
                expired.append(st.info)
        return expired

    def pods(self) -> Iterator[tuple[PodInfo, str, bool]]:
        """(pod, node, assumed) for every pod counted on a node."""
        for st in self._pods.values():
            yield st.info, st.node, st.assumed

    # ------------------------------------------------------------ snapshots

    def update_snapshot(self, snapshot: Snapshot) -> int:
        """Bring ``snapshot`` up to date; returns how many node rows were copied."""
        return snapshot.sync_from(self.table)

    def new_snapshot(self) -> Snapshot:
        snap = Snapshot(self.table.columns.copy())
        self.update_snapshot(snap)
        return snap
