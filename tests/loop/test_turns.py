"""The loop schedules pods back to back within one event-loop turn while each
pod's binding finishes at once (the embedded cluster's), and decides exactly
as with one turn per pod; a pod whose binding waits or fails ends the turn."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from berth import app
from berth.cluster import model
from berth.cluster.sources import BindError
from berth.framework.decision import Decision, DecisionKind
from berth.scheduling import loop as loop_module
from berth.scheduling.loop import _start_eagerly
from berth.testing import make_node, make_pod
from tests.loop.conftest import Berth, make_config, running


def berth_pod(name: str, **kw: object) -> model.Pod:
    return make_pod(name, scheduler_name="berth", **kw)  # type: ignore[arg-type]


def record(berth: Berth) -> tuple[list[tuple[str, str, str]], list[int]]:
    """The decisions emitted (kind, pod, node), and a counter of the loop's
    waiting pops (one per turn that found the queue empty or began a turn)."""
    decisions: list[tuple[str, str, str]] = []
    pops = [0]
    log = berth.core.decisions
    emit = log.emit

    def recording(d: Decision) -> None:
        decisions.append((d.kind.name, d.pod, d.node))
        emit(d)

    queue = berth.scheduler.queue
    pop = queue.pop

    async def counting() -> Any:
        pops[0] += 1
        return await pop()

    log.emit = recording  # type: ignore[method-assign]
    queue.pop = counting  # type: ignore[method-assign]
    return decisions, pops


def workload(berth: Berth) -> None:
    berth.nodes(*(make_node(f"n{i}", cpu="4", memory="8Gi", pods=110) for i in range(3)))
    berth.pods(
        *(berth_pod(f"p{i}", requests={"cpu": "500m" if i % 2 else "1"}) for i in range(8)),
        berth_pod("huge", requests={"cpu": "8"}),  # fits nowhere: a failure mid-way
        *(berth_pod(f"q{i}", requests={"cpu": "250m"}) for i in range(4)),
    )


async def test_pods_placed_in_one_turn_get_the_decisions_of_one_turn_per_pod(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = []
    for turn in (0.0, 3600.0):
        monkeypatch.setattr(loop_module, "TURN_SECONDS", turn)
        # Ties between nodes are broken at random: the same draws in both runs.
        async with app.running(make_config(), clock=asyncio.get_running_loop().time, rng=random.Random(3)) as b:
            berth = Berth(b)
            decisions, pops = record(berth)
            workload(berth)
            await berth.settle()
            runs.append((decisions, list(berth.cluster.bindings), berth.bound(), pops[0]))
    (one_by_one, bindings_1, bound_1, pops_1), (batched, bindings_n, bound_n, pops_n) = runs
    assert batched == one_by_one
    assert bindings_n == bindings_1
    assert bound_n == bound_1 and len(bound_n) == 12  # every pod but "huge"
    assert pops_1 >= 13  # a turn per pod
    assert pops_n < pops_1  # several pods per turn


async def test_a_bind_failing_within_a_turn_forgets_and_requeues_that_pod_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(loop_module, "TURN_SECONDS", 3600.0)
    async with running() as berth:
        decisions, _ = record(berth)
        berth.nodes(make_node("n0", cpu="4", pods=110))
        real_bind = berth.cluster.bind
        calls: dict[str, int] = {}

        async def flaky(pod: model.Pod, node: str) -> None:
            calls[pod.key] = calls.get(pod.key, 0) + 1
            if pod.key == "default/p1" and calls[pod.key] == 1:
                raise BindError("apiserver hiccup")
            await real_bind(pod, node)

        berth.cluster.bind = flaky  # type: ignore[method-assign]
        berth.pods(*(berth_pod(f"p{i}", requests={"cpu": "1"}) for i in range(3)))
        await berth.settle()
        assert berth.bound() == {"default/p0": "n0", "default/p1": "n0", "default/p2": "n0"}
        assert calls == {"default/p0": 1, "default/p1": 2, "default/p2": 1}
        assert berth.core.cache.assumed_count == 0
        assert berth.core.cache.pod_count == 3  # counted once each: the failed assume was forgotten
        failed = [(kind, pod) for kind, pod, _ in decisions if kind == DecisionKind.BIND_FAILED.name]
        assert failed == [("BIND_FAILED", "default/p1")]
        p1 = [kind for kind, pod, _ in decisions if pod == "default/p1"]
        assert p1 == ["QUEUED", "ASSUMED", "BIND_FAILED", "UNSCHEDULABLE", "ASSUMED", "BOUND"]


# ------------------------------------------------------------ _start_eagerly


async def _await(fut: asyncio.Future[int], out: list[object]) -> None:
    try:
        out.append(await fut)
    except BaseException as e:
        out.append(type(e).__name__)
        raise


def _result(fut: asyncio.Future[int], task: asyncio.Task[None]) -> None:
    fut.set_result(7)


def _exception(fut: asyncio.Future[int], task: asyncio.Task[None]) -> None:
    fut.set_exception(ValueError("no"))


def _cancel_task(fut: asyncio.Future[int], task: asyncio.Task[None]) -> None:
    task.cancel()


def _cancel_after_result(fut: asyncio.Future[int], task: asyncio.Task[None]) -> None:
    fut.set_result(7)
    task.cancel()


@pytest.mark.parametrize(
    ("then", "seen", "ends", "future_cancelled"),
    [
        (_result, [7], "done", False),
        (_exception, ["ValueError"], "ValueError", False),
        (_cancel_task, ["CancelledError"], "cancelled", True),
        (_cancel_after_result, ["CancelledError"], "cancelled", False),
    ],
    ids=["result", "exception", "task cancelled while waiting", "task cancelled once the future is done"],
)
async def test_an_eager_start_that_waits_carries_on_as_a_task_would(
    then: Callable[[asyncio.Future[int], asyncio.Task[None]], None],
    seen: list[object],
    ends: str,
    future_cancelled: bool,
) -> None:
    fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    out: list[object] = []
    task = _start_eagerly(_await(fut, out), "waits")
    assert task is not None and out == []  # ran up to the await, no further
    await asyncio.sleep(0)
    then(fut, task)
    await asyncio.gather(task, return_exceptions=True)
    assert out == seen
    outcome = "cancelled" if task.cancelled() else type(task.exception()).__name__ if task.exception() else "done"
    assert outcome == ends
    assert fut.cancelled() == future_cancelled


async def test_an_eager_start_that_does_not_wait_finishes_at_once_without_a_task() -> None:
    out: list[object] = []

    async def quick() -> None:
        out.append("ran")

    assert _start_eagerly(quick(), "quick") is None
    assert out == ["ran"]


async def test_an_eager_start_that_raises_at_once_logs_it_and_leaves_no_task(caplog: pytest.LogCaptureFixture) -> None:
    async def broken() -> None:
        raise RuntimeError("bug")

    coro: Coroutine[Any, Any, None] = broken()
    assert _start_eagerly(coro, "broken") is None
    assert "broken failed" in caplog.text and "RuntimeError: bug" in caplog.text


async def test_an_eager_start_that_yields_bare_carries_on_next_turn() -> None:
    out: list[object] = []

    async def yields() -> None:
        await asyncio.sleep(0)
        out.append("after")

    task = _start_eagerly(yields(), "yields")
    assert task is not None and out == []
    await task
    assert out == ["after"]
