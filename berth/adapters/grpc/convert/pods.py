"""Pods: berth.v1 ``Pod`` (protos/berth/v1/model.proto) and the model's
:class:`berth.cluster.model.Pod` (core/v1 Pod, keeping what scheduling reads),
with what a pod's spec holds: affinity, containers, volumes and resource
claims.

A pod's ephemeral volume carries a PersistentVolumeClaim template, converted
by :mod:`.storage`'s claim spec.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from berth.adapters.grpc.convert._common import (
    _at,
    _each,
    _ls_from_pb,
    _ls_to_pb,
    _meta_from_pb,
    _meta_to_pb,
    _rl_from_pb,
    _rl_to_pb,
    _term_from_pb,
    _term_to_pb,
)
from berth.adapters.grpc.convert.storage import (
    _aws_from_pb,
    _aws_to_pb,
    _gce_from_pb,
    _gce_to_pb,
    _pvc_spec_from_pb,
    _pvc_spec_to_pb,
)
from berth.api.v1 import model_pb2 as pb
from berth.cluster import model, storage

__all__ = ["pod_from_pb", "pod_to_pb", "pods_from_pb"]


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


# ---------------------------------------------------------------- affinity and containers


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
        out.gce_persistent_disk = _gce_from_pb(v.gce_persistent_disk)
    elif which == "aws_elastic_block_store":
        out.aws_elastic_block_store = _aws_from_pb(v.aws_elastic_block_store)
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
    elif v.gce_persistent_disk is not None:
        out.gce_persistent_disk.CopyFrom(_gce_to_pb(v.gce_persistent_disk))
    elif v.aws_elastic_block_store is not None:
        out.aws_elastic_block_store.CopyFrom(_aws_to_pb(v.aws_elastic_block_store))
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
