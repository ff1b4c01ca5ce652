"""Small helpers over the bed's client for the end-to-end tests."""

from __future__ import annotations

from typing import Any

import grpc

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


def service_account_token(
    kube: bed.Kube,
    namespace: str,
    name: str,
    *,
    rules: list[dict[str, Any]] | None = None,
    cluster_rules: list[dict[str, Any]] | None = None,
) -> str:
    """A token of ServiceAccount ``namespace/name`` (TokenRequest API),
    granted ``rules`` in its namespace (Role + RoleBinding) and
    ``cluster_rules`` cluster-wide (ClusterRole + ClusterRoleBinding)."""
    kube.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}},
        exist_ok=True,
    )
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    rbac = "rbac.authorization.k8s.io/v1"
    role_name = f"{namespace}-{name}"
    if rules:
        kube.create(
            {
                "apiVersion": rbac,
                "kind": "Role",
                "metadata": {"name": role_name, "namespace": namespace},
                "rules": rules,
            },
            exist_ok=True,
        )
        kube.create(
            {
                "apiVersion": rbac,
                "kind": "RoleBinding",
                "metadata": {"name": role_name, "namespace": namespace},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name},
                "subjects": subject,
            },
            exist_ok=True,
        )
    if cluster_rules:
        kube.create(
            {"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": role_name}, "rules": cluster_rules},
            exist_ok=True,
        )
        kube.create(
            {
                "apiVersion": rbac,
                "kind": "ClusterRoleBinding",
                "metadata": {"name": role_name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
                "subjects": subject,
            },
            exist_ok=True,
        )
    req = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    out = kube.ok("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", req)
    return str(out["status"]["token"])


class _Bearer(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):  # type: ignore[misc]
    """Adds ``authorization: Bearer <token>`` to every call of a channel."""

    def __init__(self, token: str) -> None:
        self.metadata = (("authorization", f"Bearer {token}"),)

    def _with_token(self, details: Any) -> Any:
        return details._replace(metadata=tuple(details.metadata or ()) + self.metadata)

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._with_token(details), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._with_token(details), request)


def bearer_channel(channel: grpc.Channel, token: str) -> grpc.Channel:
    """``channel`` whose calls carry a Kubernetes bearer token (Berth's gRPC
    API in Kubernetes mode reads who calls from it)."""
    return grpc.intercept_channel(channel, _Bearer(token))


#: Every read of Berth's gRPC API a test may make, cluster-wide.
READER_RULES = [
    {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["get", "list"]},
    {"apiGroups": ["berth.dev"], "resources": ["queues"], "verbs": ["get", "list"]},
]
