"""Kubernetes objects in, ``berth.v1`` messages out; messages out as plain data.

:func:`message` takes an object as YAML or JSON decodes a manifest (a Pod,
a Node, a PodGroup, ...) and builds the contract's message of that kind,
walking the message's own descriptor: a field is read from the object under
its camelCase name (protobuf's JSON name, which is Kubernetes' name for all
but the few in :data:`_AT`), each ``map<string, int64>`` of the model is a
resource list whose quantity strings become canonical integers
(:mod:`berth_client.quantity`), and a value of the wrong type is a
:class:`ManifestError` naming its field in the object (``spec.containers[0].
resources.requests[cpu]: ...``). Fields the contract does not carry
(``command``, ``env``, ...) are left out: scheduling does not read them.
Checking a manifest against the Kubernetes schema is the CLI's
``--validate``, not this module's.

:func:`to_dict` is the other way for any message, as ``berth ... -o
json|yaml`` prints it and as a program may log it: camelCase names, every
field with its value, resource amounts as Kubernetes quantities, enums by
name.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message

from berth_client import quantity
from berth_client.api.v1 import cluster_pb2 as cpb
from berth_client.api.v1 import model_pb2 as pb

__all__ = ["KINDS", "ManifestError", "kind_of", "message", "to_dict"]

M = TypeVar("M", bound=_message.Message)
FD = _descriptor.FieldDescriptor


class ManifestError(ValueError):
    """An object that cannot become the contract's message; ``str()`` names
    the field (``spec.priority: expected an integer, got "high"``)."""


#: The kinds a manifest may hold and the message each becomes.
KINDS: dict[str, type[_message.Message]] = {
    "Namespace": cpb.Namespace,
    "Node": pb.Node,
    "Pod": pb.Pod,
    "PodGroup": pb.PodGroup,
    "PodDisruptionBudget": pb.PodDisruptionBudget,
    "PersistentVolume": pb.PersistentVolume,
    "PersistentVolumeClaim": pb.PersistentVolumeClaim,
    "StorageClass": pb.StorageClass,
    "CSINode": pb.CSINode,
    "DeviceClass": pb.DeviceClass,
    "ResourceSlice": pb.ResourceSlice,
    "ResourceClaim": pb.ResourceClaim,
}

#: Where a field sits in the Kubernetes object when that is not its own
#: camelCase name at the same level: the contract flattens ``resources``,
#: a PodGroup's ``spec`` and a budget's ``spec``/``status``, and protobuf
#: spells initialisms its own way (``hostIp``).
_AT: dict[str, str] = {
    "berth.v1.ObjectMeta.creation_timestamp_ms": "creationTimestamp",
    "berth.v1.ObjectMeta.deleting": "deletionTimestamp",
    "berth.v1.Container.requests": "resources.requests",
    "berth.v1.Container.limits": "resources.limits",
    "berth.v1.Container.claims": "resources.claims",
    "berth.v1.PodSpec.resources_requests": "resources.requests",
    "berth.v1.ContainerPort.host_ip": "hostIP",
    "berth.v1.AWSElasticBlockStoreVolumeSource.volume_id": "volumeID",
    "berth.v1.CSINodeDriver.node_id": "nodeID",
    "berth.v1.PodGroup.min_member": "spec.minMember",
    "berth.v1.PodGroup.schedule_timeout_seconds": "spec.scheduleTimeoutSeconds",
    "berth.v1.PodGroup.min_resources": "spec.minResources",
    "berth.v1.PodGroup.queue": "spec.queue",
    "berth.v1.PodGroup.min_task_member": "spec.minTaskMember",
    "berth.v1.PodGroup.dialect": "apiVersion",
    "berth.v1.PodDisruptionBudget.selector": "spec.selector",
    "berth.v1.PodDisruptionBudget.disruptions_allowed": "status.disruptionsAllowed",
    "berth.v1.DeviceAttribute.int_value": "int",
    "berth.v1.DeviceAttribute.bool_value": "bool",
    "berth.v1.DeviceAttribute.string_value": "string",
    "berth.v1.DeviceAttribute.version_value": "version",
    "berth.v1.DeviceAttribute.int_values": "ints",
    "berth.v1.DeviceAttribute.bool_values": "bools",
    "berth.v1.DeviceAttribute.string_values": "strings",
    "berth.v1.DeviceAttribute.version_values": "versions",
    "berth.v1.DeviceRequestAllocationResult.share_id": "shareID",
    "berth.v1.AllocatedDeviceStatus.share_id": "shareID",
}


def _timestamp_ms(value: Any, path: str) -> int:
    """metav1.Time (RFC 3339) as milliseconds since the epoch."""
    if not isinstance(value, str):
        raise ManifestError(f"{path}: expected an RFC 3339 time, got {_shown(value)}")
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ManifestError(f"{path}: expected an RFC 3339 time, got {_shown(value)}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def _json_bytes(value: Any, path: str) -> bytes:
    """runtime.RawExtension: any JSON value, sent as its text."""
    try:
        return json.dumps(value, separators=(",", ":")).encode()
    except (TypeError, ValueError) as e:
        raise ManifestError(f"{path}: not a JSON value: {e}") from None


#: A PodGroup's apiVersion -> its gang dialect (``PodGroup.dialect``).
POD_GROUP_DIALECTS = {
    "scheduling.x-k8s.io/v1alpha1": "scheduler-plugins",
    "scheduling.volcano.sh/v1beta1": "volcano",
    "scheduling.run.ai/v2alpha2": "kai",
}


def _dialect(value: Any, path: str) -> str:
    """The dialect a PodGroup's apiVersion names (none given: scheduler-plugins')."""
    dialect = POD_GROUP_DIALECTS.get(value) if isinstance(value, str) else None
    if dialect is None:
        known = ", ".join(POD_GROUP_DIALECTS)
        raise ManifestError(f"{path}: {_shown(value)} is not a PodGroup apiVersion Berth is fed ({known})")
    return dialect


#: Fields whose value is not the plain JSON form of the field's type.
_VALUE: dict[str, Callable[[Any, str], Any]] = {
    "berth.v1.PodGroup.dialect": _dialect,
    "berth.v1.ObjectMeta.creation_timestamp_ms": _timestamp_ms,
    "berth.v1.ObjectMeta.deleting": lambda value, path: value is not None,
    "berth.v1.OpaqueDeviceConfiguration.parameters": _json_bytes,
    "berth.v1.AllocatedDeviceStatus.data": _json_bytes,
    "berth.v1.AllocatedDeviceStatus.network_data": _json_bytes,
    # A oneof holds no list: DeviceAttribute's lists travel in wrapper messages.
    "berth.v1.DeviceAttribute.int_values": lambda value, path: _wrapped_list(pb.IntValues, value, path),
    "berth.v1.DeviceAttribute.bool_values": lambda value, path: _wrapped_list(pb.BoolValues, value, path),
    "berth.v1.DeviceAttribute.string_values": lambda value, path: _wrapped_list(pb.StringValues, value, path),
    "berth.v1.DeviceAttribute.version_values": lambda value, path: _wrapped_list(pb.StringValues, value, path),
}

#: map<string, int64> fields that hold no resource amounts.
_NOT_QUANTITIES = frozenset({"berth.v1.NodeExplanation.plugin_scores"})

_INT_RANGES = {
    FD.TYPE_INT32: (-(2**31), 2**31 - 1),
    FD.TYPE_INT64: (-(2**63), 2**63 - 1),
    FD.TYPE_UINT32: (0, 2**32 - 1),
    FD.TYPE_UINT64: (0, 2**64 - 1),
}


def _shown(value: Any) -> str:
    text = json.dumps(value, default=lambda v: type(v).__name__)
    return text if len(text) <= 80 else text[:77] + "..."


def _scalar(field: FD, value: Any, path: str) -> Any:
    """A JSON scalar checked against the field's type, as the API server's
    decoder would refuse it."""
    t = field.type
    if t == FD.TYPE_STRING:
        if not isinstance(value, str):
            raise ManifestError(f"{path}: expected a string, got {_shown(value)}")
        return value
    if t == FD.TYPE_BOOL:
        if not isinstance(value, bool):
            raise ManifestError(f"{path}: expected true or false, got {_shown(value)}")
        return value
    if t in _INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ManifestError(f"{path}: expected an integer, got {_shown(value)}")
        low, high = _INT_RANGES[t]
        if not low <= value <= high:
            raise ManifestError(f"{path}: {value} is out of range ({low} to {high})")
        return value
    if t in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ManifestError(f"{path}: expected a number, got {_shown(value)}")
        return float(value)
    if t == FD.TYPE_ENUM:
        values = _enum_type(field).values_by_name
        if not isinstance(value, str) or value not in values:
            names = ", ".join(values)
            raise ManifestError(f"{path}: expected one of {names}, got {_shown(value)}")
        return value
    raise ManifestError(f"{path}: {field.full_name} cannot be given in a manifest")


def _wrapped_list(wrapper: type[_message.Message], value: Any, path: str) -> dict[str, Any]:
    """A JSON list as the ``values`` of ``wrapper`` (IntValues, ...)."""
    if not isinstance(value, list):
        raise ManifestError(f"{path}: expected a list, got {_shown(value)}")
    field = cast(FD, wrapper.DESCRIPTOR.fields_by_name["values"])
    return {"values": [_scalar(field, v, f"{path}[{i}]") for i, v in enumerate(value)]}


def _message_type(field: FD) -> _descriptor.Descriptor:
    d = field.message_type
    if d is None:
        raise TypeError(f"{field.full_name} is not a message field")
    return d


def _enum_type(field: FD) -> _descriptor.EnumDescriptor:
    e = field.enum_type
    if e is None:
        raise TypeError(f"{field.full_name} is not an enum field")
    return e


def _fields(d: Any) -> Sequence[FD]:
    """A descriptor's fields (upb's and the pure-Python descriptor types alike)."""
    return cast(Sequence[FD], d.fields)


def _is_map(field: FD) -> bool:
    return field.type == FD.TYPE_MESSAGE and _message_type(field).GetOptions().map_entry


def _map_value(field: FD) -> FD:
    """The value field of a map field's entry."""
    return _message_type(field).fields_by_name["value"]


def _is_quantities(field: FD) -> bool:
    return _map_value(field).type == FD.TYPE_INT64 and field.full_name not in _NOT_QUANTITIES


def _lookup(obj: Mapping[str, Any], at: tuple[str, ...]) -> Any:
    cur: Any = obj
    for key in at:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


# How a field's value is read: a special value, a map, a list of messages
# or of scalars, a message, a scalar.
_SPECIAL, _MAP, _MESSAGES, _SCALARS, _MESSAGE, _SCALAR = range(6)


@functools.cache
def _plan(d: _descriptor.Descriptor) -> tuple[tuple[FD, tuple[str, ...], int, bool], ...]:
    """Each field of message ``d``: where it sits in the object, how it is
    read, and whether it belongs to a oneof (not proto3 ``optional``'s)."""
    out = []
    for f in _fields(d):
        if f.full_name in _VALUE:
            how = _SPECIAL
        elif _is_map(f):
            how = _MAP
        elif f.is_repeated:
            how = _MESSAGES if f.type == FD.TYPE_MESSAGE else _SCALARS
        else:
            how = _MESSAGE if f.type == FD.TYPE_MESSAGE else _SCALAR
        group = f.containing_oneof
        out.append((f, tuple(_AT.get(f.full_name, f.json_name).split(".")), how, bool(group and len(group.fields) > 1)))
    return tuple(out)


def _kwargs(d: _descriptor.Descriptor, obj: Any, path: str) -> dict[str, Any]:
    """The constructor arguments of message ``d`` from object ``obj``
    (nested messages as dicts: upb builds the whole tree in one call)."""
    if not isinstance(obj, Mapping):
        raise ManifestError(f"{path or 'object'}: expected an object, got {_shown(obj)}")
    out: dict[str, Any] = {}
    oneof: str | None = None
    for field, at, how, in_oneof in _plan(d):
        value = obj.get(at[0]) if len(at) == 1 else _lookup(obj, at)
        if value is None:
            continue
        where = f"{path}.{'.'.join(at)}" if path else ".".join(at)
        if how == _SCALAR:
            out[field.name] = _scalar(field, value, where)
        elif how == _MESSAGE:
            out[field.name] = _kwargs(_message_type(field), value, where)
        elif how == _MESSAGES:
            if not isinstance(value, list):
                raise ManifestError(f"{where}: expected a list, got {_shown(value)}")
            sub = _message_type(field)
            out[field.name] = [_kwargs(sub, v, f"{where}[{i}]") for i, v in enumerate(value)]
        elif how == _SCALARS:
            if not isinstance(value, list):
                raise ManifestError(f"{where}: expected a list, got {_shown(value)}")
            out[field.name] = [_scalar(field, v, f"{where}[{i}]") for i, v in enumerate(value)]
        elif how == _MAP:
            out[field.name] = _map(field, value, where)
        else:
            out[field.name] = _VALUE[field.full_name](value, where)
        if in_oneof:
            if oneof is not None:
                raise ManifestError(f"{path or 'object'}: {oneof} and {'.'.join(at)} exclude each other")
            oneof = ".".join(at)
    return out


def _map(field: FD, value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ManifestError(f"{path}: expected a map, got {_shown(value)}")
    entry = _map_value(field)
    if entry.type == FD.TYPE_MESSAGE:
        return {str(k): _kwargs(_message_type(entry), v, f"{path}[{k}]") for k, v in value.items()}
    if _is_quantities(field):
        return quantity.canonical_map(dict(value), path)
    return {str(k): _scalar(entry, v, f"{path}[{k}]") for k, v in value.items()}


def kind_of(obj: Mapping[str, Any]) -> str:
    """The object's ``kind``; ManifestError when it is missing or not one of :data:`KINDS`."""
    kind = obj.get("kind")
    if kind is None:
        raise ManifestError("kind: required")
    if kind not in KINDS:
        raise ManifestError(f"kind: {kind!r} is not supported ({', '.join(KINDS)})")
    return str(kind)


def message(obj: Mapping[str, Any], message_type: type[M] | None = None) -> M:
    """The ``berth.v1`` message of a Kubernetes object: of ``message_type``,
    else of the object's ``kind`` (:data:`KINDS`). Raises ManifestError."""
    cls: Any = message_type if message_type is not None else KINDS[kind_of(obj)]
    result: M = cls(**_kwargs(cls.DESCRIPTOR, obj, ""))
    return result


# ---------------------------------------------------------------- out


def to_dict(msg: _message.Message) -> dict[str, Any]:
    """``msg`` as JSON-able data: camelCase names, every field (an unset
    message field as None), resource amounts as quantity strings, enums by
    name, bytes as the JSON they hold (else base64)."""
    out: dict[str, Any] = {}
    for field in _fields(msg.DESCRIPTOR):
        value = getattr(msg, field.name)
        if _is_map(field):
            if _map_value(field).type == FD.TYPE_MESSAGE:
                out[field.json_name] = {k: to_dict(value[k]) for k in sorted(value)}
            elif _is_quantities(field):
                out[field.json_name] = quantity.format_map(value)
            else:
                out[field.json_name] = {k: value[k] for k in sorted(value)}
        elif field.is_repeated:
            out[field.json_name] = [_value_out(field, v) for v in value]
        elif field.has_presence and not msg.HasField(field.name):
            out[field.json_name] = None
        else:
            out[field.json_name] = _value_out(field, value)
    return out


def _value_out(field: FD, value: Any) -> Any:
    if field.type == FD.TYPE_MESSAGE:
        return to_dict(value)
    if field.type == FD.TYPE_ENUM:
        return _enum_type(field).values_by_number[value].name
    if field.type == FD.TYPE_BYTES:
        try:
            return json.loads(value) if value else None
        except ValueError:
            return base64.b64encode(value).decode()
    return value
