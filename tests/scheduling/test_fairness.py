"""Fairness between callers (berth/scheduling/fairness.py): one caller's
flood waits in its own queue, another caller's request is served in turn,
and past a caller's queue the request is refused naming the limit."""

from __future__ import annotations

import asyncio

import pytest

from berth import errors
from berth.scheduling.fairness import PriorityLevel


async def _request(level: PriorityLevel, caller: str, log: list[str], turns: int = 1) -> None:
    async with level.seat(caller):
        log.append(caller)
        for _ in range(turns):  # its work: a few loop turns
            await asyncio.sleep(0)


@pytest.mark.parametrize(
    ("concurrency", "per_caller", "flood", "served_within"),
    [
        (1, 1, 20, 2),  # one seat: b's one request goes right after a's first
        (2, 1, 20, 2),  # a may hold only one of two seats: b starts at once
        (4, 2, 30, 3),  # a holds two seats, b takes the third
        (3, 3, 30, 4),  # a holds every seat: b is next when one frees
    ],
)
async def test_a_flooding_caller_does_not_delay_another_beyond_its_turn(
    concurrency: int, per_caller: int, flood: int, served_within: int
) -> None:
    level = PriorityLevel("reads", concurrency=concurrency, per_caller=per_caller, queue_length=50)
    log: list[str] = []
    flooding = [asyncio.ensure_future(_request(level, "a", log, turns=3)) for _ in range(flood)]
    await asyncio.sleep(0)  # a's requests are all in (running or queued)
    assert level.waiting("a") == flood - min(per_caller, concurrency)
    await _request(level, "b", log)
    await asyncio.gather(*flooding)
    assert log.index("b") < served_within
    assert len(log) == flood + 1
    assert level.executing == {} and level.waiting("a") == 0


async def test_seats_alternate_between_waiting_callers() -> None:
    level = PriorityLevel("feeds", concurrency=1, per_caller=1, queue_length=50)
    log: list[str] = []
    tasks = [asyncio.ensure_future(_request(level, c, log)) for c in ["a"] * 4 + ["b"] * 4 + ["c"] * 2]
    await asyncio.gather(*tasks)
    assert log == ["a", "b", "c", "a", "b", "c", "a", "b", "a", "b"]


async def test_past_a_callers_queue_the_request_is_refused_naming_the_limit() -> None:
    level = PriorityLevel("reads", concurrency=1, per_caller=1, queue_length=2)
    gate = asyncio.Event()

    async def held(caller: str) -> None:
        async with level.seat(caller):
            await gate.wait()

    running = [asyncio.ensure_future(held("a")) for _ in range(3)]  # one running, two waiting
    await asyncio.sleep(0)
    with pytest.raises(errors.ResourceExhausted) as err:
        async with level.seat("a"):
            pass
    assert str(err.value) == (
        "too many reads requests: a has 2 waiting (fairness.reads.queueLength: 2; "
        "at most 1 of a caller's run at once, 1 in all); retry later"
    )
    other = asyncio.ensure_future(held("b"))  # another caller still queues
    await asyncio.sleep(0)
    assert level.waiting("b") == 1
    gate.set()
    await asyncio.gather(*running, other)
    assert level.executing == {}


async def test_a_cancelled_waiter_leaves_its_queue_and_a_granted_one_passes_its_seat_on() -> None:
    level = PriorityLevel("reads", concurrency=1, per_caller=1, queue_length=5)
    gate = asyncio.Event()
    log: list[str] = []
    granted: asyncio.Future[None] | None = None

    async def held_then_cancel() -> None:
        async with level.seat("a"):
            await gate.wait()
        # The seat went to c as it was given back; c is cancelled before it runs.
        assert granted is not None
        granted.cancel()

    first = asyncio.ensure_future(held_then_cancel())
    await asyncio.sleep(0)
    gone = asyncio.ensure_future(_request(level, "b", log))
    await asyncio.sleep(0)
    gone.cancel()  # cancelled while waiting
    await asyncio.gather(gone, return_exceptions=True)
    assert level.waiting("b") == 0
    granted = asyncio.ensure_future(_request(level, "c", log))
    after = asyncio.ensure_future(_request(level, "d", log))
    await asyncio.sleep(0)
    gate.set()
    await first
    await asyncio.gather(granted, after, return_exceptions=True)
    assert granted.cancelled()
    assert log == ["d"]
    assert level.executing == {}


@pytest.mark.parametrize("key", ["concurrency", "per_caller", "queue_length"])
async def test_a_level_needs_at_least_one_of_each(key: str) -> None:
    sizes = {"concurrency": 1, "per_caller": 1, "queue_length": 1, key: 0}
    with pytest.raises(ValueError, match="must be at least 1"):
        PriorityLevel("reads", **sizes)
