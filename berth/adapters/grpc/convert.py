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
import dataclasses
import datetime as dt
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from berth import errors, gangs
from berth.api.v1 import cluster_pb2 as cpb
from berth.api.v1 import model_pb2 as pb
from berth.api.v1 import scheduler_pb2 as spb
from berth.cluster import dra, model, resources, storage, validation
from berth.framework.decision import Decision, Reason
from berth.quota import QueueStatus
from berth.scheduling.explain import Explanation, NodeSummary
from berth.scheduling.loop import QueueState
from berth.scheduling.visibility import PodGroupRow, PodRow, Why
from berth.scheduling.whatif import WhatIf

__all__ = [
    "csi_node_from_pb",
    "csi_node_to_pb",
    "decision_to_pb",
    "device_class_from_pb",
    "device_class_to_pb",
    "explanation_to_pb",
    "namespace_from_pb",
    "node_from_pb",
    "node_summaries_to_pb",
    "node_to_pb",
    "nodes_from_pb",
    "pdb_from_pb",
    "pod_from_pb",
    "pod_group_rows_to_pb",
    "pod_rows_to_pb",
    "pod_to_pb",
    "podgroup_from_pb",
    "pods_from_pb",
    "pv_from_pb",
    "pv_to_pb",
    "pvc_from_pb",
    "pvc_to_pb",
    "queue_status_to_pb",
    "resource_claim_from_pb",
    "resource_claim_to_pb",
    "resource_slice_from_pb",
    "resource_slice_to_pb",
    "storage_class_from_pb",
    "storage_class_to_pb",
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
        finalizers=list(m.finalizers),
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
        finalizers=m.finalizers,
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
    if c.requests or c.limits or c.claims:
        res = model.ResourceRequirements(
            requests=_rl_from_pb(c.requests, "requests"),
            limits=_rl_from_pb(c.limits, "limits"),
            claims=[model.ContainerResourceClaim(name=k.name, request=k.request) for k in c.claims],
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
        claims=[pb.ContainerResourceClaim(name=k.name, request=k.request) for k in res.claims] if res else [],
    )


# ---------------------------------------------------------------- pods


def pods_from_pb(pods: Iterable[pb.Pod], path: str) -> list[model.Pod]:
    """:func:`pod_from_pb` of each; errors name ``path[i]``."""
    return _each(pods, pod_from_pb, path)


def pod_from_pb(p: pb.Pod, path: str = "") -> model.Pod:
    """The model's pod, sharing its empty and repeated containers with other
    pods (:func:`berth.cluster.model.share_containers`: the core never
    changes a pod in place); InvalidArgument names the field under ``path``."""
    with _at(path):
        return model.share_containers(_pod_from_pb(p))


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
        resource_claims=[_pod_claim_from_pb(c) for c in s.resource_claims],
        volumes=_each(s.volumes, _volume_from_pb, "spec.volumes"),
    )
    return model.Pod(
        metadata=_meta_from_pb(p.metadata),
        spec=spec,
        status=model.PodStatus(
            phase=p.status.phase,
            nominated_node_name=p.status.nominated_node_name,
            resource_claim_statuses=[
                model.PodResourceClaimStatus(name=c.name, resource_claim_name=c.resource_claim_name or None)
                for c in p.status.resource_claim_statuses
            ],
        ),
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
            volumes=[_volume_to_pb(v) for v in s.volumes],
            resource_claims=[_pod_claim_to_pb(c) for c in s.resource_claims],
        ),
        status=pb.PodStatus(
            phase=p.status.phase,
            nominated_node_name=p.status.nominated_node_name,
            resource_claim_statuses=[
                pb.PodResourceClaimStatus(name=c.name, resource_claim_name=c.resource_claim_name or "")
                for c in p.status.resource_claim_statuses
            ],
        ),
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


#: A PodGroup message's ``dialect`` -> the apiVersion of that dialect's PodGroup.
_POD_GROUP_DIALECTS = {"": model.PodGroup().api_version} | {
    s.name: s.api_version for s in gangs.SOURCES.values() if s.api_version
}


def podgroup_from_pb(g: pb.PodGroup, path: str = "") -> model.PodGroup:
    with _at(path):
        api_version = _POD_GROUP_DIALECTS.get(g.dialect)
        if api_version is None:
            known = ", ".join(sorted(n for n in _POD_GROUP_DIALECTS if n))
            raise errors.InvalidArgument(
                f"dialect: {g.dialect!r} has no PodGroup object Berth reads (one of {known}, or empty)"
            )
        return model.PodGroup(
            api_version=api_version,
            metadata=_meta_from_pb(g.metadata),
            spec=model.PodGroupSpec(
                min_member=g.min_member,
                schedule_timeout_seconds=g.schedule_timeout_seconds or None,
                min_resources=_rl_from_pb(g.min_resources, "min_resources"),
                min_task_member=dict(g.min_task_member),
                queue=g.queue,
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


# ---------------------------------------------------------------- enumerations and quantities
# Kubernetes' enumerations travel as strings; a value the model does not know
# is refused here, naming the protobuf field (the API server's field.NotSupported).

_ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
_VOLUME_MODES = ("Filesystem", "Block")
_BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
_ALLOCATION_MODES = (dra.ALLOCATION_MODE_EXACT_COUNT, dra.ALLOCATION_MODE_ALL)
_CONFIG_SOURCES = (dra.CONFIG_SOURCE_CLASS, dra.CONFIG_SOURCE_CLAIM)


def _enum(value: str, allowed: tuple[str, ...], path: str) -> str:
    """``value`` when it is one of ``allowed`` (empty: unset, the caller's default)."""
    if value and value not in allowed:
        raise validation.not_supported(path, value, allowed)
    return value


def _enums(values: Iterable[str], allowed: tuple[str, ...], path: str) -> list[str]:
    out = []
    for i, v in enumerate(values):
        if not v:
            raise validation.not_supported(f"{path}[{i}]", v, allowed)
        out.append(_enum(v, allowed, f"{path}[{i}]"))
    return out


def _quantity(text: str, path: str) -> str:
    """A Kubernetes quantity string as it is, once it parses (``"40Gi"``)."""
    try:
        resources.parse_quantity(text)
    except resources.QuantityError as e:
        raise e.at(path) from None
    return text


def _quantity_text(q: model.Quantity) -> str:
    return q if isinstance(q, str) else str(q)


def _opt(m: Any, field: str) -> Any:
    """An ``optional`` scalar's value, or None when unset."""
    return getattr(m, field) if m.HasField(field) else None


def _node_selector_from_pb(s: pb.NodeSelector) -> model.NodeSelector:
    return model.NodeSelector(node_selector_terms=[_term_from_pb(t) for t in s.node_selector_terms])


def _node_selector_to_pb(s: model.NodeSelector | None) -> pb.NodeSelector | None:
    if s is None:
        return None
    return pb.NodeSelector(node_selector_terms=[_term_to_pb(t) for t in s.node_selector_terms])


def _json_from_pb(raw: bytes, path: str) -> Any:
    if not raw:
        return None
    validation.validate_json_depth(raw, path)
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as e:
        raise errors.InvalidArgument(f"{path}: Invalid value: not JSON: {e}") from None


def _json_to_pb(value: Any) -> bytes:
    return b"" if value is None else msgspec.json.encode(value)


def _json_object_from_pb(raw: bytes, path: str, max_length: int | None = None) -> dict[str, Any] | None:
    """A JSON object, or None when unset: validateRawExtension (pkg/apis/resource/validation,
    v1.37.2) refuses more than ``max_length`` bytes and any other JSON value."""
    if max_length is not None and len(raw) > max_length:
        raise errors.InvalidArgument(f"{path}: Too long: may not be more than {max_length} bytes")
    value = _json_from_pb(raw, path)
    if value is not None and not isinstance(value, dict):
        raise validation.invalid(path, "<value omitted>", "must be a valid JSON object")
    return value


def _sub(m: Any, field: str, convert: Callable[[Any], T]) -> T | None:
    """``convert`` of the message field ``field`` when it is set, else None; an error names the field."""
    if not m.HasField(field):
        return None
    with _at(field):
        return convert(getattr(m, field))


def _opt_quantity(m: Any, field: str) -> model.Quantity | None:
    """An ``optional string`` quantity field: None when unset, else the quantity once it parses."""
    value = _opt(m, field)
    return None if value is None else _quantity(value, field)


def _quantities_from_pb(m: Mapping[str, str], path: str) -> dict[str, model.Quantity]:
    return {k: _quantity(v, f"{path}[{k}]") for k, v in m.items()}


def _quantities_to_pb(m: Mapping[str, model.Quantity]) -> dict[str, str]:
    return {k: _quantity_text(v) for k, v in m.items()}


#: time.RFC3339 as metav1.Time.UnmarshalJSON parses it (fractional seconds allowed).
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(?:\.\d+)?(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)")


def _time(text: str, path: str) -> str:
    """A metav1.Time as its RFC 3339 text, kept as written once it parses."""
    ok = _RFC3339.fullmatch(text) is not None
    if ok:
        try:
            dt.datetime.fromisoformat(text[:19])  # the calendar: no month 13, no February 30
        except ValueError:
            ok = False
    if not ok:
        raise validation.invalid(path, text, 'must be an RFC 3339 time, as "2006-01-02T15:04:05Z07:00"')
    return text


def _opt_time(m: Any, field: str) -> str | None:
    value = _opt(m, field)
    return None if value is None else _time(value, field)


# ---------------------------------------------------------------- pod volumes and claims


def _volume_from_pb(v: pb.Volume) -> model.Volume:
    which = v.WhichOneof("source")
    out = model.Volume(name=v.name)
    if which == "persistent_volume_claim":
        c = v.persistent_volume_claim
        out.persistent_volume_claim = model.PersistentVolumeClaimVolumeSource(
            claim_name=c.claim_name, read_only=c.read_only
        )
    elif which == "ephemeral":
        tmpl = None
        if v.ephemeral.HasField("volume_claim_template"):
            t = v.ephemeral.volume_claim_template
            with _at("ephemeral.volume_claim_template"):
                tmpl = {
                    "metadata": model.to_builtins(_meta_from_pb(t.metadata)),
                    "spec": model.to_builtins(_pvc_spec_from_pb(t.spec)),
                }
        out.ephemeral = model.EphemeralVolumeSource(volume_claim_template=tmpl)
    elif which == "gce_persistent_disk":
        g = v.gce_persistent_disk
        out.gce_persistent_disk = model.GCEPersistentDiskVolumeSource(
            pd_name=g.pd_name, fs_type=g.fs_type, partition=g.partition, read_only=g.read_only
        )
    elif which == "aws_elastic_block_store":
        a = v.aws_elastic_block_store
        out.aws_elastic_block_store = model.AWSElasticBlockStoreVolumeSource(
            volume_id=a.volume_id, fs_type=a.fs_type, partition=a.partition, read_only=a.read_only
        )
    elif which == "rbd":
        r = v.rbd
        out.rbd = model.RBDVolumeSource(
            monitors=list(r.monitors), image=r.image, pool=r.pool or "rbd", read_only=r.read_only
        )
    elif which == "iscsi":
        i = v.iscsi
        out.iscsi = model.ISCSIVolumeSource(target_portal=i.target_portal, iqn=i.iqn, lun=i.lun, read_only=i.read_only)
    elif which == "csi":
        out.csi = model.CSIVolumeSource(driver=v.csi.driver, read_only=v.csi.read_only)
    return out


def _claim_template_to_pb(tmpl: dict[str, Any] | None) -> pb.EphemeralVolumeSource:
    if tmpl is None:
        return pb.EphemeralVolumeSource()
    try:
        meta = msgspec.convert(tmpl.get("metadata") or {}, model.ObjectMeta)
        spec = msgspec.convert(tmpl.get("spec") or {}, storage.PersistentVolumeClaimSpec)
    except msgspec.ValidationError:
        # Not a claim template the API server would have stored: the empty one.
        meta, spec = model.ObjectMeta(), storage.PersistentVolumeClaimSpec()
    return pb.EphemeralVolumeSource(
        volume_claim_template=pb.PersistentVolumeClaimTemplate(metadata=_meta_to_pb(meta), spec=_pvc_spec_to_pb(spec))
    )


def _volume_to_pb(v: model.Volume) -> pb.Volume:
    out = pb.Volume(name=v.name)
    # One source, as the API server's validation allows; the first wins.
    if (c := v.persistent_volume_claim) is not None:
        out.persistent_volume_claim.CopyFrom(
            pb.PersistentVolumeClaimVolumeSource(claim_name=c.claim_name, read_only=c.read_only)
        )
    elif v.ephemeral is not None:
        out.ephemeral.CopyFrom(_claim_template_to_pb(v.ephemeral.volume_claim_template))
    elif (g := v.gce_persistent_disk) is not None:
        out.gce_persistent_disk.CopyFrom(
            pb.GCEPersistentDiskVolumeSource(
                pd_name=g.pd_name, fs_type=g.fs_type, partition=g.partition, read_only=g.read_only
            )
        )
    elif (a := v.aws_elastic_block_store) is not None:
        out.aws_elastic_block_store.CopyFrom(
            pb.AWSElasticBlockStoreVolumeSource(
                volume_id=a.volume_id, fs_type=a.fs_type, partition=a.partition, read_only=a.read_only
            )
        )
    elif (r := v.rbd) is not None:
        out.rbd.CopyFrom(pb.RBDVolumeSource(monitors=r.monitors, image=r.image, pool=r.pool, read_only=r.read_only))
    elif (i := v.iscsi) is not None:
        out.iscsi.CopyFrom(
            pb.ISCSIVolumeSource(target_portal=i.target_portal, iqn=i.iqn, lun=i.lun, read_only=i.read_only)
        )
    elif (s := v.csi) is not None:
        out.csi.CopyFrom(pb.CSIVolumeSource(driver=s.driver, read_only=s.read_only))
    return out


def _pod_claim_from_pb(c: pb.PodResourceClaim) -> model.PodResourceClaim:
    return model.PodResourceClaim(
        name=c.name,
        resource_claim_name=c.resource_claim_name or None,
        resource_claim_template_name=c.resource_claim_template_name or None,
    )


def _pod_claim_to_pb(c: model.PodResourceClaim) -> pb.PodResourceClaim:
    return pb.PodResourceClaim(
        name=c.name,
        resource_claim_name=c.resource_claim_name or "",
        resource_claim_template_name=c.resource_claim_template_name or "",
    )


# ---------------------------------------------------------------- storage


def _pvc_spec_from_pb(s: pb.PersistentVolumeClaimSpec) -> storage.PersistentVolumeClaimSpec:
    return storage.PersistentVolumeClaimSpec(
        access_modes=_enums(s.access_modes, _ACCESS_MODES, "spec.access_modes"),
        selector=_ls_from_pb(s.selector, s.HasField("selector")),
        resources=storage.VolumeResourceRequirements(
            requests=_rl_from_pb(s.resources.requests, "spec.resources.requests"),
            limits=_rl_from_pb(s.resources.limits, "spec.resources.limits"),
        ),
        volume_name=s.volume_name,
        storage_class_name=_opt(s, "storage_class_name"),
        volume_mode=_enum(s.volume_mode, _VOLUME_MODES, "spec.volume_mode") or None,
        volume_attributes_class_name=_opt(s, "volume_attributes_class_name"),
    )


def _pvc_spec_to_pb(s: storage.PersistentVolumeClaimSpec) -> pb.PersistentVolumeClaimSpec:
    return pb.PersistentVolumeClaimSpec(
        access_modes=s.access_modes,
        selector=_ls_to_pb(s.selector),
        resources=pb.VolumeResourceRequirements(
            requests=_rl_to_pb(s.resources.requests), limits=_rl_to_pb(s.resources.limits)
        ),
        volume_name=s.volume_name,
        storage_class_name=s.storage_class_name,
        volume_mode=s.volume_mode or "",
        volume_attributes_class_name=s.volume_attributes_class_name,
    )


def pvc_from_pb(c: pb.PersistentVolumeClaim, path: str = "") -> storage.PersistentVolumeClaim:
    """The model's PersistentVolumeClaim; InvalidArgument names the field under ``path``."""
    with _at(path):
        return storage.PersistentVolumeClaim(
            metadata=_meta_from_pb(c.metadata),
            spec=_pvc_spec_from_pb(c.spec),
            status=storage.PersistentVolumeClaimStatus(
                phase=c.status.phase,
                access_modes=_enums(c.status.access_modes, _ACCESS_MODES, "status.access_modes"),
                capacity=_rl_from_pb(c.status.capacity, "status.capacity"),
            ),
        )


def pvc_to_pb(c: storage.PersistentVolumeClaim) -> pb.PersistentVolumeClaim:
    return pb.PersistentVolumeClaim(
        metadata=_meta_to_pb(c.metadata),
        spec=_pvc_spec_to_pb(c.spec),
        status=pb.PersistentVolumeClaimStatus(
            phase=c.status.phase, access_modes=c.status.access_modes, capacity=_rl_to_pb(c.status.capacity)
        ),
    )


def pv_from_pb(v: pb.PersistentVolume, path: str = "") -> storage.PersistentVolume:
    """The model's PersistentVolume; InvalidArgument names the field under ``path``."""
    with _at(path):
        s = v.spec
        spec = storage.PersistentVolumeSpec(
            capacity=_rl_from_pb(s.capacity, "spec.capacity"),
            access_modes=_enums(s.access_modes, _ACCESS_MODES, "spec.access_modes"),
            claim_ref=(
                storage.ObjectReference(
                    kind=s.claim_ref.kind,
                    namespace=s.claim_ref.namespace,
                    name=s.claim_ref.name,
                    uid=s.claim_ref.uid,
                    api_version=s.claim_ref.api_version,
                    resource_version=s.claim_ref.resource_version,
                )
                if s.HasField("claim_ref")
                else None
            ),
            persistent_volume_reclaim_policy=s.persistent_volume_reclaim_policy,
            storage_class_name=s.storage_class_name,
            volume_mode=_enum(s.volume_mode, _VOLUME_MODES, "spec.volume_mode") or None,
            node_affinity=(
                storage.VolumeNodeAffinity(
                    required=(
                        _node_selector_from_pb(s.node_affinity.required)
                        if s.node_affinity.HasField("required")
                        else None
                    )
                )
                if s.HasField("node_affinity")
                else None
            ),
            volume_attributes_class_name=_opt(s, "volume_attributes_class_name"),
        )
        which = s.WhichOneof("source")
        if which == "csi":
            spec.csi = storage.CSIPersistentVolumeSource(
                driver=s.csi.driver, volume_handle=s.csi.volume_handle, read_only=s.csi.read_only
            )
        elif which == "gce_persistent_disk":
            g = s.gce_persistent_disk
            spec.gce_persistent_disk = model.GCEPersistentDiskVolumeSource(
                pd_name=g.pd_name, fs_type=g.fs_type, partition=g.partition, read_only=g.read_only
            )
        elif which == "aws_elastic_block_store":
            a = s.aws_elastic_block_store
            spec.aws_elastic_block_store = model.AWSElasticBlockStoreVolumeSource(
                volume_id=a.volume_id, fs_type=a.fs_type, partition=a.partition, read_only=a.read_only
            )
        elif which == "local":
            spec.local = storage.LocalVolumeSource(path=s.local.path)
        elif which == "host_path":
            spec.host_path = storage.HostPathVolumeSource(path=s.host_path.path)
        return storage.PersistentVolume(
            metadata=_meta_from_pb(v.metadata),
            spec=spec,
            status=storage.PersistentVolumeStatus(phase=v.status.phase),
        )


def pv_to_pb(v: storage.PersistentVolume) -> pb.PersistentVolume:
    s = v.spec
    ref = s.claim_ref
    spec = pb.PersistentVolumeSpec(
        capacity=_rl_to_pb(s.capacity),
        access_modes=s.access_modes,
        claim_ref=(
            pb.ObjectReference(
                kind=ref.kind,
                namespace=ref.namespace,
                name=ref.name,
                uid=ref.uid,
                api_version=ref.api_version,
                resource_version=ref.resource_version,
            )
            if ref is not None
            else None
        ),
        persistent_volume_reclaim_policy=s.persistent_volume_reclaim_policy,
        storage_class_name=s.storage_class_name,
        volume_mode=s.volume_mode or "",
        node_affinity=(
            pb.VolumeNodeAffinity(required=_node_selector_to_pb(s.node_affinity.required))
            if s.node_affinity is not None
            else None
        ),
        volume_attributes_class_name=s.volume_attributes_class_name,
    )
    if s.csi is not None:
        spec.csi.CopyFrom(
            pb.CSIPersistentVolumeSource(
                driver=s.csi.driver, volume_handle=s.csi.volume_handle, read_only=s.csi.read_only
            )
        )
    elif (g := s.gce_persistent_disk) is not None:
        spec.gce_persistent_disk.CopyFrom(
            pb.GCEPersistentDiskVolumeSource(
                pd_name=g.pd_name, fs_type=g.fs_type, partition=g.partition, read_only=g.read_only
            )
        )
    elif (a := s.aws_elastic_block_store) is not None:
        spec.aws_elastic_block_store.CopyFrom(
            pb.AWSElasticBlockStoreVolumeSource(
                volume_id=a.volume_id, fs_type=a.fs_type, partition=a.partition, read_only=a.read_only
            )
        )
    elif s.local is not None:
        spec.local.CopyFrom(pb.LocalVolumeSource(path=s.local.path))
    elif s.host_path is not None:
        spec.host_path.CopyFrom(pb.HostPathVolumeSource(path=s.host_path.path))
    return pb.PersistentVolume(
        metadata=_meta_to_pb(v.metadata), spec=spec, status=pb.PersistentVolumeStatus(phase=v.status.phase)
    )


def storage_class_from_pb(c: pb.StorageClass, path: str = "") -> storage.StorageClass:
    with _at(path):
        return storage.StorageClass(
            metadata=_meta_from_pb(c.metadata),
            provisioner=c.provisioner,
            parameters=dict(c.parameters),
            reclaim_policy=c.reclaim_policy or None,
            volume_binding_mode=_enum(c.volume_binding_mode, _BINDING_MODES, "volume_binding_mode") or None,
            allowed_topologies=[
                storage.TopologySelectorTerm(
                    match_label_expressions=[
                        storage.TopologySelectorLabelRequirement(key=r.key, values=list(r.values))
                        for r in t.match_label_expressions
                    ]
                )
                for t in c.allowed_topologies
            ],
        )


def storage_class_to_pb(c: storage.StorageClass) -> pb.StorageClass:
    return pb.StorageClass(
        metadata=_meta_to_pb(c.metadata),
        provisioner=c.provisioner,
        parameters=c.parameters,
        reclaim_policy=c.reclaim_policy or "",
        volume_binding_mode=c.volume_binding_mode or "",
        allowed_topologies=[
            pb.TopologySelectorTerm(
                match_label_expressions=[
                    pb.TopologySelectorLabelRequirement(key=r.key, values=r.values) for r in t.match_label_expressions
                ]
            )
            for t in c.allowed_topologies
        ],
    )


def csi_node_from_pb(n: pb.CSINode, path: str = "") -> storage.CSINode:
    with _at(path):
        return storage.CSINode(
            metadata=_meta_from_pb(n.metadata),
            spec=storage.CSINodeSpec(
                drivers=[
                    storage.CSINodeDriver(
                        name=d.name,
                        node_id=d.node_id,
                        topology_keys=list(d.topology_keys),
                        allocatable=(
                            storage.VolumeNodeResources(count=_opt(d.allocatable, "count"))
                            if d.HasField("allocatable")
                            else None
                        ),
                    )
                    for d in n.spec.drivers
                ]
            ),
        )


def csi_node_to_pb(n: storage.CSINode) -> pb.CSINode:
    return pb.CSINode(
        metadata=_meta_to_pb(n.metadata),
        spec=pb.CSINodeSpec(
            drivers=[
                pb.CSINodeDriver(
                    name=d.name,
                    node_id=d.node_id,
                    topology_keys=d.topology_keys or (),
                    allocatable=(
                        pb.VolumeNodeResources(count=d.allocatable.count) if d.allocatable is not None else None
                    ),
                )
                for d in n.spec.drivers
            ]
        ),
    )


# ---------------------------------------------------------------- resource.k8s.io/v1


#: The oneof's members, named as the model's fields; a list travels in a
#: wrapper message (a oneof cannot hold a repeated field).
_ATTRIBUTE_LISTS: dict[str, Callable[..., Any]] = {
    "int_values": pb.IntValues,
    "bool_values": pb.BoolValues,
    "string_values": pb.StringValues,
    "version_values": pb.StringValues,
}
_ATTRIBUTE_KINDS = ("int_value", "bool_value", "string_value", "version_value", *_ATTRIBUTE_LISTS)


def _attribute_from_pb(a: pb.DeviceAttribute) -> dra.DeviceAttribute:
    which = a.WhichOneof("value")
    if which is None:
        raise validation.required("value", f"exactly one of {', '.join(_ATTRIBUTE_KINDS)} is required")
    value = getattr(a, which)
    fields: dict[str, Any] = {which: list(value.values) if which in _ATTRIBUTE_LISTS else value}
    return dra.DeviceAttribute(**fields)


def _attribute_to_pb(a: dra.DeviceAttribute) -> pb.DeviceAttribute:
    for kind in _ATTRIBUTE_KINDS:
        value = getattr(a, kind)
        if value is not None:
            wrapper = _ATTRIBUTE_LISTS.get(kind)
            return pb.DeviceAttribute(**{kind: value if wrapper is None else wrapper(values=value)})
    return pb.DeviceAttribute()


def _counters_from_pb(m: Mapping[str, pb.Counter], path: str) -> dict[str, dra.Counter]:
    return {k: dra.Counter(value=_quantity(c.value, f"{path}[{k}].value")) for k, c in m.items()}


def _counters_to_pb(m: Mapping[str, dra.Counter]) -> dict[str, pb.Counter]:
    return {k: pb.Counter(value=_quantity_text(c.value)) for k, c in m.items()}


def _policy_range_from_pb(r: pb.CapacityRequestPolicyRange) -> dra.CapacityRequestPolicyRange:
    return dra.CapacityRequestPolicyRange(
        min=_opt_quantity(r, "min"), max=_opt_quantity(r, "max"), step=_opt_quantity(r, "step")
    )


def _request_policy_from_pb(p: pb.CapacityRequestPolicy) -> dra.CapacityRequestPolicy:
    return dra.CapacityRequestPolicy(
        default=_opt_quantity(p, "default"),
        valid_values=[_quantity(v, f"valid_values[{i}]") for i, v in enumerate(p.valid_values)],
        valid_range=_sub(p, "valid_range", _policy_range_from_pb),
    )


def _request_policy_to_pb(p: dra.CapacityRequestPolicy | None) -> pb.CapacityRequestPolicy | None:
    if p is None:
        return None
    r = p.valid_range
    return pb.CapacityRequestPolicy(
        default=None if p.default is None else _quantity_text(p.default),
        valid_values=[_quantity_text(v) for v in p.valid_values],
        valid_range=(
            None
            if r is None
            else pb.CapacityRequestPolicyRange(
                **{k: _quantity_text(v) for k, v in (("min", r.min), ("max", r.max), ("step", r.step)) if v is not None}
            )
        ),
    )


def _capacity_from_pb(c: pb.DeviceCapacity) -> dra.DeviceCapacity:
    return dra.DeviceCapacity(
        value=_quantity(c.value, "value"), request_policy=_sub(c, "request_policy", _request_policy_from_pb)
    )


def _capacity_requirements_from_pb(r: pb.CapacityRequirements) -> dra.CapacityRequirements:
    return dra.CapacityRequirements(requests=_quantities_from_pb(r.requests, "requests"))


def _capacity_requirements_to_pb(r: dra.CapacityRequirements | None) -> pb.CapacityRequirements | None:
    return None if r is None else pb.CapacityRequirements(requests=_quantities_to_pb(r.requests))


def _taint_from_pb(t: pb.DeviceTaint) -> dra.DeviceTaint:
    return dra.DeviceTaint(key=t.key, value=t.value, effect=t.effect, time_added=_opt_time(t, "time_added"))


def _taint_to_pb(t: dra.DeviceTaint) -> pb.DeviceTaint:
    return pb.DeviceTaint(key=t.key, value=t.value, effect=t.effect, time_added=t.time_added)


def _device_from_pb(d: pb.Device) -> dra.Device:
    attributes = {}
    for k, a in d.attributes.items():
        with _at(f"attributes[{k}]"):
            attributes[k] = _attribute_from_pb(a)
    capacity = {}
    for k, c in d.capacity.items():
        with _at(f"capacity[{k}]"):
            capacity[k] = _capacity_from_pb(c)
    return dra.Device(
        name=d.name,
        attributes=attributes,
        capacity=capacity,
        consumes_counters=_each(
            d.consumes_counters,
            lambda c: dra.DeviceCounterConsumption(
                counter_set=c.counter_set,
                counters=_counters_from_pb(c.counters, "counters"),
                compatibility_groups=list(c.compatibility_groups),
            ),
            "consumes_counters",
        ),
        node_name=_opt(d, "node_name"),
        node_selector=_node_selector_from_pb(d.node_selector) if d.HasField("node_selector") else None,
        all_nodes=_opt(d, "all_nodes"),
        taints=_each(d.taints, _taint_from_pb, "taints"),
        binds_to_node=_opt(d, "binds_to_node"),
        binding_conditions=list(d.binding_conditions),
        binding_failure_conditions=list(d.binding_failure_conditions),
        allow_multiple_allocations=_opt(d, "allow_multiple_allocations"),
    )


def _device_to_pb(d: dra.Device) -> pb.Device:
    return pb.Device(
        name=d.name,
        attributes={k: _attribute_to_pb(a) for k, a in d.attributes.items()},
        capacity={
            k: pb.DeviceCapacity(value=_quantity_text(c.value), request_policy=_request_policy_to_pb(c.request_policy))
            for k, c in d.capacity.items()
        },
        consumes_counters=[
            pb.DeviceCounterConsumption(
                counter_set=c.counter_set,
                counters=_counters_to_pb(c.counters),
                compatibility_groups=c.compatibility_groups,
            )
            for c in d.consumes_counters
        ],
        node_name=d.node_name,
        node_selector=_node_selector_to_pb(d.node_selector),
        all_nodes=d.all_nodes,
        taints=[_taint_to_pb(t) for t in d.taints],
        binds_to_node=d.binds_to_node,
        binding_conditions=d.binding_conditions,
        binding_failure_conditions=d.binding_failure_conditions,
        allow_multiple_allocations=d.allow_multiple_allocations,
    )


def resource_slice_from_pb(r: pb.ResourceSlice, path: str = "") -> dra.ResourceSlice:
    """The model's ResourceSlice; InvalidArgument names the field under ``path``."""
    with _at(path):
        s = r.spec
        return dra.ResourceSlice(
            metadata=_meta_from_pb(r.metadata),
            spec=dra.ResourceSliceSpec(
                driver=s.driver,
                pool=dra.ResourcePool(
                    name=s.pool.name, generation=s.pool.generation, resource_slice_count=s.pool.resource_slice_count
                ),
                node_name=_opt(s, "node_name"),
                node_selector=_node_selector_from_pb(s.node_selector) if s.HasField("node_selector") else None,
                all_nodes=_opt(s, "all_nodes"),
                per_device_node_selection=_opt(s, "per_device_node_selection"),
                devices=_each(s.devices, _device_from_pb, "spec.devices"),
                shared_counters=_each(
                    s.shared_counters,
                    lambda c: dra.CounterSet(name=c.name, counters=_counters_from_pb(c.counters, "counters")),
                    "spec.shared_counters",
                ),
            ),
        )


def resource_slice_to_pb(r: dra.ResourceSlice) -> pb.ResourceSlice:
    s = r.spec
    return pb.ResourceSlice(
        metadata=_meta_to_pb(r.metadata),
        spec=pb.ResourceSliceSpec(
            driver=s.driver,
            pool=pb.ResourcePool(
                name=s.pool.name, generation=s.pool.generation, resource_slice_count=s.pool.resource_slice_count
            ),
            node_name=s.node_name,
            node_selector=_node_selector_to_pb(s.node_selector),
            all_nodes=s.all_nodes,
            per_device_node_selection=s.per_device_node_selection,
            devices=[_device_to_pb(d) for d in s.devices],
            shared_counters=[
                pb.CounterSet(name=c.name, counters=_counters_to_pb(c.counters)) for c in s.shared_counters
            ],
        ),
    )


def _selectors_from_pb(ss: Iterable[pb.DeviceSelector]) -> list[dra.DeviceSelector]:
    return [
        dra.DeviceSelector(cel=dra.CELDeviceSelector(expression=s.cel.expression) if s.HasField("cel") else None)
        for s in ss
    ]


def _selectors_to_pb(ss: Iterable[dra.DeviceSelector]) -> list[pb.DeviceSelector]:
    return [
        pb.DeviceSelector(cel=pb.CELDeviceSelector(expression=s.cel.expression) if s.cel is not None else None)
        for s in ss
    ]


def _opaque_from_pb(m: Any) -> dra.OpaqueDeviceConfiguration | None:
    """The ``opaque`` field of ``m`` (a message that has one)."""
    if not m.HasField("opaque"):
        return None
    parameters = _json_from_pb(m.opaque.parameters, "opaque.parameters")
    return dra.OpaqueDeviceConfiguration(driver=m.opaque.driver, parameters=parameters)


def _opaque_to_pb(o: dra.OpaqueDeviceConfiguration | None) -> pb.OpaqueDeviceConfiguration | None:
    if o is None:
        return None
    return pb.OpaqueDeviceConfiguration(driver=o.driver, parameters=_json_to_pb(o.parameters))


def device_class_from_pb(c: pb.DeviceClass, path: str = "") -> dra.DeviceClass:
    """The model's DeviceClass; InvalidArgument names the field under ``path``."""
    with _at(path):
        return dra.DeviceClass(
            metadata=_meta_from_pb(c.metadata),
            spec=dra.DeviceClassSpec(
                selectors=_selectors_from_pb(c.spec.selectors),
                config=_each(
                    c.spec.config, lambda k: dra.DeviceClassConfiguration(opaque=_opaque_from_pb(k)), "spec.config"
                ),
                extended_resource_name=_opt(c.spec, "extended_resource_name"),
            ),
        )


def device_class_to_pb(c: dra.DeviceClass) -> pb.DeviceClass:
    return pb.DeviceClass(
        metadata=_meta_to_pb(c.metadata),
        spec=pb.DeviceClassSpec(
            selectors=_selectors_to_pb(c.spec.selectors),
            config=[pb.DeviceClassConfiguration(opaque=_opaque_to_pb(k.opaque)) for k in c.spec.config],
            extended_resource_name=c.spec.extended_resource_name,
        ),
    )


def _tolerations_from_pb(ts: Iterable[pb.DeviceToleration]) -> list[dra.DeviceToleration]:
    return [
        dra.DeviceToleration(
            key=t.key,
            operator=t.operator,
            value=t.value,
            effect=t.effect,
            toleration_seconds=_opt(t, "toleration_seconds"),
        )
        for t in ts
    ]


def _tolerations_to_pb(ts: Iterable[dra.DeviceToleration]) -> list[pb.DeviceToleration]:
    return [
        pb.DeviceToleration(
            key=t.key, operator=t.operator, value=t.value, effect=t.effect, toleration_seconds=t.toleration_seconds
        )
        for t in ts
    ]


def _mode(value: str, path: str) -> str:
    return _enum(value, _ALLOCATION_MODES, path) or dra.ALLOCATION_MODE_EXACT_COUNT


def _request_from_pb(r: pb.DeviceRequest) -> dra.DeviceRequest:
    exactly = None
    if r.HasField("exactly"):
        e = r.exactly
        with _at("exactly"):
            exactly = dra.ExactDeviceRequest(
                device_class_name=e.device_class_name,
                selectors=_selectors_from_pb(e.selectors),
                allocation_mode=_mode(e.allocation_mode, "allocation_mode"),
                count=e.count or 1,
                admin_access=_opt(e, "admin_access"),
                tolerations=_tolerations_from_pb(e.tolerations),
                capacity=_sub(e, "capacity", _capacity_requirements_from_pb),
            )
    return dra.DeviceRequest(
        name=r.name,
        exactly=exactly,
        first_available=_each(
            r.first_available,
            lambda s: dra.DeviceSubRequest(
                name=s.name,
                device_class_name=s.device_class_name,
                selectors=_selectors_from_pb(s.selectors),
                allocation_mode=_mode(s.allocation_mode, "allocation_mode"),
                count=s.count or 1,
                tolerations=_tolerations_from_pb(s.tolerations),
                capacity=_sub(s, "capacity", _capacity_requirements_from_pb),
            ),
            "first_available",
        ),
    )


def _request_to_pb(r: dra.DeviceRequest) -> pb.DeviceRequest:
    e = r.exactly
    return pb.DeviceRequest(
        name=r.name,
        exactly=(
            pb.ExactDeviceRequest(
                device_class_name=e.device_class_name,
                selectors=_selectors_to_pb(e.selectors),
                allocation_mode=e.allocation_mode,
                count=e.count,
                admin_access=e.admin_access,
                tolerations=_tolerations_to_pb(e.tolerations),
                capacity=_capacity_requirements_to_pb(e.capacity),
            )
            if e is not None
            else None
        ),
        first_available=[
            pb.DeviceSubRequest(
                name=s.name,
                device_class_name=s.device_class_name,
                selectors=_selectors_to_pb(s.selectors),
                allocation_mode=s.allocation_mode,
                count=s.count,
                tolerations=_tolerations_to_pb(s.tolerations),
                capacity=_capacity_requirements_to_pb(s.capacity),
            )
            for s in r.first_available
        ],
    )


#: validateUID (pkg/apis/resource/validation/validation.go, v1.37.2): a share's ID.
_UID_FORM = (
    "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`"
    " with lowercase hexadecimal characters"
)


def _share_id(m: Any) -> str | None:
    value: str | None = _opt(m, "share_id")
    if value is None:
        return None
    try:
        normalized = str(uuid.UUID(value)) == value
    except ValueError:
        normalized = False
    if not normalized:
        raise validation.invalid("share_id", value, _UID_FORM)
    return value


def _result_from_pb(r: pb.DeviceRequestAllocationResult) -> dra.DeviceRequestAllocationResult:
    return dra.DeviceRequestAllocationResult(
        request=r.request,
        driver=r.driver,
        pool=r.pool,
        device=r.device,
        admin_access=_opt(r, "admin_access"),
        tolerations=_tolerations_from_pb(r.tolerations),
        binding_conditions=list(r.binding_conditions),
        binding_failure_conditions=list(r.binding_failure_conditions),
        share_id=_share_id(r),
        consumed_capacity=_quantities_from_pb(r.consumed_capacity, "consumed_capacity"),
    )


def _allocation_from_pb(a: pb.AllocationResult) -> dra.AllocationResult:
    return dra.AllocationResult(
        devices=dra.DeviceAllocationResult(
            results=_each(a.devices.results, _result_from_pb, "devices.results"),
            config=_each(
                a.devices.config,
                lambda c: dra.DeviceAllocationConfiguration(
                    source=_enum(c.source, _CONFIG_SOURCES, "source") or dra.CONFIG_SOURCE_CLAIM,
                    requests=list(c.requests),
                    opaque=_opaque_from_pb(c),
                ),
                "devices.config",
            ),
        ),
        node_selector=_node_selector_from_pb(a.node_selector) if a.HasField("node_selector") else None,
        allocation_timestamp=_opt_time(a, "allocation_timestamp"),
    )


def _at_status_allocation(a: pb.AllocationResult) -> dra.AllocationResult:
    with _at("status.allocation"):
        return _allocation_from_pb(a)


def _allocation_to_pb(a: dra.AllocationResult) -> pb.AllocationResult:
    return pb.AllocationResult(
        devices=pb.DeviceAllocationResult(
            results=[
                pb.DeviceRequestAllocationResult(
                    request=r.request,
                    driver=r.driver,
                    pool=r.pool,
                    device=r.device,
                    admin_access=r.admin_access,
                    tolerations=_tolerations_to_pb(r.tolerations),
                    binding_conditions=r.binding_conditions,
                    binding_failure_conditions=r.binding_failure_conditions,
                    share_id=r.share_id,
                    consumed_capacity=_quantities_to_pb(r.consumed_capacity),
                )
                for r in a.devices.results
            ],
            config=[
                pb.DeviceAllocationConfiguration(source=c.source, requests=c.requests, opaque=_opaque_to_pb(c.opaque))
                for c in a.devices.config
            ],
        ),
        node_selector=_node_selector_to_pb(a.node_selector),
        allocation_timestamp=a.allocation_timestamp,
    )


# metav1.Condition: the model keeps a condition as its JSON (camelCase keys,
# observedGeneration omitted when 0); ValidateConditions and ValidateCondition
# (k8s.io/apimachinery v0.37.2 pkg/apis/meta/v1/validation/validation.go)
# refuse what is checked here.
_CONDITION_STATUSES = ("False", "True", "Unknown")
_CONDITION_REASON = re.compile(r"[A-Za-z](?:[A-Za-z0-9_,:]*[A-Za-z0-9_])?")
_CONDITION_REASON_MAX = 1024
_CONDITION_MESSAGE_MAX = 32 * 1024
#: resource.AllocatedDeviceStatusMaxConditions and AllocatedDeviceStatusDataMaxLength.
_DEVICE_STATUS_CONDITIONS_MAX = 8
_DEVICE_STATUS_DATA_MAX = 10 * 1024


def _condition_from_pb(c: pb.Condition) -> dict[str, Any]:
    if not c.type:
        raise validation.required("type", "is required")
    validation.validate_label_name(c.type, "type")
    if not c.status:
        raise validation.required("status")
    _enum(c.status, _CONDITION_STATUSES, "status")
    if c.observed_generation < 0:
        raise validation.invalid("observed_generation", c.observed_generation, "must be greater than or equal to zero")
    if not c.last_transition_time:
        raise validation.required("last_transition_time")
    if not c.reason:
        raise validation.required("reason")
    if _CONDITION_REASON.fullmatch(c.reason) is None:
        raise validation.invalid(
            "reason",
            c.reason,
            "a condition reason must start with alphabetic character, optionally followed by a string of "
            "alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'",
        )
    for field, text, most in (
        ("reason", c.reason, _CONDITION_REASON_MAX),
        ("message", c.message, _CONDITION_MESSAGE_MAX),
    ):
        if len(text) > most:
            raise errors.InvalidArgument(f"{field}: Too long: may not be more than {most} bytes")
    out: dict[str, Any] = {"type": c.type, "status": c.status}
    if c.observed_generation:
        out["observedGeneration"] = c.observed_generation
    out["lastTransitionTime"] = _time(c.last_transition_time, "last_transition_time")
    return out | {"reason": c.reason, "message": c.message}


def _conditions_from_pb(cs: Sequence[pb.Condition]) -> list[dict[str, Any]]:
    if len(cs) > _DEVICE_STATUS_CONDITIONS_MAX:
        raise errors.InvalidArgument(
            f"conditions: Too many: {len(cs)}: must have at most {_DEVICE_STATUS_CONDITIONS_MAX} items"
        )
    out = _each(cs, _condition_from_pb, "conditions")
    seen: set[str] = set()
    for i, c in enumerate(out):
        if c["type"] in seen:
            raise validation.duplicate(f"conditions[{i}]", c["type"])
        seen.add(c["type"])
    return out


def _condition_to_pb(c: Mapping[str, Any]) -> pb.Condition:
    generation = c.get("observedGeneration")
    return pb.Condition(
        type=str(c.get("type") or ""),
        status=str(c.get("status") or ""),
        reason=str(c.get("reason") or ""),
        message=str(c.get("message") or ""),
        last_transition_time=str(c.get("lastTransitionTime") or ""),
        observed_generation=generation if isinstance(generation, int) else 0,
    )


def _device_status_from_pb(s: pb.AllocatedDeviceStatus) -> dra.AllocatedDeviceStatus:
    return dra.AllocatedDeviceStatus(
        driver=s.driver,
        pool=s.pool,
        device=s.device,
        share_id=_share_id(s),
        conditions=_conditions_from_pb(s.conditions),
        data=_json_object_from_pb(s.data, "data", _DEVICE_STATUS_DATA_MAX),
        network_data=_json_object_from_pb(s.network_data, "network_data"),
    )


def _device_status_to_pb(s: dra.AllocatedDeviceStatus) -> pb.AllocatedDeviceStatus:
    return pb.AllocatedDeviceStatus(
        driver=s.driver,
        pool=s.pool,
        device=s.device,
        share_id=s.share_id,
        conditions=[_condition_to_pb(c) for c in s.conditions],
        data=_json_to_pb(s.data),
        network_data=_json_to_pb(s.network_data),
    )


def resource_claim_from_pb(c: pb.ResourceClaim, path: str = "") -> dra.ResourceClaim:
    """The model's ResourceClaim; InvalidArgument names the field under ``path``."""
    with _at(path):
        d = c.spec.devices
        return dra.ResourceClaim(
            metadata=_meta_from_pb(c.metadata),
            spec=dra.ResourceClaimSpec(
                devices=dra.DeviceClaim(
                    requests=_each(d.requests, _request_from_pb, "spec.devices.requests"),
                    constraints=[
                        dra.DeviceConstraint(
                            requests=list(k.requests),
                            match_attribute=_opt(k, "match_attribute"),
                            distinct_attribute=_opt(k, "distinct_attribute"),
                        )
                        for k in d.constraints
                    ],
                    config=_each(
                        d.config,
                        lambda k: dra.DeviceClaimConfiguration(requests=list(k.requests), opaque=_opaque_from_pb(k)),
                        "spec.devices.config",
                    ),
                )
            ),
            status=dra.ResourceClaimStatus(
                allocation=(_at_status_allocation(c.status.allocation) if c.status.HasField("allocation") else None),
                reserved_for=[
                    dra.ResourceClaimConsumerReference(
                        api_group=r.api_group, resource=r.resource or "pods", name=r.name, uid=r.uid
                    )
                    for r in c.status.reserved_for
                ],
                devices=_each(c.status.devices, _device_status_from_pb, "status.devices"),
            ),
        )


def resource_claim_to_pb(c: dra.ResourceClaim) -> pb.ResourceClaim:
    d = c.spec.devices
    return pb.ResourceClaim(
        metadata=_meta_to_pb(c.metadata),
        spec=pb.ResourceClaimSpec(
            devices=pb.DeviceClaim(
                requests=[_request_to_pb(r) for r in d.requests],
                constraints=[
                    pb.DeviceConstraint(
                        requests=k.requests, match_attribute=k.match_attribute, distinct_attribute=k.distinct_attribute
                    )
                    for k in d.constraints
                ],
                config=[
                    pb.DeviceClaimConfiguration(requests=k.requests, opaque=_opaque_to_pb(k.opaque)) for k in d.config
                ],
            )
        ),
        status=pb.ResourceClaimStatus(
            allocation=_allocation_to_pb(c.status.allocation) if c.status.allocation is not None else None,
            reserved_for=[
                pb.ResourceClaimConsumerReference(api_group=r.api_group, resource=r.resource, name=r.name, uid=r.uid)
                for r in c.status.reserved_for
            ],
            devices=[_device_status_to_pb(s) for s in c.status.devices],
        ),
    )


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
