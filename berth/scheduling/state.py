"""What every source told the core about objects other than nodes: pods
(with the source that owns each), pod groups, PodDisruptionBudgets,
namespaces and the selectors of workloads (Services, ReplicationControllers,
ReplicaSets, StatefulSets).

These stores are the listers plugins see through the Handle
(:class:`berth.framework.handle.PodLister` and friends); nodes and the pods
placed on them live in the cache.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from berth.cluster import labels, model, validation
from berth.cluster.sources import Source

__all__ = ["NamespaceStore", "PodDisruptionBudgetStore", "PodGroupStore", "PodStore", "WorkloadStore"]


class PodStore:
    """Every pod Berth knows, by uid, with the source that owns it."""

    def __init__(self) -> None:
        self._pods: dict[str, model.Pod] = {}
        self._sources: dict[str, Source] = {}
        self._uid_by_key: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, uid: str) -> bool:
        return uid in self._pods

    def put(self, pod: model.Pod, source: Source) -> model.Pod | None:
        """Store the latest object; returns the previous one."""
        uid = pod.metadata.uid
        old = self._pods.get(uid)
        if old is not None and old.key != pod.key and self._uid_by_key.get(old.key) == uid:
            del self._uid_by_key[old.key]  # a uid is one object's, whatever it was called
        self._pods[uid] = pod
        self._sources[uid] = source
        self._uid_by_key[pod.key] = uid
        return old

    def remove(self, pod: model.Pod) -> None:
        uid = pod.metadata.uid
        self._pods.pop(uid, None)
        self._sources.pop(uid, None)
        if self._uid_by_key.get(pod.key) == uid:
            del self._uid_by_key[pod.key]

    def all(self) -> list[model.Pod]:
        return list(self._pods.values())

    def source_of(self, uid: str) -> Source | None:
        return self._sources.get(uid)

    # ------------------------------------------------------------ PodLister

    def get(self, uid: str) -> model.Pod | None:
        return self._pods.get(uid)

    def by_key(self, key: str) -> model.Pod | None:
        uid = self._uid_by_key.get(key)
        return None if uid is None else self._pods.get(uid)

    def in_group(self, namespace: str, group: str) -> list[model.Pod]:
        return [
            p
            for p in self._pods.values()
            if p.metadata.labels.get(model.LABEL_POD_GROUP) == group
            and (p.metadata.namespace or "default") == namespace
            and p.status.phase not in ("Succeeded", "Failed")
            and not p.metadata.deletion_timestamp
        ]

    def matching(self, namespace: str, selector: model.LabelSelector | None) -> list[model.Pod]:
        return [
            p
            for p in self._pods.values()
            if p.metadata.namespace == namespace and labels.match_label_selector(selector, p.metadata.labels)
        ]


class PodGroupStore:
    def __init__(self) -> None:
        self._groups: dict[str, model.PodGroup] = {}

    def put(self, group: model.PodGroup) -> None:
        self._groups[group.key] = group

    def get(self, namespace: str, name: str) -> model.PodGroup | None:
        return self._groups.get(model.pod_key(namespace, name))

    def remove(self, namespace: str, name: str) -> None:
        self._groups.pop(model.pod_key(namespace, name), None)

    def all(self) -> list[model.PodGroup]:
        return list(self._groups.values())


class PodDisruptionBudgetStore:
    def __init__(self) -> None:
        self._budgets: dict[str, model.PodDisruptionBudget] = {}

    def put(self, pdb: model.PodDisruptionBudget) -> None:
        """Store ``pdb``; raises InvalidArgument (storing nothing) for one the
        API server would reject, so every stored selector can be matched."""
        validation.validate_pdb(pdb)
        self._budgets[model.pod_key(pdb.metadata.namespace, pdb.metadata.name)] = pdb

    def remove(self, namespace: str, name: str) -> None:
        self._budgets.pop(model.pod_key(namespace, name), None)

    def list(self) -> list[model.PodDisruptionBudget]:
        return list(self._budgets.values())


class NamespaceStore:
    """Every namespace Berth was told about, by name: kube-scheduler's
    namespace informer's lister (``h.SharedInformerFactory().Core().V1().Namespaces().Lister()``),
    which InterPodAffinity asks for the namespaces a ``namespaceSelector``
    selects and for the labels of an incoming pod's namespace."""

    #: Selections remembered between changes; cleared past this many.
    _MEMO_LIMIT = 1024

    def __init__(self) -> None:
        self._namespaces: dict[str, model.Namespace] = {}
        self._memo: dict[bytes, list[str]] = {}

    def __len__(self) -> int:
        return len(self._namespaces)

    def put(self, namespace: model.Namespace) -> None:
        self._namespaces[namespace.metadata.name] = namespace
        self._memo.clear()

    def remove(self, name: str) -> None:
        if self._namespaces.pop(name, None) is not None:
            self._memo.clear()

    # ------------------------------------------------------------ NamespaceLister

    def get(self, name: str) -> model.Namespace | None:
        return self._namespaces.get(name)

    def labels_of(self, name: str) -> Mapping[str, str]:
        """The namespace's labels; none for one Berth has not seen
        (upstream's ``GetNamespaceLabelsSnapshot`` assumes an empty set)."""
        ns = self._namespaces.get(name)
        return ns.metadata.labels if ns is not None else {}

    def selected(self, selector: model.LabelSelector) -> list[str]:
        """Names of the known namespaces whose labels match ``selector`` (``nsLister.List``)."""
        key = msgspec.json.encode(selector)
        hit = self._memo.get(key)
        if hit is None:
            if len(self._memo) >= self._MEMO_LIMIT:
                self._memo.clear()
            hit = self._memo[key] = [
                name
                for name, ns in self._namespaces.items()
                if labels.match_label_selector(selector, ns.metadata.labels)
            ]
        return hit


class WorkloadStore:
    """Services, ReplicationControllers, ReplicaSets and StatefulSets by kind
    and ``NAMESPACE/NAME``: the WorkloadLister PodTopologySpread's default
    constraints read (:class:`berth.framework.handle.WorkloadLister`)."""

    def __init__(self) -> None:
        self._by_kind: dict[str, dict[str, model.Workload]] = {kind: {} for kind in model.WORKLOAD_KINDS}

    def __len__(self) -> int:
        return sum(len(objs) for objs in self._by_kind.values())

    def put(self, obj: model.Workload) -> None:
        """Store ``obj``; raises InvalidArgument (storing nothing) for one the
        API server would reject, so every stored selector can be matched."""
        validation.validate_workload(obj)
        self._by_kind[obj.kind][model.pod_key(obj.metadata.namespace, obj.metadata.name)] = obj

    def remove(self, kind: str, namespace: str, name: str) -> None:
        self._by_kind.get(kind, {}).pop(model.pod_key(namespace, name), None)

    # ------------------------------------------------------------ WorkloadLister

    def services(self, namespace: str) -> list[model.Service]:
        return [
            s
            for s in self._by_kind["Service"].values()
            if isinstance(s, model.Service) and s.metadata.namespace == namespace
        ]

    def get(self, kind: str, namespace: str, name: str) -> model.Workload | None:
        return self._by_kind.get(kind, {}).get(model.pod_key(namespace, name))
