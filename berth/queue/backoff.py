"""backoffQ (kube-scheduler v1.34's ``backend/queue/backoff_queue.go``).

Two heaps seen as one queue::

    podBackoffQ       pods some plugin rejected; with SchedulerPopFromBackoffQ
                      ordered by (backoff expiry window, then activeQ's
                      QueueSort), and its head may be popped early when
                      activeQ is empty (``popBackoff``)
    podErrorBackoffQ  pods whose attempt failed with an error (no rejecting
                      plugin); ordered by expiry only, never popped early

With the gate on, a backoff expiry is truncated to a 1 s ordering window
(``alignToWindow``), and a pod is still backing off while its expiry is in
the current window or later (``isPodBackingoff``): it completes at the start
of the window after the one its expiry falls in. Flushing on window
boundaries (``waitUntilAlignedWithOrderingWindow``) then moves whole windows,
so the priority order inside a window holds. Gate off: the raw expiry, FIFO.

Pods leave a heap lazily: each ``add`` gets a token and an entry whose token
is no longer the pod's current one is stale and skipped, so ``delete`` and a
re-``add`` (upstream's ``AddOrUpdate``) are O(1) and O(log n).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from typing import Any

from berth.framework import interface as fw

__all__ = ["BACKOFF_ORDERING_WINDOW", "BackoffQueue"]

#: backoffQOrderingWindowDuration: one window per whole second (KEP-5142).
BACKOFF_ORDERING_WINDOW = 1.0

#: getBackoffTime's zero time: a pod that never backs off.
NO_BACKOFF = -math.inf


class BackoffQueue:
    """See the module docstring. ``sort_key`` is activeQ's QueueSort key
    (``activeQLessFn``), used only with ``pop_from_backoff``."""

    def __init__(
        self,
        *,
        initial: float,
        maximum: float,
        sort_key: Callable[[fw.QueuedPodInfo], Any],
        pop_from_backoff: bool = True,
    ) -> None:
        if initial < 0 or maximum < 0:
            raise ValueError(f"backoff durations must not be negative (initial {initial}, max {maximum})")
        self.initial = initial
        self.maximum = maximum
        self.pop_from_backoff = pop_from_backoff
        self._sort_key = sort_key
        self._tokens = itertools.count()
        # uid -> (token, qpi, expiry, error): the live pods.
        self._live: dict[str, tuple[int, fw.QueuedPodInfo, float, bool]] = {}
        self._n_backoff = 0  # live pods in podBackoffQ (lenBackoff)
        # podBackoffQ: (expiry, [sort key,] token, uid); podErrorBackoffQ: (expiry, token, uid).
        self._heap: list[tuple[Any, ...]] = []
        self._error_heap: list[tuple[float, int, str]] = []

    # ------------------------------------------------------------ time

    def align(self, t: float) -> float:
        """alignToWindow: the start of ``t``'s ordering window (gate on)."""
        if not self.pop_from_backoff:
            return t
        return math.floor(t / BACKOFF_ORDERING_WINDOW) * BACKOFF_ORDERING_WINDOW

    def duration(self, count: int) -> float:
        """calculateBackoffDuration: ``initial * 2^(count-1)``, capped at the maximum."""
        if count <= 0:
            return 0.0
        shift = count - 1
        # As upstream compares initial with max >> shift, so no overflow:
        # 2.0**1024 is past a float's range.
        if shift >= 1024 or self.initial > self.maximum / 2.0**shift:
            return float(self.maximum)
        return float(self.initial * 2.0**shift)

    def expiry(self, timestamp: float, count: int) -> float:
        """getBackoffTime: when a pod that came back at ``timestamp`` after
        ``count`` failures completes its backoff, aligned to its window;
        :data:`NO_BACKOFF` when it has none (a zero maximum disables backoff)."""
        if self.maximum == 0 or count <= 0:
            return NO_BACKOFF
        return self.align(timestamp + self.duration(count))

    def backing_off(self, expiry: float, now: float) -> bool:
        """isPodBackingoff: still waiting while the expiry is in the current
        window or later (not Before, so an expiry equal to it still waits)."""
        return expiry >= self.align(now)

    def completes_at(self, expiry: float) -> float:
        """The earliest clock reading at which ``backing_off`` turns false:
        the next window's start (gate on); the expiry itself (gate off,
        where the pod is done just after it)."""
        if expiry == NO_BACKOFF:
            return expiry
        return expiry + BACKOFF_ORDERING_WINDOW if self.pop_from_backoff else expiry

    # ------------------------------------------------------------ contents

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, uid: str) -> bool:
        return uid in self._live

    def len_backoff(self) -> int:
        """lenBackoff: the pods in podBackoffQ (the ones ``pop_backoff`` may return)."""
        return self._n_backoff

    def add(self, qpi: fw.QueuedPodInfo, expiry: float, *, error: bool) -> None:
        """add (AddOrUpdate): into podErrorBackoffQ after an error, else
        podBackoffQ; a pod already here moves (it is never in both)."""
        uid = qpi.info.uid
        self.delete(uid)
        token = next(self._tokens)
        self._live[uid] = (token, qpi, expiry, error)
        if error:
            heapq.heappush(self._error_heap, (expiry, token, uid))
            return
        self._n_backoff += 1
        if self.pop_from_backoff:
            # lessBackoffCompletedWithPriority: expiry window, then activeQ's order.
            heapq.heappush(self._heap, (expiry, self._sort_key(qpi), token, uid))
        else:
            heapq.heappush(self._heap, (expiry, token, uid))  # lessBackoffCompleted

    def update(self, qpi: fw.QueuedPodInfo) -> bool:
        """update: a newer version of a pod held here re-sorts in its heap
        (its priority may have changed); False if it is not here."""
        live = self._live.get(qpi.info.uid)
        if live is None:
            return False
        self.add(qpi, live[2], error=live[3])
        return True

    def delete(self, uid: str) -> bool:
        live = self._live.pop(uid, None)
        if live is None:
            return False
        if not live[3]:
            self._n_backoff -= 1
        return True

    def _is_live(self, token: int, uid: str) -> bool:
        live = self._live.get(uid)
        return live is not None and live[0] == token

    # ------------------------------------------------------------ pops

    def _pop_completed(self, heap: list[Any], now: float, out: list[fw.QueuedPodInfo]) -> None:
        """popAllBackoffCompletedWithQueue: pop heads until one still backs off."""
        while heap:
            head = heap[0]
            token, uid = head[-2], head[-1]
            if not self._is_live(token, uid):
                heapq.heappop(heap)
                continue
            if self.backing_off(head[0], now):
                return
            heapq.heappop(heap)
            out.append(self._live[uid][1])
            self.delete(uid)

    def pop_all_completed(self, now: float) -> list[fw.QueuedPodInfo]:
        """popAllBackoffCompleted: podBackoffQ's completed pods in its order, then podErrorBackoffQ's."""
        out: list[fw.QueuedPodInfo] = []
        self._pop_completed(self._heap, now, out)
        self._pop_completed(self._error_heap, now, out)
        return out

    def pop_backoff(self) -> fw.QueuedPodInfo | None:
        """popBackoff: podBackoffQ's head whether or not its backoff is over
        (never podErrorBackoffQ's); None when it is empty."""
        while self._heap:
            head = heapq.heappop(self._heap)
            token, uid = head[-2], head[-1]
            if self._is_live(token, uid):
                qpi = self._live[uid][1]
                self.delete(uid)
                return qpi
        return None

    def next_completion(self) -> float | None:
        """When the earliest live pod completes its backoff (``completes_at``)."""
        best: float | None = None
        for heap in (self._heap, self._error_heap):
            while heap and not self._is_live(heap[0][-2], heap[0][-1]):
                heapq.heappop(heap)  # drop stale heads so the deadline is a live pod's
            if heap:
                at = self.completes_at(heap[0][0])
                best = at if best is None else min(best, at)
        return best
