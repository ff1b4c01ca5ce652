"""One ``Allocate`` call on one node: the backtracking search of
``allocator_incubating.go`` (``allocateOne``, ``allocateDevice``,
``isSelectable``, ``checkAvailableCounters``), then the AllocationResults
(results, configs, node selectors) of the solution it found.
``k8s.io/dynamic-resource-allocation`` v0.37.2 unless a line says otherwise;
:mod:`berth.dra.allocator` has the overview.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from fractions import Fraction

from berth.cluster import dra, model
from berth.dra import capacity
from berth.dra.common import (
    ALL,
    AllocationError,
    ClaimPlan,
    Constraint,
    Context,
    FilterTimeout,
    Found,
    Request,
    Stop,
    constraint,
    count_devices,
    kobj,
    read_constraints,
    taint_prevents_allocation,
)
from berth.dra.pools import Candidate, DeviceID, Pool, device_matches_node

__all__ = ["DEADLINE_EVERY", "Run"]

#: How many search steps between two looks at the clock (a deadline).
DEADLINE_EVERY = 256

# allocateOne's outcomes: no solution, a solution, errAllocationResultMaxSizeExceeded.
_NO, _DONE, _EXCEEDED = 0, 1, 2

_EMPTY: dict[str, Fraction] = {}


class Run:
    """One Allocate call on one node (upstream's ``allocator``), over the
    first ``count`` claims of a :class:`~berth.dra.common.Context`;
    ``constraints`` replaces the last claim's constraints (Berth's diagnosis
    tries them one by one)."""

    def __init__(
        self,
        ctx: Context,
        node: model.Node | None,
        count: int,
        constraints: Sequence[dra.DeviceConstraint] | None = None,
        *,
        deadline: float | None = None,
    ) -> None:
        self.p = ctx
        self.features = ctx.features
        self.node = node
        self.claims = ctx.claims[:count]
        self.owners = ctx.owners
        self.state = ctx.state
        self.allocated = ctx.allocated
        self.pools = ctx.slices.gather_pools(node)
        self.requests = ctx.requests
        self.deadline = deadline
        #: allocateOne invocations (upstream's NumAllocateOneInvocations).
        self.steps = 0
        self.constraints: list[list[Constraint]] = []
        # The subrequest chosen for each firstAvailable request, by (claim, request).
        self.selected: dict[tuple[int, int], int] = {}
        # Devices taken whole by this attempt, and by which claims (allocatingDevices).
        self.allocating: dict[DeviceID, set[int]] = {}
        # What this attempt's shares consume of each device (allocatingCapacity).
        self.allocating_capacity: dict[DeviceID, dict[str, Fraction]] = {}
        # Counters this attempt's devices consume, by pool (consumedCounters).
        self.consumed_counters: dict[tuple[str, str], dict[str, dict[str, Fraction]]] = {}
        self.result: list[list[Found]] = [[] for _ in self.claims]
        if ctx.static and constraints is None:
            self.constraints = [[] for _ in self.claims]
            return
        for ci, claim in enumerate(self.claims):
            plan = ctx.plans[ci]
            specs, error = plan.constraints, plan.constraint_error
            if constraints is not None and ci == count - 1:
                specs, error = read_constraints(claim, constraints)
            self._read_claim(ci, claim, plan, specs, error)

    # -- reading the claims: the node's part (see Prepared)

    def _read_claim(
        self,
        ci: int,
        claim: dra.ResourceClaim,
        plan: ClaimPlan,
        specs: list[tuple[str, list[str], str]],
        constraint_error: str,
    ) -> None:
        if plan.dynamic:

            def read(rd: Request, key: tuple[int, int, int]) -> Request:
                return self._all_devices(key, claim, rd) if rd.mode == ALL else rd

            count_devices(claim, plan.ops, self.features.release, read)
        if constraint_error:
            raise AllocationError(constraint_error)
        self.constraints.append([constraint(kind, requests, attribute) for kind, requests, attribute in specs])

    def _all_devices(self, key: tuple[int, int, int], claim: dra.ResourceClaim, template: Request) -> Request:
        """validateDeviceRequest's "All" branch: this node's matching devices.
        With consumable capacity, a device whose capacity cannot hold one
        such allocation at all is left out; one that is merely full stays
        (and the request fails when it gets there)."""
        where = f"claim {kobj(claim)}, request {template.name}"
        rd = replace(template, all_devices=[])
        cc = self.features.consumable_capacity
        # v0.37.2 checks the static capacity only (a full device stays, and
        # the request fails on it); v0.36.3 left out devices without room left.
        static = self.features.release >= 37
        for pool in self.pools:
            if pool.incomplete:
                raise AllocationError(
                    f"{where}: asks for all devices, but resource pool {pool} is currently being updated"
                )
            if pool.invalid:
                raise AllocationError(f"{where}: asks for all devices, but resource pool {pool} is currently invalid")
            for candidate in pool.devices:
                if not self._selectable(key, rd, candidate):
                    continue
                if cc:
                    try:
                        fits = capacity.fits(
                            _EMPTY if static else self.state.capacity.get(candidate.id, _EMPTY),
                            rd.capacity,
                            candidate.device.capacity,
                            None,
                            self.features.fractional_capacity_range,
                            strict=static,
                        )
                    except capacity.CapacityError as e:
                        raise AllocationError(
                            f"{where}: checking capacity for device {candidate.device.name}: {e}"
                        ) from None
                    if not fits:
                        continue
                rd.all_devices.append((pool, candidate))
        rd.num_devices = len(rd.all_devices)
        if self.requests is self.p.requests:
            self.requests = dict(self.p.requests)
        self.requests[key] = rd
        return rd

    # -- the search

    def search(self) -> bool:
        code = self._allocate_one(0, 0, 0, 0, False, 0, 0)
        if code == _EXCEEDED:
            raise Stop("allocation max size exceeded")
        return code == _DONE

    def _allocate_one(
        self, ci: int, ri: int, si: int, di: int, allocating_sub: bool, start_pool: int, start: int
    ) -> int:
        """allocateOne: place device ``di`` of request ``ri`` (subrequest
        ``si``) of claim ``ci``, then everything after it. Within a request
        the next device is looked for after the previous one (``start_pool``,
        ``start``): combinations, not permutations."""
        self.steps += 1
        if self.deadline is not None and self.steps % DEADLINE_EVERY == 1 and time.monotonic() > self.deadline:
            raise FilterTimeout()
        if ci >= len(self.claims):
            return _DONE  # the first full solution wins
        if ri >= len(self.claims[ci].spec.devices.requests):
            code = self._allocate_one(ci + 1, 0, 0, 0, False, 0, 0)
            # Not fatal: another allocation of the claims before may let a
            # subrequest that needs fewer devices fit.
            return _NO if code == _EXCEEDED else code
        rd = self.requests[(ci, ri, si)]

        if not allocating_sub and rd.parent:
            # Subrequests: the first one that can be allocated (with
            # everything after it) is taken.
            all_exceeded = True
            sub = 0
            while (ci, ri, sub) in self.requests:
                code = self._allocate_one(ci, ri, sub, di, True, 0, 0)
                if code == _DONE:
                    self.selected[(ci, ri)] = sub
                    return _DONE
                if code == _NO:
                    all_exceeded = False
                sub += 1
            return _EXCEEDED if all_exceeded else _NO

        do_all = rd.mode == ALL
        if do_all and not rd.all_devices:
            return _NO  # at least one device is required for "All"
        if di >= rd.num_devices:
            return self._allocate_one(ci, ri + 1, 0, 0, False, 0, 0)
        if rd.num_devices - di > dra.ALLOCATION_RESULTS_MAX_SIZE - len(self.result[ci]):
            return _EXCEEDED  # backtrack harder: nothing before this can make room

        if do_all:
            pool, candidate = rd.all_devices[di]
            undo = self._allocate_device(ci, rd, pool, candidate, must=True)
            if undo is None:
                return _NO  # the order does not matter for "All": no solution
            code = self._allocate_one(ci, ri, si, di + 1, allocating_sub, 0, 0)
            if code != _DONE:
                undo()
            return code

        key = (ci, ri, si)
        picked = self.p.match_cache.get(key)
        if picked is None:
            picked = self.p.match_cache[key] = {}
        allocated, allocating, admin = self.allocated, self.allocating, rd.admin_access
        cc = self.features.consumable_capacity
        node = self.node
        pools = self.pools
        for pi in range(start_pool, len(pools)):
            pool = pools[pi]
            if pool.incomplete or pool.invalid_reason:
                continue  # nothing is allocated from these; other pools may do
            devices = pool.devices
            for k in range(start if pi == start_pool else 0, len(devices)):
                candidate = devices[k]
                device_id = candidate.id
                if admin:
                    if ci in allocating.get(device_id, ()):
                        continue
                elif device_id in allocated or allocating.get(device_id):
                    continue
                selectable = picked.get(id(candidate.device))
                if selectable is None:
                    selectable = self._selectable(key, rd, candidate)
                if not selectable:
                    continue
                if candidate.per_device and not device_matches_node(node, candidate.device):
                    continue
                if (
                    cc
                    and (rd.capacity is not None or candidate.device.capacity)
                    and not self._capacity_fits(ci, rd, candidate, "checking")
                ):
                    continue
                undo = self._allocate_device(ci, rd, pool, candidate, must=False)
                if undo is None:
                    continue
                code = self._allocate_one(ci, ri, si, di + 1, allocating_sub, pi, k + 1)
                if code == _DONE:
                    return _DONE
                undo()
                if code == _EXCEEDED:
                    return _EXCEEDED
        return _NO

    def _in_use(self, device_id: DeviceID) -> bool:
        return device_id in self.allocated or bool(self.allocating.get(device_id))

    def _selectable(self, key: tuple[int, int, int], rd: Request, candidate: Candidate) -> bool:
        """isSelectable: class selectors, then the request's (memoised per
        request, node-independent; the per-device node check is the caller's)."""
        device = candidate.device
        if device.binding_conditions and not self.features.device_binding_and_status:
            return False  # devices with binding conditions need the feature
        picked = self.p.match_cache.get(key)
        if picked is None:
            picked = self.p.match_cache[key] = {}
        # The devices are held by the Allocator's slices, so their ids stay theirs.
        hit = picked.get(id(device))
        if hit is not None:
            return hit and (not candidate.per_device or device_matches_node(self.node, device))
        cls = rd.device_class
        ok = self.p.selectors_match(
            candidate, cls.spec.selectors, f"class {cls.metadata.name}"
        ) and self.p.selectors_match(candidate, rd.selectors, self.owners[key[0]])
        picked[id(device)] = ok
        return ok and (not candidate.per_device or device_matches_node(self.node, device))

    def _capacity_fits(self, ci: int, rd: Request, candidate: Candidate, what: str) -> bool:
        """CmpRequestOverCapacity against what is allocated and being allocated."""
        if rd.capacity is None and not candidate.device.capacity:
            return True  # nothing requested, nothing to consume
        device_id = candidate.id
        try:
            return capacity.fits(
                self.state.capacity.get(device_id, _EMPTY),
                rd.capacity,
                candidate.device.capacity,
                self.allocating_capacity.get(device_id),
                self.features.fractional_capacity_range,
                strict=self.features.release >= 37,
            )
        except capacity.CapacityError as e:
            raise AllocationError(
                f"claim {kobj(self.claims[ci])}, request {rd.name}: {what} capacity for device {device_id}: {e}"
            ) from None

    def _capacity_in_use(self, device_id: DeviceID) -> bool:
        """deviceCapacityInUse: some share of the device is allocated or being allocated."""
        return (
            device_id in self.state.capacity or device_id in self.state.shared or device_id in self.allocating_capacity
        )

    def _allocate_device(
        self, ci: int, rd: Request, pool: Pool, candidate: Candidate, *, must: bool
    ) -> Callable[[], None] | None:
        """allocateDevice: take the device for the request if it is free, has
        counters and capacity left, is tolerated and keeps the claim's
        constraints; returns how to give it back, or None."""
        device_id, device = candidate.id, candidate.device
        features = self.features
        multi = features.consumable_capacity and bool(device.allow_multiple_allocations)
        if rd.admin_access:
            if not multi and ci in self.allocating.get(device_id, ()):
                return None
        elif self._in_use(device_id):
            return None
        if device.consumes_counters and not features.partitionable_devices:
            return None
        # A device shared already has its counters charged: a further share must not charge them again.
        counters = bool(device.consumes_counters) and not (multi and self._capacity_in_use(device_id))
        if counters and not self._take_counters(pool, device):
            return None
        base, sub = (rd.parent, rd.name) if rd.parent else (rd.name, "")
        added = 0
        constraints = self.constraints[ci]
        if features.device_taints and device.taints and taint_prevents_allocation(device, rd.tolerations):
            self._rollback(pool, device, counters, constraints, 0, base, sub)
            return None
        for c in constraints:
            if not c.add(base, sub, device, device_id):
                self._rollback(pool, device, counters, constraints, added, base, sub)
                if must:
                    # "A claim where a constraint prevents getting all devices": an error.
                    raise AllocationError(
                        f"claim {kobj(self.claims[ci])}, request {rd.name}: cannot add device {device_id} "
                        "because a claim constraint would not be satisfied"
                    )
                return None
            added += 1
        if not multi:
            self.allocating.setdefault(device_id, set()).add(ci)
        consumed: dict[str, Fraction] | None = None
        existed = False
        if features.consumable_capacity:
            if not self._capacity_fits(ci, rd, candidate, "rechecking"):
                if not multi:
                    self.allocating[device_id].discard(ci)
                self._rollback(pool, device, counters, constraints, added, base, sub)
                return None
            if multi:
                try:
                    consumed = capacity.consumed(rd.capacity, device.capacity, features.fractional_capacity_range)
                except capacity.CapacityError as e:
                    self._rollback(pool, device, counters, constraints, added, base, sub)
                    raise AllocationError(
                        f"claim {kobj(self.claims[ci])}, request {rd.name}: "
                        f"computing consumed capacity for device {device_id}: {e}"
                    ) from None
                existed = device_id in self.allocating_capacity
                entry = self.allocating_capacity.setdefault(device_id, {})
                for name, amount in consumed.items():
                    entry[name] = entry.get(name, Fraction(0)) + amount
        results = self.result[ci]
        before = len(results)
        results.append(Found(rd, candidate, rd.admin_access, multi, consumed or None))

        def undo() -> None:
            del results[before:]
            if consumed is not None:
                entry = self.allocating_capacity.get(device_id)
                if entry is not None:
                    for name, amount in consumed.items():
                        if name in entry:
                            entry[name] -= amount
                    if all(v == 0 for v in entry.values()):
                        # An earlier share of the device still counts as one.
                        if existed:
                            entry.clear()
                        else:
                            del self.allocating_capacity[device_id]
            if not multi:
                self.allocating[device_id].discard(ci)
            self._rollback(pool, device, counters, constraints, added, base, sub)

        return undo

    def _rollback(
        self,
        pool: Pool,
        device: dra.Device,
        counters: bool,
        constraints: list[Constraint],
        added: int,
        base: str,
        sub: str,
    ) -> None:
        """rollbackDevice's constraints and counters, in reverse order."""
        for c in reversed(constraints[:added]):
            c.remove(base, sub)
        if counters:
            self._release_counters(pool, device)

    def _take_counters(self, pool: Pool, device: dra.Device) -> bool:
        """checkAvailableCounters: charge the device's counters; False (and
        nothing charged) when some counter set of the pool would go short."""
        used = self.consumed_counters.setdefault(pool.key, {})
        for set_name, name, amount in self.p.uses(device):
            counters = used.setdefault(set_name, {})
            counters[name] = counters.get(name, Fraction(0)) + amount
        for set_name, left in self.p.counters_left(pool).items():
            taken = used.get(set_name, _EMPTY)
            for name, available in left.items():
                if available < taken.get(name, 0):
                    self._release_counters(pool, device)
                    return False
        return True

    def _release_counters(self, pool: Pool, device: dra.Device) -> None:
        """deallocateCountersForDevice."""
        used = self.consumed_counters[pool.key]
        for set_name, name, amount in self.p.uses(device):
            used[set_name][name] -= amount

    # -- the result

    def results(self) -> list[dra.AllocationResult]:
        out = []
        binding = self.features.device_binding_and_status
        for ci, claim in enumerate(self.claims):
            devices = dra.DeviceAllocationResult()
            for f in self.result[ci]:
                c = f.candidate
                devices.results.append(
                    dra.DeviceRequestAllocationResult(
                        request=f.request.full_name,
                        driver=c.id.driver,
                        pool=c.id.pool,
                        device=c.id.device,
                        admin_access=True if f.admin else None,
                        tolerations=list(f.request.tolerations),
                        binding_conditions=list(c.device.binding_conditions) if binding else [],
                        binding_failure_conditions=list(c.device.binding_failure_conditions) if binding else [],
                        # GenerateNewShareID: a share id per allocation of a shared device.
                        share_id=str(uuid.uuid4()) if f.shared else None,
                        consumed_capacity={n: capacity.format_quantity(v) for n, v in (f.consumed or {}).items()},
                    )
                )
            devices.config = self._configs(ci, claim)
            out.append(dra.AllocationResult(devices=devices, node_selector=self.node_selector(ci)))
        return out

    def chosen(self, ci: int, ri: int) -> Request:
        rd = self.requests[(ci, ri, 0)]
        return self.requests[(ci, ri, self.selected.get((ci, ri), 0))] if rd.parent else rd

    def _configs(self, ci: int, claim: dra.ResourceClaim) -> list[dra.DeviceAllocationConfiguration]:
        """The class configs (each class once, naming all its requests), then
        the claim's configs for the requests (or chosen subrequests) they
        name. v0.37.2 adds a claim config once and drops the request names
        of a config that covers every request; v0.35.4 and v0.36.3 add a
        claim config once per request it names."""
        configs: list[dra.DeviceAllocationConfiguration] = []
        by_class: dict[str, tuple[int, int]] = {}
        requests = claim.spec.devices.requests
        for ri in range(len(requests)):
            rd = self.chosen(ci, ri)
            cls = rd.device_class
            span = by_class.get(cls.metadata.name)
            if span is not None:
                for i in range(*span):
                    configs[i].requests.append(rd.full_name)
                continue
            start = len(configs)
            for c in cls.spec.config:
                configs.append(
                    dra.DeviceAllocationConfiguration(
                        source=dra.CONFIG_SOURCE_CLASS, requests=[rd.full_name], opaque=c.opaque
                    )
                )
            by_class[cls.metadata.name] = (start, len(configs))
        once = self.features.release >= 37
        for config in claim.spec.devices.config:
            if not config.requests:
                configs.append(dra.DeviceAllocationConfiguration(source=dra.CONFIG_SOURCE_CLAIM, opaque=config.opaque))
                continue
            for ri, request in enumerate(requests):
                rd = self.chosen(ci, ri)
                if request.name in config.requests or (rd.parent and rd.full_name in config.requests):
                    configs.append(
                        dra.DeviceAllocationConfiguration(
                            source=dra.CONFIG_SOURCE_CLAIM, requests=list(config.requests), opaque=config.opaque
                        )
                    )
                    if once:
                        break
        if once:
            for made in configs:
                if made.requests and all(
                    request.name in made.requests or self.chosen(ci, ri).full_name in made.requests
                    for ri, request in enumerate(requests)
                ):
                    made.requests = []  # "empty means all"
        return configs

    def node_selector(self, ci: int, *, build: bool = True) -> model.NodeSelector | None:
        """createNodeSelector: the node itself when a device is node-local
        or binds to a node, else the union of the devices' node selectors,
        else None. Without ``build`` only its errors are raised
        (:meth:`berth.dra.allocator.Prepared.solve`)."""
        fields: list[model.NodeSelectorRequirement] = []
        expressions: list[model.NodeSelectorRequirement] = []
        for f in self.result[ci]:
            c = f.candidate
            if c.per_device:
                node_name, selector = c.device.node_name, c.device.node_selector
            else:
                node_name, selector = c.slice.spec.node_name, c.slice.spec.node_selector
            if node_name or c.device.binds_to_node:
                if not build:
                    return None
                target = self.node.metadata.name if self.node is not None else node_name or ""
                return model.NodeSelector(
                    node_selector_terms=[
                        model.NodeSelectorTerm(
                            match_fields=[
                                model.NodeSelectorRequirement(key="metadata.name", operator="In", values=[target])
                            ]
                        )
                    ]
                )
            if selector is None or not selector.node_selector_terms:
                continue
            if len(selector.node_selector_terms) > 1:
                raise AllocationError(
                    f"create NodeSelector for claim {self.claims[ci].metadata.name}: unsupported "
                    f"ResourceSlice.NodeSelector with {len(selector.node_selector_terms)} terms"
                )
            if not build:
                continue
            term = selector.node_selector_terms[0]
            _add_requirements(term.match_fields, fields)
            _add_requirements(term.match_expressions, expressions)
        if fields or expressions:
            return model.NodeSelector(
                node_selector_terms=[model.NodeSelectorTerm(match_expressions=expressions, match_fields=fields)]
            )
        return None


def _add_requirements(source: list[model.NodeSelectorRequirement], into: list[model.NodeSelectorRequirement]) -> None:
    """addNewNodeSelectorRequirements: append the ones not there yet (values as a set)."""
    for r in source:
        if not any(e.key == r.key and e.operator == r.operator and set(e.values) == set(r.values) for e in into):
            into.append(model.NodeSelectorRequirement(key=r.key, operator=r.operator, values=list(r.values)))


def taken_by(run: Run, ci: int) -> dict[DeviceID, set[int]]:
    """Devices a solution for the claims before ``ci`` takes whole (empty if none)."""
    if ci == 0:
        return {}
    before = Run(run.p, run.node, ci, deadline=run.deadline)
    return before.allocating if before.search() else {}
