"""Extender benchmarks over loopback HTTP, closed loop (one request in flight).

    python -m bench.extender cache --nodes 5000      # filter + prioritize, NodeNames only
    python -m bench.extender full --nodes 5000       # filter with a full NodeList body

``cache``: one pod against 5000 nodes Berth holds in its cache, the request
carrying names only (``nodeCacheCapable: true``), as kube-scheduler sends it.
Latency of a filter + prioritize pair: median, p99, min, max; requests/s.

``full``: filter with full, realistic Node objects in the body (labels,
conditions, images, addresses, nodeInfo, managedFields: about 5 KB a node).
The reference, in the same run on the same bodies, is TopoLVM's scheduler
extender (real Go, built from its module by bench/reference/build.sh), which
decodes the whole NodeList too. TopoLVM caps request bodies at 10 MiB
(``http.MaxBytesReader(w, r.Body, 10<<20)`` in internal/scheduler/predicate.go),
so the side-by-side runs at the largest node count whose body fits; Berth alone
is also measured at the requested count.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import time
import urllib.parse
from typing import Any

from bench import server, stats, workloads

TOPOLVM_LIMIT = 10 << 20
CAPACITY_KEY = "capacity.topolvm.io/00default"


def _pod() -> dict[str, Any]:
    p = workloads.pod("bench-pod", cpu="500m", memory="1Gi")
    p["metadata"].update({"uid": "bench-pod-uid", "annotations": {CAPACITY_KEY: str(5 << 30)}})
    return p


def _nodes(n: int, *, realistic: bool) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        node = workloads.node(i, realistic=realistic)
        if realistic:
            node["metadata"]["annotations"][CAPACITY_KEY] = str((i % 20) << 30)
        out.append(node)
    return out


def _measure(calls: list[tuple[str, bytes]], iterations: int, warmup: int) -> dict[str, float]:
    """One persistent HTTP/1.1 connection, one request in flight (kube-scheduler's
    pattern for one scheduling cycle); stdlib http.client keeps the client's
    own cost small next to the server's."""
    url = urllib.parse.urlsplit(calls[0][0])
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=120)
    headers = {"Content-Type": "application/json"}
    samples: list[float] = []
    start = time.perf_counter()
    try:
        for k in range(warmup + iterations):
            t0 = time.perf_counter()
            for full, body in calls:
                conn.request("POST", urllib.parse.urlsplit(full).path, body=body, headers=headers)
                resp = conn.getresponse()
                payload = resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"{full}: HTTP {resp.status}: {payload[:300]!r}")
            if k == warmup:
                start = t0
            if k >= warmup:
                samples.append(time.perf_counter() - t0)
    finally:
        conn.close()
    elapsed = time.perf_counter() - start
    summary = stats.latency_summary(samples)
    summary["requests_per_second"] = len(samples) * len(calls) / elapsed
    return summary


def _report(label: str, runs: list[dict[str, float]]) -> dict[str, Any]:
    med = stats.over_runs(runs, "median_ms")
    p99 = stats.over_runs(runs, "p99_ms")
    rps = stats.over_runs(runs, "requests_per_second")
    lo = min(r["min_ms"] for r in runs)
    hi = max(r["max_ms"] for r in runs)
    print(
        f"  {label}: median {med['median']:.2f} ms, p99 {p99['median']:.2f} ms "
        f"(min {lo:.2f}, max {hi:.2f}), {rps['median']:.0f} req/s  [median of {len(runs)} runs]",
        flush=True,
    )
    return {"median_ms": med, "p99_ms": p99, "min_ms": lo, "max_ms": hi, "requests_per_second": rps, "runs": runs}


def cache(args: argparse.Namespace) -> dict[str, Any]:
    nodes = _nodes(args.nodes, realistic=False)
    names = [n["metadata"]["name"] for n in nodes]
    pod = _pod()
    body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}).encode()
    print(f"extender, node-cache mode: filter + prioritize, 1 pod x {args.nodes} cached nodes", flush=True)
    with server.berth(nodes) as ports:
        base = f"http://127.0.0.1:{ports['http']}/scheduler"
        calls = [(f"{base}/filter", body), (f"{base}/prioritize", body)]
        runs = [(_measure(calls, args.iterations, args.warmup)) for _ in range(args.repeat)]
    result = {"benchmark": "extender-node-cache", "nodes": args.nodes, "target_p99_ms": 5.0}
    result["berth"] = _report("berth filter+prioritize", runs)
    ok = result["berth"]["p99_ms"]["median"] <= 5.0
    print(f"  target p99 <= 5 ms: {'met' if ok else 'MISSED'}")
    return result


def _filter_body(pod: dict[str, Any], nodes: list[dict[str, Any]]) -> bytes:
    return json.dumps({"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}).encode()


def full(args: argparse.Namespace) -> dict[str, Any]:
    pod = _pod()
    nodes = _nodes(args.nodes, realistic=True)
    body = _filter_body(pod, nodes)
    per_node = len(body) / max(1, args.nodes)
    side_n = min(args.nodes, int((TOPOLVM_LIMIT - 8192) / per_node))
    side_body = _filter_body(pod, nodes[:side_n])
    print(
        f"extender, full NodeList: filter with {args.nodes} realistic nodes ({len(body) / 2**20:.1f} MiB); "
        f"side by side with TopoLVM at {side_n} nodes ({len(side_body) / 2**20:.1f} MiB)",
        flush=True,
    )
    result: dict[str, Any] = {
        "benchmark": "extender-full-nodelist",
        "nodes": args.nodes,
        "body_bytes": len(body),
        "side_by_side_nodes": side_n,
        "target_median_ms": 150.0,
    }
    with server.berth([]) as ports:
        url = f"http://127.0.0.1:{ports['http']}/scheduler/filter"
        runs = [(_measure([(url, body)], args.iterations, args.warmup)) for _ in range(args.repeat)]
        result["berth"] = _report(f"berth filter @{args.nodes}", runs)
        side = [(_measure([(url, side_body)], args.iterations, args.warmup)) for _ in range(args.repeat)]
        result["berth_side_by_side"] = _report(f"berth filter @{side_n}", side)
    binary = server.reference_binary("topolvm-scheduler")
    if binary is None:
        print("  TopoLVM reference unavailable (Go missing?): no ratio")
        return result
    with server.topolvm(binary) as port:
        url = f"http://127.0.0.1:{port}/predicate"
        ref = [(_measure([(url, side_body)], args.iterations, args.warmup)) for _ in range(args.repeat)]
        result["topolvm_side_by_side"] = _report(f"topolvm predicate @{side_n}", ref)
    ratio = result["berth_side_by_side"]["median_ms"]["median"] / result["topolvm_side_by_side"]["median_ms"]["median"]
    result["ratio_berth_over_topolvm"] = ratio
    print(f"  Berth / TopoLVM median time at {side_n} nodes: {ratio:.2f} (target <= 0.5)")
    med = result["berth"]["median_ms"]["median"]
    print(f"  target median <= 150 ms at {args.nodes} nodes: {'met' if med <= 150 else 'MISSED'} ({med:.0f} ms)")
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.extender")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, iters in (("cache", 500), ("full", 15)):
        s = sub.add_parser(name)
        s.add_argument("--nodes", type=int, default=5000)
        s.add_argument("--iterations", type=int, default=iters)
        s.add_argument("--warmup", type=int, default=max(2, iters // 10))
        s.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    result = cache(args) if args.cmd == "cache" else full(args)
    print(f"  -> {stats.write(result['benchmark'], result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
