"""GangScheduling: the Workload API's gangs placed all or nothing
(kubernetes v1.37.2 ``pkg/scheduler/framework/plugins/gangscheduling``),
enabled with the ``GenericWorkload`` gate.

A pod joins a group through its release's field (1.36+
``spec.schedulingGroup.podGroupName``: a ``scheduling.k8s.io`` PodGroup in
its namespace; 1.35 ``spec.workloadRef``: a Workload's podGroup). A group
whose policy is ``gang{minCount}`` is placed all or nothing:

- PreEnqueue: a member waits outside activeQ until its PodGroup exists
  (``waiting for pods's pod group "NAME" to appear in scheduling queue``)
  and at least ``minCount`` members exist, placed or not (``waiting for
  minCount pods from a gang to appear in scheduling queue``).
- Permit: a member that finds fewer than ``minCount`` members assumed or
  bound waits (``waiting for minCount pods from a gang to be scheduled``, up
  to 5 minutes) and activates its unscheduled siblings; the member that
  completes the quorum allows every waiting sibling.
- PlacementFeasible: upstream schedules a group's pods in one pod-group
  cycle and stops it once ``scheduled + remaining < minCount``
  (``minCount (N) cannot be satisfied: S scheduled, R remaining``). Berth
  schedules a gang pod by pod, so the same check runs when a member is found
  unschedulable (PostFilter): ``remaining`` are the members neither placed
  nor this one. When the gang cannot be satisfied its waiting members are
  rejected with upstream's message — the one a member that fit gets in
  upstream's cycle — and the PodGroup's ``PodGroupInitiallyScheduled``
  (1.36: ``PodGroupScheduled``) condition turns False, reason
  ``Unschedulable``; the quorum at Permit sets it True, reason ``Scheduled``.

A failed gang backs off as one: upstream requeues the pod group as one
queue entry whose backoff grows with its UnschedulableCount
(``AddAttemptedPodGroupIfNeeded``, backend/queue/scheduling_queue.go
v1.37.2), so a gang that cannot fit is not retried without pause. Berth's
queue holds pods, not groups, so this plugin holds the members at PreEnqueue
for the group's backoff (the queue's defaults: 1 s doubling to 10 s) and
then activates them together; the gang's quorum at Permit resets it.

The Workload API is one of :mod:`berth.gangs`' sources (``workload-api``):
the registry says which pods are in which group, so a pod that names a
Workload API group and is also claimed by another dialect (scheduler-plugins'
label, Volcano's annotation, ...) is in neither and waits here with the
registry's message naming both, and ``gangSources:`` without
``workload-api`` turns these gangs off (their pods are scheduled one by
one). The gang's definition and members are still read from the Workload
API's own store (:class:`berth.cluster.workload_api.GroupStore`), the
shapes upstream reads. CompositePodGroups (the ``CompositePodGroup`` gate,
alpha in 1.37) are not followed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import ClassVar

from berth import gangs
from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model, workload_api
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.gangs.sources import WORKLOAD_API, WORKLOAD_API_PERMIT_TIMEOUT_SECONDS, workload_gang_key

__all__ = ["PERMIT_TIMEOUT_SECONDS", "GangScheduling", "placement_feasible"]

#: ``permitTimeoutDuration`` (gangscheduling.go v1.37.2): 5 minutes.
PERMIT_TIMEOUT_SECONDS = WORKLOAD_API_PERMIT_TIMEOUT_SECONDS

MSG_GROUP_NOT_FOUND = 'waiting for pods\'s pod group "{}" to appear in scheduling queue'
MSG_QUORUM_NOT_MET = "waiting for minCount pods from a gang to appear in scheduling queue"
MSG_WAITING_AT_PERMIT = "waiting for minCount pods from a gang to be scheduled"
#: podInitialBackoffSeconds / podMaxBackoffSeconds defaults (kube-scheduler's queue).
INITIAL_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 10.0


def placement_feasible(min_count: int, scheduled: int, remaining: int) -> fw.Status:
    """``GangScheduling.PlacementFeasible`` (v1.37.2): Unschedulable once the
    gang cannot be completed, Wait while it may be, Success once it is."""
    if remaining + scheduled < min_count:
        return fw.Status.unschedulable(
            f"minCount ({min_count}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining",
            plugin=GangScheduling.NAME,
        )
    if scheduled < min_count:
        return fw.Status(
            fw.Code.WAIT,
            (f"minCount ({min_count}) is not yet satisfied: {scheduled} scheduled, {remaining} remaining",),
            GangScheduling.NAME,
        )
    return fw.SUCCESS


class GangScheduling:
    NAME: ClassVar[str] = "GangScheduling"

    def __init__(self, args: object, handle: Handle) -> None:
        self.handle = handle
        self.version = handle.features.version
        #: None when nothing feeds Workload API objects: every pod is then gang-less.
        self.groups = handle.scheduling_groups
        #: group -> (consecutive failures, when its backoff ends on handle.clock, why).
        self._backoff: dict[workload_api.GroupKey, tuple[int, float, str]] = {}

    # ------------------------------------------------------------ lookups

    def _key(self, pod: PodInfo) -> workload_api.GroupKey | None:
        if self.groups is None:
            return None
        index = self.handle.gangs
        if index is not None and not index.claims(WORKLOAD_API):
            return None  # gangSources without workload-api (or the gate off)
        return workload_api.group_of(pod.pod, self.version)

    def _members(self, key: workload_api.GroupKey) -> list[model.Pod]:
        """The group's live members as the gang registry has them: a pod
        another dialect claims too is in no gang, so it counts toward none."""
        index = self.handle.gangs
        if index is not None:
            return index.members(workload_gang_key(key))
        return self.groups.members(key) if self.groups is not None else []

    def _placed(self, members: Sequence[model.Pod]) -> list[model.Pod]:
        """Members assumed or bound (PodGroupState's ScheduledPodsCount)."""
        cache = self.handle.cache
        return [m for m in members if m.spec.node_name or cache.get_pod(m.metadata.uid) is not None]

    # ------------------------------------------------------------ extension points

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        # A pod added (pending or bound) may complete a gang's minCount; a
        # PodGroup added, or updated with a lower minCount, may let it run.
        return (
            fw.ClusterEvent("Pod", fw.ActionType.ADD),
            fw.ClusterEvent("AssignedPod", fw.ActionType.ADD),
            fw.ClusterEvent("PodGroup", fw.ActionType.ADD | fw.ActionType.UPDATE),
        )

    def pre_enqueue(self, pod: PodInfo) -> fw.Status:
        key = self._key(pod)
        if key is None or self.groups is None:
            return fw.SUCCESS
        refused = self._refused(pod)
        if refused is not None:
            return fw.Status(fw.Code.PENDING, (refused,), self.NAME)
        gang = self.groups.gang(key)
        if gang is None:
            return fw.Status.unresolvable(MSG_GROUP_NOT_FOUND.format(key.name), plugin=self.NAME)
        if gang.min_count is None:  # basic policy
            return fw.SUCCESS
        if len(self._members(key)) < gang.min_count:
            return fw.Status.unresolvable(MSG_QUORUM_NOT_MET, plugin=self.NAME)
        return self._backing_off(key, fw.Code.PENDING) or fw.SUCCESS

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        """A member that reached the queue while its gang backs off (moved by
        a cluster event, which does not ask PreEnqueue again) waits for the
        gang: upstream's gang is one queue entry and backs off whole."""
        key = self._key(pod)
        held = self._backing_off(key, fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE) if key is not None else None
        return fw.PreFilterResult(held) if held is not None else fw.PreFilterResult()

    def permit(self, state: fw.CycleState, pod: PodInfo, node: str) -> tuple[fw.Status, float]:
        key = self._key(pod)
        if key is None or self.groups is None:
            return fw.SUCCESS, 0.0
        gang = self.groups.gang(key)
        if gang is None:
            return fw.Status.error(f"failed to get podGroup {key}: not found", plugin=self.NAME), 0.0
        if gang.min_count is None:
            return fw.SUCCESS, 0.0
        members = self._members(key)
        placed = self._placed(members)
        if len(placed) < gang.min_count:
            # Siblings gated or parked waiting for this one come back now.
            placed_uids = {m.metadata.uid for m in placed}
            if self.handle.activator is not None:
                self.handle.activator.activate(
                    [m.metadata.uid for m in members if m.metadata.uid not in placed_uids and m.metadata.uid != pod.uid]
                )
            return fw.Status(fw.Code.WAIT, (MSG_WAITING_AT_PERMIT,), self.NAME), PERMIT_TIMEOUT_SECONDS
        for uid in self._waiting_siblings(key, pod):
            self.handle.waiting_pods.allow(uid, self.NAME)
        self._backoff.pop(key, None)
        self._condition(key, "True", workload_api.REASON_SCHEDULED, "")
        return fw.SUCCESS, 0.0

    def post_filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, failures: dict[int, fw.Status]
    ) -> fw.PostFilterResult:
        """No node fits this member: PlacementFeasible with it counted as
        tried; a gang that can no longer be completed releases its waiting
        members with upstream's message."""
        key = self._key(pod)
        if key is not None and self.groups is not None:
            gang = self.groups.gang(key)
            if gang is not None and gang.min_count is not None and self._backing_off(key, fw.Code.PENDING) is None:
                members = self._members(key)
                scheduled = len(self._placed(members))
                remaining = sum(1 for m in members if m.metadata.uid != pod.uid) - scheduled
                st = placement_feasible(gang.min_count, scheduled, max(remaining, 0))
                if st.code == fw.Code.UNSCHEDULABLE:
                    self._back_off(key, st.message())
                    for uid in self._waiting_siblings(key, pod):
                        self.handle.waiting_pods.reject(uid, self.NAME, st.message())
                    self._condition(key, "False", workload_api.REASON_UNSCHEDULABLE, st.message())
        return fw.PostFilterResult(fw.Status.unschedulable())

    # ------------------------------------------------------------ backoff

    def _backing_off(self, key: workload_api.GroupKey, code: fw.Code) -> fw.Status | None:
        backoff = self._backoff.get(key)
        if backoff is None or self.handle.clock() >= backoff[1]:
            return None
        why = f'pod group "{key}" is backing off ({backoff[2]}): its members are tried again when it ends'
        return fw.Status(code, (why,), self.NAME)

    def _back_off(self, key: workload_api.GroupKey, why: str) -> None:
        failures = self._backoff.get(key, (0, 0.0, ""))[0] + 1
        seconds = min(INITIAL_BACKOFF_SECONDS * 2 ** (failures - 1), MAX_BACKOFF_SECONDS)
        self._backoff[key] = (failures, self.handle.clock() + seconds, why)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a synchronous explain): PreEnqueue lets it pass when due
        loop.call_later(seconds, self._end_backoff, key)

    def _end_backoff(self, key: workload_api.GroupKey) -> None:
        backoff = self._backoff.get(key)
        if backoff is None or self.groups is None:
            return
        left = backoff[1] - self.handle.clock()
        if left > 0:  # handle.clock and the loop's clock may differ by a hair
            asyncio.get_running_loop().call_later(left, self._end_backoff, key)
            return
        members = self._members(key)
        if not members:
            del self._backoff[key]  # the gang is gone: forget it
        elif self.handle.activator is not None:
            self.handle.activator.activate([m.metadata.uid for m in members if not m.spec.node_name])

    # ------------------------------------------------------------ helpers

    def _refused(self, pod: PodInfo) -> str | None:
        """Why the gang registry puts ``pod`` in no gang (claimed by this and
        another dialect, or another dialect's key malformed), if it does."""
        index = self.handle.gangs
        if index is None:
            return None
        try:
            index.member_of(pod.pod)
        except gangs.InvalidGang as e:
            return str(e)
        return None

    def _waiting_siblings(self, key: workload_api.GroupKey, pod: PodInfo) -> list[str]:
        waiting = self.handle.waiting_pods
        out = []
        for uid in waiting.uids():
            other = waiting.get(uid)
            if other is not None and uid != pod.uid and workload_api.group_of(other.pod, self.version) == key:
                out.append(uid)
        return out

    def _condition(self, key: workload_api.GroupKey, status: str, reason: str, message: str) -> None:
        if self.groups is None or self.version < workload_api.FIRST_POD_GROUP_RELEASE:
            return  # 1.35's Workload groups have no status
        cond = workload_api.Condition(
            type=workload_api.condition_type(self.version), status=status, reason=reason, message=message
        )
        self.groups.set_condition(key, cond)
