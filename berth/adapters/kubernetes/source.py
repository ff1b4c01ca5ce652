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
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterable
from typing import Any, TypeVar

import aiohttp
import msgspec
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from berth.cluster import dra, model, storage
from berth.cluster.sources import BindConflict, BindError, Conflict, FeedRefused
from berth.errors import NotFound

__all__ = ["KubernetesSource"]

log = logging.getLogger(__name__)

#: The same (pod, message) is reported at most this often (kube-scheduler's
#: event correlator aggregates repeats in a similar way).
EVENT_REPEAT_SECONDS = 60.0
#: Every write gives up after this: kubernetes-asyncio sets no timeout, and a
#: hung API server must not hold a binding cycle (or a shutdown) forever. A
#: bind that timed out but did happen is found on the retry (409, same node).
REQUEST_TIMEOUT_SECONDS = 30.0


def _now_micro() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _BoundPod(msgspec.Struct):
    spec: model.PodSpec = msgspec.field(default_factory=model.PodSpec)
    metadata: model.ObjectMeta = msgspec.field(default_factory=model.ObjectMeta)


class KubernetesSource:
    name = "kubernetes"

    def __init__(self, api: client.ApiClient, *, identity: str, scheduler_name: str = "berth") -> None:
        # Typed as Any: we pass plain dicts and read raw responses
        # (_preload_content=False), which the generated signatures do not describe.
        self.core_v1: Any = client.CoreV1Api(api)
        self.events_v1: Any = client.EventsV1Api(api)
        self.resource_v1: Any = client.ResourceV1Api(api)
        self.identity = identity
        self.scheduler_name = scheduler_name
        self._reported: dict[tuple[str, str], float] = {}
        #: The PodScheduled message last written, by pod uid. The condition
        #: always shows the latest reason — kube-scheduler's ``updatePod``
        #: patches whenever the condition differs — and only events are
        #: rate-limited: else a reason that comes back within
        #: EVENT_REPEAT_SECONDS (quota, then nodes, then quota) would leave
        #: the condition showing the one in between.
        self._condition: dict[str, str] = {}

    # Pods of this source are the API server's: they are created and deleted
    # there (kubectl, controllers), never by Berth's clients.
    def upsert_pods(self, pods: Iterable[model.Pod]) -> int:
        raise FeedRefused("pods of a Kubernetes-backed Berth are created through the API server")

    def delete_pods(self, keys: Iterable[str]) -> int:
        raise FeedRefused("pods of a Kubernetes-backed Berth are deleted through the API server")

    async def bind(self, pod: model.Pod, node: str) -> None:
        md = pod.metadata
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": md.name, "namespace": md.namespace, "uid": md.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            resp = await self.core_v1.create_namespaced_pod_binding(
                md.name, md.namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        except Exception as e:
            raise BindError(f"binding {pod.key} to {node}: {e}") from e
        try:
            status, text = resp.status, (await resp.read()).decode(errors="replace")
        finally:
            resp.release()
        if 200 <= status <= 299:
            return
        if status == 409:
            current = await self._current_node(md.namespace, md.name)
            if current == node:
                return
            raise BindConflict(f"pod {pod.key} is already assigned to node {current!r}")
        if status == 404:
            raise BindConflict(f'pods "{md.name}" not found')
        raise BindError(f"binding {pod.key} to {node}: HTTP {status}: {text[:300]}")

    async def _current_node(self, namespace: str, name: str) -> str:
        resp = await self.core_v1.read_namespaced_pod(
            name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_SECONDS
        )
        try:
            data = await resp.read()
        finally:
            resp.release()
        if resp.status != 200:
            return ""
        return msgspec.json.decode(data, type=_BoundPod).spec.node_name

    async def evict(self, pod: model.Pod, reason: str) -> None:
        md = pod.metadata
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": f"{self.scheduler_name}: {reason}",
            "lastTransitionTime": _now(),
        }
        await self._patch_status(pod, {"conditions": [condition]}, "marking victim")
        try:
            await self.core_v1.delete_namespaced_pod(
                md.name, md.namespace, body={"preconditions": {"uid": md.uid}}, _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        except ApiException as e:
            if e.status not in (404, 409):
                raise
        await self._event(pod, "Normal", "Preempted", "Preempting", reason)

    async def nominate(self, pod: model.Pod, node: str) -> None:
        await self._patch_status(pod, {"nominatedNodeName": node or None}, "setting nominatedNodeName of")

    async def report_unschedulable(self, pod: model.Pod, message: str) -> None:
        uid = pod.metadata.uid
        if self._condition.get(uid) != message:
            condition = {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": _now(),
            }
            if await self._patch_status(pod, {"conditions": [condition]}, "updating PodScheduled of"):
                self._condition.pop(uid, None)  # re-inserted last: the dict is in order of use
                self._condition[uid] = message
                if len(self._condition) > 10000:  # pods gone long ago; forgetting one costs one patch
                    self._condition = dict(list(self._condition.items())[-5000:])
        key = (uid, message)
        now = time.monotonic()
        if now - self._reported.get(key, -EVENT_REPEAT_SECONDS) < EVENT_REPEAT_SECONDS:
            return
        self._reported[key] = now
        if len(self._reported) > 10000:
            self._reported = {k: t for k, t in self._reported.items() if now - t < EVENT_REPEAT_SECONDS}
        await self._event(pod, "Warning", "FailedScheduling", "Scheduling", message)

    async def _patch_status(self, pod: model.Pod, status: dict[str, Any], what: str) -> bool:
        """Strategic-merge ``status`` into the pod's status; a pod already
        gone is fine. False when the API refused it or went away."""
        md = pod.metadata
        try:
            await self.core_v1.patch_namespaced_pod_status(
                md.name, md.namespace, {"status": status}, _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        except ApiException as e:
            if e.status != 404:
                log.warning("%s %s: %s", what, pod.key, e.reason)
                return False
        except (aiohttp.ClientError, OSError, TimeoutError) as e:  # the API server went away: best effort
            log.warning("%s %s: %s", what, pod.key, e)
            return False
        return True

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

    async def report_scheduled(self, pod: model.Pod, node: str) -> None:
        await self._event(pod, "Normal", "Scheduled", "Binding", f"Successfully assigned {pod.key} to {node}")

    async def _event(self, pod: model.Pod, type_: str, reason: str, action: str, note: str) -> None:
        md = pod.metadata
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            # client-go's recorder names events "<object>.<unix nanos in hex>";
            # a generateName ending in "." is rejected by validation.
            "metadata": {"name": f"{md.name}.{time.time_ns():x}", "namespace": md.namespace},
            "eventTime": _now_micro(),
            "reportingController": f"{self.scheduler_name}",
            "reportingInstance": self.identity,
            "action": action,
            "reason": reason,
            "type": type_,
            "note": note[:1024],
            "regarding": {"apiVersion": "v1", "kind": "Pod", "name": md.name, "namespace": md.namespace, "uid": md.uid},
        }
        try:
            resp = await self.events_v1.create_namespaced_event(
                md.namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
            status = resp.status
            resp.release()
            if status >= 300:
                log.warning("event %s for %s: HTTP %d", reason, pod.key, status)
        except Exception as e:  # events are best effort, as in client-go
            log.warning("event %s for %s: %s", reason, pod.key, e)


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
