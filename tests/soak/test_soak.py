"""A bounded soak: ``berth serve`` on the demo cluster (as ``make run``), 50
connections mixing extender filter and prioritize (HTTP) with Explain,
Submit and DeletePods (gRPC) for a while; RSS and the latency's p99 must
plateau, not grow with the number of requests served.

``make test`` runs a short one (``BERTH_SOAK_SECONDS``, 15 s by default);
``make soak`` a long one (240 s). The figures per window are printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import grpc
import msgspec
import numpy as np
import pytest

from berth.adapters.grpc import convert
from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc
from berth.cluster import model
from tests.http.payloads import api_pod
from tests.support import demo_berth_serve

ROOT = Path(__file__).parents[2]
SECONDS = float(os.environ.get("BERTH_SOAK_SECONDS", "15"))
WINDOWS = max(6, int(SECONDS // 20))
HTTP_CONNECTIONS = 32
GRPC_CONNECTIONS = 18  # 50 in all
#: Pods each gRPC worker keeps submitted; older ones are deleted.
KEEP = 4

pytestmark = pytest.mark.soak


@dataclasses.dataclass(slots=True)
class Window:
    latencies: list[float] = dataclasses.field(default_factory=list)
    rss_kb: list[int] = dataclasses.field(default_factory=list)
    requests: int = 0

    def p(self, q: float) -> float:
        return float(np.percentile(self.latencies, q)) if self.latencies else 0.0


@dataclasses.dataclass(slots=True)
class Soak:
    pid: int
    started: float
    windows: list[Window]
    failures: list[str] = dataclasses.field(default_factory=list)
    ops: dict[str, int] = dataclasses.field(default_factory=dict)

    def window(self) -> Window | None:
        i = int((time.monotonic() - self.started) / (SECONDS / WINDOWS))
        return self.windows[i] if i < len(self.windows) else None

    def done(self, op: str, began: float, ok: bool, detail: str = "") -> None:
        self.ops[op] = self.ops.get(op, 0) + 1
        if not ok and len(self.failures) < 20:
            self.failures.append(f"{op}: {detail}")
        w = self.window()
        if w is not None:
            w.latencies.append(time.monotonic() - began)
            w.requests += 1


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


async def http_worker(soak: Soak, port: int, names: list[str], stop: asyncio.Event, n: int) -> None:
    # One connection per worker: the session's connector holds at most one.
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session:
        for k in itertools.count():
            if stop.is_set():
                return
            verb = "filter" if k % 2 == 0 else "prioritize"
            pod = api_pod(f"soak-http-{n}-{k % 50}", cpu=("100m", "500m", "2")[k % 3], memory="256Mi")
            body = json.dumps({"Pod": pod, "NodeNames": names[(k % 5) * 10 :] + names[: (k % 5) * 10]})
            began = time.monotonic()
            async with session.post(f"http://127.0.0.1:{port}/scheduler/{verb}", data=body) as resp:
                text = await resp.read()
                soak.done(verb, began, resp.status == 200, f"{resp.status} {text[:200]!r}")


async def grpc_worker(soak: Soak, port: int, stop: asyncio.Event, n: int) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        scheduler = scheduler_pb2_grpc.SchedulerStub(channel)
        cluster = cluster_pb2_grpc.ClusterStub(channel)
        submitted: list[str] = []
        for k in itertools.count():
            if stop.is_set():
                return
            began = time.monotonic()
            try:
                if k % 3 == 0:
                    pod = msgspec.convert(api_pod("soak-explain", cpu="500m"), type=model.Pod)
                    await scheduler.Explain(scheduler_pb2.ExplainRequest(pod=convert.pod_to_pb(pod), profile="berth"))
                    soak.done("explain", began, True)
                elif len(submitted) >= KEEP:
                    name = submitted.pop(0)
                    resp = await cluster.DeletePods(
                        cluster_pb2.DeletePodsRequest(pods=[cluster_pb2.PodRef(namespace="soak", name=name)])
                    )
                    soak.done("delete", began, resp.deleted == 1, f"deleted {resp.deleted} of soak/{name}")
                else:
                    name = f"soak-{n}-{k}"
                    raw = api_pod(name, namespace="soak", cpu="10m", memory="16Mi", uid=f"uid-soak-{n}-{k}")
                    raw["spec"]["schedulerName"] = "berth"
                    message = convert.pod_to_pb(msgspec.convert(raw, type=model.Pod))
                    resp = await scheduler.Submit(scheduler_pb2.SubmitRequest(pods=[message]))
                    ok = bool(resp.results) and resp.results[0].accepted
                    soak.done("submit", began, ok, str(resp.results[0].message if resp.results else "no result"))
                    submitted.append(name)
            except grpc.aio.AioRpcError as e:
                soak.done("grpc", began, False, f"{e.code().name}: {e.details()}")


async def sample_rss(soak: Soak, stop: asyncio.Event) -> None:
    while not stop.is_set():
        w = soak.window()
        if w is not None:
            w.rss_kb.append(rss_kb(soak.pid))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.25)


@contextlib.asynccontextmanager
async def load(soak: Soak, http_port: int, grpc_port: int, names: list[str]) -> AsyncIterator[None]:
    stop = asyncio.Event()
    tasks = [
        *(asyncio.create_task(http_worker(soak, http_port, names, stop, i)) for i in range(HTTP_CONNECTIONS)),
        *(asyncio.create_task(grpc_worker(soak, grpc_port, stop, i)) for i in range(GRPC_CONNECTIONS)),
        asyncio.create_task(sample_rss(soak, stop)),
    ]
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(*tasks)


@pytest.mark.timeout(int(SECONDS) + 120)
async def test_rss_and_p99_plateau_under_50_connections_of_mixed_load() -> None:
    with demo_berth_serve() as (proc, http_port, grpc_port, _):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            listed = await cluster_pb2_grpc.ClusterStub(channel).ListNodes(cluster_pb2.ListNodesRequest())
        names = [n.name for n in listed.nodes]
        soak = Soak(proc.pid, time.monotonic(), [Window() for _ in range(WINDOWS)])
        async with load(soak, http_port, grpc_port, names):
            await asyncio.sleep(SECONDS)

    total = sum(w.requests for w in soak.windows)
    print(f"\nsoak: {total} requests in {SECONDS:.0f}s ({total / SECONDS:.0f}/s), ops {soak.ops}")
    for i, w in enumerate(soak.windows):
        print(
            f"  window {i}: {w.requests} requests, RSS max {max(w.rss_kb, default=0) / 1024:.1f} MB, "
            f"p50 {w.p(50) * 1000:.1f} ms, p99 {w.p(99) * 1000:.1f} ms"
        )
    assert not soak.failures, soak.failures
    third = WINDOWS // 3
    middle = max(max(w.rss_kb, default=0) for w in soak.windows[third : 2 * third])
    last = max(max(w.rss_kb, default=0) for w in soak.windows[2 * third :])
    assert last <= middle * 1.10 + 16 * 1024, f"RSS still grows: {middle / 1024:.1f} MB -> {last / 1024:.1f} MB"
    # p99 over the windows after warm-up in the first half, against the last
    # third's: pooled, so one stall of the busy 2-core machine (the load
    # generator shares it) does not decide; 2x and 10 ms of slack for the long
    # soak, 3x and 50 ms for `make test`'s 15 s (its windows hold ~1 s of
    # requests each, where one GC or CI neighbour moves a p99 by 100s of ms).
    early = _p99(soak.windows[1 : 1 + third])
    late = _p99(soak.windows[2 * third :])
    factor, slack = (2.0, 0.010) if SECONDS >= 60 else (3.0, 0.050)
    print(f"  p99 after warm-up {early * 1000:.1f} ms, in the last third {late * 1000:.1f} ms")
    assert late <= factor * early + slack, f"p99 grows: {early * 1000:.1f} ms -> {late * 1000:.1f} ms"


def _p99(windows: list[Window]) -> float:
    return float(np.percentile([x for w in windows for x in w.latencies], 99))
