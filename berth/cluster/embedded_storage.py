"""The embedded cluster's storage: PersistentVolumes, PersistentVolumeClaims,
StorageClasses, CSINodes, CSIDrivers and CSIStorageCapacities, fed in
all-or-nothing batches like its other kinds, and the PV controller's part.

No kube-controller-manager runs next to the embedded cluster, so it binds
claims as the PV controller would (``pkg/controller/volume/persistentvolume``'s
``syncClaim`` / ``syncVolume``, reduced to what scheduling observes): a PV
whose ``claimRef`` names an existing, unbound claim — the one VolumeBinding's
PreBind chose, or one a provisioner created for a ``selected-node`` claim — is
bound to it (PV ``Bound``; the claim gets ``volumeName``, the
``pv.kubernetes.io/bind-completed`` annotation and phase ``Bound``); an
unbound claim whose class binds Immediately (or that has no class) is bound
to the smallest matching Available PV (``FindMatchingVolume``); a PV with no
claim is ``Available``; a bound claim whose PV is gone is ``Lost``.
WaitForFirstConsumer claims wait for the scheduler, and nothing provisions
volumes here: a feeder (or a test) plays the external provisioner by
upserting a PV pre-bound to the claim.

Every stored PV and PVC carries a ``metadata.resourceVersion`` that moves on
each write; :meth:`StorageObjects.update_persistent_volume` and
:meth:`~StorageObjects.update_persistent_volume_claim` (the Source's writes,
VolumeBinding's PreBind) refuse a stale one with
:class:`~berth.cluster.sources.Conflict`, as the API server's update does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import msgspec

from berth.cluster import model, storage, validation
from berth.cluster.manifests import default_uid
from berth.cluster.sources import ClusterListener, Conflict, Source
from berth.errors import InvalidArgument, NotFound

__all__ = ["StorageObjects"]

T = TypeVar("T")


def _checked(at: str, obj: T, check: Callable[[T], None]) -> None:
    try:
        check(obj)
    except ValueError as e:
        raise InvalidArgument(f"{at}.{e}") from None


def _unique(seen: dict[str, int], value: str, batch: str, i: int, what: str) -> None:
    j = seen.setdefault(value, i)
    if j != i:
        raise validation.duplicate(f"{batch}[{i}].metadata.name", value, f"{what} as {batch}[{j}]")


def _meta(md: model.ObjectMeta, *, namespaced: bool) -> model.ObjectMeta:
    namespace = (md.namespace or "default") if namespaced else ""
    return msgspec.structs.replace(md, namespace=namespace, uid=md.uid or default_uid(namespace, md.name))


class StorageObjects:
    """The storage half of :class:`~berth.cluster.embedded.EmbeddedCluster`; see the module docstring."""

    core: ClusterListener

    def _init_storage(self) -> None:
        self.persistent_volumes: dict[str, storage.PersistentVolume] = {}
        self.persistent_volume_claims: dict[str, storage.PersistentVolumeClaim] = {}  # NAMESPACE/NAME
        self.storage_classes: dict[str, storage.StorageClass] = {}
        self.csi_nodes: dict[str, storage.CSINode] = {}
        self.csi_drivers: dict[str, storage.CSIDriver] = {}
        self.csi_storage_capacities: dict[str, storage.CSIStorageCapacity] = {}  # NAMESPACE/NAME
        self._storage_version = 0

    def _as_source(self) -> Source:
        raise NotImplementedError

    def _next_version(self) -> str:
        self._storage_version += 1
        return str(self._storage_version)

    # ------------------------------------------------------------ feeding

    def upsert_storage_classes(self, classes: Iterable[storage.StorageClass]) -> int:
        """StorageClasses, all or none; ``volumeBindingMode`` defaults to Immediate (the API server's default)."""
        batch = [
            msgspec.structs.replace(
                sc,
                metadata=_meta(sc.metadata, namespaced=False),
                volume_binding_mode=sc.volume_binding_mode or "Immediate",
            )
            for sc in classes
        ]
        seen: dict[str, int] = {}
        for i, sc in enumerate(batch):
            _checked(f"storageClasses[{i}]", sc, storage.validate_storage_class)
            _unique(seen, sc.metadata.name, "storageClasses", i, "the same name")
            old = self.storage_classes.get(sc.metadata.name)
            if old is not None and old.volume_binding_mode != sc.volume_binding_mode:
                raise InvalidArgument(f"storageClasses[{i}].volumeBindingMode: field is immutable")
        for sc in batch:
            self.storage_classes[sc.metadata.name] = sc
            self.core.on_storage_class(sc)
        self._sync_volumes()
        return len(batch)

    def delete_storage_classes(self, names: Iterable[str]) -> int:
        n = 0
        for name in names:
            if self.storage_classes.pop(name, None) is not None:
                self.core.on_storage_class_delete(name)
                n += 1
        return n

    def upsert_persistent_volumes(self, pvs: Iterable[storage.PersistentVolume]) -> int:
        """PersistentVolumes, all or none. Status is the PV controller's: a new
        PV is Available (or Bound, once its claimRef's claim is bound to it)."""
        batch = [msgspec.structs.replace(pv, metadata=_meta(pv.metadata, namespaced=False)) for pv in pvs]
        seen: dict[str, int] = {}
        for i, pv in enumerate(batch):
            _checked(f"persistentVolumes[{i}]", pv, storage.validate_pv)
            _unique(seen, pv.metadata.name, "persistentVolumes", i, "the same name")
        for pv in batch:
            old = self.persistent_volumes.get(pv.metadata.name)
            status = old.status if old is not None else storage.PersistentVolumeStatus(phase="Pending")
            self._store_pv(msgspec.structs.replace(pv, status=status))
        self._sync_volumes()
        return len(batch)

    def delete_persistent_volumes(self, names: Iterable[str]) -> int:
        n = 0
        for name in names:
            if self.persistent_volumes.pop(name, None) is not None:
                self.core.on_persistent_volume_delete(name)
                n += 1
        self._sync_volumes()
        return n

    def upsert_persistent_volume_claims(self, claims: Iterable[storage.PersistentVolumeClaim]) -> int:
        """PersistentVolumeClaims, all or none (``default`` namespace when none)."""
        batch = [msgspec.structs.replace(c, metadata=_meta(c.metadata, namespaced=True)) for c in claims]
        seen: dict[str, int] = {}
        for i, c in enumerate(batch):
            _checked(f"persistentVolumeClaims[{i}]", c, storage.validate_pvc)
            _unique(seen, c.key, "persistentVolumeClaims", i, "the same namespace and name")
        for c in batch:
            old = self.persistent_volume_claims.get(c.key)
            status = c.status
            if old is not None and old.metadata.uid == c.metadata.uid:
                status = old.status
            elif not status.phase:
                status = storage.PersistentVolumeClaimStatus(phase="Pending")
            self._store_pvc(msgspec.structs.replace(c, status=status))
        self._sync_volumes()
        return len(batch)

    def delete_persistent_volume_claims(self, keys: Iterable[str]) -> int:
        """By ``NAMESPACE/NAME``; unknown keys are skipped."""
        n = 0
        for key in keys:
            c = self.persistent_volume_claims.pop(key, None)
            if c is not None:
                self.core.on_persistent_volume_claim_delete(c.metadata.namespace, c.metadata.name)
                n += 1
        return n

    def upsert_csi_nodes(self, objs: Iterable[storage.CSINode]) -> int:
        batch = [msgspec.structs.replace(o, metadata=_meta(o.metadata, namespaced=False)) for o in objs]
        seen: dict[str, int] = {}
        for i, o in enumerate(batch):
            _checked(f"csiNodes[{i}]", o, storage.validate_csi_node)
            _unique(seen, o.metadata.name, "csiNodes", i, "the same name")
        for o in batch:
            self.csi_nodes[o.metadata.name] = o
            self.core.on_csi_node(o)
        return len(batch)

    def delete_csi_nodes(self, names: Iterable[str]) -> int:
        n = 0
        for name in names:
            if self.csi_nodes.pop(name, None) is not None:
                self.core.on_csi_node_delete(name)
                n += 1
        return n

    def upsert_csi_drivers(self, objs: Iterable[storage.CSIDriver]) -> int:
        batch = [msgspec.structs.replace(o, metadata=_meta(o.metadata, namespaced=False)) for o in objs]
        seen: dict[str, int] = {}
        for i, o in enumerate(batch):
            _checked(f"csiDrivers[{i}]", o, storage.validate_csi_driver)
            _unique(seen, o.metadata.name, "csiDrivers", i, "the same name")
        for o in batch:
            self.csi_drivers[o.metadata.name] = o
            self.core.on_csi_driver(o)
        return len(batch)

    def delete_csi_drivers(self, names: Iterable[str]) -> int:
        n = 0
        for name in names:
            if self.csi_drivers.pop(name, None) is not None:
                self.core.on_csi_driver_delete(name)
                n += 1
        return n

    def upsert_csi_storage_capacities(self, objs: Iterable[storage.CSIStorageCapacity]) -> int:
        batch = [msgspec.structs.replace(o, metadata=_meta(o.metadata, namespaced=True)) for o in objs]
        seen: dict[str, int] = {}
        for i, o in enumerate(batch):
            _checked(f"csiStorageCapacities[{i}]", o, storage.validate_csi_storage_capacity)
            key = model.pod_key(o.metadata.namespace, o.metadata.name)
            _unique(seen, key, "csiStorageCapacities", i, "the same namespace and name")
        for o in batch:
            self.csi_storage_capacities[model.pod_key(o.metadata.namespace, o.metadata.name)] = o
            self.core.on_csi_storage_capacity(o)
        return len(batch)

    def delete_csi_storage_capacities(self, keys: Iterable[str]) -> int:
        n = 0
        for key in keys:
            o = self.csi_storage_capacities.pop(key, None)
            if o is not None:
                self.core.on_csi_storage_capacity_delete(o.metadata.namespace, o.metadata.name)
                n += 1
        return n

    # ------------------------------------------------------------ Source writes

    async def update_persistent_volume(self, pv: storage.PersistentVolume) -> storage.PersistentVolume:
        name = pv.metadata.name
        current = self.persistent_volumes.get(name)
        if current is None:
            raise NotFound(f'persistentvolumes "{name}" not found')
        if pv.metadata.resource_version != current.metadata.resource_version:
            raise Conflict(_conflict("persistentvolumes", name))
        _checked("persistentVolume", pv, storage.validate_pv)
        stored = self._store_pv(msgspec.structs.replace(pv, status=current.status))
        self._sync_volumes()
        return stored

    async def update_persistent_volume_claim(self, pvc: storage.PersistentVolumeClaim) -> storage.PersistentVolumeClaim:
        current = self.persistent_volume_claims.get(pvc.key)
        if current is None:
            raise NotFound(f'persistentvolumeclaims "{pvc.metadata.name}" not found')
        if pvc.metadata.resource_version != current.metadata.resource_version:
            raise Conflict(_conflict("persistentvolumeclaims", pvc.metadata.name))
        _checked("persistentVolumeClaim", pvc, storage.validate_pvc)
        stored = self._store_pvc(msgspec.structs.replace(pvc, status=current.status))
        self._sync_volumes()
        return stored

    # ------------------------------------------------------------ the PV controller

    def _store_pv(self, pv: storage.PersistentVolume) -> storage.PersistentVolume:
        md = msgspec.structs.replace(pv.metadata, resource_version=self._next_version())
        pv = msgspec.structs.replace(pv, metadata=md)
        self.persistent_volumes[pv.metadata.name] = pv
        self.core.on_persistent_volume(pv, source=self._as_source())
        return pv

    def _store_pvc(self, pvc: storage.PersistentVolumeClaim) -> storage.PersistentVolumeClaim:
        md = msgspec.structs.replace(pvc.metadata, resource_version=self._next_version())
        pvc = msgspec.structs.replace(pvc, metadata=md)
        self.persistent_volume_claims[pvc.key] = pvc
        self.core.on_persistent_volume_claim(pvc, source=self._as_source())
        return pvc

    def _delay_binding(self, pvc: storage.PersistentVolumeClaim) -> bool:
        sc = self.storage_classes.get(storage.pvc_class(pvc)) if storage.pvc_class(pvc) else None
        return sc is not None and sc.volume_binding_mode == "WaitForFirstConsumer"

    def _bind(self, pv: storage.PersistentVolume, pvc: storage.PersistentVolumeClaim) -> None:
        """bindVolumeToClaim then bindClaimToVolume: the PV first, then the claim."""
        ref = storage.claim_of_volume(pvc)
        if pv.spec.claim_ref != ref or pv.status.phase != "Bound":
            spec = msgspec.structs.replace(pv.spec, claim_ref=ref)
            self._store_pv(msgspec.structs.replace(pv, spec=spec, status=storage.PersistentVolumeStatus(phase="Bound")))
        ann = {**pvc.metadata.annotations, storage.ANN_BIND_COMPLETED: "yes"}
        if not pvc.spec.volume_name:
            ann[storage.ANN_BOUND_BY_CONTROLLER] = "yes"
        status = storage.PersistentVolumeClaimStatus(
            phase="Bound", access_modes=list(pv.spec.access_modes), capacity=dict(pv.spec.capacity)
        )
        self._store_pvc(
            msgspec.structs.replace(
                pvc,
                metadata=msgspec.structs.replace(pvc.metadata, annotations=ann),
                spec=msgspec.structs.replace(pvc.spec, volume_name=pv.metadata.name),
                status=status,
            )
        )

    def _sync_volumes(self) -> None:
        """One pass of the PV controller over every PV and claim (see the module docstring)."""
        for name in list(self.persistent_volumes):
            pv = self.persistent_volumes[name]
            ref = pv.spec.claim_ref
            pvc = self.persistent_volume_claims.get(model.pod_key(ref.namespace, ref.name)) if ref else None
            claimed = ref is not None and pvc is not None and (not ref.uid or ref.uid == pvc.metadata.uid)
            if claimed and pvc is not None and pvc.spec.volume_name in ("", name):
                if not storage.is_pvc_bound_to(pvc, name) or pv.status.phase != "Bound":
                    self._bind(pv, pvc)
                continue
            phase = "Released" if ref is not None and ref.uid and pv.status.phase == "Bound" else "Available"
            if pv.status.phase in ("", "Pending", "Bound") and pv.status.phase != phase:
                self._store_pv(msgspec.structs.replace(pv, status=storage.PersistentVolumeStatus(phase=phase)))
        for key in list(self.persistent_volume_claims):
            pvc = self.persistent_volume_claims[key]
            if pvc.spec.volume_name:
                if pvc.spec.volume_name not in self.persistent_volumes and pvc.status.phase == "Bound":
                    status = msgspec.structs.replace(pvc.status, phase="Lost")
                    self._store_pvc(msgspec.structs.replace(pvc, status=status))
                continue
            if self._delay_binding(pvc):
                continue  # the scheduler chooses (VolumeBinding)
            match = storage.find_matching_volume(pvc, self.persistent_volumes.values(), None, None, False)
            if match is not None:
                self._bind(match, pvc)


def _conflict(resource: str, name: str) -> str:
    """The API server's 409 message (``errors.NewConflict`` with OptimisticLockErrorMsg)."""
    return (
        f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
