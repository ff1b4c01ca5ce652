"""NodeVolumeLimits: a node's CSI drivers attach at most ``allocatable.count`` volumes each.

Mirrors kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/nodevolumelimits/csi.go``
(``CSILimits``):

- PreFilter: Skip unless the pod has a ``persistentVolumeClaim`` or
  ``ephemeral`` volume or an inline in-tree disk migrated to CSI.
- Filter, per node: the pod's attachable volumes are found by driver and
  volume handle — a bound claim through its PV's ``csi`` source (or its
  migrated in-tree source), an unbound one through its class's provisioner
  (one handle per claim). With the VolumeLimitScaling gate (beta and on
  since 1.37, alpha and off before), a driver the node's CSINode does not
  list fails the node, Unschedulable ``DRIVER CSI driver is not installed on
  the node``, when the driver has a CSIDriver object that sets
  ``preventPodSchedulingIfMissing`` (1.35: when it has a CSIDriver object at
  all). Then the volumes pods on the node already use are set aside. Where
  the node's CSINode gives a driver an ``allocatable.count`` and the volumes
  already attached plus the new ones pass it: Unschedulable ``node(s) exceed
  max volume count``. A claim the pod needs that does not exist is
  UnschedulableAndUnresolvable (``looking up PVC NS/NAME: persistentvolumeclaim
  "NAME" not found``). No CSINode or no limits: no count to pass.

CSI migration of in-tree volumes: GCE PD (``pd.csi.storage.gke.io``) and AWS
EBS (``ebs.csi.aws.com``), inline or as PVs or as a class's in-tree
provisioner, count against their CSI driver on nodes that have a CSINode (as
``isCSIMigrationOn``, for which these plugins' migration is GA). Handles are
normalised as csi-translation-lib does for uniqueness only. Not ported: Azure
Disk, Cinder and Portworx sources (Berth's model has none),
VolumeAttachments (volumes attached to the node by no pod Berth knows), the
InPlacePodVerticalScalingSchedulerPreemption skip for resize-deferred pods
(alpha, off in every release Berth follows) and SignPod (no pod signatures
in Berth's framework).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from berth import features
from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model, storage
from berth.framework import interface as fw
from berth.framework.handle import Handle, VolumeLister

__all__ = ["ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED", "NodeVolumeLimits"]

IntArray = npt.NDArray[np.int64]

ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"

#: csi-translation-lib: in-tree plugin name -> CSI driver name (the migrations this model can express).
GCE_PD_PLUGIN = "kubernetes.io/gce-pd"
AWS_EBS_PLUGIN = "kubernetes.io/aws-ebs"
MIGRATED_DRIVERS = {GCE_PD_PLUGIN: "pd.csi.storage.gke.io", AWS_EBS_PLUGIN: "ebs.csi.aws.com"}


class _NotFound(Exception):
    """A claim the new pod needs does not exist (UnschedulableAndUnresolvable)."""


def _migration_on(csi_node: storage.CSINode | None, plugin: str) -> bool:
    """isCSIMigrationOn: GA for GCE PD and AWS EBS: on wherever the node has a CSINode."""
    return csi_node is not None and plugin in MIGRATED_DRIVERS


def _ebs_handle(volume_id: str) -> str:
    """KubernetesVolumeIDToEBSVolumeID: ``aws://zone/vol-x`` -> ``vol-x``."""
    return volume_id.rsplit("/", 1)[-1] if volume_id.startswith("aws://") else volume_id


def _gce_handle(pd_name: str) -> str:
    return f"projects/UNSPECIFIED/zones/UNSPECIFIED/disks/{pd_name}"


def _inline(vol: model.Volume, csi_node: storage.CSINode | None) -> tuple[str, str] | None:
    """checkAttachableInlineVolume: (driver, handle) of a migrated inline in-tree disk."""
    if vol.gce_persistent_disk is not None and _migration_on(csi_node, GCE_PD_PLUGIN):
        return MIGRATED_DRIVERS[GCE_PD_PLUGIN], _gce_handle(vol.gce_persistent_disk.pd_name)
    if vol.aws_elastic_block_store is not None and _migration_on(csi_node, AWS_EBS_PLUGIN):
        return MIGRATED_DRIVERS[AWS_EBS_PLUGIN], _ebs_handle(vol.aws_elastic_block_store.volume_id)
    return None


def _inline_migratable(vol: model.Volume) -> bool:
    return vol.gce_persistent_disk is not None or vol.aws_elastic_block_store is not None


class NodeVolumeLimits:
    NAME: ClassVar[str] = "NodeVolumeLimits"
    #: Filter judges node by node: run_filter hands it only the rows it still needs.
    FILTER_PER_NODE: ClassVar[bool] = True
    Args: ClassVar[None] = None

    def __init__(self, args: None = None, handle: Handle | None = None) -> None:
        self.handle = handle
        feats = handle.features if handle is not None else features.Features.newest()
        self._volume_limit_scaling = feats.volume_limit_scaling
        # csi.go v1.36.3 checkCSIDriverOnNode reads the CSIDriver's opt-in
        # (preventPodSchedulingIfMissing, new in 1.36); v1.35.4's requires
        # every driver that has a CSIDriver object.
        self._driver_opt_in = feats.version >= features.KubeVersion(1, 36)
        #: randomVolumeIDPrefix: handles of claims not provisioned yet.
        self.random_prefix = uuid.uuid4().hex
        self._exceeded = fw.Status.unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, plugin=self.NAME)

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        """csi.go EventsToRegister (VolumeAttachment aside: not watched). A
        driver installed on a node updates its CSINode."""
        return (
            fw.ClusterEvent("CSINode", fw.ActionType.ADD | fw.ActionType.UPDATE),
            fw.ClusterEvent("AssignedPod", fw.ActionType.DELETE),
            fw.ClusterEvent("PersistentVolumeClaim", fw.ActionType.ADD),
        )

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        for v in pod.pod.spec.volumes:
            if v.persistent_volume_claim is not None or v.ephemeral is not None or _inline_migratable(v):
                return fw.PreFilterResult()
        return fw.PreFilterResult(fw.Status.skip())

    # ------------------------------------------------------------ volumes

    def _driver_of_class(
        self, csi_node: storage.CSINode | None, pvc: storage.PersistentVolumeClaim, volumes: VolumeLister
    ) -> tuple[str, str]:
        """getCSIDriverInfoFromSC."""
        cls = storage.pvc_class(pvc)
        if not cls:
            return "", ""
        sc = volumes.storage_class(cls)
        if sc is None:
            return "", ""
        handle = f"{self.random_prefix}-{pvc.metadata.namespace}/{pvc.metadata.name}"
        if sc.provisioner in MIGRATED_DRIVERS:
            if not _migration_on(csi_node, sc.provisioner):
                return "", ""
            return MIGRATED_DRIVERS[sc.provisioner], handle
        return sc.provisioner, handle

    def _driver_of_claim(
        self, csi_node: storage.CSINode | None, pvc: storage.PersistentVolumeClaim, volumes: VolumeLister
    ) -> tuple[str, str]:
        """getCSIDriverInfo: (driver, volume handle); ("", "") when not attachable through CSI."""
        if not pvc.spec.volume_name:
            return self._driver_of_class(csi_node, pvc, volumes)
        pv = volumes.api_pv(pvc.spec.volume_name)
        if pv is None:
            return self._driver_of_class(csi_node, pvc, volumes)
        if pv.spec.csi is not None:
            return pv.spec.csi.driver, pv.spec.csi.volume_handle
        if pv.spec.gce_persistent_disk is not None and _migration_on(csi_node, GCE_PD_PLUGIN):
            return MIGRATED_DRIVERS[GCE_PD_PLUGIN], _gce_handle(pv.spec.gce_persistent_disk.pd_name)
        if pv.spec.aws_elastic_block_store is not None and _migration_on(csi_node, AWS_EBS_PLUGIN):
            return MIGRATED_DRIVERS[AWS_EBS_PLUGIN], _ebs_handle(pv.spec.aws_elastic_block_store.volume_id)
        return "", ""

    def _attachable(
        self,
        pod: model.Pod,
        csi_node: storage.CSINode | None,
        new_pod: bool,
        volumes: VolumeLister,
        out: dict[str, str],
    ) -> None:
        """filterAttachableVolumes: unique volume name -> driver, into ``out``."""
        ns = pod.metadata.namespace or "default"
        for vol in pod.spec.volumes:
            if vol.persistent_volume_claim is not None:
                name, ephemeral = vol.persistent_volume_claim.claim_name, False
            elif vol.ephemeral is not None:
                name, ephemeral = storage.ephemeral_claim_name(pod, vol), True
            else:
                inline = _inline(vol, csi_node)
                if inline is not None:
                    out[f"{inline[0]}/{inline[1]}"] = inline[0]
                continue
            if not name:
                raise ValueError("PersistentVolumeClaim had no name")
            pvc = volumes.api_pvc(ns, name)
            if pvc is None:
                if new_pod:
                    raise _NotFound(f'looking up PVC {ns}/{name}: persistentvolumeclaim "{name}" not found')
                continue  # an existing pod's claim may be gone already
            if ephemeral:
                err = storage.volume_is_for_pod(pod, pvc)
                if err is not None:
                    raise ValueError(err)
            driver, handle = self._driver_of_claim(csi_node, pvc, volumes)
            if driver and handle:
                out[f"{driver}/{handle}"] = driver

    def filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.NodeVerdicts:
        n = len(rows)
        if not pod.pod.spec.volumes:
            return fw.NodeVerdicts.all_ok(n)
        volumes = self.handle.volumes if self.handle is not None else None
        if volumes is None:
            return fw.NodeVerdicts.all_ok(n)

        def judge(row: int) -> fw.Status | None:
            info = nodes.infos[row]
            if info is None or info.node is None:
                return None
            return self._filter_node(pod, info.name, info.pods.values(), volumes)

        return fw.NodeVerdicts.per_node(judge(row) for row in rows.tolist())

    def _filter_node(
        self, pod: PodInfo, node: str, placed: Iterable[PodInfo], volumes: VolumeLister
    ) -> fw.Status | None:
        csi_node = volumes.csi_node(node)
        new: dict[str, str] = {}
        try:
            self._attachable(pod.pod, csi_node, True, volumes, new)
        except _NotFound as e:
            return fw.Status.unresolvable(str(e), plugin=self.NAME)
        except ValueError as e:
            return fw.Status.error(str(e), plugin=self.NAME)
        if not new:
            return None
        if self._volume_limit_scaling:
            # Go ranges over a map here; Berth names the first missing driver in the pod's order.
            for driver in dict.fromkeys(new.values()):
                if not self._driver_on_node(driver, csi_node, volumes):
                    return fw.Status.unschedulable(
                        f"{driver} CSI driver is not installed on the node", plugin=self.NAME
                    )
        limits: dict[str, int] = {}
        if csi_node is not None:
            for d in csi_node.spec.drivers:
                if d.allocatable is not None and d.allocatable.count is not None:
                    limits[d.name] = d.allocatable.count
        if not limits:
            return None
        attached: dict[str, str] = {}
        for existing in placed:
            try:
                self._attachable(existing.pod, csi_node, False, volumes, attached)
            except (ValueError, _NotFound) as e:
                return fw.Status.error(str(e), plugin=self.NAME)
        attached_count: dict[str, int] = {}
        for unique, driver in attached.items():
            new.pop(unique, None)
            attached_count[driver] = attached_count.get(driver, 0) + 1
        new_count: dict[str, int] = {}
        for driver in new.values():
            new_count[driver] = new_count.get(driver, 0) + 1
        for driver, count in new_count.items():
            limit = limits.get(driver)
            if limit is not None and attached_count.get(driver, 0) + count > limit:
                return self._exceeded
        return None

    def _driver_on_node(self, driver: str, csi_node: storage.CSINode | None, volumes: VolumeLister) -> bool:
        """checkCSIDriverOnNode: a driver without a CSIDriver object may not be
        a CSI driver at all, and one that does not opt in is not required."""
        obj = volumes.csi_driver(driver)
        if obj is None:
            return True
        if self._driver_opt_in and not obj.spec.prevent_pod_scheduling_if_missing:
            return True
        return csi_node is not None and any(d.name == driver for d in csi_node.spec.drivers)
