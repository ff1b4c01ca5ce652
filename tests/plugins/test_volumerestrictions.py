"""VolumeRestrictions, ported from kube-scheduler v1.37.2's
pkg/scheduler/framework/plugins/volumerestrictions/volume_restrictions_test.go
(TestGCEDiskConflicts, TestAWSDiskConflicts, TestRBDDiskConflicts,
TestISCSIDiskConflicts, TestAccessModeConflicts; their tables are v1.34.4's).
Not ported: the queueing-hint tests (Berth has no queueing hints) and
TestVolumeRestrictions_DeferredResizeSkipped (the alpha
InPlacePodVerticalScalingSchedulerPreemption is not ported)."""

from __future__ import annotations

from typing import Any

import pytest

from berth.cluster import model
from berth.framework import interface as fw
from berth.plugins.volumerestrictions import ERR_REASON_DISK_CONFLICT, ERR_REASON_RWOP_CONFLICT, VolumeRestrictions
from berth.testing import Cluster, make_node, make_pod, run_filter
from tests.plugins.volume_support import claim_volume, feed, pvc, with_volumes

DISK = fw.Status(fw.Code.UNSCHEDULABLE, (ERR_REASON_DISK_CONFLICT,), "VolumeRestrictions")
RWOP = fw.Status(fw.Code.UNSCHEDULABLE, (ERR_REASON_RWOP_CONFLICT,), "VolumeRestrictions")
OK = fw.Status()


def pod(name: str, *volumes: dict[str, Any], node: str = "") -> model.Pod:
    return with_volumes(make_pod(name, node_name=node), *volumes)


def gce(pd: str, ro: bool = False) -> dict[str, Any]:
    return {"name": "v", "gcePersistentDisk": {"pdName": pd, "readOnly": ro}}


def aws(vid: str) -> dict[str, Any]:
    return {"name": "v", "awsElasticBlockStore": {"volumeID": vid}}


def rbd(mons: list[str], pool: str, image: str, ro: bool = False) -> dict[str, Any]:
    return {"name": "v", "rbd": {"monitors": mons, "pool": pool, "image": image, "readOnly": ro}}


def iscsi(iqn: str, ro: bool = False) -> dict[str, Any]:
    return {"name": "v", "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": iqn, "lun": 0, "readOnly": ro}}


CASES = [
    # (Go test / case, incoming volume, volume of the pod on the node, want)
    ("TestGCEDiskConflicts/nothing", gce("foo"), None, "skip-or-ok"),
    ("TestGCEDiskConflicts/one state", gce("foo"), gce("bar"), OK),
    ("TestGCEDiskConflicts/same state", gce("foo"), gce("foo"), DISK),
    ("TestGCEDiskConflicts/second state", gce("foo"), gce("foo", ro=False), DISK),
    ("TestGCEDiskConflicts/both read-only", gce("foo", ro=True), gce("foo", ro=True), OK),
    ("TestAWSDiskConflicts/one state", aws("foo"), aws("bar"), OK),
    ("TestAWSDiskConflicts/same state", aws("foo"), aws("foo"), DISK),
    ("TestRBDDiskConflicts/one state", rbd(["a", "b"], "foo", "bar"), rbd(["c", "d"], "foo", "bar"), OK),
    ("TestRBDDiskConflicts/same state", rbd(["a", "b"], "foo", "bar"), rbd(["a"], "foo", "bar"), DISK),
    ("TestRBDDiskConflicts/other image", rbd(["a"], "foo", "bar"), rbd(["a"], "foo", "baz"), OK),
    ("TestRBDDiskConflicts/both read-only", rbd(["a"], "foo", "bar", True), rbd(["a"], "foo", "bar", True), OK),
    (
        "TestISCSIDiskConflicts/one state",
        iscsi("iqn.2016-12.server:storage.target01"),
        iscsi("iqn.2017-12.server:storage.target01"),
        OK,
    ),
    (
        "TestISCSIDiskConflicts/same state",
        iscsi("iqn.2016-12.server:storage.target01"),
        iscsi("iqn.2016-12.server:storage.target01"),
        DISK,
    ),
]


@pytest.mark.parametrize(("incoming", "placed", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_disk_conflicts(incoming: dict[str, Any], placed: dict[str, Any] | None, want: fw.Status | str) -> None:
    pods = [pod("e", placed, node="n1")] if placed is not None else []
    cluster = Cluster([make_node("n1")], pods)
    [st] = run_filter(VolumeRestrictions(None, cluster.handle()), pod("p", incoming), cluster.snapshot)
    assert st == (OK if want == "skip-or-ok" else want)


def test_access_mode_conflicts() -> None:
    """TestAccessModeConflicts: a ReadWriteOncePod claim in use fails every node; a missing claim is unresolvable."""
    cluster = Cluster(
        [make_node("node-1"), make_node("node-2")],
        [pod("user", claim_volume("claim-with-rwop-1"), node="node-1")],
    )
    feed(
        cluster,
        pvc("claim-with-rwop-1", "", modes=("ReadWriteOncePod",)),
        pvc("claim-with-rwop-2", "", modes=("ReadWriteOncePod",)),
        pvc("claim-with-rwx", "", modes=("ReadWriteMany",)),
    )
    plugin = VolumeRestrictions(None, cluster.handle())
    snap = cluster.snapshot
    # "nothing": an unused RWOP claim.
    assert run_filter(plugin, pod("p", claim_volume("claim-with-rwop-2")), snap) == [OK, OK]
    # "failed to get PVC"
    missing = fw.Status(
        fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        ('persistentvolumeclaim "claim-not-exist" not found',),
        "VolumeRestrictions",
    )
    assert run_filter(plugin, pod("p", claim_volume("claim-not-exist")), snap) == [missing, missing]
    # "no access mode conflict" (ReadWriteMany)
    assert run_filter(plugin, pod("p", claim_volume("claim-with-rwx")), snap) == [OK, OK]
    # "access mode conflict, unschedulable": on every node, not just the user's.
    assert run_filter(plugin, pod("p", claim_volume("claim-with-rwop-1")), snap) == [RWOP, RWOP]


def test_preemption_sees_the_claims_user_removed() -> None:
    """AddPod/RemovePod: a dry run without the claim's user lifts the conflict."""
    from berth.cache.infos import PodInfo

    user = pod("user", claim_volume("solo"), node="node-1")
    cluster = Cluster([make_node("node-1")], [user])
    feed(cluster, pvc("solo", "", modes=("ReadWriteOncePod",)))
    plugin = VolumeRestrictions(None, cluster.handle())
    snap = cluster.snapshot
    state = fw.CycleState()
    incoming = PodInfo.of(pod("p", claim_volume("solo")))
    assert plugin.pre_filter(state, incoming, snap).status.ok
    info = snap.infos[snap.alive_rows()[0]]
    assert info is not None
    plugin.remove_pod(state, incoming, PodInfo.of(user), info)
    assert plugin.filter(state, incoming, snap, snap.alive_rows()).ok.all()
    plugin.add_pod(state, incoming, PodInfo.of(user), info)
    assert not plugin.filter(state, incoming, snap, snap.alive_rows()).ok.any()


def test_registered_events_take_only_new_nodes() -> None:
    """volume_restrictions.go v1.37.2 EventsToRegister: of nodes, only Add."""
    nodes = [e for e in VolumeRestrictions().events_to_register() if e.resource == "Node"]
    assert nodes == [fw.ClusterEvent("Node", fw.ActionType.ADD)]
