"""Berth's decisions written back to the Kubernetes API, as kube-scheduler writes them.

- bind: ``POST pods/{name}/binding`` with the pod's UID as a precondition
  (``defaultbinder``). kubernetes-asyncio cannot deserialise the Status the
  API answers with (it expects a V1Binding), so the raw response is read and
  checked here. A 409 whose pod is already on the same node is success (a
  retried bind); on another node it is a :class:`BindConflict`.
- evict a preemption victim: ``DELETE`` with a UID precondition, after
  marking it with the ``DisruptionTarget`` condition
  (``preemption.go: PrepareCandidate``).
- nominate: strategic-merge patch of ``status.nominatedNodeName``.
- ResourceClaims (DynamicResources' PreBind, Unreserve, PostFilter): JSON
  merge patches carrying ``metadata.resourceVersion``, which the API server
  takes as a precondition (409 -> :class:`Conflict`, retried by the plugin
  as upstream's Update on conflict is); a patch rather than a PUT so that
  fields Berth does not model (``status.devices``, written by drivers)
  survive.
- PersistentVolumes and claims (VolumeBinding's PreBind): JSON merge patches
  of the PV's ``claimRef`` and annotations, or the claim's annotations
  (``volume.kubernetes.io/selected-node``), carrying the resourceVersion as a
  precondition as upstream's Update does (409 -> :class:`Conflict`); a patch
  so that the fields Berth does not model survive.
- failures: a ``FailedScheduling`` event and the ``PodScheduled=False``
  condition with reason ``Unschedulable`` and the FitError message; success:
  a ``Scheduled`` event (``events.k8s.io/v1``, reportingController ``berth``).

The Binding, the PodScheduled condition, the events, evictions and
nominations are :mod:`.writes`;
with a :class:`~.writer.WriterProcess` (``berth serve``'s default) they are
performed in the writer subprocess, off the scheduling loop's core.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import msgspec
from kubernetes_asyncio import client

from berth.adapters.kubernetes.writer import WriterProcess
from berth.adapters.kubernetes.writes import REQUEST_TIMEOUT_SECONDS, PodRef, PodWrites
from berth.cluster import dra, model, queues, storage
from berth.cluster.sources import BindError, Conflict, EventType, FeedRefused
from berth.errors import NotFound

__all__ = ["KubernetesSource"]

log = logging.getLogger(__name__)


class KubernetesSource:
    name = "kubernetes"

    def __init__(
        self,
        api: client.ApiClient,
        *,
        identity: str,
        scheduler_name: str = "berth",
        writer: WriterProcess | None = None,
    ) -> None:
        # Typed as Any: we pass plain dicts and read raw responses
        # (_preload_content=False), which the generated signatures do not describe.
        self.core_v1: Any = client.CoreV1Api(api)
        self.resource_v1: Any = client.ResourceV1Api(api)
        self.custom_objects: Any = client.CustomObjectsApi(api)
        self.identity = identity
        self.scheduler_name = scheduler_name
        #: The Binding, conditions and events written from this process...
        self.writes = PodWrites(api, identity=identity, scheduler_name=scheduler_name)
        #: ...or, when set and working, from the writer subprocess (:mod:`.writer`).
        self.writer = writer
        #: The batch API's writes as its callers (the runner sets it:
        #: :func:`berth.scheduling.batch.caller_writes`).
        self.as_caller: object | None = None
        #: Why binding must stop now (a leader whose Lease renewal is past
        #: renewDeadline: :meth:`~.election.LeaderElector.fence`), or None.
        self.fence: Callable[[], str | None] | None = None

    def _remote(self) -> WriterProcess | None:
        w = self.writer
        return w if w is not None and not w.broken else None

    # Pods of this source are the API server's: they are created and deleted
    # there (kubectl, controllers), never by Berth's clients.
    def upsert_pods(self, pods: Iterable[model.Pod]) -> int:
        raise FeedRefused("pods of a Kubernetes-backed Berth are created through the API server")

    def delete_pods(self, keys: Iterable[str]) -> int:
        raise FeedRefused("pods of a Kubernetes-backed Berth are deleted through the API server")

    async def bind(self, pod: model.Pod, node: str) -> None:
        fenced = self.fence() if self.fence is not None else None
        if fenced is not None:
            raise BindError(f"not binding {pod.key}: {fenced}")
        remote = self._remote()
        if remote is not None:
            await remote.bind(PodRef.of(pod), node)
        else:
            await self.writes.bind(PodRef.of(pod), node)

    async def report_scheduled(self, pod: model.Pod, node: str) -> None:
        remote = self._remote()
        if remote is not None:
            await remote.report_scheduled(PodRef.of(pod), node)
        else:
            self.writes.report_scheduled(PodRef.of(pod), node)

    async def report_unschedulable(self, pod: model.Pod, message: str, nominated: str | None = None) -> None:
        remote = self._remote()
        if remote is not None:
            await remote.report_unschedulable(PodRef.of(pod), message, nominated)
        else:
            await self.writes.report_unschedulable(PodRef.of(pod), message, nominated)

    async def evict(self, pod: model.Pod, reason: str) -> None:
        remote = self._remote()
        if remote is not None:
            await remote.evict(PodRef.of(pod), reason, self.scheduler_name)
        else:
            await self.writes.evict(PodRef.of(pod), reason, self.scheduler_name)

    async def report_preempted(self, pod: model.Pod, message: str) -> None:
        remote = self._remote()
        if remote is not None:
            await remote.report_preempted(PodRef.of(pod), message)
        else:
            self.writes.report_preempted(PodRef.of(pod), message)

    async def record_event(
        self, regarding: model.Pod, related: model.Pod | None, type_: EventType, reason: str, action: str, note: str
    ) -> None:
        ref, rel = PodRef.of(regarding), (PodRef.of(related) if related is not None else None)
        remote = self._remote()
        if remote is not None:
            await remote.record_event(ref, rel, type_, reason, action, note)
        else:
            self.writes.record_event(ref, rel, type_, reason, action, note)

    async def nominate(self, pod: model.Pod, node: str) -> None:
        remote = self._remote()
        if remote is not None:
            await remote.nominate(PodRef.of(pod), node)
        else:
            await self.writes.nominate(PodRef.of(pod), node)

    async def close(self) -> None:
        """Stop the writer (after its writes in flight) and the event writers."""
        if self.writer is not None:
            await self.writer.close()
        await self.writes.events.flush()
        await self.writes.close()

    # ------------------------------------------------------------ ResourceClaims

    async def get_claim(self, namespace: str, name: str) -> dra.ResourceClaim:
        resp = await self.resource_v1.read_namespaced_resource_claim(
            name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_SECONDS
        )
        return await _claim_from(resp, name)

    async def update_claim(self, claim: dra.ResourceClaim) -> dra.ResourceClaim:
        md = claim.metadata
        body = {"metadata": {"resourceVersion": md.resource_version, "finalizers": list(md.finalizers)}}
        resp = await self.resource_v1.patch_namespaced_resource_claim(
            md.name,
            md.namespace,
            body,
            **_MERGE_PATCH,
        )
        return await _claim_from(resp, md.name)

    async def update_claim_status(self, claim: dra.ResourceClaim) -> dra.ResourceClaim:
        md, status = claim.metadata, claim.status
        patch: dict[str, Any] = {
            "allocation": msgspec.to_builtins(status.allocation) if status.allocation is not None else None,
            # Spelled out: to_builtins omits defaults, and ``resource: pods``
            # is the struct's default but required by the API server (422).
            "reservedFor": [_consumer(r) for r in status.reserved_for] or None,
        }
        if status.allocation is None:
            patch["devices"] = None  # deallocated: the drivers' device status goes too (as upstream)
        resp = await self.resource_v1.patch_namespaced_resource_claim_status(
            md.name,
            md.namespace,
            {"metadata": {"resourceVersion": md.resource_version}, "status": patch},
            **_MERGE_PATCH,
        )
        return await _claim_from(resp, md.name)

    async def create_claim(self, claim: dra.ResourceClaim) -> dra.ResourceClaim:
        md = claim.metadata
        body = {"apiVersion": claim.api_version, "kind": claim.kind, **msgspec.to_builtins(claim)}
        body.pop("status", None)
        resp = await self.resource_v1.create_namespaced_resource_claim(
            md.namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_SECONDS
        )
        return await _claim_from(resp, md.generate_name)

    async def delete_claim(self, namespace: str, name: str) -> None:
        resp = await self.resource_v1.delete_namespaced_resource_claim(
            name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_SECONDS
        )
        with contextlib.suppress(NotFound):  # gone already: what a delete wants
            await _object_from(resp, dict, f'resourceclaims.resource.k8s.io "{name}"')

    async def set_extended_resource_claim_status(
        self, pod: model.Pod, status: model.PodExtendedResourceClaimStatus
    ) -> None:
        md = pod.metadata
        body = {"status": {"extendedResourceClaimStatus": msgspec.to_builtins(status)}}
        resp = await self.core_v1.patch_namespaced_pod_status(md.name, md.namespace, body, **_MERGE_PATCH)
        await _object_from(resp, dict, f'pods "{md.name}"')

    # ------------------------------------------------------------ PersistentVolumes

    async def update_persistent_volume(self, pv: storage.PersistentVolume) -> storage.PersistentVolume:
        md = pv.metadata
        ref = msgspec.to_builtins(pv.spec.claim_ref) if pv.spec.claim_ref is not None else None
        body = {
            "metadata": {"resourceVersion": md.resource_version, "annotations": dict(md.annotations)},
            "spec": {"claimRef": ref},
        }
        resp = await self.core_v1.patch_persistent_volume(
            md.name,
            body,
            **_MERGE_PATCH,
        )
        return await _object_from(resp, storage.PersistentVolume, f'persistentvolumes "{md.name}"')

    async def update_persistent_volume_claim(self, pvc: storage.PersistentVolumeClaim) -> storage.PersistentVolumeClaim:
        md = pvc.metadata
        body = {"metadata": {"resourceVersion": md.resource_version, "annotations": dict(md.annotations)}}
        resp = await self.core_v1.patch_namespaced_persistent_volume_claim(
            md.name,
            md.namespace,
            body,
            **_MERGE_PATCH,
        )
        return await _object_from(resp, storage.PersistentVolumeClaim, f'persistentvolumeclaims "{md.name}"')


    # ------------------------------------------------------------ Queue objects

    async def write_queue_status(self, name: str, status: dict[str, Any]) -> None:
        """Replace a Queue object's ``status`` (berth.dev/v1alpha1, status
        subresource): a JSON patch ``add /status``, which replaces the whole
        status as a merge patch would not (resources gone from ``allocated``
        must go). NotFound when the object is gone."""
        resp = await self.custom_objects.patch_cluster_custom_object_status(
            queues.GROUP,
            queues.VERSION,
            queues.PLURAL,
            name,
            [{"op": "add", "path": "/status", "value": status}],
            _content_type="application/json-patch+json",
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT_SECONDS,
        )
        await _object_from(resp, dict, f'{queues.PLURAL}.{queues.GROUP} "{name}"')


    # ------------------------------------------------------------ PodGroup phases

    async def write_pod_group_phase(self, group: model.PodGroup, phase: str) -> None:
        """Set a PodGroup's ``status.phase`` (scheduler-plugins', Volcano's) as
        their controllers do: a merge patch of the phase alone, so the counts
        they keep survive; through the status subresource where the CRD has
        one (scheduler-plugins'), else the object (Volcano's CRD,
        ``config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml``,
        declares none). NotFound when gone."""
        api_group, _, version = group.api_version.partition("/")
        patch = (
            self.custom_objects.patch_namespaced_custom_object
            if api_group == "scheduling.volcano.sh"
            else self.custom_objects.patch_namespaced_custom_object_status
        )
        resp = await patch(
            api_group,
            version,
            group.metadata.namespace,
            "podgroups",
            group.metadata.name,
            {"status": {"phase": phase}},
            **_MERGE_PATCH,
        )
        await _object_from(resp, dict, f'podgroups.{api_group} "{group.metadata.namespace}/{group.metadata.name}"')


class _Status(msgspec.Struct):
    message: str = ""


T = TypeVar("T")


#: A JSON merge patch (carrying resourceVersion where it must not race), read raw.
_MERGE_PATCH: dict[str, Any] = {
    "_content_type": "application/merge-patch+json",
    "_preload_content": False,
    "_request_timeout": REQUEST_TIMEOUT_SECONDS,
}


async def _object_from(resp: Any, typ: type[T], what: str) -> T:
    """The object in a raw response, or the error its HTTP status says."""
    try:
        status, data = resp.status, await resp.read()
    finally:
        resp.release()
    if 200 <= status <= 299:
        return msgspec.json.decode(data, type=typ)
    try:
        message = msgspec.json.decode(data, type=_Status).message
    except msgspec.DecodeError:
        message = data.decode(errors="replace")[:300]
    if status == 404:
        raise NotFound(message or f"{what} not found")
    if status == 409:
        raise Conflict(message)
    raise RuntimeError(f"{what}: HTTP {status}: {message}")


def _consumer(ref: dra.ResourceClaimConsumerReference) -> dict[str, str]:
    """A ``reservedFor`` entry as the API server wants it: resource, name and
    uid always; apiGroup only when not the core group ("" is omitempty)."""
    out = {"resource": ref.resource, "name": ref.name, "uid": ref.uid}
    if ref.api_group:
        out["apiGroup"] = ref.api_group
    return out


async def _claim_from(resp: Any, name: str) -> dra.ResourceClaim:
    return await _object_from(resp, dra.ResourceClaim, f'resourceclaims.resource.k8s.io "{name}"')
