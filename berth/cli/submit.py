"""``berth submit``: hand manifests to a running Berth and, with ``--wait``,
follow each pod to its outcome (:mod:`berth_client.outcomes`: the same
status words as ``berth get pods`` and ``berth why``).

The table ends with a summary line (``2000 pods: 5 Bound, 1995
Unschedulable``); when ``--timeout`` passes first, one line on stderr names
the first pods still waiting and counts the rest.

Exit status: 0 when every pod was accepted (and, with ``--wait``, is
Bound); 1 when one was rejected, or ended without a node (Unschedulable
where preemption cannot help, Cancelled, Preempted); 2 when a manifest is
refused before anything is sent, or ``--timeout`` passed with pods still
waiting. Pods the submitted ones preempted are listed as ``Preempted`` rows.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import berth_client
from berth.cli import common, manifests, output
from berth.cli.common import CliError

__all__ = ["register", "summary", "timed_out"]

#: Pods named in the timeout line; the rest are counted.
NAMED_WHEN_LATE = 5


def summary(waited: berth_client.Waited) -> str:
    """``4 pods: 3 Bound, 1 Gated``."""
    n = len(waited.outcomes)
    counts = ", ".join(f"{k} {s}" for s, k in waited.counts().items())
    victims = f"; preempted {len(waited.victims)}" if waited.victims else ""
    return f"{n} pod{'s' if n != 1 else ''}: {counts}{victims}"


def timed_out(waited: berth_client.Waited, timeout: float) -> str:
    """The one stderr line when ``--timeout`` passed: the first pods still
    waiting with their status, then how many more."""
    late = waited.waiting
    named = ", ".join(f"{o.pod} ({o.status})" for o in late[:NAMED_WHEN_LATE])
    more = f", ... and {len(late) - NAMED_WHEN_LATE} more" if len(late) > NAMED_WHEN_LATE else ""
    pods = f"{len(late)} pods: " if len(late) > NAMED_WHEN_LATE else ""
    return f"timed out after {timeout:g}s waiting for {pods}{named}{more}"


def cmd_submit(args: argparse.Namespace) -> int:
    if args.wait and args.timeout <= 0:
        raise CliError(f"--timeout: must be more than 0 seconds, not {args.timeout:g}")
    items = manifests.read(args.file, args.validate, ("Pod", "PodGroup"))
    if not items:
        raise CliError(f"{args.file}: no Pods or PodGroups to submit")
    with common.client(args) as c:
        results = c.submit(items)
        if args.wait:
            waited = c.wait(results, timeout=args.timeout)
        else:
            waited = berth_client.outcomes.Waiter(results).result(False)
    rows = [o.to_dict() for o in (*waited.outcomes, *waited.victims)]
    if args.wait:
        line = summary(waited)
    else:
        accepted = sum(r.accepted for r in results)
        rejected = f", {len(results) - accepted} rejected" if accepted < len(results) else ""
        line = f"{len(results)} pod{'s' if len(results) != 1 else ''}: {accepted} accepted{rejected}"
    if output.emit(rows, args.output):
        pass
    elif args.output == "name":
        output.print_names("pod", (str(r["pod"]).split("/", 1)[1] for r in rows))
    else:
        table = [["POD", "STATUS", "NODE", "REASON"]]
        table += [[str(r["pod"]), str(r["status"]), str(r["node"] or "-"), str(r["reason"] or "")] for r in rows]
        output.print_table(table)
        print(line)
    if waited.failed or not all(r.accepted for r in results):
        return common.EXIT_FAILED
    if waited.timed_out:
        print(f"berth: {timed_out(waited, args.timeout)}", file=sys.stderr)
        return common.EXIT_USAGE
    return common.EXIT_OK


def register(sub: Any, formatter: type[argparse.HelpFormatter]) -> None:
    s = sub.add_parser(
        "submit",
        help="hand pods (and PodGroups) to Berth's scheduling loop",
        formatter_class=formatter,
        epilog="Examples:\n"
        "  berth submit -f examples/pods/batch.yaml\n"
        "  berth submit -f examples/pods/batch.yaml --wait --timeout 30\n"
        "  cat pods.json | berth submit -f - --wait -o json\n\n"
        "Statuses: Bound, Unschedulable, Rejected, Gated, Active, Backoff, Assumed, Cancelled, Preempted "
        "(berth get pods and berth why use the same words).\n"
        "Exit status: 0 every pod accepted (with --wait: Bound); 1 a pod rejected or done without a node; "
        "2 a manifest refused before anything was sent, or --timeout passed first.",
    )
    s.add_argument("-f", "--file", required=True, help="manifests: Pods and PodGroups (YAML or JSON; - for stdin)")
    s.add_argument(
        "--wait",
        action="store_true",
        help="follow each pod until it is Bound or cannot be (Unschedulable with no preemption that helps, "
        "Rejected, Cancelled, Preempted), through nomination and preemption",
    )
    s.add_argument("--timeout", type=float, default=60.0, help="seconds to wait with --wait (default 60)")
    manifests.add_validate_option(s)
    output.add_output(
        s,
        text="a row per pod and a summary line",
        wide="the same",
        data="a list of {pod, status, node, reason}",
        name="pod/NAME lines",
    )
    common.add_connection_options(s)
    s.set_defaults(func=cmd_submit)
