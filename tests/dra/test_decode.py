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
