"""Each gang dialect, read from what the job frameworks really write.

Every case reproduces the objects one framework creates, cited by file and
version; the expectation is the gang Berth builds from them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import msgspec
import pytest

from berth.cluster import model
from berth.gangs import Gang, GangIndex, GangKey, InvalidGang, Membership, PhaseCounts
from berth.testing import make_pod

GI = 1024**3
MI = 1024**2


def group(api_version: str, name: str, spec: dict[str, Any], namespace: str = "default") -> model.PodGroup:
    return msgspec.convert(
        {
            "apiVersion": api_version,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        },
        model.PodGroup,
    )


def pod(
    name: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, ns: str = "default"
) -> model.Pod:
    return make_pod(name, namespace=ns, labels=labels, annotations=annotations)


@dataclasses.dataclass
class Case:
    name: str
    source: str  # the framework file reproduced, and its version
    groups: Sequence[model.PodGroup]
    pods: Sequence[model.Pod]
    memberships: dict[str, Membership]  # pod name -> what it says
    gang: Gang | None


# KubeRay v1.7.0-rc.0 ray-operator/controllers/ray/batchscheduler/volcano/volcano_scheduler.go:
# createPodGroup "ray-<cluster>-pg", minMember = replicas + 1 (head), minResources the sum,
# queue from the RayCluster's volcano.sh/queue-name label; AddMetadataToChildResource
# annotates each pod scheduling.k8s.io/group-name and volcano.sh/task-spec = its group
# ("headgroup", the worker group's name) and copies the queue label.
KUBERAY_VOLCANO = Case(
    "kuberay-volcano",
    "ray-project/kuberay v1.7.0-rc.0 batchscheduler/volcano/volcano_scheduler.go",
    [
        group(
            "scheduling.volcano.sh/v1beta1",
            "ray-raycluster-sample-pg",
            {"minMember": 3, "minResources": {"cpu": "3", "memory": "6Gi"}, "queue": "kuberay-test-queue"},
        )
    ],
    [
        pod(
            f"raycluster-sample-{role}",
            labels={"volcano.sh/queue-name": "kuberay-test-queue"},
            annotations={"scheduling.k8s.io/group-name": "ray-raycluster-sample-pg", "volcano.sh/task-spec": task},
        )
        for role, task in (("head", "headgroup"), ("worker-0", "small-group"), ("worker-1", "small-group"))
    ],
    {
        "raycluster-sample-head": Membership(GangKey("volcano", "default", "ray-raycluster-sample-pg"), "headgroup"),
        "raycluster-sample-worker-0": Membership(
            GangKey("volcano", "default", "ray-raycluster-sample-pg"), "small-group"
        ),
    },
    Gang(
        GangKey("volcano", "default", "ray-raycluster-sample-pg"),
        min_member=3,
        min_resources={"cpu": 3000, "memory": 6 * GI},
        queue="kuberay-test-queue",
        origin="PodGroup scheduling.volcano.sh/v1beta1 default/ray-raycluster-sample-pg",
    ),
)

# KubeRay v1.7.0-rc.0 batchscheduler/scheduler-plugins/scheduler_plugins.go: a PodGroup
# named after the RayCluster, minMember replicas + 1, minResources the sum; the pods
# labelled scheduling.x-k8s.io/pod-group with the cluster's name.
KUBERAY_SCHEDULER_PLUGINS = Case(
    "kuberay-scheduler-plugins",
    "ray-project/kuberay v1.7.0-rc.0 batchscheduler/scheduler-plugins/scheduler_plugins.go",
    [group("scheduling.x-k8s.io/v1alpha1", "raycluster-sample", {"minMember": 2, "minResources": {"cpu": "2"}})],
    [pod(f"raycluster-sample-{r}", labels={"scheduling.x-k8s.io/pod-group": "raycluster-sample"}) for r in ("h", "w")],
    {"raycluster-sample-h": Membership(GangKey("scheduler-plugins", "default", "raycluster-sample"))},
    Gang(
        GangKey("scheduler-plugins", "default", "raycluster-sample"),
        min_member=2,
        min_resources={"cpu": 2000},
        origin="PodGroup scheduling.x-k8s.io/v1alpha1 default/raycluster-sample",
    ),
)

# KubeRay v1.7.0-rc.0 batchscheduler/yunikorn/yunikorn_scheduler.go and
# yunikorn_task_groups.go: the RayCluster's yunikorn.apache.org/app-id label becomes the
# pods' applicationId label, every pod carries the task groups (json.Marshal of
# []TaskGroup: "minResource", "name", "minMember") and its own group's name.
_RAY_TASK_GROUPS = json.dumps(
    [
        {"minResource": {"cpu": "1", "memory": "2Gi"}, "name": "headgroup", "minMember": 1},
        {"minResource": {"cpu": "1", "memory": "1Gi"}, "name": "worker-group", "minMember": 2},
    ]
)
KUBERAY_YUNIKORN = Case(
    "kuberay-yunikorn",
    "ray-project/kuberay v1.7.0-rc.0 batchscheduler/yunikorn/yunikorn_scheduler.go, yunikorn_task_groups.go",
    [],
    [
        pod(
            f"rayjob-{i}",
            labels={"applicationId": "rayjob-sample-app", "queue": "root.test"},
            annotations={
                "yunikorn.apache.org/task-groups": _RAY_TASK_GROUPS,
                "yunikorn.apache.org/task-group-name": task,
            },
        )
        for i, task in enumerate(("headgroup", "worker-group", "worker-group"))
    ],
    {"rayjob-1": Membership(GangKey("yunikorn", "default", "rayjob-sample-app"), "worker-group")},
    Gang(
        GangKey("yunikorn", "default", "rayjob-sample-app"),
        min_member=3,
        min_task_member={"headgroup": 1, "worker-group": 2},
        min_resources={"cpu": 3000, "memory": 4 * GI},
        hard=False,  # YuniKorn's default style (constants.SchedulingPolicyStyleParamDefault)
        timeout_seconds=900.0,
        origin="annotation yunikorn.apache.org/task-groups on pod rayjob-0",
    ),
)

# spark-operator (kubeflow/spark-operator, chart 1.4.6 tree) internal/scheduler/volcano/
# scheduler.go syncPodGroupInClusterMode: PodGroup "spark-<app>-pg", minMember 1,
# minResources = driver + executors, queue and priorityClassName from
# batchSchedulerOptions; driver and executors annotated scheduling.k8s.io/group-name.
SPARK_VOLCANO = Case(
    "spark-volcano",
    "kubeflow/spark-operator internal/scheduler/volcano/scheduler.go (2026-08-21)",
    [
        group(
            "scheduling.volcano.sh/v1beta1",
            "spark-spark-pi-pg",
            {
                "minMember": 1,
                "minResources": {"cpu": "3", "memory": "2688Mi"},
                "queue": "default",
                "priorityClassName": "high",
            },
        )
    ],
    [
        pod(n, annotations={"scheduling.k8s.io/group-name": "spark-spark-pi-pg"})
        for n in ("spark-pi-driver", "spark-pi-exec-1")
    ],
    {"spark-pi-driver": Membership(GangKey("volcano", "default", "spark-spark-pi-pg"))},
    Gang(
        GangKey("volcano", "default", "spark-spark-pi-pg"),
        min_member=1,
        min_resources={"cpu": 3000, "memory": 2688 * MI},
        queue="default",
        origin="PodGroup scheduling.volcano.sh/v1beta1 default/spark-spark-pi-pg",
    ),
)

# spark-operator internal/scheduler/yunikorn/scheduler.go (and the "spark-pi-yunikorn"
# case of its scheduler_test.go): task groups spark-driver (1) and spark-executor
# (instances), 896Mi = 512Mi + 384Mi overhead; the driver carries the task groups, both
# their task group's name; Spark's own label spark-app-selector is the application id.
_SPARK_TASK_GROUPS = json.dumps(
    [
        {"name": "spark-driver", "minMember": 1, "minResource": {"cpu": "1", "memory": "896Mi"}},
        {"name": "spark-executor", "minMember": 2, "minResource": {"cpu": "1", "memory": "896Mi"}},
    ]
)
SPARK_YUNIKORN = Case(
    "spark-yunikorn",
    "kubeflow/spark-operator internal/scheduler/yunikorn/scheduler.go, scheduler_test.go (2026-08-21)",
    [],
    [
        pod(
            "spark-pi-driver",
            labels={"spark-app-selector": "spark-0123", "queue": "root.default"},
            annotations={
                "yunikorn.apache.org/task-group-name": "spark-driver",
                "yunikorn.apache.org/task-groups": _SPARK_TASK_GROUPS,
                "yunikorn.apache.org/schedulingPolicyParameters": (
                    "placeholderTimeoutInSeconds=30 gangSchedulingStyle=Hard"
                ),
            },
        ),
        *(
            pod(
                f"spark-pi-exec-{i}",
                labels={"spark-app-selector": "spark-0123", "queue": "root.default"},
                annotations={"yunikorn.apache.org/task-group-name": "spark-executor"},
            )
            for i in (1, 2)
        ),
    ],
    {"spark-pi-exec-1": Membership(GangKey("yunikorn", "default", "spark-0123"), "spark-executor")},
    Gang(
        GangKey("yunikorn", "default", "spark-0123"),
        min_member=3,
        min_task_member={"spark-driver": 1, "spark-executor": 2},
        min_resources={"cpu": 3000, "memory": 3 * 896 * MI},
        hard=True,
        timeout_seconds=30.0,
        origin="annotation yunikorn.apache.org/task-groups on pod spark-pi-driver",
    ),
)

# Kubeflow Trainer v1.5.0-rc.0 pkg/runtime/framework/plugins/coscheduling/coscheduling.go:
# a scheduler-plugins PodGroup named after the TrainJob (minMember the pods,
# minResources their sum, scheduleTimeoutSeconds from the runtime's policy) and the
# pods labelled scheduling.x-k8s.io/pod-group.
TRAINER_COSCHEDULING = Case(
    "trainer-coscheduling",
    "kubeflow/trainer v1.5.0-rc.0 pkg/runtime/framework/plugins/coscheduling/coscheduling.go",
    [
        group(
            "scheduling.x-k8s.io/v1alpha1",
            "pytorch-job",
            {"minMember": 2, "minResources": {"cpu": "2"}, "scheduleTimeoutSeconds": 120},
            namespace="team",
        )
    ],
    [
        pod(f"pytorch-job-node-0-{i}", ns="team", labels={"scheduling.x-k8s.io/pod-group": "pytorch-job"})
        for i in (0, 1)
    ],
    {"pytorch-job-node-0-0": Membership(GangKey("scheduler-plugins", "team", "pytorch-job"))},
    Gang(
        GangKey("scheduler-plugins", "team", "pytorch-job"),
        min_member=2,
        min_resources={"cpu": 2000},
        timeout_seconds=120.0,
        origin="PodGroup scheduling.x-k8s.io/v1alpha1 team/pytorch-job",
    ),
)

# Kubeflow Trainer v1.5.0-rc.0 pkg/runtime/framework/plugins/volcano/volcano.go (its
# volcano_test.go "job-update" case): minMember 5 (launcher + 4 workers), minResources
# 300m+4x500m cpu, 1Gi+4x0.5Gi memory, queue from scheduling.volcano.sh/queue-name,
# priorityClassName; the pods annotated scheduling.k8s.io/group-name (EnforcePodGroupPolicy).
TRAINER_VOLCANO = Case(
    "trainer-volcano",
    "kubeflow/trainer v1.5.0-rc.0 pkg/runtime/framework/plugins/volcano/volcano.go, volcano_test.go",
    [
        group(
            "scheduling.volcano.sh/v1beta1",
            "job-update",
            {
                "minMember": 5,
                "minResources": {"cpu": "2300m", "memory": "3Gi"},
                "queue": "q1",
                "priorityClassName": "high-priority",
            },
            namespace="test-ns",
        )
    ],
    [pod(f"job-update-{r}", ns="test-ns", annotations={"scheduling.k8s.io/group-name": "job-update"}) for r in "abcde"],
    {"job-update-a": Membership(GangKey("volcano", "test-ns", "job-update"))},
    Gang(
        GangKey("volcano", "test-ns", "job-update"),
        min_member=5,
        min_resources={"cpu": 2300, "memory": 3 * GI},
        queue="q1",
        origin="PodGroup scheduling.volcano.sh/v1beta1 test-ns/job-update",
    ),
)

# KAI-Scheduler v0.13.0-rc1: its pod-grouper annotates pods pod-group-name
# (pkg/podgrouper/pod_controller.go) and creates a scheduling.run.ai/v2alpha2 PodGroup
# (pkg/apis/scheduling/v2alpha2/podgroup_types.go) with minMember, queue and subGroups;
# a pod's subgroup is its kai.scheduler/subgroup-name label. KubeRay's kai-scheduler
# batch scheduler only sets schedulerName and the kai.scheduler/queue label.
KAI = Case(
    "kai",
    "NVIDIA/KAI-Scheduler v0.13.0-rc1 pkg/apis/scheduling/v2alpha2/podgroup_types.go, pkg/common/constants",
    [
        group(
            "scheduling.run.ai/v2alpha2",
            "pg-ray-0",
            {
                "minMember": 3,
                "queue": "team-a",
                "subGroups": [
                    {"name": "ray", "minMember": 3},
                    {"name": "head", "minMember": 1, "parent": "ray"},
                    {"name": "workers", "minMember": 2, "parent": "ray"},
                ],
            },
        )
    ],
    [
        pod(
            n,
            labels={"kai.scheduler/queue": "team-a", "kai.scheduler/subgroup-name": sg},
            annotations={"pod-group-name": "pg-ray-0"},
        )
        for n, sg in (("ray-head", "head"), ("ray-w0", "workers"), ("ray-w1", "workers"))
    ],
    {"ray-w0": Membership(GangKey("kai", "default", "pg-ray-0"), "workers")},
    Gang(
        GangKey("kai", "default", "pg-ray-0"),
        min_member=3,
        min_task_member={"head": 1, "workers": 2},
        queue="team-a",
        origin="PodGroup scheduling.run.ai/v2alpha2 default/pg-ray-0",
    ),
)

# Kueue v0.20 plain pods (site docs "Run a group of plain Pods";
# pkg/controller/jobs/pod/constants/constants.go): every pod labelled
# kueue.x-k8s.io/pod-group-name and annotated kueue.x-k8s.io/pod-group-total-count, the
# queue in kueue.x-k8s.io/queue-name. The WorkloadIdentifierAnnotations gate moves the
# group name to an annotation: both are read (utilpod.GetPodGroupName).
KUEUE = Case(
    "kueue",
    "kubernetes-sigs/kueue v0.20 pkg/controller/jobs/pod (pod_controller.go groupTotalCount)",
    [],
    [
        pod(
            "sample-leader",
            labels={"kueue.x-k8s.io/pod-group-name": "sample-group", "kueue.x-k8s.io/queue-name": "user-queue"},
            annotations={"kueue.x-k8s.io/pod-group-total-count": "3"},
        ),
        *(
            pod(
                f"sample-worker-{i}",
                labels={"kueue.x-k8s.io/queue-name": "user-queue"},
                annotations={
                    "kueue.x-k8s.io/pod-group-name": "sample-group",
                    "kueue.x-k8s.io/pod-group-total-count": "3",
                },
            )
            for i in (1, 2)
        ),
    ],
    {
        "sample-leader": Membership(GangKey("kueue", "default", "sample-group")),
        "sample-worker-1": Membership(GangKey("kueue", "default", "sample-group")),
    },
    Gang(
        GangKey("kueue", "default", "sample-group"),
        min_member=3,
        origin="annotation kueue.x-k8s.io/pod-group-total-count",
    ),
)

CASES = [
    KUBERAY_VOLCANO,
    KUBERAY_SCHEDULER_PLUGINS,
    KUBERAY_YUNIKORN,
    SPARK_VOLCANO,
    SPARK_YUNIKORN,
    TRAINER_COSCHEDULING,
    TRAINER_VOLCANO,
    KAI,
    KUEUE,
]


def index_of(
    groups: Sequence[model.PodGroup], pods: Sequence[model.Pod], sources: Sequence[str] | None = None
) -> GangIndex:
    index = GangIndex(sources)
    for g in groups:
        index.put_group(g)
    for p in pods:
        index.pod_changed(p)
    return index


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_each_frameworks_objects_make_the_gang_its_scheduler_would(case: Case) -> None:
    index = index_of(case.groups, case.pods)
    by_name = {p.metadata.name: p for p in case.pods}
    for name, want in case.memberships.items():
        assert index.member_of(by_name[name]) == want, name
    key = next(iter(case.memberships.values())).key
    assert index.gang(key) == case.gang
    assert sorted(p.metadata.name for p in index.members(key)) == sorted(by_name)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_dialect_turned_off_claims_no_pod(case: Case) -> None:
    key = next(iter(case.memberships.values())).key
    others = [s for s in ("scheduler-plugins", "volcano", "kai", "kueue", "yunikorn") if s != key.source]
    index = index_of(case.groups, case.pods, others)
    assert all(index.member_of(p) is None for p in case.pods)


@pytest.mark.parametrize(
    ("groups", "pods", "source"),
    [
        ([], [pod("a", labels={"scheduling.x-k8s.io/pod-group": "g"})], "scheduler-plugins"),
        ([], [pod("a", annotations={"scheduling.k8s.io/group-name": "g"})], "volcano"),
        ([], [pod("a", annotations={"pod-group-name": "g"})], "kai"),
        ([], [pod("a", annotations={"yunikorn.apache.org/task-group-name": "tg"})], "yunikorn"),
    ],
)
def test_a_gang_whose_definition_is_missing_is_none_and_says_what_it_waits_for(
    groups: list[model.PodGroup], pods: list[model.Pod], source: str
) -> None:
    index = index_of(groups, pods)
    m = index.member_of(pods[0])
    assert m is not None and m.key.source == source
    assert index.gang(m.key) is None
    assert index.missing(m.key)


def test_volcanos_second_annotation_names_the_group_when_the_first_is_absent() -> None:
    p = pod("a", annotations={"scheduling.volcano.sh/group-name": "g"})
    assert GangIndex().member_of(p) == Membership(GangKey("volcano", "default", "g"))


def test_a_pod_without_a_yunikorn_app_id_is_in_its_namespaces_autogen_application() -> None:
    """GenerateApplicationID (yunikorn-k8shim pkg/common/utils/utils.go) with generateUniqueAppIds off."""
    p = pod("a", ns="team", annotations={"yunikorn.apache.org/task-group-name": "tg"})
    m = GangIndex().member_of(p)
    assert m == Membership(GangKey("yunikorn", "team", "yunikorn-team-autogen"), "tg")


@pytest.mark.parametrize(
    ("labels", "annotations", "message"),
    [
        pytest.param(
            {"scheduling.x-k8s.io/pod-group": "a"},
            {"scheduling.k8s.io/group-name": "b"},
            'pod is claimed by two gang sources, scheduler-plugins (group "a") and volcano (group "b")',
            id="two dialects",
        ),
        pytest.param(
            {"kueue.x-k8s.io/pod-group-name": "k"},
            {"yunikorn.apache.org/task-group-name": "tg", "yunikorn.apache.org/app-id": "app"},
            'pod is claimed by two gang sources, kueue (group "k") and yunikorn (group "app")',
            id="kueue and yunikorn",
        ),
        pytest.param(
            {},
            {"scheduling.k8s.io/group-name": "a", "scheduling.volcano.sh/group-name": "b"},
            'volcano: annotations scheduling.k8s.io/group-name="a" and scheduling.volcano.sh/group-name="b" '
            "name different Volcano PodGroups",
            id="volcano's two annotations disagree",
        ),
    ],
)
def test_a_pod_two_keys_claim_differently_is_refused_naming_both(
    labels: dict[str, str], annotations: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidGang) as e:
        GangIndex().member_of(pod("a", labels=labels, annotations=annotations))
    assert str(e.value).startswith(message)


def _yk(task_groups: str, policy: str = "") -> list[model.Pod]:
    ann = {"yunikorn.apache.org/task-groups": task_groups, "yunikorn.apache.org/task-group-name": "tg"}
    if policy:
        ann["yunikorn.apache.org/schedulingPolicyParameters"] = policy
    return [pod("a", labels={"applicationId": "app"}, annotations=ann)]


_TG = json.dumps([{"name": "tg", "minMember": 1, "minResource": {"cpu": "1"}}])


@pytest.mark.parametrize(
    ("pods", "message"),
    [
        pytest.param(_yk("[{"), "annotation yunikorn.apache.org/task-groups: not valid JSON", id="bad json"),
        pytest.param(_yk('{"name": "tg"}'), "expected a JSON list of task groups, got dict", id="not a list"),
        pytest.param(
            _yk(json.dumps([{"name": "tg", "minMember": -1, "minResource": {}}])),
            "annotation yunikorn.apache.org/task-groups[0].minMember: cannot be negative (got -1)",
            id="negative minMember",
        ),
        pytest.param(
            _yk(json.dumps([{"name": "tg", "minMember": 2}])),
            "annotation yunikorn.apache.org/task-groups[0].minResource: required",
            id="no minResource (GetTaskGroupsFromAnnotation)",
        ),
        pytest.param(
            _yk(json.dumps([{"name": "tg", "minMember": 1, "minResource": {"cpu": "lots"}}])),
            "annotation yunikorn.apache.org/task-groups[0].minResource[cpu]: Invalid value",
            id="bad quantity",
        ),
        pytest.param(
            _yk(_TG, "placeholderTimeoutInSeconds=-5"),
            "annotation yunikorn.apache.org/schedulingPolicyParameters: placeholderTimeoutInSeconds cannot be negative",
            id="negative timeout",
        ),
        pytest.param(
            _yk(_TG, "gangSchedulingStyle=Sometimes"),
            'gangSchedulingStyle "Sometimes" is neither Soft nor Hard',
            id="unknown style",
        ),
        pytest.param(
            [
                *_yk(_TG),
                pod("b", labels={"applicationId": "app"}, annotations={"yunikorn.apache.org/task-group-name": "nope"}),
            ],
            'pod b names task group "nope", which application app does not define (tg)',
            id="undefined task group (FindAppTaskGroup)",
        ),
        pytest.param(
            [
                pod(
                    "k",
                    labels={"kueue.x-k8s.io/pod-group-name": "g"},
                    annotations={"kueue.x-k8s.io/pod-group-total-count": "-2"},
                )
            ],
            'annotation kueue.x-k8s.io/pod-group-total-count: "-2": group total count should be greater than zero',
            id="kueue negative count",
        ),
        pytest.param(
            [
                pod(
                    "k",
                    labels={"kueue.x-k8s.io/pod-group-name": "g"},
                    annotations={"kueue.x-k8s.io/pod-group-total-count": "three"},
                )
            ],
            'annotation kueue.x-k8s.io/pod-group-total-count: "three" is not an integer',
            id="kueue count not a number",
        ),
        pytest.param(
            [pod("k", labels={"kueue.x-k8s.io/pod-group-name": "g"})],
            "annotation kueue.x-k8s.io/pod-group-total-count: missing on every member of kueue group default/g",
            id="kueue count missing",
        ),
        pytest.param(
            [
                pod(
                    f"k{n}",
                    labels={"kueue.x-k8s.io/pod-group-name": "g"},
                    annotations={"kueue.x-k8s.io/pod-group-total-count": n},
                )
                for n in ("2", "3")
            ],
            'the members of kueue group default/g disagree: "2" (k2), "3" (k3)',
            id="kueue counts disagree",
        ),
    ],
)
def test_an_invalid_gang_annotation_is_refused_naming_the_key_and_why(pods: list[model.Pod], message: str) -> None:
    index = index_of([], pods)
    m = index.member_of(pods[0])
    assert m is not None
    with pytest.raises(InvalidGang) as e:
        index.gang(m.key)
    assert message in str(e.value)


def test_a_resource_gang_is_a_podgroup_with_min_resources_and_at_most_one_member() -> None:
    index = index_of(SPARK_VOLCANO.groups, SPARK_VOLCANO.pods)
    gang = index.gang(GangKey("volcano", "default", "spark-spark-pi-pg"))
    assert gang is not None and gang.min_member <= 1 and gang.min_resources


def test_a_groups_change_or_a_members_is_seen_by_the_next_build() -> None:
    index = index_of(TRAINER_VOLCANO.groups, TRAINER_VOLCANO.pods[:2])
    key = GangKey("volcano", "test-ns", "job-update")
    assert index.gang(key) is not None and len(index.members(key)) == 2
    bigger = msgspec.structs.replace(TRAINER_VOLCANO.groups[0], spec=model.PodGroupSpec(min_member=7))
    assert index.put_group(bigger) == key
    gang = index.gang(key)
    assert gang is not None and gang.min_member == 7
    index.pod_removed(TRAINER_VOLCANO.pods[0])
    assert len(index.members(key)) == 1
    assert index.remove_group(bigger.api_version, "test-ns", "job-update") == key
    assert index.gang(key) is None


def test_the_podgroups_queue_is_the_queue_of_its_members() -> None:
    index = index_of(TRAINER_VOLCANO.groups, TRAINER_VOLCANO.pods)
    assert index.queue_of(TRAINER_VOLCANO.pods[0]) == "q1"
    assert index.queue_of(pod("loner")) == ""


_VOLCANO_GANG = Gang(GangKey("volcano", "default", "g"), min_member=3)
_SP_GANG = Gang(GangKey("scheduler-plugins", "default", "g"), min_member=3)


@pytest.mark.parametrize(
    ("gang", "counts", "admissible", "phase"),
    [
        # Volcano (volcano-sh/apis pkg/apis/scheduling/v1beta1/types.go PodGroupPhase).
        (_VOLCANO_GANG, PhaseCounts(members=0, placed=0, running=0, current="Pending"), False, "Pending"),
        (_VOLCANO_GANG, PhaseCounts(members=0, placed=0, running=0, current="Pending"), True, "Inqueue"),
        (_VOLCANO_GANG, PhaseCounts(members=3, placed=3, running=1, current="Inqueue"), True, "Inqueue"),
        (_VOLCANO_GANG, PhaseCounts(members=3, placed=3, running=3, current="Inqueue"), True, "Running"),
        (_VOLCANO_GANG, PhaseCounts(members=3, placed=3, running=2, current="Running"), True, "Unknown"),
        # scheduler-plugins (pkg/controllers/podgroup_controller.go Reconcile).
        (_SP_GANG, PhaseCounts(members=3, placed=0, running=0, current=""), True, "Pending"),
        (_SP_GANG, PhaseCounts(members=2, placed=0, running=0, current="Pending"), True, "Pending"),
        (_SP_GANG, PhaseCounts(members=3, placed=0, running=0, current="Pending"), True, "Scheduling"),
        (_SP_GANG, PhaseCounts(members=3, placed=3, running=3, current="Scheduling"), True, "Running"),
        (_SP_GANG, PhaseCounts(members=2, placed=2, running=2, current="Running"), True, "Pending"),
    ],
)
def test_the_phase_written_back_follows_the_dialects_own_controller(
    gang: Gang, counts: PhaseCounts, admissible: bool, phase: str
) -> None:
    assert GangIndex().phase(gang, counts, admissible=admissible) == phase


def test_dialects_without_a_phase_write_none() -> None:
    for source in ("kai", "kueue", "yunikorn"):
        gang = Gang(GangKey(source, "default", "g"), min_member=1)
        assert GangIndex().phase(gang, PhaseCounts(1, 1, 1), admissible=True) is None
