"""The wait between attempts to reach the API server is client-go's
reflector backoff: ``wait.NewExponentialBackoffManager(800ms, 30s, 2m, 2.0,
1.0)`` (``k8s.io/client-go/tools/cache/reflector.go``), and a start-up call
retried through it logs one line per step."""

from __future__ import annotations

import asyncio
import logging

import pytest

from berth.adapters.kubernetes.backoff import Backoff, retrying
from tests.support import ManualClock


@pytest.mark.parametrize(
    ("case", "rng", "waits"),
    [
        # Backoff.Step: the current step, then double it up to the 30 s cap.
        ("no jitter", 0.0, [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0]),
        # wait.Jitter(d, 1.0) = d + rand*d: at most twice the step, so [30, 60) at the cap.
        ("full jitter", 0.999, [1.5992, 3.1984, 6.3968, 12.7936, 25.5872, 51.1744, 59.97, 59.97]),
    ],
)
def test_steps_double_from_800ms_to_a_30s_cap_with_up_to_100_percent_jitter(
    case: str, rng: float, waits: list[float]
) -> None:
    clock = ManualClock(1000.0)
    backoff = Backoff(clock=clock, rng=lambda: rng)
    got = []
    for _ in waits:
        got.append(round(backoff.next(), 4))
        clock.now += 1  # steps asked for within the reset window
    assert got == waits


@pytest.mark.parametrize(
    ("case", "idle", "next_wait"),
    [
        ("asked again within 2 minutes: keep growing", 120.0, 6.4),
        ("nothing asked for over 2 minutes: start over", 120.5, 0.8),
    ],
)
def test_the_backoff_starts_over_after_two_quiet_minutes(case: str, idle: float, next_wait: float) -> None:
    clock = ManualClock(1000.0)
    backoff = Backoff(clock=clock, rng=lambda: 0.0)
    assert [backoff.next(), backoff.next(), backoff.next()] == [0.8, 1.6, 3.2]
    clock.now += idle
    assert backoff.next() == pytest.approx(next_wait)


@pytest.mark.looptime
async def test_a_start_up_call_is_retried_with_one_warning_per_backoff_step(caplog: pytest.LogCaptureFixture) -> None:
    loop = asyncio.get_running_loop()
    failures = 5
    attempts: list[float] = []

    async def call() -> str:
        attempts.append(loop.time())
        if len(attempts) <= failures:
            raise ConnectionRefusedError(111, "Connection refused")
        return "served"

    log = logging.getLogger("test.backoff")
    start = loop.time()
    with caplog.at_level(logging.INFO, logger="test.backoff"):
        result = await retrying(
            "discovering PodGroups", call, backoff=Backoff(clock=loop.time, rng=lambda: 0.0), log=log
        )
    assert result == "served"
    # 0.8 + 1.6 + 3.2 + 6.4 + 12.8 seconds of (virtual) waiting between the six attempts.
    assert [round(t - start, 1) for t in attempts] == [0.0, 0.8, 2.4, 5.6, 12.0, 24.8]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == failures
    assert warnings[0] == (
        "discovering PodGroups failed (ConnectionRefusedError: [Errno 111] Connection refused); "
        "attempt 1, retrying in 0.8s"
    )
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.INFO] == [
        "discovering PodGroups succeeded after 5 failed attempt(s)"
    ]
