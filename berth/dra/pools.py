"""Resource pools reachable from a node: a port of ``pools_stable.go``
(``k8s.io/dynamic-resource-allocation/structured/internal/stable``, v0.34.4).

A pool (driver, pool name) is published as ``resourceSliceCount`` slices of
one ``generation``. Slices of an older generation are ignored; a pool with
fewer slices of the newest generation than it says is *incomplete* (still
being updated; usable for ExactCount requests, not for "All"); a pool whose
slices repeat a device name is *invalid* (never allocated from).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from berth.cluster import dra, labels, model

__all__ = ["DeviceID", "Pool", "SliceIndex", "node_matches"]


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


@dataclass(slots=True)
class Pool:
    driver: str
    name: str
    slices: list[dra.ResourceSlice]
    incomplete: bool = False
    invalid_reason: str = ""
    #: Every device of the pool's current slices, in slice order.
    devices: list[Candidate] = field(default_factory=list)
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
    """pools_stable.go nodeMatches: by name, all nodes, or a node selector
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


class SliceIndex:
    """All ResourceSlices, indexed so that a node's pools are found without
    looking at every other node's slices."""

    def __init__(self, slices: Sequence[dra.ResourceSlice]) -> None:
        self.slices = list(slices)
        # Pools by the slices that make them: the same for every pod (pools
        # are never changed once built).
        self._pools: dict[tuple[int, ...], list[Pool]] = {}
        self._by_node: dict[str, list[int]] = {}
        self._elsewhere: list[int] = []  # nodeSelector / allNodes
        #: A node's pools by its name, while no slice selects nodes by label
        #: (then the name alone decides which slices a node reaches).
        self._by_name: dict[str, list[Pool]] = {}
        #: Some slice selects nodes with more than one term (which an
        #: allocation's node selector cannot express: an AllocationError).
        self.multi_term_selectors = any(
            s.spec.node_selector is not None and len(s.spec.node_selector.node_selector_terms) > 1 for s in self.slices
        )
        for i, s in enumerate(self.slices):
            spec = s.spec
            if spec.per_device_node_selection is not None:
                # DRAPartitionableDevices (alpha, off): GatherPools skips these.
                continue
            if spec.node_name:
                self._by_node.setdefault(spec.node_name, []).append(i)
            elif spec.all_nodes or spec.node_selector is not None:
                self._elsewhere.append(i)
            # else: an unknown future way of selecting nodes: skipped, as upstream does.

    def gather_pools(self, node: model.Node | None) -> list[Pool]:
        """pools_stable.go GatherPools: the pools with devices reachable from
        ``node``. The work is the node's own slices plus one node-selector
        test per nodeSelector / allNodes slice."""
        name = node.metadata.name if node is not None else ""
        if not self._elsewhere:
            got = self._by_name.get(name)
            if got is not None:
                return got
        picked = list(self._by_node.get(name, ())) if name else []
        for i in self._elsewhere:
            spec = self.slices[i].spec
            if node_matches(node, None, spec.all_nodes, spec.node_selector):
                picked.append(i)
        picked.sort()
        key = tuple(picked)
        pools = self._pools.get(key)
        if pools is None:
            pools = self._pools[key] = _pools(self.slices[i] for i in picked)
        if not self._elsewhere:
            self._by_name[name] = pools
        return pools


def _pools(slices: Iterable[dra.ResourceSlice]) -> list[Pool]:
    pools: dict[tuple[str, str], Pool] = {}
    for s in slices:
        key = (s.spec.driver, s.spec.pool.name)
        pool = pools.get(key)
        if pool is None:
            pools[key] = Pool(s.spec.driver, s.spec.pool.name, [s])
            continue
        current = pool.slices[0].spec.pool.generation
        if s.spec.pool.generation < current:
            continue  # out-dated
        if s.spec.pool.generation > current:
            pool.slices = []  # newer: replaces all old slices
        pool.slices.append(s)
    for pool in pools.values():
        pool.incomplete = len(pool.slices) != pool.slices[0].spec.pool.resource_slice_count
        seen: set[str] = set()
        for s in pool.slices:
            for d in s.spec.devices:
                if d.name in seen and not pool.invalid_reason:
                    pool.invalid_reason = f"duplicate device name {d.name}"
                seen.add(d.name)
                pool.devices.append(Candidate(DeviceID(pool.driver, pool.name, d.name), d, s))
    return list(pools.values())
