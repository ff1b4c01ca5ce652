"""Storage: berth.v1 ``PersistentVolumeClaim``, ``PersistentVolume``,
``StorageClass`` and ``CSINode`` (protos/berth/v1/model.proto) and the
model's :mod:`berth.cluster.storage` (core/v1 and storage.k8s.io/v1, keeping
what the volume plugins read). Access modes, volume modes and binding modes
outside Kubernetes' enumerations are refused, naming the field."""

from __future__ import annotations

from berth.adapters.grpc.convert._common import (
    _at,
    _enum,
    _enums,
    _ls_from_pb,
    _ls_to_pb,
    _meta_from_pb,
    _meta_to_pb,
    _node_selector_from_pb,
    _node_selector_to_pb,
    _opt,
    _rl_from_pb,
    _rl_to_pb,
)
from berth.api.v1 import model_pb2 as pb
from berth.cluster import model, storage

__all__ = [
    "csi_node_from_pb",
    "csi_node_to_pb",
    "pv_from_pb",
    "pv_to_pb",
    "pvc_from_pb",
    "pvc_to_pb",
    "storage_class_from_pb",
    "storage_class_to_pb",
]


# The values Kubernetes' enumerations take in storage objects; _common._enum refuses
# any other, naming the field (the API server's field.NotSupported).
_ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
_VOLUME_MODES = ("Filesystem", "Block")
_BINDING_MODES = ("Immediate", "WaitForFirstConsumer")


def _pvc_spec_from_pb(s: pb.PersistentVolumeClaimSpec) -> storage.PersistentVolumeClaimSpec:
    return storage.PersistentVolumeClaimSpec(
        access_modes=_enums(s.access_modes, _ACCESS_MODES, "spec.access_modes"),
        selector=_ls_from_pb(s.selector, s.HasField("selector")),
        resources=storage.VolumeResourceRequirements(
            requests=_rl_from_pb(s.resources.requests, "spec.resources.requests"),
            limits=_rl_from_pb(s.resources.limits, "spec.resources.limits"),
        ),
        volume_name=s.volume_name,
        storage_class_name=_opt(s, "storage_class_name"),
        volume_mode=_enum(s.volume_mode, _VOLUME_MODES, "spec.volume_mode") or None,
        volume_attributes_class_name=_opt(s, "volume_attributes_class_name"),
    )


def _pvc_spec_to_pb(s: storage.PersistentVolumeClaimSpec) -> pb.PersistentVolumeClaimSpec:
    return pb.PersistentVolumeClaimSpec(
        access_modes=s.access_modes,
        selector=_ls_to_pb(s.selector),
        resources=pb.VolumeResourceRequirements(
            requests=_rl_to_pb(s.resources.requests), limits=_rl_to_pb(s.resources.limits)
        ),
        volume_name=s.volume_name,
        storage_class_name=s.storage_class_name,
        volume_mode=s.volume_mode or "",
        volume_attributes_class_name=s.volume_attributes_class_name,
    )


def pvc_from_pb(c: pb.PersistentVolumeClaim, path: str = "") -> storage.PersistentVolumeClaim:
    """The model's PersistentVolumeClaim; InvalidArgument names the field under ``path``."""
    with _at(path):
        return storage.PersistentVolumeClaim(
            metadata=_meta_from_pb(c.metadata),
            spec=_pvc_spec_from_pb(c.spec),
            status=storage.PersistentVolumeClaimStatus(
                phase=c.status.phase,
                access_modes=_enums(c.status.access_modes, _ACCESS_MODES, "status.access_modes"),
                capacity=_rl_from_pb(c.status.capacity, "status.capacity"),
            ),
        )


def pvc_to_pb(c: storage.PersistentVolumeClaim) -> pb.PersistentVolumeClaim:
    return pb.PersistentVolumeClaim(
        metadata=_meta_to_pb(c.metadata),
        spec=_pvc_spec_to_pb(c.spec),
        status=pb.PersistentVolumeClaimStatus(
            phase=c.status.phase, access_modes=c.status.access_modes, capacity=_rl_to_pb(c.status.capacity)
        ),
    )


def pv_from_pb(v: pb.PersistentVolume, path: str = "") -> storage.PersistentVolume:
    """The model's PersistentVolume; InvalidArgument names the field under ``path``."""
    with _at(path):
        s = v.spec
        spec = storage.PersistentVolumeSpec(
            capacity=_rl_from_pb(s.capacity, "spec.capacity"),
            access_modes=_enums(s.access_modes, _ACCESS_MODES, "spec.access_modes"),
            claim_ref=(
                storage.ObjectReference(
                    kind=s.claim_ref.kind,
                    namespace=s.claim_ref.namespace,
                    name=s.claim_ref.name,
                    uid=s.claim_ref.uid,
                    api_version=s.claim_ref.api_version,
                    resource_version=s.claim_ref.resource_version,
                )
                if s.HasField("claim_ref")
                else None
            ),
            persistent_volume_reclaim_policy=s.persistent_volume_reclaim_policy,
            storage_class_name=s.storage_class_name,
            volume_mode=_enum(s.volume_mode, _VOLUME_MODES, "spec.volume_mode") or None,
            node_affinity=(
                storage.VolumeNodeAffinity(
                    required=(
                        _node_selector_from_pb(s.node_affinity.required)
                        if s.node_affinity.HasField("required")
                        else None
                    )
                )
                if s.HasField("node_affinity")
                else None
            ),
            volume_attributes_class_name=_opt(s, "volume_attributes_class_name"),
        )
        which = s.WhichOneof("source")
        if which == "csi":
            spec.csi = storage.CSIPersistentVolumeSource(
                driver=s.csi.driver, volume_handle=s.csi.volume_handle, read_only=s.csi.read_only
            )
        elif which == "gce_persistent_disk":
            spec.gce_persistent_disk = _gce_from_pb(s.gce_persistent_disk)
        elif which == "aws_elastic_block_store":
            spec.aws_elastic_block_store = _aws_from_pb(s.aws_elastic_block_store)
        elif which == "local":
            spec.local = storage.LocalVolumeSource(path=s.local.path)
        elif which == "host_path":
            spec.host_path = storage.HostPathVolumeSource(path=s.host_path.path)
        return storage.PersistentVolume(
            metadata=_meta_from_pb(v.metadata),
            spec=spec,
            status=storage.PersistentVolumeStatus(phase=v.status.phase),
        )


def pv_to_pb(v: storage.PersistentVolume) -> pb.PersistentVolume:
    s = v.spec
    ref = s.claim_ref
    spec = pb.PersistentVolumeSpec(
        capacity=_rl_to_pb(s.capacity),
        access_modes=s.access_modes,
        claim_ref=(
            pb.ObjectReference(
                kind=ref.kind,
                namespace=ref.namespace,
                name=ref.name,
                uid=ref.uid,
                api_version=ref.api_version,
                resource_version=ref.resource_version,
            )
            if ref is not None
            else None
        ),
        persistent_volume_reclaim_policy=s.persistent_volume_reclaim_policy,
        storage_class_name=s.storage_class_name,
        volume_mode=s.volume_mode or "",
        node_affinity=(
            pb.VolumeNodeAffinity(required=_node_selector_to_pb(s.node_affinity.required))
            if s.node_affinity is not None
            else None
        ),
        volume_attributes_class_name=s.volume_attributes_class_name,
    )
    if s.csi is not None:
        spec.csi.CopyFrom(
            pb.CSIPersistentVolumeSource(
                driver=s.csi.driver, volume_handle=s.csi.volume_handle, read_only=s.csi.read_only
            )
        )
    elif s.gce_persistent_disk is not None:
        spec.gce_persistent_disk.CopyFrom(_gce_to_pb(s.gce_persistent_disk))
    elif s.aws_elastic_block_store is not None:
        spec.aws_elastic_block_store.CopyFrom(_aws_to_pb(s.aws_elastic_block_store))
    elif s.local is not None:
        spec.local.CopyFrom(pb.LocalVolumeSource(path=s.local.path))
    elif s.host_path is not None:
        spec.host_path.CopyFrom(pb.HostPathVolumeSource(path=s.host_path.path))
    return pb.PersistentVolume(
        metadata=_meta_to_pb(v.metadata), spec=spec, status=pb.PersistentVolumeStatus(phase=v.status.phase)
    )


def storage_class_from_pb(c: pb.StorageClass, path: str = "") -> storage.StorageClass:
    with _at(path):
        return storage.StorageClass(
            metadata=_meta_from_pb(c.metadata),
            provisioner=c.provisioner,
            parameters=dict(c.parameters),
            reclaim_policy=c.reclaim_policy or None,
            volume_binding_mode=_enum(c.volume_binding_mode, _BINDING_MODES, "volume_binding_mode") or None,
            allowed_topologies=[
                storage.TopologySelectorTerm(
                    match_label_expressions=[
                        storage.TopologySelectorLabelRequirement(key=r.key, values=list(r.values))
                        for r in t.match_label_expressions
                    ]
                )
                for t in c.allowed_topologies
            ],
        )


def storage_class_to_pb(c: storage.StorageClass) -> pb.StorageClass:
    return pb.StorageClass(
        metadata=_meta_to_pb(c.metadata),
        provisioner=c.provisioner,
        parameters=c.parameters,
        reclaim_policy=c.reclaim_policy or "",
        volume_binding_mode=c.volume_binding_mode or "",
        allowed_topologies=[
            pb.TopologySelectorTerm(
                match_label_expressions=[
                    pb.TopologySelectorLabelRequirement(key=r.key, values=r.values) for r in t.match_label_expressions
                ]
            )
            for t in c.allowed_topologies
        ],
    )


def csi_node_from_pb(n: pb.CSINode, path: str = "") -> storage.CSINode:
    with _at(path):
        return storage.CSINode(
            metadata=_meta_from_pb(n.metadata),
            spec=storage.CSINodeSpec(
                drivers=[
                    storage.CSINodeDriver(
                        name=d.name,
                        node_id=d.node_id,
                        topology_keys=list(d.topology_keys),
                        allocatable=(
                            storage.VolumeNodeResources(count=_opt(d.allocatable, "count"))
                            if d.HasField("allocatable")
                            else None
                        ),
                    )
                    for d in n.spec.drivers
                ]
            ),
        )


def csi_node_to_pb(n: storage.CSINode) -> pb.CSINode:
    return pb.CSINode(
        metadata=_meta_to_pb(n.metadata),
        spec=pb.CSINodeSpec(
            drivers=[
                pb.CSINodeDriver(
                    name=d.name,
                    node_id=d.node_id,
                    topology_keys=d.topology_keys or (),
                    allocatable=(
                        pb.VolumeNodeResources(count=d.allocatable.count) if d.allocatable is not None else None
                    ),
                )
                for d in n.spec.drivers
            ]
        ),
    )


# In-tree disks: a pod's volume and a PersistentVolume carry the same sources.


def _gce_from_pb(g: pb.GCEPersistentDiskVolumeSource) -> model.GCEPersistentDiskVolumeSource:
    return model.GCEPersistentDiskVolumeSource(
        pd_name=g.pd_name, fs_type=g.fs_type, partition=g.partition, read_only=g.read_only
    )


def _aws_from_pb(a: pb.AWSElasticBlockStoreVolumeSource) -> model.AWSElasticBlockStoreVolumeSource:
    return model.AWSElasticBlockStoreVolumeSource(
        volume_id=a.volume_id, fs_type=a.fs_type, partition=a.partition, read_only=a.read_only
    )


def _gce_to_pb(g: model.GCEPersistentDiskVolumeSource) -> pb.GCEPersistentDiskVolumeSource:
    return pb.GCEPersistentDiskVolumeSource(
        pd_name=g.pd_name, fs_type=g.fs_type, partition=g.partition, read_only=g.read_only
    )


def _aws_to_pb(a: model.AWSElasticBlockStoreVolumeSource) -> pb.AWSElasticBlockStoreVolumeSource:
    return pb.AWSElasticBlockStoreVolumeSource(
        volume_id=a.volume_id, fs_type=a.fs_type, partition=a.partition, read_only=a.read_only
    )
