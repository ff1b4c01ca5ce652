"""Dynamic Resource Allocation: the structured allocator, transport-free.

A port of ``k8s.io/dynamic-resource-allocation/structured`` (v0.34.4, the
"stable" allocator with kube-scheduler v1.34's default feature gates) over the
``resource.k8s.io/v1`` model of :mod:`berth.cluster.dra`. It imports
:mod:`berth.cluster` and :mod:`berth.errors` only; the DynamicResources
plugin, the informers and the embedded cluster build on it.

Public API::

    from berth.dra import Allocator, AllocationError, DeviceID, Features, Unsatisfiable

    allocator = Allocator(
        classes={c.metadata.name: c for c in device_classes},  # or a get(name) callable
        slices=resource_slices,          # every ResourceSlice of the snapshot
        features=Features(),             # v1.34 defaults: adminAccess, firstAvailable on; taints off
        cel_cache=None,                  # a berth.dra.cel.Cache to share compiled selectors
    )
    outcome = allocator.allocate(node, claims_to_allocate, allocated=in_use)
    # or, once per cycle and then per node (what the DynamicResources plugin does):
    prepared = allocator.prepare(claims_to_allocate, allocated=in_use)
    outcome = prepared.solve(node)     # a Solution (outcome.results()) or Unsatisfiable
    if isinstance(outcome, Unsatisfiable):
        outcome.claim, outcome.request, outcome.reason, outcome.message
    else:
        outcome[i]                       # dra.AllocationResult for claims_to_allocate[i]:
                                         # devices.results, devices.config, node_selector

- ``allocated`` is a set of :class:`DeviceID` ``(driver, pool, device)``: every
  device in ``status.allocation`` of any claim (whoever allocated it) plus the
  ones in flight (reserved by this scheduler, not yet written). Devices in it
  are used only by ``adminAccess`` requests. :func:`allocated_devices` builds
  it from claims.
- ``Unsatisfiable`` means "not on this node" (kube-scheduler: Unschedulable);
  ``reason`` is one of ``REASON_NO_MATCHING_DEVICE``,
  ``REASON_DEVICES_ALLOCATED``, ``REASON_CONSTRAINT``, ``REASON_POOL_INCOMPLETE``.
- :class:`AllocationError` (an ``InvalidArgument``) means the claims cannot be
  allocated anywhere as written: an unknown DeviceClass, a CEL selector that
  does not compile or fails at run time (a missing attribute, a type error:
  upstream aborts the allocation, it does not skip the device), an
  unsupported field, more than 32 devices in a claim, an invalid pool
  (duplicate device names). kube-scheduler's Filter turns it into an Error
  status.
- An Allocator is a snapshot of classes and slices: build a new one when they
  change (selector results are memoised in it per expression and device),
  keep it across nodes and pods otherwise. It is not thread-safe.
- Pools: per-node (``nodeName``), ``nodeSelector`` and ``allNodes`` slices;
  only the newest generation of a pool counts; an incomplete pool serves
  ExactCount requests but makes an "All" request an AllocationError, as
  upstream.
- Not supported (alpha in v1.34, off by default; the allocator behaves as
  upstream with the gate off): partitionable devices (counters,
  per-device node selection: such slices are skipped, such devices never
  allocated), binding conditions (such devices are never selected),
  consumable capacity / ``distinctAttribute`` (an AllocationError). Device
  taints are honoured when ``Features(device_taints=True)``.
"""

from __future__ import annotations

from collections.abc import Iterable

from berth.cluster import dra as _dra
from berth.dra.allocator import (
    REASON_CONSTRAINT,
    REASON_DEVICES_ALLOCATED,
    REASON_NO_MATCHING_DEVICE,
    REASON_POOL_INCOMPLETE,
    AllocationError,
    Allocator,
    Features,
    Prepared,
    Solution,
    Unsatisfiable,
)
from berth.dra.cel import Cache as CelCache
from berth.dra.pools import DeviceID, Pool

__all__ = [
    "REASON_CONSTRAINT",
    "REASON_DEVICES_ALLOCATED",
    "REASON_NO_MATCHING_DEVICE",
    "REASON_POOL_INCOMPLETE",
    "AllocationError",
    "Allocator",
    "CelCache",
    "DeviceID",
    "Features",
    "Pool",
    "Prepared",
    "Solution",
    "Unsatisfiable",
    "allocated_devices",
]


def allocated_devices(claims: Iterable[_dra.ResourceClaim]) -> set[DeviceID]:
    """The devices the claims' allocations hold (``GatherAllocatedState`` in
    kube-scheduler's ``allocateddevices.go``), admin-access results excluded:
    they do not take the device from others."""
    out: set[DeviceID] = set()
    for claim in claims:
        allocation = claim.status.allocation
        if allocation is None:
            continue
        for r in allocation.devices.results:
            if not r.admin_access:
                out.add(DeviceID(r.driver, r.pool, r.device))
    return out
