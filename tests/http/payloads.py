"""Extender payloads shaped as a real kube-scheduler sends them: full Pod and
Node JSON as the API server renders them, Go field names for the extender
types. Reusable by the end-to-end suite."""

from __future__ import annotations

import json
from typing import Any


def api_node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    zone: str = "z1",
    taints: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Node as `kubectl get node -o json` shows one (status, images, nodeInfo, managedFields...)."""
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": f"uid-node-{name}",
            "resourceVersion": "1234",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "topology.kubernetes.io/zone": zone,
                **(labels or {}),
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            "managedFields": [
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {}},
                }
            ],
        },
        "spec": {"podCIDR": "10.244.0.0/24", "taints": taints or []} if taints else {"podCIDR": "10.244.0.0/24"},
        "status": {
            "capacity": {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "95Gi"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "m",
                "systemUUID": "s",
                "bootID": "b",
                "kernelVersion": "6.1.0",
                "osImage": "Debian GNU/Linux 12",
                "containerRuntimeVersion": "containerd://1.7.13",
                "kubeletVersion": "v1.34.4",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": [
                {"names": ["registry.k8s.io/pause@sha256:abc", "registry.k8s.io/pause:3.10"], "sizeBytes": 320000}
            ],
        },
    }


def api_pod(
    name: str = "web-1",
    *,
    cpu: str = "500m",
    memory: str = "256Mi",
    namespace: str = "default",
    uid: str | None = None,
    priority: int = 0,
    node_name: str = "",
    **spec: Any,
) -> dict[str, Any]:
    """A pending Pod as the API server hands it to kube-scheduler (defaults applied)."""
    body: dict[str, Any] = {
        "volumes": [
            {
                "name": "kube-api-access-x",
                "projected": {
                    "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}],
                    "defaultMode": 420,
                },
            }
        ],
        "containers": [
            {
                "name": "app",
                "image": "registry.example.com/web:1.0",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
                "volumeMounts": [
                    {
                        "name": "kube-api-access-x",
                        "readOnly": True,
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    }
                ],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "securityContext": {},
        "schedulerName": "berth-extender",
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "priority": priority,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        **spec,
    }
    if node_name:
        body["nodeName"] = node_name
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"uid-{namespace}-{name}",
            "resourceVersion": "5678",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web"},
        },
        "spec": body,
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def args(
    pod: dict[str, Any], *, names: list[str] | None = None, nodes: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """ExtenderArgs exactly as extender.go builds them: one of the two is null."""
    return {
        "Pod": pod,
        "Nodes": None if nodes is None else {"metadata": {}, "items": nodes},
        "NodeNames": names,
    }


def recase(doc: dict[str, Any], how: str) -> dict[str, Any]:
    """The same document with its top-level (Go-typed) keys in another case: "lower" or "upper"."""
    return {getattr(k, how)(): v for k, v in doc.items()}


def dumps(obj: Any) -> bytes:
    return json.dumps(obj).encode()
