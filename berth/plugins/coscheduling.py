"""Coscheduling: gangs placed all or nothing (scheduler-plugins'
``pkg/coscheduling``, PodGroup ``scheduling.x-k8s.io/v1alpha1``).

A pod joins gang NAME with the label ``scheduling.x-k8s.io/pod-group: NAME``
in the PodGroup's namespace.

- PreEnqueue: a member waits outside activeQ until its PodGroup exists and at
  least ``minMember`` members exist (pending or placed).
- Permit: a member that finds fewer than ``minMember`` members assumed or
  bound (itself included) waits, up to the group's ``scheduleTimeoutSeconds``
  (default: BerthConfiguration's ``gangScheduleTimeoutSeconds``); the member
  that completes the gang allows every waiting sibling at once.
- Unreserve / timeout / PostFilter: when one member fails, every waiting
  sibling is rejected, releasing what they had assumed, so no partial gang is
  ever bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from berth.cache.table import NodeTable, PodInfo
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework.handle import Handle

__all__ = ["Coscheduling"]


def _group_of(pod: PodInfo) -> str:
    return pod.labels.get(model.LABEL_POD_GROUP, "")


class Coscheduling:
    NAME: ClassVar[str] = "Coscheduling"
    Args: ClassVar[None] = None

    def __init__(self, args: None = None, handle: Handle | None = None) -> None:
        self.handle = handle if handle is not None else Handle()

    # ------------------------------------------------------------ lookups

    @property
    def _core(self) -> Any:
        return self.handle.extras.get("core")

    def _group(self, pod: PodInfo) -> model.PodGroup | None:
        core = self._core
        if core is None:
            return None
        group: model.PodGroup | None = core.pod_groups.get(model.pod_key(pod.namespace, _group_of(pod)))
        return group

    def _members(self, pod: PodInfo) -> list[model.Pod]:
        core = self._core
        name, ns = _group_of(pod), pod.namespace
        return [
            p
            for p in core.pods.values()
            if p.metadata.labels.get(model.LABEL_POD_GROUP) == name
            and (p.metadata.namespace or "default") == ns
            and p.status.phase not in ("Succeeded", "Failed")
            and not p.metadata.deletion_timestamp
        ]

    def _placed(self, pod: PodInfo) -> int:
        """Members assumed or bound in the cache (the pod itself included once assumed)."""
        cache = self.handle.cache
        if cache is None:
            return 0
        return sum(1 for m in self._members(pod) if cache.get_pod(m.metadata.uid) is not None)

    def _timeout(self, group: model.PodGroup) -> float:
        if group.spec.schedule_timeout_seconds:
            return float(group.spec.schedule_timeout_seconds)
        core = self._core
        return float(core.cfg.gang_schedule_timeout_seconds) if core is not None else 60.0

    # ------------------------------------------------------------ extension points

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        return (
            fw.ClusterEvent("Pod", fw.ActionType.ADD),
            fw.ClusterEvent("PodGroup", fw.ActionType.ADD | fw.ActionType.UPDATE),
            fw.ClusterEvent("AssignedPod", fw.ActionType.DELETE),
            fw.ClusterEvent("Node", fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_ALLOCATABLE),
        )

    def pre_enqueue(self, pod: PodInfo) -> fw.Status:
        name = _group_of(pod)
        if not name or self._core is None:
            return fw.SUCCESS
        group = self._group(pod)
        if group is None:
            return fw.Status(fw.Code.PENDING, (f'pod group "{pod.namespace}/{name}" not found',), self.NAME)
        have = len(self._members(pod))
        if have < group.spec.min_member:
            return fw.Status(
                fw.Code.PENDING,
                (f'pod group "{pod.namespace}/{name}" has {have} of {group.spec.min_member} required pods',),
                self.NAME,
            )
        return fw.SUCCESS

    def post_filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, failures: dict[int, fw.Status]
    ) -> fw.PostFilterResult:
        """A member that cannot be placed releases its waiting siblings."""
        if _group_of(pod):
            self._reject_siblings(pod, f"gang member {pod.key} is unschedulable")
        return fw.PostFilterResult(fw.Status.unschedulable())

    def reserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        return fw.SUCCESS

    def unreserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> None:
        if _group_of(pod):
            self._reject_siblings(pod, f"gang member {pod.key} was rejected")

    def permit(self, state: fw.CycleState, pod: PodInfo, node: str) -> tuple[fw.Status, float]:
        if not _group_of(pod):
            return fw.SUCCESS, 0.0
        group = self._group(pod)
        if group is None:
            return fw.Status.unschedulable("pod group not found", plugin=self.NAME), 0.0
        if self._placed(pod) >= group.spec.min_member:
            self._allow_siblings(pod)
            return fw.SUCCESS, 0.0
        return fw.Status(fw.Code.WAIT, plugin=self.NAME), self._timeout(group)

    # ------------------------------------------------------------ siblings

    def _siblings_waiting(self, pod: PodInfo) -> list[str]:
        waiting = self.handle.extras.get("waiting")
        if waiting is None:
            return []
        out = []
        for uid in waiting.uids():
            other = waiting.get(uid)
            if (
                other is not None
                and uid != pod.uid
                and _group_of(other) == _group_of(pod)
                and other.namespace == pod.namespace
            ):
                out.append(uid)
        return out

    def _allow_siblings(self, pod: PodInfo) -> None:
        waiting = self.handle.extras["waiting"]
        for uid in self._siblings_waiting(pod):
            waiting.allow(uid, self.NAME)

    def _reject_siblings(self, pod: PodInfo, message: str) -> None:
        waiting = self.handle.extras["waiting"]
        for uid in self._siblings_waiting(pod):
            waiting.reject(uid, self.NAME, message)
