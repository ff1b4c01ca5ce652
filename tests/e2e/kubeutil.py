"""Small helpers over the bed's client for the end-to-end tests."""

from __future__ import annotations

from typing import Any

from tests.e2e.controlplane import bed


def pod(
    name: str,
    *,
    scheduler: str = "berth",
    cpu: str = "100m",
    memory: str = "64Mi",
    labels: dict[str, str] | None = None,
    namespace: str = "default",
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {"app": name}},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
            **spec,
        },
    }


def get_pod(kube: bed.Kube, name: str, namespace: str = "default") -> dict[str, Any]:
    out: dict[str, Any] = kube.ok("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    return out


def node_of(kube: bed.Kube, name: str, namespace: str = "default") -> str | None:
    return get_pod(kube, name, namespace)["spec"].get("nodeName")


def condition(p: dict[str, Any], kind: str = "PodScheduled") -> dict[str, Any] | None:
    for c in p.get("status", {}).get("conditions", []) or []:
        if c["type"] == kind:
            return dict(c)
    return None


def events_for(kube: bed.Kube, name: str, namespace: str = "default") -> list[dict[str, Any]]:
    """events.k8s.io and core events about a pod (Berth writes the former)."""
    out: list[dict[str, Any]] = []
    for path, field in (
        (f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", "regarding.name"),
        (f"/api/v1/namespaces/{namespace}/events", "involvedObject.name"),
    ):
        status, body = kube.request("GET", path, fieldSelector=f"{field}={name}")
        if status == 200:
            out += body.get("items", [])
    return out


def delete_pod(kube: bed.Kube, name: str, namespace: str = "default") -> None:
    kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", gracePeriodSeconds="0")
