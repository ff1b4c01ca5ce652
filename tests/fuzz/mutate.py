"""Structured mutations of realistic JSON payloads, driven by a seeded
:class:`random.Random` so that a run replays exactly from its seed.

A payload is a Python JSON tree (dicts, lists, scalars) plus two markers the
encoder understands: :class:`Raw` (text put into the document verbatim: a
number no float can hold, nesting deeper than any parser's recursion limit)
and :class:`Pairs` (an object with duplicate keys). :func:`mutate_tree`
changes the tree in place and says what it did; :func:`mutate_bytes` works
on the encoded body (truncation, flips, non-UTF-8 bytes, trailing data).

The values come from what broke Berth before (the attacker's report in
issue 11) and from what the Kubernetes API server itself refuses: quantity
strings outside ``resource.Quantity``'s grammar and range
(k8s.io/apimachinery/pkg/api/resource/quantity.go), integers past int64 and
past CPython's 4300-digit conversion limit, lone surrogates.
"""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
import random
import zlib
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "BAD_QUANTITIES",
    "EXTREME_NUMBERS",
    "WEIRD_STRINGS",
    "Pairs",
    "Raw",
    "Slot",
    "dumps",
    "gzip_bomb",
    "mutate_bytes",
    "mutate_tree",
    "slots",
]


@dataclasses.dataclass(frozen=True, slots=True)
class Raw:
    """JSON text inserted as is."""

    text: str


class Pairs(list[tuple[str, Any]]):
    """A JSON object written as these (key, value) pairs, duplicates and all."""


# A dict holding only this key is written as the Pairs it maps to (how a
# mutation gives an object a duplicate key in place).
_PAIRS = "\x00pairs"


#: Quantities the API server refuses, or accepts only at the edge of int64
#: milli-units (quantity.go's ``parseQuantityString`` and ``MilliValue``).
BAD_QUANTITIES: tuple[Any, ...] = (
    "1.5.3Gi",
    "1e400",
    "1e300000",
    "1E18",
    "9223372036854775807",
    "9223372036854775808",
    "9223372036854775807m",
    "-9223372036854775808m",
    "99999999999999999999999999Ei",
    "8Ei",
    "-1",
    "-500m",
    "",
    " ",
    "1 Gi",
    "1Gi ",
    "0.0000000001",
    "1e-400",
    "1..",
    ".",
    "m",
    "Gi",
    "1x",
    "0x10",
    "1_000",
    "+5",
    "١٢",  # Arabic-Indic digits: str.isdigit() says yes, the grammar says no
    "NaN",
    "Infinity",
    "1" * 5000,
    Raw("1e300000"),
    Raw("1" * 5000),
    Raw("-0"),
    2**63,
    -(2**63) - 1,
    1.5,
    True,
    None,
    [],
    {},
)

#: Numbers at and past every boundary a decoder or a C long has.
EXTREME_NUMBERS: tuple[Any, ...] = (
    0,
    -1,
    2**31 - 1,
    2**31,
    -(2**31) - 1,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64,
    Raw("1" + "0" * 4300),  # CPython's int-from-string limit is 4300 digits
    Raw("9" * 20000),
    Raw("1e400"),
    Raw("-1e400"),
    Raw("1e300000"),
    Raw("1e-400"),
    Raw("0.1e1"),
    Raw("-0"),
    Raw("1.0"),
    Raw("1E+2"),
    1e308,
    5e-324,
)

WEIRD_STRINGS: tuple[str, ...] = (
    "",
    " ",
    "\x00",
    "\ud800",  # a lone surrogate: valid JSON escape, not valid Unicode
    "\udfff\ud800",
    "\U0001f680",
    "\u202e",
    "é",
    "a" * 254,
    "a" * 64 * 1024,
    "../../etc/passwd",
    "default/web-1",
    "*",
    "null",
    "NaN",
    "%s%n",
    "UPPER",
    "ünïcödé-node",
    "\n",
)


# ---------------------------------------------------------------- encoding


def _emit(obj: Any, out: list[str]) -> None:
    if isinstance(obj, Raw):
        out.append(obj.text)
    elif isinstance(obj, Pairs):
        out.append("{")
        for i, (k, v) in enumerate(obj):
            if i:
                out.append(",")
            out.append(json.dumps(k))
            out.append(":")
            _emit(v, out)
        out.append("}")
    elif isinstance(obj, dict):
        _emit(obj[_PAIRS] if _PAIRS in obj else Pairs(obj.items()), out)
    elif isinstance(obj, list):
        out.append("[")
        for i, v in enumerate(obj):
            if i:
                out.append(",")
            _emit(v, out)
        out.append("]")
    elif isinstance(obj, bool) or obj is None or isinstance(obj, str):
        out.append(json.dumps(obj))
    elif isinstance(obj, int):
        out.append(int.__repr__(obj))  # json.dumps refuses past 4300 digits; repr too, but we stay under
    elif isinstance(obj, float):
        out.append(repr(obj) if obj == obj and abs(obj) != float("inf") else "1e400")
    else:
        raise TypeError(f"cannot encode {type(obj).__name__}")


def dumps(obj: Any) -> bytes:
    """``obj`` as JSON bytes; lone surrogates are written as ``\\uXXXX`` escapes."""
    out: list[str] = []
    _emit(obj, out)
    return "".join(out).encode("utf-8", "surrogatepass")


# ---------------------------------------------------------------- the tree


@dataclasses.dataclass(slots=True)
class Slot:
    """A place in the tree: ``container[key]``, reached by ``path``."""

    container: dict[str, Any] | list[Any]
    key: Any
    path: str

    @property
    def value(self) -> Any:
        return self.container[self.key]


def slots(tree: Any, path: str = "$") -> Iterator[Slot]:
    """Every value below ``tree`` (containers before what they hold)."""
    if isinstance(tree, dict) and _PAIRS not in tree:
        for k in list(tree):
            p = f"{path}.{k}"
            yield Slot(tree, k, p)
            yield from slots(tree[k], p)
    elif isinstance(tree, list) and not isinstance(tree, Pairs):
        for i in range(len(tree)):
            p = f"{path}[{i}]"
            yield Slot(tree, i, p)
            yield from slots(tree[i], p)


_QUANTITY_PARENTS = {"requests", "limits", "allocatable", "capacity", "overhead"}


def _is_quantity(slot: Slot) -> bool:
    parent = slot.path.rsplit(".", 2)
    return len(parent) == 3 and parent[1] in _QUANTITY_PARENTS


def _any_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 2 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice((True, False))
    if kind == 2:
        return rng.choice(EXTREME_NUMBERS)
    if kind == 3:
        return rng.choice(WEIRD_STRINGS)
    if kind == 4:
        return rng.choice(BAD_QUANTITIES)
    if kind == 5:
        return rng.uniform(-1e6, 1e6)
    if kind == 6:
        return [_any_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 7:
        return {rng.choice(("a", "Pod", "metadata", "name", "")): _any_value(rng, depth + 1)}
    return deep_nesting(rng)


def deep_nesting(rng: random.Random) -> Raw:
    depth = rng.choice((64, 1000, 5000, 100_000))
    if rng.random() < 0.5:
        return Raw("[" * depth + "]" * depth)
    return Raw('{"a":' * depth + "1" + "}" * depth)


def _rename(key: str, rng: random.Random) -> str:
    how = rng.randrange(6)
    if how == 0:
        return key.upper()
    if how == 1:
        return key.lower()
    if how == 2 and key:
        i = rng.randrange(len(key))
        return key[:i] + key[i + 1 :]  # a typo: one letter dropped
    if how == 3:
        return key + rng.choice(("s", "_", " ", "\u0000"))
    if how == 4:
        return ""
    return rng.choice(WEIRD_STRINGS[:8])


def _set(slot: Slot, value: Any) -> None:
    slot.container[slot.key] = value


def _drop(slot: Slot, rng: random.Random) -> str:
    if isinstance(slot.container, dict):
        del slot.container[slot.key]
    else:
        slot.container.pop(slot.key)
    return f"drop {slot.path}"


def _duplicate(slot: Slot, rng: random.Random) -> str:
    if isinstance(slot.container, list):
        slot.container.insert(slot.key, copy.deepcopy(slot.value))
        return f"duplicate {slot.path}"
    # An object with the key twice: what does the decoder keep?
    items = list(slot.container.items())
    other = _any_value(rng) if rng.random() < 0.5 else slot.value
    slot.container.clear()
    slot.container[_PAIRS] = Pairs([*items, (slot.key, other)])
    return f"duplicate key {slot.path}"


def _rename_key(slot: Slot, rng: random.Random) -> str:
    if not isinstance(slot.container, dict):
        return _swap_type(slot, rng)
    new = _rename(str(slot.key), rng)
    value = slot.container.pop(slot.key)
    slot.container[new] = value
    return f"rename {slot.path} -> {new[:20]!r}"


def _swap_type(slot: Slot, rng: random.Random) -> str:
    value = _any_value(rng)
    _set(slot, value)
    return f"swap {slot.path} = {_short(value)}"


def _extreme(slot: Slot, rng: random.Random) -> str:
    value = rng.choice(EXTREME_NUMBERS)
    _set(slot, value)
    return f"extreme {slot.path} = {_short(value)}"


def _quantity(slot: Slot, rng: random.Random) -> str:
    value = rng.choice(BAD_QUANTITIES)
    _set(slot, value)
    return f"quantity {slot.path} = {_short(value)}"


def _string(slot: Slot, rng: random.Random) -> str:
    value = rng.choice(WEIRD_STRINGS)
    _set(slot, value)
    return f"string {slot.path} = {_short(value)}"


def _nest(slot: Slot, rng: random.Random) -> str:
    value = deep_nesting(rng)
    _set(slot, value)
    return f"nest {slot.path} depth {value.text.count(value.text[0])}"


#: Largest body a repetition may build (a few times the fuzz target's limit).
REPEAT_BYTES = 4 * 1024 * 1024


def encoded_size(obj: Any, limit: int) -> int:
    """About how many bytes :func:`dumps` makes of ``obj``; stops counting past ``limit``."""
    size = 0
    stack = [obj]
    while stack and size <= limit:
        o = stack.pop()
        if isinstance(o, dict):
            stack.extend(o[_PAIRS] if _PAIRS in o else o.items())
            size += 2
        elif isinstance(o, list | tuple):
            stack.extend(o)
            size += 2 + len(o)
        elif isinstance(o, str):
            size += len(o) + 3
        elif isinstance(o, Raw):
            size += len(o.text)
        else:
            size += 8
    return size


def _repeat(slot: Slot, rng: random.Random, room: int = REPEAT_BYTES) -> str:
    value = slot.value
    item = value[rng.randrange(len(value))] if isinstance(value, list) and value else value
    n = min(rng.choice((100, 1000, 10_000)), max(1, room // max(encoded_size(item, room), 1)))
    # Copies, not references: a later mutation of one must not touch them all.
    copies = [copy.deepcopy(item) for _ in range(n)]
    if isinstance(value, list) and value:
        value.extend(copies)
    else:
        _set(slot, copies)
    return f"repeat {slot.path} x{n}"


def _null(slot: Slot, rng: random.Random) -> str:
    _set(slot, None)
    return f"null {slot.path}"


Mutation = Callable[[Slot, random.Random], str]

#: Mutations and their weights.
MUTATIONS: tuple[tuple[Mutation, int], ...] = (
    (_drop, 10),
    (_duplicate, 8),
    (_rename_key, 8),
    (_swap_type, 12),
    (_extreme, 8),
    (_quantity, 14),
    (_string, 8),
    (_nest, 3),
    (_repeat, 2),
    (_null, 5),
)


def mutate_tree(tree: Any, rng: random.Random) -> str:
    """One structured mutation of ``tree`` in place; returns what it did."""
    all_slots = list(slots(tree))
    if not all_slots:
        return "nothing to mutate"
    quantities = [s for s in all_slots if _is_quantity(s)]
    if quantities and rng.random() < 0.3:
        return _quantity(rng.choice(quantities), rng)
    ops, weights = zip(*MUTATIONS, strict=True)
    op: Mutation = rng.choices(ops, weights)[0]
    if op is _repeat:
        return _repeat(rng.choice(all_slots), rng, REPEAT_BYTES - encoded_size(tree, REPEAT_BYTES))
    return op(rng.choice(all_slots), rng)


# ---------------------------------------------------------------- bytes

_NON_UTF8 = (b"\xff", b"\xfe\xff", b"\xc3\x28", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80")


def mutate_bytes(body: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One mutation of the encoded body; returns it and what it did."""
    how = rng.randrange(7)
    if how == 0 and body:
        cut = rng.randrange(len(body))
        return body[:cut], f"truncate at {cut}/{len(body)}"
    if how == 1 and body:
        out = bytearray(body)
        for _ in range(rng.randint(1, 4)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        return bytes(out), "flip bits"
    if how == 2:
        # Non-UTF-8 inside a string, where a decoder must look at it.
        quotes = [i for i, b in enumerate(body) if b == 0x22] or [0]
        at = rng.choice(quotes) + 1
        bad = rng.choice(_NON_UTF8)
        return body[:at] + bad + body[at:], f"non-UTF-8 {bad!r} at {at}"
    if how == 3:
        return b"\xef\xbb\xbf" + body, "UTF-8 BOM"
    if how == 4:
        return body + rng.choice((b"{}", b"]", b"\x00", b" x", b"\n{" * 10)), "trailing data"
    if how == 5:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))), "random bytes"
    return body.replace(b'"', b"'", 1), "single quote"


# ---------------------------------------------------------------- encodings


def gzip_body(body: bytes) -> bytes:
    return gzip.compress(body, compresslevel=1)


_BOMBS: dict[int, bytes] = {}


def gzip_bomb(inflated: int) -> bytes:
    """A gzip member that inflates to ``inflated`` bytes of JSON-ish padding
    (a few KB on the wire); built once per size."""
    bomb = _BOMBS.get(inflated)
    if bomb is None:
        comp = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: gzip container
        chunk = b" " * (1 << 20)
        parts = [comp.compress(b'{"Pod":')]
        for _ in range(inflated // len(chunk)):
            parts.append(comp.compress(chunk))
        parts.append(comp.flush())
        bomb = _BOMBS[inflated] = b"".join(parts)
    return bomb


def _short(value: Any, limit: int = 40) -> str:
    text = value.text if isinstance(value, Raw) else repr(value)
    return text if len(text) <= limit else f"{text[:limit]}...({len(text)} chars)"
