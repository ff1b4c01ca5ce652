"""The DraStore counts the devices in use incrementally: after any sequence of
claim events, assumed writes, restores and in-flight allocations, the devices
in use — held whole, shared (a result with a ``shareID``) and the capacity
the shares consume — are exactly what a full recount of the stored claims
(plus the ones in flight) gives (``allocateddevices.go`` /
``GatherAllocatedState``, v1.37.2), and every pool whose devices in use
changed has a new version. DeviceTaintRules patch their taints into the
slices the allocator sees (the resourceslice tracker's ``applyPatches``)."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berth import dra as allocation
from berth.cluster import dra, model
from berth.plugins.dynamicresources import allocated_state
from berth.scheduling.dra_state import DraStore

NS = "default"
NAMES = ("a", "b", "c")
DEVICES = [("drv", "pool", f"dev-{i}") for i in range(5)]

Device = tuple[str, str, str]


def claim(name: str, version: int, devices: list[tuple[Any, ...]] | None) -> dra.ResourceClaim:
    """``devices``: (device index, admin access[, a share consuming 1 "mem"])
    or None for an unallocated claim."""
    allocation_ = None
    if devices is not None:
        results = [
            dra.DeviceRequestAllocationResult(
                request="req",
                driver=DEVICES[d[0]][0],
                pool=DEVICES[d[0]][1],
                device=DEVICES[d[0]][2],
                admin_access=d[1] or None,
                share_id=f"share-{name}-{k}" if d[2:] and d[2] else None,
                consumed_capacity={"mem": "1"} if d[2:] and d[2] else {},
            )
            for k, d in enumerate(devices)
        ]
        allocation_ = dra.AllocationResult(devices=dra.DeviceAllocationResult(results=results))
    return dra.ResourceClaim(
        metadata=model.ObjectMeta(name=name, namespace=NS, uid=f"uid-{name}", resource_version=str(version)),
        status=dra.ResourceClaimStatus(allocation=allocation_),
    )


def recount(claims: list[dra.ResourceClaim], *, shared: bool = False) -> Counter[Device]:
    """Devices held whole (or, with ``shared``, the shares of each device)."""
    out: Counter[Device] = Counter()
    for c in claims:
        if c.status.allocation is not None:
            out.update(
                (r.driver, r.pool, r.device)
                for r in c.status.allocation.devices.results
                if not r.admin_access and (r.share_id is not None) == shared
            )
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
    every = store.claims() + store.pending_allocations()
    counted = recount(every)
    assert store._in_use == counted
    assert all(count > 0 for count in store._in_use.values())
    assert store.allocated_devices() == set(counted)
    shares = recount(every, shared=True)
    assert store.shared_devices() == set(shares)
    assert dict(store.consumed_capacity()) == {d: {"mem": Fraction(n)} for d, n in shares.items()}


_devices = st.none() | st.lists(st.tuples(st.integers(0, len(DEVICES) - 1), st.booleans(), st.booleans()), max_size=3)
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
        shared = set(store.shared_devices())
        apply(store, op)
        check(store)
        # A pool whose devices in use changed has a new version (the
        # allocator's per-node memo relies on it).
        for device in used ^ set(store.allocated_devices()) ^ shared ^ set(store.shared_devices()):
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


#: GatherAllocatedState (dynamicresources_test.go v1.37.2): claims allocated and in
#: flight, consumable capacity on or off -> devices whole, devices shared, "mem" consumed.
GATHER = {
    "no-claims": ([], [], True, 0, 0, None),
    "single-allocated-claim": ([[(0, False)]], [], False, 1, 0, None),
    "single-allocated-claim-with-capacity": ([[(0, False, True)]], [], True, 0, 1, 1),
    "disabled-single-allocated-claim-with-capacity": ([[(0, False, True)]], [], False, 1, 0, None),
    "mixed-allocated-claim": ([[(0, False)], [(1, False, True)]], [], True, 1, 1, 1),
    "add-inflight-allocated-claim-with-capacity": (
        [[(0, False)], [(1, False, True)]],
        [[(1, False, True)]],
        True,
        1,
        1,
        2,
    ),
    "disabled-inflight-allocated-claim-with-capacity": (
        [[(0, False)], [(1, False, True)]],
        [[(1, False, True)]],
        False,
        2,
        0,
        None,
    ),
}


@pytest.mark.parametrize("name", list(GATHER))
def test_gather_allocated_state(name: str) -> None:
    stored, in_flight, consumable, whole, shared, mem = GATHER[name]
    store = DraStore()
    for i, devices in enumerate(stored):
        store.put_claim(claim(NAMES[i], 1, devices))
    for devices in in_flight:
        store.signal_pending_allocation("uid-flight", claim("flight", 0, devices))
    got = allocated_state(store, consumable_capacity=consumable)
    assert (len(got.devices), len(got.shared)) == (whole, shared)
    assert [dict(c) for c in got.capacity.values()] == ([] if mem is None else [{"mem": Fraction(mem)}])


def _rule(name: str, **selector: str) -> dra.DeviceTaintRule:
    return msgspec.convert(
        {
            "metadata": {"name": name},
            "spec": {
                **({"deviceSelector": selector} if selector else {}),
                "taint": {"key": name, "effect": "NoSchedule"},
            },
        },
        dra.DeviceTaintRule,
    )


def test_device_taint_rules_taint_the_devices_they_select() -> None:
    """applyPatches (k8s.io/dynamic-resource-allocation v0.37.2 resourceslice/tracker):
    every set field of the selector must match; no selector matches nothing."""
    store = DraStore()
    for pool in ("pool", "other"):
        store.put_slice(
            msgspec.convert(
                {
                    "metadata": {"name": pool},
                    "spec": {
                        "driver": "drv",
                        "nodeName": "n",
                        "pool": {"name": pool, "resourceSliceCount": 1},
                        "devices": [{"name": "dev-0"}, {"name": "dev-1"}],
                    },
                },
                dra.ResourceSlice,
            )
        )
    generation = store.generation
    store.put_taint_rule(_rule("all-of-pool", driver="drv", pool="pool"))
    store.put_taint_rule(_rule("one-device", device="dev-1"))
    store.put_taint_rule(_rule("no-selector"))
    store.put_taint_rule(_rule("other-driver", driver="x"))
    assert store.generation > generation  # the Allocator is rebuilt
    taints = {
        (s.spec.pool.name, d.name): [t.key for t in d.taints] for s in store.resource_slices() for d in s.spec.devices
    }
    assert taints == {
        ("pool", "dev-0"): ["all-of-pool"],
        ("pool", "dev-1"): ["all-of-pool", "one-device"],
        ("other", "dev-0"): [],
        ("other", "dev-1"): ["one-device"],
    }
    store.remove_taint_rule("all-of-pool")
    allocator = allocation.Allocator(classes={}, slices=store.resource_slices())
    assert [t.key for p in allocator.slices.gather_pools(None) for c in p.devices for t in c.device.taints] == []
    got = {(s.spec.pool.name, d.name): len(d.taints) for s in store.resource_slices() for d in s.spec.devices}
    assert got == {("pool", "dev-0"): 0, ("pool", "dev-1"): 1, ("other", "dev-0"): 0, ("other", "dev-1"): 1}
