"""How long a client command takes from the shell, against its references
in the same run (issue 31: client commands start in well under 0.3 s).

    python -m bench.startup --runs 20

Each figure is the median (min, max) wall time of ``--runs`` fresh
processes, the commands interleaved round by round so that load on this
shared machine lands on all of them alike:

- ``python -c pass``: the interpreter alone (the floor);
- the old import path, ``import berth.config, berth.adapters.grpc.convert,
  berth.cluster.manifests`` and the stubs: what every client command loaded
  before it parsed its arguments until the CLI went through
  ``berth_client`` (numpy, the framework, the configuration, the msgspec
  model; 0.8-1.5 s a command in the issue);
- ``berth version`` (no server) and ``berth get nodes`` against a running
  ``berth serve`` of ``--nodes`` nodes: the whole command, call included.

Target: ``berth get nodes`` under 0.3 s. The load average is printed beside.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from bench import server, stats, workloads

TARGET_SECONDS = 0.3
OLD_IMPORT_PATH = (
    "import berth.config, berth.adapters.grpc.convert, berth.cluster.manifests, yaml; "
    "from berth.api.v1 import cluster_pb2_grpc, scheduler_pb2_grpc"
)


def _once(argv: list[str]) -> float:
    start = time.perf_counter()
    res = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    took = time.perf_counter() - start
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {res.returncode}: {res.stderr[-2000:]}")
    return took


def run(nodes: int, runs: int) -> dict[str, Any]:
    berth = [sys.executable, "-m", "berth.cli.main"]
    with server.berth([workloads.node(i) for i in range(nodes)]) as ports:
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "old import path": [sys.executable, "-c", OLD_IMPORT_PATH],
            "berth version": [*berth, "version"],
            "berth get nodes": [*berth, "get", "nodes", "--server", f"127.0.0.1:{ports['grpc']}"],
        }
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for argv in commands.values():  # warm the file cache once
            _once(argv)
        for _ in range(runs):
            for name, argv in commands.items():
                samples[name].append(_once(argv))
    load = os.getloadavg()
    out: dict[str, Any] = {"nodes": nodes, "runs": runs, "load": list(load), "commands": {}}
    floor = statistics.median(samples["python -c pass"])
    print(f"  {'command':<20} {'median':>8} {'min':>8} {'max':>8}  over python -c pass")
    for name, values in samples.items():
        median = statistics.median(values)
        out["commands"][name] = {"median": median, "min": min(values), "max": max(values)}
        print(f"  {name:<20} {median:8.3f} {min(values):8.3f} {max(values):8.3f}  {median - floor:+.3f} s")
    get_nodes = out["commands"]["berth get nodes"]["median"]
    out["get_nodes_seconds"] = get_nodes
    out["speedup_over_old_import_path"] = out["commands"]["old import path"]["median"] / get_nodes
    verdict = "met" if get_nodes < TARGET_SECONDS else "MISSED"
    print(
        f"  berth get nodes {get_nodes:.3f} s (target < {TARGET_SECONDS} s: {verdict}); the old import path alone "
        f"took {out['speedup_over_old_import_path']:.1f}x as long; load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        flush=True,
    )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=50, help="nodes of the berth serve the commands ask (default 50)")
    p.add_argument("--runs", type=int, default=20, help="processes per command (default 20)")
    args = p.parse_args(argv)
    result = run(args.nodes, args.runs)
    stats.write("startup", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
