"""Resource quantities and the requests a pod makes.

Canonical units (the contract's): CPU in millicores, everything else in base
units. Parsing follows apimachinery's ``resource.Quantity``: a signed decimal
number with an optional binary (Ki..Ei) or decimal (n, u, m, k, M..E) suffix or
an exponent; ``MilliValue``/``Value`` round up, and so do we.

A pod's effective request is kube-scheduler's
``k8s.io/component-helpers/resource.PodRequests``: the sum of its containers,
raised to the largest init container (sidecars — restartable init containers —
add to both), plus pod overhead. Pod-level resources (KEP-2837) replace the
container sum for the resources they name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction

from berth.cluster import model

__all__ = [
    "CPU",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "EPHEMERAL_STORAGE",
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

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE](?P<exp>[+-]?\d+))?$"
)


class QuantityError(ValueError):
    """A quantity that is not of Kubernetes' quantity grammar."""


@functools.lru_cache(maxsize=4096)
def _parse_str(text: str) -> Fraction:
    m = _QUANTITY.match(text.strip())
    if m is None:
        raise QuantityError(f"invalid quantity {text!r}")
    value = Fraction(m["num"])
    if m["exp"] is not None:
        return value * Fraction(10) ** int(m["exp"])
    suffix = m["suffix"] or ""
    return value * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])


def parse_quantity(value: model.Quantity) -> Fraction:
    """The exact value of a quantity; raises QuantityError."""
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    if isinstance(value, str):
        return _parse_str(value)
    raise QuantityError(f"invalid quantity {value!r}")


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def canonical(name: str, value: model.Quantity) -> int:
    """The contract's integer for a quantity of resource ``name``."""
    if isinstance(value, str):
        return _canonical_str(name == CPU, value)
    q = parse_quantity(value)
    return _ceil(q * 1000) if name == CPU else _ceil(q)


@functools.lru_cache(maxsize=4096)
def _canonical_str(milli: bool, text: str) -> int:
    """canonical() of a quantity string; workloads repeat a few strings endlessly."""
    q = _parse_str(text)
    return _ceil(q * 1000) if milli else _ceil(q)


def canonical_list(resources: Mapping[str, model.Quantity]) -> dict[str, int]:
    return {name: canonical(name, v) for name, v in resources.items()}


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


def _container_requests(c: model.Container, non_zero: bool) -> dict[str, int]:
    res = c.resources
    reqs: dict[str, int] = {}
    if res is not None:
        # The API server defaults a missing request to the container's limit.
        for name, v in res.limits.items():
            reqs[name] = canonical(name, v)
        for name, v in res.requests.items():
            reqs[name] = canonical(name, v)
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
    for c in containers:
        _add(reqs, _container_requests(c, non_zero))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in init_containers:
        creq = _container_requests(c, non_zero)
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
    assumes (``NonMissingContainerRequests``).
    """
    spec = pod.spec
    reqs = _sum_requests(spec.containers, spec.init_containers, non_zero)
    if spec.resources is not None and spec.resources.requests:
        # IsSupportedPodLevelResource (v1.34): cpu, memory and hugepages-*.
        for name, v in spec.resources.requests.items():
            if name in (CPU, MEMORY) or name.startswith("hugepages-"):
                reqs[name] = canonical(name, v)
    if spec.overhead:
        _add(reqs, canonical_list(spec.overhead))
    return {k: v for k, v in reqs.items() if v != 0}


def node_allocatable(node: model.Node) -> dict[str, int]:
    """Allocatable in canonical units; capacity stands in where allocatable is unset."""
    status = node.status
    source = status.allocatable or status.capacity
    return canonical_list(source)
