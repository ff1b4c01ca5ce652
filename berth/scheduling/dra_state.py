"""What the sources told the core about Dynamic Resource Allocation:
DeviceClasses, ResourceSlices, ResourceClaims (with the source that owns
each) and ResourceClaimTemplates — and the claims this scheduler is
allocating right now.

:class:`DraStore` is kube-scheduler's ``DefaultDRAManager``
(``pkg/scheduler/framework/plugins/dynamicresources/dra_manager.go``, v1.37.2)
for Berth: the listers, the claim tracker's *in-flight allocations* (claims
Reserve allocated whose status PreBind has not written yet) and its *assume
cache* (a claim PreBind wrote is used at once, before its informer event
arrives; an older event does not undo it). Plugins see it through the
Handle as :class:`berth.framework.handle.DraLister`.

The devices in use — allocated to any claim, whoever allocated it
(``allocateddevices.go``, v1.37.2), and in flight — are counted as claims
change (a change costs the old and the new claim's devices, not all of
them), so a scheduling cycle gets them without looking at every claim:
devices held whole, devices with shares (results with a ``shareID``,
DRAConsumableCapacity) and the capacity the shares consume. Which of these
count as "whole" when consumable capacity is off is the plugin's choice (it
knows the gates).

DeviceTaintRules (resource.k8s.io/v1, DRADeviceTaintRules) add their taint
to the devices they select: :meth:`DraStore.resource_slices` returns the
slices with those taints patched in (kube-scheduler's
``ListWithDeviceTaintRules``, the resourceslice tracker's patched slices).

Everything runs on the core's event loop: no locks, and no
``errClaimTrackerConcurrentModification`` retry.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from fractions import Fraction

import msgspec

from berth.cluster import dra, model
from berth.cluster.sources import Source
from berth.dra import capacity

__all__ = ["DraStore"]

log = logging.getLogger(__name__)

DeviceKey = tuple[str, str, str]  # (driver, pool, device): berth.dra.DeviceID's fields


def _held(claim: dra.ResourceClaim) -> tuple[list[DeviceKey], list[tuple[DeviceKey, dict[str, Fraction]]]]:
    """foreachAllocatedDevice: the devices a claim's allocation holds whole,
    and its shares (results with a shareID) with what each consumes. Admin
    access holds nothing."""
    allocation = claim.status.allocation
    if allocation is None:
        return [], []
    whole: list[DeviceKey] = []
    shares: list[tuple[DeviceKey, dict[str, Fraction]]] = []
    for r in allocation.devices.results:
        if r.admin_access:
            continue
        device = (r.driver, r.pool, r.device)
        if r.share_id is None:
            whole.append(device)
        else:
            shares.append((device, {n: capacity.parse(q) for n, q in r.consumed_capacity.items()}))
    return whole, shares


def _taint_rule_matches(rule: dra.DeviceTaintRule, driver: str, pool: str, device: str) -> bool:
    """DeviceTaintSelector: every field that is set matches; no selector matches
    no device (the resourceslice tracker's applyPatches, v0.37.2)."""
    sel = rule.spec.device_selector
    if sel is None:
        return False
    return (
        (sel.driver is None or sel.driver == driver)
        and (sel.pool is None or sel.pool == pool)
        and (sel.device is None or sel.device == device)
    )


def _version(claim: dra.ResourceClaim) -> int:
    """The resourceVersion as a number (the assume cache compares them as
    numbers, as upstream's ``assumecache`` does); -1 when it is not one."""
    rv = claim.metadata.resource_version
    return int(rv) if rv.isdigit() else -1


class DraStore:
    """DeviceClasses, ResourceSlices, ResourceClaims and templates; see the module docstring."""

    def __init__(self) -> None:
        self._classes: dict[str, dra.DeviceClass] = {}
        self._slices: dict[str, dra.ResourceSlice] = {}
        self._slice_list: list[dra.ResourceSlice] | None = None
        self._claims: dict[str, dra.ResourceClaim] = {}
        self._sources: dict[str, Source] = {}
        self._templates: dict[str, dra.ResourceClaimTemplate] = {}
        #: Claims PreBind wrote, by key: (resourceVersion written, the API object before).
        self._assumed: dict[str, tuple[int, dra.ResourceClaim | None]] = {}
        #: uid -> the claim as Reserve allocated it (inFlightAllocations).
        self._in_flight: dict[str, dra.ResourceClaim] = {}
        #: How many claims — stored or in flight — hold each device whole.
        self._in_use: Counter[DeviceKey] = Counter()
        #: How many shares (results with a shareID) each device has.
        self._shared: Counter[DeviceKey] = Counter()
        #: What the shares of each device consume (AggregatedCapacity).
        self._capacity: dict[DeviceKey, dict[str, Fraction]] = {}
        self._taint_rules: dict[str, dra.DeviceTaintRule] = {}
        #: (driver, pool) -> moves whenever a device of the pool enters or
        #: leaves the devices in use (the allocator's per-node memo keys on it).
        self.pool_versions: dict[tuple[str, str], int] = {}
        #: Moves whenever a class or a slice changes: an Allocator built at one
        #: generation is good until the next.
        self.generation = 0

    def __len__(self) -> int:
        return (
            len(self._classes) + len(self._slices) + len(self._claims) + len(self._templates) + len(self._taint_rules)
        )

    # ------------------------------------------------------------ classes and slices

    def put_class(self, obj: dra.DeviceClass) -> None:
        self._classes[obj.metadata.name] = obj
        self.generation += 1

    def remove_class(self, name: str) -> None:
        if self._classes.pop(name, None) is not None:
            self.generation += 1

    def put_slice(self, obj: dra.ResourceSlice) -> None:
        self._slices[obj.metadata.name] = obj
        self._slice_list = None
        self.generation += 1

    def remove_slice(self, name: str) -> None:
        if self._slices.pop(name, None) is not None:
            self._slice_list = None
            self.generation += 1

    def put_taint_rule(self, obj: dra.DeviceTaintRule) -> None:
        self._taint_rules[obj.metadata.name] = obj
        self._slice_list = None
        self.generation += 1

    def remove_taint_rule(self, name: str) -> None:
        if self._taint_rules.pop(name, None) is not None:
            self._slice_list = None
            self.generation += 1

    # ------------------------------------------------------------ templates

    def put_template(self, obj: dra.ResourceClaimTemplate) -> None:
        self._templates[obj.key] = obj

    def remove_template(self, namespace: str, name: str) -> None:
        self._templates.pop(model.pod_key(namespace, name), None)

    # ------------------------------------------------------------ claims

    def put_claim(self, claim: dra.ResourceClaim, source: Source | None = None) -> dra.ResourceClaim | None:
        """Store the latest object from its source; returns the one it replaces.

        A claim PreBind wrote (:meth:`assume_claim`) stays as written until
        the source reports a version at least as new (``assumecache``'s
        ``Update``: an older informer event is not applied)."""
        key = claim.key
        if source is not None:
            self._sources[key] = source
        assumed = self._assumed.get(key)
        if assumed is not None:
            if 0 <= _version(claim) < assumed[0]:
                self._assumed[key] = (assumed[0], claim)  # the API object, should the write be undone
                return self._claims.get(key)
            del self._assumed[key]
        return self._replace(key, claim)

    def remove_claim(self, namespace: str, name: str) -> dra.ResourceClaim | None:
        key = model.pod_key(namespace, name)
        self._assumed.pop(key, None)
        self._sources.pop(key, None)
        return self._replace(key, None)

    def _replace(self, key: str, claim: dra.ResourceClaim | None) -> dra.ResourceClaim | None:
        """Store ``claim`` under ``key`` (None: drop it); the devices in use
        change by the old claim's and the new one's only."""
        old = self._claims.pop(key, None) if claim is None else self._claims.get(key)
        if old is not None:
            self._release(old)
        if claim is not None:
            self._claims[key] = claim
            self._take(claim)
        return old

    def _take(self, claim: dra.ResourceClaim) -> None:
        whole, shares = _held(claim)
        versions = self.pool_versions
        for device in whole:
            self._in_use[device] += 1
        for device, consumed in shares:
            self._shared[device] += 1
            if consumed:
                total = self._capacity.setdefault(device, {})
                for name, amount in consumed.items():
                    total[name] = total.get(name, Fraction(0)) + amount
        for driver, pool, _ in (*whole, *(d for d, _ in shares)):
            versions[(driver, pool)] = versions.get((driver, pool), 0) + 1

    def _release(self, claim: dra.ResourceClaim) -> None:
        whole, shares = _held(claim)
        versions = self.pool_versions
        for device in whole:
            _drop(self._in_use, device)
        for device, consumed in shares:
            _drop(self._shared, device)
            total = self._capacity.get(device)
            if total is not None and consumed:
                for name, amount in consumed.items():
                    if name in total:
                        total[name] -= amount
                if all(v == 0 for v in total.values()):
                    del self._capacity[device]  # ConsumedCapacityCollection.Remove
        for driver, pool, _ in (*whole, *(d for d, _ in shares)):
            versions[(driver, pool)] = versions.get((driver, pool), 0) + 1

    def source_of(self, key: str) -> Source | None:
        return self._sources.get(key)

    def claims(self) -> list[dra.ResourceClaim]:
        return list(self._claims.values())

    # ------------------------------------------------------------ DraLister

    def device_class(self, name: str) -> dra.DeviceClass | None:
        return self._classes.get(name)

    def device_classes(self) -> Mapping[str, dra.DeviceClass]:
        return self._classes

    def resource_slices(self) -> Sequence[dra.ResourceSlice]:
        """The slices, with the taints of the DeviceTaintRules patched into their devices."""
        if self._slice_list is None:
            self._slice_list = [self._patched(s) for s in self._slices.values()]
        return self._slice_list

    def _patched(self, s: dra.ResourceSlice) -> dra.ResourceSlice:
        rules = [r for r in self._taint_rules.values() if r.spec.device_selector is None or _could_match(r, s.spec)]
        if not rules:
            return s
        devices = []
        for d in s.spec.devices:
            extra = [r.spec.taint for r in rules if _taint_rule_matches(r, s.spec.driver, s.spec.pool.name, d.name)]
            devices.append(msgspec.structs.replace(d, taints=[*d.taints, *extra]) if extra else d)
        return msgspec.structs.replace(s, spec=msgspec.structs.replace(s.spec, devices=devices))

    def claim(self, namespace: str, name: str) -> dra.ResourceClaim | None:
        return self._claims.get(model.pod_key(namespace, name))

    def claim_template(self, namespace: str, name: str) -> dra.ResourceClaimTemplate | None:
        return self._templates.get(model.pod_key(namespace, name))

    def allocated_devices(self) -> AbstractSet[DeviceKey]:
        """ListAllAllocatedDevices: every device an allocation holds (any
        scheduler's, as the claims say) plus the in-flight ones.

        A live read-only view, not a copy (upstream copies a set per cycle):
        everything runs on the core's event loop and a scheduling cycle's
        PreFilter-to-Reserve part does not yield, so within it the view does
        not change under the allocator; and if a state were kept across an
        await, the view would only ever be newer, never miss an allocation."""
        return self._in_use.keys()

    def shared_devices(self) -> AbstractSet[DeviceKey]:
        """Devices with at least one share allocated or in flight (AllocatedSharedDeviceIDs, by device)."""
        return self._shared.keys()

    def consumed_capacity(self) -> Mapping[DeviceKey, Mapping[str, Fraction]]:
        """What the shares of each device consume (AggregatedCapacity); a live view."""
        return self._capacity

    def has_pending_allocation(self, uid: str) -> bool:
        """ClaimHasPendingAllocation."""
        return uid in self._in_flight

    def signal_pending_allocation(self, uid: str, claim: dra.ResourceClaim) -> None:
        """SignalClaimPendingAllocation: ``claim`` (with the allocation Reserve
        chose) is in flight; its devices are in use from now on."""
        old = self._in_flight.get(uid)
        if old is not None:
            self._release(old)
        self._in_flight[uid] = claim
        self._take(claim)

    def remove_pending_allocation(self, uid: str) -> bool:
        """RemoveClaimPendingAllocation; whether it was in flight."""
        old = self._in_flight.pop(uid, None)
        if old is None:
            return False
        self._release(old)
        return True

    def pending_allocations(self) -> list[dra.ResourceClaim]:
        return list(self._in_flight.values())

    def assume_claim(self, claim: dra.ResourceClaim) -> None:
        """AssumeClaimAfterAPICall: ``claim`` as the API server answered a
        write; used until the source reports it (or something newer)."""
        key = claim.key
        current = self._claims.get(key)
        if current is None:
            return  # deleted meanwhile (upstream: ErrNotFound, logged)
        if _version(claim) < _version(current):
            return  # the source already reported something newer
        before = self._assumed.get(key)
        self._assumed[key] = (_version(claim), before[1] if before is not None else current)
        self._replace(key, claim)

    def restore_claim(self, namespace: str, name: str) -> None:
        """AssumedClaimRestore: back to the source's latest object."""
        key = model.pod_key(namespace, name)
        assumed = self._assumed.pop(key, None)
        if assumed is not None and assumed[1] is not None:
            self._replace(key, assumed[1])


def _drop(counter: Counter[DeviceKey], device: DeviceKey) -> None:
    left = counter[device] - 1
    if left > 0:
        counter[device] = left
    else:
        counter.pop(device, None)


def _could_match(rule: dra.DeviceTaintRule, spec: dra.ResourceSliceSpec) -> bool:
    sel = rule.spec.device_selector
    return (
        sel is not None
        and (sel.driver is None or sel.driver == spec.driver)
        and (sel.pool is None or sel.pool == spec.pool.name)
    )
