"""The structured allocator: a port of ``allocator_stable.go``
(``k8s.io/dynamic-resource-allocation/structured/internal/stable``, v0.34.4).

Allocate claims one after the other and, within a claim, its requests; for
each device a request needs, try every eligible device of every pool the node
reaches (not in use, selected by the class's and the request's CEL selectors,
tolerated, satisfying the claim's constraints), mark it in use and recurse; on
a dead end undo the last choice and try the next device (backtracking). The
first full solution wins. ``firstAvailable`` subrequests are tried in order; a
request for "All" devices takes exactly the matching devices of the reachable
pools, all of which must be free.

Where Berth differs from upstream (each marked ``Berth:`` below):

- When no solution exists, :func:`Allocator.allocate` says why (which claim,
  which request, which reason) instead of returning nil; the diagnosis runs
  only after the search failed and never changes its outcome.
- Selector results are memoised per (expression, device) for the life of the
  Allocator, not per call, so one Allocator serves many nodes and pods.
- The claims are read and validated once per list of claims
  (:meth:`Allocator.prepare`, in kube-scheduler's PreFilter), not once per
  node; only "All" requests are re-read per node (:class:`Prepared`). A
  solution's AllocationResults are built only when asked for
  (:class:`Solution`), i.e. for the node the pod gets.
- Given the pools' versions (the DraStore's), a node's outcome is remembered
  per (its pools, the claims' specs) and reused while no device of those
  pools has entered or left the devices in use (:meth:`Prepared.solve`):
  with one claim template for many pods, a cycle searches only the nodes
  whose devices changed since the last one.
- A "All" subrequest that is not the first keeps its own index while
  recursing (upstream drops ``subRequestIndex`` there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import cast

import msgspec

from berth.cluster import dra, model
from berth.dra import cel
from berth.dra.pools import Candidate, DeviceID, Pool, SliceIndex
from berth.errors import InvalidArgument

__all__ = [
    "REASON_CONSTRAINT",
    "REASON_DEVICES_ALLOCATED",
    "REASON_NO_MATCHING_DEVICE",
    "REASON_POOL_INCOMPLETE",
    "AllocationError",
    "Allocator",
    "DeviceID",
    "Features",
    "Pool",
    "Prepared",
    "Solution",
    "Unsatisfiable",
    "lookup_attribute",
]

ALL = dra.ALLOCATION_MODE_ALL
EXACT_COUNT = dra.ALLOCATION_MODE_EXACT_COUNT
MAX_RESULTS = dra.ALLOCATION_RESULTS_MAX_SIZE
#: Bounds the per-node memo (nodes x distinct claim specs); cleared when full.
MEMO_MAX_ENTRIES = 100_000
_SPEC_ENCODER = msgspec.json.Encoder(order="deterministic")

#: No device of the reachable pools passes the class's and the request's selectors.
REASON_NO_MATCHING_DEVICE = "no device matching the selectors"
#: Enough devices match, but too few of them are free (allocated to other
#: claims, in flight, or taken by this pod's other requests).
REASON_DEVICES_ALLOCATED = "all matching devices are allocated"
#: Free devices match every request, but not with a common attribute value.
REASON_CONSTRAINT = "constraint unmet"
#: "All" devices asked for while a pool is being updated (reported as an error upstream).
REASON_POOL_INCOMPLETE = "resource pool incomplete"


class AllocationError(InvalidArgument):
    """The claims cannot be allocated anywhere because of what they (or their
    classes, or the slices) say: an unknown class, a selector that does not
    compile or fails at run time, an unsupported field, too many devices.
    Upstream returns these as errors and kube-scheduler's Filter answers
    ``Error`` (retry with backoff), not Unschedulable."""


@dataclass(frozen=True, slots=True)
class Features:
    """The feature gates the allocator honours (``structured.Features``), by
    default as kube-scheduler v1.34 has them."""

    #: DRAAdminAccess (beta, on): ``adminAccess`` requests may use allocated devices.
    admin_access: bool = True
    #: DRAPrioritizedList (beta, on): ``firstAvailable`` subrequests.
    prioritized_list: bool = True
    #: DRADeviceTaints (alpha, off): devices' taints must be tolerated.
    device_taints: bool = False


@dataclass(frozen=True, slots=True)
class Unsatisfiable:
    """Why the claims cannot be allocated on this node.

    ``claim`` is the claim's ``namespace/name``, ``request`` the request (or
    ``request/subrequest``) that could not be met, ``reason`` one of the
    ``REASON_*`` constants, ``message`` the sentence to show a user."""

    claim: str
    request: str
    reason: str
    message: str

    def __str__(self) -> str:
        return self.message


# ---------------------------------------------------------------- requests


@dataclass(slots=True)
class _Request:
    """requestData: one request, or one subrequest of a firstAvailable list."""

    name: str
    parent: str  # the parent request of a subrequest, else ""
    device_class: dra.DeviceClass
    selectors: list[dra.DeviceSelector]
    mode: str
    count: int
    admin_access: bool
    tolerations: list[dra.DeviceToleration]
    num_devices: int = 0
    all_devices: list[Candidate] = field(default_factory=list)

    @property
    def full_name(self) -> str:
        return f"{self.parent}/{self.name}" if self.parent else self.name


def _kobj(claim: dra.ResourceClaim) -> str:
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
    """allocator_stable.go lookupAttribute: by fully qualified name, or by id
    when the domain is the device's driver."""
    attr = device.attributes.get(name)
    if attr is not None:
        return attr
    domain, sep, ident = name.partition("/")
    if not sep or domain != device_id.driver:
        return None
    return device.attributes.get(ident)


class _MatchAttribute:
    """matchAttributeConstraint: all devices of the named requests (all
    requests when none are named) share one value of ``attribute``."""

    __slots__ = ("attribute", "num_devices", "requests", "value")

    def __init__(self, requests: list[str], attribute: str) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute
        self.value: tuple[str, object] | None = None
        self.num_devices = 0

    def _applies(self, request: str, sub: str) -> bool:
        if not self.requests:
            return True
        return request in self.requests or (bool(sub) and f"{request}/{sub}" in self.requests)

    def add(self, request: str, sub: str, device: dra.Device, device_id: DeviceID) -> bool:
        if not self._applies(request, sub):
            return True
        attr = lookup_attribute(device, device_id, self.attribute)
        if attr is None:
            return False
        value = _attribute_value(attr)
        if self.num_devices == 0:
            self.value = value
            self.num_devices = 1
            return True
        if value is None or value != self.value:
            return False
        self.num_devices += 1
        return True

    def remove(self, request: str, sub: str, device: dra.Device, device_id: DeviceID) -> None:
        if self._applies(request, sub):
            self.num_devices -= 1


def _tolerates(toleration: dra.DeviceToleration, taint: dra.DeviceTaint) -> bool:
    """resourceclaim.ToleratesTaint (devicetoleration.go)."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


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
        self.slices = SliceIndex(slices)
        self.cel_cache = cel_cache if cel_cache is not None else cel.Cache()
        # Berth: per (expression, device) rather than per Allocate call. The
        # devices are held by self.slices, so their ids stay theirs.
        self._matches: dict[tuple[str, int], bool] = {}
        self._inputs: dict[int, cel.DeviceInput] = {}
        #: Berth: whether a request's class and selectors pick a device, by
        #: (class name, the request's expressions) and then id(device): a
        #: class cannot change under an Allocator (see DraStore.generation).
        self.picks: dict[tuple[str, tuple[str, ...]], dict[int, bool]] = {}
        #: Berth: the last outcome per (a node's pools, the claims' specs),
        #: with the pools' versions it was found at (see Prepared.solve).
        self.memo: dict[tuple[int, bytes], tuple[list[int], _Run | tuple[int, str, str, str], list[DeviceID]]] = {}

    def allocate(
        self,
        node: model.Node | None,
        claims: Sequence[dra.ResourceClaim],
        allocated: AbstractSet[DeviceID] = frozenset(),
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
        allocated: AbstractSet[DeviceID] = frozenset(),
        *,
        versions: Mapping[tuple[str, str], int] | None = None,
    ) -> Prepared:
        """The claims read and validated once, for :meth:`Prepared.solve` on
        each node (what kube-scheduler's PreFilter and Filter split: see
        :class:`Prepared`). ``allocated`` as for :meth:`allocate`; it must not
        change while the Prepared is used.

        ``versions`` ((driver, pool) -> a number that changes whenever a
        device of the pool enters or leaves ``allocated``, as the DraStore
        keeps them) lets a node's outcome be reused from an earlier call for
        claims with the same specs while its pools' versions stay put."""
        return Prepared(self, claims, allocated, versions)

    # -- selectors (shared by all runs)

    def _device_input(self, candidate: Candidate) -> cel.DeviceInput:
        key = id(candidate.device)
        got = self._inputs.get(key)
        if got is None:
            got = self._inputs[key] = cel.device_input(candidate.id.driver, candidate.device)
        return got

    def selectors_match(
        self,
        candidate: Candidate,
        selectors: Sequence[dra.DeviceSelector],
        owner: str,
    ) -> bool:
        """allocator_stable.go selectorsMatch: all selectors are true for the
        device. ``owner`` ("class X" / "claim Y") prefixes errors."""
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
                    raise AllocationError(f"{owner}: selector #{i}: CEL runtime error: {e}") from None
                self._matches[key] = matches
            if not matches:
                return False
        return True


@dataclass(slots=True)
class _ClaimPlan:
    """What reading one claim (``_read_claim``) finds out without a node.

    ``ops`` replays the reading in upstream's order: ``("req", key, template,
    group)`` for a request (``group`` is the parent request's index for a
    firstAvailable subrequest, else -1) and ``("raise", message)`` for a
    validation error at that point. Only "All" requests depend on the node
    (their devices, and the pools' completeness): a plan without them and
    without errors (``dynamic`` False) needs no replay at all."""

    ops: list[tuple[str, object, object, int]]
    dynamic: bool
    min_devices: int
    constraints: list[tuple[list[str], str]]
    constraint_error: str


class Prepared:
    """The node-independent part of ``Allocate`` for one list of claims,
    built once per scheduling cycle and used for every node.

    Upstream's ``NewAllocator`` + ``Allocate`` re-read and validate the claims
    on every node (allocator_stable.go: ``alloc.claimsToAllocate`` loop at the
    start of ``Allocate``); nothing there depends on the node but the devices
    of "All" requests, so Berth reads them once here and replays only that
    part per node (:class:`_ClaimPlan`). Validation errors are kept and
    raised at the same point of the same node's run, so each node's outcome
    and message are what a fresh Allocate would give. Which devices the
    requests' selectors pick is memoised per request (a device's attributes do
    not change within a cycle)."""

    def __init__(
        self,
        owner: Allocator,
        claims: Sequence[dra.ResourceClaim],
        allocated: AbstractSet[DeviceID],
        versions: Mapping[tuple[str, str], int] | None = None,
    ) -> None:
        self.a = owner
        self.features = owner.features
        self.claims = list(claims)
        self.versions = versions
        # What the outcome on a node depends on besides the node's pools and
        # their devices in use: the claims' specs (names only show in
        # messages, which solve re-addresses).
        self.signature = b"\0".join(_SPEC_ENCODER.encode(c.spec) for c in self.claims) if versions is not None else b""
        self.owners = [f"claim {_kobj(c)}" for c in self.claims]
        self.allocated = allocated
        self._unsatisfiable: dict[tuple[int, str, str, str], Unsatisfiable] = {}
        #: The request templates by (claim, request, subrequest); a node's run
        #: replaces the "All" ones with its own copies.
        self.requests: dict[tuple[int, int, int], _Request] = {}
        #: Per request key: id(device) -> whether the class's and the request's selectors pick it.
        self.match_cache: dict[tuple[int, int, int], dict[int, bool]] = {}
        self.plans = [self._plan(ci, claim) for ci, claim in enumerate(self.claims)]
        #: Every claim reads the same on every node, without error or
        #: constraint: a node's run needs no reading at all.
        self.static = all(
            not plan.dynamic and plan.min_devices <= MAX_RESULTS and not plan.constraint_error and not plan.constraints
            for plan in self.plans
        )
        #: No slice selects nodes with more than one term: the node selectors
        #: of a solution cannot fail (createNodeSelector's only error).
        self.selectors_cannot_fail = not owner.slices.multi_term_selectors

    def solve(self, node: model.Node | None) -> Solution | Unsatisfiable:
        """``Allocate`` on ``node``: a solution (its results built on demand)
        or why there is none. Raises AllocationError as Allocate would.

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
        stamp = [versions.get(p.key, 0) for p in pools]
        key = (id(pools), self.signature)
        hit = self.a.memo.get(key)
        if hit is not None and hit[0] == stamp:
            known = hit[1]
            if isinstance(known, _Run):
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
            taken = [c.id for found in outcome.run.result for _, c, admin in found if not admin]
            self.a.memo[key] = (stamp, outcome.run, taken)
        else:
            keys = [c.key for c in self.claims]
            before = f"claim {outcome.claim}"
            if outcome.claim in keys and outcome.message.startswith(before):
                why = (keys.index(outcome.claim), outcome.request, outcome.reason, outcome.message[len(before) :])
                self.a.memo[key] = (stamp, why, [])
        return outcome

    def _readdressed(self, ci: int, request: str, reason: str, rest: str) -> Unsatisfiable:
        """A remembered Unsatisfiable, for this Prepared's claim ``ci``: its
        message starts with ``claim <namespace/name>``, the rest is the
        same. One object per distinct outcome (many nodes share one)."""
        key = (ci, request, reason, rest)
        got = self._unsatisfiable.get(key)
        if got is None:
            claim = self.claims[ci].key
            got = self._unsatisfiable[key] = Unsatisfiable(claim, request, reason, f"claim {claim}{rest}")
        return got

    def _solve(self, node: model.Node | None) -> Solution | Unsatisfiable:
        run = _Run(self, node, len(self.claims))
        if run.search():
            if not self.selectors_cannot_fail:
                for ci in range(len(self.claims)):
                    run.node_selector(ci, build=False)  # its errors are Allocate's, not Reserve's
            return Solution(run)
        return run.diagnose()

    # -- reading the claims (the first part of Allocate)

    def _plan(self, ci: int, claim: dra.ResourceClaim) -> _ClaimPlan:
        ops: list[tuple[str, object, object, int]] = []
        dynamic = False
        min_devices = 0
        for ri, request in enumerate(claim.spec.devices.requests):
            if request.first_available:
                if not self.features.prioritized_list:
                    ops.append(
                        (
                            "raise",
                            f"claim {_kobj(claim)}, request {request.name}: has subrequests, "
                            "but the DRAPrioritizedList feature is disabled",
                            None,
                            -1,
                        )
                    )
                    dynamic = True
                    break
                least = None
                for si, sub in enumerate(request.first_available):
                    rd = _Request(
                        sub.name,
                        request.name,
                        dra.DeviceClass(),
                        sub.selectors,
                        sub.allocation_mode,
                        sub.count,
                        False,
                        sub.tolerations,
                    )
                    error = self._validate(claim, rd, sub.device_class_name, has_admin_access=False)
                    if error:
                        ops.append(("raise", error, None, -1))
                        dynamic = True
                        break
                    self.requests[(ci, ri, si)] = rd
                    self._share_picks((ci, ri, si), rd)
                    ops.append(("req", (ci, ri, si), rd, ri))
                    dynamic = dynamic or rd.mode == ALL
                    least = rd.num_devices if least is None else min(least, rd.num_devices)
                else:
                    min_devices += least or 0
                    continue
                break
            else:
                exactly = request.exactly
                if exactly is None:
                    ops.append(
                        (
                            "raise",
                            f"claim {_kobj(claim)}, request {request.name}: missing device class name "
                            "(unsupported request type?)",
                            None,
                            -1,
                        )
                    )
                    dynamic = True
                    break
                rd = _Request(
                    request.name,
                    "",
                    dra.DeviceClass(),
                    exactly.selectors,
                    exactly.allocation_mode,
                    exactly.count,
                    bool(exactly.admin_access),
                    exactly.tolerations,
                )
                error = self._validate(
                    claim, rd, exactly.device_class_name, has_admin_access=exactly.admin_access is not None
                )
                if error:
                    ops.append(("raise", error, None, -1))
                    dynamic = True
                    break
                self.requests[(ci, ri, 0)] = rd
                self._share_picks((ci, ri, 0), rd)
                ops.append(("req", (ci, ri, 0), rd, -1))
                dynamic = dynamic or rd.mode == ALL
                min_devices += rd.num_devices
        constraints, constraint_error = _read_constraints(claim, claim.spec.devices.constraints)
        return _ClaimPlan(ops, dynamic, min_devices, constraints, constraint_error)

    def _share_picks(self, key: tuple[int, int, int], rd: _Request) -> None:
        """The request's selector results, shared with every request (of any
        cycle) of the same class and expressions."""
        expressions = tuple(s.cel.expression for s in rd.selectors if s.cel is not None)
        sig = (rd.device_class.metadata.name, expressions)
        picks = self.a.picks.get(sig)
        if picks is None:
            picks = self.a.picks[sig] = {}
        self.match_cache[key] = picks

    def _validate(self, claim: dra.ResourceClaim, rd: _Request, class_name: str, *, has_admin_access: bool) -> str:
        """allocator_stable.go validateDeviceRequest, but for the devices of an
        "All" request (:meth:`_Run._all_devices`): the error, or ""."""
        where = f"claim {_kobj(claim)}, request {rd.name}"
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


def _read_constraints(
    claim: dra.ResourceClaim, specs: Sequence[dra.DeviceConstraint]
) -> tuple[list[tuple[list[str], str]], str]:
    """The claim's matchAttribute constraints, or the error of the first unsupported one."""
    out = []
    for i, c in enumerate(specs):
        if c.match_attribute is None:
            return [], f"claim {_kobj(claim)}, constraint #{i}: empty constraint (unsupported constraint type?)"
        out.append((c.requests, c.match_attribute))
    return out, ""


class Solution:
    """The devices found for the claims on one node; :meth:`results` builds
    the AllocationResults (only for the node the pod gets). The run may be
    one for other claims of the same specs (see Prepared.solve): the results
    depend on the specs only."""

    __slots__ = ("_results", "run")

    def __init__(self, run: _Run) -> None:
        self.run = run
        self._results: list[dra.AllocationResult] | None = None

    def results(self) -> list[dra.AllocationResult]:
        if self._results is None:
            self._results = self.run.results()
        return self._results


class _Run:
    """One Allocate call on one node (upstream's ``allocator``), over the
    first ``count`` claims of a :class:`Prepared`; ``constraints`` replaces the
    last claim's constraints (Berth's diagnosis tries them one by one)."""

    def __init__(
        self,
        prepared: Prepared,
        node: model.Node | None,
        count: int,
        constraints: Sequence[dra.DeviceConstraint] | None = None,
    ) -> None:
        self.p = prepared
        self.a = prepared.a
        self.features = prepared.features
        self.node = node
        self.claims = prepared.claims[:count]
        self.owners = prepared.owners
        self.allocated = prepared.allocated
        self.pools = prepared.a.slices.gather_pools(node)
        self.requests = prepared.requests
        self.constraints: list[list[_MatchAttribute]] = []
        # The subrequest chosen for each firstAvailable request, by (claim, request).
        self.selected: dict[tuple[int, int], int] = {}
        # Devices taken by this attempt, and by which claims (allocatingDevices).
        self.allocating: dict[DeviceID, set[int]] = {}
        self.result: list[list[tuple[_Request, Candidate, bool]]] = [[] for _ in self.claims]
        if prepared.static and constraints is None:
            self.constraints = [[] for _ in self.claims]
            return
        for ci, claim in enumerate(self.claims):
            plan = prepared.plans[ci]
            specs, error = plan.constraints, plan.constraint_error
            if constraints is not None and ci == count - 1:
                specs, error = _read_constraints(claim, constraints)
            self._read_claim(ci, claim, plan, specs, error)

    # -- reading the claims: the node's part (see Prepared)

    def _read_claim(
        self,
        ci: int,
        claim: dra.ResourceClaim,
        plan: _ClaimPlan,
        specs: list[tuple[list[str], str]],
        constraint_error: str,
    ) -> None:
        min_devices = plan.min_devices
        if plan.dynamic:
            min_devices = 0
            least: dict[int, int] = {}
            for kind, key, template, group in plan.ops:
                if kind == "raise":
                    raise AllocationError(cast(str, key))
                rd = cast(_Request, template)
                if rd.mode == ALL:
                    rd = self._all_devices(cast(tuple[int, int, int], key), claim, rd)
                if group < 0:
                    min_devices += rd.num_devices
                else:
                    least[group] = min(least.get(group, rd.num_devices), rd.num_devices)
            min_devices += sum(least.values())
        if min_devices > MAX_RESULTS:
            raise AllocationError(
                f"claim {_kobj(claim)}: number of requested devices {min_devices} "
                f"exceeds the claim limit of {MAX_RESULTS}"
            )
        if constraint_error:
            raise AllocationError(constraint_error)
        self.constraints.append([_MatchAttribute(requests, attribute) for requests, attribute in specs])

    def _all_devices(self, key: tuple[int, int, int], claim: dra.ResourceClaim, template: _Request) -> _Request:
        """validateDeviceRequest's "All" branch: this node's matching devices."""
        where = f"claim {_kobj(claim)}, request {template.name}"
        rd = replace(template, all_devices=[])
        for pool in self.pools:
            if pool.incomplete:
                raise AllocationError(
                    f"{where}: asks for all devices, but resource pool {pool} is currently being updated"
                )
            if pool.invalid:
                raise AllocationError(f"{where}: asks for all devices, but resource pool {pool} is currently invalid")
            for candidate in pool.devices:
                if self._selectable(key, rd, candidate):
                    rd.all_devices.append(candidate)
        rd.num_devices = len(rd.all_devices)
        if self.requests is self.p.requests:
            self.requests = dict(self.p.requests)
        self.requests[key] = rd
        return rd

    # -- the search

    def search(self) -> bool:
        return self._allocate_one(0, 0, 0, 0, False)

    def _allocate_one(self, ci: int, ri: int, si: int, di: int, allocating_sub: bool) -> bool:
        """allocator_stable.go allocateOne: place device ``di`` of request
        ``ri`` (subrequest ``si``) of claim ``ci``, then everything after it."""
        if ci >= len(self.claims):
            return True  # the first full solution wins
        if ri >= len(self.claims[ci].spec.devices.requests):
            return self._allocate_one(ci + 1, 0, 0, 0, False)
        rd = self.requests[(ci, ri, si)]

        if not allocating_sub and rd.parent:
            # Subrequests: the first one that can be allocated (with
            # everything after it) is taken.
            sub = 0
            while (ci, ri, sub) in self.requests:
                if self._allocate_one(ci, ri, sub, di, True):
                    self.selected[(ci, ri)] = sub
                    return True
                sub += 1
            return False

        do_all = rd.mode == ALL
        if do_all and not rd.all_devices:
            return False  # at least one device is required for "All"
        if di >= rd.num_devices:
            return self._allocate_one(ci, ri + 1, 0, 0, False)
        if len(self.result[ci]) + rd.num_devices - di > MAX_RESULTS:
            return False  # keep searching for a solution that fits

        if do_all:
            undo = self._allocate_device(ci, rd, rd.all_devices[di], must=True)
            if undo is None:
                return False  # the order does not matter for "All": no solution
            # Berth: si kept (upstream passes subRequestIndex 0 here).
            if self._allocate_one(ci, ri, si, di + 1, allocating_sub):
                return True
            undo()
            return False

        key = (ci, ri, si)
        picked = self.p.match_cache.get(key)
        if picked is None:
            picked = self.p.match_cache[key] = {}
        allocated, allocating, admin = self.allocated, self.allocating, rd.admin_access
        for pool in self.pools:
            if pool.invalid:
                # Not safe to allocate from, and no reason to pick another pool.
                raise AllocationError(f"pool {pool.name} is invalid: {pool.invalid_reason}")
            for candidate in pool.devices:
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
                undo = self._allocate_device(ci, rd, candidate, must=False)
                if undo is None:
                    continue
                if self._allocate_one(ci, ri, si, di + 1, allocating_sub):
                    return True
                undo()
        return False

    def _in_use(self, device_id: DeviceID) -> bool:
        return device_id in self.allocated or bool(self.allocating.get(device_id))

    def _selectable(self, key: tuple[int, int, int], rd: _Request, candidate: Candidate) -> bool:
        """allocator_stable.go isSelectable: class selectors, then the request's."""
        device = candidate.device
        if device.binding_conditions:
            return False  # DRADeviceBindingConditions (alpha) is off
        picked = self.p.match_cache.get(key)
        if picked is None:
            picked = self.p.match_cache[key] = {}
        # The devices are held by the Allocator's slices, so their ids stay theirs.
        hit = picked.get(id(device))
        if hit is not None:
            return hit
        cls = rd.device_class
        ok = self.a.selectors_match(
            candidate, cls.spec.selectors, f"class {cls.metadata.name}"
        ) and self.a.selectors_match(candidate, rd.selectors, self.owners[key[0]])
        picked[id(device)] = ok
        return ok

    def _allocate_device(self, ci: int, rd: _Request, candidate: Candidate, *, must: bool) -> Callable[[], None] | None:
        """allocator_stable.go allocateDevice: take the device for the request
        if it is free, tolerated and keeps the claim's constraints; returns how
        to give it back, or None."""
        device_id, device = candidate.id, candidate.device
        if rd.admin_access:
            if ci in self.allocating.get(device_id, ()):
                return None
        elif self._in_use(device_id):
            return None
        if device.consumes_counters:
            return None  # DRAPartitionableDevices (alpha) is off
        base, sub = (rd.parent, rd.name) if rd.parent else (rd.name, "")
        if self.features.device_taints and not all(
            any(_tolerates(t, taint) for t in rd.tolerations) for taint in device.taints
        ):
            return None
        constraints = self.constraints[ci]
        for i, c in enumerate(constraints):
            if not c.add(base, sub, device, device_id):
                if must:
                    raise AllocationError(
                        f"claim {_kobj(self.claims[ci])}, request {rd.name}: cannot add device {device_id} "
                        "because a claim constraint would not be satisfied"
                    )
                for done in constraints[:i]:
                    done.remove(base, sub, device, device_id)
                return None
        self.allocating.setdefault(device_id, set()).add(ci)
        results = self.result[ci]
        before = len(results)
        results.append((rd, candidate, rd.admin_access))

        def undo() -> None:
            for c in constraints:
                c.remove(base, sub, device, device_id)
            self.allocating[device_id].discard(ci)
            del results[before:]

        return undo

    # -- the result

    def results(self) -> list[dra.AllocationResult]:
        out = []
        for ci, claim in enumerate(self.claims):
            devices = dra.DeviceAllocationResult()
            for rd, candidate, admin in self.result[ci]:
                devices.results.append(
                    dra.DeviceRequestAllocationResult(
                        request=rd.full_name,
                        driver=candidate.id.driver,
                        pool=candidate.id.pool,
                        device=candidate.id.device,
                        admin_access=True if admin else None,
                    )
                )
            devices.config = self._configs(ci, claim)
            out.append(dra.AllocationResult(devices=devices, node_selector=self.node_selector(ci)))
        return out

    def _chosen(self, ci: int, ri: int) -> _Request:
        rd = self.requests[(ci, ri, 0)]
        return self.requests[(ci, ri, self.selected.get((ci, ri), 0))] if rd.parent else rd

    def _configs(self, ci: int, claim: dra.ResourceClaim) -> list[dra.DeviceAllocationConfiguration]:
        """The class configs (each class once, naming all its requests), then
        the claim's configs for the requests (or chosen subrequests) they name."""
        configs: list[dra.DeviceAllocationConfiguration] = []
        by_class: dict[str, tuple[int, int]] = {}
        for ri in range(len(claim.spec.devices.requests)):
            rd = self._chosen(ci, ri)
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
        for config in claim.spec.devices.config:
            if not config.requests:
                configs.append(dra.DeviceAllocationConfiguration(source=dra.CONFIG_SOURCE_CLAIM, opaque=config.opaque))
                continue
            for ri, request in enumerate(claim.spec.devices.requests):
                if request.name in config.requests:
                    configs.append(
                        dra.DeviceAllocationConfiguration(
                            source=dra.CONFIG_SOURCE_CLAIM, requests=list(config.requests), opaque=config.opaque
                        )
                    )
                    continue
                rd = self._chosen(ci, ri)
                if rd.parent and rd.full_name in config.requests:
                    configs.append(
                        dra.DeviceAllocationConfiguration(
                            source=dra.CONFIG_SOURCE_CLAIM, requests=list(config.requests), opaque=config.opaque
                        )
                    )
        return configs

    def node_selector(self, ci: int, *, build: bool = True) -> model.NodeSelector | None:
        """allocator_stable.go createNodeSelector: the node of a node-local
        device, else the union of the devices' node selectors, else None.
        Without ``build`` only its errors are raised (:meth:`Prepared.solve`)."""
        fields: list[model.NodeSelectorRequirement] = []
        expressions: list[model.NodeSelectorRequirement] = []
        for _, candidate, _ in self.result[ci]:
            spec = candidate.slice.spec
            if spec.node_name:
                if not build:
                    return None
                return model.NodeSelector(
                    node_selector_terms=[
                        model.NodeSelectorTerm(
                            match_fields=[
                                model.NodeSelectorRequirement(
                                    key="metadata.name", operator="In", values=[spec.node_name]
                                )
                            ]
                        )
                    ]
                )
            selector = spec.node_selector
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

    # -- Berth: why not

    def diagnose(self) -> Unsatisfiable:
        """Name the first claim that cannot join the ones before it, and in it
        the first request that cannot be met, and why."""
        for ci, claim in enumerate(self.claims[:-1]):
            if not _Run(self.p, self.node, ci + 1).search():
                return self._why_claim(ci, claim)
        # The whole list failed (that is why we are here): the last claim needs no search.
        return self._why_claim(len(self.claims) - 1, self.claims[-1])

    def _why_claim(self, ci: int, claim: dra.ResourceClaim) -> Unsatisfiable:
        taken = {d for d, owners in _taken_by(self, ci).items() if owners}
        for ri, request in enumerate(claim.spec.devices.requests):
            # A firstAvailable request fails when every alternative does; the
            # last alternative's reason is the one reported.
            verdict = None
            for si in range(max(1, len(request.first_available))):
                rd = self.requests[(ci, ri, si)]
                verdict = self._why_request(rd, taken)
                if verdict is None:
                    break
            if verdict is not None:
                reason, message = verdict
                return Unsatisfiable(
                    claim.key, rd.full_name, reason, f"claim {claim.key}, request {rd.full_name}: {message}"
                )
        for spec in claim.spec.devices.constraints:
            if not _Run(self.p, self.node, ci + 1, [spec]).search():
                names = ", ".join(spec.requests) or "all requests"
                return Unsatisfiable(
                    claim.key,
                    ",".join(spec.requests),
                    REASON_CONSTRAINT,
                    f"claim {claim.key}: constraint matchAttribute {spec.match_attribute} ({names}) unmet: "
                    "no free devices with a common value",
                )
        return Unsatisfiable(
            claim.key,
            "",
            REASON_DEVICES_ALLOCATED,
            f"claim {claim.key}: not enough free devices for all its requests and constraints together",
        )

    def _why_request(self, rd: _Request, taken: set[DeviceID]) -> tuple[str, str] | None:
        """Whether the request alone can be met by free devices, and if not why."""
        key = next(k for k, v in self.requests.items() if v is rd)
        matching = [c for p in self.pools if not p.invalid for c in p.devices if self._selectable(key, rd, c)]
        if rd.mode == ALL and any(p.incomplete for p in self.pools):
            return REASON_POOL_INCOMPLETE, "asks for all devices, but a resource pool is being updated"
        if not matching:
            return REASON_NO_MATCHING_DEVICE, "no device matches the selectors (class and request)"
        if rd.admin_access:
            return None
        free = [c for c in matching if c.id not in self.allocated and c.id not in taken]
        need = len(matching) if rd.mode == ALL else rd.count
        if len(free) < need:
            if not free:
                return REASON_DEVICES_ALLOCATED, f"all {len(matching)} matching devices are allocated"
            return (
                REASON_DEVICES_ALLOCATED,
                f"{need} devices needed, {len(free)} of {len(matching)} matching devices are free",
            )
        return None


def _taken_by(run: _Run, ci: int) -> dict[DeviceID, set[int]]:
    """Devices a solution for the claims before ``ci`` takes (empty if none)."""
    if ci == 0:
        return {}
    before = _Run(run.p, run.node, ci)
    return before.allocating if before.search() else {}


def _add_requirements(source: list[model.NodeSelectorRequirement], into: list[model.NodeSelectorRequirement]) -> None:
    """addNewNodeSelectorRequirements: append the ones not there yet (values as a set)."""
    for r in source:
        if not any(e.key == r.key and e.operator == r.operator and set(e.values) == set(r.values) for e in into):
            into.append(model.NodeSelectorRequirement(key=r.key, operator=r.operator, values=list(r.values)))
