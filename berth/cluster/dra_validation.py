"""The API server's validation of the ``resource.k8s.io/v1`` objects the
embedded cluster and the Cluster feed take, with its messages.

A port of what ``pkg/apis/resource/validation/validation.go`` (v1.37.2)
checks that scheduling relies on: names, a slice's driver, pool and exactly
one way of selecting nodes, ``devices`` or ``sharedCounters`` but not both,
unique device (and request) names, an attribute's single value, device
taints (key, value, effect), counter sets and counter consumption,
per-device node selection, binding conditions, capacity request policies
(only on devices that allow multiple allocations); a request's
exactly-one-of ``exactly`` / ``firstAvailable``, its device class,
allocation mode, count and tolerations, selectors that carry a CEL
expression, constraints naming known requests, at most 32 allocated
devices and 256 consumers. Like :mod:`berth.cluster.validation` it stops at
the first error (an :class:`~berth.errors.InvalidArgument` whose message is
a ``field.Error``).

Not checked here: that a CEL expression compiles (the allocator compiles it
and reports a broken one at Filter, as kube-scheduler does for a stored
expression), its cost, the numbers inside a request policy (ranges and
valid values against the capacity), and the alpha fields the model leaves out.
"""

from __future__ import annotations

from berth.cluster import dra, validation
from berth.cluster.validation import duplicate, invalid, not_supported, required
from berth.errors import InvalidArgument

__all__ = [
    "validate_device_class",
    "validate_resource_claim",
    "validate_resource_claim_template",
    "validate_resource_slice",
]

#: resource.DeviceRequestsMaxSize, FirstAvailableDeviceRequestMaxSize,
#: DeviceSelectorsMaxSize, ResourceSliceMaxDevices, DeviceConstraintsMaxSize.
REQUESTS_MAX = 32
FIRST_AVAILABLE_MAX = 8
SELECTORS_MAX = 32
SLICE_DEVICES_MAX = 128
CONSTRAINTS_MAX = 32
#: ResourceSliceMaxDevicesWithAdvancedFeatures (taints or counters), ResourceSliceMaxCounterSets,
#: ResourceSliceMaxCountersPerCounterSet, ResourceSliceMaxDeviceCounterConsumptionsPerDevice,
#: DeviceTaintsMaxLength, DeviceTolerationsMaxLength, BindingConditionsMaxSize.
SLICE_DEVICES_MAX_ADVANCED = 64
COUNTER_SETS_MAX = 8
COUNTERS_MAX = 32
COUNTER_CONSUMPTIONS_MAX = 2
TAINTS_MAX = 16
TOLERATIONS_MAX = 16
BINDING_CONDITIONS_MAX = 4
_TAINT_EFFECTS = (dra.DEVICE_TAINT_EFFECT_NO_EXECUTE, dra.DEVICE_TAINT_EFFECT_NO_SCHEDULE, dra.DEVICE_TAINT_EFFECT_NONE)
_TOLERATION_OPERATORS = ("Equal", "Exists")


class _Nil:
    """A nil value as field.Error prints it."""

    def __str__(self) -> str:
        return "null"


NIL = _Nil()
#: resource.CELSelectorExpressionMaxLength
CEL_MAX_LENGTH = 10 * 1024
_MODES = (dra.ALLOCATION_MODE_ALL, dra.ALLOCATION_MODE_EXACT_COUNT)
_ONE_KIND = "exactly one of `exactly` or `firstAvailable` is required"
_REQUEST_REF = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"


def _check(path: str, value: str, messages: list[str]) -> None:
    if messages:
        raise invalid(path, value, "; ".join(messages))


def _too_many(path: str, n: int, limit: int) -> None:
    if n > limit:
        raise InvalidArgument(f"{path}: Too many: {n}: must have at most {limit} items")


def validate_device_class(obj: dra.DeviceClass) -> None:
    """ValidateDeviceClass: a cluster-scoped DNS subdomain name and selectors with an expression."""
    validation.validate_object_meta(obj.metadata, namespaced=False)
    _selectors(obj.spec.selectors, "spec.selectors")


def validate_resource_slice(obj: dra.ResourceSlice) -> None:
    """ValidateResourceSlice (the fields scheduling reads)."""
    validation.validate_object_meta(obj.metadata, namespaced=False)
    spec = obj.spec
    if not spec.driver:
        raise required("spec.driver")
    _check("spec.driver", spec.driver, validation.is_dns1123_subdomain(spec.driver))
    if not spec.pool.name:
        raise required("spec.pool.name")
    if spec.pool.resource_slice_count <= 0:
        raise invalid("spec.pool.resourceSliceCount", spec.pool.resource_slice_count, "must be greater than zero")
    if spec.pool.generation < 0:
        raise invalid("spec.pool.generation", spec.pool.generation, "must be greater than or equal to zero")
    chosen = []
    if spec.node_name is not None:
        if not spec.node_name:
            raise invalid("spec.nodeName", "", "must be either unset or set to a non-empty string")
        chosen.append("`nodeName`")
    if spec.node_selector is not None:
        chosen.append("`nodeSelector`")
        terms = spec.node_selector.node_selector_terms
        if len(terms) != 1:
            raise invalid("spec.nodeSelector.nodeSelectorTerms", len(terms), "must have exactly one node selector term")
        for j, r in enumerate(terms[0].match_expressions):
            validation.validate_node_selector_requirement(
                r, f"spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[{j}]"
            )
    for name, value in (("allNodes", spec.all_nodes), ("perDeviceNodeSelection", spec.per_device_node_selection)):
        if value is not None:
            if not value:
                raise invalid(f"spec.{name}", value, "must be either unset or set to true")
            chosen.append(f"`{name}`")
    one_of = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    if not chosen:
        raise required("spec", one_of)
    if len(chosen) > 1:
        raise invalid("spec", "{" + ", ".join(chosen) + "}", f"{one_of}, but multiple fields are set")
    if spec.shared_counters and spec.devices:
        raise invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed")
    advanced = any(d.taints or d.consumes_counters for d in spec.devices)
    _too_many("spec.devices", len(spec.devices), SLICE_DEVICES_MAX_ADVANCED if advanced else SLICE_DEVICES_MAX)
    seen: set[str] = set()
    for i, device in enumerate(spec.devices):
        at = f"spec.devices[{i}]"
        if not device.name:
            raise required(f"{at}.name")
        _check(f"{at}.name", device.name, validation.is_dns1123_label(device.name))
        if device.name in seen:
            raise duplicate(f"{at}.name", device.name)
        seen.add(device.name)
        for key, attr in device.attributes.items():
            n = sum(v is not None for v in (attr.bool_value, attr.int_value, attr.string_value, attr.version_value))
            if n != 1:
                raise (required if n == 0 else invalid_one)(
                    f"{at}.attributes[{key}]", "exactly one value must be specified"
                )
        _device(device, at, bool(spec.per_device_node_selection))
    _counter_sets([(c.name, c.counters) for c in spec.shared_counters], "spec.sharedCounters", "name", COUNTER_SETS_MAX)


def _device(device: dra.Device, at: str, per_device: bool) -> None:
    """validateDevice's checks of capacity, taints, counters, node selection and binding conditions."""
    multi = bool(device.allow_multiple_allocations)
    for name, cap in device.capacity.items():
        policy = cap.request_policy
        if policy is None:
            continue
        where = f"{at}.capacity[{name}].requestPolicy"
        if not multi:
            raise validation.forbidden(where, "allowMultipleAllocations must be true")
        if policy.valid_values and policy.valid_range is not None:
            raise validation.forbidden(
                where,
                'exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time',
            )
        kind = "validValues" if policy.valid_values else "validRange" if policy.valid_range is not None else ""
        if kind and policy.default is None:
            raise required(f"{where}.default", f"required when {kind} is defined")
    _too_many(f"{at}.taints", len(device.taints), TAINTS_MAX)
    for j, taint in enumerate(device.taints):
        validation.validate_label_name(taint.key, f"{at}.taints[{j}].key")
        if taint.value:
            _check(f"{at}.taints[{j}].value", taint.value, validation.is_valid_label_value(taint.value))
        if not taint.effect:
            raise required(f"{at}.taints[{j}].effect")
        if taint.effect not in _TAINT_EFFECTS:
            raise not_supported(f"{at}.taints[{j}].effect", taint.effect, sorted(_TAINT_EFFECTS))
    _counter_sets(
        [(u.counter_set, u.counters) for u in device.consumes_counters],
        f"{at}.consumesCounters",
        "counterSet",
        COUNTER_CONSUMPTIONS_MAX,
    )
    chosen = []
    if device.node_name is not None:
        if not device.node_name and per_device:
            raise invalid(f"{at}.nodeName", "", "must not be empty")
        chosen.append("`nodeName`")
    if device.node_selector is not None:
        chosen.append("`nodeSelector`")
    if device.all_nodes is not None:
        if not device.all_nodes and per_device:
            raise invalid(f"{at}.allNodes", False, "must be either unset or set to true")
        chosen.append("`allNodes`")
    one_of = (
        "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` "
        "is set to true in the ResourceSlice spec"
    )
    if per_device and not chosen:
        raise required(at, one_of)
    if per_device and len(chosen) > 1:
        raise invalid(at, "{" + ", ".join(chosen) + "}", one_of)
    if not per_device and chosen:
        raise invalid(
            at,
            NIL,
            "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true "
            "in the ResourceSlice spec",
        )
    _binding(device.binding_conditions, device.binding_failure_conditions, at)


def _counter_sets(sets: list[tuple[str, dict[str, dra.Counter]]], path: str, field: str, most: int) -> None:
    """Counter sets (or a device's use of them): at most ``most``, each named
    (uniquely) with 1 to 32 named counters."""
    _too_many(path, len(sets), most)
    names: set[str] = set()
    for i, (name, counters) in enumerate(sets):
        at = f"{path}[{i}]"
        if not name:
            raise required(f"{at}.{field}")
        _check(f"{at}.{field}", name, validation.is_dns1123_label(name))
        if name in names:
            raise duplicate(f"{at}.{field}", name)
        names.add(name)
        if not counters:
            raise required(f"{at}.counters")
        _too_many(f"{at}.counters", len(counters), COUNTERS_MAX)
        for key in counters:
            _check(f"{at}.counters[{key}]", key, validation.is_dns1123_label(key))


def _binding(conditions: list[str], failures: list[str], at: str) -> None:
    """validateDeviceBindingParameters."""
    for field, values in (("bindingConditions", conditions), ("bindingFailureConditions", failures)):
        _too_many(f"{at}.{field}", len(values), BINDING_CONDITIONS_MAX)
        seen: set[str] = set()
        for j, value in enumerate(values):
            validation.validate_label_name(value, f"{at}.{field}[{j}]")
            if value in seen:
                raise duplicate(f"{at}.{field}[{j}]", value)
            seen.add(value)
    for j, value in enumerate(failures):
        if value in conditions:
            raise invalid(
                f"{at}.bindingFailureConditions[{j}]",
                value,
                "bindingFailureConditions must not overlap with bindingConditions",
            )
    if failures and not conditions:
        raise invalid(f"{at}.bindingConditions", [], "bindingConditions are required to use bindingFailureConditions")
    if conditions and not failures:
        raise invalid(
            f"{at}.bindingFailureConditions", [], "bindingFailureConditions are required to use bindingConditions"
        )


def invalid_one(path: str, detail: str) -> InvalidArgument:
    return InvalidArgument(f"{path}: Invalid value: {detail}")


def validate_resource_claim(obj: dra.ResourceClaim) -> None:
    """ValidateResourceClaim and ValidateResourceClaimStatusUpdate's limits."""
    validation.validate_object_meta(obj.metadata, namespaced=True)
    _claim_spec(obj.spec, "spec")
    status = obj.status
    _too_many("status.reservedFor", len(status.reserved_for), dra.RESOURCE_CLAIM_RESERVED_FOR_MAX_SIZE)
    uids: set[str] = set()
    for i, ref in enumerate(status.reserved_for):
        at = f"status.reservedFor[{i}]"
        if not ref.name:
            raise required(f"{at}.name")
        if not ref.uid:
            raise required(f"{at}.uid")
        if ref.uid in uids:
            raise duplicate(f"{at}.uid", ref.uid)
        uids.add(ref.uid)
    if status.reserved_for and status.allocation is None:
        # validateResourceClaimStatusUpdate: "may not be reserved without being allocated"
        raise validation.forbidden("status.reservedFor", "may not be specified when `allocated` is not set")
    if status.allocation is not None:
        results = status.allocation.devices.results
        _too_many("status.allocation.devices.results", len(results), dra.ALLOCATION_RESULTS_MAX_SIZE)
        for i, r in enumerate(results):
            at = f"status.allocation.devices.results[{i}]"
            for field, value in (("request", r.request), ("driver", r.driver), ("pool", r.pool), ("device", r.device)):
                if not value:
                    raise required(f"{at}.{field}")


def validate_resource_claim_template(obj: dra.ResourceClaimTemplate) -> None:
    """ValidateResourceClaimTemplate: its name and the claim spec it stamps out."""
    validation.validate_object_meta(obj.metadata, namespaced=True)
    _claim_spec(obj.spec.spec, "spec.spec")


def _claim_spec(spec: dra.ResourceClaimSpec, path: str) -> None:
    devices = spec.devices
    at = f"{path}.devices"
    _too_many(f"{at}.requests", len(devices.requests), REQUESTS_MAX)
    names: dict[str, set[str]] = {}
    for i, request in enumerate(devices.requests):
        rat = f"{at}.requests[{i}]"
        _request_name(request.name, f"{rat}.name")
        if request.name in names:
            raise duplicate(f"{rat}.name", request.name)
        subs: set[str] = set()
        kinds = (request.exactly is not None) + bool(request.first_available)
        if kinds == 0:
            raise required(rat, _ONE_KIND)
        if kinds > 1:
            raise invalid(
                rat, NIL, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"
            )
        if request.exactly is not None:
            e = request.exactly
            _exact(e.device_class_name, e.selectors, e.allocation_mode, e.count, f"{rat}.exactly")
            _tolerations(e.tolerations, f"{rat}.exactly.tolerations")
        _too_many(f"{rat}.firstAvailable", len(request.first_available), FIRST_AVAILABLE_MAX)
        for j, sub in enumerate(request.first_available):
            sat = f"{rat}.firstAvailable[{j}]"
            _request_name(sub.name, f"{sat}.name")
            if sub.name in subs:
                raise duplicate(f"{sat}.name", sub.name)
            subs.add(sub.name)
            _exact(sub.device_class_name, sub.selectors, sub.allocation_mode, sub.count, sat)
            _tolerations(sub.tolerations, f"{sat}.tolerations")
        names[request.name] = subs
    _too_many(f"{at}.constraints", len(devices.constraints), CONSTRAINTS_MAX)
    for i, c in enumerate(devices.constraints):
        cat = f"{at}.constraints[{i}]"
        for j, ref in enumerate(c.requests):
            _request_ref(ref, names, f"{cat}.requests[{j}]")
        if c.match_attribute is None and c.distinct_attribute is None:
            raise required(
                cat, 'exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set'
            )
        field = "matchAttribute" if c.match_attribute is not None else "distinctAttribute"
        attr = c.match_attribute or c.distinct_attribute or ""
        domain, sep, ident = attr.partition("/")
        if not sep or not domain or not ident:
            raise invalid(
                f"{cat}.{field}", attr, "a fully qualified name must be a domain and a name separated by a slash"
            )
    for i, conf in enumerate(devices.config):
        for j, ref in enumerate(conf.requests):
            _request_ref(ref, names, f"{at}.config[{i}].requests[{j}]")


def _tolerations(tolerations: list[dra.DeviceToleration], path: str) -> None:
    """validateDeviceToleration."""
    _too_many(path, len(tolerations), TOLERATIONS_MAX)
    for i, t in enumerate(tolerations):
        at = f"{path}[{i}]"
        if t.key:
            validation.validate_label_name(t.key, f"{at}.key")
        if t.operator == "Exists":
            if t.value:
                raise invalid(f"{at}.value", t.value, "must be empty for operator `Exists`")
        elif t.operator in ("Equal", ""):  # "" is defaulted to Equal (SetDefaults_DeviceToleration)
            _check(f"{at}.value", t.value, validation.is_valid_label_value(t.value))
        else:
            raise not_supported(f"{at}.operator", t.operator, _TOLERATION_OPERATORS)
        if t.effect and t.effect not in _TAINT_EFFECTS:
            raise not_supported(f"{at}.effect", t.effect, sorted(_TAINT_EFFECTS))


def _request_name(name: str, path: str) -> None:
    if not name:
        raise required(path)
    _check(path, name, validation.is_dns1123_label(name))


def _request_ref(ref: str, names: dict[str, set[str]], path: str) -> None:
    parent, sep, sub = ref.partition("/")
    ok = parent in names and (not sep or sub in names[parent])
    if not ok:
        raise invalid(
            path,
            ref,
            "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'",
        )


def _exact(class_name: str, selectors: list[dra.DeviceSelector], mode: str, count: int, path: str) -> None:
    if not class_name:
        raise required(f"{path}.deviceClassName")
    _check(f"{path}.deviceClassName", class_name, validation.is_dns1123_subdomain(class_name))
    _selectors(selectors, f"{path}.selectors")
    if mode not in _MODES:
        raise not_supported(f"{path}.allocationMode", mode, _MODES)
    if mode == dra.ALLOCATION_MODE_EXACT_COUNT and count <= 0:
        raise invalid(f"{path}.count", count, "must be greater than zero")


def _selectors(selectors: list[dra.DeviceSelector], path: str) -> None:
    _too_many(path, len(selectors), SELECTORS_MAX)
    for i, s in enumerate(selectors):
        if s.cel is None:
            raise required(f"{path}[{i}].cel")
        if not s.cel.expression:
            raise required(f"{path}[{i}].cel.expression")
        if len(s.cel.expression) > CEL_MAX_LENGTH:
            raise InvalidArgument(f"{path}[{i}].cel.expression: Too long: may not be more than {CEL_MAX_LENGTH} bytes")
