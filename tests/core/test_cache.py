"""The cache's pod state machine and generation-based snapshots (cache.go, cache_test.go)."""

from __future__ import annotations

import msgspec
import pytest

from berth.cache.cache import Cache, CacheError
from berth.cache.infos import PodInfo
from berth.testing import make_node, make_pod
from tests.support import ManualClock

FakeClock = ManualClock


def cpu_requested(cache: Cache, node: str) -> int:
    t = cache.table
    return int(t.req[t.index[node], t.columns.index["cpu"]])


def test_assumed_pod_counts_at_once_and_forget_releases_it() -> None:
    cache = Cache()
    cache.add_node(make_node("n1", cpu="4", memory="4Gi", pods=10))
    pi = PodInfo.of(make_pod("a", requests={"cpu": "1"}))
    cache.assume_pod(pi, "n1")
    assert cpu_requested(cache, "n1") == 1000
    assert cache.is_assumed(pi.uid)
    cache.forget_pod(pi.uid)
    assert cpu_requested(cache, "n1") == 0
    assert cache.pod_count == 0


def test_assumed_then_added_is_confirmed_and_counted_once() -> None:
    cache = Cache()
    cache.add_node(make_node("n1", cpu="4"))
    pod = make_pod("a", requests={"cpu": "1"})
    cache.assume_pod(PodInfo.of(pod), "n1")
    bound = msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name="n1"))
    cache.add_pod(PodInfo.of(bound))
    assert cpu_requested(cache, "n1") == 1000
    assert not cache.is_assumed(bound.metadata.uid)
    with pytest.raises(CacheError):
        cache.forget_pod(bound.metadata.uid)


def test_assumed_pod_that_lands_elsewhere_moves_there() -> None:
    cache = Cache()
    cache.add_node(make_node("n1", cpu="4"))
    cache.add_node(make_node("n2", cpu="4"))
    pod = make_pod("a", requests={"cpu": "1"})
    cache.assume_pod(PodInfo.of(pod), "n1")
    cache.add_pod(PodInfo.of(make_pod("a", requests={"cpu": "1"}, node_name="n2")))
    assert cpu_requested(cache, "n1") == 0
    assert cpu_requested(cache, "n2") == 1000


def test_assumed_pod_expires_only_after_binding_finished_and_ttl() -> None:
    clock = FakeClock()
    cache = Cache(assumed_ttl=30, clock=clock)
    cache.add_node(make_node("n1", cpu="4"))
    pi = PodInfo.of(make_pod("a", requests={"cpu": "1"}))
    cache.assume_pod(pi, "n1")
    clock.now = 100
    assert cache.cleanup_expired() == []  # binding not finished: never expires
    cache.finish_binding(pi.uid)
    clock.now = 129
    assert cache.cleanup_expired() == []
    clock.now = 130
    assert [p.uid for p in cache.cleanup_expired()] == [pi.uid]
    assert cpu_requested(cache, "n1") == 0


def test_assuming_a_pod_twice_is_an_error() -> None:
    cache = Cache()
    cache.add_node(make_node("n1", cpu="4"))
    pi = PodInfo.of(make_pod("a"))
    cache.assume_pod(pi, "n1")
    with pytest.raises(CacheError):
        cache.assume_pod(pi, "n1")


def test_pod_before_its_node_is_kept_and_counted_when_the_node_arrives() -> None:
    cache = Cache()
    cache.add_pod(PodInfo.of(make_pod("a", requests={"cpu": "1"}, node_name="late")))
    assert cache.node_count == 0
    cache.add_node(make_node("late", cpu="4"))
    assert cache.node_count == 1
    assert cpu_requested(cache, "late") == 1000


def test_update_pod_replaces_its_resources() -> None:
    cache = Cache()
    cache.add_node(make_node("n1", cpu="4"))
    cache.add_pod(PodInfo.of(make_pod("a", requests={"cpu": "1"}, node_name="n1")))
    cache.update_pod(PodInfo.of(make_pod("a", requests={"cpu": "2"}, node_name="n1")))
    assert cpu_requested(cache, "n1") == 2000
    cache.remove_pod("uid-default-a")
    assert cpu_requested(cache, "n1") == 0


def test_snapshot_is_not_disturbed_by_later_changes() -> None:
    cache = Cache()
    cache.add_node(make_node("n1", cpu="4"))
    snap = cache.new_snapshot()
    cache.add_pod(PodInfo.of(make_pod("a", requests={"cpu": "1"}, node_name="n1")))
    cache.add_node(make_node("n2", cpu="8"))
    assert int(snap.req[0, 0]) == 0
    assert snap.size == 1 and len(snap.infos[0].pods) == 0  # type: ignore[union-attr]
    copied = cache.update_snapshot(snap)
    assert copied == 2
    assert int(snap.req[snap.index["n1"], 0]) == 1000
    assert len(snap.infos[snap.index["n1"]].pods) == 1  # type: ignore[union-attr]


def test_snapshot_update_copies_only_changed_nodes() -> None:
    cache = Cache()
    for i in range(50):
        cache.add_node(make_node(f"n{i}", cpu="4"))
    snap = cache.new_snapshot()
    assert cache.update_snapshot(snap) == 0
    cache.add_pod(PodInfo.of(make_pod("a", requests={"cpu": "1"}, node_name="n7")))
    assert cache.update_snapshot(snap) == 1


def test_removed_node_leaves_the_snapshot_and_new_resources_get_columns() -> None:
    cache = Cache()
    cache.add_node(make_node("n1", cpu="4"))
    cache.add_node(make_node("gpu", cpu="4", allocatable={"nvidia.com/gpu": 2}))
    snap = cache.new_snapshot()
    assert snap.columns.index["nvidia.com/gpu"] >= 4
    assert int(snap.alloc[snap.index["gpu"], snap.columns.index["nvidia.com/gpu"]]) == 2
    cache.remove_node("n1")
    cache.update_snapshot(snap)
    assert [snap.name(r) for r in snap.alive_rows()] == ["gpu"]


def test_node_order_round_robins_zones_like_the_node_tree() -> None:
    cache = Cache()
    for name, zone in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("c1", "c"), ("c2", "c")]:
        cache.add_node(make_node(name, labels={"topology.kubernetes.io/zone": zone}))
    snap = cache.new_snapshot()
    assert [snap.name(r) for r in snap.order()] == ["a1", "b1", "c1", "a2", "c2", "a3"]


def test_by_default_an_assumed_pod_waits_for_its_add_however_late() -> None:
    # kube-scheduler v1.37.2's cache has no expiry (pkg/scheduler/backend/cache).
    now = [0.0]
    cache = Cache(clock=lambda: now[0])
    cache.add_node(make_node("n", cpu="4"))
    pi = PodInfo.of(make_pod("p", requests={"cpu": "1"}))
    cache.assume_pod(pi, "n")
    cache.finish_binding(pi.uid)
    now[0] = 10 * 365 * 24 * 3600.0
    assert cache.cleanup_expired() == []
    assert cache.is_assumed(pi.uid)
