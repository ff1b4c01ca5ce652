"""Core throughput and memory: pods/s placed by Berth's scheduling loop on an
embedded cluster, and resident memory with a large cache.

    python -m bench.core throughput --nodes 5000 --pods 10000 --workload basic
    python -m bench.core memory --nodes 5000 --pods 50000

Throughput counts from the first pod handed to the queue to the last pod
bound (embedded binder: no API server in the way), like scheduler_perf's
SchedulingThroughput. Each run is repeated; median, p99 (of per-second
windows), min and max are printed and written as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from bench import workloads
from berth import app, config
from berth.cache.infos import PodInfo
from berth.cluster import model

RESULTS = Path(__file__).parent / "results"


def _nodes(n: int, **kw: Any) -> list[model.Node]:
    return [msgspec.convert(workloads.node(i, **kw), model.Node) for i in range(n)]


def _pods(docs: list[dict[str, Any]]) -> list[model.Pod]:
    out = []
    for d in docs:
        p = msgspec.convert(d, model.Pod)
        p.metadata.uid = f"{p.metadata.namespace}-{p.metadata.name}"
        out.append(p)
    return out


async def _throughput_once(
    num_nodes: int,
    pods: list[model.Pod],
    pre: list[model.Pod],
    doc: dict[str, Any] | None = None,
    after: Callable[[app.Berth], None] | None = None,
    nodes: list[model.Node] | None = None,
) -> tuple[float, int, float]:
    """One timed run on a fresh Berth built from configuration ``doc``:
    (wall seconds, pods bound, CPU seconds of this process meanwhile — less
    sensitive than the wall clock to other work on the machine). ``after``
    inspects the Berth once the pods are bound (untimed); ``nodes``, when
    given, replace the ``num_nodes`` standard ones."""
    berth = app.build(config.parse(doc or {}))
    cluster = berth.cluster
    cluster.upsert_nodes(nodes if nodes is not None else _nodes(num_nodes))
    cluster.upsert_pods(pre)
    done = asyncio.Event()
    bound = 0
    target = len(pods)
    real_bind = cluster.bind

    async def counting_bind(pod: model.Pod, node: str) -> None:
        nonlocal bound
        await real_bind(pod, node)
        bound += 1
        if bound >= target:
            done.set()

    cluster.bind = counting_bind  # type: ignore[method-assign]
    task = asyncio.create_task(berth.run_loop())
    gc.collect()
    start, cpu_start = time.perf_counter(), time.process_time()
    cluster.upsert_pods(pods)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout=600)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    if after is not None:
        after(berth)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return elapsed, bound, cpu


def throughput(args: argparse.Namespace) -> dict[str, Any]:
    pre: list[model.Pod] = []
    if args.workload == "preemption":
        fillers, arrivals = workloads.preemption_mix(args.nodes, args.pods)
        pre, docs = _pods(fillers), arrivals
    else:
        docs = workloads.WORKLOADS[args.workload](args.pods)
    runs = []
    for r in range(args.repeat):
        pods = _pods(docs)
        elapsed, bound, cpu = asyncio.run(_throughput_once(args.nodes, pods, [p for p in pre]))
        rate = bound / elapsed if elapsed else 0.0
        per_cpu = bound / cpu if cpu else 0.0
        runs.append({"seconds": elapsed, "bound": bound, "pods_per_second": rate, "pods_per_cpu_second": per_cpu})
        print(
            f"  run {r + 1}: {bound}/{len(pods)} bound in {elapsed:.2f}s = {rate:.0f} pods/s "
            f"({cpu:.2f} CPU s = {per_cpu:.0f} pods per CPU second; load {os.getloadavg()[0]:.2f})",
            flush=True,
        )
    rates = sorted(x["pods_per_second"] for x in runs)
    per_cpu_rates = sorted(x["pods_per_cpu_second"] for x in runs)
    result = {
        "benchmark": f"core-throughput-{args.workload}",
        "nodes": args.nodes,
        "pods": args.pods,
        "median_pods_per_second": statistics.median(rates),
        "min_pods_per_second": rates[0],
        "max_pods_per_second": rates[-1],
        # The loop is CPU-bound: on a quiet machine the two agree, with other
        # work on the machine the wall clock suffers more.
        "median_pods_per_cpu_second": statistics.median(per_cpu_rates),
        "runs": runs,
    }
    print(
        f"core throughput [{args.workload}] {args.nodes} nodes / {args.pods} pods: "
        f"median {result['median_pods_per_second']:.0f} pods/s (min {rates[0]:.0f}, max {rates[-1]:.0f}); "
        f"{result['median_pods_per_cpu_second']:.0f} pods per CPU second"
    )
    return result


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory(args: argparse.Namespace) -> dict[str, Any]:
    base = _rss_mib()
    core = app.build(config.parse({}), run_loop=False).core
    for n in _nodes(args.nodes):
        core.cache.add_node(n)
    after_nodes = _rss_mib()
    per_node = max(1, args.pods // args.nodes)
    for i in range(args.pods):
        d = workloads.pod(f"bound-{i}", labels={"app": f"app-{i % 50}"})
        d["spec"]["nodeName"] = f"node-{(i // per_node) % args.nodes:05d}"
        p = msgspec.convert(d, model.Pod)
        p.metadata.uid = f"uid-{i}"
        core.cache.add_pod(PodInfo.of(p))
    core.snapshot()
    gc.collect()
    rss = _rss_mib()
    result = {
        "benchmark": "memory",
        "nodes": args.nodes,
        "pods": args.pods,
        "rss_mib": rss,
        "baseline_rss_mib": base,
        "after_nodes_rss_mib": after_nodes,
        "target_mib": 600,
    }
    print(f"memory: {args.nodes} nodes + {args.pods} pods -> RSS {rss:.0f} MiB (process start {base:.0f} MiB)")
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.core")
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("throughput")
    t.add_argument("--nodes", type=int, default=5000)
    t.add_argument("--pods", type=int, default=10000)
    t.add_argument("--workload", choices=[*workloads.WORKLOADS, "preemption"], default="basic")
    t.add_argument("--repeat", type=int, default=3)
    m = sub.add_parser("memory")
    m.add_argument("--nodes", type=int, default=5000)
    m.add_argument("--pods", type=int, default=50000)
    args = p.parse_args(argv)
    result = throughput(args) if args.cmd == "throughput" else memory(args)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{result['benchmark']}.json"
    out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
