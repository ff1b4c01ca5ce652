"""The state store's cost (issue 29), each against its reference in the
same invocation:

    python -m bench.state submit --nodes 5000 --pods 10000
    python -m bench.state restore --nodes 5000 --pods 50000

- ``submit``: ``berth submit -f FILE --wait`` of ``--pods`` pods on
  ``--nodes`` nodes (bench.grpc_api's ``cli`` measurement) against a
  ``berth serve`` with the ``sqlite`` store, one with ``memory`` and one
  with ``postgres`` (a real server, tests/store/pgserver.py, started for
  the run on loopback; left out where PostgreSQL is not installed), runs
  alternating A B C / C B A; pods/s of each and the ratios sqlite / memory
  (target >= 0.8) and postgres / memory (target >= 0.5).
- ``restore``: a store (sqlite, and postgres where it is installed)
  holding ``--nodes`` nodes and ``--pods`` bound pods
  (10 per node) is opened and fed back into a fresh Berth
  (:meth:`berth.scheduling.durable.Durable.restore`: read, decode, load
  through the embedded cluster); the reference is the same objects loaded
  from memory (``EmbeddedCluster.load``, what the demo's ``--cluster`` file
  costs). Seconds of each (target: restore < 5 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from bench import server, stats, workloads
from bench.grpc_api import _cli_once, _manifest
from berth import app, config
from berth.cluster import manifests, model
from berth.store import PostgresStore, SqliteStore, StateStore
from berth_client.aio import AsyncClient
from berth_client.errors import BerthError
from tests.store import pgserver


def _load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def submit(args: argparse.Namespace) -> dict[str, Any]:
    backends = ["sqlite", "memory"]
    no_postgres = pgserver.available()
    if no_postgres:
        print(f"  postgres left out: {no_postgres}", flush=True)
    else:
        backends.append("postgres")
    print(f"state: berth submit --wait of {args.pods} pods on {args.nodes} nodes, {' vs '.join(backends)}", flush=True)
    nodes = [workloads.node(i) for i in range(args.nodes)]
    runs: dict[str, list[dict[str, float]]] = {b: [] for b in backends}
    with tempfile.TemporaryDirectory(prefix="berth-state-") as tmp, contextlib.ExitStack() as stack:
        pg = None if no_postgres else stack.enter_context(pgserver.running())
        for r in range(args.repeat):
            for backend in backends if r % 2 == 0 else backends[::-1]:
                manifest = _manifest(Path(tmp), f"{backend}-{r}", args.pods)
                state: dict[str, Any] = {"backend": backend}
                if backend == "sqlite":
                    state["dir"] = str(Path(tmp) / f"state-{r}")
                elif backend == "postgres" and pg is not None:
                    state["dsn"] = pg.database(f"bench_{r}")
                print(f"  {backend}:", flush=True)
                with server.berth(nodes, {"state": state}) as ports:
                    if backend == "postgres":
                        # Ready as a standby at once; it loads the nodes once it leads.
                        asyncio.run(_leading(ports["grpc"], len(nodes)))
                    runs[backend].append(_cli_once(ports["grpc"], ports["pid"], manifest, args.pods))
    out: dict[str, Any] = {}
    for backend, got in runs.items():
        out[backend] = stats.over_runs(got, "pods_per_second")
    ratios = {b: out[b]["median"] / out["memory"]["median"] for b in backends if b != "memory"}
    targets = {"sqlite": 0.8, "postgres": 0.5}
    print(
        "  "
        + ", ".join(f"{b} {out[b]['median']:.0f} pods/s" for b in backends)
        + ": "
        + ", ".join(f"{b}/memory {v:.2f} (target >= {targets[b]})" for b, v in ratios.items())
        + f"; {_load()}",
        flush=True,
    )
    return {
        **out,
        "ratio": ratios["sqlite"],
        "target_ratio": 0.8,
        "postgres_ratio": ratios.get("postgres"),
        "postgres_target_ratio": 0.5,
        "runs": runs,
    }


async def _leading(grpc_port: int, num_nodes: int) -> None:
    """Until the replica leads and holds its ``num_nodes`` nodes."""
    async with AsyncClient(f"127.0.0.1:{grpc_port}", timeout=10) as client, asyncio.timeout(120):
        while True:
            with contextlib.suppress(BerthError):
                if len(await client.list_nodes()) == num_nodes:
                    return
            await asyncio.sleep(0.1)


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


async def _restore_once(store: StateStore) -> float:
    berth = app.build(config.parse({}), store=store)
    assert berth.durable is not None
    start = time.perf_counter()
    restored = await berth.durable.restore()
    seconds = time.perf_counter() - start
    await berth.durable.close()
    assert restored.pods and restored.bound == restored.pods
    return seconds


async def _fill(store: StateStore, nodes: list[model.Node], pods: list[model.Pod]) -> None:
    await store.open()
    for n in nodes:
        store.put("nodes", n.metadata.name, n)
    for p in pods:
        store.put("pods", p.key, p)
    await store.close()


def restore(args: argparse.Namespace) -> dict[str, Any]:
    no_postgres = pgserver.available()
    backends = "sqlite" if no_postgres else "sqlite and postgres"
    print(f"state: restore {args.nodes} nodes + {args.pods} bound pods from {backends} vs loading them", flush=True)
    nodes, pods = _objects(args.nodes, args.pods)
    runs: dict[str, list[dict[str, float]]] = {"sqlite": [], "memory": []}
    with tempfile.TemporaryDirectory(prefix="berth-restore-") as tmp, contextlib.ExitStack() as stack:
        directory = Path(tmp) / "state"
        stores: dict[str, Callable[[], StateStore]] = {"sqlite": lambda: SqliteStore(directory)}
        if not no_postgres:
            dsn = stack.enter_context(pgserver.running()).database("restore")
            stores["postgres"] = lambda: PostgresStore(dsn)
            runs["postgres"] = []
        for new in stores.values():
            asyncio.run(_fill(new(), nodes, pods))
        size = sum(f.stat().st_size for f in directory.iterdir())
        for _ in range(args.repeat):
            for backend, new in stores.items():
                runs[backend].append({"seconds": asyncio.run(_restore_once(new()))})
            berth = app.build(config.parse({}))
            start = time.perf_counter()
            berth.cluster.load(manifests.Manifests(nodes=list(nodes), pods=list(pods)))
            runs["memory"].append({"seconds": time.perf_counter() - start})
            print("  " + ", ".join(f"{b} {r[-1]['seconds']:.2f} s" for b, r in runs.items()), flush=True)
    out = {backend: stats.over_runs(got, "seconds") for backend, got in runs.items()}
    print(
        "  restore from "
        + ", ".join(f"{b} {out[b]['median']:.2f} s" for b in stores)
        + f" (target < 5 s), the same objects loaded from memory {out['memory']['median']:.2f} s; "
        f"sqlite store {size / 2**20:.0f} MiB; {_load()}",
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
