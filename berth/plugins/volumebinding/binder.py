"""kube-scheduler's volume binder (``pkg/scheduler/framework/plugins/volumebinding/binder.go``,
v1.37.2), over the Handle's :class:`~berth.framework.handle.VolumeLister`.

Its stages, as upstream's ``SchedulerVolumeBinder`` documents them:
:func:`get_pod_volume_claims` (PreFilter) sorts the pod's claims into bound,
unbound with delayed binding and unbound immediate; :func:`find_pod_volumes`
(Filter, per node) checks bound PVs' node affinity, finds a PV for each
unbound claim or checks it can be provisioned there; :func:`assume_pod_volumes`
(Reserve) assumes the PV claimRefs and the claims' ``selected-node``;
:func:`revert_assumed_pod_volumes` (Unreserve); :func:`bind_pod_volumes`
(PreBind) writes them and waits until the PV controller (the embedded
cluster, in embedded mode) has bound every claim.

Not ported: the CSI migration translation of in-tree PVs (``tryTranslatePVToCSI``:
an in-tree GCE PD or EBS PV on a node whose CSINode lists the plugin as
migrated is judged by its in-tree node affinity here; Portworx, migrated
unconditionally since 1.36, is not modelled) and the VolumeAttributesClass
gate (GA and locked on since 1.36, on in 1.35: classes must match, as here).
Between v1.34.4 and v1.37.2 binder.go changed only in how it reaches its
assume caches (``passive_assume_cache.go``), which Berth keeps its own way.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping

import msgspec

from berth.cluster import labels, model, storage
from berth.errors import BerthError
from berth.framework.handle import Handle, VolumeLister

__all__ = [
    "ERR_REASON_BIND_CONFLICT",
    "ERR_REASON_NODE_CONFLICT",
    "ERR_REASON_NOT_ENOUGH_SPACE",
    "ERR_REASON_PV_NOT_EXIST",
    "BinderError",
    "BindingInfo",
    "DynamicProvision",
    "PodVolumeClaims",
    "PodVolumes",
]

#: binder.go ConflictReasons.
ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"


class BinderError(Exception):
    """An error of the binder (the plugin returns it as an Error status)."""


@dataclasses.dataclass(slots=True)
class BindingInfo:
    """A PVC and the PV proposed for it."""

    pvc: storage.PersistentVolumeClaim
    pv: storage.PersistentVolume


@dataclasses.dataclass(slots=True)
class DynamicProvision:
    pvc: storage.PersistentVolumeClaim
    node_capacity: storage.CSIStorageCapacity | None = None


@dataclasses.dataclass(slots=True)
class PodVolumes:
    """The pod's volumes on one node: PVs to bind, claims to provision."""

    static_bindings: list[BindingInfo] = dataclasses.field(default_factory=list)
    dynamic_provisions: list[DynamicProvision] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(slots=True)
class PodVolumeClaims:
    bound: list[storage.PersistentVolumeClaim] = dataclasses.field(default_factory=list)
    unbound_delay_binding: list[storage.PersistentVolumeClaim] = dataclasses.field(default_factory=list)
    unbound_immediate: list[storage.PersistentVolumeClaim] = dataclasses.field(default_factory=list)
    #: storage class -> its PVs, for the delayed claims.
    unbound_volumes_delay_binding: dict[str, list[storage.PersistentVolume]] = dataclasses.field(default_factory=dict)


def is_pvc_fully_bound(pvc: storage.PersistentVolumeClaim) -> bool:
    """isPVCFullyBound: a volume name and the PV controller's bind-completed annotation."""
    return bool(pvc.spec.volume_name) and storage.ANN_BIND_COMPLETED in pvc.metadata.annotations


def is_delay_binding_mode(pvc: storage.PersistentVolumeClaim, volumes: VolumeLister) -> bool:
    """volume.IsDelayBindingMode: the claim's class binds WaitForFirstConsumer
    (no class, or an unknown one: Immediate); BinderError when the class has no mode."""
    name = storage.pvc_class(pvc)
    if not name:
        return False
    sc = volumes.storage_class(name)
    if sc is None:
        return False
    if sc.volume_binding_mode is None:
        raise BinderError(f'VolumeBindingMode not set for StorageClass "{name}"')
    return sc.volume_binding_mode == "WaitForFirstConsumer"


def _volume_claim(pod: model.Pod, vol: model.Volume) -> tuple[str, bool] | None:
    if vol.persistent_volume_claim is not None:
        return vol.persistent_volume_claim.claim_name, False
    if vol.ephemeral is not None:
        return storage.ephemeral_claim_name(pod, vol), True
    return None


def _is_volume_bound(
    pod: model.Pod, vol: model.Volume, volumes: VolumeLister
) -> tuple[bool, storage.PersistentVolumeClaim | None]:
    """isVolumeBound: (fully bound, the claim) — (True, None) for a volume without a claim."""
    claim = _volume_claim(pod, vol)
    if claim is None:
        return True, None
    name, ephemeral = claim
    ns = pod.metadata.namespace
    pvc = volumes.pvc(ns, name)
    if pvc is None:
        raise BinderError(f'error getting PVC "{ns}/{name}": persistentvolumeclaims "{ns}/{name}" not found')
    if ephemeral:
        err = storage.volume_is_for_pod(pod, pvc)
        if err is not None:
            raise BinderError(err)
    return is_pvc_fully_bound(pvc), pvc


def are_pod_volumes_bound(pod: model.Pod, volumes: VolumeLister) -> bool:
    for vol in pod.spec.volumes:
        try:
            bound, _ = _is_volume_bound(pod, vol, volumes)
        except BinderError:
            return False
        if not bound:
            return False
    return True


def get_pod_volume_claims(pod: model.Pod, volumes: VolumeLister) -> PodVolumeClaims:
    """GetPodVolumeClaims; raises BinderError."""
    out = PodVolumeClaims()
    for vol in pod.spec.volumes:
        bound, pvc = _is_volume_bound(pod, vol, volumes)
        if pvc is None:
            continue
        if bound:
            out.bound.append(pvc)
        elif is_delay_binding_mode(pvc, volumes) and not pvc.spec.volume_name:
            out.unbound_delay_binding.append(pvc)
        else:
            # Immediate binding (or prebound) claims should have been bound already.
            out.unbound_immediate.append(pvc)
    for pvc in out.unbound_delay_binding:
        cls = storage.pvc_class(pvc)
        out.unbound_volumes_delay_binding[cls] = volumes.pvs_of_class(cls)
    return out


def _check_bound_claims(
    claims: list[storage.PersistentVolumeClaim], node_labels: Mapping[str, str], volumes: VolumeLister
) -> tuple[bool, bool]:
    """checkBoundClaims: (PVs' node affinity satisfied, every PV found)."""
    for pvc in claims:
        pv = volumes.pv(pvc.spec.volume_name)
        if pv is None:
            return True, False
        if not storage.check_node_affinity(pv, node_labels):
            return False, True
    return True, True


def _pvc_size(pvc: storage.PersistentVolumeClaim) -> int:
    return storage.storage_bytes(pvc.spec.resources.requests) or 0


def _find_matching_volumes(
    claims: list[storage.PersistentVolumeClaim],
    pvs_by_class: Mapping[str, list[storage.PersistentVolume]],
    node_labels: Mapping[str, str],
) -> tuple[bool, list[BindingInfo], list[storage.PersistentVolumeClaim]]:
    """findMatchingVolumes: the smallest fitting PV for each claim, smallest claims first."""
    chosen: dict[str, storage.PersistentVolume] = {}
    bindings: list[BindingInfo] = []
    unbound: list[storage.PersistentVolumeClaim] = []
    found = True
    for pvc in sorted(claims, key=_pvc_size):
        try:
            pv = storage.find_matching_volume(
                pvc, pvs_by_class.get(storage.pvc_class(pvc), []), node_labels, chosen, True
            )
        except BerthError as e:
            raise BinderError(str(e)) from None
        if pv is None:
            unbound.append(pvc)
            found = False
            continue
        chosen[pv.metadata.name] = pv
        bindings.append(BindingInfo(pvc, pv))
    return found, bindings, unbound


def _volume_limit(cap: storage.CSIStorageCapacity) -> int | None:
    """volumeLimit: maximumVolumeSize if set, else capacity."""
    q = cap.maximum_volume_size if cap.maximum_volume_size is not None else cap.capacity
    return None if q is None else storage.storage_bytes({"storage": q})


def _has_enough_capacity(
    provisioner: str,
    pvc: storage.PersistentVolumeClaim,
    sc: storage.StorageClass,
    node_labels: Mapping[str, str],
    volumes: VolumeLister,
) -> tuple[bool, storage.CSIStorageCapacity | None]:
    """hasEnoughCapacity: only for CSI drivers that opt into storage capacity tracking."""
    size = storage.storage_bytes(pvc.spec.resources.requests)
    if size is None:
        return True, None
    driver = volumes.csi_driver(provisioner)
    if driver is None or not driver.spec.storage_capacity:
        return True, None
    for cap in volumes.capacities():
        limit = _volume_limit(cap)
        if (
            cap.storage_class_name == sc.metadata.name
            and limit is not None
            and limit >= size
            and cap.node_topology is not None
            and labels.match_label_selector(cap.node_topology, node_labels)
        ):
            return True, cap
    return False, None


def _match_topology(terms: list[storage.TopologySelectorTerm], node_labels: Mapping[str, str]) -> bool:
    """v1helper.MatchTopologySelectorTerms: no terms match everything; else any term whose every requirement holds."""
    if not terms:
        return True
    for term in terms:
        if all(r.key in node_labels and node_labels[r.key] in r.values for r in term.match_label_expressions):
            return True
    return False


def _check_volume_provisions(
    claims: list[storage.PersistentVolumeClaim], node_labels: Mapping[str, str], volumes: VolumeLister
) -> tuple[bool, bool, list[DynamicProvision]]:
    """checkVolumeProvisions: (provisionable, sufficient storage, the provisions)."""
    out: list[DynamicProvision] = []
    for pvc in claims:
        cls = storage.pvc_class(pvc)
        if not cls:
            raise BinderError(f'no class for claim "{pvc.key}"')
        sc = volumes.storage_class(cls)
        if sc is None:
            raise BinderError(f'failed to find storage class "{cls}"')
        provisioner = sc.provisioner
        if not provisioner or provisioner == storage.NOT_SUPPORTED_PROVISIONER:
            return False, True, []
        if not _match_topology(sc.allowed_topologies, node_labels):
            return False, True, []
        sufficient, cap = _has_enough_capacity(provisioner, pvc, sc, node_labels, volumes)
        if not sufficient:
            return True, False, []
        out.append(DynamicProvision(pvc, cap))
    return True, True, out


def find_pod_volumes(claims: PodVolumeClaims, node: model.Node, volumes: VolumeLister) -> tuple[PodVolumes, list[str]]:
    """FindPodVolumes: the pod's volumes on ``node`` and the reasons it does
    not fit there (none: it fits); raises BinderError."""
    node_labels = node.metadata.labels
    pv = PodVolumes()
    unbound_ok = bound_ok = sufficient = pvs_found = True

    def reasons() -> list[str]:
        out = []
        if not bound_ok:
            out.append(ERR_REASON_NODE_CONFLICT)
        if not unbound_ok:
            out.append(ERR_REASON_BIND_CONFLICT)
        if not sufficient:
            out.append(ERR_REASON_NOT_ENOUGH_SPACE)
        if not pvs_found:
            out.append(ERR_REASON_PV_NOT_EXIST)
        return out

    if claims.bound:
        bound_ok, pvs_found = _check_bound_claims(claims.bound, node_labels, volumes)
    if claims.unbound_delay_binding:
        to_match: list[storage.PersistentVolumeClaim] = []
        to_provision: list[storage.PersistentVolumeClaim] = []
        for pvc in claims.unbound_delay_binding:
            selected = pvc.metadata.annotations.get(storage.ANN_SELECTED_NODE)
            if selected is not None:
                if selected != node.metadata.name:
                    unbound_ok = False  # fast path: provisioning was started for another node
                    return pv, reasons()
                to_provision.append(pvc)
            else:
                to_match.append(pvc)
        if to_match:
            unbound_ok, pv.static_bindings, rest = _find_matching_volumes(
                to_match, claims.unbound_volumes_delay_binding, node_labels
            )
            to_provision.extend(rest)
        if to_provision:
            unbound_ok, sufficient, pv.dynamic_provisions = _check_volume_provisions(to_provision, node_labels, volumes)
    return pv, reasons()


def assume_pod_volumes(pod: model.Pod, node: str, pod_volumes: PodVolumes, volumes: VolumeLister) -> bool:
    """AssumePodVolumes: assume the PVs' claimRefs and the claims'
    ``selected-node``; rewrites ``pod_volumes`` with the assumed objects.
    Returns whether every volume was bound already; raises BinderError."""
    if are_pod_volumes_bound(pod, volumes):
        return True
    new_bindings: list[BindingInfo] = []
    for b in pod_volumes.static_bindings:
        new_pv, dirty = storage.bind_volume_to_claim(b.pv, b.pvc)
        if dirty:
            try:
                volumes.assume_pv(new_pv)
            except (ValueError, BerthError) as e:
                _revert_pvs(new_bindings, volumes)
                raise BinderError(str(e)) from None
        new_bindings.append(BindingInfo(b.pvc, new_pv))
    new_provisions: list[DynamicProvision] = []
    for p in pod_volumes.dynamic_provisions:
        md = p.pvc.metadata
        clone = msgspec.structs.replace(
            p.pvc,
            metadata=msgspec.structs.replace(md, annotations={**md.annotations, storage.ANN_SELECTED_NODE: node}),
        )
        try:
            volumes.assume_pvc(clone)
        except (ValueError, BerthError) as e:
            _revert_pvs(new_bindings, volumes)
            _revert_pvcs([d.pvc for d in new_provisions], volumes)
            raise BinderError(str(e)) from None
        new_provisions.append(DynamicProvision(clone))
    pod_volumes.static_bindings = new_bindings
    pod_volumes.dynamic_provisions = new_provisions
    return False


def _revert_pvs(bindings: list[BindingInfo], volumes: VolumeLister) -> None:
    for b in bindings:
        volumes.restore_pv(b.pv)


def _revert_pvcs(claims: list[storage.PersistentVolumeClaim], volumes: VolumeLister) -> None:
    for c in claims:
        volumes.restore_pvc(c)


def revert_assumed_pod_volumes(pod_volumes: PodVolumes, volumes: VolumeLister) -> None:
    """RevertAssumedPodVolumes."""
    _revert_pvs(pod_volumes.static_bindings, volumes)
    _revert_pvcs([p.pvc for p in pod_volumes.dynamic_provisions], volumes)


def _rv(obj: storage.PersistentVolume | storage.PersistentVolumeClaim) -> int:
    rv = obj.metadata.resource_version
    return int(rv) if rv.isdigit() else 0


async def bind_pod_volumes(
    pod: model.Pod, node: str, pod_volumes: PodVolumes, handle: Handle, *, bind_timeout: float
) -> None:
    """BindPodVolumes: write the PVs and claims, then wait (up to ``bind_timeout``
    seconds) until every claim is fully bound; raises BinderError."""
    volumes = handle.volumes
    assert volumes is not None
    bindings = pod_volumes.static_bindings
    claims = [p.pvc for p in pod_volumes.dynamic_provisions]
    done_bindings = done_claims = 0
    try:
        for b in bindings:
            b.pv = await volumes.update_pv(b.pv)
            done_bindings += 1
        for i, c in enumerate(claims):
            claims[i] = await volumes.update_pvc(c)
            done_claims += 1
    except Exception as e:
        # Only the writes that did not happen are reverted (bindAPIUpdate).
        _revert_pvs(bindings[done_bindings:], volumes)
        _revert_pvcs(claims[done_claims:], volumes)
        raise BinderError(str(e)) from None
    try:
        async with asyncio.timeout(bind_timeout):
            while not _check_bindings(pod, node, bindings, claims, handle):
                await volumes.wait_for_change()
    except TimeoutError:
        raise BinderError("binding volumes: context deadline exceeded") from None


def _check_bindings(
    pod: model.Pod,
    node_name: str,
    bindings: list[BindingInfo],
    claims: list[storage.PersistentVolumeClaim],
    handle: Handle,
) -> bool:
    """checkBindings, on the source's objects (not the assumed ones): True
    once every claim is fully bound; BinderError when binding must be retried."""
    volumes = handle.volumes
    assert volumes is not None
    info = handle.cache.node_info(node_name)
    if info is None or info.node is None:
        raise BinderError(f'binding volumes: failed to get node "{node_name}": node "{node_name}" not found')
    node_labels = info.node.metadata.labels
    if handle.pods.get(pod.metadata.uid) is None:
        raise BinderError(f'binding volumes: pod does not exist any more: pod "{pod.metadata.name}" not found')
    for b in bindings:
        pv = volumes.api_pv(b.pv.metadata.name)
        if pv is None:
            raise BinderError(
                f'binding volumes: failed to check binding: persistentvolumes "{b.pv.metadata.name}" not found'
            )
        pvc = volumes.api_pvc(b.pvc.metadata.namespace, b.pvc.metadata.name)
        if pvc is None:
            raise BinderError(
                f'binding volumes: failed to check binding: persistentvolumeclaims "{b.pvc.key}" not found'
            )
        if _rv(b.pv) > _rv(pv):
            return False  # our write has not come back yet
        if not storage.check_node_affinity(pv, node_labels):
            raise BinderError(
                f'binding volumes: pv "{pv.metadata.name}" node affinity doesn\'t match node "{node_name}": '
                "no matching NodeSelectorTerms"
            )
        if pv.spec.claim_ref is None or not pv.spec.claim_ref.uid:
            raise BinderError(f'binding volumes: ClaimRef got reset for pv "{pv.metadata.name}"')
        if not is_pvc_fully_bound(pvc):
            return False
    for c in claims:
        pvc = volumes.api_pvc(c.metadata.namespace, c.metadata.name)
        if pvc is None:
            raise BinderError(
                f'binding volumes: failed to check provisioning pvc: persistentvolumeclaims "{c.key}" not found'
            )
        if _rv(c) > _rv(pvc):
            return False
        selected = pvc.metadata.annotations.get(storage.ANN_SELECTED_NODE)
        if selected is None and not pvc.metadata.annotations:
            raise BinderError(f'binding volumes: selectedNode annotation reset for PVC "{pvc.metadata.name}"')
        if selected != node_name:
            # The provisioner removes the annotation when provisioning failed.
            raise BinderError(f'binding volumes: provisioning failed for PVC "{pvc.metadata.name}"')
        if pvc.spec.volume_name:
            pv = volumes.api_pv(pvc.spec.volume_name)
            if pv is None:
                return False  # not seen yet (or deleted: the claim will be unbound)
            if not storage.check_node_affinity(pv, node_labels):
                raise BinderError(
                    f'binding volumes: pv "{pv.metadata.name}" node affinity doesn\'t match node "{node_name}": '
                    "no matching NodeSelectorTerms"
                )
        if not is_pvc_fully_bound(pvc):
            return False
    return True
