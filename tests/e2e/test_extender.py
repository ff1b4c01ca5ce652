"""Berth as the extender of a real, unmodified kube-scheduler: every verb
understood both ways, in both node modes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

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


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kube-scheduler-extender.yaml"


def scheduler_config(port: int, cache_capable: bool, *, managed: bool = True) -> dict[str, Any]:
    """examples/kube-scheduler-extender.yaml, adapted to the bed's ports and
    kubeconfig. Without ``managed`` its managedResources go, so kube-scheduler
    consults Berth for every pod (with them, only for pods requesting one)."""
    cfg: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    cfg.pop("clientConnection", None)  # the bed supplies its admin kubeconfig
    ext = cfg["extenders"][0]
    ext["urlPrefix"] = f"http://127.0.0.1:{port}/scheduler"
    ext["nodeCacheCapable"] = cache_capable
    if not managed:
        ext.pop("managedResources", None)
    return cfg


@pytest.fixture(scope="module")
def nodes(control_plane: bed.ControlPlane) -> None:
    control_plane.create_node("ext-plain-0", cpu="4", memory="8Gi")
    control_plane.create_node("ext-plain-1", cpu="4", memory="8Gi")
    gpus = {"example.com/gpu": "2"}
    control_plane.create_node("ext-ok", cpu="4", memory="8Gi", labels={"berth-ok": "true"}, extra=gpus)
    # Two allowed nodes, or kube-scheduler skips scoring (one feasible node).
    control_plane.create_node("ext-ok-2", cpu="4", memory="8Gi", labels={"berth-ok": "true"}, extra=gpus)


@pytest.mark.parametrize("cache_capable", [True, False], ids=["nodeCacheCapable", "full Node objects"])
def test_kube_scheduler_filters_prioritizes_and_binds_through_berth(
    nodes: None, control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any, cache_capable: bool
) -> None:
    berth = start_berth(BERTH_CONFIG)
    sched = control_plane.start_kube_scheduler(
        scheduler_config(berth.http_port, cache_capable, managed=False), name=f"ks-{cache_capable}"
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
    sched = control_plane.start_kube_scheduler(scheduler_config(berth.http_port, True, managed=False), name="ks-reject")
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


def test_a_managed_resource_only_berth_accounts_for_is_never_overcommitted(
    nodes: None, control_plane: bed.ControlPlane, kube: bed.Kube, start_berth: Any
) -> None:
    """The example marks example.com/gpu ignoredByScheduler: kube-scheduler does
    not count it, Berth does: 4 GPUs in all, 5 pods asking for one each."""
    berth = start_berth(BERTH_CONFIG)
    sched = control_plane.start_kube_scheduler(scheduler_config(berth.http_port, True), name="ks-gpu")
    try:
        names = [f"gpu-{i}" for i in range(5)]
        for n in names:
            p = pod(n, scheduler="berth-extender")
            p["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = "1"
            p["spec"]["containers"][0]["resources"]["limits"] = {"example.com/gpu": "1"}
            kube.create(p)
            # One at a time: Berth's cache must have seen the previous binding.
            if n != names[-1]:
                wait_for(f"{n} bound", lambda n=n: node_of(kube, n), 60)
        placed = [node_of(kube, n) for n in names]
        assert sorted(x for x in placed[:4] if x) == ["ext-ok", "ext-ok", "ext-ok-2", "ext-ok-2"]
        with pytest.raises(AssertionError):
            wait_for("the fifth GPU pod stays pending", lambda: node_of(kube, names[-1]), 5)
    finally:
        sched.stop()
