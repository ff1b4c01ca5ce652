"""A JobSet gang-scheduled by Berth on the real control plane, made by
JobSet's own controller (issue 26, item 5).

``jobset-manager`` (sigs.k8s.io/jobset v0.12.0, built by ``build-jobset.sh``
beside the bed) runs against the bed's API server: it makes one ``batch/v1``
Job per replicatedJob replica, and the real Job controller makes their pods.

JobSet v0.12.0 writes no Workload API objects (``scheduling.k8s.io``
Workloads or PodGroups) and no gang keys of any scheduler: its controller's
RBAC covers only ``jobset.x-k8s.io``, ``batch``, core and events, and its
sources (``pkg/``, ``api/``, ``main.go``) never name ``scheduling.k8s.io``,
a PodGroup or a workloadRef. So the gang comes from a dialect JobSet users
use with it: scheduler-plugins coscheduling. Both replicatedJobs' pod
templates carry ``scheduling.x-k8s.io/pod-group: <name>``, which the Jobs
copy onto every pod, and a scheduler-plugins PodGroup (CRD as the chart
ships it) asks for all of them (minMember = driver 1 + workers 3); Berth
binds them all or nothing through its scheduler-plugins dialect
(berth/gangs/sources.py, berth/plugins/coscheduling.py).

JobSet's webhooks (JobSet defaulting and validation, and its pod webhooks,
which admit every pod of a JobSet) are served on 127.0.0.1 with a
certificate tests/e2e/operators.py makes (its internal cert rotation, which
wants an in-cluster Secret and Service, is off), and registered with ``url:``
clientConfigs built from the module's own ``config/components/webhook``
manifests and kustomize patches.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from berth.plugins.coscheduling import DEFAULT_POD_GROUP_BACKOFF_SECONDS
from tests.e2e import kubeutil, operators
from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed

pytestmark = pytest.mark.e2e

NS = "jobset"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
PODGROUP_API = "scheduling.x-k8s.io/v1alpha1"
PODGROUP_CRD = Path(__file__).parents[2] / "helm" / "berth" / "files" / "scheduling.x-k8s.io_podgroups.yaml"
#: config.jobset.x-k8s.io/v1alpha1 Configuration (api/config/v1alpha1/configuration_types.go, v0.12.0).
JOBSET = operators.Controller("jobset", "sigs.k8s.io/jobset", "jobset-manager", "config.jobset.x-k8s.io/v1alpha1")
#: jobset.x-k8s.io/v1alpha2 labels JobSet puts on its Jobs and pods (api/jobset/v1alpha2/jobset_types.go, v0.12.0).
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
#: scheduler-plugins' coscheduling label (apis/scheduling/v1alpha1/types.go PodGroupLabel).
POD_GROUP = "scheduling.x-k8s.io/pod-group"


@pytest.fixture(scope="module")
def jobset(control_plane: bed.ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[bed.Kube]:
    """JobSet's and scheduler-plugins' PodGroup CRDs, kube-controller-manager
    with the Job controller, and jobset-manager with its webhooks registered;
    its webhooks answer before this yields."""
    kube = control_plane.kube()
    probe = job_set("probe", {"driver": 1})

    def answering() -> bool:
        # A dry-run create passes through JobSet's mutating and validating JobSet webhooks.
        return kube.request("POST", f"/apis/{JOBSET_API}/namespaces/{NS}/jobsets", probe, dryRun="All")[0] == 201

    with operators.running(
        control_plane,
        tmp_path_factory.mktemp("jobset"),
        JOBSET,
        kinds=[(JOBSET_API, "JobSet"), (PODGROUP_API, "PodGroup")],
        namespace=NS,
        kcm_controllers=("job-controller",),
        answering=answering,
        more_crds=[PODGROUP_CRD],
    ):
        yield kube


def job_set(name: str, replicated: dict[str, int], group: str | None = None) -> dict[str, Any]:
    """A JobSet with one replica of each ``replicatedJob name -> pod count``
    (an Indexed Job of that parallelism), its pods 1-cpu pause containers for
    Berth on this module's nodes, labelled into scheduler-plugins ``group``."""
    pod_spec = kubeutil.pod(name, cpu="1", nodeSelector={"pool": NS}, restartPolicy="Never")["spec"]
    labels = {POD_GROUP: group} if group else {}
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicatedJobs": [
                {
                    "name": job,
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": pods,
                            "completions": pods,
                            "backoffLimit": 0,
                            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
                        }
                    },
                }
                for job, pods in replicated.items()
            ]
        },
    }


def pods_of(kube: bed.Kube, name: str) -> list[dict[str, Any]]:
    out = kube.ok("GET", f"/api/v1/namespaces/{NS}/pods", labelSelector=f"{JOBSET_NAME}={name}")
    return sorted(out["items"], key=lambda p: p["metadata"]["name"])


def test_a_jobsets_two_replicated_jobs_bind_all_or_nothing(
    jobset: bed.Kube, control_plane: bed.ControlPlane, start_berth: Any
) -> None:
    kube = jobset
    control_plane.create_node("jobset-0", cpu="3", labels={"pool": NS})  # room for 3 of the gang's 4
    berth = start_berth({"grpc": {"auth": {"reads": "open"}}})
    kube.create(
        {
            "apiVersion": PODGROUP_API,
            "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": NS},
            "spec": {"minMember": 4},
        }
    )
    kube.create(job_set("train", {"driver": 1, "workers": 3}, group="train"))

    # JobSet's Jobs (train-driver-0, train-workers-0) and the Job controller
    # make the driver and 3 workers, each with the template's pod-group label.
    pods = wait_for("the JobSet's 4 pods", lambda: (p := pods_of(kube, "train")) and len(p) == 4 and p, 60)
    assert sorted(p["metadata"]["labels"][REPLICATED_JOB] for p in pods) == ["driver", "workers", "workers", "workers"]
    assert {p["metadata"]["labels"][POD_GROUP] for p in pods} == {"train"}
    names = [p["metadata"]["name"] for p in pods]

    # Three fit, the fourth does not: the member that finds no room releases
    # those waiting at Permit, and Berth holds the whole gang for its backoff
    # (coscheduling's podGroupBackoffSeconds) before trying it again; no
    # member binds, and each one's Why names the gang.
    backoff = f"{DEFAULT_POD_GROUP_BACKOFF_SECONDS:g}s"
    held = f'pod group "{NS}/train" failed recently: its members are tried again when its {backoff} backoff ends'
    with grpc.insecure_channel(f"127.0.0.1:{berth.grpc_port}") as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)

        def gated() -> list[str] | None:
            whys = [stub.Why(scheduler_pb2.WhyRequest(namespace=NS, name=n), timeout=10) for n in names]
            return [w.summary for w in whys] if all(w.phase == "Gated" for w in whys) else None

        assert wait_for("every member held by its gang", lambda: (g := gated()) == [held] * 4 and g, 60)
    assert [p["spec"].get("nodeName") for p in pods_of(kube, "train")] == [None] * 4

    control_plane.create_node("jobset-1", cpu="1", labels={"pool": NS})  # room for the fourth

    def bound() -> list[str] | None:
        nodes = [p["spec"].get("nodeName") for p in pods_of(kube, "train")]
        return sorted(nodes) if len(nodes) == 4 and all(nodes) else None

    assert wait_for("all 4 members bound", bound, 60) == ["jobset-0", "jobset-0", "jobset-0", "jobset-1"]
    # Running would need kubelets to run the pods; bound is as far as the bed goes.
    pg = f"/apis/{PODGROUP_API}/namespaces/{NS}/podgroups/train"
    wait_for("PodGroup phase Scheduling", lambda: kube.ok("GET", pg).get("status", {}).get("phase") == "Scheduling", 30)
