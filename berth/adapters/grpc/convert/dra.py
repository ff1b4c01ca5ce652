"""Dynamic Resource Allocation, resource.k8s.io/v1: berth.v1 ``ResourceSlice``,
``DeviceClass`` and ``ResourceClaim`` (protos/berth/v1/model.proto) and the
model's :mod:`berth.cluster.dra` (``k8s.io/api/resource/v1/types.go``,
v0.37.2).

On the way in, what the API server's validation refuses is refused here
(``pkg/apis/resource/validation``, v1.37.2: a share's UID, the size of raw
JSON; ``k8s.io/apimachinery`` v0.37.2 ``ValidateConditions`` for a device's
conditions), naming the field.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from berth import errors
from berth.adapters.grpc.convert._common import (
    _at,
    _each,
    _enum,
    _json_from_pb,
    _json_object_from_pb,
    _json_to_pb,
    _meta_from_pb,
    _meta_to_pb,
    _node_selector_from_pb,
    _node_selector_to_pb,
    _opt,
    _opt_quantity,
    _opt_time,
    _quantities_from_pb,
    _quantities_to_pb,
    _quantity,
    _quantity_text,
    _sub,
    _time,
)
from berth.api.v1 import model_pb2 as pb
from berth.cluster import dra, validation

__all__ = [
    "device_class_from_pb",
    "device_class_to_pb",
    "resource_claim_from_pb",
    "resource_claim_to_pb",
    "resource_slice_from_pb",
    "resource_slice_to_pb",
]


# The values Kubernetes' enumerations take in resource.k8s.io/v1 objects; _common._enum
# refuses any other, naming the field (the API server's field.NotSupported).
_ALLOCATION_MODES = (dra.ALLOCATION_MODE_EXACT_COUNT, dra.ALLOCATION_MODE_ALL)
_CONFIG_SOURCES = (dra.CONFIG_SOURCE_CLASS, dra.CONFIG_SOURCE_CLAIM)


#: The oneof's members, named as the model's fields; a list travels in a
#: wrapper message (a oneof cannot hold a repeated field).
_ATTRIBUTE_LISTS: dict[str, Callable[..., Any]] = {
    "int_values": pb.IntValues,
    "bool_values": pb.BoolValues,
    "string_values": pb.StringValues,
    "version_values": pb.StringValues,
}
_ATTRIBUTE_KINDS = ("int_value", "bool_value", "string_value", "version_value", *_ATTRIBUTE_LISTS)


def _attribute_from_pb(a: pb.DeviceAttribute) -> dra.DeviceAttribute:
    which = a.WhichOneof("value")
    if which is None:
        raise validation.required("value", f"exactly one of {', '.join(_ATTRIBUTE_KINDS)} is required")
    value = getattr(a, which)
    fields: dict[str, Any] = {which: list(value.values) if which in _ATTRIBUTE_LISTS else value}
    return dra.DeviceAttribute(**fields)


def _attribute_to_pb(a: dra.DeviceAttribute) -> pb.DeviceAttribute:
    for kind in _ATTRIBUTE_KINDS:
        value = getattr(a, kind)
        if value is not None:
            wrapper = _ATTRIBUTE_LISTS.get(kind)
            return pb.DeviceAttribute(**{kind: value if wrapper is None else wrapper(values=value)})
    return pb.DeviceAttribute()


def _counters_from_pb(m: Mapping[str, pb.Counter], path: str) -> dict[str, dra.Counter]:
    return {k: dra.Counter(value=_quantity(c.value, f"{path}[{k}].value")) for k, c in m.items()}


def _counters_to_pb(m: Mapping[str, dra.Counter]) -> dict[str, pb.Counter]:
    return {k: pb.Counter(value=_quantity_text(c.value)) for k, c in m.items()}


def _policy_range_from_pb(r: pb.CapacityRequestPolicyRange) -> dra.CapacityRequestPolicyRange:
    return dra.CapacityRequestPolicyRange(
        min=_opt_quantity(r, "min"), max=_opt_quantity(r, "max"), step=_opt_quantity(r, "step")
    )


def _request_policy_from_pb(p: pb.CapacityRequestPolicy) -> dra.CapacityRequestPolicy:
    return dra.CapacityRequestPolicy(
        default=_opt_quantity(p, "default"),
        valid_values=[_quantity(v, f"valid_values[{i}]") for i, v in enumerate(p.valid_values)],
        valid_range=_sub(p, "valid_range", _policy_range_from_pb),
    )


def _request_policy_to_pb(p: dra.CapacityRequestPolicy | None) -> pb.CapacityRequestPolicy | None:
    if p is None:
        return None
    r = p.valid_range
    return pb.CapacityRequestPolicy(
        default=None if p.default is None else _quantity_text(p.default),
        valid_values=[_quantity_text(v) for v in p.valid_values],
        valid_range=(
            None
            if r is None
            else pb.CapacityRequestPolicyRange(
                **{k: _quantity_text(v) for k, v in (("min", r.min), ("max", r.max), ("step", r.step)) if v is not None}
            )
        ),
    )


def _capacity_from_pb(c: pb.DeviceCapacity) -> dra.DeviceCapacity:
    return dra.DeviceCapacity(
        value=_quantity(c.value, "value"), request_policy=_sub(c, "request_policy", _request_policy_from_pb)
    )


def _capacity_requirements_from_pb(r: pb.CapacityRequirements) -> dra.CapacityRequirements:
    return dra.CapacityRequirements(requests=_quantities_from_pb(r.requests, "requests"))


def _capacity_requirements_to_pb(r: dra.CapacityRequirements | None) -> pb.CapacityRequirements | None:
    return None if r is None else pb.CapacityRequirements(requests=_quantities_to_pb(r.requests))


def _taint_from_pb(t: pb.DeviceTaint) -> dra.DeviceTaint:
    return dra.DeviceTaint(key=t.key, value=t.value, effect=t.effect, time_added=_opt_time(t, "time_added"))


def _taint_to_pb(t: dra.DeviceTaint) -> pb.DeviceTaint:
    return pb.DeviceTaint(key=t.key, value=t.value, effect=t.effect, time_added=t.time_added)


def _device_from_pb(d: pb.Device) -> dra.Device:
    attributes = {}
    for k, a in d.attributes.items():
        with _at(f"attributes[{k}]"):
            attributes[k] = _attribute_from_pb(a)
    capacity = {}
    for k, c in d.capacity.items():
        with _at(f"capacity[{k}]"):
            capacity[k] = _capacity_from_pb(c)
    return dra.Device(
        name=d.name,
        attributes=attributes,
        capacity=capacity,
        consumes_counters=_each(
            d.consumes_counters,
            lambda c: dra.DeviceCounterConsumption(
                counter_set=c.counter_set,
                counters=_counters_from_pb(c.counters, "counters"),
                compatibility_groups=list(c.compatibility_groups),
            ),
            "consumes_counters",
        ),
        node_name=_opt(d, "node_name"),
        node_selector=_node_selector_from_pb(d.node_selector) if d.HasField("node_selector") else None,
        all_nodes=_opt(d, "all_nodes"),
        taints=_each(d.taints, _taint_from_pb, "taints"),
        binds_to_node=_opt(d, "binds_to_node"),
        binding_conditions=list(d.binding_conditions),
        binding_failure_conditions=list(d.binding_failure_conditions),
        allow_multiple_allocations=_opt(d, "allow_multiple_allocations"),
    )


def _device_to_pb(d: dra.Device) -> pb.Device:
    return pb.Device(
        name=d.name,
        attributes={k: _attribute_to_pb(a) for k, a in d.attributes.items()},
        capacity={
            k: pb.DeviceCapacity(value=_quantity_text(c.value), request_policy=_request_policy_to_pb(c.request_policy))
            for k, c in d.capacity.items()
        },
        consumes_counters=[
            pb.DeviceCounterConsumption(
                counter_set=c.counter_set,
                counters=_counters_to_pb(c.counters),
                compatibility_groups=c.compatibility_groups,
            )
            for c in d.consumes_counters
        ],
        node_name=d.node_name,
        node_selector=_node_selector_to_pb(d.node_selector),
        all_nodes=d.all_nodes,
        taints=[_taint_to_pb(t) for t in d.taints],
        binds_to_node=d.binds_to_node,
        binding_conditions=d.binding_conditions,
        binding_failure_conditions=d.binding_failure_conditions,
        allow_multiple_allocations=d.allow_multiple_allocations,
    )


def resource_slice_from_pb(r: pb.ResourceSlice, path: str = "") -> dra.ResourceSlice:
    """The model's ResourceSlice; InvalidArgument names the field under ``path``."""
    with _at(path):
        s = r.spec
        return dra.ResourceSlice(
            metadata=_meta_from_pb(r.metadata),
            spec=dra.ResourceSliceSpec(
                driver=s.driver,
                pool=dra.ResourcePool(
                    name=s.pool.name, generation=s.pool.generation, resource_slice_count=s.pool.resource_slice_count
                ),
                node_name=_opt(s, "node_name"),
                node_selector=_node_selector_from_pb(s.node_selector) if s.HasField("node_selector") else None,
                all_nodes=_opt(s, "all_nodes"),
                per_device_node_selection=_opt(s, "per_device_node_selection"),
                devices=_each(s.devices, _device_from_pb, "spec.devices"),
                shared_counters=_each(
                    s.shared_counters,
                    lambda c: dra.CounterSet(name=c.name, counters=_counters_from_pb(c.counters, "counters")),
                    "spec.shared_counters",
                ),
            ),
        )


def resource_slice_to_pb(r: dra.ResourceSlice) -> pb.ResourceSlice:
    s = r.spec
    return pb.ResourceSlice(
        metadata=_meta_to_pb(r.metadata),
        spec=pb.ResourceSliceSpec(
            driver=s.driver,
            pool=pb.ResourcePool(
                name=s.pool.name, generation=s.pool.generation, resource_slice_count=s.pool.resource_slice_count
            ),
            node_name=s.node_name,
            node_selector=_node_selector_to_pb(s.node_selector),
            all_nodes=s.all_nodes,
            per_device_node_selection=s.per_device_node_selection,
            devices=[_device_to_pb(d) for d in s.devices],
            shared_counters=[
                pb.CounterSet(name=c.name, counters=_counters_to_pb(c.counters)) for c in s.shared_counters
            ],
        ),
    )


def _selectors_from_pb(ss: Iterable[pb.DeviceSelector]) -> list[dra.DeviceSelector]:
    return [
        dra.DeviceSelector(cel=dra.CELDeviceSelector(expression=s.cel.expression) if s.HasField("cel") else None)
        for s in ss
    ]


def _selectors_to_pb(ss: Iterable[dra.DeviceSelector]) -> list[pb.DeviceSelector]:
    return [
        pb.DeviceSelector(cel=pb.CELDeviceSelector(expression=s.cel.expression) if s.cel is not None else None)
        for s in ss
    ]


def _opaque_from_pb(m: Any) -> dra.OpaqueDeviceConfiguration | None:
    """The ``opaque`` field of ``m`` (a message that has one)."""
    if not m.HasField("opaque"):
        return None
    parameters = _json_from_pb(m.opaque.parameters, "opaque.parameters")
    return dra.OpaqueDeviceConfiguration(driver=m.opaque.driver, parameters=parameters)


def _opaque_to_pb(o: dra.OpaqueDeviceConfiguration | None) -> pb.OpaqueDeviceConfiguration | None:
    if o is None:
        return None
    return pb.OpaqueDeviceConfiguration(driver=o.driver, parameters=_json_to_pb(o.parameters))


def device_class_from_pb(c: pb.DeviceClass, path: str = "") -> dra.DeviceClass:
    """The model's DeviceClass; InvalidArgument names the field under ``path``."""
    with _at(path):
        return dra.DeviceClass(
            metadata=_meta_from_pb(c.metadata),
            spec=dra.DeviceClassSpec(
                selectors=_selectors_from_pb(c.spec.selectors),
                config=_each(
                    c.spec.config, lambda k: dra.DeviceClassConfiguration(opaque=_opaque_from_pb(k)), "spec.config"
                ),
                extended_resource_name=_opt(c.spec, "extended_resource_name"),
            ),
        )


def device_class_to_pb(c: dra.DeviceClass) -> pb.DeviceClass:
    return pb.DeviceClass(
        metadata=_meta_to_pb(c.metadata),
        spec=pb.DeviceClassSpec(
            selectors=_selectors_to_pb(c.spec.selectors),
            config=[pb.DeviceClassConfiguration(opaque=_opaque_to_pb(k.opaque)) for k in c.spec.config],
            extended_resource_name=c.spec.extended_resource_name,
        ),
    )


def _tolerations_from_pb(ts: Iterable[pb.DeviceToleration]) -> list[dra.DeviceToleration]:
    return [
        dra.DeviceToleration(
            key=t.key,
            operator=t.operator,
            value=t.value,
            effect=t.effect,
            toleration_seconds=_opt(t, "toleration_seconds"),
        )
        for t in ts
    ]


def _tolerations_to_pb(ts: Iterable[dra.DeviceToleration]) -> list[pb.DeviceToleration]:
    return [
        pb.DeviceToleration(
            key=t.key, operator=t.operator, value=t.value, effect=t.effect, toleration_seconds=t.toleration_seconds
        )
        for t in ts
    ]


def _mode(value: str, path: str) -> str:
    return _enum(value, _ALLOCATION_MODES, path) or dra.ALLOCATION_MODE_EXACT_COUNT


def _request_from_pb(r: pb.DeviceRequest) -> dra.DeviceRequest:
    exactly = None
    if r.HasField("exactly"):
        e = r.exactly
        with _at("exactly"):
            exactly = dra.ExactDeviceRequest(
                device_class_name=e.device_class_name,
                selectors=_selectors_from_pb(e.selectors),
                allocation_mode=_mode(e.allocation_mode, "allocation_mode"),
                count=e.count or 1,
                admin_access=_opt(e, "admin_access"),
                tolerations=_tolerations_from_pb(e.tolerations),
                capacity=_sub(e, "capacity", _capacity_requirements_from_pb),
            )
    return dra.DeviceRequest(
        name=r.name,
        exactly=exactly,
        first_available=_each(
            r.first_available,
            lambda s: dra.DeviceSubRequest(
                name=s.name,
                device_class_name=s.device_class_name,
                selectors=_selectors_from_pb(s.selectors),
                allocation_mode=_mode(s.allocation_mode, "allocation_mode"),
                count=s.count or 1,
                tolerations=_tolerations_from_pb(s.tolerations),
                capacity=_sub(s, "capacity", _capacity_requirements_from_pb),
            ),
            "first_available",
        ),
    )


def _request_to_pb(r: dra.DeviceRequest) -> pb.DeviceRequest:
    e = r.exactly
    return pb.DeviceRequest(
        name=r.name,
        exactly=(
            pb.ExactDeviceRequest(
                device_class_name=e.device_class_name,
                selectors=_selectors_to_pb(e.selectors),
                allocation_mode=e.allocation_mode,
                count=e.count,
                admin_access=e.admin_access,
                tolerations=_tolerations_to_pb(e.tolerations),
                capacity=_capacity_requirements_to_pb(e.capacity),
            )
            if e is not None
            else None
        ),
        first_available=[
            pb.DeviceSubRequest(
                name=s.name,
                device_class_name=s.device_class_name,
                selectors=_selectors_to_pb(s.selectors),
                allocation_mode=s.allocation_mode,
                count=s.count,
                tolerations=_tolerations_to_pb(s.tolerations),
                capacity=_capacity_requirements_to_pb(s.capacity),
            )
            for s in r.first_available
        ],
    )


#: validateUID (pkg/apis/resource/validation/validation.go, v1.37.2): a share's ID.
_UID_FORM = (
    "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`"
    " with lowercase hexadecimal characters"
)


def _share_id(m: Any) -> str | None:
    value: str | None = _opt(m, "share_id")
    if value is None:
        return None
    try:
        normalized = str(uuid.UUID(value)) == value
    except ValueError:
        normalized = False
    if not normalized:
        raise validation.invalid("share_id", value, _UID_FORM)
    return value


def _result_from_pb(r: pb.DeviceRequestAllocationResult) -> dra.DeviceRequestAllocationResult:
    return dra.DeviceRequestAllocationResult(
        request=r.request,
        driver=r.driver,
        pool=r.pool,
        device=r.device,
        admin_access=_opt(r, "admin_access"),
        tolerations=_tolerations_from_pb(r.tolerations),
        binding_conditions=list(r.binding_conditions),
        binding_failure_conditions=list(r.binding_failure_conditions),
        share_id=_share_id(r),
        consumed_capacity=_quantities_from_pb(r.consumed_capacity, "consumed_capacity"),
    )


def _allocation_from_pb(a: pb.AllocationResult) -> dra.AllocationResult:
    return dra.AllocationResult(
        devices=dra.DeviceAllocationResult(
            results=_each(a.devices.results, _result_from_pb, "devices.results"),
            config=_each(
                a.devices.config,
                lambda c: dra.DeviceAllocationConfiguration(
                    source=_enum(c.source, _CONFIG_SOURCES, "source") or dra.CONFIG_SOURCE_CLAIM,
                    requests=list(c.requests),
                    opaque=_opaque_from_pb(c),
                ),
                "devices.config",
            ),
        ),
        node_selector=_node_selector_from_pb(a.node_selector) if a.HasField("node_selector") else None,
        allocation_timestamp=_opt_time(a, "allocation_timestamp"),
    )


def _at_status_allocation(a: pb.AllocationResult) -> dra.AllocationResult:
    with _at("status.allocation"):
        return _allocation_from_pb(a)


def _allocation_to_pb(a: dra.AllocationResult) -> pb.AllocationResult:
    return pb.AllocationResult(
        devices=pb.DeviceAllocationResult(
            results=[
                pb.DeviceRequestAllocationResult(
                    request=r.request,
                    driver=r.driver,
                    pool=r.pool,
                    device=r.device,
                    admin_access=r.admin_access,
                    tolerations=_tolerations_to_pb(r.tolerations),
                    binding_conditions=r.binding_conditions,
                    binding_failure_conditions=r.binding_failure_conditions,
                    share_id=r.share_id,
                    consumed_capacity=_quantities_to_pb(r.consumed_capacity),
                )
                for r in a.devices.results
            ],
            config=[
                pb.DeviceAllocationConfiguration(source=c.source, requests=c.requests, opaque=_opaque_to_pb(c.opaque))
                for c in a.devices.config
            ],
        ),
        node_selector=_node_selector_to_pb(a.node_selector),
        allocation_timestamp=a.allocation_timestamp,
    )


# metav1.Condition: the model keeps a condition as its JSON (camelCase keys,
# observedGeneration omitted when 0); ValidateConditions and ValidateCondition
# (k8s.io/apimachinery v0.37.2 pkg/apis/meta/v1/validation/validation.go)
# refuse what is checked here.
_CONDITION_STATUSES = ("False", "True", "Unknown")
_CONDITION_REASON = re.compile(r"[A-Za-z](?:[A-Za-z0-9_,:]*[A-Za-z0-9_])?")
_CONDITION_REASON_MAX = 1024
_CONDITION_MESSAGE_MAX = 32 * 1024
#: resource.AllocatedDeviceStatusMaxConditions and AllocatedDeviceStatusDataMaxLength.
_DEVICE_STATUS_CONDITIONS_MAX = 8
_DEVICE_STATUS_DATA_MAX = 10 * 1024


def _condition_from_pb(c: pb.Condition) -> dict[str, Any]:
    if not c.type:
        raise validation.required("type", "is required")
    validation.validate_label_name(c.type, "type")
    if not c.status:
        raise validation.required("status")
    _enum(c.status, _CONDITION_STATUSES, "status")
    if c.observed_generation < 0:
        raise validation.invalid("observed_generation", c.observed_generation, "must be greater than or equal to zero")
    if not c.last_transition_time:
        raise validation.required("last_transition_time")
    if not c.reason:
        raise validation.required("reason")
    if _CONDITION_REASON.fullmatch(c.reason) is None:
        raise validation.invalid(
            "reason",
            c.reason,
            "a condition reason must start with alphabetic character, optionally followed by a string of "
            "alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'",
        )
    for field, text, most in (
        ("reason", c.reason, _CONDITION_REASON_MAX),
        ("message", c.message, _CONDITION_MESSAGE_MAX),
    ):
        if len(text) > most:
            raise errors.InvalidArgument(f"{field}: Too long: may not be more than {most} bytes")
    out: dict[str, Any] = {"type": c.type, "status": c.status}
    if c.observed_generation:
        out["observedGeneration"] = c.observed_generation
    out["lastTransitionTime"] = _time(c.last_transition_time, "last_transition_time")
    return out | {"reason": c.reason, "message": c.message}


def _conditions_from_pb(cs: Sequence[pb.Condition]) -> list[dict[str, Any]]:
    if len(cs) > _DEVICE_STATUS_CONDITIONS_MAX:
        raise errors.InvalidArgument(
            f"conditions: Too many: {len(cs)}: must have at most {_DEVICE_STATUS_CONDITIONS_MAX} items"
        )
    out = _each(cs, _condition_from_pb, "conditions")
    seen: set[str] = set()
    for i, c in enumerate(out):
        if c["type"] in seen:
            raise validation.duplicate(f"conditions[{i}]", c["type"])
        seen.add(c["type"])
    return out


def _condition_to_pb(c: Mapping[str, Any]) -> pb.Condition:
    generation = c.get("observedGeneration")
    return pb.Condition(
        type=str(c.get("type") or ""),
        status=str(c.get("status") or ""),
        reason=str(c.get("reason") or ""),
        message=str(c.get("message") or ""),
        last_transition_time=str(c.get("lastTransitionTime") or ""),
        observed_generation=generation if isinstance(generation, int) else 0,
    )


def _device_status_from_pb(s: pb.AllocatedDeviceStatus) -> dra.AllocatedDeviceStatus:
    return dra.AllocatedDeviceStatus(
        driver=s.driver,
        pool=s.pool,
        device=s.device,
        share_id=_share_id(s),
        conditions=_conditions_from_pb(s.conditions),
        data=_json_object_from_pb(s.data, "data", _DEVICE_STATUS_DATA_MAX),
        network_data=_json_object_from_pb(s.network_data, "network_data"),
    )


def _device_status_to_pb(s: dra.AllocatedDeviceStatus) -> pb.AllocatedDeviceStatus:
    return pb.AllocatedDeviceStatus(
        driver=s.driver,
        pool=s.pool,
        device=s.device,
        share_id=s.share_id,
        conditions=[_condition_to_pb(c) for c in s.conditions],
        data=_json_to_pb(s.data),
        network_data=_json_to_pb(s.network_data),
    )


def resource_claim_from_pb(c: pb.ResourceClaim, path: str = "") -> dra.ResourceClaim:
    """The model's ResourceClaim; InvalidArgument names the field under ``path``."""
    with _at(path):
        d = c.spec.devices
        return dra.ResourceClaim(
            metadata=_meta_from_pb(c.metadata),
            spec=dra.ResourceClaimSpec(
                devices=dra.DeviceClaim(
                    requests=_each(d.requests, _request_from_pb, "spec.devices.requests"),
                    constraints=[
                        dra.DeviceConstraint(
                            requests=list(k.requests),
                            match_attribute=_opt(k, "match_attribute"),
                            distinct_attribute=_opt(k, "distinct_attribute"),
                        )
                        for k in d.constraints
                    ],
                    config=_each(
                        d.config,
                        lambda k: dra.DeviceClaimConfiguration(requests=list(k.requests), opaque=_opaque_from_pb(k)),
                        "spec.devices.config",
                    ),
                )
            ),
            status=dra.ResourceClaimStatus(
                allocation=(_at_status_allocation(c.status.allocation) if c.status.HasField("allocation") else None),
                reserved_for=[
                    dra.ResourceClaimConsumerReference(
                        api_group=r.api_group, resource=r.resource or "pods", name=r.name, uid=r.uid
                    )
                    for r in c.status.reserved_for
                ],
                devices=_each(c.status.devices, _device_status_from_pb, "status.devices"),
            ),
        )


def resource_claim_to_pb(c: dra.ResourceClaim) -> pb.ResourceClaim:
    d = c.spec.devices
    return pb.ResourceClaim(
        metadata=_meta_to_pb(c.metadata),
        spec=pb.ResourceClaimSpec(
            devices=pb.DeviceClaim(
                requests=[_request_to_pb(r) for r in d.requests],
                constraints=[
                    pb.DeviceConstraint(
                        requests=k.requests, match_attribute=k.match_attribute, distinct_attribute=k.distinct_attribute
                    )
                    for k in d.constraints
                ],
                config=[
                    pb.DeviceClaimConfiguration(requests=k.requests, opaque=_opaque_to_pb(k.opaque)) for k in d.config
                ],
            )
        ),
        status=pb.ResourceClaimStatus(
            allocation=_allocation_to_pb(c.status.allocation) if c.status.allocation is not None else None,
            reserved_for=[
                pb.ResourceClaimConsumerReference(api_group=r.api_group, resource=r.resource, name=r.name, uid=r.uid)
                for r in c.status.reserved_for
            ],
            devices=[_device_status_to_pb(s) for s in c.status.devices],
        ),
    )
