"""``make bench``: the whole suite, each benchmark in a fresh process.

    python -m bench            # the full suite at the issue's sizes
    python -m bench --quick    # small sizes, a smoke run of the harness

Each benchmark prints its own figures and writes bench/results/NAME.json;
this runner ends with the targets table. Never part of ``make test``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from bench import stats

FULL = [
    ["bench.core", "throughput", "--workload", "basic", "--nodes", "5000", "--pods", "10000"],
    ["bench.core", "throughput", "--workload", "spread", "--nodes", "5000", "--pods", "5000"],
    ["bench.core", "throughput", "--workload", "anti-affinity", "--nodes", "5000", "--pods", "4000"],
    ["bench.core", "throughput", "--workload", "preemption", "--nodes", "5000", "--pods", "300", "--repeat", "2"],
    ["bench.core", "memory", "--nodes", "5000", "--pods", "50000"],
    ["bench.queues", "--nodes", "5000", "--pods", "10000"],
    ["bench.topology", "--nodes", "5000", "--gangs", "1000"],
    ["bench.extender", "cache", "--nodes", "5000"],
    ["bench.extender", "full", "--nodes", "5000"],
    ["bench.grpc_api", "--nodes", "5000", "--pods", "10000"],
    ["bench.state", "submit", "--nodes", "5000", "--pods", "10000"],
    ["bench.state", "restore", "--nodes", "5000", "--pods", "50000"],
    ["bench.memory", "footprint", "--nodes", "5000", "--pods", "50000"],
    ["bench.memory", "churn", "--minutes", "10"],
    # scheduler_perf's shapes at 5000 nodes (PreemptionBasic: 1000, as upstream),
    # three alternating pairs each, and kube-scheduler's own scheduler_perf.
    ["bench.kube", "--reference"],
    ["bench.dra", "--nodes", "500", "--init-pods", "2500", "--pods", "2500", "--repeat", "2"],
    ["bench.startup", "--nodes", "50", "--runs", "20"],
    ["bench.reservations", "--nodes", "16", "--minutes", "20"],
]

QUICK = [
    ["bench.core", "throughput", "--workload", "basic", "--nodes", "500", "--pods", "1000", "--repeat", "1"],
    ["bench.core", "memory", "--nodes", "500", "--pods", "5000"],
    ["bench.queues", "--nodes", "500", "--pods", "1000", "--repeat", "1"],
    ["bench.topology", "--nodes", "500", "--gangs", "100", "--repeat", "1"],
    ["bench.extender", "cache", "--nodes", "500", "--iterations", "50", "--repeat", "1"],
    ["bench.extender", "full", "--nodes", "500", "--iterations", "3", "--repeat", "1"],
    ["bench.grpc_api", "--nodes", "500", "--pods", "500", "--iterations", "5", "--repeat", "1"],
    ["bench.state", "submit", "--nodes", "500", "--pods", "500", "--repeat", "1"],
    ["bench.state", "restore", "--nodes", "500", "--pods", "5000", "--repeat", "1"],
    ["bench.memory", "footprint", "--nodes", "500", "--pods", "5000"],
    ["bench.memory", "churn", "--minutes", "0.5", "--reference-seconds", "10"],
    [
        "bench.kube",
        "--nodes",
        "100",
        "--basic-nodes",
        "100",
        "--measure",
        "200",
        "--repeat",
        "1",
        "--shapes",
        "SchedulingBasic",
        "TopologySpreading",
    ],
    ["bench.dra", "--nodes", "50", "--init-pods", "100", "--pods", "200", "--repeat", "1"],
    ["bench.startup", "--nodes", "10", "--runs", "3"],
    ["bench.reservations", "--nodes", "16", "--minutes", "11"],
]


def _load(name: str) -> dict[str, object] | None:
    path = stats.RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _targets() -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []

    def get(name: str, *keys: str) -> float | None:
        cur: object = _load(name)
        for k in keys:
            if not isinstance(cur, dict) or k not in cur:
                return None
            cur = cur[k]
        return float(cur) if isinstance(cur, int | float) else None

    def row(label: str, value: float | None, fmt: str, ok: bool | None) -> None:
        shown = "n/a" if value is None else fmt.format(value)
        rows.append((label, shown, "-" if ok is None else ("met" if ok else "MISSED")))

    # Issue 16's table first, in its order; then the earlier waves' rows.
    for shape, target in (
        ("SchedulingBasic", 1.5),
        ("TopologySpreading", 3),
        ("SchedulingPodAntiAffinity", 3),
        ("PreemptionBasic", 1),
        ("PreemptionAsync", 1),
        ("Unschedulable", None),
        ("SchedulingWithMixedChurn", None),
    ):
        v = get("kube-side-by-side", "shapes", shape, "ratio")
        ok = None if v is None or target is None else v >= target
        # PreemptionBasic binds in one burst after every pod was tried: its
        # ratio is over the first attempt to the last bind (bench.kube.throughput).
        window = " (first attempt to last bind)" if shape == "PreemptionBasic" else ""
        row(f"API server {shape}{window} Berth/kube-sched" + (f" >= {target:g}" if target else ""), v, "{:.2f}", ok)
        if shape == "PreemptionBasic":
            v = get("kube-side-by-side", "shapes", shape, "interior_ratio")
            row(f"  {shape} burst (interior seconds of the binds)", v, "{:.2f}", None)
            v = get("kube-side-by-side", "shapes", shape, "end_to_end_ratio")
            row(f"  {shape} end to end (start to last bind)", v, "{:.2f}", None)
    v = get("kube-side-by-side", "shapes", "SchedulingBasic", "cpu_ratio")
    row("API server SchedulingBasic CPU/1000 pods <= 1.5x", v, "{:.2f}x", None if v is None else v <= 1.5)
    v = get("extender-full-nodelist", "berth", "median_ms", "median")
    row("full NodeList filter median <= 100 ms", v, "{:.0f} ms", None if v is None else v <= 100)
    v = get("extender-full-nodelist", "ratio_berth_over_topolvm")
    row("full NodeList Berth/TopoLVM <= 0.3", v, "{:.2f}", None if v is None else v <= 0.3)
    v = get("extender-node-cache", "berth", "p99_ms", "median")
    row("node-cache filter+prioritize p99 <= 2 ms", v, "{:.2f} ms", None if v is None else v <= 2)
    v = get("grpc", "cli", "pods_per_second", "median")
    row("berth submit 10000 pods, 5000 nodes >= 2000/s", v, "{:.0f} pods/s", None if v is None else v >= 2000)
    v = get("state-submit", "ratio")
    row("berth submit, sqlite / memory store >= 0.8", v, "{:.2f}", None if v is None else v >= 0.8)
    v = get("state-submit", "postgres_ratio")
    row("berth submit, postgres / memory store >= 0.5", v, "{:.2f}", None if v is None else v >= 0.5)
    v = get("state-restore", "sqlite", "median")
    row("restore 5000 nodes + 50000 pods < 5 s", v, "{:.2f} s", None if v is None else v < 5)
    v = get("memory-serve", "rss_mib")
    row("RSS 5000 nodes + 50000 pods <= 300 MB", v, "{:.0f} MiB", None if v is None else v * 1.048576 <= 300)
    v = get("memory-churn", "growth_percent")
    row("RSS churn: 10 min vs 1 min <= +10 %", v, "{:+.1f} %", None if v is None else v <= 10)
    for wl, target in (("basic", 1500), ("spread", 400), ("anti-affinity", 400), ("preemption", None)):
        v = get(f"core-throughput-{wl}", "median_pods_per_second")
        ok = None if v is None or target is None else v >= target
        row(f"core throughput {wl}" + (f" >= {target} pods/s" if target else ""), v, "{:.0f} pods/s", ok)
    v = get("reservations", "with", "p99_wait_s")
    w, wo = get("reservations", "with", "bounded"), get("reservations", "without", "bounded")
    ok = None if w is None or wo is None else w == 1 and wo == 0
    row("64-pod gangs under singles: p99 wait with reservations (bounded)", v, "{:.0f} s", ok)
    v = get("reservations", "without", "p99_wait_s")
    row("  the same without reservations (unbounded: the run's length)", v, "{:.0f} s", None)
    v = get("queues-throughput", "ratio_queued_over_unqueued")
    row("50 queues / no queues pods/s >= 0.85", v, "{:.2f}", None if v is None else v >= 0.85)
    v = get("topology-throughput", "ratio_with_over_without")
    row("1000 gangs of 8, required rack / none pods/s >= 0.5", v, "{:.2f}", None if v is None else v >= 0.5)
    v = get("dra-throughput", "berth_in_process", "median_pods_per_second")
    at_size = get("dra-throughput", "nodes") == 500  # --quick's 50 nodes say nothing about the floor
    row("DRA 500 nodes, 1 claim/pod >= 40 pods/s", v, "{:.0f} pods/s", None if v is None or not at_size else v >= 40)
    v = get("dra-throughput", "ratio_berth_over_kube_scheduler")
    row("DRA real API server: Berth/kube-scheduler", v, "{:.2f}", None if v is None else v >= 1)
    v = get("memory", "rss_mib")
    row("core cache RSS 5000 nodes + 50000 pods <= 600 MiB", v, "{:.0f} MiB", None if v is None else v <= 600)
    v = get("startup", "get_nodes_seconds")
    row("berth get nodes, whole command < 0.3 s", v, "{:.3f} s", None if v is None else v < 0.3)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench")
    p.add_argument("--quick", action="store_true", help="small sizes: check the harness, not the targets")
    p.add_argument("--only", help="run only benchmarks whose command line contains this word")
    args = p.parse_args(argv)
    suite = QUICK if args.quick else FULL
    failed = []
    for cmd in suite:
        if args.only and args.only not in " ".join(cmd):
            continue
        print(f"\n$ python -m {' '.join(cmd)}", flush=True)
        t0 = time.monotonic()
        rc = subprocess.call([sys.executable, "-m", *cmd])
        print(f"  ({time.monotonic() - t0:.0f}s, exit {rc})", flush=True)
        if rc:
            failed.append(" ".join(cmd))
    print("\nTargets (this machine, this run):")
    for label, value, verdict in _targets():
        print(f"  {label:<46} {value:>14}  {verdict}")
    if failed:
        print(f"\n{len(failed)} benchmark(s) failed: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
