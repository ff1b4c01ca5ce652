"""Kubernetes' Workload API (issue 26) against the real API server: a
``scheduling.k8s.io/v1beta1`` PodGroup with gang ``minCount: 3`` and pods that
name it in ``spec.schedulingGroup``. With room for two nothing binds and the
pods say why (GangScheduling's message, kube-scheduler v1.37.2); with room for
three all bind and the PodGroup gets ``PodGroupInitiallyScheduled=True``.

The bed's kube-apiserver runs with ``--feature-gates=GenericWorkload=true``
and ``--runtime-config=scheduling.k8s.io/v1beta1=true`` (the beta API is off
by default in 1.37); Berth with the same gate.

And the JobSet proof: JobSet (v0.12.0, sigs.k8s.io/jobset at 08dfbdf, which
vendors k8s.io/api v0.36.3) writes no Workload API object. What it does
write — one Job per replicatedJob replica, named JOBSET-RJOB-INDEX, owned by
the JobSet, with its labels and the template's annotations
(``pkg/controllers/jobset_controller.go`` constructJob,
labelAndAnnotateObject) — is reproduced here as test data, beside the
Workload a parent such as Kubeflow Trainer would own. kube-controller-manager
v1.37.2's Job controller (WorkloadWithJob) then creates each Job's PodGroup
from the template its ``scheduling.k8s.io/group-template-name`` annotation
names (``pkg/controller/job/job_scheduling_manager.go``, delegated mode) and
sets the pods' ``schedulingGroup``; Berth gang-schedules those PodGroups."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from tests.e2e.conftest import unavailable, wait_for
from tests.e2e.controlplane import bed
from tests.e2e.kubeutil import condition, events_for, get_pod, pod

pytestmark = [
    pytest.mark.e2e,
    # This module's objects are 1.37's: the v1beta1 PodGroup with
    # spec.schedulingGroup and the WorkloadWithJob gate (1.36 serves v1alpha2,
    # 1.35 v1alpha1 Workloads named by workloadRef, and their API servers
    # refuse the gate). Those releases' shapes are read by the same source:
    # tests/gangs/test_workload_api_source.py, tests/plugins/test_gangscheduling.py.
    pytest.mark.skipif(
        bed.KUBERNETES_VERSION < "v1.37", reason="the v1beta1 PodGroup and WorkloadWithJob are served from 1.37"
    ),
]

NS = "gang"
#: WorkloadWithJob (alpha in 1.37, needs GenericWorkload): the Job controller
#: creates PodGroups for Jobs (the JobSet proof below).
GATES = {"GenericWorkload": True, "WorkloadWithJob": True}
RUNTIME_CONFIG = ["scheduling.k8s.io/v1beta1=true"]
GANG_MESSAGE = "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[bed.ControlPlane]:
    """This module's own bed, serving the Workload API."""
    try:
        binaries = bed.find_binaries()
    except LookupError as e:
        unavailable(str(e))
    cp = bed.ControlPlane(binaries, tmp_path_factory.mktemp("bed"), feature_gates=GATES, runtime_config=RUNTIME_CONFIG)
    with cp:
        yield cp


def pod_group(name: str, min_count: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def member(name: str, group: str) -> dict[str, Any]:
    return pod(name, cpu="2", namespace=NS, schedulingGroup={"podGroupName": group})


def group_condition(kube: bed.Kube, name: str, namespace: str = NS) -> dict[str, Any] | None:
    pg = kube.ok("GET", f"/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups/{name}")
    for c in pg.get("status", {}).get("conditions", []) or []:
        if c["type"] == "PodGroupInitiallyScheduled":
            return dict(c)
    return None


def test_a_gang_binds_only_when_all_its_min_count_fit(
    control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any
) -> None:
    control_plane.ensure_namespace(NS)
    assert ("scheduling.k8s.io/v1beta1", "PodGroup") in kube.served()
    control_plane.create_node("w1", cpu="4")  # room for two members of 2 CPUs
    start_berth({"featureGates": GATES})
    kube.create(pod_group("trainers", 3))
    names = [f"trainer-{i}" for i in range(3)]
    for n in names:
        created = kube.create(member(n, "trainers"))
        assert created["spec"]["schedulingGroup"] == {"podGroupName": "trainers"}  # the gate keeps the field

    # Two fit, the third does not: none binds, and the pods say why.
    def gang_failed() -> dict[str, Any] | None:
        c = group_condition(kube, "trainers")
        return c if c is not None and c["status"] == "False" else None

    cond = wait_for("PodGroupInitiallyScheduled=False", gang_failed, timeout=60)
    assert (cond["reason"], cond["message"]) == ("Unschedulable", GANG_MESSAGE)
    # The PodGroup strategy sets no metadata.generation (pkg/registry/scheduling/podgroup,
    # v1.37.2), so the condition carries no observedGeneration, as upstream's.
    assert "observedGeneration" not in cond

    def reasons() -> list[str] | None:
        pods = [get_pod(kube, n, NS) for n in names]
        if any(p["spec"].get("nodeName") for p in pods):
            raise AssertionError("a member of an incomplete gang was bound")
        conds = [condition(p) for p in pods]
        if any(c is None or c["status"] != "False" for c in conds):
            return None
        return [c["message"] for c in conds if c is not None]

    messages = wait_for("every member's PodScheduled=False", reasons, timeout=60)
    every = messages + [
        e.get("note") or e.get("message") or ""
        for n in names
        for e in events_for(kube, n, NS)
        if e.get("reason") == "FailedScheduling"
    ]
    assert any(GANG_MESSAGE in m for m in every), every  # a member that fit: the gang's reason
    assert any("Insufficient cpu" in m for m in every), every  # the member that did not: its own

    # Room for the third: the whole gang binds, and the PodGroup says so.
    control_plane.create_node("w2", cpu="2")

    def all_bound() -> dict[str, str] | None:
        nodes = {n: get_pod(kube, n, NS)["spec"].get("nodeName") for n in names}
        return {n: v for n, v in nodes.items() if v} if all(nodes.values()) else None

    nodes = wait_for("the gang to bind", all_bound, timeout=60)
    assert sorted(nodes.values()) == ["w1", "w1", "w2"]

    def gang_scheduled() -> dict[str, Any] | None:
        c = group_condition(kube, "trainers")
        return c if c is not None and c["status"] == "True" else None

    cond = wait_for("PodGroupInitiallyScheduled=True", gang_scheduled, timeout=30)
    assert cond["reason"] == "Scheduled"


# ---------------------------------------------------------------- the JobSet proof

JS_NS = "jobset"
POOL = {"pool": "jobset"}  # this test's nodes only


def jobset_workload(jobset: str) -> dict[str, Any]:
    """The Workload the JobSet's parent owns: one PodGroupTemplate per replicatedJob."""
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": jobset, "namespace": JS_NS},
        "spec": {
            "controllerRef": {"apiGroup": "jobset.x-k8s.io", "kind": "JobSet", "name": jobset},
            "podGroupTemplates": [
                {"name": "driver", "schedulingPolicy": {"gang": {"minCount": 1}}},
                {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}}},
            ],
        },
    }


def jobset_job(jobset: str, uid: str, rjob: str, pods: int) -> dict[str, Any]:
    """What JobSet's constructJob writes for replica 0 of ``rjob`` (the labels
    that name it; the template's annotation carries the group template)."""
    name = f"{jobset}-{rjob}-0"  # placement.GenJobName
    meta = {
        "jobset.sigs.k8s.io/jobset-name": jobset,
        "jobset.sigs.k8s.io/replicatedjob-name": rjob,
        "jobset.sigs.k8s.io/job-index": "0",
    }
    template = pod(f"{name}-pod", cpu="1", namespace=JS_NS, nodeSelector=POOL, restartPolicy="Never")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": JS_NS,
            "labels": meta,
            "annotations": {**meta, "scheduling.k8s.io/group-template-name": rjob},
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": jobset,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "completionMode": "Indexed",  # JobSet's default
            "backoffLimit": 0,
            "template": {"metadata": {"labels": meta}, "spec": template["spec"]},
        },
    }


def test_the_pod_groups_the_job_controller_makes_for_a_jobset_are_gang_scheduled(
    control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any
) -> None:
    control_plane.ensure_namespace(JS_NS)
    control_plane.start_controller_manager(["job-controller"])
    control_plane.create_node("js1", cpu="3", labels=POOL)  # the driver and two of three workers
    start_berth({"featureGates": GATES})
    kube.create(jobset_workload("train"))
    uid = "5f0c1a3e-0000-4000-8000-000000000001"
    kube.create(jobset_job("train", uid, "driver", 1))
    kube.create(jobset_job("train", uid, "workers", 3))

    def pods() -> dict[str, dict[str, Any]] | None:
        items = kube.ok("GET", f"/api/v1/namespaces/{JS_NS}/pods")["items"]
        return {p["metadata"]["name"]: p for p in items} if len(items) == 4 else None

    created = wait_for("the Job controller's 4 pods", pods, timeout=60)
    groups = {p["spec"]["schedulingGroup"]["podGroupName"] for p in created.values()}
    assert len(groups) == 2, groups  # one PodGroup per Job, from the Workload's templates
    listed = kube.ok("GET", f"/apis/scheduling.k8s.io/v1beta1/namespaces/{JS_NS}/podgroups")["items"]
    by_template = {g["spec"]["workloadRef"]["templateName"]: g for g in listed}
    assert {t: g["spec"]["schedulingPolicy"]["gang"]["minCount"] for t, g in by_template.items()} == {
        "driver": 1,
        "workers": 3,
    }

    def state() -> tuple[list[str], list[str]] | None:
        now = pods() or {}
        placed = sorted(n for n, p in now.items() if p["spec"].get("nodeName"))
        waiting = sorted(n for n, p in now.items() if (condition(p) or {}).get("status") == "False")
        return (placed, waiting) if placed and len(waiting) == 3 else None

    placed, waiting = wait_for("the driver placed, the workers' gang held", state, timeout=60)
    assert [n.split("-")[1] for n in placed] == ["driver"]
    assert all(n.startswith("train-workers-0-") for n in waiting)

    def workers_condition() -> dict[str, Any] | None:
        c = group_condition(kube, by_template["workers"]["metadata"]["name"], JS_NS)
        return c if c is not None and c["status"] == "False" else None

    cond = wait_for("the workers' PodGroupInitiallyScheduled=False", workers_condition, timeout=60)
    assert cond["message"] == GANG_MESSAGE

    control_plane.create_node("js2", cpu="1", labels=POOL)

    def all_placed() -> list[str] | None:
        now = pods() or {}
        return sorted(now) if all(p["spec"].get("nodeName") for p in now.values()) else None

    wait_for("the whole JobSet placed", all_placed, timeout=60)
    for template in ("driver", "workers"):
        c = group_condition(kube, by_template[template]["metadata"]["name"], JS_NS)
        assert c is not None and (c["status"], c["reason"]) == ("True", "Scheduled"), (template, c)


# ---------------------------------------------------------------- one gang registry

MIX_NS = "dialects"
MIX_POOL = {"pool": "dialects"}


def test_the_workload_api_is_a_gang_source_beside_the_other_dialects(
    control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any
) -> None:
    """A Workload API gang is listed by ``berth get podgroups`` with its
    dialect beside a Volcano one; a pod both claim is held, the registry's
    message naming both, while the Workload API's own members bind."""
    control_plane.ensure_namespace(MIX_NS)
    control_plane.create_node("mix1", cpu="4", labels=MIX_POOL)
    berth = start_berth({"featureGates": GATES, "grpc": {"auth": {"reads": "open"}}})
    kube.create({**pod_group("wl", 2), "metadata": {"name": "wl", "namespace": MIX_NS}})
    volcano = {"scheduling.k8s.io/group-name": "vc"}
    for name, marks in (("wl-0", {}), ("wl-1", {}), ("both", volcano)):
        body = pod(name, cpu="1", namespace=MIX_NS, nodeSelector=MIX_POOL, schedulingGroup={"podGroupName": "wl"})
        body["metadata"]["annotations"] = marks
        kube.create(body)

    def bound() -> list[str] | None:
        items = kube.ok("GET", f"/api/v1/namespaces/{MIX_NS}/pods")["items"]
        names = sorted(p["metadata"]["name"] for p in items if p["spec"].get("nodeName"))
        return names if names == ["wl-0", "wl-1"] else None

    wait_for("the Workload API gang's two members bound", bound, timeout=60)
    with grpc.insecure_channel(f"127.0.0.1:{berth.grpc_port}") as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)

        def held() -> str | None:
            why = stub.Why(scheduler_pb2.WhyRequest(namespace=MIX_NS, name="both"), timeout=10)
            return next((b.message for b in why.blockers if "two gang sources" in b.message), None)

        message = wait_for("the doubly claimed pod held", held, timeout=30)
        assert 'workload-api (group "wl") and volcano (group "vc")' in message
        rows = stub.ListPodGroups(scheduler_pb2.ListPodGroupsRequest(namespace=MIX_NS), timeout=10).groups
    assert [(r.name, r.dialect, r.min_member, r.bound) for r in rows] == [("wl", "workload-api", 2, 2)]
    assert get_pod(kube, "both", MIX_NS)["spec"].get("nodeName") is None
