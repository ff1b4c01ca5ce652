"""Memory of a real ``berth serve`` and fairness between its two doors.

    python -m bench.memory footprint --nodes 5000 --pods 50000
    python -m bench.memory churn --minutes 10

``footprint``: ``berth serve`` (a separate process, ``bench.server``) on
``--nodes`` API-server-shaped nodes (conditions, addresses, nodeInfo,
images); ``--pods`` pods shaped like a Deployment's (labels, owner
reference, annotations, a container with requests, limits and a port) are
submitted over gRPC in batches and scheduled by its loop; RSS from
``/proc/PID/status`` once every pod is BOUND and the server has been idle
for a moment (its own collections have run), against RSS with the nodes
alone: bytes per bound pod.

``churn``: the soak's 50-connection mixed load (``tests/soak/load.py``: 32
HTTP connections of extender filter/prioritize, 18 gRPC connections of
Explain, Submit and DeletePods with unique names) for ``--minutes``; RSS
after the first minute and at the end. Before it, in the same run and on the
same server, the gRPC workers alone for ``--reference-seconds``: Explain's
and Submit's p50/p99 without HTTP saturation, beside the same figures under
it — a door that starves the other shows as the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import msgspec

from bench import server, stats, workloads
from berth.adapters.grpc import convert
from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from berth.cluster import model
from tests.soak import load as soak_load

TARGET_FOOTPRINT_MB = 300
TARGET_CHURN_GROWTH = 0.10


def _rss_mib(pid: int) -> float:
    return soak_load.rss_kb(pid) / 1024


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def realistic_pod(i: int, replica_sets: int = 500) -> dict[str, Any]:
    """A Deployment's pod as the API server stores it, in what the model keeps
    (managedFields and the rest are skipped at decode time anyway)."""
    rs = i % replica_sets
    doc = workloads.pod(
        f"web-{rs}-{i:06d}",
        namespace=f"team-{rs % 20}",
        labels={"app": f"web-{rs}", "pod-template-hash": f"{rs:010x}", "tier": "backend"},
    )
    doc["metadata"].update(
        {
            "uid": f"00000000-0000-4000-9000-{i:012d}",
            "annotations": {
                "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z",
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "8080",
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"web-{rs}-{rs:010x}",
                    "uid": f"00000000-0000-4000-a000-{rs:012d}",
                    "controller": True,
                }
            ],
        }
    )
    c = doc["spec"]["containers"][0]
    c["name"] = "app"
    c["image"] = f"registry.example.com/team-{rs % 20}/web:1.{rs % 7}.0"
    c["resources"]["limits"] = {"cpu": "500m", "memory": "1Gi"}
    c["ports"] = [{"containerPort": 8080, "protocol": "TCP"}]
    return doc


async def _submit_all(port: int, pods: list[Any], batch: int) -> float:
    """Submit ``pods`` and wait until the decision stream reported each one
    BOUND; seconds taken. A stream ended for falling behind (its backlog
    bound) is reopened with replay. No pods: nothing to wait for (the
    stream would never send a batch)."""
    if not pods:
        return 0.0
    want = {f"{p.metadata.namespace}/{p.metadata.name}" for p in pods}
    bound: set[str] = set()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = scheduler_pb2_grpc.SchedulerStub(ch)

        async def watch() -> None:
            replay = False
            while True:
                stream = stub.WatchDecisionBatches(scheduler_pb2.WatchDecisionsRequest(replay=replay))
                try:
                    async for b in stream:
                        bound.update(d.pod for d in b.decisions if d.kind == scheduler_pb2.Decision.BOUND)
                        if want <= bound:
                            return
                except grpc.aio.AioRpcError as e:
                    if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                        raise
                    print(f"  decision stream: {e.details()}; reopened with replay", flush=True)
                    replay = True

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0.2)  # the stream is open before the first Submit
        start = time.perf_counter()
        for k in range(0, len(pods), batch):
            resp = await stub.Submit(scheduler_pb2.SubmitRequest(pods=pods[k : k + batch]))
            refused = [r.message for r in resp.results if not r.accepted]
            if refused:
                raise RuntimeError(f"Submit refused {len(refused)} pods: {refused[:3]}")
        await asyncio.wait_for(watcher, timeout=1800)  # its error, if any, is raised here
        return time.perf_counter() - start


def footprint(args: argparse.Namespace) -> dict[str, Any]:
    nodes = [workloads.node(i, realistic=True) for i in range(args.nodes)]
    pods = [convert.pod_to_pb(msgspec.convert(realistic_pod(i), model.Pod)) for i in range(args.pods)]
    print(f"memory footprint: berth serve, {args.nodes} realistic nodes + {args.pods} pods", flush=True)
    with server.berth(nodes) as ports:
        pid = ports["pid"]
        time.sleep(args.settle)
        with_nodes = _rss_mib(pid)
        took = asyncio.run(_submit_all(ports["grpc"], pods, args.batch))
        time.sleep(args.settle)
        rss = _rss_mib(pid)
        cpu = _cpu_seconds(pid)
    per_pod = (rss - with_nodes) * 1024 * 1024 / args.pods if args.pods else None
    print(
        f"  RSS with nodes {with_nodes:.0f} MiB; with {args.pods} bound pods {rss:.0f} MiB "
        f"({rss * 1.048576:.0f} MB; target <= {TARGET_FOOTPRINT_MB} MB); "
        f"{'no pods' if per_pod is None else f'{per_pod:.0f} bytes/pod'}; "
        f"pods bound in {took:.1f}s; server CPU {cpu:.0f}s; load {_loadavg()}",
        flush=True,
    )
    return {
        "nodes": args.nodes,
        "pods": args.pods,
        "rss_with_nodes_mib": with_nodes,
        "rss_mib": rss,
        "rss_mb": rss * 1.048576,
        "bytes_per_pod": per_pod,
        "bind_seconds": took,
        "server_cpu_seconds": cpu,
        "target_mb": TARGET_FOOTPRINT_MB,
        "loadavg": _loadavg(),
    }


async def _phase(pid: int, ports: dict[str, int], names: list[str], seconds: float, http: int) -> soak_load.Soak:
    soak = soak_load.Soak.new(pid, seconds, max(1, round(seconds / 10)))
    async with soak_load.load(soak, ports["http"], ports["grpc"], names, http_connections=http):
        await asyncio.sleep(seconds)
    return soak


def _rss_at(soak: soak_load.Soak, seconds: float) -> float:
    """Max RSS (MiB) sampled in the window holding ``seconds`` since the phase began."""
    i = min(len(soak.windows) - 1, int(seconds / (soak.seconds / len(soak.windows))))
    samples = next((w.rss_kb for w in soak.windows[i::-1] if w.rss_kb), [0])
    return max(samples) / 1024


def churn(args: argparse.Namespace) -> dict[str, Any]:
    nodes = [workloads.node(i, realistic=True) for i in range(args.nodes)]
    seconds = args.minutes * 60
    mark = min(60.0, seconds / 2)
    print(
        f"memory churn: berth serve, {args.nodes} nodes; gRPC alone {args.reference_seconds:.0f}s, "
        f"then {soak_load.HTTP_CONNECTIONS}+{soak_load.GRPC_CONNECTIONS} connections for {args.minutes:g} min",
        flush=True,
    )
    with server.berth(nodes) as ports:
        pid = ports["pid"]
        names = asyncio.run(soak_load.node_names(ports["grpc"]))
        alone = asyncio.run(_phase(pid, ports, names, args.reference_seconds, 0))
        start_rss = _rss_mib(pid)
        cpu0 = _cpu_seconds(pid)
        mixed = asyncio.run(_phase(pid, ports, names, seconds, soak_load.HTTP_CONNECTIONS))
        cpu = _cpu_seconds(pid) - cpu0
    failures = alone.failures + mixed.failures
    first, last = _rss_at(mixed, mark), _rss_at(mixed, seconds)
    total = sum(w.requests for w in mixed.windows)
    doors: dict[str, Any] = {}
    for op in ("explain", "submit"):
        ref, loaded = alone.percentiles_ms(op), mixed.percentiles_ms(op)
        doors[op] = {
            "alone": ref,
            "with_http": loaded,
            "p50_ratio": loaded["p50_ms"] / ref["p50_ms"],
            "p99_ratio": loaded["p99_ms"] / ref["p99_ms"],
        }
        print(
            f"  {op}: gRPC alone p50 {ref['p50_ms']:.1f} ms p99 {ref['p99_ms']:.1f} ms; "
            f"with HTTP saturation p50 {loaded['p50_ms']:.1f} ms p99 {loaded['p99_ms']:.1f} ms "
            f"(x{doors[op]['p50_ratio']:.2f} / x{doors[op]['p99_ratio']:.2f})",
            flush=True,
        )
    for i, w in enumerate(mixed.windows):
        at = i * mixed.seconds / len(mixed.windows)
        print(f"    {at:5.0f}s: {w.requests} req, RSS max {max(w.rss_kb, default=0) / 1024:.1f} MiB")
    growth = last / first - 1 if first else float("nan")
    print(
        f"  {total} requests in {seconds:.0f}s ({total / seconds:.0f}/s; server CPU {cpu:.0f}s); RSS before "
        f"{start_rss:.0f} MiB, at {mark:.0f}s {first:.0f} MiB, at {seconds:.0f}s {last:.0f} MiB: {growth:+.1%} "
        f"(target <= +{TARGET_CHURN_GROWTH:.0%}); load {_loadavg()}",
        flush=True,
    )
    if failures:
        print(f"  failures: {failures[:5]}", flush=True)
    return {
        "nodes": args.nodes,
        "minutes": args.minutes,
        "requests": total,
        "requests_per_second": total / seconds,
        "ops": mixed.ops,
        "rss_start_mib": start_rss,
        "rss_first_minute_mib": first,
        "rss_end_mib": last,
        "rss_growth": growth,
        "growth_percent": growth * 100,
        "rss_windows_mib": [max(w.rss_kb, default=0) / 1024 for w in mixed.windows],
        "doors": doors,
        "server_cpu_seconds": cpu,
        "failures": failures[:20],
        "target_growth": TARGET_CHURN_GROWTH,
        "loadavg": _loadavg(),
    }


def _count(text: str) -> int:
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n}: must not be negative")
    return n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.memory")
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("footprint")
    f.add_argument("--nodes", type=int, default=5000)
    f.add_argument("--pods", type=_count, default=50000)
    f.add_argument("--batch", type=int, default=500)
    f.add_argument("--settle", type=float, default=3.0, help="idle seconds before each RSS reading")
    c = sub.add_parser("churn")
    c.add_argument("--nodes", type=int, default=50, help="the demo cluster's size, as the soak")
    c.add_argument("--minutes", type=float, default=10.0)
    c.add_argument("--reference-seconds", type=float, default=30.0)
    args = p.parse_args(argv)
    if args.cmd == "footprint":
        result = {"benchmark": "memory-serve", **footprint(args)}
        print(f"  -> {stats.write('memory-serve', result)}")
        return 0
    result = {"benchmark": "memory-churn", **churn(args)}
    print(f"  -> {stats.write('memory-churn', result)}")
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
