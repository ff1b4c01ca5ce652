"""WatchDecisions encodes each decision once for every stream (issue 28:
with 2000 dashboard streams each decision was encoded 2000 times, 19.5 s of
CPU for 300 pods; gRPC streams did the same)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from berth.adapters.grpc import convert
from berth.adapters.grpc import server as grpc_server
from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from berth.framework.decision import Decision, DecisionKind

from .conftest import serving


@pytest.mark.parametrize(("streams", "decisions"), [(1, 5), (12, 20)])
async def test_each_decision_is_encoded_once_whatever_the_number_of_streams(
    streams: int, decisions: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded: list[str] = []
    to_pb = convert.decision_to_pb

    def counting(d: Decision) -> scheduler_pb2.Decision:
        encoded.append(d.pod)
        message: scheduler_pb2.Decision = to_pb(d)
        return message

    monkeypatch.setattr(convert, "decision_to_pb", counting)
    grpc_server.encoded_decision.cache_clear()
    async with serving() as s, s.channel() as ch:
        stub = scheduler_pb2_grpc.SchedulerStub(ch)
        calls = [stub.WatchDecisions(scheduler_pb2.WatchDecisionsRequest()) for _ in range(streams)]
        while s.core.decisions.watcher_count < streams:  # noqa: ASYNC110 (every stream subscribed: the server's state)
            await asyncio.sleep(0.01)
        sent = [
            Decision(DecisionKind.BOUND, f"default/p{i}", f"uid-{i}", node="a", timestamp_ms=i)
            for i in range(decisions)
        ]
        for d in sent:
            s.core.decisions.emit(d)

        async def read(call: grpc.aio.UnaryStreamCall) -> list[tuple[int, str, str]]:
            got = [await call.read() for _ in range(decisions)]
            call.cancel()
            return [(m.serial, m.pod, m.node) for m in got]

        received = await asyncio.wait_for(asyncio.gather(*(read(c) for c in calls)), 10)
    first = s.core.decisions.serial - decisions + 1
    expected = [(first + i, d.pod, "a") for i, d in enumerate(sent)]
    assert received == [expected] * streams  # every stream got every decision, numbered
    assert sorted(encoded) == sorted(d.pod for d in sent)  # decisions, not decisions x streams


async def test_bytes_pass_through_a_streams_serializer_and_messages_are_encoded() -> None:
    from berth.adapters.grpc import edge

    serialize = edge._as_is_if_encoded(scheduler_pb2.Decision.SerializeToString)
    assert serialize is not None
    message = scheduler_pb2.Decision(pod="default/p", serial=7)
    assert serialize(b"\x01\x02") == b"\x01\x02"
    assert serialize(message) == message.SerializeToString()
    assert edge._as_is_if_encoded(None) is None


async def test_a_stream_that_falls_too_far_behind_is_ended_with_a_clear_status() -> None:
    async with serving() as s, s.channel() as ch:
        s.core.decisions.max_backlog_bytes = 4096
        call = scheduler_pb2_grpc.SchedulerStub(ch).WatchDecisions(scheduler_pb2.WatchDecisionsRequest())
        while s.core.decisions.watcher_count < 1:  # noqa: ASYNC110 (the server's state, polled)
            await asyncio.sleep(0.01)
        for i in range(200):  # at once: far more than 4096 bytes before the stream reads one
            s.core.decisions.emit(Decision(DecisionKind.BOUND, f"default/p{i}", f"uid-{i}", node="a"))
        with pytest.raises(grpc.aio.AioRpcError) as err:
            async for _ in call:
                pass
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert err.value.details() == (
        "decision stream: more than 4096 bytes of decisions unread (the client is too slow); reconnect with replay"
    )
