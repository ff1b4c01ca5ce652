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
- Group backoff (scheduler-plugins' ``podGroupBackoffSeconds``): a gang that
  failed — a member unschedulable, or the wait at Permit timed out — is held
  at PreEnqueue for that long, then its members are activated together.
  Without it a gang that cannot fit retries without pause: rejecting the
  waiting siblings frees their room, which requeues every member
  (handleBindingCycleError's AssignedPod/Delete), and SchedulerPopFromBackoffQ
  pops them at once. scheduler-plugins leaves the backoff off by default
  (and parks such a gang at PreFilter); Berth turns it on, 10 s, and wakes
  the gang when it ends rather than waiting for a cluster event.
"""

from __future__ import annotations

import asyncio
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
#: How long a gang that failed waits before its members are tried again
#: (scheduler-plugins' ``podGroupBackoffSeconds``, off there by default).
DEFAULT_POD_GROUP_BACKOFF_SECONDS = 10.0


class CoschedulingArgs(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    #: How long members wait at Permit for the rest of their gang when the
    #: PodGroup sets no ``scheduleTimeoutSeconds`` (scheduler-plugins'
    #: ``permitWaitingTimeSeconds``).
    schedule_timeout_seconds: float = DEFAULT_SCHEDULE_TIMEOUT_SECONDS
    #: How long a gang that failed is held before its members are tried
    #: again; 0 turns the backoff off (scheduler-plugins' default).
    pod_group_backoff_seconds: float = DEFAULT_POD_GROUP_BACKOFF_SECONDS

    def validate(self) -> None:
        if self.schedule_timeout_seconds <= 0:
            raise ValueError("scheduleTimeoutSeconds: must be greater than 0")
        if not self.pod_group_backoff_seconds >= 0:
            raise ValueError("podGroupBackoffSeconds: must not be negative")


def _group_of(pod: PodInfo) -> str:
    return pod.labels.get(model.LABEL_POD_GROUP, "")


class Coscheduling:
    NAME: ClassVar[str] = "Coscheduling"
    Args: ClassVar[type] = CoschedulingArgs

    def __init__(self, args: CoschedulingArgs | None, handle: Handle) -> None:
        self.args = args or CoschedulingArgs()
        self.handle = handle
        #: (namespace, group) -> when its backoff ends (handle.clock).
        self._backoff: dict[tuple[str, str], float] = {}

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
        until = self._backoff.get((pod.namespace, name))
        if until is not None:
            if self.handle.clock() < until:
                return fw.Status(
                    fw.Code.PENDING,
                    (
                        f'pod group "{pod.namespace}/{name}" failed recently: its members are tried again '
                        f"when its {self.args.pod_group_backoff_seconds:g}s backoff ends",
                    ),
                    self.NAME,
                )
            del self._backoff[(pod.namespace, name)]
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
        """A member that cannot be placed releases its waiting siblings, and
        the gang backs off."""
        if _group_of(pod):
            self._back_off(pod)
            self._reject_siblings(pod, f"gang member {pod.key} is unschedulable")
        return fw.PostFilterResult(fw.Status.unschedulable())

    def reserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        return fw.SUCCESS

    def unreserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> None:
        if _group_of(pod):
            self._back_off(pod)
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

    # ------------------------------------------------------------ backoff

    def _back_off(self, pod: PodInfo) -> None:
        """Hold the gang for the backoff, then activate its members together
        (scheduler-plugins backs off only a gang with all its pods: a gang
        still short of members waits at PreEnqueue anyway)."""
        seconds = self.args.pod_group_backoff_seconds
        group = self._group(pod)
        if seconds <= 0 or group is None or len(self._members(pod)) < group.spec.min_member:
            return
        key = (pod.namespace, _group_of(pod))
        if key in self._backoff:
            return  # one failure of the gang: the siblings' rejections follow it
        self._backoff[key] = self.handle.clock() + seconds
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a synchronous explain): PreEnqueue lifts it when due
        loop.call_later(seconds, self._end_backoff, key, pod)

    def _end_backoff(self, key: tuple[str, str], pod: PodInfo) -> None:
        until = self._backoff.get(key)
        if until is None:
            return  # lifted already, by PreEnqueue
        left = until - self.handle.clock()
        if left > 0:  # handle.clock and the loop's clock may differ by a hair
            asyncio.get_running_loop().call_later(left, self._end_backoff, key, pod)
            return
        del self._backoff[key]
        if self.handle.activator is not None:
            self.handle.activator.activate([m.metadata.uid for m in self._members(pod) if not m.spec.node_name])

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
