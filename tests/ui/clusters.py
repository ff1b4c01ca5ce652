"""Generated clusters for the browser tests: N nodes, and the demo cluster
with 2000 pending pods."""

from __future__ import annotations

import json
import random
from pathlib import Path

import yaml

from tests.support import ROOT

ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")
#: (instance type, cpu, memory Gi, pods): the demo cluster's sizes.
SIZES = (
    ("m5.large", "1900m", 7, 29),
    ("m5.xlarge", "3900m", 15, 58),
    ("r5.xlarge", "3900m", 31, 58),
    ("c5.4xlarge", "15800m", 30, 234),
)


def node(i: int, rng: random.Random) -> dict[str, object]:
    kind, cpu, mem, pods = SIZES[i % len(SIZES)]
    alloc: dict[str, str] = {"cpu": cpu, "memory": f"{mem}Gi", "pods": str(pods), "ephemeral-storage": "95Gi"}
    spec: dict[str, object] = {}
    if i % 100 == 7:
        spec["unschedulable"] = True
    if i % 250 == 3:
        alloc["nvidia.com/gpu"] = "4"
        spec["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    name = f"node-{i:05d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": ZONES[i % 3],
                "node.kubernetes.io/instance-type": kind,
            },
        },
        "spec": spec,
        "status": {"allocatable": alloc, "capacity": alloc},
    }


CPU_CHOICES = (250, 500, 1000, 1500)  # milli-cpu
MEMORY_CHOICES = (256, 1024, 2048, 4096)  # Mi


def running_pod(i: int, node_name: str, cpu: int, memory: int) -> dict[str, object]:
    requests = {"cpu": f"{cpu}m", "memory": f"{memory}Mi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"svc-{i:05d}", "namespace": "shop", "uid": f"svc-{i:05d}"},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": requests}}],
        },
        "status": {"phase": "Running"},
    }


def write_cluster(path: Path, nodes: int, *, seed: int = 13) -> Path:
    """``nodes`` nodes of the demo's sizes over three zones (every 100th
    cordoned, every 250th with 4 GPUs), each filled with running pods to a
    random share of its cpu (a heat map with something to show), as JSON
    (which loads several times faster than YAML)."""
    rng = random.Random(seed)
    docs: list[dict[str, object]] = []
    pods: list[dict[str, object]] = []
    for i in range(nodes):
        n = node(i, rng)
        docs.append(n)
        _, cpu, mem, _ = SIZES[i % len(SIZES)]
        free_cpu = int(float(cpu.removesuffix("m")) if cpu.endswith("m") else float(cpu) * 1000)
        free_mem = mem * 1024
        target = rng.choice((0.05, 0.2, 0.4, 0.6, 0.8, 0.95))
        budget = free_cpu * target
        scale = max(1, free_cpu // 3900)  # bigger pods on bigger nodes
        while True:
            c, m = rng.choice(CPU_CHOICES) * scale, rng.choice(MEMORY_CHOICES)
            if c > budget or m > free_mem:
                break
            budget -= c
            free_mem -= m
            pods.append(running_pod(len(pods), f"node-{i:05d}", c, m))
    path.write_text(json.dumps(docs + pods))
    return path


# ---------------------------------------------------------------- 2000 pending pods

#: A queue whose max no pod of PENDING_QUEUED fits under (refused: Rejected).
SMALL_QUEUE = """
queues:
- name: small
  max: {cpu: "1"}
- name: default
"""


def pending_pod(
    namespace: str, name: str, requests: dict[str, str], *, labels: dict[str, str] | None = None, gated: bool = False
) -> dict[str, object]:
    spec: dict[str, object] = {
        "schedulerName": "berth",
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": requests}}],
    }
    if gated:
        spec["schedulingGates"] = [{"name": "example.com/wait"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }


def pod_group(namespace: str, name: str, min_member: int) -> dict[str, object]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member},
    }


#: What :func:`pending_workload` holds: (namespace, how many, what holds them).
PENDING = {
    "heavy": 1400,  # 64 cpu each: no node fits
    "mem": 300,  # 512Gi each: no node fits
    "gated": 200,  # a scheduling gate never lifted
    "small": 60,  # in queue small, over its max: Rejected
    "train": 5,  # gang train, 5 of its minimum 8 present: Gated
    "shard": 35,  # gangs shard-0..6, 5 of 5 present, each member too big: Unschedulable
}


def pending_workload() -> list[dict[str, object]]:
    """2000 pods no node takes, in the groups :data:`PENDING` counts."""
    docs: list[dict[str, object]] = []
    docs += [pending_pod("heavy", f"heavy-{i}", {"cpu": "64"}) for i in range(PENDING["heavy"])]
    docs += [pending_pod("mem", f"mem-{i}", {"cpu": "100m", "memory": "512Gi"}) for i in range(PENDING["mem"])]
    docs += [pending_pod("gated", f"later-{i}", {"cpu": "100m"}, gated=True) for i in range(PENDING["gated"])]
    docs += [
        pending_pod("batch", f"small-{i}", {"cpu": "2"}, labels={"berth.dev/queue": "small"})
        for i in range(PENDING["small"])
    ]
    group = "scheduling.x-k8s.io/pod-group"
    docs.append(pod_group("ml", "train", 8))
    docs += [pending_pod("ml", f"train-{i}", {"cpu": "1"}, labels={group: "train"}) for i in range(PENDING["train"])]
    for g in range(PENDING["shard"] // 5):
        docs.append(pod_group("ml", f"shard-{g}", 5))
        docs += [
            pending_pod("ml", f"shard-{g}-{i}", {"nvidia.com/gpu": "8"}, labels={group: f"shard-{g}"}) for i in range(5)
        ]
    return docs


def write_demo_with_pending(path: Path) -> Path:
    """The demo cluster (examples/cluster.yaml) and :func:`pending_workload`, as JSON."""
    demo = [d for d in yaml.safe_load_all((ROOT / "examples/cluster.yaml").read_text()) if d]
    path.write_text(json.dumps(demo + pending_workload()))
    return path
