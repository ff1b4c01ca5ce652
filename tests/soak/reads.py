"""The expensive reads of issue 28, run beside the soak's extender load:
WhatIf until the cluster is full, Why over thousands of pending pods, large
feeds (UpsertPods and DeletePods of thousands of pods), a thousand decision
streams opened at once, and a /healthz prober. Each worker runs in a closed
loop and records its latencies in the :class:`~tests.soak.load.Soak` under
its own name (whatif, why, feed, healthz; streams are counted apart).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import random
import time
from collections.abc import AsyncIterator

import aiohttp
import grpc
import msgspec

from berth.adapters.grpc import convert
from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, model_pb2, scheduler_pb2, scheduler_pb2_grpc
from berth.cluster import model
from tests.http.payloads import api_pod
from tests.soak.load import CALL_TIMEOUT, Soak

__all__ = ["KINDS", "NAMESPACE", "Streams", "expensive_reads", "feed_pending"]

NAMESPACE = "reads"
#: Pending pods Why is asked about (none fits: 64 CPUs is more than any demo node has).
PENDING = 3000
#: Pods in each feed call of the churn worker.
FEED_BATCH = 2000
#: Decision streams asked for at once.
STREAMS = 1000
#: The reads there are.
KINDS = frozenset({"whatif", "why", "feed", "streams"})


def _pending_pod(name: str) -> model_pb2.Pod:
    raw = api_pod(name, namespace=NAMESPACE, cpu="64", memory="1Gi", uid=f"uid-{NAMESPACE}-{name}")
    raw["spec"]["schedulerName"] = "berth"
    return convert.pod_to_pb(msgspec.convert(raw, type=model.Pod))


async def feed_pending(grpc_port: int, n: int = PENDING, batch: int = 1000) -> None:
    """``n`` pending pods that fit nowhere, fed in batches of ``batch``."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        cluster = cluster_pb2_grpc.ClusterStub(channel)
        for start in range(0, n, batch):
            pods = [_pending_pod(f"big-{i}") for i in range(start, min(n, start + batch))]
            await cluster.UpsertPods(cluster_pb2.UpsertPodsRequest(pods=pods), timeout=120)


@dataclasses.dataclass(slots=True)
class Streams:
    """The decision streams asked for: how many were served, refused (and how), and decisions read."""

    opened: int = 0
    refused: dict[str, int] = dataclasses.field(default_factory=dict)
    #: The first refusal's details, per code.
    details: dict[str, str] = dataclasses.field(default_factory=dict)
    decisions: int = 0


async def _timed(soak: Soak, op: str, call: asyncio.Future[object] | object) -> None:
    began = time.monotonic()
    try:
        await call  # type: ignore[misc]
        soak.done(op, began, True)
    except grpc.aio.AioRpcError as e:
        soak.done(op, began, False, f"{e.code().name}: {e.details()}")
        await asyncio.sleep(0.05)


async def _whatif(soak: Soak, stub: scheduler_pb2_grpc.SchedulerStub, stop: asyncio.Event) -> None:
    probe = convert.pod_to_pb(msgspec.convert(api_pod("whatif", namespace=NAMESPACE, cpu="100m"), type=model.Pod))
    while not stop.is_set():
        # 0: as many replicas as fit, one after another (the cost model caps the work).
        await _timed(soak, "whatif", stub.WhatIf(scheduler_pb2.WhatIfRequest(pod=probe, replicas=0), timeout=60))


async def _why(soak: Soak, stub: scheduler_pb2_grpc.SchedulerStub, stop: asyncio.Event, seed: int) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        name = f"big-{rng.randrange(PENDING)}"
        await _timed(
            soak, "why", stub.Why(scheduler_pb2.WhyRequest(namespace=NAMESPACE, name=name), timeout=CALL_TIMEOUT)
        )


async def _feeds(soak: Soak, cluster: cluster_pb2_grpc.ClusterStub, stop: asyncio.Event) -> None:
    for gen in itertools.count():
        if stop.is_set():
            return
        names = [f"churn-{gen}-{i}" for i in range(FEED_BATCH)]
        pods = [_pending_pod(n) for n in names]
        await _timed(soak, "feed", cluster.UpsertPods(cluster_pb2.UpsertPodsRequest(pods=pods), timeout=60))
        refs = [cluster_pb2.PodRef(namespace=NAMESPACE, name=n) for n in names]
        await _timed(soak, "feed", cluster.DeletePods(cluster_pb2.DeletePodsRequest(pods=refs), timeout=60))


async def _stream(stub: scheduler_pb2_grpc.SchedulerStub, streams: Streams, stop: asyncio.Event) -> None:
    call = stub.WatchDecisions(scheduler_pb2.WatchDecisionsRequest(replay=True))
    try:
        first = True
        async for _decision in call:
            if first:
                streams.opened += 1
                first = False
            streams.decisions += 1
            if stop.is_set():
                break
    except grpc.aio.AioRpcError as e:
        code = e.code().name
        streams.refused[code] = streams.refused.get(code, 0) + 1
        streams.details.setdefault(code, str(e.details()))
    finally:
        call.cancel()


async def _healthz(soak: Soak, port: int, stop: asyncio.Event) -> None:
    async with aiohttp.ClientSession() as session:
        while not stop.is_set():
            began = time.monotonic()
            try:
                async with session.get(
                    f"http://127.0.0.1:{port}/healthz", timeout=aiohttp.ClientTimeout(total=CALL_TIMEOUT)
                ) as resp:
                    await resp.read()
                    soak.done("healthz", began, resp.status == 200, f"/healthz {resp.status}")
            except (aiohttp.ClientError, OSError) as e:
                soak.done("healthz", began, False, f"/healthz {type(e).__name__}: {e}")
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def healthz(soak: Soak, http_port: int) -> AsyncIterator[None]:
    """The /healthz prober alone (the baseline's)."""
    stop = asyncio.Event()
    task = asyncio.create_task(_healthz(soak, http_port, stop))
    try:
        yield
    finally:
        stop.set()
        await task


@contextlib.asynccontextmanager
async def expensive_reads(
    soak: Soak, streams: Streams, http_port: int, grpc_port: int, kinds: frozenset[str] = KINDS
) -> AsyncIterator[None]:
    """WhatIf, Why (two callers), feeds and :data:`STREAMS` decision streams
    over four channels (those of ``kinds``), for the ``async with`` block."""
    stop = asyncio.Event()
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") for _ in range(4)]
    schedulers = [scheduler_pb2_grpc.SchedulerStub(c) for c in channels]
    workers = [
        *([asyncio.create_task(_whatif(soak, schedulers[0], stop))] if "whatif" in kinds else []),
        *([asyncio.create_task(_why(soak, schedulers[i], stop, i)) for i in (1, 2)] if "why" in kinds else []),
        *(
            [asyncio.create_task(_feeds(soak, cluster_pb2_grpc.ClusterStub(channels[3]), stop))]
            if "feed" in kinds
            else []
        ),
    ]
    n = STREAMS if "streams" in kinds else 0
    held = [asyncio.create_task(_stream(schedulers[i % 4], streams, stop)) for i in range(n)]
    try:
        yield
    finally:
        stop.set()
        for t in held:
            t.cancel()
        await asyncio.gather(*held, return_exceptions=True)
        await asyncio.gather(*workers)  # each ends after its call in flight
        for c in channels:
            await c.close()
