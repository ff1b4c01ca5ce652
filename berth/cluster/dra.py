"""Dynamic Resource Allocation objects: ``resource.k8s.io/v1`` as of Kubernetes v1.37.

Field for field the structs of ``k8s.io/api/resource/v1/types.go`` (v0.37.2)
that scheduling reads, in the style of :mod:`berth.cluster.model`: camelCase
on the wire, snake_case in Python, unknown keys ignored, so the API server's
JSON (and a manifest) decodes straight into them with ``msgspec``.

Every field the scheduler's allocator (:mod:`berth.dra`) reads for the
features kube-scheduler 1.37 turns on by default is here: partitionable
devices (``sharedCounters``, ``consumesCounters``, per-device node
selection), consumable capacity (``allowMultipleAllocations``, capacity
``requestPolicy``, request ``capacity``, ``distinctAttribute``, results'
``shareID`` / ``consumedCapacity``), device taints (``taints``, request
``tolerations``, :class:`DeviceTaintRule`), binding conditions
(``bindingConditions``, ``bindingFailureConditions``, ``bindsToNode``, the
claim's ``status.devices``) and DeviceClass ``extendedResourceName``.

Alpha fields of 1.37 that are off by default are decoded where the
allocator must recognise them to refuse or skip what uses them, as upstream
does with their gates off (list-typed attribute values, compatibility
groups); the rest the API server drops while their gates are off is left out
(derived attributes, node-allocatable resources, ``partitionTypeAttribute``,
``skipNodeOperations``).

Resource quantities stay as written ("40Gi", 8); :mod:`berth.cluster.resources`
parses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from berth.cluster import model

__all__ = [
    "ALLOCATION_MODE_ALL",
    "ALLOCATION_MODE_EXACT_COUNT",
    "ALLOCATION_RESULTS_MAX_SIZE",
    "CONFIG_SOURCE_CLAIM",
    "CONFIG_SOURCE_CLASS",
    "DELETE_PROTECTION_FINALIZER",
    "DEVICE_TAINT_EFFECT_NONE",
    "DEVICE_TAINT_EFFECT_NO_EXECUTE",
    "DEVICE_TAINT_EFFECT_NO_SCHEDULE",
    "FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE",
    "RESOURCE_CLAIM_RESERVED_FOR_MAX_SIZE",
    "AllocatedDeviceStatus",
    "AllocationResult",
    "CELDeviceSelector",
    "CapacityRequestPolicy",
    "CapacityRequestPolicyRange",
    "CapacityRequirements",
    "Counter",
    "CounterSet",
    "Device",
    "DeviceAllocationConfiguration",
    "DeviceAllocationResult",
    "DeviceAttribute",
    "DeviceCapacity",
    "DeviceClaim",
    "DeviceClaimConfiguration",
    "DeviceClass",
    "DeviceClassConfiguration",
    "DeviceClassSpec",
    "DeviceConfiguration",
    "DeviceConstraint",
    "DeviceCounterConsumption",
    "DeviceRequest",
    "DeviceRequestAllocationResult",
    "DeviceSelector",
    "DeviceSubRequest",
    "DeviceTaint",
    "DeviceTaintRule",
    "DeviceTaintRuleSpec",
    "DeviceTaintSelector",
    "DeviceToleration",
    "ExactDeviceRequest",
    "OpaqueDeviceConfiguration",
    "ResourceClaim",
    "ResourceClaimConsumerReference",
    "ResourceClaimSpec",
    "ResourceClaimStatus",
    "ResourceClaimTemplate",
    "ResourceClaimTemplateSpec",
    "ResourcePool",
    "ResourceSlice",
    "ResourceSliceSpec",
]

API_VERSION = "resource.k8s.io/v1"

#: ``DeviceAllocationMode`` values (an empty mode means ExactCount).
ALLOCATION_MODE_EXACT_COUNT = "ExactCount"
ALLOCATION_MODE_ALL = "All"

#: ``AllocationConfigSource`` values.
CONFIG_SOURCE_CLASS = "FromClass"
CONFIG_SOURCE_CLAIM = "FromClaim"

#: ``resourceapi.AllocationResultsMaxSize``: at most this many devices per claim.
ALLOCATION_RESULTS_MAX_SIZE = 32
#: ``resourceapi.FirstAvailableDeviceRequestMaxSize``: at most this many subrequests.
FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE = 8
#: ``resourceapi.ResourceClaimReservedForMaxSize``: at most this many consumers.
RESOURCE_CLAIM_RESERVED_FOR_MAX_SIZE = 256
#: ``resourceapi.Finalizer``: set by the scheduler before it writes an allocation.
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"

#: ``DeviceTaintEffect`` values. Only NoSchedule and NoExecute keep a device
#: from being allocated; None (1.37) and effects newer than this code do not.
DEVICE_TAINT_EFFECT_NONE = "None"
DEVICE_TAINT_EFFECT_NO_SCHEDULE = "NoSchedule"
DEVICE_TAINT_EFFECT_NO_EXECUTE = "NoExecute"


class _K8s(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    """Base: camelCase keys, unknown keys ignored, defaults omitted on encode."""


# Two lists of resource.k8s.io/v1 have no ``omitempty`` (k8s.io/api v0.34.4
# resource/v1/types.go: ResourceSliceSpec.Devices, DeviceClaim.Requests), so
# the API server writes ``null`` for an empty one. msgspec has no "null means
# the default" option: the runtime annotation admits None and __post_init__
# turns it into [], while type checkers see the plain list readers rely on.
# (The aliases are defined below, beside the two lists.)


# ---------------------------------------------------------------- slices


class ResourcePool(_K8s):
    name: str
    generation: int = 0
    resource_slice_count: int = 0


class DeviceAttribute(_K8s):
    """Exactly one of the values is set (API validation); ``version`` is semver 2.0.
    The list values are DRAListTypeAttributes' (alpha, off): CEL sees them,
    constraints treat them as an unknown type, as upstream with the gate off."""

    int_value: int | None = msgspec.field(default=None, name="int")
    bool_value: bool | None = msgspec.field(default=None, name="bool")
    string_value: str | None = msgspec.field(default=None, name="string")
    version_value: str | None = msgspec.field(default=None, name="version")
    int_values: list[int] | None = msgspec.field(default=None, name="ints")
    bool_values: list[bool] | None = msgspec.field(default=None, name="bools")
    string_values: list[str] | None = msgspec.field(default=None, name="strings")
    version_values: list[str] | None = msgspec.field(default=None, name="versions")


class CapacityRequestPolicyRange(_K8s):
    """``min`` is required (API validation); ``step`` only with ``min``."""

    min: model.Quantity | None = None
    max: model.Quantity | None = None
    step: model.Quantity | None = None


class CapacityRequestPolicy(_K8s):
    """How much of a consumable capacity one allocation may take
    (``DRAConsumableCapacity``): at most one of ``validValues`` and ``validRange``."""

    default: model.Quantity | None = None
    valid_values: list[model.Quantity] = []
    valid_range: CapacityRequestPolicyRange | None = None


class DeviceCapacity(_K8s):
    value: model.Quantity
    request_policy: CapacityRequestPolicy | None = None


class Counter(_K8s):
    value: model.Quantity


class CounterSet(_K8s):
    name: str
    counters: dict[str, Counter] = {}


class DeviceCounterConsumption(_K8s):
    counter_set: str
    counters: dict[str, Counter] = {}
    #: DRADeviceCompatibilityGroups (alpha, off): a slice that uses them is ignored.
    compatibility_groups: list[str] = []


class DeviceTaint(_K8s):
    key: str
    effect: str
    value: str = ""
    time_added: str | None = None


class DeviceTaintSelector(_K8s):
    """Which devices a DeviceTaintRule taints: all fields ANDed, unset ones match all."""

    driver: str | None = None
    pool: str | None = None
    device: str | None = None


class DeviceTaintRuleSpec(_K8s):
    device_selector: DeviceTaintSelector | None = None
    taint: DeviceTaint = msgspec.field(default_factory=lambda: DeviceTaint(key="", effect=""))


class DeviceTaintRule(_K8s):
    """Adds ``spec.taint`` to every device its selector matches (resource.k8s.io/v1 since 1.37)."""

    api_version: str = API_VERSION
    kind: str = "DeviceTaintRule"
    metadata: model.ObjectMeta = msgspec.field(default_factory=model.ObjectMeta)
    spec: DeviceTaintRuleSpec = msgspec.field(default_factory=DeviceTaintRuleSpec)

    @property
    def name(self) -> str:
        return self.metadata.name


class Device(_K8s):
    """A device; the taints are the slice's plus those DeviceTaintRules add
    (the DraStore patches them in, as kube-scheduler's slice tracker does)."""

    name: str
    #: Keys are QualifiedNames: ``id`` (the driver's domain) or ``domain/id``.
    attributes: dict[str, DeviceAttribute] = {}
    capacity: dict[str, DeviceCapacity] = {}
    consumes_counters: list[DeviceCounterConsumption] = []
    # Per-device node selection (only with spec.perDeviceNodeSelection).
    node_name: str | None = None
    node_selector: model.NodeSelector | None = None
    all_nodes: bool | None = None
    taints: list[DeviceTaint] = []
    binds_to_node: bool | None = None
    binding_conditions: list[str] = []
    binding_failure_conditions: list[str] = []
    #: ``DRAConsumableCapacity``: the device may be allocated more than once
    #: (each allocation a share with its own ``shareID``).
    allow_multiple_allocations: bool | None = None


if TYPE_CHECKING:
    _Devices = list[Device]
else:
    _Devices = list[Device] | None


class ResourceSliceSpec(_K8s):
    driver: str
    pool: ResourcePool
    # Exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection.
    node_name: str | None = None
    node_selector: model.NodeSelector | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    devices: _Devices = []
    shared_counters: list[CounterSet] = []

    def __post_init__(self) -> None:
        if self.devices is None:
            self.devices = []


class ResourceSlice(_K8s, kw_only=True):
    api_version: str = API_VERSION
    kind: str = "ResourceSlice"
    metadata: model.ObjectMeta = msgspec.field(default_factory=model.ObjectMeta)
    spec: ResourceSliceSpec

    @property
    def name(self) -> str:
        return self.metadata.name


# ---------------------------------------------------------------- classes


class CELDeviceSelector(_K8s):
    expression: str


class DeviceSelector(_K8s):
    #: None only for a selector kind newer than this code (the allocator refuses it).
    cel: CELDeviceSelector | None = None


class OpaqueDeviceConfiguration(_K8s):
    driver: str
    #: Any JSON object, passed to the driver as it is.
    parameters: Any = None


class DeviceConfiguration(_K8s):
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClassConfiguration(_K8s):
    # ``DeviceConfiguration`` is inlined on the wire.
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClassSpec(_K8s):
    selectors: list[DeviceSelector] = []
    config: list[DeviceClassConfiguration] = []
    extended_resource_name: str | None = None


class DeviceClass(_K8s):
    api_version: str = API_VERSION
    kind: str = "DeviceClass"
    metadata: model.ObjectMeta = msgspec.field(default_factory=model.ObjectMeta)
    spec: DeviceClassSpec = msgspec.field(default_factory=DeviceClassSpec)

    @property
    def name(self) -> str:
        return self.metadata.name


# ---------------------------------------------------------------- claims


class DeviceToleration(_K8s):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


class CapacityRequirements(_K8s):
    """How much of each consumable capacity of a device one allocation takes."""

    requests: dict[str, model.Quantity] = {}


class ExactDeviceRequest(_K8s):
    device_class_name: str
    selectors: list[DeviceSelector] = []
    #: "ExactCount" (the API server's default) or "All".
    allocation_mode: str = ALLOCATION_MODE_EXACT_COUNT
    #: Defaulted to 1 by the API server for ExactCount.
    count: int = 1
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] = []
    capacity: CapacityRequirements | None = None


class DeviceSubRequest(_K8s):
    name: str
    device_class_name: str
    selectors: list[DeviceSelector] = []
    allocation_mode: str = ALLOCATION_MODE_EXACT_COUNT
    count: int = 1
    tolerations: list[DeviceToleration] = []
    capacity: CapacityRequirements | None = None


class DeviceRequest(_K8s):
    name: str
    #: Exactly one of ``exactly`` and ``firstAvailable``.
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] = []


class DeviceConstraint(_K8s):
    #: Request names (``req`` or ``req/subreq``) the constraint applies to; empty: all.
    requests: list[str] = []
    #: A FullyQualifiedName ``domain/id`` all the devices must share a value of.
    match_attribute: str | None = None
    #: A FullyQualifiedName all the devices must have distinct values of.
    distinct_attribute: str | None = None


class DeviceClaimConfiguration(_K8s):
    requests: list[str] = []
    opaque: OpaqueDeviceConfiguration | None = None


if TYPE_CHECKING:
    _Requests = list[DeviceRequest]
else:
    _Requests = list[DeviceRequest] | None


class DeviceClaim(_K8s):
    requests: _Requests = []
    constraints: list[DeviceConstraint] = []
    config: list[DeviceClaimConfiguration] = []

    def __post_init__(self) -> None:
        if self.requests is None:
            self.requests = []


class ResourceClaimSpec(_K8s):
    devices: DeviceClaim = msgspec.field(default_factory=DeviceClaim)


class DeviceRequestAllocationResult(_K8s):
    #: The request's name, or ``request/subrequest`` for a firstAvailable choice.
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    #: The request's tolerations, copied when the device was allocated.
    tolerations: list[DeviceToleration] = []
    binding_conditions: list[str] = []
    binding_failure_conditions: list[str] = []
    #: One share of a device that allows multiple allocations.
    share_id: str | None = msgspec.field(default=None, name="shareID")
    consumed_capacity: dict[str, model.Quantity] = {}


class DeviceAllocationConfiguration(_K8s):
    #: "FromClass" or "FromClaim".
    source: str
    requests: list[str] = []
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceAllocationResult(_K8s):
    results: list[DeviceRequestAllocationResult] = []
    config: list[DeviceAllocationConfiguration] = []


class AllocationResult(_K8s):
    devices: DeviceAllocationResult = msgspec.field(default_factory=DeviceAllocationResult)
    #: Where the allocated devices are reachable; None: from every node.
    node_selector: model.NodeSelector | None = None
    allocation_timestamp: str | None = None


class ResourceClaimConsumerReference(_K8s):
    api_group: str = ""
    resource: str = "pods"
    name: str = ""
    uid: str = ""


class AllocatedDeviceStatus(_K8s):
    """What a driver reports about one allocated device; the scheduler reads
    ``conditions`` (binding conditions) only."""

    driver: str
    pool: str
    device: str
    share_id: str | None = msgspec.field(default=None, name="shareID")
    #: metav1.Condition objects (``type``, ``status``, ...), as written.
    conditions: list[dict[str, Any]] = []
    data: Any = None
    network_data: dict[str, Any] | None = None


class ResourceClaimStatus(_K8s):
    allocation: AllocationResult | None = None
    #: At most :data:`RESOURCE_CLAIM_RESERVED_FOR_MAX_SIZE` consumers.
    reserved_for: list[ResourceClaimConsumerReference] = []
    devices: list[AllocatedDeviceStatus] = []


class ResourceClaim(_K8s):
    api_version: str = API_VERSION
    kind: str = "ResourceClaim"
    metadata: model.ObjectMeta = msgspec.field(default_factory=model.ObjectMeta)
    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus = msgspec.field(default_factory=ResourceClaimStatus)

    @property
    def key(self) -> str:
        return model.pod_key(self.metadata.namespace, self.metadata.name)


class ResourceClaimTemplateSpec(_K8s):
    metadata: model.ObjectMeta = msgspec.field(default_factory=model.ObjectMeta)
    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(_K8s):
    api_version: str = API_VERSION
    kind: str = "ResourceClaimTemplate"
    metadata: model.ObjectMeta = msgspec.field(default_factory=model.ObjectMeta)
    spec: ResourceClaimTemplateSpec = msgspec.field(default_factory=ResourceClaimTemplateSpec)

    @property
    def key(self) -> str:
        return model.pod_key(self.metadata.namespace, self.metadata.name)
