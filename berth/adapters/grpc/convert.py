"""Translate between the contract (``berth.v1`` protobuf) and the core's model.

The only place that knows both shapes. Quantities become canonical integers
on the way out (``resources.canonical``) and exact quantity strings on the
way in (``resources.format_quantity``).

On the way in, every value the model cannot hold is
:class:`berth.errors.InvalidArgument` whose message starts with the
protobuf field path (``pods[3].spec.containers[0].requests[cpu]: ...``), as
the API server's field errors do (``k8s.io/apimachinery/pkg/util/validation/field``,
``path: Invalid value: value: detail``). Helpers raise paths relative to the
object they convert; each level prefixes its own field (``_under``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

from berth import errors
from berth.api.v1 import cluster_pb2 as cpb
from berth.api.v1 import model_pb2 as pb
from berth.api.v1 import scheduler_pb2 as spb
from berth.cluster import model, resources
from berth.framework.decision import Decision, Reason
from berth.quota import QueueStatus
from berth.scheduling.explain import Explanation, NodeSummary
from berth.scheduling.loop import QueueState
from berth.scheduling.visibility import PodRow, Why
from berth.scheduling.whatif import WhatIf

__all__ = [
    "decision_to_pb",
    "explanation_to_pb",
    "namespace_from_pb",
    "node_from_pb",
    "node_summaries_to_pb",
    "node_to_pb",
    "nodes_from_pb",
    "pdb_from_pb",
    "pod_from_pb",
    "pod_rows_to_pb",
    "pod_to_pb",
    "podgroup_from_pb",
    "pods_from_pb",
    "queue_status_to_pb",
    "whatif_to_pb",
    "why_to_pb",
]

T = TypeVar("T")
M = TypeVar("M")


# ---------------------------------------------------------------- helpers


def _under(path: str, e: errors.InvalidArgument) -> errors.InvalidArgument:
    """``e`` (whose message starts with a relative field path) under ``path``."""
    message = str(e)
    if not path:
        return e
    return errors.InvalidArgument(f"{path}{'' if message.startswith('[') else '.'}{message}")


@contextlib.contextmanager
def _at(path: str) -> Iterator[None]:
    """An InvalidArgument raised inside names its field under ``path``."""
    try:
        yield
    except errors.InvalidArgument as e:
        raise _under(path, e) from None


def _each(items: Iterable[M], convert: Callable[[M], T], field: str) -> list[T]:
    """``convert`` of every item; an error names the item's index."""
    out = []
    for i, item in enumerate(items):
        with _at(f"{field}[{i}]"):
            out.append(convert(item))
    return out


#: pkg/apis/core/validation's ValidateNonnegativeQuantity (apimachinery's
#: IsNegativeErrorMsg): no request, limit, capacity or allocatable is negative.
_NEGATIVE = "must be greater than or equal to 0"


def _rl_from_pb(m: Mapping[str, int], field: str) -> model.ResourceList:
    out: model.ResourceList = {}
    for k, v in m.items():
        if v < 0:
            raise errors.InvalidArgument(f"{field}[{k}]: Invalid value: {v}: {_NEGATIVE}")
        q = out[k] = resources.format_quantity(k, v)
        try:
            resources.canonical(k, q)  # the quantity rules (range) of berth.cluster.resources
        except resources.QuantityError as e:
            raise errors.InvalidArgument(f"{field}[{k}]: Invalid value: {v}: {e.detail}") from None
    return out


def _rl_to_pb(rl: model.ResourceList) -> dict[str, int]:
    return resources.canonical_list(rl)


def _ts_ms(text: str | None) -> int:
    if not text:
        return 0
    try:
        return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0


#: Milliseconds since the epoch a datetime can hold (years 1 to 9999).
_MS_RANGE = range(-62_135_596_800_000, 253_402_300_800_000)


def _ts_text(ms: int) -> str | None:
    if not ms:
        return None
    if ms not in _MS_RANGE:
        raise errors.InvalidArgument(
            f"metadata.creation_timestamp_ms: Invalid value: {ms}: not a time between the years 1 and 9999"
        )
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta_from_pb(m: pb.ObjectMeta) -> model.ObjectMeta:
    return model.ObjectMeta(
        name=m.name,
        namespace=m.namespace,
        uid=m.uid,
        labels=dict(m.labels),
        annotations=dict(m.annotations),
        resource_version=m.resource_version,
        creation_timestamp=_ts_text(m.creation_timestamp_ms),
        deletion_timestamp="deleting" if m.deleting else None,
        owner_references=[
            model.OwnerReference(
                api_version=o.api_version, kind=o.kind, name=o.name, uid=o.uid, controller=o.controller
            )
            for o in m.owner_references
        ],
    )


def _meta_to_pb(m: model.ObjectMeta) -> pb.ObjectMeta:
    return pb.ObjectMeta(
        name=m.name,
        namespace=m.namespace,
        uid=m.uid,
        labels=m.labels,
        annotations=m.annotations,
        resource_version=m.resource_version,
        creation_timestamp_ms=_ts_ms(m.creation_timestamp),
        deleting=m.deletion_timestamp is not None,
        owner_references=[
            pb.OwnerReference(api_version=o.api_version, kind=o.kind, name=o.name, uid=o.uid, controller=o.controller)
            for o in m.owner_references
        ],
    )


def _ls_from_pb(s: pb.LabelSelector, present: bool) -> model.LabelSelector | None:
    if not present:
        return None
    return model.LabelSelector(
        match_labels=dict(s.match_labels),
        match_expressions=[
            model.LabelSelectorRequirement(key=r.key, operator=r.operator, values=list(r.values))
            for r in s.match_expressions
        ],
    )


def _ls_to_pb(s: model.LabelSelector | None) -> pb.LabelSelector | None:
    if s is None:
        return None
    return pb.LabelSelector(
        match_labels=s.match_labels,
        match_expressions=[
            pb.LabelSelectorRequirement(key=r.key, operator=r.operator, values=r.values) for r in s.match_expressions
        ],
    )


def _term_from_pb(t: pb.NodeSelectorTerm) -> model.NodeSelectorTerm:
    def reqs(rs: object) -> list[model.NodeSelectorRequirement]:
        return [
            model.NodeSelectorRequirement(key=r.key, operator=r.operator, values=list(r.values))
            for r in rs  # type: ignore[attr-defined]
        ]

    return model.NodeSelectorTerm(match_expressions=reqs(t.match_expressions), match_fields=reqs(t.match_fields))


def _term_to_pb(t: model.NodeSelectorTerm) -> pb.NodeSelectorTerm:
    return pb.NodeSelectorTerm(
        match_expressions=[
            pb.NodeSelectorRequirement(key=r.key, operator=r.operator, values=r.values) for r in t.match_expressions
        ],
        match_fields=[
            pb.NodeSelectorRequirement(key=r.key, operator=r.operator, values=r.values) for r in t.match_fields
        ],
    )


def _pat_from_pb(t: pb.PodAffinityTerm) -> model.PodAffinityTerm:
    return model.PodAffinityTerm(
        topology_key=t.topology_key,
        label_selector=_ls_from_pb(t.label_selector, t.HasField("label_selector")),
        namespaces=list(t.namespaces),
        namespace_selector=_ls_from_pb(t.namespace_selector, t.HasField("namespace_selector")),
        match_label_keys=list(t.match_label_keys),
        mismatch_label_keys=list(t.mismatch_label_keys),
    )


def _pat_to_pb(t: model.PodAffinityTerm) -> pb.PodAffinityTerm:
    return pb.PodAffinityTerm(
        topology_key=t.topology_key,
        label_selector=_ls_to_pb(t.label_selector),
        namespaces=t.namespaces,
        namespace_selector=_ls_to_pb(t.namespace_selector),
        match_label_keys=t.match_label_keys,
        mismatch_label_keys=t.mismatch_label_keys,
    )


def _pa_from_pb(a: pb.PodAffinity, present: bool) -> model.PodAffinity | None:
    if not present:
        return None
    return model.PodAffinity(
        required_during_scheduling_ignored_during_execution=[
            _pat_from_pb(t) for t in a.required_during_scheduling_ignored_during_execution
        ],
        preferred_during_scheduling_ignored_during_execution=[
            model.WeightedPodAffinityTerm(weight=w.weight, pod_affinity_term=_pat_from_pb(w.pod_affinity_term))
            for w in a.preferred_during_scheduling_ignored_during_execution
        ],
    )


def _pa_to_pb(a: model.PodAffinity | None) -> pb.PodAffinity | None:
    if a is None:
        return None
    return pb.PodAffinity(
        required_during_scheduling_ignored_during_execution=[
            _pat_to_pb(t) for t in a.required_during_scheduling_ignored_during_execution
        ],
        preferred_during_scheduling_ignored_during_execution=[
            pb.WeightedPodAffinityTerm(weight=w.weight, pod_affinity_term=_pat_to_pb(w.pod_affinity_term))
            for w in a.preferred_during_scheduling_ignored_during_execution
        ],
    )


def _affinity_from_pb(a: pb.Affinity) -> model.Affinity:
    na: model.NodeAffinity | None = None
    if a.HasField("node_affinity"):
        n = a.node_affinity
        req = n.required_during_scheduling_ignored_during_execution
        na = model.NodeAffinity(
            required_during_scheduling_ignored_during_execution=(
                model.NodeSelector(node_selector_terms=[_term_from_pb(t) for t in req.node_selector_terms])
                if n.HasField("required_during_scheduling_ignored_during_execution")
                else None
            ),
            preferred_during_scheduling_ignored_during_execution=[
                model.PreferredSchedulingTerm(weight=p.weight, preference=_term_from_pb(p.preference))
                for p in n.preferred_during_scheduling_ignored_during_execution
            ],
        )
    return model.Affinity(
        node_affinity=na,
        pod_affinity=_pa_from_pb(a.pod_affinity, a.HasField("pod_affinity")),
        pod_anti_affinity=_pa_from_pb(a.pod_anti_affinity, a.HasField("pod_anti_affinity")),
    )


def _affinity_to_pb(a: model.Affinity) -> pb.Affinity:
    na = None
    if a.node_affinity is not None:
        n = a.node_affinity
        req = n.required_during_scheduling_ignored_during_execution
        na = pb.NodeAffinity(
            required_during_scheduling_ignored_during_execution=(
                pb.NodeSelector(node_selector_terms=[_term_to_pb(t) for t in req.node_selector_terms])
                if req is not None
                else None
            ),
            preferred_during_scheduling_ignored_during_execution=[
                pb.PreferredSchedulingTerm(weight=p.weight, preference=_term_to_pb(p.preference))
                for p in n.preferred_during_scheduling_ignored_during_execution
            ],
        )
    return pb.Affinity(
        node_affinity=na,
        pod_affinity=_pa_to_pb(a.pod_affinity),
        pod_anti_affinity=_pa_to_pb(a.pod_anti_affinity),
    )


def _container_from_pb(c: pb.Container) -> model.Container:
    res = None
    if c.requests or c.limits:
        res = model.ResourceRequirements(
            requests=_rl_from_pb(c.requests, "requests"), limits=_rl_from_pb(c.limits, "limits")
        )
    return model.Container(
        name=c.name,
        image=c.image,
        resources=res,
        ports=[
            model.ContainerPort(
                container_port=p.container_port, host_port=p.host_port, protocol=p.protocol, host_ip=p.host_ip
            )
            for p in c.ports
        ],
        restart_policy=c.restart_policy or None,
    )


def _container_to_pb(c: model.Container) -> pb.Container:
    res = c.resources
    return pb.Container(
        name=c.name,
        image=c.image,
        requests=_rl_to_pb(res.requests) if res else {},
        limits=_rl_to_pb(res.limits) if res else {},
        ports=[
            pb.ContainerPort(
                container_port=p.container_port, host_port=p.host_port, protocol=p.protocol, host_ip=p.host_ip
            )
            for p in c.ports
        ],
        restart_policy=c.restart_policy or "",
    )


# ---------------------------------------------------------------- pods


def pods_from_pb(pods: Iterable[pb.Pod], path: str) -> list[model.Pod]:
    """:func:`pod_from_pb` of each; errors name ``path[i]``."""
    return _each(pods, pod_from_pb, path)


def pod_from_pb(p: pb.Pod, path: str = "") -> model.Pod:
    """The model's pod; InvalidArgument names the field under ``path``."""
    with _at(path):
        return _pod_from_pb(p)


def _pod_from_pb(p: pb.Pod) -> model.Pod:
    s = p.spec
    spec = model.PodSpec(
        node_name=s.node_name,
        scheduler_name=s.scheduler_name,
        priority=s.priority,
        priority_class_name=s.priority_class_name,
        preemption_policy=s.preemption_policy or None,
        node_selector=dict(s.node_selector),
        affinity=_affinity_from_pb(s.affinity) if s.HasField("affinity") else None,
        tolerations=[
            model.Toleration(
                key=t.key,
                operator=t.operator,
                value=t.value,
                effect=t.effect,
                toleration_seconds=t.toleration_seconds if t.HasField("toleration_seconds") else None,
            )
            for t in s.tolerations
        ],
        topology_spread_constraints=[
            model.TopologySpreadConstraint(
                max_skew=c.max_skew,
                topology_key=c.topology_key,
                when_unsatisfiable=c.when_unsatisfiable,
                label_selector=_ls_from_pb(c.label_selector, c.HasField("label_selector")),
                min_domains=c.min_domains if c.HasField("min_domains") else None,
                node_affinity_policy=c.node_affinity_policy or None,
                node_taints_policy=c.node_taints_policy or None,
                match_label_keys=list(c.match_label_keys),
            )
            for c in s.topology_spread_constraints
        ],
        containers=_each(s.containers, _container_from_pb, "spec.containers"),
        init_containers=_each(s.init_containers, _container_from_pb, "spec.init_containers"),
        overhead=_rl_from_pb(s.overhead, "spec.overhead"),
        scheduling_gates=[model.SchedulingGate(name=g.name) for g in s.scheduling_gates],
        host_network=s.host_network,
        resources=(
            model.ResourceRequirements(requests=_rl_from_pb(s.resources_requests, "spec.resources_requests"))
            if s.resources_requests
            else None
        ),
    )
    return model.Pod(
        metadata=_meta_from_pb(p.metadata),
        spec=spec,
        status=model.PodStatus(phase=p.status.phase, nominated_node_name=p.status.nominated_node_name),
    )


def pod_to_pb(p: model.Pod) -> pb.Pod:
    s = p.spec
    return pb.Pod(
        metadata=_meta_to_pb(p.metadata),
        spec=pb.PodSpec(
            node_name=s.node_name,
            scheduler_name=s.scheduler_name,
            priority=s.priority or 0,
            priority_class_name=s.priority_class_name,
            preemption_policy=s.preemption_policy or "",
            node_selector=s.node_selector,
            affinity=_affinity_to_pb(s.affinity) if s.affinity is not None else None,
            tolerations=[
                pb.Toleration(
                    key=t.key,
                    operator=t.operator,
                    value=t.value,
                    effect=t.effect,
                    toleration_seconds=t.toleration_seconds,
                )
                for t in s.tolerations
            ],
            topology_spread_constraints=[
                pb.TopologySpreadConstraint(
                    max_skew=c.max_skew,
                    topology_key=c.topology_key,
                    when_unsatisfiable=c.when_unsatisfiable,
                    label_selector=_ls_to_pb(c.label_selector),
                    min_domains=c.min_domains,
                    node_affinity_policy=c.node_affinity_policy or "",
                    node_taints_policy=c.node_taints_policy or "",
                    match_label_keys=c.match_label_keys,
                )
                for c in s.topology_spread_constraints
            ],
            containers=[_container_to_pb(c) for c in s.containers],
            init_containers=[_container_to_pb(c) for c in s.init_containers],
            overhead=_rl_to_pb(s.overhead),
            scheduling_gates=[pb.SchedulingGate(name=g.name) for g in s.scheduling_gates],
            host_network=s.host_network,
            resources_requests=_rl_to_pb(s.resources.requests) if s.resources is not None else {},
        ),
        status=pb.PodStatus(phase=p.status.phase, nominated_node_name=p.status.nominated_node_name),
    )


# ---------------------------------------------------------------- nodes


def nodes_from_pb(nodes: Iterable[pb.Node], path: str) -> list[model.Node]:
    """:func:`node_from_pb` of each; errors name ``path[i]``."""
    return _each(nodes, node_from_pb, path)


def node_from_pb(n: pb.Node, path: str = "") -> model.Node:
    """The model's node; InvalidArgument names the field under ``path``."""
    with _at(path):
        return _node_from_pb(n)


def _node_from_pb(n: pb.Node) -> model.Node:
    return model.Node(
        metadata=_meta_from_pb(n.metadata),
        spec=model.NodeSpec(
            unschedulable=n.spec.unschedulable,
            taints=[model.Taint(key=t.key, value=t.value, effect=t.effect) for t in n.spec.taints],
        ),
        status=model.NodeStatus(
            capacity=_rl_from_pb(n.status.capacity, "status.capacity"),
            allocatable=_rl_from_pb(n.status.allocatable, "status.allocatable"),
            images=[model.ContainerImage(names=list(i.names), size_bytes=i.size_bytes) for i in n.status.images],
        ),
    )


def node_to_pb(n: model.Node) -> pb.Node:
    return pb.Node(
        metadata=_meta_to_pb(n.metadata),
        spec=pb.NodeSpec(
            unschedulable=n.spec.unschedulable,
            taints=[pb.Taint(key=t.key, value=t.value, effect=t.effect) for t in n.spec.taints],
        ),
        status=pb.NodeStatus(
            capacity=_rl_to_pb(n.status.capacity),
            allocatable=_rl_to_pb(n.status.allocatable),
            images=[pb.ContainerImage(names=i.names, size_bytes=i.size_bytes) for i in n.status.images],
        ),
    )


def taint_to_pb(t: model.Taint) -> pb.Taint:
    return pb.Taint(key=t.key, value=t.value, effect=t.effect)


# ---------------------------------------------------------------- groups


def podgroup_from_pb(g: pb.PodGroup, path: str = "") -> model.PodGroup:
    with _at(path):
        return model.PodGroup(
            metadata=_meta_from_pb(g.metadata),
            spec=model.PodGroupSpec(
                min_member=g.min_member,
                schedule_timeout_seconds=g.schedule_timeout_seconds or None,
                min_resources=_rl_from_pb(g.min_resources, "min_resources"),
            ),
        )


def pdb_from_pb(b: pb.PodDisruptionBudget, path: str = "") -> model.PodDisruptionBudget:
    with _at(path):
        return model.PodDisruptionBudget(
            metadata=_meta_from_pb(b.metadata),
            spec=model.PodDisruptionBudgetSpec(selector=_ls_from_pb(b.selector, b.HasField("selector"))),
            status=model.PodDisruptionBudgetStatus(disruptions_allowed=b.disruptions_allowed),
        )


def namespace_from_pb(n: cpb.Namespace, path: str = "") -> model.Namespace:
    with _at(path):
        return model.Namespace(metadata=_meta_from_pb(n.metadata))


# ---------------------------------------------------------------- verbs' results


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


def queue_status_to_pb(q: QueueStatus, reclaims: int = 0) -> spb.QueueStatus:
    """A batch queue's status; ``reclaims`` counts its pods evicted by reclaim."""
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
    )


def pod_rows_to_pb(rows: list[PodRow]) -> spb.ListPodsResponse:
    """``berth get pods``' rows."""
    return spb.ListPodsResponse(
        pods=[
            spb.PodRow(
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
            for r in rows
        ]
    )


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
