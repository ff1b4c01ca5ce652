"""Resource quantities and the requests a pod makes.

Canonical units (the contract's): CPU in millicores, everything else in base
units, rounded up as ``MilliValue``/``Value`` round.

Parsing is apimachinery's ``resource.ParseQuantity``
(``k8s.io/apimachinery/pkg/api/resource/quantity.go``: ``parseQuantityString``
and ``suffix.go``'s ``interpret``): the same grammar — a sign, digits with an
optional fraction, then a binary (Ki..Ei) or decimal (n u m "" k M G T P E)
suffix or an exponent ``e``/``E`` with a signed integer — the same quirks
(``"."``, ``"+"`` and a bare suffix such as ``"Mi"`` are zero; ``"1."`` is 1)
and the same messages, as the API server returns them for a pod
(``quantities must match the regular expression ...``, ``unable to parse
quantity's suffix``). Values are rounded up (away from zero) to nano units,
as ParseQuantity rounds.

One deliberate difference, the magnitude. ParseQuantity caps only binary-SI
values (at 2^63-1), truncates exponents to int32 (``1e4294967296`` is 1) and
accepts ``1e400``; the API server's pod validation checks the sign, not the
size, and ``MilliValue()`` then wraps (v1.34) or saturates (main,
kubernetes/kubernetes#141166) — the scheduler's arithmetic on such a value is
meaningless. Berth rejects a quantity whose ``MilliValue()`` does not fit an
int64 (``|q| <= 9223372036854775.807``), for every resource, with
apimachinery's ``validation.InclusiveRangeError`` wording. The decision is
taken from the digit count and the exponent before any arithmetic, so no huge
integer is ever built: ``1e300000`` is refused in microseconds, and
``1e-300000`` is 1n as upstream rounds it.

Errors are :class:`QuantityError` (an :class:`~berth.errors.InvalidArgument`)
whose text is a field error's tail, ``Invalid value: "1.5.3Gi": quantities
must match ...``; functions that know where the quantity sits
(:func:`canonical_list`, :func:`pod_requests`, :func:`node_allocatable`)
prefix the field path, ``spec.containers[0].resources.requests[cpu]: ...``.

A pod's effective request is kube-scheduler's
``k8s.io/component-helpers/resource.PodRequests``: the sum of its containers,
raised to the largest init container (sidecars — restartable init containers —
add to both), plus pod overhead. Pod-level resources (KEP-2837) replace the
container sum for the resources they name. With
:class:`PodResourcesOptions` ``use_status_resources`` (what the scheduler's
NodeInfo counts for a pod on a node, InPlacePodVerticalScaling) a pod being
resized in place counts the larger of what its spec asks and what the kubelet
allocated and actuated (``status.containerStatuses[].allocatedResources`` /
``.resources``; only the latter two once ``PodResizePending`` is
``Infeasible``) — per container up to 1.36 (component-helpers v0.35.4 /
v0.36.3 ``determineEffectiveRequests``), the larger of the three *sums* since
1.37 (v0.37.2 ``AggregateContainerRequests``), and pod-level status
(``status.allocatedResources`` / ``status.resources``) with
InPlacePodLevelResourcesVerticalScaling.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable, Mapping
from fractions import Fraction

from berth import errors, features
from berth.cluster import model

__all__ = [
    "CPU",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "EPHEMERAL_STORAGE",
    "MAX_MILLI_VALUE",
    "MEMORY",
    "PODS",
    "SPEC_ONLY",
    "PodResourcesOptions",
    "QuantityError",
    "canonical",
    "canonical_list",
    "format_quantity",
    "is_extended",
    "is_scalar",
    "node_allocatable",
    "node_info_options",
    "parse_quantity",
    "pod_requests",
]

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# pkg/scheduler/util/pod_resources.go: what scoring assumes for a container
# that requests no CPU or memory.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_MAX_INT64 = 2**63 - 1
#: The largest ``MilliValue()`` Berth accepts: a quantity's magnitude is at most this many milli-units.
MAX_MILLI_VALUE = _MAX_INT64
#: The same bound in nano-units, the grid ParseQuantity rounds to.
_MAX_NANO = MAX_MILLI_VALUE * 10**6

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}

# quantity.go's messages, word for word.
_SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT_WRONG = f"quantities must match the regular expression '{_SPLIT_RE}'"
ERR_SUFFIX = "unable to parse quantity's suffix"
# apimachinery/pkg/util/validation.InclusiveRangeError's wording.
ERR_RANGE = (
    f"must be between -{MAX_MILLI_VALUE // 1000}.{MAX_MILLI_VALUE % 1000:03d} and "
    f"{MAX_MILLI_VALUE // 1000}.{MAX_MILLI_VALUE % 1000:03d}, inclusive "
    "(resource.Quantity's MilliValue() must fit an int64)"
)
# pkg/apis/core/validation isNegativeErrorMsg.
ERR_NEGATIVE = "must be greater than or equal to 0"

# parseQuantityString as one linear-time match (possessive quantifiers: no
# backtracking, whatever the input): sign, leading zeros, numerator, an
# optional "." and denominator, then the suffix — letters of
# "eEinumkKMGTP", an optional sign, digits — to the end.
_SCAN = re.compile(r"([+-]?+)0*+([0-9]*+)(?:\.([0-9]*+))?+([eEinumkKMGTP]*+[-+]?+[0-9]*+)")
_INT64_TEXT = re.compile(r"[+-]?+([0-9]++)")
# suffix.go: (base, exponent) of every listed suffix.
_SUFFIXES: dict[str, tuple[int, int]] = {
    "": (10, 0),
    "n": (10, -9),
    "u": (10, -6),
    "m": (10, -3),
    "k": (10, 3),
    "M": (10, 6),
    "G": (10, 9),
    "T": (10, 12),
    "P": (10, 15),
    "E": (10, 18),
    "Ki": (2, 10),
    "Mi": (2, 20),
    "Gi": (2, 30),
    "Ti": (2, 40),
    "Pi": (2, 50),
    "Ei": (2, 60),
}
# Decimal digits of 2**b, so that 10**(d-1) <= 2**b < 10**d.
_POW2_DIGITS = {b: len(str(2**b)) for b in range(0, 61, 10)}

#: Quantity strings longer than this are parsed every time instead of being
#: cached: workloads repeat a few short strings endlessly, and an entry then
#: weighs a few hundred bytes at most.
_CACHE_MAX_CHARS = 64


def _shown(value: object) -> str:
    """The bad value as a field error quotes it, cut to a readable length."""
    if isinstance(value, str):
        text = json.dumps(value if len(value) <= 64 else value[:64] + "...")
    elif isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        text = f"<an integer of {value.bit_length()} bits>"
    else:
        text = json.dumps(value) if isinstance(value, bool | int | float) or value is None else type(value).__name__
    return text


class QuantityError(errors.InvalidArgument):
    """A quantity Kubernetes would not accept.

    ``str()`` is ``[path: ]Invalid value: <value>: <detail>``, the API
    server's field error (``field.Invalid``); :meth:`at` adds the path.
    """

    def __init__(self, value: object, detail: str, path: str = "") -> None:
        self.value = value
        self.detail = detail
        self.path = path
        prefix = f"{path}: " if path else ""
        super().__init__(errors.bounded(f"{prefix}Invalid value: {_shown(value)}: {detail}"))

    def at(self, path: str) -> QuantityError:
        """The same error, located at ``path`` (kept if it already has one)."""
        return self if self.path else QuantityError(self.value, self.detail, path)


def _exponent(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64), or None."""
    m = _INT64_TEXT.fullmatch(text)
    if m is None or len(m[1].lstrip("0")) > 19:
        return None
    value = int(text)
    return value if -(2**63) <= value <= _MAX_INT64 else None


def _parse_nano(text: str) -> int:
    """ParseQuantity(text) in nano-units, rounded away from zero; raises QuantityError.

    Never builds an integer of more than ~90 digits: the magnitude is bounded
    from the digit count and the exponent first.
    """
    s = text.strip()  # UnmarshalJSON's TrimSpace
    if not s:
        raise QuantityError(text, ERR_FORMAT_WRONG)
    m = _SCAN.fullmatch(s)
    if m is None:
        raise QuantityError(text, ERR_FORMAT_WRONG)
    sign, num, denom, suffix = m[1], m[2], m[3] or "", m[4]
    found = _SUFFIXES.get(suffix)
    if found is not None:
        base, exponent = found
    elif len(suffix) > 1 and suffix[0] in "eE" and (exp := _exponent(suffix[1:])) is not None:
        base, exponent = 10, exp
    else:
        raise QuantityError(text, ERR_SUFFIX)
    digits = (num + denom).lstrip("0")
    if not digits:
        return 0
    # value = int(significant) * 10**e10 * 2**b, with trailing zeros folded into e10.
    significant = digits.rstrip("0")
    e10 = (exponent if base == 10 else 0) - len(denom) + (len(digits) - len(significant))
    b = exponent if base == 2 else 0
    n_digits, pow2 = len(significant), _POW2_DIGITS[b]
    # 10**(n_digits-1+e10+pow2-1) <= value < 10**(n_digits+e10+pow2)
    if n_digits + e10 + pow2 - 2 >= 16:  # value >= 1e16 > the int64 milli range
        raise QuantityError(text, ERR_RANGE)
    if n_digits + e10 + pow2 <= -9:  # value < 1n: ParseQuantity rounds it up to 1n
        nano = 1
    elif (e := e10 + 9) >= 0:
        nano = int(significant) * 2**b * 10**e  # at most ~45 digits (the check above)
    elif (r := -e - b) > 0:
        # nano = ceil(D / (10**r * 5**b)), D = hi * 10**r + lo with 0 < lo < 10**r
        # (the last significant digit is not 0): the digits below 10**r only
        # say "a bit more than hi", so hi has at most ~90 digits however long
        # the fraction is.
        hi = int(significant[:-r]) if r < n_digits else 0
        nano = hi // 5**b + 1
    else:  # -e <= b <= 60: D * 2**(b+e) / 5**-e, exactly
        nano = -((-(int(significant) << (b + e))) // 5**-e)
    if nano > _MAX_NANO:
        raise QuantityError(text, ERR_RANGE)
    return -nano if sign == "-" else nano


def _nano_of(value: object) -> int:
    """A quantity of any decoded JSON/YAML type in nano-units; raises QuantityError."""
    if isinstance(value, str):
        return _parse_nano(value)
    if isinstance(value, bool):  # Quantity.UnmarshalJSON sees `true`: not a number
        raise QuantityError(value, ERR_FORMAT_WRONG)
    if isinstance(value, int):
        if abs(value) * 1000 > MAX_MILLI_VALUE:
            raise QuantityError(value, ERR_RANGE)
        return value * 10**9
    if isinstance(value, float):
        # The JSON number's text, as UnmarshalJSON parses it ("inf" and "nan" fail).
        return _parse_nano(repr(value))
    raise QuantityError(value, ERR_FORMAT_WRONG)


def parse_quantity(value: model.Quantity) -> Fraction:
    """The value of a quantity, rounded up to nano-units as ParseQuantity rounds; raises QuantityError."""
    return Fraction(_nano_of(value), 10**9)


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


@functools.lru_cache(maxsize=2048)
def _canonical_cached(milli: bool, text: str) -> int:
    return _canonical_nano(milli, text, _parse_nano(text))


def _canonical_nano(milli: bool, value: object, nano: int) -> int:
    if nano < 0:
        raise QuantityError(value, ERR_NEGATIVE)
    return _ceil_div(nano, 10**6 if milli else 10**9)


def canonical(name: str, value: model.Quantity) -> int:
    """The contract's integer for a quantity of resource ``name``: MilliValue()
    for cpu, Value() for the rest; raises QuantityError for a malformed,
    out-of-range or negative quantity (resource amounts are never negative:
    the API server's ``ValidateNonnegativeQuantity``)."""
    milli = name == CPU
    if isinstance(value, str) and len(value) <= _CACHE_MAX_CHARS:
        return _canonical_cached(milli, value)
    return _canonical_nano(milli, value, _nano_of(value))


def canonical_list(resources: Mapping[str, model.Quantity], path: str = "") -> dict[str, int]:
    """:func:`canonical` of every entry; errors name ``path[name]``."""
    out: dict[str, int] = {}
    for name, v in resources.items():
        try:
            out[name] = canonical(name, v)
        except QuantityError as e:
            raise e.at(f"{path}[{name}]" if path else name) from None
    return out


def format_quantity(name: str, value: int) -> str:
    """An exact Kubernetes quantity string for a canonical value ("500m", "16Gi")."""
    if name == CPU:
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if (value and name in (MEMORY, EPHEMERAL_STORAGE)) or name.startswith("hugepages-"):
        for suffix in ("Ti", "Gi", "Mi", "Ki"):
            unit = _BINARY[suffix]
            if value and value % unit == 0:
                return f"{value // unit}{suffix}"
    return str(value)


def is_extended(name: str) -> bool:
    """v1helper.IsExtendedResourceName: not native (no "/", or containing
    "kubernetes.io/" anywhere, as IsPrefixedNativeResource checks) and not a
    quota "requests." name."""
    return not ("/" not in name or "kubernetes.io/" in name or name.startswith("requests."))


def is_scalar(name: str) -> bool:
    """schedutil.IsScalarResourceName: extended, hugepages, attachable volumes or native."""
    return (
        is_extended(name)
        or name.startswith("hugepages-")
        or name.startswith("attachable-volumes-")
        or ("/" in name and not name.startswith("requests."))
    )


@dataclasses.dataclass(frozen=True, slots=True)
class PodResourcesOptions:
    """The fields of component-helpers' ``resource.PodResourcesOptions`` the
    scheduler sets (NonMissingContainerRequests is :func:`pod_requests`'
    ``non_zero``)."""

    #: UseStatusResources: count what the kubelet allocated and actuated.
    use_status_resources: bool = False
    #: InPlacePodLevelResourcesVerticalScalingEnabled: pod-level status too.
    in_place_pod_level_resources_vertical_scaling: bool = False
    #: SkipPodLevelResources: ignore ``spec.resources``.
    skip_pod_level_resources: bool = False
    #: Whose component-helpers: the status resources are combined per
    #: container before 1.37 and per pod from 1.37 (see the module docstring).
    version: features.KubeVersion = features.NEWEST


#: resource.PodResourcesOptions{}: the spec alone, pod-level resources included.
SPEC_ONLY = PodResourcesOptions()


@functools.cache
def node_info_options(feats: features.Features) -> PodResourcesOptions:
    """What framework/types.go ``PodInfo.CalculateResource`` (v1.37.2) passes:
    the options the scheduler counts a pod on a node with."""
    return PodResourcesOptions(
        use_status_resources=feats.in_place_pod_vertical_scaling,
        in_place_pod_level_resources_vertical_scaling=feats.in_place_pod_level_resources_vertical_scaling,
        skip_pod_level_resources=not feats.pod_level_resources,
        version=feats.version,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class _Status:
    """A container's status and where it sits (for error paths)."""

    status: model.ContainerStatus
    path: str

    def allocated(self) -> dict[str, int] | None:
        """``allocatedResources``; None when the kubelet reports none."""
        if self.status.allocated_resources is None:
            return None
        return canonical_list(self.status.allocated_resources, f"{self.path}.allocatedResources")

    def actuated(self) -> dict[str, int] | None:
        """``resources.requests``; None when the kubelet reports none."""
        res = self.status.resources
        if res is None or not res.requests:
            return None
        return canonical_list(res.requests, f"{self.path}.resources.requests")


#: One container's requests: (container, its field path, whether it is an init
#: container, its status or None, resize infeasible) -> a list (None: none).
_ContainerList = Callable[[model.Container, str, bool, _Status | None, bool], dict[str, int] | None]


def _spec_requests(c: model.Container, path: str) -> dict[str, int]:
    res = c.resources
    reqs: dict[str, int] = {}
    if res is not None:
        # The API server defaults a missing request to the container's limit.
        reqs.update(canonical_list(res.limits, f"{path}.resources.limits"))
        reqs.update(canonical_list(res.requests, f"{path}.resources.requests"))
    return reqs


def _container_spec(
    c: model.Container, path: str, init: bool, cs: _Status | None, infeasible: bool
) -> dict[str, int] | None:
    """component-helpers v0.37.2 containerSpecRequests."""
    return _spec_requests(c, path)


def _container_allocated(
    c: model.Container, path: str, init: bool, cs: _Status | None, infeasible: bool
) -> dict[str, int] | None:
    """component-helpers v0.37.2 containerAllocatedRequests."""
    allocated = cs.allocated() if cs is not None else None
    if allocated is not None:
        return allocated
    return None if infeasible else _spec_requests(c, path)


def _container_actuated(
    c: model.Container, path: str, init: bool, cs: _Status | None, infeasible: bool
) -> dict[str, int] | None:
    """component-helpers v0.37.2 containerActuatedRequests: what is actuated,
    else as :func:`_container_allocated`."""
    actuated = cs.actuated() if cs is not None else None
    if actuated is not None:
        return actuated
    return _container_allocated(c, path, init, cs, infeasible)


def _container_effective_v1_35(
    c: model.Container, path: str, init: bool, cs: _Status | None, infeasible: bool
) -> dict[str, int] | None:
    """component-helpers v0.35.4 / v0.36.3 AggregateContainerRequests with
    UseStatusResources: a container whose status reports resources counts
    ``determineEffectiveRequests`` — the larger of spec, actuated and
    allocated, or of the last two once the resize is infeasible — an init
    container only if it is a sidecar."""
    spec = _spec_requests(c, path)
    if cs is None or cs.status.resources is None or (init and c.restart_policy != "Always"):
        return spec
    if infeasible:
        return _max_of(cs.actuated(), cs.allocated())
    return _max_of(spec, cs.actuated(), cs.allocated())


def _max_of(first: Mapping[str, int] | None, *others: Mapping[str, int] | None) -> dict[str, int]:
    """component-helpers ``max(a, b...)``: every resource any list names, at its largest."""
    out = dict(first or {})
    for other in others:
        _max(out, other or {})
    return out


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if k not in into or v > into[k]:
            into[k] = v


def _resize_infeasible(pod: model.Pod) -> bool:
    """component-helpers IsPodResizeInfeasible: the first ``PodResizePending`` condition says ``Infeasible``."""
    for cond in pod.status.conditions:
        if cond.type == "PodResizePending":
            return cond.reason == "Infeasible"
    return False


def _statuses(pod: model.Pod) -> dict[str, _Status]:
    """component-helpers findContainerStatus for every name: containerStatuses first, then initContainerStatuses."""
    out: dict[str, _Status] = {}
    for field, statuses in (
        ("containerStatuses", pod.status.container_statuses),
        ("initContainerStatuses", pod.status.init_container_statuses),
    ):
        for i, cs in enumerate(statuses):
            out.setdefault(cs.name, _Status(cs, f"status.{field}[{i}]"))
    return out


def _aggregate(
    pod: model.Pod, of_container: _ContainerList, non_zero: bool, statuses: Mapping[str, _Status], infeasible: bool
) -> dict[str, int]:
    """component-helpers v0.37.2 aggregateContainerResourcesByFn (v0.34.4's
    AggregateContainerRequests loop): containers summed, raised to the
    largest init container, sidecars counted in both; a container missing a
    cpu or memory request counts the default with ``non_zero``
    (NonMissingContainerRequests: an explicit 0 stays 0)."""

    def one(c: model.Container, path: str, init: bool) -> dict[str, int]:
        # Every list function returns a list of its own: changed in place here.
        reqs = of_container(c, path, init, statuses.get(c.name), infeasible) or {}
        if non_zero:
            if CPU not in reqs:
                reqs[CPU] = DEFAULT_MILLI_CPU_REQUEST
            if MEMORY not in reqs:
                reqs[MEMORY] = DEFAULT_MEMORY_REQUEST
        return reqs

    spec = pod.spec
    reqs: dict[str, int] = {}
    for i, c in enumerate(spec.containers):
        _add(reqs, one(c, f"spec.containers[{i}]", False))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for i, c in enumerate(spec.init_containers):
        creq = one(c, f"spec.initContainers[{i}]", True)
        if c.restart_policy == "Always":
            _add(reqs, creq)
            _add(sidecars, creq)
            effective = dict(sidecars)
        else:
            effective = dict(creq)
            _add(effective, sidecars)
        _max(init_max, effective)
    _max(reqs, init_max)
    return reqs


def _container_requests(pod: model.Pod, non_zero: bool, options: PodResourcesOptions) -> dict[str, int]:
    """component-helpers AggregateContainerRequests of the options' release."""
    status = pod.status
    if not options.use_status_resources or not (
        status.container_statuses
        or status.init_container_statuses
        or status.allocated_resources is not None
        or status.resources is not None
        or _resize_infeasible(pod)
    ):
        # No status to count (a pod not yet running): every release counts the spec.
        return _aggregate(pod, _container_spec, non_zero, {}, False)
    statuses, infeasible = _statuses(pod), _resize_infeasible(pod)
    # component-helpers v0.37.2 (kube-scheduler 1.37) aggregates spec,
    # allocated and actuated requests apart and takes the largest sums;
    # v0.35.4 and v0.36.3 the largest of the three per container.
    if options.version < features.KubeVersion(1, 37):
        return _aggregate(pod, _container_effective_v1_35, non_zero, statuses, infeasible)
    spec = _aggregate(pod, _container_spec, non_zero, statuses, infeasible)
    pod_allocated = status.allocated_resources
    pod_actuated = status.resources.requests if status.resources is not None else None
    if options.in_place_pod_level_resources_vertical_scaling and pod_allocated is not None and pod_actuated:
        # Pod-level status holds the sums across containers already.
        allocated = canonical_list(pod_allocated, "status.allocatedResources")
        actuated = canonical_list(pod_actuated, "status.resources.requests")
    else:
        allocated = _aggregate(pod, _container_allocated, non_zero, statuses, infeasible)
        actuated = _aggregate(pod, _container_actuated, non_zero, statuses, infeasible)
    if infeasible:
        return _max_of(actuated, allocated)
    return _max_of(spec, actuated, allocated)


def _pod_level_requests(pod: model.Pod, options: PodResourcesOptions) -> dict[str, int]:
    """The pod-level requests PodRequests puts over the containers' sums:
    ``spec.resources.requests`` (IsSupportedPodLevelResource: cpu, memory,
    hugepages-*), or with in-place pod-level resizing the larger of it and
    ``status.resources`` / ``status.allocatedResources``."""
    spec = canonical_list(pod.spec.resources.requests, "spec.resources.requests") if pod.spec.resources else {}
    status = pod.status
    supported = [n for n in spec if _supported_at_pod_level(n)]
    if not supported:  # IsPodLevelRequestsSet
        return {}
    effective = spec
    if (
        options.in_place_pod_level_resources_vertical_scaling
        and options.use_status_resources
        and status.resources is not None
    ):
        actuated = canonical_list(status.resources.requests, "status.resources.requests")
        allocated = canonical_list(status.allocated_resources or {}, "status.allocatedResources")
        infeasible = _resize_infeasible(pod)
        if options.version < features.KubeVersion(1, 37):
            # v0.35.4 / v0.36.3 PodRequests: the names the spec sets, at
            # determineEffectiveRequests' value (0 if it has none).
            values = _max_of(actuated, allocated) if infeasible else _max_of(spec, actuated, allocated)
            return {n: values.get(n, 0) for n in supported}
        # v0.37.2 effectivePodLevelResources / applyPodLevelResources: every
        # supported name of max(spec unless infeasible, actuated, allocated).
        effective = _max_of(None if infeasible else spec, actuated, allocated)
    return {n: v for n, v in effective.items() if _supported_at_pod_level(n)}


def _supported_at_pod_level(name: str) -> bool:
    """component-helpers IsSupportedPodLevelResource: cpu, memory and hugepages-*."""
    return name in (CPU, MEMORY) or name.startswith("hugepages-")


def pod_requests(pod: model.Pod, *, non_zero: bool = False, options: PodResourcesOptions = SPEC_ONLY) -> dict[str, int]:
    """resource.PodRequests in canonical units, overhead included.

    With ``non_zero`` a container that requests no CPU or memory counts as
    requesting DEFAULT_MILLI_CPU_REQUEST / DEFAULT_MEMORY_REQUEST, as scoring
    assumes (``NonMissingContainerRequests``). ``options``: see
    :class:`PodResourcesOptions` (default: the spec alone). Raises
    QuantityError naming the field of a bad quantity, or ``spec`` when a
    total leaves the int64 range (each quantity fits; many of them may not).
    """
    reqs = _container_requests(pod, non_zero, options)
    if not options.skip_pod_level_resources and pod.spec.resources is not None and pod.spec.resources.requests:
        reqs.update(_pod_level_requests(pod, options))
    if pod.spec.overhead:
        _add(reqs, canonical_list(pod.spec.overhead, "spec.overhead"))
    for name, v in reqs.items():
        if v > _MAX_INT64:
            raise QuantityError(format_quantity(name, v), f"the pod's total {name} request must fit an int64", "spec")
    return {k: v for k, v in reqs.items() if v != 0}


def node_allocatable(node: model.Node) -> dict[str, int]:
    """Allocatable in canonical units; capacity stands in where allocatable is unset."""
    status = node.status
    if status.allocatable:
        return canonical_list(status.allocatable, "status.allocatable")
    return canonical_list(status.capacity, "status.capacity")
