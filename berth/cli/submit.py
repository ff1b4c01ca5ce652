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
from collections.abc import Callable, Iterator
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


#: Pods outside gangs per Submit request: the server starts placing the
#: first ones while the client converts the next, and a request stays far
#: below gRPC's 4 MiB message limit.
SUBMIT_BATCH = 1000


def _group_requests(m: manifests.Manifests) -> Iterator[scheduler_pb2.SubmitRequest]:
    """One request per PodGroup with its members (a gang is submitted
    whole), then the other pods, :data:`SUBMIT_BATCH` per request; each
    request is converted when it is about to be sent."""

    by_group: dict[str, list[Any]] = {}
    plain: list[Any] = []
    groups = {(g.metadata.namespace, g.metadata.name): g for g in m.pod_groups}
    for p in m.pods:
        g = p.metadata.labels.get(model.LABEL_POD_GROUP)
        if g and (p.metadata.namespace, g) in groups:
            by_group.setdefault(f"{p.metadata.namespace}/{g}", []).append(p)
        else:
            plain.append(p)
    for (ns, name), group in groups.items():
        members = by_group.get(f"{ns}/{name}", [])
        yield scheduler_pb2.SubmitRequest(
            group=model_pb2.PodGroup(
                metadata=model_pb2.ObjectMeta(name=name, namespace=ns),
                min_member=group.spec.min_member,
                schedule_timeout_seconds=group.spec.schedule_timeout_seconds or 0,
            ),
            pods=[convert.pod_to_pb(p) for p in members],
        )
    for k in range(0, len(plain), SUBMIT_BATCH):
        yield scheduler_pb2.SubmitRequest(pods=[convert.pod_to_pb(p) for p in plain[k : k + SUBMIT_BATCH]])


_Event: TypeAlias = list[scheduler_pb2.Decision] | grpc.RpcError | None


def _watch(stub: scheduler_pb2_grpc.SchedulerStub) -> tuple[Callable[[], None], queue.Queue[_Event]]:
    """Every decision from now on, after the latest one of each known pod
    (replay), pumped into a queue by a thread (the stream blocks), several
    per message (WatchDecisionBatches); from a server older than that RPC,
    one per message (WatchDecisions). Returns a function that ends the
    stream, and the queue."""
    events: queue.Queue[_Event] = queue.Queue()
    request = scheduler_pb2.WatchDecisionsRequest(replay=True)
    streams = [stub.WatchDecisionBatches(request)]

    def pump() -> None:
        try:
            try:
                for b in streams[0]:
                    events.put(list(b.decisions))
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                streams.append(stub.WatchDecisions(request))
                for d in streams[-1]:
                    events.put([d])
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                events.put(e)
        finally:
            events.put(None)

    def cancel() -> None:
        for s in list(streams):
            s.cancel()

    threading.Thread(target=pump, name="berth-watch", daemon=True).start()
    return cancel, events


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
    # Pods not final yet, counted as decisions arrive (not re-scanned per decision).
    left = sum(o.status not in FINAL for o in outcomes.values())
    deadline = time.monotonic() + timeout
    while left:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            batch = events.get(timeout=remaining)
        except queue.Empty:
            break
        if batch is None:
            raise CliError(f"the decision stream from {server} ended before every pod was decided")
        if isinstance(batch, grpc.RpcError):
            raise CliError(common.rpc_error(batch, server))
        for d in batch:
            o = outcomes.get(d.pod)
            if o is not None:
                # A replayed decision about an earlier pod of the same name is not this one's.
                if (not d.uid or d.uid == o.uid) and o.status not in FINAL:
                    o.follow(d)
                    left -= o.status in FINAL
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
    cancel: Callable[[], None] | None = None
    try:
        if args.wait:
            # Subscribed before submitting; the replay covers a late start.
            cancel, events = _watch(stub)
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
        if cancel is not None:
            cancel()
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
