"""The batch API's verbs: Submit pods (optionally as a gang) into the
embedded cluster, and Cancel pending ones. Both go through the default
source's :class:`~berth.cluster.sources.Source` interface; a source that
takes no pods from clients (Kubernetes) refuses with FeedRefused."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from berth.cluster import manifests, model
from berth.cluster.sources import FeedRefused
from berth.framework.decision import DecisionKind
from berth.scheduling.core import Core, VerbError

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


def submit(core: Core, pods: Sequence[model.Pod], group: model.PodGroup | None = None) -> list[SubmitResult]:
    """Accept every valid pod not already known; one result per input pod, in order."""
    if core.scheduler is None:
        raise VerbError("the scheduling loop is not running on this replica")
    feed = core.default_source
    if feed is None:
        raise VerbError("this Berth has no cluster to submit pods to")
    group_name = ""
    if group is not None:
        if not group.metadata.name:
            raise VerbError("group.metadata.name: required")
        if group.spec.min_member < 1:
            raise VerbError("group.min_member: must be at least 1")
        group.metadata.namespace = group.metadata.namespace or "default"
        group_name = group.metadata.name
    results: list[SubmitResult] = []
    accepted: list[model.Pod] = []
    for i, pod in enumerate(pods):
        md = pod.metadata
        md.namespace = md.namespace or "default"
        if group_name:
            md.labels = {**md.labels, model.LABEL_POD_GROUP: group_name}
        try:
            manifests.validate_pod(pod)
        except manifests.ManifestError as e:
            results.append(SubmitResult(pod.key, message=f"pods[{i}]: {e}"))
            continue
        md.uid = md.uid or manifests.default_uid(md.namespace, md.name)
        existing = core.pods.by_key(pod.key)
        if existing is not None:
            same = existing.metadata.uid == md.uid
            message = "already submitted" if same else "a different pod with this name exists"
            results.append(SubmitResult(pod.key, existing.metadata.uid, same, message))
            continue
        accepted.append(pod)
        results.append(SubmitResult(pod.key, md.uid, True))
    try:
        if group is not None:
            core.on_pod_group(group)
        feed.upsert_pods(accepted)
    except FeedRefused as e:
        raise VerbError(str(e)) from None
    return results


def cancel(core: Core, namespace: str, name: str) -> CancelResult:
    """Delete a pod that is still pending; a bound or foreign pod is refused."""
    if core.scheduler is None:
        raise VerbError("the scheduling loop is not running on this replica")
    key = model.pod_key(namespace, name)
    pod = core.pods.by_key(key)
    if pod is None:
        return CancelResult(False, f"pod {key} not found")
    if pod.spec.node_name:
        return CancelResult(False, f"pod {key} is already bound to {pod.spec.node_name}")
    source = core.pods.source_of(pod.metadata.uid)
    if source is None:
        return CancelResult(False, f"pod {key} is not Berth's to cancel")
    try:
        source.delete_pods([key])
    except FeedRefused as e:
        return CancelResult(False, f"pod {key}: {e}")
    core.scheduler.emit(DecisionKind.CANCELLED, pod)
    return CancelResult(True)
