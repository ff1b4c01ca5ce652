"""The claims are read once per cycle (``Allocator.prepare``) and solved per
node (over upstream's table, see test_allocator); with the pools' versions, a node's outcome is reused while its pools'
devices in use do not change. Either way every node's outcome — solution,
Unsatisfiable and its message, or AllocationError — is the one a fresh
``Allocator.allocate`` gives, and a device in use is never handed out."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from berth.cluster import dra, model
from berth.dra import AllocationError, Allocator, DeviceID, Unsatisfiable
from tests.dra.test_allocator import (
    CASES,
    _gpu_slice,
    _model_is,
    claim,
    claim_with_requests,
    classA,
    device_class,
    driverA,
    node,
    node1,
    node2,
    region1,
    region2,
    req0,
    request,
)


def _outcome(call: Any) -> Any:
    """A comparable form of an allocation outcome (or the error it raised)."""
    try:
        got = call()
    except AllocationError as e:
        return ("error", str(e))
    if isinstance(got, Unsatisfiable):
        return ("unsatisfiable", got.claim, got.request, got.reason, got.message)
    results = got.results() if hasattr(got, "results") else got
    out = [msgspec.to_builtins(r) for r in results]
    for r in out:  # share ids are drawn for each allocation: only their presence compares
        for d in r.get("devices", {}).get("results", []):
            if "shareID" in d:
                d["shareID"] = "<share>"
    return ("allocated", out)


def _nodes(tc: Any) -> list[model.Node | None]:
    out: list[model.Node | None] = [tc.node, None]
    for name in (node1, node2, "node-3"):
        for region in (region1, region2):
            out.append(node(name, region))
    return out


@pytest.mark.parametrize("versions", [None, {}], ids=["no memo", "memo, versions unchanged"])
@pytest.mark.parametrize("name", list(CASES))
def test_one_prepared_on_every_node_equals_a_fresh_allocate_per_node(name: str, versions: Any) -> None:
    tc = CASES[name]
    classes = {c.metadata.name: c for c in tc.classes}
    allocator = Allocator(classes=classes, slices=tc.slices, features=tc.features)
    try:
        prepared = allocator.prepare(tc.claims, tc.allocated, versions=versions)
    except AllocationError as e:  # pragma: no cover - prepare never raises: errors wait for a node
        raise AssertionError(f"prepare raised {e}") from e
    for _ in range(2):  # the second pass reuses (memo) what the first found
        for n in _nodes(tc):
            fresh = Allocator(classes=classes, slices=tc.slices, features=tc.features)
            want = _outcome(lambda n=n, fresh=fresh: fresh.allocate(n, tc.claims, tc.allocated))
            assert _outcome(lambda n=n: prepared.solve(n)) == want, n


CLAIMS_NS = "default"


def _claim(name: str) -> dra.ResourceClaim:
    c = claim(name, req0, classA)
    c.metadata.namespace = CLAIMS_NS
    return c


def _allocator() -> Allocator:
    return Allocator(classes={classA: device_class(classA, driverA)}, slices=[_gpu_slice(node1, "a100", "a100")])


def _device(out: Any) -> str:
    assert not isinstance(out, Unsatisfiable), out
    return str(out.results()[0].devices.results[0].device)


POOL = (driverA, node1)
GPU0, GPU1 = DeviceID(driverA, node1, "gpu-0"), DeviceID(driverA, node1, "gpu-1")

# (id, in use before, versions before, in use after, versions after, device the second claim gets or None)
MEMO_CASES = [
    ("nothing changed: the same device again", set(), {}, set(), {}, "gpu-0"),
    ("the device was taken and the version moved", set(), {}, {GPU0}, {POOL: 1}, "gpu-1"),
    ("the device was taken but the version did not move: never handed out twice", set(), {}, {GPU0}, {}, "gpu-1"),
    ("a device was freed and the version moved", {GPU0}, {POOL: 1}, set(), {POOL: 2}, "gpu-0"),
    ("every device taken, version moved", set(), {}, {GPU0, GPU1}, {POOL: 1}, None),
]


@pytest.mark.parametrize(
    ("name", "used_before", "versions_before", "used_after", "versions_after", "want"),
    MEMO_CASES,
    ids=[c[0] for c in MEMO_CASES],
)
def test_a_reused_outcome_follows_the_devices_in_use(
    name: str,
    used_before: set[DeviceID],
    versions_before: dict[tuple[str, str], int],
    used_after: set[DeviceID],
    versions_after: dict[tuple[str, str], int],
    want: str | None,
) -> None:
    allocator = _allocator()
    n = node(node1, region1)
    allocator.prepare([_claim("first")], used_before, versions=versions_before).solve(n)
    got = allocator.prepare([_claim("second")], used_after, versions=versions_after).solve(n)
    fresh = _allocator().allocate(n, [_claim("second")], used_after)
    if want is None:
        assert isinstance(got, Unsatisfiable)
        assert isinstance(fresh, Unsatisfiable)
        assert (got.claim, got.message) == (fresh.claim, fresh.message)
    else:
        assert _device(got) == want
        assert not isinstance(got, Unsatisfiable) and not isinstance(fresh, Unsatisfiable)
        assert got.results() == fresh


def test_a_reused_unsatisfiable_names_the_claim_that_asks() -> None:
    allocator = _allocator()
    n = node(node1, region1)
    full = {GPU0, GPU1}
    first = allocator.prepare([_claim("first")], full, versions={POOL: 3}).solve(n)
    second = allocator.prepare([_claim("second")], full, versions={POOL: 3}).solve(n)
    assert isinstance(first, Unsatisfiable) and isinstance(second, Unsatisfiable)
    assert first.message == "claim default/first, request req-0: all 2 matching devices are allocated"
    assert second.claim == "default/second"
    assert second.message == "claim default/second, request req-0: all 2 matching devices are allocated"


def test_claims_with_other_specs_do_not_share_an_outcome() -> None:
    allocator = _allocator()
    n = node(node1, region1)
    plain = allocator.prepare([_claim("plain")], set(), versions={}).solve(n)
    picky = claim_with_requests("picky", None, request(req0, classA, 1, _model_is("h100")))
    picky.metadata.namespace = CLAIMS_NS
    other = allocator.prepare([picky], set(), versions={}).solve(n)
    assert _device(plain) == "gpu-0"
    assert isinstance(other, Unsatisfiable)
    assert "no device matches the selectors" in other.message


def test_a_claim_that_cannot_be_read_fails_on_every_node_with_its_error() -> None:
    allocator = _allocator()
    bad = claim_with_requests("bad", None, request(req0, "no-such-class", 1))
    bad.metadata.namespace = CLAIMS_NS
    prepared = allocator.prepare([bad], set(), versions={})
    for n in (node(node1, region1), node(node2, region1)):
        with pytest.raises(AllocationError, match="could not retrieve device class no-such-class: not found"):
            prepared.solve(n)
