"""What every durable backend shares: writes buffered on the event loop's
thread, then committed as one batch per commit (:mod:`berth.store.interface`
says why). A backend says only how a :class:`Batch` is committed
(:meth:`BatchingStore._commit_batch`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

from berth import errors
from berth.framework.decision import Decision
from berth.store import codec
from berth.store.interface import Snapshot

__all__ = ["Batch", "BatchingStore", "decoded"]

log = logging.getLogger(__name__)

#: A deletion in the pending batch.
_GONE = object()


class Batch:
    """What one commit writes (encoded on the loop's thread, where the
    objects are not changing under it)."""

    __slots__ = ("decisions", "deletes", "serial", "trim", "upserts")

    def __init__(self) -> None:
        self.upserts: list[tuple[str, str, bytes]] = []
        self.deletes: list[tuple[str, str]] = []
        self.decisions: list[tuple[int, bytes]] = []
        self.trim = 0
        #: The highest decision serial in the batch (0: none).
        self.serial = 0


class BatchingStore:
    """The buffering half of a durable store: ``put``/``delete``/
    ``append_decision``/``trim_decisions`` only record; one task commits
    whatever is pending when the previous commit ends, in order."""

    backend = ""

    def __init__(self) -> None:
        self.on_durable: Callable[[int], None] | None = None
        self._epoch = ""
        self._objects: dict[tuple[str, str], object] = {}
        self._decisions: list[tuple[int, Decision]] = []
        self._trim = 0
        self._written = 0  # writes buffered so far (a generation)
        self._committed = 0  # ... of which committed
        self._flusher: asyncio.Task[None] | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._failure: BaseException | None = None
        #: Commits made (each one transaction), for the metrics and the benchmark.
        self.commits = 0

    @property
    def epoch(self) -> str:
        return self._epoch

    async def _commit_batch(self, batch: Batch) -> None:
        """Write ``batch`` in one transaction (raises: nothing of it is written)."""
        raise NotImplementedError

    # ------------------------------------------------------------ writes (buffered)

    def put(self, kind: str, key: str, value: object) -> None:
        self._objects[(kind, key)] = value
        self._wrote()

    def delete(self, kind: str, key: str) -> None:
        self._objects[(kind, key)] = _GONE
        self._wrote()

    def append_decision(self, serial: int, decision: Decision) -> None:
        self._decisions.append((serial, decision))
        self._wrote()

    def trim_decisions(self, oldest_kept: int) -> None:
        self._trim = max(self._trim, oldest_kept)
        self._wrote()

    def _wrote(self) -> None:
        self._written += 1
        if self._flusher is None:
            # Started from the loop's next turn: what this call and its
            # caller write meanwhile joins the same commit.
            with contextlib.suppress(RuntimeError):  # no loop running: the next sync() commits
                self._flusher = asyncio.get_running_loop().create_task(self._flush(), name="berth-state-commit")

    # ------------------------------------------------------------ commits

    async def sync(self) -> None:
        if self._failure is not None:
            raise self._failure
        target = self._written
        if self._committed >= target:
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((target, fut))
        if self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush(), name="berth-state-commit")
        await fut

    def _fail(self, e: BaseException) -> None:
        """No commit will succeed any more: every waiter, and every later sync, gets ``e``."""
        if self._failure is None:
            self._failure = e
        for _, fut in self._waiters:
            if not fut.done():
                fut.set_exception(self._failure)
        self._waiters.clear()

    async def _flush(self) -> None:
        try:
            while self._committed < self._written and self._failure is None:
                generation, batch = self._written, self._take()
                try:
                    await self._commit_batch(batch)
                except asyncio.CancelledError:
                    self._fail(errors.Unavailable("state: the store was closed"))
                    raise
                except Exception as e:
                    # Every sync() from now on raises it (the callers answer with it).
                    if not isinstance(e, errors.Unavailable):
                        log.error("state (%s): a commit failed; nothing more is written: %s", self.backend, e)
                    self._fail(e)
                    return
                self.commits += 1
                self._committed = generation
                if batch.serial and self.on_durable is not None:
                    self.on_durable(batch.serial)
                still = []
                for target, fut in self._waiters:
                    if target <= generation:
                        if not fut.done():
                            fut.set_result(None)
                    else:
                        still.append((target, fut))
                self._waiters = still
        finally:
            self._flusher = None

    def _take(self) -> Batch:
        b = Batch()
        objects, self._objects = self._objects, {}
        for (kind, key), value in objects.items():
            if value is _GONE:
                b.deletes.append((kind, key))
            else:
                b.upserts.append((kind, key, codec.encode(kind, value)))
        decisions, self._decisions = self._decisions, []
        b.decisions = [(s, codec.encode_decision(d)) for s, d in decisions]
        b.serial = decisions[-1][0] if decisions else 0
        b.trim, self._trim = self._trim, 0
        return b


def decoded(epoch: str, objects: Iterable[Any], decisions: Iterable[Any], *, created: bool) -> Snapshot:
    """A snapshot from a store's rows: (kind, key, value) in the order
    written, (serial, value) oldest first; values as :mod:`codec` encoded them."""
    by_kind: dict[str, dict[str, object]] = {}
    for kind, key, value in objects:
        objs = by_kind.get(kind)
        if objs is None:
            objs = by_kind[kind] = {}
        objs[key] = codec.decode(kind, key, value)
    log = [(serial, codec.decode_decision(value)) for serial, value in decisions]
    return Snapshot(epoch, by_kind, log, created=created)
