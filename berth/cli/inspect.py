"""``berth get pods``, ``berth why`` and ``berth whatif``: what Berth holds,
why a pod waits and what would fit — gRPC clients of a running Berth
(``ListPods``, ``Why``, ``WhatIf``, ``WatchDecisions``) with kubectl's habits:
``-n``/``-A``, ``-o json|yaml|wide``, ``--watch``, meaningful exit codes."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import grpc
import yaml

from berth.adapters.grpc import convert
from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from berth.cli import common
from berth.cli.common import CliError
from berth.cluster import manifests, resources

__all__ = ["human_duration", "register"]

PHASES = ("Gated", "Active", "Backoff", "Unschedulable", "WaitingOnPermit", "Assumed", "Bound", "Rejected")
#: kubectl get's narrow REASON column; ``-o wide`` shows it whole.
REASON_WIDTH = 60

Client = Callable[..., argparse.ArgumentParser]


# ---------------------------------------------------------------- helpers


def human_duration(seconds: float) -> str:
    """kubectl's AGE column (``duration.HumanDuration`` in
    k8s.io/apimachinery/pkg/util/duration): 45s, 3m20s, 17m, 5h12m, 3d4h, 92d, 3y45d."""
    s = int(seconds)
    if s < 0:
        return "<invalid>"
    if s < 60 * 2:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 60 * 3:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if h < 24 * 8:
        return f"{h // 24}d{h % 24}h" if h % 24 else f"{h // 24}d"
    if h < 24 * 365 * 2:
        return f"{h // 24}d"
    if h < 24 * 365 * 8:
        days = (h // 24) % 365
        return f"{h // 24 // 365}y{days}d" if days else f"{h // 24 // 365}y"
    return f"{h // 24 // 365}y"


def _pod_key(arg: str, namespace: str | None) -> tuple[str, str]:
    """``NS/NAME`` (``pod/`` accepted, as kubectl does), or ``NAME`` in ``-n``."""
    ref = arg.removeprefix("pod/").removeprefix("pods/")
    ns, sep, name = ref.rpartition("/")
    if not sep:
        ns = namespace or "default"
    if not ns or not name or "/" in ns:
        raise CliError(f"{arg!r}: expected NAMESPACE/NAME or NAME")
    return ns, name


def _emit(doc: Any, output: str) -> bool:
    """Print ``doc`` as JSON or YAML when asked; False for the text forms."""
    if output == "json":
        print(json.dumps(doc, indent=2))
        return True
    if output == "yaml":
        print(yaml.safe_dump(doc, sort_keys=False), end="")
        return True
    return False


def _quantities(m: Any) -> dict[str, str]:
    return {k: resources.format_quantity(k, int(v)) for k, v in sorted(m.items())}


# ---------------------------------------------------------------- get pods


def _row_doc(r: scheduler_pb2.PodRow, now: float) -> dict[str, Any]:
    created = r.created_ms / 1000
    return {
        "namespace": r.namespace,
        "name": r.name,
        "uid": r.uid,
        "queue": r.queue,
        "phase": r.phase,
        "node": r.node,
        "nominatedNode": r.nominated_node,
        "attempts": r.attempts,
        "created": dt.datetime.fromtimestamp(created, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if created else "",
        "age": human_duration(now - created) if created else "",
        "reason": r.reason,
        "position": r.position,
        "priority": r.priority,
        "requests": _quantities(r.requests),
    }


def _cells(d: dict[str, Any], wide: bool) -> list[str]:
    reason = d["reason"] or "<none>"
    if not wide and len(reason) > REASON_WIDTH:
        reason = reason[: REASON_WIDTH - 3] + "..."
    line = [
        d["namespace"],
        d["name"],
        d["queue"] or "<none>",
        d["phase"],
        d["node"] or "<none>",
        str(d["attempts"]),
        d["age"] or "<unknown>",
        reason,
        str(d["position"]) if d["position"] else "-",
    ]
    if wide:
        requests = ",".join(f"{k}={v}" for k, v in d["requests"].items()) or "<none>"
        line += [d["nominatedNode"] or "<none>", str(d["priority"]), requests]
    return line


def _header(wide: bool) -> list[str]:
    h = ["NAMESPACE", "NAME", "QUEUE", "PHASE", "NODE", "ATTEMPTS", "AGE", "REASON", "POSITION"]
    return [*h, "NOMINATED NODE", "PRIORITY", "REQUESTS"] if wide else h


def _list(stub: Any, args: argparse.Namespace) -> list[scheduler_pb2.PodRow]:
    req = scheduler_pb2.ListPodsRequest(
        namespace="" if args.all_namespaces else (args.namespace or "default"),
        queue=args.queue or "",
        phase=args.phase or "",
    )
    return list(common.call(stub.ListPods, req, args.server).pods)


def cmd_get(args: argparse.Namespace) -> int:
    if args.all_namespaces and args.namespace:
        raise CliError("-n/--namespace and -A/--all-namespaces are exclusive")
    with common.connect(args) as ch:
        stub = scheduler_pb2_grpc.SchedulerStub(ch)
        rows = _list(stub, args)
        now = time.time()
        docs = [_row_doc(r, now) for r in rows]
        wide = args.output == "wide"
        if not _emit(docs, args.output):
            if docs:
                common.print_table([_header(wide), *(_cells(d, wide) for d in docs)])
            elif not args.watch:
                where = "any namespace" if args.all_namespaces else f"{args.namespace or 'default'} namespace"
                print(f"No pods found in {where}.", file=sys.stderr)
        if args.watch:
            return _watch(stub, args, docs, wide)
    return 0


def _watch(stub: Any, args: argparse.Namespace, docs: list[dict[str, Any]], wide: bool) -> int:
    """kubectl get --watch: after the listing, a line per pod whose row
    changed (JSON: one object per line), driven by the decision stream."""
    seen = {(d["namespace"], d["name"]): _changing(d) for d in docs}
    widths = [max(len(c) for c in col) for col in zip(_header(wide), *(_cells(d, wide) for d in docs), strict=True)]
    stream = stub.WatchDecisions(scheduler_pb2.WatchDecisionsRequest())
    try:
        for _ in stream:
            now = time.time()
            for r in _list(stub, args):
                d = _row_doc(r, now)
                key = (d["namespace"], d["name"])
                if seen.get(key) == _changing(d):
                    continue
                seen[key] = _changing(d)
                if args.output in ("json", "yaml"):
                    print(json.dumps(d) if args.output == "json" else "---\n" + yaml.safe_dump(d, sort_keys=False))
                else:
                    cells = _cells(d, wide)
                    widths = [max(w, len(c)) for w, c in zip(widths, cells, strict=True)]
                    print("   ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
                sys.stdout.flush()
    except grpc.RpcError as e:
        raise CliError(common.rpc_error(e, args.server)) from None
    except KeyboardInterrupt:
        return 0
    finally:
        stream.cancel()
    return 0


def _changing(d: dict[str, Any]) -> tuple[Any, ...]:
    """What makes a watched row worth printing again (not its age)."""
    return (d["phase"], d["node"], d["attempts"], d["reason"], d["position"], d["queue"])


# ---------------------------------------------------------------- why


def _why_doc(w: scheduler_pb2.WhyResponse) -> dict[str, Any]:
    return {
        "pod": w.pod,
        "phase": w.phase,
        "summary": w.summary,
        "blockers": [{"kind": b.kind, "message": b.message, "unblocksWhen": b.unblocks_when} for b in w.blockers],
        "queue": w.queue,
        "position": w.position,
        "node": w.node,
        "closestNodes": [{"node": c.node, "lacks": c.lacks} for c in w.closest_nodes],
    }


def cmd_why(args: argparse.Namespace) -> int:
    """Exit 0 when the pod is bound, 1 while it waits (or is not found)."""
    ns, name = _pod_key(args.pod, args.namespace)
    with common.connect(args) as ch:
        resp = common.call(
            scheduler_pb2_grpc.SchedulerStub(ch).Why, scheduler_pb2.WhyRequest(namespace=ns, name=name), args.server
        )
    doc = _why_doc(resp)
    if not _emit(doc, args.output):
        where = f" in queue {doc['queue']}" if doc["queue"] else ""
        print(f"pod {doc['pod']}: {doc['phase']}{where}")
        print(f"  {doc['summary']}")
        for b in doc["blockers"]:
            print(f"  - {b['kind']}: {b['message']}")
            if b["unblocksWhen"]:
                print(f"      {b['unblocksWhen']}")
        if doc["closestNodes"]:
            print("  closest nodes:")
            for c in doc["closestNodes"]:
                print(f"    {c['node']}: {c['lacks']}")
    return 0 if resp.phase == "Bound" else 1


# ---------------------------------------------------------------- whatif


def _whatif_doc(w: scheduler_pb2.WhatIfResponse) -> dict[str, Any]:
    return {
        "pod": w.pod,
        "replicas": w.replicas,
        "fit": w.fit,
        "placements": [{"node": p.node, "preempts": list(p.preempts)} for p in w.placements],
        "limitedBy": w.limited_by,
        "queue": w.queue,
        "quota": {"ok": w.quota_ok, "message": w.quota_message},
        "profile": w.profile,
    }


def cmd_whatif(args: argparse.Namespace) -> int:
    if args.replicas < 0:
        raise CliError(f"--replicas: must not be negative, got {args.replicas}")
    source = sys.stdin.read() if args.file == "-" else None
    m = (
        manifests.loads(source, source="<stdin>", validate=args.validate)
        if source is not None
        else manifests.load(args.file, validate=args.validate)
    )
    if len(m.pods) != 1:
        raise CliError(f"{args.file}: expected exactly one Pod, found {len(m.pods)}")
    req = scheduler_pb2.WhatIfRequest(
        pod=convert.pod_to_pb(m.pods[0]), replicas=args.replicas, profile=args.profile or ""
    )
    with common.connect(args) as ch:
        resp = common.call(scheduler_pb2_grpc.SchedulerStub(ch).WhatIf, req, args.server)
    doc = _whatif_doc(resp)
    if not _emit(doc, args.output):
        asked = f" of {doc['replicas']}" if doc["replicas"] else ""
        print(f"{doc['fit']}{asked} replicas of {doc['pod']} fit now; stopped by: {doc['limitedBy']}")
        name = doc["pod"].split("/", 1)[1]
        for i, p in enumerate(doc["placements"]):
            extra = f" (preempts {', '.join(p['preempts'])})" if p["preempts"] else ""
            print(f"  {name}-{i} -> {p['node']}{extra}")
        if doc["queue"]:
            verdict = "ok" if doc["quota"]["ok"] else doc["quota"]["message"]
            print(f"queue {doc['queue']}: {verdict}")
    return 0


# ---------------------------------------------------------------- registration


def register(sub: Any, client: Client, validate_option: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``get``, ``why`` and ``whatif`` to the ``berth`` parser."""
    g = client("get", "list the pods Berth schedules (kubectl get pods)", outputs=("text", "wide", "json", "yaml"))
    g.add_argument("resource", choices=("pods", "pod", "po"), help="what to list: pods")
    g.add_argument("-n", "--namespace", help="only this namespace (default: default)")
    g.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    g.add_argument("--queue", help="only pods of this leaf queue")
    g.add_argument("--phase", choices=PHASES, help="only pods in this phase")
    g.add_argument("-w", "--watch", action="store_true", help="after listing, print each pod whose row changes")
    g.set_defaults(func=cmd_get)

    w = client("why", "say why a pod is still waiting, and what would let it run", outputs=("text", "json", "yaml"))
    w.add_argument("pod", help="NAMESPACE/NAME (or NAME with -n)")
    w.add_argument("-n", "--namespace", help="the pod's namespace when only NAME is given (default: default)")
    w.set_defaults(func=cmd_why)

    f = client("whatif", "how many replicas of a pod would fit now, and where", outputs=("text", "json", "yaml"))
    f.add_argument("-f", "--file", required=True, help="a Pod manifest (YAML or JSON; - for stdin)")
    f.add_argument("--replicas", type=int, default=0, help="place at most N (default: until one does not fit)")
    f.add_argument("--profile", help="the profile to judge with (default: the pod's schedulerName)")
    validate_option(f)
    f.set_defaults(func=cmd_whatif)
