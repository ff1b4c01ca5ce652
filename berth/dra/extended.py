"""Extended resources backed by DRA (``DRAExtendedResource``, on from 1.36).

A pod may request an extended resource (``example.com/gpu: 2``) that no
device plugin advertises on a node but that a DeviceClass names, either
explicitly (``spec.extendedResourceName``) or implicitly
(``deviceclass.resource.kubernetes.io/<class>``). On such a node
NodeResourcesFit leaves the resource to DynamicResources, which allocates
devices of that class through one special ResourceClaim per pod: built in
memory at PreFilter, given per node the device requests the node must serve
through DRA, created in the API server at PreBind with a generated name.

Ports, from kube-scheduler v1.37.2:

- :class:`ClassResolver`: ``k8s.io/dynamic-resource-allocation`` v0.37.2
  ``deviceclass/extendedresourcecache/extendedresourcecache.go`` (the
  informer-fed cache's answer for a given set of classes: of several classes
  naming one resource the oldest wins, then the smallest name; every class
  has its implicit name);
- :func:`is_dra_extended_resource_name`: ``pkg/scheduler/util/utils.go``
  ``IsDRAExtendedResourceName``;
- :func:`special_claim`, :func:`find_claim`, :func:`requests_and_mappings`:
  ``pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go``
  (``preFilterExtendedResources``, ``findExtendedResourceClaim``,
  ``createRequestsAndMappings``).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from fractions import Fraction
from typing import Protocol

import msgspec

from berth.cluster import dra, model, resources
from berth.dra import cel
from berth.dra.allocator import Allocator
from berth.dra.common import AllocatedState, Features

__all__ = [
    "ANNOTATION",
    "DEVICE_CLASS_PREFIX",
    "SPECIAL_CLAIM_NAME",
    "ClassResolver",
    "DeviceTotals",
    "ResolverCache",
    "ScoringSource",
    "find_claim",
    "is_dra_extended_resource_name",
    "is_special",
    "requests_and_mappings",
    "special_claim",
]

#: resourceapi.ResourceDeviceClassPrefix: every class's implicit extended resource name.
DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
#: resourceapi.ExtendedResourceClaimAnnotation.
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
#: specialClaimInMemName: not a valid object name, so never an API server claim's.
SPECIAL_CLAIM_NAME = "<extended-resources>"
#: v1.ContainerRestartPolicyAlways: an init container that keeps running (a sidecar).
_ALWAYS = "Always"


class _Classes(Protocol):
    """What :class:`ResolverCache` reads of a DraLister."""

    generation: int

    def device_classes(self) -> Mapping[str, dra.DeviceClass]: ...


def _mapping(container: str, resource: str, request: str) -> model.ContainerExtendedResourceRequest:
    return model.ContainerExtendedResourceRequest(
        container_name=container, resource_name=resource, request_name=request
    )


def is_dra_extended_resource_name(name: str) -> bool:
    """IsDRAExtendedResourceName: an extended resource, or a class's implicit name."""
    return resources.is_extended(name) or name.startswith(DEVICE_CLASS_PREFIX)


def is_special(claim: dra.ResourceClaim) -> bool:
    """isSpecialClaimName: the in-memory claim, not yet created."""
    return claim.metadata.name == SPECIAL_CLAIM_NAME


@dataclasses.dataclass(frozen=True, slots=True)
class ClassResolver:
    """``fwk.DeviceClassResolver``: the DeviceClass backing an extended resource."""

    by_resource: Mapping[str, dra.DeviceClass]

    @classmethod
    def of(cls, classes: Iterable[dra.DeviceClass]) -> ClassResolver:
        """The mapping the extended-resource cache holds once it has seen ``classes``.

        The cache keeps, per explicit name, the class created first (ties:
        the smaller name), whatever order the events came in; the implicit
        names are one per class. An unset creationTimestamp is Go's zero
        time, older than any set one."""
        mapping: dict[str, dra.DeviceClass] = {}
        ordered = sorted(classes, key=lambda c: (c.metadata.creation_timestamp or "", c.metadata.name))
        for c in ordered:
            name = c.spec.extended_resource_name
            if name is not None and name not in mapping:
                mapping[name] = c
        for c in ordered:
            mapping[DEVICE_CLASS_PREFIX + c.metadata.name] = c
        return cls(mapping)

    def device_class(self, resource: str) -> dra.DeviceClass | None:
        return self.by_resource.get(resource)

    def backs_any(self, requests: Mapping[str, int]) -> bool:
        """hasDeviceClassMappedExtendedResource: some non-zero request a class names."""
        if not self.by_resource:
            return False  # no DeviceClass at all: the common case, asked every cycle
        return any(
            amount and is_dra_extended_resource_name(name) and name in self.by_resource
            for name, amount in requests.items()
        )


def special_claim(pod: model.Pod) -> dra.ResourceClaim:
    """The in-memory claim of preFilterExtendedResources: no requests yet, a
    temporary uid, and the metadata kube-scheduler creates it with."""
    md = pod.metadata
    owner = model.OwnerReference(api_version="v1", kind="Pod", name=md.name, uid=md.uid, controller=True)
    return dra.ResourceClaim(
        metadata=model.ObjectMeta(
            name=SPECIAL_CLAIM_NAME,
            namespace=md.namespace or "default",
            uid=str(uuid.uuid4()),
            generate_name=f"{md.name}-extended-resources-",
            owner_references=[owner],
            annotations={ANNOTATION: "true"},
        )
    )


def find_claim(pod: model.Pod, claims: Iterable[dra.ResourceClaim]) -> dra.ResourceClaim | None:
    """findExtendedResourceClaim: the annotated claim this pod controls (from an earlier cycle)."""
    md = pod.metadata
    for c in claims:
        if c.metadata.annotations.get(ANNOTATION) != "true":
            continue
        for ref in c.metadata.owner_references:
            if ref.name == md.name and ref.controller and ref.uid == md.uid:
                return c
    return None


def _container_count(container: model.Container, resource: str) -> int:
    """The container's request of ``resource`` as an integer (Quantity.AsInt64; 0 if not whole)."""
    reqs = container.resources.requests if container.resources is not None else {}
    if resource not in reqs:
        return 0
    value = resources.parse_quantity(reqs[resource])
    return int(value) if value.denominator == 1 else 0


def _request_and_mappings(
    index: int,
    container: model.Container,
    resource: str,
    class_name: str,
    reusable: Sequence[dra.DeviceRequest | None],
) -> tuple[dra.DeviceRequest | None, list[model.ContainerExtendedResourceRequest]]:
    """createResourceRequestAndMappings: the container's own request (None
    when the long-lived containers' requests in ``reusable`` cover it) and
    the mappings of the container to the requests it uses."""
    wanted = _container_count(container, resource)
    if wanted == 0:
        return None, []
    mappings = []
    covered = 0
    for r in reusable:
        if r is None or r.exactly is None:
            continue
        covered += r.exactly.count
        mappings.append(_mapping(container.name, resource, r.name))
        if covered >= wanted:
            return None, mappings
    reqs = container.resources.requests if container.resources is not None else {}
    # "resource requests in a container is a map, their names must be
    # sorted to determine the resource's index order."
    position = sorted(reqs).index(resource)
    name = f"container-{index}-request-{position}"
    request = dra.DeviceRequest(
        name=name,
        exactly=dra.ExactDeviceRequest(
            device_class_name=class_name,
            allocation_mode=dra.ALLOCATION_MODE_EXACT_COUNT,
            count=wanted - covered,
        ),
    )
    mappings.append(_mapping(container.name, resource, name))
    return request, mappings


def requests_and_mappings(
    pod: model.Pod, extended: Iterable[str], resolver: ClassResolver
) -> tuple[list[dra.DeviceRequest], list[model.ContainerExtendedResourceRequest]]:
    """createRequestsAndMappings: the device requests of the node's special
    claim for the resources in ``extended`` (those the node serves through
    DRA) and which container each maps to.

    Long-lived containers (regular ones and sidecars) each get a request;
    an init container that runs to completion first reuses the requests of
    the long-lived containers from its own position on, and only the
    largest of the init containers' own requests is kept (they run one at
    a time), every such init container mapped to it."""
    containers = [*pod.spec.init_containers, *pod.spec.containers]
    n_init = len(pod.spec.init_containers)
    long_lived = [i for i, c in enumerate(containers) if i >= n_init or c.restart_policy == _ALWAYS]
    short_lived = [i for i in range(n_init) if i not in long_lived]
    requests: list[dra.DeviceRequest] = []
    mappings: list[model.ContainerExtendedResourceRequest] = []
    for resource in sorted(extended):
        cls = resolver.device_class(resource)
        if cls is None:
            continue
        long_requests: list[dra.DeviceRequest | None] = [None] * len(containers)
        long_mappings: list[model.ContainerExtendedResourceRequest] = []
        for i in long_lived:
            req, maps = _request_and_mappings(i, containers[i], resource, cls.metadata.name, ())
            long_requests[i] = req
            long_mappings.extend(maps)
        largest: dra.DeviceRequest | None = None
        short_names: set[str] = set()
        short_mappings: list[model.ContainerExtendedResourceRequest] = []
        for i in short_lived:
            req, maps = _request_and_mappings(i, containers[i], resource, cls.metadata.name, long_requests[i:])
            if req is not None and req.exactly is not None:
                short_names.add(req.name)
                if largest is None or (largest.exactly is not None and largest.exactly.count < req.exactly.count):
                    largest = req
            short_mappings.extend(maps)
        if largest is not None and len(short_names) > 1:
            short_names.discard(largest.name)
            short_mappings = [
                msgspec.structs.replace(m, request_name=largest.name) if m.request_name in short_names else m
                for m in short_mappings
            ]
        if largest is not None:
            requests.append(largest)
        requests.extend(r for r in long_requests if r is not None)
        mappings.extend(long_mappings)
        mappings.extend(short_mappings)
    requests.sort(key=lambda r: r.name)
    return requests, mappings


class ResolverCache:
    """One :class:`ClassResolver` per state of the DeviceClasses: rebuilt when
    the lister's ``generation`` moves (as the informer-fed cache follows
    DeviceClass events)."""

    __slots__ = ("_generation", "_resolver")

    def __init__(self) -> None:
        self._generation = -1
        self._resolver = ClassResolver({})

    def get(self, lister: _Classes) -> ClassResolver:
        if lister.generation != self._generation:
            self._resolver = ClassResolver.of(lister.device_classes().values())
            self._generation = lister.generation
        return self._resolver


class DeviceTotals:
    """One cycle's ``draPreScoreState`` (noderesources ``resource_allocation.go``
    v1.37.2): for a configured scoring resource a DeviceClass backs, on a node
    no device plugin provides it, the devices of that class reaching the node
    and how many of them are allocated (``calculateDRAExtendedResourceAllocatableRequest``),
    remembered per (resource, node) for the cycle."""

    __slots__ = ("_allocator", "_counts", "_resolver", "_state")

    def __init__(self, allocator: Allocator, resolver: ClassResolver, state: AllocatedState) -> None:
        self._allocator, self._resolver, self._state = allocator, resolver, state
        self._counts: dict[tuple[str, str], tuple[int, int] | None] = {}

    def __call__(self, resource: str, node: model.Node) -> tuple[int, int] | None:
        """(devices, allocated) or None when no class backs ``resource``."""
        key = (resource, node.metadata.name)
        if key not in self._counts:
            cls = self._resolver.device_class(resource)
            self._counts[key] = None if cls is None else self._allocator.class_devices(node, cls, self._state)
        return self._counts[key]


class _Lister(_Classes, Protocol):
    def resource_slices(self) -> Sequence[dra.ResourceSlice]: ...

    def allocated_devices(self) -> AbstractSet[tuple[str, str, str]]: ...

    def shared_devices(self) -> AbstractSet[tuple[str, str, str]]: ...

    def consumed_capacity(self) -> Mapping[tuple[str, str, str], Mapping[str, Fraction]]: ...


class ScoringSource:
    """What a resource-allocation scorer keeps between cycles to count devices
    for DRA-backed extended resources: the class resolver and an Allocator
    (its slice index and CEL results) per state of the classes and slices."""

    __slots__ = ("_allocator", "_cel", "_classes", "_generation", "_release")

    def __init__(self, *, release: int) -> None:
        self._classes = ResolverCache()
        self._cel = cel.Cache()
        self._allocator: Allocator | None = None
        self._generation = -1
        self._release = release

    def for_cycle(self, lister: _Lister, resources_scored: Iterable[str]) -> DeviceTotals | None:
        """getDRAPreScoredParams: None unless a class backs some scored resource."""
        resolver = self._classes.get(lister)
        if not any(is_dra_extended_resource_name(r) and resolver.device_class(r) for r in resources_scored):
            return None
        if self._allocator is None or self._generation != lister.generation:
            self._allocator = Allocator(
                classes=lister.device_classes(),
                slices=list(lister.resource_slices()),
                features=Features(release=self._release),
                cel_cache=self._cel,
            )
            self._generation = lister.generation
        state = AllocatedState(
            devices=lister.allocated_devices(), shared=lister.shared_devices(), capacity=lister.consumed_capacity()
        )
        return DeviceTotals(self._allocator, resolver, state)
