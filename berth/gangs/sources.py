"""The gang dialects job frameworks write, one registry entry each.

Adding a dialect is one :class:`GangSource` in :data:`SOURCES`: a name (what
``gangSources:`` lists), how a pod names its group (``member``), how the gang
is built from the PodGroup object or the members (``build``), and — where the
dialect's PodGroup has a ``status.phase`` — the phase Berth writes back.

==================  =====================================================  =========================
source              a pod's group                                          the gang's definition
==================  =====================================================  =========================
workload-api        ``spec.schedulingGroup.podGroupName`` (1.36+;          PodGroup scheduling.k8s.io (1.36+),
                    1.35: ``spec.workloadRef``)                            1.35's Workload podGroup
scheduler-plugins   label ``scheduling.x-k8s.io/pod-group``                PodGroup scheduling.x-k8s.io/v1alpha1
volcano             annotation ``scheduling.k8s.io/group-name``            PodGroup scheduling.volcano.sh/v1beta1
                    (else ``scheduling.volcano.sh/group-name``)
kai                 annotation ``pod-group-name``                          PodGroup scheduling.run.ai/v2alpha2
kueue               label (else annotation) ``kueue.x-k8s.io/pod-group-name``  the members' annotation
                                                                           ``kueue.x-k8s.io/pod-group-total-count``
yunikorn            application id (label ``yunikorn.apache.org/app-id``,  the members' annotations
                    annotation ``yunikorn.apache.org/app-id``, labels      ``yunikorn.apache.org/task-groups`` and
                    ``applicationId``, ``spark-app-selector``) of a pod    ``…/schedulingPolicyParameters``
                    with ``yunikorn.apache.org/task-group-name``
==================  =====================================================  =========================

The Workload API's gangs are enforced by GangScheduling (kube-scheduler
v1.37.2's plugin, :mod:`berth.plugins.gangscheduling`), not Coscheduling;
the registry still holds them so that a pod claimed by it and another
dialect is refused naming both, and so the views list them as any gang.
It claims pods only while the index has the Workload API's store
(:attr:`berth.gangs.GangIndex.workload_groups`: the ``GenericWorkload``
gate is on).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from berth import features
from berth.cluster import model, resources, workload_api
from berth.gangs.model import Gang, GangKey, InvalidGang, Membership, PhaseCounts

__all__ = [
    "KUEUE_GROUP_NAME",
    "KUEUE_TOTAL_COUNT",
    "SOURCES",
    "VOLCANO_GROUP_NAME",
    "VOLCANO_GROUP_NAME_LEGACY",
    "WORKLOAD_API",
    "WORKLOAD_API_PERMIT_TIMEOUT_SECONDS",
    "YUNIKORN_POLICY",
    "YUNIKORN_TASK_GROUPS",
    "YUNIKORN_TASK_GROUP_NAME",
    "GangContext",
    "GangSource",
    "workload_gang_key",
    "workload_group_key",
]

# ---------------------------------------------------------------- keys

#: scheduler-plugins ``apis/scheduling/v1alpha1/types.go`` PodGroupLabel.
SCHEDULER_PLUGINS_GROUP = model.LABEL_POD_GROUP
#: Volcano ``pkg/apis/scheduling/v1beta1/labels.go`` (volcano-sh/apis v1.15):
#: KubeGroupNameAnnotationKey, the one Volcano's scheduler reads
#: (``pkg/scheduler/api/job_info.go`` getJobID) …
VOLCANO_GROUP_NAME = "scheduling.k8s.io/group-name"
#: … and VolcanoGroupNameAnnotationKey, which its job controller writes beside it.
VOLCANO_GROUP_NAME_LEGACY = "scheduling.volcano.sh/group-name"
#: ``pkg/apis/batch/v1alpha1/labels.go`` TaskSpecKey: a pod's task (annotation, else label).
VOLCANO_TASK_SPEC = "volcano.sh/task-spec"
#: KAI-Scheduler ``pkg/common/constants/constants.go`` (v0.13): PodGroupAnnotationForPod, SubGroupLabelKey.
KAI_GROUP_NAME = "pod-group-name"
KAI_SUBGROUP = "kai.scheduler/subgroup-name"
#: Kueue ``pkg/controller/jobs/pod/constants/constants.go`` (v0.20): GroupNameLabel
#: (an annotation under the WorkloadIdentifierAnnotations gate), GroupTotalCountAnnotation.
KUEUE_GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
KUEUE_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
#: YuniKorn ``pkg/common/constants/constants.go`` (yunikorn-k8shim master, 2026-08).
YUNIKORN_TASK_GROUP_NAME = "yunikorn.apache.org/task-group-name"
YUNIKORN_TASK_GROUPS = "yunikorn.apache.org/task-groups"
YUNIKORN_POLICY = "yunikorn.apache.org/schedulingPolicyParameters"
#: GetApplicationIDFromPod's order: label app-id, annotation app-id, label applicationId, label spark-app-selector.
YUNIKORN_APP_ID = "yunikorn.apache.org/app-id"
YUNIKORN_APP_ID_LABELS = ("applicationId", "spark-app-selector")
#: yunikorn-core's placeholder timeout when the application sets none (15 minutes).
YUNIKORN_DEFAULT_TIMEOUT_SECONDS = 15 * 60.0

_API_SCHEDULER_PLUGINS = "scheduling.x-k8s.io/v1alpha1"
_API_VOLCANO = "scheduling.volcano.sh/v1beta1"
_API_KAI = "scheduling.run.ai/v2alpha2"


class GangContext(Protocol):
    """What a source may read to build a gang."""

    def pod_group(self, api_version: str, namespace: str, name: str) -> model.PodGroup | None:
        """The PodGroup of that apiVersion's group, or None."""

    def members(self, key: GangKey) -> Sequence[model.Pod]:
        """The gang's members Berth knows (neither terminal nor terminating)."""

    def workload_gang(self, key: GangKey) -> workload_api.Gang | None:
        """The Workload API group ``key`` names, or None while it is unknown."""


@dataclasses.dataclass(frozen=True, slots=True)
class GangSource:
    """One dialect. ``member`` returns the pod's group (None: not this
    dialect's) and raises :class:`InvalidGang` for a key it cannot use;
    ``build`` returns the gang (None: its definition is not there yet, e.g.
    the PodGroup is not created) and raises InvalidGang likewise; ``phase``
    is the ``status.phase`` to write back to the PodGroup (None: the dialect
    has none Berth writes)."""

    name: str
    #: The pod's group as the release ``version`` names it (only the Workload
    #: API's field depends on the release; the other dialects ignore it).
    member: Callable[[model.Pod, features.KubeVersion], Membership | None]
    build: Callable[[GangKey, GangContext], Gang | None]
    #: The PodGroup apiVersion that defines this dialect's gangs ("" : none).
    api_version: str = ""
    phase: Callable[[Gang, PhaseCounts, bool], str] | None = None
    #: What ``build`` returning None means, for the pod's message.
    missing: str = "its PodGroup is not found"


def _origin(group: model.PodGroup) -> str:
    return f"PodGroup {group.api_version} {group.metadata.namespace}/{group.metadata.name}"


def _amounts(group: model.PodGroup, key: GangKey) -> dict[str, int]:
    try:
        return resources.canonical_list(group.spec.min_resources, "spec.minResources")
    except resources.QuantityError as e:
        raise InvalidGang(f"{_origin(group)}: {e}") from None


# ---------------------------------------------------------------- scheduler-plugins


def _sp_member(pod: model.Pod, version: features.KubeVersion) -> Membership | None:
    name = pod.metadata.labels.get(SCHEDULER_PLUGINS_GROUP)
    if not name:
        return None
    return Membership(GangKey("scheduler-plugins", pod.metadata.namespace or "default", name))


def _sp_build(key: GangKey, ctx: GangContext) -> Gang | None:
    group = ctx.pod_group(_API_SCHEDULER_PLUGINS, key.namespace, key.name)
    if group is None:
        return None
    timeout = group.spec.schedule_timeout_seconds
    return Gang(
        key,
        min_member=group.spec.min_member,
        min_resources=_amounts(group, key),
        timeout_seconds=float(timeout) if timeout else None,
        origin=_origin(group),
    )


def _sp_phase(gang: Gang, n: PhaseCounts, admissible: bool) -> str:
    """scheduler-plugins' PodGroup controller (``pkg/controllers/podgroup_controller.go``,
    v0.35): Pending until minMember pods exist, then Scheduling, Running once
    minMember run (Berth sees no finished pods, so never Finished/Failed)."""
    if not n.current:
        return "Pending"
    if n.members < gang.min_member:
        return "Pending"
    if n.current == "Pending":
        return "Scheduling"
    return "Running" if n.running >= gang.min_member else "Scheduling"


# ---------------------------------------------------------------- Volcano


def _volcano_member(pod: model.Pod, version: features.KubeVersion) -> Membership | None:
    ann = pod.metadata.annotations
    kube, legacy = ann.get(VOLCANO_GROUP_NAME, ""), ann.get(VOLCANO_GROUP_NAME_LEGACY, "")
    if kube and legacy and kube != legacy:
        raise InvalidGang(
            f'annotations {VOLCANO_GROUP_NAME}="{kube}" and {VOLCANO_GROUP_NAME_LEGACY}="{legacy}" '
            "name different Volcano PodGroups"
        )
    name = kube or legacy
    if not name:
        return None
    task = ann.get(VOLCANO_TASK_SPEC) or pod.metadata.labels.get(VOLCANO_TASK_SPEC, "")
    return Membership(GangKey("volcano", pod.metadata.namespace or "default", name), task)


def _volcano_build(key: GangKey, ctx: GangContext) -> Gang | None:
    group = ctx.pod_group(_API_VOLCANO, key.namespace, key.name)
    if group is None:
        return None
    return Gang(
        key,
        min_member=group.spec.min_member,
        min_task_member=dict(group.spec.min_task_member),
        min_resources=_amounts(group, key),
        queue=group.spec.queue,
        origin=_origin(group),
    )


def _volcano_phase(gang: Gang, n: PhaseCounts, admissible: bool) -> str:
    """Volcano's PodGroup phases (``pkg/apis/scheduling/v1beta1/types.go``):
    Pending → Inqueue once the enqueue gate passes (minResources free; the
    job controllers create pods only then) → Running once minMember pods
    run; Unknown when some of minMember run and the rest cannot."""
    if gang.min_member and n.running >= gang.min_member:
        return "Running"
    if n.current in ("Running", "Unknown") and n.running > 0:
        return "Unknown"
    if n.current == "Inqueue" or n.placed > 0 or admissible:
        return "Inqueue"
    return "Pending"


# ---------------------------------------------------------------- KAI-Scheduler


def _kai_member(pod: model.Pod, version: features.KubeVersion) -> Membership | None:
    name = pod.metadata.annotations.get(KAI_GROUP_NAME)
    if not name:
        return None
    task = pod.metadata.labels.get(KAI_SUBGROUP, "")
    return Membership(GangKey("kai", pod.metadata.namespace or "default", name), task)


def _kai_build(key: GangKey, ctx: GangContext) -> Gang | None:
    """``spec.minMember`` and, per leaf subgroup (one no other names as its
    ``parent``), its ``minMember`` as the minimum of the pods labelled
    ``kai.scheduler/subgroup-name`` with its name."""
    group = ctx.pod_group(_API_KAI, key.namespace, key.name)
    if group is None:
        return None
    parents = {s.parent for s in group.spec.sub_groups if s.parent}
    per_task = {s.name: s.min_member for s in group.spec.sub_groups if s.name not in parents and s.min_member > 0}
    return Gang(
        key,
        min_member=group.spec.min_member,
        min_task_member=per_task,
        queue=group.spec.queue,
        origin=_origin(group),
    )


# ---------------------------------------------------------------- Kueue plain pods


def _kueue_member(pod: model.Pod, version: features.KubeVersion) -> Membership | None:
    """``utilpod.GetPodGroupName``: the label, else the annotation."""
    name = pod.metadata.labels.get(KUEUE_GROUP_NAME) or pod.metadata.annotations.get(KUEUE_GROUP_NAME, "")
    if not name:
        return None
    return Membership(GangKey("kueue", pod.metadata.namespace or "default", name))


def _kueue_build(key: GangKey, ctx: GangContext) -> Gang | None:
    """A member-count gang with no object: every member carries the group's
    size (``Pod.groupTotalCount``, ``pkg/controller/jobs/pod/pod_controller.go``:
    an integer ≥ 1; Kueue's webhook refuses a group whose members disagree)."""
    counts: dict[str, list[str]] = {}
    for pod in ctx.members(key):
        value = pod.metadata.annotations.get(KUEUE_TOTAL_COUNT)
        if value is not None:
            counts.setdefault(value, []).append(pod.metadata.name)
    if not counts:
        raise InvalidGang(f"annotation {KUEUE_TOTAL_COUNT}: missing on every member of kueue group {key}")
    if len(counts) > 1:
        seen = ", ".join(f'"{v}" ({", ".join(sorted(names)[:3])})' for v, names in sorted(counts.items()))
        raise InvalidGang(f"annotation {KUEUE_TOTAL_COUNT}: the members of kueue group {key} disagree: {seen}")
    (value,) = counts
    try:
        total = int(value)
    except ValueError:
        raise InvalidGang(f'annotation {KUEUE_TOTAL_COUNT}: "{value}" is not an integer') from None
    if total < 1:
        raise InvalidGang(f'annotation {KUEUE_TOTAL_COUNT}: "{value}": group total count should be greater than zero')
    return Gang(key, min_member=total, origin=f"annotation {KUEUE_TOTAL_COUNT}")


# ---------------------------------------------------------------- YuniKorn


def _yunikorn_app_id(pod: model.Pod) -> str:
    """GetApplicationIDFromPod (``pkg/common/utils/utils.go``), less its
    schedulerName check (Berth decides which pods it schedules) and with
    GenerateApplicationID's shared default (``yunikorn-NAMESPACE-autogen``)."""
    labels, ann = pod.metadata.labels, pod.metadata.annotations
    app = labels.get(YUNIKORN_APP_ID) or ann.get(YUNIKORN_APP_ID, "")
    for label in YUNIKORN_APP_ID_LABELS:
        app = app or labels.get(label, "")
    if app.endswith("-uniqueautogen"):
        app = f"{app.removesuffix('-uniqueautogen')}-{pod.metadata.uid}"
    return app or f"yunikorn-{pod.metadata.namespace or 'default'}-autogen"[:63]


def _yunikorn_member(pod: model.Pod, version: features.KubeVersion) -> Membership | None:
    ann = pod.metadata.annotations
    if YUNIKORN_TASK_GROUP_NAME not in ann and YUNIKORN_TASK_GROUPS not in ann:
        return None
    key = GangKey("yunikorn", pod.metadata.namespace or "default", _yunikorn_app_id(pod))
    return Membership(key, ann.get(YUNIKORN_TASK_GROUP_NAME, ""))


@dataclasses.dataclass(frozen=True, slots=True)
class _TaskGroup:
    name: str
    min_member: int
    min_resource: Mapping[str, int]


def _field(raw: Mapping[str, Any], name: str) -> Any:
    """Go's encoding/json matches field names case-insensitively (TaskGroup has no json tags)."""
    for k, v in raw.items():
        if k.lower() == name.lower():
            return v
    return None


@functools.lru_cache(maxsize=256)
def _task_groups(text: str) -> tuple[_TaskGroup, ...]:
    """GetTaskGroupsFromAnnotation (``pkg/cache/utils.go``): a JSON list of
    task groups, each with a name, a positive minMember and a minResource."""
    where = f"annotation {YUNIKORN_TASK_GROUPS}"
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise InvalidGang(f"{where}: not valid JSON: {e}") from None
    if not isinstance(raw, list):
        raise InvalidGang(f"{where}: expected a JSON list of task groups, got {type(raw).__name__}")
    out: list[_TaskGroup] = []
    for i, tg in enumerate(raw):
        if not isinstance(tg, dict):
            raise InvalidGang(f"{where}[{i}]: expected an object, got {type(tg).__name__}")
        name, members, res = _field(tg, "name"), _field(tg, "minMember"), _field(tg, "minResource")
        if not isinstance(name, str) or not name:
            raise InvalidGang(f"{where}[{i}].name: required")
        if not isinstance(members, int) or isinstance(members, bool) or members == 0:
            raise InvalidGang(f"{where}[{i}].minMember: required, a positive integer (got {members!r})")
        if members < 0:
            raise InvalidGang(f"{where}[{i}].minMember: cannot be negative (got {members})")
        if not isinstance(res, dict):
            raise InvalidGang(f"{where}[{i}].minResource: required, a map of resource to quantity")
        try:
            amounts = resources.canonical_list(res, f"{where}[{i}].minResource")
        except resources.QuantityError as e:
            raise InvalidGang(str(e)) from None
        negative = sorted(k for k, v in amounts.items() if v < 0)
        if negative:
            raise InvalidGang(f"{where}[{i}].minResource[{negative[0]}]: cannot be negative")
        out.append(_TaskGroup(name, members, amounts))
    return tuple(out)


def _yunikorn_policy(text: str) -> tuple[float, bool]:
    """GetSchedulingPolicyParam (``pkg/cache/gang_utils.go``): space-separated
    ``placeholderTimeoutInSeconds=N gangSchedulingStyle=Soft|Hard``; default
    Soft and yunikorn-core's timeout. YuniKorn logs and skips a malformed
    parameter; Berth refuses it, so a typo is seen rather than silently Soft."""
    timeout, hard = YUNIKORN_DEFAULT_TIMEOUT_SECONDS, False
    where = f"annotation {YUNIKORN_POLICY}"
    for part in text.split():
        name, eq, value = part.partition("=")
        if not eq:
            raise InvalidGang(f'{where}: "{part}" is not NAME=VALUE')
        if name == "placeholderTimeoutInSeconds":
            try:
                seconds = int(value)
            except ValueError:
                raise InvalidGang(f'{where}: placeholderTimeoutInSeconds "{value}" is not an integer') from None
            if seconds < 0:
                raise InvalidGang(f"{where}: placeholderTimeoutInSeconds cannot be negative (got {seconds})")
            timeout = float(seconds) if seconds else YUNIKORN_DEFAULT_TIMEOUT_SECONDS
        elif name == "gangSchedulingStyle":
            if value not in ("Soft", "Hard"):
                raise InvalidGang(f'{where}: gangSchedulingStyle "{value}" is neither Soft nor Hard')
            hard = value == "Hard"
    return timeout, hard


def _yunikorn_build(key: GangKey, ctx: GangContext) -> Gang | None:
    """The application's task groups, from the member that carries them (the
    originator: Spark's driver, Ray's head); the gang is their minMembers,
    each task group's its own, and minMember x minResource of each (what
    YuniKorn's placeholders reserve)."""
    members = sorted(ctx.members(key), key=lambda p: (p.metadata.creation_timestamp or "", p.metadata.name))
    carrier = next((p for p in members if p.metadata.annotations.get(YUNIKORN_TASK_GROUPS)), None)
    if carrier is None:
        return None
    ann = carrier.metadata.annotations
    groups = _task_groups(ann[YUNIKORN_TASK_GROUPS])
    timeout, hard = _yunikorn_policy(ann.get(YUNIKORN_POLICY, ""))
    names = {g.name for g in groups}
    for pod in members:
        task = pod.metadata.annotations.get(YUNIKORN_TASK_GROUP_NAME, "")
        if task and task not in names:
            raise InvalidGang(
                f'annotation {YUNIKORN_TASK_GROUP_NAME}: pod {pod.metadata.name} names task group "{task}", '
                f"which application {key.name} does not define ({', '.join(sorted(names))})"
            )
    total: dict[str, int] = {}
    for g in groups:
        for res, amount in g.min_resource.items():
            total[res] = total.get(res, 0) + amount * g.min_member
    return Gang(
        key,
        min_member=sum(g.min_member for g in groups),
        min_task_member={g.name: g.min_member for g in groups},
        min_resources=total,
        hard=hard,
        timeout_seconds=timeout,
        origin=f"annotation {YUNIKORN_TASK_GROUPS} on pod {carrier.metadata.name}",
    )


# ---------------------------------------------------------------- Kubernetes' Workload API

WORKLOAD_API = "workload-api"
#: ``permitTimeoutDuration`` (gangscheduling.go v1.37.2): how long members wait at Permit.
WORKLOAD_API_PERMIT_TIMEOUT_SECONDS = 300.0


def workload_gang_key(group: workload_api.GroupKey) -> GangKey:
    """The registry's key of a Workload API group: the PodGroup's name
    (1.36+), or 1.35's ``WORKLOAD/PODGROUP[/REPLICA]`` (object names hold no
    ``/``, so :func:`workload_group_key` reads it back)."""
    if not group.workload:
        return GangKey(WORKLOAD_API, group.namespace, group.name)
    parts = (group.workload, group.name, group.replica_key) if group.replica_key else (group.workload, group.name)
    return GangKey(WORKLOAD_API, group.namespace, "/".join(parts))


def workload_group_key(key: GangKey) -> workload_api.GroupKey:
    """The inverse of :func:`workload_gang_key`."""
    parts = key.name.split("/", 2)
    if len(parts) == 1:
        return workload_api.GroupKey(key.namespace, key.name)
    return workload_api.GroupKey(key.namespace, parts[1], parts[0], parts[2] if len(parts) == 3 else "")


def _wl_member(pod: model.Pod, version: features.KubeVersion) -> Membership | None:
    """``workload_api.group_of``: the field ``version`` reads, as GangScheduling does."""
    group = workload_api.group_of(pod, version)
    return None if group is None else Membership(workload_gang_key(group))


def _wl_build(key: GangKey, ctx: GangContext) -> Gang | None:
    """``gang{minCount}``: minCount members all or nothing, each waiting at
    Permit up to upstream's 5 minutes; ``basic``: no constraint (a group of
    one at a time, ``min_member`` 1)."""
    found = ctx.workload_gang(key)
    if found is None:
        return None
    pg = found.pod_group
    group = found.key
    origin = (
        f"PodGroup {pg.api_version} {group.namespace}/{group.name}"
        if pg is not None
        else f"Workload {group.namespace}/{group.workload} podGroup {group.name}"
    )
    return Gang(
        key,
        min_member=found.min_count if found.min_count is not None else 1,
        timeout_seconds=WORKLOAD_API_PERMIT_TIMEOUT_SECONDS,
        origin=origin,
    )


# ---------------------------------------------------------------- the registry

SOURCES: dict[str, GangSource] = {
    s.name: s
    for s in (
        GangSource(WORKLOAD_API, _wl_member, _wl_build),
        GangSource("scheduler-plugins", _sp_member, _sp_build, _API_SCHEDULER_PLUGINS, _sp_phase),
        GangSource("volcano", _volcano_member, _volcano_build, _API_VOLCANO, _volcano_phase),
        GangSource("kai", _kai_member, _kai_build, _API_KAI),
        GangSource("kueue", _kueue_member, _kueue_build, missing="no member is known"),
        GangSource(
            "yunikorn",
            _yunikorn_member,
            _yunikorn_build,
            missing=f"no member carries the {YUNIKORN_TASK_GROUPS} annotation yet",
        ),
    )
}
