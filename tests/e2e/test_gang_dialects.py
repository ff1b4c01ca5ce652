"""Gangs in the frameworks' dialects on the real control plane: a ``batch/v1``
indexed Job whose pods the real Job controller creates, gang-scheduled all or
nothing by Berth as a second scheduler, through Volcano's, Kueue's and
scheduler-plugins' keys, with the PodGroup CRDs installed (Volcano's from
tests/e2e/crds, scheduler-plugins' as the chart ships it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed

pytestmark = pytest.mark.e2e

#: Volcano's PodGroup CRD (test data), and scheduler-plugins' as the chart ships it.
CRDS = [
    *sorted((Path(__file__).parent / "crds").glob("*.yaml")),
    Path(__file__).parents[2] / "helm" / "berth" / "files" / "scheduling.x-k8s.io_podgroups.yaml",
]
NS = "gangs"


@pytest.fixture(scope="module")
def cluster(control_plane: bed.ControlPlane) -> Iterator[bed.Kube]:
    """Both PodGroup CRDs established, the namespace, and kube-controller-manager
    running the Job controller (``job-controller``, kube-controller-manager's name for it)."""
    kube = control_plane.kube()
    for path in CRDS:
        crd = yaml.safe_load(path.read_text())
        kube.create(crd)
        name = crd["metadata"]["name"]

        def established(name: str = name) -> bool:
            crd = kube.ok("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conditions = crd.get("status", {}).get("conditions", [])
            return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

        wait_for(f"CRD {name} established", established)

    def discovered() -> bool:
        # Discovery lists a new CRD shortly after it is Established.
        kube.rediscover()
        served = kube.served()
        return all(
            (api, "PodGroup") in served for api in ("scheduling.volcano.sh/v1beta1", "scheduling.x-k8s.io/v1alpha1")
        )

    wait_for("both PodGroup kinds in discovery", discovered)
    control_plane.ensure_namespace(NS)
    kcm = control_plane.start_controller_manager(("job-controller",))
    yield kube
    kcm.stop()


#: dialect -> (its PodGroup, or None; the pod template's labels; its annotations)
DIALECTS: dict[str, tuple[dict[str, Any] | None, dict[str, str], dict[str, str]]] = {
    "volcano": (
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "train-volcano", "namespace": NS},
            "spec": {"minMember": 3, "queue": "default"},
        },
        {},
        {"scheduling.k8s.io/group-name": "train-volcano"},
    ),
    "kueue": (
        None,
        {"kueue.x-k8s.io/pod-group-name": "train-kueue"},
        {"kueue.x-k8s.io/pod-group-total-count": "3"},
    ),
    "scheduler-plugins": (
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "train-sp", "namespace": NS},
            "spec": {"minMember": 3},
        },
        {"scheduling.x-k8s.io/pod-group": "train-sp"},
        {},
    ),
}


def indexed_job(name: str, dialect: str, labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "completionMode": "Indexed",
            "parallelism": 3,
            "completions": 3,
            "template": {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": {
                    "schedulerName": "berth",
                    "restartPolicy": "Never",
                    "nodeSelector": {"gang-case": dialect},
                    "containers": [
                        {
                            "name": "c",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "1", "memory": "64Mi"}},
                        }
                    ],
                },
            },
        },
    }


def job_pods(kube: bed.Kube, job: str) -> list[dict[str, Any]]:
    out = kube.ok("GET", f"/api/v1/namespaces/{NS}/pods", labelSelector=f"batch.kubernetes.io/job-name={job}")
    return list(out["items"])


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_an_indexed_jobs_pods_are_bound_all_or_nothing(
    dialect: str, cluster: bed.Kube, control_plane: bed.ControlPlane, start_berth: Any
) -> None:
    group, labels, annotations = DIALECTS[dialect]
    kube = cluster
    # Room for 2 of the 3 pods (1 cpu each), on nodes only this case's pods select.
    control_plane.create_node(f"{dialect}-0", cpu="2", labels={"gang-case": dialect})
    start_berth()
    if group is not None:
        kube.create(group)
    job = f"train-{dialect}"
    kube.create(indexed_job(job, dialect, labels, annotations))
    pods = wait_for(
        f"the Job controller's 3 pods of {job}", lambda: len(job_pods(kube, job)) == 3 and job_pods(kube, job)
    )
    assert sorted(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in pods) == [
        "0",
        "1",
        "2",
    ]

    def unschedulable() -> bool:
        conds = [
            c for p in job_pods(kube, job) for c in p["status"].get("conditions", []) if c["type"] == "PodScheduled"
        ]
        return len(conds) == 3 and all(c["status"] == "False" for c in conds)

    wait_for("every member reported unschedulable", unschedulable, 60)
    assert [p["spec"].get("nodeName") for p in job_pods(kube, job)] == [None, None, None]

    control_plane.create_node(f"{dialect}-1", cpu="1", labels={"gang-case": dialect})  # room for the third
    bound = wait_for(
        f"all 3 pods of {job} bound",
        lambda: all(p["spec"].get("nodeName") for p in job_pods(kube, job)) and job_pods(kube, job),
        90,
    )
    assert sorted(p["spec"]["nodeName"] for p in bound) == sorted([f"{dialect}-0", f"{dialect}-0", f"{dialect}-1"])
    if group is not None:
        api = group["apiVersion"]
        phase = {"scheduling.volcano.sh/v1beta1": "Inqueue", "scheduling.x-k8s.io/v1alpha1": "Scheduling"}[api]
        path = f"/apis/{api}/namespaces/{NS}/podgroups/{group['metadata']['name']}"
        wait_for(f"PodGroup phase {phase}", lambda: kube.ok("GET", path).get("status", {}).get("phase") == phase, 30)
