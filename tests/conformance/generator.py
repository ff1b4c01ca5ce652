"""Seeded random clusters and pods for the differential conformance suite.

A :class:`Cluster` is built by the functions of :data:`SECTIONS`, in order,
each drawing from the same seeded ``random.Random`` and appending Kubernetes
manifests (plain dicts, created as they are through the API server).
:func:`volumes` adds StorageClasses, PersistentVolumes, claims and CSINodes;
test pods then draw claims from ``cluster.claims``.

Test pods combine, each with some probability, every filter and score
feature Berth claims (:data:`berth.framework.registry.DEFAULT_MULTI_POINT`):
container, init-container (incl. sidecar), overhead (through a RuntimeClass,
the only way the API server admits it) and pod-level requests; extended
resources; nodeSelector; required and preferred node affinity incl.
matchFields and Gt/Lt; tolerations; host ports; required and preferred pod
(anti-)affinity over namespaces, namespaceSelectors on namespace labels and
both topology keys; topology spread constraints incl. minDomains, the
node policies and matchLabelKeys; images for ImageLocality; persistent
volume claims (bound local, zonal and CSI volumes, ReadWriteOncePod, unbound
claims no volume can serve), generic ephemeral volumes and inline disks for
VolumeBinding, VolumeZone, VolumeRestrictions and NodeVolumeLimits.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from collections.abc import Callable
from typing import Any

__all__ = ["SECTIONS", "Cluster", "generate"]

Obj = dict[str, Any]

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
GPU = "example.com/gpu"
ZONES = ("zone-a", "zone-b", "zone-c")
APPS = ("web", "db", "cache", "batch")
TIERS = ("frontend", "backend")
RUNTIME_CLASS = "sandboxed"
VOLUME_NAMESPACE = "ns-a"
CSI_DRIVER = "csi.example.com"
WFFC_CLASS, IMMEDIATE_CLASS = "local-wffc", "standard"

#: name -> size in bytes. ImageLocality's thresholds (image_locality.go) are
#: 23 MB and 1000 MB per container, so sizes straddle both; short names
#: exercise normalisation (``nginx`` is ``docker.io/library/nginx:latest``).
IMAGES: dict[str, int] = {
    "docker.io/library/nginx:latest": 60 * 1024**2,
    "registry.example/web:1.0": 300 * 1024**2,
    "registry.example/db:2.1": 900 * 1024**2,
    "registry.example/ml:3.0": 1800 * 1024**2,
    "registry.example/tiny:0.1": 10 * 1024**2,
    "docker.io/library/busybox:1.36": 4 * 1024**2,
}
POD_IMAGES = (
    "nginx",
    "nginx:latest",
    "registry.example/web:1.0",
    "registry.example/db:2.1",
    "registry.example/ml:3.0",
    "registry.example/tiny:0.1",
    "busybox:1.36",
    "registry.example/absent:9",
)

TAINTS: tuple[Obj, ...] = (
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
    {"key": "maintenance", "effect": "NoExecute"},
    {"key": "team", "value": "red", "effect": "NoSchedule"},
)


@dataclasses.dataclass
class Cluster:
    """What :func:`generate` made: the objects to create, in order, and the pods to judge."""

    seed: int
    nodes_count: int = 10
    nodes: list[Obj] = dataclasses.field(default_factory=list)
    namespaces: list[Obj] = dataclasses.field(default_factory=list)
    #: Everything else the cluster holds before the test pods (RuntimeClasses,
    #: running pods; volumes later), created after namespaces and nodes.
    objects: list[Obj] = dataclasses.field(default_factory=list)
    test_pods: list[Obj] = dataclasses.field(default_factory=list)
    #: Claims (all in :data:`VOLUME_NAMESPACE`) test pods may mount.
    claims: list[str] = dataclasses.field(default_factory=list)

    @property
    def running_pods(self) -> list[Obj]:
        return [o for o in self.objects if o["kind"] == "Pod"]

    def all_objects(self) -> list[Obj]:
        return [*self.namespaces, *self.nodes, *self.objects]

    def bound_claims(self) -> list[Obj]:
        """The claims the PV controller binds before any pod is judged (they name their volume)."""
        return [o for o in self.objects if o["kind"] == "PersistentVolumeClaim" and o["spec"].get("volumeName")]


# ---------------------------------------------------------------- the cluster


def namespaces(rng: random.Random, c: Cluster) -> None:
    """Three namespaces with labels that namespaceSelectors pick from."""
    for name in ("ns-a", "ns-b", "ns-c"):
        labels = {"team": rng.choice(("red", "blue")), "env": rng.choice(("prod", "dev"))}
        c.namespaces.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})


def nodes(rng: random.Random, c: Cluster) -> None:
    """Nodes across zones with labels, taints, images, a GPU count and various allocatables."""
    for i in range(c.nodes_count):
        name = f"node-{i:02d}"
        cpu = rng.choice((2, 4, 8))
        resources = {
            "cpu": str(cpu),
            "memory": rng.choice(("4Gi", "8Gi", "16Gi")),
            "pods": str(rng.choice((4, 20, 110))),
            "ephemeral-storage": "100Gi",
        }
        if rng.random() < 0.3:
            resources[GPU] = str(rng.choice((1, 2, 4)))
        allocatable = dict(resources)
        if rng.random() < 0.5:  # reserved for the system: allocatable below capacity
            allocatable["cpu"] = f"{cpu * 1000 - rng.choice((100, 250, 500))}m"
        labels = {
            HOSTNAME: name,
            "kubernetes.io/os": "linux",
            ZONE: ZONES[i % len(ZONES)] if rng.random() < 0.9 else "",
            REGION: "region-1",
            "disktype": rng.choice(("ssd", "hdd")),
            "example.com/cores": str(cpu),
        }
        if not labels[ZONE]:
            del labels[ZONE]  # a node outside every zone (spreading ignores or counts it)
        if rng.random() < 0.3:
            labels["tier"] = rng.choice(TIERS)
        taints = rng.sample(TAINTS, k=rng.choice((0, 0, 0, 0, 0, 1, 1, 2)))
        images = [{"names": [n], "sizeBytes": s} for n, s in IMAGES.items() if rng.random() < 0.35]
        node: Obj = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": [dict(t) for t in taints]} if taints else {},
            "status": {
                "capacity": resources,
                "allocatable": allocatable,
                "images": images,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "bed"}],
            },
        }
        if i == 0 and rng.random() < 0.3:  # at most one cordoned node
            node["spec"]["unschedulable"] = True
        c.nodes.append(node)


def runtime_classes(rng: random.Random, c: Cluster) -> None:
    """A RuntimeClass whose overhead the RuntimeClass admission plugin copies into pods."""
    c.objects.append(
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": RUNTIME_CLASS},
            "handler": "runsc",
            "overhead": {"podFixed": {"cpu": rng.choice(("100m", "250m")), "memory": "120Mi"}},
        }
    )


def running_pods(rng: random.Random, c: Cluster) -> None:
    """Pods already bound to nodes (``nodeName`` set: no scheduler involved),
    with labels, requests, host ports and (anti-)affinity terms that apply to
    incoming pods."""
    n = 0
    for node in c.nodes:
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            ns = rng.choice(c.namespaces)["metadata"]["name"]
            app = rng.choice(APPS)
            container: Obj = {"name": "main", "image": rng.choice(POD_IMAGES), "resources": _requests(rng)}
            if rng.random() < 0.25:
                container["ports"] = [_host_port(rng)]
            spec: Obj = {"nodeName": node["metadata"]["name"], "containers": [container]}
            if rng.random() < 0.35:
                spec["affinity"] = _pod_affinity(rng, c, own_app=app, required_ok=True)
            labels = {"app": app, "tier": rng.choice(TIERS)}
            c.objects.append(_pod(f"run-{n:03d}", ns, labels, spec))
            n += 1


def volumes(rng: random.Random, c: Cluster) -> None:
    """StorageClasses (WaitForFirstConsumer and Immediate, neither
    provisioning), CSINodes with attach limits, PersistentVolumes (local
    with one node's affinity, zonal by node affinity or by the legacy zone
    label, CSI without affinity, ReadWriteOncePod), each pre-bound to a claim
    the PV controller binds before any pod is judged, claims nothing can
    serve, and running pods using CSI volumes and inline disks.

    Every claim a test pod may mount is bound or unbindable, so judging a
    pod never changes them: an unbound WaitForFirstConsumer claim with a
    matching volume would be bound by kube-scheduler's PreBind and seen
    bound by Berth afterwards (the harness judges Berth once all
    kube-scheduler verdicts are in).
    """
    ns = VOLUME_NAMESPACE
    c.objects += [_storage_class(WFFC_CLASS, wait=True), _storage_class(IMMEDIATE_CLASS, wait=False)]
    for node in c.nodes:
        if rng.random() < 0.5:
            name = node["metadata"]["name"]
            c.objects.append(
                {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "CSINode",
                    "metadata": {"name": name},
                    "spec": {
                        "drivers": [
                            {"name": CSI_DRIVER, "nodeID": name, "allocatable": {"count": rng.choice((1, 2, 3))}}
                        ]
                    },
                }
            )

    def bound(pv_name: str, cls: str, source: Obj, *, claim_modes: list[str] | None = None, **extra: Any) -> None:
        size = rng.choice(("1Gi", "5Gi", "10Gi"))
        modes = claim_modes or rng.choice((["ReadWriteOnce"], ["ReadWriteOnce", "ReadOnlyMany"], ["ReadWriteMany"]))
        claim = f"{pv_name}-claim"
        spec: Obj = {
            "capacity": {"storage": size},
            "accessModes": modes,
            "storageClassName": cls,
            "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": ns, "name": claim},
            **source,
        }
        metadata: Obj = {"name": pv_name}
        if "labels" in extra:
            metadata["labels"] = extra.pop("labels")
        spec.update(extra)
        c.objects.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": metadata, "spec": spec})
        c.objects.append(_claim(claim, cls, rng.choice(("512Mi", "1Gi")), modes[:1], volume=pv_name))
        c.claims.append(claim)

    for k in range(rng.choice((2, 3, 4))):  # local volumes on one node each
        node = rng.choice(c.nodes)["metadata"]["name"]
        bound(
            f"local-{k}", WFFC_CLASS, {"local": {"path": f"/mnt/disks/{k}"}}, nodeAffinity=_pv_affinity(HOSTNAME, node)
        )
    for k, zone in enumerate(rng.sample(ZONES, k=2)):  # zonal CSI disks
        csi = {"csi": {"driver": CSI_DRIVER, "volumeHandle": f"zonal-{k}"}}
        if rng.random() < 0.5:
            bound(f"zonal-{k}", IMMEDIATE_CLASS, csi, nodeAffinity=_pv_affinity(ZONE, zone))
        else:  # the legacy zone label only: VolumeZone alone decides
            bound(f"zonal-{k}", IMMEDIATE_CLASS, csi, labels={ZONE: zone, REGION: "region-1"})
    for k in range(4):  # CSI volumes anywhere, counted against the attach limits
        bound(f"csi-{k}", IMMEDIATE_CLASS, {"csi": {"driver": CSI_DRIVER, "volumeHandle": f"csi-{k}"}})
    bound(
        "rwop",
        IMMEDIATE_CLASS,
        {"csi": {"driver": CSI_DRIVER, "volumeHandle": "rwop"}},
        claim_modes=["ReadWriteOncePod"],
    )
    # Claims nothing serves: no volume that big, and no provisioner.
    c.objects.append(_claim("unbound-wffc", WFFC_CLASS, "500Gi", ["ReadWriteOnce"]))
    c.objects.append(_claim("unbound-now", IMMEDIATE_CLASS, "500Gi", ["ReadWriteOnce"]))
    c.claims += ["unbound-wffc", "unbound-now"]

    # Running pods using volumes: CSI claims (attach limits), sometimes the
    # ReadWriteOncePod claim, and inline disks (VolumeRestrictions).
    csi_claims = [f"csi-{k}-claim" for k in range(4)] + (["rwop-claim"] if rng.random() < 0.6 else [])
    for n, claim in enumerate(csi_claims):
        node = rng.choice(c.nodes)["metadata"]["name"]
        vols = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        if rng.random() < 0.3:
            vols.append(_inline_disk(rng))
        spec: Obj = {"nodeName": node, "containers": [{"name": "main", "image": "busybox:1.36"}], "volumes": vols}
        c.objects.append(_pod(f"vol-run-{n}", ns, {"app": rng.choice(APPS), "tier": rng.choice(TIERS)}, spec))


def _storage_class(name: str, *, wait: bool) -> Obj:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer" if wait else "Immediate",
    }


def _pv_affinity(key: str, value: str) -> Obj:
    return {
        "required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}
    }


def _claim(name: str, cls: str, size: str, modes: list[str], *, volume: str = "") -> Obj:
    spec: Obj = {"storageClassName": cls, "accessModes": modes, "resources": {"requests": {"storage": size}}}
    if volume:
        spec["volumeName"] = volume
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": VOLUME_NAMESPACE},
        "spec": spec,
    }


def _inline_disk(rng: random.Random) -> Obj:
    disk: Obj = {"pdName": rng.choice(("disk-1", "disk-2"))}
    if rng.random() < 0.5:
        disk["readOnly"] = True
    return {"name": "disk", "gcePersistentDisk": disk}


def generate(seed: int, *, nodes_count: int = 10, pods: int = 20) -> Cluster:
    """A cluster and ``pods`` test pods, the same for the same arguments."""
    rng = random.Random(seed)
    c = Cluster(seed, nodes_count)
    for section in SECTIONS:
        section(rng, c)
    c.test_pods = [test_pod(rng, c, i) for i in range(pods)]
    return c


#: The cluster's sections in creation order.
SECTIONS: tuple[Callable[[random.Random, Cluster], None], ...] = (
    namespaces,
    nodes,
    runtime_classes,
    running_pods,
    volumes,
)


# ---------------------------------------------------------------- test pods


def test_pod(rng: random.Random, c: Cluster, i: int) -> Obj:
    """One pod drawing from every feature, each with its own probability."""
    ns = rng.choice(c.namespaces)["metadata"]["name"]
    app = rng.choice(APPS)
    labels = {"app": app, "tier": rng.choice(TIERS), "rev": rng.choice(("1", "2"))}
    containers: list[Obj] = [
        {"name": f"c{k}", "image": rng.choice(POD_IMAGES), "resources": _requests(rng, gpu=True)}
        for k in range(rng.choice((1, 1, 2)))
    ]
    if rng.random() < 0.25:
        containers[0]["ports"] = [_host_port(rng)]
    spec: Obj = {"containers": containers}
    if rng.random() < 0.3:
        init: Obj = {"name": "init", "image": rng.choice(POD_IMAGES), "resources": _requests(rng)}
        if rng.random() < 0.4:
            init["restartPolicy"] = "Always"  # a sidecar: its requests add up with the app's
        spec["initContainers"] = [init]
    if rng.random() < 0.15:
        spec["runtimeClassName"] = RUNTIME_CLASS
    if rng.random() < 0.1:
        # Pod-level requests (PodLevelResources, beta in v1.34): at least the
        # containers' sum, which the API server checks.
        spec["resources"] = {"requests": {"cpu": rng.choice(("2", "3")), "memory": rng.choice(("3Gi", "5Gi"))}}
        for ctr in containers + spec.get("initContainers", []):
            ctr["resources"] = {}
    if rng.random() < 0.15:
        spec["nodeSelector"] = rng.choice(({"disktype": "ssd"}, {ZONE: rng.choice(ZONES)}, {"tier": "backend"}))
    affinity: Obj = {}
    if rng.random() < 0.4:
        affinity["nodeAffinity"] = _node_affinity(rng, c)
    if rng.random() < 0.5:
        affinity.update(_pod_affinity(rng, c, own_app=app, required_ok=rng.random() < 0.5))
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.6:
        spec["tolerations"] = _tolerations(rng)
    if rng.random() < 0.4:
        spec["topologySpreadConstraints"] = _spread(rng, app)
    name = f"t-{c.seed}-{i:03d}"
    if c.claims and rng.random() < 0.35:
        ns = VOLUME_NAMESPACE  # where the claims are
        claims = rng.sample(c.claims, k=rng.choice((1, 1, 2)))
        vols: list[Obj] = [{"name": f"v{k}", "persistentVolumeClaim": {"claimName": n}} for k, n in enumerate(claims)]
        if rng.random() < 0.15:
            vols.append(_inline_disk(rng))
        spec["volumes"] = vols
    elif rng.random() < 0.05:
        # A generic ephemeral volume: no ephemeral-volume-controller runs, so its claim never appears.
        template = {
            "spec": {
                "storageClassName": IMMEDIATE_CLASS,
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            }
        }
        spec["volumes"] = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": template}}]
    return _pod(name, ns, labels, spec)


# ---------------------------------------------------------------- pieces


def _pod(name: str, ns: str, labels: dict[str, str], spec: Obj) -> Obj:
    spec = {"terminationGracePeriodSeconds": 0, **spec}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": spec,
    }


def _requests(rng: random.Random, *, gpu: bool = False) -> Obj:
    r = rng.random()
    if r < 0.15:
        return {}  # BestEffort: NodeResourcesFit scores it with defaults
    req = {
        "cpu": rng.choice(("100m", "100m", "250m", "500m", "500m", "1", "1500m", "3")),
        "memory": rng.choice(("64Mi", "128Mi", "256Mi", "1Gi", "2Gi", "6Gi")),
    }
    if r < 0.3:
        return {"limits": req}  # the API server defaults requests from limits
    out: Obj = {"requests": req}
    if gpu and rng.random() < 0.15:
        n = str(rng.choice((1, 2)))
        out = {"requests": {**req, GPU: n}, "limits": {GPU: n}}
    return out


def _host_port(rng: random.Random) -> Obj:
    port, proto = rng.choice(((8080, "TCP"), (8080, "UDP"), (9090, "TCP"), (8443, "TCP")))
    out: Obj = {"containerPort": port, "hostPort": port, "protocol": proto}
    if rng.random() < 0.2:
        out["hostIP"] = "127.0.0.1"
    return out


def _selector(rng: random.Random, app: str) -> Obj:
    match rng.randrange(4):
        case 0:
            return {"matchLabels": {"app": app}}
        case 1:
            return {"matchExpressions": [{"key": "app", "operator": "In", "values": [app, rng.choice(APPS)]}]}
        case 2:
            return {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": [app]}]}
        case _:
            return {"matchLabels": {"app": app}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}


def _pod_affinity_term(rng: random.Random, c: Cluster, app: str) -> Obj:
    term: Obj = {"labelSelector": _selector(rng, app), "topologyKey": rng.choice((HOSTNAME, ZONE))}
    match rng.randrange(5):
        case 0:
            term["namespaces"] = rng.sample([n["metadata"]["name"] for n in c.namespaces], k=2)
        case 1:
            term["namespaceSelector"] = {}  # every namespace
        case 2:
            term["namespaceSelector"] = {"matchLabels": {"team": rng.choice(("red", "blue"))}}
        case 3:
            term["namespaceSelector"] = {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]}
        case _:
            pass  # the pod's own namespace
    return term


def _pod_affinity(rng: random.Random, c: Cluster, *, own_app: str, required_ok: bool) -> Obj:
    out: Obj = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        if rng.random() < 0.5:
            continue
        block: Obj = {}
        if required_ok and rng.random() < 0.35:
            app = own_app if kind == "podAntiAffinity" and rng.random() < 0.5 else rng.choice(APPS)
            block["requiredDuringSchedulingIgnoredDuringExecution"] = [_pod_affinity_term(rng, c, app)]
        if rng.random() < 0.7:
            block["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {
                    "weight": rng.choice((1, 10, 50, 100)),
                    "podAffinityTerm": _pod_affinity_term(rng, c, rng.choice(APPS)),
                }
                for _ in range(rng.choice((1, 2)))
            ]
        if block:
            out[kind] = block
    return out


def _node_term(rng: random.Random, c: Cluster) -> Obj:
    exprs = []
    for _ in range(rng.choice((1, 1, 2))):
        match rng.randrange(6):
            case 0:
                exprs.append({"key": ZONE, "operator": "In", "values": rng.sample(ZONES, k=rng.choice((1, 2)))})
            case 1:
                exprs.append({"key": "disktype", "operator": "NotIn", "values": ["hdd"]})
            case 2:
                exprs.append({"key": "tier", "operator": rng.choice(("Exists", "DoesNotExist"))})
            case 3:
                exprs.append({"key": "example.com/cores", "operator": rng.choice(("Gt", "Lt")), "values": ["3"]})
            case 4:
                exprs.append({"key": "disktype", "operator": "In", "values": ["ssd"]})
            case _:
                exprs.append({"key": ZONE, "operator": "NotIn", "values": [rng.choice(ZONES)]})
    term: Obj = {"matchExpressions": exprs}
    if rng.random() < 0.1:  # the API server allows one value for a field selector
        name = rng.choice(c.nodes)["metadata"]["name"]
        term = {"matchFields": [{"key": "metadata.name", "operator": rng.choice(("In", "NotIn")), "values": [name]}]}
    return term


def _node_affinity(rng: random.Random, c: Cluster) -> Obj:
    out: Obj = {}
    if rng.random() < 0.4:
        out["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [_node_term(rng, c) for _ in range(rng.choice((1, 1, 2)))]
        }
    if not out or rng.random() < 0.6:
        out["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.choice((1, 20, 60, 100)), "preference": _node_term(rng, c)}
            for _ in range(rng.choice((1, 2)))
        ]
    return out


def _tolerations(rng: random.Random) -> list[Obj]:
    out = []
    for taint in rng.sample(TAINTS, k=rng.choice((1, 2))):
        t: Obj = {"key": taint["key"], "effect": taint["effect"]}
        if "value" in taint and rng.random() < 0.7:
            t.update(operator="Equal", value=taint["value"])
        else:
            t["operator"] = "Exists"
        if rng.random() < 0.2:
            del t["effect"]  # every effect
        out.append(t)
    if rng.random() < 0.05:
        out = [{"operator": "Exists"}]  # tolerates everything
    return out


def _spread(rng: random.Random, app: str) -> list[Obj]:
    out = []
    for key in rng.sample((ZONE, HOSTNAME), k=rng.choice((1, 1, 2))):
        hard = rng.random() < 0.5
        c: Obj = {
            "maxSkew": rng.choice((1, 1, 2)),
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": app}},
        }
        if hard and rng.random() < 0.2:
            c["minDomains"] = rng.choice((2, 4))
        if rng.random() < 0.2:
            c["nodeAffinityPolicy"] = rng.choice(("Honor", "Ignore"))
        if rng.random() < 0.2:
            c["nodeTaintsPolicy"] = rng.choice(("Honor", "Ignore"))
        if rng.random() < 0.15:
            c["matchLabelKeys"] = ["rev"]
        out.append(c)
    return out


def without_status(obj: Obj) -> Obj:
    """A copy fit for a create call (Nodes keep their status: no kubelet reports it)."""
    out = copy.deepcopy(obj)
    if out["kind"] != "Node":
        out.pop("status", None)
    return out
