"""How Berth waits between attempts to reach the API server.

client-go's reflector backs off with
``wait.NewExponentialBackoffManager(800*time.Millisecond, 30*time.Second,
2*time.Minute, 2.0, 1.0, clock)`` (``k8s.io/client-go/tools/cache/reflector.go``,
``NewReflectorWithOptions``): 0.8 s doubling to a 30 s cap, each wait
stretched by up to +100 % jitter (so it settles in [30, 60) s, "0.22 QPS"),
and back to 0.8 s once no backoff was asked for in 2 minutes
(``k8s.io/apimachinery/pkg/util/wait/backoff.go``,
``exponentialBackoffManagerImpl.getNextBackoff`` and ``Backoff.Step``).
:class:`Backoff` is that manager; :func:`retrying` runs one start-up call
through it, logging one line per backoff step.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["Backoff", "describe", "retrying"]

T = TypeVar("T")


class Backoff:
    """``wait.ExponentialBackoffManager``: the delay before the next attempt."""

    def __init__(
        self,
        *,
        initial: float = 0.8,
        cap: float = 30.0,
        reset_after: float = 120.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        clock: Callable[[], float],
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.initial = initial
        self.cap = cap
        self.reset_after = reset_after
        self.factor = factor
        self.jitter = jitter
        self._clock = clock
        self._rng = rng
        self._duration = initial
        self._last = clock()

    def next(self) -> float:
        """The next wait in seconds (``getNextBackoff``): the current step,
        jittered, after which the step grows by ``factor`` up to ``cap``."""
        now = self._clock()
        if now - self._last > self.reset_after:
            self._duration = self.initial
        self._last = now
        duration = self._duration
        self._duration = min(self._duration * self.factor, self.cap)
        # wait.Jitter(d, j) = d + rand*j*d
        return duration + self._rng() * self.jitter * duration

    async def sleep(self) -> float:
        """Wait the next step; returns how long."""
        delay = self.next()
        await asyncio.sleep(delay)
        return delay


async def retrying(
    what: str,
    call: Callable[[], Awaitable[T]],
    *,
    backoff: Backoff,
    log: logging.Logger,
    retry_on: tuple[type[BaseException], ...] = (Exception,),
) -> T:
    """``call()`` until it returns, backing off between failures.

    One warning per backoff step names ``what`` failed, why, and when the
    next attempt is; the first success after failures is logged once too.
    """
    failures = 0
    while True:
        try:
            result = await call()
        except retry_on as e:
            failures += 1
            delay = backoff.next()
            log.warning("%s failed (%s); attempt %d, retrying in %.1fs", what, describe(e), failures, delay)
            await asyncio.sleep(delay)
            continue
        if failures:
            log.info("%s succeeded after %d failed attempt(s)", what, failures)
        return result


def describe(e: BaseException) -> str:
    """One line for an API error: the HTTP status and reason, or the
    transport's message ("Cannot connect to host ...")."""
    status = getattr(e, "status", None)
    if isinstance(status, int) and status:
        reason = str(getattr(e, "reason", "") or "").splitlines()[0] if getattr(e, "reason", None) else ""
        return f"HTTP {status} {reason}".rstrip()
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
