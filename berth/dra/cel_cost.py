"""The estimated cost of a DRA device selector, as the API server computes it.

The API server refuses a selector whose estimated cost exceeds
``CELSelectorExpressionMaxCost`` (1 000 000) with "too complex, exceeds
cost limit" (``pkg/apis/resource/validation/validation.go``, v1.37.2);
the estimate is cel-go's ``EstimateCost`` (``checker/cost.go``, v0.29.2)
with the size bounds of the ``device`` variable declared in
``k8s.io/dynamic-resource-allocation/cel/compile.go`` (v0.37.2).

cel-expr-python (cel-cpp) exposes neither cel-cpp's estimator nor a
run-time cost tracker, so this ports cel-go's rules to the checked
expression cel-cpp serialises (a ``cel.expr.CheckedExpr`` in an ``Any``),
read with a few lines of protobuf wire decoding (the core does not import
protobuf). Macros are already expanded there (``.all`` and ``cel.bind``
are comprehensions), and the checker's reference map names each call's
overload, as cel-go's coster reads them. Sizes are tracked through
literals, ``device``'s bounds, bound variables (``cel.bind``) and iteration
variables; a size that cannot be bounded is cel-go's MaxUint64, and the
arithmetic saturates there as cel-go's does. Not ported: the API server
library's own call estimators (``k8s.io/apiserver/pkg/cel/library/cost.go``)
for functions a device selector does not use (lists, regex, URL, IP,
format); they count 1 per call here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_COST", "TOO_COMPLEX", "UNBOUNDED", "estimate_cost"]

#: A message's fields, (number, varint or bytes), in order.
Fields = list[tuple[int, Any]]

#: resourceapi.CELSelectorExpressionMaxCost (k8s.io/api/resource/v1, v0.37.2).
MAX_COST = 1_000_000
#: What the API server answers for a selector over it (field.Forbidden).
TOO_COMPLEX = "too complex, exceeds cost limit"

#: cel-go's math.MaxUint64: a size or cost it cannot bound.
UNBOUNDED = _UNKNOWN = 2**64 - 1
#: cel-go's common/cost.go constants.
_LIST_CREATE, _MAP_CREATE, _STRUCT_CREATE = 10, 30, 40
_STRING_TRAVERSAL, _REGEX_LENGTH = 0.1, 0.25


def _sat(x: int) -> int:
    return min(x, _UNKNOWN)


def _factor(size: int, factor: float) -> int:
    """cel-go's multiplyByCostFactor: ceil(size x factor), saturating."""
    return _UNKNOWN if size >= _UNKNOWN else _sat(-(-int(size * factor * 1000) // 1000))


@dataclass(frozen=True, slots=True)
class _Size:
    """A value's largest size (string length, list or map entries), its
    entries' sizes (list items, map values) and a map's keys' sizes."""

    max: int = _UNKNOWN
    item: _Size | None = None
    key: _Size | None = None


_SCALAR = _Size(1)
# compile.go's device type (v0.37.2): driver DriverNameMaxLength (63), at most
# ResourceSliceMaxAttributesAndCapacitiesPerDevice (32) domains and ids, an
# attribute max(DeviceAttributeMaxValueLength 64, ResourceSliceMaxAttributeValuesPerDevice 48).
_DEVICE_FIELDS = {
    "driver": _Size(63),
    "allowMultipleAllocations": _SCALAR,
    "attributes": _Size(32, _Size(32, _Size(64), key=_Size(32)), key=_Size(63)),
    "capacity": _Size(32, _Size(32, None, key=_Size(32)), key=_Size(63)),
}


def _wire(buf: bytes) -> Fields:
    """A protobuf message's fields, (number, varint or bytes), in order (the
    core decodes cel-cpp's serialised CheckedExpr without protobuf)."""
    out: Fields = []
    i, n = 0, len(buf)

    def varint() -> int:
        nonlocal i
        v = shift = 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v

    while i < n:
        key = varint()
        kind = key & 7
        value: Any
        if kind == 0:
            value = varint()
        elif kind == 2:
            length = varint()
            value, i = buf[i : i + length], i + length
        elif kind in (1, 5):
            width = 8 if kind == 1 else 4
            value, i = buf[i : i + width], i + width
        else:
            raise ValueError(f"unexpected wire type {kind}")
        out.append((key >> 3, value))
    return out


def _one(fields: Fields, number: int) -> Any:
    return next((v for f, v in fields if f == number), None)


class _Coster:
    """cel-go's ``coster`` (checker/cost.go v0.29.2): the worst-case cost of a
    checked expression, with sizes tracked through literals, the ``device``
    variable's declared bounds, bound variables and iteration variables."""

    def __init__(self, overloads: dict[int, list[str]], scalars: set[int]) -> None:
        self.overloads = overloads  # expression id -> the overload ids the checker left
        self.scalars = scalars  # expression ids of bool, int, uint and double type
        self.sizes: dict[int, _Size] = {}
        self.locals: list[tuple[str, _Size]] = []
        #: Expression ids whose value is a quantity or a semver (their equality is O(1)).
        self.kinds: dict[int, str] = {}

    def size(self, e: Fields) -> _Size:
        eid = _one(e, 2) or 0
        if eid in self.sizes:
            return self.sizes[eid]
        if eid in self.scalars:
            return _SCALAR
        const = _one(e, 3)
        if const is not None:
            c = _wire(const)
            text = _one(c, 6)
            if text is not None:
                return _Size(len(text.decode()))
            raw = _one(c, 7)
            return _Size(len(raw)) if raw is not None else _SCALAR
        return _Size()

    def cost(self, e: Fields) -> int:
        eid = _one(e, 2) or 0
        if _one(e, 3) is not None:
            return 0
        ident = _one(e, 4)
        if ident is not None:
            name = _one(_wire(ident), 1).decode()
            for var, size in reversed(self.locals):
                if var == name:
                    self.sizes[eid] = size
                    break
            else:
                if name == "device":
                    self.sizes[eid] = _Size(len(_DEVICE_FIELDS), None)
            return 1
        sel = _one(e, 5)
        if sel is not None:
            s = _wire(sel)
            operand = _wire(_one(s, 1))
            total = self.cost(operand)
            if _one(s, 3):
                return total  # has(): free (the API server's PresenceTestHasCost(false), environment/base.go)
            field = _one(s, 2).decode()
            root = _one(operand, 4)
            if root is not None and _one(_wire(root), 1) == b"device" and not self._shadowed("device"):
                self.sizes[eid] = _DEVICE_FIELDS.get(field, _Size())
                if field == "capacity":
                    self.kinds[eid] = "capacity"
            elif self.kinds.get(_one(operand, 2) or 0) == "capacities":
                self.kinds[eid] = "quantity"  # device.capacity[domain].id
            else:
                item = self.size(operand).item
                if item is not None:
                    self.sizes[eid] = item
            return _sat(total + 1)
        call = _one(e, 6)
        if call is not None:
            return self._call(eid, _wire(call))
        lst = _one(e, 7)
        if lst is not None:
            elements = [_wire(v) for f, v in _wire(lst) if f == 1]
            total = sum(self.cost(x) for x in elements)
            items = [self.size(x).max for x in elements]
            self.sizes[eid] = _Size(len(elements), _Size(max(items, default=0)))
            return _sat(total + _LIST_CREATE)
        struct = _one(e, 8)
        if struct is not None:
            st = _wire(struct)
            entries = [_wire(v) for f, v in st if f == 2]
            total = sum(self.cost(_wire(v)) for ent in entries for f, v in ent if f in (3, 4))
            base = _STRUCT_CREATE if _one(st, 1) else _MAP_CREATE
            if not _one(st, 1):
                values = [self.size(_wire(_one(ent, 4))).max for ent in entries]
                keys = [self.size(_wire(_one(ent, 3))).max for ent in entries if _one(ent, 3) is not None]
                self.sizes[eid] = _Size(len(entries), _Size(max(values, default=0)), _Size(max(keys, default=0)))
            return _sat(total + base)
        comp = _one(e, 9)
        if comp is not None:
            return self._comprehension(eid, _wire(comp))
        return 0

    def _shadowed(self, name: str) -> bool:
        return any(var == name for var, _ in self.locals)

    def _comprehension(self, eid: int, c: Fields) -> int:
        iter_var = (_one(c, 1) or b"").decode()
        iter_var2 = (_one(c, 8) or b"").decode()
        rng, init = _wire(_one(c, 2)), _wire(_one(c, 4))
        accu = (_one(c, 3) or b"").decode()
        cond, step, result = _wire(_one(c, 5)), _wire(_one(c, 6)), _wire(_one(c, 7))
        total = _sat(self.cost(rng) + self.cost(init))
        self.locals.append((accu, self.size(init)))
        bind = accu not in ("@result", "__result__") and not [v for f, v in _wire(_one(c, 2)) if f == 7 and _wire(v)]
        if bind and _one(cond, 3) is not None:
            # costBind: lazily initialised, the result's cost and size.
            total = _sat(total + self.cost(result))
            self.locals.pop()
            self.sizes[eid] = self.size(result)
            return total
        range_size = self.size(rng)
        values = range_size.item or _Size()
        # A map is iterated by key (and value); a list by item (or index and item).
        if range_size.key is not None:
            first = range_size.key
        elif iter_var2:
            first = _SCALAR
        else:
            first = values
        self.locals.append((iter_var, first))
        if iter_var2:
            self.locals.append((iter_var2, values))
        loop = _sat(self.cost(cond) + self.cost(step))
        del self.locals[-2 if iter_var2 else -1 :]
        total = _sat(total + self.cost(result))
        self.locals.pop()
        if _one(init, 3) is not None:
            self.sizes[eid] = self.size(init)
        elif _one(init, 7) is not None or _one(init, 8) is not None:
            self.sizes[eid] = _Size(range_size.max)
        return _sat(total + _sat(range_size.max * loop))

    def _call(self, eid: int, c: Fields) -> int:
        target = _one(c, 1)
        t = _wire(target) if target is not None else None
        args = [_wire(v) for f, v in c if f == 3]
        function = (_one(c, 2) or b"").decode()
        arg_costs = [self.cost(a) for a in ([t] if t is not None else []) + args]
        args_sum = _sat(sum(arg_costs))
        if function == "dyn" and args:
            self.sizes[eid] = self.size(args[0])
            return _sat(1 + args_sum)
        library = self._library(eid, function, t, args)
        if library is not None:
            return _sat(library + args_sum)
        # A call on dyn values may have several candidate overloads (``device``
        # is a map of dyn here, typed in cel-go): a value known to be a map
        # takes the map one, else the costliest counts, as cel-go's union.
        candidates = self.overloads.get(eid, [""])
        if {"in_list", "in_map"} & set(candidates) and len(args) == 2 and self.size(args[1]).key is not None:
            candidates = ["in_map"]
        return max(self._overload(eid, o, t, args, arg_costs, args_sum) for o in candidates)

    def _library(self, eid: int, function: str, t: Fields | None, args: list[Fields]) -> int | None:
        """The API server library's estimates (``CostEstimator.EstimateCallCost``,
        k8s.io/apiserver/pkg/cel/library/cost.go v0.37.2) for the quantity,
        semver and strings functions a selector may use; None for the others."""
        if function in ("quantity", "isQuantity", "semver", "isSemver") and args and t is None:
            if function in ("quantity", "semver"):
                self.kinds[eid] = function
            return _factor(self.size(args[0]).max, _STRING_TRAVERSAL)
        if function in ("add", "sub") and t is not None:
            self.kinds[eid] = "quantity"
            return 1
        if function == "_==_" and len(args) == 2:
            kind = self.kinds.get(_one(args[0], 2) or 0)
            if kind is not None and kind == self.kinds.get(_one(args[1], 2) or 0):
                return 1  # Quantity and Semver equality: O(1)
        if t is None:
            return None
        size = self.size(t)
        if function in ("lowerAscii", "upperAscii", "substring", "trim"):
            self.sizes[eid] = _Size(size.max)
            return _factor(size.max, _STRING_TRAVERSAL)
        if function == "split":
            limit = _one(_wire(_one(args[1], 3)), 3) if len(args) > 1 and _one(args[1], 3) is not None else None
            self.sizes[eid] = _Size(limit if limit is not None else size.max, _Size(size.max))
            return _factor(size.max, 2 * _STRING_TRAVERSAL)
        if function == "replace" and len(args) >= 2:
            return _factor(size.max, 2 * _STRING_TRAVERSAL)  # its result's size is left unbounded
        return None

    def _overload(
        self, eid: int, overload: str, t: Fields | None, args: list[Fields], arg_costs: list[int], args_sum: int
    ) -> int:
        """cel-go's ``functionCost`` for one overload."""
        if overload in ("index_list", "index_map") and len(args) == 2:
            item = self.size(args[0]).item
            if item is not None:
                self.sizes[eid] = item
            inner = self.kinds.get(_one(args[0], 2) or 0)
            if inner in ("capacity", "capacities"):
                self.kinds[eid] = "capacities" if inner == "capacity" else "quantity"
        if overload in ("starts_with_string", "ends_with_string") and len(args) == 1:
            return _sat(_factor(self.size(args[0]).max, _STRING_TRAVERSAL) + args_sum)
        if overload == "in_list" and len(args) == 2:
            return _sat(self.size(args[1]).max + args_sum)
        if overload in ("matches_string", "matches") and len(args) + (t is not None) == 2:
            text, regex = (t, args[0]) if t is not None else (args[0], args[1])
            text_cost = _factor(_sat(self.size(text).max + 1), _STRING_TRAVERSAL)
            return _sat(text_cost * _factor(self.size(regex).max, _REGEX_LENGTH) + args_sum)
        if overload == "contains_string" and t is not None and len(args) == 1:
            text_cost = _factor(self.size(t).max, _STRING_TRAVERSAL)
            return _sat(text_cost * _factor(self.size(args[0]).max, _STRING_TRAVERSAL) + args_sum)
        if overload in ("logical_and", "logical_or"):
            return args_sum
        if overload == "conditional" and len(args) == 3:
            yes, no = self.size(args[1]), self.size(args[2])
            self.sizes[eid] = _Size(max(yes.max, no.max))
            return _sat(arg_costs[0] + max(arg_costs[1], arg_costs[2]))
        if overload in ("add_string", "add_bytes", "add_list") and len(args) == 2:
            lhs, rhs = self.size(args[0]), self.size(args[1])
            joined = _sat(lhs.max + rhs.max)
            self.sizes[eid] = _Size(joined, lhs.item or rhs.item)
            return _sat((1 if overload == "add_list" else _factor(joined, _STRING_TRAVERSAL)) + args_sum)
        if overload in _COMPARISONS and len(args) == 2:
            smallest = min(self.size(args[0]).max, self.size(args[1]).max)
            return _sat(_factor(smallest, _STRING_TRAVERSAL) + args_sum)
        return _sat(1 + args_sum)


_COMPARISONS = frozenset(
    {"equals", "not_equals"}
    | {f"{op}_{kind}" for op in ("less", "greater", "less_equals", "greater_equals") for kind in ("string", "bytes")}
)


def estimate_cost(program: Any) -> int:
    """The worst-case cost of a compiled selector, as cel-go's ``EstimateCost``
    with compile.go's size bounds would put it (:class:`_Coster`)."""
    any_message = _wire(program.serialize())
    checked = _wire(_one(any_message, 2))
    overloads: dict[int, list[str]] = {}
    scalars: set[int] = set()
    for f, v in checked:
        if f == 2:  # reference_map: id -> Reference{name, overload_id...}
            entry = _wire(v)
            ids = [o.decode() for n, o in _wire(_one(entry, 2) or b"") if n == 3]
            if ids:
                overloads[_one(entry, 1) or 0] = ids
        elif f == 3:  # type_map: id -> Type; primitive (2) BOOL, INT64, UINT64, DOUBLE are scalars
            entry = _wire(v)
            primitive = _one(_wire(_one(entry, 2) or b""), 2)
            if primitive in (1, 2, 3, 4):
                scalars.add(_one(entry, 1) or 0)
    return _Coster(overloads, scalars).cost(_wire(_one(checked, 4)))
