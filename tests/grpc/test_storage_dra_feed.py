"""The Cluster feed's storage (PersistentVolumes, PersistentVolumeClaims,
StorageClasses, CSINodes) and DRA kinds (DeviceClasses, ResourceSlices,
ResourceClaims), and the pod's volumes and resource claims in the protobuf
Pod: converters that round-trip and refuse what the model cannot hold,
feeds that apply a batch whole or not at all, and the scheduling loop
placing pods fed this way (issues 14 item 5 and 15)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import pytest
from google.protobuf.message import Message

from berth import app, config, errors
from berth.adapters.grpc import convert
from berth.adapters.grpc.server import GrpcServer
from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, model_pb2, scheduler_pb2, scheduler_pb2_grpc
from berth.cluster import manifests
from berth.cluster.embedded import EmbeddedCluster
from berth.framework.decision import DecisionKind
from berth.scheduling.core import Core

HOSTNAME = "kubernetes.io/hostname"
DRIVER = "gpu.example.com"
GIB = 1 << 30


# ---------------------------------------------------------------- builders


def meta(name: str, namespace: str = "", **labels: str) -> model_pb2.ObjectMeta:
    return model_pb2.ObjectMeta(name=name, namespace=namespace, labels=labels)


def on_node(node: str) -> model_pb2.NodeSelector:
    req = model_pb2.NodeSelectorRequirement(key=HOSTNAME, operator="In", values=[node])
    return model_pb2.NodeSelector(node_selector_terms=[model_pb2.NodeSelectorTerm(match_expressions=[req])])


def node(name: str) -> model_pb2.Node:
    return model_pb2.Node(
        metadata=meta(name, **{HOSTNAME: name}),
        status=model_pb2.NodeStatus(allocatable={"cpu": 8000, "memory": 32 * GIB, "pods": 110}),
    )


def local_pv(name: str, node_name: str, size: int = 10 * GIB) -> model_pb2.PersistentVolume:
    return model_pb2.PersistentVolume(
        metadata=meta(name),
        spec=model_pb2.PersistentVolumeSpec(
            capacity={"storage": size},
            access_modes=["ReadWriteOnce"],
            storage_class_name="local",
            node_affinity=model_pb2.VolumeNodeAffinity(required=on_node(node_name)),
            local=model_pb2.LocalVolumeSource(path="/mnt/disk"),
        ),
    )


def pvc(name: str, size: int = 5 * GIB, cls: str = "local") -> model_pb2.PersistentVolumeClaim:
    return model_pb2.PersistentVolumeClaim(
        metadata=meta(name, "default"),
        spec=model_pb2.PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"],
            resources=model_pb2.VolumeResourceRequirements(requests={"storage": size}),
            storage_class_name=cls,
        ),
    )


def local_class() -> model_pb2.StorageClass:
    return model_pb2.StorageClass(
        metadata=meta("local"),
        provisioner="kubernetes.io/no-provisioner",
        volume_binding_mode="WaitForFirstConsumer",
    )


def gpu_class() -> model_pb2.DeviceClass:
    cel = model_pb2.CELDeviceSelector(expression=f'device.driver == "{DRIVER}"')
    return model_pb2.DeviceClass(
        metadata=meta("gpu"), spec=model_pb2.DeviceClassSpec(selectors=[model_pb2.DeviceSelector(cel=cel)])
    )


def gpu_slice(node_name: str, gpus: int) -> model_pb2.ResourceSlice:
    return model_pb2.ResourceSlice(
        metadata=meta(f"{node_name}-gpus"),
        spec=model_pb2.ResourceSliceSpec(
            driver=DRIVER,
            node_name=node_name,
            pool=model_pb2.ResourcePool(name=node_name, resource_slice_count=1),
            devices=[
                model_pb2.Device(
                    name=f"gpu-{i}",
                    attributes={"index": model_pb2.DeviceAttribute(int_value=i)},
                    capacity={"memory": model_pb2.DeviceCapacity(value="40Gi")},
                )
                for i in range(gpus)
            ],
        ),
    )


def gpu_claim(name: str) -> model_pb2.ResourceClaim:
    request = model_pb2.DeviceRequest(name="gpu", exactly=model_pb2.ExactDeviceRequest(device_class_name="gpu"))
    return model_pb2.ResourceClaim(
        metadata=meta(name, "default"),
        spec=model_pb2.ResourceClaimSpec(devices=model_pb2.DeviceClaim(requests=[request])),
    )


def pod(name: str, **spec: Any) -> model_pb2.Pod:
    container = model_pb2.Container(name="main", requests={"cpu": 100})
    claims = spec.pop("container_claims", [])
    container.claims.extend(model_pb2.ContainerResourceClaim(name=c) for c in claims)
    return model_pb2.Pod(
        metadata=meta(name, "default"),
        spec=model_pb2.PodSpec(scheduler_name="berth", containers=[container], **spec),
    )


def pvc_volume(claim: str) -> model_pb2.Volume:
    return model_pb2.Volume(
        name="data", persistent_volume_claim=model_pb2.PersistentVolumeClaimVolumeSource(claim_name=claim)
    )


# ---------------------------------------------------------------- converters: round trips


def every_volume_source() -> list[model_pb2.Volume]:
    template = model_pb2.PersistentVolumeClaimTemplate(
        metadata=model_pb2.ObjectMeta(labels={"app": "db"}),
        spec=model_pb2.PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"],
            resources=model_pb2.VolumeResourceRequirements(requests={"storage": GIB}),
            storage_class_name="fast",
        ),
    )
    return [
        model_pb2.Volume(
            name="claim",
            persistent_volume_claim=model_pb2.PersistentVolumeClaimVolumeSource(claim_name="data", read_only=True),
        ),
        model_pb2.Volume(name="scratch", ephemeral=model_pb2.EphemeralVolumeSource(volume_claim_template=template)),
        model_pb2.Volume(
            name="gce",
            gce_persistent_disk=model_pb2.GCEPersistentDiskVolumeSource(pd_name="pd", fs_type="ext4", partition=1),
        ),
        model_pb2.Volume(
            name="ebs", aws_elastic_block_store=model_pb2.AWSElasticBlockStoreVolumeSource(volume_id="vol-1")
        ),
        model_pb2.Volume(
            name="rbd", rbd=model_pb2.RBDVolumeSource(monitors=["m1", "m2"], image="img", pool="p", read_only=True)
        ),
        model_pb2.Volume(name="iscsi", iscsi=model_pb2.ISCSIVolumeSource(target_portal="t:3260", iqn="iqn.x", lun=2)),
        model_pb2.Volume(name="csi", csi=model_pb2.CSIVolumeSource(driver="csi.example.com")),
        model_pb2.Volume(name="config"),  # a source Berth does not model (configMap, emptyDir, ...)
    ]


def full_pod() -> model_pb2.Pod:
    p = pod(
        "full",
        volumes=every_volume_source(),
        resource_claims=[
            model_pb2.PodResourceClaim(name="gpu", resource_claim_name="gpu-claim"),
            model_pb2.PodResourceClaim(name="nic", resource_claim_template_name="nic-template"),
        ],
        container_claims=["gpu"],
    )
    p.spec.containers[0].claims.append(model_pb2.ContainerResourceClaim(name="nic", request="fast"))
    p.status.resource_claim_statuses.append(
        model_pb2.PodResourceClaimStatus(name="nic", resource_claim_name="full-nic")
    )
    p.status.resource_claim_statuses.append(model_pb2.PodResourceClaimStatus(name="none"))
    return p


def full_pv() -> model_pb2.PersistentVolume:
    pv = local_pv("pv", "n1")
    pv.metadata.annotations["pv.kubernetes.io/bound-by-controller"] = "yes"
    pv.spec.claim_ref.CopyFrom(
        model_pb2.ObjectReference(kind="PersistentVolumeClaim", namespace="default", name="data", uid="u1")
    )
    pv.spec.volume_mode = "Block"
    pv.spec.persistent_volume_reclaim_policy = "Retain"
    pv.spec.volume_attributes_class_name = ""
    pv.status.phase = "Bound"
    return pv


def full_pvc() -> model_pb2.PersistentVolumeClaim:
    c = pvc("data")
    c.spec.selector.match_labels["disk"] = "ssd"
    c.spec.volume_name = "pv"
    c.spec.volume_mode = "Filesystem"
    c.spec.resources.limits["storage"] = 20 * GIB
    c.status.phase = "Bound"
    c.status.access_modes.append("ReadWriteOnce")
    c.status.capacity["storage"] = 10 * GIB
    return c


def full_slice() -> model_pb2.ResourceSlice:
    s = gpu_slice("n1", 1)
    d = s.spec.devices[0]
    d.attributes["healthy"].bool_value = True
    d.attributes["model"].string_value = "a100"
    d.attributes["driverVersion"].version_value = "1.2.3"
    d.taints.append(model_pb2.DeviceTaint(key="broken", effect="NoSchedule"))
    d.consumes_counters.append(
        model_pb2.DeviceCounterConsumption(counter_set="mem", counters={"memory": model_pb2.Counter(value="10Gi")})
    )
    d.binding_conditions.append("ready")
    d.binds_to_node = True
    s.spec.shared_counters.append(
        model_pb2.CounterSet(name="mem", counters={"memory": model_pb2.Counter(value="80Gi")})
    )
    s.spec.pool.generation = 3
    return s


def full_claim() -> model_pb2.ResourceClaim:
    c = gpu_claim("gpu-claim")
    opaque = model_pb2.OpaqueDeviceConfiguration(driver=DRIVER, parameters=b'{"mode":"mig","slices":[1,2]}')
    devices = c.spec.devices
    devices.requests[0].exactly.allocation_mode = "ExactCount"
    devices.requests[0].exactly.count = 2
    devices.requests[0].exactly.tolerations.append(
        model_pb2.DeviceToleration(key="broken", operator="Exists", toleration_seconds=30)
    )
    devices.requests.append(
        model_pb2.DeviceRequest(
            name="any",
            first_available=[
                model_pb2.DeviceSubRequest(name="big", device_class_name="gpu", allocation_mode="All", count=1),
                model_pb2.DeviceSubRequest(
                    name="small", device_class_name="gpu", allocation_mode="ExactCount", count=1
                ),
            ],
        )
    )
    devices.constraints.append(model_pb2.DeviceConstraint(requests=["gpu"], match_attribute=f"{DRIVER}/model"))
    devices.config.append(model_pb2.DeviceClaimConfiguration(requests=["gpu"], opaque=opaque))
    c.metadata.finalizers.append("resource.kubernetes.io/delete-protection")
    c.status.allocation.devices.results.append(
        model_pb2.DeviceRequestAllocationResult(request="gpu", driver=DRIVER, pool="n1", device="gpu-0")
    )
    c.status.allocation.devices.config.append(
        model_pb2.DeviceAllocationConfiguration(source="FromClaim", requests=["gpu"], opaque=opaque)
    )
    c.status.allocation.node_selector.CopyFrom(on_node("n1"))
    c.status.reserved_for.append(model_pb2.ResourceClaimConsumerReference(resource="pods", name="p", uid="u"))
    return c


def full_class() -> model_pb2.DeviceClass:
    c = gpu_class()
    c.spec.config.append(
        model_pb2.DeviceClassConfiguration(
            opaque=model_pb2.OpaqueDeviceConfiguration(driver=DRIVER, parameters=b'{"a":1}')
        )
    )
    c.spec.extended_resource_name = "example.com/gpu"
    return c


def full_csi_node() -> model_pb2.CSINode:
    return model_pb2.CSINode(
        metadata=meta("n1"),
        spec=model_pb2.CSINodeSpec(
            drivers=[
                model_pb2.CSINodeDriver(
                    name="csi.example.com",
                    node_id="n1-id",
                    topology_keys=["topology.kubernetes.io/zone"],
                    allocatable=model_pb2.VolumeNodeResources(count=16),
                ),
                model_pb2.CSINodeDriver(name="other.example.com", allocatable=model_pb2.VolumeNodeResources()),
            ]
        ),
    )


def full_storage_class() -> model_pb2.StorageClass:
    sc = local_class()
    sc.parameters["type"] = "ssd"
    sc.reclaim_policy = "Delete"
    sc.allowed_topologies.append(
        model_pb2.TopologySelectorTerm(
            match_label_expressions=[
                model_pb2.TopologySelectorLabelRequirement(key="topology.kubernetes.io/zone", values=["z1"])
            ]
        )
    )
    return sc


ROUND_TRIPS: list[tuple[Callable[[], Message], Callable[..., Any], Callable[[Any], Message]]] = [
    (full_pod, convert.pod_from_pb, convert.pod_to_pb),
    (full_pv, convert.pv_from_pb, convert.pv_to_pb),
    (full_pvc, convert.pvc_from_pb, convert.pvc_to_pb),
    (full_storage_class, convert.storage_class_from_pb, convert.storage_class_to_pb),
    (full_csi_node, convert.csi_node_from_pb, convert.csi_node_to_pb),
    (full_class, convert.device_class_from_pb, convert.device_class_to_pb),
    (full_slice, convert.resource_slice_from_pb, convert.resource_slice_to_pb),
    (full_claim, convert.resource_claim_from_pb, convert.resource_claim_to_pb),
]


@pytest.mark.parametrize(
    ("build", "from_pb", "to_pb"),
    ROUND_TRIPS,
    ids=["pod", "pv", "pvc", "storage class", "csi node", "device class", "resource slice", "resource claim"],
)
def test_every_field_survives_protobuf_to_model_and_back(
    build: Callable[[], Message], from_pb: Callable[..., Any], to_pb: Callable[[Any], Message]
) -> None:
    msg = build()
    assert to_pb(from_pb(msg)) == msg


def test_the_model_keeps_what_the_pod_says_about_claims_and_volumes() -> None:
    p = convert.pod_from_pb(full_pod())
    assert [v.name for v in p.spec.volumes][:2] == ["claim", "scratch"]
    assert p.spec.volumes[0].persistent_volume_claim is not None
    assert p.spec.volumes[0].persistent_volume_claim.claim_name == "data"
    template = p.spec.volumes[1].ephemeral.volume_claim_template  # type: ignore[union-attr]
    assert template == {
        "metadata": {"labels": {"app": "db"}},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": str(GIB)}},
            "storageClassName": "fast",
        },
    }
    assert [(c.name, c.resource_claim_name, c.resource_claim_template_name) for c in p.spec.resource_claims] == [
        ("gpu", "gpu-claim", None),
        ("nic", None, "nic-template"),
    ]
    res = p.spec.containers[0].resources
    assert res is not None and [(c.name, c.request) for c in res.claims] == [("gpu", ""), ("nic", "fast")]
    assert [(s.name, s.resource_claim_name) for s in p.status.resource_claim_statuses] == [
        ("nic", "full-nic"),
        ("none", None),
    ]


def test_an_unset_allocation_mode_and_count_get_the_api_servers_defaults() -> None:
    claim = convert.resource_claim_from_pb(gpu_claim("c"))
    exactly = claim.spec.devices.requests[0].exactly
    assert exactly is not None and (exactly.allocation_mode, exactly.count) == ("ExactCount", 1)


def test_a_pvc_without_a_class_differs_from_one_asking_for_no_class() -> None:
    unset, empty = pvc("a"), pvc("b", cls="")
    unset.spec.ClearField("storage_class_name")
    unset.status.SetInParent()
    assert convert.pvc_from_pb(unset).spec.storage_class_name is None
    assert convert.pvc_from_pb(empty).spec.storage_class_name == ""
    assert convert.pvc_to_pb(convert.pvc_from_pb(unset)) == unset


POD_MANIFEST = """
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: ml}
spec:
  schedulerName: berth
  containers:
  - name: main
    image: trainer
    resources:
      requests: {cpu: 500m}
      claims: [{name: gpu}]
  resourceClaims:
  - {name: gpu, resourceClaimName: gpu-claim}
  - {name: nic, resourceClaimTemplateName: nic}
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: data, readOnly: true}}
  - name: scratch
    ephemeral:
      volumeClaimTemplate:
        spec:
          accessModes: [ReadWriteOnce]
          resources: {requests: {storage: 1Gi}}
  - {name: disk, gcePersistentDisk: {pdName: pd-1}}
  - {name: cfg, configMap: {name: cfg}}
"""


def test_a_manifest_pod_with_claims_and_volumes_goes_through_the_contract_as_explain_and_submit_send_it() -> None:
    (manifest_pod,) = manifests.loads(POD_MANIFEST, source="pod.yaml").pods
    sent = convert.pod_to_pb(manifest_pod)  # what `berth explain -f` / `berth submit -f` send
    received = convert.pod_from_pb(sent, "pod")
    assert received.spec.resource_claims == manifest_pod.spec.resource_claims
    assert received.spec.containers[0].resources == manifest_pod.spec.containers[0].resources
    assert [v.name for v in received.spec.volumes] == ["data", "scratch", "disk", "cfg"]
    assert received.spec.volumes[0] == manifest_pod.spec.volumes[0]
    assert received.spec.volumes[2] == manifest_pod.spec.volumes[2]
    template = received.spec.volumes[1].ephemeral.volume_claim_template  # type: ignore[union-attr]
    assert template is not None and template["spec"]["resources"] == {"requests": {"storage": str(GIB)}}
    assert convert.pod_to_pb(received) == sent


# ---------------------------------------------------------------- converters: strict


M = TypeVar("M", bound=Message)


def _with(build: Callable[[], M], change: Callable[[M], object]) -> M:
    msg = build()
    change(msg)
    return msg


@pytest.mark.parametrize(
    ("msg", "from_pb", "message"),
    [
        (
            _with(full_pv, lambda m: m.spec.access_modes.append("ReadSometimes")),
            convert.pv_from_pb,
            'volumes[2].spec.access_modes[1]: Unsupported value: "ReadSometimes"',
        ),
        (
            _with(full_pv, lambda m: setattr(m.spec, "volume_mode", "Tape")),
            convert.pv_from_pb,
            'volumes[2].spec.volume_mode: Unsupported value: "Tape"',
        ),
        (
            _with(full_pv, lambda m: m.spec.capacity.__setitem__("storage", -1)),
            convert.pv_from_pb,
            "volumes[2].spec.capacity[storage]: Invalid value: -1",
        ),
        (
            _with(full_pvc, lambda m: m.spec.resources.requests.__setitem__("storage", -5)),
            convert.pvc_from_pb,
            "volumes[2].spec.resources.requests[storage]: Invalid value: -5",
        ),
        (
            _with(full_storage_class, lambda m: setattr(m, "volume_binding_mode", "Later")),
            convert.storage_class_from_pb,
            'volumes[2].volume_binding_mode: Unsupported value: "Later"',
        ),
        (
            _with(full_slice, lambda m: setattr(m.spec.devices[0].capacity["memory"], "value", "40 Gi")),
            convert.resource_slice_from_pb,
            'volumes[2].spec.devices[0].capacity[memory].value: Invalid value: "40 Gi"',
        ),
        (
            _with(full_slice, lambda m: m.spec.devices[0].attributes["index"].Clear()),
            convert.resource_slice_from_pb,
            "volumes[2].spec.devices[0].attributes[index].value: Required value",
        ),
        (
            _with(full_slice, lambda m: setattr(m.spec.shared_counters[0].counters["memory"], "value", "lots")),
            convert.resource_slice_from_pb,
            'volumes[2].spec.shared_counters[0].counters[memory].value: Invalid value: "lots"',
        ),
        (
            _with(full_claim, lambda m: setattr(m.spec.devices.requests[0].exactly, "allocation_mode", "Most")),
            convert.resource_claim_from_pb,
            'volumes[2].spec.devices.requests[0].exactly.allocation_mode: Unsupported value: "Most"',
        ),
        (
            _with(full_claim, lambda m: setattr(m.spec.devices.requests[1].first_available[1], "allocation_mode", "x")),
            convert.resource_claim_from_pb,
            'volumes[2].spec.devices.requests[1].first_available[1].allocation_mode: Unsupported value: "x"',
        ),
        (
            _with(full_claim, lambda m: setattr(m.spec.devices.config[0].opaque, "parameters", b"{not json")),
            convert.resource_claim_from_pb,
            "volumes[2].spec.devices.config[0].opaque.parameters: Invalid value: not JSON",
        ),
        (
            _with(full_claim, lambda m: setattr(m.status.allocation.devices.config[0], "source", "FromAir")),
            convert.resource_claim_from_pb,
            'volumes[2].status.allocation.devices.config[0].source: Unsupported value: "FromAir"',
        ),
        (
            _with(full_class, lambda m: setattr(m.spec.config[0].opaque, "parameters", b"[1,")),
            convert.device_class_from_pb,
            "volumes[2].spec.config[0].opaque.parameters: Invalid value: not JSON",
        ),
        (
            _with(
                full_pod,
                lambda m: m.spec.volumes[1].ephemeral.volume_claim_template.spec.access_modes.append("Sometimes"),
            ),
            convert.pod_from_pb,
            "volumes[2].spec.volumes[1].ephemeral.volume_claim_template.spec.access_modes[1]: Unsupported value",
        ),
    ],
    ids=[
        "unknown access mode",
        "unknown volume mode",
        "negative capacity",
        "negative claim request",
        "unknown binding mode",
        "malformed device capacity",
        "attribute without a value",
        "malformed counter",
        "unknown allocation mode",
        "unknown subrequest allocation mode",
        "opaque parameters not JSON",
        "unknown config source",
        "class parameters not JSON",
        "bad ephemeral claim template",
    ],
)
def test_what_the_model_cannot_hold_is_invalid_argument_naming_the_field(
    msg: Message, from_pb: Callable[..., Any], message: str
) -> None:
    with pytest.raises(errors.InvalidArgument) as err:
        from_pb(msg, "volumes[2]")
    assert str(err.value).startswith(message), str(err.value)


# ---------------------------------------------------------------- the feed over gRPC, with the loop running


@dataclass
class Live:
    core: Core
    feed: EmbeddedCluster
    cluster: cluster_pb2_grpc.ClusterStub
    scheduler: scheduler_pb2_grpc.SchedulerStub

    async def bound_node(self, key: str) -> str:
        """The node the loop binds ``key`` to (its decisions, streamed: no polling)."""
        stream = self.scheduler.WatchDecisions(scheduler_pb2.WatchDecisionsRequest(pods=[key], replay=True))
        try:
            async for d in stream:
                if d.kind == DecisionKind.BOUND:
                    return str(d.node)
                assert d.kind in (DecisionKind.ASSUMED, DecisionKind.QUEUED, DecisionKind.NOMINATED), d
        finally:
            stream.cancel()
        raise AssertionError(f"no decision for {key}")


@contextlib.asynccontextmanager
async def live() -> AsyncIterator[Live]:
    """``berth serve``: the scheduling loop running and the gRPC server on a free loopback port."""
    cfg = config.parse({"grpc": {"host": "127.0.0.1", "port": 0}})
    async with app.running(cfg) as berth:
        server = GrpcServer(berth.core, berth.extender, berth.cluster)
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
                yield Live(
                    berth.core,
                    berth.cluster,
                    cluster_pb2_grpc.ClusterStub(ch),
                    scheduler_pb2_grpc.SchedulerStub(ch),
                )
        finally:
            await server.stop(0)


async def test_a_pod_using_a_fed_claim_is_bound_on_its_local_volume_node_and_the_claim_is_bound() -> None:
    async with live() as s:
        await s.cluster.UpsertNodes(cluster_pb2.UpsertNodesRequest(nodes=[node("n1"), node("n2"), node("n3")]))
        # In order, each call answered before the next (the class first: a claim
        # of a class not yet known would be bound at once, as an Immediate one).
        sc = await s.cluster.UpsertStorageClasses(
            cluster_pb2.UpsertStorageClassesRequest(storage_classes=[local_class()])
        )
        pv = await s.cluster.UpsertPersistentVolumes(
            cluster_pb2.UpsertPersistentVolumesRequest(persistent_volumes=[local_pv("local-n2", "n2")])
        )
        pvcs = await s.cluster.UpsertPersistentVolumeClaims(
            cluster_pb2.UpsertPersistentVolumeClaimsRequest(persistent_volume_claims=[pvc("data")])
        )
        assert (sc.upserted, pv.upserted, pvcs.upserted) == (1, 1, 1)
        assert s.feed.persistent_volume_claims["default/data"].status.phase == "Pending"  # WaitForFirstConsumer

        submitted = await s.scheduler.Submit(
            scheduler_pb2.SubmitRequest(pods=[pod("db", volumes=[pvc_volume("data")])])
        )
        assert submitted.results[0].accepted, submitted.results[0].message

        assert await s.bound_node("default/db") == "n2"
        assert s.feed.pods["default/db"].spec.volumes[0].persistent_volume_claim is not None
        claim = s.feed.persistent_volume_claims["default/data"]
        assert (claim.spec.volume_name, claim.status.phase) == ("local-n2", "Bound")


async def test_a_pod_referencing_a_fed_resource_claim_is_bound_with_the_claim_allocated_there() -> None:
    async with live() as s:
        await s.cluster.UpsertNodes(cluster_pb2.UpsertNodesRequest(nodes=[node("n1"), node("n2")]))
        assert (
            await s.cluster.UpsertDeviceClasses(cluster_pb2.UpsertDeviceClassesRequest(device_classes=[gpu_class()]))
        ).upserted == 1
        slices = cluster_pb2.UpsertResourceSlicesRequest(resource_slices=[gpu_slice("n2", 2)])
        assert (await s.cluster.UpsertResourceSlices(slices)).upserted == 1
        claims = cluster_pb2.UpsertResourceClaimsRequest(resource_claims=[gpu_claim("gpu-claim")])
        assert (await s.cluster.UpsertResourceClaims(claims)).upserted == 1

        p = pod(
            "trainer",
            resource_claims=[model_pb2.PodResourceClaim(name="gpu", resource_claim_name="gpu-claim")],
            container_claims=["gpu"],
        )
        submitted = await s.scheduler.Submit(scheduler_pb2.SubmitRequest(pods=[p]))
        assert submitted.results[0].accepted, submitted.results[0].message

        assert await s.bound_node("default/trainer") == "n2"
        claim = s.feed.resource_claims["default/gpu-claim"]
        assert claim.status.allocation is not None
        ((driver, pool, device),) = [(r.driver, r.pool, r.device) for r in claim.status.allocation.devices.results]
        assert (driver, pool) == (DRIVER, "n2") and device in ("gpu-0", "gpu-1")
        uid = s.feed.pods["default/trainer"].metadata.uid
        assert [(r.resource, r.name, r.uid) for r in claim.status.reserved_for] == [("pods", "trainer", uid)]
        # The contract reads back what the embedded cluster holds.
        assert convert.resource_claim_to_pb(claim).status.allocation.devices.results[0].pool == "n2"


# ---------------------------------------------------------------- the feed: whole batches or nothing


@contextlib.asynccontextmanager
async def feeding() -> AsyncIterator[tuple[cluster_pb2_grpc.ClusterStub, EmbeddedCluster]]:
    cfg = config.parse({"grpc": {"host": "127.0.0.1", "port": 0}})
    berth = app.build(cfg)
    server = GrpcServer(berth.core, berth.extender, berth.cluster)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
            yield cluster_pb2_grpc.ClusterStub(ch), berth.cluster
    finally:
        await server.stop(0)


def _stored(feed: EmbeddedCluster) -> dict[str, int]:
    return {
        "pvs": len(feed.persistent_volumes),
        "pvcs": len(feed.persistent_volume_claims),
        "classes": len(feed.storage_classes),
        "csi": len(feed.csi_nodes),
        "device classes": len(feed.device_classes),
        "slices": len(feed.resource_slices),
        "claims": len(feed.resource_claims),
    }


def _csi_node_with_negative_count() -> model_pb2.CSINode:
    n = full_csi_node()
    n.metadata.name = "n2"
    n.spec.drivers[0].allocatable.count = -1
    return n


BAD_BATCHES = [
    (
        "UpsertPersistentVolumes",
        cluster_pb2.UpsertPersistentVolumesRequest(
            persistent_volumes=[
                local_pv("ok", "n1"),
                _with(lambda: local_pv("bad", "n1"), lambda m: m.spec.ClearField("access_modes")),
            ]
        ),
        "persistentVolumes[1].spec.accessModes: Required value",
    ),
    (
        "UpsertPersistentVolumes",
        cluster_pb2.UpsertPersistentVolumesRequest(
            persistent_volumes=[
                local_pv("ok", "n1"),
                _with(lambda: local_pv("bad", "n1"), lambda m: m.spec.access_modes.append("RWX")),
            ]
        ),
        'persistent_volumes[1].spec.access_modes[1]: Unsupported value: "RWX"',
    ),
    (
        "UpsertPersistentVolumeClaims",
        cluster_pb2.UpsertPersistentVolumeClaimsRequest(persistent_volume_claims=[pvc("ok"), pvc("ok")]),
        'persistentVolumeClaims[1].metadata.name: Duplicate value: "default/ok"',
    ),
    (
        "UpsertPersistentVolumeClaims",
        cluster_pb2.UpsertPersistentVolumeClaimsRequest(
            persistent_volume_claims=[
                pvc("ok"),
                _with(lambda: pvc("bad"), lambda m: setattr(m.spec, "volume_mode", "Tape")),
            ]
        ),
        'persistent_volume_claims[1].spec.volume_mode: Unsupported value: "Tape"',
    ),
    (
        "UpsertStorageClasses",
        cluster_pb2.UpsertStorageClassesRequest(
            storage_classes=[
                local_class(),
                model_pb2.StorageClass(metadata=meta("x"), volume_binding_mode="WaitForFirstConsumer"),
            ]
        ),
        "storageClasses[1].provisioner: Required value",
    ),
    (
        "UpsertCSINodes",
        cluster_pb2.UpsertCSINodesRequest(csi_nodes=[full_csi_node(), _csi_node_with_negative_count()]),
        "csiNodes[1].spec.drivers[0].allocatable.count: Invalid value: -1",
    ),
    (
        "UpsertDeviceClasses",
        cluster_pb2.UpsertDeviceClassesRequest(
            device_classes=[gpu_class(), _with(gpu_class, lambda m: setattr(m.metadata, "name", "Not_A_Name"))]
        ),
        'deviceClasses[1].metadata.name: Invalid value: "Not_A_Name"',
    ),
    (
        "UpsertResourceSlices",
        cluster_pb2.UpsertResourceSlicesRequest(
            resource_slices=[
                gpu_slice("n1", 1),
                _with(lambda: gpu_slice("n2", 1), lambda m: setattr(m.spec.pool, "resource_slice_count", 0)),
            ]
        ),
        "resourceSlices[1].spec.pool.resourceSliceCount: Invalid value: 0",
    ),
    (
        "UpsertResourceSlices",
        cluster_pb2.UpsertResourceSlicesRequest(
            resource_slices=[
                gpu_slice("n1", 1),
                _with(
                    lambda: gpu_slice("n2", 1), lambda m: setattr(m.spec.devices[0].capacity["memory"], "value", "1Zz")
                ),
            ]
        ),
        'resource_slices[1].spec.devices[0].capacity[memory].value: Invalid value: "1Zz"',
    ),
    (
        "UpsertResourceClaims",
        cluster_pb2.UpsertResourceClaimsRequest(
            resource_claims=[
                gpu_claim("ok"),
                _with(lambda: gpu_claim("bad"), lambda m: m.spec.devices.requests[0].ClearField("exactly")),
            ]
        ),
        "resourceClaims[1].spec.devices.requests[0]",
    ),
    (
        "UpsertResourceClaims",
        cluster_pb2.UpsertResourceClaimsRequest(
            resource_claims=[
                gpu_claim("ok"),
                _with(
                    lambda: gpu_claim("bad"),
                    lambda m: setattr(m.spec.devices.requests[0].exactly, "allocation_mode", "Most"),
                ),
            ]
        ),
        'resource_claims[1].spec.devices.requests[0].exactly.allocation_mode: Unsupported value: "Most"',
    ),
]


@pytest.mark.parametrize(
    ("method", "request_msg", "message"),
    BAD_BATCHES,
    ids=[
        "a PV without access modes",
        "a PV with an unknown access mode",
        "a claim twice",
        "a claim with an unknown volume mode",
        "a class without a provisioner",
        "a CSINode with a negative volume limit",
        "a device class with a bad name",
        "a slice with no slices in its pool",
        "a slice with a malformed capacity",
        "a claim with a request of no kind",
        "a claim with an unknown allocation mode",
    ],
)
async def test_a_batch_with_one_bad_object_is_invalid_argument_and_changes_nothing(
    method: str, request_msg: Message, message: str
) -> None:
    async with feeding() as (stub, feed):
        before = _stored(feed)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await getattr(stub, method)(request_msg)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (err.value.details() or "").startswith(message), err.value.details()
        assert _stored(feed) == before


async def test_deletes_remove_what_they_name_and_skip_the_unknown() -> None:
    async with feeding() as (stub, feed):
        await stub.UpsertStorageClasses(cluster_pb2.UpsertStorageClassesRequest(storage_classes=[local_class()]))
        await stub.UpsertPersistentVolumes(
            cluster_pb2.UpsertPersistentVolumesRequest(persistent_volumes=[local_pv("pv", "n1")])
        )
        await stub.UpsertPersistentVolumeClaims(
            cluster_pb2.UpsertPersistentVolumeClaimsRequest(persistent_volume_claims=[pvc("data")])
        )
        await stub.UpsertCSINodes(cluster_pb2.UpsertCSINodesRequest(csi_nodes=[full_csi_node()]))
        await stub.UpsertDeviceClasses(cluster_pb2.UpsertDeviceClassesRequest(device_classes=[gpu_class()]))
        await stub.UpsertResourceSlices(cluster_pb2.UpsertResourceSlicesRequest(resource_slices=[gpu_slice("n1", 1)]))
        await stub.UpsertResourceClaims(cluster_pb2.UpsertResourceClaimsRequest(resource_claims=[gpu_claim("c")]))
        assert set(_stored(feed).values()) == {1}

        claim_refs = [cluster_pb2.NamespacedName(name="data"), cluster_pb2.NamespacedName(namespace="x", name="data")]
        deletes: list[tuple[str, Message]] = [
            (
                "DeletePersistentVolumeClaims",
                cluster_pb2.DeletePersistentVolumeClaimsRequest(persistent_volume_claims=claim_refs),
            ),
            ("DeletePersistentVolumes", cluster_pb2.DeletePersistentVolumesRequest(names=["pv", "nope"])),
            ("DeleteStorageClasses", cluster_pb2.DeleteStorageClassesRequest(names=["local", "nope"])),
            ("DeleteCSINodes", cluster_pb2.DeleteCSINodesRequest(names=["n1", "nope"])),
            (
                "DeleteResourceClaims",
                cluster_pb2.DeleteResourceClaimsRequest(
                    resource_claims=[cluster_pb2.NamespacedName(namespace="default", name="c")]
                ),
            ),
            ("DeleteResourceSlices", cluster_pb2.DeleteResourceSlicesRequest(names=["n1-gpus", "nope"])),
            ("DeleteDeviceClasses", cluster_pb2.DeleteDeviceClassesRequest(names=["gpu", "nope"])),
        ]
        for method, req in deletes:
            assert (await getattr(stub, method)(req)).deleted == 1, method
        assert set(_stored(feed).values()) == {0}
