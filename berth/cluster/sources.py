"""Where cluster state comes from and where decisions go back to.

A :class:`Source` is one origin of nodes and pods — the embedded in-memory
cluster (which the gRPC Cluster feed and Submit write into), or the
Kubernetes API (``berth.adapters.kubernetes``) — and it carries out what the
core decides about the pods it owns: bind them, evict victims, record a
nominated node and report outcomes. A source tells the core about changes
through a :class:`ClusterListener`, as informers would. The core talks to
every source through these two interfaces and never knows which one it is.
"""

from __future__ import annotations

import enum
from collections.abc import Generator, Iterable, Sequence
from typing import Protocol

from berth.cluster import dra, hypernodes, model, storage, topologies, workload_api

__all__ = [
    "BindConflict",
    "BindError",
    "BindRetriable",
    "ClusterListener",
    "Conflict",
    "EventType",
    "FeedRefused",
    "Source",
    "check_event",
]


class BindError(Exception):
    """Binding failed; the pod goes back to the queue."""


class BindConflict(BindError):
    """The pod is already bound elsewhere (or gone): never retry on the same node blindly."""


class BindRetriable(BindError):
    """The API server may take the same Binding if asked again: it answered
    500 or 503, or refused the connection (``util.Retriable``,
    ``pkg/scheduler/util/utils.go``)."""


class Conflict(Exception):
    """A write whose ``metadata.resourceVersion`` is no longer current (the
    API server's 409 Conflict): read the object again and retry."""


class FeedRefused(Exception):
    """The source does not take objects from Berth's clients (e.g. the
    Kubernetes source: pods are created through the API server)."""


class EventType(enum.StrEnum):
    """An event's ``type`` (``v1.EventTypeNormal``, ``v1.EventTypeWarning``)."""

    NORMAL = "Normal"
    WARNING = "Warning"


#: What events.k8s.io/v1 validation takes (``pkg/apis/core/validation/events.go``
#: v1.37.2: ``ReasonLengthLimit``, ``ActionLengthLimit``); a longer note is cut
#: to its ``NoteLengthLimit`` (1024) where it is written.
EVENT_REASON_MAX = 128
EVENT_ACTION_MAX = 128


def check_event(type_: str, reason: str, action: str) -> EventType:
    """``type_`` as an :class:`EventType`; ValueError naming the field an
    API server would refuse (``ValidateEventCreate``: a type other than
    Normal or Warning, an empty or over-long reason or action). client-go's
    recorder drops such an event with a log line; Berth tells the plugin
    that asked for it at once."""
    try:
        checked = EventType(type_)
    except ValueError:
        raise ValueError(f"event type: Unsupported value: {type_!r}: supported values: Normal, Warning") from None
    for field, value, most in (("reason", reason, EVENT_REASON_MAX), ("action", action, EVENT_ACTION_MAX)):
        if not value:
            raise ValueError(f"event {field}: Required value")
        if len(value) > most:
            raise ValueError(f"event {field}: Invalid value: can have at most {most} characters")
    return checked


class Source(Protocol):
    name: str

    def upsert_pods(self, pods: Iterable[model.Pod]) -> int:
        """Create or replace pods (Submit, the Cluster feed), all or none: a
        bad batch raises a :mod:`berth.errors` kind and changes nothing.
        Raises FeedRefused when this source's pods come from elsewhere."""

    def delete_pods(self, keys: Iterable[str]) -> int:
        """Delete pods by ``NAMESPACE/NAME`` (Cancel, the feed); raises FeedRefused likewise."""

    async def bind(self, pod: model.Pod, node: str) -> None:
        """Bind ``pod`` to ``node``. Idempotent: binding a pod already bound
        to ``node`` succeeds; one bound to another node raises BindConflict."""

    async def evict(self, pod: model.Pod, reason: str) -> None:
        """Remove a preemption victim, saying why."""

    async def report_preempted(self, pod: model.Pod, message: str) -> None:
        """Preempted: a victim stopped in the scheduler's memory (waiting at
        Permit or in PreBind) is not deleted; only the event is recorded."""

    async def nominate(self, pod: model.Pod, node: str) -> None:
        """Record ``status.nominatedNodeName`` (empty clears it)."""

    async def record_event(
        self, regarding: model.Pod, related: model.Pod | None, type_: EventType, reason: str, action: str, note: str
    ) -> None:
        """An event about ``regarding`` (a plugin's ``EventRecorder().Eventf``,
        checked by :func:`check_event`), ``related`` naming a second pod (the
        preemptor of a victim) or none; best effort, as client-go's recorder."""

    async def report_unschedulable(self, pod: model.Pod, message: str, nominated: str | None = None) -> None:
        """FailedScheduling: the pod stays pending, with kube-scheduler's
        message; with ``nominated``, its ``status.nominatedNodeName`` too, in
        the same status write (kube-scheduler's ``updatePod`` patches the
        PodScheduled condition and the nomination together)."""

    async def report_scheduled(self, pod: model.Pod, node: str) -> None:
        """Scheduled: the pod was bound to ``node``."""

    # ResourceClaims (DynamicResources' PreBind, Unreserve and PostFilter):
    # the API server's get / update / updateStatus of resourceclaims.

    async def get_claim(self, namespace: str, name: str) -> dra.ResourceClaim:
        """The claim as stored now; raises :class:`berth.errors.NotFound`."""

    async def update_claim(self, claim: dra.ResourceClaim) -> dra.ResourceClaim:
        """Replace metadata and spec (not status); raises :class:`Conflict`
        when ``claim.metadata.resourceVersion`` is not the stored one."""

    async def update_claim_status(self, claim: dra.ResourceClaim) -> dra.ResourceClaim:
        """Replace status (the ``status`` subresource), :class:`Conflict` likewise."""

    async def create_claim(self, claim: dra.ResourceClaim) -> dra.ResourceClaim:
        """Create a claim named by ``metadata.generateName`` (DynamicResources'
        claim for extended resources); the claim as stored."""

    async def delete_claim(self, namespace: str, name: str) -> None:
        """Delete the claim (NotFound is not an error)."""

    async def set_extended_resource_claim_status(
        self, pod: model.Pod, status: model.PodExtendedResourceClaimStatus
    ) -> None:
        """Write the pod's ``status.extendedResourceClaimStatus``."""

    # PersistentVolumes and claims (VolumeBinding's PreBind): the API
    # server's update, which replaces metadata and spec.

    async def update_persistent_volume(self, pv: storage.PersistentVolume) -> storage.PersistentVolume:
        """The PV as stored after the write; :class:`Conflict` when
        ``pv.metadata.resourceVersion`` is not the stored one; NotFound."""

    async def update_persistent_volume_claim(self, pvc: storage.PersistentVolumeClaim) -> storage.PersistentVolumeClaim:
        """The claim as stored after the write; :class:`Conflict`, NotFound likewise."""


class ClusterListener(Protocol):
    """What a source reports (the core implements it)."""

    def admit_pods(self, pods: Sequence[model.Pod]) -> None:
        """Raise (a :mod:`berth.errors` kind) when the core cannot take this
        batch of individually valid pods whole — a uid another pod holds, a
        node whose requested amounts would pass int64 — changing nothing. A
        source that can refuse (the embedded cluster) asks before it applies
        any pod of a batch; an informer cannot refuse and does not ask."""

    def admit_pods_steps(self, pods: Sequence[model.Pod]) -> Generator[None, None, None]:
        """:meth:`admit_pods` a step per pod, for a batch checked in slices
        (:mod:`berth.scheduling.feeding`)."""
        ...

    def node_usage(self, node: str, *, excluding: str = "") -> tuple[dict[str, int], int]:
        """What the pods on ``node`` request (canonical amounts) and how many
        they are, leaving out the pod with uid ``excluding``: a source that
        emulates a kubelet's admission (the embedded cluster) asks it."""
        ...

    def on_node(self, node: model.Node) -> None: ...

    def on_node_delete(self, name: str) -> None: ...

    def on_pod(self, pod: model.Pod, *, source: Source) -> None: ...

    def on_pod_delete(self, pod: model.Pod) -> None: ...

    def on_pod_group(self, group: model.PodGroup) -> None: ...

    def on_pod_group_delete(self, group: model.PodGroup) -> None: ...

    def on_scheduling_group(self, obj: workload_api.PodGroup | workload_api.Workload) -> None:
        """A Workload API PodGroup or Workload (``scheduling.k8s.io``, GenericWorkload)."""

    def on_topology(self, obj: topologies.KueueTopology) -> None:
        """A Kueue Topology object: its levels join the topologies gangs may ask for."""

    def on_hypernode(self, obj: hypernodes.HyperNode) -> None:
        """A Volcano HyperNode: its tiers become node labels and a topology."""

    def on_pdb(self, pdb: model.PodDisruptionBudget) -> None: ...

    def on_pdb_delete(self, namespace: str, name: str) -> None: ...

    def on_namespace(self, namespace: model.Namespace) -> None:
        """A namespace and its labels (pod affinity's ``namespaceSelector``)."""

    def on_namespace_delete(self, name: str) -> None: ...

    def on_workload(self, obj: model.Workload) -> None:
        """A Service, ReplicationController, ReplicaSet or StatefulSet (its selector)."""

    def on_workload_delete(self, kind: str, namespace: str, name: str) -> None: ...

    def on_device_class(self, obj: dra.DeviceClass) -> None: ...

    def on_device_class_delete(self, name: str) -> None: ...

    def on_resource_slice(self, obj: dra.ResourceSlice) -> None: ...

    def on_resource_slice_delete(self, name: str) -> None: ...

    def on_resource_claim(self, claim: dra.ResourceClaim, *, source: Source) -> None:
        """A claim, with the source that owns it (where PreBind writes it)."""

    def on_resource_claim_delete(self, namespace: str, name: str) -> None: ...

    def on_resource_claim_template(self, obj: dra.ResourceClaimTemplate) -> None: ...

    def on_resource_claim_template_delete(self, namespace: str, name: str) -> None: ...

    def on_persistent_volume(self, pv: storage.PersistentVolume, *, source: Source) -> None:
        """A PV, with the source that owns it (where PreBind writes it)."""

    def on_persistent_volume_delete(self, name: str) -> None: ...

    def on_persistent_volume_claim(self, pvc: storage.PersistentVolumeClaim, *, source: Source) -> None: ...

    def on_persistent_volume_claim_delete(self, namespace: str, name: str) -> None: ...

    def on_storage_class(self, obj: storage.StorageClass) -> None: ...

    def on_storage_class_delete(self, name: str) -> None: ...

    def on_csi_node(self, obj: storage.CSINode) -> None: ...

    def on_csi_node_delete(self, name: str) -> None: ...

    def on_csi_driver(self, obj: storage.CSIDriver) -> None: ...

    def on_csi_driver_delete(self, name: str) -> None: ...

    def on_csi_storage_capacity(self, obj: storage.CSIStorageCapacity) -> None: ...

    def on_csi_storage_capacity_delete(self, namespace: str, name: str) -> None: ...
