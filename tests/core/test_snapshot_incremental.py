"""The incremental snapshot and the cache's in-place replacement of a pod.

Two invariants, checked under random sequences of cache operations
(Hypothesis):

- a snapshot brought up to date by walking the rows stamped since its last
  sync (``NodeTable.recent``) equals one rebuilt from scratch, and copies the
  rows a full comparison of generations would copy (``UpdateSnapshot`` in
  kube-scheduler's ``pkg/scheduler/backend/cache/cache.go`` walks its
  generation-ordered node list the same way);
- every node's requested and non-zero requested columns are the sums of the
  pods the cache counts there, however the pods got there (a confirmed
  binding or an update with unchanged requests replaces the pod in place,
  without subtracting and adding its amounts).
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.cache.cache import Cache
from berth.cache.infos import PodInfo
from berth.cache.snapshot import Snapshot
from berth.cluster import model
from berth.testing import make_node, make_pod

NODES = [f"n{i}" for i in range(6)]
PODS = [f"p{i}" for i in range(8)]
CPU = st.sampled_from(["100m", "250m", "1", "2"])

ops = st.lists(
    st.one_of(
        st.tuples(st.just("add_node"), st.sampled_from(NODES), st.sampled_from(["2", "4", "8"]), st.booleans()),
        st.tuples(st.just("remove_node"), st.sampled_from(NODES)),
        st.tuples(st.just("assume"), st.sampled_from(PODS), st.sampled_from(NODES), CPU),
        st.tuples(st.just("confirm"), st.sampled_from(PODS), st.booleans()),
        st.tuples(st.just("forget"), st.sampled_from(PODS)),
        st.tuples(st.just("add_bound"), st.sampled_from(PODS), st.sampled_from(NODES), CPU),
        st.tuples(st.just("relabel"), st.sampled_from(PODS), st.sampled_from(["a", "b"])),
        st.tuples(st.just("resize"), st.sampled_from(PODS), CPU),
        st.tuples(st.just("remove_pod"), st.sampled_from(PODS)),
        st.tuples(st.just("sync")),
    ),
    max_size=60,
)


def _pod(name: str, node: str = "", cpu: str = "100m", app: str = "a") -> model.Pod:
    return make_pod(name, uid=name, requests={"cpu": cpu, "memory": "64Mi"}, node_name=node, labels={"app": app})


def _with(pod: model.Pod, **spec: Any) -> model.Pod:
    return msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, **spec))


def _apply(cache: Cache, op: tuple[Any, ...]) -> None:
    """One operation, as the scheduling loop and the informers make them;
    an operation the cache's state makes meaningless is skipped."""
    kind = op[0]
    if kind == "add_node":
        _, name, cpu, labelled = op
        cache.add_node(make_node(name, cpu=cpu, memory="8Gi", pods=4, labels={"zone": "z1"} if labelled else {}))
    elif kind == "remove_node":
        cache.remove_node(op[1])
    elif kind == "assume":
        _, name, node, cpu = op
        if cache.get_pod(name) is None:
            cache.assume_pod(PodInfo.of(_with(_pod(name, cpu=cpu), node_name=node)), node)
    elif kind == "confirm":
        # The binding's echo: the same pod, bound where it was assumed (or,
        # with ``elsewhere``, on another node).
        _, name, elsewhere = op
        pi, node = cache.get_pod(name), cache.pod_node(name)
        if pi is None or node is None or not cache.is_assumed(name):
            return
        if elsewhere:
            node = NODES[(NODES.index(node) + 1) % len(NODES)]
        cache.add_pod(PodInfo.of(_with(pi.pod, node_name=node), like=pi))
    elif kind == "forget":
        if cache.is_assumed(op[1]):
            cache.forget_pod(op[1])
    elif kind == "add_bound":
        _, name, node, cpu = op
        cache.add_pod(PodInfo.of(_pod(name, node, cpu)))
    elif kind == "relabel":
        # A status or label update of a bound pod: same requests.
        _, name, app = op
        pi, node = cache.get_pod(name), cache.pod_node(name)
        if pi is None or node is None or cache.is_assumed(name):
            return
        pod = pi.pod
        relabelled = msgspec.structs.replace(pod, metadata=msgspec.structs.replace(pod.metadata, labels={"app": app}))
        cache.update_pod(PodInfo.of(relabelled, like=pi))
    elif kind == "resize":
        _, name, cpu = op
        node = cache.pod_node(name)
        if node is None or cache.is_assumed(name):
            return
        cache.update_pod(PodInfo.of(_pod(name, node, cpu)))
    elif kind == "remove_pod":
        cache.remove_pod(op[1])


def _assert_same(a: Snapshot, b: Snapshot) -> None:
    n = b.size
    assert a.size == n
    assert a.columns.names == b.columns.names
    for field in ("alloc", "req", "req_nz", "alive", "unschedulable", "taint_group", "gen"):
        np.testing.assert_array_equal(getattr(a, field)[:n], getattr(b, field)[:n], err_msg=field)
    assert a.index == b.index
    assert a.taint_sets == b.taint_sets
    for x, y in zip(a.infos[:n], b.infos[:n], strict=True):
        assert (x is None) == (y is None)
        if x is not None and y is not None:
            assert (x.name, x.node, x.generation) == (y.name, y.node, y.generation)
            assert {u: p for u, p in x.pods.items()} == {u: p for u, p in y.pods.items()}
            assert x.used_ports == y.used_ports


def _assert_columns_are_pod_sums(cache: Cache) -> None:
    t = cache.table
    want_req = np.zeros_like(t.req[: t.size])
    want_nz = np.zeros_like(t.req_nz[: t.size])
    for pi, node, _assumed in cache.pods():
        row = t.index[node]
        for name, (req, nz) in pi.usage.items():
            c = t.columns.index[name]
            want_req[row, c] += req
            want_nz[row, c] += nz
    np.testing.assert_array_equal(t.req[: t.size], want_req)
    np.testing.assert_array_equal(t.req_nz[: t.size], want_nz)
    for info in t.infos:
        assert info is not None
        assert set(info.pods) == {pi.uid for pi, node, _ in cache.pods() if node == info.name}


@settings(max_examples=150, deadline=None)
@given(ops)
def test_incremental_snapshot_equals_a_full_rebuild(sequence: list[tuple[Any, ...]]) -> None:
    cache = Cache()
    incremental = cache.new_snapshot()
    compared = cache.new_snapshot()
    for op in [*sequence, ("sync",)]:
        if op[0] != "sync":
            _apply(cache, op)
            continue
        copied = cache.update_snapshot(incremental)
        # The same snapshot, made to compare every row's generation.
        compared._source = None
        assert cache.update_snapshot(compared) == copied
        _assert_same(incremental, cache.new_snapshot())
        _assert_same(compared, incremental)
        # Nothing changed since: nothing to copy.
        assert cache.update_snapshot(incremental) == 0


@settings(max_examples=150, deadline=None)
@given(ops)
def test_requested_columns_are_the_sums_of_the_counted_pods(sequence: list[tuple[Any, ...]]) -> None:
    cache = Cache()
    for op in sequence:
        if op[0] != "sync":
            _apply(cache, op)
    _assert_columns_are_pod_sums(cache)


def test_confirming_an_assumed_pod_keeps_its_amounts_and_moves_the_generation() -> None:
    cache = Cache()
    cache.add_node(make_node("n1", cpu="4", memory="4Gi", pods=10))
    snap = cache.new_snapshot()
    pod = _pod("a", cpu="1")
    assumed = PodInfo.of(_with(pod, node_name="n1"))
    cache.assume_pod(assumed, "n1")
    assert cache.update_snapshot(snap) == 1
    seen: list[tuple[str, int]] = []
    cache.subscribe(lambda pi, node, sign: seen.append((pi.pod.metadata.labels["app"], sign)))
    seen.clear()  # subscribe replays the pods already counted
    bound = msgspec.structs.replace(
        assumed.pod, metadata=msgspec.structs.replace(assumed.pod.metadata, labels={"app": "b"})
    )
    cache.add_pod(PodInfo.of(bound, like=assumed))
    assert not cache.is_assumed("a")
    assert seen == [("a", -1), ("b", 1)]  # listeners see the old pod go and the new one come
    assert cache.update_snapshot(snap) == 1
    row = snap.index["n1"]
    assert snap.req[row, snap.columns.index["cpu"]] == 1000
    info = snap.infos[row]
    assert info is not None and info.pods["a"].pod is bound


def test_a_row_created_without_a_stamp_is_treated_as_a_full_comparison_treats_it() -> None:
    # _count creates the row of a pod's node before the usage check that may
    # refuse the pod (UsageOverflow): the row exists, never stamped.
    cache = Cache()
    cache.add_node(make_node("n1", cpu="4"))
    snap, compared = cache.new_snapshot(), cache.new_snapshot()
    cache.table.row("ghost")
    compared._source = None  # compare every row's generation
    assert cache.update_snapshot(snap) == cache.update_snapshot(compared)
    _assert_same(snap, cache.new_snapshot())
    _assert_same(snap, compared)
    cache.add_pod(PodInfo.of(_pod("a", "ghost")))  # the row's first stamp
    assert cache.update_snapshot(snap) == 1
    _assert_same(snap, cache.new_snapshot())


INT64_MAX = 2**63 - 1


@pytest.mark.parametrize(
    ("already", "old", "new", "refused"),
    [
        # A confirmation with the same amounts leaves the sums alone, even
        # on a node at the limit.
        (1000, "1", "1", False),
        (INT64_MAX, "1", "1", False),
        # More than before on a node at the limit: refused.
        (INT64_MAX, "1", "2", True),
        # Less than before: fine.
        (INT64_MAX, "2", "1", False),
    ],
)
def test_replacing_a_pod_on_its_node_is_checked_by_the_difference(
    already: int, old: str, new: str, refused: bool
) -> None:
    cache = Cache()
    cache.add_node(make_node("n1", cpu="4", allocatable={"example.com/r": "1"}))
    table = cache.table
    # The node's requested amount, with the old pod's in it (only a long
    # history of pods gets there: set directly).
    table.req[table.index["n1"], table.columns.index["example.com/r"]] = already
    before = PodInfo.of(make_pod("a", uid="a", requests={"example.com/r": old}, node_name="n1"))
    after = PodInfo.of(make_pod("a", uid="a", requests={"example.com/r": new}, node_name="n1"))
    why = table.usage_overflow([[("n1", -1, before), ("n1", 1, after)]])
    assert (why is not None) == refused
