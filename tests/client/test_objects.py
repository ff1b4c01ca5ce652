"""Kubernetes manifests become ``berth.v1`` messages field by field
(berth_client.objects), quantities become the contract's integers, a bad
value names its field, and every field is read from where Kubernetes puts
it (checked against the OpenAPI schema Berth validates manifests with)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.protobuf import descriptor as _descriptor

from berth.cluster import openapi
from berth_client import objects
from berth_client.api.v1 import cluster_pb2 as cpb
from berth_client.api.v1 import model_pb2 as pb
from berth_client.api.v1 import scheduler_pb2 as spb

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web-0",
        "namespace": "shop",
        "labels": {"app": "web"},
        "creationTimestamp": "2026-01-02T03:04:05Z",
        "deletionTimestamp": "2026-01-02T03:05:00Z",
    },
    "spec": {
        "schedulerName": "berth",
        "priority": 10,
        "resources": {"requests": {"cpu": "1"}},
        "overhead": {"memory": "64Mi"},
        "containers": [
            {
                "name": "c",
                "image": "nginx",
                "command": ["nginx"],  # not the contract's: left out
                "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": 1}},
                "ports": [{"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"}],
            }
        ],
        "initContainers": [{"name": "side", "restartPolicy": "Always"}],
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "scratch", "emptyDir": {}},
        ],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        "schedulingGates": [{"name": "wait"}],
    },
}

MESSAGE_CASES: list[tuple[str, dict[str, Any], Any]] = [
    (
        "a pod: resources flattened, quantities canonical, timestamps in ms",
        POD,
        pb.Pod(
            metadata=pb.ObjectMeta(
                name="web-0",
                namespace="shop",
                labels={"app": "web"},
                creation_timestamp_ms=1767323045000,
                deleting=True,
            ),
            spec=pb.PodSpec(
                scheduler_name="berth",
                priority=10,
                resources_requests={"cpu": 1000},
                overhead={"memory": 64 * 2**20},
                containers=[
                    pb.Container(
                        name="c",
                        image="nginx",
                        requests={"cpu": 250, "memory": 2**30},
                        limits={"nvidia.com/gpu": 1},
                        ports=[pb.ContainerPort(container_port=80, host_port=8080, host_ip="10.0.0.1")],
                    )
                ],
                init_containers=[pb.Container(name="side", restart_policy="Always")],
                tolerations=[pb.Toleration(key="k", operator="Exists", effect="NoExecute", toleration_seconds=30)],
                volumes=[
                    pb.Volume(
                        name="data", persistent_volume_claim=pb.PersistentVolumeClaimVolumeSource(claim_name="data")
                    ),
                    pb.Volume(name="scratch"),
                ],
                resource_claims=[pb.PodResourceClaim(name="gpu", resource_claim_template_name="one-gpu")],
                scheduling_gates=[pb.SchedulingGate(name="wait")],
            ),
        ),
    ),
    (
        "a PodGroup: its spec flattened",
        {
            "kind": "PodGroup",
            "metadata": {"name": "g"},
            "spec": {"minMember": 4, "scheduleTimeoutSeconds": 30, "minResources": {"cpu": "8"}},
        },
        pb.PodGroup(
            metadata=pb.ObjectMeta(name="g"), min_member=4, schedule_timeout_seconds=30, min_resources={"cpu": 8000}
        ),
    ),
    (
        "a budget: spec.selector and status.disruptionsAllowed",
        {
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "b"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 1},
        },
        pb.PodDisruptionBudget(
            metadata=pb.ObjectMeta(name="b"),
            selector=pb.LabelSelector(match_labels={"app": "web"}),
            disruptions_allowed=1,
        ),
    ),
    (
        "a node: capacity and allocatable, taints, images",
        {
            "kind": "Node",
            "metadata": {"name": "n1"},
            "spec": {"unschedulable": True, "taints": [{"key": "gpu", "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"cpu": "3900m", "memory": "15Gi", "pods": "110"},
                "images": [{"names": ["nginx"], "sizeBytes": 1000}],
            },
        },
        pb.Node(
            metadata=pb.ObjectMeta(name="n1"),
            spec=pb.NodeSpec(unschedulable=True, taints=[pb.Taint(key="gpu", effect="NoSchedule")]),
            status=pb.NodeStatus(
                allocatable={"cpu": 3900, "memory": 15 * 2**30, "pods": 110},
                images=[pb.ContainerImage(names=["nginx"], size_bytes=1000)],
            ),
        ),
    ),
    (
        "DRA: device attributes by type, opaque parameters as JSON, CSINode's nodeID",
        {
            "kind": "ResourceSlice",
            "metadata": {"name": "s"},
            "spec": {
                "driver": "gpu.example.com",
                "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "nodeName": "n1",
                "devices": [{"name": "g0", "attributes": {"model": {"string": "a100"}, "mem": {"int": 40}}}],
            },
        },
        pb.ResourceSlice(
            metadata=pb.ObjectMeta(name="s"),
            spec=pb.ResourceSliceSpec(
                driver="gpu.example.com",
                pool=pb.ResourcePool(name="n1", generation=1, resource_slice_count=1),
                node_name="n1",
                devices=[
                    pb.Device(
                        name="g0",
                        attributes={
                            "model": pb.DeviceAttribute(string_value="a100"),
                            "mem": pb.DeviceAttribute(int_value=40),
                        },
                    )
                ],
            ),
        ),
    ),
    (
        "a claim's opaque configuration",
        {
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "ml"},
            "spec": {"devices": {"config": [{"opaque": {"driver": "d", "parameters": {"mode": "fast"}}}]}},
        },
        pb.ResourceClaim(
            metadata=pb.ObjectMeta(name="c", namespace="ml"),
            spec=pb.ResourceClaimSpec(
                devices=pb.DeviceClaim(
                    config=[
                        pb.DeviceClaimConfiguration(
                            opaque=pb.OpaqueDeviceConfiguration(driver="d", parameters=b'{"mode":"fast"}')
                        )
                    ]
                )
            ),
        ),
    ),
    (
        "a CSINode",
        {"kind": "CSINode", "metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "d", "nodeID": "i-1"}]}},
        pb.CSINode(
            metadata=pb.ObjectMeta(name="n1"), spec=pb.CSINodeSpec(drivers=[pb.CSINodeDriver(name="d", node_id="i-1")])
        ),
    ),
    (
        "a namespace",
        {"kind": "Namespace", "metadata": {"name": "ml"}},
        cpb.Namespace(metadata=pb.ObjectMeta(name="ml")),
    ),
]


@pytest.mark.parametrize(("obj", "want"), [c[1:] for c in MESSAGE_CASES], ids=[c[0] for c in MESSAGE_CASES])
def test_a_manifest_becomes_the_message_of_its_kind(obj: dict[str, Any], want: Any) -> None:
    assert objects.message(obj) == want


ERROR_CASES: list[tuple[str, dict[str, Any], str]] = [
    (
        "a bad quantity",
        {"kind": "Pod", "spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}},
        'spec.containers[0].resources.requests[cpu]: Invalid value: "lots": quantities must match',
    ),
    (
        "a string for an integer",
        {"kind": "Pod", "spec": {"priority": "high"}},
        'spec.priority: expected an integer, got "high"',
    ),
    (
        "a number for a label",
        {"kind": "Pod", "metadata": {"labels": {"v": 1}}},
        "metadata.labels[v]: expected a string, got 1",
    ),
    (
        "an object for a list",
        {"kind": "Pod", "spec": {"containers": {"name": "c"}}},
        "spec.containers: expected a list",
    ),
    (
        "two volume sources",
        {"kind": "Pod", "spec": {"volumes": [{"name": "v", "csi": {"driver": "d"}, "persistentVolumeClaim": {}}]}},
        "spec.volumes[0]: persistentVolumeClaim and csi exclude each other",
    ),
    (
        "an int32 out of range",
        {"kind": "Pod", "spec": {"priority": 2**40}},
        "spec.priority: 1099511627776 is out of range",
    ),
    (
        "a time that is not one",
        {"kind": "Pod", "metadata": {"creationTimestamp": "yesterday"}},
        "metadata.creationTimestamp: expected an RFC 3339 time",
    ),
    ("no kind", {"metadata": {"name": "x"}}, "kind: required"),
    ("a kind Berth does not take", {"kind": "Deployment"}, "kind: 'Deployment' is not supported"),
]


@pytest.mark.parametrize(("obj", "message"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_a_value_the_message_cannot_hold_names_its_field(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as e:
        objects.message(obj)
    assert str(e.value).startswith(message), str(e.value)


def test_output_renders_quantities_as_strings_and_scores_as_numbers() -> None:
    row = spb.PodRow(name="p", requests={"cpu": 1500, "memory": 2**31})
    assert objects.to_dict(row)["requests"] == {"cpu": "1500m", "memory": "2Gi"}
    node = spb.NodeExplanation(node="n", plugin_scores={"NodeResourcesFit": 87}, score=87)
    assert objects.to_dict(node)["pluginScores"] == {"NodeResourcesFit": 87}
    d = spb.Decision(kind=spb.Decision.BOUND, pod="default/p")
    assert objects.to_dict(d)["kind"] == "BOUND"
    assert json.dumps(objects.to_dict(spb.ExplainResponse()))  # JSON-able, unset messages as None


# ---------------------------------------------------------------- the names are Kubernetes'

FD = _descriptor.FieldDescriptor


def _shape_at(schema: openapi.Schema, type_name: str, path: tuple[str, ...]) -> str | None:
    shape = f"@{type_name}"
    for key in path:
        if not shape.startswith("@"):
            return None
        shape = schema.types[shape[1:]].get(key)
        if shape is None:
            return None
    return shape


def _mismatches(schema: openapi.Schema, d: Any, type_name: str, seen: set[str]) -> list[str]:
    if d.full_name in seen:
        return []
    seen.add(d.full_name)
    out = []
    for field, at, how, _ in objects._plan(d):
        shape = _shape_at(schema, type_name, at)
        where = f"{d.full_name}.{field.name} at {'.'.join(at)} in {type_name}"
        if shape is None:
            out.append(where)
            continue
        # A message (or a map or list of them): its own fields, under its Kubernetes type;
        # a special value (a list wrapped for a oneof, JSON bytes) is read its own way.
        sub = objects._map_value(field) if objects._is_map(field) else field
        if sub.type != FD.TYPE_MESSAGE or how == objects._SPECIAL:
            continue
        inner = shape.removeprefix("[]").removeprefix("{}")
        if not inner.startswith("@"):
            out.append(f"{where}: {shape} is no object")
            continue
        out += _mismatches(schema, sub.message_type, inner[1:], seen)
    return out


def test_every_field_is_read_where_kubernetes_writes_it() -> None:
    schema = openapi.schema()
    seen: set[str] = set()
    wrong = []
    for kind, cls in objects.KINDS.items():
        wrong += _mismatches(schema, cls.DESCRIPTOR, schema.kinds[kind][1:], seen)
    assert wrong == []
