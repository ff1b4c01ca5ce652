"""The gRPC door's fairness levels (berth/scheduling/fairness.py): reads
past a caller's queue are RESOURCE_EXHAUSTED naming the limit, and the
extender's verbs are never queued behind them."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from berth.adapters.grpc import convert, edge, server
from berth.api.v1 import model_pb2, scheduler_pb2, scheduler_pb2_grpc
from berth.testing import make_node

from .conftest import serving

SATURATED = {"reads": {"concurrency": 1, "perCaller": 1, "queueLength": 1}}


async def test_reads_past_the_queue_are_refused_and_filter_is_never_queued(monkeypatch: pytest.MonkeyPatch) -> None:
    release = asyncio.Event()
    entered: list[str] = []

    async def slow_why(self: server.SchedulerServicer, request: Any, context: Any) -> scheduler_pb2.WhyResponse:
        entered.append(request.name)
        await release.wait()
        return scheduler_pb2.WhyResponse()

    monkeypatch.setattr(server.SchedulerServicer, "Why", slow_why)
    async with serving(fairness=SATURATED) as s, s.channel() as ch:
        stub = scheduler_pb2_grpc.SchedulerStub(ch)
        running = asyncio.ensure_future(stub.Why(scheduler_pb2.WhyRequest(name="first")))
        while not entered:  # noqa: ASYNC110 (the server's state, polled)
            await asyncio.sleep(0.01)
        queued = asyncio.ensure_future(stub.Why(scheduler_pb2.WhyRequest(name="second")))
        edge_caller = "address ipv4:127.0.0.1"
        while s.core.fairness.levels["reads"].waiting(edge_caller) < 1:  # noqa: ASYNC110 (the server's state, polled)
            await asyncio.sleep(0.01)
        assert entered == ["first"]
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Why(scheduler_pb2.WhyRequest(name="third"))
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert f"{edge_caller} has 1 waiting (fairness.reads.queueLength: 1;" in (err.value.details() or "")
        # The extender's Filter runs while every read seat is taken and the queue is full.
        answer = await asyncio.wait_for(
            stub.Filter(
                scheduler_pb2.FilterRequest(
                    pod=model_pb2.Pod(metadata=model_pb2.ObjectMeta(name="p", namespace="default")),
                    nodes=scheduler_pb2.NodeSet(full_objects=True, nodes=[convert.node_to_pb(make_node("a", pods=10))]),
                )
            ),
            5,
        )
        assert list(answer.node_names) == ["a"]
        assert not queued.done()
        release.set()
        await asyncio.gather(running, queued)
        assert entered == ["first", "second"]


@pytest.mark.parametrize(
    ("method", "level"),
    [
        ("/berth.v1.Scheduler/Why", "reads"),
        ("/berth.v1.Scheduler/WhatIf", "reads"),
        ("/berth.v1.Cluster/ListNodes", "reads"),
        ("/berth.v1.Scheduler/Submit", "feeds"),
        ("/berth.v1.Cluster/UpsertPods", "feeds"),
        ("/berth.v1.Cluster/DeleteResourceClaims", "feeds"),
        ("/berth.v1.Scheduler/Filter", None),
        ("/berth.v1.Scheduler/Prioritize", None),
        ("/berth.v1.Scheduler/Bind", None),
        ("/berth.v1.Scheduler/WatchDecisions", None),
        ("/grpc.health.v1.Health/Check", None),
    ],
)
async def test_each_method_has_its_level_and_the_extender_verbs_none(method: str, level: str | None) -> None:
    assert edge.level_of(method) == level
