"""resource.k8s.io/v1 objects decode as the API server writes them."""

from __future__ import annotations

import msgspec
import pytest

from berth.cluster import dra

SLICE = (
    b'{"metadata":{"name":"s"},"spec":{"driver":"gpu.example.com",'
    b'"pool":{"name":"n1","generation":1,"resourceSliceCount":1},"nodeName":"n1","devices":%s}}'
)
CLAIM = b'{"metadata":{"name":"c","namespace":"default"},"spec":{"devices":{"requests":%s}}}'


# k8s.io/api v0.34.4 resource/v1/types.go: ResourceSliceSpec.Devices and
# DeviceClaim.Requests have no omitempty, so an empty list arrives as null.
# Before, Berth's claim informer refused such a claim and retried its watch
# forever (found by the differential conformance suite).
@pytest.mark.parametrize("wire", [b"null", b"[]"], ids=["null", "empty"])
def test_a_slice_without_devices_decodes_to_an_empty_list(wire: bytes) -> None:
    s = msgspec.json.decode(SLICE % wire, type=dra.ResourceSlice)
    assert s.spec.devices == []


@pytest.mark.parametrize("wire", [b"null", b"[]"], ids=["null", "empty"])
def test_a_claim_without_requests_decodes_to_an_empty_list(wire: bytes) -> None:
    c = msgspec.json.decode(CLAIM % wire, type=dra.ResourceClaim)
    assert c.spec.devices.requests == []
    assert msgspec.json.decode(msgspec.json.encode(c), type=dra.ResourceClaim) == c


def test_a_claim_with_requests_keeps_them() -> None:
    wire = b'[{"name":"gpu","exactly":{"deviceClassName":"gpu"}}]'
    c = msgspec.json.decode(CLAIM % wire, type=dra.ResourceClaim)
    assert [r.name for r in c.spec.devices.requests] == ["gpu"]


@pytest.mark.parametrize("wire", [b'"x"', b"{}", b"[null]"])
def test_other_shapes_of_the_lists_are_still_refused(wire: bytes) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(CLAIM % wire, type=dra.ResourceClaim)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(SLICE % wire, type=dra.ResourceSlice)


def test_the_1_37_fields_arrive() -> None:
    """What kube-apiserver 1.37 serves for partitionable devices, consumable
    capacity, device taints and binding conditions decodes into the model
    (k8s.io/api v0.37.2 resource/v1/types.go), and writes back under the same keys."""
    counters = msgspec.json.decode(
        b'{"metadata":{"name":"counters"},"spec":{"driver":"gpu.example.com","nodeName":"n1",'
        b'"pool":{"name":"n1","generation":1,"resourceSliceCount":2},'
        b'"sharedCounters":[{"name":"gpu-0","counters":{"memory":{"value":"40Gi"}}}]}}',
        type=dra.ResourceSlice,
    )
    assert counters.spec.shared_counters[0].counters["memory"].value == "40Gi"
    devices = msgspec.json.decode(
        SLICE % b'[{"name":"mig-1g","consumesCounters":[{"counterSet":"gpu-0","counters":{"memory":{"value":"5Gi"}}}],'
        b'"allowMultipleAllocations":true,"capacity":{"bw":{"value":"100","requestPolicy":{"default":"10",'
        b'"validRange":{"min":"10","max":"100","step":"10"}}}},'
        b'"taints":[{"key":"maintenance","effect":"None","timeAdded":"2026-01-01T00:00:00Z"}],'
        b'"bindsToNode":true,"bindingConditions":["attached"],"bindingFailureConditions":["failed"]}]',
        type=dra.ResourceSlice,
    )
    d = devices.spec.devices[0]
    assert d.consumes_counters[0].counter_set == "gpu-0" and d.allow_multiple_allocations
    policy = d.capacity["bw"].request_policy
    assert policy is not None and policy.valid_range is not None and policy.valid_range.step == "10"
    assert (d.taints[0].effect, d.binds_to_node, d.binding_conditions) == ("None", True, ["attached"])
    claim = msgspec.json.decode(
        b'{"metadata":{"name":"c","namespace":"default"},"spec":{"devices":{"requests":[{"name":"r",'
        b'"exactly":{"deviceClassName":"gpu","capacity":{"requests":{"bw":"20"}},'
        b'"tolerations":[{"key":"maintenance","operator":"Exists"}]}}],'
        b'"constraints":[{"distinctAttribute":"gpu.example.com/uuid"}]}},'
        b'"status":{"allocation":{"devices":{"results":[{"request":"r","driver":"gpu.example.com","pool":"n1",'
        b'"device":"mig-1g","shareID":"7a2c","consumedCapacity":{"bw":"20"},'
        b'"tolerations":[{"key":"maintenance","operator":"Exists"}],'
        b'"bindingConditions":["attached"],"bindingFailureConditions":["failed"]}]},'
        b'"allocationTimestamp":"2026-01-01T00:00:00Z"},'
        b'"devices":[{"driver":"gpu.example.com","pool":"n1","device":"mig-1g","shareID":"7a2c",'
        b'"conditions":[{"type":"attached","status":"True"}]}]}}',
        type=dra.ResourceClaim,
    )
    request = claim.spec.devices.requests[0].exactly
    assert request is not None and request.capacity is not None and request.capacity.requests == {"bw": "20"}
    assert claim.spec.devices.constraints[0].distinct_attribute == "gpu.example.com/uuid"
    assert claim.status.allocation is not None
    result = claim.status.allocation.devices.results[0]
    assert (result.share_id, result.consumed_capacity, result.binding_conditions) == (
        "7a2c",
        {"bw": "20"},
        ["attached"],
    )
    assert claim.status.devices[0].conditions == [{"type": "attached", "status": "True"}]
    written = msgspec.to_builtins(claim.status.allocation)["devices"]["results"][0]
    assert written["shareID"] == "7a2c" and written["consumedCapacity"] == {"bw": "20"}
    rule = msgspec.json.decode(
        b'{"apiVersion":"resource.k8s.io/v1","kind":"DeviceTaintRule","metadata":{"name":"r"},'
        b'"spec":{"deviceSelector":{"driver":"gpu.example.com","pool":"n1"},'
        b'"taint":{"key":"broken","effect":"NoExecute"}},"status":{"conditions":[]}}',
        type=dra.DeviceTaintRule,
    )
    assert rule.spec.device_selector is not None and rule.spec.device_selector.pool == "n1"
    assert rule.spec.taint.effect == "NoExecute"
