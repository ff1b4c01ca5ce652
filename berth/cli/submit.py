"""``berth submit``: hand manifests to a running Berth and, with ``--wait``,
follow its decisions until every pod is decided.

A pod is decided when it is Scheduled (bound), Gated (held by a PreEnqueue
gate), or Unschedulable after at least one full attempt. Victims preempted
meanwhile are reported with status ``Preempted``.
"""

from __future__ import annotations

import argparse
import json
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc

from berth.adapters.grpc import convert
from berth.api.v1 import model_pb2, scheduler_pb2, scheduler_pb2_grpc
from berth.cli import common
from berth.cli.common import CliError
from berth.cluster import manifests, model

__all__ = ["run"]

Kind = scheduler_pb2.Decision

_STATUS = {
    Kind.BOUND: "Scheduled",
    Kind.UNSCHEDULABLE: "Unschedulable",
    Kind.GATED: "Gated",
    Kind.PREEMPTED: "Preempted",
    Kind.CANCELLED: "Cancelled",
}


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


def run(
    args: argparse.Namespace,
    m: manifests.Manifests,
    call: Callable[[Any, Any, str], Any],
) -> int:
    if not m.pods and not m.pod_groups:
        raise CliError(f"{args.file}: no Pods or PodGroups to submit")
    channel = common.channel(args.server, args.token_file)
    stub = scheduler_pb2_grpc.SchedulerStub(channel)
    keys = [p.key for p in m.pods]
    events: queue.Queue[scheduler_pb2.Decision | None] = queue.Queue()
    stream = None
    if args.wait:
        # Subscribe before submitting so no decision is missed.
        stream = stub.WatchDecisions(scheduler_pb2.WatchDecisionsRequest(replay=True))
        ready = threading.Event()

        def pump() -> None:
            try:
                ready.set()
                for d in stream:
                    events.put(d)
            except grpc.RpcError:
                pass
            finally:
                events.put(None)

        threading.Thread(target=pump, daemon=True).start()
        ready.wait(5)

    results: dict[str, dict[str, Any]] = {}
    for req in _group_requests(m):
        resp = call(stub.Submit, req, args.server)
        for r in resp.results:
            results[r.pod] = {
                "pod": r.pod,
                "node": None,
                "status": "Pending" if r.accepted else "Rejected",
                "reason": r.message,
            }
    victims: dict[str, dict[str, Any]] = {}
    if args.wait:
        deadline = time.monotonic() + args.timeout
        undecided = {k for k in keys if results.get(k, {}).get("status") == "Pending"}
        while undecided and time.monotonic() < deadline:
            try:
                d = events.get(timeout=max(0.05, deadline - time.monotonic()))
            except queue.Empty:
                break
            if d is None:
                break
            status = _STATUS.get(d.kind)
            if d.pod in results:
                if status is None:
                    continue
                if d.kind == Kind.UNSCHEDULABLE and d.attempts < 1:
                    continue
                results[d.pod].update(
                    node=d.node or None,
                    status=status,
                    reason=d.message or ("" if status == "Scheduled" else ", ".join(r.reason for r in d.reasons)),
                )
                if status in ("Scheduled", "Unschedulable", "Gated", "Preempted", "Cancelled"):
                    undecided.discard(d.pod)
            elif d.kind == Kind.PREEMPTED:
                victims[d.pod] = {"pod": d.pod, "node": d.node or None, "status": "Preempted", "reason": d.message}
        if stream is not None:
            stream.cancel()
    channel.close()
    out = list(results.values()) + list(victims.values())
    if args.output == "json":
        print(json.dumps(out, indent=2))
    else:
        for r in out:
            print(f"{r['pod']:<40} {r['status']:<14} {r['node'] or '-':<20} {r['reason']}")
    if args.wait and any(r["status"] == "Pending" for r in out):
        return 2  # timed out with pods still undecided
    return 0
