"""The Cluster feed carries every DRA field of Berth's model (resource.k8s.io/v1
as of v1.37, k8s.io/api v0.37.2 resource/v1/types.go): consumable capacity
(capacity request policies, request capacity, shares and the capacity they
consume), device taints' times, counter compatibility groups, list-typed
attributes, allocation timestamps and the devices' status (conditions, data,
network data) — both ways, refused with the field's path when malformed, and
read by the scheduler when fed over gRPC."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import grpc
import msgspec
import pytest
from google.protobuf.message import Message

from berth import errors
from berth.adapters.grpc import convert
from berth.api.v1 import cluster_pb2, model_pb2, scheduler_pb2
from berth.cluster import dra, model, resources
from berth_client import objects
from tests.grpc.test_storage_dra_feed import DRIVER, GIB, feeding, gpu_class, live, meta, node, pod

SHARE = "0b6c2f36-5d0e-4c1a-9b3e-2f8e6f1c7a10"
WHEN = "2026-11-28T03:30:00Z"


def _selector(node_name: str) -> model.NodeSelector:
    return msgspec.convert(
        {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}]}
            ]
        },
        model.NodeSelector,
    )


# ---------------------------------------------------------------- model objects setting every new field


def shared_slice() -> dra.ResourceSlice:
    """One device that allows several allocations, its memory taken by policy."""
    policy = dra.CapacityRequestPolicy(
        default="1Gi", valid_range=dra.CapacityRequestPolicyRange(min="1Gi", max="40Gi", step="1Gi")
    )
    return dra.ResourceSlice(
        metadata=model.ObjectMeta(name="n1-shared"),
        spec=dra.ResourceSliceSpec(
            driver=DRIVER,
            pool=dra.ResourcePool(name="n1", resource_slice_count=1),
            node_name="n1",
            devices=[
                dra.Device(
                    name="gpu-0",
                    attributes={"index": dra.DeviceAttribute(int_value=0)},
                    capacity={
                        "memory": dra.DeviceCapacity(value="40Gi", request_policy=policy),
                        "cores": dra.DeviceCapacity(
                            value="8",
                            request_policy=dra.CapacityRequestPolicy(default="2", valid_values=["2", "4", "8"]),
                        ),
                    },
                    allow_multiple_allocations=True,
                )
            ],
        ),
    )


def every_field_slice() -> dra.ResourceSlice:
    s = shared_slice()
    d = s.spec.devices[0]
    d.attributes |= {
        "ids": dra.DeviceAttribute(int_values=[1, 2]),
        "flags": dra.DeviceAttribute(bool_values=[True, False]),
        "names": dra.DeviceAttribute(string_values=["a", "b"]),
        "versions": dra.DeviceAttribute(version_values=["1.0.0", "2.1.0"]),
        "model": dra.DeviceAttribute(string_value="a100"),
        "healthy": dra.DeviceAttribute(bool_value=True),
        "driverVersion": dra.DeviceAttribute(version_value="1.2.3"),
    }
    d.capacity["bandwidth"] = dra.DeviceCapacity(
        value="10G", request_policy=dra.CapacityRequestPolicy(valid_range=dra.CapacityRequestPolicyRange(min="1G"))
    )
    d.taints = [
        dra.DeviceTaint(key="maintenance", value="soon", effect="NoSchedule", time_added=WHEN),
        dra.DeviceTaint(key="broken", effect="NoExecute"),
    ]
    d.consumes_counters = [
        dra.DeviceCounterConsumption(
            counter_set="mem", counters={"memory": dra.Counter(value="10Gi")}, compatibility_groups=["mig", "full"]
        )
    ]
    return s


def _conditions(status: str = "True") -> list[dict[str, Any]]:
    return [
        {"type": "ready", "status": status, "lastTransitionTime": WHEN, "reason": "Configured", "message": ""},
        {
            "type": "failed",
            "status": "False",
            "observedGeneration": 2,
            "lastTransitionTime": "2026-11-28T03:30:00.25+01:00",
            "reason": "NoError",
            "message": "all good",
        },
    ]


def every_field_claim() -> dra.ResourceClaim:
    memory = dra.CapacityRequirements(requests={"memory": "12Gi"})
    return dra.ResourceClaim(
        metadata=model.ObjectMeta(name="shared", namespace="default"),
        spec=dra.ResourceClaimSpec(
            devices=dra.DeviceClaim(
                requests=[
                    dra.DeviceRequest(
                        name="gpu", exactly=dra.ExactDeviceRequest(device_class_name="gpu", capacity=memory)
                    ),
                    dra.DeviceRequest(
                        name="any",
                        first_available=[
                            dra.DeviceSubRequest(
                                name="big",
                                device_class_name="gpu",
                                capacity=dra.CapacityRequirements(requests={"cores": "4"}),
                            ),
                            dra.DeviceSubRequest(name="small", device_class_name="gpu"),
                        ],
                    ),
                ]
            )
        ),
        status=dra.ResourceClaimStatus(
            allocation=dra.AllocationResult(
                devices=dra.DeviceAllocationResult(
                    results=[
                        dra.DeviceRequestAllocationResult(
                            request="gpu",
                            driver=DRIVER,
                            pool="n1",
                            device="gpu-0",
                            binding_conditions=["ready"],
                            binding_failure_conditions=["failed"],
                            share_id=SHARE,
                            consumed_capacity={"memory": "12Gi"},
                        )
                    ]
                ),
                node_selector=_selector("n1"),
                allocation_timestamp=WHEN,
            ),
            devices=[
                dra.AllocatedDeviceStatus(
                    driver=DRIVER,
                    pool="n1",
                    device="gpu-0",
                    share_id=SHARE,
                    conditions=_conditions(),
                    data={"slots": [1, 2], "mode": {"mig": True}},
                    network_data={"interfaceName": "eth1", "ips": ["10.0.0.1/24"], "hardwareAddress": "aa:bb"},
                ),
                dra.AllocatedDeviceStatus(driver=DRIVER, pool="n1", device="gpu-1"),
            ],
        ),
    )


ROUND_TRIPS: list[tuple[str, Callable[[], Any], Callable[..., Any], Callable[[Any], Message]]] = [
    ("consumable-capacity slice", shared_slice, convert.resource_slice_from_pb, convert.resource_slice_to_pb),
    ("slice with every new field", every_field_slice, convert.resource_slice_from_pb, convert.resource_slice_to_pb),
    ("claim with every new field", every_field_claim, convert.resource_claim_from_pb, convert.resource_claim_to_pb),
]


@pytest.mark.parametrize(("build", "from_pb", "to_pb"), [r[1:] for r in ROUND_TRIPS], ids=[r[0] for r in ROUND_TRIPS])
def test_every_new_field_survives_model_to_protobuf_and_back(
    build: Callable[[], Any], from_pb: Callable[..., Any], to_pb: Callable[[Any], Message]
) -> None:
    obj = build()
    msg = to_pb(obj)
    assert from_pb(msg, "x") == obj
    assert to_pb(from_pb(msg)) == msg


@pytest.mark.parametrize(("build", "from_pb"), [r[1:3] for r in ROUND_TRIPS], ids=[r[0] for r in ROUND_TRIPS])
def test_the_client_library_reads_the_api_servers_json_of_every_new_field(
    build: Callable[[], Any], from_pb: Callable[..., Any]
) -> None:
    """A manifest (the object as the API server writes it) fed through
    ``berth_client`` reaches the model unchanged."""
    obj = build()
    assert from_pb(objects.message(msgspec.to_builtins(obj), objects.KINDS[obj.kind])) == obj


def _set_fields(msg: Message) -> Iterator[tuple[str, str]]:
    """(message type, field) for every field set anywhere in ``msg``."""
    for field, value in msg.ListFields():
        yield msg.DESCRIPTOR.name, field.name
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            values = value.values() if field.message_type.fields_by_name["value"].message_type else []
        else:
            values = [value] if isinstance(value, Message) else value
        for v in values:
            yield from _set_fields(v)


#: The messages this feed added (or grew) for the model's newer fields.
NEW_MESSAGES: list[Any] = [
    model_pb2.IntValues.DESCRIPTOR,
    model_pb2.BoolValues.DESCRIPTOR,
    model_pb2.StringValues.DESCRIPTOR,
    model_pb2.DeviceAttribute.DESCRIPTOR,
    model_pb2.CapacityRequestPolicyRange.DESCRIPTOR,
    model_pb2.CapacityRequestPolicy.DESCRIPTOR,
    model_pb2.DeviceCapacity.DESCRIPTOR,
    model_pb2.DeviceCounterConsumption.DESCRIPTOR,
    model_pb2.DeviceTaint.DESCRIPTOR,
    model_pb2.CapacityRequirements.DESCRIPTOR,
    model_pb2.ExactDeviceRequest.DESCRIPTOR,
    model_pb2.DeviceSubRequest.DESCRIPTOR,
    model_pb2.DeviceRequestAllocationResult.DESCRIPTOR,
    model_pb2.AllocationResult.DESCRIPTOR,
    model_pb2.Condition.DESCRIPTOR,
    model_pb2.AllocatedDeviceStatus.DESCRIPTOR,
    model_pb2.ResourceClaimStatus.DESCRIPTOR,
]
#: Fields older tests set and these objects leave unset.
NOT_HERE = {
    ("ExactDeviceRequest", "selectors"),
    ("ExactDeviceRequest", "allocation_mode"),
    ("ExactDeviceRequest", "admin_access"),
    ("ExactDeviceRequest", "tolerations"),
    ("DeviceSubRequest", "selectors"),
    ("DeviceSubRequest", "tolerations"),
    ("DeviceRequestAllocationResult", "admin_access"),
    ("DeviceRequestAllocationResult", "tolerations"),
    ("ResourceClaimStatus", "reserved_for"),
}


def test_the_round_trip_objects_set_every_field_of_the_dra_messages() -> None:
    """The table above covers the contract: a field added to these messages
    without a case here (and a conversion) fails this test."""
    seen = {pair for _, build, _, to_pb in ROUND_TRIPS for pair in _set_fields(to_pb(build()))}
    missing = {(d.name, f.name) for d in NEW_MESSAGES for f in d.fields} - seen - NOT_HERE
    assert not missing


# ---------------------------------------------------------------- malformed values name their field


def _slice(change: Callable[[model_pb2.ResourceSlice], object]) -> model_pb2.ResourceSlice:
    msg = convert.resource_slice_to_pb(every_field_slice())
    change(msg)
    return msg


def _claim(change: Callable[[model_pb2.ResourceClaim], object]) -> model_pb2.ResourceClaim:
    msg = convert.resource_claim_to_pb(every_field_claim())
    change(msg)
    return msg


def _status(msg: model_pb2.ResourceClaim) -> model_pb2.AllocatedDeviceStatus:
    return msg.status.devices[0]


DEVICE = "resource_slices[0].spec.devices[0]"
CLAIM = "resource_claims[0]"
BAD = [
    (
        "range minimum not a quantity",
        _slice(lambda m: setattr(m.spec.devices[0].capacity["memory"].request_policy.valid_range, "min", "1 Gi")),
        f'{DEVICE}.capacity[memory].request_policy.valid_range.min: Invalid value: "1 Gi"',
    ),
    (
        "range step not a quantity",
        _slice(lambda m: setattr(m.spec.devices[0].capacity["memory"].request_policy.valid_range, "step", "x")),
        f'{DEVICE}.capacity[memory].request_policy.valid_range.step: Invalid value: "x"',
    ),
    (
        "policy default not a quantity",
        _slice(lambda m: setattr(m.spec.devices[0].capacity["cores"].request_policy, "default", "two")),
        f'{DEVICE}.capacity[cores].request_policy.default: Invalid value: "two"',
    ),
    (
        "a valid value not a quantity",
        _slice(lambda m: m.spec.devices[0].capacity["cores"].request_policy.valid_values.append("8 cores")),
        f'{DEVICE}.capacity[cores].request_policy.valid_values[3]: Invalid value: "8 cores"',
    ),
    (
        "taint time not RFC 3339",
        _slice(lambda m: setattr(m.spec.devices[0].taints[0], "time_added", "2026-11-28 03:30:00")),
        f'{DEVICE}.taints[0].time_added: Invalid value: "2026-11-28 03:30:00": must be an RFC 3339 time',
    ),
    (
        "taint time on no calendar",
        _slice(lambda m: setattr(m.spec.devices[0].taints[1], "time_added", "2026-02-30T00:00:00Z")),
        f'{DEVICE}.taints[1].time_added: Invalid value: "2026-02-30T00:00:00Z"',
    ),
    (
        "request capacity not a quantity",
        _claim(lambda m: m.spec.devices.requests[0].exactly.capacity.requests.__setitem__("memory", "12 GB")),
        f'{CLAIM}.spec.devices.requests[0].exactly.capacity.requests[memory]: Invalid value: "12 GB"',
    ),
    (
        "subrequest capacity not a quantity",
        _claim(lambda m: m.spec.devices.requests[1].first_available[0].capacity.requests.__setitem__("cores", "")),
        f'{CLAIM}.spec.devices.requests[1].first_available[0].capacity.requests[cores]: Invalid value: ""',
    ),
    (
        "consumed capacity not a quantity",
        _claim(lambda m: m.status.allocation.devices.results[0].consumed_capacity.__setitem__("memory", "lots")),
        f'{CLAIM}.status.allocation.devices.results[0].consumed_capacity[memory]: Invalid value: "lots"',
    ),
    (
        "share id not a normalized UUID",
        _claim(lambda m: setattr(m.status.allocation.devices.results[0], "share_id", SHARE.upper())),
        f'{CLAIM}.status.allocation.devices.results[0].share_id: Invalid value: "{SHARE.upper()}": uid must be',
    ),
    (
        "allocation timestamp not RFC 3339",
        _claim(lambda m: setattr(m.status.allocation, "allocation_timestamp", "yesterday")),
        f'{CLAIM}.status.allocation.allocation_timestamp: Invalid value: "yesterday"',
    ),
    (
        "device status share id",
        _claim(lambda m: setattr(_status(m), "share_id", "share-1")),
        f'{CLAIM}.status.devices[0].share_id: Invalid value: "share-1"',
    ),
    (
        "condition status outside True, False, Unknown",
        _claim(lambda m: setattr(_status(m).conditions[1], "status", "Maybe")),
        f'{CLAIM}.status.devices[0].conditions[1].status: Unsupported value: "Maybe": supported values: '
        '"False", "True", "Unknown"',
    ),
    (
        "condition without a type",
        _claim(lambda m: setattr(_status(m).conditions[0], "type", "")),
        f"{CLAIM}.status.devices[0].conditions[0].type: Required value",
    ),
    (
        "condition without a transition time",
        _claim(lambda m: setattr(_status(m).conditions[0], "last_transition_time", "")),
        f"{CLAIM}.status.devices[0].conditions[0].last_transition_time: Required value",
    ),
    (
        "condition transition time malformed",
        _claim(lambda m: setattr(_status(m).conditions[0], "last_transition_time", "2026-11-28T25:00:00Z")),
        f'{CLAIM}.status.devices[0].conditions[0].last_transition_time: Invalid value: "2026-11-28T25:00:00Z"',
    ),
    (
        "condition reason malformed",
        _claim(lambda m: setattr(_status(m).conditions[0], "reason", "not ready")),
        f'{CLAIM}.status.devices[0].conditions[0].reason: Invalid value: "not ready"',
    ),
    (
        "negative observed generation",
        _claim(lambda m: setattr(_status(m).conditions[1], "observed_generation", -1)),
        f"{CLAIM}.status.devices[0].conditions[1].observed_generation: Invalid value: -1",
    ),
    (
        "two conditions of one type",
        _claim(lambda m: setattr(_status(m).conditions[1], "type", "ready")),
        f'{CLAIM}.status.devices[0].conditions[1]: Duplicate value: "ready"',
    ),
    (
        "more than 8 conditions",
        _claim(
            lambda m: _status(m).conditions.extend(
                model_pb2.Condition(type=f"c{i}", status="True", reason="R", last_transition_time=WHEN)
                for i in range(7)
            )
        ),
        f"{CLAIM}.status.devices[0].conditions: Too many: 9: must have at most 8 items",
    ),
    (
        "data not JSON",
        _claim(lambda m: setattr(_status(m), "data", b"{broken")),
        f"{CLAIM}.status.devices[0].data: Invalid value: not JSON",
    ),
    (
        "data not an object",
        _claim(lambda m: setattr(_status(m), "data", b"[1, 2]")),
        f'{CLAIM}.status.devices[0].data: Invalid value: "<value omitted>": must be a valid JSON object',
    ),
    (
        "data over 10 KiB",
        _claim(lambda m: setattr(_status(m), "data", b'{"a": "' + b"x" * 10240 + b'"}')),
        f"{CLAIM}.status.devices[0].data: Too long: may not be more than 10240 bytes",
    ),
    (
        "network data nested too deep",
        _claim(lambda m: setattr(m.status.devices[1], "network_data", b"[" * 300 + b"]" * 300)),
        f"{CLAIM}.status.devices[1].network_data: Invalid value",
    ),
    (
        "network data not an object",
        _claim(lambda m: setattr(_status(m), "network_data", b'"eth1"')),
        f"{CLAIM}.status.devices[0].network_data: Invalid value",
    ),
]


@pytest.mark.parametrize(("msg", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_malformed_new_field_is_invalid_argument_naming_its_path(msg: Message, message: str) -> None:
    with pytest.raises(errors.InvalidArgument) as err:
        if isinstance(msg, model_pb2.ResourceSlice):
            convert.resource_slice_from_pb(msg, "resource_slices[0]")
        else:
            assert isinstance(msg, model_pb2.ResourceClaim)
            convert.resource_claim_from_pb(msg, CLAIM)
    assert str(err.value).startswith(message), str(err.value)


async def test_a_batch_with_a_malformed_request_policy_is_refused_whole() -> None:
    good = convert.resource_slice_to_pb(shared_slice())
    bad = _slice(lambda m: setattr(m.spec.devices[0].capacity["memory"].request_policy.valid_range, "max", "4O"))
    bad.metadata.name = "other"
    async with feeding() as (stub, feed):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.UpsertResourceSlices(cluster_pb2.UpsertResourceSlicesRequest(resource_slices=[good, bad]))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (err.value.details() or "").startswith(
            'resource_slices[1].spec.devices[0].capacity[memory].request_policy.valid_range.max: Invalid value: "4O"'
        ), err.value.details()
        assert feed.resource_slices == {}


# ---------------------------------------------------------------- the scheduler reads what the feed carries


def _memory_claim(name: str, memory: str) -> model_pb2.ResourceClaim:
    exactly = model_pb2.ExactDeviceRequest(
        device_class_name="gpu", capacity=model_pb2.CapacityRequirements(requests={"memory": memory})
    )
    return model_pb2.ResourceClaim(
        metadata=meta(name, "default"),
        spec=model_pb2.ResourceClaimSpec(
            devices=model_pb2.DeviceClaim(requests=[model_pb2.DeviceRequest(name="gpu", exactly=exactly)])
        ),
    )


def _claiming(name: str, claim: str) -> model_pb2.Pod:
    return pod(
        name,
        resource_claims=[model_pb2.PodResourceClaim(name="gpu", resource_claim_name=claim)],
        container_claims=["gpu"],
    )


async def test_a_consumable_capacity_device_fed_over_grpc_is_shared_by_two_claims_with_their_capacity() -> None:
    async with live() as s:
        await s.cluster.UpsertNodes(cluster_pb2.UpsertNodesRequest(nodes=[node("n1"), node("n2")]))
        await s.cluster.UpsertDeviceClasses(cluster_pb2.UpsertDeviceClassesRequest(device_classes=[gpu_class()]))
        slices = [convert.resource_slice_to_pb(shared_slice())]
        assert (
            await s.cluster.UpsertResourceSlices(cluster_pb2.UpsertResourceSlicesRequest(resource_slices=slices))
        ).upserted == 1
        # 12Gi is on the policy's 1Gi steps; 20.5Gi is rounded up to the next step.
        claims = [_memory_claim("a", "12Gi"), _memory_claim("b", "20.5Gi")]
        assert (
            await s.cluster.UpsertResourceClaims(cluster_pb2.UpsertResourceClaimsRequest(resource_claims=claims))
        ).upserted == 2

        submitted = await s.scheduler.Submit(
            scheduler_pb2.SubmitRequest(pods=[_claiming("pa", "a"), _claiming("pb", "b")])
        )
        assert all(r.accepted for r in submitted.results), submitted
        assert [await s.bound_node("default/pa"), await s.bound_node("default/pb")] == ["n1", "n1"]

        results = [
            convert.resource_claim_to_pb(s.feed.resource_claims[f"default/{c}"]).status.allocation.devices.results
            for c in ("a", "b")
        ]
        consumed = [
            [(r.pool, r.device, {k: resources.parse_quantity(q) for k, q in r.consumed_capacity.items()}) for r in rs]
            for rs in results
        ]
        # Each share takes what it asked for and the policy's default of the capacity it did not name.
        assert consumed == [
            [("n1", "gpu-0", {"memory": Fraction(12 * GIB), "cores": Fraction(2)})],
            [("n1", "gpu-0", {"memory": Fraction(21 * GIB), "cores": Fraction(2)})],
        ]
        assert all(rs[0].HasField("share_id") for rs in results) and results[0][0].share_id != results[1][0].share_id


def _bound_claim(status: str) -> model_pb2.ResourceClaim:
    """A claim another scheduler allocated to a device with binding conditions,
    its driver's status saying whether ``ready`` holds."""
    claim = every_field_claim()
    claim.spec.devices.requests = claim.spec.devices.requests[:1]
    assert claim.status.allocation is not None
    claim.status.allocation.devices.results[0].share_id = None
    claim.status.allocation.devices.results[0].consumed_capacity = {}
    claim.status.devices = [
        dra.AllocatedDeviceStatus(driver=DRIVER, pool="n1", device="gpu-0", conditions=_conditions(status))
    ]
    return convert.resource_claim_to_pb(claim)


def _binding_slice() -> model_pb2.ResourceSlice:
    s = shared_slice()
    d = s.spec.devices[0]
    d.capacity = {}
    d.allow_multiple_allocations = None
    d.binding_conditions, d.binding_failure_conditions = ["ready"], ["failed"]
    return convert.resource_slice_to_pb(s)


async def test_a_claim_fed_with_its_binding_conditions_met_is_read_back_intact_and_its_pod_binds() -> None:
    async with live() as s:
        await s.cluster.UpsertNodes(cluster_pb2.UpsertNodesRequest(nodes=[node("n1"), node("n2")]))
        await s.cluster.UpsertDeviceClasses(cluster_pb2.UpsertDeviceClassesRequest(device_classes=[gpu_class()]))
        await s.cluster.UpsertResourceSlices(
            cluster_pb2.UpsertResourceSlicesRequest(resource_slices=[_binding_slice()])
        )
        sent = _bound_claim("True")
        await s.cluster.UpsertResourceClaims(cluster_pb2.UpsertResourceClaimsRequest(resource_claims=[sent]))
        stored = convert.resource_claim_to_pb(s.feed.resource_claims["default/shared"])
        assert (stored.spec, stored.status) == (sent.spec, sent.status)

        submitted = await s.scheduler.Submit(scheduler_pb2.SubmitRequest(pods=[_claiming("p", "shared")]))
        assert submitted.results[0].accepted, submitted.results[0].message
        # PreBind finds every binding condition true in the fed status: no wait.
        async with asyncio.timeout(10):
            assert await s.bound_node("default/p") == "n1"
        back = convert.resource_claim_to_pb(s.feed.resource_claims["default/shared"])
        assert back.status.devices == sent.status.devices
        assert back.status.allocation == sent.status.allocation
        assert [r.name for r in back.status.reserved_for] == ["p"]
