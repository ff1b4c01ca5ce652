"""A topology-aware gang on the real control plane (issue 30): a ``batch/v1``
indexed Job whose pods the real Job controller creates, carrying Kueue's pod
group and ``podset-required-topology`` annotations, lands whole in the one
rack that holds it; with no rack big enough nothing binds, and once a rack
has room the gang binds there, whole."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed

pytestmark = pytest.mark.e2e

NS = "topology"
RACK = "topology.example.com/rack"
HOST = "kubernetes.io/hostname"
CONFIG = {"topology": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOST}]}}


@pytest.fixture(scope="module")
def cluster(control_plane: bed.ControlPlane) -> Iterator[bed.Kube]:
    """The namespace and kube-controller-manager's Job controller."""
    control_plane.ensure_namespace(NS)
    kcm = control_plane.start_controller_manager(("job-controller",))
    yield control_plane.kube()
    kcm.stop()


#: The Job as a user writes it: an indexed batch/v1 Job whose pod template
#: carries Kueue's pod group and topology annotations.
JOB = """
apiVersion: batch/v1
kind: Job
metadata: {{name: {name}, namespace: {ns}}}
spec:
  completionMode: Indexed
  parallelism: {pods}
  completions: {pods}
  template:
    metadata:
      labels: {{kueue.x-k8s.io/pod-group-name: {name}}}
      annotations:
        kueue.x-k8s.io/pod-group-total-count: "{pods}"
        kueue.x-k8s.io/podset-required-topology: {rack}
    spec:
      schedulerName: berth
      restartPolicy: Never
      nodeSelector: {{topology-case: racks}}
      containers:
      - name: c
        image: registry.k8s.io/pause:3.10
        resources: {{requests: {{cpu: "1", memory: 64Mi}}}}
"""


def indexed_job(name: str, pods: int) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(JOB.format(name=name, ns=NS, pods=pods, rack=RACK))
    return job


def job_pods(kube: bed.Kube, job: str) -> list[dict[str, Any]]:
    out = kube.ok("GET", f"/api/v1/namespaces/{NS}/pods", labelSelector=f"batch.kubernetes.io/job-name={job}")
    return list(out["items"])


def bound_pods(kube: bed.Kube, job: str, count: int) -> list[dict[str, Any]] | None:
    """The job's ``count`` pods once every one is bound (None before)."""
    pods = job_pods(kube, job)
    return pods if len(pods) == count and all(p["spec"].get("nodeName") for p in pods) else None


def rack_node(control_plane: bed.ControlPlane, name: str, rack: str, cpu: str) -> None:
    control_plane.create_node(name, cpu=cpu, labels={"topology-case": "racks", RACK: rack, HOST: name})


def test_an_indexed_job_with_kueues_annotations_lands_in_one_rack_or_nowhere(
    cluster: bed.Kube, control_plane: bed.ControlPlane, start_berth: Any
) -> None:
    kube = cluster
    # r1: 3 cpu, r2: 4 cpu, r3: 3 cpu — 10 in all; only r2 holds 4 pods of 1 cpu.
    for name, rack, cpu in (("r1-a", "r1", "2"), ("r1-b", "r1", "1"), ("r2-a", "r2", "2"), ("r2-b", "r2", "2")):
        rack_node(control_plane, name, rack, cpu)
    rack_node(control_plane, "r3-a", "r3", "3")
    berth = start_berth(config=CONFIG)

    kube.create(indexed_job("fits", 4))
    bound = wait_for("the 4 pods of fits bound", lambda: bound_pods(kube, "fits", 4), 90)
    assert {p["spec"]["nodeName"] for p in bound} == {"r2-a", "r2-b"}

    # Now r1 and r3 have 3 cpu each: 6 free, but no rack holds 4.
    kube.create(indexed_job("waits", 4))

    def unschedulable() -> bool:
        conds = [
            c
            for p in job_pods(kube, "waits")
            for c in p["status"].get("conditions", [])
            if c["type"] == "PodScheduled" and c["status"] == "False"
        ]
        return len(conds) == 4

    wait_for("every member of waits reported unschedulable", unschedulable, 60)
    pods = job_pods(kube, "waits")
    assert [p["spec"].get("nodeName") for p in pods] == [None] * 4
    messages = {c["message"] for p in pods for c in p["status"]["conditions"] if c["type"] == "PodScheduled"}
    assert any(f"no domain of topology level {RACK} can hold the gang's 4 unplaced pods" in m for m in messages), (
        messages
    )
    status, body = berth.get("/healthz")
    assert status == 200, body

    rack_node(control_plane, "r3-b", "r3", "1")  # r3 now holds 4
    bound = wait_for("the 4 pods of waits bound in r3", lambda: bound_pods(kube, "waits", 4), 90)
    assert {p["spec"]["nodeName"] for p in bound} == {"r3-a", "r3-b"}
