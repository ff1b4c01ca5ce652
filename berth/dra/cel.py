"""The CEL environment of DRA device selectors, on Google's cel-cpp.

Kubernetes evaluates a ``DeviceSelector`` with cel-go in the environment of
``k8s.io/dynamic-resource-allocation/cel/compile.go`` (v0.37.2): one variable
``device`` with ``driver``, ``allowMultipleAllocations`` (declared by
upstream only with DRAConsumableCapacity, on by default since 1.36; always
present here), ``attributes[domain][id]`` and ``capacity[domain][id]``, the
API server's base library (``quantity()``,
``semver()``, ``cel.bind`` ...), and a result that must be a bool. Berth
compiles the same expressions with ``cel-expr-python`` (the Python binding of
cel-cpp, Google's reference C++ implementation that passes the same conformance
suite as cel-go). Why this one over ``cel-python`` (pure Python, ~1.5 ms per
evaluation of a typical selector here) and ``common-expression-language``
(Rust, ~20-50 µs, but no type checker, so ``noSuchVar`` or ``"1" == 1`` are
runtime instead of compile errors as in Kubernetes, and no ``cel.bind``):
it type-checks at compile time like cel-go, has the bindings and strings
extensions, and evaluates a typical selector in ~10 µs.

How the Kubernetes environment is reproduced:

- ``device`` is a ``map(string, dyn)``; attributes are ints, bools, strings
  or semver values, capacities quantity values (``getAttributeValue``,
  ``DeviceMatches``). An attribute or capacity name without a domain gets the
  driver's (``parseQualifiedName``).
- Looking up a domain the device does not have yields an empty map, not an
  error (``newStringInterfaceMapWithDefault``), so
  ``has(device.attributes["other.example.com"].model)`` is false. cel-cpp has
  no map with a default, so every domain that appears as a string literal in
  the expression is added as an empty map when the device lacks it; a domain
  computed at run time still gets the "no such key" error.
- ``quantity``/``semver`` values (``k8s.io/apiserver/pkg/cel/library``
  ``quantity.go``, ``semverlib.go``): cel-cpp cannot carry an opaque Python
  type, so a value is a one-key tagged map (``{"__quantity__": "3/2"}``, the
  exact rational; ``{"__semver__": "1.2.3-rc.1"}``, without build metadata,
  which semver precedence ignores). Equal values compare equal with ``==`` as
  in Kubernetes, and the member functions (``compareTo``, ``isGreaterThan``,
  ``isLessThan``, ``add``, ``sub``, ``asInteger``, ``asApproximateFloat``,
  ``isInteger``, ``sign``, ``major``, ``minor``, ``patch``) dispatch on the tag.
- Cost (issue 28: a 617-character selector of nested ``cel.bind``
  doublings allocated 128 MiB per evaluation). The API server refuses a
  selector whose estimated cost exceeds ``CELSelectorExpressionMaxCost``
  (1 000 000) with "too complex, exceeds cost limit"
  (``pkg/apis/resource/validation/validation.go``, v1.37.2), and
  kube-scheduler evaluates with that run-time cost limit. cel-expr-python
  exposes neither cel-cpp's cost estimator nor a cost tracker, so
  :func:`berth.dra.cel_cost.estimate_cost` ports cel-go's estimator (``checker/cost.go``,
  v0.29.2, with the size bounds of compile.go's ``device`` type) to the
  checked expression cel-cpp serialises, :meth:`Cache.get_or_compile`
  records the estimate, and a selector over the limit is never evaluated:
  its evaluation fails with the limit named (the pod's reason), where
  cel-go would have stopped it part way. What cel-cpp itself stops (its
  comprehension iteration budget) is a run-time error too, never a crash.
- Not reproduced: the libraries a device selector has no use for (regex,
  lists, IP, URL, authz, format).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import semver
from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_strings

from berth.cluster import dra, resources
from berth.dra import capacity as dra_capacity
from berth.dra import cel_cost
from berth.errors import InvalidArgument

__all__ = [
    "Cache",
    "CelRuntimeError",
    "CompilationResult",
    "DeviceInput",
    "claim_selectors",
    "class_selectors",
    "device_input",
    "refuse_too_complex",
    "too_complex",
]

QUANTITY_KEY = "__quantity__"
SEMVER_KEY = "__semver__"


class DeviceInput:
    """The ``device`` variable for one device, built once (:func:`device_input`)
    and bound to cel-cpp activations as programs need them."""

    __slots__ = ("_activations", "data")

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self._activations: dict[tuple[int, frozenset[str]], Any] = {}

    def activation(self, env: Any, domains: frozenset[str]) -> Any:
        key = (id(env), domains)
        act = self._activations.get(key)
        if act is None:
            attributes, capacity = self.data["attributes"], self.data["capacity"]
            missing = [d for d in domains if d not in attributes or d not in capacity]
            data = self.data
            if missing:
                # compile.go's map with a default: a domain the device lacks is empty.
                data = {
                    **data,
                    "attributes": {**{d: {} for d in missing}, **attributes},
                    "capacity": {**{d: {} for d in missing}, **capacity},
                }
            act = self._activations[key] = env.Activation({"device": data})
        return act


class CelRuntimeError(InvalidArgument):
    """Evaluating a selector failed (cel-go's ``ContextEval`` error): a missing
    attribute, a type mismatch, a non-bool result."""


# ---------------------------------------------------------------- values


def _quantity(value: Fraction) -> dict[str, str]:
    return {QUANTITY_KEY: str(value)}


def _semver(version: semver.Version) -> dict[str, str]:
    return {SEMVER_KEY: str(version.replace(build=None))}


@lru_cache(maxsize=4096)
def _parse_semver(text: str) -> semver.Version:
    # blang/semver's Parse: strict semver 2.0.0, no leading "v", no partial versions.
    return semver.Version.parse(text)


#: A tagged quantity's exact value (the same few strings come back for every device).
_fraction = lru_cache(maxsize=4096)(Fraction)


def _normalize_semver(text: str) -> semver.Version:
    """semverlib.go normalizeAndParse: a leading "v" dropped, leading zeros
    stripped, a missing minor or patch filled with 0."""
    parts = text.removeprefix("v").split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or not p[0].isdigit():
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise ValueError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return _parse_semver(".".join(parts))


def _tagged(value: object) -> tuple[str, str] | None:
    if isinstance(value, dict) and len(value) == 1:
        ((k, v),) = value.items()
        if k in (QUANTITY_KEY, SEMVER_KEY):
            return k, v
    return None


def _as_quantity(value: object) -> Fraction:
    tag = _tagged(value)
    if tag is None or tag[0] != QUANTITY_KEY:
        raise TypeError("no such overload")
    return _fraction(tag[1])


def _cmp(a: object, b: object) -> int:
    ta, tb = _tagged(a), _tagged(b)
    if ta is None or tb is None or ta[0] != tb[0]:
        raise TypeError("no such overload")
    if ta[0] == QUANTITY_KEY:
        x, y = _fraction(ta[1]), _fraction(tb[1])
        return (x > y) - (x < y)
    return int(_parse_semver(ta[1]).compare(_parse_semver(tb[1])))


def _semver_part(part: str) -> Callable[[object], int]:
    def get(value: object) -> int:
        tag = _tagged(value)
        if tag is None or tag[0] != SEMVER_KEY:
            raise TypeError("no such overload")
        return int(getattr(_parse_semver(tag[1]), part))

    return get


@lru_cache(maxsize=4096)
def _parse_quantity(text: str) -> Fraction:
    return resources.parse_quantity(text)


def _string_to_quantity(text: str) -> dict[str, str]:
    return _quantity(_parse_quantity(text))


def _is_quantity(text: str) -> bool:
    try:
        _parse_quantity(text)
    except (InvalidArgument, ValueError):
        return False
    return True


@lru_cache(maxsize=4096)
def _string_to_semver(text: str, normalize: bool = False) -> dict[str, str]:
    return _semver(_normalize_semver(text) if normalize else _parse_semver(text))


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        _string_to_semver(text, normalize)
    except ValueError:
        return False
    return True


def _as_integer(value: object) -> int:
    q = _as_quantity(value)
    # resource.Quantity.AsInt64: exact integers within int64 only.
    if q.denominator != 1 or not -(2**63) <= q.numerator < 2**63:
        raise ValueError("cannot convert value to integer")
    return q.numerator


def _is_integer(value: object) -> bool:
    q = _as_quantity(value)
    return q.denominator == 1 and -(2**63) <= q.numerator < 2**63


def _sign(value: object) -> int:
    q = _as_quantity(value)
    return (q > 0) - (q < 0)


def _add(a: object, b: object) -> dict[str, str]:
    other = Fraction(b) if isinstance(b, int) else _as_quantity(b)
    return _quantity(_as_quantity(a) + other)


def _sub(a: object, b: object) -> dict[str, str]:
    other = Fraction(b) if isinstance(b, int) else _as_quantity(b)
    return _quantity(_as_quantity(a) - other)


def _declarations() -> list[cel.FunctionDecl]:
    t = cel.Type
    value = t.Map(t.STRING, t.DYN)  # a tagged quantity or semver

    def fn(name: str, *overloads: tuple[str, Any, list[Any], bool, Callable[..., Any]]) -> cel.FunctionDecl:
        return cel.FunctionDecl(
            name,
            [
                cel.Overload(oid, ret, params, is_member=member, impl=impl)
                for oid, ret, params, member, impl in overloads
            ],
        )

    return [
        fn("quantity", ("string_to_quantity", value, [t.STRING], False, _string_to_quantity)),
        fn("isQuantity", ("is_quantity_string", t.BOOL, [t.STRING], False, _is_quantity)),
        fn(
            "semver",
            ("string_to_semver", value, [t.STRING], False, _string_to_semver),
            ("string_bool_to_semver", value, [t.STRING, t.BOOL], False, _string_to_semver),
        ),
        fn(
            "isSemver",
            ("is_semver_string", t.BOOL, [t.STRING], False, _is_semver),
            ("is_semver_string_bool", t.BOOL, [t.STRING, t.BOOL], False, _is_semver),
        ),
        fn("compareTo", ("value_compare_to", t.INT, [value, value], True, _cmp)),
        fn("isGreaterThan", ("value_is_greater_than", t.BOOL, [value, value], True, lambda a, b: _cmp(a, b) > 0)),
        fn("isLessThan", ("value_is_less_than", t.BOOL, [value, value], True, lambda a, b: _cmp(a, b) < 0)),
        fn(
            "asApproximateFloat",
            ("quantity_get_float", t.DOUBLE, [value], True, lambda a: float(_as_quantity(a))),
        ),
        fn("asInteger", ("quantity_get_int", t.INT, [value], True, _as_integer)),
        fn("isInteger", ("quantity_is_integer", t.BOOL, [value], True, _is_integer)),
        fn("sign", ("quantity_sign", t.INT, [value], True, _sign)),
        fn(
            "add",
            ("quantity_add", value, [value, value], True, _add),
            ("quantity_add_int", value, [value, t.INT], True, _add),
        ),
        fn(
            "sub",
            ("quantity_sub", value, [value, value], True, _sub),
            ("quantity_sub_int", value, [value, t.INT], True, _sub),
        ),
        fn("major", ("semver_major", t.INT, [value], True, _semver_part("major"))),
        fn("minor", ("semver_minor", t.INT, [value], True, _semver_part("minor"))),
        fn("patch", ("semver_patch", t.INT, [value], True, _semver_part("patch"))),
    ]


def _new_env() -> cel.Env:
    return cel.NewEnv(
        variables={"device": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)},
        functions=_declarations(),
        extensions=[ext_bindings.ExtBindings(), ext_strings.ExtStrings()],
    )


# ---------------------------------------------------------------- devices


def _split(name: str, driver: str) -> tuple[str, str]:
    """compile.go parseQualifiedName: ``domain/id``, or the driver's domain."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def attribute_value(attr: dra.DeviceAttribute, *, lists: bool = True) -> Any:
    """compile.go getAttributeValue: the one value set, as CEL sees it. List
    values (DRAListTypeAttributes) come first since v0.37.2, whatever the
    gate says; without ``lists`` (v0.36.3 with the gate off) they are an
    unsupported value."""
    if lists:
        if attr.int_values is not None:
            return list(attr.int_values)
        if attr.bool_values is not None:
            return list(attr.bool_values)
        if attr.string_values is not None:
            return list(attr.string_values)
        if attr.version_values is not None:
            try:
                return [_semver(_parse_semver(v)) for v in attr.version_values]
            except ValueError as e:
                raise CelRuntimeError(f"parse semantic version: {e}") from None
    if attr.int_value is not None:
        return attr.int_value
    if attr.bool_value is not None:
        return attr.bool_value
    if attr.string_value is not None:
        return attr.string_value
    if attr.version_value is not None:
        try:
            return _semver(_parse_semver(attr.version_value))
        except ValueError as e:
            raise CelRuntimeError(f"parse semantic version: {e}") from None
    raise CelRuntimeError("unsupported attribute value")


def device_input(driver: str, device: dra.Device, *, lists: bool = True) -> DeviceInput:
    """The ``device`` variable for one device of ``driver`` (``DeviceMatches``);
    ``lists`` as for :func:`attribute_value`.

    Raises CelRuntimeError for an attribute without a value or with a bad version."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, attr in device.attributes.items():
        domain, ident = _split(name, driver)
        try:
            attributes.setdefault(domain, {})[ident] = attribute_value(attr, lists=lists)
        except CelRuntimeError as e:
            raise CelRuntimeError(f"attribute {name}: {e}") from None
    capacity: dict[str, dict[str, Any]] = {}
    for name, cap in device.capacity.items():
        domain, ident = _split(name, driver)
        capacity.setdefault(domain, {})[ident] = _quantity(dra_capacity.parse(cap.value))
    # compile.go (v0.37.2) declares allowMultipleAllocations with DRAConsumableCapacity.
    multi = bool(device.allow_multiple_allocations)
    return DeviceInput(
        {"driver": driver, "allowMultipleAllocations": multi, "attributes": attributes, "capacity": capacity}
    )


# ---------------------------------------------------------------- programs

# CEL string literals: optional r/b prefixes, triple or single quotes.
_STRING_LITERAL = re.compile(
    r"""(?:[rR][bB]?|[bB][rR]?)?("""
    r'''"""(?P<t1>.*?)"""|'''
    r"""'''(?P<t2>.*?)'''|"""
    r""""(?P<d>(?:\\.|[^"\\\n])*)"|"""
    r"""'(?P<s>(?:\\.|[^'\\\n])*)')""",
    re.DOTALL,
)
_DOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def _literal_domains(expression: str) -> frozenset[str]:
    """The string literals of ``expression`` that could name a domain."""
    found = set()
    for m in _STRING_LITERAL.finditer(expression):
        text = next(g for g in m.group("t1", "t2", "d", "s") if g is not None)
        if _DOMAIN.match(text):
            found.add(text)
    return frozenset(found)


@dataclass(frozen=True, slots=True)
class CompilationResult:
    """One compiled selector (``cel.CompilationResult``): ``error`` is the
    compile error's detail when the expression does not compile."""

    expression: str
    error: str | None
    _program: Any = None
    _env: Any = None
    _domains: frozenset[str] = frozenset()
    #: The estimated worst-case cost (:func:`estimate_cost`); 0 when it did not compile.
    max_cost: int = 0

    def device_matches(self, device: DeviceInput) -> bool:
        """Whether the device satisfies the selector (compile.go DeviceMatches).

        Raises CelRuntimeError when evaluation fails or the result is not a
        bool, and without evaluating when the estimated cost is over the
        limit (see the module docstring)."""
        if self._program is None:
            raise CelRuntimeError(f"compilation failed: {self.error}")
        if self.max_cost > cel_cost.MAX_COST:
            raise CelRuntimeError(
                f"operation cancelled: estimated cost {_shown(self.max_cost)} exceeds "
                f"the cost limit {cel_cost.MAX_COST}"
            )
        try:
            result = self._program.eval(device.activation(self._env, self._domains))
        except RuntimeError as e:  # cel-cpp's own limits ("Iteration budget exceeded")
            raise CelRuntimeError(_detail(e)) from None
        kind = result.type()
        if kind == cel.Type.BOOL:
            return bool(result.value())
        if kind == cel.Type.ERROR:
            raise CelRuntimeError(str(result.value()))
        raise CelRuntimeError(f"CEL result of type {kind.name()} could not be converted to bool")


class Cache:
    """Compiled selectors by expression text (``cel.Cache``): an LRU of
    ``max_size`` entries, safe to share between threads."""

    def __init__(self, max_size: int = 1024) -> None:
        self._max = max_size
        self._entries: OrderedDict[str, CompilationResult] = OrderedDict()
        self._lock = threading.Lock()
        self._env = _new_env()

    def get_or_compile(self, expression: str) -> CompilationResult:
        with self._lock:
            hit = self._entries.get(expression)
            if hit is not None:
                self._entries.move_to_end(expression)
                return hit
        result = self._compile(expression)
        with self._lock:
            self._entries[expression] = result
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return result

    def _compile(self, expression: str) -> CompilationResult:
        try:
            program = self._env.compile(expression)
        except RuntimeError as e:
            return CompilationResult(expression, f"compilation failed: {_detail(e)}")
        out = program.return_type()
        if out != cel.Type.BOOL and out != cel.Type.DYN:
            return CompilationResult(expression, f"must evaluate to bool or the unknown type, not {out.name().lower()}")
        return CompilationResult(
            expression, None, program, self._env, _literal_domains(expression), cel_cost.estimate_cost(program)
        )

    def __len__(self) -> int:
        return len(self._entries)


def too_complex(expression: str, cache: Cache | None = None) -> str | None:
    """The API server's refusal of a selector whose estimated cost exceeds
    ``cel_cost.MAX_COST`` (None when it does not, or does not compile: the
    allocator reports that)."""
    compiled = (cache or _SHARED).get_or_compile(expression)
    return cel_cost.TOO_COMPLEX if compiled.error is None and compiled.max_cost > cel_cost.MAX_COST else None


def class_selectors(spec: dra.DeviceClassSpec, path: str) -> list[tuple[str, dra.DeviceSelector]]:
    """Every selector of a DeviceClass's spec, with its field path."""
    return [(f"{path}.selectors[{j}]", s) for j, s in enumerate(spec.selectors)]


def claim_selectors(spec: dra.ResourceClaimSpec, path: str) -> list[tuple[str, dra.DeviceSelector]]:
    """Every selector of a claim's (or a template's) spec, with its field path."""
    out: list[tuple[str, dra.DeviceSelector]] = []
    for i, request in enumerate(spec.devices.requests):
        at = f"{path}.devices.requests[{i}]"
        if request.exactly is not None:
            out += [(f"{at}.exactly.selectors[{j}]", s) for j, s in enumerate(request.exactly.selectors)]
        for k, sub in enumerate(request.first_available):
            out += [(f"{at}.firstAvailable[{k}].selectors[{j}]", s) for j, s in enumerate(sub.selectors)]
    return out


def refuse_too_complex(selectors: list[tuple[str, dra.DeviceSelector]]) -> None:
    """InvalidArgument naming the first selector the API server would refuse
    as too complex (``ValidateDeviceSelector``: ``field.Forbidden(...cel.expression,
    "too complex, exceeds cost limit")``); nothing when none is."""
    for path, selector in selectors:
        if selector.cel is not None and selector.cel.expression:
            why = too_complex(selector.cel.expression)
            if why is not None:
                raise InvalidArgument(f"{path}.cel.expression: Forbidden: {why}")


def _shown(cost: int) -> str:
    return "unbounded" if cost >= cel_cost.UNBOUNDED else str(cost)


#: cel-cpp's absl status around a message: "CODE: message [CODE]".
_STATUS = re.compile(r"^([A-Z_]+): (.*?)\s*\[\1\]$", re.DOTALL)


def _detail(e: RuntimeError) -> str:
    # "INVALID_ARGUMENT: ERROR: <input>:1:1: undeclared reference to 'x' ... [INVALID_ARGUMENT]",
    # "INTERNAL: Iteration budget exceeded [INTERNAL]" (the status code is cel-cpp's, not Berth's answer)
    text = str(e).strip()
    m = _STATUS.match(text)
    return m.group(2).strip() if m else text


#: Selectors compiled where no allocator's cache is at hand (the feeds' cost check).
_SHARED = Cache()
