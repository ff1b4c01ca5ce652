"""Cluster and workload generators shared by the benchmarks (and usable by the
end-to-end test bed, so Berth and kube-scheduler get the same inputs).

Shapes follow kube-scheduler's scheduler_perf: nodes with 4 CPU / 32 GiB /
110 pods spread over zones, pods with small requests (``SchedulingBasic``),
pods spreading over zones (``TopologySpreading``), pods with required
anti-affinity on the hostname (``SchedulingPodAntiAffinity``), and a
preemption mix (low-priority fillers, high-priority arrivals).
"""

from __future__ import annotations

from typing import Any

ZONES = ("zone-a", "zone-b", "zone-c")


def node(i: int, *, cpu: str = "4", memory: str = "32Gi", pods: int = 110, realistic: bool = False) -> dict[str, Any]:
    name = f"node-{i:05d}"
    zone = ZONES[i % len(ZONES)]
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "m5.xlarge",
        "topology.kubernetes.io/region": "region-1",
        "topology.kubernetes.io/zone": zone,
    }
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {
            "capacity": {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "95Gi"},
        },
    }
    if realistic:
        obj["metadata"].update(
            {
                "uid": f"00000000-0000-4000-8000-{i:012d}",
                "resourceVersion": str(100000 + i),
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "annotations": {
                    "node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                    "csi.volume.kubernetes.io/nodeid": '{"ebs.csi.aws.com":"i-0123456789abcdef0"}',
                },
                "managedFields": [
                    {
                        "manager": "kubelet",
                        "operation": "Update",
                        "apiVersion": "v1",
                        "time": "2026-01-01T00:00:00Z",
                        "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:status": {"f:conditions": {}, "f:images": {}, "f:nodeInfo": {}}},
                    }
                ],
            }
        )
        obj["spec"] = {"podCIDR": f"10.{i // 256 % 256}.{i % 256}.0/24", "providerID": f"aws:///{zone}/i-{i:017x}"}
        obj["status"].update(
            {
                "conditions": [
                    {
                        "type": t,
                        "status": "False" if t != "Ready" else "True",
                        "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                        "reason": f"Kubelet{t}",
                        "message": f"kubelet reports {t}",
                    }
                    for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
                ],
                "addresses": [
                    {"type": "InternalIP", "address": f"10.0.{i // 256 % 256}.{i % 256}"},
                    {"type": "Hostname", "address": name},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": f"{i:032x}",
                    "systemUUID": f"ec2{i:029x}",
                    "bootID": f"{i:08x}-0000-0000-0000-000000000000",
                    "kernelVersion": "6.1.0-18-cloud-amd64",
                    "osImage": "Debian GNU/Linux 12 (bookworm)",
                    "containerRuntimeVersion": "containerd://1.7.13",
                    "kubeletVersion": "v1.37.2",
                    "kubeProxyVersion": "",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
                "images": [
                    {
                        "names": [
                            f"registry.example.com/team-{k}/service-{k}@sha256:{(i * 31 + k):064x}",
                            f"registry.example.com/team-{k}/service-{k}:v1.{k}.0",
                        ],
                        "sizeBytes": 50_000_000 + k * 1_000_000,
                    }
                    for k in range(18)
                ],
            }
        )
    return obj


def pod(
    name: str,
    *,
    namespace: str = "bench",
    cpu: str = "100m",
    memory: str = "500Mi",
    labels: dict[str, str] | None = None,
    priority: int | None = None,
    scheduler_name: str = "berth",
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
    }
    if priority is not None:
        body["priority"] = priority
    body.update(spec or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": body,
    }


def basic(n: int) -> list[dict[str, Any]]:
    return [pod(f"basic-{i}") for i in range(n)]


def spread(n: int) -> list[dict[str, Any]]:
    lbl = {"app": "spread"}
    constraint = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": lbl},
    }
    return [pod(f"spread-{i}", labels=lbl, spec={"topologySpreadConstraints": [constraint]}) for i in range(n)]


def anti_affinity(n: int) -> list[dict[str, Any]]:
    lbl = {"app": "anti"}
    aff = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": lbl}}
            ]
        }
    }
    return [pod(f"anti-{i}", labels=lbl, spec={"affinity": aff}) for i in range(n)]


def preemption_mix(num_nodes: int, n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Bound low-priority fillers that use each node fully, and high-priority arrivals."""
    fillers = []
    for i in range(num_nodes):
        for k in range(2):
            p = pod(f"filler-{i}-{k}", cpu="2", memory="1Gi", priority=1, scheduler_name="default-scheduler")
            p["spec"]["nodeName"] = f"node-{i:05d}"
            fillers.append(p)
    arrivals = [pod(f"urgent-{i}", cpu="1", memory="1Gi", priority=1000) for i in range(n)]
    return fillers, arrivals


def queue_tree(num_nodes: int, num_pods: int) -> tuple[list[dict[str, Any]], list[str]]:
    """Fifty batch queues in three levels, sized to a cluster of ``num_nodes``
    :func:`node` s and ``num_pods`` basic pods spread over the leaves: roots
    ``org-a``/``org-b`` (40 % / 30 % of the cluster guaranteed), six teams
    under each (an eighth of their root each), three jobs under each team (a
    big guarantee, a small one the leaf outgrows and borrows above, none).
    Weights go 1..4; the ``max`` values never bind. Returns (the ``queues``
    section, the leaf names in order)."""
    cpu_m, mem_mi = num_nodes * 4000, num_nodes * 32 * 1024
    per_leaf = -(-num_pods // 36)
    leaf_cpu_m, leaf_mem_mi = per_leaf * 100, per_leaf * 500

    def amounts(c: int, m: int) -> dict[str, str]:
        return {"cpu": f"{c}m", "memory": f"{m}Mi"}

    specs: list[dict[str, Any]] = []
    leaves: list[str] = []
    for r, (root, share) in enumerate((("org-a", 40), ("org-b", 30))):
        rc, rm = cpu_m * share // 100, mem_mi * share // 100
        specs.append(
            {"name": root, "weight": 1 + r, "guaranteed": amounts(rc, rm), "max": amounts(cpu_m * 9 // 10, mem_mi)}
        )
        tc, tm = rc // 8, rm // 8
        for t in range(6):
            team = f"{root}-team-{t}"
            spec: dict[str, Any] = {
                "name": team,
                "parent": root,
                "weight": 1 + (t + r) % 4,
                "guaranteed": amounts(tc, tm),
            }
            if t % 2:
                spec["max"] = amounts(rc // 2, rm // 2)
            specs.append(spec)
            for j in range(3):
                leaf = f"{team}-job-{j}"
                spec = {"name": leaf, "parent": team, "weight": 1 + (t + j) % 4}
                if j == 0:
                    spec["guaranteed"] = amounts(tc // 2, tm // 2)
                elif j == 1:  # outgrown half-way: the rest is borrowed
                    spec["guaranteed"] = amounts(leaf_cpu_m // 2, leaf_mem_mi // 2)
                else:
                    spec["max"] = amounts(min(4 * leaf_cpu_m, rc // 2), min(4 * leaf_mem_mi, rm // 2))
                specs.append(spec)
                leaves.append(leaf)
    return specs, leaves


def queued(n: int, leaves: list[str]) -> list[dict[str, Any]]:
    """Basic pods (100m/500Mi) spread round-robin over ``leaves`` with the
    ``berth.dev/queue`` label (inert when no queues are configured)."""
    return [pod(f"queued-{i}", labels={"berth.dev/queue": leaves[i % len(leaves)]}) for i in range(n)]


WORKLOADS = {
    "basic": basic,
    "spread": spread,
    "anti-affinity": anti_affinity,
}


# ---------------------------------------------------------------- scheduler_perf
# kube-scheduler's own templates (test/integration/scheduler_perf/templates at
# v1.37.2: against v1.34.4 only the pause image of pod-default,
# pod-with-topology-spreading and pod-with-pod-anti-affinity moved to 3.10.2),
# ported as dictionaries for the side-by-side on a real API server
# (bench/kube.py). Priorities go through PriorityClasses (PERF_PRIORITY_CLASSES)
# because the API server's Priority admission rejects a bare ``priority``;
# scheduler_perf's own apiserver runs without that plugin.

PERF_PRIORITY_CLASSES = {"perf-high": 10}


def perf_node(i: int) -> dict[str, Any]:
    """templates/node-default.yaml (4 CPU, 32Gi, 110 pods, Ready) with the
    hostname label a kubelet sets and the zone labels TopologySpreading's
    labelNodePrepareStrategy adds (three values, round-robin)."""
    n = node(i)
    n["status"]["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "bench"}]
    return n


def _perf_container(cpu: str, memory: str = "500Mi", limits: bool = True, pause: str = "3.10.1") -> dict[str, Any]:
    res: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if limits:
        res["limits"] = dict(res["requests"])
    return {
        "name": "pause",
        "image": f"registry.k8s.io/pause:{pause}",
        "ports": [{"containerPort": 80}],
        "resources": res,
    }


def perf_pod(template: str, name: str, namespace: str, scheduler_name: str) -> dict[str, Any]:
    """One pod of a scheduler_perf template: ``default`` (pod-default.yaml),
    ``low-priority``, ``high-priority``, ``high-priority-large-cpu``,
    ``topology-spreading`` (pod-with-topology-spreading.yaml) or
    ``anti-affinity`` (pod-with-pod-anti-affinity.yaml)."""
    labels: dict[str, str] = {}
    spec: dict[str, Any] = {"schedulerName": scheduler_name}
    if template == "default":
        spec["containers"] = [_perf_container("100m", pause="3.10.2")]
    elif template == "low-priority":
        spec["terminationGracePeriodSeconds"] = 0
        spec["containers"] = [_perf_container("900m")]
    elif template == "high-priority":
        spec["priorityClassName"] = "perf-high"
        spec["containers"] = [_perf_container("3000m")]
    elif template == "high-priority-large-cpu":
        spec["priorityClassName"] = "perf-high"
        spec["containers"] = [_perf_container("9", limits=False)]
    elif template == "topology-spreading":
        labels["color"] = "blue"
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 5,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"color": "blue"}},
            }
        ]
        spec["containers"] = [_perf_container("100m", pause="3.10.2")]
    elif template == "anti-affinity":
        labels["color"] = "green"
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"color": "green"}},
                        "topologyKey": "kubernetes.io/hostname",
                        "namespaces": ["sched-1", "sched-0"],
                    }
                ]
            }
        }
        spec["containers"] = [_perf_container("100m", pause="3.10.2")]
    else:
        raise ValueError(f"unknown scheduler_perf template {template!r}")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def perf_churn_node(name: str) -> dict[str, Any]:
    """templates/churn/node-default.yaml: a Ready node with room for no pods."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": {"pods": "0"}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def perf_churn_service(name: str, namespace: str) -> dict[str, Any]:
    """templates/churn/service-default.yaml."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"app": "foo"}, "ports": [{"protocol": "TCP", "port": 8080, "targetPort": 8080}]},
    }
