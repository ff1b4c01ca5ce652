"""Consumable capacity: a port of ``consumable_capacity.go``
(``k8s.io/dynamic-resource-allocation/structured/internal/incubating``, v0.37.2).

A device's capacity (``device.capacity[name].value``) is what all its
allocations together may consume. One allocation consumes, per capacity,
what the request asks for (rounded up to the capacity's ``requestPolicy``:
the next valid value, or ``min`` plus a multiple of ``step``), else the
policy's ``default``, else the whole capacity. A request naming a capacity
the device lacks does not fit it; a request that does not satisfy the
policy (above ``max``, off the steps, not a valid value) does not fit; a
request that cannot be represented (past int64, or not in milli units on
the fractional path) or a negative consumption aborts the allocation.

Quantities are exact :class:`~fractions.Fraction` values (:func:`parse`:
a device's capacity, a counter or a request may be far beyond the int64
milli range pod resources live in); Go's ``Value()`` and ``MilliValue()``
round away from zero, as here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction

from berth.cluster import dra, model

__all__ = ["CapacityError", "consumed", "fits", "format_quantity", "parse"]

INT64_MAX = 2**63 - 1

#: A device's consumption per capacity name.
Consumption = dict[str, Fraction]


class CapacityError(ValueError):
    """errCapacityRequestNotRepresentable / errNegativeCapacity: the allocation aborts."""


_QUANTITY = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?([a-zA-Z]*|[eE][+-]?\d+)")
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_cache: dict[str, Fraction] = {}


def parse(value: model.Quantity) -> Fraction:
    """resource.ParseQuantity's value, exactly (rounded up to nano-units as
    it rounds), without the int64 bound of pod resources; raises CapacityError."""
    if isinstance(value, int) and not isinstance(value, bool):
        return Fraction(value)
    text = value if isinstance(value, str) else repr(value)
    got = _cache.get(text)
    if got is not None:
        return got
    m = _QUANTITY.fullmatch(text.strip())
    if m is None or not (m[2] or m[3]):
        raise CapacityError(f"quantities must match the regular expression: {text!r}")
    sign, whole, frac, suffix = m[1], m[2] or "0", m[3] or "", m[4]
    number = Fraction(int(whole + frac), 10 ** len(frac))
    if suffix in _BINARY:
        number *= 2 ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        number *= Fraction(10) ** _DECIMAL[suffix]
    elif suffix[:1] in ("e", "E") and suffix[1:].lstrip("+-").isdigit():
        number *= Fraction(10) ** int(suffix[1:])
    else:
        raise CapacityError(f"unable to parse quantity's suffix: {text!r}")
    nano = number * 10**9
    if nano.denominator != 1:
        number = Fraction(math.ceil(nano), 10**9)
    got = -number if sign == "-" else number
    if len(_cache) < 4096:
        _cache[text] = got
    return got


def _q(value: model.Quantity) -> Fraction:
    return parse(value)


def _away(x: Fraction) -> int:
    """Go's Quantity rounding: up to the nearest integer away from zero."""
    return math.ceil(x) if x >= 0 else math.floor(x)


def _value(x: Fraction) -> int:
    return _away(x)


def _milli(x: Fraction) -> int:
    return _away(x * 1000)


def _safe_milli(x: Fraction) -> int | None:
    """safeMilliValue: the milli value when the conversion is lossless."""
    m = x * 1000
    if m.denominator != 1 or abs(m) > INT64_MAX:
        return None
    return int(m)


def fits(
    current: Mapping[str, Fraction],
    requested: dra.CapacityRequirements | None,
    capacity: Mapping[str, dra.DeviceCapacity],
    allocating: Mapping[str, Fraction] | None,
    fractional: bool,
    *,
    strict: bool = True,
) -> bool:
    """CmpRequestOverCapacity: whether one more allocation of ``requested``
    fits a device with ``capacity``, of which ``current`` (allocated) and
    ``allocating`` (this attempt) are taken. Raises CapacityError; without
    ``strict`` (v0.36.3: its callers skip a device on any error) it does not."""
    if not strict:
        try:
            return fits(current, requested, capacity, allocating, fractional)
        except CapacityError:
            return False
    requests = requested.requests if requested is not None else {}
    if any(name not in capacity for name in requests):
        return False  # this device lacks a requested capacity; another may have it
    # Every capacity is resolved first, so an unrepresentable request aborts
    # whatever the order ("skip or abort must not depend on map order").
    resolved = {name: _resolve(requests.get(name), cap, fractional, name) for name, cap in capacity.items()}
    for name, cap in capacity.items():
        amount = resolved[name]
        if _violates_policy(amount, cap.request_policy, fractional):
            return False
        total = current.get(name, Fraction(0)) + amount
        if allocating is not None:
            total += allocating.get(name, Fraction(0))
        if total > _q(cap.value):
            return False
    return True


def consumed(
    requested: dra.CapacityRequirements | None, capacity: Mapping[str, dra.DeviceCapacity], fractional: bool
) -> Consumption:
    """GetConsumedCapacityFromRequest: what one allocation takes of each capacity."""
    requests = requested.requests if requested is not None else {}
    return {name: _resolve(requests.get(name), cap, fractional, name) for name, cap in capacity.items()}


def _resolve(request: model.Quantity | None, cap: dra.DeviceCapacity, fractional: bool, name: str) -> Fraction:
    try:
        amount = _calculate(request, cap, fractional)
    except CapacityError as e:
        raise CapacityError(f'capacity "{name}": {e}') from None
    if amount < 0:
        raise CapacityError(f'capacity "{name}": capacity value is negative')
    return amount


def _calculate(request: model.Quantity | None, cap: dra.DeviceCapacity, fractional: bool) -> Fraction:
    """calculateConsumedCapacity."""
    policy = cap.request_policy
    if request is None:
        if policy is not None and policy.default is not None:
            return _q(policy.default)
        return _q(cap.value)
    value = _q(request)
    if policy is None:
        return value
    if policy.valid_range is not None and policy.valid_range.min is not None:
        return _round_up_range(value, policy.valid_range, fractional, str(request))
    if policy.valid_values:
        for v in policy.valid_values:  # sorted ascending (API validation)
            if value <= _q(v):
                return _q(v)
    return value


_NOT_REPRESENTABLE = "capacity request cannot be represented in the device's range arithmetic"


def _round_up_range(value: Fraction, valid: dra.CapacityRequestPolicyRange, fractional: bool, written: str) -> Fraction:
    """roundUpRange: at least ``min``, then up to the next ``min + n*step``."""
    assert valid.min is not None
    low = _q(valid.min)
    if value < low:
        return low
    if valid.step is None:
        return value
    step = _q(valid.step)
    if _use_milli(valid, fractional):
        requested = _safe_milli(value)
        if requested is None:
            raise CapacityError(f"{_NOT_REPRESENTABLE}: request {written} is not a representable milli value")
        step_m, low_m = _milli(step), _milli(low)
        n = -(-(requested - low_m) // step_m)
        if n > (INT64_MAX - low_m) // step_m:
            raise CapacityError(
                f"{_NOT_REPRESENTABLE}: rounding request {written} up to the next step passes the milli-value range"
            )
        return Fraction(low_m + step_m * n, 1000)
    if value > INT64_MAX:
        raise CapacityError(f"{_NOT_REPRESENTABLE}: request {written} exceeds MaxInt64")
    requested_i, step_i, low_i = _value(value), _value(step), _value(low)
    if step_i <= 0:
        return value  # API validation requires a positive step; Go would divide by zero
    n = -(-(requested_i - low_i) // step_i)
    if low_i >= 0 and n > (INT64_MAX - low_i) // step_i:
        raise CapacityError(f"{_NOT_REPRESENTABLE}: rounding request {written} up to the next step passes MaxInt64")
    return Fraction(low_i + step_i * n)


def _use_milli(valid: dra.CapacityRequestPolicyRange, fractional: bool) -> bool:
    """useMilli: DRAFractionalCapacityRange on and min/max/step all exact in milli units, step >= 1m."""
    if not fractional:
        return False
    for i, q in enumerate((valid.min, valid.max, valid.step)):
        if q is None:
            continue
        m = _safe_milli(_q(q))
        if m is None or (i == 2 and m < 1):
            return False
    return True


def _violates_policy(value: Fraction, policy: dra.CapacityRequestPolicy | None, fractional: bool) -> bool:
    """violatesPolicy."""
    if policy is None:
        return False
    if policy.default is not None and value == _q(policy.default):
        return False
    valid = policy.valid_range
    if valid is not None:
        if valid.max is not None and value > _q(valid.max):
            return True
        if valid.step is not None:
            low = _q(valid.min) if valid.min is not None else Fraction(0)
            if _use_milli(valid, fractional):
                requested = _safe_milli(value)
                if requested is None:
                    return True
                step, start = _milli(_q(valid.step)), _milli(low)
            else:
                requested, step, start = _value(value), _value(_q(valid.step)), _value(low)
            if step and (requested - start) % step != 0:
                return True
        return False
    if policy.valid_values:
        return all(value != _q(v) for v in policy.valid_values)
    return False


def format_quantity(value: Fraction) -> str:
    """A quantity string for ``value`` (the API server stores its canonical form)."""
    if value.denominator == 1:
        return str(value.numerator)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return f"{_away(value * 10**9)}n"
