"""Reservations against starvation: how long 64-pod gangs wait under a
steady stream of single pods, without reservations and with them, in the
same process (issue 30).

    python -m bench.reservations --nodes 16 --minutes 20

The embedded Berth runs in virtual time (looptime: the event loop's clock
jumps whenever every task waits), so an hour of cluster time takes seconds
of CPU and both runs see exactly the same arrivals. ``--nodes`` nodes of 8
cpu; single pods of 4 cpu arrive one every ``--every`` seconds, each
declaring a runtime (``berth.dev/max-runtime``, 60 to 180 s) and deleted
when it is over; a gang of 64 pods of 1 cpu (half the default cluster)
arrives every 5 minutes and runs 2 minutes once placed whole. The singles
arrive a little faster than they finish, so a backlog is always waiting to
take any core that frees.

Without reservations a gang waits until the run ends (its wait is counted
as the time left: the figure is the run's length, a lower bound). With the
queue's ``reservation: {after: 60s}`` capacity is held for the gang that has
waited a minute and it starts once the singles running there end: its p99
wait is bounded by ``after`` plus the longest single runtime plus the gang
backoff. Target: bounded (every gang placed) with, unbounded without.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from typing import Any

import looptime

from bench import stats
from berth import app, config
from berth.cluster import model
from berth.gangs import reservations as rsv
from berth.testing import make_node, make_pod

GANG_SIZE = 64
GANG_EVERY = 300.0
GANG_RUNTIME = 120.0
#: Seconds of singles before the first gang: the cluster is full by then.
WARM_UP = 180.0
SINGLE_RUNTIME = (60, 180)
SINGLE_CPU = "4"


def _config(reserve: bool) -> config.BerthConfiguration:
    """The gangs' queue (namespace research) holds reservations in the run
    with them; the singles' (namespace default) never does."""
    research: dict[str, Any] = {"name": "research", "namespaces": ["research"]}
    if reserve:
        research["reservation"] = {"after": "60s"}
    return config.parse({"queues": [research, {"name": "batch", "namespaces": ["default"]}]})


def _single(n: int, runtime: int) -> model.Pod:
    return make_pod(
        f"s{n}", scheduler_name="berth", annotations={rsv.MAX_RUNTIME: f"{runtime}s"}, requests={"cpu": SINGLE_CPU}
    )


def _member(gang: int, i: int) -> model.Pod:
    name = f"g{gang}"
    return make_pod(
        f"{name}-{i}",
        namespace="research",
        scheduler_name="berth",
        labels={"kueue.x-k8s.io/pod-group-name": name},
        annotations={"kueue.x-k8s.io/pod-group-total-count": str(GANG_SIZE), rsv.MAX_RUNTIME: f"{GANG_RUNTIME:g}s"},
        requests={"cpu": "1"},
    )


async def _run(reserve: bool, nodes: int, minutes: float, every: float, seed: int) -> dict[str, Any]:
    """One run: the gangs' waits (virtual seconds), placed or censored at the end."""
    loop = asyncio.get_running_loop()
    rng = random.Random(seed)
    length = minutes * 60
    started_cpu = time.process_time()
    async with app.running(_config(reserve), clock=loop.time) as berth:
        cluster = berth.cluster
        cluster.upsert_nodes(
            [make_node(f"n{i}", cpu="8", pods=110, labels={"kubernetes.io/hostname": f"n{i}"}) for i in range(nodes)]
        )
        runtimes: dict[str, float] = {}
        arrived: dict[int, float] = {}
        placed: dict[int, float] = {}
        bound_at: dict[str, float] = {}
        start = loop.time()

        async def singles() -> None:
            n = 0
            while True:
                runtime = rng.randint(*SINGLE_RUNTIME)
                pod = _single(n, runtime)
                runtimes[pod.key] = runtime
                cluster.upsert_pods([pod])
                n += 1
                await asyncio.sleep(every)

        async def gangs() -> None:
            await asyncio.sleep(WARM_UP)  # the singles fill the cluster first
            g = 0
            while True:
                arrived[g] = loop.time() - start
                members = [_member(g, i) for i in range(GANG_SIZE)]
                for m in members:
                    runtimes[m.key] = GANG_RUNTIME
                cluster.upsert_pods(members)
                g += 1
                await asyncio.sleep(GANG_EVERY)

        async def kubelet() -> None:
            """Pods end when their declared runtime is over; gangs are seen placed."""
            while True:
                now = loop.time()
                for key, pod in list(cluster.pods.items()):
                    if pod.spec.node_name:
                        bound_at.setdefault(key, now)
                done = [k for k, t in bound_at.items() if now - t >= runtimes.get(k, 0) and k in cluster.pods]
                for g in arrived:
                    if g not in placed and all(f"research/g{g}-{i}" in bound_at for i in range(GANG_SIZE)):
                        placed[g] = max(bound_at[f"research/g{g}-{i}"] for i in range(GANG_SIZE)) - start
                if done:
                    cluster.delete_pods(done)
                    for k in done:
                        del bound_at[k]
                await asyncio.sleep(1)

        tasks = [asyncio.create_task(f()) for f in (singles, gangs, kubelet)]
        await asyncio.sleep(length)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    # A gang that arrived too late for any run to have placed it says nothing.
    counted = [g for g, at in arrived.items() if at <= length - GANG_EVERY or g in placed]
    waits = sorted(placed.get(g, length) - arrived[g] for g in counted)
    return {
        "gangs": len(counted),
        "placed": sum(1 for g in counted if g in placed),
        "waits_s": waits,
        "p99_wait_s": stats.percentile(waits, 99) if waits else float("nan"),
        "bounded": all(g in placed for g in counted),
        "cpu_seconds": time.process_time() - started_cpu,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {
        "benchmark": "reservations",
        "nodes": args.nodes,
        "minutes": args.minutes,
        "single_every_s": args.every,
    }
    for name, reserve in (("without", False), ("with", True)):
        loop = looptime.new_event_loop(start=0, _enabled=True)
        try:
            r = loop.run_until_complete(_run(reserve, args.nodes, args.minutes, args.every, args.seed))
        finally:
            loop.close()
        out[name] = r
        shown = f"{r['p99_wait_s']:.0f} s" + ("" if r["bounded"] else " (unplaced at the end: the run's length)")
        print(
            f"  {name:>7} reservations: {r['placed']}/{r['gangs']} gangs of {GANG_SIZE} placed, "
            f"p99 wait {shown}; waits {[round(w) for w in r['waits_s']]} s; {r['cpu_seconds']:.1f} CPU s",
            flush=True,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=16, help="nodes of 8 cpu (default 16: a gang is half the cluster)")
    p.add_argument("--minutes", type=float, default=20.0, help="virtual minutes per run")
    p.add_argument("--every", type=float, default=3.5, help="seconds between single pods")
    p.add_argument("--seed", type=int, default=30)
    args = p.parse_args(argv)
    if args.nodes * 8 < GANG_SIZE:
        p.error(f"--nodes: {args.nodes} nodes of 8 cpu cannot hold a gang of {GANG_SIZE} pods of 1 cpu")
    result = run(args)
    stats.write("reservations", result)
    return 0 if result["with"]["bounded"] and not result["without"]["bounded"] else 1


if __name__ == "__main__":
    sys.exit(main())
