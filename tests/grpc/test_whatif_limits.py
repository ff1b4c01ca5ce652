"""WhatIf over gRPC within its bounds: a question over the cost bound is
RESOURCE_EXHAUSTED naming the bound and its cost; one whose caller's
deadline passes ends DEADLINE_EXCEEDED and stops computing."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from berth.adapters.grpc import convert
from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from berth.scheduling import algorithm
from berth.scheduling.whatif import MAX_COST
from berth.testing import make_node, make_pod
from tests.grpc.conftest import serving

TEMPLATE = convert.pod_to_pb(make_pod("web", scheduler_name="berth", requests={"cpu": "100m"}))


async def test_a_question_over_the_cost_bound_is_resource_exhausted() -> None:
    async with serving() as served:
        served.feed.upsert_nodes([make_node(f"m{i}", cpu="64", pods=110) for i in range(398)])  # 400 in all
        fwk = served.core.framework_for("")
        plugins = len(fwk.filter) + len(fwk.score)
        channel = served.channel()
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await scheduler_pb2_grpc.SchedulerStub(channel).WhatIf(
                scheduler_pb2.WhatIfRequest(pod=TEMPLATE, replicas=1000)
            )
        await channel.close()
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert refused.value.details() == (
        f"replicas: 1000 replicas x 400 nodes x {plugins} Filter and Score plugins = {1000 * 400 * plugins} node "
        f"evaluations, over the bound of {MAX_COST} per question (at most {MAX_COST // (400 * plugins)} replicas "
        "on this cluster)"
    )


async def test_a_question_whose_deadline_passes_is_deadline_exceeded_and_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = 0
    real = algorithm.schedule_pod

    def counted(*args: Any, **kw: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args, **kw)

    monkeypatch.setattr(algorithm, "schedule_pod", counted)
    async with serving() as served:
        served.feed.upsert_nodes([make_node(f"m{i}", cpu="64", pods=110) for i in range(98)])
        channel = served.channel()
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await scheduler_pb2_grpc.SchedulerStub(channel).WhatIf(
                scheduler_pb2.WhatIfRequest(pod=TEMPLATE, replicas=1000), timeout=0.2
            )
        await asyncio.sleep(0.2)  # the server notices within a slice
        stopped_at = calls
        await asyncio.sleep(0.2)
        await channel.close()
    assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert 0 < calls == stopped_at < 1000
