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
"""

from __future__ import annotations

import asyncio
from types import TracebackType

__all__ = ["EXTENDER_WIDTH", "GRPC_WIDTH", "Turnstile"]

#: Extender requests (filter, prioritize, preempt, bind) started per loop turn.
EXTENDER_WIDTH = 4
#: gRPC reads that evaluate pods (Explain, Why, WhatIf, Filter, Prioritize, Preempt) started per loop turn.
GRPC_WIDTH = 2


class Turnstile:
    """``async with turnstile:`` around a request's work: at most ``width``
    enter per turn of the event loop, the rest wait in order. A slot is
    given back on the loop's next turn, not at once, so a door's queue
    drains ``width`` requests per turn."""

    def __init__(self, width: int) -> None:
        if width < 1:
            raise ValueError(f"width: {width} must be at least 1")
        self.width = width
        self._slots = asyncio.Semaphore(width)

    @property
    def free(self) -> int:
        """Slots free right now (for tests and metrics)."""
        return self._slots._value

    async def __aenter__(self) -> None:
        await self._slots.acquire()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        asyncio.get_running_loop().call_soon(self._slots.release)
