"""The leader-only Service's selector, for real: two replicas with Pod
objects of their own (POD_NAME/POD_NAMESPACE as the chart's downward API
sets them; the bed has no kubelet, so the Pods are bound to a node name by
hand and never run). The Lease holder labels its Pod
``berth.dev/leader=true``; a killed leader cannot remove its label, and the
new one both removes it and labels itself. The failover time — kill to the
new leader labelled *and* a pending pod bound — is printed (docs/operations.md
quotes it); the only bound on it is generous."""

from __future__ import annotations

import time
from typing import Any

import pytest

from berth.adapters.kubernetes.leaderlabel import LABEL
from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed
from tests.e2e.kubeutil import node_of, pod

pytestmark = pytest.mark.e2e

LEASE = {
    "leaderElect": True,
    "leaseDurationSeconds": 4,
    "renewDeadlineSeconds": 3,
    "retryPeriodSeconds": 1,
    "resourceNamespace": "default",
    "resourceName": "berth-ha",
}
# The chart's selector labels (the leader finds the other replicas by them).
REPLICA_LABELS = {"app.kubernetes.io/name": "berth", "app.kubernetes.io/instance": "ha", "app": "berth-replica"}


def replica_pod(name: str) -> dict[str, Any]:
    p = pod(name, scheduler="default-scheduler", labels=dict(REPLICA_LABELS), nodeName="ha-control-plane")
    return p


def labels(kube: bed.Kube, name: str) -> dict[str, str]:
    status, body = kube.request("GET", f"/api/v1/namespaces/default/pods/{name}")
    assert status == 200, body
    return dict(body["metadata"].get("labels") or {})


def leaders(kube: bed.Kube) -> set[str]:
    body = kube.ok("GET", "/api/v1/namespaces/default/pods", labelSelector=f"{LABEL}=true")
    return {p["metadata"]["name"] for p in body["items"]}


def holder(kube: bed.Kube) -> str | None:
    status, lease = kube.request("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/berth-ha")
    return lease["spec"].get("holderIdentity") if status == 200 else None


def test_the_leader_labels_its_pod_and_a_new_leader_takes_the_label_over(
    control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    control_plane.create_node("ha-node", cpu="8", memory="16Gi")
    replicas = {}
    for name in ("berth-ha-a", "berth-ha-b"):
        kube.create(replica_pod(name))
        replicas[name] = start_berth(
            # Each replica its own dashboard port: both run on this one host.
            {"leaderElection": LEASE, "ui": {"port": bed.free_port()}},
            name=name,
            env={"POD_NAME": name, "POD_NAMESPACE": "default"},
        )
    first = wait_for("one replica's pod labelled", lambda: (found := leaders(kube)) and len(found) == 1 and found, 30)
    [leader] = first
    follower = ({*replicas} - {leader}).pop()
    assert LABEL not in labels(kube, follower)
    held = wait_for("the lease held", lambda: holder(kube), 10)
    assert wait_for(
        "the labelled pod's log to say it leads",
        lambda: f"{held} is the leader" in replicas[leader].process.log.read_text(),
        10,
    ), "the labelled pod is the Lease holder's"
    kube.create(pod("ha-first"))
    wait_for("a pod bound by the first leader", lambda: node_of(kube, "ha-first"), 30)

    replicas[leader].process.kill()  # no chance to remove its label
    killed = time.monotonic()
    kube.create(pod("ha-after"))

    def taken_over() -> bool:
        return labels(kube, follower).get(LABEL) == "true" and bool(node_of(kube, "ha-after"))

    wait_for("the new leader labelled and the pending pod bound", taken_over, 60)
    failover = time.monotonic() - killed
    wait_for("the dead leader's label swept", lambda: leaders(kube) == {follower}, 30)
    with capsys.disabled():
        print(
            f"\nleader failover (lease {LEASE['leaseDurationSeconds']}s, renew {LEASE['renewDeadlineSeconds']}s, "
            f"retry {LEASE['retryPeriodSeconds']}s): new leader labelled and scheduling {failover:.1f}s after "
            "the old one was killed"
        )
    # Generous: a lease duration, a retry, the term's start; anything near this bound is a regression.
    assert failover < LEASE["leaseDurationSeconds"] + 20
