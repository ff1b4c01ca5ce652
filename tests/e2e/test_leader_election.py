"""Two Berth replicas on one Lease: only the leader binds; killing it hands
over within the lease duration, and every pod is bound exactly once."""

from __future__ import annotations

import signal
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
    # Identify the leader process by its log: it says "<identity> is the leader"
    # when its term starts (a follower's log names the holder too, "held by").
    leader = next(r for r in replicas if f"{leader_id} is the leader" in r.process.log.read_text())
    follower = (replicas - {leader}).pop()
    leader.process.kill()
    killed_at = time.monotonic()
    for i in range(5):
        kube.create(pod(f"le-after-{i}"))
    new_id = wait_for("the follower to take the lease", lambda: (h := holder(kube)) and h != leader_id and h, 20)
    wait_for("pods after the handover bound", lambda: all(node_of(kube, f"le-after-{i}") for i in range(5)), 30)
    handover = time.monotonic() - killed_at
    assert handover < LEASE["leaseDurationSeconds"] + 10
    assert f"{new_id} is the leader" in follower.process.log.read_text()
    events = binding_events(kube)
    scheduled = [e["regarding"]["name"] for e in events]
    assert sorted(scheduled) == sorted({*scheduled}), f"a pod was bound twice: {scheduled}"
    assert {f"le-first-{i}" for i in range(5)} | {f"le-after-{i}" for i in range(5)} <= set(scheduled)


def test_a_leader_paused_past_its_lease_binds_nothing_after_it_resumes(
    control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any
) -> None:
    """SIGSTOP the leader past its Lease, let the standby take over, SIGCONT
    it while pods keep arriving: the old leader writes no Binding (its last
    renewal is older than renewDeadline: fenced), every pod is bound once, by
    the new leader (issue 28: kube-scheduler and Berth before the fence bound
    19-31 pods after the takeover)."""
    for i in range(3):
        control_plane.create_node(f"pause-{i}", cpu="8", memory="16Gi")
    a = start_berth({"leaderElection": {**LEASE, "resourceName": "berth-pause"}}, name="pause-a")
    b = start_berth({"leaderElection": {**LEASE, "resourceName": "berth-pause"}}, name="pause-b")

    def lease_holder() -> str | None:
        status, lease = kube.request("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/berth-pause")
        return lease["spec"].get("holderIdentity") if status == 200 else None

    old_id = wait_for("a lease holder", lease_holder, 20)
    old = wait_for(
        "the leader's log to say so",
        lambda: next((r for r in (a, b) if f"{old_id} is the leader" in r.process.log.read_text()), None),
        10,
    )
    old.process.proc.send_signal(signal.SIGSTOP)
    try:
        new_id = wait_for("the standby to take the lease", lambda: (h := lease_holder()) and h != old_id and h, 30)
        for i in range(5):
            kube.create(pod(f"pause-during-{i}"))
    finally:
        old.process.proc.send_signal(signal.SIGCONT)
    for i in range(10):  # arriving while the old leader wakes up believing it leads
        kube.create(pod(f"pause-after-{i}"))
    names = [f"pause-during-{i}" for i in range(5)] + [f"pause-after-{i}" for i in range(10)]
    wait_for("every pod bound", lambda: all(node_of(kube, n) for n in names), 40)
    time.sleep(2)  # anything the old leader still had in flight would land by now
    events = [e for e in binding_events(kube) if e["regarding"]["name"] in names]
    by = {e["regarding"]["name"]: e["reportingInstance"] for e in events}
    assert sorted(e["regarding"]["name"] for e in events) == sorted(names), "each pod bound exactly once"
    assert set(by.values()) == {new_id}, f"the paused leader bound after the takeover: {by}"
    assert old.process.alive()
