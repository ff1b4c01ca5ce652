"""VolumeBinding's assume caches (:class:`berth.scheduling.volume_state.VolumeStore`),
ported from kube-scheduler v1.37.2's
pkg/scheduler/framework/plugins/volumebinding/passive_assume_cache_test.go
(TestAssume, TestRestore, TestConcurrentAssume, TestAssumeUpdateCache,
TestPVCacheWithIndex) on claims and PVs.

Not ported: TestDelayedInformerEvent (the informer's store and its events
are one step in Berth: a source event updates the object and ends the
assumption together, so no event can arrive after a newer store) and
TestBasicCache's typed-object cases.
"""

from __future__ import annotations

import msgspec
import pytest

from berth.cluster import storage
from berth.errors import NotFound
from berth.scheduling.volume_state import VolumeStore
from tests.plugins.volume_support import pv, pvc


def claim(name: str, version: str, namespace: str = "ns1") -> storage.PersistentVolumeClaim:
    """makeObj."""
    return pvc(name, namespace=namespace, version=version)


def selected(obj: storage.PersistentVolumeClaim, node: str) -> storage.PersistentVolumeClaim:
    """The claim annotated with the node chosen for it, as AssumePodVolumes assumes it."""
    md = obj.metadata
    ann = {**md.annotations, storage.ANN_SELECTED_NODE: node}
    return msgspec.structs.replace(obj, metadata=msgspec.structs.replace(md, annotations=ann))


# TestAssume: (case, the source's claim, the claim assumed, assumed).
ASSUME_CASES = [
    ("success-same-version", claim("pvc1", "5"), claim("pvc1", "5"), True),
    ("fail-new-higher-version", claim("pvc1", "5"), claim("pvc1", "6"), False),
    ("fail-old-not-found", claim("pvc2", "5"), claim("pvc1", "5"), False),
    ("fail-new-lower-version", claim("pvc1", "5"), claim("pvc1", "4"), False),
    ("fail-new-bad-version", claim("pvc1", "5"), claim("pvc1", "a"), False),
    ("fail-old-bad-version", claim("pvc1", "a"), claim("pvc1", "5"), False),
]


@pytest.mark.parametrize(("old", "new", "ok"), [c[1:] for c in ASSUME_CASES], ids=[c[0] for c in ASSUME_CASES])
def test_assume(old: storage.PersistentVolumeClaim, new: storage.PersistentVolumeClaim, ok: bool) -> None:
    store = VolumeStore()
    store.put_pvc(old)
    assert store.pvc("ns1", old.metadata.name) is old
    if ok:
        store.assume_pvc(new)
    else:
        with pytest.raises((ValueError, NotFound)):
            store.assume_pvc(new)
    assert store.pvc("ns1", old.metadata.name) is (new if ok else old)


def test_assume_refusals_say_why_as_upstream() -> None:
    store = VolumeStore()
    store.put_pvc(claim("pvc1", "5"))
    with pytest.raises(ValueError, match=r'^"ns1/pvc1" is out of sync \(stored: 5, assume: 6\)$'):
        store.assume_pvc(claim("pvc1", "6"))
    with pytest.raises(NotFound, match=r'^persistentvolumeclaims "ns1/pvc2" not found$'):
        store.assume_pvc(claim("pvc2", "5"))
    with pytest.raises(NotFound, match=r'^persistentvolumes "pv-1" not found$'):
        store.assume_pv(pv("pv-1", version="1"))


def test_restore() -> None:
    store = VolumeStore()
    old, new = claim("pvc1", "5"), selected(claim("pvc1", "5"), "node-a")
    store.restore_pvc(claim("nothere", "1"))  # nothing to restore
    store.put_pvc(old)
    store.restore_pvc(old)
    assert store.pvc("ns1", "pvc1") is old
    store.assume_pvc(new)
    assert store.pvc("ns1", "pvc1") is new
    store.restore_pvc(new)
    assert store.pvc("ns1", "pvc1") is old


def test_concurrent_assume() -> None:
    """A restore of an older assumption leaves a newer one in place."""
    store = VolumeStore()
    store.put_pvc(claim("pvc1", "5"))
    first = selected(claim("pvc1", "5"), "node-a")
    store.assume_pvc(first)
    assert store.pvc("ns1", "pvc1") is first
    store.put_pvc(claim("pvc1", "7"))  # updated by someone else
    second = selected(claim("pvc1", "7"), "node-b")
    store.assume_pvc(second)
    store.restore_pvc(first)  # the first one failed with a conflict
    assert store.pvc("ns1", "pvc1") is second


def test_assume_update_cache() -> None:
    """A resync of the source's version keeps the assumed claim."""
    store = VolumeStore()
    obj = claim("test-pvc0", "1", "test-ns")
    store.put_pvc(obj)
    new = selected(obj, "test-node")
    store.assume_pvc(new)
    assert store.pvc("test-ns", "test-pvc0") is new
    store.put_pvc(obj)
    assert store.pvc("test-ns", "test-pvc0") is new


def test_a_deleted_object_ends_its_assumption() -> None:
    store = VolumeStore()
    store.put_pvc(claim("pvc1", "5"))
    store.assume_pvc(selected(claim("pvc1", "5"), "node-a"))
    store.remove_pvc("ns1", "pvc1")
    assert store.pvc("ns1", "pvc1") is None
    again = claim("pvc1", "5")
    store.put_pvc(again)  # created again, same version: not the assumed one
    assert store.pvc("ns1", "pvc1") is again


def test_pvs_of_a_class_include_the_assumed_ones() -> None:
    """TestPVCacheWithIndex on the storage-class index (pvAssumeCache.ListPVs)."""
    store = VolumeStore()
    for i in range(3):
        store.put_pv(pv(f"test-{i}", "sc1", version="1"))
        store.put_pv(pv(f"test2-{i}", "sc2", version="1"))
    assumed = pv("test-1", "sc1", version="1", claim=("ns1", "c"))
    store.assume_pv(assumed)
    store.put_pv(pv("test-2", "sc1", version="2"))
    store.remove_pv("test-0")
    assert [p.metadata.name for p in store.pvs_of_class("sc1")] == ["test-1", "test-2"]
    assert store.pvs_of_class("sc1")[0] is assumed
    assert [p.metadata.name for p in store.pvs_of_class("sc2")] == ["test2-0", "test2-1", "test2-2"]
