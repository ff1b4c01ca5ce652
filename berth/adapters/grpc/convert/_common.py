"""What every conversion of :mod:`berth.adapters.grpc.convert` shares.

Field paths for errors (``_under``, ``_at``, ``_each``): an InvalidArgument's
message starts with the protobuf field path, as the API server's field
errors do (``k8s.io/apimachinery/pkg/util/validation/field``); helpers raise
paths relative to the object they convert and each level prefixes its own
field. Then the pieces several kinds of object carry: resource lists,
timestamps, ObjectMeta, label and node selectors, enumerations travelling as
strings, quantity strings, ``optional`` fields, raw JSON and metav1.Time.

The bottom of the package's import order: it imports no sibling.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import msgspec

from berth import errors
from berth.api.v1 import model_pb2 as pb
from berth.cluster import model, resources, validation

T = TypeVar("T")
M = TypeVar("M")


# ---------------------------------------------------------------- field paths, resource lists, metadata and selectors


def _under(path: str, e: errors.InvalidArgument) -> errors.InvalidArgument:
    """``e`` (whose message starts with a relative field path) under ``path``."""
    message = str(e)
    if not path:
        return e
    return errors.InvalidArgument(f"{path}{'' if message.startswith('[') else '.'}{message}")


@contextlib.contextmanager
def _at(path: str) -> Iterator[None]:
    """An InvalidArgument raised inside names its field under ``path``."""
    try:
        yield
    except errors.InvalidArgument as e:
        raise _under(path, e) from None


def _each(items: Iterable[M], convert: Callable[[M], T], field: str) -> list[T]:
    """``convert`` of every item; an error names the item's index."""
    out = []
    for i, item in enumerate(items):
        with _at(f"{field}[{i}]"):
            out.append(convert(item))
    return out


#: pkg/apis/core/validation's ValidateNonnegativeQuantity (apimachinery's
#: IsNegativeErrorMsg): no request, limit, capacity or allocatable is negative.
_NEGATIVE = "must be greater than or equal to 0"


def _rl_from_pb(m: Mapping[str, int], field: str) -> model.ResourceList:
    out: model.ResourceList = {}
    for k, v in m.items():
        if v < 0:
            raise errors.InvalidArgument(f"{field}[{k}]: Invalid value: {v}: {_NEGATIVE}")
        q = out[k] = resources.format_quantity(k, v)
        try:
            resources.canonical(k, q)  # the quantity rules (range) of berth.cluster.resources
        except resources.QuantityError as e:
            raise errors.InvalidArgument(f"{field}[{k}]: Invalid value: {v}: {e.detail}") from None
    return out


def _rl_to_pb(rl: model.ResourceList) -> dict[str, int]:
    return resources.canonical_list(rl)


def _ts_ms(text: str | None) -> int:
    if not text:
        return 0
    try:
        return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0


#: Milliseconds since the epoch a datetime can hold (years 1 to 9999).
_MS_RANGE = range(-62_135_596_800_000, 253_402_300_800_000)


def _ts_text(ms: int) -> str | None:
    if not ms:
        return None
    if ms not in _MS_RANGE:
        raise errors.InvalidArgument(
            f"metadata.creation_timestamp_ms: Invalid value: {ms}: not a time between the years 1 and 9999"
        )
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta_from_pb(m: pb.ObjectMeta) -> model.ObjectMeta:
    return model.ObjectMeta(
        name=m.name,
        namespace=m.namespace,
        uid=m.uid,
        labels=dict(m.labels),
        annotations=dict(m.annotations),
        resource_version=m.resource_version,
        creation_timestamp=_ts_text(m.creation_timestamp_ms),
        deletion_timestamp="deleting" if m.deleting else None,
        owner_references=[
            model.OwnerReference(
                api_version=o.api_version, kind=o.kind, name=o.name, uid=o.uid, controller=o.controller
            )
            for o in m.owner_references
        ],
        finalizers=list(m.finalizers),
    )


def _meta_to_pb(m: model.ObjectMeta) -> pb.ObjectMeta:
    return pb.ObjectMeta(
        name=m.name,
        namespace=m.namespace,
        uid=m.uid,
        labels=m.labels,
        annotations=m.annotations,
        resource_version=m.resource_version,
        creation_timestamp_ms=_ts_ms(m.creation_timestamp),
        deleting=m.deletion_timestamp is not None,
        owner_references=[
            pb.OwnerReference(api_version=o.api_version, kind=o.kind, name=o.name, uid=o.uid, controller=o.controller)
            for o in m.owner_references
        ],
        finalizers=m.finalizers,
    )


def _ls_from_pb(s: pb.LabelSelector, present: bool) -> model.LabelSelector | None:
    if not present:
        return None
    return model.LabelSelector(
        match_labels=dict(s.match_labels),
        match_expressions=[
            model.LabelSelectorRequirement(key=r.key, operator=r.operator, values=list(r.values))
            for r in s.match_expressions
        ],
    )


def _ls_to_pb(s: model.LabelSelector | None) -> pb.LabelSelector | None:
    if s is None:
        return None
    return pb.LabelSelector(
        match_labels=s.match_labels,
        match_expressions=[
            pb.LabelSelectorRequirement(key=r.key, operator=r.operator, values=r.values) for r in s.match_expressions
        ],
    )


def _term_from_pb(t: pb.NodeSelectorTerm) -> model.NodeSelectorTerm:
    def reqs(rs: object) -> list[model.NodeSelectorRequirement]:
        return [
            model.NodeSelectorRequirement(key=r.key, operator=r.operator, values=list(r.values))
            for r in rs  # type: ignore[attr-defined]
        ]

    return model.NodeSelectorTerm(match_expressions=reqs(t.match_expressions), match_fields=reqs(t.match_fields))


def _term_to_pb(t: model.NodeSelectorTerm) -> pb.NodeSelectorTerm:
    return pb.NodeSelectorTerm(
        match_expressions=[
            pb.NodeSelectorRequirement(key=r.key, operator=r.operator, values=r.values) for r in t.match_expressions
        ],
        match_fields=[
            pb.NodeSelectorRequirement(key=r.key, operator=r.operator, values=r.values) for r in t.match_fields
        ],
    )


# ---------------------------------------------------------------- enumerations and quantities
# Kubernetes' enumerations travel as strings; a value the model does not know
# is refused here, naming the protobuf field (the API server's field.NotSupported).


def _enum(value: str, allowed: tuple[str, ...], path: str) -> str:
    """``value`` when it is one of ``allowed`` (empty: unset, the caller's default)."""
    if value and value not in allowed:
        raise validation.not_supported(path, value, allowed)
    return value


def _enums(values: Iterable[str], allowed: tuple[str, ...], path: str) -> list[str]:
    out = []
    for i, v in enumerate(values):
        if not v:
            raise validation.not_supported(f"{path}[{i}]", v, allowed)
        out.append(_enum(v, allowed, f"{path}[{i}]"))
    return out


def _quantity(text: str, path: str) -> str:
    """A Kubernetes quantity string as it is, once it parses (``"40Gi"``)."""
    try:
        resources.parse_quantity(text)
    except resources.QuantityError as e:
        raise e.at(path) from None
    return text


def _quantity_text(q: model.Quantity) -> str:
    return q if isinstance(q, str) else str(q)


def _opt(m: Any, field: str) -> Any:
    """An ``optional`` scalar's value, or None when unset."""
    return getattr(m, field) if m.HasField(field) else None


def _node_selector_from_pb(s: pb.NodeSelector) -> model.NodeSelector:
    return model.NodeSelector(node_selector_terms=[_term_from_pb(t) for t in s.node_selector_terms])


def _node_selector_to_pb(s: model.NodeSelector | None) -> pb.NodeSelector | None:
    if s is None:
        return None
    return pb.NodeSelector(node_selector_terms=[_term_to_pb(t) for t in s.node_selector_terms])


def _json_from_pb(raw: bytes, path: str) -> Any:
    if not raw:
        return None
    validation.validate_json_depth(raw, path)
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as e:
        raise errors.InvalidArgument(f"{path}: Invalid value: not JSON: {e}") from None


def _json_to_pb(value: Any) -> bytes:
    return b"" if value is None else msgspec.json.encode(value)


def _json_object_from_pb(raw: bytes, path: str, max_length: int | None = None) -> dict[str, Any] | None:
    """A JSON object, or None when unset: validateRawExtension (pkg/apis/resource/validation,
    v1.37.2) refuses more than ``max_length`` bytes and any other JSON value."""
    if max_length is not None and len(raw) > max_length:
        raise errors.InvalidArgument(f"{path}: Too long: may not be more than {max_length} bytes")
    value = _json_from_pb(raw, path)
    if value is not None and not isinstance(value, dict):
        raise validation.invalid(path, "<value omitted>", "must be a valid JSON object")
    return value


def _sub(m: Any, field: str, convert: Callable[[Any], T]) -> T | None:
    """``convert`` of the message field ``field`` when it is set, else None; an error names the field."""
    if not m.HasField(field):
        return None
    with _at(field):
        return convert(getattr(m, field))


def _opt_quantity(m: Any, field: str) -> model.Quantity | None:
    """An ``optional string`` quantity field: None when unset, else the quantity once it parses."""
    value = _opt(m, field)
    return None if value is None else _quantity(value, field)


def _quantities_from_pb(m: Mapping[str, str], path: str) -> dict[str, model.Quantity]:
    return {k: _quantity(v, f"{path}[{k}]") for k, v in m.items()}


def _quantities_to_pb(m: Mapping[str, model.Quantity]) -> dict[str, str]:
    return {k: _quantity_text(v) for k, v in m.items()}


#: time.RFC3339 as metav1.Time.UnmarshalJSON parses it (fractional seconds allowed).
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(?:\.\d+)?(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)")


def _time(text: str, path: str) -> str:
    """A metav1.Time as its RFC 3339 text, kept as written once it parses."""
    ok = _RFC3339.fullmatch(text) is not None
    if ok:
        try:
            dt.datetime.fromisoformat(text[:19])  # the calendar: no month 13, no February 30
        except ValueError:
            ok = False
    if not ok:
        raise validation.invalid(path, text, 'must be an RFC 3339 time, as "2006-01-02T15:04:05Z07:00"')
    return text


def _opt_time(m: Any, field: str) -> str | None:
    value = _opt(m, field)
    return None if value is None else _time(value, field)
