"""Bounds on decoded request values: every integer in int64, every string
within :data:`MAX_STRING_BYTES`, so no decoded value can overflow the core's
arrays or blow up a message. msgspec keeps arbitrary Python ints; these
checks walk what the handlers decode (one pod, a few victims, node images)."""

from __future__ import annotations

import re

import msgspec

from berth import errors

__all__ = ["INT64", "MAX_STRING_BYTES", "check_bounds", "check_int64", "within_bounds"]

#: The longest string a decoded object may hold: etcd's default request
#: limit (``--max-request-bytes``, 1.5 MiB), so no stored object has a longer one.
MAX_STRING_BYTES = 3 << 19

INT64 = (-(1 << 63), (1 << 63) - 1)


def check_int64(v: int, what: str) -> None:
    """``v`` fits int64, or a field error naming ``what``."""
    if not INT64[0] <= v <= INT64[1]:
        shown = str(v) if v.bit_length() < 200 else f"{str(v)[:40]}... ({len(str(v))} digits)"
        raise errors.InvalidArgument(f"{what}: Invalid value: {shown}: must fit in a 64-bit signed integer")


def check_bounds(obj: object, what: str) -> None:
    """Every integer in int64 and every string within MAX_STRING_BYTES
    inside ``obj`` (one pod or a few victims walk in well under a millisecond)."""
    stack: list[tuple[object, tuple[str, ...]]] = [(obj, ())]
    while stack:
        v, path = stack.pop()
        if isinstance(v, str):
            if len(v) > MAX_STRING_BYTES:
                raise errors.InvalidArgument(
                    f"{what}{''.join(path)}: Too long: may not be more than {MAX_STRING_BYTES} bytes"
                )
        elif isinstance(v, bool) or v is None or isinstance(v, float):
            continue
        elif isinstance(v, int):
            check_int64(v, f"{what}{''.join(path)}")
        elif isinstance(v, msgspec.Struct):
            for name, key in zip(v.__struct_fields__, v.__struct_encode_fields__, strict=True):
                stack.append((getattr(v, name), (*path, f".{key}")))
        elif isinstance(v, dict):
            for k, x in v.items():
                stack.append((k, (*path, "[key]")))
                stack.append((x, (*path, f"[{str(k)[:64]}]")))
        elif isinstance(v, list | tuple | set | frozenset):
            stack.extend((x, (*path, f"[{i}]")) for i, x in enumerate(v))


#: Nineteen digits in a row: the shortest integer literal that may not fit int64.
_LONG_DIGITS = re.compile(rb"[0-9]{19}")


def within_bounds(raw: bytes | msgspec.Raw) -> bool:
    """Whether whatever a JSON document decodes to surely passes
    :func:`check_bounds`, from its bytes alone (one C scan, where the walk
    visits every field in Python): no decoded string is longer than the
    document, and an integer outside int64 needs at least 19 digits. False
    means "walk it", not "out of bounds"."""
    return len(raw) <= MAX_STRING_BYTES and _LONG_DIGITS.search(raw) is None
