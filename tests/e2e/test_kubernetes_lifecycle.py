"""Kubernetes mode across the API server's absences and a rolling restart:
Berth started before the API server waits for it (``/readyz`` 503 until the
caches sync) instead of exiting; an API server that goes away mid-run ends
the leader's term but not the process, and scheduling resumes when it is
back; SIGTERM releases the Lease (client-go's ``ReleaseOnCancel``) so a
standby takes over at its next retry, not after the lease duration."""

from __future__ import annotations

import time
from typing import Any

from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed
from tests.e2e.kubeutil import node_of, pod

LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/default/leases/berth-lifecycle"


def lease_config(duration: float, deadline: float, retry: float) -> dict[str, Any]:
    return {
        "leaderElect": True,
        "leaseDurationSeconds": duration,
        "renewDeadlineSeconds": deadline,
        "retryPeriodSeconds": retry,
        "resourceNamespace": "default",
        "resourceName": "berth-lifecycle",
    }


def lease(kube: bed.Kube) -> dict[str, Any] | None:
    status, body = kube.request("GET", LEASE_PATH)
    return body["spec"] if status == 200 else None


def holder(kube: bed.Kube) -> str | None:
    spec = lease(kube)
    return spec.get("holderIdentity") if spec else None


def test_berth_started_while_the_api_server_is_down_becomes_ready_once_it_appears(
    control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any
) -> None:
    control_plane.create_node("late-0", cpu="8", memory="16Gi")
    control_plane.stop_apiserver()
    try:
        berth = start_berth(ready=False, name="early")
        # Alive at once (a kubelet's liveness probe must not restart it), not ready.
        wait_for("Berth's HTTP server", lambda: berth.get("/healthz")[0] == 200 or _exited(berth), 10)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            assert berth.process.alive(), f"Berth exited while the API server was down:\n{berth.process.tail()}"
            assert berth.get("/readyz")[0] == 503, "ready before any cache synced"
            time.sleep(0.5)
    finally:
        control_plane.start_apiserver()
    wait_for("/readyz once the API server is back", lambda: berth.get("/readyz")[0] == 200 or _exited(berth), 90)
    kube.create(pod("late-pod"))
    wait_for("late-pod bound", lambda: node_of(kube, "late-pod"), 30)
    log = berth.process.log.read_text()
    # The outage fell on the release read, which retries with client-go's
    # backoff while the HTTP port answers alive-not-ready (the runner's own
    # start-up calls retry the same way: tests/kubernetes/test_runner.py).
    assert "reading the API server's version failed" in log
    assert "Traceback" not in log


def test_sigterm_releases_the_lease_and_a_standby_takes_over_within_its_retry_period(
    control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any
) -> None:
    # A lease duration far longer than the handover we expect: only a release explains a quick one.
    cfg = lease_config(duration=30, deadline=10, retry=1)
    control_plane.create_node("roll-0", cpu="8", memory="16Gi")
    a = start_berth({"leaderElection": cfg}, name="roll-a")
    b = start_berth({"leaderElection": cfg}, name="roll-b")
    leader_id = wait_for("a lease holder", lambda: holder(kube), 30)
    # The leader's log says "<identity> is the leader"; a standby's names the holder too ("held by").
    leader = wait_for(
        "the leader's log to say so",
        lambda: next((r for r in (a, b) if f"{leader_id} is the leader" in r.process.log.read_text()), None),
        10,
    )
    standby = b if leader is a else a

    leader.process.proc.terminate()  # SIGTERM, as the kubelet sends it in a rolling restart
    sent = time.monotonic()
    released = wait_for("the lease released", lambda: holder(kube) != leader_id, 10, interval=0.05)
    released_after = time.monotonic() - sent
    assert released, "the holder changed"
    assert released_after < 1.5, f"the lease was released {released_after:.1f}s after SIGTERM"
    new_id = wait_for("the standby to take the lease", lambda: holder(kube) or None, 10, interval=0.05)
    took_over_after = time.monotonic() - sent
    assert wait_for(
        "the standby's log to say it leads", lambda: f"{new_id} is the leader" in standby.process.log.read_text(), 10
    )
    assert took_over_after < 1 * 1.2 + 2.0, f"took over {took_over_after:.1f}s after SIGTERM (lease is 30s)"
    assert leader.process.proc.wait(15) == 0, leader.process.tail()
    assert "released Lease default/berth-lifecycle" in leader.process.log.read_text()

    kube.create(pod("after-roll"))
    wait_for("a pod bound by the new leader", lambda: node_of(kube, "after-roll"), 30)
    standby.process.stop()
    wait_for("the second release", lambda: holder(kube) == "", 10, interval=0.05)


def test_an_api_server_gone_longer_than_the_renew_deadline_ends_the_term_not_the_process(
    control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any
) -> None:
    cfg = lease_config(duration=6, deadline=4, retry=1)
    control_plane.create_node("gone-0", cpu="8", memory="16Gi")
    berth = start_berth({"leaderElection": cfg}, name="outlast")
    wait_for("leadership", lambda: holder(kube) and holder(kube) in berth.process.log.read_text(), 30)
    kube.create(pod("before-gone"))
    wait_for("before-gone bound", lambda: node_of(kube, "before-gone"), 30)

    control_plane.stop_apiserver()
    try:
        wait_for("the term to end", lambda: "lost the lease" in berth.process.log.read_text(), 30)
        assert berth.process.alive(), berth.process.tail()
        assert berth.get("/healthz")[0] == 200
    finally:
        control_plane.start_apiserver()
    kube.create(pod("after-gone"))
    wait_for("after-gone bound by the re-elected leader", lambda: node_of(kube, "after-gone"), 90)
    assert berth.process.alive()
    log = berth.process.log.read_text()
    assert "(term 2)" in log, "a new term after the outage"
    assert "Task exception was never retrieved" not in log


def _exited(berth: Any) -> bool:
    if not berth.process.alive():
        raise AssertionError(f"{berth.process.name} exited ({berth.process.proc.returncode}):\n{berth.process.tail()}")
    return False
