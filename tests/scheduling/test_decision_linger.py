"""DecisionLog.watch_batches with ``linger``: a batch waits that long after
its first decision, so the decisions made meanwhile go with it (one gRPC
message per few milliseconds rather than one or two per pod). Virtual time."""

from __future__ import annotations

import asyncio

import pytest

from berth.framework.decision import Decision, DecisionKind
from berth.scheduling.decisions import DecisionLog


def d(i: int) -> Decision:
    return Decision(kind=DecisionKind.QUEUED, pod=f"default/p{i}", uid=f"u{i}")


@pytest.mark.looptime
@pytest.mark.parametrize(
    ("linger", "max_batch", "want"),
    [
        # p0 at 0, p1 and p2 at 0.004, p3 at 0.02.
        (0.0, 1000, [["p0"], ["p1", "p2"], ["p3"]]),
        (0.005, 1000, [["p0", "p1", "p2"], ["p3"]]),
        (0.05, 1000, [["p0", "p1", "p2", "p3"]]),
        (0.05, 2, [["p0", "p1"], ["p2", "p3"]]),  # a full batch goes at once
    ],
    ids=["no linger", "the decisions of the window", "a longer window", "bounded by max_batch"],
)
async def test_a_lingering_batch_takes_the_decisions_made_while_it_waits(
    linger: float, max_batch: int, want: list[list[str]]
) -> None:
    log = DecisionLog()
    loop = asyncio.get_running_loop()
    stream = log.watch_batches(linger=linger, max_batch=max_batch)
    first = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)  # subscribed, waiting
    log.emit(d(0))
    loop.call_later(0.004, lambda: [log.emit(d(1)), log.emit(d(2))])
    loop.call_later(0.02, log.emit, d(3))
    got = [await first]
    while sum(map(len, got)) < 4:
        got.append(await anext(stream))
    assert [[x.pod.removeprefix("default/") for x in b] for b in got] == want
    await stream.aclose()


async def test_a_negative_linger_is_refused_and_subscribes_nothing() -> None:
    log = DecisionLog()
    stream = log.watch_batches(linger=-0.001)
    with pytest.raises(ValueError, match=r"linger: -0\.001 must not be negative"):
        await anext(stream)
    log.emit(d(0))
    assert log._watchers == []
