"""What the sources told the core about storage: PersistentVolumes and
PersistentVolumeClaims (with the source that owns each), StorageClasses,
CSINodes, CSIDrivers and CSIStorageCapacities — and the bindings the volume
binder assumed.

:class:`VolumeStore` is the listers kube-scheduler's volume plugins take
from the SharedInformerFactory, plus VolumeBinding's two assume caches
(``pkg/scheduler/framework/plugins/volumebinding/assume_cache.go`` over
``passive_assume_cache.go``, v1.37.2): Reserve assumes a PV with its new
claimRef, or a PVC with the ``selected-node`` annotation — only the version
the source holds, else ``"KEY" is out of sync (stored: RV, assume: RV)`` —
and the plugins see the assumed object until the source reports any other
version of it or deletes it (a resync of the same version keeps it), or
Unreserve restores it (only the version it assumed). Unlike
upstream, where each profile's binder has caches of its own, one store
serves every profile: a binding assumed by one profile is seen by the others.
Plugins see it through the Handle as :class:`berth.framework.handle.VolumeLister`.

Writes (PreBind's) go to the source that reported the object; PreBind waits
for the binding through :meth:`VolumeStore.wait_for_change`, which wakes on
every PV or PVC event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import TypeVar

from berth.cluster import model, storage
from berth.cluster.sources import Source
from berth.errors import NotFound

__all__ = ["VolumeStore"]

log = logging.getLogger(__name__)


_Obj = TypeVar("_Obj", storage.PersistentVolume, storage.PersistentVolumeClaim)


def _may_expire(assumed: dict[str, _Obj], key: str, stored: _Obj | None) -> None:
    """passiveAssumeCache.mayExpire: the source's object of another version
    (or none) ends the assumption."""
    held = assumed.get(key)
    if held is not None and (stored is None or stored.metadata.resource_version != held.metadata.resource_version):
        del assumed[key]


def _assume(assumed: dict[str, _Obj], key: str, stored: _Obj | None, obj: _Obj, resource: str) -> None:
    """passiveAssumeCache.Assume: only over the version the source holds."""
    if stored is None:
        raise NotFound(f'{resource} "{key}" not found')
    have, want = stored.metadata.resource_version, obj.metadata.resource_version
    if have != want:
        raise ValueError(f'"{key}" is out of sync (stored: {have}, assume: {want})')
    assumed[key] = obj


def _restore(assumed: dict[str, _Obj], key: str, obj: _Obj) -> None:
    """passiveAssumeCache.Restore: only the version that was assumed."""
    held = assumed.get(key)
    if held is not None and held.metadata.resource_version == obj.metadata.resource_version:
        del assumed[key]


class VolumeStore:
    """Storage objects and the assumed bindings; see the module docstring."""

    def __init__(self) -> None:
        self._pvs: dict[str, storage.PersistentVolume] = {}
        self._pvcs: dict[str, storage.PersistentVolumeClaim] = {}  # NAMESPACE/NAME
        self._sources: dict[tuple[str, str], Source] = {}  # (kind, key)
        self._assumed_pvs: dict[str, storage.PersistentVolume] = {}
        self._assumed_pvcs: dict[str, storage.PersistentVolumeClaim] = {}
        self._classes: dict[str, storage.StorageClass] = {}
        self._csi_nodes: dict[str, storage.CSINode] = {}
        self._csi_drivers: dict[str, storage.CSIDriver] = {}
        self._capacities: dict[str, storage.CSIStorageCapacity] = {}
        self._waiters: set[asyncio.Future[None]] = set()

    def __len__(self) -> int:
        return (
            len(self._pvs)
            + len(self._pvcs)
            + len(self._classes)
            + len(self._csi_nodes)
            + len(self._csi_drivers)
            + len(self._capacities)
        )

    # ------------------------------------------------------------ feed (the core's on_* methods)

    def put_pv(self, pv: storage.PersistentVolume, source: Source | None = None) -> storage.PersistentVolume | None:
        """Store the source's PV; returns the previous API object. Another
        resourceVersion than the assumed one drops the assumption."""
        name = pv.metadata.name
        old = self._pvs.get(name)
        self._pvs[name] = pv
        if source is not None:
            self._sources[("pv", name)] = source
        _may_expire(self._assumed_pvs, name, pv)
        self._wake()
        return old

    def remove_pv(self, name: str) -> storage.PersistentVolume | None:
        self._assumed_pvs.pop(name, None)
        self._sources.pop(("pv", name), None)
        old = self._pvs.pop(name, None)
        self._wake()
        return old

    def put_pvc(
        self, pvc: storage.PersistentVolumeClaim, source: Source | None = None
    ) -> storage.PersistentVolumeClaim | None:
        key = pvc.key
        old = self._pvcs.get(key)
        self._pvcs[key] = pvc
        if source is not None:
            self._sources[("pvc", key)] = source
        _may_expire(self._assumed_pvcs, key, pvc)
        self._wake()
        return old

    def remove_pvc(self, namespace: str, name: str) -> storage.PersistentVolumeClaim | None:
        key = model.pod_key(namespace, name)
        self._assumed_pvcs.pop(key, None)
        self._sources.pop(("pvc", key), None)
        old = self._pvcs.pop(key, None)
        self._wake()
        return old

    def put_class(self, obj: storage.StorageClass) -> storage.StorageClass | None:
        old = self._classes.get(obj.metadata.name)
        self._classes[obj.metadata.name] = obj
        return old

    def remove_class(self, name: str) -> storage.StorageClass | None:
        return self._classes.pop(name, None)

    def put_csi_node(self, obj: storage.CSINode) -> storage.CSINode | None:
        old = self._csi_nodes.get(obj.metadata.name)
        self._csi_nodes[obj.metadata.name] = obj
        return old

    def remove_csi_node(self, name: str) -> storage.CSINode | None:
        return self._csi_nodes.pop(name, None)

    def put_csi_driver(self, obj: storage.CSIDriver) -> storage.CSIDriver | None:
        old = self._csi_drivers.get(obj.metadata.name)
        self._csi_drivers[obj.metadata.name] = obj
        return old

    def remove_csi_driver(self, name: str) -> storage.CSIDriver | None:
        return self._csi_drivers.pop(name, None)

    def put_capacity(self, obj: storage.CSIStorageCapacity) -> storage.CSIStorageCapacity | None:
        key = model.pod_key(obj.metadata.namespace, obj.metadata.name)
        old = self._capacities.get(key)
        self._capacities[key] = obj
        return old

    def remove_capacity(self, namespace: str, name: str) -> storage.CSIStorageCapacity | None:
        return self._capacities.pop(model.pod_key(namespace, name), None)

    # ------------------------------------------------------------ VolumeLister

    def pv(self, name: str) -> storage.PersistentVolume | None:
        return self._assumed_pvs.get(name) or self._pvs.get(name)

    def api_pv(self, name: str) -> storage.PersistentVolume | None:
        return self._pvs.get(name)

    def pvs_of_class(self, storage_class: str) -> list[storage.PersistentVolume]:
        """The latest PVs whose class is ``storage_class`` (pvAssumeCache.ListPVs)."""
        out: list[storage.PersistentVolume] = []
        for name in self._pvs:
            pv = self.pv(name)
            if pv is not None and storage.pv_class(pv) == storage_class:
                out.append(pv)
        return out

    def pvc(self, namespace: str, name: str) -> storage.PersistentVolumeClaim | None:
        key = model.pod_key(namespace, name)
        return self._assumed_pvcs.get(key) or self._pvcs.get(key)

    def api_pvc(self, namespace: str, name: str) -> storage.PersistentVolumeClaim | None:
        return self._pvcs.get(model.pod_key(namespace, name))

    def storage_class(self, name: str) -> storage.StorageClass | None:
        return self._classes.get(name)

    def csi_node(self, name: str) -> storage.CSINode | None:
        return self._csi_nodes.get(name)

    def csi_driver(self, name: str) -> storage.CSIDriver | None:
        return self._csi_drivers.get(name)

    def capacities(self) -> Sequence[storage.CSIStorageCapacity]:
        return list(self._capacities.values())

    def classes(self) -> Mapping[str, storage.StorageClass]:
        return self._classes

    # The assume caches.

    def assume_pv(self, pv: storage.PersistentVolume) -> None:
        name = pv.metadata.name
        _assume(self._assumed_pvs, name, self._pvs.get(name), pv, "persistentvolumes")

    def restore_pv(self, pv: storage.PersistentVolume) -> None:
        _restore(self._assumed_pvs, pv.metadata.name, pv)

    def assume_pvc(self, pvc: storage.PersistentVolumeClaim) -> None:
        _assume(self._assumed_pvcs, pvc.key, self._pvcs.get(pvc.key), pvc, "persistentvolumeclaims")

    def restore_pvc(self, pvc: storage.PersistentVolumeClaim) -> None:
        _restore(self._assumed_pvcs, pvc.key, pvc)

    def is_assumed_pv(self, name: str) -> bool:
        return name in self._assumed_pvs

    def is_assumed_pvc(self, namespace: str, name: str) -> bool:
        return model.pod_key(namespace, name) in self._assumed_pvcs

    # Writes, through the source that owns the object.

    def _source(self, kind: str, key: str, what: str) -> Source:
        source = self._sources.get((kind, key))
        if source is None:
            raise NotFound(f"no source owns {what}")
        return source

    async def update_pv(self, pv: storage.PersistentVolume) -> storage.PersistentVolume:
        name = pv.metadata.name
        source = self._source("pv", name, f'persistentvolume "{name}"')
        return await source.update_persistent_volume(pv)

    async def update_pvc(self, pvc: storage.PersistentVolumeClaim) -> storage.PersistentVolumeClaim:
        source = self._source("pvc", pvc.key, f'persistentvolumeclaim "{pvc.key}"')
        return await source.update_persistent_volume_claim(pvc)

    async def wait_for_change(self) -> None:
        """Until the next PV or PVC event."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(fut)
        try:
            await fut
        finally:
            self._waiters.discard(fut)

    def _wake(self) -> None:
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)
        self._waiters.clear()
