"""How stored objects become bytes and back (msgpack, by msgspec: the
model's own Structs, so nothing here lists their fields).

``KINDS`` names every kind of object the embedded cluster keeps, by the
attribute that holds it on :class:`~berth.cluster.embedded.EmbeddedCluster`
(which is also its field in :class:`~berth.cluster.manifests.Manifests`,
but for ``claim_templates``). A kind missing here is not restored: add it
with its type when a new kind is fed.
"""

from __future__ import annotations

from typing import Any

import msgspec

from berth.cluster import dra, model, storage, workload_api
from berth.cluster import queues as cluster_queues
from berth.framework.decision import Decision

__all__ = [
    "DECISIONS",
    "KINDS",
    "QUEUE_OBJECTS",
    "SCHEDULING_GROUPS",
    "WORKLOADS",
    "decode",
    "decode_decision",
    "encode",
    "encode_decision",
]

#: attribute of the embedded cluster -> the type of its values.
KINDS: dict[str, Any] = {
    "namespaces": model.Namespace,
    "nodes": model.Node,
    "pod_groups": model.PodGroup,
    "pdbs": model.PodDisruptionBudget,
    "device_classes": dra.DeviceClass,
    "resource_slices": dra.ResourceSlice,
    "claim_templates": dra.ResourceClaimTemplate,
    "resource_claims": dra.ResourceClaim,
    "storage_classes": storage.StorageClass,
    "csi_drivers": storage.CSIDriver,
    "csi_nodes": storage.CSINode,
    "csi_storage_capacities": storage.CSIStorageCapacity,
    "persistent_volumes": storage.PersistentVolume,
    "persistent_volume_claims": storage.PersistentVolumeClaim,
    "pods": model.Pod,
}
#: Services, ReplicationControllers, ReplicaSets, StatefulSets: keyed
#: "KIND NAMESPACE/NAME", decoded by the kind in their key.
WORKLOADS = "workloads"
#: The submit ledger: idempotency key -> the first outcome.
SUBMITS = "submits"
#: The core's, not the cluster's: Workload API PodGroups and Workloads
#: (scheduling.k8s.io) keyed "KIND NAMESPACE/NAME", and Queue objects
#: (berth.dev/v1alpha1) by name.
SCHEDULING_GROUPS = "scheduling_groups"
QUEUE_OBJECTS = "queue_objects"
_SCHEDULING_GROUP_KINDS: dict[str, Any] = {"PodGroup": workload_api.PodGroup, "Workload": workload_api.Workload}
DECISIONS = "decisions"

_encoder = msgspec.msgpack.Encoder()
_decoders: dict[Any, msgspec.msgpack.Decoder[Any]] = {}


def _decoder(t: Any) -> msgspec.msgpack.Decoder[Any]:
    d = _decoders.get(t)
    if d is None:
        d = _decoders[t] = msgspec.msgpack.Decoder(t)
    return d


def encode(kind: str, value: object) -> bytes:
    return _encoder.encode(value)


def decode(kind: str, key: str, raw: bytes) -> object:
    """The object stored under ``kind``/``key``; ValueError for an unknown kind."""
    if kind == WORKLOADS:
        return _decoder(model.WORKLOAD_KINDS[key.partition(" ")[0]]).decode(raw)
    if kind == SUBMITS:
        return _decoder(tuple[str, str, str]).decode(raw)
    if kind == SCHEDULING_GROUPS:
        return _decoder(_SCHEDULING_GROUP_KINDS[key.partition(" ")[0]]).decode(raw)
    if kind == QUEUE_OBJECTS:
        return _decoder(cluster_queues.Queue).decode(raw)
    t = KINDS.get(kind)
    if t is None:
        raise ValueError(f"state store: unknown kind {kind!r} (a newer Berth's?)")
    return _decoder(t).decode(raw)


def encode_decision(d: Decision) -> bytes:
    return _encoder.encode(d)


def decode_decision(raw: bytes) -> Decision:
    result: Decision = _decoder(Decision).decode(raw)
    return result
