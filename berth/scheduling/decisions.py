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

Every decision gets a **serial**, one more than the previous one's, and the
most recent ones (``max_history_entries`` and ``max_history_bytes``) stay
in ``history``, so a client that saw serial N resumes exactly after it
(:meth:`DecisionLog.watch_since`), or learns with
:class:`~berth.errors.OutOfRange` that N was compacted (Kubernetes' watch
from a ``resourceVersion``, and its 410 Gone: ``watchCache`` in
``staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go``).

With a durable store (:mod:`berth.store`) the log ``holds`` what it emits
and shows it to watchers only once the store has committed it
(:meth:`DecisionLog.publish`): a client never sees a binding that a crash
could still undo.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Collection, Iterable

from berth.errors import OutOfRange, ResourceExhausted
from berth.framework.decision import Decision

__all__ = [
    "MAX_BACKLOG_BYTES",
    "MAX_DECISION_BYTES",
    "MAX_DELETED_BYTES",
    "MAX_HISTORY_BYTES",
    "MAX_HISTORY_ENTRIES",
    "DecisionLog",
    "decision_bytes",
]

#: Every decision kept, live pods' and deleted pods' (~100 000 decisions).
MAX_DECISION_BYTES = 48 << 20
#: The decisions of deleted pods kept as history (~8000 decisions).
MAX_DELETED_BYTES = 4 << 20
#: One subscriber's unread decisions.
MAX_BACKLOG_BYTES = 32 << 20
#: The serial-numbered history a watch resumes from.
MAX_HISTORY_ENTRIES = 100_000
MAX_HISTORY_BYTES = 64 << 20

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
        self.queue: asyncio.Queue[tuple[int, Decision]] = asyncio.Queue()
        self.backlog = 0
        self.overflowed = False


class DecisionLog:
    def __init__(
        self,
        *,
        max_bytes: int = MAX_DECISION_BYTES,
        max_deleted_bytes: int = MAX_DELETED_BYTES,
        max_backlog_bytes: int = MAX_BACKLOG_BYTES,
        max_history_entries: int = MAX_HISTORY_ENTRIES,
        max_history_bytes: int = MAX_HISTORY_BYTES,
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
        #: The serial of the last decision emitted (0: none yet).
        self.serial = 0
        #: What the serials belong to: this log's (its process's) own id,
        #: unless a store's continues them (:meth:`restore`'s caller sets it).
        self.epoch = uuid.uuid4().hex
        #: (serial, decision, its size), oldest first: what a watch resumes from.
        self.history: collections.deque[tuple[int, Decision, int]] = collections.deque()
        self._history_bytes = 0
        self.max_history_entries = max_history_entries
        self.max_history_bytes = max_history_bytes
        #: Whether decisions wait for :meth:`publish` before watchers see them.
        self.hold = False
        #: The last serial watchers may see.
        self.published = 0
        self._held: collections.deque[tuple[int, Decision, int]] = collections.deque()
        #: The store's: told each decision (serial, decision) as it is
        #: emitted, and the oldest serial still kept when history is trimmed.
        self.record: Callable[[int, Decision], None] | None = None
        self.trimmed: Callable[[int], None] | None = None

    @property
    def watcher_count(self) -> int:
        """Subscribers reading now (every open stream once it has subscribed)."""
        return len(self._watchers)

    @property
    def nbytes(self) -> int:
        """The estimated bytes ``latest`` holds (never above ``max_bytes``)."""
        return self._bytes

    def emit(self, decision: Decision) -> None:
        self.serial += 1
        serial = self.serial
        size = self._remember(serial, decision)
        if self.record is not None:
            self.record(serial, decision)
        self._latest(decision)
        if self.hold:
            self._held.append((serial, decision, size))
        else:
            self.published = serial
            self._notify(serial, decision, size)

    def publish(self, serial: int) -> None:
        """Show watchers the held decisions up to ``serial`` (the store committed them)."""
        held = self._held
        while held and held[0][0] <= serial:
            s, d, size = held.popleft()
            self.published = s
            self._notify(s, d, size)

    def restore(self, decisions: Iterable[tuple[int, Decision]], live: Callable[[str, str], bool]) -> None:
        """Take back a stored history (oldest first), before anything is
        emitted: serials carry on after its last one. ``live(key, uid)``
        says whether the pod is still there (else its decision is history)."""
        for serial, d in decisions:
            self.serial = self.published = serial
            self._remember(serial, d)
            self._latest(d)
        for key, d in list(self.latest.items()):
            if not live(key, d.uid):
                self.pod_deleted(key, d.uid)

    @property
    def oldest(self) -> int:
        """The oldest serial kept: a watch may resume after any serial from
        ``oldest - 1`` on and miss nothing."""
        return self.history[0][0] if self.history else self.serial + 1

    def _remember(self, serial: int, decision: Decision) -> int:
        size = decision_bytes(decision)
        history = self.history
        history.append((serial, decision, size))
        self._history_bytes += size
        if len(history) > self.max_history_entries or self._history_bytes > self.max_history_bytes:
            # Trimmed by a quarter at a time, so the store deletes in steps.
            keep_n = self.max_history_entries * 3 // 4
            keep_b = self.max_history_bytes * 3 // 4
            while history and (len(history) > keep_n or self._history_bytes > keep_b):
                self._history_bytes -= history.popleft()[2]
            if self.trimmed is not None:
                self.trimmed(self.oldest)
        return size

    def _latest(self, decision: Decision) -> None:
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

    def _notify(self, serial: int, decision: Decision, size: int) -> None:
        key = decision.pod
        for w in self._watchers:
            if w.overflowed or (w.keys and key not in w.keys):
                continue
            if w.backlog + size > self.max_backlog_bytes:
                w.overflowed = True
                w.queue.put_nowait((serial, decision))  # wakes a reader blocked on get(); it sees the flag
                continue
            w.backlog += size
            w.queue.put_nowait((serial, decision))

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
        async with contextlib.aclosing(self.watch_batches(pods, replay=replay)) as batches:
            async for batch in batches:
                for d in batch:
                    yield d

    async def watch_batches(
        self, pods: Collection[str] = (), *, replay: bool = False, max_batch: int = 1000, linger: float = 0.0
    ) -> AsyncGenerator[list[Decision]]:
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
        # Each layer closes the one inside it as it is closed (aclosing), not
        # left to the garbage collector's finalizer tasks.
        stream = self.watch_serials(pods, replay=replay, max_batch=max_batch, linger=linger)
        async with contextlib.aclosing(stream) as batches:
            async for batch in batches:
                yield [d for _, d in batch]

    async def watch_serials(
        self, pods: Collection[str] = (), *, replay: bool = False, max_batch: int = 1000, linger: float = 0.0
    ) -> AsyncGenerator[list[tuple[int, Decision]]]:
        """:meth:`watch_batches` with each decision's serial (0 for the
        replayed ones: the latest of each pod, which are not a sequence)."""
        if linger < 0:
            raise ValueError(f"linger: {linger} must not be negative")
        w = _Watcher(frozenset(pods))
        self._watchers.append(w)
        try:
            if replay:
                old = [(0, d) for key, d in list(self.latest.items()) if not w.keys or key in w.keys]
                for k in range(0, len(old), max_batch):
                    yield old[k : k + max_batch]
            async with contextlib.aclosing(self._read(w, max_batch, linger, 0)) as batches:
                async for batch in batches:
                    yield batch
        finally:
            self._watchers.remove(w)

    async def watch_since(
        self, pods: Collection[str] = (), *, since: int, max_batch: int = 1000, linger: float = 0.0
    ) -> AsyncGenerator[list[tuple[int, Decision]]]:
        """(serial, decision) for every decision after serial ``since``
        about ``pods`` (all when empty), those kept first, then as they
        happen; never one twice, none left out. :class:`OutOfRange` when
        ``since`` was compacted away (older than :attr:`oldest` - 1) or was
        never reached (a serial of a store this log does not continue)."""
        if since > self.published:
            raise OutOfRange(
                f"since_serial: {since} is past the last serial {self.published}: "
                "the server's state was lost or is another's (compare epochs); list and watch again",
                oldest=self.oldest,
            )
        if since < self.oldest - 1:
            raise OutOfRange(
                f"since_serial: {since} was compacted; the oldest serial kept is {self.oldest}: "
                "list and watch from the current serial",
                oldest=self.oldest,
            )
        if linger < 0:
            raise ValueError(f"linger: {linger} must not be negative")
        w = _Watcher(frozenset(pods))
        self._watchers.append(w)  # before the history is read: nothing falls between
        try:
            published = self.published
            old = [(s, d) for s, d, _ in self.history if since < s <= published and (not w.keys or d.pod in w.keys)]
            for k in range(0, len(old), max_batch):
                yield old[k : k + max_batch]
            async with contextlib.aclosing(self._read(w, max_batch, linger, published)) as batches:
                async for batch in batches:
                    yield batch
        finally:
            self._watchers.remove(w)

    async def _read(
        self, w: _Watcher, max_batch: int, linger: float, after: int
    ) -> AsyncGenerator[list[tuple[int, Decision]]]:
        """What ``w`` is shown (serials above ``after``), in batches."""
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
            w.backlog -= sum(decision_bytes(d) for _, d in batch)
            batch = [(s, d) for s, d in batch if s > after]
            if batch:
                yield batch
