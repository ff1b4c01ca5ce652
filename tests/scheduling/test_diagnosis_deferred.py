"""A Diagnosis names the nodes Filter rejected only when read: the same
``node_to_status``, in the same order, and the same count before and after."""

from __future__ import annotations

from berth.cache.cache import Cache
from berth.cache.infos import PodInfo
from berth.framework import interface as fw
from berth.scheduling import algorithm
from berth.testing import make_node, make_pod

TOO_MANY = fw.Status(fw.Code.UNSCHEDULABLE, ("Too many pods",), "NodeResourcesFit")
TAINT = fw.Status(fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("untolerated taint",), "TaintToleration")


def test_deferred_failures_are_named_in_order_when_read_even_after_the_table_moved_on() -> None:
    cache = Cache()
    for i in range(5):
        cache.add_node(make_node(f"n{i}", cpu="1"))
    snap = cache.new_snapshot()
    d = algorithm.Diagnosis(num_all_nodes=5, node_to_status={"n4": TAINT})
    d.defer_failures(snap, [3, 0, 2], [1, 0, 1], [TOO_MANY, TAINT])
    assert d.num_examined_failures == 4
    # The snapshot moves on (a node gone, another added) before anyone reads.
    cache.remove_node("n0")
    cache.add_node(make_node("n5", cpu="1"))
    cache.update_snapshot(snap)
    assert list(d.node_to_status.items()) == [("n4", TAINT), ("n3", TAINT), ("n0", TOO_MANY), ("n2", TAINT)]
    assert d.num_examined_failures == 4


def test_fit_error_message_reads_the_deferred_failures() -> None:
    cache = Cache()
    for i in range(3):
        cache.add_node(make_node(f"n{i}", cpu="1"))
    snap = cache.new_snapshot()
    d = algorithm.Diagnosis(num_all_nodes=3)
    d.defer_failures(snap, [0, 1, 2], [0, 0, 1], [TOO_MANY, TAINT])
    assert (
        str(algorithm.FitError(PodInfo.of(make_pod("p")), d))
        == "0/3 nodes are available: 1 untolerated taint, 2 Too many pods."
    )
