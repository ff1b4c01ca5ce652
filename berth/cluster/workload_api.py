"""Kubernetes' Workload API (``scheduling.k8s.io``, feature gate
``GenericWorkload``) in Berth's model: the PodGroups and Workloads of each
release, a pod's reference to its group, and the store the GangScheduling
plugin reads.

What each release serves (k8s.io/api ``scheduling/*/types.go``):

=======  ======================  =============================================
release  objects                  a pod's reference
=======  ======================  =============================================
1.35     Workload v1alpha1        ``spec.workloadRef{name, podGroup,
         (``spec.podGroups[]``:   podGroupReplicaKey}``: the group is the
         ``name``, ``policy``)    Workload's podGroup, one per replica key
1.36     PodGroup v1alpha2        ``spec.schedulingGroup{podGroupName}``
         (``spec.schedulingPolicy``,
         ``podGroupTemplateRef``); Workload v1alpha2 (templates)
1.37     PodGroup v1beta1 and     ``spec.schedulingGroup{podGroupName}``
         v1alpha3 (``spec.workloadRef{workloadName, templateName}``,
         ``schedulingPolicy``, ``disruptionMode{single|all}``,
         ``priorityClassName``); Workload likewise
=======  ======================  =============================================

A group's policy is ``basic`` (no constraint) or ``gang{minCount}``. The
scheduler writes the PodGroup's status condition ``PodGroupScheduled``
(1.36) / ``PodGroupInitiallyScheduled`` (1.37) with reasons ``Scheduled``,
``Unschedulable`` and ``SchedulerError``
(kubernetes v1.37.2 ``pkg/scheduler/schedule_one_podgroup.go``).

The core objects here are one tolerant struct per kind: the fields of every
served version, each optional, so one decoder reads what any release's API
server or a manifest sends; :meth:`GroupStore.gang` turns either shape into a
:class:`Gang`.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Iterator

import msgspec

from berth import errors, features
from berth.cluster import model

__all__ = [
    "API_GROUP",
    "CONDITION_DISRUPTION_TARGET",
    "FIRST_POD_GROUP_RELEASE",
    "REASON_SCHEDULED",
    "REASON_SCHEDULER_ERROR",
    "REASON_UNSCHEDULABLE",
    "Condition",
    "Gang",
    "GroupKey",
    "GroupStore",
    "PodGroup",
    "Workload",
    "condition_type",
    "decode",
    "group_of",
    "may_help",
    "served_versions",
]

API_GROUP = "scheduling.k8s.io"

#: PodGroup status reasons (k8s.io/api v0.37.2 scheduling/v1beta1
#: ``PodGroupReason*``; ``Scheduled`` is the literal schedule_one_podgroup.go writes).
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
CONDITION_DISRUPTION_TARGET = "DisruptionTarget"

#: The first release with standalone PodGroups (and their status).
FIRST_POD_GROUP_RELEASE = features.KubeVersion(1, 36)

_VERSIONS: dict[features.KubeVersion, tuple[str, ...]] = {
    # PodGroups of 1.36 and 1.37 (newest first: the first served one is read);
    # 1.35 has Workloads only.
    features.KubeVersion(1, 35): (),
    features.KubeVersion(1, 36): ("v1alpha2",),
    features.KubeVersion(1, 37): ("v1beta1", "v1alpha3"),
}
#: Workloads are read only where pods name them (1.35); from 1.36 a pod names
#: its PodGroup, which carries the policy.
_WORKLOAD_VERSIONS: dict[features.KubeVersion, tuple[str, ...]] = {
    features.KubeVersion(1, 35): ("v1alpha1",),
}


def served_versions(version: features.KubeVersion, kind: str) -> tuple[str, ...]:
    """The ``scheduling.k8s.io`` versions of ``kind`` (``PodGroup`` or
    ``Workload``) that ``version``'s API server may serve, newest first."""
    table = _VERSIONS if kind == "PodGroup" else _WORKLOAD_VERSIONS
    return table.get(version, ())


def condition_type(version: features.KubeVersion) -> str:
    """The condition the scheduler sets on a PodGroup once it placed it:
    ``PodGroupScheduled`` in 1.36 (v1alpha2), ``PodGroupInitiallyScheduled`` from 1.37."""
    return "PodGroupScheduled" if version < features.KubeVersion(1, 37) else "PodGroupInitiallyScheduled"


# ---------------------------------------------------------------- objects


class _Obj(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    pass


class GangSchedulingPolicy(_Obj):
    min_count: int | None = None


class SchedulingPolicy(_Obj):
    """``basic`` or ``gang`` (v1alpha1's ``policy``, later ``schedulingPolicy``)."""

    basic: dict[str, object] | None = None
    gang: GangSchedulingPolicy | None = None


class DisruptionMode(_Obj):
    """1.37's union (``single`` | ``all``); 1.36 wrote the string ``Pod`` or ``PodGroup``."""

    single: dict[str, object] | None = None
    all: dict[str, object] | None = None


class WorkloadReference(_Obj):
    """A PodGroup's Workload and template (1.37 ``spec.workloadRef``)."""

    workload_name: str = ""
    template_name: str = ""


class WorkloadPodGroupTemplateReference(_Obj):
    workload_name: str = ""
    pod_group_template_name: str = ""


class PodGroupTemplateReference(_Obj):
    """1.36 ``spec.podGroupTemplateRef.workload``."""

    workload: WorkloadPodGroupTemplateReference | None = None


class Condition(_Obj):
    """``metav1.Condition``."""

    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    observed_generation: int | None = None
    last_transition_time: str | None = None


class ObjectMeta(model.ObjectMeta):
    """ObjectMeta with ``generation`` (a condition's ``observedGeneration``)."""

    generation: int = 0


class TopologyConstraint(_Obj):
    """1.37's ``schedulingConstraints.topology[]`` (v1alpha3 ``types.go``
    TopologyConstraint): all the group's pods in one domain of ``key``."""

    key: str = ""


class PodGroupSchedulingConstraints(_Obj):
    topology: list[TopologyConstraint] = []


class PodGroupSpec(_Obj):
    parent_composite_pod_group_name: str | None = None
    workload_ref: WorkloadReference | None = None
    pod_group_template_ref: PodGroupTemplateReference | None = None
    scheduling_policy: SchedulingPolicy = msgspec.field(default_factory=SchedulingPolicy)
    disruption_mode: DisruptionMode | str | None = None
    priority_class_name: str = ""
    priority: int | None = None
    preemption_policy: str | None = None
    #: TopologyAwareWorkloadScheduling (alpha, off in 1.37): read by TopologyGang.
    scheduling_constraints: PodGroupSchedulingConstraints | None = None


class PodGroupStatus(_Obj):
    conditions: list[Condition] = []


class PodGroup(_Obj):
    """A standalone PodGroup (``scheduling.k8s.io`` v1alpha2, v1alpha3, v1beta1)."""

    api_version: str = f"{API_GROUP}/v1beta1"
    kind: str = "PodGroup"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodGroupSpec = msgspec.field(default_factory=PodGroupSpec)
    status: PodGroupStatus = msgspec.field(default_factory=PodGroupStatus)

    @property
    def key(self) -> str:
        return model.pod_key(self.metadata.namespace, self.metadata.name)


class WorkloadPodGroup(_Obj):
    """A Workload's group: v1alpha1 ``podGroups[]`` (``policy``) or a later
    ``podGroupTemplates[]`` (``schedulingPolicy``)."""

    name: str = ""
    policy: SchedulingPolicy | None = None
    scheduling_policy: SchedulingPolicy | None = None

    @property
    def effective_policy(self) -> SchedulingPolicy:
        return self.scheduling_policy or self.policy or SchedulingPolicy()


class WorkloadSpec(_Obj):
    pod_groups: list[WorkloadPodGroup] = []
    pod_group_templates: list[WorkloadPodGroup] = []


class Workload(_Obj):
    api_version: str = f"{API_GROUP}/v1alpha1"
    kind: str = "Workload"
    metadata: model.ObjectMeta = msgspec.field(default_factory=model.ObjectMeta)
    spec: WorkloadSpec = msgspec.field(default_factory=WorkloadSpec)

    def group(self, name: str) -> WorkloadPodGroup | None:
        for g in (*self.spec.pod_groups, *self.spec.pod_group_templates):
            if g.name == name:
                return g
        return None


_KNOWN = {f"{API_GROUP}/{v}" for v in ("v1alpha1", "v1alpha2", "v1alpha3", "v1beta1")}


def decode(obj: object, *, default_namespace: str = "default") -> PodGroup | Workload:
    """A decoded ``scheduling.k8s.io`` PodGroup or Workload document, checked
    as far as the scheduler relies on it; :class:`berth.errors.InvalidArgument`
    naming the field otherwise."""
    if not isinstance(obj, dict):
        raise errors.InvalidArgument("expected an object")
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if api_version not in _KNOWN:
        raise errors.InvalidArgument(f"apiVersion: {api_version!r} is not one of {', '.join(sorted(_KNOWN))}")
    typ: type[PodGroup | Workload]
    if kind == "PodGroup":
        if api_version == f"{API_GROUP}/v1alpha1":
            raise errors.InvalidArgument("apiVersion: scheduling.k8s.io/v1alpha1 has no PodGroup kind (1.35: Workload)")
        typ = PodGroup
    elif kind == "Workload":
        typ = Workload
    else:
        raise errors.InvalidArgument(f"kind: {kind!r} is not PodGroup or Workload")
    try:
        out = msgspec.convert(obj, typ)
    except msgspec.ValidationError as e:
        raise errors.InvalidArgument(str(e)) from None
    if not out.metadata.name:
        raise errors.InvalidArgument("metadata.name: Required value")
    out.metadata.namespace = out.metadata.namespace or default_namespace
    policies = (
        [("spec.schedulingPolicy", out.spec.scheduling_policy)]
        if isinstance(out, PodGroup)
        else [
            (f"spec.podGroups[{g.name}]", g.effective_policy)
            for g in (*out.spec.pod_groups, *out.spec.pod_group_templates)
        ]
    )
    for where, policy in policies:
        if (policy.basic is None) == (policy.gang is None):
            raise errors.InvalidArgument(f"{where}: exactly one of basic or gang must be set")
        if policy.gang is not None and (policy.gang.min_count is None or policy.gang.min_count < 1):
            raise errors.InvalidArgument(f"{where}.gang.minCount: must be greater than zero")
    return out


# ---------------------------------------------------------------- membership


@dataclasses.dataclass(frozen=True, slots=True)
class GroupKey:
    """Which group a pod is in: a standalone PodGroup (``workload`` empty),
    or 1.35's Workload podGroup and replica key."""

    namespace: str
    name: str
    workload: str = ""
    replica_key: str = ""

    def __str__(self) -> str:
        if not self.workload:
            return f"{self.namespace}/{self.name}"
        replica = f"[{self.replica_key}]" if self.replica_key else ""
        return f"{self.namespace}/{self.workload}/{self.name}{replica}"


def group_of(pod: model.Pod, version: features.KubeVersion) -> GroupKey | None:
    """The group ``pod`` names in the field its release reads: 1.35's
    ``spec.workloadRef``, 1.36+'s ``spec.schedulingGroup.podGroupName``."""
    spec, ns = pod.spec, pod.metadata.namespace
    if version < features.KubeVersion(1, 36):
        ref = spec.workload_ref
        if ref is None or not ref.name:
            return None
        return GroupKey(ns, ref.pod_group, ref.name, ref.pod_group_replica_key)
    sg = spec.scheduling_group
    if sg is None or not sg.pod_group_name:
        return None
    return GroupKey(ns, sg.pod_group_name)


@dataclasses.dataclass(frozen=True, slots=True)
class Gang:
    """A group as the scheduler sees it: ``min_count`` None for a basic policy."""

    key: GroupKey
    min_count: int | None
    #: The PodGroup object (None for 1.35's Workload groups, which have no status).
    pod_group: PodGroup | None = None


def _min_count(policy: SchedulingPolicy) -> int | None:
    return (policy.gang.min_count or 1) if policy.gang is not None else None


def may_help(old: PodGroup | Workload | None, new: PodGroup | Workload) -> bool:
    """Whether a PodGroup (Workload) event may let its waiting members run:
    added, or a gang's minCount lowered (GangScheduling's
    isSchedulableAfterPodGroupAdded / Updated, v1.37.2). A status write — the
    scheduler's own conditions — wakes nobody."""
    if old is None:
        return True
    before, after = _policies(old), _policies(new)
    for name, policy in after.items():
        was = before.get(name)
        if policy.gang is None or was is None or was.gang is None:
            continue
        if (policy.gang.min_count or 1) < (was.gang.min_count or 1):
            return True
    return False


def _policies(obj: PodGroup | Workload) -> dict[str, SchedulingPolicy]:
    if isinstance(obj, PodGroup):
        return {"": obj.spec.scheduling_policy}
    return {g.name: g.effective_policy for g in (*obj.spec.pod_groups, *obj.spec.pod_group_templates)}


# ---------------------------------------------------------------- the store

#: Writes one condition to a PodGroup's status (the Kubernetes source).
ConditionWriter = Callable[[PodGroup, Condition], None]


class GroupStore:
    """The PodGroups and Workloads Berth knows, and the conditions the
    scheduler sets on them: kept here at once (so a second report of the same
    outcome writes nothing) and handed to :attr:`writer` when one is set."""

    def __init__(self, version: features.KubeVersion = features.NEWEST) -> None:
        #: The release whose pod field names the group (:func:`group_of`).
        self.version = version
        self._groups: dict[tuple[str, str], PodGroup] = {}
        self._workloads: dict[tuple[str, str], Workload] = {}
        #: Group -> uid -> its live members (neither terminal nor terminating).
        self._members: dict[GroupKey, dict[str, model.Pod]] = {}
        self._member_of: dict[str, GroupKey] = {}
        #: Where conditions go beyond this store (Kubernetes mode: the API server).
        self.writer: ConditionWriter | None = None

    def __len__(self) -> int:
        return len(self._groups) + len(self._workloads)

    def put(self, obj: PodGroup | Workload) -> None:
        key = (obj.metadata.namespace, obj.metadata.name)
        if isinstance(obj, PodGroup):
            self._groups[key] = obj
        else:
            self._workloads[key] = obj

    def remove(self, kind: str, namespace: str, name: str) -> None:
        (self._groups if kind == "PodGroup" else self._workloads).pop((namespace, name), None)

    # Members: the core reports every pod (PodGroupState's AllPodsCount counts
    # the group's pods the scheduler knows, placed or not).

    def pod_updated(self, pod: model.Pod) -> None:
        uid = pod.metadata.uid
        key = group_of(pod, self.version)
        live = pod.status.phase not in ("Succeeded", "Failed") and not pod.metadata.deletion_timestamp
        old = self._member_of.get(uid)
        if old is not None and (old != key or not live):
            self.pod_deleted(pod)
        if key is None or not live:
            return
        self._members.setdefault(key, {})[uid] = pod
        self._member_of[uid] = key

    def pod_deleted(self, pod: model.Pod) -> None:
        key = self._member_of.pop(pod.metadata.uid, None)
        if key is None:
            return
        members = self._members.get(key)
        if members is not None:
            members.pop(pod.metadata.uid, None)
            if not members:
                del self._members[key]

    def members(self, key: GroupKey) -> list[model.Pod]:
        return list(self._members.get(key, {}).values())

    def get(self, kind: str, namespace: str, name: str) -> PodGroup | Workload | None:
        return (self._groups if kind == "PodGroup" else self._workloads).get((namespace, name))

    def pod_group(self, namespace: str, name: str) -> PodGroup | None:
        return self._groups.get((namespace, name))

    def workload(self, namespace: str, name: str) -> Workload | None:
        return self._workloads.get((namespace, name))

    def pod_groups(self) -> Iterator[PodGroup]:
        return iter(list(self._groups.values()))

    def gang(self, key: GroupKey) -> Gang | None:
        """The group ``key`` names, or None while its object is unknown."""
        if key.workload:
            workload = self._workloads.get((key.namespace, key.workload))
            group = workload.group(key.name) if workload is not None else None
            return None if group is None else Gang(key, _min_count(group.effective_policy))
        pg = self._groups.get((key.namespace, key.name))
        return None if pg is None else Gang(key, _min_count(pg.spec.scheduling_policy), pg)

    def set_condition(self, key: GroupKey, condition: Condition) -> bool:
        """``apimeta.SetStatusCondition`` on the PodGroup, never turning a
        True condition back to False (``updatePodGroupCondition``,
        schedule_one_podgroup.go v1.37.2). False when nothing changed (or the
        group has no status: 1.35's)."""
        pg = self._groups.get((key.namespace, key.name)) if not key.workload else None
        if pg is None:
            return False
        conditions = pg.status.conditions
        existing = next((c for c in conditions if c.type == condition.type), None)
        if existing is not None and existing.status == "True" and condition.status != "True":
            return False
        cond = msgspec.structs.replace(condition, observed_generation=pg.metadata.generation or None)
        if existing is not None:
            if (existing.status, existing.reason, existing.message, existing.observed_generation) == (
                cond.status,
                cond.reason,
                cond.message,
                cond.observed_generation,
            ):
                return False
            if existing.status == cond.status:
                cond = msgspec.structs.replace(cond, last_transition_time=existing.last_transition_time)
        if cond.last_transition_time is None:
            cond = msgspec.structs.replace(cond, last_transition_time=_now())
        others = [c for c in conditions if c.type != condition.type]
        pg.status = PodGroupStatus(conditions=[*others, cond])
        if self.writer is not None:
            self.writer(pg, cond)
        return True


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
