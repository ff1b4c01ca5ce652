"""Two Berth replicas on one Lease: only the leader binds; killing it hands
over within the lease duration, and every pod is bound exactly once."""

from __future__ import annotations

import time
from typing import Any

from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed
from tests.e2e.kubeutil import node_of, pod

LEASE = {
    "leaderElect": True,
    "leaseDurationSeconds": 4,
    "renewDeadlineSeconds": 3,
    "retryPeriodSeconds": 1,
    "resourceNamespace": "default",
    "resourceName": "berth-e2e",
}


def holder(kube: bed.Kube) -> str | None:
    status, lease = kube.request("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/berth-e2e")
    return lease["spec"].get("holderIdentity") if status == 200 else None


def binding_events(kube: bed.Kube) -> list[dict[str, Any]]:
    status, body = kube.request("GET", "/apis/events.k8s.io/v1/namespaces/default/events")
    return [e for e in body.get("items", []) if e.get("reason") == "Scheduled"] if status == 200 else []


def test_only_the_leader_binds_and_a_killed_leader_hands_over(
    control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any
) -> None:
    for i in range(3):
        control_plane.create_node(f"le-{i}", cpu="8", memory="16Gi")
    a = start_berth({"leaderElection": LEASE}, name="replica-a")
    b = start_berth({"leaderElection": LEASE}, name="replica-b")
    leader_id = wait_for("a lease holder", lambda: holder(kube), 20)
    for i in range(5):
        kube.create(pod(f"le-first-{i}"))
    wait_for("first pods bound", lambda: all(node_of(kube, f"le-first-{i}") for i in range(5)), 30)
    reporters = {e["reportingInstance"] for e in binding_events(kube)}
    assert reporters == {leader_id}, "only the leader binds"

    replicas = {a, b}
    # Identify the leader process by its log (identity is printed when it takes the lease).
    leader = next(r for r in replicas if leader_id in r.process.log.read_text())
    follower = (replicas - {leader}).pop()
    leader.process.kill()
    killed_at = time.monotonic()
    for i in range(5):
        kube.create(pod(f"le-after-{i}"))
    new_id = wait_for("the follower to take the lease", lambda: (h := holder(kube)) and h != leader_id and h, 20)
    wait_for("pods after the handover bound", lambda: all(node_of(kube, f"le-after-{i}") for i in range(5)), 30)
    handover = time.monotonic() - killed_at
    assert handover < LEASE["leaseDurationSeconds"] + 10
    assert new_id in follower.process.log.read_text()
    events = binding_events(kube)
    scheduled = [e["regarding"]["name"] for e in events]
    assert sorted(scheduled) == sorted({*scheduled}), f"a pod was bound twice: {scheduled}"
    assert {f"le-first-{i}" for i in range(5)} | {f"le-after-{i}" for i in range(5)} <= set(scheduled)
