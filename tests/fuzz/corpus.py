"""Realistic requests to start mutating from, one builder per verb and per
RPC, varied by a seeded :class:`random.Random`: the pods a kube-scheduler
sends (tests/http/payloads.py), the messages a batch system's gRPC client
sends (the generated stubs), over the fuzz target's pool of nodes.

Names come from small pools so that requests collide with each other and
with the cluster (the same name with another uid, the same uid under
another name); nothing here ever names the canary.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import Any

import msgspec
from google.protobuf.message import Message

from berth.adapters.grpc import convert
from berth.api.v1 import cluster_pb2, model_pb2, scheduler_pb2
from berth.cluster import model
from tests.fuzz import mutate, protomut
from tests.fuzz.harness import MAX_BODY, PENDING, POOL_NAMES, POOL_NODES, RESIDENTS
from tests.http.payloads import api_node, api_pod, args

__all__ = ["GrpcCase", "HttpCase", "grpc_case", "grpc_strings", "http_case"]

NAMESPACES = ("default", "fuzz")
POD_NAMES = tuple(f"fz-{i}" for i in range(24))
UIDS = tuple(f"uid-fz-{i}" for i in range(16))
UNKNOWN_NODES = ("ghost", "N0", "n0 ", "")

#: spec fragments a real pod carries, merged into api_pod's defaults.
SPEC_SNIPPETS: tuple[dict[str, Any], ...] = (
    {},
    {"nodeSelector": {"disk": "ssd"}},
    {"nodeSelector": {"topology.kubernetes.io/zone": "z2"}},
    {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}
                            ]
                        }
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 50, "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}}
                ],
            }
        }
    },
    {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
                ],
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {
                                "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]
                            },
                            "topologyKey": "topology.kubernetes.io/zone",
                        },
                    }
                ],
            },
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app": "web"}},
                            "topologyKey": "topology.kubernetes.io/zone",
                        },
                    }
                ]
            },
        }
    },
    {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "matchLabelKeys": ["pod-template-hash"],
            }
        ]
    },
    {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]},
    {
        "initContainers": [
            {"name": "init", "image": "busybox", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
            {
                "name": "sidecar",
                "image": "envoy",
                "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "100m"}},
            },
        ]
    },
    {"overhead": {"cpu": "250m", "memory": "120Mi"}},
    {"schedulingGates": [{"name": "example.com/wait"}]},
    {"priorityClassName": "high", "preemptionPolicy": "Never"},
)

CPUS = ("10m", "100m", "500m", "1", "2", "3500m", "16", "0")
MEMORIES = ("64Mi", "256Mi", "1Gi", "4Gi", "100M", "0")


def a_pod(rng: random.Random, *, node_name: str = "") -> dict[str, Any]:
    pod = api_pod(
        rng.choice(POD_NAMES),
        cpu=rng.choice(CPUS),
        memory=rng.choice(MEMORIES),
        namespace=rng.choice(NAMESPACES),
        uid=rng.choice(UIDS) if rng.random() < 0.5 else None,
        priority=rng.choice((0, 0, 100, 1000, -5)),
        node_name=node_name,
        **copy.deepcopy(rng.choice(SPEC_SNIPPETS)),
    )
    if rng.random() < 0.3:
        c = pod["spec"]["containers"][0]
        c["resources"]["limits"] = {"cpu": rng.choice(CPUS), "memory": rng.choice(MEMORIES)}
        c["ports"].append({"containerPort": 80, "hostPort": rng.choice((80, 8080)), "protocol": "TCP"})
    return pod


def _node_names(rng: random.Random) -> list[str]:
    names = rng.sample(POOL_NAMES, rng.randint(0, len(POOL_NAMES)))
    if rng.random() < 0.2:
        names.append(rng.choice(UNKNOWN_NODES))
    return names


def _nodes(rng: random.Random) -> list[dict[str, Any]]:
    nodes = [copy.deepcopy(n) for n in rng.sample(POOL_NODES, rng.randint(0, len(POOL_NODES)))]
    if rng.random() < 0.2:
        nodes.append(api_node(rng.choice(("elsewhere", "n0")), cpu=rng.choice(CPUS), memory="1Gi"))
    return nodes


# ---------------------------------------------------------------- HTTP


@dataclasses.dataclass(slots=True)
class HttpCase:
    verb: str
    method: str
    path: str
    body: bytes
    what: str
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    #: Raw bytes for a request the HTTP client cannot send (protocol errors).
    raw: bytes | None = None
    #: The body's length before any Content-Encoding.
    plain_length: int = 0


def _extender_args(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.6:
        return args(a_pod(rng), names=_node_names(rng))
    body = args(a_pod(rng), nodes=_nodes(rng))
    if body["Nodes"]["items"] and rng.random() < 0.15:
        # The attacker's "duplicated nodes in full-object mode".
        items = body["Nodes"]["items"]
        items.insert(rng.randrange(len(items) + 1), copy.deepcopy(rng.choice(items)))
    if rng.random() < 0.2:
        del body["NodeNames"]  # the v1.2 form
    return body


def _preempt_args(rng: random.Random) -> dict[str, Any]:
    pod = a_pod(rng)
    pod["spec"]["priority"] = rng.choice((10, 1000, 2**31 - 1))
    victims_on: dict[str, list[dict[str, Any]]] = {}
    for r in rng.sample(RESIDENTS, rng.randint(0, len(RESIDENTS))):
        victims_on.setdefault(r["spec"]["nodeName"], []).append(r)
    if rng.random() < 0.5:
        meta = {
            node: {"Pods": [{"UID": p["metadata"]["uid"]} for p in pods], "NumPDBViolations": rng.choice((0, 1))}
            for node, pods in victims_on.items()
        }
        if rng.random() < 0.2:
            meta[rng.choice(UNKNOWN_NODES)] = {"Pods": [{"UID": rng.choice(UIDS)}], "NumPDBViolations": 0}
        return {"Pod": pod, "NodeNameToVictims": None, "NodeNameToMetaVictims": meta}
    full = {node: {"Pods": copy.deepcopy(pods), "NumPDBViolations": 0} for node, pods in victims_on.items()}
    return {"Pod": pod, "NodeNameToVictims": full}


def _bind_args(rng: random.Random) -> dict[str, Any]:
    pod = rng.choice([*PENDING, *RESIDENTS])
    md = pod["metadata"]
    return {
        "PodName": md["name"] if rng.random() < 0.9 else rng.choice(POD_NAMES),
        "PodNamespace": md["namespace"],
        "PodUID": md["uid"] if rng.random() < 0.8 else rng.choice(UIDS),
        "Node": rng.choice([*POOL_NAMES, *UNKNOWN_NODES[:2]]),
    }


_RAW_REQUESTS = (
    b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}",
    b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n{}{}{}{",
    b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
    b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n"
    b"2\r\n{}\r\n0\r\n\r\n",
    b"POST /scheduler/filter HTTP/9.9\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
    b"P\xffST /scheduler/filter HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /scheduler/%ff%fe HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
    b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\nContent-Length: 2\r\n\r\n{}",
    b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 70_000 + b"\r\nContent-Length: 2\r\n\r\n{}",
    b"GET /scheduler/filter?" + b"a=1&" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
)

_ODD = (
    ("GET", "/scheduler/filter"),
    ("PUT", "/scheduler/bind"),
    ("DELETE", "/scheduler/preempt"),
    ("POST", "/scheduler/unknown"),
    ("POST", "/scheduler/filter/"),
    ("POST", "/scheduler"),
    ("POST", "/nope"),
    ("GET", "/metrics/x"),
    ("OPTIONS", "/scheduler/prioritize"),
)


def http_case(rng: random.Random) -> HttpCase:
    """One extender request: a realistic one, then 0..n mutations of its
    tree, of its bytes, of its encoding."""
    verb = rng.choices(("filter", "prioritize", "preempt", "bind", "odd"), (34, 26, 18, 14, 8))[0]
    if verb == "odd":
        if rng.random() < 0.4:
            raw = rng.choice(_RAW_REQUESTS)
            return HttpCase("raw", "RAW", "", b"", f"raw {raw[:40]!r}", raw=raw)
        method, path = rng.choice(_ODD)
        body = mutate.dumps(_extender_args(rng))
        return HttpCase("odd", method, path, body, f"{method} {path}", plain_length=len(body))
    tree: Any = {"filter": _extender_args, "prioritize": _extender_args, "preempt": _preempt_args, "bind": _bind_args}[
        verb
    ](rng)
    steps: list[str] = []
    for _ in range(rng.choice((0, 1, 1, 1, 2, 2, 3, 5))):
        steps.append(mutate.mutate_tree(tree, rng))
    body = mutate.dumps(tree)
    if rng.random() < 0.12:
        body, step = mutate.mutate_bytes(body, rng)
        steps.append(step)
    headers = {
        "Content-Type": rng.choice(("application/json",) * 8 + ("text/plain", "application/json; charset=latin-1"))
    }
    plain = len(body)
    roll = rng.random()
    if roll < 0.02:
        # Valid JSON padded just past the limit: must be refused whatever its slack.
        pad = MAX_BODY - len(body) + rng.choice((1, 1000, 64 * 1024 - 1, 64 * 1024 + 1))
        body = body + b" " * max(pad, 0)
        plain = len(body)
        steps.append(f"padded to {plain} bytes")
    elif roll < 0.06:
        body = mutate.gzip_body(body)
        headers["Content-Encoding"] = "gzip"
        steps.append("gzip")
    elif roll < 0.07:
        inflated = rng.choice((2 * MAX_BODY, 16 * MAX_BODY))
        body = mutate.gzip_bomb(inflated)
        headers["Content-Encoding"] = "gzip"
        plain = inflated
        steps.append(f"gzip bomb of {inflated} bytes")
    elif roll < 0.08:
        headers["Content-Encoding"] = rng.choice(("gzip", "deflate", "br", "x-unknown"))
        steps.append(f"not {headers['Content-Encoding']}-encoded")
    return HttpCase(verb, "POST", f"/scheduler/{verb}", body, "; ".join(steps) or "valid", headers, plain_length=plain)


# ---------------------------------------------------------------- gRPC


@dataclasses.dataclass(slots=True)
class GrpcCase:
    method: str  # /berth.v1.Scheduler/Filter
    request: bytes
    what: str
    streaming: bool = False


def pb_pod(rng: random.Random, *, node_name: str = "") -> model_pb2.Pod:
    pod: model.Pod = msgspec.convert(a_pod(rng, node_name=node_name), type=model.Pod)
    return convert.pod_to_pb(pod)


def pb_node(rng: random.Random) -> model_pb2.Node:
    base = copy.deepcopy(rng.choice(POOL_NODES))
    if rng.random() < 0.5:
        base["status"]["allocatable"]["cpu"] = rng.choice(("1", "8", "32"))
    if rng.random() < 0.2:
        base["metadata"]["name"] = rng.choice(("n6", "n7"))
    node: model.Node = msgspec.convert(base, type=model.Node)
    return convert.node_to_pb(node)


def _node_set(rng: random.Random) -> scheduler_pb2.NodeSet:
    if rng.random() < 0.6:
        return scheduler_pb2.NodeSet(node_names=_node_names(rng))
    nodes = [pb_node(rng) for _ in range(rng.randint(0, 4))]
    if nodes and rng.random() < 0.2:
        nodes.append(nodes[0])
    return scheduler_pb2.NodeSet(nodes=nodes, full_objects=True)


def _selector(rng: random.Random) -> model_pb2.LabelSelector:
    op = rng.choice(("In", "NotIn", "Exists", "DoesNotExist", "Bogus", ""))
    values = [] if op in ("Exists", "DoesNotExist") else ["web"]
    return model_pb2.LabelSelector(
        match_labels={"app": "web"} if rng.random() < 0.5 else {},
        match_expressions=[model_pb2.LabelSelectorRequirement(key="app", operator=op, values=values)],
    )


def _ref(rng: random.Random) -> cluster_pb2.PodRef:
    if rng.random() < 0.3:
        md = rng.choice(RESIDENTS + PENDING)["metadata"]
        return cluster_pb2.PodRef(namespace=md["namespace"], name=md["name"])
    return cluster_pb2.PodRef(namespace=rng.choice(NAMESPACES), name=rng.choice(POD_NAMES))


def _bound_pod(rng: random.Random) -> model_pb2.Pod:
    return pb_pod(rng, node_name=rng.choice(POOL_NAMES) if rng.random() < 0.6 else "")


def _submit_pod(rng: random.Random) -> model_pb2.Pod:
    p = pb_pod(rng)
    p.spec.scheduler_name = "berth"
    if rng.random() < 0.2:
        p.spec.volumes.append(
            model_pb2.Volume(
                name="data",
                persistent_volume_claim=model_pb2.PersistentVolumeClaimVolumeSource(
                    claim_name=rng.choice(STORAGE_NAMES)
                ),
            )
        )
    if p.spec.containers and rng.random() < 0.2:
        p.spec.resource_claims.append(model_pb2.PodResourceClaim(name="gpu", resource_claim_name=rng.choice(DRA_NAMES)))
        p.spec.containers[0].claims.append(model_pb2.ContainerResourceClaim(name="gpu"))
    return p


STORAGE_NAMES = ("pv-a", "pv-b", "data", "")
STORAGE_CLASSES = ("local", "fast", "Bad Class")
DRA_NAMES = ("gpu", "gpu-a", "claim-0", "")


def _pv(rng: random.Random) -> model_pb2.PersistentVolume:
    node = rng.choice(POOL_NAMES)
    term = model_pb2.NodeSelectorTerm(
        match_expressions=[
            model_pb2.NodeSelectorRequirement(key="kubernetes.io/hostname", operator="In", values=[node])
        ]
    )
    return model_pb2.PersistentVolume(
        metadata=model_pb2.ObjectMeta(name=rng.choice(STORAGE_NAMES)),
        spec=model_pb2.PersistentVolumeSpec(
            capacity={"storage": rng.choice((1 << 30, 10 << 30, 0))},
            access_modes=[rng.choice(("ReadWriteOnce", "ReadWriteOncePod", "ReadOnlyMany", "Bogus"))],
            storage_class_name=rng.choice(STORAGE_CLASSES),
            node_affinity=model_pb2.VolumeNodeAffinity(required=model_pb2.NodeSelector(node_selector_terms=[term])),
            local=model_pb2.LocalVolumeSource(path="/mnt/disk"),
        ),
    )


def _pvc(rng: random.Random) -> model_pb2.PersistentVolumeClaim:
    return model_pb2.PersistentVolumeClaim(
        metadata=model_pb2.ObjectMeta(name=rng.choice(STORAGE_NAMES), namespace=rng.choice(NAMESPACES)),
        spec=model_pb2.PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"],
            resources=model_pb2.VolumeResourceRequirements(requests={"storage": rng.choice((1 << 30, 20 << 30))}),
            storage_class_name=rng.choice(STORAGE_CLASSES),
            volume_mode=rng.choice(("", "Filesystem", "Block", "Tape")),
        ),
    )


def _storage_class(rng: random.Random) -> model_pb2.StorageClass:
    return model_pb2.StorageClass(
        metadata=model_pb2.ObjectMeta(name=rng.choice(STORAGE_CLASSES)),
        provisioner=rng.choice(("kubernetes.io/no-provisioner", "csi.example.com", "")),
        volume_binding_mode=rng.choice(("", "Immediate", "WaitForFirstConsumer", "Later")),
    )


def _csi_node(rng: random.Random) -> model_pb2.CSINode:
    driver = model_pb2.CSINodeDriver(
        name="csi.example.com", node_id="id", allocatable=model_pb2.VolumeNodeResources(count=rng.choice((0, 2, -1)))
    )
    return model_pb2.CSINode(
        metadata=model_pb2.ObjectMeta(name=rng.choice(POOL_NAMES)), spec=model_pb2.CSINodeSpec(drivers=[driver])
    )


def _device_class(rng: random.Random) -> model_pb2.DeviceClass:
    expression = rng.choice(('device.driver == "gpu.example.com"', "device.attributes[", "true"))
    return model_pb2.DeviceClass(
        metadata=model_pb2.ObjectMeta(name=rng.choice(DRA_NAMES)),
        spec=model_pb2.DeviceClassSpec(
            selectors=[model_pb2.DeviceSelector(cel=model_pb2.CELDeviceSelector(expression=expression))]
        ),
    )


def _resource_slice(rng: random.Random) -> model_pb2.ResourceSlice:
    node = rng.choice(POOL_NAMES)
    devices = [
        model_pb2.Device(
            name=f"gpu-{i}",
            attributes={"index": model_pb2.DeviceAttribute(int_value=i)},
            capacity={"memory": model_pb2.DeviceCapacity(value=rng.choice(("40Gi", "1", "-1", "x")))},
        )
        for i in range(rng.randint(0, 3))
    ]
    return model_pb2.ResourceSlice(
        metadata=model_pb2.ObjectMeta(name=f"{node}-gpus"),
        spec=model_pb2.ResourceSliceSpec(
            driver="gpu.example.com",
            node_name=node,
            pool=model_pb2.ResourcePool(name=node, resource_slice_count=rng.choice((1, 0))),
            devices=devices,
        ),
    )


def _resource_claim(rng: random.Random) -> model_pb2.ResourceClaim:
    request = model_pb2.DeviceRequest(
        name="gpu",
        exactly=model_pb2.ExactDeviceRequest(
            device_class_name=rng.choice(DRA_NAMES),
            allocation_mode=rng.choice(("", "ExactCount", "All", "Some")),
            count=rng.choice((0, 1, 2)),
        ),
    )
    return model_pb2.ResourceClaim(
        metadata=model_pb2.ObjectMeta(name=rng.choice(DRA_NAMES), namespace=rng.choice(NAMESPACES)),
        spec=model_pb2.ResourceClaimSpec(devices=model_pb2.DeviceClaim(requests=[request])),
    )


def _named(rng: random.Random) -> cluster_pb2.NamespacedName:
    return cluster_pb2.NamespacedName(namespace=rng.choice(NAMESPACES), name=rng.choice(STORAGE_NAMES + DRA_NAMES))


_BUILDERS: dict[str, Any] = {
    "Scheduler/Filter": lambda r: scheduler_pb2.FilterRequest(pod=pb_pod(r), nodes=_node_set(r)),
    "Scheduler/Prioritize": lambda r: scheduler_pb2.PrioritizeRequest(pod=pb_pod(r), nodes=_node_set(r)),
    "Scheduler/Preempt": lambda r: scheduler_pb2.PreemptRequest(
        pod=pb_pod(r),
        node_name_to_victims={
            p["spec"]["nodeName"]: scheduler_pb2.Victims(pod_uids=[p["metadata"]["uid"]])
            for p in r.sample(RESIDENTS, r.randint(0, 3))
        },
    ),
    "Scheduler/Bind": lambda r: scheduler_pb2.BindRequest(
        pod_name=r.choice([p["metadata"]["name"] for p in PENDING] + list(POD_NAMES)),
        pod_namespace=r.choice(NAMESPACES),
        pod_uid=r.choice(("", *UIDS)),
        node=r.choice(POOL_NAMES),
    ),
    "Scheduler/Explain": lambda r: scheduler_pb2.ExplainRequest(
        pod=pb_pod(r), node_names=_node_names(r) if r.random() < 0.5 else []
    ),
    "Scheduler/Submit": lambda r: scheduler_pb2.SubmitRequest(
        pods=[_submit_pod(r) for _ in range(r.randint(1, 3))],
        group=model_pb2.PodGroup(metadata=model_pb2.ObjectMeta(name="gang", namespace="fuzz"), min_member=2)
        if r.random() < 0.2
        else None,
    ),
    "Scheduler/Cancel": lambda r: scheduler_pb2.CancelRequest(namespace=r.choice(NAMESPACES), name=r.choice(POD_NAMES)),
    "Scheduler/WatchDecisions": lambda r: scheduler_pb2.WatchDecisionsRequest(
        pods=[f"fuzz/{r.choice(POD_NAMES)}"], replay=r.random() < 0.5
    ),
    "Scheduler/WatchDecisionBatches": lambda r: scheduler_pb2.WatchDecisionsRequest(
        pods=[f"fuzz/{r.choice(POD_NAMES)}"], replay=r.random() < 0.5
    ),
    "Scheduler/ListQueues": lambda r: scheduler_pb2.ListQueuesRequest(),
    "Scheduler/GetQueue": lambda r: scheduler_pb2.GetQueueRequest(name=r.choice(("default", "ghost", "", *NAMESPACES))),
    "Scheduler/ListPods": lambda r: scheduler_pb2.ListPodsRequest(
        namespace=r.choice(("", *NAMESPACES)), phase=r.choice(("", "Active", "Bound", "Unschedulable", "Sleeping"))
    ),
    "Scheduler/ListPodGroups": lambda r: scheduler_pb2.ListPodGroupsRequest(namespace=r.choice(("", *NAMESPACES))),
    "Scheduler/ListProfiles": lambda r: scheduler_pb2.ListProfilesRequest(),
    "Scheduler/Why": lambda r: scheduler_pb2.WhyRequest(
        namespace=r.choice(NAMESPACES), name=r.choice(("", *POD_NAMES))
    ),
    "Scheduler/WhatIf": lambda r: scheduler_pb2.WhatIfRequest(
        pod=pb_pod(r), replicas=r.choice((0, 1, 3, 20, -1, 1001))
    ),
    "Cluster/UpsertNodes": lambda r: cluster_pb2.UpsertNodesRequest(nodes=[pb_node(r) for _ in range(r.randint(1, 3))]),
    "Cluster/DeleteNodes": lambda r: cluster_pb2.DeleteNodesRequest(names=r.sample([*POOL_NAMES, "n6", "n7"], 1)),
    "Cluster/UpsertPods": lambda r: cluster_pb2.UpsertPodsRequest(pods=[_bound_pod(r) for _ in range(r.randint(1, 3))]),
    "Cluster/DeletePods": lambda r: cluster_pb2.DeletePodsRequest(pods=[_ref(r) for _ in range(r.randint(1, 2))]),
    "Cluster/UpsertPodGroups": lambda r: cluster_pb2.UpsertPodGroupsRequest(
        groups=[
            model_pb2.PodGroup(
                metadata=model_pb2.ObjectMeta(name=r.choice(("gang", "g2")), namespace=r.choice(NAMESPACES)),
                min_member=r.choice((1, 2, 3)),
                min_resources={"cpu": 1000},
            )
        ]
    ),
    "Cluster/UpsertPodDisruptionBudgets": lambda r: cluster_pb2.UpsertPodDisruptionBudgetsRequest(
        budgets=[
            model_pb2.PodDisruptionBudget(
                metadata=model_pb2.ObjectMeta(name="pdb", namespace=r.choice(NAMESPACES)),
                selector=_selector(r),
                disruptions_allowed=r.choice((0, 1)),
            )
        ]
    ),
    "Cluster/UpsertNamespaces": lambda r: cluster_pb2.UpsertNamespacesRequest(
        namespaces=[
            cluster_pb2.Namespace(
                metadata=model_pb2.ObjectMeta(name=r.choice(NAMESPACES), labels={"team": r.choice(("a", "b"))})
            )
        ]
    ),
    "Cluster/DeleteNamespaces": lambda r: cluster_pb2.DeleteNamespacesRequest(names=[r.choice(NAMESPACES)]),
    "Cluster/UpsertPersistentVolumes": lambda r: cluster_pb2.UpsertPersistentVolumesRequest(
        persistent_volumes=[_pv(r) for _ in range(r.randint(1, 2))]
    ),
    "Cluster/DeletePersistentVolumes": lambda r: cluster_pb2.DeletePersistentVolumesRequest(
        names=[r.choice(STORAGE_NAMES)]
    ),
    "Cluster/UpsertPersistentVolumeClaims": lambda r: cluster_pb2.UpsertPersistentVolumeClaimsRequest(
        persistent_volume_claims=[_pvc(r) for _ in range(r.randint(1, 2))]
    ),
    "Cluster/DeletePersistentVolumeClaims": lambda r: cluster_pb2.DeletePersistentVolumeClaimsRequest(
        persistent_volume_claims=[_named(r)]
    ),
    "Cluster/UpsertStorageClasses": lambda r: cluster_pb2.UpsertStorageClassesRequest(
        storage_classes=[_storage_class(r)]
    ),
    "Cluster/DeleteStorageClasses": lambda r: cluster_pb2.DeleteStorageClassesRequest(
        names=[r.choice(STORAGE_CLASSES)]
    ),
    "Cluster/UpsertCSINodes": lambda r: cluster_pb2.UpsertCSINodesRequest(csi_nodes=[_csi_node(r)]),
    "Cluster/DeleteCSINodes": lambda r: cluster_pb2.DeleteCSINodesRequest(names=[r.choice(POOL_NAMES)]),
    "Cluster/UpsertDeviceClasses": lambda r: cluster_pb2.UpsertDeviceClassesRequest(device_classes=[_device_class(r)]),
    "Cluster/DeleteDeviceClasses": lambda r: cluster_pb2.DeleteDeviceClassesRequest(names=[r.choice(DRA_NAMES)]),
    "Cluster/UpsertResourceSlices": lambda r: cluster_pb2.UpsertResourceSlicesRequest(
        resource_slices=[_resource_slice(r)]
    ),
    "Cluster/DeleteResourceSlices": lambda r: cluster_pb2.DeleteResourceSlicesRequest(
        names=[f"{r.choice(POOL_NAMES)}-gpus"]
    ),
    "Cluster/UpsertResourceClaims": lambda r: cluster_pb2.UpsertResourceClaimsRequest(
        resource_claims=[_resource_claim(r) for _ in range(r.randint(1, 2))]
    ),
    "Cluster/DeleteResourceClaims": lambda r: cluster_pb2.DeleteResourceClaimsRequest(resource_claims=[_named(r)]),
    "Cluster/ListNodes": lambda r: cluster_pb2.ListNodesRequest(),
}

_WEIGHTS = {
    "Scheduler/Filter": 12,
    "Scheduler/Prioritize": 10,
    "Scheduler/Preempt": 8,
    "Scheduler/Bind": 6,
    "Scheduler/Explain": 10,
    "Scheduler/Submit": 8,
    "Scheduler/Cancel": 4,
    "Scheduler/WatchDecisions": 1,
    "Scheduler/WatchDecisionBatches": 1,
    "Scheduler/ListQueues": 1,
    "Scheduler/GetQueue": 1,
    "Scheduler/ListPods": 1,
    "Scheduler/ListPodGroups": 1,
    "Scheduler/ListProfiles": 1,
    "Scheduler/Why": 2,
    "Scheduler/WhatIf": 2,
    "Cluster/UpsertNodes": 6,
    "Cluster/DeleteNodes": 3,
    "Cluster/UpsertPods": 10,
    "Cluster/DeletePods": 5,
    "Cluster/UpsertPodGroups": 3,
    "Cluster/UpsertPodDisruptionBudgets": 4,
    "Cluster/UpsertNamespaces": 2,
    "Cluster/DeleteNamespaces": 1,
    "Cluster/UpsertPersistentVolumes": 2,
    "Cluster/DeletePersistentVolumes": 1,
    "Cluster/UpsertPersistentVolumeClaims": 2,
    "Cluster/DeletePersistentVolumeClaims": 1,
    "Cluster/UpsertStorageClasses": 2,
    "Cluster/DeleteStorageClasses": 1,
    "Cluster/UpsertCSINodes": 2,
    "Cluster/DeleteCSINodes": 1,
    "Cluster/UpsertDeviceClasses": 2,
    "Cluster/DeleteDeviceClasses": 1,
    "Cluster/UpsertResourceSlices": 2,
    "Cluster/DeleteResourceSlices": 1,
    "Cluster/UpsertResourceClaims": 2,
    "Cluster/DeleteResourceClaims": 1,
    "Cluster/ListNodes": 3,
}


def grpc_strings(live: list[str]) -> list[str]:
    """Strings worth colliding with: the pools' names and uids, and live ones."""
    return [*POD_NAMES[:6], *UIDS[:6], *POOL_NAMES, *live]


def grpc_case(rng: random.Random, strings: list[str]) -> GrpcCase:
    """One call: a realistic message, then structured and/or wire mutations."""
    name = rng.choices(list(_WEIGHTS), list(_WEIGHTS.values()))[0]
    msg: Message = _BUILDERS[name](rng)
    steps: list[str] = []
    roll = rng.random()
    if roll < 0.65:
        for _ in range(rng.choice((1, 1, 2, 3))):
            steps.append(protomut.mutate_message(msg, rng, strings))
    data = msg.SerializeToString()
    if roll >= 0.55 and roll < 0.9:
        data, step = protomut.mutate_wire(data, rng, strings)
        steps.append(step)
    return GrpcCase(
        f"/berth.v1.{name}",
        data,
        "; ".join(steps) or "valid",
        name.endswith(("WatchDecisions", "WatchDecisionBatches")),
    )
