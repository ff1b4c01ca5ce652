"""Berth's own typed model of the Kubernetes objects scheduling looks at.

The structs mirror core/v1 field for field (camelCase on the wire, snake_case
in Python) but keep only what a scheduler reads, so a full Pod or Node as the
API server renders it decodes straight into them with ``msgspec`` and every
field scheduling does not need is skipped in C without being materialised.

Resource quantities stay as Kubernetes writes them ("500m", "1Gi", 2);
:mod:`berth.cluster.resources` turns them into canonical integers once per object.
The protobuf contract (``berth.v1``) carries the canonical integers instead;
:mod:`berth.adapters.grpc.convert` translates between the two at the core's boundary.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn, TypeVar

import msgspec

__all__ = [
    "LABEL_METADATA_NAME",
    "LABEL_POD_GROUP",
    "POD_GROUP_API_VERSIONS",
    "WORKLOAD_KINDS",
    "AWSElasticBlockStoreVolumeSource",
    "Affinity",
    "CSIVolumeSource",
    "Container",
    "ContainerExtendedResourceRequest",
    "ContainerImage",
    "ContainerPort",
    "ContainerResourceClaim",
    "ContainerRestartRule",
    "ContainerStatus",
    "EphemeralContainer",
    "EphemeralVolumeSource",
    "FrozenDict",
    "GCEPersistentDiskVolumeSource",
    "ISCSIVolumeSource",
    "ImageVolumeSource",
    "LabelSelector",
    "LabelSelectorRequirement",
    "Namespace",
    "NetworkTopologySpec",
    "Node",
    "NodeAffinity",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "NodeSpec",
    "NodeStatus",
    "ObjectMeta",
    "OwnerReference",
    "PersistentVolumeClaimVolumeSource",
    "Pod",
    "PodAffinity",
    "PodAffinityTerm",
    "PodCondition",
    "PodDisruptionBudget",
    "PodExtendedResourceClaimStatus",
    "PodGroup",
    "PodGroupStatus",
    "PodGroupSubGroup",
    "PodResourceClaim",
    "PodResourceClaimStatus",
    "PodSchedulingGroup",
    "PodSpec",
    "PodStatus",
    "PodWorkloadReference",
    "PreferredSchedulingTerm",
    "Quantity",
    "RBDVolumeSource",
    "ReplicaSet",
    "ReplicationController",
    "ReplicationControllerSpec",
    "ResourceList",
    "SchedulingGate",
    "SelectorSpec",
    "Service",
    "ServiceSpec",
    "StatefulSet",
    "Taint",
    "Toleration",
    "TopologySpreadConstraint",
    "Volume",
    "VolumeMount",
    "WeightedPodAffinityTerm",
    "Workload",
    "pod_key",
    "share_containers",
    "shared_map",
]

#: The label that makes a pod a member of a gang (scheduler-plugins' coscheduling).
LABEL_POD_GROUP = "scheduling.x-k8s.io/pod-group"

#: A Kubernetes quantity as written in a manifest: "100m", "1Gi", 2, 0.5.
Quantity = str | int | float
ResourceList = dict[str, Quantity]


# Memory (docs/architecture.md, "Memory bounds"): a model object never takes part in a
# reference cycle, so its structs carry no cyclic-GC header (``gc=False``: 16
# bytes less each, and nothing for the collector to walk), and the strings
# that repeat from object to object (namespaces, node names, label and
# annotation keys and short values, images, owner references, quantities)
# are interned once decoded or built, so 50 000 pods of a few Deployments
# share one copy of each instead of holding 50 000.

#: Values longer than this are not interned (a last-applied-configuration
#: annotation is unique: interning it would only add a table entry).
_INTERN_MAX_CHARS = 128
_intern = sys.intern


_T = TypeVar("_T")


def _i(value: _T) -> _T:
    """``value`` interned when it is a short string (anything else as it is:
    a hand-built object may hold a wrong type, which validation reports)."""
    if isinstance(value, str) and type(value) is str and len(value) <= _INTERN_MAX_CHARS:
        return _intern(value)  # type: ignore[return-value]
    return value


def _interned(d: dict[str, Any]) -> dict[str, Any]:
    """A map with its keys and short string values interned (a new dict;
    the caller's is left alone). A shared map is already interned and, being
    read-only, needs no copy: it is returned as it is."""
    if type(d) is FrozenDict:
        return d
    return {_i(k): _i(v) for k, v in d.items()}


_K = TypeVar("_K")
_V = TypeVar("_V")


class FrozenDict(dict[_K, _V]):
    """A dict that refuses every change: one map shared by the many pods that
    carry the same labels, annotations, node selector or requests (50 000
    pods of 500 ReplicaSets hold 500 label maps, not 50 000).

    It equals, iterates, indexes and encodes (msgspec, JSON) exactly as the
    dict it was made from; a change (``m[k] = v``, ``update``, ``|=``, ...)
    raises TypeError instead of silently changing every pod that shares it
    (build a new dict: ``{**m, k: v}``). A copy (``dict(m)``, ``m.copy()``,
    ``copy.copy``, ``copy.deepcopy``, pickle) is an ordinary, mutable dict.
    """

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("this map is shared between objects and read-only: build a new dict ({**m, key: value})")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


#: The shared maps, by content. Bounded: a map no other pod repeats (a
#: StatefulSet pod's name label, say) costs its key here until the table is
#: emptied, which happens when it is full (maps already handed out stay shared).
_SHARED_MAPS_MAX = 8192
_shared_maps: dict[tuple[Any, ...], FrozenDict[Any, Any]] = {}


def shared_map(d: dict[str, _V]) -> dict[str, _V]:
    """The read-only :class:`FrozenDict` every equal map shares (same keys
    and values of the same types, in the same order, so it encodes the same),
    its keys and short string values interned. An empty map comes back as it
    is (an empty map costs less than its key here), so does one that cannot be
    a key (an unhashable value, which validation reports)."""
    if not d or type(d) is FrozenDict:
        return d
    items = tuple(d.items())
    key: tuple[Any, ...] = items
    if not all(type(k) is str and type(v) is str for k, v in items):
        # 1 == 1.0 == True: the types are part of what must be equal.
        key = (items, tuple(type(k) for k, _ in items), tuple(type(v) for _, v in items))
    try:
        got = _shared_maps.get(key)
    except TypeError:  # an unhashable value
        return d
    if got is None:
        if len(_shared_maps) >= _SHARED_MAPS_MAX:
            _shared_maps.clear()
        got = _shared_maps[key] = FrozenDict({_i(k): _i(v) for k, v in items})
    return got


class _K8s(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True, gc=False):
    """Base: camelCase keys, unknown keys ignored, defaults omitted on encode."""


class _K8sValue(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True, frozen=True, gc=False):
    """Base for small immutable values that are hashed and compared (taints, tolerations)."""


class OwnerReference(_K8s):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool = False

    def __post_init__(self) -> None:
        self.api_version, self.kind, self.name, self.uid = (
            _i(self.api_version),
            _i(self.kind),
            _i(self.name),
            _i(self.uid),
        )


class ObjectMeta(_K8s):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    resource_version: str = ""
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    owner_references: list[OwnerReference] = []
    #: Read and written for ResourceClaims (``resource.kubernetes.io/delete-protection``).
    finalizers: list[str] = []
    #: Set on the ResourceClaim DynamicResources creates for extended resources backed by DRA.
    generate_name: str = ""

    def __post_init__(self) -> None:
        self.namespace = _i(self.namespace)
        if self.labels:
            self.labels = _interned(self.labels)
        if self.annotations:
            self.annotations = _interned(self.annotations)


# ---------------------------------------------------------------- selectors


class LabelSelectorRequirement(_K8s):
    key: str
    operator: str
    values: list[str] = []


class LabelSelector(_K8s):
    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = []


class NodeSelectorRequirement(_K8s):
    key: str
    operator: str
    values: list[str] = []


class NodeSelectorTerm(_K8s):
    match_expressions: list[NodeSelectorRequirement] = []
    match_fields: list[NodeSelectorRequirement] = []


class NodeSelector(_K8s):
    node_selector_terms: list[NodeSelectorTerm] = []


class PreferredSchedulingTerm(_K8s):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(_K8s):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = []


class PodAffinityTerm(_K8s):
    topology_key: str
    label_selector: LabelSelector | None = None
    namespaces: list[str] = []
    namespace_selector: LabelSelector | None = None
    match_label_keys: list[str] = []
    mismatch_label_keys: list[str] = []


class WeightedPodAffinityTerm(_K8s):
    weight: int
    pod_affinity_term: PodAffinityTerm


class PodAffinity(_K8s):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = []
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = []


class Affinity(_K8s):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class Toleration(_K8sValue, frozen=True):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


class TopologySpreadConstraint(_K8s):
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] = []


# ---------------------------------------------------------------- pods


class ContainerPort(_K8s):
    container_port: int = 0
    host_port: int = 0
    protocol: str = ""
    host_ip: str = msgspec.field(default="", name="hostIP")

    def __post_init__(self) -> None:
        self.protocol = _i(self.protocol)


class ContainerResourceClaim(_K8s):
    """core/v1 ``ResourceClaim`` in ``resources.claims``: one of the pod's claims
    (by its name in ``spec.resourceClaims``) the container uses."""

    name: str
    request: str = ""


class ResourceRequirements(_K8s):
    requests: ResourceList = {}
    limits: ResourceList = {}
    claims: list[ContainerResourceClaim] = []

    def __post_init__(self) -> None:
        if self.requests:
            self.requests = _interned(self.requests)
        if self.limits:
            self.limits = _interned(self.limits)


class ContainerRestartRule(_K8s):
    """One of a container's ``restartPolicyRules``; NodeDeclaredFeatures reads its action."""

    action: str = ""


class VolumeMount(_K8s):
    """A container's volume mount, kept for ``bindMountOptions`` alone
    (NodeDeclaredFeatures' VolumeBindMountOptions): the mount's name differs
    from pod to pod (``kube-api-access-*``) and would keep containers from
    being shared."""

    bind_mount_options: list[str] = []


class Container(_K8s):
    name: str = ""
    image: str = ""
    resources: ResourceRequirements | None = None
    ports: list[ContainerPort] = []
    restart_policy: str | None = None
    restart_policy_rules: list[ContainerRestartRule] = []
    volume_mounts: list[VolumeMount] = []

    def __post_init__(self) -> None:
        self.name, self.image = _i(self.name), _i(self.image)


class SchedulingGate(_K8s):
    name: str


class PodResourceClaim(_K8s):
    """A pod's reference to a DRA ResourceClaim: by name, or a template from
    which kube-controller-manager creates one (``status.resourceClaimStatuses``)."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodResourceClaimStatus(_K8s):
    """The claim generated for a templated ``spec.resourceClaims`` entry (None: none needed)."""

    name: str
    resource_claim_name: str | None = None


# ---------------------------------------------------------------- volumes
# The pod's volumes the volume plugins read: claims (persistentVolumeClaim,
# ephemeral) and the in-tree disks VolumeRestrictions and NodeVolumeLimits
# look at; other sources decode as a Volume with none of these set.


class PersistentVolumeClaimVolumeSource(_K8s):
    claim_name: str = ""
    read_only: bool = False


class EphemeralVolumeSource(_K8s):
    """A generic ephemeral volume: the ephemeral volume controller creates the
    claim ``<pod name>-<volume name>``, owned by the pod; only that matters here."""

    volume_claim_template: dict[str, Any] | None = None


class GCEPersistentDiskVolumeSource(_K8s):
    pd_name: str = ""
    fs_type: str = ""
    partition: int = 0
    read_only: bool = False


class AWSElasticBlockStoreVolumeSource(_K8s):
    volume_id: str = msgspec.field(default="", name="volumeID")
    fs_type: str = ""
    partition: int = 0
    read_only: bool = False


class RBDVolumeSource(_K8s):
    monitors: list[str] = []
    image: str = ""
    #: The API server defaults it to "rbd" (SetDefaults_RBDVolumeSource).
    pool: str = "rbd"
    read_only: bool = False


class ISCSIVolumeSource(_K8s):
    target_portal: str = ""
    iqn: str = ""
    lun: int = 0
    read_only: bool = False


class CSIVolumeSource(_K8s):
    """An inline (ephemeral) CSI volume."""

    driver: str = ""
    read_only: bool = False


class ImageVolumeSource(_K8s):
    """``volumes[].image``: the OCI reference ImageLocality scores like a container's image."""

    reference: str = ""
    pull_policy: str = ""


class Volume(_K8s):
    name: str = ""
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    ephemeral: EphemeralVolumeSource | None = None
    gce_persistent_disk: GCEPersistentDiskVolumeSource | None = None
    aws_elastic_block_store: AWSElasticBlockStoreVolumeSource | None = None
    rbd: RBDVolumeSource | None = None
    iscsi: ISCSIVolumeSource | None = None
    csi: CSIVolumeSource | None = None
    #: An OCI image or artifact mounted as a volume (ImageLocality counts its image).
    image: ImageVolumeSource | None = None


class EphemeralContainer(_K8s):
    """An ephemeral (debug) container: never counted in requests; NodeDeclaredFeatures reads its mounts."""

    name: str = ""
    volume_mounts: list[VolumeMount] = []


class PodSchedulingGroup(_K8s):
    """``pod.spec.schedulingGroup`` (k8s.io/api v0.36.3 and v0.37.2
    ``core/v1`` PodSchedulingGroup): the standalone Workload API PodGroup
    ``scheduling.k8s.io`` this pod belongs to, in its namespace."""

    pod_group_name: str | None = None


class PodWorkloadReference(_K8s):
    """``pod.spec.workloadRef`` (k8s.io/api v0.35.4 ``core/v1``
    WorkloadReference; replaced by ``schedulingGroup`` in 1.36): the
    Workload, the PodGroup within it, and the replica of that PodGroup."""

    name: str = ""
    pod_group: str = ""
    pod_group_replica_key: str = ""


class PodSpec(_K8s):
    node_name: str = ""
    scheduler_name: str = ""
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str | None = None
    node_selector: dict[str, str] = {}
    affinity: Affinity | None = None
    tolerations: list[Toleration] = []
    topology_spread_constraints: list[TopologySpreadConstraint] = []
    containers: list[Container] = []
    init_containers: list[Container] = []
    overhead: ResourceList = {}
    scheduling_gates: list[SchedulingGate] = []
    host_network: bool = False
    #: False: the pod runs in a user namespace (None: the API server's default, true).
    host_users: bool | None = None
    resources: ResourceRequirements | None = None
    resource_claims: list[PodResourceClaim] = []
    volumes: list[Volume] = []
    #: Only their volume mounts are kept (NodeDeclaredFeatures).
    ephemeral_containers: list[EphemeralContainer] = []
    #: The Workload API group (GenericWorkload): 1.36+ ``schedulingGroup``,
    #: 1.35 ``workloadRef`` (berth.cluster.workload_api.group_of reads the release's).
    scheduling_group: PodSchedulingGroup | None = None
    workload_ref: PodWorkloadReference | None = None
    #: How long the pod may run (the kubelet kills it then): a declared
    #: runtime, for reservations' backfill (berth.gangs.reservations).
    active_deadline_seconds: int | None = None

    def __post_init__(self) -> None:
        self.node_name, self.scheduler_name = _i(self.node_name), _i(self.scheduler_name)
        self.priority_class_name = _i(self.priority_class_name)
        if self.node_selector:
            self.node_selector = _interned(self.node_selector)


class PodCondition(_K8s):
    """A pod condition; the scheduler reads ``PodResizePending`` (reason
    ``Infeasible`` or ``Deferred``) to count a resizing pod's requests."""

    type: str = ""
    status: str = ""
    reason: str = ""


class ContainerStatus(_K8s):
    """What the kubelet reports of a container's resources during and after an
    in-place resize: ``allocatedResources`` (what it admitted; None: not
    reported) and ``resources`` (what is actuated)."""

    name: str = ""
    allocated_resources: ResourceList | None = None
    resources: ResourceRequirements | None = None


class ContainerExtendedResourceRequest(_K8s):
    """Which device request of the extended-resource claim serves a container's resource."""

    container_name: str
    resource_name: str
    request_name: str


class PodExtendedResourceClaimStatus(_K8s):
    """``status.extendedResourceClaimStatus`` (DRAExtendedResource): written at PreBind."""

    request_mappings: list[ContainerExtendedResourceRequest] = []
    resource_claim_name: str = ""


class PodStatus(_K8s):
    phase: str = ""
    nominated_node_name: str = ""
    resource_claim_statuses: list[PodResourceClaimStatus] = []
    conditions: list[PodCondition] = []
    container_statuses: list[ContainerStatus] = []
    init_container_statuses: list[ContainerStatus] = []
    #: Pod-level ``allocatedResources`` and actuated ``resources`` (InPlacePodLevelResourcesVerticalScaling).
    allocated_resources: ResourceList | None = None
    resources: ResourceRequirements | None = None
    extended_resource_claim_status: PodExtendedResourceClaimStatus | None = None

    def __post_init__(self) -> None:
        self.phase, self.nominated_node_name = _i(self.phase), _i(self.nominated_node_name)


class Pod(_K8s):
    api_version: str = "v1"
    kind: str = "Pod"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)

    @property
    def key(self) -> str:
        return pod_key(self.metadata.namespace, self.metadata.name)


# A pod is the object Berth holds by the ten thousand, and most of its
# containers are either empty (no tolerations, volumes, init containers...:
# msgspec gives each instance its own empty list, 56 bytes, or dict, 64) or
# equal to many other pods' (the labels, annotations, containers and owner
# reference of one ReplicaSet's pods; the tolerations of nearly every pod).
# A door that hands the core a pod it decoded (the gRPC door:
# ``berth.adapters.grpc.convert``, the Kubernetes door's pod informer, the
# manifests the embedded cluster loads) passes it through
# :func:`share_containers`: its empty lists and dicts become the one shared
# empty list and dict below, its non-empty maps shared read-only maps
# (:func:`shared_map`), and its containers, owner references and
# tolerations an equal list another pod already holds. bench.memory
# footprint: ~6 KB of RSS per bound pod before, ~2.7 KB after.
#
# This relies on what the core already does: a pod it holds is never changed
# in place — a change builds a new container (``[*xs, x]``, ``{**m, k: v}``)
# or object (``msgspec.structs.replace``). The shared maps enforce it
# (TypeError). The shared empties cannot (msgspec omits a defaulted field on
# encode only when it holds an exact empty list or dict: a read-only subclass
# would add ``"tolerations": []`` to every rendered pod), so the next pod
# shared raises if one is no longer empty; nor can the shared structs, whose
# sharing tests/core/test_shared_pod_containers.py checks survives
# scheduling, binding, preemption and deletion unchanged (and
# tests/kubernetes/test_shared_pods.py the same in Kubernetes mode: bind,
# nomination, victims' conditions, updates and deletes). A pod built in
# Python (``berth.testing.make_pod``, a plugin's test) is left alone: its
# author may well change it in place before handing it over.
_EMPTY_LIST: list[Any] = []
_EMPTY_DICT: dict[Any, Any] = {}


def _shared_list(xs: Any) -> Any:
    return _EMPTY_LIST if type(xs) is list and not xs else xs


def _shared_dict(d: Any) -> Any:
    if type(d) is not dict:
        return d  # a FrozenDict already, or a wrong type validation reports
    return shared_map(d) if d else _EMPTY_DICT


#: Lists of structs equal to another pod's (a ReplicaSet's pods have the same
#: containers, owner reference and tolerations): (field, their msgpack encoding) -> the
#: first such list, which the others share. The encoding is the content,
#: types included (1, 1.0 and True differ); bounded as the shared maps are.
_SHARED_LISTS_MAX = 8192
_shared_lists: dict[tuple[str, bytes], list[Any]] = {}
_encode = msgspec.msgpack.Encoder().encode


def _shared_structs(field: str, xs: Any) -> Any:
    if type(xs) is not list or not xs:
        return _shared_list(xs)
    try:
        key = (field, _encode(xs))
    except (TypeError, ValueError, OverflowError):  # a wrong type validation reports
        return xs
    got = _shared_lists.get(key)
    if got is None:
        if len(_shared_lists) >= _SHARED_LISTS_MAX:
            _shared_lists.clear()
        got = _shared_lists[key] = xs
    return got


def _share_requirements(r: Any) -> None:
    if type(r) is ResourceRequirements:
        r.requests, r.limits = _shared_dict(r.requests), _shared_dict(r.limits)
        r.claims = _shared_list(r.claims)


def share_containers(pod: Pod) -> Pod:
    """``pod``, its empty and repeated containers replaced by shared ones
    (see above); for a pod nothing will change in place any more."""
    if _EMPTY_LIST or _EMPTY_DICT:
        raise RuntimeError(
            f"a model container shared by every pod was changed in place (now {_EMPTY_LIST!r}, {_EMPTY_DICT!r}): "
            "build a new list or dict instead"
        )
    md, spec, status = pod.metadata, pod.spec, pod.status
    if type(md) is ObjectMeta:
        md.labels, md.annotations = _shared_dict(md.labels), _shared_dict(md.annotations)
        md.owner_references = _shared_structs("ownerReferences", md.owner_references)
        md.finalizers = _shared_list(md.finalizers)
    if type(spec) is PodSpec:
        spec.node_selector, spec.overhead = _shared_dict(spec.node_selector), _shared_dict(spec.overhead)
        # Every pod an API server admits carries the same two tolerations
        # (DefaultTolerationSeconds: not-ready and unreachable, 300 s).
        spec.tolerations = _shared_structs("tolerations", spec.tolerations)
        spec.topology_spread_constraints = _shared_list(spec.topology_spread_constraints)
        spec.scheduling_gates = _shared_list(spec.scheduling_gates)
        spec.resource_claims, spec.volumes = _shared_list(spec.resource_claims), _shared_list(spec.volumes)
        spec.ephemeral_containers = _shared_list(spec.ephemeral_containers)
        _share_requirements(spec.resources)
        for containers in (spec.containers, spec.init_containers):
            if type(containers) is list:
                for c in containers:
                    if type(c) is Container:
                        c.ports = _shared_list(c.ports)
                        c.restart_policy_rules = _shared_list(c.restart_policy_rules)
                        c.volume_mounts = _shared_list(c.volume_mounts)
                        _share_requirements(c.resources)
        spec.containers = _shared_structs("containers", spec.containers)
        spec.init_containers = _shared_structs("initContainers", spec.init_containers)
    if type(status) is PodStatus:
        status.resource_claim_statuses = _shared_list(status.resource_claim_statuses)
        # The kubelet reports every running container's resources and the
        # same few conditions for every pod: equal across a ReplicaSet's pods.
        status.conditions = _shared_structs("conditions", status.conditions)
        status.allocated_resources = _shared_dict(status.allocated_resources)
        _share_requirements(status.resources)
        status.container_statuses = _shared_structs("containerStatuses", status.container_statuses)
        status.init_container_statuses = _shared_structs("initContainerStatuses", status.init_container_statuses)
    return pod


def pod_key(namespace: str, name: str) -> str:
    """NAMESPACE/NAME, the key kube-scheduler logs and indexes pods by.
    Interned: the stores, the cache, the index and the decision log each key
    a pod by it, and share one copy."""
    return _intern(f"{namespace or 'default'}/{name}")


# ---------------------------------------------------------------- nodes


class Taint(_K8sValue, frozen=True):
    key: str
    effect: str
    value: str = ""


class ContainerImage(_K8s):
    names: list[str] = []
    size_bytes: int = 0

    def __post_init__(self) -> None:
        # Every node lists the images it holds; the same image (and digest)
        # is on many nodes, so one copy of each name, whatever its length.
        if self.names:
            self.names = [_intern(n) if type(n) is str else n for n in self.names]


class NodeSpec(_K8s):
    unschedulable: bool = False
    taints: list[Taint] = []


class NodeStatus(_K8s):
    capacity: ResourceList = {}
    allocatable: ResourceList = {}
    images: list[ContainerImage] = []
    #: Features the kubelet declares (NodeDeclaredFeatures; sorted, as the API server requires).
    declared_features: list[str] = []

    def __post_init__(self) -> None:
        if self.capacity:
            self.capacity = _interned(self.capacity)
        if self.allocatable:
            self.allocatable = _interned(self.allocatable)


class Node(_K8s):
    api_version: str = "v1"
    kind: str = "Node"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)

    @property
    def name(self) -> str:
        return self.metadata.name


# ---------------------------------------------------------------- namespaces


#: The label the API server sets on every namespace to its name
#: (core/v1 ``LabelMetadataName``; ``SetDefaults_Namespace``).
LABEL_METADATA_NAME = "kubernetes.io/metadata.name"


class Namespace(_K8s):
    """A namespace: only its name and labels matter to scheduling (the
    ``namespaceSelector`` of pod (anti-)affinity terms selects by them)."""

    api_version: str = "v1"
    kind: str = "Namespace"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)

    @property
    def name(self) -> str:
        return self.metadata.name


# ---------------------------------------------------------------- groups


class PodGroupSubGroup(_K8s):
    """KAI-Scheduler's ``spec.subGroups[]`` (``scheduling.run.ai/v2alpha2``)."""

    name: str = ""
    min_member: int = 0
    parent: str | None = None


class NetworkTopologySpec(_K8s):
    """Volcano's PodGroup ``spec.networkTopology`` (volcano-sh/apis
    ``pkg/apis/scheduling/v1beta1/types.go``): ``mode`` hard (default) or
    soft; the highest HyperNode tier the gang may cross."""

    mode: str = ""
    highest_tier_allowed: int | None = None
    highest_tier_name: str = ""


class PodGroupSpec(_K8s):
    """The union of the PodGroup kinds Berth reads (berth/gangs): scheduler-plugins'
    fields, Volcano's ``minTaskMember``/``queue``/``priorityClassName``, KAI's
    ``subGroups``; a kind leaves the others' fields empty."""

    min_member: int = 1
    schedule_timeout_seconds: int | None = None
    min_resources: ResourceList = {}
    min_task_member: dict[str, int] = {}
    queue: str = ""
    priority_class_name: str = ""
    sub_groups: list[PodGroupSubGroup] = []
    #: Volcano's ``networkTopology`` (TopologyGang, berth/gangs/topology.py).
    network_topology: NetworkTopologySpec | None = None


class PodGroupStatus(_K8s):
    phase: str = ""


#: The PodGroup kinds Berth reads, by apiVersion (berth/gangs names the dialect of each).
POD_GROUP_API_VERSIONS = ("scheduling.x-k8s.io/v1alpha1", "scheduling.volcano.sh/v1beta1", "scheduling.run.ai/v2alpha2")


class PodGroup(_K8s):
    """A PodGroup: scheduler-plugins' ``scheduling.x-k8s.io/v1alpha1`` (the
    default), Volcano's ``scheduling.volcano.sh/v1beta1`` or KAI-Scheduler's
    ``scheduling.run.ai/v2alpha2``, told apart by ``apiVersion``."""

    api_version: str = "scheduling.x-k8s.io/v1alpha1"
    kind: str = "PodGroup"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodGroupSpec = msgspec.field(default_factory=PodGroupSpec)
    status: PodGroupStatus = msgspec.field(default_factory=PodGroupStatus)

    @property
    def api_group(self) -> str:
        return self.api_version.partition("/")[0]

    @property
    def key(self) -> str:
        return pod_key(self.metadata.namespace, self.metadata.name)


class PodDisruptionBudgetSpec(_K8s):
    selector: LabelSelector | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None


class PodDisruptionBudgetStatus(_K8s):
    disruptions_allowed: int = 0


class PodDisruptionBudget(_K8s):
    api_version: str = "policy/v1"
    kind: str = "PodDisruptionBudget"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodDisruptionBudgetSpec = msgspec.field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = msgspec.field(default_factory=PodDisruptionBudgetStatus)


# ---------------------------------------------------------------- workloads
# Only their selectors: PodTopologySpread's default constraints spread a pod
# among the pods of the Services and the controller that select it
# (kube-scheduler's helper.DefaultSelector, plugins/helper/spread.go).


class ServiceSpec(_K8s):
    #: A map selector; None (or empty: the API server stores no empty map) selects nothing.
    selector: dict[str, str] | None = None


class Service(_K8s):
    api_version: str = "v1"
    kind: str = "Service"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ServiceSpec = msgspec.field(default_factory=ServiceSpec)


class ReplicationControllerSpec(_K8s):
    selector: dict[str, str] | None = None


class ReplicationController(_K8s):
    api_version: str = "v1"
    kind: str = "ReplicationController"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ReplicationControllerSpec = msgspec.field(default_factory=ReplicationControllerSpec)


class SelectorSpec(_K8s):
    """The spec of a ReplicaSet or StatefulSet, down to its LabelSelector."""

    selector: LabelSelector | None = None


class ReplicaSet(_K8s):
    api_version: str = "apps/v1"
    kind: str = "ReplicaSet"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: SelectorSpec = msgspec.field(default_factory=SelectorSpec)


class StatefulSet(_K8s):
    api_version: str = "apps/v1"
    kind: str = "StatefulSet"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: SelectorSpec = msgspec.field(default_factory=SelectorSpec)


#: The objects whose selectors PodTopologySpread's default constraints use.
Workload = Service | ReplicationController | ReplicaSet | StatefulSet
#: Their kinds, as ``kind`` and an owner reference's ``kind`` name them.
WORKLOAD_KINDS: dict[str, type[Workload]] = {
    "Service": Service,
    "ReplicationController": ReplicationController,
    "ReplicaSet": ReplicaSet,
    "StatefulSet": StatefulSet,
}


def to_builtins(obj: msgspec.Struct) -> Any:
    """The Kubernetes JSON form (camelCase dicts) of a model object."""
    return msgspec.to_builtins(obj)
