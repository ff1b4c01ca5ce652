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
from typing import Any

import msgspec

__all__ = [
    "LABEL_METADATA_NAME",
    "LABEL_POD_GROUP",
    "WORKLOAD_KINDS",
    "AWSElasticBlockStoreVolumeSource",
    "Affinity",
    "CSIVolumeSource",
    "Container",
    "ContainerImage",
    "ContainerPort",
    "ContainerResourceClaim",
    "EphemeralVolumeSource",
    "GCEPersistentDiskVolumeSource",
    "ISCSIVolumeSource",
    "LabelSelector",
    "LabelSelectorRequirement",
    "Namespace",
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
    "PodDisruptionBudget",
    "PodGroup",
    "PodResourceClaim",
    "PodResourceClaimStatus",
    "PodSpec",
    "PodStatus",
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
    "WeightedPodAffinityTerm",
    "Workload",
    "pod_key",
]

#: The label that makes a pod a member of a gang (scheduler-plugins' coscheduling).
LABEL_POD_GROUP = "scheduling.x-k8s.io/pod-group"

#: A Kubernetes quantity as written in a manifest: "100m", "1Gi", 2, 0.5.
Quantity = str | int | float
ResourceList = dict[str, Quantity]


# Memory (README "Memory bounds"): a model object never takes part in a
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


def _i(value: str) -> str:
    """``value`` interned when it is a short string (anything else as it is:
    a hand-built object may hold a wrong type, which validation reports)."""
    return _intern(value) if type(value) is str and len(value) <= _INTERN_MAX_CHARS else value


def _interned(d: dict[str, Any]) -> dict[str, Any]:
    """A map with its keys and short string values interned (a new dict;
    the caller's is left alone)."""
    return {_i(k): _i(v) for k, v in d.items()}


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


class Container(_K8s):
    name: str = ""
    image: str = ""
    resources: ResourceRequirements | None = None
    ports: list[ContainerPort] = []
    restart_policy: str | None = None

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


class Volume(_K8s):
    name: str = ""
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    ephemeral: EphemeralVolumeSource | None = None
    gce_persistent_disk: GCEPersistentDiskVolumeSource | None = None
    aws_elastic_block_store: AWSElasticBlockStoreVolumeSource | None = None
    rbd: RBDVolumeSource | None = None
    iscsi: ISCSIVolumeSource | None = None
    csi: CSIVolumeSource | None = None


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
    resources: ResourceRequirements | None = None
    resource_claims: list[PodResourceClaim] = []
    volumes: list[Volume] = []

    def __post_init__(self) -> None:
        self.node_name, self.scheduler_name = _i(self.node_name), _i(self.scheduler_name)
        self.priority_class_name = _i(self.priority_class_name)
        if self.node_selector:
            self.node_selector = _interned(self.node_selector)


class PodStatus(_K8s):
    phase: str = ""
    nominated_node_name: str = ""
    resource_claim_statuses: list[PodResourceClaimStatus] = []

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


class PodGroupSpec(_K8s):
    min_member: int = 1
    schedule_timeout_seconds: int | None = None
    min_resources: ResourceList = {}


class PodGroup(_K8s):
    """scheduler-plugins' ``scheduling.x-k8s.io/v1alpha1`` PodGroup."""

    api_version: str = "scheduling.x-k8s.io/v1alpha1"
    kind: str = "PodGroup"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodGroupSpec = msgspec.field(default_factory=PodGroupSpec)

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
