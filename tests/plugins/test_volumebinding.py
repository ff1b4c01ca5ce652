"""VolumeBinding, ported from kube-scheduler v1.37.2's
pkg/scheduler/framework/plugins/volumebinding: volume_binding_test.go
(TestVolumeBinding: PreFilter, Filter, PreScore and Score, each case with
StorageCapacityScoring as it sets it; Test_PreBindPreFlight), scorer_test.go
(TestScore), apis/config/validation/validation_pluginargs_test.go
(TestValidateVolumeBindingArgs) and binder_test.go's FindPodVolumes /
AssumePodVolumes / RevertAssumedPodVolumes behaviours.

Not ported: the queueing-hint tests (Berth has no queueing hints: the
registered events are checked), the CSI migration translation cases (not
ported, see the binder's docstring) and the deferred-resize skip (alpha).
"""

from __future__ import annotations

import dataclasses

import pytest

from berth import features
from berth.cache.infos import PodInfo
from berth.cluster import model, storage
from berth.framework import interface as fw
from berth.framework import registry
from berth.plugins.noderesources.args import UtilizationShapePoint
from berth.plugins.volumebinding import STATE_KEY, VolumeBinding, VolumeBindingArgs, _State, validate_args
from berth.plugins.volumebinding.binder import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
    PodVolumes,
)
from berth.plugins.volumebinding.scorer import StorageResource, build_scorer
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
    """passive assume cache: a source event of the same resourceVersion (a resync)
    keeps the assumed object, another version replaces it."""
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
    with pytest.raises(ValueError, match=r'^"pv-1" is out of sync \(stored: 8, assume: 7\)$'):
        volumes.assume_pv(assumed)


def test_registered_events_and_default_profile_place() -> None:
    events = {(e.resource, e.action) for e in VolumeBinding().events_to_register()}
    assert ("PersistentVolumeClaim", fw.ActionType.ADD | fw.ActionType.UPDATE) in events
    assert ("CSIStorageCapacity", fw.ActionType.ADD | fw.ActionType.UPDATE) in events
    assert ("Node", fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_LABEL) in events
    names = [n for n, _ in registry.DEFAULT_MULTI_POINT]
    i = names.index("NodeResourcesFit")
    assert names[i + 1 : i + 5] == ["VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone"]
    assert names[i + 5] == "PodTopologySpread"
    assert STATE_KEY.name == "VolumeBinding"


# ---------------------------------------------------------------- scoring

WAIT_HDD_SC = sc("wait-hdd-sc")
NODE_LABEL_KEY = "nodeKey"  # binder_test.go nodeLabelKey
V1_37 = features.KubeVersion(1, 37)
V1_36 = features.KubeVersion(1, 36)
V1_35 = features.KubeVersion(1, 35)


def node_with_key(name: str) -> model.Node:
    return node(name, **{NODE_LABEL_KEY: name})


def node_capacity(name: str, cls: str, size: str) -> storage.CSIStorageCapacity:
    """binder_test.go makeCapacity for ``node``: topology nodeKey=NAME."""
    return capacity(name, cls, size, {NODE_LABEL_KEY: name})


def local_pvs(*spec: tuple[str, str, str]) -> list[storage.PersistentVolume]:
    """PVs (name, class, size) Available on the node their name names (pv-a-0 on node-a)."""
    return [
        pv(name, cls, phase="Available", capacity=size, affinity={HOSTNAME: [f"node-{name.split('-')[1]}"]})
        for name, cls, size in spec
    ]


def zonal_pvs(*spec: tuple[str, str]) -> list[storage.PersistentVolume]:
    """PVs (zone, size), two each, Available in the zone's region and zone."""
    return [
        pv(
            f"pv-{z}-{i}",
            "wait-sc",
            phase="Available",
            capacity=size,
            affinity={"topology.kubernetes.io/region": [f"region-{z}"], "topology.kubernetes.io/zone": [f"zone-{z}"]},
        )
        for z, size in spec
        for i in range(2)
    ]


ZONAL_NODES = [
    node(
        f"zone-{z}-node-{n}",
        **{"topology.kubernetes.io/region": f"region-{z}", "topology.kubernetes.io/zone": f"zone-{z}"},
    )
    for z in ("a", "b", "c")
    for n in ("a", "b")
]


def shape(*points: tuple[int, int]) -> list[UtilizationShapePoint]:
    return [UtilizationShapePoint(utilization=u, score=s) for u, s in points]


KEYED_NODES = [node_with_key(f"node-{n}") for n in ("a", "b", "c")]
LOCAL_NODES = [node(f"node-{n}") for n in ("a", "b", "c")]
CAPACITY_CLASS = "wait-sc-with-storage-capacity"
DYNAMIC_10GI = pvc("pvc-dynamic", CAPACITY_CLASS, request="10Gi")
LOCAL_OBJECTS = [
    pvc("pvc-a", "wait-sc", request="50Gi"),
    *local_pvs(*((f"pv-{n}-{i}", "wait-sc", size) for n, size in (("a", "200Gi"), ("b", "100Gi")) for i in (0, 1))),
]
LOCAL_FILTER = [None, None, unresolvable(ERR_REASON_BIND_CONFLICT)]
ZONAL_OBJECTS = [pvc("pvc-a", "wait-sc", request="50Gi"), *zonal_pvs(("a", "200Gi"), ("b", "100Gi"))]
ZONAL_FILTER = [None] * 4 + [unresolvable(ERR_REASON_BIND_CONFLICT)] * 2


def capacities(*sizes: str) -> list[storage.CSIStorageCapacity]:
    """The capacity class's free space on node-a, node-b, ... in turn."""
    return [node_capacity(f"node-{n}", CAPACITY_CLASS, size) for n, size in zip("abc", sizes, strict=False)]


SCORE_CASES = [
    # (Go case name, release (its StorageCapacityScoring), args' shape, pod, nodes, objects,
    #  Filter status per node, scores per node (None: PreScore skips))
    (
        "local volumes with close capacity are preferred",
        V1_37,
        None,
        pod_with("pvc-a"),
        LOCAL_NODES,
        LOCAL_OBJECTS,
        LOCAL_FILTER,
        [75, 50, 0],
    ),
    (
        "local volumes with close capacity are preferred (StorageCapacityScoring disabled)",
        V1_36,
        None,
        pod_with("pvc-a"),
        LOCAL_NODES,
        LOCAL_OBJECTS,
        LOCAL_FILTER,
        None,
    ),
    (
        "local volumes with close capacity are preferred (multiple pvcs)",
        V1_37,
        None,
        pod_with("pvc-0", "pvc-1"),
        LOCAL_NODES,
        [
            pvc("pvc-0", "wait-sc", request="50Gi"),
            pvc("pvc-1", "wait-hdd-sc", request="100Gi"),
            *local_pvs(
                *(
                    (f"pv-{n}-{i}", cls, size)
                    for n, size in (("a", "200Gi"), ("b", "100Gi"))
                    for i, cls in enumerate(("wait-sc", "wait-sc", "wait-hdd-sc", "wait-hdd-sc"))
                )
            ),
        ],
        LOCAL_FILTER,
        [63, 25, 0],
    ),
    (
        "zonal volumes with close capacity are preferred",
        V1_37,
        None,
        pod_with("pvc-a"),
        ZONAL_NODES,
        ZONAL_OBJECTS,
        ZONAL_FILTER,
        [75, 75, 50, 50, 0, 0],
    ),
    (
        "zonal volumes with close capacity are preferred (StorageCapacityScoring disabled)",
        V1_36,
        None,
        pod_with("pvc-a"),
        ZONAL_NODES,
        ZONAL_OBJECTS,
        ZONAL_FILTER,
        None,
    ),
    (
        "zonal volumes with close capacity are preferred (custom shape)",
        V1_37,
        shape((0, 0), (50, 3), (100, 5)),
        pod_with("pvc-a"),
        ZONAL_NODES,
        ZONAL_OBJECTS,
        ZONAL_FILTER,
        [15, 15, 30, 30, 0, 0],
    ),
    (
        "storage capacity score",
        V1_37,
        None,
        pod_with("pvc-dynamic"),
        KEYED_NODES,
        [DYNAMIC_10GI, *capacities("100Gi", "50Gi", "10Gi")],
        [None, None, None],
        [90, 80, 0],
    ),
    (
        "storage capacity score with static binds",
        V1_37,
        None,
        pod_with("pvc-dynamic", "pvc-static"),
        KEYED_NODES,
        [
            DYNAMIC_10GI,
            pvc("pvc-static", "wait-sc", request="50Gi"),
            *local_pvs(*((f"pv-{n}-static", "wait-sc", "100Gi") for n in ("a", "b", "c"))),
            *capacities("100Gi", "50Gi", "10Gi"),
        ],
        [None, None, None],
        [50, 50, 50],
    ),
    (
        "dynamic provisioning with multiple PVCs of the same StorageClass",
        V1_37,
        None,
        pod_with("pvc-dynamic-0", "pvc-dynamic-1"),
        [node_with_key("node-a")],
        [
            pvc("pvc-dynamic-0", CAPACITY_CLASS, request="50Gi"),
            pvc("pvc-dynamic-1", CAPACITY_CLASS, request="50Gi"),
            *capacities("100Gi"),
        ],
        [None],
        [0],
    ),
    (
        "prefer node with least allocatable",
        V1_37,
        shape((0, 0), (100, 10)),
        pod_with("pvc-dynamic"),
        KEYED_NODES,
        [DYNAMIC_10GI, *capacities("100Gi", "20Gi", "10Gi")],
        [None, None, None],
        [10, 50, 100],
    ),
    (
        "prefer node with maximum allocatable",
        V1_37,
        shape((0, 10), (100, 0)),
        pod_with("pvc-dynamic"),
        KEYED_NODES,
        [DYNAMIC_10GI, *capacities("100Gi", "20Gi", "10Gi")],
        [None, None, None],
        [90, 50, 0],
    ),
    # "pod has not pvcs" (StorageCapacityScoring off): PreScore skips.
    ("pod has not pvcs", V1_36, None, make_pod("pod-a"), [node("node-a")], [], [None], None),
]


def _plugin(cluster: Cluster, version: features.KubeVersion, args: VolumeBindingArgs | None = None) -> VolumeBinding:
    handle = dataclasses.replace(cluster.handle(), features=features.Features.of(version))
    return VolumeBinding(args, handle)


def _score(
    plugin: VolumeBinding, pod: model.Pod, cluster: Cluster, state: fw.CycleState | None = None
) -> tuple[list[fw.Status | None], list[int] | None]:
    """PreFilter, then Filter (unless PreFilter skips it), PreScore and Score
    over every node, as the Go test runs them."""
    state = state or fw.CycleState()
    pi, snap = PodInfo.of(pod), cluster.snapshot
    pre = plugin.pre_filter(state, pi, snap).status
    assert pre.code in (fw.Code.SUCCESS, fw.Code.SKIP)
    rows = snap.alive_rows()
    statuses: list[fw.Status | None] = [None] * len(rows)
    if pre.ok:
        verdicts = plugin.filter(state, pi, snap, rows)
        statuses = [None if verdicts.ok[k] else verdicts.status_at(k) for k in range(len(rows))]
    st = plugin.pre_score(state, pi, snap, rows)
    if st.code == fw.Code.SKIP:
        return statuses, None
    assert st.ok, st
    return statuses, plugin.score(state, pi, snap, rows).tolist()


@pytest.mark.parametrize(
    ("version", "points", "pod", "nodes", "objects", "want_filter", "want_scores"),
    [c[1:] for c in SCORE_CASES],
    ids=[c[0] for c in SCORE_CASES],
)
def test_volume_binding_scores(
    version: features.KubeVersion,
    points: list[UtilizationShapePoint] | None,
    pod: model.Pod,
    nodes: list[model.Node],
    objects: list[object],
    want_filter: list[fw.Status | None],
    want_scores: list[int] | None,
) -> None:
    cluster = Cluster(nodes)
    feed(cluster, IMMEDIATE_SC, WAIT_SC, WAIT_HDD_SC, WAIT_SC_CAPACITY, DRIVER_WITH_CAPACITY, *objects)
    plugin = _plugin(cluster, version, VolumeBindingArgs(bind_timeout_seconds=300, shape=points))
    assert _score(plugin, pod, cluster) == (want_filter, want_scores)


def test_with_scoring_on_a_pod_without_claims_scores_zero_everywhere() -> None:
    """PreScore goes on whenever there is a scorer (the gate on), so every pod
    gets VolumeBinding's 0 on every node, as kube-scheduler 1.37 reports it."""
    cluster = Cluster([node("node-a"), node("node-b")])
    assert _score(_plugin(cluster, V1_37), make_pod("plain"), cluster) == ([None, None], [0, 0])


def test_prescore_without_prefilter_state_is_an_error() -> None:
    cluster = Cluster([node("node-a")])
    snap = cluster.snapshot
    st = _plugin(cluster, V1_37).pre_score(fw.CycleState(), PodInfo.of(pod_with("c")), snap, snap.alive_rows())
    assert st == fw.Status.error('reading "VolumeBinding" from cycleState: not found', plugin=NAME)


# scorer_test.go TestScore: (case, shape as configured, [(class resources, score)]).
_HDD, _SSD = "hdd", "ssd"
SCORER_CASES = [
    (
        "default shape, single class",
        shape((0, 10), (100, 0)),
        [({_HDD: (0, 100)}, 100), ({_HDD: (30, 100)}, 70), ({_HDD: (50, 100)}, 50), ({_HDD: (100, 100)}, 0)],
    ),
    (
        "default shape, multiple classes",
        shape((0, 10), (100, 0)),
        [
            ({_HDD: (0, 100), _SSD: (0, 100)}, 100),
            ({_HDD: (0, 100), _SSD: (30, 100)}, 85),
            ({_HDD: (30, 100), _SSD: (30, 100)}, 70),
            ({_HDD: (30, 100), _SSD: (60, 100)}, 55),
            ({_HDD: (50, 100), _SSD: (50, 100)}, 50),
            ({_HDD: (50, 100), _SSD: (100, 100)}, 25),
            ({_HDD: (100, 100), _SSD: (100, 100)}, 0),
        ],
    ),
    (
        # Upstream's shape is already on the node-score scale: 0, 30, 50.
        "custom shape, multiple classes",
        shape((50, 0), (80, 3), (100, 5)),
        [
            ({_HDD: (0, 100), _SSD: (0, 100)}, 0),
            ({_HDD: (0, 100), _SSD: (30, 100)}, 0),
            ({_HDD: (30, 100), _SSD: (30, 100)}, 0),
            ({_HDD: (30, 100), _SSD: (60, 100)}, 5),
            ({_HDD: (50, 100), _SSD: (100, 100)}, 25),
            ({_HDD: (90, 100), _SSD: (90, 100)}, 40),
            ({_HDD: (100, 100), _SSD: (100, 100)}, 50),
        ],
    ),
]


@pytest.mark.parametrize(("points", "cases"), [c[1:] for c in SCORER_CASES], ids=[c[0] for c in SCORER_CASES])
def test_scorer(points: list[UtilizationShapePoint], cases: list[tuple[dict[str, tuple[int, int]], int]]) -> None:
    f = build_scorer(points)
    for classes, want in cases:
        assert f({c: StorageResource(requested=r, capacity=cap) for c, (r, cap) in classes.items()}) == want, classes


def test_scorer_counts_an_overfull_or_capacityless_class_as_full_and_no_class_as_zero() -> None:
    f = build_scorer(shape((0, 10), (100, 0)))
    assert f({}) == 0
    assert f({_HDD: StorageResource(requested=1, capacity=0)}) == 0
    assert f({_HDD: StorageResource(requested=101, capacity=100), _SSD: StorageResource(requested=0, capacity=1)}) == 50


# ---------------------------------------------------------------- arguments

_RANGES = [
    "shape[0].utilization: Invalid value: -1: not in valid range [0, 100]",
    "shape[1].score: Invalid value: -1: not in valid range [0, 10]",
    "shape[2].score: Invalid value: 11: not in valid range [0, 10]",
    "shape[3].utilization: Invalid value: 101: not in valid range [0, 100]",
]
NEGATIVE = "bindTimeoutSeconds: Invalid value: -10: invalid BindTimeoutSeconds, should not be a negative value"

# validation_pluginargs_test.go TestValidateVolumeBindingArgs: (case, gate, args, error (None: valid)).
ARGS_CASES = [
    ("[StorageCapacityScoring=off] zero is a valid config", False, VolumeBindingArgs(bind_timeout_seconds=0), None),
    (
        "[StorageCapacityScoring=on] zero is a valid config",
        True,
        VolumeBindingArgs(bind_timeout_seconds=0, shape=shape((0, 0), (100, 10))),
        None,
    ),
    (
        "[StorageCapacityScoring=off] positive value is valid config",
        False,
        VolumeBindingArgs(bind_timeout_seconds=10),
        None,
    ),
    (
        "[StorageCapacityScoring=on] positive value is valid config",
        True,
        VolumeBindingArgs(bind_timeout_seconds=10, shape=shape((0, 0), (100, 10))),
        None,
    ),
    (
        "[StorageCapacityScoring=off] negative value is invalid config",
        False,
        VolumeBindingArgs(bind_timeout_seconds=-10),
        NEGATIVE,
    ),
    (
        "[StorageCapacityScoring=on] negative value is invalid config",
        True,
        VolumeBindingArgs(bind_timeout_seconds=-10, shape=shape((0, 0), (100, 10))),
        NEGATIVE,
    ),
    ("[StorageCapacityScoring=off] shape should be nil when the feature is off", False, VolumeBindingArgs(), None),
    (
        "[StorageCapacityScoring=off] error if the shape is not nil when the feature is off",
        False,
        VolumeBindingArgs(bind_timeout_seconds=10, shape=shape((1, 1), (3, 3))),
        'shape: Invalid value: [{"Utilization":1,"Score":1},{"Utilization":3,"Score":3}]: unexpected field `shape`, '
        "remove it or turn on the feature gate StorageCapacityScoring",
    ),
    (
        "[StorageCapacityScoring=on] shape should not be empty",
        True,
        VolumeBindingArgs(bind_timeout_seconds=10, shape=[]),
        "shape: Required value: at least one point must be specified",
    ),
    (
        "[StorageCapacityScoring=on] shape points must be sorted in increasing order",
        True,
        VolumeBindingArgs(bind_timeout_seconds=10, shape=shape((3, 3), (1, 1))),
        "shape[1].utilization: Invalid value: 1: values must be sorted in increasing order",
    ),
    (
        "[StorageCapacityScoring=on] shape point: invalid utilization and score",
        True,
        VolumeBindingArgs(bind_timeout_seconds=10, shape=shape((-1, 1), (10, -1), (20, 11), (101, 1))),
        "[" + ", ".join(_RANGES) + "]",
    ),
]


@pytest.mark.parametrize(("gate", "args", "want"), [c[1:] for c in ARGS_CASES], ids=[c[0] for c in ARGS_CASES])
def test_validate_volume_binding_args(gate: bool, args: VolumeBindingArgs, want: str | None) -> None:
    if want is None:
        validate_args(args, allow_storage_capacity_scoring=gate)
        return
    with pytest.raises(ValueError) as e:
        validate_args(args, allow_storage_capacity_scoring=gate)
    assert str(e.value) == want


@pytest.mark.parametrize(
    ("version", "raw", "want"),
    [
        # defaults.go: with the gate on, no shape or an empty one becomes the default (then valid).
        (V1_37, {}, None),
        (V1_37, {"shape": []}, None),
        (V1_37, {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}, None),
        (V1_36, {}, None),
        (V1_36, {"shape": []}, r"args: shape: Invalid value: \[\]: unexpected field `shape`"),
        (V1_35, {"shape": [{"utilization": 0, "score": 0}]}, "turn on the feature gate StorageCapacityScoring"),
        (V1_37, {"shape": [{"utilization": 0, "score": 11}]}, r"args: shape\[0\].score: Invalid value: 11"),
    ],
)
def test_profile_args_are_defaulted_and_validated_for_the_release(
    version: features.KubeVersion, raw: dict[str, object], want: str | None
) -> None:
    feats = features.Features.of(version)
    if want is None:
        registry._decode_args(VolumeBinding, raw, "args", feats)
    else:
        with pytest.raises(registry.RegistryError, match=want):
            registry._decode_args(VolumeBinding, raw, "args", feats)


@pytest.mark.parametrize(("version", "scores"), [(V1_37, [90, 80, 0]), (V1_36, None), (V1_35, None)])
def test_the_default_shape_scores_per_release(version: features.KubeVersion, scores: list[int] | None) -> None:
    """StorageCapacityScoring is beta and on in 1.37 (default shape: emptier is better), alpha and off before."""
    cluster = Cluster(KEYED_NODES)
    feed(cluster, WAIT_SC_CAPACITY, DRIVER_WITH_CAPACITY, DYNAMIC_10GI, *capacities("100Gi", "50Gi", "10Gi"))
    assert _score(_plugin(cluster, version), pod_with("pvc-dynamic"), cluster) == ([None, None, None], scores)


# ---------------------------------------------------------------- PreBindPreFlight


def _state(*, all_bound: bool = False, nodes: tuple[str, ...] = ()) -> fw.CycleState:
    state = fw.CycleState()
    state.write(STATE_KEY, _State(by_node={n: PodVolumes() for n in nodes}, all_bound=all_bound))
    return state


# volume_binding_test.go Test_PreBindPreFlight: (case, cycle state, want).
PRE_FLIGHT_CASES = [
    ("all bound", _state(all_bound=True), fw.Status.skip()),
    ("volume to be bound", _state(nodes=("node-a",)), fw.SUCCESS),
    (
        "error: state is nil",
        fw.CycleState(),
        fw.Status.error('reading "VolumeBinding" from cycleState: not found', plugin=NAME),
    ),
    (
        "error: node is not found in podVolumesByNode",
        _state(nodes=("node-b",)),
        fw.Status.error('no pod volume found for node "node-a"', plugin=NAME),
    ),
]


@pytest.mark.parametrize(("state", "want"), [c[1:] for c in PRE_FLIGHT_CASES], ids=[c[0] for c in PRE_FLIGHT_CASES])
def test_pre_bind_pre_flight(state: fw.CycleState, want: fw.Status) -> None:
    assert VolumeBinding().pre_bind_pre_flight(state, PodInfo.of(make_pod("p")), "node-a") == want


def test_a_pod_without_claims_has_no_pre_bind_work_after_reserve() -> None:
    """Reserve marks a pod without claims all bound, so PreBindPreFlight skips it."""
    cluster = Cluster([node("node-a")])
    plugin = _plugin(cluster, V1_37)
    state = fw.CycleState()
    pod = make_pod("plain")
    run_filter(plugin, pod, cluster.snapshot, state)
    assert plugin.reserve(state, PodInfo.of(pod), "node-a").ok
    assert plugin.pre_bind_pre_flight(state, PodInfo.of(pod), "node-a").code == fw.Code.SKIP
