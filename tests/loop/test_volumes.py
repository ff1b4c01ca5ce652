"""Volumes through the running loop, in virtual time: the embedded cluster
holds the StorageClasses, PVs, claims and CSINodes and plays the PV
controller (it binds a claim to the PV whose claimRef names it); where an
external provisioner would act, the test plays it and says so."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from berth.cluster import model, storage
from berth.testing import make_node, make_pod
from tests.loop.conftest import Berth

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node(name: str, **labels: str) -> model.Node:
    return make_node(name, cpu="8", memory="32Gi", pods=110, labels={HOSTNAME: name, **labels})


def storage_class(name: str, provisioner: str, mode: str) -> storage.StorageClass:
    return storage.StorageClass(metadata=model.ObjectMeta(name=name), provisioner=provisioner, volume_binding_mode=mode)


def pv(
    name: str, size: str = "10Gi", *, cls: str, modes: tuple[str, ...] = ("ReadWriteOnce",), **spec: Any
) -> storage.PersistentVolume:
    raw: dict[str, Any] = {
        "metadata": {"name": name, "labels": spec.pop("labels", {})},
        "spec": {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": cls, **spec},
    }
    return msgspec.convert(raw, storage.PersistentVolume)


def local_affinity(node_name: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node_name]}]}
    return {"required": {"nodeSelectorTerms": [term]}}


def pvc(
    name: str, size: str = "5Gi", *, cls: str, modes: tuple[str, ...] = ("ReadWriteOnce",)
) -> storage.PersistentVolumeClaim:
    raw = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"accessModes": list(modes), "resources": {"requests": {"storage": size}}, "storageClassName": cls},
    }
    return msgspec.convert(raw, storage.PersistentVolumeClaim)


def claiming(name: str, *claims: str) -> model.Pod:
    vols = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return make_pod(name, scheduler_name="berth", requests={"cpu": "100m"}, spec={"volumes": vols})


def failed(berth: Berth, key: str) -> list[str]:
    return [m for k, reason, m in berth.cluster.events if k == key and reason == "FailedScheduling"]


async def test_a_local_pv_with_wait_for_first_consumer_places_the_pod_on_its_node_and_binds_the_claim(
    berth: Berth,
) -> None:
    berth.nodes(node("n1"), node("n2"), node("n3"))
    c = berth.cluster
    c.upsert_storage_classes([storage_class("local", storage.NOT_SUPPORTED_PROVISIONER, "WaitForFirstConsumer")])
    c.upsert_persistent_volumes(
        [pv("local-n2", cls="local", local={"path": "/mnt/disk"}, nodeAffinity=local_affinity("n2"))]
    )
    c.upsert_persistent_volume_claims([pvc("data", cls="local")])
    # WaitForFirstConsumer: the PV controller leaves the claim to the scheduler.
    assert c.persistent_volume_claims["default/data"].status.phase == "Pending"
    berth.pods(claiming("db", "data"))
    await berth.settle()
    assert berth.node_of("default/db") == "n2"
    claim = c.persistent_volume_claims["default/data"]
    assert claim.spec.volume_name == "local-n2"
    assert claim.status.phase == "Bound"
    assert storage.ANN_BIND_COMPLETED in claim.metadata.annotations
    volume = c.persistent_volumes["local-n2"]
    assert volume.spec.claim_ref is not None and volume.spec.claim_ref.name == "data"
    assert volume.status.phase == "Bound"


async def test_dynamic_provisioning_sets_selected_node_on_the_claim_before_the_pod_is_bound(berth: Berth) -> None:
    berth.nodes(node("n1"), node("n2"))
    c = berth.cluster
    c.upsert_storage_classes([storage_class("fast", "csi.example.com", "WaitForFirstConsumer")])
    c.upsert_persistent_volume_claims([pvc("scratch", cls="fast")])
    berth.pods(claiming("job", "scratch"))

    # The test plays external-provisioner: once the scheduler has chosen a
    # node (selected-node on the claim), it creates a PV on that node,
    # pre-bound to the claim; the embedded PV controller then binds them.
    seen: dict[str, str] = {}

    async def provisioner() -> None:
        while True:
            claim = c.persistent_volume_claims["default/scratch"]
            chosen = claim.metadata.annotations.get(storage.ANN_SELECTED_NODE)
            if chosen:
                break
            await asyncio.sleep(0.5)
        seen["pod node when selected"] = berth.node_of("default/job")
        await asyncio.sleep(5)  # provisioning takes a while
        seen["pod node after 5s"] = berth.node_of("default/job")
        ref = {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "scratch", "uid": claim.metadata.uid}
        c.upsert_persistent_volumes(
            [
                pv(
                    "pvc-scratch",
                    cls="fast",
                    csi={"driver": "csi.example.com", "volumeHandle": "h1"},
                    nodeAffinity=local_affinity(chosen),
                    claimRef=ref,
                )
            ]
        )

    task = asyncio.create_task(provisioner())
    await asyncio.wait_for(task, 60)
    await berth.settle()
    assert seen == {"pod node when selected": "", "pod node after 5s": ""}
    chosen = c.persistent_volume_claims["default/scratch"].metadata.annotations[storage.ANN_SELECTED_NODE]
    assert berth.node_of("default/job") == chosen
    assert c.persistent_volume_claims["default/scratch"].spec.volume_name == "pvc-scratch"


async def test_provisioning_that_never_completes_fails_the_binding_after_bind_timeout_seconds() -> None:
    from tests.loop.conftest import make_config, running

    cfg = make_config(
        profiles=[
            {"schedulerName": "berth", "pluginConfig": [{"name": "VolumeBinding", "args": {"bindTimeoutSeconds": 30}}]}
        ]
    )
    async with running(cfg) as berth:
        berth.nodes(node("n1"))
        c = berth.cluster
        c.upsert_storage_classes([storage_class("fast", "csi.example.com", "WaitForFirstConsumer")])
        c.upsert_persistent_volume_claims([pvc("scratch", cls="fast")])
        berth.pods(claiming("job", "scratch"))
        loop = asyncio.get_running_loop()
        start = loop.time()
        while not any("context deadline exceeded" in m for m in failed(berth, "default/job")):
            assert loop.time() - start < 120, berth.cluster.events
            await asyncio.sleep(1)
        assert 30 <= loop.time() - start < 40
        assert berth.node_of("default/job") == ""
        message = failed(berth, "default/job")[-1]
        assert "binding volumes: context deadline exceeded" in message


async def test_a_zonal_pv_pins_the_pod_to_its_zone(berth: Berth) -> None:
    berth.nodes(node("a1", **{ZONE: "zone-a"}), node("a2", **{ZONE: "zone-a"}), node("b1", **{ZONE: "zone-b"}))
    c = berth.cluster
    c.upsert_storage_classes([storage_class("standard", "pd.csi.storage.gke.io", "Immediate")])
    c.upsert_persistent_volumes(
        [
            pv(
                "disk-b",
                cls="standard",
                labels={ZONE: "zone-b"},
                csi={"driver": "pd.csi.storage.gke.io", "volumeHandle": "d"},
            )
        ]
    )
    c.upsert_persistent_volume_claims([pvc("disk", cls="standard")])
    # Immediate: the embedded PV controller bound it at once.
    assert c.persistent_volume_claims["default/disk"].spec.volume_name == "disk-b"
    berth.pods(*(claiming(f"p{i}", "disk") for i in range(3)))
    await berth.settle()
    assert {berth.node_of(f"default/p{i}") for i in range(3)} == {"b1"}


async def test_a_node_at_its_csi_attach_limit_is_skipped(berth: Berth) -> None:
    berth.nodes(node("n1"))
    c = berth.cluster
    c.upsert_storage_classes([storage_class("ebs", "ebs.csi.aws.com", "Immediate")])
    c.upsert_csi_nodes(
        [
            msgspec.convert(
                {
                    "metadata": {"name": "n1"},
                    "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 1}}]},
                },
                storage.CSINode,
            )
        ]
    )
    c.upsert_persistent_volumes(
        [pv(f"vol{i}", cls="ebs", csi={"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{i}"}) for i in range(2)]
    )
    c.upsert_persistent_volume_claims([pvc("c0", cls="ebs"), pvc("c1", cls="ebs")])
    berth.pods(claiming("first", "c0"))
    await berth.settle()
    assert berth.node_of("default/first") == "n1"
    berth.pods(claiming("second", "c1"))
    await berth.settle()
    assert berth.node_of("default/second") == ""
    assert "0/1 nodes are available: 1 node(s) exceed max volume count." in failed(berth, "default/second")[-1]
    berth.nodes(node("n2"))
    c.upsert_csi_nodes(
        [
            msgspec.convert(
                {
                    "metadata": {"name": "n2"},
                    "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-2", "allocatable": {"count": 1}}]},
                },
                storage.CSINode,
            )
        ]
    )
    await berth.settle()
    assert berth.node_of("default/second") == "n2"


async def test_two_pods_with_one_read_write_once_pod_claim_the_second_waits(berth: Berth) -> None:
    berth.nodes(node("n1"), node("n2"))
    c = berth.cluster
    c.upsert_storage_classes([storage_class("standard", "csi.example.com", "Immediate")])
    c.upsert_persistent_volumes(
        [
            pv(
                "solo",
                cls="standard",
                modes=("ReadWriteOncePod",),
                csi={"driver": "csi.example.com", "volumeHandle": "s"},
            )
        ]
    )
    c.upsert_persistent_volume_claims([pvc("solo", cls="standard", modes=("ReadWriteOncePod",))])
    berth.pods(claiming("one", "solo"))
    await berth.settle()
    assert berth.node_of("default/one")
    berth.pods(claiming("two", "solo"))
    await berth.settle()
    assert berth.node_of("default/two") == ""
    assert failed(berth, "default/two")[-1].startswith(
        "0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod "
        "access mode already in-use by another pod."
    )
    c.delete_pods(["default/one"])  # the claim's user goes: the second pod follows
    await berth.settle()
    assert berth.node_of("default/two")


async def test_a_pod_whose_claim_does_not_exist_waits_until_it_is_created(berth: Berth) -> None:
    berth.nodes(node("n1"))
    berth.pods(claiming("early", "later"))
    await berth.settle()
    assert berth.node_of("default/early") == ""
    assert failed(berth, "default/early")[-1].startswith(
        '0/1 nodes are available: persistentvolumeclaim "later" not found.'
    )
    c = berth.cluster
    c.upsert_persistent_volumes([pv("any", cls="")])
    c.upsert_persistent_volume_claims([pvc("later", cls="")])
    await berth.settle()
    assert berth.node_of("default/early") == "n1"


async def test_a_pod_without_volumes_is_not_slowed_by_the_volume_plugins(berth: Berth) -> None:
    berth.nodes(node("n1"))
    berth.pods(make_pod("plain", scheduler_name="berth", requests={"cpu": "100m"}))
    await berth.settle()
    assert berth.node_of("default/plain") == "n1"
    d = berth.decision("default/plain")
    assert d is not None
