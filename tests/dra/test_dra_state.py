"""The DraStore counts the devices in use incrementally: after any sequence of
claim events, assumed writes, restores and in-flight allocations, the devices
in use are exactly what a full recount of the stored claims (plus the ones in
flight) gives (``allocateddevices.go`` / ``ListAllAllocatedDevices``), and
every pool whose devices in use changed has a new version."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.cluster import dra, model
from berth.scheduling.dra_state import DraStore

NS = "default"
NAMES = ("a", "b", "c")
DEVICES = [("drv", "pool", f"dev-{i}") for i in range(5)]

Device = tuple[str, str, str]


def claim(name: str, version: int, devices: list[tuple[int, bool]] | None) -> dra.ResourceClaim:
    """``devices``: (device index, admin access) or None for an unallocated claim."""
    allocation = None
    if devices is not None:
        results = [
            dra.DeviceRequestAllocationResult(
                request="req",
                driver=DEVICES[i][0],
                pool=DEVICES[i][1],
                device=DEVICES[i][2],
                admin_access=admin or None,
            )
            for i, admin in devices
        ]
        allocation = dra.AllocationResult(devices=dra.DeviceAllocationResult(results=results))
    return dra.ResourceClaim(
        metadata=model.ObjectMeta(name=name, namespace=NS, uid=f"uid-{name}", resource_version=str(version)),
        status=dra.ResourceClaimStatus(allocation=allocation),
    )


def recount(claims: list[dra.ResourceClaim]) -> Counter[Device]:
    out: Counter[Device] = Counter()
    for c in claims:
        if c.status.allocation is not None:
            out.update((r.driver, r.pool, r.device) for r in c.status.allocation.devices.results if not r.admin_access)
    return out


def apply(store: DraStore, op: tuple[Any, ...]) -> None:
    kind, name = op[0], op[1]
    if kind == "put":
        store.put_claim(claim(name, op[2], op[3]))
    elif kind == "remove":
        store.remove_claim(NS, name)
    elif kind == "assume":
        store.assume_claim(claim(name, op[2], op[3]))
    elif kind == "restore":
        store.restore_claim(NS, name)
    elif kind == "signal":
        store.signal_pending_allocation(f"uid-{name}", claim(name, 0, op[3] or []))
    elif kind == "forget":
        store.remove_pending_allocation(f"uid-{name}")
    else:
        raise AssertionError(kind)


def check(store: DraStore) -> None:
    counted = recount(store.claims()) + recount(store.pending_allocations())
    assert store._in_use == counted
    assert all(count > 0 for count in store._in_use.values())
    assert store.allocated_devices() == set(counted)


_devices = st.none() | st.lists(st.tuples(st.integers(0, len(DEVICES) - 1), st.booleans()), max_size=3)
_op = st.tuples(
    st.sampled_from(["put", "remove", "assume", "restore", "signal", "forget"]),
    st.sampled_from(NAMES),
    st.integers(1, 6),
    _devices,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_op, max_size=25))
def test_devices_in_use_equal_a_full_recount_after_any_sequence(ops: list[tuple[Any, ...]]) -> None:
    store = DraStore()
    for op in ops:
        used, versions = set(store.allocated_devices()), dict(store.pool_versions)
        apply(store, op)
        check(store)
        # A pool whose devices in use changed has a new version (the
        # allocator's per-node memo relies on it).
        for device in used ^ set(store.allocated_devices()):
            pool = (device[0], device[1])
            assert store.pool_versions.get(pool, 0) != versions.get(pool, 0), (op, device)


P, R, A = "put", "remove", "assume"
SEQUENCES = [
    ("allocate, then deallocate", [(P, "a", 1, [(0, False)]), (P, "a", 2, None)], set()),
    ("reallocate to another device", [(P, "a", 1, [(0, False)]), (P, "a", 2, [(1, False)])], {DEVICES[1]}),
    ("delete an allocated claim", [(P, "a", 1, [(0, False), (1, False)]), (R, "a", 0, None)], set()),
    ("admin access takes no device", [(P, "a", 1, [(0, True)])], set()),
    (
        "two claims on one device: freed only when both let go",
        [(P, "a", 1, [(0, False)]), (P, "b", 1, [(0, False)]), (P, "a", 2, None)],
        {DEVICES[0]},
    ),
    (
        "an assumed write counts until restored",
        [(P, "a", 1, None), (A, "a", 2, [(2, False)])],
        {DEVICES[2]},
    ),
    (
        "restore undoes an assumed write",
        [(P, "a", 1, None), (A, "a", 2, [(2, False)]), ("restore", "a", 0, None)],
        set(),
    ),
    (
        "an older event does not undo an assumed write",
        [(P, "a", 1, None), (A, "a", 3, [(2, False)]), (P, "a", 2, None)],
        {DEVICES[2]},
    ),
    ("in flight counts, forgotten does not", [("signal", "a", 0, [(3, False)])], {DEVICES[3]}),
    ("forget after signal", [("signal", "a", 0, [(3, False)]), ("forget", "a", 0, None)], set()),
    ("removing an unknown claim changes nothing", [(P, "a", 1, [(4, False)]), (R, "zz", 0, None)], {DEVICES[4]}),
]


@pytest.mark.parametrize(("name", "ops", "want"), SEQUENCES, ids=[s[0] for s in SEQUENCES])
def test_devices_in_use_after_a_sequence(name: str, ops: list[tuple[Any, ...]], want: set[Device]) -> None:
    store = DraStore()
    for op in ops:
        apply(store, op)
        check(store)
    assert store.allocated_devices() == want
