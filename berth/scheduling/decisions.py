"""The decision log: the latest decision per pod and live subscribers (the
gRPC ``WatchDecisions`` stream, the dashboard's event stream). The Handle's
DecisionRecorder.

Bounded in bytes (an estimate per decision, :func:`decision_bytes`):

- ``latest`` keeps one decision per pod. A deleted pod's decision stays as
  history among the most recently deleted ones worth ``max_deleted_bytes``;
  past that the oldest deleted pod's goes. Everything together stays under
  ``max_bytes`` (the oldest decision goes first), so a flood of pods cannot
  grow it without limit either.
- each subscriber's backlog (decisions emitted and not yet read) stays under
  ``max_backlog_bytes``: a subscriber that falls further behind is ended with
  :class:`~berth.errors.ResourceExhausted` at its next read and may
  reconnect with ``replay`` (the API server ends a too slow watcher the same
  way: ``cacheWatcher`` in ``staging/src/k8s.io/apiserver/pkg/storage/cacher``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection

from berth.errors import ResourceExhausted
from berth.framework.decision import Decision

__all__ = [
    "MAX_BACKLOG_BYTES",
    "MAX_DECISION_BYTES",
    "MAX_DELETED_BYTES",
    "DecisionLog",
    "decision_bytes",
]

#: Every decision kept, live pods' and deleted pods' (~100 000 decisions).
MAX_DECISION_BYTES = 48 << 20
#: The decisions of deleted pods kept as history (~8000 decisions).
MAX_DELETED_BYTES = 4 << 20
#: One subscriber's unread decisions.
MAX_BACKLOG_BYTES = 32 << 20

#: A Decision's object, its tuple and dict slot, and a string's header (CPython 3.11).
_FIXED = 360
_REASON = 170


def decision_bytes(d: Decision) -> int:
    """An estimate of what keeping ``d`` costs: its objects plus its strings."""
    n = _FIXED + len(d.pod) + len(d.uid) + len(d.node) + len(d.message)
    for r in d.reasons:
        n += _REASON + len(r.plugin) + len(r.reason)
    return n


class _Watcher:
    __slots__ = ("backlog", "keys", "overflowed", "queue")

    def __init__(self, keys: frozenset[str]) -> None:
        self.keys = keys
        self.queue: asyncio.Queue[Decision] = asyncio.Queue()
        self.backlog = 0
        self.overflowed = False


class DecisionLog:
    def __init__(
        self,
        *,
        max_bytes: int = MAX_DECISION_BYTES,
        max_deleted_bytes: int = MAX_DELETED_BYTES,
        max_backlog_bytes: int = MAX_BACKLOG_BYTES,
    ) -> None:
        for field, value in (
            ("max_bytes", max_bytes),
            ("max_deleted_bytes", max_deleted_bytes),
            ("max_backlog_bytes", max_backlog_bytes),
        ):
            if value < 0:
                raise ValueError(f"{field}: {value} must not be negative")
        self.max_bytes = max_bytes
        self.max_deleted_bytes = max_deleted_bytes
        self.max_backlog_bytes = max_backlog_bytes
        #: pod key -> its last decision, the least recently decided first.
        #: (A decision's size is computed again when it goes rather than kept
        #: beside it: a dict entry and an int less per pod.)
        self.latest: dict[str, Decision] = {}
        self._bytes = 0
        #: Keys of deleted pods whose decision is kept, the longest deleted first.
        self._deleted: dict[str, None] = {}
        self._deleted_bytes = 0
        self._watchers: list[_Watcher] = []

    @property
    def nbytes(self) -> int:
        """The estimated bytes ``latest`` holds (never above ``max_bytes``)."""
        return self._bytes

    def emit(self, decision: Decision) -> None:
        key = decision.pod
        old = self.latest.get(key)
        # A decision about a pod already deleted (cancelled, preempted) stays history.
        gone = old is not None and key in self._deleted and old.uid == decision.uid
        self._drop(key)
        size = decision_bytes(decision)
        self.latest[key] = decision  # re-inserted: the newest goes last
        self._bytes += size
        if gone:
            self._forget_later(key)
        while self._bytes > self.max_bytes and self.latest:
            self._drop(next(iter(self.latest)))
        for w in self._watchers:
            if w.overflowed or (w.keys and key not in w.keys):
                continue
            if w.backlog + size > self.max_backlog_bytes:
                w.overflowed = True
                w.queue.put_nowait(decision)  # wakes a reader blocked on get(); it sees the flag
                continue
            w.backlog += size
            w.queue.put_nowait(decision)

    def pod_deleted(self, key: str, uid: str) -> None:
        """The pod ``key`` (``uid``) is gone: its decision becomes history,
        kept among the ``max_deleted_bytes`` most recently deleted."""
        d = self.latest.get(key)
        if d is None or d.uid != uid or key in self._deleted:
            return
        self._forget_later(key)

    def _forget_later(self, key: str) -> None:
        self._deleted[key] = None
        self._deleted_bytes += decision_bytes(self.latest[key])
        while self._deleted_bytes > self.max_deleted_bytes and self._deleted:
            self._drop(next(iter(self._deleted)))

    def _drop(self, key: str) -> None:
        d = self.latest.pop(key, None)
        if d is None:
            return
        size = decision_bytes(d)
        self._bytes -= size
        if self._deleted.pop(key, 0) is None:
            self._deleted_bytes -= size

    async def watch(self, pods: Collection[str] = (), *, replay: bool = False) -> AsyncIterator[Decision]:
        """Decisions about ``pods`` (all when empty) as they happen; with
        ``replay``, first the latest one of each pod already decided about.
        Raises ResourceExhausted once more than ``max_backlog_bytes`` of
        decisions wait unread."""
        async for batch in self.watch_batches(pods, replay=replay):
            for d in batch:
                yield d

    async def watch_batches(
        self, pods: Collection[str] = (), *, replay: bool = False, max_batch: int = 1000, linger: float = 0.0
    ) -> AsyncIterator[list[Decision]]:
        """:meth:`watch`'s decisions, in the same order, as lists: each holds
        every decision waiting when it is read (at most ``max_batch``), so a
        reader that falls behind catches up in a few steps. Never empty.

        With ``linger`` (seconds), a batch whose first decision finds fewer
        than ``max_batch`` waiting is read that much later, so the decisions
        the loop makes meanwhile go with it: a stream that sends each batch
        as one message sends a few hundred a second instead of one or two
        per pod (each a syscall and a wakeup on both ends), at the cost of
        ``linger`` more latency. Nagle's algorithm, or client-go's event
        broadcaster's batching, trade the same way."""
        if linger < 0:
            raise ValueError(f"linger: {linger} must not be negative")
        w = _Watcher(frozenset(pods))
        self._watchers.append(w)
        try:
            if replay:
                old = [d for key, d in list(self.latest.items()) if not w.keys or key in w.keys]
                for k in range(0, len(old), max_batch):
                    yield old[k : k + max_batch]
            while True:
                batch = [await w.queue.get()]
                if linger and w.queue.qsize() < max_batch - 1 and not w.overflowed:
                    await asyncio.sleep(linger)
                while len(batch) < max_batch and not w.queue.empty():
                    batch.append(w.queue.get_nowait())
                if w.overflowed:
                    raise ResourceExhausted(
                        f"decision stream: more than {self.max_backlog_bytes} bytes of decisions "
                        "unread (the client is too slow); reconnect with replay"
                    )
                w.backlog -= sum(decision_bytes(d) for d in batch)
                yield batch
        finally:
            self._watchers.remove(w)
