"""Every HTTP request but a stream is bounded by its port's request timeout
(``http.requestTimeoutSeconds``, ``ui.requestTimeoutSeconds``: kube-apiserver's
``--request-timeout``) and stopped when its caller goes away; a ``bind`` is
finished all the same. Real servers, real time, sub-second bounds."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from berth import app
from berth.adapters.http import server, ui
from berth.scheduling.verbs import Extender
from tests.http.payloads import dumps
from tests.http.test_extender_wire import make_berth

BUDGET = 0.2
SLOW = 5.0


class Slow:
    """An awaitable piece of work that takes :data:`SLOW` seconds and says
    whether it ended, was cancelled, or is still running."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.outcome = ""

    async def run(self, seconds: float = SLOW) -> None:
        self.started.set()
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            self.outcome = "cancelled"
            raise
        self.outcome = "done"


def _berth(budget: float) -> app.Berth:
    return make_berth(
        {
            "http": {"host": "127.0.0.1", "port": 0, "requestTimeoutSeconds": budget},
            "ui": {"host": "127.0.0.1", "port": 0, "requestTimeoutSeconds": budget},
        }
    )


@pytest.fixture
def budget() -> float:
    """The ports' request timeout: BUDGET unless a test sets a long one (to
    show that a caller going away, not the timeout, stopped the work)."""
    return BUDGET


@pytest.fixture
async def dashboard(
    monkeypatch: pytest.MonkeyPatch, budget: float
) -> AsyncIterator[tuple[str, Slow]]:
    """The dashboard's port, its pod listing made slow."""
    slow = Slow()

    async def pods_page(*args: Any, **kw: Any) -> dict[str, Any]:
        await slow.run()
        return {}

    monkeypatch.setattr(ui, "pods_page", pods_page)
    berth = _berth(budget)
    runner, port = await server.start_dashboard(berth.core, None)
    try:
        yield f"http://127.0.0.1:{port}", slow
    finally:
        await server.stop(runner, 1.0)


@pytest.fixture
async def extender(
    monkeypatch: pytest.MonkeyPatch, budget: float
) -> AsyncIterator[tuple[str, Slow]]:
    """The extender's port, its bind made to take 0.5 s."""
    slow = Slow()

    async def bind(self: Extender, namespace: str, name: str, uid: str, node: str) -> str:
        await slow.run(0.5)
        return ""

    monkeypatch.setattr(Extender, "bind", bind)
    berth = _berth(budget)
    runner, port = await server.start(berth.core, berth.extender, None)
    try:
        yield f"http://127.0.0.1:{port}", slow
    finally:
        await server.stop(runner, 1.0)


BIND = dumps({"PodName": "p", "PodNamespace": "default", "PodUID": "u", "Node": "big"})


async def test_a_dashboard_read_past_the_request_timeout_is_stopped_with_a_504(dashboard: Any) -> None:
    base, slow = dashboard
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with aiohttp.ClientSession() as s, s.get(f"{base}/ui/api/pods") as resp:
        body = await resp.json()
    assert resp.status == 504
    assert body == {
        "Error": "GET /ui/api/pods: request did not complete within the server's request timeout "
        "(0.2s, ui.requestTimeoutSeconds); it was stopped"
    }
    assert loop.time() - started < SLOW / 2
    assert slow.outcome == "cancelled"


@pytest.mark.parametrize("budget", [60.0])
async def test_a_dashboard_read_whose_caller_goes_away_is_stopped(dashboard: Any, budget: float) -> None:
    base, slow = dashboard
    async with aiohttp.ClientSession() as s:
        call = asyncio.ensure_future(s.get(f"{base}/ui/api/pods"))
        await asyncio.wait_for(slow.started.wait(), 5)
        call.cancel()  # the client closes its connection
        with pytest.raises(asyncio.CancelledError):
            await call
    for _ in range(100):
        if slow.outcome:
            break
        await asyncio.sleep(0.01)
    assert slow.outcome == "cancelled"


async def test_the_decision_stream_outlives_the_request_timeout(dashboard: Any) -> None:
    base, _ = dashboard
    async with aiohttp.ClientSession() as s, s.get(f"{base}/ui/api/decisions?replay=0") as resp:
        assert resp.status == 200
        assert await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5) == b"retry: 2000\n\n"
        await asyncio.sleep(BUDGET * 3)
        assert not resp.content.at_eof()


async def test_a_bind_past_the_request_timeout_answers_504_and_still_finishes(extender: Any) -> None:
    base, slow = extender
    async with (
        aiohttp.ClientSession() as s,
        s.post(f"{base}/scheduler/bind", data=BIND, headers={"Content-Type": "application/json"}) as resp,
    ):
        body = json.loads(await resp.read())
    assert resp.status == 504
    assert body["Error"].endswith("(0.2s, http.requestTimeoutSeconds); it was stopped")
    assert slow.outcome == ""  # still binding: not cancelled
    await asyncio.sleep(0.6)
    assert slow.outcome == "done"


@pytest.mark.parametrize("budget", [60.0])
async def test_a_bind_whose_caller_goes_away_still_finishes(extender: Any, budget: float) -> None:
    base, slow = extender
    async with aiohttp.ClientSession() as s:
        call = asyncio.ensure_future(
            s.post(f"{base}/scheduler/bind", data=BIND, headers={"Content-Type": "application/json"})
        )
        await asyncio.wait_for(slow.started.wait(), 5)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    await asyncio.sleep(0.7)
    assert slow.outcome == "done"
