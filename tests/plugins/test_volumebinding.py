"""VolumeBinding, ported from kube-scheduler v1.34.4's
pkg/scheduler/framework/plugins/volumebinding/volume_binding_test.go
(TestVolumeBinding: PreFilter and Filter; with StorageCapacityScoring off,
as it is by default in v1.34, so no scores) and binder_test.go's
FindPodVolumes / AssumePodVolumes / RevertAssumedPodVolumes behaviours.

Not ported: the score cases (the gate is alpha and off), the queueing-hint
tests (Berth has no queueing hints: the registered events are checked), and
the CSI migration translation cases (not ported, see the plugin's docstring).
"""

from __future__ import annotations

import pytest

from berth.cache.infos import PodInfo
from berth.cluster import model, storage
from berth.framework import interface as fw
from berth.framework import registry
from berth.plugins.volumebinding import STATE_KEY, VolumeBinding, VolumeBindingArgs
from berth.plugins.volumebinding.binder import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
)
from berth.testing import Cluster, make_pod, run_filter
from tests.plugins.volume_support import HOSTNAME, claim_volume, feed, node, pv, pvc, sc, with_volumes

IMMEDIATE_SC = sc("immediate-sc", "Immediate")
WAIT_SC = sc("wait-sc")
WAIT_SC_CAPACITY = sc("wait-sc-with-storage-capacity", provisioner="driver-with-storage-capacity")
DRIVER_WITH_CAPACITY = storage.CSIDriver(
    metadata=model.ObjectMeta(name="driver-with-storage-capacity"),
    spec=storage.CSIDriverSpec(storage_capacity=True),
)

NAME = "VolumeBinding"


def unresolvable(*reasons: str) -> fw.Status:
    return fw.Status(fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, NAME)


def pod_with(*claims: str) -> model.Pod:
    return with_volumes(make_pod("pod-a"), *(claim_volume(c) for c in claims))


def capacity(name: str, cls: str, size: str, topology: dict[str, str] | None = None) -> storage.CSIStorageCapacity:
    return storage.CSIStorageCapacity(
        metadata=model.ObjectMeta(name=name, namespace="default"),
        storage_class_name=cls,
        capacity=size,
        node_topology=model.LabelSelector(match_labels=topology or {}),
    )


SKIP = "skip"

CASES = [
    # (Go case name, pod, nodes, objects, PreFilter status (None: success, SKIP), Filter status per node)
    ("pod has not pvcs", make_pod("pod-a"), [node("node-a")], [], SKIP, [None]),
    (
        "all bound",
        pod_with("pvc-a"),
        [node("node-a")],
        [pvc("pvc-a", "wait-sc", bound_to="pv-a"), pv("pv-a", "wait-sc", phase="Available")],
        None,
        [None],
    ),
    (
        "PVC does not exist",
        pod_with("pvc-a"),
        [node("node-a")],
        [],
        unresolvable('persistentvolumeclaim "pvc-a" not found'),
        [],
    ),
    (
        "Part of PVCs do not exist",
        pod_with("pvc-a", "pvc-b"),
        [node("node-a")],
        [pvc("pvc-a", "wait-sc", bound_to="pv-a")],
        unresolvable('persistentvolumeclaim "pvc-b" not found'),
        [],
    ),
    (
        "immediate claims not bound",
        pod_with("pvc-a"),
        [node("node-a")],
        [pvc("pvc-a", "immediate-sc")],
        unresolvable("pod has unbound immediate PersistentVolumeClaims"),
        [],
    ),
    (
        "unbound claims no matches",
        pod_with("pvc-a"),
        [node("node-a")],
        [pvc("pvc-a", "wait-sc")],
        None,
        [unresolvable(ERR_REASON_BIND_CONFLICT)],
    ),
    (
        "bound and unbound unsatisfied",
        pod_with("pvc-a", "pvc-b"),
        [node("node-a", foo="barbar")],
        [
            pvc("pvc-a", "wait-sc", bound_to="pv-a"),
            pvc("pvc-b", "wait-sc"),
            pv("pv-a", "wait-sc", phase="Available", affinity={"foo": ["bar"]}),
        ],
        None,
        [unresolvable(ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT)],
    ),
    (
        "pv not found",
        pod_with("pvc-a"),
        [node("node-a")],
        [pvc("pvc-a", "wait-sc", bound_to="pv-a")],
        None,
        [unresolvable(ERR_REASON_PV_NOT_EXIST)],
    ),
    (
        "pv not found claim lost",
        pod_with("pvc-a"),
        [node("node-a")],
        [pvc("pvc-a", "wait-sc", bound_to="pv-a", phase="Lost")],
        unresolvable('persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"'),
        [],
    ),
    (
        "local volumes with close capacity are preferred",
        pod_with("pvc-a"),
        [node("node-a"), node("node-b"), node("node-c")],
        [
            pvc("pvc-a", "wait-sc", request="50Gi"),
            *(
                pv(f"pv-{n}-{i}", "wait-sc", phase="Available", capacity=size, affinity={HOSTNAME: [f"node-{n}"]})
                for n, size in (("a", "200Gi"), ("b", "100Gi"))
                for i in range(2)
            ),
        ],
        None,
        [None, None, unresolvable(ERR_REASON_BIND_CONFLICT)],
    ),
    (
        "zonal volumes with close capacity are preferred",
        pod_with("pvc-a"),
        [
            node(
                f"zone-{z}-node-{n}",
                **{"topology.kubernetes.io/region": f"region-{r}", "topology.kubernetes.io/zone": f"zone-{z}"},
            )
            for r, z in (("a", "a"), ("b", "b"), ("c", "c"))
            for n in ("a", "b")
        ],
        [
            pvc("pvc-a", "wait-sc", request="50Gi"),
            *(
                pv(
                    f"pv-{z}-{i}",
                    "wait-sc",
                    phase="Available",
                    capacity=size,
                    affinity={"topology.kubernetes.io/zone": [f"zone-{z}"]},
                )
                for z, size in (("a", "200Gi"), ("b", "100Gi"))
                for i in range(2)
            ),
        ],
        None,
        [None, None, None, None, unresolvable(ERR_REASON_BIND_CONFLICT), unresolvable(ERR_REASON_BIND_CONFLICT)],
    ),
    (
        "dynamic provisioning with multiple PVCs of the same StorageClass",
        pod_with("pvc-0", "pvc-1"),
        [node("node-a")],
        [
            pvc("pvc-0", "wait-sc-with-storage-capacity", request="50Gi"),
            pvc("pvc-1", "wait-sc-with-storage-capacity", request="100Gi"),
            capacity("node-a", "wait-sc-with-storage-capacity", "100Gi", {HOSTNAME: "node-a"}),
        ],
        None,
        [None],
    ),
    (
        # hasEnoughCapacity: no CSIStorageCapacity on the node is large enough.
        "dynamic provisioning with insufficient storage capacity",
        pod_with("pvc-0"),
        [node("node-a"), node("node-b")],
        [
            pvc("pvc-0", "wait-sc-with-storage-capacity", request="100Gi"),
            capacity("node-a", "wait-sc-with-storage-capacity", "50Gi", {HOSTNAME: "node-a"}),
            capacity("node-b", "wait-sc-with-storage-capacity", "200Gi", {HOSTNAME: "node-b"}),
        ],
        None,
        [unresolvable(ERR_REASON_NOT_ENOUGH_SPACE), None],
    ),
]


@pytest.mark.parametrize(
    ("pod", "nodes", "objects", "want_pre", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_volume_binding(
    pod: model.Pod,
    nodes: list[model.Node],
    objects: list[object],
    want_pre: fw.Status | str | None,
    want: list[fw.Status | None],
) -> None:
    cluster = Cluster(nodes)
    feed(cluster, IMMEDIATE_SC, WAIT_SC, WAIT_SC_CAPACITY, DRIVER_WITH_CAPACITY, *objects)
    plugin = VolumeBinding(None, cluster.handle())
    snap = cluster.snapshot
    state = fw.CycleState()
    res = plugin.pre_filter(state, PodInfo.of(pod), snap)
    if want_pre == SKIP:
        assert res.status.code == fw.Code.SKIP
        return
    if want_pre is not None:
        assert res.status == want_pre
        return
    assert res.status.ok, res.status
    rows = snap.alive_rows()
    verdicts = plugin.filter(state, PodInfo.of(pod), snap, rows)
    got = [None if verdicts.ok[k] else verdicts.status_at(k) for k in range(len(rows))]
    assert got == want


def test_a_pod_without_volumes_is_skipped_without_looking_up_anything() -> None:
    plugin = VolumeBinding(None, None)
    state = fw.CycleState()
    res = plugin.pre_filter(state, PodInfo.of(make_pod("plain")), Cluster([node("n")]).snapshot)
    assert res.status.code == fw.Code.SKIP


def test_an_ephemeral_volume_waits_for_its_claim_and_must_be_owned_by_the_pod() -> None:
    pod = with_volumes(make_pod("pod-a", uid="pod-uid"), {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}})
    cluster = Cluster([node("node-a")])
    feed(cluster, WAIT_SC)
    [st] = run_filter(VolumeBinding(None, cluster.handle()), pod, cluster.snapshot)
    assert st == unresolvable(
        'waiting for ephemeral volume controller to create the persistentvolumeclaim "pod-a-scratch"'
    )
    feed(cluster, pvc("pod-a-scratch", "wait-sc", bound_to="pv-x"), pv("pv-x", "wait-sc"))
    [st] = run_filter(VolumeBinding(None, cluster.handle()), pod, cluster.snapshot)
    assert st == unresolvable("PVC default/pod-a-scratch was not created for pod default/pod-a (pod is not owner)")
    feed(cluster, pvc("pod-a-scratch", "wait-sc", bound_to="pv-x", owner_uid="pod-uid"))
    [st] = run_filter(VolumeBinding(None, cluster.handle()), pod, cluster.snapshot)
    assert st.ok


def test_a_claim_provisioned_for_another_node_fits_only_there() -> None:
    """FindPodVolumes' fast path: selected-node already set."""
    cluster = Cluster([node("node-a"), node("node-b")])
    feed(
        cluster,
        sc("fast", provisioner="csi.example.com"),
        pvc("c", "fast", annotations={storage.ANN_SELECTED_NODE: "node-b"}),
    )
    statuses = run_filter(VolumeBinding(None, cluster.handle()), pod_with("c"), cluster.snapshot)
    assert statuses == [unresolvable(ERR_REASON_BIND_CONFLICT), fw.Status()]


def test_allowed_topologies_of_the_class_limit_provisioning() -> None:
    cluster = Cluster([node("node-a", zone="z1"), node("node-b", zone="z2")])
    topo = [{"matchLabelExpressions": [{"key": "zone", "values": ["z2"]}]}]
    feed(cluster, sc("fast", provisioner="csi.example.com", allowedTopologies=topo), pvc("c", "fast"))
    statuses = run_filter(VolumeBinding(None, cluster.handle()), pod_with("c"), cluster.snapshot)
    assert statuses == [unresolvable(ERR_REASON_BIND_CONFLICT), fw.Status()]


def test_a_claim_of_an_unknown_class_cannot_be_provisioned() -> None:
    """checkVolumeProvisions: ``failed to find storage class`` is an error, not a rejection."""
    cluster = Cluster([node("node-a")])
    feed(cluster, WAIT_SC, pvc("c", "wait-sc"))
    state = fw.CycleState()
    plugin = VolumeBinding(None, cluster.handle())
    pi = PodInfo.of(pod_with("c"))
    assert plugin.pre_filter(state, pi, cluster.snapshot).status.ok
    # The class goes away between PreFilter and Filter.
    cluster.berth.core.on_storage_class_delete("wait-sc")
    snap = cluster.snapshot
    verdicts = plugin.filter(state, pi, snap, snap.alive_rows())
    assert verdicts.status_at(0) == fw.Status.error('failed to find storage class "wait-sc"', plugin=NAME)


def test_reserve_assumes_the_binding_and_unreserve_reverts_it() -> None:
    cluster = Cluster([node("node-a")])
    feed(
        cluster,
        WAIT_SC,
        pvc("c", "wait-sc", request="1Gi", modes=("ReadWriteOnce",), version="5"),
        pv("pv-1", "wait-sc", phase="Available", capacity="2Gi", version="7", accessModes=["ReadWriteOnce"]),
        sc("fast", provisioner="csi.example.com"),
        pvc("d", "fast", version="6"),
    )
    handle = cluster.handle()
    volumes = handle.volumes
    assert volumes is not None
    plugin = VolumeBinding(None, handle)
    pod = pod_with("c", "d")
    state = fw.CycleState()
    statuses = run_filter(plugin, pod, cluster.snapshot, state)
    assert statuses == [fw.Status()]
    assert plugin.reserve(state, PodInfo.of(pod), "node-a").ok
    assumed = volumes.pv("pv-1")
    assert assumed is not None and assumed.spec.claim_ref is not None
    assert (assumed.spec.claim_ref.namespace, assumed.spec.claim_ref.name) == ("default", "c")
    assert assumed.metadata.annotations[storage.ANN_BOUND_BY_CONTROLLER] == "yes"
    claim = volumes.pvc("default", "d")
    assert claim is not None and claim.metadata.annotations[storage.ANN_SELECTED_NODE] == "node-a"
    # Another pod now sees pv-1 as taken.
    other = pvc("e", "wait-sc", request="1Gi", modes=("ReadWriteOnce",))
    feed(cluster, other)
    [st] = run_filter(VolumeBinding(None, handle), pod_with("e"), cluster.snapshot)
    assert st == unresolvable(ERR_REASON_BIND_CONFLICT)
    plugin.unreserve(state, PodInfo.of(pod), "node-a")
    assert volumes.pv("pv-1") == volumes.api_pv("pv-1")
    assert volumes.pvc("default", "d") == volumes.api_pvc("default", "d")
    plugin.unreserve(state, PodInfo.of(pod), "node-a")  # idempotent


def test_a_newer_source_object_replaces_the_assumed_one() -> None:
    """assumecache: an informer event with a newer resourceVersion wins; an older one does not."""
    cluster = Cluster([node("node-a")])
    feed(cluster, pv("pv-1", "wait-sc", phase="Available", version="7"))
    volumes = cluster.handle().volumes
    assert volumes is not None
    assumed = pv("pv-1", "wait-sc", phase="Available", version="7", claim=("default", "c"))
    volumes.assume_pv(assumed)
    feed(cluster, pv("pv-1", "wait-sc", phase="Available", version="7"))  # a resync: same version
    assert volumes.pv("pv-1") == assumed
    feed(cluster, pv("pv-1", "wait-sc", phase="Bound", version="8"))
    current = volumes.pv("pv-1")
    assert current is not None and current.status.phase == "Bound"
    with pytest.raises(ValueError, match=r'v1.PersistentVolume "pv-1" is out of sync \(stored: 8, assume: 7\)'):
        volumes.assume_pv(assumed)


def test_args_are_validated_as_upstream() -> None:
    VolumeBindingArgs(bind_timeout_seconds=0).validate()
    with pytest.raises(ValueError, match="invalid BindTimeoutSeconds, should not be a negative value"):
        VolumeBindingArgs(bind_timeout_seconds=-1).validate()
    with pytest.raises(ValueError, match="turn on the feature gate StorageCapacityScoring"):
        registry._decode_args(VolumeBinding, {"shape": [{"utilization": 0, "score": 0}]}, "args")


def test_registered_events_and_default_profile_place() -> None:
    events = {(e.resource, e.action) for e in VolumeBinding().events_to_register()}
    assert ("PersistentVolumeClaim", fw.ActionType.ADD | fw.ActionType.UPDATE) in events
    assert ("CSIStorageCapacity", fw.ActionType.ADD | fw.ActionType.UPDATE) in events
    names = [n for n, _ in registry.DEFAULT_MULTI_POINT]
    i = names.index("NodeResourcesFit")
    assert names[i + 1 : i + 5] == ["VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone"]
    assert names[i + 5] == "PodTopologySpread"
    assert STATE_KEY.name == "VolumeBinding"
