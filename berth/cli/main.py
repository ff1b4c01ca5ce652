"""The ``berth`` command: ``serve`` runs the service; ``nodes``, ``queues``,
``explain``, ``submit`` and ``cancel`` are gRPC clients of a running Berth
(``--server HOST:PORT``, with ``--tls``/``--ca-file``/... for a TLS port)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from berth import config
from berth.adapters.grpc import convert
from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc
from berth.cli import common, extras, inspect, submit
from berth.cli.common import CliError, call, connect
from berth.cluster import manifests, resources

__all__ = ["main"]


def _quantities(m: Any) -> dict[str, str]:
    return {k: resources.format_quantity(k, int(v)) for k, v in sorted(m.items())}


# ---------------------------------------------------------------- serve


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        cfg = config.load(args.config)
    except config.ConfigError as e:
        raise config.ConfigError(f"invalid configuration: {e}") from None
    if args.http_port is not None:
        cfg.http.port = args.http_port
    if args.grpc_port is not None:
        cfg.grpc.port = args.grpc_port
    if args.cluster is not None and (args.kubeconfig or args.in_cluster):
        raise CliError("--cluster and --kubeconfig/--in-cluster are exclusive: embedded or real, not both")
    if args.cluster is not None:
        # Fail before binding any port. With --validate=warn serve() warns
        # (once) when it loads the file for good.
        early: manifests.ValidationMode = "ignore" if args.validate == "warn" else args.validate
        try:
            manifests.load(args.cluster, validate=early)
        except manifests.ManifestError as e:
            raise manifests.ManifestError(f"invalid cluster file: {e}") from None
    from berth import app  # here: client commands need not load the scheduler

    # asyncio's own loop by default: measured here (bench/README.md), aiohttp
    # under uvloop answered 5000-node extender requests ~1.5 ms slower
    # (larger bodies arrive in more, smaller reads). --loop uvloop opts in.
    runner: Any = asyncio.run
    if args.loop == "uvloop":
        try:
            import uvloop
        except ImportError:
            raise CliError("--loop uvloop: uvloop is not installed") from None
        runner = uvloop.run
    runner(
        app.serve(
            cfg,
            cluster_file=args.cluster,
            cluster_validate=args.validate,
            kubeconfig=args.kubeconfig,
            in_cluster=args.in_cluster,
            config_file=args.config,
        )
    )
    return 0


# ---------------------------------------------------------------- clients


def cmd_nodes(args: argparse.Namespace) -> int:
    with connect(args) as ch:
        resp = call(cluster_pb2_grpc.ClusterStub(ch).ListNodes, cluster_pb2.ListNodesRequest(), args.server)
    rows = [
        {
            "name": n.name,
            "allocatable": _quantities(n.allocatable),
            "requested": _quantities(n.requested),
            "pods": n.pods,
            "unschedulable": n.unschedulable,
            "labels": dict(n.labels),
            "taints": [f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}" for t in n.taints],
        }
        for n in resp.nodes
    ]
    if args.output == "json":
        print(json.dumps(rows, indent=2))
        return 0
    common.print_table(_node_table(resp.nodes))
    return 0


def _node_table(nodes: Sequence[cluster_pb2.NodeSummary]) -> list[list[str]]:
    """kubectl get's shape: CPU, memory, then a column per extended resource
    any node offers (nvidia.com/gpu, ...), each as requested/allocatable in
    Kubernetes quantities; ``-`` where a node has none of it."""
    extended = sorted({k for n in nodes for k in n.allocatable if resources.is_extended(k)})
    columns = [resources.CPU, resources.MEMORY, *extended]
    table = [["NAME", *(f"{c.upper()}(REQ/ALLOC)" for c in columns), "PODS", "TAINTS"]]
    for n in nodes:
        cells = [n.name + (" (cordoned)" if n.unschedulable else "")]
        for c in columns:
            if c not in n.allocatable and c not in n.requested:
                cells.append("-")
                continue
            used = resources.format_quantity(c, n.requested.get(c, 0))
            cells.append(f"{used}/{resources.format_quantity(c, n.allocatable.get(c, 0))}")
        max_pods = n.allocatable.get(resources.PODS)
        cells.append(f"{n.pods}/{max_pods}" if max_pods is not None else str(n.pods))
        taints = [f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}" for t in n.taints]
        cells.append(",".join(taints) or "<none>")
        table.append(cells)
    return table


def _queue_row(q: scheduler_pb2.QueueStatus) -> dict[str, Any]:
    return {
        "name": q.name,
        "parent": q.parent,
        "leaf": q.leaf,
        "guaranteed": _quantities(q.guaranteed),
        "max": _quantities(q.max),
        "weight": q.weight,
        "allocated": _quantities(q.allocated),
        "pendingPods": q.pending_pods,
        "pending": _quantities(q.pending),
        "dominantShare": q.dominant_share,
        "fairShare": q.fair_share,
        "namespaces": list(q.namespaces),
        "children": list(q.children),
        "reclaimPreemptions": q.reclaim_preemptions,
    }


def _resource_cell(amounts: dict[str, str]) -> str:
    """``cpu=2,memory=4Gi,nvidia.com/gpu=1``: cpu and memory first, as kubectl
    describe lists them; ``<none>`` when empty, as kubectl prints it."""
    order = sorted(amounts, key=lambda k: (k not in (resources.CPU, resources.MEMORY), k))
    return ",".join(f"{k}={amounts[k]}" for k in order) or "<none>"


def cmd_queues(args: argparse.Namespace) -> int:
    with connect(args) as ch:
        stub = scheduler_pb2_grpc.SchedulerStub(ch)
        if args.name:
            queues = [call(stub.GetQueue, scheduler_pb2.GetQueueRequest(name=args.name), args.server)]
        else:
            queues = list(call(stub.ListQueues, scheduler_pb2.ListQueuesRequest(), args.server).queues)
    rows = [_queue_row(q) for q in queues]
    # A named queue prints as the object itself, a listing as a list (kubectl get).
    doc: Any = rows[0] if args.name else rows
    if args.output == "json":
        print(json.dumps(doc, indent=2))
        return 0
    if args.output == "yaml":
        print(yaml.safe_dump(doc, sort_keys=False), end="")
        return 0
    if not rows:
        print("No queues are configured.")
        return 0
    header = ["NAME", "PARENT", "WEIGHT", "GUARANTEED", "MAX", "ALLOCATED", "PENDING", "DOMINANT-SHARE"]
    if args.output == "wide":
        header += ["FAIR-SHARE", "PENDING-REQUESTS", "RECLAIMED", "NAMESPACES"]
    table = [header]
    for r in rows:
        line = [
            r["name"],
            r["parent"] or "<none>",
            f"{r['weight']:g}",
            _resource_cell(r["guaranteed"]),
            _resource_cell(r["max"]),
            _resource_cell(r["allocated"]),
            str(r["pendingPods"]),
            f"{r['dominantShare']:.3f}",
        ]
        if args.output == "wide":
            line += [
                f"{r['fairShare']:.3f}",
                _resource_cell(r["pending"]),
                str(r["reclaimPreemptions"]),
                ",".join(r["namespaces"]) or "<none>",
            ]
        table.append(line)
    common.print_table(table)
    return 0


def _load_pods(path: str, validate: manifests.ValidationMode) -> manifests.Manifests:
    """A ManifestError goes up to main(): one line, exit status 2."""
    if path == "-":
        return manifests.loads(sys.stdin.read(), source="<stdin>", validate=validate)
    return manifests.load(path, validate=validate)


def cmd_explain(args: argparse.Namespace) -> int:
    m = _load_pods(args.file, args.validate)
    if len(m.pods) != 1:
        raise CliError(f"{args.file}: expected exactly one Pod, found {len(m.pods)}")
    req = scheduler_pb2.ExplainRequest(pod=convert.pod_to_pb(m.pods[0]), profile=args.profile or "")
    with connect(args) as ch:
        resp = call(scheduler_pb2_grpc.SchedulerStub(ch).Explain, req, args.server)
    nodes = [
        {
            "node": e.node,
            "feasible": e.feasible,
            "reasons": [r.reason for r in e.reasons],
            "failingPlugins": [
                {"plugin": r.plugin, "reason": r.reason, "unresolvable": r.unresolvable} for r in e.reasons
            ],
            "score": e.score,
            "pluginScores": dict(e.plugin_scores),
        }
        for e in resp.nodes
    ]
    nodes.sort(key=lambda n: (not n["feasible"], -int(n["score"]), str(n["node"])))
    out = {
        "pod": m.pods[0].key,
        "profile": resp.profile,
        "summary": resp.summary,
        "feasibleNodes": resp.feasible_nodes,
        "queue": {
            "phase": resp.queue.phase,
            "attempts": resp.queue.attempts,
            "unschedulablePlugins": list(resp.queue.unschedulable_plugins),
            "message": resp.queue.message,
            "gates": list(resp.queue.gates),
        },
        "nodes": nodes,
    }
    if args.output == "json":
        print(json.dumps(out, indent=2))
        return 0
    print(f"pod {out['pod']} (profile {resp.profile}): {resp.summary}")
    if resp.queue.phase:
        print(f"queue: {resp.queue.phase}, {resp.queue.attempts} attempt(s) {resp.queue.message}".rstrip())
    for n in nodes:
        if n["feasible"]:
            detail = ", ".join(f"{k}={v}" for k, v in sorted(n["pluginScores"].items()))
            print(f"  + {n['node']:<24} score {n['score']:>5}  {detail}")
    for n in nodes:
        if not n["feasible"]:
            print(f"  - {n['node']:<24} {'; '.join(n['reasons'])}")
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    return submit.run(args, _load_pods(args.file, args.validate), call)


# ---------------------------------------------------------------- main


def _validate_option(p: argparse.ArgumentParser) -> None:
    # kubectl's flag, values and default (kubectl apply --validate=strict).
    p.add_argument(
        "--validate",
        choices=manifests.VALIDATION_MODES,
        default="strict",
        help="unknown or duplicate fields in manifests: strict (default) rejects the file, "
        "warn logs each and leaves it out, ignore skips the check",
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="berth", description="Berth: a scheduling service for Kubernetes.")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run the Berth service")
    s.add_argument("--config", help="BerthConfiguration YAML file")
    s.add_argument("--cluster", help="run on an embedded cluster loaded from this manifest file")
    s.add_argument("--http-port", type=int, help="extender, health and metrics port (default 8888)")
    s.add_argument("--grpc-port", type=int, help="gRPC API port (default 50051)")
    s.add_argument("--kubeconfig", help="schedule in the cluster this kubeconfig points at")
    s.add_argument("--in-cluster", action="store_true", help="use the pod's service account")
    s.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio", help="event loop (default asyncio)")
    _validate_option(s)
    s.set_defaults(func=cmd_serve)

    def client(name: str, help_text: str, outputs: tuple[str, ...] = ("text", "json")) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help_text)
        c.add_argument("-o", "--output", choices=outputs, default="text")
        common.add_connection_options(c)
        return c

    n = client("nodes", "list nodes with allocatable and requested resources")
    n.set_defaults(func=cmd_nodes)
    q = client(
        "queues",
        "list the batch queues: quotas, usage, pending pods and shares",
        outputs=("text", "wide", "json", "yaml"),
    )
    q.add_argument("name", nargs="?", help="show only this queue")
    q.set_defaults(func=cmd_queues)
    e = client("explain", "say why each node can or cannot take a pod")
    e.add_argument("-f", "--file", required=True, help="a Pod manifest (YAML or JSON; - for stdin)")
    e.add_argument("--profile", help="the profile to judge with (default: the pod's schedulerName)")
    _validate_option(e)
    e.set_defaults(func=cmd_explain)
    sm = client("submit", "hand pods (and PodGroups) to Berth's scheduling loop")
    sm.add_argument("-f", "--file", required=True, help="manifests (YAML or JSON; - for stdin)")
    sm.add_argument(
        "--wait",
        action="store_true",
        help="follow each pod to its final outcome (Scheduled, Rejected, Cancelled or Preempted), through "
        "nomination and preemption; exit 1 when one ended without a node, 2 when --timeout passed first",
    )
    sm.add_argument("--timeout", type=float, default=60.0, help="seconds to wait with --wait (default 60)")
    _validate_option(sm)
    sm.set_defaults(func=cmd_submit)
    extras.register(sub, client, p)
    inspect.register(sub, client, _validate_option)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args))
    except CliError as e:
        print(f"berth: {e}", file=sys.stderr)
        return 1
    except config.ConfigError as e:
        # `berth serve` cannot start as configured (invalid configuration, a
        # port in use, a missing certificate): one line, and argparse's
        # usage-error status.
        print(f"berth: {e}", file=sys.stderr)
        return 2
    except manifests.ManifestError as e:
        # A manifest Berth cannot take (a misspelt field, a bad quantity): a
        # usage error like a bad flag, one line naming file, document and field.
        print(f"berth: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly, as coreutils do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
