"""The batch API's verbs: Submit pods (optionally as a gang) and Cancel
pending ones.

- Embedded Berth (:func:`submit`, :func:`cancel`): through the default
  source's :class:`~berth.cluster.sources.Source` interface.
- Kubernetes-backed Berth (:func:`submit_as`, :func:`cancel_as`): the pods
  (and the gang's scheduler-plugins PodGroup) are created and deleted
  through the API server **as the caller** (:class:`ApiServerWrites`, the
  adapter's), so its RBAC, admission and Pod Security decide exactly as for
  ``kubectl create``; the informers then bring the pods back into the cache
  like any other. Each pod is judged first as :func:`submit` judges it
  (profile, validation), and a refusal keeps the API server's message and
  its StatusReason (``SubmitResult.reason``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec

from berth import access, errors
from berth.cluster import manifests, model, validation
from berth.cluster.sources import FeedRefused
from berth.errors import FailedPrecondition, InvalidArgument
from berth.framework.decision import DecisionKind
from berth.scheduling.core import LEGACY_SCHEDULER_ANNOTATION, Core, scheduler_name_of

__all__ = [
    "ApiServerWrites",
    "CancelResult",
    "SubmitResult",
    "caller_writes",
    "cancel",
    "cancel_as",
    "submit",
    "submit_as",
]

#: Pods created at once for one Submit (each a POST the caller waits for).
CREATES_AT_ONCE = 8

# SubmitResult.reason: the API server's StatusReason words
# (k8s.io/apimachinery/pkg/apis/meta/v1/types.go, v0.37.2).
INVALID = "Invalid"
ALREADY_EXISTS = "AlreadyExists"
#: Each error kind's StatusReason (the first match wins).
REASONS: tuple[tuple[type[errors.BerthError], str], ...] = (
    (errors.InvalidArgument, INVALID),
    (errors.AlreadyExists, ALREADY_EXISTS),
    (errors.PermissionDenied, "Forbidden"),
    (errors.NotFound, "NotFound"),
    (errors.Unauthenticated, "Unauthorized"),
    (errors.ResourceExhausted, "TooManyRequests"),
    (errors.Unavailable, "ServiceUnavailable"),
)


def _reason_of(e: errors.BerthError) -> str:
    return next((r for kind, r in REASONS if isinstance(e, kind)), "InternalError")


@runtime_checkable
class ApiServerWrites(Protocol):
    """The writes of a Kubernetes-backed Berth's batch API, made as the
    caller (the Kubernetes adapter's ``CallerWrites``); they raise
    :mod:`berth.errors` kinds with the API server's message."""

    async def create_pod(self, caller: access.Caller, pod: Mapping[str, Any]) -> Mapping[str, Any]: ...

    async def delete_pod(self, caller: access.Caller, namespace: str, name: str, uid: str) -> None: ...

    async def create_pod_group(self, caller: access.Caller, group: Mapping[str, Any]) -> Mapping[str, Any]: ...


def caller_writes(core: Core) -> ApiServerWrites | None:
    """How this Berth writes as its callers, where its pods live in an API server."""
    writes = getattr(core.default_source, "as_caller", None)
    return writes if isinstance(writes, ApiServerWrites) else None


@dataclasses.dataclass(slots=True)
class SubmitResult:
    pod: str  # NAMESPACE/NAME
    uid: str = ""
    accepted: bool = False
    message: str = ""
    #: Why not accepted in one word (the API server's StatusReason words).
    reason: str = ""


@dataclasses.dataclass(slots=True)
class CancelResult:
    cancelled: bool
    message: str = ""


def submit(
    core: Core,
    pods: Sequence[model.Pod],
    group: model.PodGroup | None = None,
    *,
    paths: Sequence[str] | None = None,
) -> list[SubmitResult]:
    """Accept every valid pod not already known; one result per input pod, in order.

    Each pod is judged on its own, as the response has a verdict per pod
    (YuniKorn answers each allocation ask the same way; a gang's all-or-nothing
    is its PodGroup's ``minMember``, enforced when it is scheduled). A name is
    one pod's: the first pod with a name is accepted, a later *different* pod
    with that name (in this request or already known) is rejected as already
    existing, and so is a uid another pod holds. Submitting the same pod again
    is idempotent: accepted, "already submitted". A rejection names the pod's
    field as ``paths[i]`` (default ``pods[i]``): an adapter that left out the
    pods it could not convert keeps its request's indices.

    A pod must be for one of Berth's profiles: nothing else would ever
    schedule it here. One without a scheduler name is given the only
    profile's, as the API server defaults ``schedulerName`` to the default
    scheduler's (the result's message says so); with several profiles it is
    refused, as is a name no profile has, with the profiles named.
    """
    if core.scheduler is None:
        raise FailedPrecondition("the scheduling loop is not running on this replica")
    feed = core.default_source
    if feed is None:
        raise FailedPrecondition("this Berth has no cluster to submit pods to")
    group_name = _group_name(group)
    results: list[SubmitResult] = []
    accepted: dict[str, model.Pod] = {}  # key -> pod, this request's
    uids: dict[str, str] = {}  # uid -> key, this request's
    for i, pod in enumerate(pods):
        at = paths[i] if paths is not None else f"pods[{i}]"
        refusal, note = _judged(core, pod, at, group_name)
        if refusal is not None:
            results.append(refusal)
            continue
        md = pod.metadata
        md.uid = md.uid or manifests.default_uid(md.namespace, md.name)
        existing = accepted.get(pod.key) or core.pods.by_key(pod.key)
        if existing is not None:
            if existing.metadata.uid == md.uid and _same_pod(existing, pod):
                results.append(SubmitResult(pod.key, md.uid, True, "already submitted"))
            else:
                results.append(
                    SubmitResult(
                        pod.key,
                        existing.metadata.uid,
                        message=f"{at}.metadata.name: already exists: a different pod {pod.key} "
                        f"(uid {existing.metadata.uid!r}) has this name",
                        reason=ALREADY_EXISTS,
                    )
                )
            continue
        holder = uids.get(md.uid) or _key_of(core.pods.get(md.uid))
        if holder is not None:
            results.append(
                SubmitResult(
                    pod.key,
                    message=f"{at}.metadata.uid: already exists: {md.uid!r} is pod {holder}'s",
                    reason=ALREADY_EXISTS,
                )
            )
            continue
        accepted[pod.key] = pod
        uids[md.uid] = pod.key
        results.append(SubmitResult(pod.key, md.uid, True, note))
    previous = core.pod_groups.get(group.metadata.namespace, group_name) if group is not None else None
    try:
        if group is not None:
            core.on_pod_group(group)
        feed.upsert_pods(accepted.values())
    except Exception as e:
        # The pods were refused as a whole: so is the group.
        if group is not None:
            if previous is not None:
                core.on_pod_group(previous)
            else:
                core.on_pod_group_delete(group)
        if isinstance(e, FeedRefused):
            raise FailedPrecondition(str(e)) from None
        raise
    return results


def _group_name(group: model.PodGroup | None) -> str:
    """The gang's name ("" none), its namespace defaulted; InvalidArgument
    naming ``group.`` the field when the API server would refuse it."""
    if group is None:
        return ""
    if group.api_version != model.PodGroup().api_version:
        # The members get scheduler-plugins' label: a gang Submit makes is its.
        raise InvalidArgument(
            f"group.dialect: Submit makes scheduler-plugins gangs (its pods get the label "
            f"{model.LABEL_POD_GROUP}), not {group.api_version} ones; feed those with UpsertPodGroups"
        )
    group.metadata.namespace = group.metadata.namespace or "default"
    try:
        validation.validate_pod_group(group)
    except ValueError as e:
        raise InvalidArgument(f"group.{e}") from None
    return group.metadata.name


def _judged(core: Core, pod: model.Pod, at: str, group_name: str) -> tuple[SubmitResult | None, str]:
    """One submitted pod judged on its own, the same in both modes: its
    namespace defaulted and its gang label set; (a refusal, "") when no
    profile of Berth's schedules it or the API server would refuse it,
    else (None, a note for its result, "" none)."""
    md = pod.metadata
    md.namespace = md.namespace or "default"
    if group_name:
        md.labels = {**md.labels, model.LABEL_POD_GROUP: group_name}
    ours, note = _profile_of(core, pod)
    if not ours:
        return SubmitResult(pod.key, message=f"{at}.{note}", reason=INVALID), ""
    try:
        validation.validate_pod(pod)
        manifests.validate_pod(pod)
    except ValueError as e:
        return SubmitResult(pod.key, message=f"{at}.{e}", reason=INVALID), ""
    return None, note


def _profile_of(core: Core, pod: model.Pod) -> tuple[bool, str]:
    """(True, "") when one of Berth's profiles schedules ``pod``; (True,
    a note) when it names no scheduler and Berth has one profile, whose name
    it is given; else (False, why it is refused)."""
    if core.responsible_for(pod) is not None:
        return True, ""
    profiles = tuple(core.frameworks)
    if not pod.spec.scheduler_name and LEGACY_SCHEDULER_ANNOTATION not in pod.metadata.annotations:
        if len(profiles) == 1:
            pod.spec.scheduler_name = profiles[0]
            return True, f'spec.schedulerName defaulted to "{profiles[0]}", the only profile'
        names = ", ".join(profiles)
        return False, f"spec.schedulerName: Required value: Berth has several profiles ({names}); name one"
    return False, str(validation.not_supported("spec.schedulerName", scheduler_name_of(pod), profiles))


def _same_pod(existing: model.Pod, pod: model.Pod) -> bool:
    """Whether ``pod`` is ``existing`` submitted again (its node and status
    aside: those are Berth's doing since)."""
    return (
        msgspec.structs.replace(existing.spec, node_name=pod.spec.node_name) == pod.spec
        and existing.metadata.labels == pod.metadata.labels
        and existing.metadata.annotations == pod.metadata.annotations
    )


def _key_of(pod: model.Pod | None) -> str | None:
    return None if pod is None else pod.key


def cancel(core: Core, namespace: str, name: str) -> CancelResult:
    """Delete a pod that is still pending; a bound or foreign pod is refused."""
    if core.scheduler is None:
        raise FailedPrecondition("the scheduling loop is not running on this replica")
    key = model.pod_key(namespace, name)
    pod = core.pods.by_key(key)
    if pod is None:
        return CancelResult(False, f"pod {key} not found")
    if pod.spec.node_name:
        return CancelResult(False, f"pod {key} is already bound to {pod.spec.node_name}")
    if core.responsible_for(pod) is None:
        return CancelResult(False, f"pod {key} is not scheduled by Berth (schedulerName {pod.spec.scheduler_name!r})")
    source = core.pods.source_of(pod.metadata.uid)
    if source is None:
        return CancelResult(False, f"pod {key} is not Berth's to cancel")
    try:
        source.delete_pods([key])
    except FeedRefused as e:
        return CancelResult(False, f"pod {key}: {e}")
    core.scheduler.emit(DecisionKind.CANCELLED, pod)
    return CancelResult(True)


# ------------------------------------------------------------ Kubernetes mode


async def submit_as(
    core: Core,
    writes: ApiServerWrites,
    caller: access.Caller,
    pods: Sequence[model.Pod],
    group: model.PodGroup | None = None,
    *,
    bodies: Sequence[Mapping[str, Any] | None] | None = None,
    paths: Sequence[str] | None = None,
) -> list[SubmitResult]:
    """Create ``pods`` (and ``group``) through the API server as ``caller``;
    one result per pod, in order.

    ``bodies[i]`` is pod i as the client wrote it (a v1 Pod), created as it
    is but for the group label and a defaulted ``schedulerName``; without
    one the pod is created from Berth's model (which has no images: the API
    server will say so). A pod judged here as :func:`submit` judges it
    (profile, validation) is refused without a request; a pod already in
    the cache and unchanged is "already submitted". When the API server
    refuses every pod as forbidden, the whole call is (PermissionDenied):
    the caller may not create pods there.
    """
    if core.scheduler is None:
        raise FailedPrecondition("the scheduling loop is not running on this replica")
    group_name = _group_name(group)
    results: list[SubmitResult | None] = []
    todo: list[tuple[int, model.Pod, dict[str, Any], str]] = []
    for i, pod in enumerate(pods):
        at = paths[i] if paths is not None else f"pods[{i}]"
        refusal, note = _judged(core, pod, at, group_name)
        if refusal is not None:
            results.append(refusal)
            continue
        existing = core.pods.by_key(pod.key)
        if existing is not None and _same_pod(existing, pod):
            results.append(SubmitResult(pod.key, existing.metadata.uid, True, "already submitted"))
            continue
        body = bodies[i] if bodies is not None and i < len(bodies) else None
        results.append(None)
        todo.append((i, pod, _pod_body(pod, body, group_name), note))
    if group is not None and todo:
        await writes.create_pod_group(caller, _group_body(group))
    gate = asyncio.Semaphore(CREATES_AT_ONCE)

    async def create(i: int, pod: model.Pod, body: dict[str, Any], note: str) -> None:
        at = paths[i] if paths is not None else f"pods[{i}]"
        async with gate:
            try:
                created = await writes.create_pod(caller, body)
            except errors.BerthError as e:
                results[i] = SubmitResult(pod.key, message=f"{at}: {e}", reason=_reason_of(e))
                return
        uid = str(created.get("metadata", {}).get("uid", ""))
        results[i] = SubmitResult(pod.key, uid, True, note)

    async with asyncio.TaskGroup() as tg:
        for i, pod, body, note in todo:
            tg.create_task(create(i, pod, body, note))
    done = [r for r in results if r is not None]
    refused = [r for r in done if not r.accepted]
    if todo and refused and len(refused) == len(done) and all(r.reason == "Forbidden" for r in refused):
        raise errors.PermissionDenied(refused[0].message.split(": ", 1)[-1])
    return done


def _pod_body(pod: model.Pod, body: Mapping[str, Any] | None, group_name: str) -> dict[str, Any]:
    """The object to create: the client's own, or Berth's model of it."""
    if body is None:
        out: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", **model.to_builtins(pod)}
        out.pop("status", None)
        out["metadata"].pop("uid", None)
        return out
    out = {**body, "apiVersion": "v1", "kind": "Pod"}
    md = dict(out.get("metadata") or {})
    md["namespace"] = pod.metadata.namespace
    if group_name:
        md["labels"] = {**(md.get("labels") or {}), model.LABEL_POD_GROUP: group_name}
    out["metadata"] = md
    spec = dict(out.get("spec") or {})
    spec.setdefault("schedulerName", pod.spec.scheduler_name)
    out["spec"] = spec
    return out


def _group_body(group: model.PodGroup) -> dict[str, Any]:
    md = group.metadata
    out: dict[str, Any] = model.to_builtins(group)
    out["apiVersion"], out["kind"] = "scheduling.x-k8s.io/v1alpha1", "PodGroup"
    out["metadata"] = {"name": md.name, "namespace": md.namespace, **({"labels": md.labels} if md.labels else {})}
    out.setdefault("spec", {})
    return out


async def cancel_as(
    core: Core, writes: ApiServerWrites, caller: access.Caller, namespace: str, name: str
) -> CancelResult:
    """Delete a pending pod of Berth's through the API server as ``caller``
    (its RBAC decides: PermissionDenied when it may not delete pods there)."""
    if core.scheduler is None:
        raise FailedPrecondition("the scheduling loop is not running on this replica")
    key = model.pod_key(namespace, name)
    pod = core.pods.by_key(key)
    if pod is None:
        return CancelResult(False, f"pod {key} not found")
    if pod.spec.node_name:
        return CancelResult(False, f"pod {key} is already bound to {pod.spec.node_name}")
    if core.responsible_for(pod) is None:
        return CancelResult(False, f"pod {key} is not scheduled by Berth (schedulerName {pod.spec.scheduler_name!r})")
    try:
        await writes.delete_pod(caller, namespace, name, pod.metadata.uid)
    except errors.NotFound:
        return CancelResult(False, f"pod {key} not found")
    core.scheduler.emit(DecisionKind.CANCELLED, pod)
    return CancelResult(True)
