"""Mutations of protobuf requests: structured ones that walk a message by
its descriptor (extreme integers, odd strings, cleared, duplicated and
oversized repeated fields, map entries), and wire-level ones on the
serialized bytes (bit flips, truncation, random field numbers and wire
types, overlong varints, lengths past the end, deep groups, non-UTF-8 in
strings) — what a client that does not use the generated stubs can send.

The wire format is https://protobuf.dev/programming-guides/encoding/.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator, Sequence
from typing import Any

from google.protobuf import descriptor
from google.protobuf.message import Message

from tests.fuzz.mutate import WEIRD_STRINGS

__all__ = ["INT_EXTREMES", "mutate_message", "mutate_wire", "varint"]

FD = descriptor.FieldDescriptor

INT_EXTREMES = {
    FD.CPPTYPE_INT32: (0, -1, 1, 2**31 - 1, -(2**31), 1000, 10**9),
    FD.CPPTYPE_INT64: (0, -1, 1, 2**63 - 1, -(2**63), 2**62, 2**62 + 1, 10**18, 2**53 + 1),
    FD.CPPTYPE_UINT32: (0, 1, 2**32 - 1),
    FD.CPPTYPE_UINT64: (0, 1, 2**64 - 1),
}

# Proto strings must be valid UTF-8 at this level; invalid bytes come from
# mutate_wire.
PROTO_STRINGS = tuple(s for s in WEIRD_STRINGS if not any(0xD800 <= ord(c) <= 0xDFFF for c in s))


# Field descriptors are typed as the pure-Python class or upb's; both behave alike.
Field = Any


@dataclasses.dataclass(slots=True)
class FieldSlot:
    msg: Message
    field: Field
    path: str


def _is_map(field: Field) -> bool:
    return field.message_type is not None and bool(field.message_type.GetOptions().map_entry)


def field_slots(msg: Message, path: str = "") -> Iterator[FieldSlot]:
    """Every field of ``msg`` and of the messages it holds, set or not."""
    for field in msg.DESCRIPTOR.fields:
        p = f"{path}.{field.name}" if path else field.name
        yield FieldSlot(msg, field, p)
        if field.cpp_type != FD.CPPTYPE_MESSAGE or _is_map(field):
            continue
        value = getattr(msg, field.name)
        if field.is_repeated:
            for i, item in enumerate(value):
                yield from field_slots(item, f"{p}[{i}]")
        elif msg.HasField(field.name):
            yield from field_slots(value, p)


def _scalar(field: Field, rng: random.Random, strings: Sequence[str]) -> Any:
    ct = field.cpp_type
    if ct in INT_EXTREMES:
        return rng.choice(INT_EXTREMES[ct])
    if ct == FD.CPPTYPE_BOOL:
        return rng.random() < 0.5
    if ct == FD.CPPTYPE_STRING:
        return rng.choice(strings) if strings and rng.random() < 0.5 else rng.choice(PROTO_STRINGS)
    if ct == FD.CPPTYPE_ENUM:
        return rng.choice((0, 1, 2, 99, -1, 2**31 - 1))
    if ct in (FD.CPPTYPE_DOUBLE, FD.CPPTYPE_FLOAT):
        return rng.choice((0.0, -1.0, 1e308, float("nan"), float("inf")))
    return b"\xff" * rng.randrange(4)


_MAX_REPEAT_BYTES = 16 << 20


def mutate_message(msg: Message, rng: random.Random, strings: Sequence[str] = ()) -> str:
    """One structured mutation of ``msg`` in place; ``strings`` are names and
    uids of live objects, so collisions are likely. Returns what it did."""
    all_slots = list(field_slots(msg))
    if not all_slots:
        return "no fields to mutate"
    slot = rng.choice(all_slots)
    m, f, path = slot.msg, slot.field, slot.path
    value = getattr(m, f.name)
    if _is_map(f):
        key_field = f.message_type.fields_by_name["key"]
        val_field = f.message_type.fields_by_name["value"]
        how = rng.randrange(3)
        if how == 0 and len(value):
            del value[rng.choice(list(value))]
            return f"drop entry of {path}"
        key = _scalar(key_field, rng, strings) if how == 1 else rng.choice(("cpu", "memory", "pods", "x/y"))
        if val_field.cpp_type == FD.CPPTYPE_MESSAGE:
            value.get_or_create(key)
        else:
            value[key] = _scalar(val_field, rng, strings)
        return f"map {path}[{key!r:.30}]"
    if f.is_repeated:
        how = rng.randrange(4)
        if how == 0:
            del value[:]
            return f"clear {path}"
        if how == 1 and len(value):
            n = rng.choice((2, 100, 10_000))
            item = value[rng.randrange(len(value))]
            # Repeats compound over a case's mutations (10 000 copies of a
            # list already repeated 10 000 times): stop at a few times the
            # server's message limit, past which only the size is tested.
            each = item.ByteSize() if f.cpp_type == FD.CPPTYPE_MESSAGE else len(str(item))
            n = max(2, min(n, _MAX_REPEAT_BYTES // max(each, 1)))
            if f.cpp_type == FD.CPPTYPE_MESSAGE:
                for _ in range(n - 1):
                    value.add().CopyFrom(item)
            else:
                value.extend([item] * (n - 1))
            return f"repeat {path} x{n}"
        if how == 2 and len(value) and f.cpp_type != FD.CPPTYPE_MESSAGE:
            value[rng.randrange(len(value))] = _scalar(f, rng, strings)
            return f"set an item of {path}"
        if f.cpp_type == FD.CPPTYPE_MESSAGE:
            added = value.add()
            if len(value) > 1 and rng.random() < 0.5:
                added.CopyFrom(value[0])  # a duplicate: same name, same uid
                return f"duplicate {path}[0]"
            return f"append empty {path}"
        value.append(_scalar(f, rng, strings))
        return f"append to {path}"
    if f.cpp_type == FD.CPPTYPE_MESSAGE:
        m.ClearField(f.name)
        if rng.random() < 0.5:
            getattr(m, f.name).SetInParent()
            return f"empty {path}"
        return f"clear {path}"
    new = _scalar(f, rng, strings)
    try:
        setattr(m, f.name, new)
    except (ValueError, TypeError):
        m.ClearField(f.name)
        return f"clear {path}"
    return f"set {path} = {new!r:.40}"


# ---------------------------------------------------------------- wire level


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _tag(number: int, wire_type: int) -> bytes:
    return varint((number << 3) | wire_type)


_FIELD_NUMBERS = (0, 1, 2, 3, 4, 5, 15, 16, 19000, 2**29 - 1, 99)


def mutate_wire(data: bytes, rng: random.Random, strings: Sequence[str] = ()) -> tuple[bytes, str]:
    """One wire-level mutation of serialized bytes; returns them and what it did."""
    how = rng.randrange(9)
    if how == 0 and data:
        out = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        return bytes(out), "flip bits"
    if how == 1 and data:
        cut = rng.randrange(len(data))
        return data[:cut], f"truncate at {cut}/{len(data)}"
    if how == 2:
        number, wt = rng.choice(_FIELD_NUMBERS), rng.randrange(8)
        payload = rng.choice(
            (b"", b"\x01", varint(2**64 - 1), b"\x05abcde", bytes(rng.randrange(256) for _ in range(8)))
        )
        at = rng.choice((0, len(data)))
        return data[:at] + _tag(number, wt) + payload + data[at:], f"field {number} wire type {wt} at {at}"
    if how == 3:
        return data + _tag(rng.choice((1, 2, 3)), 0) + b"\xff" * 11, "overlong varint"
    if how == 4:
        return data + _tag(rng.choice((1, 2, 3)), 2) + varint(
            rng.choice((2**31, 2**63, 1000))
        ) + b"x", "length past end"
    if how == 5:
        depth = rng.choice((100, 1000, 50_000))
        return data + _tag(98, 3) * depth, f"{depth} nested groups"
    if how == 6:
        # A string field's bytes made invalid UTF-8 (same length, so the message still frames).
        for s in strings:
            raw = s.encode()
            at = data.find(raw) if raw else -1
            if at >= 0:
                return data[:at] + b"\xff" + data[at + 1 :], f"non-UTF-8 in {s!r:.30}"
        return data + _tag(1, 2) + b"\x02\xc3\x28", "non-UTF-8 string"
    if how == 7:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 128))), "random bytes"
    # A length-delimited field nested as deep as it goes (what a recursive
    # message would be): field 1 of field 1 of ...
    depth = rng.choice((64, 200, 2000))
    body = b""
    for _ in range(depth):
        body = _tag(1, 2) + varint(len(body)) + body
    return body, f"{depth} nested messages"
