"""The 50-connection mixed load of the soak test and of ``bench.memory``:
extender filter and prioritize over HTTP (one keep-alive connection per
worker) beside Explain, Submit and DeletePods over gRPC, each worker in a
closed loop. Latencies are kept per window (does p99 plateau?) and per
operation (is one door starved by the other?); RSS is sampled from /proc.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import grpc
import msgspec
import numpy as np

from berth.adapters.grpc import convert
from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc
from berth.cluster import model
from tests.http.payloads import api_pod

__all__ = ["GRPC_CONNECTIONS", "HTTP_CONNECTIONS", "KEEP", "Soak", "Window", "load", "rss_kb"]

HTTP_CONNECTIONS = 32
GRPC_CONNECTIONS = 18  # 50 in all
#: Pods each gRPC worker keeps submitted; older ones are deleted.
KEEP = 4
#: No call of the load waits longer (a server that stopped answering must not hang the run).
CALL_TIMEOUT = 30.0


@dataclasses.dataclass(slots=True)
class Window:
    latencies: list[float] = dataclasses.field(default_factory=list)
    rss_kb: list[int] = dataclasses.field(default_factory=list)
    requests: int = 0

    def p(self, q: float) -> float:
        return float(np.percentile(self.latencies, q)) if self.latencies else 0.0


@dataclasses.dataclass(slots=True)
class Soak:
    """One load run: ``seconds`` long, cut into ``windows`` equal windows."""

    pid: int
    seconds: float
    windows: list[Window]
    started: float = dataclasses.field(default_factory=time.monotonic)
    failures: list[str] = dataclasses.field(default_factory=list)
    ops: dict[str, int] = dataclasses.field(default_factory=dict)
    #: Latencies (s) of every call, by operation (filter, prioritize, explain, submit, delete).
    by_op: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    #: Prefixes the names (and uids) of the pods this run submits: a second
    #: run on the same server must not repeat the first's idempotency keys.
    tag: str = dataclasses.field(default_factory=lambda: f"{time.monotonic_ns() % 10**9:x}")

    @classmethod
    def new(cls, pid: int, seconds: float, windows: int) -> Soak:
        return cls(pid, seconds, [Window() for _ in range(windows)])

    def window(self) -> Window | None:
        i = int((time.monotonic() - self.started) / (self.seconds / len(self.windows)))
        return self.windows[i] if i < len(self.windows) else None

    def done(self, op: str, began: float, ok: bool, detail: str = "") -> None:
        self.ops[op] = self.ops.get(op, 0) + 1
        took = time.monotonic() - began
        self.by_op.setdefault(op, []).append(took)
        if not ok and len(self.failures) < 20:
            self.failures.append(f"{op}: {detail}")
        w = self.window()
        if w is not None:
            w.latencies.append(took)
            w.requests += 1

    def percentiles_ms(self, op: str) -> dict[str, float]:
        """p50 and p99 of one operation's latencies, in milliseconds."""
        xs = self.by_op.get(op, [])
        if not xs:
            return {"n": 0, "p50_ms": float("nan"), "p99_ms": float("nan")}
        p50, p99 = np.percentile(xs, [50, 99])
        return {"n": len(xs), "p50_ms": float(p50) * 1000, "p99_ms": float(p99) * 1000}


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
            try:
                async with session.post(
                    f"http://127.0.0.1:{port}/scheduler/{verb}",
                    data=body,
                    headers={"Content-Type": "application/json"},
                    timeout=aiohttp.ClientTimeout(total=CALL_TIMEOUT),
                ) as resp:
                    text = await resp.read()
                    soak.done(verb, began, resp.status == 200, f"{resp.status} {text[:200]!r}")
            except (aiohttp.ClientError, OSError) as e:
                # A failure, counted (a server shutting down refuses: the SIGTERM test expects it).
                soak.done(verb, began, False, f"{type(e).__name__}: {e}")
                await asyncio.sleep(0.01)


async def grpc_worker(soak: Soak, port: int, stop: asyncio.Event, n: int) -> None:
    """Explain one call in three; otherwise Submit a pod, or delete the
    oldest once ``KEEP`` are in: submit/delete churn with unique names."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        scheduler = scheduler_pb2_grpc.SchedulerStub(channel)
        cluster = cluster_pb2_grpc.ClusterStub(channel)
        submitted: list[str] = []
        probe = convert.pod_to_pb(msgspec.convert(api_pod("soak-explain", cpu="500m"), type=model.Pod))
        for k in itertools.count():
            if stop.is_set():
                break
            began = time.monotonic()
            try:
                if k % 3 == 0:
                    await scheduler.Explain(
                        scheduler_pb2.ExplainRequest(pod=probe, profile="berth"), timeout=CALL_TIMEOUT
                    )
                    soak.done("explain", began, True)
                elif len(submitted) >= KEEP:
                    name = submitted.pop(0)
                    resp = await cluster.DeletePods(
                        cluster_pb2.DeletePodsRequest(pods=[cluster_pb2.PodRef(namespace="soak", name=name)]),
                        timeout=CALL_TIMEOUT,
                    )
                    soak.done("delete", began, resp.deleted == 1, f"deleted {resp.deleted} of soak/{name}")
                else:
                    name = f"soak-{soak.tag}-{n}-{k}"
                    raw = api_pod(name, namespace="soak", cpu="10m", memory="16Mi", uid=f"uid-{name}")
                    raw["spec"]["schedulerName"] = "berth"
                    message = convert.pod_to_pb(msgspec.convert(raw, type=model.Pod))
                    resp = await scheduler.Submit(scheduler_pb2.SubmitRequest(pods=[message]), timeout=CALL_TIMEOUT)
                    ok = bool(resp.results) and resp.results[0].accepted
                    soak.done("submit", began, ok, str(resp.results[0].message if resp.results else "no result"))
                    submitted.append(name)
            except grpc.aio.AioRpcError as e:
                soak.done("grpc", began, False, f"{e.code().name}: {e.details()}")
                await asyncio.sleep(0.01)
        # Leave the cluster as found: the next phase starts from the same pods.
        if submitted:
            refs = [cluster_pb2.PodRef(namespace="soak", name=name) for name in submitted]
            with contextlib.suppress(grpc.aio.AioRpcError):
                await cluster.DeletePods(cluster_pb2.DeletePodsRequest(pods=refs), timeout=CALL_TIMEOUT)


async def sample_rss(soak: Soak, stop: asyncio.Event) -> None:
    while not stop.is_set():
        w = soak.window()
        if w is not None:
            try:
                w.rss_kb.append(rss_kb(soak.pid))
            except (AssertionError, OSError):
                return  # the process has exited (the SIGTERM test ends it under load)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.25)


@contextlib.asynccontextmanager
async def load(
    soak: Soak,
    http_port: int,
    grpc_port: int,
    names: list[str],
    *,
    http_connections: int = HTTP_CONNECTIONS,
    grpc_connections: int = GRPC_CONNECTIONS,
) -> AsyncIterator[None]:
    """The workers run for the ``async with`` block (0 HTTP connections: the
    gRPC door alone, the reference for fairness)."""
    stop = asyncio.Event()
    tasks = [
        *(asyncio.create_task(http_worker(soak, http_port, names, stop, i)) for i in range(http_connections)),
        *(asyncio.create_task(grpc_worker(soak, grpc_port, stop, i)) for i in range(grpc_connections)),
        asyncio.create_task(sample_rss(soak, stop)),
    ]
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(*tasks)


async def node_names(grpc_port: int) -> list[str]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        listed = await cluster_pb2_grpc.ClusterStub(channel).ListNodes(cluster_pb2.ListNodesRequest())
    return [n.name for n in listed.nodes]
