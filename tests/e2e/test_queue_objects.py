"""Queues as Kubernetes objects (Queue, berth.dev/v1alpha1) against the real
API server: the chart's CRD installed, Queue objects created, changed and
deleted with the admin client, Berth's ListQueues following them beside the
configuration file's queues, the leader writing each object's status, and a
Queue Berth refuses getting ``Accepted=False`` with the reason."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from berth.cluster import queues
from tests.e2e.conftest import Berth, wait_for
from tests.e2e.controlplane import bed
from tests.e2e.kubeutil import get_pod, pod

pytestmark = pytest.mark.e2e

LABEL_QUEUE = "berth.dev/queue"
ROOT = Path(__file__).resolve().parents[2]
CRD = f"{queues.PLURAL}.{queues.GROUP}"
BASE = f"/apis/{queues.API_VERSION}/{queues.PLURAL}"


def chart_crd() -> dict[str, Any]:
    """The CRD as the chart renders it (helm template --show-only)."""
    helm = bed.find_binaries()["helm"]
    out = subprocess.run(
        [
            str(helm),
            "template",
            "q",
            str(ROOT / "helm" / "berth"),
            "--show-only",
            "templates/queues-crd.yaml",
            "--kube-version",
            bed.KUBERNETES_VERSION,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    crd: dict[str, Any] = yaml.safe_load(out)
    return crd


@pytest.fixture(scope="module")
def crd(kube: bed.Kube) -> Iterator[None]:
    body = chart_crd()
    status, have = kube.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}")
    if status == 200:
        body["metadata"]["resourceVersion"] = have["metadata"]["resourceVersion"]
        kube.ok("PUT", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}", body)
    else:
        kube.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body)
    wait_for("the Queue CRD to be served", lambda: kube.request("GET", BASE)[0] == 200, 30)
    yield
    for item in kube.ok("GET", BASE)["items"]:
        kube.request("DELETE", f"{BASE}/{item['metadata']['name']}")


def queue(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": queues.API_VERSION, "kind": queues.KIND, "metadata": {"name": name}, "spec": spec}


def list_queues(berth: Berth) -> dict[str, Any]:
    with grpc.insecure_channel(f"127.0.0.1:{berth.grpc_port}") as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        return {q.name: q for q in stub.ListQueues(scheduler_pb2.ListQueuesRequest(), timeout=10).queues}


def accepted(kube: bed.Kube, name: str) -> dict[str, Any] | None:
    obj = kube.ok("GET", f"{BASE}/{name}")
    for c in obj.get("status", {}).get("conditions", []):
        if c["type"] == "Accepted" and c.get("observedGeneration") == obj["metadata"]["generation"]:
            return dict(c)
    return None


def test_queue_objects_are_followed_and_their_status_written(
    control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any, crd: None
) -> None:
    ns = "queue-objects"
    control_plane.ensure_namespace(ns)
    control_plane.create_node("qo-0", cpu="4", memory="16Gi")
    berth = start_berth(
        # Reads open: this test is about the queues, not the doors' authentication.
        {"queues": [{"name": "file-root", "guaranteed": {"cpu": "2"}}], "grpc": {"auth": {"reads": "open"}}}
    )

    # Created: in the tree under the file's queue.
    kube.ok("POST", BASE, queue("team-a", parent="file-root", guaranteed={"cpu": "1"}, max={"cpu": "1"}))
    got = wait_for("team-a in ListQueues", lambda: (q := list_queues(berth).get("team-a")) and q)
    assert (got.parent, dict(got.guaranteed), dict(got.max)) == ("file-root", {"cpu": 1000}, {"cpu": 1000})
    assert list_queues(berth)["file-root"].children == ["team-a"]

    # Pods labelled for it: one fits its max, one waits; the status says so.
    for i in range(2):
        kube.create(pod(f"a-{i}", cpu="1", namespace=ns, labels={"app": "a", LABEL_QUEUE: "team-a"}))

    def status() -> dict[str, Any] | None:
        st: dict[str, Any] = kube.ok("GET", f"{BASE}/team-a").get("status", {})
        ok = st.get("allocated", {}).get("cpu") == "1" and st.get("pendingPods") == 1
        if not ok:
            raise AssertionError(st)  # wait_for reports the last one
        return st

    st = wait_for("team-a's status: 1 cpu allocated, 1 pod pending", status, 30)
    assert st["pending"] == st["allocated"] == {"cpu": "1", "memory": "64Mi"}  # kubeutil.pod's requests
    assert st["dominantShare"] == 0.25
    [cond] = st["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Accepted", "True", "Applied")
    assert cond["observedGeneration"] == 1

    # Changed: the weight follows, the usage stays.
    kube.ok("PATCH", f"{BASE}/team-a", {"spec": {"weight": 3}}, content_type="application/merge-patch+json")
    got = wait_for("team-a's new weight", lambda: (q := list_queues(berth)["team-a"]).weight == 3 and q)
    assert dict(got.allocated) == {"cpu": 1000, "memory": 64 * 2**20}
    assert wait_for("generation 2 accepted", lambda: accepted(kube, "team-a"))["status"] == "True"

    # Refused: an unknown parent, and a name of the file; nothing changes.
    kube.ok("POST", BASE, queue("orphan", parent="nowhere"))
    kube.ok("POST", BASE, queue("file-root", weight=5))
    orphan = wait_for("orphan's condition", lambda: accepted(kube, "orphan"))
    assert (orphan["status"], orphan["reason"]) == ("False", "InvalidHierarchy")
    assert "no queue named 'nowhere'" in orphan["message"], orphan["message"]
    clash = wait_for("file-root's condition", lambda: accepted(kube, "file-root"))
    assert (clash["status"], clash["reason"]) == ("False", "DefinedInConfiguration")
    tree = list_queues(berth)
    assert "orphan" not in tree
    assert tree["file-root"].weight == 1

    # An invalid change to a running queue keeps what ran.
    kube.ok(
        "PATCH",
        f"{BASE}/team-a",
        {"spec": {"parent": "nowhere"}},
        content_type="application/merge-patch+json",
    )
    kept = wait_for(
        "team-a refused at generation 3", lambda: (c := accepted(kube, "team-a")) and c["status"] == "False" and c
    )
    assert kept["message"].endswith("; the queue keeps the spec of generation 2"), kept["message"]
    assert list_queues(berth)["team-a"].parent == "file-root"

    # Deleted: gone from the tree, as a queue removed from the file; its
    # waiting pod stays pending.
    kube.ok("DELETE", f"{BASE}/team-a")
    wait_for("team-a gone from ListQueues", lambda: "team-a" not in list_queues(berth))
    waiting = [p for p in ("a-0", "a-1") if not get_pod(kube, p, ns)["spec"].get("nodeName")]
    assert len(waiting) == 1
    assert list_queues(berth)["file-root"].children == []
    kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods", gracePeriodSeconds="0")
