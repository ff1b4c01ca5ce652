"""What a plugin may reach beyond its arguments (kube-scheduler's
``framework.Handle``, ``staging/src/k8s.io/kube-scheduler/framework/interface.go``).

Every service is typed: a plugin author (and mypy) can follow a pod from a
plugin into the binder. The scheduling layer implements these protocols and
builds one :class:`Handle` per profile (``berth.app.build``);
``berth.testing`` builds them for plugin tests.

=====================  =================================================
kube-scheduler          Berth
=====================  =================================================
SnapshotSharedLister    ``cache`` (the live node table, the pod index) and
                        ``pods`` (every pod Berth knows, placed or not)
SharedInformerFactory   ``namespaces`` (the namespace lister: labels for
                        pod affinity's ``namespaceSelector``) and
                        ``workloads`` (Services, ReplicationControllers,
                        ReplicaSets, StatefulSets: PodTopologySpread's
                        default constraints)
PodNominator            ``nominator``
Iterate/Get/Reject      ``waiting_pods``
WaitingPod
GetPodInPreBind         ``pods_in_pre_bind`` (CancelPod: a preemptor stops
                        a victim's PreBind, v1.36)
ClientSet               ``client`` (bind, evict, nominate through the pod's
                        source: the API server or the embedded cluster)
EventRecorder           ``client.record_event`` (Eventf: a pod's event,
                        through its source) and ``recorder`` (decisions:
                        the gRPC stream)
Storage listers         ``volumes`` (PVs, PVCs, StorageClasses, CSINodes,
                        CSIDrivers, CSIStorageCapacities; VolumeBinding's
                        assume caches; PreBind's PV/PVC writes)
SharedDRAManager        ``dra`` (DeviceClasses, ResourceSlices, ResourceClaims,
                        templates; in-flight allocations, the assume cache)
PluginsRunner           ``framework`` (this profile's plugins, for
                        preemption's dry runs)
=====================  =================================================
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from fractions import Fraction
from typing import TYPE_CHECKING, Protocol

from berth import features
from berth.cache.cache import Cache
from berth.cache.infos import PodInfo
from berth.cluster import dra, model, sources, storage, workload_api
from berth.framework.decision import Decision
from berth.gangs import GangIndex
from berth.gangs.reservations import ReservationPolicy
from berth.gangs.topology import TopologySpec
from berth.metrics import Metrics

if TYPE_CHECKING:
    from berth.framework.interface import Status
    from berth.framework.runtime import Framework

__all__ = [
    "ClusterClient",
    "DecisionRecorder",
    "DraLister",
    "Handle",
    "NamespaceLister",
    "Nominator",
    "PodActivator",
    "PodDisruptionBudgetLister",
    "PodGroupLister",
    "PodLister",
    "PodsInPreBind",
    "QueuePolicy",
    "VolumeLister",
    "WaitingPods",
    "WorkloadLister",
]


class PodLister(Protocol):
    """Every pod Berth knows (pending, assumed or bound), the latest object of each."""

    def get(self, uid: str) -> model.Pod | None: ...

    def by_key(self, key: str) -> model.Pod | None:
        """By ``NAMESPACE/NAME``."""

    def in_group(self, namespace: str, group: str) -> list[model.Pod]:
        """Members of PodGroup ``namespace/group`` (label ``scheduling.x-k8s.io/pod-group``)
        that are neither terminal nor terminating."""

    def matching(self, namespace: str, selector: model.LabelSelector | None) -> list[model.Pod]: ...


class NamespaceLister(Protocol):
    """The namespaces Berth knows (``listersv1.NamespaceLister``)."""

    def get(self, name: str) -> model.Namespace | None: ...

    def labels_of(self, name: str) -> Mapping[str, str]:
        """The namespace's labels; empty for one Berth has not seen."""

    def selected(self, selector: model.LabelSelector) -> list[str]:
        """Names of the known namespaces whose labels match ``selector``."""


class WorkloadLister(Protocol):
    """The Services, ReplicationControllers, ReplicaSets and StatefulSets Berth
    knows, selectors only (kube-scheduler's four listers from the
    SharedInformerFactory that PodTopologySpread's ``setListers`` takes)."""

    def services(self, namespace: str) -> list[model.Service]: ...

    def get(self, kind: str, namespace: str, name: str) -> model.Workload | None:
        """By kind (``Service``, ``ReplicationController``, ``ReplicaSet``, ``StatefulSet``)."""


class PodGroupLister(Protocol):
    def get(self, namespace: str, name: str) -> model.PodGroup | None: ...


class PodDisruptionBudgetLister(Protocol):
    def list(self) -> list[model.PodDisruptionBudget]: ...


class Nominator(Protocol):
    """Pods nominated to nodes by preemption (``framework.PodNominator``)."""

    def add(self, pod: PodInfo, node: str) -> None: ...

    def delete(self, uid: str) -> None: ...

    def node_of(self, uid: str) -> str:
        """The pod's nominated node, or ""."""

    def pods_on(self, node: str) -> list[PodInfo]: ...

    def nodes(self) -> list[str]: ...


class PodActivator(Protocol):
    """Moves pending pods to activeQ now (kube-scheduler's
    ``fwk.PodActivator.Activate``): a plugin that held pods back (a gang's
    backoff) says when they may be tried again."""

    def activate(self, uids: Sequence[str]) -> None: ...


class WaitingPods(Protocol):
    """Pods held at Permit (``framework.WaitingPod`` and the Handle's
    ``IterateOverWaitingPods`` / ``GetWaitingPod`` / ``RejectWaitingPod``)."""

    def uids(self) -> list[str]: ...

    def get(self, uid: str) -> PodInfo | None: ...

    def allow(self, uid: str, plugin: str) -> None:
        """``plugin`` no longer holds the pod; it binds once no plugin does."""

    def reject(self, uid: str, plugin: str, message: str) -> bool:
        """The pod's Permit fails with ``message``: it is unreserved and
        requeued as unschedulable. False when it was not waiting."""

    def preempt(self, uid: str, plugin: str, message: str) -> bool:
        """The pod's Permit fails as a preemption victim's (an error: it is
        unreserved and retried after backoff). False when it was not waiting."""


class PodsInPreBind(Protocol):
    """Pods whose PreBind has work (the Handle's ``GetPodInPreBind``, v1.36)."""

    def cancel(self, uid: str, message: str) -> bool:
        """``PodInPreBind.CancelPod``: stop the pod's PreBind with
        ``message``, so its binding cycle fails and it is requeued. False when
        the pod is not in PreBind or already binding."""


class DraLister(Protocol):
    """Dynamic Resource Allocation objects and this scheduler's allocations in
    flight: kube-scheduler's ``SharedDRAManager`` (``ResourceClaims()``,
    ``ResourceSlices()``, ``DeviceClasses()``), shared by every profile."""

    #: Moves whenever a DeviceClass or ResourceSlice changes.
    generation: int

    @property
    def pool_versions(self) -> Mapping[tuple[str, str], int]:
        """(driver, pool) -> a number that moves whenever a device of that
        pool starts or stops being in :meth:`allocated_devices`."""

    def device_class(self, name: str) -> dra.DeviceClass | None: ...

    def device_classes(self) -> Mapping[str, dra.DeviceClass]: ...

    def resource_slices(self) -> Sequence[dra.ResourceSlice]: ...

    def claim(self, namespace: str, name: str) -> dra.ResourceClaim | None:
        """The latest claim: the source's, or the one PreBind wrote (assumed)."""

    def claim_template(self, namespace: str, name: str) -> dra.ResourceClaimTemplate | None: ...

    def claims(self) -> list[dra.ResourceClaim]:
        """Every claim, latest versions (``ResourceClaims().List()``)."""

    def allocated_devices(self) -> AbstractSet[tuple[str, str, str]]:
        """(driver, pool, device) of every device allocated whole — any
        scheduler's, as the claims say — and of the allocations in flight."""

    def shared_devices(self) -> AbstractSet[tuple[str, str, str]]:
        """Devices with at least one share allocated or in flight (results with a ``shareID``)."""

    def consumed_capacity(self) -> Mapping[tuple[str, str, str], Mapping[str, Fraction]]:
        """What the shares of each device consume, per capacity name."""

    def has_pending_allocation(self, uid: str) -> bool: ...

    def signal_pending_allocation(self, uid: str, claim: dra.ResourceClaim) -> None:
        """Reserve: ``claim``, with its allocation, is in flight until PreBind wrote it or Unreserve dropped it."""

    def remove_pending_allocation(self, uid: str) -> bool:
        """Whether the claim was in flight."""

    def assume_claim(self, claim: dra.ResourceClaim) -> None:
        """The claim as a write returned it: used until the source reports it."""

    def restore_claim(self, namespace: str, name: str) -> None:
        """Drop an assumed claim: back to the source's object."""


class VolumeLister(Protocol):
    """PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes,
    CSIDrivers and CSIStorageCapacities (the listers kube-scheduler's volume
    plugins take from the SharedInformerFactory), with VolumeBinding's assume
    caches: :meth:`pv` and :meth:`pvc` return the assumed object while one is
    assumed, ``api_*`` the source's. Writes go to the source that owns the
    object. Shared by every profile."""

    def pv(self, name: str) -> storage.PersistentVolume | None: ...

    def api_pv(self, name: str) -> storage.PersistentVolume | None: ...

    def pvs_of_class(self, storage_class: str) -> list[storage.PersistentVolume]:
        """The latest PVs of a class ("" : those without one)."""

    def pvc(self, namespace: str, name: str) -> storage.PersistentVolumeClaim | None: ...

    def api_pvc(self, namespace: str, name: str) -> storage.PersistentVolumeClaim | None: ...

    def storage_class(self, name: str) -> storage.StorageClass | None: ...

    def csi_node(self, name: str) -> storage.CSINode | None: ...

    def csi_driver(self, name: str) -> storage.CSIDriver | None: ...

    def capacities(self) -> Sequence[storage.CSIStorageCapacity]: ...

    def assume_pv(self, pv: storage.PersistentVolume) -> None:
        """Reserve: ``pv`` (with its new claimRef) is seen until the source
        reports another version of it or :meth:`restore_pv`; ValueError when
        its resourceVersion is not the source object's, NotFound without one."""

    def restore_pv(self, pv: storage.PersistentVolume) -> None:
        """Drop the assumption of ``pv``, if that version is the one assumed."""

    def assume_pvc(self, pvc: storage.PersistentVolumeClaim) -> None:
        """Reserve: ``pvc`` (annotated ``selected-node``) likewise."""

    def restore_pvc(self, pvc: storage.PersistentVolumeClaim) -> None: ...

    async def update_pv(self, pv: storage.PersistentVolume) -> storage.PersistentVolume:
        """Write ``pv`` (spec and metadata) through its source; raises
        :class:`berth.cluster.sources.Conflict` on a stale resourceVersion, NotFound."""

    async def update_pvc(self, pvc: storage.PersistentVolumeClaim) -> storage.PersistentVolumeClaim:
        """Write ``pvc`` likewise."""

    async def wait_for_change(self) -> None:
        """Return at the next PV or PVC event (PreBind waits for the binding so)."""


class ClusterClient(Protocol):
    """Acts on the cluster through the source that owns each pod.

    ``bind`` is awaited by Bind plugins. ``evict`` and ``nominate`` return at
    once and run in the background (as kube-scheduler's preemption evicts
    victims asynchronously); failures are logged and the pod's events bring
    the queue up to date.
    """

    async def bind(self, pod: model.Pod, node: str) -> Status:
        """Success, or an error Status saying why the binding failed."""

    def evict(self, pod: model.Pod, reason: str) -> None: ...

    def report_preempted(self, pod: model.Pod, message: str) -> None:
        """The ``Preempted`` event of a victim preempted in memory (stopped at
        Permit or in PreBind, not deleted)."""

    def record_event(
        self,
        regarding: model.Pod,
        related: model.Pod | None,
        type_: sources.EventType,
        reason: str,
        action: str,
        note: str,
    ) -> None:
        """``EventRecorder().Eventf(regarding, related, type, reason, action,
        note)``: an event about ``regarding``, written in the background
        through its source (an events.k8s.io/v1 Event, aggregated into series
        as client-go does; the embedded cluster's events history). ValueError,
        and nothing written, when the API server would refuse it
        (:func:`berth.cluster.sources.check_event`)."""

    def nominate(self, pod: model.Pod, node: str) -> None:
        """Record ``status.nominatedNodeName`` ("" clears it)."""

    async def get_claim(self, namespace: str, name: str) -> dra.ResourceClaim:
        """The claim as its source has it now; raises NotFound."""

    async def update_claim(self, claim: dra.ResourceClaim) -> dra.ResourceClaim:
        """Write metadata and spec (finalizers) if ``claim``'s resourceVersion
        is current, else raise :class:`berth.cluster.sources.Conflict`."""

    async def update_claim_status(self, claim: dra.ResourceClaim) -> dra.ResourceClaim:
        """Write ``status`` (allocation, reservedFor) likewise."""

    def unreserve_claim(self, claim: dra.ResourceClaim, pod_uid: str) -> None:
        """In the background: remove the pod from the claim's ``reservedFor``."""

    def deallocate_claim(self, claim: dra.ResourceClaim) -> None:
        """In the background: clear the claim's allocation and reservations."""

    async def create_claim(self, claim: dra.ResourceClaim) -> dra.ResourceClaim:
        """Create ``claim`` (named by its ``generateName``) in the source of
        its namespace's pods; the claim as stored."""

    def delete_claim(self, claim: dra.ResourceClaim) -> None:
        """In the background: drop the delete-protection finalizer, then delete the claim."""

    async def set_extended_resource_claim_status(
        self, pod: model.Pod, status: model.PodExtendedResourceClaimStatus
    ) -> None:
        """Record the pod's ``status.extendedResourceClaimStatus``."""


class QueuePolicy(Protocol):
    """What the batch queues (:class:`berth.quota.QueueTree`) allow priority
    preemption to take."""

    @property
    def enabled(self) -> bool:
        """Whether any queue is configured."""

    def within_queue(self, preemptor: PodInfo, victim: PodInfo) -> bool:
        """Whether ``victim`` may be preempted for ``preemptor`` by priority."""

    def reservation_of(self, pod: model.Pod) -> ReservationPolicy | None:
        """The reservation policy of the queue ``pod`` waits in (None: none)."""


class DecisionRecorder(Protocol):
    def emit(self, decision: Decision) -> None:
        """Publish a decision (the gRPC stream, ``berth explain``'s history)."""


@dataclasses.dataclass(slots=True, eq=False)
class Handle:
    """Services shared by the plugins of one profile; see the module docstring."""

    profile: str
    cache: Cache
    pods: PodLister
    pod_groups: PodGroupLister
    pdbs: PodDisruptionBudgetLister
    namespaces: NamespaceLister
    nominator: Nominator
    waiting_pods: WaitingPods
    client: ClusterClient
    recorder: DecisionRecorder
    metrics: Metrics
    clock: Callable[[], float]
    #: The Kubernetes release and feature gates this Berth follows
    #: (upstream's ``feature.Features``, handed to every plugin factory).
    features: features.Features = dataclasses.field(default_factory=features.Features.newest)
    #: Selectors of Services and controllers; None: none are watched.
    workloads: WorkloadLister | None = None
    #: The batch queues; None: no queue restricts preemption.
    queues: QueuePolicy | None = None
    #: DeviceClasses, ResourceSlices and ResourceClaims; None: none are known.
    dra: DraLister | None = None
    #: Storage objects and VolumeBinding's assume caches; None: none are known.
    volumes: VolumeLister | None = None
    #: Pods in PreBind a preemptor may cancel; None: none can be.
    pods_in_pre_bind: PodsInPreBind | None = None
    #: Set by the profile's Framework once its plugins are built.
    runner: Framework | None = None
    #: Set once the scheduling core exists; None: nothing to activate (tests).
    activator: PodActivator | None = None
    #: The Workload API's PodGroups and Workloads with their members
    #: (GenericWorkload); None: none are known.
    scheduling_groups: workload_api.GroupStore | None = None
    #: Who is in which gang, in every enabled dialect (berth/gangs); None:
    #: Coscheduling builds one of its own (tests).
    gangs: GangIndex | None = None
    #: The configuration's ``topologies`` and Kueue Topology objects
    #: (TopologyGang's levels; a live ``TopologySet``); empty: none.
    topologies: Sequence[TopologySpec] = ()

    @property
    def framework(self) -> Framework:
        """This profile's plugins (PluginsRunner): preemption runs its Filters."""
        if self.runner is None:
            raise RuntimeError(f"profile {self.profile!r}: the framework is still being built")
        return self.runner
