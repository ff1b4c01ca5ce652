"""Builders for the volume plugins' tables, as upstream's ``test_utils.go``
(``makePV``, ``makePVC``, ``makeNode``) builds them, and a cluster that takes
storage objects as informers report them (unvalidated, as the Go tables are)."""

from __future__ import annotations

from typing import Any

import msgspec

from berth.cluster import model, storage
from berth.testing import Cluster, make_node

HOSTNAME = "kubernetes.io/hostname"


def node(name: str, **labels: str) -> model.Node:
    """makeNode: hostname label set."""
    return make_node(name, labels={HOSTNAME: name, **labels})


def pv(
    name: str,
    cls: str = "",
    *,
    phase: str = "",
    capacity: str | None = None,
    affinity: dict[str, list[str]] | None = None,
    labels: dict[str, str] | None = None,
    claim: tuple[str, str] | None = None,
    csi: tuple[str, str] | None = None,
    version: str = "",
    **spec: Any,
) -> storage.PersistentVolume:
    raw: dict[str, Any] = {"storageClassName": cls, **spec}
    if capacity is not None:
        raw["capacity"] = {"storage": capacity}
    if affinity is not None:
        exprs = [{"key": k, "operator": "In", "values": v} for k, v in affinity.items()]
        raw["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}
    if claim is not None:
        raw["claimRef"] = {"namespace": claim[0], "name": claim[1]}
    if csi is not None:
        raw["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    return msgspec.convert(
        {
            "metadata": {"name": name, "labels": labels or {}, "resourceVersion": version},
            "spec": raw,
            "status": {"phase": phase},
        },
        storage.PersistentVolume,
    )


def pvc(
    name: str,
    cls: str | None = "",
    *,
    bound_to: str = "",
    phase: str = "",
    request: str | None = None,
    modes: tuple[str, ...] = (),
    namespace: str = "default",
    annotations: dict[str, str] | None = None,
    owner_uid: str = "",
    version: str = "",
) -> storage.PersistentVolumeClaim:
    ann = dict(annotations or {})
    if bound_to:
        ann[storage.ANN_BIND_COMPLETED] = "true"  # withBoundPV
    spec: dict[str, Any] = {"volumeName": bound_to, "accessModes": list(modes)}
    if cls is not None:
        spec["storageClassName"] = cls
    if request is not None:
        spec["resources"] = {"requests": {"storage": request}}
    owners = [{"kind": "Pod", "name": "p", "uid": owner_uid, "controller": True}] if owner_uid else []
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}",
                "annotations": ann,
                "ownerReferences": owners,
                "resourceVersion": version,
            },
            "spec": spec,
            "status": {"phase": phase},
        },
        storage.PersistentVolumeClaim,
    )


def sc(
    name: str, mode: str | None = "WaitForFirstConsumer", provisioner: str = "", **extra: Any
) -> storage.StorageClass:
    return msgspec.convert(
        {"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode, **extra},
        storage.StorageClass,
    )


def csi_node(name: str, limits: dict[str, int | None], annotations: dict[str, str] | None = None) -> storage.CSINode:
    drivers = [
        {"name": d, "nodeID": name, **({"allocatable": {"count": c}} if c is not None else {})}
        for d, c in limits.items()
    ]
    return msgspec.convert(
        {"metadata": {"name": name, "annotations": annotations or {}}, "spec": {"drivers": drivers}}, storage.CSINode
    )


def feed(cluster: Cluster, *objects: Any) -> None:
    """Storage objects into the core as an informer delivers them."""
    core, source = cluster.berth.core, cluster.berth.cluster
    for o in objects:
        if isinstance(o, storage.PersistentVolume):
            core.on_persistent_volume(o, source=source)
        elif isinstance(o, storage.PersistentVolumeClaim):
            core.on_persistent_volume_claim(o, source=source)
        elif isinstance(o, storage.StorageClass):
            core.on_storage_class(o)
        elif isinstance(o, storage.CSINode):
            core.on_csi_node(o)
        elif isinstance(o, storage.CSIDriver):
            core.on_csi_driver(o)
        elif isinstance(o, storage.CSIStorageCapacity):
            core.on_csi_storage_capacity(o)
        else:
            raise TypeError(o)


def with_volumes(pod: model.Pod, *volumes: dict[str, Any]) -> model.Pod:
    """The pod with ``spec.volumes`` (Kubernetes JSON) added."""
    vols = [msgspec.convert(v, model.Volume) for v in volumes]
    return msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, volumes=[*pod.spec.volumes, *vols]))


def claim_volume(claim: str, name: str = "", read_only: bool = False) -> dict[str, Any]:
    return {"name": name or claim, "persistentVolumeClaim": {"claimName": claim, "readOnly": read_only}}
