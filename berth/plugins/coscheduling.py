"""Coscheduling: gangs placed all or nothing (scheduler-plugins'
``pkg/coscheduling``), in every dialect :mod:`berth.gangs` reads.

A pod joins a gang in the dialect its framework writes (scheduler-plugins'
label ``scheduling.x-k8s.io/pod-group``, Volcano's and KAI's PodGroups,
Kueue's and YuniKorn's annotations); :class:`berth.gangs.GangIndex` says
which, and what the gang asks (:class:`berth.gangs.Gang`). The Workload
API's gangs (source ``workload-api``) are GangScheduling's, kube-scheduler's
own plugin: Coscheduling passes them by, except to hold a pod another
dialect claims too.

- PreEnqueue: a member waits outside activeQ until its gang is defined (its
  PodGroup exists), at least ``minMember`` members exist (pending or placed),
  and as many of each task as ``minTaskMember`` asks; a gang with
  ``minResources`` also waits, until a member is placed, for that much to be
  free in the cluster (Volcano's enqueue, scheduler-plugins'
  CheckClusterResource). A pod whose gang keys are malformed, or that two
  dialects claim, waits with a message naming the key and why.
- Permit: a member that finds fewer than ``minMember`` members (or fewer of
  a task than its minimum) assumed or bound, itself included, waits, up to
  the gang's timeout (default: the plugin's ``scheduleTimeoutSeconds``
  argument, 60 s); the member that completes the gang allows every waiting
  sibling at once.
- A soft gang (YuniKorn's ``gangSchedulingStyle=Soft``) that is still
  incomplete its timeout after its first member arrived stops being a gang:
  its members are scheduled one by one, as YuniKorn runs such an application
  once its placeholders time out. A hard one stays a gang.
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
import numpy as np

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model, resources
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.gangs import Gang, GangIndex, GangKey, InvalidGang
from berth.gangs.sources import WORKLOAD_API

__all__ = ["Coscheduling", "CoschedulingArgs"]

#: scheduler-plugins' CoschedulingArgs.PermitWaitingTimeSeconds default.
DEFAULT_SCHEDULE_TIMEOUT_SECONDS = 60.0
#: How long a gang that failed waits before its members are tried again
#: (scheduler-plugins' ``podGroupBackoffSeconds``, off there by default).
DEFAULT_POD_GROUP_BACKOFF_SECONDS = 10.0
#: Soft gangs' clocks kept before those of gangs with no member left are dropped.
_SOFT_CLOCKS_KEPT = 1024


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


def _label(key: GangKey) -> str:
    """How messages name a gang: ``pod group "ns/name"`` (scheduler-plugins',
    as before), ``volcano pod group "ns/name"`` for the other dialects."""
    prefix = "" if key.source == "scheduler-plugins" else f"{key.source} "
    return f'{prefix}pod group "{key}"'


class Coscheduling:
    NAME: ClassVar[str] = "Coscheduling"
    Args: ClassVar[type] = CoschedulingArgs

    def __init__(self, args: CoschedulingArgs | None, handle: Handle) -> None:
        self.args = args or CoschedulingArgs()
        self.handle = handle
        self.gangs: GangIndex = handle.gangs if handle.gangs is not None else GangIndex()
        #: gang -> when its backoff ends (handle.clock).
        self._backoff: dict[GangKey, float] = {}
        #: soft gang -> when its first member was seen at PreEnqueue (handle.clock).
        self._soft_since: dict[GangKey, float] = {}

    # ------------------------------------------------------------ lookups

    def _key(self, pod: PodInfo) -> GangKey | None:
        """The pod's gang; None for none, or for keys Berth cannot use
        (PreEnqueue holds such a pod: it never gets further)."""
        try:
            m = self.gangs.member_of(pod.pod)
        except InvalidGang:
            return None
        return m.key if m is not None and m.key.source != WORKLOAD_API else None

    def _gang(self, key: GangKey) -> Gang | None:
        try:
            return self.gangs.gang(key)
        except InvalidGang:
            return None

    def _members(self, key: GangKey) -> list[model.Pod]:
        return self.gangs.members(key)

    def _placed(self, key: GangKey) -> list[model.Pod]:
        """Members assumed or bound in the cache (the pod itself included once assumed)."""
        cache = self.handle.cache
        return [m for m in self._members(key) if cache.get_pod(m.metadata.uid) is not None]

    def _timeout(self, gang: Gang) -> float:
        return gang.timeout_seconds if gang.timeout_seconds else self.args.schedule_timeout_seconds

    def _short(self, gang: Gang, pods: Sequence[model.Pod]) -> str:
        """What ``pods`` lack of the gang's minimums: "" when nothing, else
        ``2 of 3 required pods`` or ``0 of 1 required pods of task "ps"``."""
        if len(pods) < gang.min_member:
            return f"{len(pods)} of {gang.min_member} required pods"
        if gang.min_task_member:
            counts: dict[str, int] = {}
            for p in pods:
                task = self.gangs.task_of(p)
                counts[task] = counts.get(task, 0) + 1
            for task, need in sorted(gang.min_task_member.items()):
                if counts.get(task, 0) < need:
                    return f'{counts.get(task, 0)} of {need} required pods of task "{task}"'
        return ""

    def _free(self) -> dict[str, int]:
        """What the alive nodes have left (allocatable less requested), summed per resource."""
        t = self.handle.cache.table
        alive = t.alive[: t.size]
        if not alive.any():
            return {}
        left = np.clip(t.alloc[: t.size][alive] - t.req[: t.size][alive], 0, None).sum(axis=0, dtype=object)
        return {t.columns.names[c]: int(v) for c, v in enumerate(left)}

    def _soft_expired(self, gang: Gang) -> bool:
        """A soft gang past its timeout since its first member arrived is no gang any more."""
        if gang.hard:
            return False
        since = self._soft_since.get(gang.key)
        return since is not None and self.handle.clock() - since >= self._timeout(gang)

    def _start_soft_clock(self, gang: Gang) -> None:
        if gang.hard or gang.key in self._soft_since:
            return
        if len(self._soft_since) >= _SOFT_CLOCKS_KEPT:  # bounded by the live gangs, not by those ever seen
            for gone in [k for k in self._soft_since if not self._members(k)]:
                del self._soft_since[gone]
        self._soft_since[gang.key] = self.handle.clock()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a synchronous explain): PreEnqueue sees the time pass
        loop.call_later(self._timeout(gang), self._activate, gang.key)

    # ------------------------------------------------------------ extension points

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        return (
            fw.ClusterEvent("Pod", fw.ActionType.ADD),
            fw.ClusterEvent("PodGroup", fw.ActionType.ADD | fw.ActionType.UPDATE),
            fw.ClusterEvent("AssignedPod", fw.ActionType.DELETE),
            fw.ClusterEvent("Node", fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_ALLOCATABLE),
        )

    def pre_enqueue(self, pod: PodInfo) -> fw.Status:
        try:
            m = self.gangs.member_of(pod.pod)
        except InvalidGang as e:
            return fw.Status(fw.Code.PENDING, (f"gang: {e}",), self.NAME)
        if m is None or m.key.source == WORKLOAD_API:  # GangScheduling's
            return fw.SUCCESS
        key = m.key
        until = self._backoff.get(key)
        if until is not None:
            if self.handle.clock() < until:
                return fw.Status(
                    fw.Code.PENDING,
                    (
                        f"{_label(key)} failed recently: its members are tried again "
                        f"when its {self.args.pod_group_backoff_seconds:g}s backoff ends",
                    ),
                    self.NAME,
                )
            del self._backoff[key]
        try:
            gang = self.gangs.gang(key)
        except InvalidGang as e:
            return fw.Status(fw.Code.PENDING, (f"{_label(key)}: {e}",), self.NAME)
        if gang is None:
            missing = self.gangs.missing(key)
            text = f"{_label(key)} not found" if missing == "its PodGroup is not found" else f"{_label(key)}: {missing}"
            return fw.Status(fw.Code.PENDING, (text,), self.NAME)
        self._start_soft_clock(gang)
        if self._soft_expired(gang):
            return fw.SUCCESS
        short = self._short(gang, self._members(key))
        if short:
            return fw.Status(fw.Code.PENDING, (f"{_label(key)} has {short}",), self.NAME)
        if gang.min_resources and not self._placed(key):
            free = self._free()
            lacking = [
                f"{name} {resources.format_quantity(name, free.get(name, 0))} free of "
                f"{resources.format_quantity(name, need)}"
                for name, need in sorted(gang.min_resources.items())
                if need > free.get(name, 0)
            ]
            if lacking:
                return fw.Status(
                    fw.Code.PENDING,
                    (f"{_label(key)} waits for its minResources to be free: {', '.join(lacking)}",),
                    self.NAME,
                )
        return fw.SUCCESS

    def post_filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, failures: dict[int, fw.Status]
    ) -> fw.PostFilterResult:
        """A member that cannot be placed releases its waiting siblings, and
        the gang backs off."""
        key = self._key(pod)
        if key is not None and not self._no_longer_a_gang(key):
            self._back_off(key, pod)
            self._reject_siblings(key, pod, f"gang member {pod.key} is unschedulable")
        return fw.PostFilterResult(fw.Status.unschedulable())

    def reserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        return fw.SUCCESS

    def unreserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> None:
        key = self._key(pod)
        if key is not None and not self._no_longer_a_gang(key):
            self._back_off(key, pod)
            self._reject_siblings(key, pod, f"gang member {pod.key} was rejected")

    def permit(self, state: fw.CycleState, pod: PodInfo, node: str) -> tuple[fw.Status, float]:
        key = self._key(pod)
        if key is None:
            return fw.SUCCESS, 0.0
        gang = self._gang(key)
        if gang is None:
            return fw.Status.unschedulable("pod group not found", plugin=self.NAME), 0.0
        if self._soft_expired(gang) or not self._short(gang, self._placed(key)):
            self._allow_siblings(key, pod)
            return fw.SUCCESS, 0.0
        return fw.Status(fw.Code.WAIT, plugin=self.NAME), self._timeout(gang)

    def _no_longer_a_gang(self, key: GangKey) -> bool:
        gang = self._gang(key)
        return gang is not None and self._soft_expired(gang)

    # ------------------------------------------------------------ backoff

    def _back_off(self, key: GangKey, pod: PodInfo) -> None:
        """Hold the gang for the backoff, then activate its members together
        (scheduler-plugins backs off only a gang with all its pods: a gang
        still short of members waits at PreEnqueue anyway)."""
        seconds = self.args.pod_group_backoff_seconds
        gang = self._gang(key)
        if seconds <= 0 or gang is None or len(self._members(key)) < gang.min_member:
            return
        if key in self._backoff:
            return  # one failure of the gang: the siblings' rejections follow it
        self._backoff[key] = self.handle.clock() + seconds
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a synchronous explain): PreEnqueue lifts it when due
        loop.call_later(seconds, self._end_backoff, key)

    def _end_backoff(self, key: GangKey) -> None:
        until = self._backoff.get(key)
        if until is None:
            return  # lifted already, by PreEnqueue
        left = until - self.handle.clock()
        if left > 0:  # handle.clock and the loop's clock may differ by a hair
            asyncio.get_running_loop().call_later(left, self._end_backoff, key)
            return
        del self._backoff[key]
        self._activate(key)

    def _activate(self, key: GangKey) -> None:
        if self.handle.activator is not None:
            self.handle.activator.activate([m.metadata.uid for m in self._members(key) if not m.spec.node_name])

    # ------------------------------------------------------------ siblings

    def _siblings_waiting(self, key: GangKey, pod: PodInfo) -> list[str]:
        waiting = self.handle.waiting_pods
        out = []
        for uid in waiting.uids():
            other = waiting.get(uid)
            if other is not None and uid != pod.uid and self._key(other) == key:
                out.append(uid)
        return out

    def _allow_siblings(self, key: GangKey, pod: PodInfo) -> None:
        for uid in self._siblings_waiting(key, pod):
            self.handle.waiting_pods.allow(uid, self.NAME)

    def _reject_siblings(self, key: GangKey, pod: PodInfo, message: str) -> None:
        for uid in self._siblings_waiting(key, pod):
            self.handle.waiting_pods.reject(uid, self.NAME, message)
