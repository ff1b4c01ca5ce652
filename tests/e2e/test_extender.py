"""Berth as the extender of a real, unmodified kube-scheduler: every verb
understood both ways, in both node modes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed
from tests.e2e.kubeutil import node_of, pod

# Berth's extender profile enforces a node label kube-scheduler knows nothing
# about: a pod landing only on such nodes proves kube-scheduler used the filter.
BERTH_CONFIG = {
    "runSchedulingLoop": False,
    "profiles": [
        {
            "schedulerName": "berth",
            "pluginConfig": [
                {
                    "name": "NodeAffinity",
                    "args": {
                        "addedAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [{"matchExpressions": [{"key": "berth-ok", "operator": "Exists"}]}]
                            }
                        }
                    },
                }
            ],
        }
    ],
}


ALLOWED = ("ext-ok", "ext-ok-2")


def scheduler_config(port: int, cache_capable: bool) -> dict[str, Any]:
    return {
        "profiles": [{"schedulerName": "default-scheduler"}, {"schedulerName": "berth-extender"}],
        "extenders": [
            {
                "urlPrefix": f"http://127.0.0.1:{port}/scheduler",
                "filterVerb": "filter",
                "prioritizeVerb": "prioritize",
                "preemptVerb": "preempt",
                "bindVerb": "bind",
                "weight": 5,
                "nodeCacheCapable": cache_capable,
                "enableHTTPS": False,
                "ignorable": False,
            }
        ],
    }


@pytest.fixture(scope="module")
def nodes(control_plane: bed.ControlPlane) -> None:
    control_plane.create_node("ext-plain-0", cpu="4", memory="8Gi")
    control_plane.create_node("ext-plain-1", cpu="4", memory="8Gi")
    control_plane.create_node("ext-ok", cpu="4", memory="8Gi", labels={"berth-ok": "true"})
    # Two allowed nodes, or kube-scheduler skips scoring (one feasible node).
    control_plane.create_node("ext-ok-2", cpu="4", memory="8Gi", labels={"berth-ok": "true"})


@pytest.mark.parametrize("cache_capable", [True, False], ids=["nodeCacheCapable", "full Node objects"])
def test_kube_scheduler_filters_prioritizes_and_binds_through_berth(
    nodes: None, control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any, cache_capable: bool
) -> None:
    berth = start_berth(BERTH_CONFIG)
    sched = control_plane.start_kube_scheduler(
        scheduler_config(berth.http_port, cache_capable), name=f"ks-{cache_capable}"
    )
    try:
        names = [f"via-ext-{cache_capable}-{i}".lower() for i in range(3)]
        for n in names:
            kube.create(pod(n, scheduler="berth-extender"))
        for n in names:
            assert wait_for(f"{n} bound", lambda n=n: node_of(kube, n), 60) in ALLOWED
        metrics = berth.get("/metrics")[1]
        for verb in ("filter", "prioritize", "bind"):
            assert f'berth_extender_requests_total{{code="200",verb="{verb}"}}' in metrics, verb
        # kube-scheduler's own profile is untouched by the extender only for
        # pods it does not manage: default-scheduler pods go through it too,
        # so they also land on the node Berth allows.
        kube.create(pod(f"default-{cache_capable}".lower(), scheduler="default-scheduler"))
        assert wait_for("default pod bound", lambda: node_of(kube, f"default-{cache_capable}".lower()), 60) in ALLOWED
    finally:
        sched.stop()


def test_a_pod_berth_rejects_everywhere_stays_pending_with_berths_reason(
    nodes: None, control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any
) -> None:
    berth = start_berth(BERTH_CONFIG)
    sched = control_plane.start_kube_scheduler(scheduler_config(berth.http_port, True), name="ks-reject")
    try:
        kube.create(pod("too-big-for-ext-ok", scheduler="berth-extender", cpu="6"))

        def failed_message() -> str | None:
            _status, body = kube.request(
                "GET", "/api/v1/namespaces/default/events", fieldSelector="involvedObject.name=too-big-for-ext-ok"
            )
            msgs = [e.get("message", "") for e in body.get("items", []) if e.get("reason") == "FailedScheduling"]
            return msgs[0] if msgs else None

        message = wait_for("FailedScheduling from kube-scheduler", failed_message, 60)
        assert "scheduler-enforced node affinity" in message or "Insufficient cpu" in message
        assert node_of(kube, "too-big-for-ext-ok") is None
    finally:
        sched.stop()
