"""ListQueues and GetQueue: the batch queues over gRPC, read from the core's
queue tree; amounts in canonical units as everywhere in the contract."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest

from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from berth.cluster import model
from berth.testing import make_pod
from tests.grpc.conftest import serving

QUEUES: list[dict[str, Any]] = [
    {"name": "research", "guaranteed": {"cpu": "2", "memory": "4Gi"}, "max": {"cpu": "3"}, "weight": 2},
    {"name": "research-vision", "parent": "research", "guaranteed": {"cpu": "1"}, "namespaces": ["vision"]},
    {"name": "batch", "max": {"nvidia.com/gpu": "2"}},
]


def bound(name: str, **kw: Any) -> model.Pod:
    """A Berth pod already running on node a (serving(): a has 4 cpu 8Gi, b
    1 cpu 1Gi; 5 cpu and 9Gi in all)."""
    return make_pod(name, scheduler_name="berth", node_name="a", **kw)


async def test_list_queues_reports_every_queue_parents_first() -> None:
    async with serving(None, queues=QUEUES) as s:
        s.feed.upsert_pods(
            [
                bound("x", namespace="vision", requests={"cpu": "500m", "memory": "1Gi"}),
                bound("y", labels={"berth.dev/queue": "batch"}, requests={"cpu": "1"}),
                make_pod("p", namespace="vision", scheduler_name="berth", requests={"cpu": "250m"}),
                make_pod("q", scheduler_name="berth", labels={"berth.dev/queue": "batch"}, requests={"cpu": "2"}),
            ]
        )
        s.core.quota.count_reclaim("batch")
        async with s.channel() as ch:
            resp = await scheduler_pb2_grpc.SchedulerStub(ch).ListQueues(scheduler_pb2.ListQueuesRequest())
    assert [q.name for q in resp.queues] == ["research", "research-vision", "batch"]
    research, vision, batch = resp.queues
    assert (research.parent, research.leaf, list(research.children)) == ("", False, ["research-vision"])
    assert dict(research.guaranteed) == {"cpu": 2000, "memory": 4 * 2**30}
    assert (dict(research.max), research.weight) == ({"cpu": 3000}, 2.0)
    # A child's usage and demand count against its parent too.
    for q in (research, vision):
        assert dict(q.allocated) == {"cpu": 500, "memory": 2**30}
        assert (q.pending_pods, dict(q.pending)) == (1, {"cpu": 250})
        assert q.dominant_share == pytest.approx(1 / 9)  # memory: 1Gi of 9Gi
    assert (vision.parent, vision.leaf, list(vision.namespaces)) == ("research", True, ["vision"])
    assert dict(batch.max) == {"nvidia.com/gpu": 2} and batch.weight == 1.0
    assert dict(batch.allocated) == {"cpu": 1000}
    assert (batch.pending_pods, dict(batch.pending)) == (1, {"cpu": 2000})
    assert batch.dominant_share == pytest.approx(0.2)  # cpu: 1 of 5
    # Weights 2:1 among the roots; a single child inherits its parent's.
    assert (research.fair_share, vision.fair_share, batch.fair_share) == pytest.approx((2 / 3, 2 / 3, 1 / 3))
    assert (research.reclaim_preemptions, batch.reclaim_preemptions) == (0, 1)


async def test_get_queue_returns_the_named_queue() -> None:
    async with serving(None, queues=QUEUES) as s:
        s.feed.upsert_pods([bound("y", labels={"berth.dev/queue": "batch"}, requests={"cpu": "1"})])
        async with s.channel() as ch:
            stub = scheduler_pb2_grpc.SchedulerStub(ch)
            got = await stub.GetQueue(scheduler_pb2.GetQueueRequest(name="batch"))
            listed = await stub.ListQueues(scheduler_pb2.ListQueuesRequest())
    assert got == listed.queues[2]
    assert (got.name, dict(got.allocated)) == ("batch", {"cpu": 1000})


async def test_list_queues_is_empty_without_queues() -> None:
    async with serving() as s, s.channel() as ch:
        resp = await scheduler_pb2_grpc.SchedulerStub(ch).ListQueues(scheduler_pb2.ListQueuesRequest())
    assert list(resp.queues) == []


@pytest.mark.parametrize(
    ("queues", "name", "code", "details"),
    [
        (
            QUEUES,
            "ghost",
            grpc.StatusCode.NOT_FOUND,
            "queue 'ghost' not found (queues: research, research-vision, batch)",
        ),
        ([], "research", grpc.StatusCode.NOT_FOUND, "queue 'research' not found (queues: none are configured)"),
        (QUEUES, "", grpc.StatusCode.INVALID_ARGUMENT, "name: required (a queue name)"),
    ],
    ids=["unknown name", "no queues configured", "no name"],
)
async def test_get_queue_refuses_what_is_not_a_queue(
    queues: list[dict[str, Any]], name: str, code: grpc.StatusCode, details: str
) -> None:
    async with serving(None, queues=queues) as s, s.channel() as ch:
        stub = scheduler_pb2_grpc.SchedulerStub(ch)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetQueue(scheduler_pb2.GetQueueRequest(name=name))
        assert (err.value.code(), err.value.details()) == (code, details)
        # Nothing changed, and the server keeps answering.
        assert len((await stub.ListQueues(scheduler_pb2.ListQueuesRequest())).queues) == len(queues)


async def test_queues_are_read_only_methods_open_without_a_token(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("queue-token-0123456789abcdef")
    async with serving({"auth": {"tokenFile": str(token)}}, queues=QUEUES) as s, s.channel() as ch:
        stub = scheduler_pb2_grpc.SchedulerStub(ch)
        assert len((await stub.ListQueues(scheduler_pb2.ListQueuesRequest())).queues) == 3
        assert (await stub.GetQueue(scheduler_pb2.GetQueueRequest(name="batch"))).name == "batch"
