"""VolumeRestrictions: exclusive disks and ReadWriteOncePod claims are used by one pod at a time.

Mirrors kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/volumerestrictions/volume_restrictions.go``:

- PreFilter reads the pod's ``persistentVolumeClaim`` claims (a missing one
  is UnschedulableAndUnresolvable ``persistentvolumeclaim "NAME" not found``)
  and counts those with the ReadWriteOncePod access mode that a pod placed
  on any node (assigned or assumed) already uses. Skip when the pod has no
  in-tree disk to check and no such conflict.
- Filter, per node: an in-tree disk (gcePersistentDisk, awsElasticBlockStore,
  rbd, iscsi) already used there in a conflicting way — the same GCE PD or
  iSCSI IQN unless both are read-only, the same EBS volume, an RBD image of
  the same pool with a common monitor unless both are read-only — is
  Unschedulable ``node(s) had no available disk``; then a ReadWriteOncePod
  conflict fails every node, Unschedulable ``node(s) unavailable due to
  PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by
  another pod`` (preemption may evict the user: AddPod/RemovePod update the count).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from berth.cache.infos import NodeInfo, PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework.handle import Handle

__all__ = ["ERR_REASON_DISK_CONFLICT", "ERR_REASON_RWOP_CONFLICT", "VolumeRestrictions"]

IntArray = npt.NDArray[np.int64]

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_RWOP_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)


@dataclasses.dataclass(slots=True)
class _State:
    rwop_claims: frozenset[str]
    conflicts: int

    def count_for(self, pod: model.Pod) -> int:
        """conflictingPVCRefCountForPod."""
        return sum(
            1
            for v in pod.spec.volumes
            if v.persistent_volume_claim is not None and v.persistent_volume_claim.claim_name in self.rwop_claims
        )


STATE_KEY: fw.StateKey[_State] = fw.StateKey("PreFilterVolumeRestrictions")


def _overlap(a: Sequence[str], b: Sequence[str]) -> bool:
    return bool(set(a) & set(b))


def is_volume_conflict(volume: model.Volume, pod: model.Pod) -> bool:
    """isVolumeConflict: ``volume`` conflicts with one of ``pod``'s volumes."""
    for ev in pod.spec.volumes:
        if volume.gce_persistent_disk is not None and ev.gce_persistent_disk is not None:
            d, e = volume.gce_persistent_disk, ev.gce_persistent_disk
            if d.pd_name == e.pd_name and not (d.read_only and e.read_only):
                return True
        a, ea = volume.aws_elastic_block_store, ev.aws_elastic_block_store
        if a is not None and ea is not None and a.volume_id == ea.volume_id:
            return True
        i, ei = volume.iscsi, ev.iscsi
        if i is not None and ei is not None and i.iqn == ei.iqn and not (i.read_only and ei.read_only):
            return True
        if volume.rbd is not None and ev.rbd is not None:
            r, e2 = volume.rbd, ev.rbd
            if (
                _overlap(r.monitors, e2.monitors)
                and r.pool == e2.pool
                and r.image == e2.image
                and not (r.read_only and e2.read_only)
            ):
                return True
    return False


def _needs_check(v: model.Volume) -> bool:
    return (
        v.gce_persistent_disk is not None
        or v.aws_elastic_block_store is not None
        or v.rbd is not None
        or v.iscsi is not None
    )


def used_claims(nodes: NodeTable) -> set[str]:
    """StorageInfos().IsPVCUsedByPods: NAMESPACE/NAME of every claim a placed pod uses."""
    out: set[str] = set()
    for info in nodes.infos[: nodes.size]:
        if info is None:
            continue
        for pi in info.pods.values():
            for v in pi.pod.spec.volumes:
                if v.persistent_volume_claim is not None:
                    out.add(model.pod_key(pi.namespace, v.persistent_volume_claim.claim_name))
    return out


class VolumeRestrictions:
    NAME: ClassVar[str] = "VolumeRestrictions"
    Args: ClassVar[None] = None

    def __init__(self, args: None = None, handle: Handle | None = None) -> None:
        self.handle = handle
        self._disk = fw.Status.unschedulable(ERR_REASON_DISK_CONFLICT, plugin=self.NAME)
        self._rwop = fw.Status.unschedulable(ERR_REASON_RWOP_CONFLICT, plugin=self.NAME)

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        """volume_restrictions.go EventsToRegister (its queueing hints aside):
        of nodes only a new one. The taint and label updates were registered
        only without SchedulerQueueingHints, GA and on in 1.35 and 1.36 and
        gone from v1.37.2's code."""
        return (
            fw.ClusterEvent("AssignedPod", fw.ActionType.DELETE),
            fw.ClusterEvent("Node", fw.ActionType.ADD),
            fw.ClusterEvent("PersistentVolumeClaim", fw.ActionType.ADD),
        )

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        vols = pod.pod.spec.volumes
        if not vols:
            return fw.PreFilterResult(fw.Status.skip())
        needs_check = any(_needs_check(v) for v in vols)
        volumes = self.handle.volumes if self.handle is not None else None
        rwop: set[str] = set()
        for v in vols:
            if v.persistent_volume_claim is None:
                continue
            name = v.persistent_volume_claim.claim_name
            pvc = volumes.api_pvc(pod.namespace, name) if volumes is not None else None
            if pvc is None:
                return fw.PreFilterResult(
                    fw.Status.unresolvable(f'persistentvolumeclaim "{name}" not found', plugin=self.NAME)
                )
            if "ReadWriteOncePod" in pvc.spec.access_modes:
                rwop.add(pvc.metadata.name)
        conflicts = 0
        if rwop:
            used = used_claims(nodes)
            conflicts = sum(1 for name in rwop if model.pod_key(pod.namespace, name) in used)
        if not needs_check and conflicts == 0:
            return fw.PreFilterResult(fw.Status.skip())
        state.write(STATE_KEY, _State(frozenset(rwop), conflicts))
        return fw.PreFilterResult()

    def add_pod(self, state: fw.CycleState, pod: PodInfo, added: PodInfo, node: NodeInfo) -> None:
        s = state.get(STATE_KEY)
        if s is not None:
            s.conflicts += s.count_for(added.pod)

    def remove_pod(self, state: fw.CycleState, pod: PodInfo, removed: PodInfo, node: NodeInfo) -> None:
        s = state.get(STATE_KEY)
        if s is not None:
            s.conflicts -= s.count_for(removed.pod)

    def filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.NodeVerdicts:
        n = len(rows)
        checked = [v for v in pod.pod.spec.volumes if _needs_check(v)]
        disk = np.zeros(n, dtype=bool)
        if checked:
            for k, row in enumerate(rows.tolist()):
                info = nodes.infos[row]
                if info is None or not info.pods:
                    continue
                disk[k] = any(is_volume_conflict(v, ev.pod) for v in checked for ev in info.pods.values())
        s = state.get(STATE_KEY)
        if s is None:
            err = fw.Status.error(f'cannot read "{STATE_KEY.name}" from cycleState', plugin=self.NAME)
            return fw.NodeVerdicts.fail_where(np.ones(n, dtype=bool), err)
        if s.conflicts > 0:
            reason = np.where(disk, 0, 1).astype(np.int32)
            return fw.NodeVerdicts(np.zeros(n, dtype=bool), [self._disk, self._rwop], reason)
        return fw.NodeVerdicts.fail_where(disk, self._disk)
