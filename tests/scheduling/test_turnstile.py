"""Fairness between the doors: a door lets ``width`` requests at the core
per turn of the event loop, in arrival order, and a saturated extender
port does not keep a gRPC call from completing (in process, no timing)."""

from __future__ import annotations

import asyncio
import itertools
import json

import aiohttp
import grpc
import msgspec
import pytest

from berth import app, config
from berth.adapters.grpc import convert
from berth.adapters.grpc.server import GrpcServer
from berth.adapters.http import extender
from berth.adapters.http import server as http_server
from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from berth.cluster import model
from berth.scheduling import turnstile
from berth.scheduling.turnstile import Turnstile
from berth.testing import make_node
from tests.http.payloads import api_pod


@pytest.mark.parametrize("width", [0, -3])
def test_a_turnstile_needs_room_for_one(width: int) -> None:
    with pytest.raises(ValueError, match="width"):
        Turnstile(width)


@pytest.mark.parametrize("width", [1, 2])
async def test_requests_enter_in_order_width_per_turn_with_other_work_between(width: int) -> None:
    gate = Turnstile(width)
    log: list[str] = []

    async def request(i: int) -> None:
        async with gate:
            log.append(f"req{i}")

    async def other_door() -> None:
        for _ in range(30):
            log.append("other")
            await asyncio.sleep(0)

    await asyncio.gather(*(request(i) for i in range(6)), other_door())
    entered = [i for i, x in enumerate(log) if x != "other"]
    assert [log[i] for i in entered] == [f"req{i}" for i in range(6)]  # first come, first in
    runs: list[int] = [1]  # requests entering back to back, nothing else between
    for a, b in itertools.pairwise(entered):
        if b == a + 1:
            runs[-1] += 1
        else:
            runs.append(1)
    assert max(runs) == width  # never more than width at once; the other door ran between


@pytest.mark.parametrize("budget", [0.0, turnstile.EXTENDER_BUDGET_SECONDS])
@pytest.mark.parametrize("where", ["waiting", "inside"])
async def test_a_request_stopped_at_the_turnstile_leaves_no_seat_taken(where: str, budget: float) -> None:
    """A request whose caller went away (or whose time ran out) is cancelled
    waiting for its turn or while inside: the next request still gets in."""
    gate = Turnstile(1, budget=budget)
    holding, release = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        async with gate:
            holding.set()
            await release.wait()

    first = asyncio.create_task(holder())
    await holding.wait()
    stopped = asyncio.create_task(holder()) if where == "waiting" else first
    await asyncio.sleep(0)
    stopped.cancel()
    release.set()
    await asyncio.gather(first, stopped, return_exceptions=True)

    async def after() -> str:
        async with gate:
            return "in"

    assert await asyncio.wait_for(after(), 1) == "in"


async def test_a_saturated_extender_port_does_not_block_a_grpc_explain(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {"http": {"host": "127.0.0.1", "port": 0}, "grpc": {"host": "127.0.0.1", "port": 0}}
    berth = app.build(config.parse(doc))
    berth.cluster.upsert_nodes([make_node("a", cpu="4", memory="8Gi", pods=10)])
    release, full = asyncio.Event(), asyncio.Event()
    inside = 0

    async def blocked_bind(namespace: str, name: str, uid: str, node: str) -> str:
        nonlocal inside
        inside += 1
        if inside == extender_width:
            full.set()
        await release.wait()  # an extender request holding its place at the core
        inside -= 1
        return ""

    monkeypatch.setattr(berth.extender, "bind", blocked_bind)
    runner, port = await http_server.start(berth.core, berth.extender, None)
    turns = runner.app[extender.TURNSTILE]
    extender_width = turns.width
    grpc_server = GrpcServer(berth.core, berth.extender, berth.cluster)
    await grpc_server.start()
    try:
        body = json.dumps({"PodName": "p", "PodNamespace": "default", "PodUID": "u", "Node": "a"})
        async with aiohttp.ClientSession() as session:

            async def bind() -> int:
                url = f"http://127.0.0.1:{port}/scheduler/bind"
                async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
                    return resp.status

            posts = [asyncio.create_task(bind()) for _ in range(extender_width + 2)]
            await full.wait()
            assert turns.free == 0  # the extender door is saturated; two more wait behind it
            probe = convert.pod_to_pb(msgspec.convert(api_pod("probe", cpu="500m"), model.Pod))
            async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_server.port}") as ch:
                answer = await scheduler_pb2_grpc.SchedulerStub(ch).Explain(scheduler_pb2.ExplainRequest(pod=probe))
            assert [n.node for n in answer.nodes] == ["a"] and answer.feasible_nodes == 1
            assert inside == extender_width and not any(p.done() for p in posts)
            release.set()
            assert await asyncio.gather(*posts) == [200] * (extender_width + 2)
    finally:
        await grpc_server.stop(0)
        await http_server.stop(runner, 0)


@pytest.mark.parametrize(
    ("cost", "capacity"),
    [
        (0.0, 32),  # next to nothing: as many as allowed
        (0.001, 10),  # 1 ms each: 10 fit in the 10 ms budget
        (0.004, 4),  # 4 ms: 2 would fit, but never fewer than width
    ],
)
async def test_a_budget_lets_in_as_many_as_their_cost_fits_between_width_and_most(
    monkeypatch: pytest.MonkeyPatch, cost: float, capacity: int
) -> None:
    clock = iter(x * cost for x in itertools.count())  # each request costs `cost` from entering to leaving
    monkeypatch.setattr(turnstile.time, "perf_counter", lambda: next(clock))
    gate = Turnstile(4, budget=0.010, most=32)

    async def request() -> None:
        async with gate:
            pass

    for _ in range(40):
        await asyncio.gather(*(request() for _ in range(8)))
    await asyncio.sleep(0)  # the last slots come back
    assert gate.capacity == capacity
    assert gate.free == capacity


async def test_costly_requests_narrow_a_widened_door_back_to_its_width(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr(turnstile.time, "perf_counter", lambda: now[0])
    gate = Turnstile(4, budget=0.010, most=32)

    async def request(cost: float) -> None:
        async with gate:
            now[0] += cost

    for _ in range(20):
        await asyncio.gather(*(request(0.0005) for _ in range(8)))
    assert gate.capacity > 4
    for _ in range(20):
        await asyncio.gather(*(request(0.02) for _ in range(8)))
    await asyncio.sleep(0)
    assert gate.capacity == 4 and gate.free == 4
