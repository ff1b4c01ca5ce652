"""Volumes, namespace labels and default spreading end to end: Berth as a
second scheduler (``schedulerName: berth``) on the real control plane, with
the real kube-controller-manager binding claims (its
``persistentvolume-binder-controller``) and running ReplicaSets
(``replicaset-controller``).

Nodes are API objects: no kubelet mounts anything and no CSI driver runs.
Where a real component is missing the test plays it and says so (the
external-provisioner of :func:`test_dynamic_provisioning_selects_the_node_before_the_pod_is_bound`;
CSINode objects, which a kubelet's CSI plugin registration would write).

Every test makes its own nodes (deleted again with their pods at teardown),
so each sees a known number of nodes and the messages are exact: upstream's
``FitError.Error`` (``pkg/scheduler/framework/types.go``) is
``0/N nodes are available: <count reason, sorted>. preemption: ...``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from berth.api.v1 import cluster_pb2, cluster_pb2_grpc
from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed
from tests.e2e.kubeutil import condition, delete_pod, events_for, get_pod, node_of, pod

Obj = dict[str, Any]

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
CSI_DRIVER = "csi.example.com"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
#: The default profile runs DynamicResources' PostFilter before
#: DefaultPreemption (default_plugins.go applyDynamicResources); up to 1.36
#: it says this for a pod without resource claims, and RunPostFilterPlugins
#: joins the reasons with ", "; v1.37.2 says nothing.
NO_CLAIMS = "" if bed.KUBERNETES_VERSION >= "v1.37" else "no new claims to deallocate, "


@pytest.fixture(scope="module")
def kcm(control_plane: bed.ControlPlane) -> Iterator[bed.Process]:
    """kube-controller-manager with the bed's controllers plus the
    ``replicaset-controller`` (its v1.34.4 name, from ``--help``), cheap
    enough to run here so ReplicaSets make their own pods."""
    proc = control_plane.start_controller_manager((*bed.DEFAULT_CONTROLLERS, "replicaset-controller"))
    yield proc
    proc.stop()


class Scene:
    """The objects one test made, deleted again at its end (pods first)."""

    def __init__(self, cp: bed.ControlPlane) -> None:
        self.cp = cp
        self.kube = cp.kube()
        self.made: list[Obj] = []
        self.nodes: list[str] = []

    def create(self, obj: Obj) -> Obj:
        out: Obj = self.kube.create(obj)
        self.made.append(obj)
        return out

    def node(self, name: str, **kw: Any) -> str:
        self.cp.create_node(name, **kw)
        self.nodes.append(name)
        return name

    def cleanup(self) -> None:
        kinds = ("Pod", "ReplicaSet", "PersistentVolumeClaim", "PersistentVolume")
        order = sorted(self.made, key=lambda o: kinds.index(o["kind"]) if o["kind"] in kinds else len(kinds))
        for obj in order:
            with contextlib.suppress(Exception):
                self.kube.delete(obj)
                if obj["kind"] in ("PersistentVolumeClaim", "PersistentVolume"):
                    # Their protection finalizers' controllers do not run here.
                    self.kube.request(
                        "PATCH",
                        f"{self.kube.collection(obj)}/{obj['metadata']['name']}",
                        {"metadata": {"finalizers": None}},
                        content_type="application/merge-patch+json",
                    )
        for name in self.nodes:
            with contextlib.suppress(Exception):
                self.kube.request("DELETE", f"/api/v1/nodes/{name}")


@pytest.fixture
def scene(control_plane: bed.ControlPlane, kcm: bed.Process) -> Iterator[Scene]:
    s = Scene(control_plane)
    yield s
    s.cleanup()


# ---------------------------------------------------------------- objects


def storage_class(name: str, *, provisioner: str = NO_PROVISIONER, wait: bool = True) -> Obj:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer" if wait else "Immediate",
    }


def pv(
    name: str,
    cls: str,
    *,
    size: str = "1Gi",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    affinity: list[Obj] | None = None,
    csi: bool = False,
    labels: dict[str, str] | None = None,
) -> Obj:
    spec: Obj = {
        "capacity": {"storage": size},
        "accessModes": list(modes),
        "storageClassName": cls,
        "persistentVolumeReclaimPolicy": "Retain",
    }
    if csi:
        spec["csi"] = {"driver": CSI_DRIVER, "volumeHandle": name}
    else:
        spec["local"] = {"path": f"/mnt/disks/{name}"}
    if affinity is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": affinity}]}}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


def pvc(name: str, cls: str, *, size: str = "1Gi", modes: tuple[str, ...] = ("ReadWriteOnce",)) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"storageClassName": cls, "accessModes": list(modes), "resources": {"requests": {"storage": size}}},
    }


def on_host(node: str) -> list[Obj]:
    return [{"key": HOSTNAME, "operator": "In", "values": [node]}]


def with_claims(name: str, *claims: str, **kw: Any) -> Obj:
    return pod(
        name,
        volumes=[{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)],
        **kw,
    )


def get_claim(kube: bed.Kube, name: str) -> Obj:
    out: Obj = kube.ok("GET", f"/api/v1/namespaces/default/persistentvolumeclaims/{name}")
    return out


def bound_claim(kube: bed.Kube, name: str) -> Obj | None:
    c = get_claim(kube, name)
    return c if c.get("status", {}).get("phase") == "Bound" else None


def unschedulable_message(kube: bed.Kube, name: str) -> str | None:
    c = condition(get_pod(kube, name))
    return c["message"] if c and c["status"] == "False" and c["reason"] == "Unschedulable" else None


def failed_scheduling(kube: bed.Kube, name: str) -> list[str]:
    return [
        e.get("note") or e.get("message") or "" for e in events_for(kube, name) if e.get("reason") == "FailedScheduling"
    ]


def expect_waiting(kube: bed.Kube, name: str, message: str) -> None:
    """The pod stays unbound with ``message`` on its PodScheduled condition and FailedScheduling event."""
    assert wait_for(f"{name} to be unschedulable", lambda: unschedulable_message(kube, name), 30) == message
    assert message in wait_for(f"{name}'s FailedScheduling event", lambda: failed_scheduling(kube, name), 15)
    assert node_of(kube, name) is None


# ---------------------------------------------------------------- volumes


def test_local_volume_with_wait_for_first_consumer_places_the_pod_on_its_node(
    scene: Scene, start_berth: Callable[..., Any]
) -> None:
    nodes = [scene.node(f"local-{i}") for i in range(3)]
    scene.create(storage_class("local-wffc"))
    scene.create(pv("local-pv", "local-wffc", affinity=on_host(nodes[1])))
    scene.create(pvc("local-claim", "local-wffc"))
    start_berth()
    scene.create(with_claims("local-user", "local-claim"))

    assert wait_for("local-user bound", lambda: node_of(scene.kube, "local-user"), 60) == nodes[1]
    claim = wait_for("the claim bound by the PV controller", lambda: bound_claim(scene.kube, "local-claim"), 30)
    assert claim["spec"]["volumeName"] == "local-pv"
    # The binding was the scheduler's choice, completed by the controller.
    assert claim["metadata"]["annotations"].get(SELECTED_NODE) is None
    assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    volume = scene.kube.ok("GET", "/api/v1/persistentvolumes/local-pv")
    assert volume["status"]["phase"] == "Bound"
    assert volume["spec"]["claimRef"]["name"] == "local-claim"


def test_local_volume_on_no_node_keeps_the_pod_waiting(scene: Scene, start_berth: Callable[..., Any]) -> None:
    scene.node("nolocal-0")
    scene.node("nolocal-1")
    scene.create(storage_class("local-wffc-2"))
    scene.create(pv("elsewhere-pv", "local-wffc-2", affinity=on_host("gone-node")))
    scene.create(pvc("nowhere-claim", "local-wffc-2"))
    start_berth()
    scene.create(with_claims("nowhere", "nowhere-claim"))
    # volume_binding.go: ErrReasonBindConflict; UnschedulableAndUnresolvable, so no preemption candidates.
    expect_waiting(
        scene.kube,
        "nowhere",
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind. "
        f"{NO_CLAIMS}preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
    )


class Provisioner:
    """This test plays **external-provisioner** (no CSI driver runs here):
    like it, it watches claims of its class that carry
    ``volume.kubernetes.io/selected-node`` and creates a PV for each with
    that node's affinity, pre-bound to the claim (``claimRef``) and
    annotated ``pv.kubernetes.io/provisioned-by``; the real PV controller
    then binds the claim to it. It also records whether the claim's pod was
    still unbound when the annotation appeared."""

    def __init__(self, scene: Scene, cls: str, provisioner: str, pod_of: dict[str, str]) -> None:
        self.scene, self.cls, self.provisioner, self.pod_of = scene, cls, provisioner, pod_of
        self.seen: dict[str, tuple[str, str | None]] = {}  # claim -> (selected node, pod's node then)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Provisioner:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        kube = self.scene.kube
        while not self._stop.wait(0.05):
            with contextlib.suppress(Exception):
                claims = kube.ok("GET", "/api/v1/namespaces/default/persistentvolumeclaims")["items"]
                for c in claims:
                    name, ann = c["metadata"]["name"], c["metadata"].get("annotations") or {}
                    node = ann.get(SELECTED_NODE)
                    if c["spec"].get("storageClassName") != self.cls or not node or name in self.seen:
                        continue
                    self.seen[name] = (node, node_of(kube, self.pod_of[name]))
                    self.scene.create(
                        {
                            "apiVersion": "v1",
                            "kind": "PersistentVolume",
                            "metadata": {
                                "name": f"pvc-{c['metadata']['uid']}",
                                "annotations": {"pv.kubernetes.io/provisioned-by": self.provisioner},
                            },
                            "spec": {
                                "capacity": {"storage": c["spec"]["resources"]["requests"]["storage"]},
                                "accessModes": c["spec"]["accessModes"],
                                "storageClassName": self.cls,
                                "persistentVolumeReclaimPolicy": "Delete",
                                "csi": {"driver": self.provisioner, "volumeHandle": c["metadata"]["uid"]},
                                "claimRef": {
                                    "kind": "PersistentVolumeClaim",
                                    "apiVersion": "v1",
                                    "namespace": "default",
                                    "name": name,
                                    "uid": c["metadata"]["uid"],
                                },
                                "nodeAffinity": {
                                    "required": {"nodeSelectorTerms": [{"matchExpressions": on_host(node)}]}
                                },
                            },
                        }
                    )


def test_dynamic_provisioning_selects_the_node_before_the_pod_is_bound(
    scene: Scene, start_berth: Callable[..., Any]
) -> None:
    nodes = [scene.node(f"dyn-{i}") for i in range(2)]
    scene.create(storage_class("dyn-wffc", provisioner="dyn.csi.example.com"))
    scene.create(pvc("dyn-claim", "dyn-wffc"))
    start_berth()
    with Provisioner(scene, "dyn-wffc", "dyn.csi.example.com", {"dyn-claim": "dyn-user"}) as provisioner:
        scene.create(with_claims("dyn-user", "dyn-claim"))
        node = wait_for("dyn-user bound", lambda: node_of(scene.kube, "dyn-user"), 60)
    assert node in nodes
    # The scheduler chose the node on the claim first; the pod was bound only after.
    assert provisioner.seen["dyn-claim"] == (node, None)
    claim = wait_for("the provisioned claim bound", lambda: bound_claim(scene.kube, "dyn-claim"), 30)
    assert claim["metadata"]["annotations"][SELECTED_NODE] == node
    volume = scene.kube.ok("GET", f"/api/v1/persistentvolumes/{claim['spec']['volumeName']}")
    assert volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"] == on_host(node)


def test_a_zonal_volume_pins_the_pod_to_its_zone(scene: Scene, start_berth: Callable[..., Any]) -> None:
    zone_of = {scene.node(f"zonal-{i}", labels={ZONE: z}): z for i, z in enumerate(("z1", "z1", "z2", "z2", "z3"))}
    scene.create(storage_class("zonal-now", wait=False))
    zonal = [{"key": ZONE, "operator": "In", "values": ["z2"]}]
    scene.create(pv("zonal-pv", "zonal-now", affinity=zonal, csi=True, labels={ZONE: "z2"}))
    scene.create(pvc("zonal-claim", "zonal-now"))
    # Immediate binding: the PV controller binds it before any pod exists.
    wait_for("zonal-claim bound", lambda: bound_claim(scene.kube, "zonal-claim"), 30)
    start_berth()
    for i in range(3):
        scene.create(with_claims(f"zonal-user-{i}", "zonal-claim"))
    for i in range(3):
        assert (
            zone_of[wait_for(f"zonal-user-{i} bound", lambda i=i: node_of(scene.kube, f"zonal-user-{i}"), 30)] == "z2"
        )


def csinode(node: str, count: int) -> Obj:
    """What the kubelet's CSI plugin registration writes for a driver with a volume limit."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": node},
        "spec": {"drivers": [{"name": CSI_DRIVER, "nodeID": node, "allocatable": {"count": count}}]},
    }


def pods_on(berth: Any, node: str) -> int:
    """How many pods Berth's cache holds on ``node`` (its gRPC Cluster.ListNodes)."""
    with grpc.insecure_channel(f"127.0.0.1:{berth.grpc_port}") as channel:
        nodes = cluster_pb2_grpc.ClusterStub(channel).ListNodes(cluster_pb2.ListNodesRequest(), timeout=10).nodes
    return next((n.pods for n in nodes if n.name == node), 0)


def test_a_node_at_its_csi_attach_limit_is_skipped(scene: Scene, start_berth: Callable[..., Any]) -> None:
    full, free = scene.node("attach-full"), scene.node("attach-free")
    scene.create(csinode(full, 1))
    scene.create(csinode(free, 2))
    scene.create(storage_class("csi-now", wait=False))
    for i in range(4):
        scene.create(pv(f"csi-pv-{i}", "csi-now", csi=True))
        scene.create(pvc(f"csi-claim-{i}", "csi-now"))
    for i in range(4):
        wait_for(f"csi-claim-{i} bound", lambda i=i: bound_claim(scene.kube, f"csi-claim-{i}"), 30)
    # A pod already using one volume of the driver on the full node (set by nodeName: no scheduler).
    scene.create(with_claims("attached", "csi-claim-0", nodeName=full))
    # pods_on reads with no credential (RBAC-filtered reads: tests/e2e/test_batch_on_kubernetes.py).
    berth = start_berth({"grpc": {"auth": {"reads": "open"}}})
    # It prefers the full node; only the attach limit can keep it away.
    prefer = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [full]}]},
                }
            ]
        }
    }
    scene.create(with_claims("attaching", "csi-claim-1", affinity=prefer))
    assert wait_for("attaching bound", lambda: node_of(scene.kube, "attaching"), 30) == free

    # Both nodes full: the free node's second volume arrives (bound by nodeName).
    scene.create(with_claims("attached-too", "csi-claim-2", nodeName=free))
    wait_for("Berth to see it", lambda: pods_on(berth, free) == 2, 15)
    scene.create(with_claims("no-room", "csi-claim-3"))
    # non_csi.go/csi.go: ErrReasonMaxVolumeCountExceeded, Unschedulable; no lower-priority victims to preempt.
    expect_waiting(
        scene.kube,
        "no-room",
        "0/2 nodes are available: 2 node(s) exceed max volume count. "
        f"{NO_CLAIMS}preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
    )


def test_a_second_pod_of_a_read_write_once_pod_claim_waits(scene: Scene, start_berth: Callable[..., Any]) -> None:
    scene.node("rwop-0")
    scene.node("rwop-1")
    scene.create(storage_class("rwop-now", wait=False))
    scene.create(pv("rwop-pv", "rwop-now", modes=("ReadWriteOncePod",), csi=True))
    scene.create(pvc("rwop-claim", "rwop-now", modes=("ReadWriteOncePod",)))
    wait_for("rwop-claim bound", lambda: bound_claim(scene.kube, "rwop-claim"), 30)
    start_berth()
    scene.create(with_claims("rwop-first", "rwop-claim"))
    wait_for("rwop-first bound", lambda: node_of(scene.kube, "rwop-first"), 30)
    scene.create(with_claims("rwop-second", "rwop-claim"))
    # volume_restrictions.go: ErrReasonReadWriteOncePodConflict (Unschedulable on every node in Filter);
    # the first pod has the same priority, so preemption finds no victim.
    expect_waiting(
        scene.kube,
        "rwop-second",
        "0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod "
        "access mode already in-use by another pod. "
        f"{NO_CLAIMS}preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
    )
    # Once the first pod is gone the second one is scheduled (requeued on the pod's deletion).
    delete_pod(scene.kube, "rwop-first")
    assert wait_for("rwop-second bound", lambda: node_of(scene.kube, "rwop-second"), 30)


# ---------------------------------------------------------------- namespaces and spreading


def test_pod_affinity_selects_namespaces_by_their_labels(scene: Scene, start_berth: Callable[..., Any]) -> None:
    nodes = [scene.node(f"nsaff-{i}") for i in range(3)]
    for ns, team in (("ns-red", "red"), ("ns-blue", "blue")):
        scene.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"team": team}}})
        scene.cp.ensure_namespace(ns)
    # The same app in both namespaces, on different nodes (bound by nodeName).
    scene.create(pod("anchor", namespace="ns-red", labels={"app": "anchor"}, nodeName=nodes[1]))
    scene.create(pod("anchor", namespace="ns-blue", labels={"app": "anchor"}, nodeName=nodes[2]))
    start_berth()
    for team, expected in (("red", nodes[1]), ("blue", nodes[2])):
        affinity = {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "anchor"}},
                        "namespaceSelector": {"matchLabels": {"team": team}},
                        "topologyKey": HOSTNAME,
                    }
                ]
            }
        }
        scene.create(pod(f"near-{team}", affinity=affinity))
        assert wait_for(f"near-{team} bound", lambda t=team: node_of(scene.kube, f"near-{t}"), 30) == expected
    # A label no namespace has: nothing matches anywhere.
    affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["namespaceSelector"] = {
        "matchLabels": {"team": "green"}
    }
    scene.create(pod("near-green", affinity=affinity))
    expect_waiting(
        scene.kube,
        "near-green",
        "0/3 nodes are available: 3 node(s) didn't match pod affinity rules. "
        f"{NO_CLAIMS}preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
    )


def test_a_replica_sets_pods_are_spread_by_default(scene: Scene, start_berth: Callable[..., Any]) -> None:
    """The System default constraints (hostname maxSkew 3, zone maxSkew 5,
    ScheduleAnyway) apply to pods a ReplicaSet selects. The big node wins
    every resource score, so without them all four pods would land there."""
    big, small = scene.node("spread-big", cpu="64", memory="256Gi"), scene.node("spread-small", cpu="4", memory="8Gi")
    start_berth()
    template = pod("x", labels={"app": "spread-rs"})
    scene.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "spread-rs", "namespace": "default"},
            "spec": {
                "replicas": 4,
                "selector": {"matchLabels": {"app": "spread-rs"}},
                "template": {"metadata": {"labels": {"app": "spread-rs"}}, "spec": template["spec"]},
            },
        }
    )

    def placed() -> list[str] | None:
        items = scene.kube.ok("GET", "/api/v1/namespaces/default/pods", labelSelector="app=spread-rs")["items"]
        nodes = [p["spec"].get("nodeName") for p in items]
        return nodes if len(nodes) == 4 and all(nodes) else None

    nodes = wait_for("the ReplicaSet's four pods bound", placed, 60)
    assert {big, small} == set(nodes)
    assert nodes.count(small) >= 1

    # A pod with the same labels but no owner and no selecting object is not spread by default:
    # it goes to the big node even though the big node holds more of them.
    template = pod("lonely", labels={"app": "not-selected"})
    scene.create(template)
    assert wait_for("lonely bound", lambda: node_of(scene.kube, "lonely"), 30) == big
