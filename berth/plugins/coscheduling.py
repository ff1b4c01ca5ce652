"""Coscheduling: gangs placed all or nothing (scheduler-plugins'
``pkg/coscheduling``, PodGroup ``scheduling.x-k8s.io/v1alpha1``).

A pod joins gang NAME with the label ``scheduling.x-k8s.io/pod-group: NAME``
in the PodGroup's namespace.

- PreEnqueue: a member waits outside activeQ until its PodGroup exists and at
  least ``minMember`` members exist (pending or placed).
- Permit: a member that finds fewer than ``minMember`` members assumed or
  bound (itself included) waits, up to the group's ``scheduleTimeoutSeconds``
  (default: the plugin's ``scheduleTimeoutSeconds`` argument, 60 s); the member
  that completes the gang allows every waiting sibling at once.
- Unreserve / timeout / PostFilter: when one member fails, every waiting
  sibling is rejected, releasing what they had assumed, so no partial gang is
  ever bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import msgspec

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework.handle import Handle

__all__ = ["Coscheduling", "CoschedulingArgs"]

#: scheduler-plugins' CoschedulingArgs.PermitWaitingTimeSeconds default.
DEFAULT_SCHEDULE_TIMEOUT_SECONDS = 60.0


class CoschedulingArgs(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    #: How long members wait at Permit for the rest of their gang when the
    #: PodGroup sets no ``scheduleTimeoutSeconds`` (scheduler-plugins'
    #: ``permitWaitingTimeSeconds``).
    schedule_timeout_seconds: float = DEFAULT_SCHEDULE_TIMEOUT_SECONDS

    def validate(self) -> None:
        if self.schedule_timeout_seconds <= 0:
            raise ValueError("scheduleTimeoutSeconds: must be greater than 0")


def _group_of(pod: PodInfo) -> str:
    return pod.labels.get(model.LABEL_POD_GROUP, "")


class Coscheduling:
    NAME: ClassVar[str] = "Coscheduling"
    Args: ClassVar[type] = CoschedulingArgs

    def __init__(self, args: CoschedulingArgs | None, handle: Handle) -> None:
        self.args = args or CoschedulingArgs()
        self.handle = handle

    # ------------------------------------------------------------ lookups

    def _group(self, pod: PodInfo) -> model.PodGroup | None:
        return self.handle.pod_groups.get(pod.namespace, _group_of(pod))

    def _members(self, pod: PodInfo) -> list[model.Pod]:
        return self.handle.pods.in_group(pod.namespace, _group_of(pod))

    def _placed(self, pod: PodInfo) -> int:
        """Members assumed or bound in the cache (the pod itself included once assumed)."""
        cache = self.handle.cache
        return sum(1 for m in self._members(pod) if cache.get_pod(m.metadata.uid) is not None)

    def _timeout(self, group: model.PodGroup) -> float:
        if group.spec.schedule_timeout_seconds:
            return float(group.spec.schedule_timeout_seconds)
        return self.args.schedule_timeout_seconds

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
        if not name:
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
        waiting = self.handle.waiting_pods
        group, ns = _group_of(pod), pod.namespace
        out = []
        for uid in waiting.uids():
            other = waiting.get(uid)
            if other is not None and uid != pod.uid and _group_of(other) == group and other.namespace == ns:
                out.append(uid)
        return out

    def _allow_siblings(self, pod: PodInfo) -> None:
        for uid in self._siblings_waiting(pod):
            self.handle.waiting_pods.allow(uid, self.NAME)

    def _reject_siblings(self, pod: PodInfo, message: str) -> None:
        for uid in self._siblings_waiting(pod):
            self.handle.waiting_pods.reject(uid, self.NAME, message)
