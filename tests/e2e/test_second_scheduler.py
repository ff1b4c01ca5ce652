"""Berth as a second scheduler beside kube-scheduler, against the real API:
pods naming ``berth`` are Berth's, everything else is left alone."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed
from tests.e2e.kubeutil import condition, events_for, get_pod, node_of, pod


@pytest.fixture(scope="module")
def nodes(control_plane: bed.ControlPlane) -> list[str]:
    made = []
    for i, zone in enumerate(("z1", "z1", "z2", "z3")):
        name = f"worker-{i}"
        control_plane.create_node(
            name,
            cpu="2",
            memory="4Gi",
            labels={"topology.kubernetes.io/zone": zone, "disk": "ssd" if i == 3 else "hdd"},
        )
        made.append(name)
    return made


def test_berth_binds_its_pods_and_reports_them_scheduled(nodes: list[str], kube: bed.Kube, start_berth: Any) -> None:
    start_berth()
    kube.create(pod("plain"))
    node = wait_for("plain to be bound", lambda: node_of(kube, "plain"), 30)
    assert node in nodes
    p = get_pod(kube, "plain")
    assert condition(p) is None or condition(p)["status"] == "True"
    events = wait_for(
        "a Scheduled event", lambda: [e for e in events_for(kube, "plain") if e.get("reason") == "Scheduled"], 15
    )
    assert node in (events[0].get("note") or events[0].get("message") or "")


def test_a_pod_that_fits_nowhere_stays_pending_with_the_reason(
    nodes: list[str], kube: bed.Kube, start_berth: Any
) -> None:
    start_berth()
    kube.create(pod("huge", cpu="64"))

    def unschedulable() -> dict[str, Any] | None:
        c = condition(get_pod(kube, "huge"))
        return c if c and c["status"] == "False" else None

    c = wait_for("PodScheduled=False", unschedulable, 30)
    assert c["reason"] == "Unschedulable"
    assert c["message"].startswith(f"0/{len(nodes) + 0}") or "nodes are available" in c["message"]
    assert "Insufficient cpu" in c["message"]
    failed = wait_for(
        "a FailedScheduling event",
        lambda: [e for e in events_for(kube, "huge") if e.get("reason") == "FailedScheduling"],
        15,
    )
    assert "Insufficient cpu" in (failed[0].get("note") or failed[0].get("message") or "")
    assert node_of(kube, "huge") is None


def test_node_affinity_and_selectors_are_honoured(nodes: list[str], kube: bed.Kube, start_berth: Any) -> None:
    start_berth()
    kube.create(pod("wants-ssd", nodeSelector={"disk": "ssd"}))
    assert wait_for("wants-ssd bound", lambda: node_of(kube, "wants-ssd"), 30) == "worker-3"


def test_topology_spread_places_one_pod_per_zone(nodes: list[str], kube: bed.Kube, start_berth: Any) -> None:
    start_berth()
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "spread"}},
        }
    ]
    for i in range(3):
        kube.create(pod(f"spread-{i}", labels={"app": "spread"}, topologySpreadConstraints=spread))
    placed = wait_for("three spread pods bound", lambda: all(node_of(kube, f"spread-{i}") for i in range(3)), 30)
    assert placed
    zones = {
        kube.ok("GET", f"/api/v1/nodes/{node_of(kube, f'spread-{i}')}")["metadata"]["labels"][
            "topology.kubernetes.io/zone"
        ]
        for i in range(3)
    }
    assert zones == {"z1", "z2", "z3"}


def test_a_gated_pod_waits_until_its_gate_is_removed(nodes: list[str], kube: bed.Kube, start_berth: Any) -> None:
    start_berth()
    kube.create(pod("gated", schedulingGates=[{"name": "example.com/wait"}]))
    with pytest.raises(AssertionError):
        wait_for("gated pod stays unbound", lambda: node_of(kube, "gated"), 3)
    kube.ok(
        "PATCH",
        "/api/v1/namespaces/default/pods/gated",
        [{"op": "remove", "path": "/spec/schedulingGates"}],
        content_type="application/json-patch+json",
    )
    assert wait_for("gated pod bound once ungated", lambda: node_of(kube, "gated"), 30)


def test_pods_of_other_schedulers_are_left_alone(nodes: list[str], kube: bed.Kube, start_berth: Any) -> None:
    start_berth()
    kube.create(pod("not-ours", scheduler="default-scheduler"))
    kube.create(pod("ours-after", scheduler="berth"))
    wait_for("berth to bind its own pod", lambda: node_of(kube, "ours-after"), 30)
    assert node_of(kube, "not-ours") is None
