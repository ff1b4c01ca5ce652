"""SchedulingGates: a pod with ``spec.schedulingGates`` is not scheduled yet.

Mirrors kube-scheduler v1.34
``pkg/scheduler/framework/plugins/schedulinggates/scheduling_gates.go``:
PreEnqueue answers UnschedulableAndUnresolvable ``waiting for scheduling
gates: [a b]`` (Go's ``%v`` of a string slice) while any gate is left, so the
queue keeps the pod out of activeQ, counted as ``gated``. Gates can only be
removed (the API server forbids adding them after creation), and the update
that removes the last one is the event that re-runs PreEnqueue.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from berth.cache.infos import PodInfo
from berth.framework import interface as fw
from berth.framework.handle import Handle

__all__ = ["SchedulingGates"]


class SchedulingGates:
    NAME: ClassVar[str] = "SchedulingGates"
    Args: ClassVar[None] = None

    def __init__(self, args: None = None, handle: Handle | None = None) -> None:
        self.handle = handle

    def pre_enqueue(self, pod: PodInfo) -> fw.Status:
        gates = pod.pod.spec.scheduling_gates
        if not gates:
            return fw.SUCCESS
        names = " ".join(g.name for g in gates)
        return fw.Status.unresolvable(f"waiting for scheduling gates: [{names}]", plugin=self.NAME)

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        # schedulinggates.EventsToRegister: Pod/UpdatePodSchedulingGatesEliminated
        # (and UpdatePodToleration, which the upstream hint ignores for gated pods).
        return (fw.ClusterEvent("Pod", fw.ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),)
