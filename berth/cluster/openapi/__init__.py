"""The fields Kubernetes knows, for strict manifests: which keys each object
of a supported kind may hold, and the shape of each value.

``v1.37.json`` beside this file (Kubernetes 1.37, the newest release Berth
follows) is generated once from a real kube-apiserver (``make openapi``,
``scripts/gen_openapi.py``) and committed; nothing here is
a hand-kept list. It maps each kind (``Pod``, ``PodList``, ...) to its type,
and each type to its fields, whose *shape* is one of::

    s      a scalar (string, number, bool; Quantity and IntOrString too)
    @T     an object of type T (its own entry in ``types``)
    []X    a list of X
    {}X    a map (``additionalProperties``) from any key to X
    *      anything (``x-kubernetes-preserve-unknown-fields``, free-form)

:func:`check` walks a decoded document against its kind, the way the API
server's strict field validation (``fieldValidation=Strict``, kubectl's
``--validate=strict``) decodes a request: an unknown field is a
:class:`Problem` naming its path, with a suggestion from the object's own
fields; so is a duplicate field (when the decoder recorded one on a
:class:`DecodedMapping`) and a value of the wrong shape (an object where a
list belongs). Keys under maps (labels, annotations, requests) and under
``*`` are never unknown.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib.resources
import json
from collections.abc import Mapping
from typing import Any, Literal

__all__ = ["SCHEMA_FILE", "DecodedMapping", "Problem", "Schema", "check", "schema"]

#: The committed schema, for the pinned Kubernetes version of the e2e bed.
SCHEMA_FILE = "v1.37.json"


class DecodedMapping(dict[Any, Any]):
    """A decoded mapping that remembers the keys its source held twice
    (YAML and JSON decoders otherwise keep the last value silently)."""

    __slots__ = ("duplicates",)

    def __init__(self, pairs: Any = (), duplicates: list[tuple[Any, int | None]] | None = None) -> None:
        super().__init__(pairs)
        #: (key, 1-based line of the second occurrence or None)
        self.duplicates = duplicates or []


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """One field the API server's strict decoding would refuse."""

    path: str
    message: str
    #: "unknown" and "duplicate" fields are what ``--validate=warn`` lets
    #: pass; a value of the wrong "shape" never decodes.
    kind: Literal["unknown", "duplicate", "shape"] = "unknown"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclasses.dataclass(frozen=True, slots=True)
class Schema:
    kubernetes_version: str
    #: kind -> shape of its top-level object (``@T``)
    kinds: Mapping[str, str]
    #: type -> field -> shape
    types: Mapping[str, Mapping[str, str]]
    #: the fields every ``*List`` kind has (apiVersion, items, kind,
    #: metadata): what a generic ``kind: List`` may hold
    list_envelope: frozenset[str]


#: the shape of a field :func:`check` was told to skip
_SKIP = "-"


@functools.cache
def schema() -> Schema:
    """The committed schema (read once)."""
    raw = json.loads(importlib.resources.files(__name__).joinpath(SCHEMA_FILE).read_text())
    kinds = {k: v["type"] for k, v in raw["kinds"].items()}
    lists = [set(raw["types"][t[1:]]) for k, t in kinds.items() if k.endswith("List")]
    return Schema(
        kubernetes_version=raw["kubernetesVersion"],
        kinds=kinds,
        types=raw["types"],
        list_envelope=frozenset(set.intersection(*lists)) if lists else frozenset(),
    )


def check(obj: Mapping[str, Any], kind: str, *, skip: frozenset[str] = frozenset()) -> tuple[Any, list[Problem]]:
    """``obj`` checked against ``kind``: a copy of ``obj`` without its
    unknown fields (``obj`` itself when there were none), and the problems
    found, in document order. Top-level fields in ``skip`` are not looked into (a
    List's ``items``, which are checked one by one)."""
    problems: list[Problem] = []
    s = schema()
    if kind in s.kinds:
        fields = s.types[s.kinds[kind][1:]]
    else:  # a generic List (v1 List, as kubectl writes it)
        fields = dict.fromkeys(s.list_envelope, "*")
    fields = {k: (_SKIP if k in skip else v) for k, v in fields.items()}
    cleaned = _Walker(s, problems).object(obj, fields, "")
    return cleaned, problems


def _what(value: Any) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def _suggest(key: str, known: Mapping[str, str]) -> str:
    """difflib's closest known field, preferring one that differs only in case."""
    for name in known:
        if name.lower() == key.lower():
            return name
    close = difflib.get_close_matches(key, list(known), n=1)
    return close[0] if close else ""


@dataclasses.dataclass(slots=True)
class _Walker:
    schema: Schema
    problems: list[Problem]

    def _duplicates(self, value: Mapping[Any, Any], path: str, *, key_path: bool) -> None:
        for key, line in getattr(value, "duplicates", ()):
            # The API server (sigs.k8s.io/json's strict mode) says `duplicate field "name"`.
            where = f" (line {line})" if line else ""
            self.problems.append(
                Problem(self._join(path, key, key_path=key_path), f"duplicate field{where}", kind="duplicate")
            )

    @staticmethod
    def _join(path: str, key: Any, *, key_path: bool) -> str:
        # k8s.io/apimachinery/pkg/util/validation/field: Child() is `.name`, Key() is `[key]`.
        if key_path:
            return f"{path}[{key}]"
        return f"{path}.{key}" if path else str(key)

    def value(self, value: Any, shape: str, path: str) -> Any:
        if value is None or shape == _SKIP:  # null is "unset" for every field
            return value
        if shape == "*":
            self.anything(value, path)
            return value
        if shape == "s":
            if isinstance(value, Mapping | list):
                self.problems.append(Problem(path, f"expected a scalar, got {_what(value)}", kind="shape"))
            return value
        if shape.startswith("[]"):
            if not isinstance(value, list):
                self.problems.append(Problem(path, f"expected a list, got {_what(value)}", kind="shape"))
                return value
            out = [self.value(v, shape[2:], f"{path}[{i}]") for i, v in enumerate(value)]
            return value if all(a is b for a, b in zip(out, value, strict=True)) else out
        if not isinstance(value, Mapping):
            want = "a map" if shape.startswith("{}") else "an object"
            self.problems.append(Problem(path, f"expected {want}, got {_what(value)}", kind="shape"))
            return value
        if shape.startswith("{}"):
            self._duplicates(value, path, key_path=True)
            items = {k: self.value(v, shape[2:], f"{path}[{k}]") for k, v in value.items()}
            return value if all(items[k] is v for k, v in value.items()) else items
        return self.object(value, self.schema.types[shape[1:]], path)

    def object(self, value: Mapping[Any, Any], fields: Mapping[str, str], path: str) -> Any:
        # A duplicate keeps its last value, as the API server's Warn and
        # Ignore modes do: it is reported, never dropped.
        self._duplicates(value, path, key_path=False)
        out: dict[Any, Any] = {}
        changed = False
        for key, v in value.items():
            shape = fields.get(key) if isinstance(key, str) else None
            if shape is None:
                hint = _suggest(str(key), fields)
                message = f'unknown field; did you mean "{hint}"?' if hint else "unknown field"
                self.problems.append(Problem(self._join(path, key, key_path=False), message))
                changed = True
                continue
            out[key] = new = self.value(v, shape, self._join(path, key, key_path=False))
            changed = changed or new is not v
        return out if changed else value

    def anything(self, value: Any, path: str) -> None:
        """Free-form values may still hold duplicate keys."""
        if isinstance(value, Mapping):
            self._duplicates(value, path, key_path=True)
            for k, v in value.items():
                self.anything(v, f"{path}[{k}]")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self.anything(v, f"{path}[{i}]")
