"""``berth why``, ``berth whatif`` and ``berth explain``: why a pod waits,
how many of a pod would fit, and what each node says of a pod."""

from __future__ import annotations

import argparse
from typing import Any

import berth_client
from berth.cli import common, manifests, output
from berth.cli.common import CliError

__all__ = ["register"]

#: Placements ``whatif`` lists in text; ``-o wide`` lists them all.
PLACEMENTS_SHOWN = 20


def _one_pod(args: argparse.Namespace) -> Any:
    pods = manifests.read(args.file, args.validate, ("Pod",))
    if len(pods) != 1:
        raise CliError(f"{args.file}: expected exactly one Pod, found {len(pods)}")
    return pods[0]


def _key(pod: Any) -> str:
    return f"{pod.metadata.namespace or 'default'}/{pod.metadata.name}"


# ---------------------------------------------------------------- why


def cmd_why(args: argparse.Namespace) -> int:
    """Exit 0 when the pod is Bound, 1 otherwise (waiting, or not found)."""
    ns, name = common.pod_key(args.pod, args.namespace)
    with common.client(args) as c:
        resp = c.why(name, ns)
    doc = berth_client.to_dict(resp)
    if output.emit(doc, args.output):
        pass
    elif args.output == "name":
        output.print_names("pod", [name])
    else:
        where = f" in queue {doc['queue']}" if doc["queue"] else ""
        print(f"pod {doc['pod']}: {doc['phase']}{where}")
        print(f"  {doc['summary']}")
        for b in doc["blockers"]:
            print(f"  - {b['kind']}: {b['message']}")
            if b["unblocksWhen"]:
                print(f"      {b['unblocksWhen']}")
        if doc["closestNodes"]:
            print("  closest nodes:")
            for n in doc["closestNodes"]:
                print(f"    {n['node']}: {n['lacks']}")
        if args.output == "wide":
            print(f"  position {doc['position'] or '-'}, node {doc['node'] or '<none>'}")
    return common.EXIT_OK if resp.phase == berth_client.outcomes.BOUND else common.EXIT_FAILED


# ---------------------------------------------------------------- whatif


def cmd_whatif(args: argparse.Namespace) -> int:
    if args.replicas < 0:
        raise CliError(f"--replicas: must not be negative, got {args.replicas}")
    pod = _one_pod(args)
    with common.client(args) as c:
        resp = c.whatif(pod, args.replicas, profile=args.profile or "")
    doc = berth_client.to_dict(resp)
    if output.emit(doc, args.output):
        return common.EXIT_OK
    if args.output == "name":
        output.print_names("node", (p["node"] for p in doc["placements"]))
        return common.EXIT_OK
    asked = f" of {doc['replicas']}" if doc["replicas"] else ""
    print(f"{doc['fit']}{asked} replicas of {doc['pod']} fit now; stopped by: {doc['limitedBy']}")
    name = doc["pod"].split("/", 1)[1]
    shown = doc["placements"] if args.output == "wide" else doc["placements"][:PLACEMENTS_SHOWN]
    for i, p in enumerate(shown):
        extra = f" (preempts {', '.join(p['preempts'])})" if p["preempts"] else ""
        print(f"  {name}-{i} -> {p['node']}{extra}")
    if len(shown) < len(doc["placements"]):
        print(f"  ... and {len(doc['placements']) - len(shown)} more (-o wide lists them all)")
    if doc["queue"]:
        verdict = "ok" if doc["quotaOk"] else doc["quotaMessage"]
        print(f"queue {doc['queue']}: {verdict}")
    return common.EXIT_OK


# ---------------------------------------------------------------- explain


def cmd_explain(args: argparse.Namespace) -> int:
    pod = _one_pod(args)
    with common.client(args) as c:
        resp = c.explain(pod, profile=args.profile or "")
    doc = berth_client.to_dict(resp)
    # Feasible first, best score first, as the scheduler would pick.
    doc["nodes"].sort(key=lambda n: (not n["feasible"], -int(n["score"]), str(n["node"])))
    if output.emit(doc, args.output):
        return common.EXIT_OK
    if args.output == "name":
        output.print_names("node", (n["node"] for n in doc["nodes"] if n["feasible"]))
        return common.EXIT_OK
    print(f"pod {_key(pod)} (profile {doc['profile']}): {doc['summary']}")
    queue = doc["queue"] or {}
    if queue.get("phase"):
        print(f"queue: {queue['phase']}, {queue['attempts']} attempt(s) {queue['message']}".rstrip())
    wide = args.output == "wide"
    for n in doc["nodes"]:
        if n["feasible"]:
            detail = ", ".join(f"{k}={v}" for k, v in sorted(n["pluginScores"].items())) if wide else ""
            print(f"  + {n['node']:<24} score {n['score']:>5}  {detail}".rstrip())
    for n in doc["nodes"]:
        if not n["feasible"]:
            print(f"  - {n['node']:<24} {'; '.join(r['reason'] for r in n['reasons'])}")
    return common.EXIT_OK


# ---------------------------------------------------------------- registration


def register(sub: Any, formatter: type[argparse.HelpFormatter]) -> None:
    """Add ``why``, ``whatif`` and ``explain`` to the ``berth`` parser."""
    w = sub.add_parser(
        "why",
        help="say why a pod is still waiting, and what would let it run",
        formatter_class=formatter,
        epilog="Examples:\n"
        "  berth why web-0                  # in the default namespace\n"
        "  berth why batch/train-3 -o yaml\n\n"
        "Exit status: 0 when the pod is Bound, 1 while it waits (any other phase) or when Berth does not know it.",
    )
    w.add_argument("pod", metavar="POD", help="NAMESPACE/NAME, or NAME with -n (pod/NAME as kubectl takes it)")
    w.add_argument("-n", "--namespace", help="the pod's namespace when only NAME is given (default: default)")
    output.add_output(
        w,
        text="the blockers and what would free each",
        wide="also its queue position and node",
        data="the Why answer",
        name="pod/NAME",
    )
    common.add_connection_options(w)
    w.set_defaults(func=cmd_why)

    f = sub.add_parser(
        "whatif",
        help="how many replicas of a pod would fit now, and where (places nothing)",
        formatter_class=formatter,
        epilog="Examples:\n"
        "  berth whatif -f examples/pods/web.yaml                # until one does not fit\n"
        "  berth whatif -f examples/pods/gpu.yaml --replicas 8 -o json",
    )
    f.add_argument("-f", "--file", required=True, help="a Pod manifest (YAML or JSON; - for stdin)")
    f.add_argument("--replicas", type=int, default=0, help="place at most N (default: until one does not fit)")
    f.add_argument("--profile", help="the profile to judge with (default: the pod's schedulerName)")
    manifests.add_validate_option(f)
    output.add_output(
        f,
        text=f"the count and the first {PLACEMENTS_SHOWN} placements",
        wide="every placement",
        data="the WhatIf answer",
        name="node/NAME of each placement",
    )
    common.add_connection_options(f)
    f.set_defaults(func=cmd_whatif)

    e = sub.add_parser(
        "explain",
        help="say why each node can or cannot take a pod",
        formatter_class=formatter,
        epilog="Examples:\n"
        "  berth explain -f examples/pods/web.yaml\n"
        "  berth explain -f examples/pods/gpu.yaml -o wide      # with every plugin's score",
    )
    e.add_argument("-f", "--file", required=True, help="a Pod manifest (YAML or JSON; - for stdin)")
    e.add_argument("--profile", help="the profile to judge with (default: the pod's schedulerName)")
    manifests.add_validate_option(e)
    output.add_output(
        e,
        text="feasible nodes with their score, then the others with their reasons",
        wide="with each plugin's score",
        data="the Explain answer, nodes best first",
        name="node/NAME of the feasible nodes, best first",
    )
    common.add_connection_options(e)
    e.set_defaults(func=cmd_explain)
