"""``berth get pods|pod NAME|nodes|queues|podgroups|profiles``: what a running Berth
holds, as ``kubectl get`` shows it (``-n``/``-A``, ``-o
text|wide|json|yaml|name``, ``--watch``). ``berth nodes`` and ``berth
queues`` are the older spellings of ``get nodes`` and ``get queues``."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import berth_client
from berth.cli import common, output
from berth.cli.common import CliError
from berth_client import quantity
from berth_client.api.v1 import scheduler_pb2 as spb

__all__ = ["RESOURCES", "register"]

#: kubectl get's narrow REASON column; ``-o wide`` shows it whole.
REASON_WIDTH = 60
#: ``--watch`` lists the pods again after every batch of decisions, and
#: this often when there is none (a pod deleted through the Cluster feed
#: makes no decision).
RELIST_SECONDS = 2.0

Doc = dict[str, Any]
Kind = spb.Decision


# ---------------------------------------------------------------- tables


def _extended(name: str) -> bool:
    """v1helper.IsExtendedResourceName: a name with a domain that is not kubernetes.io's."""
    return not ("/" not in name or "kubernetes.io/" in name or name.startswith("requests."))


def _resource_cell(amounts: dict[str, str]) -> str:
    """``cpu=2,memory=4Gi,nvidia.com/gpu=1``: cpu and memory first, as kubectl
    describe lists them; ``<none>`` when empty, as kubectl prints it."""
    order = sorted(amounts, key=lambda k: (k not in ("cpu", "memory"), k))
    return ",".join(f"{k}={amounts[k]}" for k in order) or "<none>"


def _taint(t: Doc) -> str:
    return f"{t['key']}={t['value']}:{t['effect']}" if t["value"] else f"{t['key']}:{t['effect']}"


def pod_header(wide: bool) -> list[str]:
    h = ["NAMESPACE", "NAME", "QUEUE", "PHASE", "NODE", "ATTEMPTS", "AGE", "REASON", "POSITION"]
    return [*h, "NOMINATED NODE", "PRIORITY", "REQUESTS"] if wide else h


def pod_cells(d: Doc, wide: bool, now: float) -> list[str]:
    reason = d["reason"] or "<none>"
    if not wide and len(reason) > REASON_WIDTH:
        reason = reason[: REASON_WIDTH - 3] + "..."
    created = d["createdMs"] / 1000
    line = [
        d["namespace"],
        d["name"],
        d["queue"] or "<none>",
        d["phase"],
        d["node"] or "<none>",
        str(d["attempts"]),
        output.human_duration(now - created) if created else "<unknown>",
        reason,
        str(d["position"]) if d["position"] else "-",
    ]
    if wide:
        line += [d["nominatedNode"] or "<none>", str(d["priority"]), _resource_cell(d["requests"])]
    return line


def _pod_table(docs: list[Doc], wide: bool) -> list[list[str]]:
    now = time.time()
    return [pod_header(wide), *(pod_cells(d, wide, now) for d in docs)]


def _node_table(docs: list[Doc], wide: bool) -> list[list[str]]:
    """CPU, memory, then a column per extended resource any node offers
    (nvidia.com/gpu, ...), each requested/allocatable; ``-`` where a node
    has none of it."""
    extended = sorted({k for d in docs for k in d["allocatable"] if _extended(k)})
    columns = ["cpu", "memory", *extended]
    table = [["NAME", *(f"{c.upper()}(REQ/ALLOC)" for c in columns), "PODS", "TAINTS"]]
    if wide:
        table[0].append("LABELS")
    for d in docs:
        cells = [d["name"] + (" (cordoned)" if d["unschedulable"] else "")]
        for c in columns:
            if c not in d["allocatable"] and c not in d["requested"]:
                cells.append("-")
            else:
                # Both sides in one unit (1000m/1900m, not 1/1900m).
                req, alloc = quantity.format_pair(
                    c,
                    quantity.canonical(c, d["requested"].get(c, "0")),
                    quantity.canonical(c, d["allocatable"].get(c, "0")),
                )
                cells.append(f"{req}/{alloc}")
        max_pods = d["allocatable"].get("pods")
        cells.append(f"{d['pods']}/{max_pods}" if max_pods is not None else str(d["pods"]))
        cells.append(",".join(_taint(t) for t in d["taints"]) or "<none>")
        if wide:
            cells.append(",".join(f"{k}={v}" for k, v in d["labels"].items()) or "<none>")
        table.append(cells)
    return table


def _queue_table(docs: list[Doc], wide: bool) -> list[list[str]]:
    header = ["NAME", "PARENT", "WEIGHT", "GUARANTEED", "MAX", "ALLOCATED", "PENDING", "DOMINANT-SHARE"]
    if wide:
        header += ["FAIR-SHARE", "PENDING-REQUESTS", "RECLAIMED", "NAMESPACES", "RESERVATIONS"]
    table = [header]
    for r in docs:
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
        if wide:
            line += [
                f"{r['fairShare']:.3f}",
                _resource_cell(r["pending"]),
                str(r["reclaimPreemptions"]),
                ",".join(r["namespaces"]) or "<none>",
                "; ".join(r.get("reservations", ())) or "<none>",
            ]
        table.append(line)
    return table


def _group_table(docs: list[Doc], wide: bool) -> list[list[str]]:
    header = ["NAMESPACE", "NAME", "DIALECT", "PHASE", "MIN", "MEMBERS", "PLACED", "WAITING", "BOUND", "PENDING"]
    header += ["REASON"]
    if wide:
        header += ["TIMEOUT", "MIN-RESOURCES"]
    table = [header]
    for g in docs:
        reason = g["reason"] or "<none>"
        if not wide and len(reason) > REASON_WIDTH:
            reason = reason[: REASON_WIDTH - 3] + "..."
        line = [g["namespace"], g["name"], g.get("dialect") or "<none>", g["phase"]]
        line += [str(g[k]) for k in ("minMember", "members", "placed", "waiting", "bound", "pending")]
        line.append(reason)
        if wide:
            timeout = g["scheduleTimeoutSeconds"]
            line += [f"{timeout}s" if timeout else "<default>", _resource_cell(g["minResources"])]
        table.append(line)
    return table


def _profile_table(docs: list[Doc], wide: bool) -> list[list[str]]:
    """A row per profile; wide: a row per extension point's plugins too."""
    table = [["NAME", "ALIASES", "PLUGINS", "SCORE WEIGHTS"]]
    for p in docs:
        points = {e["extensionPoint"]: e["plugins"] for e in p["extensionPoints"]}
        every = list(dict.fromkeys(n for names in points.values() for n in names))
        weights = ",".join(f"{k}={v}" for k, v in sorted(p["weights"].items())) or "<none>"
        table.append([p["schedulerName"], ",".join(p["aliases"]) or "<none>", str(len(every)), weights])
        if wide:
            table += [[f"  {point}", "", ",".join(names), ""] for point, names in points.items()]
    return table


# ---------------------------------------------------------------- resources


@dataclasses.dataclass(frozen=True, slots=True)
class Resource:
    """One kind ``berth get`` lists: how to fetch it, name it and tabulate it."""

    kind: str  # -o name's prefix
    plural: str
    namespaced: bool
    fetch: Callable[[berth_client.Client, argparse.Namespace], list[Any]]
    fetch_one: Callable[[berth_client.Client, argparse.Namespace, str], Any]
    table: Callable[[list[Doc], bool], list[list[str]]]
    empty: str  # said on stderr when a listing is empty, as kubectl's "No resources found"


def _namespace(args: argparse.Namespace) -> str:
    """The namespace to list ("" every one, -A)."""
    return "" if getattr(args, "all_namespaces", False) else (getattr(args, "namespace", None) or "default")


def _get_pod(c: berth_client.Client, args: argparse.Namespace, name: str) -> Any:
    ns, n = common.pod_key(name, args.namespace)
    return c.get_pod(n, ns)


def _get_group(c: berth_client.Client, args: argparse.Namespace, name: str) -> Any:
    ns, _, n = name.rpartition("/")
    return c.get_pod_group(n, ns or args.namespace or "default")


POD = Resource(
    "pod",
    "pods",
    True,
    lambda c, a: c.list_pods(_namespace(a), queue=a.queue or "", phase=a.phase or ""),
    _get_pod,
    _pod_table,
    "No pods found in {where}.",
)
NODE = Resource(
    "node", "nodes", False, lambda c, a: c.list_nodes(), lambda c, a, n: c.get_node(n), _node_table, "No nodes found."
)
QUEUE = Resource(
    "queue",
    "queues",
    False,
    lambda c, a: c.list_queues(),
    lambda c, a, n: c.get_queue(n),
    _queue_table,
    "No queues are configured.",
)
GROUP = Resource(
    "podgroup",
    "podgroups",
    True,
    lambda c, a: c.list_pod_groups(_namespace(a)),
    _get_group,
    _group_table,
    "No pod groups found in {where}.",
)
PROFILE = Resource(
    "profile",
    "profiles",
    False,
    lambda c, a: c.list_profiles(),
    lambda c, a, n: c.get_profile(n),
    _profile_table,
    "No profiles.",
)
#: Every spelling kubectl users type, singular, plural and short.
RESOURCES = {
    **dict.fromkeys(("pods", "pod", "po"), POD),
    **dict.fromkeys(("nodes", "node", "no"), NODE),
    **dict.fromkeys(("queues", "queue"), QUEUE),
    **dict.fromkeys(("podgroups", "podgroup", "pg"), GROUP),
    **dict.fromkeys(("profiles", "profile"), PROFILE),
}


def cmd_get(args: argparse.Namespace) -> int:
    res: Resource = RESOURCES[args.resource]
    if getattr(args, "all_namespaces", False) and getattr(args, "namespace", None):
        raise CliError("-n/--namespace and -A/--all-namespaces are exclusive")
    if getattr(args, "watch", False):
        if res is not POD or args.names:
            raise CliError("--watch: only `berth get pods` (all of them) can be watched")
        try:
            return asyncio.run(_watch(args))
        except KeyboardInterrupt:  # Ctrl-C ends a watch, as it does kubectl's
            return common.EXIT_OK
    with common.client(args) as c:
        items = [res.fetch_one(c, args, n) for n in args.names] if args.names else res.fetch(c, args)
    docs = [berth_client.to_dict(i) for i in items]
    one = len(args.names) == 1
    if output.emit(docs[0] if one else docs, args.output):
        return 0
    if args.output == "name":
        output.print_names(res.kind, (str(d["name"]) for d in docs))
    elif docs:
        output.print_table(res.table(docs, args.output == "wide"))
    elif res is QUEUE:
        print(res.empty)  # on stdout, as `berth queues` has always said it
    else:
        where = "any namespace" if not _namespace(args) else f"{_namespace(args)} namespace"
        print(res.empty.format(where=where), file=sys.stderr)
    return 0


# ---------------------------------------------------------------- --watch


def _changing(d: Doc) -> tuple[Any, ...]:
    """What makes a watched row worth printing again (not its age)."""
    return (d["phase"], d["node"], d["attempts"], d["reason"], d["position"], d["queue"])


#: What a pod's last decision says about why it left.
_DEPARTED = {Kind.CANCELLED: "Cancelled", Kind.PREEMPTED: "Preempted"}


class _Printer:
    """Prints watched rows: a header once, columns that stay aligned."""

    #: Room for the values a column usually takes, so later rows line up with the first ones.
    MIN_WIDTHS = {"NAMESPACE": 10, "NAME": 20, "QUEUE": 8, "PHASE": 15, "NODE": 12, "AGE": 9, "REASON": REASON_WIDTH}

    def __init__(self, out: str, first: Sequence[Doc]) -> None:
        self.out = out
        self.wide = out == "wide"
        header = pod_header(self.wide)
        now = time.time()
        self.columns = output.Columns([max(len(h), self.MIN_WIDTHS.get(h, 0)) for h in header])
        self.columns.widen(pod_cells(d, self.wide, now) for d in first)
        if out in ("text", "wide"):
            print(self.columns.line(header))

    def row(self, d: Doc) -> None:
        if self.out == "json":
            print(json.dumps(d))
        elif self.out == "yaml":
            output.emit(d, "yaml")
            print("---")
        elif self.out == "name":
            print(f"pod/{d['name']}")
        else:
            print(self.columns.line(pod_cells(d, self.wide, time.time())))
        sys.stdout.flush()


async def _watch(args: argparse.Namespace) -> int:
    """kubectl get --watch: the listing, then a line per pod whose row
    changed or that left (PHASE Cancelled, Preempted or Deleted), driven by
    the decision stream, which reconnects on its own."""
    client = berth_client.AsyncClient.from_settings(common.settings(args))
    batches: asyncio.Queue[list[Any]] = asyncio.Queue()

    async def pump() -> None:
        async for batch in client.watch_batches():
            batches.put_nowait(batch)

    async def listing() -> list[Doc]:
        rows = await client.list_pods(_namespace(args), queue=args.queue or "", phase=args.phase or "")
        return [berth_client.to_dict(r) for r in rows]

    watcher = asyncio.create_task(pump(), name="berth-get-watch")
    try:
        docs = await listing()
        printer = _Printer(args.output, docs)
        seen: dict[str, Doc] = {}
        for d in docs:
            seen[f"{d['namespace']}/{d['name']}"] = d
            printer.row(d)
        departed: dict[str, str] = {}
        while True:
            getter = asyncio.ensure_future(batches.get())
            done, _ = await asyncio.wait({getter, watcher}, timeout=RELIST_SECONDS, return_when="FIRST_COMPLETED")
            if watcher in done:
                getter.cancel()
                watcher.result()  # the watch gave up: its error
                return common.EXIT_OK
            batch: list[Any] = []
            if getter in done:
                batch = getter.result()
            else:
                getter.cancel()
            while not batches.empty():
                batch += batches.get_nowait()
            for dec in batch:
                if dec.kind in _DEPARTED:
                    departed[dec.pod] = _DEPARTED[dec.kind]
            now = {f"{d['namespace']}/{d['name']}": d for d in await listing()}
            for key, d in now.items():
                if key not in seen or _changing(seen[key]) != _changing(d):
                    printer.row(d)
            for key in seen.keys() - now.keys():
                printer.row({**seen[key], "phase": departed.pop(key, "Deleted"), "position": 0})
            seen = now
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        await client.close()


# ---------------------------------------------------------------- registration


EXAMPLES = """Examples:
  berth get pods                        # pending and placed pods in the default namespace
  berth get pods -A --phase Unschedulable -o wide
  berth get pod web-0 -o yaml           # one pod; also NS/NAME
  berth get pods --watch                # then a line per change, deletions included
  berth get nodes                       # requested/allocatable per node
  berth get queues research -o json
  berth get podgroups -A                # gangs: members present, placed, waiting
  berth get profiles -o wide            # the plugins each profile runs, per extension point"""


def add_get_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--namespace", help="pods and pod groups of this namespace (default: default)")
    p.add_argument("-A", "--all-namespaces", action="store_true", help="of every namespace")
    p.add_argument("--queue", help="pods: only those of this leaf queue")
    p.add_argument(
        "--phase",
        choices=berth_client.outcomes.PHASES,
        help="pods: only those in this phase",
    )
    p.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="pods: after the listing, a line per pod that changes or leaves (Cancelled, Preempted, Deleted)",
    )
    output.add_output(
        p,
        text="a table",
        wide="more columns and whole reasons",
        data="the API's objects (one for one NAME, else a list)",
        name="KIND/NAME lines",
    )


def register(sub: Any, formatter: type[argparse.HelpFormatter]) -> None:
    """``get``, and the older ``nodes`` and ``queues``."""
    g = sub.add_parser(
        "get",
        help="list pods, nodes, queues, pod groups or profiles (kubectl get)",
        formatter_class=formatter,
        epilog=EXAMPLES
        + "\n\nResources: pods (pod, po), nodes (node, no), queues (queue), podgroups (podgroup, pg),"
        + " profiles (profile).",
    )
    g.add_argument(
        "resource", choices=sorted(RESOURCES), metavar="RESOURCE", help="pods, nodes, queues, podgroups or profiles"
    )
    g.add_argument("names", nargs="*", metavar="NAME", help="only these (pods: NAME or NAMESPACE/NAME)")
    add_get_options(g)
    common.add_connection_options(g)
    g.set_defaults(func=cmd_get)

    for old, resource, what in (
        ("nodes", "nodes", "list nodes with requested and allocatable resources (berth get nodes)"),
        ("queues", "queues", "list the batch queues: quotas, usage, pending pods, shares (berth get queues)"),
    ):
        a = sub.add_parser(
            old,
            help=what,
            formatter_class=formatter,
            epilog=f"Examples:\n  berth {old}\n  berth {old} -o json\n\nThe same as `berth get {resource}`.",
        )
        a.add_argument("names", nargs="*" if resource == "nodes" else "?", metavar="NAME", help="only this one")
        output.add_output(
            a,
            text="a table",
            wide="more columns",
            data="the API's objects (one for one NAME, else a list)",
            name="KIND/NAME lines",
        )
        common.add_connection_options(a)
        a.set_defaults(func=_alias(resource))


def _alias(resource: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        names = args.names if isinstance(args.names, list) else [args.names] if args.names else []
        ns = argparse.Namespace(**{**vars(args), "resource": resource, "names": names})
        return cmd_get(ns)

    return run
