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
container sum for the resources they name.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction

from berth import errors
from berth.cluster import model

__all__ = [
    "CPU",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "EPHEMERAL_STORAGE",
    "MAX_MILLI_VALUE",
    "MEMORY",
    "PODS",
    "QuantityError",
    "canonical",
    "canonical_list",
    "format_quantity",
    "is_extended",
    "is_scalar",
    "node_allocatable",
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


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def _container_requests(c: model.Container, non_zero: bool, path: str) -> dict[str, int]:
    res = c.resources
    reqs: dict[str, int] = {}
    if res is not None:
        # The API server defaults a missing request to the container's limit.
        reqs.update(canonical_list(res.limits, f"{path}.resources.limits"))
        reqs.update(canonical_list(res.requests, f"{path}.resources.requests"))
    if non_zero:
        # NonMissingContainerRequests: only a request that is missing is
        # defaulted; an explicit zero stays zero.
        if CPU not in reqs:
            reqs[CPU] = DEFAULT_MILLI_CPU_REQUEST
        if MEMORY not in reqs:
            reqs[MEMORY] = DEFAULT_MEMORY_REQUEST
    return reqs


def _sum_requests(
    containers: Iterable[model.Container],
    init_containers: Iterable[model.Container],
    non_zero: bool,
) -> dict[str, int]:
    reqs: dict[str, int] = {}
    for i, c in enumerate(containers):
        _add(reqs, _container_requests(c, non_zero, f"spec.containers[{i}]"))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for i, c in enumerate(init_containers):
        creq = _container_requests(c, non_zero, f"spec.initContainers[{i}]")
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


def pod_requests(pod: model.Pod, *, non_zero: bool = False) -> dict[str, int]:
    """resource.PodRequests in canonical units, overhead included.

    With ``non_zero`` a container that requests no CPU or memory counts as
    requesting DEFAULT_MILLI_CPU_REQUEST / DEFAULT_MEMORY_REQUEST, as scoring
    assumes (``NonMissingContainerRequests``). Raises QuantityError naming
    the field of a bad quantity, or ``spec`` when a total leaves the int64
    range (each quantity fits; many of them may not).
    """
    spec = pod.spec
    reqs = _sum_requests(spec.containers, spec.init_containers, non_zero)
    if spec.resources is not None and spec.resources.requests:
        # IsSupportedPodLevelResource (v1.34): cpu, memory and hugepages-*.
        level = canonical_list(spec.resources.requests, "spec.resources.requests")
        for name, v in level.items():
            if name in (CPU, MEMORY) or name.startswith("hugepages-"):
                reqs[name] = v
    if spec.overhead:
        _add(reqs, canonical_list(spec.overhead, "spec.overhead"))
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
