"""Large feed batches applied in slices, all or nothing, without holding the loop.

One ``UpsertPods`` of 20 000 pods is about 1.6 s of work (issue 28: on_pod
60 %, validation 20 %, admit_pods 16 %) and one ``DeletePods`` of 20 000
held ``/healthz`` for 19.7 s: done in one step, nothing else on Berth's one
event loop runs meanwhile. A feed is therefore written as a generator of
steps (:meth:`berth.cluster.embedded.EmbeddedCluster.upsert_pods_steps`):
first every check of the whole batch (anything it raises refuses the batch
and changes nothing), then the apply, one object per step. The
:class:`FeedGate` runs those steps in slices of :data:`SLICE_SECONDS`, with
a loop turn between slices, so ``/healthz``, the extender's Filter and
Prioritize, and other reads answer between them.

What must not see half a batch waits at the gate while one is applied:

- the scheduling loop (it pops a pod, then waits until the gate is quiet:
  no cycle judges a half-applied batch);
- every bind (the extender's ``bind`` verb and the loop's binding cycles,
  both through :meth:`berth.scheduling.client.SourceClient.bind`) and the
  other feed calls: the batch's checks (uids, node changes, int64 totals
  per node in :meth:`Core.admit_pods`) were made against the state as it
  was, and only the batch itself changes that state until it is applied.

Read-only requests (Filter, Prioritize, Why, ListPods) may see part of a
batch between slices, as kube-scheduler's extender sees its informer's
events one at a time. Once started, a batch is finished even if its caller
goes away (a cancelled call must not leave half of it applied).

The API server has no equivalent (each object is its own request); the
slice length mirrors WhatIf's (berth/scheduling/whatif.py), a few
milliseconds, well under the extender's 5 s ``httpTimeout``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator
from typing import TypeVar

__all__ = ["SLICE_SECONDS", "FeedGate"]

T = TypeVar("T")

#: Work done per slice before the loop gets a turn.
SLICE_SECONDS = 0.005


class FeedGate:
    """One sliced feed batch at a time; :meth:`quiet` waits for it to end."""

    def __init__(self, slice_seconds: float = SLICE_SECONDS, clock: Callable[[], float] = time.perf_counter) -> None:
        if slice_seconds <= 0:
            raise ValueError(f"slice_seconds: {slice_seconds} must be positive")
        self.slice_seconds = slice_seconds
        #: Read after every step (tests count slices with a clock that ticks per read).
        self.clock = clock
        self._lock: asyncio.Lock | None = None
        self._idle: asyncio.Event | None = None
        #: Loop turns given between slices, every batch together (tests, metrics).
        self.turns = 0

    def _sync(self) -> tuple[asyncio.Lock, asyncio.Event]:
        # Made on first use, on the running loop (a Core may be built before one runs).
        if self._lock is None or self._idle is None:
            self._lock, self._idle = asyncio.Lock(), asyncio.Event()
            self._idle.set()
        return self._lock, self._idle

    @property
    def busy(self) -> bool:
        """A batch is being applied (or checked) right now."""
        return self._idle is not None and not self._idle.is_set()

    async def quiet(self) -> None:
        """Return once no batch is in progress (at once when none is)."""
        _, idle = self._sync()
        while not idle.is_set():
            await idle.wait()

    async def run(self, steps: Generator[None, None, T]) -> T:
        """Run ``steps`` in slices, holding the gate; their result, or what
        they raised (before applying anything: the checks come first).
        Cancelling the caller does not stop the batch."""
        task = asyncio.ensure_future(self._run(steps))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved even if nobody waits
        return await asyncio.shield(task)

    async def pure(self, steps: Generator[None, None, T]) -> T:
        """Run ``steps`` in slices without holding the gate: work that reads
        and changes no state (decoding a large request), which the loop and
        binds need not wait for. A cancelled caller stops it."""
        return await self._sliced(steps)

    async def _run(self, steps: Generator[None, None, T]) -> T:
        lock, idle = self._sync()
        async with lock:
            idle.clear()
            try:
                return await self._sliced(steps)
            finally:
                idle.set()

    async def _sliced(self, steps: Generator[None, None, T]) -> T:
        ends = self.clock() + self.slice_seconds
        while True:
            try:
                next(steps)
            except StopIteration as stop:
                result: T = stop.value
                return result
            if self.clock() >= ends:
                self.turns += 1
                await asyncio.sleep(0)
                ends = self.clock() + self.slice_seconds
