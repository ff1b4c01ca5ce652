"""Topology-aware gangs' cost (issue 30): pods/s for gangs that each ask for
one rack (Kueue's ``podset-required-topology``) against the same gangs
without the request, in the same process.

    python -m bench.topology --nodes 5000 --gangs 1000

The cluster has four levels, zone > block > rack > host (4 zones x 5 blocks
x 25 racks of 10 hosts at 5000 nodes; 4 CPU / 32 GiB / 110 pods each, the
scheduler_perf node); a gang is 8 pods of 1 CPU / 1 GiB (a Kueue pod group,
``kueue.x-k8s.io/pod-group-total-count: 8``), so a rack holds 5 gangs and
1000 gangs fill 40 % of the cluster. Both runs configure the topology (the
TopologyGang plugin runs in both) and place identical gangs on identical
nodes; only the annotation differs. They alternate, A B then B A, timed as
``bench.core throughput`` times them. Every run must bind every pod, and
with topology every gang must land in one rack. Target: with / without >= 0.5.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from collections.abc import Callable
from typing import Any

import msgspec

from bench import stats
from bench.core import _pods, _throughput_once
from berth import app
from berth.cluster import model

TARGET = 0.5
GANG = 8
LEVELS = ("topology.example.com/zone", "topology.example.com/block", "topology.example.com/rack")
HOST = "kubernetes.io/hostname"
#: Hosts per rack, racks per block, blocks per zone (5000 nodes: 4 zones x 5 blocks x 25 racks x 10 hosts).
HOSTS, RACKS, BLOCKS = 10, 25, 5


def nodes(n: int) -> list[model.Node]:
    """``n`` nodes in four levels, filled host by host, rack by rack."""
    out: list[model.Node] = []
    for i in range(n):
        rack = i // HOSTS
        block = rack // RACKS
        zone = block // BLOCKS
        name = f"node-{i:05d}"
        labels = {
            HOST: name,
            LEVELS[0]: f"z{zone}",
            LEVELS[1]: f"z{zone}-b{block}",
            LEVELS[2]: f"z{zone}-b{block}-r{rack}",
        }
        alloc = {"cpu": "4", "memory": "32Gi", "pods": "110"}
        out.append(
            msgspec.convert(
                {"metadata": {"name": name, "labels": labels}, "status": {"capacity": alloc, "allocatable": alloc}},
                model.Node,
            )
        )
    return out


def gangs(count: int, *, topology: bool) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for g in range(count):
        annotations = {"kueue.x-k8s.io/pod-group-total-count": str(GANG)}
        if topology:
            annotations["kueue.x-k8s.io/podset-required-topology"] = LEVELS[2]
        for i in range(GANG):
            docs.append(
                {
                    "metadata": {
                        "name": f"g{g:04d}-{i}",
                        "namespace": "default",
                        "labels": {"kueue.x-k8s.io/pod-group-name": f"g{g:04d}"},
                        "annotations": dict(annotations),
                    },
                    "spec": {
                        "schedulerName": "berth",
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                    },
                }
            )
    return docs


def _check_racks(count: int) -> Callable[[app.Berth], None]:
    """The topology run's ``after`` hook: each gang's 8 pods share one rack."""

    def after(berth: app.Berth) -> None:
        cluster = berth.cluster
        racks: dict[str, set[str]] = {}
        for pod in cluster.pods.values():
            node = cluster.nodes.get(pod.spec.node_name)
            if node is None:
                continue
            gang = pod.metadata.labels["kueue.x-k8s.io/pod-group-name"]
            racks.setdefault(gang, set()).add(node.metadata.labels[LEVELS[2]])
        split = [g for g, r in racks.items() if len(r) != 1]
        if len(racks) != count or split:
            raise SystemExit(f"{len(racks)} gangs placed, {len(split)} across racks (e.g. {split[:3]})")

    return after


def _timed(name: str, docs: list[dict[str, Any]], args: argparse.Namespace, pair: int) -> dict[str, float]:
    """One run of ``name`` ("with" or "without" topology), checked and printed."""
    doc = {"topology": {"levels": [{"nodeLabel": lv} for lv in (*LEVELS, HOST)]}}
    pods = _pods(docs)
    after = _check_racks(args.gangs) if name == "with" else None
    elapsed, bound, cpu = asyncio.run(_throughput_once(args.nodes, pods, [], doc, after, nodes=nodes(args.nodes)))
    if bound != len(pods):
        raise SystemExit(f"{name} run {pair}: only {bound}/{len(pods)} pods bound — the benchmark is void")
    record = {
        "seconds": elapsed,
        "cpu_seconds": cpu,
        "pods_per_second": bound / elapsed,
        "pods_per_cpu_second": bound / cpu,
    }
    shown = ", ".join(f"{k} {v:.2f}" for k, v in record.items())
    print(f"  pair {pair}, {name} topology: {bound} pods bound; {shown}", flush=True)
    return record


def run(args: argparse.Namespace) -> dict[str, Any]:
    docs = {"without": gangs(args.gangs, topology=False), "with": gangs(args.gangs, topology=True)}
    runs: dict[str, list[dict[str, float]]] = {"without": [], "with": []}
    pair_ratios: list[float] = []
    for r in range(args.repeat):
        order = ("without", "with") if r % 2 == 0 else ("with", "without")
        pair = {name: _timed(name, docs[name], args, r + 1) for name in order}
        pair_ratios.append(pair["with"]["pods_per_second"] / pair["without"]["pods_per_second"])
        for name, record in pair.items():
            runs[name].append(record)
    compared = stats.compare(runs, "with", "without")
    summary, ratio, cpu_ratio = compared["pods_per_second"], compared["ratio"], compared["cpu_ratio"]
    result: dict[str, Any] = {
        "benchmark": "topology-throughput",
        "nodes": args.nodes,
        "gangs": args.gangs,
        "gang_size": GANG,
        "without_pods_per_second": summary["without"],
        "with_pods_per_second": summary["with"],
        "ratio_with_over_without": ratio,
        "cpu_ratio_with_over_without": cpu_ratio,
        "pair_ratios": {"median": statistics.median(pair_ratios), "all": pair_ratios},
        "target_ratio": TARGET,
        "runs": runs,
    }
    shown = ", ".join(
        f"{label} median {summary[name]['median']:.0f} pods/s ({summary[name]['min']:.0f}-{summary[name]['max']:.0f})"
        for name, label in (("without", "without"), ("with", "with required rack"))
    )
    verdict = "met" if ratio >= TARGET else "MISSED"
    print(
        f"topology throughput {args.nodes} nodes (zone/block/rack/host) / {args.gangs} gangs of {GANG}: "
        f"{shown}; ratio {ratio:.3f}, target >= {TARGET}: {verdict}; per CPU second {cpu_ratio:.3f}"
    )
    return result


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench.topology")
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--gangs", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=2, help="pairs of runs (one of each configuration)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    result = run(_arguments(argv))
    stats.write(result["benchmark"], result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
