"""Dynamic Resource Allocation: the structured allocator, transport-free.

A port of ``k8s.io/dynamic-resource-allocation/structured`` (v0.37.2, the
"incubating" allocator kube-scheduler picks for the default gates of 1.35,
1.36 and 1.37) over the ``resource.k8s.io/v1`` model of
:mod:`berth.cluster.dra`. It imports :mod:`berth.cluster` and
:mod:`berth.errors` only; the DynamicResources plugin, the informers and the
embedded cluster build on it.

Public API::

    from berth.dra import AllocatedState, Allocator, AllocationError, DeviceID, Features, Unsatisfiable

    allocator = Allocator(
        classes={c.metadata.name: c for c in device_classes},  # or a get(name) callable
        slices=resource_slices,          # every ResourceSlice of the snapshot (taints patched in)
        features=Features(...),          # the gates: DynamicResources builds them from the Handle's
        cel_cache=None,                  # a berth.dra.cel.Cache to share compiled selectors
    )
    outcome = allocator.allocate(node, claims_to_allocate, allocated=in_use)
    # or, once per cycle and then per node (what the DynamicResources plugin does):
    prepared = allocator.prepare(claims_to_allocate, allocated=in_use, timeout=10.0)
    outcome = prepared.solve(node)     # a Solution (outcome.results()) or Unsatisfiable
    if isinstance(outcome, Unsatisfiable):
        outcome.claim, outcome.request, outcome.reason, outcome.message
    else:
        outcome.results()[i]             # dra.AllocationResult for claims_to_allocate[i]:
                                         # devices.results, devices.config, node_selector

- ``allocated`` is an :class:`AllocatedState` (or a plain set of
  :class:`DeviceID`, meaning devices allocated whole): every device in
  ``status.allocation`` of any claim (whoever allocated it) plus the ones in
  flight, the devices with shares (results with a ``shareID``) and the
  capacity the shares consume. Devices allocated whole are used only by
  ``adminAccess`` requests. :func:`allocated_devices` builds the set from
  claims.
- ``Unsatisfiable`` means "not on this node" (kube-scheduler: Unschedulable);
  ``reason`` is one of the ``REASON_*`` constants;
  ``REASON_INVALID_POOLS`` is upstream's own per-node reason.
- :class:`AllocationError` (an ``InvalidArgument``) means the claims cannot be
  allocated anywhere as written: an unknown DeviceClass, a CEL selector that
  does not compile or fails at run time, an unsupported field or a feature
  that is off, more than 32 devices in a claim, an "All" request while a
  pool is being updated or invalid. kube-scheduler's Filter turns it into an
  Error status. :class:`FilterTimeout`: the node's search ran past
  ``timeout``.
- An Allocator is a snapshot of classes and slices: build a new one when they
  change (selector results are memoised in it per expression and device),
  keep it across nodes and pods otherwise. It is not thread-safe.
- Pools: per-node (``nodeName``), ``nodeSelector``, ``allNodes`` and
  per-device node selection; only the newest generation of a pool counts;
  nothing is allocated from an incomplete or invalid pool (:mod:`berth.dra.pools`).
- Features (each following its gate in the plugin): admin access,
  prioritized lists, device taints (NoSchedule/NoExecute must be tolerated;
  the request's tolerations are copied into the result), partitionable
  devices (counter sets), consumable capacity (shares, capacity requests and
  policies, ``distinctAttribute``), binding conditions (devices that have
  them are allocated last and their conditions copied into the result).
  Alpha features off by default in 1.37 (list-typed and derived attributes,
  compatibility groups, optional node operations) are not ported.
"""

from __future__ import annotations

from collections.abc import Iterable

from berth.cluster import dra as _dra
from berth.dra.allocator import Allocator, Prepared, Solution
from berth.dra.cel import Cache as CelCache
from berth.dra.common import (
    REASON_CONSTRAINT,
    REASON_DEVICES_ALLOCATED,
    REASON_INVALID_POOLS,
    REASON_NO_MATCHING_DEVICE,
    REASON_POOL_INCOMPLETE,
    REASON_TAINTED,
    AllocatedState,
    AllocationError,
    Features,
    FilterTimeout,
    Unsatisfiable,
)
from berth.dra.pools import DeviceID, Pool

__all__ = [
    "REASON_CONSTRAINT",
    "REASON_DEVICES_ALLOCATED",
    "REASON_INVALID_POOLS",
    "REASON_NO_MATCHING_DEVICE",
    "REASON_POOL_INCOMPLETE",
    "REASON_TAINTED",
    "AllocatedState",
    "AllocationError",
    "Allocator",
    "CelCache",
    "DeviceID",
    "Features",
    "FilterTimeout",
    "Pool",
    "Prepared",
    "Solution",
    "Unsatisfiable",
    "allocated_devices",
]


def allocated_devices(claims: Iterable[_dra.ResourceClaim]) -> set[DeviceID]:
    """The devices the claims' allocations hold whole (``foreachAllocatedDevice``
    in kube-scheduler's ``allocateddevices.go`` with consumable capacity off),
    admin-access results excluded: they do not take the device from others."""
    out: set[DeviceID] = set()
    for claim in claims:
        allocation = claim.status.allocation
        if allocation is None:
            continue
        for r in allocation.devices.results:
            if not r.admin_access:
                out.add(DeviceID(r.driver, r.pool, r.device))
    return out
