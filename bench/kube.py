"""Berth and the real kube-scheduler on the same API server, side by side.

    python -m bench.kube --nodes 1000 --pods 2000 --workload basic

The end-to-end bed (tests/e2e/controlplane: etcd and kube-apiserver built
from their Go modules) gets ``--nodes`` Nodes; then, for each scheduler in
turn, ``--pods`` pending pods of the workload (bench/workloads.py, the same
definitions as the in-process benchmark) are created *before* the scheduler
starts, and the pods/s between the first and the last binding is measured
by watching the pods. Both use the same kubeconfig; kube-scheduler's client
QPS/burst are raised to ``--qps`` (the default 50 would cap it near 50
pods/s) and Berth's client is not rate-limited, so the API server is the
shared ceiling. Each scheduler's pods are deleted before the next run.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench import server, stats, workloads

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.e2e.controlplane import bed  # noqa: E402


def _create_all(kube: bed.Kube, objs: list[dict[str, Any]], workers: int = 16) -> None:
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for _ in pool.map(kube.create, objs):
            pass


def _bound_count(kube: bed.Kube, namespace: str) -> int:
    body = kube.ok("GET", f"/api/v1/namespaces/{namespace}/pods", fieldSelector="spec.nodeName!=")
    return len(body["items"])


def _measure(kube: bed.Kube, namespace: str, total: int, timeout: float) -> dict[str, float]:
    first = last = None
    seen = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and seen < total:
        n = _bound_count(kube, namespace)
        now = time.monotonic()
        if n > 0 and first is None:
            first = now
        if n > seen:
            seen, last = n, now
        time.sleep(0.1)
    if first is None or last is None or last <= first:
        return {"bound": seen, "pods_per_second": 0.0, "seconds": 0.0}
    return {"bound": seen, "pods_per_second": (seen - 1) / (last - first), "seconds": last - first}


def _pods(workload: str, n: int, scheduler: str, namespace: str) -> list[dict[str, Any]]:
    docs = workloads.WORKLOADS[workload](n)
    for d in docs:
        d["metadata"]["namespace"] = namespace
        d["spec"]["schedulerName"] = scheduler
    return docs


def _run(cp: bed.ControlPlane, kube: bed.Kube, args: argparse.Namespace, which: str, rep: int) -> dict[str, float]:
    ns = f"bench-{which}-{rep}"
    cp.ensure_namespace(ns)
    scheduler = "default-scheduler" if which == "kube-scheduler" else "berth"
    _create_all(kube, _pods(args.workload, args.pods, scheduler, ns))
    if which == "kube-scheduler":
        proc = cp.start_kube_scheduler(
            {"clientConnection": {"qps": args.qps, "burst": args.qps}, "percentageOfNodesToScore": 0},
            name=f"ks-bench-{rep}",
        )
    else:
        cfg_path = cp.workdir / f"berth-bench-{rep}.yaml"
        cfg_path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "berth.dev/v1",
                    "kind": "BerthConfiguration",
                    "http": {"host": "127.0.0.1", "port": server.free_port()},
                    "grpc": {"host": "127.0.0.1", "port": server.free_port()},
                    "leaderElection": {"leaderElect": False},
                }
            )
        )
        exe = Path(sys.executable).parent / "berth"
        proc = cp._spawn(
            f"berth-bench-{rep}",
            [str(exe), "serve", "--config", str(cfg_path), "--kubeconfig", str(cp.admin_kubeconfig)],
        )
    try:
        result = _measure(kube, ns, args.pods, args.timeout)
    finally:
        proc.stop()
    kube.request("DELETE", f"/api/v1/namespaces/{ns}")
    print(
        f"  {which} run {rep + 1}: {result['bound']}/{args.pods} bound, {result['pods_per_second']:.0f} pods/s",
        flush=True,
    )
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.kube")
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--pods", type=int, default=2000)
    p.add_argument("--workload", choices=list(workloads.WORKLOADS), default="basic")
    p.add_argument("--qps", type=int, default=5000)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--timeout", type=float, default=300)
    args = p.parse_args(argv)
    try:
        binaries = bed.find_binaries()
    except LookupError as e:
        print(f"bench.kube: {e}", file=sys.stderr)
        return 1
    print(
        f"Berth vs kube-scheduler on one API server: {args.nodes} nodes, {args.pods} pods [{args.workload}]", flush=True
    )
    result: dict[str, Any] = {"benchmark": f"kube-side-by-side-{args.workload}", "nodes": args.nodes, "pods": args.pods}
    with tempfile.TemporaryDirectory(prefix="berth-kube-bench-") as tmp, bed.ControlPlane(binaries, Path(tmp)) as cp:
        kube = cp.kube()
        nodes = [dict(workloads.node(i), kind="Node", apiVersion="v1") for i in range(args.nodes)]
        for n in nodes:
            n["status"]["conditions"] = [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "bench"}
            ]
        t0 = time.monotonic()
        _create_all(kube, nodes)
        print(f"  {args.nodes} nodes created in {time.monotonic() - t0:.1f}s", flush=True)
        for which in ("kube-scheduler", "berth"):
            runs = [_run(cp, kube, args, which, r) for r in range(args.repeat)]
            rates = sorted(r["pods_per_second"] for r in runs)
            result[which] = {
                "median_pods_per_second": statistics.median(rates),
                "min": rates[0],
                "max": rates[-1],
                "runs": runs,
            }
    ks, b = result["kube-scheduler"]["median_pods_per_second"], result["berth"]["median_pods_per_second"]
    result["ratio_berth_over_kube_scheduler"] = b / ks if ks else None
    print(
        f"  median: kube-scheduler {ks:.0f} pods/s, Berth {b:.0f} pods/s, "
        f"Berth/kube-scheduler {b / ks if ks else float('nan'):.2f}"
    )
    print(f"  -> {stats.write(result['benchmark'], result)}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
