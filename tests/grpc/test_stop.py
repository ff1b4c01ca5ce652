"""A graceful stop ends every open stream at once with UNAVAILABLE: an idle
stream never finishes on its own, and must not hold SIGTERM for the whole
grace period (unary calls in flight still get it)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from berth.adapters.grpc import edge
from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from tests.grpc.conftest import Served, serving

GRACE = 3.0


def _decisions(channel: grpc.aio.Channel) -> Any:
    return scheduler_pb2_grpc.SchedulerStub(channel).WatchDecisions(scheduler_pb2.WatchDecisionsRequest())


def _decision_batches(channel: grpc.aio.Channel) -> Any:
    return scheduler_pb2_grpc.SchedulerStub(channel).WatchDecisionBatches(scheduler_pb2.WatchDecisionsRequest())


def _health(channel: grpc.aio.Channel) -> Any:
    return health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service="berth.v1.Scheduler"))


async def _open(served: Served, stream: Any, watching: Callable[[Served], bool]) -> None:
    for _ in range(500):
        if watching(served):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the stream never reached the server")


STREAMS = [
    ("WatchDecisions", _decisions, lambda s: len(s.core.decisions._watchers) == 1),
    ("WatchDecisionBatches", _decision_batches, lambda s: len(s.core.decisions._watchers) == 1),
    ("Health.Watch", _health, None),
]


@pytest.mark.parametrize(("call", "watching"), [s[1:] for s in STREAMS], ids=[s[0] for s in STREAMS])
async def test_an_idle_stream_ends_unavailable_as_soon_as_the_server_stops(
    call: Callable[[grpc.aio.Channel], Any], watching: Callable[[Served], bool] | None
) -> None:
    async with serving() as served:
        channel = served.channel()
        stream = call(channel)
        if watching is None:  # Health.Watch answers the current status first
            assert (await stream.read()).status == health_pb2.HealthCheckResponse.SERVING
        else:
            await _open(served, stream, watching)
        started = time.monotonic()
        await served.server.stop(GRACE)
        took = time.monotonic() - started
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            while (message := await stream.read()) is not grpc.aio.EOF:
                assert isinstance(message, health_pb2.HealthCheckResponse)  # NOT_SERVING, said while stopping
        await channel.close()
    assert (ended.value.code(), ended.value.details()) == (grpc.StatusCode.UNAVAILABLE, edge.STOPPING)
    assert took < GRACE / 2, f"stop took {took:.2f}s of its {GRACE}s grace"
