"""Preemption against the real API (victims deleted with the preemption
reason, nominated node written, the preemptor bound), and Berth riding out
an API server that goes away."""

from __future__ import annotations

import time
from typing import Any

from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed
from tests.e2e.kubeutil import get_pod, node_of, pod


def priority_class(kube: bed.Kube, name: str, value: int) -> None:
    kube.create(
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value},
        exist_ok=True,
    )


def exists(kube: bed.Kube, name: str) -> bool:
    return kube.request("GET", f"/api/v1/namespaces/default/pods/{name}")[0] == 200


def test_a_high_priority_pod_preempts_lower_priority_ones(
    control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any
) -> None:
    priority_class(kube, "low", 10)
    priority_class(kube, "high", 1000)
    control_plane.create_node("pre-0", cpu="2", memory="4Gi")
    start_berth()
    for i in range(2):
        kube.create(pod(f"low-{i}", cpu="900m", priorityClassName="low"))
    wait_for("low pods bound", lambda: all(node_of(kube, f"low-{i}") for i in range(2)), 30)
    kube.create(pod("urgent", cpu="1500m", priorityClassName="high"))

    def nominated_or_bound() -> str | None:
        p = get_pod(kube, "urgent")
        return p["status"].get("nominatedNodeName") or p["spec"].get("nodeName")

    assert wait_for("urgent nominated or bound", nominated_or_bound, 30) == "pre-0"
    # Berth deletes its victims gracefully; with no kubelet in the bed they
    # stay Terminating, so play the kubelet and finish them off.
    # Both must go (1500m next to 900m on 2 CPUs); wait until Berth has
    # evicted both, or a late eviction would leave a Terminating pod forever.
    terminating = wait_for(
        "both victims marked for deletion",
        lambda: (
            names
            if len(
                names := [
                    f"low-{i}" for i in range(2) if get_pod(kube, f"low-{i}")["metadata"].get("deletionTimestamp")
                ]
            )
            == 2
            else None
        ),
        30,
    )
    for name in terminating:
        conditions = get_pod(kube, name)["status"].get("conditions", [])
        assert any(c["type"] == "DisruptionTarget" and c["reason"] == "PreemptionByScheduler" for c in conditions)
        kube.request("DELETE", f"/api/v1/namespaces/default/pods/{name}", gracePeriodSeconds="0")
    assert wait_for("urgent bound after preemption", lambda: node_of(kube, "urgent"), 60) == "pre-0"
    survivors = [i for i in range(2) if exists(kube, f"low-{i}")]
    assert len(survivors) == 0, "1500m needs both 900m pods gone on a 2-CPU node"
    _status, events = kube.request("GET", "/apis/events.k8s.io/v1/namespaces/default/events")
    preempted = {e["regarding"]["name"] for e in events["items"] if e.get("reason") == "Preempted"}
    assert preempted == {"low-0", "low-1"}


def test_berth_survives_the_api_server_going_away(
    control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any
) -> None:
    """The watch is cut and the API server restarted mid-run: Berth relists,
    loses no pod and binds none twice."""
    control_plane.create_node("fault-0", cpu="64", memory="128Gi")
    berth = start_berth()
    kube.create(pod("before-outage"))
    wait_for("before-outage bound", lambda: node_of(kube, "before-outage"), 30)
    during = [f"mid-run-{i}" for i in range(20)]
    for name in during:
        kube.create(pod(name))
    control_plane.stop_apiserver()  # some of these are being bound right now
    assert berth.get("/healthz")[0] == 200  # Berth stays up while the API is gone
    time.sleep(2)
    control_plane.start_apiserver()
    after = [f"after-outage-{i}" for i in range(5)]
    for name in after:
        kube.create(pod(name))
    wait_for("every pod bound once the API is back", lambda: all(node_of(kube, n) for n in during + after), 90)
    assert berth.process.alive()
    _status, events = kube.request("GET", "/apis/events.k8s.io/v1/namespaces/default/events")
    scheduled = [e["regarding"]["name"] for e in events["items"] if e.get("reason") == "Scheduled"]
    twice = {n for n in scheduled if scheduled.count(n) > 1}
    assert not twice, f"bound twice: {twice}"
    log = berth.process.log.read_text()
    assert "Task exception was never retrieved" not in log, "a background task died unnoticed"
