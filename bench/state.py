"""The state store's cost (issue 29), each against its reference in the
same invocation:

    python -m bench.state submit --nodes 5000 --pods 10000
    python -m bench.state restore --nodes 5000 --pods 50000

- ``submit``: ``berth submit -f FILE --wait`` of ``--pods`` pods on
  ``--nodes`` nodes (bench.grpc_api's ``cli`` measurement) against a
  ``berth serve`` with the ``sqlite`` store and one with ``memory``, runs
  alternating A B / B A; pods/s of each and the ratio sqlite / memory
  (target >= 0.8).
- ``restore``: a store holding ``--nodes`` nodes and ``--pods`` bound pods
  (10 per node) is opened and fed back into a fresh Berth
  (:meth:`berth.scheduling.durable.Durable.restore`: read, decode, load
  through the embedded cluster); the reference is the same objects loaded
  from memory (``EmbeddedCluster.load``, what the demo's ``--cluster`` file
  costs). Seconds of each (target: restore < 5 s).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from bench import server, stats, workloads
from bench.grpc_api import _cli_once, _manifest
from berth import app, config
from berth.cluster import manifests, model
from berth.store import SqliteStore


def _load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def submit(args: argparse.Namespace) -> dict[str, Any]:
    print(f"state: berth submit --wait of {args.pods} pods on {args.nodes} nodes, sqlite vs memory", flush=True)
    nodes = [workloads.node(i) for i in range(args.nodes)]
    runs: dict[str, list[dict[str, float]]] = {"sqlite": [], "memory": []}
    with tempfile.TemporaryDirectory(prefix="berth-state-") as tmp:
        for r in range(args.repeat):
            order = ("sqlite", "memory") if r % 2 == 0 else ("memory", "sqlite")
            for backend in order:
                manifest = _manifest(Path(tmp), f"{backend}-{r}", args.pods)
                state: dict[str, Any] = {"backend": backend}
                if backend == "sqlite":
                    state["dir"] = str(Path(tmp) / f"state-{r}")
                print(f"  {backend}:", flush=True)
                with server.berth(nodes, {"state": state}) as ports:
                    runs[backend].append(_cli_once(ports["grpc"], ports["pid"], manifest, args.pods))
    out: dict[str, Any] = {}
    for backend, got in runs.items():
        out[backend] = stats.over_runs(got, "pods_per_second")
    ratio = out["sqlite"]["median"] / out["memory"]["median"]
    print(
        f"  sqlite {out['sqlite']['median']:.0f} pods/s, memory {out['memory']['median']:.0f} pods/s: "
        f"ratio {ratio:.2f} (target >= 0.8); {_load()}",
        flush=True,
    )
    return {**out, "ratio": ratio, "target_ratio": 0.8, "runs": runs}


def _objects(num_nodes: int, num_pods: int) -> tuple[list[model.Node], list[model.Pod]]:
    nodes = [msgspec.convert(workloads.node(i), model.Node) for i in range(num_nodes)]
    pods = []
    for i in range(num_pods):
        doc = workloads.pod(f"restored-{i}")
        doc["spec"]["nodeName"] = nodes[i % num_nodes].metadata.name
        doc["metadata"].setdefault("namespace", "default")
        doc["metadata"]["uid"] = f"uid-restored-{i}"
        pods.append(msgspec.convert(doc, model.Pod))
    return nodes, pods


async def _restore_once(directory: Path) -> float:
    berth = app.build(config.parse({}), store=SqliteStore(directory))
    assert berth.durable is not None
    start = time.perf_counter()
    restored = await berth.durable.restore()
    seconds = time.perf_counter() - start
    await berth.durable.close()
    assert restored.pods and restored.bound == restored.pods
    return seconds


def restore(args: argparse.Namespace) -> dict[str, Any]:
    print(f"state: restore {args.nodes} nodes + {args.pods} bound pods from sqlite vs loading them", flush=True)
    nodes, pods = _objects(args.nodes, args.pods)
    sqlite_runs, memory_runs = [], []
    with tempfile.TemporaryDirectory(prefix="berth-restore-") as tmp:
        directory = Path(tmp) / "state"

        async def fill() -> None:
            store = SqliteStore(directory)
            await store.open()
            for n in nodes:
                store.put("nodes", n.metadata.name, n)
            for p in pods:
                store.put("pods", p.key, p)
            await store.close()

        asyncio.run(fill())
        size = sum(f.stat().st_size for f in directory.iterdir())
        for _ in range(args.repeat):
            sqlite_runs.append({"seconds": asyncio.run(_restore_once(directory))})
            berth = app.build(config.parse({}))
            start = time.perf_counter()
            berth.cluster.load(manifests.Manifests(nodes=list(nodes), pods=list(pods)))
            memory_runs.append({"seconds": time.perf_counter() - start})
            print(f"  restore {sqlite_runs[-1]['seconds']:.2f} s, load {memory_runs[-1]['seconds']:.2f} s", flush=True)
    out = {"sqlite": stats.over_runs(sqlite_runs, "seconds"), "memory": stats.over_runs(memory_runs, "seconds")}
    print(
        f"  restore from sqlite {out['sqlite']['median']:.2f} s (target < 5 s), the same objects loaded "
        f"from memory {out['memory']['median']:.2f} s; store {size / 2**20:.0f} MiB; {_load()}",
        flush=True,
    )
    return {**out, "store_bytes": size, "target_seconds": 5.0}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.state")
    p.add_argument("mode", choices=("submit", "restore"))
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--pods", type=int, default=10000)
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args(argv)
    result = submit(args) if args.mode == "submit" else restore(args)
    result.update(benchmark=f"state-{args.mode}", nodes=args.nodes, pods=args.pods)
    print(f"  -> {stats.write(f'state-{args.mode}', result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
