"""NodeVolumeLimits, ported in part from kube-scheduler v1.37.2's
pkg/scheduler/framework/plugins/nodevolumelimits/csi_test.go (TestCSILimits:
the cases without VolumeAttachments, Azure Disk, Cinder or Portworx, which
Berth does not model; TestVolumeLimitScalingGate, and v1.35.4's for 1.35).
Not ported: the queueing-hint tests and TestCSILimits_DeferredResizeSkipped
(the alpha InPlacePodVerticalScalingSchedulerPreemption is not ported)."""

from __future__ import annotations

import dataclasses

import msgspec
import pytest

from berth import features
from berth.cluster import model, storage
from berth.framework import interface as fw
from berth.plugins.nodevolumelimits import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, NodeVolumeLimits
from berth.testing import Cluster, make_node, make_pod, run_filter
from tests.plugins.volume_support import claim_volume, csi_node, feed, pv, pvc, sc, with_volumes

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
EXCEEDED = fw.Status(fw.Code.UNSCHEDULABLE, (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,), "NodeVolumeLimits")
OK = fw.Status()

STORAGE = [
    sc("csi-sc", "Immediate", provisioner=EBS),
    sc("gce-intree-sc", "Immediate", provisioner="kubernetes.io/gce-pd"),
    *(pv(f"csi-ebs.csi.aws.com-{i}", csi=(EBS, f"vol-{i}")) for i in range(4)),
    *(pvc(f"csi-ebs.csi.aws.com-{i}", "csi-sc", bound_to=f"csi-ebs.csi.aws.com-{i}") for i in range(4)),
    pvc("csi-ebs.csi.aws.com-unbound", "csi-sc"),
    pvc("gce-intree-unbound", "gce-intree-sc"),
    pv("gce-pv", gcePersistentDisk={"pdName": "disk-1"}),
    pvc("gce-bound", "", bound_to="gce-pv"),
]


def claims(name: str, *names: str, node: str = "") -> model.Pod:
    return with_volumes(make_pod(name, node_name=node), *(claim_volume(n, name=f"v{i}") for i, n in enumerate(names)))


CASES = [
    # (case, new pod's claims, claims of a pod on the node, CSINode limits, want)
    (
        "fits when node volume limit >= new pods CSI volume",
        ["csi-ebs.csi.aws.com-0"],
        ["csi-ebs.csi.aws.com-1"],
        {EBS: 4},
        OK,
    ),
    (
        "doesn't when node volume limit <= pods CSI volume",
        ["csi-ebs.csi.aws.com-0"],
        ["csi-ebs.csi.aws.com-1", "csi-ebs.csi.aws.com-2"],
        {EBS: 2},
        EXCEEDED,
    ),
    (
        "should when driver does not support volume limits",
        ["csi-ebs.csi.aws.com-0"],
        ["csi-ebs.csi.aws.com-1"],
        {EBS: None},
        OK,
    ),
    (
        "count pending PVCs towards volume limit <= pods CSI volume",
        ["csi-ebs.csi.aws.com-0"],
        ["csi-ebs.csi.aws.com-unbound", "csi-ebs.csi.aws.com-1"],
        {EBS: 2},
        EXCEEDED,
    ),
    (
        "should count PVCs with invalid PV name but valid SC",
        ["csi-ebs.csi.aws.com-0"],
        ["csi-ebs.csi.aws.com-unbound"],
        {EBS: 1},
        EXCEEDED,
    ),
    (
        "two pods using the same volume count it once",
        ["csi-ebs.csi.aws.com-0"],
        ["csi-ebs.csi.aws.com-0"],
        {EBS: 1},
        OK,
    ),
    ("no CSINode: no limits", ["csi-ebs.csi.aws.com-0"], ["csi-ebs.csi.aws.com-1"], None, OK),
    ("limits of another driver do not apply", ["csi-ebs.csi.aws.com-0"], ["csi-ebs.csi.aws.com-1"], {GCE: 0}, OK),
    ("should count in-tree volumes if migration is enabled", ["gce-intree-unbound"], ["gce-bound"], {GCE: 1}, EXCEEDED),
]


@pytest.mark.parametrize(("new", "placed", "limits", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_csi_limits(new: list[str], placed: list[str], limits: dict[str, int | None] | None, want: fw.Status) -> None:
    cluster = Cluster(
        [make_node("node-for-max-pd-test-1")], [claims("existing", *placed, node="node-for-max-pd-test-1")]
    )
    feed(cluster, *STORAGE)
    if limits is not None:
        feed(cluster, csi_node("node-for-max-pd-test-1", limits))
    [st] = run_filter(NodeVolumeLimits(None, cluster.handle()), claims("new", *new), cluster.snapshot)
    assert st == want


def test_inline_in_tree_disks_count_against_the_migrated_driver() -> None:
    gce = {"name": "d", "gcePersistentDisk": {"pdName": "disk-2"}}
    placed = with_volumes(
        make_pod("existing", node_name="n1"), {"name": "d", "gcePersistentDisk": {"pdName": "disk-1"}}
    )
    cluster = Cluster([make_node("n1")], [placed])
    feed(cluster, csi_node("n1", {GCE: 1}))
    [st] = run_filter(NodeVolumeLimits(None, cluster.handle()), with_volumes(make_pod("new"), gce), cluster.snapshot)
    assert st == EXCEEDED


def test_a_missing_claim_of_the_new_pod_is_unresolvable() -> None:
    cluster = Cluster([make_node("n1")])
    feed(cluster, csi_node("n1", {EBS: 1}))
    [st] = run_filter(NodeVolumeLimits(None, cluster.handle()), claims("new", "nope"), cluster.snapshot)
    assert st == fw.Status(
        fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        ('looking up PVC default/nope: persistentvolumeclaim "nope" not found',),
        "NodeVolumeLimits",
    )


def test_a_pod_without_attachable_volumes_is_skipped() -> None:
    from berth.cache.infos import PodInfo

    plugin = NodeVolumeLimits(None, None)
    res = plugin.pre_filter(fw.CycleState(), PodInfo.of(make_pod("p")), Cluster([make_node("n")]).snapshot)
    assert res.status.code == fw.Code.SKIP


def test_a_csinode_driver_without_topology_keys_decodes_as_the_api_server_sends_it() -> None:
    # csinode types.go: topologyKeys has no omitempty, so a driver without
    # any arrives as null; the informer must not choke on it.
    raw = b'{"metadata":{"name":"n1"},"spec":{"drivers":[{"name":"d","nodeID":"n1","topologyKeys":null}]}}'
    node = msgspec.json.decode(raw, type=storage.CSINode)
    assert node.spec.drivers[0].topology_keys is None


def _csi_driver(name: str, *, prevent: bool | None) -> storage.CSIDriver:
    return storage.CSIDriver(
        metadata=model.ObjectMeta(name=name),
        spec=storage.CSIDriverSpec(prevent_pod_scheduling_if_missing=prevent),
    )


V1_37 = features.KubeVersion(1, 37)
NOT_INSTALLED = fw.Status(
    fw.Code.UNSCHEDULABLE, (f"{EBS} CSI driver is not installed on the node",), "NodeVolumeLimits"
)

# TestVolumeLimitScalingGate (v1.37.2): (case, VolumeLimitScaling, CSINode drivers
# with their limit (None: a CSINode without the driver), CSIDriver object
# (None: none; else its preventPodSchedulingIfMissing), want).
GATE_CASES = [
    (
        "gate enabled - allow scheduling when CSIDriver exists but PreventPodSchedulingIfMissing is not set",
        True,
        None,
        False,
        OK,
    ),
    (
        "gate enabled - fail when driver not installed and PreventPodSchedulingIfMissing is true",
        True,
        None,
        True,
        NOT_INSTALLED,
    ),
    ("gate disabled - skip driver presence check (regardless of CSIDriver presence)", False, None, True, OK),
    ("gate enabled - driver installed within limit", True, {EBS: 2}, True, OK),
    ("gate enabled - allow scheduling when CSIDriver object missing", True, None, None, OK),
]


def _filter_ebs_claim(version: features.KubeVersion, gates: dict[str, bool], *objects: object) -> fw.Status:
    """A new pod with one EBS claim against node n1, the release's gates with ``gates`` on top."""
    cluster = Cluster([make_node("n1")])
    feed(cluster, *STORAGE, *objects)
    handle = dataclasses.replace(cluster.handle(), features=features.Features.of(version, gates))
    [st] = run_filter(NodeVolumeLimits(None, handle), claims("new", "csi-ebs.csi.aws.com-0"), cluster.snapshot)
    return st


@pytest.mark.parametrize(
    ("gate", "limits", "prevent", "want"), [c[1:] for c in GATE_CASES], ids=[c[0] for c in GATE_CASES]
)
def test_volume_limit_scaling_gate(
    gate: bool, limits: dict[str, int | None] | None, prevent: bool | None, want: fw.Status
) -> None:
    driver = [] if prevent is None else [_csi_driver(EBS, prevent=prevent)]
    got = _filter_ebs_claim(V1_37, {"VolumeLimitScaling": gate}, csi_node("n1", limits or {}), *driver)
    assert got == want


@pytest.mark.parametrize(
    ("version", "want"),
    [
        # v1.35.4 TestVolumeLimitScalingGate "gate enabled - fail when driver not
        # installed and CSIDriver exists": no opt-in field yet, any CSIDriver counts.
        (features.KubeVersion(1, 35), NOT_INSTALLED),
        (features.KubeVersion(1, 36), OK),
        (V1_37, OK),
    ],
)
def test_before_1_36_any_csidriver_object_requires_its_driver_on_the_node(
    version: features.KubeVersion, want: fw.Status
) -> None:
    got = _filter_ebs_claim(version, {"VolumeLimitScaling": True}, csi_node("n1", {}), _csi_driver(EBS, prevent=None))
    assert got == want


@pytest.mark.parametrize(
    ("version", "want"),
    [(features.KubeVersion(1, 35), OK), (features.KubeVersion(1, 36), OK), (V1_37, NOT_INSTALLED)],
)
def test_a_node_without_a_csinode_lacks_an_opted_in_driver_where_the_gate_is_on_by_default(
    version: features.KubeVersion, want: fw.Status
) -> None:
    """VolumeLimitScaling is beta and on from 1.37, alpha and off before."""
    assert _filter_ebs_claim(version, {}, _csi_driver(EBS, prevent=True)) == want


def test_prevent_pod_scheduling_if_missing_arrives_from_the_api_server() -> None:
    """The informer decodes CSIDrivers with msgspec into the model: the new field must be there."""
    raw = b'{"metadata":{"name":"ebs.csi.aws.com"},"spec":{"attachRequired":true,"preventPodSchedulingIfMissing":true}}'
    driver = msgspec.json.decode(raw, type=storage.CSIDriver)
    assert driver.spec.prevent_pod_scheduling_if_missing is True
    assert (
        msgspec.json.decode(b'{"metadata":{"name":"d"},"spec":{}}', type=storage.CSIDriver).spec
        == storage.CSIDriverSpec()
    )
