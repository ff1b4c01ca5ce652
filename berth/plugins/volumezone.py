"""VolumeZone: a pod's bound PersistentVolumes must be in the node's zone and region.

Mirrors kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/volumezone/volume_zone.go``:

- PreFilter collects, for each ``persistentVolumeClaim`` volume, the zone and
  region labels of its PV (``topology.kubernetes.io/zone|region`` and their
  ``failure-domain.beta`` forms; a value may list several zones joined by
  ``__``). A claim not bound yet is skipped when its class binds
  WaitForFirstConsumer (VolumeBinding places it) and is otherwise
  UnschedulableAndUnresolvable (``PersistentVolume had no name``); a missing
  claim, class or PV is UnschedulableAndUnresolvable with the lister's
  ``... "NAME" not found``. Nothing to check: Skip.
- Filter: a node with none of the four topology labels passes; otherwise
  each PV label must be on the node (the beta key falls back to the GA one)
  with one of the PV's values, else UnschedulableAndUnresolvable
  ``node(s) had no available volume zone``. Judged over every node at once
  on the table's label columns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import storage
from berth.framework import interface as fw
from berth.framework.handle import Handle

__all__ = ["ERR_REASON_CONFLICT", "VolumeZone"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

ERR_REASON_CONFLICT = "node(s) had no available volume zone"

LABEL_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
LABEL_BETA_REGION = "failure-domain.beta.kubernetes.io/region"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
#: volume_zone.go topologyLabels, in its order.
TOPOLOGY_LABELS = (LABEL_BETA_ZONE, LABEL_BETA_REGION, LABEL_ZONE, LABEL_REGION)


def _ga(label: str) -> str:
    """translateToGALabel."""
    return {LABEL_BETA_REGION: LABEL_REGION, LABEL_BETA_ZONE: LABEL_ZONE}.get(label, label)


@dataclasses.dataclass(frozen=True, slots=True)
class PVTopology:
    pv_name: str
    key: str
    values: frozenset[str]


STATE_KEY: fw.StateKey[list[PVTopology]] = fw.StateKey("PreFilterVolumeZone")


def pv_topologies(pv: storage.PersistentVolume) -> list[PVTopology]:
    """getPVTopologies: the PV's topology labels (a value that does not parse is ignored)."""
    out: list[PVTopology] = []
    for key in TOPOLOGY_LABELS:
        value = pv.metadata.labels.get(key)
        if value is None:
            continue
        zones = storage.label_zones(value)
        if zones is None:
            continue
        out.append(PVTopology(pv.metadata.name, key, frozenset(zones)))
    return out


class VolumeZone:
    NAME: ClassVar[str] = "VolumeZone"
    Args: ClassVar[None] = None

    def __init__(self, args: None = None, handle: Handle | None = None) -> None:
        self.handle = handle
        self._conflict = fw.Status.unresolvable(ERR_REASON_CONFLICT, plugin=self.NAME)

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        """volume_zone.go EventsToRegister (its queueing hints aside). Node
        taint updates were registered only without SchedulerQueueingHints,
        GA and on in 1.35 and 1.36 and gone from v1.37.2's code."""
        add_update = fw.ActionType.ADD | fw.ActionType.UPDATE
        return (
            fw.ClusterEvent("StorageClass", fw.ActionType.ADD),
            fw.ClusterEvent("Node", fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_LABEL),
            fw.ClusterEvent("PersistentVolumeClaim", add_update),
            fw.ClusterEvent("PersistentVolume", add_update),
        )

    def _pv_by_pod(self, pod: PodInfo) -> tuple[list[PVTopology], fw.Status]:
        """getPVbyPod."""
        out: list[PVTopology] = []
        claims = [v.persistent_volume_claim.claim_name for v in pod.pod.spec.volumes if v.persistent_volume_claim]
        if not claims:
            return out, fw.SUCCESS
        volumes = self.handle.volumes if self.handle is not None else None
        for name in claims:
            if not name:
                return out, fw.Status.unresolvable("PersistentVolumeClaim had no name", plugin=self.NAME)
            pvc = volumes.api_pvc(pod.namespace, name) if volumes is not None else None
            if pvc is None:
                return out, fw.Status.unresolvable(f'persistentvolumeclaim "{name}" not found', plugin=self.NAME)
            pv_name = pvc.spec.volume_name
            if not pv_name:
                cls = storage.pvc_class(pvc)
                if not cls:
                    return out, fw.Status.unresolvable(
                        "PersistentVolumeClaim had no pv name and storageClass name", plugin=self.NAME
                    )
                sc = volumes.storage_class(cls) if volumes is not None else None
                if sc is None:
                    return out, fw.Status.unresolvable(
                        f'storageclass.storage.k8s.io "{cls}" not found', plugin=self.NAME
                    )
                if sc.volume_binding_mode is None:
                    return out, fw.Status.unresolvable(
                        f'VolumeBindingMode not set for StorageClass "{cls}"', plugin=self.NAME
                    )
                if sc.volume_binding_mode == "WaitForFirstConsumer":
                    continue  # VolumeBinding chooses its volume
                return out, fw.Status.unresolvable("PersistentVolume had no name", plugin=self.NAME)
            pv = volumes.api_pv(pv_name) if volumes is not None else None
            if pv is None:
                return out, fw.Status.unresolvable(f'persistentvolume "{pv_name}" not found', plugin=self.NAME)
            out.extend(pv_topologies(pv))
        return out, fw.SUCCESS

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        if not pod.pod.spec.volumes:
            return fw.PreFilterResult(fw.Status.skip())
        topologies, status = self._pv_by_pod(pod)
        if not status.ok:
            return fw.PreFilterResult(status)
        if not topologies:
            return fw.PreFilterResult(fw.Status.skip())
        state.write(STATE_KEY, topologies)
        return fw.PreFilterResult()

    def filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.NodeVerdicts:
        n = len(rows)
        if not pod.pod.spec.volumes:
            return fw.NodeVerdicts.all_ok(n)
        topologies = state.get(STATE_KEY)
        if topologies is None:
            topologies, status = self._pv_by_pod(pod)
            if not status.ok:
                return fw.NodeVerdicts.fail_where(np.ones(n, dtype=bool), status)
        constrained: BoolArray = np.zeros(n, dtype=bool)
        for key in TOPOLOGY_LABELS:
            constrained |= nodes.label_column(key).present()[rows]
        ok: BoolArray = np.ones(n, dtype=bool)
        for t in topologies:
            col = nodes.label_column(t.key)
            present = col.present()[rows]
            match = col.mask_in(t.values)[rows]
            ga = nodes.label_column(_ga(t.key))
            fallback = ga.present()[rows] & ga.mask_in(t.values)[rows]
            ok &= np.where(present, match, fallback)
        return fw.NodeVerdicts.fail_where(constrained & ~ok, self._conflict)
