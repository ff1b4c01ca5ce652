"""What the allocator's parts share: its feature switches, the devices in
use, its errors and reasons, a request as the search sees it, the claims'
constraints and the device-taint check. Ported from
``k8s.io/dynamic-resource-allocation/structured/internal/incubating``
(v0.37.2: ``allocator_incubating.go``, ``constraint.go``) and
``internal/types.go``; :mod:`berth.dra.allocator` has the overview.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NamedTuple, Protocol, cast

from berth.cluster import dra
from berth.dra.pools import Candidate, Counters, DeviceID, DeviceKey, Pool, SliceIndex
from berth.errors import InvalidArgument

__all__ = [
    "ALL",
    "EXACT_COUNT",
    "MAX_RESULTS",
    "REASON_CONSTRAINT",
    "REASON_DEVICES_ALLOCATED",
    "REASON_INVALID_POOLS",
    "REASON_NO_MATCHING_DEVICE",
    "REASON_POOL_INCOMPLETE",
    "REASON_TAINTED",
    "AllocatedState",
    "AllocationError",
    "ClaimPlan",
    "Context",
    "Features",
    "FilterTimeout",
    "Found",
    "Request",
    "Stop",
    "Unsatisfiable",
    "as_state",
    "constraint",
    "count_devices",
    "kobj",
    "lookup_attribute",
    "read_constraints",
    "taint_prevents_allocation",
]

ALL = dra.ALLOCATION_MODE_ALL
EXACT_COUNT = dra.ALLOCATION_MODE_EXACT_COUNT
MAX_RESULTS = dra.ALLOCATION_RESULTS_MAX_SIZE
_BLOCKING_EFFECTS = (dra.DEVICE_TAINT_EFFECT_NO_SCHEDULE, dra.DEVICE_TAINT_EFFECT_NO_EXECUTE)

#: No device of the reachable pools passes the class's and the request's selectors.
REASON_NO_MATCHING_DEVICE = "no device matching the selectors"
#: Enough devices match, but too few of them are free (allocated to other
#: claims, in flight, or taken by this pod's other requests).
REASON_DEVICES_ALLOCATED = "all matching devices are allocated"
#: Free devices match every request, but not with a common attribute value.
REASON_CONSTRAINT = "constraint unmet"
#: A pool the node reaches is being updated: nothing is allocated from it.
REASON_POOL_INCOMPLETE = "resource pool incomplete"
#: The matching devices carry taints the request does not tolerate.
REASON_TAINTED = "device taints not tolerated"
#: Nothing fits and some pool the node reaches is invalid (upstream's
#: ErrFailedAllocationOnNode: its message is the whole reason).
REASON_INVALID_POOLS = "invalid resource pools were encountered"


class AllocationError(InvalidArgument):
    """The claims cannot be allocated anywhere because of what they (or their
    classes, or the slices) say: an unknown class, a selector that does not
    compile or fails at run time, an unsupported field, too many devices.
    Upstream returns these as errors and kube-scheduler's Filter answers
    ``Error`` (retry with backoff), not Unschedulable."""


class FilterTimeout(Exception):
    """The search on one node ran past its deadline (kube-scheduler's
    ``context.DeadlineExceeded``: ``node <name>: timed out trying to allocate devices``)."""


class Stop(AllocationError):
    """errAllocationResultMaxSizeExceeded escaping the whole search (cannot
    happen for claims that passed the limit check; kept as upstream has it)."""


@dataclass(frozen=True, slots=True)
class Features:
    """``structured.Features`` (v0.37.2 ``internal/types.go``): which optional
    parts the allocator runs. All off by default, as upstream's zero value;
    the DynamicResources plugin builds it from the Handle's feature gates
    (``AllocatorFeatures``)."""

    #: DRAAdminAccess: ``adminAccess`` requests may use allocated devices.
    admin_access: bool = False
    #: DRAPrioritizedList: ``firstAvailable`` subrequests.
    prioritized_list: bool = False
    #: DRADeviceTaints: NoSchedule / NoExecute taints must be tolerated.
    device_taints: bool = False
    #: DRAPartitionableDevices: counter sets, ``consumesCounters``, per-device node selection.
    partitionable_devices: bool = False
    #: DRAConsumableCapacity: devices allocated more than once, capacity requests, ``distinctAttribute``.
    consumable_capacity: bool = False
    #: DRAFractionalCapacityRange: capacity ranges in milli units.
    fractional_capacity_range: bool = False
    #: DRADeviceBindingConditions and DRAResourceClaimDeviceStatus: devices with binding conditions.
    device_binding_and_status: bool = False
    #: The Kubernetes minor whose allocator to follow where releases differ
    #: without a gate (k8s.io/dynamic-resource-allocation v0.35.4, v0.36.3, v0.37.2).
    release: int = 37


@dataclass(frozen=True, slots=True)
class AllocatedState:
    """``structured.AllocatedState``: devices allocated whole, devices with at
    least one share (``AllocatedSharedDeviceIDs``, by device) and what the
    shares consume (``AggregatedCapacity``). A plain set of DeviceIDs passed
    where this is expected means ``devices`` only."""

    devices: AbstractSet[DeviceKey] = frozenset()
    shared: AbstractSet[DeviceKey] = frozenset()
    capacity: Mapping[DeviceKey, Mapping[str, Fraction]] = field(default_factory=dict)

    def holds(self, device: DeviceKey) -> bool:
        """IsDeviceAllocated: allocated whole or shared."""
        return device in self.devices or device in self.shared or device in self.capacity


def as_state(allocated: AbstractSet[DeviceKey] | AllocatedState) -> AllocatedState:
    return allocated if isinstance(allocated, AllocatedState) else AllocatedState(devices=allocated)


@dataclass(frozen=True, slots=True)
class Unsatisfiable:
    """Why the claims cannot be allocated on this node.

    ``claim`` is the claim's ``namespace/name``, ``request`` the request (or
    ``request/subrequest``) that could not be met, ``reason`` one of the
    ``REASON_*`` constants, ``message`` the sentence to show a user. With
    :data:`REASON_INVALID_POOLS` the message is upstream's whole reason."""

    claim: str
    request: str
    reason: str
    message: str

    def __str__(self) -> str:
        return self.message


# ---------------------------------------------------------------- requests


@dataclass(slots=True)
class Request:
    """requestData: one request, or one subrequest of a firstAvailable list."""

    name: str
    parent: str  # the parent request of a subrequest, else ""
    device_class: dra.DeviceClass
    selectors: list[dra.DeviceSelector]
    mode: str
    count: int
    admin_access: bool
    tolerations: list[dra.DeviceToleration]
    capacity: dra.CapacityRequirements | None = None
    num_devices: int = 0
    all_devices: list[tuple[Pool, Candidate]] = field(default_factory=list)

    @property
    def full_name(self) -> str:
        return f"{self.parent}/{self.name}" if self.parent else self.name


class Found(NamedTuple):
    """internalDeviceResult: a device taken for a request."""

    request: Request
    candidate: Candidate
    admin: bool
    #: One share of a device allocated more than once, and what it consumes.
    shared: bool
    consumed: dict[str, Fraction] | None


def kobj(claim: dra.ResourceClaim) -> str:
    """klog.KObj: ``namespace/name``, or ``name`` without a namespace."""
    ns, name = claim.metadata.namespace, claim.metadata.name
    return f"{ns}/{name}" if ns else name


def _attribute_value(attr: dra.DeviceAttribute) -> tuple[str, object] | None:
    if attr.string_value is not None:
        return ("string", attr.string_value)
    if attr.int_value is not None:
        return ("int", attr.int_value)
    if attr.bool_value is not None:
        return ("bool", attr.bool_value)
    if attr.version_value is not None:
        # semver 2.0.0 versions are minimal, so equal versions are equal strings.
        return ("version", attr.version_value)
    return None


def lookup_attribute(device: dra.Device, device_id: DeviceID, name: str) -> dra.DeviceAttribute | None:
    """lookupAttribute: by fully qualified name, or by id when the domain is
    the device's driver."""
    attr = device.attributes.get(name)
    if attr is not None:
        return attr
    domain, sep, ident = name.partition("/")
    if not sep or domain != device_id.driver:
        return None
    return device.attributes.get(ident)


class Constraint:
    """A constraint over the devices of the named requests (all requests when
    none are named). For every successful ``add`` there is exactly one
    ``remove`` with the same arguments, in reverse order."""

    __slots__ = ("attribute", "requests")

    def __init__(self, requests: list[str], attribute: str) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute

    def applies(self, request: str, sub: str) -> bool:
        if not self.requests:
            return True
        return request in self.requests or (bool(sub) and f"{request}/{sub}" in self.requests)

    def add(self, request: str, sub: str, device: dra.Device, device_id: DeviceID) -> bool:
        """Track the device if the constraint applies to its request; False
        when it cannot join (no such attribute, or its value does not fit)."""
        if not self.applies(request, sub):
            return True
        attr = lookup_attribute(device, device_id, self.attribute)
        return attr is not None and self._take(_attribute_value(attr))

    def remove(self, request: str, sub: str) -> None:
        if self.applies(request, sub):
            self._drop()

    def _take(self, value: tuple[str, object] | None) -> bool:
        raise NotImplementedError

    def _drop(self) -> None:
        raise NotImplementedError


class _MatchAttribute(Constraint):
    """matchAttributeConstraint: the devices share one value of the attribute."""

    __slots__ = ("num_devices", "value")

    def __init__(self, requests: list[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.value: tuple[str, object] | None = None
        self.num_devices = 0

    def _take(self, value: tuple[str, object] | None) -> bool:
        if self.num_devices == 0:
            self.value = value  # the first device can always get picked
        elif value is None or value != self.value:
            return False
        self.num_devices += 1
        return True

    def _drop(self) -> None:
        self.num_devices -= 1


class _DistinctAttribute(Constraint):
    """distinctAttributeConstraint (constraint.go): no two devices share a
    value of the attribute."""

    __slots__ = ("values",)

    def __init__(self, requests: list[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.values: list[tuple[str, object] | None] = []

    def _take(self, value: tuple[str, object] | None) -> bool:
        if self.values and (value is None or value in self.values):
            return False  # an unknown type, or a duplicate
        self.values.append(value)
        return True

    def _drop(self) -> None:
        self.values.pop()


def _tolerates(toleration: dra.DeviceToleration, taint: dra.DeviceTaint) -> bool:
    """resourceclaim.ToleratesTaint (devicetoleration.go, v0.37.2)."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def taint_prevents_allocation(device: dra.Device, tolerations: Sequence[dra.DeviceToleration]) -> bool:
    """taintPreventsAllocation: a NoSchedule or NoExecute taint no toleration
    tolerates. Other effects (``None``, future ones) are ignored."""
    return any(
        taint.effect in _BLOCKING_EFFECTS and not any(_tolerates(t, taint) for t in tolerations)
        for taint in device.taints
    )


#: A plan step: ("raise", message) | ("req", key, template, group) | ("end", request name).
Op = tuple[str, object, object, int]


@dataclass(slots=True)
class ClaimPlan:
    """What reading one claim (``_read_claim``) finds out without a node.

    ``ops`` replays the reading in upstream's order: ``("req", key, template,
    group)`` for a request (``group`` is the parent request's index for a
    firstAvailable subrequest, else -1), ``("end", name, ...)`` after each
    request (where v0.37.2 checks the claim's device limit) and ``("raise",
    message, ...)`` for a validation error at that point. Only "All" requests
    depend on the node (their devices, and the pools' state): a plan without
    them and without errors (``dynamic`` False) needs no replay at all."""

    ops: list[Op]
    dynamic: bool
    min_devices: int
    constraints: list[tuple[str, list[str], str]]
    constraint_error: str


def count_devices(
    claim: dra.ResourceClaim,
    ops: Sequence[Op],
    release: int,
    read: Callable[[Request, tuple[int, int, int]], Request],
) -> int:
    """The least number of devices the claim needs (each firstAvailable
    request counts its smallest subrequest), checked against the claim limit
    as the release does: per request since v0.37.2, per claim before.
    ``read`` gives a request's devices on this node (the "All" ones)."""
    total = 0
    least: int | None = None
    for kind, key, template, group in ops:
        if kind == "raise":
            raise AllocationError(cast(str, key))
        if kind == "req":
            rd = read(cast(Request, template), cast(tuple[int, int, int], key))
            least = rd.num_devices if group < 0 or least is None else min(least, rd.num_devices)
            continue
        n, least = least or 0, None
        if release >= 37 and n > MAX_RESULTS - total:
            raise AllocationError(
                f"claim {kobj(claim)}, request {key}: adding {n} devices exceeds the claim limit of "
                f"{MAX_RESULTS}, with {total} already accounted for"
            )
        total += n
    if release < 37 and total > MAX_RESULTS:
        raise AllocationError(
            f"claim {kobj(claim)}: number of requested devices {total} exceeds the claim limit of {MAX_RESULTS}"
        )
    return total


def read_constraints(
    claim: dra.ResourceClaim, specs: Sequence[dra.DeviceConstraint]
) -> tuple[list[tuple[str, list[str], str]], str]:
    """The claim's constraints (kind, requests, attribute), or the error of the first unsupported one."""
    out = []
    for i, c in enumerate(specs):
        if c.match_attribute is not None:
            out.append(("match", c.requests, c.match_attribute))
        elif c.distinct_attribute is not None:
            out.append(("distinct", c.requests, c.distinct_attribute))
        else:
            return [], f"claim {kobj(claim)}, constraint #{i}: empty constraint (unsupported constraint type?)"
    return out, ""


def constraint(kind: str, requests: list[str], attribute: str) -> Constraint:
    return _MatchAttribute(requests, attribute) if kind == "match" else _DistinctAttribute(requests, attribute)


class Context(Protocol):
    """What one Allocate run reads (a :class:`berth.dra.allocator.Prepared`):
    the claims read once, the devices in use, and the Allocator's snapshot
    of classes and slices with its memoised selector results."""

    features: Features
    claims: list[dra.ResourceClaim]
    owners: list[str]
    state: AllocatedState
    allocated: AbstractSet[DeviceKey]
    requests: dict[tuple[int, int, int], Request]
    match_cache: dict[tuple[int, int, int], dict[int, bool]]
    plans: list[ClaimPlan]
    static: bool

    @property
    def slices(self) -> SliceIndex: ...

    def selectors_match(self, candidate: Candidate, selectors: Sequence[dra.DeviceSelector], owner: str) -> bool:
        """Whether every selector is true for the device (AllocationError on a CEL error)."""

    def uses(self, device: dra.Device) -> list[tuple[str, str, Fraction]]:
        """The device's counter consumption: (counter set, counter, amount)."""

    def counters_left(self, pool: Pool) -> Counters:
        """What the pool's counter sets have left once the allocated devices took theirs."""
