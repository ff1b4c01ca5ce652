"""The client contract over gRPC (protos/berth/v1): the epoch on every
answer, Decision serials and WatchDecisionsRequest.since_serial (resumed
exactly, OUT_OF_RANGE when compacted or of another epoch), Submit's
idempotency keys, and a feed's resync; through the client library."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from berth import app
from berth.adapters.grpc.server import GrpcServer
from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc
from berth.store import MemoryStore, SqliteStore, StateStore
from berth_client.aio import AsyncClient
from tests.store.conftest import cfg

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n0"},
    "status": {"allocatable": {"cpu": "8", "pods": "110"}},
}


def pod(name: str, cpu: str = "100m") -> dict[str, Any]:
    resources = {"requests": {"cpu": cpu}}
    spec = {"containers": [{"name": "c", "resources": resources}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team"}, "spec": spec}


@contextlib.asynccontextmanager
async def served(store: StateStore, **extra: Any) -> AsyncIterator[tuple[app.Berth, GrpcServer]]:
    b = app.build(cfg(grpc={"host": "127.0.0.1", "port": 0}, **extra), store=store)
    assert b.durable is not None
    await b.durable.restore()
    server = GrpcServer(b.core, b.extender, b.cluster, durable=b.durable)
    await server.start()
    loop = asyncio.create_task(b.run_loop())
    try:
        yield b, server
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
        await server.stop(0)
        b.core.client.cancel()
        await b.core.client.drain()
        await b.durable.close()


async def test_every_answer_carries_the_epoch_which_survives_a_restart_of_a_durable_store(tmp_path: Path) -> None:
    async with served(SqliteStore(tmp_path)) as (b, server), AsyncClient(f"127.0.0.1:{server.port}") as client:
        await client.feed([NODE])
        epoch = client.epoch
        assert epoch == b.durable.epoch  # type: ignore[union-attr]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
            s = scheduler_pb2_grpc.SchedulerStub(ch)
            c = cluster_pb2_grpc.ClusterStub(ch)
            answers = [
                await s.Submit(scheduler_pb2.SubmitRequest()),
                await s.Cancel(scheduler_pb2.CancelRequest(namespace="team", name="none")),
                await s.ListPods(scheduler_pb2.ListPodsRequest()),
                await s.ListQueues(scheduler_pb2.ListQueuesRequest()),
                await s.ListPodGroups(scheduler_pb2.ListPodGroupsRequest()),
                await c.DeleteNodes(cluster_pb2.DeleteNodesRequest(names=["none"])),
                await c.ListNodes(cluster_pb2.ListNodesRequest()),
            ]
        assert [a.epoch for a in answers] == [epoch] * len(answers)
    async with served(SqliteStore(tmp_path)) as (b, server), AsyncClient(f"127.0.0.1:{server.port}") as client:
        await client.list_pods()
        assert client.epoch == epoch
    async with served(MemoryStore()) as (b, server), AsyncClient(f"127.0.0.1:{server.port}") as client:
        await client.list_pods()
        assert client.epoch not in ("", epoch)


async def test_a_resumed_watch_gets_every_later_decision_once_or_out_of_range(tmp_path: Path) -> None:
    async with (
        served(SqliteStore(tmp_path), state={"decisions": {"maxEntries": 10}}) as (b, server),
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch,
    ):
        s = scheduler_pb2_grpc.SchedulerStub(ch)
        async with AsyncClient(f"127.0.0.1:{server.port}") as client:
            await client.feed([NODE])
            await client.submit([pod(f"p{i}") for i in range(4)])
            async with asyncio.timeout(10):
                while sum(1 for r in await client.list_pods() if r.phase == "Bound") < 4:  # noqa: ASYNC110 - a server's state, over gRPC
                    await asyncio.sleep(0.05)
        log = b.core.decisions
        await b.durable.sync()  # type: ignore[union-attr]
        last, epoch = log.published, b.durable.epoch  # type: ignore[union-attr]
        stream = s.WatchDecisionBatches(scheduler_pb2.WatchDecisionsRequest(since_serial=last - 3, epoch=epoch))
        got = await anext(aiter(stream))
        assert [d.serial for d in got.decisions] == [last - 2, last - 1, last] and got.epoch == epoch
        stream.cancel()
        cases = [
            (scheduler_pb2.WatchDecisionsRequest(since_serial=0), "was compacted; the oldest serial kept is"),
            (scheduler_pb2.WatchDecisionsRequest(since_serial=last, epoch="another"), "is not this server's"),
            (scheduler_pb2.WatchDecisionsRequest(since_serial=last + 5), "is past the last serial"),
        ]
        for request, words in cases:
            with pytest.raises(grpc.aio.AioRpcError) as e:
                async for _ in s.WatchDecisions(request):
                    pass
            assert e.value.code() == grpc.StatusCode.OUT_OF_RANGE and words in (e.value.details() or "")


PDB = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "budget", "namespace": "team"},
    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}},
}


async def test_submit_idempotency_keys_and_resync_over_grpc(tmp_path: Path) -> None:
    async with served(SqliteStore(tmp_path)) as (b, server), AsyncClient(f"127.0.0.1:{server.port}") as client:
        first = await client.submit([pod("a")], idempotency_keys={"team/a": "order-17"})
        again = await client.submit([pod("a", cpu="3")], idempotency_keys={"team/a": "order-17"})
        assert [(r.pod, r.uid, r.accepted, r.message) for r in again] == [
            (r.pod, r.uid, r.accepted, r.message) for r in first
        ]
        await client.feed([{**NODE, "metadata": {"name": f"n{i}"}} for i in range(4)])
        counts = await client.feed([NODE], resync=True)
        assert counts == {"Node": 1} and sorted(b.cluster.nodes) == ["n0"]
        await client.feed([PDB])
        assert list(b.cluster.pdbs) == ["team/budget"]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
            c = cluster_pb2_grpc.ClusterStub(ch)
            # PDBs and PodGroups resync too (they have deletes now).
            budgets = await c.UpsertPodDisruptionBudgets(cluster_pb2.UpsertPodDisruptionBudgetsRequest(resync=True))
            assert budgets.resync_deleted == 1 and not b.cluster.pdbs
            r = await c.UpsertNodes(cluster_pb2.UpsertNodesRequest(resync=True))
            assert r.resync_deleted == 1 and not b.cluster.nodes
