"""Kubernetes quantities ("500m", "16Gi", "1e3") and the contract's integers.

Berth's API carries every resource amount as an int64 in the resource's
canonical unit: CPU in millicores, everything else in base units (bytes,
counts), as ``resource.Quantity``'s ``MilliValue()`` and ``Value()`` round
them (up). This module turns the strings people write into those integers
and back, so that no caller converts units by hand.

:func:`parse` is apimachinery's ``resource.ParseQuantity``
(``k8s.io/apimachinery/pkg/api/resource/quantity.go`` and ``suffix.go``):
an optional sign, digits with an optional fraction, then a binary suffix
(Ki, Mi, Gi, Ti, Pi, Ei), a decimal one (n, u, m, k, M, G, T, P, E) or an
exponent (``e3``, ``E-2``); its quirks (``"."`` and a bare ``"Mi"`` are
zero, ``"1."`` is one); its rounding (up, away from zero, to nano units);
and its messages, word for word. JSON and YAML numbers are quantities too
(``cpu: 2``). One bound is Berth's, as the server has it: a quantity whose
``MilliValue()`` does not fit an int64 is refused, decided from the digit
count before any arithmetic, so ``"1e300000"`` costs microseconds.

The server (``berth.cluster.resources``) parses the same way; this module
is a separate implementation because the client must not import the server,
and a test holds the two to the same answers.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction

__all__ = [
    "CPU",
    "MEMORY",
    "QuantityError",
    "canonical",
    "canonical_map",
    "format",
    "format_map",
    "format_pair",
    "parse",
]

CPU = "cpu"
MEMORY = "memory"
_EPHEMERAL_STORAGE = "ephemeral-storage"

_MAX_INT64 = 2**63 - 1
#: Nano-units of the largest quantity accepted: MilliValue() == 2**63 - 1.
_MAX_NANO = _MAX_INT64 * 10**6

_REGEX_TEXT = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT = f"quantities must match the regular expression '{_REGEX_TEXT}'"
ERR_SUFFIX = "unable to parse quantity's suffix"
ERR_RANGE = (
    f"must be between -{_MAX_INT64 // 1000}.{_MAX_INT64 % 1000:03d} and "
    f"{_MAX_INT64 // 1000}.{_MAX_INT64 % 1000:03d}, inclusive "
    "(resource.Quantity's MilliValue() must fit an int64)"
)
ERR_NEGATIVE = "must be greater than or equal to 0"

# sign, the digits before and after ".", the suffix; possessive, so a long
# input is matched in linear time.
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?+)(?P<whole>[0-9]*+)(?:\.(?P<frac>[0-9]*+))?+(?P<suffix>[eEinumkKMGTP]*+[-+]?+[0-9]*+)"
)
_EXPONENT = re.compile(r"[+-]?+0*+(?P<digits>[0-9]++)")

#: suffix -> (power of 10, power of 2)
_SUFFIXES: dict[str, tuple[int, int]] = {
    "": (0, 0),
    "n": (-9, 0),
    "u": (-6, 0),
    "m": (-3, 0),
    "k": (3, 0),
    "M": (6, 0),
    "G": (9, 0),
    "T": (12, 0),
    "P": (15, 0),
    "E": (18, 0),
    "Ki": (0, 10),
    "Mi": (0, 20),
    "Gi": (0, 30),
    "Ti": (0, 40),
    "Pi": (0, 50),
    "Ei": (0, 60),
}
_BINARY_FORMS = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


class QuantityError(ValueError):
    """A quantity Kubernetes would refuse; ``str()`` is the API server's
    field error, ``[path: ]Invalid value: "1.5.3": <detail>``."""

    def __init__(self, value: object, detail: str, path: str = "") -> None:
        self.value = value
        self.detail = detail
        self.path = path
        where = f"{path}: " if path else ""
        text = f"{where}Invalid value: {_quoted(value)}: {detail}"
        super().__init__(text if len(text) <= 2048 else text[:2000] + "...")

    def at(self, path: str) -> QuantityError:
        """This error located at ``path`` (kept when it has a path already)."""
        return self if self.path else QuantityError(self.value, self.detail, path)


def _quoted(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value if len(value) <= 64 else value[:64] + "...")
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"<an integer of {value.bit_length()} bits>"
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    return type(value).__name__


def _scale(suffix: str, text: object) -> tuple[int, int]:
    """(power of 10, power of 2) of a suffix, or of an ``e``/``E`` exponent
    that strconv.ParseInt takes as an int64."""
    known = _SUFFIXES.get(suffix)
    if known is not None:
        return known
    if len(suffix) > 1 and suffix[0] in "eE":
        m = _EXPONENT.fullmatch(suffix[1:])
        if m is not None and len(m["digits"]) <= 19:
            exponent = int(suffix[1:])
            if -(2**63) <= exponent <= _MAX_INT64:
                return exponent, 0
    raise QuantityError(text, ERR_SUFFIX)


def _nano(text: str) -> int:
    """The quantity ``text`` in nano-units, rounded away from zero."""
    s = text.strip()
    m = _QUANTITY.fullmatch(s) if s else None
    if m is None:
        raise QuantityError(text, ERR_FORMAT)
    tens, twos = _scale(m["suffix"], text)
    frac = m["frac"] or ""
    digits = (m["whole"] + frac).lstrip("0")
    if not digits:
        return 0
    # |value| = int(digits) * 10**(tens - len(frac)) * 2**twos; trailing
    # zeros go into the exponent.
    significant = digits.rstrip("0")
    tens += len(digits) - len(significant) - len(frac)
    # 10**(size - 1) <= |value| < 10**size, give or take 2**twos' digits.
    size = len(significant) + tens + len(str(2**twos))
    if size - 2 >= 16:  # at least 10**16 > 9223372036854775.807
        raise QuantityError(text, ERR_RANGE)
    if size <= -9:  # below one nano-unit: ParseQuantity rounds it up to 1n
        nano = 1
    else:
        # nano = significant * 10**(tens + 9) * 2**twos = significant * 10**shift / 5**twos
        shift = tens + 9 + twos
        if shift >= 0:
            nano = -(-(int(significant) * 10**shift) // 5**twos)
        else:
            # Only the digits above 10**-shift can make whole nano-units; the
            # rest (never all zeros: the last digit is not 0) adds "a bit".
            cut = len(significant) + shift
            head = int(significant[:cut]) if cut > 0 else 0
            nano = head // 5**twos + 1
    if nano > _MAX_NANO:
        raise QuantityError(text, ERR_RANGE)
    return -nano if m["sign"] == "-" else nano


def _nano_of(value: object) -> int:
    if isinstance(value, str):
        return _nano(value)
    if isinstance(value, bool):  # `true` is no number to Quantity.UnmarshalJSON
        raise QuantityError(value, ERR_FORMAT)
    if isinstance(value, int):
        if abs(value) * 1000 > _MAX_INT64:
            raise QuantityError(value, ERR_RANGE)
        return value * 10**9
    if isinstance(value, float):
        return _nano(repr(value))  # the number's JSON text ("inf" and "nan" fail)
    raise QuantityError(value, ERR_FORMAT)


def parse(value: str | int | float) -> Fraction:
    """The exact value of a quantity (rounded up to nano-units as
    ParseQuantity rounds); raises :class:`QuantityError`."""
    return Fraction(_nano_of(value), 10**9)


def canonical(resource: str, value: str | int | float) -> int:
    """The contract's integer for ``value`` of ``resource``: millicores for
    cpu (MilliValue), base units for the rest (Value), both rounded up.
    Raises :class:`QuantityError` for a malformed, too large or negative
    quantity (amounts are never negative: ValidateNonnegativeQuantity)."""
    nano = _nano_of(value)
    if nano < 0:
        raise QuantityError(value, ERR_NEGATIVE)
    unit = 10**6 if resource == CPU else 10**9
    return -(-nano // unit)


def canonical_map(amounts: object, path: str = "") -> dict[str, int]:
    """:func:`canonical` of every entry of a ``{resource: quantity}``
    mapping; an error names ``path[resource]``."""
    if not isinstance(amounts, dict):
        raise ValueError(f"{path or 'resources'}: expected a map of quantities, got {type(amounts).__name__}")
    out: dict[str, int] = {}
    for name, v in amounts.items():
        try:
            out[str(name)] = canonical(str(name), v)
        except QuantityError as e:
            raise e.at(f"{path}[{name}]" if path else str(name)) from None
    return out


def format(resource: str, value: int) -> str:
    """An exact Kubernetes quantity for a canonical integer: ``"500m"`` and
    ``"2"`` for cpu, ``"16Gi"`` for memory, ``"3"`` for a count."""
    if resource == CPU:
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if value and (resource in (MEMORY, _EPHEMERAL_STORAGE) or resource.startswith("hugepages-")):
        for suffix, unit in _BINARY_FORMS:
            if value % unit == 0:
                return f"{value // unit}{suffix}"
    return str(value)


def format_pair(resource: str, a: int, b: int) -> tuple[str, str]:
    """Two canonical amounts of one resource in one unit (``berth nodes``'
    requested/allocatable cells): the largest unit that divides both, so a
    reader compares like with like (``1000m/1900m``, not ``1/1900m``); a zero
    is plain ``0`` and does not choose the unit."""

    def side(value: int, suffix: str, unit: int) -> str:
        return "0" if value == 0 else f"{value // unit}{suffix}"

    if resource == CPU:
        if a % 1000 == 0 and b % 1000 == 0:
            return side(a, "", 1000), side(b, "", 1000)
        return side(a, "m", 1), side(b, "m", 1)
    if resource in (MEMORY, _EPHEMERAL_STORAGE) or resource.startswith("hugepages-"):
        for suffix, unit in _BINARY_FORMS:
            if (a or b) and a % unit == 0 and b % unit == 0:
                return side(a, suffix, unit), side(b, suffix, unit)
    return str(a), str(b)


def format_map(amounts: dict[str, int] | object) -> dict[str, str]:
    """:func:`format` of every entry, sorted by resource name."""
    items = amounts.items() if hasattr(amounts, "items") else ()
    return {k: format(k, int(v)) for k, v in sorted(items)}
