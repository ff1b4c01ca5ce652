"""Resource pools reachable from a node: a port of ``pools_incubating.go``
(``k8s.io/dynamic-resource-allocation/structured/internal/incubating``,
v0.37.2, the allocator kube-scheduler 1.36 and 1.37 run with their default
gates; 1.35's differs only where noted).

A pool (driver, pool name) is published as ``resourceSliceCount`` slices of
one ``generation``. Slices of an older generation are ignored; a pool the
node reaches with fewer slices of the newest generation than it says is
looked up across all slices (a slice that does not target this node may
hold the rest, or a newer generation: then the pool is obsolete and
skipped); one still short is *incomplete* — nothing is allocated from it,
and an "All" request fails while it is. A pool whose slices repeat a device
name, repeat a counter-set name or consume a counter that does not exist is
*invalid*: nothing is allocated from it either, and when nothing else fits
the node says so ("invalid resource pools were encountered").

Pools come sorted by (driver, pool) and a pool's slices by name, so the
first-fit search is deterministic (1.36+; 1.35 walked Go's map order, which
this is one of); pools with devices that have binding conditions come last.
With DRAPartitionableDevices, slices that carry ``sharedCounters`` hold a
pool's counter sets, and a slice with ``perDeviceNodeSelection`` reaches the
node when one of its devices does (each device is then checked on its own).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NamedTuple

from berth.cluster import dra, labels, model
from berth.dra import capacity

__all__ = [
    "Candidate",
    "Counters",
    "DeviceID",
    "DeviceKey",
    "Pool",
    "SliceIndex",
    "device_matches_node",
    "node_matches",
]

#: (driver, pool, device): what the DraStore counts; a DeviceID is one.
DeviceKey = tuple[str, str, str]


class DeviceID(NamedTuple):
    """One device, cluster-wide (``structured.DeviceID``)."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


class Candidate(NamedTuple):
    """A device of a pool as the allocator walks it (``deviceWithID``)."""

    id: DeviceID
    device: dra.Device
    slice: dra.ResourceSlice
    #: The slice selects nodes per device: the device's own node fields decide.
    per_device: bool


#: Counter sets by name, counters by name: what is left (or used) of each.
Counters = dict[str, dict[str, Fraction]]


@dataclass(slots=True)
class Pool:
    driver: str
    name: str
    incomplete: bool = False
    invalid_reason: str = ""
    #: The devices of the pool's slices that reach the node (DeviceSlicesTargetingNode), in slice order.
    devices: list[Candidate] = field(default_factory=list)
    #: Devices of the pool's other slices (DeviceSlicesNotTargetingNode): they use counters too.
    other_devices: list[tuple[DeviceID, dra.Device]] = field(default_factory=list)
    #: The pool's counter sets (DRAPartitionableDevices).
    counter_sets: Counters = field(default_factory=dict)
    #: (driver, name).
    key: tuple[str, str] = ("", "")

    def __post_init__(self) -> None:
        self.key = (self.driver, self.name)

    @property
    def invalid(self) -> bool:
        return bool(self.invalid_reason)

    def __str__(self) -> str:
        return f"{self.driver}/{self.name}"


def node_matches(
    node: model.Node | None, node_name: str | None, all_nodes: bool | None, selector: model.NodeSelector | None
) -> bool:
    """pools_incubating.go NodeMatches: by name, all nodes, or a node selector
    (terms ORed, ``component-helpers`` nodeaffinity semantics)."""
    if node_name:
        return node is not None and node.metadata.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        if node is None:
            return False
        return any(
            labels.node_term_matches(t, node.metadata.labels, node.metadata.name) for t in selector.node_selector_terms
        )
    return False


def device_matches_node(node: model.Node | None, device: dra.Device) -> bool:
    """A device of a ``perDeviceNodeSelection`` slice (isSelectable's last check)."""
    return node_matches(node, device.node_name, device.all_nodes, device.node_selector)


class SliceIndex:
    """All ResourceSlices, indexed so that a node's pools are found without
    looking at every other node's slices (GatherPools' input is the node's
    own slices plus those without a node name)."""

    def __init__(self, slices: Sequence[dra.ResourceSlice], *, partitionable: bool = False) -> None:
        self.slices = list(slices)
        self.partitionable = partitionable
        # Pools by the slices that make them: the same for every pod (pools
        # are never changed once built).
        self._pools: dict[tuple[int, ...], list[Pool]] = {}
        self._by_node: dict[str, list[int]] = {}
        self._elsewhere: list[int] = []  # nodeSelector / allNodes / perDeviceNodeSelection
        #: Every slice by its pool (checkSlicesInPool's walk, indexed).
        self._by_pool: dict[tuple[str, str], list[int]] = {}
        #: A node's pools by its name, while no slice selects nodes by label
        #: (then the name alone decides which slices a node reaches).
        self._by_name: dict[str, list[Pool]] = {}
        #: Some slice selects nodes with more than one term (which an
        #: allocation's node selector cannot express: an AllocationError).
        self.multi_term_selectors = False
        #: id(pools) -> whether an outcome on those pools depends on the node
        #: itself (per-device node selection, or a device that binds to its
        #: node: the node's name goes into the allocation), not only on them.
        self.node_dependent: dict[int, bool] = {}
        for i, s in enumerate(self.slices):
            spec = s.spec
            self._by_pool.setdefault((spec.driver, spec.pool.name), []).append(i)
            if not partitionable and (spec.per_device_node_selection is not None or spec.shared_counters):
                continue  # GatherPools: not without DRAPartitionableDevices
            if uses_compatibility_groups(s):
                # DRADeviceCompatibilityGroups (alpha) is off: such slices are
                # ignored, which leaves their pool incomplete.
                continue
            if spec.node_name:
                self._by_node.setdefault(spec.node_name, []).append(i)
            elif spec.all_nodes or spec.node_selector is not None or spec.per_device_node_selection:
                self._elsewhere.append(i)
            # else: an unknown future way of selecting nodes: skipped, as upstream does.
            for selector in [spec.node_selector, *(d.node_selector for d in spec.devices)]:
                if selector is not None and len(selector.node_selector_terms) > 1:
                    self.multi_term_selectors = True

    def gather_pools(self, node: model.Node | None) -> list[Pool]:
        """GatherPools: the pools with devices reachable from ``node``. The
        work is the node's own slices plus one node test per slice that
        selects nodes otherwise."""
        name = node.metadata.name if node is not None else ""
        if not self._elsewhere:
            got = self._by_name.get(name)
            if got is not None:
                return got
        picked = list(self._by_node.get(name, ())) if name else []
        for i in self._elsewhere:
            spec = self.slices[i].spec
            if spec.per_device_node_selection:
                relevant = any(device_matches_node(node, d) for d in spec.devices)
            else:
                relevant = node_matches(node, None, spec.all_nodes, spec.node_selector)
            if relevant:
                picked.append(i)
        picked.sort()
        key = tuple(picked)
        pools = self._pools.get(key)
        if pools is None:
            pools = self._pools[key] = self._gather(self.slices[i] for i in picked)
            self.node_dependent[id(pools)] = any(
                c.per_device or c.device.binds_to_node for p in pools for c in p.devices
            )
        if not self._elsewhere:
            self._by_name[name] = pools
        return pools

    def _gather(self, slices: Iterable[dra.ResourceSlice]) -> list[Pool]:
        by_pool: dict[tuple[str, str], list[dra.ResourceSlice]] = {}
        for s in slices:  # addSlice
            key = (s.spec.driver, s.spec.pool.name)
            current = by_pool.get(key)
            if current is None or s.spec.pool.generation > current[0].spec.pool.generation:
                by_pool[key] = [s]  # new, or newer: replaces all old slices
            elif s.spec.pool.generation == current[0].spec.pool.generation:
                current.append(s)
            # else: out-dated
        plain: list[Pool] = []
        binding: list[Pool] = []
        for key, found in by_pool.items():
            want = found[0].spec.pool.resource_slice_count
            rest: list[dra.ResourceSlice] | None = None
            if len(found) != want:
                # Slices that do not target this node may complete the pool.
                obsolete, rest = self._slices_in_pool(key, found[0].spec.pool.generation)
                if obsolete:
                    continue  # the driver is replacing this generation
                if len(rest) != want:
                    plain.append(Pool(key[0], key[1], incomplete=True))
                    continue
            pool = self._build(key, found, rest)
            has_conditions = any(c.device.binding_conditions for c in pool.devices)
            (binding if has_conditions else plain).append(pool)
        plain.sort(key=lambda p: p.key)
        binding.sort(key=lambda p: p.key)
        return plain + binding

    def _slices_in_pool(self, key: tuple[str, str], generation: int) -> tuple[bool, list[dra.ResourceSlice]]:
        """checkSlicesInPool: whether a newer generation exists, else every slice of this one."""
        out = []
        for i in self._by_pool.get(key, ()):
            s = self.slices[i]
            if s.spec.pool.generation > generation:
                return True, []
            if s.spec.pool.generation == generation:
                out.append(s)
        # Ignored slices (compatibility groups) do not count towards completeness.
        return False, [s for s in out if not uses_compatibility_groups(s)]

    def _build(
        self, key: tuple[str, str], targeting: list[dra.ResourceSlice], every: list[dra.ResourceSlice] | None
    ) -> Pool:
        """buildPool."""
        partitionable = self.partitionable
        device_slices: list[dra.ResourceSlice] = []
        counter_slices: list[dra.ResourceSlice] = []
        for s in sorted(targeting, key=lambda s: s.metadata.name):
            (counter_slices if partitionable and s.spec.shared_counters else device_slices).append(s)
        others: list[dra.ResourceSlice] = []
        if every is not None and len(targeting) < len(every):
            seen = {s.metadata.name for s in targeting}
            for s in every:
                if s.metadata.name not in seen:
                    (counter_slices if partitionable and s.spec.shared_counters else others).append(s)
        pool = Pool(key[0], key[1])
        names: set[str] = set()
        for s in device_slices:
            for d in s.spec.devices:
                if d.name in names:
                    pool.invalid_reason = f"duplicate device name {d.name}"
                    return pool
                names.add(d.name)
        per_device = [bool(s.spec.per_device_node_selection) for s in device_slices]
        pool.devices = [
            Candidate(DeviceID(key[0], key[1], d.name), d, s, flag)
            for s, flag in zip(device_slices, per_device, strict=True)
            for d in s.spec.devices
        ]
        if not partitionable:
            return pool
        for s in counter_slices:
            for counter_set in s.spec.shared_counters:
                if counter_set.name in pool.counter_sets:
                    return _invalid(key, f"duplicate counter set name {counter_set.name}")
                pool.counter_sets[counter_set.name] = {
                    n: capacity.parse(c.value) for n, c in counter_set.counters.items()
                }
        for s in (*device_slices, *others):
            for d in s.spec.devices:
                for use in d.consumes_counters:
                    counters = pool.counter_sets.get(use.counter_set)
                    if counters is None:
                        return _invalid(key, f"counter set {use.counter_set} not found")
                    for n in use.counters:
                        if n not in counters:
                            return _invalid(key, f"counter {n} not found in counter set {use.counter_set}")
        pool.other_devices = [(DeviceID(key[0], key[1], d.name), d) for s in others for d in s.spec.devices]
        return pool


def uses_compatibility_groups(s: dra.ResourceSlice) -> bool:
    """sliceUsesCompatibilityGroups (compatibility_groups.go, v0.37.2)."""
    return any(use.compatibility_groups for d in s.spec.devices for use in d.consumes_counters)


def _invalid(key: tuple[str, str], reason: str) -> Pool:
    return Pool(key[0], key[1], invalid_reason=reason)
