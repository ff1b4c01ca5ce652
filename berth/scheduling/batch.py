"""The batch API's verbs: Submit pods (optionally as a gang) into the
embedded cluster, and Cancel pending ones. Both go through the default
source's :class:`~berth.cluster.sources.Source` interface; a source that
takes no pods from clients (Kubernetes) refuses with FeedRefused."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import msgspec

from berth.cluster import manifests, model, validation
from berth.cluster.sources import FeedRefused
from berth.errors import FailedPrecondition, InvalidArgument
from berth.framework.decision import DecisionKind
from berth.scheduling.core import LEGACY_SCHEDULER_ANNOTATION, Core, scheduler_name_of

__all__ = ["CancelResult", "SubmitResult", "cancel", "submit"]


@dataclasses.dataclass(slots=True)
class SubmitResult:
    pod: str  # NAMESPACE/NAME
    uid: str = ""
    accepted: bool = False
    message: str = ""


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
    group_name = ""
    if group is not None:
        group.metadata.namespace = group.metadata.namespace or "default"
        try:
            validation.validate_pod_group(group)
        except ValueError as e:
            raise InvalidArgument(f"group.{e}") from None
        group_name = group.metadata.name
    results: list[SubmitResult] = []
    accepted: dict[str, model.Pod] = {}  # key -> pod, this request's
    uids: dict[str, str] = {}  # uid -> key, this request's
    for i, pod in enumerate(pods):
        at = paths[i] if paths is not None else f"pods[{i}]"
        md = pod.metadata
        md.namespace = md.namespace or "default"
        if group_name:
            md.labels = {**md.labels, model.LABEL_POD_GROUP: group_name}
        ours, note = _profile_of(core, pod)
        if not ours:
            results.append(SubmitResult(pod.key, message=f"{at}.{note}"))
            continue
        try:
            validation.validate_pod(pod)
            manifests.validate_pod(pod)
        except ValueError as e:
            results.append(SubmitResult(pod.key, message=f"{at}.{e}"))
            continue
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
                    )
                )
            continue
        holder = uids.get(md.uid) or _key_of(core.pods.get(md.uid))
        if holder is not None:
            results.append(
                SubmitResult(pod.key, message=f"{at}.metadata.uid: already exists: {md.uid!r} is pod {holder}'s")
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
                core.pod_groups.remove(group.metadata.namespace, group_name)
        if isinstance(e, FeedRefused):
            raise FailedPrecondition(str(e)) from None
        raise
    return results


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
