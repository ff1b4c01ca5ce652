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
VolumeBinding, VolumeZone, VolumeRestrictions and NodeVolumeLimits; and
ResourceClaims for DynamicResources (:func:`devices` says which shapes).
"""

from __future__ import annotations

import copy
import dataclasses
import random
import uuid
from collections.abc import Callable
from typing import Any

__all__ = ["SECTIONS", "Cluster", "Device", "exactly", "generate", "resource_claim"]

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
#: Where the test pods with ResourceClaims run (with their claims and
#: templates): the volumes' namespace, so one pod may have both.
DRA_NAMESPACE = VOLUME_NAMESPACE
#: Where the claims holding devices before any test pod live.
HELD_NAMESPACE = "ns-c"
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


@dataclasses.dataclass(frozen=True)
class Device:
    """One device of a ResourceSlice: where it is and who may reach it."""

    driver: str
    pool: str
    name: str
    #: The node of a node-local pool, else "".
    node: str = ""
    #: The slice's ``nodeSelector`` (a network-attached pool), or None:
    #: node-local, or ``allNodes``.
    node_selector: Obj | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)


@dataclasses.dataclass
class Cluster:
    """What :func:`generate` made: the objects to create, in order, and the pods to judge."""

    seed: int
    nodes_count: int = 10
    #: The probability that a test pod has ResourceClaims.
    claim_share: float = 0.3
    #: The probability that a test pod has one of :data:`NEW_KINDS`.
    new_share: float = 0.25
    nodes: list[Obj] = dataclasses.field(default_factory=list)
    namespaces: list[Obj] = dataclasses.field(default_factory=list)
    #: Everything else the cluster holds before the test pods (RuntimeClasses,
    #: running pods; volumes later), created after namespaces and nodes.
    objects: list[Obj] = dataclasses.field(default_factory=list)
    test_pods: list[Obj] = dataclasses.field(default_factory=list)
    #: Claims (all in :data:`VOLUME_NAMESPACE`) test pods may mount.
    claims: list[str] = dataclasses.field(default_factory=list)
    #: Every device the ResourceSlices publish (:func:`devices`).
    devices: list[Device] = dataclasses.field(default_factory=list)
    #: (driver, pool, device) allocated to a claim before any test pod.
    held: set[tuple[str, str, str]] = dataclasses.field(default_factory=set)
    #: Test pod name -> the ResourceClaims it names by ``resourceClaimName``,
    #: created just before the pod and deleted with it (so each pod finds
    #: them as generated, whatever kube-scheduler did to them for the
    #: previous pod); a pre-allocated one carries the ``status`` to write.
    pod_claims: dict[str, list[Obj]] = dataclasses.field(default_factory=dict)
    #: Test pod name -> its own PersistentVolumeClaims (provisioned where a
    #: CSIStorageCapacity has room, :func:`storage_capacity`), likewise
    #: created before the pod and deleted with it.
    pod_volumes: dict[str, list[Obj]] = dataclasses.field(default_factory=dict)
    #: The stream the sections and pod features added for Kubernetes 1.37
    #: (:data:`NEW_KINDS`) draw from, apart from ``generate``'s own: the
    #: clusters and pods of the older features stay what they were.
    extra: random.Random = dataclasses.field(default_factory=random.Random)

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


# ---------------------------------------------------------------- devices

GPU_DRIVER, NIC_DRIVER, NET_DRIVER = "gpu.example.com", "nic.example.com", "net.example.com"
#: A fully qualified attribute both GPUs and NICs carry, so ``matchAttribute``
#: can pair devices of two drivers.
NUMA = "example.com/numa"
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
#: model -> memory capacity, driver version.
GPU_MODELS: dict[str, tuple[str, str]] = {
    "A100": ("80Gi", "1.4.2"),
    "H100": ("80Gi", "2.0.0"),
    "L4": ("24Gi", "1.6.0-rc.1"),
    "T4": ("16Gi", "1.2.0"),
}
#: Class name -> its CEL selectors: the driver, and for "gpu-large" an
#: attribute selector besides.
DEVICE_CLASSES: dict[str, tuple[str, ...]] = {
    "gpu": (f'device.driver == "{GPU_DRIVER}"',),
    "gpu-large": (
        f'device.driver == "{GPU_DRIVER}"',
        f'device.capacity["{GPU_DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0',
    ),
    "nic": (f'device.driver == "{NIC_DRIVER}"',),
    "net": (f'device.driver == "{NET_DRIVER}"',),
}
_G = f'device.attributes["{GPU_DRIVER}"]'
#: Request selectors for GPUs: attributes (string, int, version through
#: semver) and capacity (quantity), one that matches nothing.
GPU_SELECTORS = (
    f'{_G}.model == "A100"',
    f'{_G}.model in ["H100", "L4"]',
    f'device.capacity["{GPU_DRIVER}"].memory.compareTo(quantity("20Gi")) > 0',
    f'{_G}.driverVersion.isGreaterThan(semver("1.5.0"))',
    'device.attributes["example.com"].numa == 1',
    f'cel.bind(g, {_G}, g.model != "T4" && g.driverVersion.major() >= 1)',
    f'{_G}.model == "B200"',  # no such GPU
)


def devices(rng: random.Random, c: Cluster) -> None:
    """DRA: DeviceClasses (:data:`DEVICE_CLASSES`), the ResourceSlices
    drivers would publish — GPUs (model string, memory capacity, NUMA int,
    driver version) and NICs (NUMA) in node-local pools on a subset of the
    nodes, network-attached devices in a pool for one zone's nodes
    (``nodeSelector``) and one for all nodes — and claims in
    :data:`HELD_NAMESPACE` that hold some of the devices already (their
    ``status`` is what kube-scheduler would have written, so "all matching
    devices are allocated" comes up).

    Test pods then get claims (:func:`_pod_resource_claims`) from templates
    or pre-created; the cluster's objects never change while pods are judged.
    """
    for name, selectors in DEVICE_CLASSES.items():
        c.objects.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": e}} for e in selectors]},
            }
        )
    for node in c.nodes:
        name = node["metadata"]["name"]
        if rng.random() < 0.6:
            gpus = []
            for k in range(rng.choice((1, 2, 2, 4))):
                model = rng.choice(list(GPU_MODELS))
                memory, version = GPU_MODELS[model]
                gpus.append(
                    {
                        "name": f"gpu-{k}",
                        "attributes": {
                            "model": {"string": model},
                            "driverVersion": {"version": version},
                            NUMA: {"int": k % 2},
                        },
                        "capacity": {"memory": {"value": memory}},
                    }
                )
            c.objects.append(_slice(c, f"{name}-gpu", GPU_DRIVER, name, gpus, nodeName=name))
        if rng.random() < 0.35:
            nics = [{"name": f"nic-{k}", "attributes": {NUMA: {"int": k}}} for k in range(rng.choice((1, 2)))]
            c.objects.append(_slice(c, f"{name}-nic", NIC_DRIVER, name, nics, nodeName=name))
    zone = rng.choice(ZONES)
    selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]}
    net = [{"name": f"port-{k}", "attributes": {"bandwidth": {"int": rng.choice((100, 400))}}} for k in range(2)]
    c.objects.append(_slice(c, "net-rack", NET_DRIVER, f"rack-{zone}", net, nodeSelector=selector))
    shared = [{"name": "port-0", "attributes": {"bandwidth": {"int": 10}}}]
    c.objects.append(_slice(c, "net-shared", NET_DRIVER, "shared", shared, allNodes=True))

    # Claims holding a quarter of the devices (unused: reserved for no pod,
    # so the resourceclaim controller leaves them allocated).
    held = [d for d in c.devices if rng.random() < 0.25]
    for k, d in enumerate(held):
        cls = {GPU_DRIVER: "gpu", NIC_DRIVER: "nic", NET_DRIVER: "net"}[d.driver]
        claim = resource_claim(f"held-{k}", HELD_NAMESPACE, {"requests": [exactly("dev", cls)]})
        claim["status"] = _allocation([("dev", d)])
        c.objects.append(claim)
        c.held.add(d.key)


def _slice(c: Cluster, name: str, driver: str, pool: str, devs: list[Obj], **where: Any) -> Obj:
    """The one slice of a pool; its devices are recorded in ``c.devices``."""
    node = where.get("nodeName", "")
    c.devices += [Device(driver, pool, d["name"], node, where.get("nodeSelector")) for d in devs]
    return _pool_slice(name, driver, pool, {"devices": devs}, slices=1, **where)


def resource_claim(name: str, ns: str, devices_spec: Obj) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"devices": devices_spec},
    }


def exactly(name: str, cls: str, count: int = 1, selector: str = "", *, all_devices: bool = False) -> Obj:
    exactly: Obj = {"deviceClassName": cls}
    if all_devices:
        exactly["allocationMode"] = "All"
    elif count != 1:
        exactly["count"] = count
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"name": name, "exactly": exactly}


def _allocation(results: list[tuple[str, Device]]) -> Obj:
    """``status.allocation`` as kube-scheduler writes it: the devices, the
    nodes that reach them (one node by name, the pool's selector, or none for
    ``allNodes``) and, as v1.37 does, when it was allocated. kube-scheduler
    v1.37.2 (``dynamicresources.go`` bindClaim, with DRADeviceBindingConditions
    and DRAResourceClaimDeviceStatus on) fills ``allocationTimestamp`` into an
    allocation that lacks it while adding its reservation, and the API server
    refuses that change of an allocation (``field cannot be modified once
    set``), so a claim allocated without one cannot be used by a 1.37 pod."""
    allocation: Obj = {
        "devices": {
            "results": [{"request": req, "driver": d.driver, "pool": d.pool, "device": d.name} for req, d in results]
        },
        "allocationTimestamp": "2026-01-01T00:00:00Z",
    }
    d = results[0][1]
    if d.node:
        terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [d.node]}]}]
        allocation["nodeSelector"] = {"nodeSelectorTerms": terms}
    elif d.node_selector is not None:
        allocation["nodeSelector"] = copy.deepcopy(d.node_selector)
    return {"allocation": allocation}


def _claim_devices(rng: random.Random) -> Obj:
    """A claim's ``spec.devices`` of one of several shapes, some of which no
    node can satisfy."""
    match rng.randrange(10):
        case 0 | 1:  # one GPU, perhaps by attribute
            sel = rng.choice(("", *GPU_SELECTORS))
            return {"requests": [exactly("gpu", rng.choice(("gpu", "gpu", "gpu-large")), 1, sel)]}
        case 2:  # two GPUs of one model
            out: Obj = {"requests": [exactly("gpu", "gpu", 2, rng.choice(("", GPU_SELECTORS[5])))]}
            if rng.random() < 0.6:
                out["constraints"] = [{"requests": ["gpu"], "matchAttribute": f"{GPU_DRIVER}/model"}]
            return out
        case 3:  # every matching GPU of the node
            return {"requests": [exactly("gpu", "gpu", selector=rng.choice(GPU_SELECTORS[:5]), all_devices=True)]}
        case 4:  # the best GPU there is, in order of preference
            subs = [
                {"name": "h100s", "deviceClassName": "gpu", "count": 2, "selectors": _cel(f'{_G}.model == "H100"')},
                {"name": "large", "deviceClassName": "gpu-large"},
                {"name": "any", "deviceClassName": "gpu", "selectors": _cel(rng.choice(GPU_SELECTORS[1:4]))},
            ]
            return {"requests": [{"name": "gpu", "firstAvailable": subs[rng.randrange(2) :]}]}
        case 5:  # a GPU and a NIC on the same NUMA node
            return {
                "requests": [exactly("gpu", "gpu"), exactly("nic", "nic")],
                "constraints": [{"matchAttribute": NUMA}],
            }
        case 6:  # a network-attached port
            sel = rng.choice(("", 'device.attributes["net.example.com"].bandwidth >= 100'))
            return {"requests": [exactly("port", "net", 1, sel)]}
        case 7:  # more GPUs than any node has
            return {"requests": [exactly("gpu", "gpu", rng.choice((5, 8)))]}
        case 8:  # two requests of one claim: a large GPU and any other
            return {"requests": [exactly("big", "gpu-large"), exactly("small", "gpu", 1, rng.choice(GPU_SELECTORS))]}
        case _:  # a class that does not exist (PreFilter), or nothing matches
            if rng.random() < 0.3:
                return {"requests": [exactly("tpu", "tpu")]}
            return {"requests": [exactly("gpu", "gpu", 1, GPU_SELECTORS[-1])]}


def _cel(expression: str) -> list[Obj]:
    return [{"cel": {"expression": expression}}]


def _pod_resource_claims(rng: random.Random, c: Cluster, pod: str) -> list[Obj]:
    """``spec.resourceClaims`` of a test pod: one or two claims, each from a
    ResourceClaimTemplate (added to the cluster), pre-created for the pod
    (:attr:`Cluster.pod_claims`), or pre-created and already allocated on a
    node (kube-scheduler's status on a free device: the pod is pinned to
    where the device is)."""
    refs: list[Obj] = []
    used: set[tuple[str, str, str]] = set()
    for k in range(rng.choice((1, 1, 1, 2))):
        ref, name = f"claim-{k}", f"{pod}-claim-{k}"
        r = rng.random()
        free = [d for d in c.devices if d.key not in c.held and d.key not in used and d.driver != NIC_DRIVER]
        if r < 0.45:
            template = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": DRA_NAMESPACE},
                "spec": {"spec": {"devices": _claim_devices(rng)}},
            }
            c.objects.append(template)
            refs.append({"name": ref, "resourceClaimTemplateName": name})
            continue
        if r < 0.8 or not free:
            claim = resource_claim(name, DRA_NAMESPACE, _claim_devices(rng))
        else:
            d = rng.choice(free)
            used.add(d.key)
            cls = "gpu" if d.driver == GPU_DRIVER else "net"
            claim = resource_claim(name, DRA_NAMESPACE, {"requests": [exactly("dev", cls)]})
            claim["metadata"]["finalizers"] = [DELETE_PROTECTION]
            claim["status"] = _allocation([("dev", d)])
        c.pod_claims.setdefault(pod, []).append(claim)
        refs.append({"name": ref, "resourceClaimName": name})
    return refs


def generate(
    seed: int, *, nodes_count: int = 10, pods: int = 20, claim_share: float = 0.3, new_share: float = 0.25
) -> Cluster:
    """A cluster and ``pods`` test pods, the same for the same arguments;
    about ``claim_share`` of the pods have ResourceClaims, and about
    ``new_share`` one of :data:`NEW_KINDS` besides (each kind at least once)."""
    if not 0 <= claim_share <= 1:
        raise ValueError(f"claim_share must be within [0, 1], not {claim_share}")
    if not 0 <= new_share <= 1:
        raise ValueError(f"new_share must be within [0, 1], not {new_share}")
    rng = random.Random(seed)
    c = Cluster(seed, nodes_count, claim_share=claim_share, new_share=new_share, extra=random.Random(f"1.37-{seed}"))
    for section in SECTIONS:
        section(rng, c)
    # Each new kind at least once (at positions of their own), then each
    # pod one of them with some probability.
    forced = dict(zip(c.extra.sample(range(pods), k=min(pods, len(NEW_KINDS))), NEW_KINDS, strict=False))
    c.test_pods = [with_new_kind(c, test_pod(rng, c, i), forced.get(i)) for i in range(pods)]
    return c


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
    if c.devices and rng.random() < c.claim_share:
        ns = DRA_NAMESPACE  # where the claims and templates are
        spec["resourceClaims"] = _pod_resource_claims(rng, c, name)
        containers[0].setdefault("resources", {})["claims"] = [{"name": r["name"]} for r in spec["resourceClaims"]]
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


# ---------------------------------------------------------------- Kubernetes 1.37's DRA and storage capacity
# Drawn from ``Cluster.extra``: partitionable devices (shared counters in
# a slice of their own), devices allocated more than once (consumable
# capacity), device taints (NoSchedule and None), extended resources backed
# by DRA, and volumes provisioned where CSIStorageCapacity says there is room.

PART_DRIVER, SHARE_DRIVER = "part.example.com", "share.example.com"
#: The extended resource a DeviceClass names (and some nodes' device plugin advertises).
DGPU = "example.com/dgpu"
#: The implicit extended resource of the class "part".
IMPLICIT_PART = "deviceclass.resource.kubernetes.io/part"
#: Extended resources backed by DRA: test pods requesting them are judged as claim pods.
DRA_EXTENDED = (DGPU, IMPLICIT_PART)
DEVICE_TAINT = "example.com/maintenance"
CAPACITY_DRIVER, CAPACITY_CLASS = "capacity.csi.example.com", "csi-capacity"
#: What a test pod may get on top of the older features.
NEW_KINDS = ("partitionable", "consumable", "taints", "extended", "capacity")
#: Partitions of one 40Gi GPU: name prefix, how many, memory each.
PARTITIONS = (("whole", 1, 40), ("half", 2, 20), ("quarter", 4, 10))


def advanced_devices(rng: random.Random, c: Cluster) -> None:
    """Partitionable GPUs (a pool of two slices: the counters, then the
    partitions consuming them), shared links (``allowMultipleAllocations``
    with a bandwidth request policy), taints on some of both, the class
    ``dgpu`` naming :data:`DGPU`, a device plugin advertising it on some
    nodes, and claims holding a partition or a share of a link."""
    x = c.extra
    c.objects += [
        _device_class("part", f'device.driver == "{PART_DRIVER}"'),
        _device_class("share", f'device.driver == "{SHARE_DRIVER}"'),
        _device_class(
            "dgpu",
            f'device.driver == "{PART_DRIVER}" && device.attributes["{PART_DRIVER}"].size == "quarter"',
            extended=DGPU,
        ),
    ]
    held = 0
    for node in c.nodes:
        name = node["metadata"]["name"]
        if x.random() < 0.2:  # a device plugin serves example.com/dgpu here
            for key in ("capacity", "allocatable"):
                node["status"][key][DGPU] = str(x.choice((1, 2)))
        if x.random() < 0.5:
            pool = f"{name}-part"
            counters = {"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}
            parts = []
            for size, n, gib in PARTITIONS:
                for k in range(n):
                    dev: Obj = {
                        "name": f"{size}-{k}",
                        "attributes": {"size": {"string": size}},
                        "capacity": {"memory": {"value": f"{gib}Gi"}},
                        "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": f"{gib}Gi"}}}],
                    }
                    if x.random() < 0.15:
                        dev["taints"] = [_device_taint(x)]
                    parts.append(dev)
            c.objects += [
                _pool_slice(f"{pool}-{kind}", PART_DRIVER, pool, body, slices=2, nodeName=name)
                for kind, body in (("counters", {"sharedCounters": [counters]}), ("devices", {"devices": parts}))
            ]
            if x.random() < 0.3:  # a half already taken: the whole GPU and two quarters are not free
                d = Device(PART_DRIVER, pool, "half-0", name)
                claim = resource_claim(f"held-part-{held}", HELD_NAMESPACE, {"requests": [exactly("dev", "part")]})
                claim["status"] = _allocation([("dev", d)])
                c.objects.append(claim)
                held += 1
        if x.random() < 0.5:
            links = []
            for k in range(x.choice((1, 2))):
                dev = {
                    "name": f"link-{k}",
                    "allowMultipleAllocations": True,
                    "capacity": {
                        "bandwidth": {
                            "value": "100",
                            "requestPolicy": {"default": "10", "validRange": {"min": "10", "step": "10"}},
                        }
                    },
                }
                if x.random() < 0.15:
                    dev["taints"] = [_device_taint(x)]
                links.append(dev)
            pool = f"{name}-share"
            c.objects.append(_pool_slice(pool, SHARE_DRIVER, pool, {"devices": links}, slices=1, nodeName=name))
            if x.random() < 0.4:  # a share of 60 already consumed
                d = Device(SHARE_DRIVER, pool, "link-0", name)
                request = exactly("dev", "share")
                request["exactly"]["capacity"] = {"requests": {"bandwidth": "60"}}
                claim = resource_claim(f"held-share-{held}", HELD_NAMESPACE, {"requests": [request]})
                claim["status"] = _allocation([("dev", d)])
                result = claim["status"]["allocation"]["devices"]["results"][0]
                result["shareID"] = str(uuid.UUID(int=x.getrandbits(128), version=4))
                result["consumedCapacity"] = {"bandwidth": "60"}
                c.objects.append(claim)
                held += 1


def _pool_slice(name: str, driver: str, pool: str, body: Obj, *, slices: int, **where: Any) -> Obj:
    """A ResourceSlice of a pool of ``slices`` slices; ``where``: nodeName,
    nodeSelector or allNodes; ``body``: its devices or its sharedCounters."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": slices},
            **where,
            **body,
        },
    }


def _device_class(name: str, expression: str, *, extended: str = "") -> Obj:
    spec: Obj = {"selectors": [{"cel": {"expression": expression}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def _device_taint(x: random.Random) -> Obj:
    return {"key": DEVICE_TAINT, "value": "true", "effect": x.choice(("NoSchedule", "NoSchedule", "None"))}


def storage_capacity(rng: random.Random, c: Cluster) -> None:
    """A CSI driver that reports storage capacity (CSIDriver
    ``storageCapacity: true``), its WaitForFirstConsumer StorageClass, and
    CSIStorageCapacity objects per zone (one zone may have none). Test pods
    get claims of the class of their own (:func:`with_new_kind`): created
    with the pod, provisioned by the harness once kube-scheduler picked the
    node (no CSI provisioner runs on the bed), deleted with the pod."""
    x = c.extra
    c.objects.append(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIDriver",
            "metadata": {"name": CAPACITY_DRIVER},
            "spec": {"attachRequired": False, "storageCapacity": True},
        }
    )
    sc = _storage_class(CAPACITY_CLASS, wait=True)
    sc["provisioner"] = CAPACITY_DRIVER
    c.objects.append(sc)
    for k, zone in enumerate(ZONES):
        if x.random() < 0.2:
            continue
        capacity: Obj = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIStorageCapacity",
            "metadata": {"name": f"capacity-{k}", "namespace": VOLUME_NAMESPACE},
            "storageClassName": CAPACITY_CLASS,
            "nodeTopology": {"matchLabels": {ZONE: zone}},
            "capacity": x.choice(("5Gi", "20Gi", "100Gi")),
        }
        if x.random() < 0.3:
            capacity["maximumVolumeSize"] = "10Gi"
        c.objects.append(capacity)


def with_new_kind(c: Cluster, pod: Obj, kind: str | None) -> Obj:
    """``pod`` with one of :data:`NEW_KINDS` (``kind``, or one drawn with some probability, or none)."""
    x = c.extra
    if kind is None:
        kind = x.choice(NEW_KINDS) if x.random() < c.new_share else None
    if kind is None:
        return pod
    spec, name = pod["spec"], pod["metadata"]["name"]
    container = spec["containers"][0]
    if kind == "capacity":
        if pod["metadata"]["namespace"] != VOLUME_NAMESPACE and spec.get("resourceClaims"):
            return pod  # its DRA claims live elsewhere
        pod["metadata"]["namespace"] = VOLUME_NAMESPACE
        claim = _claim(f"{name}-data", CAPACITY_CLASS, x.choice(("1Gi", "4Gi", "15Gi", "50Gi")), ["ReadWriteOnce"])
        c.pod_volumes.setdefault(name, []).append(claim)
        spec.setdefault("volumes", []).append({"name": "data", "persistentVolumeClaim": {"claimName": f"{name}-data"}})
        return pod
    if pod["metadata"]["namespace"] != DRA_NAMESPACE and spec.get("volumes"):
        return pod  # its volumes' claims live elsewhere
    if kind != "extended" and not c.claim_share:
        return pod  # no pod has ResourceClaims
    pod["metadata"]["namespace"] = DRA_NAMESPACE
    if kind == "extended":
        resource = x.choice((DGPU, DGPU, IMPLICIT_PART))
        n = str(x.choice((1, 1, 2, 3)))
        res = container.setdefault("resources", {})
        res.setdefault("requests", {})[resource] = n
        res.setdefault("limits", {})[resource] = n  # the API server wants them equal
        return pod
    template = f"{name}-{kind}"
    c.objects.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": template, "namespace": DRA_NAMESPACE},
            "spec": {"spec": {"devices": _new_kind_devices(x, kind)}},
        }
    )
    ref = {"name": f"{kind}-claim", "resourceClaimTemplateName": template}
    spec.setdefault("resourceClaims", []).append(ref)
    container.setdefault("resources", {}).setdefault("claims", []).append({"name": ref["name"]})
    return pod


def _new_kind_devices(x: random.Random, kind: str) -> Obj:
    """A claim's ``spec.devices`` for partitions, shares of a link, or devices that may be tainted."""
    toleration = {"key": DEVICE_TAINT, "operator": "Exists", "effect": "NoSchedule"}
    if kind == "partitionable":
        size = x.choice(("whole", "half", "quarter", ""))
        sel = f'device.attributes["{PART_DRIVER}"].size == "{size}"' if size else ""
        return {"requests": [exactly("part", "part", x.choice((1, 1, 2, 3)), sel)]}
    if kind == "consumable":
        request = exactly("link", "share", x.choice((1, 1, 2)))
        amount = x.choice(("", "20", "50", "100", "25"))  # "": the policy's default; 25: rounded up to a step
        if amount:
            request["exactly"]["capacity"] = {"requests": {"bandwidth": amount}}
        return {"requests": [request]}
    # taints: a partition or a link, with or without a toleration of NoSchedule
    request = exactly("dev", x.choice(("part", "share")), x.choice((1, 2)))
    if x.random() < 0.5:
        request["exactly"]["tolerations"] = [toleration]
    return {"requests": [request]}


#: The cluster's sections in creation order.
SECTIONS: tuple[Callable[[random.Random, Cluster], None], ...] = (
    namespaces,
    nodes,
    runtime_classes,
    running_pods,
    volumes,
    devices,
    advanced_devices,
    storage_capacity,
)
