"""gRPC API benchmarks against a ``berth serve`` process on loopback.

    python -m bench.grpc_api --nodes 5000 --pods 10000 --batch 500

- Submit: 10000 pods in batches; submit throughput (pods/s accepted) and the
  time until WatchDecisions has reported every one BOUND (placement included).
- Explain: closed-loop Explain of one pod against every node of the cache;
  median, p99, min, max.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

import grpc
import msgspec

from bench import server, stats, workloads
from berth.adapters.grpc import convert
from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from berth.cluster import model


def _pb(doc: dict[str, Any]) -> Any:
    return convert.pod_to_pb(msgspec.convert(doc, model.Pod))


async def _submit(port: int, pods: list[Any], batch: int) -> dict[str, float]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = scheduler_pb2_grpc.SchedulerStub(ch)
        stream = stub.WatchDecisions(scheduler_pb2.WatchDecisionsRequest())
        want = {f"{p.metadata.namespace}/{p.metadata.name}" for p in pods}
        bound: set[str] = set()
        all_bound = asyncio.Event()

        async def watch() -> None:
            async for d in stream:
                if d.kind == scheduler_pb2.Decision.BOUND and d.pod in want:
                    bound.add(d.pod)
                    if len(bound) == len(want):
                        all_bound.set()
                        return

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0.2)  # the stream is open before the first Submit
        start = time.perf_counter()
        accepted = 0
        for k in range(0, len(pods), batch):
            resp = await stub.Submit(scheduler_pb2.SubmitRequest(pods=pods[k : k + batch]))
            accepted += sum(r.accepted for r in resp.results)
        submitted = time.perf_counter() - start
        try:
            await asyncio.wait_for(all_bound.wait(), timeout=600)
        finally:
            watcher.cancel()
            stream.cancel()
        placed = time.perf_counter() - start
    print(
        f"  submit: {accepted} pods accepted in {submitted:.2f}s = {accepted / submitted:.0f} pods/s; "
        f"all bound after {placed:.2f}s = {len(bound) / placed:.0f} pods/s",
        flush=True,
    )
    return {
        "accepted": accepted,
        "submit_seconds": submitted,
        "submit_pods_per_second": accepted / submitted,
        "bound": len(bound),
        "all_bound_seconds": placed,
        "placed_pods_per_second": len(bound) / placed,
    }


async def _explain(port: int, pod: Any, iterations: int, warmup: int) -> dict[str, float]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = scheduler_pb2_grpc.SchedulerStub(ch)
        samples = []
        for k in range(warmup + iterations):
            t0 = time.perf_counter()
            resp = await stub.Explain(scheduler_pb2.ExplainRequest(pod=pod))
            if k >= warmup:
                samples.append(time.perf_counter() - t0)
        assert len(resp.nodes) > 0
    return stats.latency_summary(samples)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.grpc_api")
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--pods", type=int, default=10000)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--iterations", type=int, default=50)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    nodes = [workloads.node(i) for i in range(args.nodes)]
    print(f"gRPC: Submit {args.pods} pods in batches of {args.batch}; Explain at {args.nodes} nodes", flush=True)
    result: dict[str, Any] = {"benchmark": "grpc", "nodes": args.nodes, "pods": args.pods, "batch": args.batch}
    submits = []
    for r in range(args.repeat):
        pods = [_pb(workloads.pod(f"sub-{r}-{i}")) for i in range(args.pods)]
        with server.berth(nodes) as ports:
            submits.append(asyncio.run(_submit(ports["grpc"], pods, args.batch)))
    result["submit"] = {
        "submit_pods_per_second": stats.over_runs(submits, "submit_pods_per_second"),
        "placed_pods_per_second": stats.over_runs(submits, "placed_pods_per_second"),
        "runs": submits,
    }
    probe = _pb(workloads.pod("explain-probe"))
    with server.berth(nodes) as ports:
        runs = [asyncio.run(_explain(ports["grpc"], probe, args.iterations, 5)) for _ in range(args.repeat)]
    med = stats.over_runs(runs, "median_ms")
    p99 = stats.over_runs(runs, "p99_ms")
    print(f"  explain @{args.nodes} nodes: median {med['median']:.1f} ms, p99 {p99['median']:.1f} ms", flush=True)
    result["explain"] = {"median_ms": med, "p99_ms": p99, "runs": runs}
    print(f"  -> {stats.write('grpc', result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
