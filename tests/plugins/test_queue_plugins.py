"""PrioritySort and SchedulingGates, the queue's two in-tree plugins."""

from __future__ import annotations

from typing import Any

import pytest

from berth.cache.infos import PodInfo
from berth.framework import interface as fw
from berth.plugins.priority_sort import PrioritySort
from berth.plugins.scheduling_gates import SchedulingGates
from berth.testing import make_pod


def queued(name: str, priority: int | None, timestamp: float) -> fw.QueuedPodInfo:
    return fw.QueuedPodInfo(PodInfo.of(make_pod(name, priority=priority)), timestamp)


# priority_sort_test.go TestLess
@pytest.mark.parametrize(
    ("a", "b", "a_first"),
    [
        (("p1", 100, 2.0), ("p2", 10, 1.0), True),
        (("p1", 10, 1.0), ("p2", 100, 2.0), False),
        (("p1", 100, 1.0), ("p2", 100, 2.0), True),
        (("p1", 100, 2.0), ("p2", 100, 1.0), False),
        (("p1", None, 1.0), ("p2", -1, 2.0), True),
        (("p1", None, 2.0), ("p2", 0, 1.0), False),
    ],
    ids=[
        "higher priority first",
        "lower priority later",
        "same priority: earlier first",
        "same priority: later later",
        "no priority counts as 0, above negative",
        "no priority equals 0: arrival decides",
    ],
)
def test_priority_sort_orders_by_priority_then_arrival(a: Any, b: Any, a_first: bool) -> None:
    ps = PrioritySort()
    assert (ps.sort_key(queued(*a)) < ps.sort_key(queued(*b))) is a_first


@pytest.mark.parametrize(
    ("gates", "want"),
    [
        ([], fw.SUCCESS),
        (
            ["foo"],
            fw.Status.unresolvable("waiting for scheduling gates: [foo]", plugin="SchedulingGates"),
        ),
        (
            ["foo", "bar"],
            fw.Status.unresolvable("waiting for scheduling gates: [foo bar]", plugin="SchedulingGates"),
        ),
    ],
    ids=["no gates: enqueue", "one gate", "two gates, in spec order"],
)
def test_scheduling_gates_keep_a_gated_pod_out_of_active_q(gates: list[str], want: fw.Status) -> None:
    pod = make_pod(spec={"schedulingGates": [{"name": g} for g in gates]})
    assert SchedulingGates().pre_enqueue(PodInfo.of(pod)) == want


def test_scheduling_gates_wake_on_gate_removal_only() -> None:
    events = SchedulingGates().events_to_register()
    removal = fw.ClusterEvent("Pod", fw.ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)
    assert any(e.matches(removal) for e in events)
    assert not any(e.matches(fw.ClusterEvent("Node", fw.ActionType.ADD)) for e in events)
