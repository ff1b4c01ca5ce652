"""Batch queues (issue 12) against the real API server: a queue borrows an
idle guarantee, then gives it back by reclaim preemption (victims marked
``DisruptionTarget`` and deleted, as priority preemption's are), and every
pod held back by quota says which queue and resource in its
``PodScheduled`` condition and ``FailedScheduling`` event."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed
from tests.e2e.kubeutil import condition, events_for, get_pod, node_of, pod

LABEL_QUEUE = "berth.dev/queue"
#: Leader-elected, as Berth runs beside kube-scheduler (the contract's
#: "Kubernetes mode"); short timings so the lease is taken at once.
LEASE = {
    "leaderElect": True,
    "leaseDurationSeconds": 4,
    "renewDeadlineSeconds": 3,
    "retryPeriodSeconds": 1,
    "resourceNamespace": "default",
    "resourceName": "berth-queues-e2e",
}


@pytest.fixture
def namespace(control_plane: bed.ControlPlane, kube: bed.Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own; its pods are removed at teardown (no
    namespace controller runs in the bed) so the next test starts on empty nodes."""
    name = "queues-" + request.node.name.split("_")[1]
    control_plane.ensure_namespace(name)
    yield name
    kube.request("DELETE", f"/api/v1/namespaces/{name}/pods", gracePeriodSeconds="0")


def queued(name: str, queue: str, namespace: str, cpu: str = "1") -> dict[str, Any]:
    return pod(name, cpu=cpu, namespace=namespace, labels={"app": name, LABEL_QUEUE: queue})


def pods_in(kube: bed.Kube, namespace: str, prefix: str) -> dict[str, dict[str, Any]]:
    body = kube.ok("GET", f"/api/v1/namespaces/{namespace}/pods")
    return {p["metadata"]["name"]: p for p in body["items"] if p["metadata"]["name"].startswith(prefix)}


def bound(pods: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {n: p["spec"]["nodeName"] for n, p in pods.items() if p["spec"].get("nodeName")}


def pending_with(kube: bed.Kube, name: str, namespace: str) -> Callable[[], dict[str, Any] | None]:
    """The pod's PodScheduled=False condition, once Berth has written it."""

    def check() -> dict[str, Any] | None:
        p = get_pod(kube, name, namespace)
        c = condition(p)
        return c if not p["spec"].get("nodeName") and c and c["status"] == "False" else None

    return check


def failed_scheduling(kube: bed.Kube, name: str, namespace: str) -> list[str]:
    """The notes of the FailedScheduling events about ``name``."""
    return [
        e.get("note") or e.get("message") or ""
        for e in events_for(kube, name, namespace)
        if e.get("reason") == "FailedScheduling"
    ]


def test_a_queue_borrows_an_idle_guarantee_and_the_owner_reclaims_it(
    control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any, namespace: str
) -> None:
    """Queues a and b are each guaranteed half of 8 CPUs. a fills the cluster
    by borrowing b's idle half; b then asks for 5 CPUs and takes back exactly
    its guarantee: 4 of a's pods are preempted as kube-scheduler preempts
    (DisruptionTarget/PreemptionByScheduler, then deleted), 4 of b's pods
    bind, and b's 5th waits with Berth's reason."""
    nodes = ["reclaim-0", "reclaim-1"]
    for n in nodes:
        control_plane.create_node(n, cpu="4", memory="16Gi")
    start_berth(
        {
            "leaderElection": LEASE,
            "queues": [
                {"name": "a", "guaranteed": {"cpu": "4"}},
                {"name": "b", "guaranteed": {"cpu": "4"}},
            ],
        }
    )
    for i in range(8):
        kube.create(queued(f"a-{i}", "a", namespace))
    placed = wait_for("all 8 of a's pods bound", lambda: len(b := bound(pods_in(kube, namespace, "a-"))) == 8 and b)
    assert sorted(set(placed.values())) == nodes

    for i in range(5):
        kube.create(queued(f"b-{i}", "b", namespace))

    def marked() -> dict[str, dict[str, Any]]:
        return {n: p for n, p in pods_in(kube, namespace, "a-").items() if p["metadata"].get("deletionTimestamp")}

    # Berth deletes its victims gracefully; with no kubelet in the bed they
    # stay Terminating until the test plays the kubelet.
    victims = wait_for("4 of a's pods marked for deletion", lambda: len(m := marked()) >= 4 and m, 30)
    assert len(victims) == 4, f"b reclaimed more than its guarantee of 4 CPUs: {sorted(victims)} marked"
    for name, p in victims.items():
        disruption = condition(p, "DisruptionTarget")
        assert disruption is not None, f"victim {name} has no DisruptionTarget condition"
        assert (disruption["status"], disruption["reason"]) == ("True", "PreemptionByScheduler")
        assert disruption["message"] == "berth: preempting to reclaim resources for queue b"
    for name in victims:
        kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", gracePeriodSeconds="0")

    b_bound = wait_for("4 of b's pods bound", lambda: len(b := bound(pods_in(kube, namespace, "b-"))) == 4 and b, 30)
    [waiting] = {f"b-{i}" for i in range(5)} - set(b_bound)
    blocked = wait_for(f"{waiting} to report why it waits", pending_with(kube, waiting, namespace), 30)
    message = blocked["message"]
    assert blocked["reason"] == "Unschedulable"
    assert message == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        + ("" if bed.KUBERNETES_VERSION >= "v1.37" else "no new claims to deallocate, ")
        + "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod. "
        "queue b: cpu 5/4 over guaranteed, so nothing is reclaimed for it."
    ), message
    assert message in wait_for(
        f"{waiting}'s FailedScheduling event", lambda: failed_scheduling(kube, waiting, namespace), 15
    )

    # Exactly 4 victims, and a's other 4 pods were never touched.
    a_now = pods_in(kube, namespace, "a-")
    assert set(a_now) == set(placed) - set(victims)
    for name, p in a_now.items():
        assert p["spec"]["nodeName"] == placed[name]
        assert not p["metadata"].get("deletionTimestamp"), f"{name} was preempted too: a is below its guarantee"
        assert condition(p, "DisruptionTarget") is None, name
        assert not [e for e in events_for(kube, name, namespace) if e.get("reason") == "Preempted"], name
    preempted = {
        e["regarding"]["name"]
        for e in kube.ok("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
        if e.get("reason") == "Preempted"
    }
    assert preempted == set(victims)

    # Each of b's bound pods waited for the one victim it needed, and said so.
    for name in b_bound:
        assert (
            "0/2 nodes are available: 2 Insufficient cpu. waiting to reclaim 1 cpu from queue a"
            in failed_scheduling(kube, name, namespace)
        ), name


def test_quota_reasons_reach_the_pod_condition_and_event(
    control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any, namespace: str
) -> None:
    """A pod over its queue's max, and one naming no queue that exists, stay
    pending; Berth's reason reaches the condition and the event whole."""
    control_plane.create_node("quota-0", cpu="4", memory="16Gi")
    start_berth({"queues": [{"name": "c", "max": {"cpu": "1"}}]})
    for i in range(2):
        kube.create(queued(f"c-{i}", "c", namespace))
    kube.create(queued("stray", "nope", namespace))
    placed = wait_for("one of c's pods bound", lambda: bound(pods_in(kube, namespace, "c-")))
    [held] = {"c-0", "c-1"} - set(placed)
    nodes = len(kube.ok("GET", "/api/v1/nodes")["items"])
    cases = [
        (held, "queue c: cpu 2/1 over max"),
        ("stray", f'pod names queue "nope" ({LABEL_QUEUE}), which does not exist'),
    ]
    for name, reason in cases:
        c = wait_for(f"{name} to report why it waits", pending_with(kube, name, namespace), 30)
        assert c["reason"] == "Unschedulable"
        assert c["message"] == f"0/{nodes} nodes are available: {reason}.", c["message"]
        events = wait_for(
            f"{name}'s FailedScheduling event", functools.partial(failed_scheduling, kube, name, namespace)
        )
        assert set(events) == {c["message"]}, events
    assert node_of(kube, held, namespace) is None
