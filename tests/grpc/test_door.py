"""The gRPC door takes calls on a loop of its own and Berth answers them on
its loop (berth/adapters/grpc/door.py): a burst of calls is taken while
Berth's loop is busy, each handler runs on Berth's loop, a stopped server
leaves no thread behind, and no unary call outlives the server's request
timeout (``grpc.requestTimeoutSeconds``)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from berth.adapters.grpc import convert, door
from berth.adapters.grpc import server as grpc_server
from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc
from berth.scheduling import explain
from berth.testing import make_node, make_pod
from tests.grpc.conftest import serving

BURST = 64


async def test_a_burst_of_calls_is_taken_while_berths_loop_is_held() -> None:
    async with serving() as served:
        with grpc.insecure_channel(served.address) as channel:
            check = health_pb2_grpc.HealthStub(channel).Check
            grpc.channel_ready_future(channel).result(timeout=10)  # connected: the door needs no help for that
            sent = [check.future(health_pb2.HealthCheckRequest(), timeout=30) for _ in range(BURST)]
            # Hold Berth's loop (this test's) the way a long computation
            # would; grpc takes every call on the door's loop meanwhile and
            # hands it over (with grpc on this loop, none would be taken).
            _hold_the_loop_until(lambda: len(served.server.bridge._running) >= BURST, 10.0)
            taken = len(served.server.bridge._running)
            answers = await asyncio.gather(*(asyncio.wrap_future(_as_concurrent(f)) for f in sent))
    assert taken == BURST
    assert {a.status for a in answers} == {health_pb2.HealthCheckResponse.SERVING}


def _hold_the_loop_until(done: Callable[[], bool], seconds: float) -> None:
    """Block the calling thread (the loop's) until ``done()``, ``seconds`` at most."""
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)


def _as_concurrent(call: Any) -> futures.Future[Any]:
    """A grpc future as a concurrent one (its callback runs on grpc's thread)."""
    done: futures.Future[Any] = futures.Future()
    call.add_done_callback(
        lambda c: done.set_result(c.result()) if c.exception() is None else done.set_exception(c.exception())
    )
    return done


async def test_each_handler_runs_on_berths_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[asyncio.AbstractEventLoop, threading.Thread]] = []
    real = explain.list_nodes

    def recorded(core: Any) -> Any:
        seen.append((asyncio.get_running_loop(), threading.current_thread()))
        return real(core)

    monkeypatch.setattr(explain, "list_nodes", recorded)
    async with serving() as served:
        channel = served.channel()
        answer = await cluster_pb2_grpc.ClusterStub(channel).ListNodes(cluster_pb2.ListNodesRequest())
        await channel.close()
    assert [n.name for n in answer.nodes] == ["a", "b"]
    assert seen == [(asyncio.get_running_loop(), threading.current_thread())]


async def test_a_stopped_server_leaves_no_thread_and_a_second_stop_does_nothing() -> None:
    async with serving() as served:
        door = served.server.door
        assert door._thread.is_alive()
        await served.server.stop(0)
        await served.server.stop(0)
    assert door.closed and not door._thread.is_alive()
    assert not [t for t in threading.enumerate() if t.name == "berth-grpc"]


@pytest.mark.parametrize("grace", [0.0, 0.05, 1.0])
async def test_a_server_stopped_with_calls_in_flight_logs_no_error(
    grace: float, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Calls in flight while the server stops end without a traceback: grpc
    logs one for each of its call tasks cancelled by the closing door (seen
    under SIGTERM), and a handler reading its call from Berth's loop after
    grpc freed it crashed the process (a segmentation fault, ~1 run in 6 of
    these rounds before the context was copied at the call's start)."""
    caplog.set_level(logging.DEBUG)

    async def slow(self: Any, request: Any, context: Any) -> Any:
        await asyncio.sleep(0.03)
        return cluster_pb2.ListNodesResponse()

    monkeypatch.setattr(grpc_server.ClusterServicer, "ListNodes", slow)
    for _ in range(3):
        async with serving() as served:
            channel = served.channel()
            stub = cluster_pb2_grpc.ClusterStub(channel)
            ask = cluster_pb2.ListNodesRequest()
            calls = [asyncio.ensure_future(stub.ListNodes(ask, timeout=10)) for _ in range(40)]
            await asyncio.sleep(0.03)
            await served.server.stop(grace)
            await asyncio.gather(*calls, return_exceptions=True)
            await channel.close()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_calls_that_outlast_the_grace_are_named_when_they_are_cancelled(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A stop held for the whole grace by calls in flight says which ones."""

    async def stuck(self: Any, request: Any, context: Any) -> Any:
        await asyncio.sleep(30)

    monkeypatch.setattr(grpc_server.ClusterServicer, "ListNodes", stuck)
    async with serving() as served:
        channel = served.channel()
        stub = cluster_pb2_grpc.ClusterStub(channel)
        calls = [asyncio.ensure_future(stub.ListNodes(cluster_pb2.ListNodesRequest(), timeout=10)) for _ in range(2)]
        await asyncio.sleep(0.2)
        await served.server.stop(0.2)
        ended = await asyncio.gather(*calls, return_exceptions=True)
        await channel.close()
    assert all(isinstance(e, grpc.aio.AioRpcError) for e in ended)
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "gRPC: 2 call(s) still running after the grace period (0.2s, shutdownGracePeriodSeconds), "
        "cancelled: ListNodes x2"
    ]


class _FreedCall:
    """A servicer context that answers once, then is gone (grpc freed the call)."""

    def __init__(self) -> None:
        self.freed = False
        self.set: list[tuple[str, tuple[Any, ...]]] = []

    def _read(self, value: Any) -> Any:
        assert not self.freed, "read after the call was freed"
        return value

    def time_remaining(self) -> float:
        return self._read(30.0)  # type: ignore[no-any-return]

    def peer(self) -> str:
        return self._read("ipv4:127.0.0.1:5000")  # type: ignore[no-any-return]

    def peer_identities(self) -> Any:
        return self._read([b"client"])

    def auth_context(self) -> Any:
        return self._read({"x509_common_name": [b"client"]})

    def invocation_metadata(self) -> Any:
        return self._read((("authorization", "Bearer t"),))

    def set_code(self, code: Any) -> None:
        self.set.append(("set_code", (code, threading.current_thread().name)))


async def test_a_handler_reads_its_call_from_a_copy_made_when_the_call_starts() -> None:
    thread = door.DoorThread(name="door-under-test")
    try:
        call = _FreedCall()

        async def make() -> Any:
            return door._Context(call, asyncio.get_running_loop(), time.monotonic() + 5)  # type: ignore[arg-type]

        ctx = await thread.run(make())
        call.freed = True  # what a handler reads now must not reach grpc's call
        assert ctx.peer() == "ipv4:127.0.0.1:5000"
        assert ctx.peer_identities() == [b"client"]
        assert ctx.auth_context() == {"x509_common_name": [b"client"]}
        assert ctx.invocation_metadata() == (("authorization", "Bearer t"),)
        assert 4 < ctx.time_remaining() <= 5  # the nearer of the client's 30 s and the server's 5 s
        ctx.set_code(grpc.StatusCode.NOT_FOUND)  # set on the door's loop, in order
        await thread.run(asyncio.sleep(0))
        assert call.set == [("set_code", (grpc.StatusCode.NOT_FOUND, "door-under-test"))]
        with pytest.raises(AttributeError, match="not offered"):
            ctx.cancelled()
    finally:
        await thread.aclose()


async def test_a_call_past_the_servers_request_timeout_is_deadline_exceeded_and_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stopped = asyncio.Event()

    async def slow(self: Any, request: Any, context: Any) -> Any:
        try:
            await asyncio.sleep(30)  # a handler that never reads its deadline
        except asyncio.CancelledError:
            stopped.set()
            raise

    monkeypatch.setattr(grpc_server.ClusterServicer, "ListNodes", slow)
    async with serving({"requestTimeoutSeconds": 0.2}) as served:
        channel = served.channel()
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await cluster_pb2_grpc.ClusterStub(channel).ListNodes(cluster_pb2.ListNodesRequest(), timeout=10)
        await asyncio.wait_for(stopped.wait(), 5)
        await channel.close()
    assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert ended.value.details() == (
        "the server's request timeout (0.2s, grpc.requestTimeoutSeconds) passed; the call was stopped"
    )


async def test_whatif_stops_at_the_servers_request_timeout_with_its_own_answer() -> None:
    template = convert.pod_to_pb(make_pod("web", scheduler_name="berth", requests={"cpu": "100m"}))
    async with serving({"requestTimeoutSeconds": 0.2}) as served:
        served.feed.upsert_nodes([make_node(f"m{i}", cpu="64", pods=110) for i in range(98)])
        channel = served.channel()
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await scheduler_pb2_grpc.SchedulerStub(channel).WhatIf(
                scheduler_pb2.WhatIfRequest(pod=template, replicas=1000), timeout=10
            )
        await channel.close()
    assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert ended.value.details().startswith("whatif: the deadline passed after ")
