"""The verbs' results, on the way out only: scheduling decisions, ``berth
explain``, ``berth get nodes``, batch queues' status, ``berth get pods`` and
``podgroups``, ``berth why`` and ``berth whatif`` (protos/berth/v1/
scheduler.proto and cluster.proto) from the core's answers
(:mod:`berth.framework.decision`, :mod:`berth.scheduling.explain`,
:mod:`berth.scheduling.visibility`, :mod:`berth.scheduling.whatif`,
:mod:`berth.quota`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from berth.adapters.grpc.convert.nodes import taint_to_pb
from berth.api.v1 import cluster_pb2 as cpb
from berth.api.v1 import scheduler_pb2 as spb
from berth.framework.decision import Decision, Reason
from berth.quota import QueueStatus
from berth.scheduling.explain import Explanation, NodeSummary
from berth.scheduling.loop import QueueState
from berth.scheduling.visibility import PodGroupRow, PodRow, Why
from berth.scheduling.whatif import WhatIf

__all__ = [
    "decision_batch_to_pb",
    "decision_to_pb",
    "explanation_to_pb",
    "node_summaries_to_pb",
    "pod_group_rows_to_pb",
    "queue_state_to_pb",
    "queue_status_to_pb",
    "whatif_to_pb",
    "why_to_pb",
]


def _reason_to_pb(r: Reason) -> spb.PluginReason:
    return spb.PluginReason(plugin=r.plugin, reason=r.reason, unresolvable=r.unresolvable)


def decision_to_pb(d: Decision) -> spb.Decision:
    return spb.Decision(
        kind=int(d.kind),  # type: ignore[arg-type]  # the proto's enum numbers (DecisionKind mirrors them)
        pod=d.pod,
        uid=d.uid,
        node=d.node,
        message=d.message,
        reasons=[_reason_to_pb(r) for r in d.reasons],
        timestamp_ms=d.timestamp_ms,
        attempts=d.attempts,
    )


def decision_batch_to_pb(decisions: Iterable[Decision]) -> spb.DecisionBatch:
    """The decisions as one message, each filled in place (``decisions.add``):
    half the cost of building each :func:`decision_to_pb` and copying it in."""
    batch = spb.DecisionBatch()
    add = batch.decisions.add
    for d in decisions:
        m = add(
            kind=int(d.kind),  # the proto's enum numbers (DecisionKind mirrors them)
            pod=d.pod,
            uid=d.uid,
            node=d.node,
            message=d.message,
            timestamp_ms=d.timestamp_ms,
            attempts=d.attempts,
        )
        if d.reasons:
            m.reasons.extend([_reason_to_pb(r) for r in d.reasons])
    return batch


def queue_state_to_pb(q: QueueState) -> spb.QueueState:
    return spb.QueueState(
        phase=q.phase,
        attempts=q.attempts,
        unschedulable_plugins=q.unschedulable_plugins,
        message=q.message,
        nominated_node=q.nominated_node,
        gates=q.gates,
    )


def explanation_to_pb(e: Explanation) -> spb.ExplainResponse:
    return spb.ExplainResponse(
        profile=e.profile,
        nodes=[
            spb.NodeExplanation(
                node=n.node,
                feasible=n.feasible,
                reasons=[_reason_to_pb(r) for r in n.reasons],
                plugin_scores=n.plugin_scores,
                score=n.score,
            )
            for n in e.nodes
        ],
        feasible_nodes=e.feasible_nodes,
        summary=e.summary,
        pre_filter_reasons=[_reason_to_pb(r) for r in e.pre_filter_reasons],
        queue=queue_state_to_pb(e.queue),
    )


def node_summaries_to_pb(nodes: list[NodeSummary]) -> cpb.ListNodesResponse:
    return cpb.ListNodesResponse(
        nodes=[
            cpb.NodeSummary(
                name=n.name,
                allocatable=n.allocatable,
                requested=n.requested,
                pods=n.pods,
                labels=n.labels,
                unschedulable=n.unschedulable,
                taints=[taint_to_pb(t) for t in n.taints],
            )
            for n in nodes
        ]
    )


def queue_status_to_pb(q: QueueStatus, reclaims: int = 0, reservations: Sequence[str] = ()) -> spb.QueueStatus:
    """A batch queue's status; ``reclaims`` counts its pods evicted by
    reclaim, ``reservations`` describes what is held for its gangs and pods."""
    return spb.QueueStatus(
        name=q.name,
        parent=q.parent,
        leaf=q.leaf,
        guaranteed=q.guaranteed,
        max=q.max,
        weight=q.weight,
        allocated=q.allocated,
        pending_pods=q.pending_pods,
        pending=q.pending,
        dominant_share=q.dominant_share,
        fair_share=q.fair_share,
        namespaces=q.namespaces,
        children=q.children,
        reclaim_preemptions=reclaims,
        reservations=list(reservations),
    )


def pod_row_to_pb(r: PodRow) -> spb.PodRow:
    """One row of ``berth get pods``."""
    return spb.PodRow(
        namespace=r.namespace,
        name=r.name,
        uid=r.uid,
        queue=r.queue,
        phase=r.phase,
        node=r.node,
        nominated_node=r.nominated_node,
        attempts=r.attempts,
        created_ms=int(r.created * 1000),
        reason=r.reason,
        position=r.position,
        priority=r.priority,
        requests=r.requests,
    )


def pod_group_rows_to_pb(rows: list[PodGroupRow]) -> spb.ListPodGroupsResponse:
    """``berth get podgroups``' rows (the same fields, by the same names)."""
    return spb.ListPodGroupsResponse(groups=[spb.PodGroupRow(**dataclasses.asdict(r)) for r in rows])


def why_to_pb(w: Why) -> spb.WhyResponse:
    """``berth why``'s answer."""
    return spb.WhyResponse(
        pod=w.pod,
        phase=w.phase,
        summary=w.summary,
        blockers=[spb.Blocker(kind=b.kind, message=b.message, unblocks_when=b.unblocks_when) for b in w.blockers],
        queue=w.queue,
        position=w.position,
        node=w.node,
        closest_nodes=[spb.ClosestNode(node=n, lacks=lacks) for n, lacks in w.closest_nodes],
    )


def whatif_to_pb(w: WhatIf) -> spb.WhatIfResponse:
    """``berth whatif``'s answer."""
    return spb.WhatIfResponse(
        pod=w.pod,
        replicas=w.replicas,
        fit=w.fit,
        placements=[spb.Placement(node=p.node, preempts=p.preempts) for p in w.placements],
        limited_by=w.limited_by,
        queue=w.queue,
        quota_ok=w.quota_ok,
        quota_message=w.quota_message,
        profile=w.profile,
    )
