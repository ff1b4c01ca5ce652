"""Submit in batches and decisions streamed in batches (issue 16): a batch
of N pods answers as N single submits do, a pod that cannot be converted is
rejected alone, and WatchDecisionBatches carries WatchDecisions' decisions,
all of them, in the same order."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from berth import app, config
from berth.adapters.grpc import convert
from berth.adapters.grpc.server import GrpcServer
from berth.api.v1 import model_pb2, scheduler_pb2, scheduler_pb2_grpc
from berth.framework.decision import Decision, DecisionKind
from berth.scheduling.decisions import DecisionLog
from berth.testing import make_node, make_pod
from tests.grpc.conftest import Served

BOUND = scheduler_pb2.Decision.BOUND


@contextlib.asynccontextmanager
async def scheduling(*, nodes: int = 2) -> AsyncIterator[tuple[Served, Any]]:
    """A Berth whose loop runs, with ``nodes`` nodes of 4 cpu / 110 pods; and its Scheduler stub."""
    async with app.running(config.parse({"grpc": {"host": "127.0.0.1", "port": 0}})) as berth:
        berth.cluster.upsert_nodes([make_node(f"n{i}", cpu="4", memory="8Gi", pods=110) for i in range(nodes)])
        server = GrpcServer(berth.core, berth.extender, berth.cluster)
        await server.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
        try:
            yield Served(server, berth.core, berth.cluster), scheduler_pb2_grpc.SchedulerStub(channel)
        finally:
            await channel.close()
            await server.stop(0)


def pb(name: str, **kw: Any) -> model_pb2.Pod:
    return convert.pod_to_pb(make_pod(name, scheduler_name="berth", **kw))


def negative(name: str) -> model_pb2.Pod:
    """A pod the API cannot take: a negative cpu request (fails conversion)."""
    p = pb(name, requests={"cpu": "1"})
    p.spec.containers[0].requests["cpu"] = -1
    return p


def bad_name(name: str) -> model_pb2.Pod:
    """A pod that converts but fails validation (its name)."""
    p = pb("x", requests={"cpu": "100m"})
    p.metadata.name = name
    return p


#: A request's pods, in order: accepted ones, refused ones of each kind, and
#: repeats (the same pod again is idempotent; another pod with a taken name is not).
MIXED = [
    pb("a", requests={"cpu": "100m"}),
    negative("neg"),
    pb("b", requests={"cpu": "100m"}),
    bad_name("Not_A_Name"),
    pb("a", requests={"cpu": "100m"}),  # the same pod again
    pb("a", requests={"cpu": "200m"}),  # another pod with that name
    pb("c", uid="shared-uid"),  # the uid pod "b" holds
]
MIXED[2].metadata.uid = "shared-uid"


def _unindexed(message: str) -> str:
    return re.sub(r"^pods\[\d+\]", "pods[i]", message)


def _answer(results: Any) -> list[tuple[str, bool, str, str]]:
    return [(r.pod, r.accepted, r.uid, _unindexed(r.message)) for r in results]


async def test_a_batch_answers_as_the_same_pods_submitted_one_by_one() -> None:
    async with scheduling() as (one_by_one, stub):
        singles = []
        for p in MIXED:
            singles.extend((await stub.Submit(scheduler_pb2.SubmitRequest(pods=[p]))).results)
        held_singly = {k: p.metadata.uid for k, p in ((p.key, p) for p in one_by_one.core.pods.all())}
    async with scheduling() as (batched, stub):
        together = (await stub.Submit(scheduler_pb2.SubmitRequest(pods=MIXED))).results
        held_together = {k: p.metadata.uid for k, p in ((p.key, p) for p in batched.core.pods.all())}
    assert _answer(together) == _answer(singles)
    assert [r.accepted for r in together] == [True, False, True, False, True, False, False]
    assert held_together == held_singly
    assert set(held_together) == {"default/a", "default/b"}


async def test_a_pod_that_cannot_be_converted_is_rejected_alone_with_its_field() -> None:
    async with scheduling() as (s, stub):
        resp = await stub.Submit(scheduler_pb2.SubmitRequest(pods=[pb("ok1"), negative("neg"), pb("ok2")]))
        assert [(r.pod, r.accepted) for r in resp.results] == [
            ("default/ok1", True),
            ("default/neg", False),
            ("default/ok2", True),
        ]
        assert resp.results[1].message == (
            "pods[1].spec.containers[0].requests[cpu]: Invalid value: -1: must be greater than or equal to 0"
        )
        assert not resp.results[1].uid
        assert s.core.pods.by_key("default/neg") is None
        assert s.core.pods.by_key("default/ok2") is not None


async def test_a_validation_refusal_in_a_batch_names_the_request_index() -> None:
    async with scheduling() as (_, stub):
        resp = await stub.Submit(scheduler_pb2.SubmitRequest(pods=[negative("neg"), pb("ok"), bad_name("Bad_Name")]))
        assert resp.results[2].message.startswith("pods[2].metadata.name: Invalid value: ")
        assert [r.accepted for r in resp.results] == [False, True, False]


async def _collect(stream: Any, want: set[str], batched: bool) -> list[tuple[int, str]]:
    """(kind, pod) of every decision until each pod in ``want`` is BOUND."""
    seen: list[tuple[int, str]] = []
    bound: set[str] = set()
    async for msg in stream:
        for d in msg.decisions if batched else [msg]:
            seen.append((d.kind, d.pod))
            if d.kind == BOUND:
                bound.add(d.pod)
        if bound >= want:
            return seen
    raise AssertionError("stream ended early")


async def test_batched_decisions_are_the_single_stream_complete_and_in_order() -> None:
    pods = [pb(f"p{i:03d}", requests={"cpu": "10m"}) for i in range(120)]
    want = {f"default/p{i:03d}" for i in range(120)}
    async with scheduling(nodes=3) as (_, stub):
        single = stub.WatchDecisions(scheduler_pb2.WatchDecisionsRequest())
        batches = stub.WatchDecisionBatches(scheduler_pb2.WatchDecisionsRequest())
        sizes: list[int] = []

        async def counted() -> AsyncIterator[Any]:
            async for b in batches:
                assert b.decisions, "a batch is never empty"
                sizes.append(len(b.decisions))
                yield b

        one = asyncio.create_task(_collect(single, want, batched=False))
        many = asyncio.create_task(_collect(counted(), want, batched=True))
        await asyncio.sleep(0.05)  # both streams subscribed
        for k in range(0, len(pods), 40):
            await stub.Submit(scheduler_pb2.SubmitRequest(pods=pods[k : k + 40]))
        got_one, got_many = await asyncio.wait_for(asyncio.gather(one, many), timeout=30)
        single.cancel()
        batches.cancel()
    assert got_many == got_one
    assert [k for k, _ in got_many].count(BOUND) == 120
    assert len(sizes) < len(got_many)  # several decisions per message


async def test_decision_batches_replay_then_follow_in_order_and_in_bounded_chunks() -> None:
    log = DecisionLog()

    def d(i: int) -> Decision:
        return Decision(kind=DecisionKind.QUEUED, pod=f"default/p{i}", uid=f"u{i}")

    for i in range(5):
        log.emit(d(i))
    stream = log.watch_batches(replay=True, max_batch=2)
    replayed = [await anext(stream) for _ in range(3)]
    assert [[x.pod for x in b] for b in replayed] == [
        ["default/p0", "default/p1"],
        ["default/p2", "default/p3"],
        ["default/p4"],
    ]
    for i in range(5, 10):
        log.emit(d(i))
    live = [await anext(stream) for _ in range(3)]
    assert [[x.pod for x in b] for b in live] == [
        ["default/p5", "default/p6"],
        ["default/p7", "default/p8"],
        ["default/p9"],
    ]
    await stream.aclose()


@pytest.mark.parametrize("pods", [[], ["default/p1"]], ids=["all", "one pod"])
async def test_decision_batches_filter_by_pod_as_the_single_stream(pods: list[str]) -> None:
    log = DecisionLog()
    stream = log.watch_batches(pods, max_batch=10)
    first = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)  # subscribed, waiting for a decision
    for i in range(3):
        log.emit(Decision(kind=DecisionKind.QUEUED, pod=f"default/p{i}", uid=f"u{i}"))
    batch = await first
    assert [x.pod for x in batch] == (pods or ["default/p0", "default/p1", "default/p2"])
    await stream.aclose()
