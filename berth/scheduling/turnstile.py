"""Fairness between the front doors (the HTTP extender port and the gRPC
port) on Berth's one event loop.

A request's work on the core is one synchronous step (an evaluation never
awaits, so it sees one consistent snapshot: :mod:`berth.scheduling.core`).
Without a bound, a turn of the event loop runs the step of every request
that arrived meanwhile: under 32 busy extender connections one turn holds
32 filters, and a gRPC call, which needs several turns (metadata, message,
handler, answer), waits that long for each of them — Explain's p50 went
from 385 to 924 ms in issue 16's soak. A :class:`Turnstile` lets at most
``width`` requests of one door start per turn; the others queue in arrival
order (the queue is bounded by the door's open connections and streams:
each holds at most one request in it), and whatever else is ready, the
other door's calls and the scheduling loop, runs between them.

Requests queue rather than being refused: kube-scheduler's extender client
(``pkg/scheduler/extender.go``, ``HTTPExtender.send``) fails the pod's
scheduling cycle on any non-200 answer unless the extender is ``ignorable``,
and a gRPC client would have to retry RESOURCE_EXHAUSTED itself.

Why not run Explain in a worker thread: its plugins read the live cache,
pod index and nominator, which the loop changes (they are not
thread-safe), and under the GIL a thread gives no second core anyway. Nor
in chunks that yield: the loop could then change the cache between two
plugins, and the answer would mix two states.

A door whose requests are short may let more in per turn
(:class:`Turnstile` with a ``budget``): as many as its measured cost per
request fits in the budget, so that per turn each door gets about the same
*time* rather than the same *count*. The extender's filters cost about a
millisecond on small clusters while a WhatIf slice takes 10 ms and a Why
over thousands of pending pods more: with 4 extender requests a turn beside
them, the extender's share of the loop fell to 7 % and its p99 rose from
0.12 to 0.8 s (``tests/soak/test_expensive_reads.py``, every read at once).
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType

__all__ = ["EXTENDER_BUDGET_SECONDS", "EXTENDER_MOST", "EXTENDER_WIDTH", "GRPC_WIDTH", "Turnstile"]

#: Extender requests (filter, prioritize, preempt, bind) started per loop turn, at least.
EXTENDER_WIDTH = 4
#: ... and as many more as their measured cost fits in this much of a turn
#: (the length of a WhatIf slice, ``whatif.SLICE_SECONDS``), up to :data:`EXTENDER_MOST`.
EXTENDER_BUDGET_SECONDS = 0.010
EXTENDER_MOST = 32
#: gRPC reads that evaluate pods (Explain, Why, WhatIf, Filter, Prioritize, Preempt) started per loop turn.
GRPC_WIDTH = 2
#: How much each request's cost moves the running estimate (an exponential average).
_WEIGHT = 0.2


class Turnstile:
    """``async with turnstile:`` around a request's work: at most ``width``
    enter per turn of the event loop, the rest wait in order. A slot is
    given back on the loop's next turn, not at once, so a door's queue
    drains ``width`` requests per turn.

    With a ``budget`` (seconds) the width follows the requests' cost: an
    exponential average of the time from entering to leaving, and
    ``budget / cost`` requests a turn, between ``width`` and ``most``. A
    request that awaits inside (a bind waiting on the API server) counts its
    wait as cost, which only ever narrows the door back toward ``width``."""

    def __init__(self, width: int, *, budget: float = 0.0, most: int | None = None) -> None:
        if width < 1:
            raise ValueError(f"width: {width} must be at least 1")
        self.width = width
        self.budget = budget
        self.most = max(width, most if most is not None else width)
        self._slots = asyncio.Semaphore(width)
        self._capacity = width  # slots in circulation: free, held, or being given back
        self._cost: float | None = None  # seconds a request, once one was measured
        self._entered: dict[asyncio.Task[object] | None, float] = {}

    @property
    def free(self) -> int:
        """Slots free right now (for tests and metrics)."""
        return self._slots._value

    @property
    def capacity(self) -> int:
        """Requests let in per turn now (``width`` without a budget)."""
        return self._capacity

    async def __aenter__(self) -> None:
        await self._slots.acquire()
        if self.budget:
            self._entered[asyncio.current_task()] = time.perf_counter()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        loop = asyncio.get_running_loop()
        if not self.budget:
            loop.call_soon(self._slots.release)
            return
        entered = self._entered.pop(asyncio.current_task(), None)
        if entered is not None:
            cost = time.perf_counter() - entered
            self._cost = cost if self._cost is None else self._cost + _WEIGHT * (cost - self._cost)
        target = self.width
        if self._cost is not None:
            fits = self.budget / self._cost + 1e-9 if self._cost > 0 else float(self.most)
            target = max(self.width, min(self.most, int(fits)))
        if self._capacity > target:
            self._capacity -= 1  # this slot leaves circulation
            return
        loop.call_soon(self._slots.release)
        while self._capacity < target:
            self._capacity += 1
            loop.call_soon(self._slots.release)
