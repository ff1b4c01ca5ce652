"""VolumeZone, ported from kube-scheduler v1.37.2's
pkg/scheduler/framework/plugins/volumezone/volume_zone_test.go (TestSingleZone
and TestWithBinding's error cases; their tables are v1.34.4's). Not ported:
the queueing-hint tests (Berth has no queueing hints) and
TestVolumeZone_DeferredResizeSkipped (the alpha
InPlacePodVerticalScalingSchedulerPreemption is not ported)."""

from __future__ import annotations

import pytest

from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.framework import interface as fw
from berth.plugins.volumezone import ERR_REASON_CONFLICT, VolumeZone
from berth.testing import Cluster, make_node, make_pod, run_filter
from tests.plugins.volume_support import claim_volume, feed, pv, pvc, sc, with_volumes

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"

PVS = [
    pv("Vol_1", labels={BETA_ZONE: "us-west1-a"}),
    pv("Vol_2", labels={BETA_REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_3", labels={BETA_REGION: "us-west1"}),
    pv("Vol_Stable_1", labels={ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", labels={REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_Stable_3", labels={ZONE: "us-west1-a", REGION: "us-west1-a"}),
    pv("Vol_multi", labels={ZONE: "us-west1-a__us-west1-b"}),
]
PVCS = [
    pvc("PVC_1", None, bound_to="Vol_1"),
    pvc("PVC_2", None, bound_to="Vol_2"),
    pvc("PVC_3", None, bound_to="Vol_3"),
    pvc("PVC_4", None, bound_to="Vol_not_exist"),
    pvc("PVC_Stable_1", None, bound_to="Vol_Stable_1"),
    pvc("PVC_Stable_2", None, bound_to="Vol_Stable_2"),
    pvc("PVC_Stable_3", None, bound_to="Vol_Stable_3"),
    pvc("PVC_multi", None, bound_to="Vol_multi"),
    pvc("PVC_EmptySC", ""),
    pvc("PVC_NoSC", "Class_0"),
    pvc("PVC_NoSC_default", None),
    pvc("PVC_Immediate", "Class_Immediate"),
    pvc("PVC_Wait", "Class_Wait"),
]
CLASSES = [sc("Class_Immediate", "Immediate"), sc("Class_Wait", "WaitForFirstConsumer")]

CONFLICT = fw.Status(fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_CONFLICT,), "VolumeZone")


def unresolvable(msg: str) -> fw.Status:
    return fw.Status(fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (msg,), "VolumeZone")


def pod(claim: str | None) -> model.Pod:
    p = make_pod("pod_1")
    return with_volumes(p, claim_volume(claim)) if claim else p


CASES = [
    # (Go case, claim of the pod, node labels, want)
    ("pod without volume", None, {BETA_ZONE: "us-west1-a"}, "skip"),
    ("node without labels", "PVC_1", {}, None),
    ("beta zone label matched", "PVC_1", {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, None),
    ("beta region label matched", "PVC_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}, None),
    ("beta region label doesn't match", "PVC_2", {BETA_REGION: "no_us-west1", "uselessLabel": "none"}, CONFLICT),
    ("beta zone label doesn't match", "PVC_1", {BETA_ZONE: "no_us-west1-a", "uselessLabel": "none"}, CONFLICT),
    ("zone label matched", "PVC_Stable_1", {ZONE: "us-west1-a", "uselessLabel": "none"}, None),
    ("region label matched", "PVC_Stable_2", {REGION: "us-west1", "uselessLabel": "none"}, None),
    ("region label doesn't match", "PVC_Stable_2", {REGION: "no_us-west1", "uselessLabel": "none"}, CONFLICT),
    ("zone label doesn't match", "PVC_Stable_1", {ZONE: "no_us-west1-a", "uselessLabel": "none"}, CONFLICT),
    ("pv with zone and region, node with only zone", "PVC_Stable_3", {ZONE: "us-west1-a"}, CONFLICT),
    ("pv with zone,node with beta zone", "PVC_Stable_1", {BETA_ZONE: "us-west1-a"}, CONFLICT),
    ("pv with beta label,node with ga label, matched", "PVC_1", {ZONE: "us-west1-a"}, None),
    ("pv with beta label,node with ga label, don't match", "PVC_1", {ZONE: "us-west1-b"}, CONFLICT),
    # TestMultiZone: a PV label may list zones joined by "__".
    ("label zone failure domain matched", "PVC_multi", {ZONE: "us-west1-b"}, None),
    ("label zone failure domain doesn't match", "PVC_multi", {ZONE: "us-west1-c"}, CONFLICT),
    # TestWithBinding.
    (
        "unbound volume empty storage class",
        "PVC_EmptySC",
        {ZONE: "us-west1-a"},
        unresolvable("PersistentVolumeClaim had no pv name and storageClass name"),
    ),
    (
        "unbound volume no storage class",
        "PVC_NoSC",
        {ZONE: "us-west1-a"},
        unresolvable('storageclass.storage.k8s.io "Class_0" not found'),
    ),
    (
        "unbound volume immediate binding mode",
        "PVC_Immediate",
        {ZONE: "us-west1-a"},
        unresolvable("PersistentVolume had no name"),
    ),
    ("unbound volume wait binding mode", "PVC_Wait", {ZONE: "us-west1-a"}, "skip"),
    ("pv not found", "PVC_4", {ZONE: "us-west1-a"}, unresolvable('persistentvolume "Vol_not_exist" not found')),
    (
        "pvc not found",
        "PVC_missing",
        {ZONE: "us-west1-a"},
        unresolvable('persistentvolumeclaim "PVC_missing" not found'),
    ),
]


@pytest.mark.parametrize(("claim", "labels", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_volume_zone(claim: str | None, labels: dict[str, str], want: fw.Status | str | None) -> None:
    cluster = Cluster([make_node("host1", labels=labels)])
    feed(cluster, *CLASSES, *PVS, *PVCS)
    plugin = VolumeZone(None, cluster.handle())
    state = fw.CycleState()
    res = plugin.pre_filter(state, PodInfo.of(pod(claim)), cluster.snapshot)
    if want == "skip":
        assert res.status.code == fw.Code.SKIP
        return
    if not res.status.ok:
        assert res.status == want
        return
    [st] = run_filter(plugin, pod(claim), cluster.snapshot)
    assert st == (want or fw.Status())


def test_zones_of_many_nodes_are_judged_at_once() -> None:
    nodes = [make_node(f"n{i}", labels={ZONE: f"z{i % 3}"}) for i in range(9)]
    cluster = Cluster(nodes)
    feed(cluster, pv("v", labels={ZONE: "z1__z2"}), pvc("c", None, bound_to="v"))
    statuses = run_filter(VolumeZone(None, cluster.handle()), pod("c"), cluster.snapshot)
    assert [st.ok for st in statuses] == [i % 3 != 0 for i in range(9)]


def test_registered_events_leave_out_node_taint_updates() -> None:
    """volume_zone.go v1.37.2 EventsToRegister: a node added or relabelled."""
    nodes = [e for e in VolumeZone().events_to_register() if e.resource == "Node"]
    assert nodes == [fw.ClusterEvent("Node", fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_LABEL)]
