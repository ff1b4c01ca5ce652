"""GangScheduling (the Workload API's gangs), ported case by case from
kubernetes v1.37.2 ``pkg/scheduler/framework/plugins/gangscheduling/gangscheduling_test.go``
(TestGangSchedulingFlow and TestPlacementFeasible, the CompositePodGroup=false
cases: Berth does not follow CompositePodGroups)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import msgspec
import pytest
import yaml

from berth import config, features
from berth.cache.infos import PodInfo
from berth.cluster import model, workload_api
from berth.framework import interface as fw
from berth.framework import registry
from berth.plugins.gangscheduling import PERMIT_TIMEOUT_SECONDS, GangScheduling, placement_feasible
from berth.testing import Cluster, make_node, make_pod


def pod_group(
    name: str, *, min_count: int | None, namespace: str = "ns1", generation: int = 1
) -> workload_api.PodGroup:
    policy = (
        workload_api.SchedulingPolicy(basic={})
        if min_count is None
        else workload_api.SchedulingPolicy(gang=workload_api.GangSchedulingPolicy(min_count=min_count))
    )
    return workload_api.PodGroup(
        metadata=workload_api.ObjectMeta(name=name, namespace=namespace, generation=generation),
        spec=workload_api.PodGroupSpec(scheduling_policy=policy),
    )


def member(name: str, group: str | None, *, namespace: str = "ns1", **kw: Any) -> model.Pod:
    spec = {"schedulingGroup": {"podGroupName": group}} if group else {}
    return make_pod(name, namespace=namespace, uid=name, spec=spec, **kw)


@dataclasses.dataclass
class Recorder:
    """The Handle's waiting pods and activator, recording what the plugin asks."""

    waiting: dict[str, PodInfo] = dataclasses.field(default_factory=dict)
    allowed: list[str] = dataclasses.field(default_factory=list)
    rejected: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    activated: list[str] = dataclasses.field(default_factory=list)

    def uids(self) -> list[str]:
        return list(self.waiting)

    def get(self, uid: str) -> PodInfo | None:
        return self.waiting.get(uid)

    def allow(self, uid: str, plugin: str) -> None:
        self.allowed.append(uid)

    def reject(self, uid: str, plugin: str, message: str) -> bool:
        self.rejected.append((uid, message))
        return self.waiting.pop(uid, None) is not None

    def preempt(self, uid: str, plugin: str, message: str) -> bool:
        return self.reject(uid, plugin, message)

    def activate(self, uids: Sequence[str]) -> None:
        self.activated.extend(uids)


def setup(
    *,
    groups: Sequence[workload_api.PodGroup],
    pods: Sequence[model.Pod],
    waiting_on_permit: Sequence[model.Pod] = (),
    version: features.KubeVersion = features.NEWEST,
) -> tuple[Cluster, GangScheduling, Recorder]:
    cfg = config.parse({"kubernetesVersion": str(version), "featureGates": {"GenericWorkload": True}})
    cluster = Cluster([make_node("n1", cpu="64", pods=110)], config=cfg)
    core = cluster.berth.core
    for g in groups:  # a copy: the store writes conditions into its object
        core.on_scheduling_group(msgspec.json.decode(msgspec.json.encode(g), type=workload_api.PodGroup))
    cluster.add(*pods)
    rec = Recorder()
    handle = cluster.handle()
    handle.waiting_pods = rec
    handle.activator = rec
    for p in waiting_on_permit:  # assumed, and held at Permit
        pi = PodInfo.of(p)
        core.cache.assume_pod(pi, "n1")
        rec.waiting[pi.uid] = pi
    return cluster, GangScheduling(None, handle), rec


GANG1 = pod_group("pg1", min_count=3)
GANG2 = pod_group("pg2", min_count=4)
BASIC = pod_group("pg3", min_count=None)
P1, P2, P3 = (member(f"p{i}", "pg1") for i in (1, 2, 3))
P4, P5 = member("p4", "pg2"), member("p5", "pg2")
BASIC_POD = member("basic-pod", "pg3")
NON_GANG = member("non-gang", None)

NOT_FOUND = fw.Status.unresolvable(
    'waiting for pods\'s pod group "pg1" to appear in scheduling queue', plugin="GangScheduling"
)
NO_QUORUM = fw.Status.unresolvable(
    "waiting for minCount pods from a gang to appear in scheduling queue", plugin="GangScheduling"
)
ALL = [GANG1, GANG2, BASIC]
WAIT = fw.Status(fw.Code.WAIT, ("waiting for minCount pods from a gang to be scheduled",), "GangScheduling")


@pytest.mark.parametrize(
    ("pod", "pods", "groups", "waiting", "want_pre_enqueue", "want_permit", "want_activated", "want_allowed"),
    [
        pytest.param(NON_GANG, [], ALL, [], fw.SUCCESS, fw.SUCCESS, [], [], id="non-gang pod succeeds immediately"),
        pytest.param(BASIC_POD, [], ALL, [], fw.SUCCESS, fw.SUCCESS, [], [], id="basic policy pod passes at once"),
        pytest.param(
            P1, [P2, P3, P4, P5], [], [],
            NOT_FOUND,
            None, None, None,
            id="gang pod fails PreEnqueue when pod group is not yet created",
        ),
        pytest.param(
            P1, [P2, P4, P5], [GANG1, GANG2], [],
            NO_QUORUM,
            None, None, None,
            id="gang pod fails PreEnqueue when quorum is not met",
        ),
        pytest.param(
            P1, [P2, P3, P4, P5], [GANG1, GANG2], [P2, P4, P5], fw.SUCCESS, WAIT, ["p3"], [],
            id="gang pod passes PreEnqueue, but waits at Permit",
        ),
        pytest.param(
            P1, [P2, P3, P4, P5], [GANG1, GANG2], [P2, P3, P4, P5], fw.SUCCESS, fw.SUCCESS, [], ["p2", "p3"],
            id="final gang pod arrives at Permit and allows all waiting pods from a gang",
        ),
    ],
)  # fmt: skip
def test_gang_scheduling_flow(
    pod: model.Pod,
    pods: list[model.Pod],
    groups: list[workload_api.PodGroup],
    waiting: list[model.Pod],
    want_pre_enqueue: fw.Status,
    want_permit: fw.Status | None,
    want_activated: list[str] | None,
    want_allowed: list[str] | None,
) -> None:
    cluster, plugin, rec = setup(groups=groups, pods=[pod, *pods], waiting_on_permit=waiting)
    info = PodInfo.of(pod)
    assert plugin.pre_enqueue(info) == want_pre_enqueue
    if want_permit is None:
        return
    # Upstream's test runs Permit on the assumed pod (allowed: p1 itself, p2, p3).
    cluster.berth.core.cache.assume_pod(info, "n1")
    status, timeout = plugin.permit(fw.CycleState(), info, "n1")
    assert status == want_permit
    assert timeout == (PERMIT_TIMEOUT_SECONDS if status.code == fw.Code.WAIT else 0.0)
    assert sorted(rec.activated) == want_activated
    assert sorted(rec.allowed) == want_allowed


@pytest.mark.parametrize(
    ("min_count", "scheduled", "remaining", "code", "message"),
    [
        # "All pods succeed, minCount met at end": minCount 2, two pods tried.
        (2, 0, 2, fw.Code.WAIT, "minCount (2) is not yet satisfied: 0 scheduled, 2 remaining"),
        (2, 1, 1, fw.Code.WAIT, "minCount (2) is not yet satisfied: 1 scheduled, 1 remaining"),
        (2, 2, 0, fw.Code.SUCCESS, ""),
        # "First pod fails, minCount not satisfiable": minCount 3 of 3, the first fails.
        (3, 0, 2, fw.Code.UNSCHEDULABLE, "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining"),
        # "Second pod fails, minCount not satisfiable".
        (3, 1, 1, fw.Code.UNSCHEDULABLE, "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining"),
    ],
)
def test_placement_feasible(min_count: int, scheduled: int, remaining: int, code: fw.Code, message: str) -> None:
    st = placement_feasible(min_count, scheduled, remaining)
    assert (st.code, st.message()) == (code, message)


def test_a_member_that_fits_nowhere_releases_its_waiting_gang_and_marks_the_pod_group() -> None:
    group = pod_group("pg1", min_count=3, generation=4)
    cluster, plugin, rec = setup(groups=[group], pods=[P1, P2, P3], waiting_on_permit=[P1, P2])
    written: list[tuple[str, workload_api.Condition]] = []
    cluster.berth.core.scheduling_groups.writer = lambda pg, c: written.append((pg.key, c))
    plugin.post_filter(fw.CycleState(), PodInfo.of(P3), cluster.snapshot, {})
    msg = "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"
    assert sorted(rec.rejected) == [("p1", msg), ("p2", msg)]
    ((key, cond),) = written
    assert key == "ns1/pg1"
    assert (cond.type, cond.status, cond.reason, cond.message, cond.observed_generation) == (
        "PodGroupInitiallyScheduled",
        "False",
        "Unschedulable",
        msg,
        4,
    )
    # Held for the group's backoff: no member enters activeQ at once, and one
    # that an event moved to the queue meanwhile is held at PreFilter.
    assert plugin.pre_enqueue(PodInfo.of(P1)).code == fw.Code.PENDING
    held = plugin.pre_filter(fw.CycleState(), PodInfo.of(P3), cluster.snapshot).status
    assert held.code == fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert held.message() == f'pod group "ns1/pg1" is backing off ({msg}): its members are tried again when it ends'
    # ... and its PostFilter does not count the gang's failure twice.
    rec.rejected.clear()
    plugin.post_filter(fw.CycleState(), PodInfo.of(P3), cluster.snapshot, {})
    assert rec.rejected == [] and len(written) == 1


def test_a_gang_that_can_still_be_completed_keeps_its_waiting_members() -> None:
    four = pod_group("pg1", min_count=3)
    p4 = member("p4", "pg1")
    cluster, plugin, rec = setup(groups=[four], pods=[P1, P2, P3, p4], waiting_on_permit=[P1, P2])
    plugin.post_filter(fw.CycleState(), PodInfo.of(P3), cluster.snapshot, {})  # 2 scheduled + p4 remaining
    assert rec.rejected == []


def test_quorum_sets_the_condition_true_and_a_later_failure_does_not_turn_it_back() -> None:
    cluster, plugin, _ = setup(groups=[GANG1], pods=[P1, P2, P3], waiting_on_permit=[P2, P3])
    info = PodInfo.of(P1)
    cluster.berth.core.cache.assume_pod(info, "n1")
    assert plugin.permit(fw.CycleState(), info, "n1")[0] == fw.SUCCESS
    stored = cluster.berth.core.scheduling_groups.pod_group("ns1", "pg1")
    assert stored is not None
    (cond,) = stored.status.conditions
    assert (cond.type, cond.status, cond.reason) == ("PodGroupInitiallyScheduled", "True", "Scheduled")
    changed = cluster.berth.core.scheduling_groups.set_condition(
        workload_api.GroupKey("ns1", "pg1"),
        workload_api.Condition(type=cond.type, status="False", reason="Unschedulable", message="later"),
    )
    assert not changed
    assert stored.status.conditions == [cond]


def test_release_1_36_reads_the_same_field_and_names_the_condition_pod_group_scheduled() -> None:
    v136 = features.KubeVersion(1, 36)
    cluster, plugin, _ = setup(groups=[GANG1], pods=[P1, P2, P3], waiting_on_permit=[P2, P3], version=v136)
    info = PodInfo.of(P1)
    cluster.berth.core.cache.assume_pod(info, "n1")
    assert plugin.permit(fw.CycleState(), info, "n1")[0] == fw.SUCCESS
    stored = cluster.berth.core.scheduling_groups.pod_group("ns1", "pg1")
    assert stored is not None and [c.type for c in stored.status.conditions] == ["PodGroupScheduled"]


def test_release_1_35_gangs_come_from_the_workload_named_by_workload_ref() -> None:
    v135 = features.KubeVersion(1, 35)
    workload = workload_api.decode(
        {
            "apiVersion": "scheduling.k8s.io/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": "job", "namespace": "ns1"},
            "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]},
        }
    )
    ref = {"workloadRef": {"name": "job", "podGroup": "workers", "podGroupReplicaKey": "0"}}
    a, b = (make_pod(n, namespace="ns1", uid=n, spec=ref) for n in ("a", "b"))
    cfg = config.parse({"kubernetesVersion": "1.35", "featureGates": {"GenericWorkload": True}})
    cluster = Cluster([make_node("n1", cpu="4", pods=110)], [a], config=cfg)
    cluster.berth.core.on_scheduling_group(workload)
    plugin = GangScheduling(None, cluster.handle())
    assert plugin.version == v135
    assert plugin.pre_enqueue(PodInfo.of(a)).message() == (
        "waiting for minCount pods from a gang to appear in scheduling queue"
    )
    cluster.add(b)
    assert plugin.pre_enqueue(PodInfo.of(a)) == fw.SUCCESS
    other_replica = make_pod(
        "c", namespace="ns1", uid="c", spec={"workloadRef": {**ref["workloadRef"], "podGroupReplicaKey": "1"}}
    )
    cluster.add(other_replica)
    assert not plugin.pre_enqueue(PodInfo.of(other_replica)).ok  # each replica is its own gang


def test_a_pod_claimed_by_a_workload_api_group_and_another_dialect_is_in_neither() -> None:
    both = member("both", "pg1", labels={model.LABEL_POD_GROUP: "legacy"})
    _, plugin, _ = setup(groups=[GANG1], pods=[both])
    st = plugin.pre_enqueue(PodInfo.of(both))
    assert (st.code, st.message()) == (
        fw.Code.PENDING,
        'pod is claimed by two gang sources, workload-api (group "pg1") and scheduler-plugins (group "legacy"): '
        "remove one dialect's keys",
    )


@pytest.mark.parametrize(("gate", "enabled"), [(True, True), (False, False)])
def test_the_plugin_is_a_default_plugin_only_with_generic_workload(gate: bool, enabled: bool) -> None:
    feats = features.Features.of(features.NEWEST, {"GenericWorkload": gate})
    names = [n for n, _ in registry.default_multi_point(feats)]
    assert ("GangScheduling" in names) is enabled


def _pg(api_version: str = "scheduling.k8s.io/v1beta1", **fields: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "PodGroup", "metadata": {"name": "g"}, **fields}


@pytest.mark.parametrize(
    ("doc", "error"),
    [
        (_pg("scheduling.k8s.io/v2"), "apiVersion"),
        (_pg("scheduling.k8s.io/v1alpha1"), "no PodGroup kind"),
        (_pg(metadata={}), "metadata.name"),
        (_pg(spec={"schedulingPolicy": {}}), "exactly one of basic or gang"),
        (_pg(spec={"schedulingPolicy": {"gang": {"minCount": 0}}}), "minCount: must be greater than zero"),
    ],
)
def test_decode_refuses_what_the_scheduler_cannot_use(doc: dict[str, Any], error: str) -> None:
    from berth import errors

    with pytest.raises(errors.InvalidArgument, match=error):
        workload_api.decode(doc)


def test_decode_reads_each_release_shape() -> None:
    v136 = workload_api.decode(
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "ns"},
            "spec": {
                "podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}},
                "schedulingPolicy": {"gang": {"minCount": 2}},
                "disruptionMode": "PodGroup",
            },
        }
    )
    v137 = workload_api.decode(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "g", "generation": 3},
            "spec": {
                "workloadRef": {"workloadName": "w", "templateName": "t"},
                "schedulingPolicy": {"gang": {"minCount": 2}},
                "disruptionMode": {"all": {}},
                "priorityClassName": "high",
            },
            "status": {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled"}]},
        }
    )
    assert isinstance(v136, workload_api.PodGroup) and isinstance(v137, workload_api.PodGroup)
    assert v136.spec.disruption_mode == "PodGroup" and v137.spec.disruption_mode == workload_api.DisruptionMode(all={})
    assert v137.metadata.namespace == "default" and v137.metadata.generation == 3
    assert v137.spec.workload_ref == workload_api.WorkloadReference(workload_name="w", template_name="t")
    assert [c.type for c in v137.status.conditions] == ["PodGroupInitiallyScheduled"]


MANIFEST = """
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: trainers}
spec:
  schedulingPolicy: {gang: {minCount: 2}}
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: legacy}
spec: {minMember: 2}
---
apiVersion: v1
kind: Pod
metadata: {name: t0}
spec:
  schedulingGroup: {podGroupName: trainers}
  containers: [{name: c, image: busybox}]
"""


def test_manifests_read_workload_api_pod_groups_beside_scheduler_plugins_ones() -> None:
    from berth.cluster import manifests

    out = manifests.parse_documents(list(yaml.safe_load_all(MANIFEST)), validate="strict")
    (group,) = out.scheduling_groups
    assert isinstance(group, workload_api.PodGroup) and group.key == "default/trainers"
    assert [g.metadata.name for g in out.pod_groups] == ["legacy"]
    (pod,) = out.pods
    assert workload_api.group_of(pod, features.NEWEST) == workload_api.GroupKey("default", "trainers")


def test_a_bad_workload_api_manifest_names_the_document_and_field() -> None:
    from berth.cluster import documents, manifests

    bad = MANIFEST.replace("minCount: 2", "minCount: 0")
    with pytest.raises(documents.ManifestError, match=r"PodGroup.*minCount: must be greater than zero"):
        manifests.parse_documents(list(yaml.safe_load_all(bad)), validate="strict")
