"""The structured allocator: a port of ``allocator_incubating.go``
(``k8s.io/dynamic-resource-allocation/structured/internal/incubating``,
v0.37.2), the implementation kube-scheduler picks for the default gates of
1.35, 1.36 and 1.37 (``structured/allocator.go``'s table: the first
implementation supporting every enabled feature; ``stable`` lacks
consumable capacity and binding conditions). Where the three releases'
allocators differ without a feature, :attr:`Features.release` says which to
follow (each place cites it).

Allocate claims one after the other and, within a claim, its requests; for
each device a request needs, try the eligible devices of the pools the node
reaches in order (not in use, selected by the class's and the request's CEL
selectors, on this node, with enough capacity and counters left, tolerated,
satisfying the claim's constraints), mark it in use and recurse; on a dead
end undo the last choice and try the next device (backtracking; within a
request only combinations, not permutations, are tried). The first full
solution wins. ``firstAvailable`` subrequests are tried in order; a request
for "All" devices takes exactly the matching devices of the reachable pools,
all of which must be free.

Where Berth differs from upstream (each marked ``Berth:`` below):

- When no solution exists, :meth:`Prepared.solve` says why (which claim,
  which request, which reason) instead of returning nil; the diagnosis runs
  only after the search failed and never changes its outcome.
- Selector results are memoised per (expression, device) for the life of the
  Allocator, not per call, so one Allocator serves many nodes and pods.
- The claims are read and validated once per list of claims
  (:meth:`Allocator.prepare`, in kube-scheduler's PreFilter), not once per
  node; only "All" requests are re-read per node (:class:`Prepared`). A
  solution's AllocationResults (and the share ids of devices allocated more
  than once) are built only when asked for (:class:`Solution`), i.e. for the
  node the pod gets.
- Given the pools' versions (the DraStore's), a node's outcome is remembered
  per (its pools, the claims' specs) and reused while no device of those
  pools has entered or left the devices in use (:meth:`Prepared.solve`):
  with one claim template for many pods, a cycle searches only the nodes
  whose devices changed since the last one.
- A timeout is a deadline checked every 256 steps of the search, not a
  context (kube-scheduler's DRASchedulerFilterTimeout): :class:`FilterTimeout`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from fractions import Fraction
from typing import cast

import msgspec

from berth.cluster import dra, model
from berth.dra import capacity, cel, pools
from berth.dra.common import (
    ALL,
    EXACT_COUNT,
    REASON_DEVICES_ALLOCATED,
    REASON_INVALID_POOLS,
    AllocatedState,
    AllocationError,
    ClaimPlan,
    Features,
    FilterTimeout,
    Op,
    Request,
    Unsatisfiable,
    as_state,
    count_devices,
    kobj,
    read_constraints,
)
from berth.dra.diagnose import diagnose
from berth.dra.pools import Candidate, Counters, DeviceID, DeviceKey, Pool, SliceIndex
from berth.dra.search import Run

__all__ = ["Allocator", "Prepared", "Solution"]

#: Bounds the per-node memo (nodes x distinct claim specs); cleared when full.
MEMO_MAX_ENTRIES = 100_000
_SPEC_ENCODER = msgspec.json.Encoder(order="deterministic")


# ---------------------------------------------------------------- allocator


class Allocator:
    """Allocates devices for the unallocated claims of one pod on one node.

    Built once over a snapshot of the DeviceClasses and ResourceSlices
    (``structured.NewAllocator``) and used for many nodes and pods as long as
    that snapshot holds; selector results are memoised in it. Not thread-safe
    (one scheduling cycle at a time uses it)."""

    def __init__(
        self,
        *,
        classes: Mapping[str, dra.DeviceClass] | Callable[[str], dra.DeviceClass | None],
        slices: Sequence[dra.ResourceSlice],
        features: Features | None = None,
        cel_cache: cel.Cache | None = None,
    ) -> None:
        self.features = features or Features()
        self._get_class = classes if callable(classes) else classes.get
        self.slices = SliceIndex(slices, partitionable=self.features.partitionable_devices)
        self.cel_cache = cel_cache if cel_cache is not None else cel.Cache()
        # Berth: per (expression, device) rather than per Allocate call. The
        # devices are held by self.slices, so their ids stay theirs.
        self._matches: dict[tuple[str, int], bool] = {}
        self._inputs: dict[int, cel.DeviceInput] = {}
        #: Berth: whether a request's class and selectors pick a device, by
        #: (class name, the request's expressions) and then id(device): a
        #: class cannot change under an Allocator (see DraStore.generation).
        self.picks: dict[tuple[str, tuple[str, ...]], dict[int, bool]] = {}
        #: A device's counter consumption, parsed once: id(device) -> (set, counter, amount).
        self.counter_uses: dict[int, list[tuple[str, str, Fraction]]] = {}
        #: Berth: the last outcome per (a node's pools, the claims' specs),
        #: with the pools' versions it was found at (see Prepared.solve).
        self.memo: dict[tuple[int, bytes], tuple[list[int], Run | tuple[int, str, str, str], list[DeviceID]]] = {}

    def allocate(
        self,
        node: model.Node | None,
        claims: Sequence[dra.ResourceClaim],
        allocated: AbstractSet[DeviceKey] | AllocatedState = frozenset(),
    ) -> list[dra.AllocationResult] | Unsatisfiable:
        """One allocation per claim, in order (``Allocator.Allocate``), or why
        there is none on ``node``.

        ``allocated`` are the devices already in use: allocated to any claim
        (by any scheduler) and in flight (reserved, not yet written).
        Raises AllocationError for claims that cannot be allocated anywhere."""
        outcome = self.prepare(claims, allocated).solve(node)
        return outcome if isinstance(outcome, Unsatisfiable) else outcome.results()

    def prepare(
        self,
        claims: Sequence[dra.ResourceClaim],
        allocated: AbstractSet[DeviceKey] | AllocatedState = frozenset(),
        *,
        versions: Mapping[tuple[str, str], int] | None = None,
        timeout: float | None = None,
    ) -> Prepared:
        """The claims read and validated once, for :meth:`Prepared.solve` on
        each node (what kube-scheduler's PreFilter and Filter split: see
        :class:`Prepared`). ``allocated`` as for :meth:`allocate`; it must not
        change while the Prepared is used.

        ``versions`` ((driver, pool) -> a number that changes whenever a
        device of the pool enters or leaves ``allocated``, as the DraStore
        keeps them) lets a node's outcome be reused from an earlier call for
        claims with the same specs while its pools' versions stay put.
        ``timeout`` (seconds) bounds each node's search (FilterTimeout)."""
        return Prepared(self, claims, as_state(allocated), versions, timeout)

    def class_devices(self, node: model.Node, device_class: dra.DeviceClass, state: AllocatedState) -> tuple[int, int]:
        """calculateDRAResourceTotals (noderesources ``resource_allocation.go``
        v1.37.2): how many devices of every slice reaching ``node`` the class
        selects, and how many of those are allocated (whole or shared). Every
        slice counts, whatever its pool's state; a class whose selectors fail
        to evaluate counts nothing (upstream logs the error, scores 0)."""
        capacity = allocated = 0
        selectors = device_class.spec.selectors
        owner = f"class {device_class.metadata.name}"
        try:
            for s in self.slices.slices:
                spec = s.spec
                if spec.per_device_node_selection:
                    devices = [d for d in spec.devices if pools.device_matches_node(node, d)]
                elif _slice_reaches(spec, node):
                    devices = spec.devices
                else:
                    continue
                for device in devices:
                    device_id = DeviceID(spec.driver, spec.pool.name, device.name)
                    candidate = Candidate(device_id, device, s, bool(spec.per_device_node_selection))
                    if selectors and not self.selectors_match(candidate, selectors, owner):
                        continue
                    capacity += 1
                    allocated += state.holds(device_id)
        except AllocationError:
            return 0, 0
        return capacity, allocated

    # -- selectors (shared by all runs)

    def _device_input(self, candidate: Candidate) -> cel.DeviceInput:
        key = id(candidate.device)
        got = self._inputs.get(key)
        if got is None:
            # v0.36.3's CEL knew list-typed attributes only with DRAListTypeAttributes (off).
            lists = self.features.release >= 37
            got = self._inputs[key] = cel.device_input(candidate.id.driver, candidate.device, lists=lists)
        return got

    def selectors_match(
        self,
        candidate: Candidate,
        selectors: Sequence[dra.DeviceSelector],
        owner: str,
    ) -> bool:
        """selectorsMatch: all selectors are true for the device. ``owner``
        ("class X" / "claim Y") prefixes errors."""
        for i, selector in enumerate(selectors):
            assert selector.cel is not None  # checked when the request was read
            expression = selector.cel.expression
            key = (expression, id(candidate.device))
            matches = self._matches.get(key)
            if matches is None:
                compiled = self.cel_cache.get_or_compile(expression)
                if compiled.error is not None:
                    raise AllocationError(f"{owner}: selector #{i}: CEL compile error: {compiled.error}")
                try:
                    matches = compiled.device_matches(self._device_input(candidate))
                except cel.CelRuntimeError as e:
                    # v0.37.2 names the device; v0.35.4 and v0.36.3 do not.
                    on = f" on device {candidate.id}" if self.features.release >= 37 else ""
                    raise AllocationError(f"{owner}: selector #{i}{on}: CEL runtime error: {e}") from None
                self._matches[key] = matches
            if not matches:
                return False
        return True

    def uses(self, device: dra.Device) -> list[tuple[str, str, Fraction]]:
        """The device's counter consumption, parsed."""
        got = self.counter_uses.get(id(device))
        if got is None:
            got = self.counter_uses[id(device)] = [
                (use.counter_set, name, capacity.parse(c.value))
                for use in device.consumes_counters
                for name, c in use.counters.items()
            ]
        return got


class Prepared:
    """The node-independent part of ``Allocate`` for one list of claims,
    built once per scheduling cycle and used for every node.

    Upstream's ``NewAllocator`` + ``Allocate`` re-read and validate the claims
    on every node (the ``alloc.claimsToAllocate`` loop at the start of
    ``Allocate``); nothing there depends on the node but the devices of "All"
    requests, so Berth reads them once here and replays only that part per
    node (:class:`ClaimPlan`). Validation errors are kept and raised at the
    same point of the same node's run, so each node's outcome and message
    are what a fresh Allocate would give. Which devices the requests'
    selectors pick is memoised per request (a device's attributes do not
    change within a cycle); so are the counters the pools have left."""

    def __init__(
        self,
        owner: Allocator,
        claims: Sequence[dra.ResourceClaim],
        allocated: AllocatedState,
        versions: Mapping[tuple[str, str], int] | None = None,
        timeout: float | None = None,
    ) -> None:
        self.a = owner
        self.features = owner.features
        self.claims = list(claims)
        self.versions = versions
        self.timeout = timeout
        # What the outcome on a node depends on besides the node's pools and
        # their devices in use: the claims' specs (names only show in
        # messages, which solve re-addresses).
        self.signature = b"\0".join(_SPEC_ENCODER.encode(c.spec) for c in self.claims) if versions is not None else b""
        self.owners = [f"claim {kobj(c)}" for c in self.claims]
        self.state = allocated
        self.allocated = allocated.devices
        self._unsatisfiable: dict[tuple[int, str, str, str], Unsatisfiable] = {}
        #: The last search's steps (allocateOne invocations), for tests and benchmarks.
        self.steps = 0
        #: Counters each pool has left once the allocated devices took theirs (availableCounters).
        self.available_counters: dict[tuple[str, str], Counters] = {}
        #: The request templates by (claim, request, subrequest); a node's run
        #: replaces the "All" ones with its own copies.
        self.requests: dict[tuple[int, int, int], Request] = {}
        #: Per request key: id(device) -> whether the class's and the request's selectors pick it.
        self.match_cache: dict[tuple[int, int, int], dict[int, bool]] = {}
        self.plans = [self._plan(ci, claim) for ci, claim in enumerate(self.claims)]
        #: Every claim reads the same on every node, without error or
        #: constraint: a node's run needs no reading at all.
        self.static = all(
            not plan.dynamic and not plan.constraint_error and not plan.constraints for plan in self.plans
        )
        #: No slice selects nodes with more than one term: the node selectors
        #: of a solution cannot fail (createNodeSelector's only error).
        self.selectors_cannot_fail = not owner.slices.multi_term_selectors

    def solve(self, node: model.Node | None) -> Solution | Unsatisfiable:
        """``Allocate`` on ``node``: a solution (its results built on demand)
        or why there is none. Raises AllocationError as Allocate would, and
        FilterTimeout past the deadline.

        Berth: with ``versions``, the outcome is memoised per (the node's
        pools, the claims' specs) and reused while the pools' versions are
        the ones it was found at. The search and the diagnosis read nothing
        else (the classes and slices are the Allocator's, the devices in use
        only those of these pools), so the outcome is the one a fresh search
        would find. A reused solution is still checked to hold no device in
        use: were a version ever not moved, the worst would be another free
        device than a fresh search picks, never a device in use."""
        versions = self.versions
        if versions is None:
            return self._solve(node)
        pools = self.a.slices.gather_pools(node)
        if self.a.slices.node_dependent.get(id(pools)):
            return self._solve(node)  # the outcome depends on the node itself, not only its pools
        stamp = [versions.get(p.key, 0) for p in pools]
        key = (id(pools), self.signature)
        hit = self.a.memo.get(key)
        if hit is not None and hit[0] == stamp:
            known = hit[1]
            if isinstance(known, Run):
                allocated = self.allocated
                for device_id in hit[2]:
                    if device_id in allocated:
                        break
                else:
                    return Solution(known)
            else:
                return self._readdressed(*known)
        outcome = self._solve(node)
        if len(self.a.memo) >= MEMO_MAX_ENTRIES:
            self.a.memo.clear()
        if isinstance(outcome, Solution):
            taken = [f.candidate.id for found in outcome.run.result for f in found if not f.admin and not f.shared]
            self.a.memo[key] = (stamp, outcome.run, taken)
        else:
            keys = [c.key for c in self.claims]
            before = f"claim {outcome.claim}"
            if outcome.claim in keys and outcome.message.startswith(before):
                why = (keys.index(outcome.claim), outcome.request, outcome.reason, outcome.message[len(before) :])
                self.a.memo[key] = (stamp, why, [])
            elif outcome.reason == REASON_INVALID_POOLS:
                self.a.memo[key] = (stamp, (-1, outcome.request, outcome.reason, outcome.message), [])
        return outcome

    def _readdressed(self, ci: int, request: str, reason: str, rest: str) -> Unsatisfiable:
        """A remembered Unsatisfiable, for this Prepared's claim ``ci``: its
        message starts with ``claim <namespace/name>``, the rest is the
        same. One object per distinct outcome (many nodes share one)."""
        key = (ci, request, reason, rest)
        got = self._unsatisfiable.get(key)
        if got is None:
            if ci < 0:
                got = Unsatisfiable("", request, reason, rest)
            else:
                claim = self.claims[ci].key
                got = Unsatisfiable(claim, request, reason, f"claim {claim}{rest}")
            self._unsatisfiable[key] = got
        return got

    def _solve(self, node: model.Node | None) -> Solution | Unsatisfiable:
        deadline = time.monotonic() + self.timeout if self.timeout else None
        run = Run(self, node, len(self.claims), deadline=deadline)
        found = run.search()
        self.steps = run.steps
        if found:
            if not self.selectors_cannot_fail:
                for ci in range(len(self.claims)):
                    run.node_selector(ci, build=False)  # its errors are Allocate's, not Reserve's
            return Solution(run)
        invalid = next((p for p in run.pools if p.invalid), None)
        if invalid is not None:
            # "Not a fatal error, allocation on other nodes may proceed."
            return self._readdressed(-1, "", REASON_INVALID_POOLS, REASON_INVALID_POOLS)
        try:
            return diagnose(run)
        except FilterTimeout:
            # Berth: the search has failed already; the diagnosis is extra.
            claim = self.claims[-1].key
            return Unsatisfiable(
                claim, "", REASON_DEVICES_ALLOCATED, f"claim {claim}: no devices for all its requests and constraints"
            )

    @property
    def slices(self) -> SliceIndex:
        return self.a.slices

    def selectors_match(self, candidate: Candidate, selectors: Sequence[dra.DeviceSelector], owner: str) -> bool:
        return self.a.selectors_match(candidate, selectors, owner)

    def uses(self, device: dra.Device) -> list[tuple[str, str, Fraction]]:
        return self.a.uses(device)

    def counters_left(self, pool: Pool) -> Counters:
        """availableCounters of a pool: its counter sets minus what the
        allocated devices (of every slice of the pool) consume."""
        got = self.available_counters.get(pool.key)
        if got is None:
            got = {name: dict(counters) for name, counters in pool.counter_sets.items()}
            state = self.state
            for device_id, device in [*((c.id, c.device) for c in pool.devices), *pool.other_devices]:
                if not state.holds(device_id):
                    continue
                for set_name, name, amount in self.a.uses(device):
                    left = got.get(set_name)
                    if left is not None and name in left:
                        left[name] -= amount  # may go negative: then nothing is left
            self.available_counters[pool.key] = got
        return got

    # -- reading the claims (the first part of Allocate)

    def _plan(self, ci: int, claim: dra.ResourceClaim) -> ClaimPlan:
        ops: list[Op] = []
        dynamic = False
        features = self.features
        where = f"claim {kobj(claim)}"
        for ri, request in enumerate(claim.spec.devices.requests):
            if request.first_available:
                if not features.prioritized_list:
                    message = (
                        f"{where}, request {request.name}: has subrequests, "
                        "but the DRAPrioritizedList feature is disabled"
                    )
                    ops.append(("raise", message, None, -1))
                    break
                if not features.consumable_capacity:
                    sub = next((s for s in request.first_available if s.capacity is not None), None)
                    if sub is not None:
                        message = (
                            f"{where}, subrequest {sub.name}: has capacity requests, "
                            "but the DRAConsumableCapacity feature is disabled"
                        )
                        ops.append(("raise", message, None, -1))
                        break
                failed = False
                for si, sub in enumerate(request.first_available):
                    rd = Request(
                        sub.name,
                        request.name,
                        dra.DeviceClass(),
                        sub.selectors,
                        sub.allocation_mode,
                        sub.count,
                        False,
                        sub.tolerations,
                        sub.capacity,
                    )
                    error = self._validate(claim, rd, sub.device_class_name, has_admin_access=False)
                    if error:
                        ops.append(("raise", error, None, -1))
                        failed = True
                        break
                    self.requests[(ci, ri, si)] = rd
                    self._share_picks((ci, ri, si), rd)
                    ops.append(("req", (ci, ri, si), rd, ri))
                if failed:
                    break
            else:
                exactly = request.exactly
                if exactly is None:
                    message = f"{where}, request {request.name}: missing device class name (unsupported request type?)"
                    ops.append(("raise", message, None, -1))
                    break
                if not features.consumable_capacity and exactly.capacity is not None:
                    message = (
                        f"{where}, request {request.name}: has capacity requests, "
                        "but the DRAConsumableCapacity feature is disabled"
                    )
                    ops.append(("raise", message, None, -1))
                    break
                rd = Request(
                    request.name,
                    "",
                    dra.DeviceClass(),
                    exactly.selectors,
                    exactly.allocation_mode,
                    exactly.count,
                    bool(exactly.admin_access),
                    exactly.tolerations,
                    exactly.capacity,
                )
                error = self._validate(
                    claim, rd, exactly.device_class_name, has_admin_access=exactly.admin_access is not None
                )
                if error:
                    ops.append(("raise", error, None, -1))
                    break
                self.requests[(ci, ri, 0)] = rd
                self._share_picks((ci, ri, 0), rd)
                ops.append(("req", (ci, ri, 0), rd, -1))
            ops.append(("end", request.name, None, -1))
        constraints, constraint_error = read_constraints(claim, claim.spec.devices.constraints)
        dynamic = any(op[0] == "raise" or (op[0] == "req" and cast(Request, op[2]).mode == ALL) for op in ops)
        min_devices = 0
        if not dynamic:
            try:
                min_devices = count_devices(claim, ops, features.release, lambda rd, key: rd)
            except AllocationError:
                dynamic = True  # the replay raises it where upstream does
        return ClaimPlan(ops, dynamic, min_devices, constraints, constraint_error)

    def _share_picks(self, key: tuple[int, int, int], rd: Request) -> None:
        """The request's selector results, shared with every request (of any
        cycle) of the same class and expressions."""
        expressions = tuple(s.cel.expression for s in rd.selectors if s.cel is not None)
        sig = (rd.device_class.metadata.name, expressions)
        picks = self.a.picks.get(sig)
        if picks is None:
            picks = self.a.picks[sig] = {}
        self.match_cache[key] = picks

    def _validate(self, claim: dra.ResourceClaim, rd: Request, class_name: str, *, has_admin_access: bool) -> str:
        """validateDeviceRequest, but for the devices of an "All" request
        (:meth:`Run._all_devices`): the error, or ""."""
        where = f"claim {kobj(claim)}, request {rd.name}"
        for i, selector in enumerate(rd.selectors):
            if selector.cel is None:
                return f"{where}, selector #{i}: CEL expression empty (unsupported selector type?)"
        if not self.features.admin_access and has_admin_access:
            return f"{where}: admin access is requested, but the feature is disabled"
        if not class_name:
            return f"{where}: missing device class name (unsupported request type?)"
        device_class = self.a._get_class(class_name)
        if device_class is None:
            return f"{where}: could not retrieve device class {class_name}: not found"
        rd.device_class = device_class
        if rd.mode == EXACT_COUNT:
            rd.num_devices = rd.count
        elif rd.mode != ALL:
            return f"{where}: unsupported count mode {rd.mode}"
        return ""


class Solution:
    """The devices found for the claims on one node; :meth:`results` builds
    the AllocationResults (only for the node the pod gets). The run may be
    one for other claims of the same specs (see Prepared.solve): the results
    depend on the specs only, and each Solution draws its own share ids."""

    __slots__ = ("_results", "run")

    def __init__(self, run: Run) -> None:
        self.run = run
        self._results: list[dra.AllocationResult] | None = None

    def results(self) -> list[dra.AllocationResult]:
        if self._results is None:
            self._results = self.run.results()
        return self._results

    def request_names(self) -> list[list[str]]:
        """Per claim, the (sub)request of each device found: what
        DynamicResources' Score reads, without building the results."""
        return [[f.request.full_name for f in found] for found in self.run.result]


def _slice_reaches(spec: dra.ResourceSliceSpec, node: model.Node) -> bool:
    """calculateDRAResourceTotals' slice-level node selection: all nodes, the
    node's own name, or a node selector matching it."""
    if spec.all_nodes or spec.node_name == node.metadata.name:
        return True
    if spec.node_selector is not None:
        return pools.node_matches(node, None, None, spec.node_selector)
    return not spec.node_name
