"""The bed itself: a real kube-apiserver, nodes as API objects, and a real
kube-scheduler binding a pod."""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed


def pod(name: str, scheduler: str = "default-scheduler", cpu: str = "100m", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}
            ],
            **spec,
        },
    }


def test_the_api_server_reports_the_pinned_version(kube: bed.Kube) -> None:
    assert kube.ok("GET", "/version")["gitVersion"] == bed.KUBERNETES_VERSION


def test_nodes_are_created_ready_with_allocatable_and_no_taints(control_plane: bed.ControlPlane) -> None:
    node = control_plane.create_node("smoke-node", cpu="2", memory="4Gi")
    assert node["status"]["allocatable"]["cpu"] == "2"
    assert not node["spec"].get("taints")


def test_kube_scheduler_binds_a_default_scheduler_pod(control_plane: bed.ControlPlane, kube: bed.Kube) -> None:
    control_plane.create_node("smoke-ks", cpu="2", memory="4Gi")
    sched = control_plane.start_kube_scheduler({})
    try:
        kube.create(pod("ks-pod"))
        bound = wait_for(
            "kube-scheduler to bind ks-pod",
            lambda: kube.ok("GET", "/api/v1/namespaces/default/pods/ks-pod")["spec"].get("nodeName"),
            60,
        )
        assert bound in ("smoke-ks", "smoke-node")
    finally:
        sched.stop()


def test_berth_follows_the_release_of_the_api_server_it_talks_to(start_berth: Any) -> None:
    """Berth reads /version at start and follows that release's scheduler,
    whatever its configuration names (berth/adapters/kubernetes/discovery.py)."""
    minor = ".".join(bed.KUBERNETES_VERSION.removeprefix("v").split(".")[:2])
    other = "1.35" if minor != "1.35" else "1.37"
    b = start_berth({"kubernetesVersion": other})
    log = b.process.log.read_text()
    assert f"the API server runs Kubernetes {bed.KUBERNETES_VERSION}: Berth follows kube-scheduler {minor}" in log
    assert f"kubernetesVersion {other} ignored: the API server's release ({minor}) wins" in log
