"""Storage objects the volume plugins read, and the helpers Kubernetes shares
between its scheduler and its PV controller.

The kinds mirror core/v1 (PersistentVolume, PersistentVolumeClaim) and
storage.k8s.io/v1 (StorageClass, CSINode, CSIDriver, CSIStorageCapacity)
field for field, keeping what scheduling reads. The functions are ports of
``k8s.io/component-helpers/storage/volume`` (``helpers.go``,
``pv_helpers.go``) and ``storage/ephemeral`` at v0.34.4 (unchanged through
v0.37.2), kept here, below the plugins, because the embedded cluster binds
claims the way the PV controller does with the same rules
(``FindMatchingVolume``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import msgspec

from berth.cluster import labels, model, resources, validation
from berth.errors import InvalidArgument

__all__ = [
    "ANN_BETA_STORAGE_CLASS",
    "ANN_BIND_COMPLETED",
    "ANN_BOUND_BY_CONTROLLER",
    "ANN_MIGRATED_PLUGINS",
    "ANN_SELECTED_NODE",
    "NOT_SUPPORTED_PROVISIONER",
    "CSIDriver",
    "CSINode",
    "CSIStorageCapacity",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
    "bind_volume_to_claim",
    "check_access_modes",
    "check_node_affinity",
    "claim_of_volume",
    "ephemeral_claim_name",
    "find_matching_volume",
    "is_pvc_bound_to",
    "is_volume_bound_to_claim",
    "label_zones",
    "pod_claims",
    "pv_class",
    "pvc_class",
    "storage_bytes",
    "volume_is_for_pod",
]

#: pv.kubernetes.io/bind-completed: the PV controller finished binding the claim.
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
#: pv.kubernetes.io/bound-by-controller: the binding was made by a controller (or the scheduler), not a user.
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
#: volume.kubernetes.io/selected-node: the node the scheduler chose for a WaitForFirstConsumer claim.
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
#: volume.beta.kubernetes.io/storage-class (v1.BetaStorageClassAnnotation): wins over storageClassName.
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
#: storage.alpha.kubernetes.io/migrated-plugins on a CSINode (v1.MigratedPluginsAnnotationKey).
ANN_MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"
#: A class whose volumes are never provisioned (local volumes).
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"

_K8s = model._K8s  # the same base: camelCase, unknown keys ignored


# ---------------------------------------------------------------- PersistentVolume


class ObjectReference(_K8s):
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    api_version: str = ""
    resource_version: str = ""


class VolumeNodeAffinity(_K8s):
    required: model.NodeSelector | None = None


class CSIPersistentVolumeSource(_K8s):
    driver: str = ""
    volume_handle: str = ""
    read_only: bool = False


class LocalVolumeSource(_K8s):
    path: str = ""


class HostPathVolumeSource(_K8s):
    path: str = ""


class PersistentVolumeSpec(_K8s):
    capacity: model.ResourceList = {}
    access_modes: list[str] = []
    claim_ref: ObjectReference | None = None
    persistent_volume_reclaim_policy: str = ""
    storage_class_name: str = ""
    #: Filesystem (the default) or Block.
    volume_mode: str | None = None
    node_affinity: VolumeNodeAffinity | None = None
    volume_attributes_class_name: str | None = None
    csi: CSIPersistentVolumeSource | None = None
    gce_persistent_disk: model.GCEPersistentDiskVolumeSource | None = None
    aws_elastic_block_store: model.AWSElasticBlockStoreVolumeSource | None = None
    local: LocalVolumeSource | None = None
    host_path: HostPathVolumeSource | None = None


class PersistentVolumeStatus(_K8s):
    #: Pending, Available, Bound, Released, Failed.
    phase: str = ""


class PersistentVolume(_K8s):
    api_version: str = "v1"
    kind: str = "PersistentVolume"
    metadata: model.ObjectMeta = msgspec.field(default_factory=model.ObjectMeta)
    spec: PersistentVolumeSpec = msgspec.field(default_factory=PersistentVolumeSpec)
    status: PersistentVolumeStatus = msgspec.field(default_factory=PersistentVolumeStatus)

    @property
    def name(self) -> str:
        return self.metadata.name


# ---------------------------------------------------------------- PersistentVolumeClaim


class VolumeResourceRequirements(_K8s):
    requests: model.ResourceList = {}
    limits: model.ResourceList = {}


class PersistentVolumeClaimSpec(_K8s):
    access_modes: list[str] = []
    selector: model.LabelSelector | None = None
    resources: VolumeResourceRequirements = msgspec.field(default_factory=VolumeResourceRequirements)
    volume_name: str = ""
    #: None: no class asked for (the DefaultStorageClass admission plugin may set one).
    storage_class_name: str | None = None
    volume_mode: str | None = None
    volume_attributes_class_name: str | None = None


class PersistentVolumeClaimStatus(_K8s):
    #: Pending, Bound, Lost.
    phase: str = ""
    access_modes: list[str] = []
    capacity: model.ResourceList = {}


class PersistentVolumeClaim(_K8s):
    api_version: str = "v1"
    kind: str = "PersistentVolumeClaim"
    metadata: model.ObjectMeta = msgspec.field(default_factory=model.ObjectMeta)
    spec: PersistentVolumeClaimSpec = msgspec.field(default_factory=PersistentVolumeClaimSpec)
    status: PersistentVolumeClaimStatus = msgspec.field(default_factory=PersistentVolumeClaimStatus)

    @property
    def key(self) -> str:
        return model.pod_key(self.metadata.namespace, self.metadata.name)


# ---------------------------------------------------------------- storage.k8s.io


class TopologySelectorLabelRequirement(_K8s):
    key: str = ""
    values: list[str] = []


class TopologySelectorTerm(_K8s):
    match_label_expressions: list[TopologySelectorLabelRequirement] = []


class StorageClass(_K8s):
    api_version: str = "storage.k8s.io/v1"
    kind: str = "StorageClass"
    metadata: model.ObjectMeta = msgspec.field(default_factory=model.ObjectMeta)
    provisioner: str = ""
    parameters: dict[str, str] = {}
    reclaim_policy: str | None = None
    #: Immediate or WaitForFirstConsumer; the API server defaults it to Immediate.
    volume_binding_mode: str | None = None
    allowed_topologies: list[TopologySelectorTerm] = []

    @property
    def name(self) -> str:
        return self.metadata.name


class VolumeNodeResources(_K8s):
    count: int | None = None


class CSINodeDriver(_K8s):
    name: str = ""
    node_id: str = msgspec.field(default="", name="nodeID")
    #: ``null`` from the API server when the driver has none (csinode types.go: no omitempty).
    topology_keys: list[str] | None = None
    allocatable: VolumeNodeResources | None = None


class CSINodeSpec(_K8s):
    drivers: list[CSINodeDriver] = []


class CSINode(_K8s):
    """A node's CSI drivers and how many volumes each may attach (``allocatable.count``); named as its node."""

    api_version: str = "storage.k8s.io/v1"
    kind: str = "CSINode"
    metadata: model.ObjectMeta = msgspec.field(default_factory=model.ObjectMeta)
    spec: CSINodeSpec = msgspec.field(default_factory=CSINodeSpec)

    @property
    def name(self) -> str:
        return self.metadata.name


class CSIDriverSpec(_K8s):
    #: None: true (the API server's default).
    attach_required: bool | None = None
    #: Whether the driver publishes CSIStorageCapacity objects the scheduler must check.
    storage_capacity: bool | None = None
    #: Nodes whose CSINode lacks the driver get no pod that needs it (NodeVolumeLimits,
    #: with the VolumeLimitScaling gate; the field exists since 1.36).
    prevent_pod_scheduling_if_missing: bool | None = None


class CSIDriver(_K8s):
    api_version: str = "storage.k8s.io/v1"
    kind: str = "CSIDriver"
    metadata: model.ObjectMeta = msgspec.field(default_factory=model.ObjectMeta)
    spec: CSIDriverSpec = msgspec.field(default_factory=CSIDriverSpec)

    @property
    def name(self) -> str:
        return self.metadata.name


class CSIStorageCapacity(_K8s):
    """Free capacity of one storage class in one topology segment (namespaced; fields at the top level)."""

    api_version: str = "storage.k8s.io/v1"
    kind: str = "CSIStorageCapacity"
    metadata: model.ObjectMeta = msgspec.field(default_factory=model.ObjectMeta)
    node_topology: model.LabelSelector | None = None
    storage_class_name: str = ""
    capacity: model.Quantity | None = None
    maximum_volume_size: model.Quantity | None = None


# ---------------------------------------------------------------- helpers (component-helpers/storage)


def storage_bytes(rl: Mapping[str, model.Quantity]) -> int | None:
    """``rl[storage]`` as bytes (Quantity.Value(), rounded up); None when absent."""
    q = rl.get("storage")
    return None if q is None else resources.canonical("storage", q)


def pvc_class(pvc: PersistentVolumeClaim) -> str:
    """GetPersistentVolumeClaimClass: the beta annotation, else storageClassName, else ""."""
    ann = pvc.metadata.annotations.get(ANN_BETA_STORAGE_CLASS)
    if ann is not None:
        return ann
    return pvc.spec.storage_class_name or ""


def pv_class(pv: PersistentVolume) -> str:
    """GetPersistentVolumeClass."""
    ann = pv.metadata.annotations.get(ANN_BETA_STORAGE_CLASS)
    return ann if ann is not None else pv.spec.storage_class_name


def check_node_affinity(pv: PersistentVolume, node_labels: Mapping[str, str]) -> bool:
    """CheckNodeAffinity: whether a node with ``node_labels`` satisfies the PV's
    required node affinity (none: every node). The node is judged by its labels
    alone, as upstream builds a Node with only labels: matchFields never match."""
    na = pv.spec.node_affinity
    if na is None or na.required is None:
        return True
    return any(labels.node_term_matches(t, node_labels, "") for t in na.required.node_selector_terms)


def is_volume_bound_to_claim(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> bool:
    """IsVolumeBoundToClaim: the PV's claimRef names the claim (and its uid, when it has one)."""
    ref = pv.spec.claim_ref
    if ref is None:
        return False
    if pvc.metadata.name != ref.name or pvc.metadata.namespace != ref.namespace:
        return False
    return not ref.uid or ref.uid == pvc.metadata.uid


def is_pvc_bound_to(pvc: PersistentVolumeClaim, pv_name: str) -> bool:
    """The claim is fully bound to ``pv_name`` (the PV controller's bind-completed annotation)."""
    return pvc.spec.volume_name == pv_name and ANN_BIND_COMPLETED in pvc.metadata.annotations


def check_access_modes(pvc: PersistentVolumeClaim, pv: PersistentVolume) -> bool:
    """CheckAccessModes: the PV offers every mode the claim asks for."""
    return set(pvc.spec.access_modes) <= set(pv.spec.access_modes)


def _volume_mode_mismatch(pvc: PersistentVolumeClaim, pv: PersistentVolume) -> bool:
    """CheckVolumeModeMismatches (Filesystem when unset)."""
    return (pvc.spec.volume_mode or "Filesystem") != (pv.spec.volume_mode or "Filesystem")


def find_matching_volume(
    pvc: PersistentVolumeClaim,
    volumes: Iterable[PersistentVolume],
    node_labels: Mapping[str, str] | None,
    excluded: Mapping[str, object] | None,
    delay_binding: bool,
) -> PersistentVolume | None:
    """FindMatchingVolume (VolumeAttributesClass on, as in every release Berth follows): the PV
    already bound to the claim (None if it does not fit the node), else the
    smallest Available PV of the claim's class, size, volume mode, selector,
    node affinity and access modes. ``node_labels`` None: the PV controller's
    call, which leaves WaitForFirstConsumer claims (``delay_binding``) alone.

    Raises InvalidArgument for a claim whose selector cannot be evaluated."""
    requested = storage_bytes(pvc.spec.resources.requests) or 0
    requested_class = pvc_class(pvc)
    selector = pvc.spec.selector
    if selector is not None:
        try:
            labels.validate_label_selector(selector, "spec.selector")
        except labels.SelectorError as e:
            raise InvalidArgument(f"error creating internal label selector for claim: {pvc.key}: {e}") from None
    smallest: PersistentVolume | None = None
    smallest_size = 0
    for pv in volumes:
        if excluded is not None and pv.metadata.name in excluded:
            continue
        bound_here = is_volume_bound_to_claim(pv, pvc)
        if pv.spec.claim_ref is not None and not bound_here:
            continue
        size = storage_bytes(pv.spec.capacity) or 0
        if size < requested:
            continue
        if _volume_mode_mismatch(pvc, pv):
            continue
        if (pvc.spec.volume_attributes_class_name or "") != (pv.spec.volume_attributes_class_name or ""):
            continue
        if pv.metadata.deletion_timestamp is not None:
            continue
        affinity_ok = node_labels is None or check_node_affinity(pv, node_labels)
        if bound_here:
            return pv if affinity_ok else None
        if node_labels is None and delay_binding:
            continue
        if pv.status.phase != "Available":
            continue
        if selector is not None and not labels.match_label_selector(selector, pv.metadata.labels):
            continue
        if pv_class(pv) != requested_class:
            continue
        if not affinity_ok:
            continue
        if node_labels is not None and not check_access_modes(pvc, pv):
            continue
        if smallest is None or smallest_size > size:
            smallest, smallest_size = pv, size
    return smallest


def claim_of_volume(pvc: PersistentVolumeClaim) -> ObjectReference:
    """reference.GetReference of a claim: what a PV's claimRef holds."""
    md = pvc.metadata
    return ObjectReference(
        kind="PersistentVolumeClaim",
        namespace=md.namespace,
        name=md.name,
        uid=md.uid,
        api_version="v1",
        resource_version=md.resource_version,
    )


def bind_volume_to_claim(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> tuple[PersistentVolume, bool]:
    """GetBindVolumeToClaim: a copy of ``pv`` whose claimRef names ``pvc``,
    annotated bound-by-controller unless it was already bound to it; and
    whether anything changed (dirty)."""
    set_bound_by_controller = not is_volume_bound_to_claim(pv, pvc)
    spec, md, dirty = pv.spec, pv.metadata, False
    ref = spec.claim_ref
    if ref is None or (ref.name, ref.namespace, ref.uid) != (
        pvc.metadata.name,
        pvc.metadata.namespace,
        pvc.metadata.uid,
    ):
        spec = msgspec.structs.replace(spec, claim_ref=claim_of_volume(pvc))
        dirty = True
    if set_bound_by_controller and ANN_BOUND_BY_CONTROLLER not in md.annotations:
        md = msgspec.structs.replace(md, annotations={**md.annotations, ANN_BOUND_BY_CONTROLLER: "yes"})
        dirty = True
    return msgspec.structs.replace(pv, metadata=md, spec=spec), dirty


def ephemeral_claim_name(pod: model.Pod, volume: model.Volume) -> str:
    """ephemeral.VolumeClaimName: ``<pod name>-<volume name>``."""
    return f"{pod.metadata.name}-{volume.name}"


def volume_is_for_pod(pod: model.Pod, pvc: PersistentVolumeClaim) -> str | None:
    """ephemeral.VolumeIsForPod: None when the claim is controlled by the pod, else the error message."""
    owned = any(r.controller and r.uid == pod.metadata.uid for r in pvc.metadata.owner_references)
    if pvc.metadata.namespace != pod.metadata.namespace or not owned:
        return (
            f"PVC {pvc.metadata.namespace}/{pvc.metadata.name} was not created for pod "
            f"{pod.metadata.namespace}/{pod.metadata.name} (pod is not owner)"
        )
    return None


def pod_claims(pod: model.Pod) -> list[tuple[model.Volume, str, bool]]:
    """(volume, claim name, is ephemeral) of every volume backed by a claim, in order."""
    out: list[tuple[model.Volume, str, bool]] = []
    for v in pod.spec.volumes:
        if v.persistent_volume_claim is not None:
            out.append((v, v.persistent_volume_claim.claim_name, False))
        elif v.ephemeral is not None:
            out.append((v, ephemeral_claim_name(pod, v), True))
    return out


def label_zones(value: str) -> set[str] | None:
    """LabelZonesToSet: a zone label's value split on ``__`` (None when one part is empty)."""
    out: set[str] = set()
    for part in value.split("__"):
        z = part.strip()
        if not z:
            return None
        out.add(z)
    return out


# ---------------------------------------------------------------- validation (the API server's rules)

_ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
_VOLUME_MODES = ("Filesystem", "Block")
_BINDING_MODES = ("Immediate", "WaitForFirstConsumer")


def _check_quantities(rl: Mapping[str, model.Quantity], path: str) -> None:
    for name, q in rl.items():
        try:
            resources.canonical(name, q)
        except resources.QuantityError as e:
            raise e.at(f"{path}[{name}]") from None


def _check_access_modes(modes: Sequence[str], path: str, *, required: bool) -> None:
    if required and not modes:
        raise validation.required(path, "at least 1 access mode is required")
    for i, m in enumerate(modes):
        if m not in _ACCESS_MODES:
            raise validation.not_supported(f"{path}[{i}]", m, _ACCESS_MODES)
    if "ReadWriteOncePod" in modes and len(modes) > 1:
        raise validation.forbidden(path, "may not use ReadWriteOncePod with other access modes")


def _check_node_selector(sel: model.NodeSelector | None, path: str) -> None:
    if sel is None:
        return
    if not sel.node_selector_terms:
        raise validation.required(f"{path}.nodeSelectorTerms", "must have at least one node selector term")
    for i, t in enumerate(sel.node_selector_terms):
        for j, r in enumerate(t.match_expressions):
            validation.validate_node_selector_requirement(r, f"{path}.nodeSelectorTerms[{i}].matchExpressions[{j}]")


def validate_pv(pv: PersistentVolume) -> None:
    """ValidatePersistentVolume, for what scheduling reads."""
    validation.validate_object_meta(pv.metadata, namespaced=False)
    spec = pv.spec
    _check_access_modes(spec.access_modes, "spec.accessModes", required=True)
    if "storage" not in spec.capacity:
        raise validation.required("spec.capacity[storage]", "")
    _check_quantities(spec.capacity, "spec.capacity")
    if spec.volume_mode is not None and spec.volume_mode not in _VOLUME_MODES:
        raise validation.not_supported("spec.volumeMode", spec.volume_mode, _VOLUME_MODES)
    if spec.node_affinity is not None:
        _check_node_selector(spec.node_affinity.required, "spec.nodeAffinity.required")
    if spec.local is not None and (spec.node_affinity is None or spec.node_affinity.required is None):
        raise validation.required("spec.nodeAffinity", "Local volume requires node affinity")
    if spec.csi is not None:
        if not spec.csi.driver:
            raise validation.required("spec.csi.driver", "")
        if not spec.csi.volume_handle:
            raise validation.required("spec.csi.volumeHandle", "")
    if spec.claim_ref is not None and not spec.claim_ref.name:
        raise validation.required("spec.claimRef.name", "")


def validate_pvc(pvc: PersistentVolumeClaim) -> None:
    """ValidatePersistentVolumeClaim, for what scheduling reads."""
    validation.validate_object_meta(pvc.metadata, namespaced=True)
    spec = pvc.spec
    _check_access_modes(spec.access_modes, "spec.accessModes", required=True)
    if "storage" not in spec.resources.requests:
        raise validation.required("spec.resources[storage]", "")
    _check_quantities(spec.resources.requests, "spec.resources.requests")
    _check_quantities(spec.resources.limits, "spec.resources.limits")
    if spec.volume_mode is not None and spec.volume_mode not in _VOLUME_MODES:
        raise validation.not_supported("spec.volumeMode", spec.volume_mode, _VOLUME_MODES)
    validation.validate_label_selector(spec.selector, "spec.selector")


def validate_storage_class(sc: StorageClass) -> None:
    """ValidateStorageClass."""
    validation.validate_object_meta(sc.metadata, namespaced=False)
    if not sc.provisioner:
        raise validation.required("provisioner", "")
    if sc.volume_binding_mode is not None and sc.volume_binding_mode not in _BINDING_MODES:
        raise validation.not_supported("volumeBindingMode", sc.volume_binding_mode, _BINDING_MODES)
    for i, term in enumerate(sc.allowed_topologies):
        for j, r in enumerate(term.match_label_expressions):
            at = f"allowedTopologies[{i}].matchLabelExpressions[{j}]"
            validation.validate_label_name(r.key, f"{at}.key")
            if not r.values:
                raise validation.required(f"{at}.values", "must specify as least one value")


def validate_csi_node(obj: CSINode) -> None:
    """ValidateCSINode: driver names unique, allocatable counts not negative."""
    validation.validate_object_meta(obj.metadata, namespaced=False)
    seen: set[str] = set()
    for i, d in enumerate(obj.spec.drivers):
        at = f"spec.drivers[{i}]"
        if not d.name:
            raise validation.required(f"{at}.name", "")
        if d.name in seen:
            raise validation.duplicate(f"{at}.name", d.name)
        seen.add(d.name)
        if d.allocatable is not None and d.allocatable.count is not None and d.allocatable.count < 0:
            raise validation.invalid(
                f"{at}.allocatable.count", d.allocatable.count, "must be greater than or equal to 0"
            )


def validate_csi_driver(obj: CSIDriver) -> None:
    validation.validate_object_meta(obj.metadata, namespaced=False)


def validate_csi_storage_capacity(obj: CSIStorageCapacity) -> None:
    validation.validate_object_meta(obj.metadata, namespaced=True)
    if not obj.storage_class_name:
        raise validation.required("storageClassName", "")
    validation.validate_label_selector(obj.node_topology, "nodeTopology")
    for field, q in (("capacity", obj.capacity), ("maximumVolumeSize", obj.maximum_volume_size)):
        if q is not None:
            try:
                resources.canonical("storage", q)
            except resources.QuantityError as e:
                raise e.at(field) from None
