"""Fairness between callers, modelled on API Priority and Fairness.

One caller flooding Why or UpsertPods must not delay everyone else's reads
and feeds, and nothing of that kind may delay kube-scheduler's extender
calls or the scheduling loop. kube-apiserver does this with API Priority and
Fairness (``k8s.io/apiserver/pkg/util/flowcontrol``, v0.37.2): requests are
classified into priority levels, each with its own concurrency
(``nominalConcurrencyShares``), and within a level into flows (by user),
each with its own queue of at most ``queueLengthLimit`` requests (default
50); a free seat goes to the queues in turn (fair queuing,
``fairqueuing/queueset``), and a request past its queue's limit is
rejected with 429.

What Berth mirrors, per :class:`PriorityLevel`:

- a level's ``concurrency`` (requests executing at once, all callers);
- a flow per caller identity (its authenticated user, else its address)
  with at most ``perCaller`` executing, and a queue of at most
  ``queueLength`` waiting: one more is refused with ResourceExhausted
  (RESOURCE_EXHAUSTED / 429) naming the limit;
- a freed seat goes to the waiting caller that may take it and got a seat
  least recently (round robin), so a caller with a hundred waiting
  requests gets one seat in turn with a caller that has one. APF's virtual-time fair queuing
  weighs requests by their measured duration and deals each flow a hand
  of queues by shuffle sharding; with one queue per flow and requests of
  like cost round robin gives the same order, so neither is ported.

Levels: ``reads`` (ListPods, Why, Explain, WhatIf, the other visibility
reads) and ``feeds`` (the Cluster feed, Submit, Cancel). The extender's
verbs (HTTP and gRPC Filter, Prioritize, Preempt, Bind) and the scheduling
loop belong to no level — APF's ``exempt`` — so no queue is ever in their
way (they keep the loop-turn bound of :mod:`berth.scheduling.turnstile`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict, deque
from collections.abc import AsyncIterator

from berth.errors import ResourceExhausted

__all__ = ["Fairness", "PriorityLevel"]


class PriorityLevel:
    """One level's seats, flows and queues; see the module docstring."""

    def __init__(self, name: str, *, concurrency: int, per_caller: int, queue_length: int) -> None:
        for key, value in (("concurrency", concurrency), ("perCaller", per_caller), ("queueLength", queue_length)):
            if value < 1:
                raise ValueError(f"fairness.{name}.{key}: {value} must be at least 1")
        self.name = name
        self.concurrency = concurrency
        self.per_caller = per_caller
        self.queue_length = queue_length
        #: Requests executing, per caller.
        self.executing: dict[str, int] = {}
        #: Callers with requests waiting, in the order they came.
        self._queues: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()
        #: When each caller last got a seat (a count of seats given).
        self._served: dict[str, int] = {}
        self._given = 0

    @property
    def seats_taken(self) -> int:
        return sum(self.executing.values())

    def waiting(self, caller: str) -> int:
        return len(self._queues.get(caller, ()))

    @contextlib.asynccontextmanager
    async def seat(self, caller: str) -> AsyncIterator[None]:
        """Hold one of this level's seats for ``caller`` while the block runs,
        waiting in its queue (in turn with other callers) when none is free."""
        if caller not in self._queues and self._may_start(caller):
            self._take(caller)
        else:
            await self._wait(caller)
        try:
            yield
        finally:
            self._give_back(caller)

    def _may_start(self, caller: str) -> bool:
        return self.seats_taken < self.concurrency and self.executing.get(caller, 0) < self.per_caller

    def _take(self, caller: str) -> None:
        self.executing[caller] = self.executing.get(caller, 0) + 1
        self._given += 1
        self._served[caller] = self._given

    async def _wait(self, caller: str) -> None:
        queue = self._queues.get(caller)
        if queue is not None and len(queue) >= self.queue_length:
            raise ResourceExhausted(
                f"too many {self.name} requests: {caller} has {len(queue)} waiting "
                f"(fairness.{self.name}.queueLength: {self.queue_length}; at most "
                f"{self.per_caller} of a caller's run at once, {self.concurrency} in all); retry later"
            )
        if queue is None:
            queue = self._queues[caller] = deque()
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.append(turn)
        self._dispatch()
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._give_back(caller)  # granted as it was cancelled: the seat goes on
            else:
                self._forget(caller, turn)
            raise

    def _forget(self, caller: str, turn: asyncio.Future[None]) -> None:
        queue = self._queues.get(caller)
        if queue is not None:
            with contextlib.suppress(ValueError):
                queue.remove(turn)
            if not queue:
                del self._queues[caller]

    def _give_back(self, caller: str) -> None:
        left = self.executing[caller] - 1
        if left:
            self.executing[caller] = left
        else:
            del self.executing[caller]
            if caller not in self._queues:
                self._served.pop(caller, None)  # gone: nothing to remember
        self._dispatch()

    def _dispatch(self) -> None:
        """Free seats to waiting callers: each to the one that may take it
        and got a seat least recently (round robin over who is waiting)."""
        while self._queues and self.seats_taken < self.concurrency:
            eligible = [c for c in self._queues if self.executing.get(c, 0) < self.per_caller]
            if not eligible:
                return
            caller = min(eligible, key=lambda c: self._served.get(c, 0))  # ties: who came first
            queue = self._queues[caller]
            turn = queue.popleft()
            if not queue:
                del self._queues[caller]
            if turn.done():
                continue  # its waiter was cancelled and has not yet left the queue
            self._take(caller)
            turn.set_result(None)


class Fairness:
    """The levels of one server (both doors share them)."""

    def __init__(self, levels: dict[str, PriorityLevel]) -> None:
        self.levels = levels

    def seat(self, level: str, caller: str) -> contextlib.AbstractAsyncContextManager[None]:
        return self.levels[level].seat(caller)
