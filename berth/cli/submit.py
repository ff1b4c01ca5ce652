"""``berth submit``: hand manifests to a running Berth and, with ``--wait``,
follow each pod's decisions to its final outcome.

A pod's outcome is final when it is

- ``Scheduled``: bound to a node;
- ``Rejected``: refused at submission, or an attempt whose every reason is
  UnschedulableAndUnresolvable (preemption cannot help, kube-scheduler's
  ``framework.UnschedulableAndUnresolvable``);
- ``Cancelled`` or ``Preempted``: withdrawn, or evicted for another pod.

Everything else is a step on the way and is followed, not reported as the
end: a failed attempt whose preemption nominated a node (``Nominated``, the
pod comes back when the victims are gone), ``Unschedulable`` (retried on the
next cluster change or after backoff), ``Gated``, ``Binding``. When
``--timeout`` passes first, the pod's last state and reason are reported.

Exit status: 0 when every pod ended Scheduled; 1 when one was rejected,
cancelled or preempted; 2 when the timeout passed with pods still waiting.
Victims that the submitted pods preempted meanwhile are reported as extra
``Preempted`` rows.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeAlias

import grpc

from berth.adapters.grpc import convert
from berth.api.v1 import model_pb2, scheduler_pb2, scheduler_pb2_grpc
from berth.cli import common
from berth.cli.common import CliError
from berth.cluster import manifests, model

__all__ = ["run"]

Kind = scheduler_pb2.Decision

SCHEDULED, REJECTED, CANCELLED, PREEMPTED = "Scheduled", "Rejected", "Cancelled", "Preempted"
FINAL = frozenset({SCHEDULED, REJECTED, CANCELLED, PREEMPTED})

#: The state a decision leaves a followed pod in (UNSCHEDULABLE is judged
#: on its reasons, in _Outcome.follow).
_STEP = {
    Kind.QUEUED: "Pending",
    Kind.GATED: "Gated",
    Kind.UNSCHEDULABLE: "Unschedulable",
    Kind.NOMINATED: "Nominated",
    Kind.ASSUMED: "Binding",
    Kind.BIND_FAILED: "Unschedulable",
    Kind.BOUND: SCHEDULED,
    Kind.CANCELLED: CANCELLED,
    Kind.PREEMPTED: PREEMPTED,
}


@dataclasses.dataclass(slots=True)
class _Outcome:
    """Where one submitted pod stands, from the decisions seen so far."""

    pod: str
    uid: str
    status: str
    reason: str = ""
    node: str = ""

    def follow(self, d: scheduler_pb2.Decision) -> None:
        status = _STEP.get(d.kind)
        if status is None or self.status in FINAL:
            return
        reason = d.message or ", ".join(r.reason for r in d.reasons)
        if d.kind == Kind.UNSCHEDULABLE:
            if d.reasons and all(r.unresolvable for r in d.reasons):
                status = REJECTED
            elif self.status == "Nominated":
                # The attempt that nominated ends as a failure too; the pod
                # waits for its victims to leave, still nominated.
                status = "Nominated"
        if d.kind == Kind.CANCELLED:
            reason = reason or "cancelled"
        self.status = status
        self.reason = "" if status == SCHEDULED else reason
        if d.node or status in (SCHEDULED, "Binding"):
            self.node = d.node
        elif status != "Nominated":
            self.node = ""

    def row(self) -> dict[str, Any]:
        return {"pod": self.pod, "node": self.node or None, "status": self.status, "reason": self.reason}


def _group_requests(m: manifests.Manifests) -> list[scheduler_pb2.SubmitRequest]:
    """One request for pods outside gangs, one per PodGroup with its members."""

    by_group: dict[str, list[Any]] = {}
    plain: list[Any] = []
    groups = {(g.metadata.namespace, g.metadata.name): g for g in m.pod_groups}
    for p in m.pods:
        g = p.metadata.labels.get(model.LABEL_POD_GROUP)
        if g and (p.metadata.namespace, g) in groups:
            by_group.setdefault(f"{p.metadata.namespace}/{g}", []).append(p)
        else:
            plain.append(p)
    reqs = []
    for (ns, name), group in groups.items():
        members = by_group.get(f"{ns}/{name}", [])
        reqs.append(
            scheduler_pb2.SubmitRequest(
                group=model_pb2.PodGroup(
                    metadata=model_pb2.ObjectMeta(name=name, namespace=ns),
                    min_member=group.spec.min_member,
                    schedule_timeout_seconds=group.spec.schedule_timeout_seconds or 0,
                ),
                pods=[convert.pod_to_pb(p) for p in members],
            )
        )
    if plain:
        reqs.append(scheduler_pb2.SubmitRequest(pods=[convert.pod_to_pb(p) for p in plain]))
    return reqs


_Event: TypeAlias = scheduler_pb2.Decision | grpc.RpcError | None


def _watch(stub: scheduler_pb2_grpc.SchedulerStub) -> tuple[Any, queue.Queue[_Event]]:
    """Every decision from now on, after the latest one of each known pod
    (replay), pumped into a queue by a thread: the stream blocks."""
    events: queue.Queue[_Event] = queue.Queue()
    stream = stub.WatchDecisions(scheduler_pb2.WatchDecisionsRequest(replay=True))

    def pump() -> None:
        try:
            for d in stream:
                events.put(d)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                events.put(e)
        finally:
            events.put(None)

    threading.Thread(target=pump, name="berth-watch", daemon=True).start()
    return stream, events


def _preemptor(message: str) -> str:
    """The uid in a victim's "Preempted by pod UID on node N" (what
    DefaultPreemption and reclaim both say, as kube-scheduler's event does)."""
    rest = message.removeprefix("Preempted by pod ")
    return rest.split(" ", 1)[0] if rest != message else ""


def _wait(
    outcomes: dict[str, _Outcome],
    events: queue.Queue[_Event],
    timeout: float,
    server: str,
) -> dict[str, dict[str, Any]]:
    """Follow the decisions until every pod's outcome is final or the
    timeout passes; returns the pods they preempted meanwhile."""
    victims: dict[str, dict[str, Any]] = {}
    uids = {o.uid for o in outcomes.values()}
    deadline = time.monotonic() + timeout
    while any(o.status not in FINAL for o in outcomes.values()):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            d = events.get(timeout=left)
        except queue.Empty:
            break
        if d is None:
            raise CliError(f"the decision stream from {server} ended before every pod was decided")
        if isinstance(d, grpc.RpcError):
            raise CliError(common.rpc_error(d, server))
        o = outcomes.get(d.pod)
        if o is not None:
            # A replayed decision about an earlier pod of the same name is not this one's.
            if not d.uid or d.uid == o.uid:
                o.follow(d)
        elif d.kind == Kind.PREEMPTED and _preemptor(d.message) in uids:
            victims[d.pod] = {"pod": d.pod, "node": d.node or None, "status": PREEMPTED, "reason": d.message}
    return victims


def run(
    args: argparse.Namespace,
    m: manifests.Manifests,
    call: Callable[[Any, Any, str], Any],
) -> int:
    if not m.pods and not m.pod_groups:
        raise CliError(f"{args.file}: no Pods or PodGroups to submit")
    if args.wait and args.timeout <= 0:
        raise CliError(f"--timeout: must be more than 0 seconds, not {args.timeout:g}")
    channel = common.connect(args)
    stub = scheduler_pb2_grpc.SchedulerStub(channel)
    stream = None
    try:
        if args.wait:
            # Subscribed before submitting; the replay covers a late start.
            stream, events = _watch(stub)
        results: dict[str, _Outcome] = {}
        for req in _group_requests(m):
            resp = call(stub.Submit, req, args.server)
            for r in resp.results:
                status = "Pending" if r.accepted else REJECTED
                results[r.pod] = _Outcome(r.pod, r.uid, status, "" if r.accepted else r.message)
        victims: dict[str, dict[str, Any]] = {}
        if args.wait:
            waiting = {k: o for k, o in results.items() if o.status not in FINAL}
            victims = _wait(waiting, events, args.timeout, args.server)
    finally:
        if stream is not None:
            stream.cancel()
        channel.close()
    out = [o.row() for o in results.values()] + list(victims.values())
    if args.output == "json":
        print(json.dumps(out, indent=2))
    else:
        table = [["POD", "STATUS", "NODE", "REASON"]]
        table += [[r["pod"], r["status"], r["node"] or "-", r["reason"] or ""] for r in out]
        common.print_table(table)
    if any(o.status in FINAL - {SCHEDULED} for o in results.values()):
        return 1
    if args.wait:
        late = [o for o in results.values() if o.status != SCHEDULED]
        if late:
            names = ", ".join(f"{o.pod} ({o.status})" for o in late)
            print(f"berth: timed out after {args.timeout:g}s waiting for {names}", file=sys.stderr)
            return 2
    return 0
