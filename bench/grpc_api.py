"""gRPC API benchmarks against a ``berth serve`` process on loopback.

    python -m bench.grpc_api --nodes 5000 --pods 10000
    python -m bench.grpc_api --only cli        # issue 16's row alone

- ``cli`` (issue 16: ``berth submit`` of 10 000 pods on 5000 nodes, target
  >= 2000 pods/s): the ``berth submit -f FILE --wait`` command itself, run in
  this process against the server — manifest parsing, the Submit requests,
  following the decision stream until every pod is Bound, the table.
  Timed from the first Submit request to the command's return (the
  figure), and over the whole command (parsing the file included). The
  server process's CPU seconds meanwhile (from /proc) are printed beside it.
- ``api``: the same pods over the raw API, Submit in batches of ``--batch``
  and the batched decision stream; pods/s accepted, and until every one is
  BOUND (placement included).
- ``explain``: closed-loop Explain of one pod against every node of the
  cache; median, p99, min, max.

Each figure is the median (min, max) over ``--repeat`` fresh servers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
import msgspec

import berth_client
from bench import server, stats, workloads
from berth.adapters.grpc import convert
from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from berth.cli import main as cli_main
from berth.cluster import model

MODES = ("cli", "api", "explain")


def _pb(doc: dict[str, Any]) -> Any:
    return convert.pod_to_pb(msgspec.convert(doc, model.Pod))


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load() -> str:
    return os.getloadavg().__repr__()


@contextlib.contextmanager
def _profiled(pid: int, out: str | None, native: bool = False) -> Any:
    """py-spy ``record`` of the server process ``pid`` while the block runs
    (raw collapsed stacks in ``out``, with C frames when ``native``);
    nothing when ``out`` is None."""
    if out is None:
        yield
        return
    spy = Path(sys.executable).parent / "py-spy"
    argv = [str(spy), "record", "--pid", str(pid), "--format", "raw", "--rate", "250", "-o", out]
    argv += ["--native"] if native else []
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached before the first request
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)


def _cli_once(
    port: int, pid: int, manifest: Path, pods: int, profile: str | None = None, native: bool = False
) -> dict[str, float]:
    """``berth submit -f MANIFEST --wait`` in this process; timed from the
    client library's submit (after the manifest is read and converted)."""
    first: list[float] = []
    real_submit = berth_client.AsyncClient.submit

    async def timed_submit(self: berth_client.AsyncClient, items: Any, **options: Any) -> Any:
        if not first:
            first.append(time.perf_counter())
        return await real_submit(self, items, **options)

    argv = ["submit", "-f", str(manifest), "--wait", "--timeout", "600", "-o", "json"]
    argv += ["--server", f"127.0.0.1:{port}"]
    out = io.StringIO()
    berth_client.AsyncClient.submit = timed_submit  # type: ignore[method-assign]
    with _profiled(pid, profile, native):
        server_cpu = _cpu_seconds(pid)
        cpu0 = time.process_time()
        try:
            start = time.perf_counter()
            with contextlib.redirect_stdout(out):
                code = cli_main.main(argv)
            end = time.perf_counter()
        finally:
            berth_client.AsyncClient.submit = real_submit  # type: ignore[method-assign]
        client_cpu = time.process_time() - cpu0
        server_cpu = _cpu_seconds(pid) - server_cpu
    rows = json.loads(out.getvalue())
    scheduled = sum(r["status"] == "Bound" for r in rows)
    if code != 0 or scheduled != pods:
        raise RuntimeError(f"berth submit exited {code} with {scheduled}/{pods} pods Bound")
    span = end - first[0]
    print(
        f"  berth submit --wait: {scheduled} pods Bound, first request to last decision {span:.2f}s = "
        f"{pods / span:.0f} pods/s (whole command {end - start:.2f}s = {pods / (end - start):.0f} pods/s); "
        f"CPU s: server {server_cpu:.2f}, client {client_cpu:.2f}; load {_load()}",
        flush=True,
    )
    return {
        "pods": pods,
        "seconds": span,
        "pods_per_second": pods / span,
        "command_seconds": end - start,
        "command_pods_per_second": pods / (end - start),
        "server_cpu_seconds": server_cpu,
        "client_cpu_seconds": client_cpu,
    }


def _manifest(tmp: Path, prefix: str, n: int) -> Path:
    path = tmp / f"{prefix}.json"
    docs = [workloads.pod(f"{prefix}-{i}") for i in range(n)]
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    return path


async def _submit(port: int, pods: list[Any], batch: int) -> dict[str, float]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = scheduler_pb2_grpc.SchedulerStub(ch)
        stream = stub.WatchDecisionBatches(scheduler_pb2.WatchDecisionsRequest())
        want = {f"{p.metadata.namespace}/{p.metadata.name}" for p in pods}
        bound: set[str] = set()
        all_bound = asyncio.Event()

        async def watch() -> None:
            async for b in stream:
                for d in b.decisions:
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
        f"  api: {accepted} pods accepted in {submitted:.2f}s = {accepted / submitted:.0f} pods/s; "
        f"all bound after {placed:.2f}s = {len(bound) / placed:.0f} pods/s; load {_load()}",
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


def _summary(label: str, runs: list[dict[str, float]], key: str) -> dict[str, float]:
    s = stats.over_runs(runs, key)
    print(f"  {label}: median {s['median']:.0f} (min {s['min']:.0f}, max {s['max']:.0f})", flush=True)
    return s


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.grpc_api")
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--pods", type=int, default=10000)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--iterations", type=int, default=50)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--only", choices=MODES, action="append", help="run only these parts (repeatable)")
    p.add_argument(
        "--profile",
        metavar="PREFIX",
        help="cli: py-spy record the server during each measured window into PREFIX-N.txt (raw stacks)",
    )
    p.add_argument("--profile-native", action="store_true", help="--profile with C frames (py-spy --native)")
    args = p.parse_args(argv)
    modes = args.only or list(MODES)
    nodes = [workloads.node(i) for i in range(args.nodes)]
    result: dict[str, Any] = {"benchmark": "grpc", "nodes": args.nodes, "pods": args.pods, "batch": args.batch}
    if "cli" in modes:
        print(f"gRPC: berth submit --wait of {args.pods} pods on {args.nodes} nodes", flush=True)
        runs = []
        with tempfile.TemporaryDirectory(prefix="berth-submit-") as tmp:
            for r in range(args.repeat):
                manifest = _manifest(Path(tmp), f"cli-{r}", args.pods)
                with server.berth(nodes) as ports:
                    profile = f"{args.profile}-{r}.txt" if args.profile else None
                    runs.append(
                        _cli_once(ports["grpc"], ports["pid"], manifest, args.pods, profile, args.profile_native)
                    )
        result["cli"] = {
            "pods_per_second": _summary(
                "berth submit, first request to last decision, pods/s", runs, "pods_per_second"
            ),
            "command_pods_per_second": stats.over_runs(runs, "command_pods_per_second"),
            "target_pods_per_second": 2000,
            "runs": runs,
        }
    if "api" in modes:
        print(f"gRPC: Submit {args.pods} pods in batches of {args.batch}, batched decisions", flush=True)
        submits = []
        for r in range(args.repeat):
            pods = [_pb(workloads.pod(f"sub-{r}-{i}")) for i in range(args.pods)]
            with server.berth(nodes) as ports:
                submits.append(asyncio.run(_submit(ports["grpc"], pods, args.batch)))
        result["submit"] = {
            "submit_pods_per_second": _summary("accepted pods/s", submits, "submit_pods_per_second"),
            "placed_pods_per_second": _summary("placed pods/s", submits, "placed_pods_per_second"),
            "runs": submits,
        }
    if "explain" in modes:
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
