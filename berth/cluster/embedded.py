"""The embedded cluster: Kubernetes objects kept in memory, for running Berth
with no cluster at all (``berth serve --cluster FILE``) and for systems that
feed Berth through the gRPC Cluster service.

It is a :class:`~berth.cluster.sources.Source`: it owns its objects, tells
its :class:`~berth.cluster.sources.ClusterListener` (the core) about every
change, as informers would, and carries out bindings and evictions by
changing its own objects — a bind sets ``spec.nodeName`` and the
core then sees the pod confirmed, exactly as an informer update would make it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import msgspec

from berth.cluster import model
from berth.cluster.manifests import Manifests, default_uid, validate_node, validate_pod
from berth.cluster.sources import BindConflict, BindError, ClusterListener

__all__ = ["EmbeddedCluster"]

log = logging.getLogger(__name__)


class EmbeddedCluster:
    """In-memory nodes, pods, pod groups and PDBs; see the module docstring."""

    name = "embedded"

    def __init__(self, core: ClusterListener) -> None:
        self.core = core
        self.nodes: dict[str, model.Node] = {}
        self.pods: dict[str, model.Pod] = {}  # NAMESPACE/NAME -> pod
        self.bindings: list[tuple[str, str]] = []  # (pod key, node), in order
        self.evictions: list[tuple[str, str]] = []  # (pod key, reason)
        self.events: list[tuple[str, str, str]] = []  # (pod key, reason, message)

    # ------------------------------------------------------------ feeding

    def load(self, manifests: Manifests) -> None:
        # Nodes first, so bound pods land on known nodes.
        self.upsert_nodes(manifests.nodes)
        for g in manifests.pod_groups:
            self.core.on_pod_group(g)
        for b in manifests.pdbs:
            self.core.on_pdb(b)
        self.upsert_pods(manifests.pods)

    def upsert_nodes(self, nodes: Iterable[model.Node]) -> int:
        n = 0
        for node in nodes:
            validate_node(node)
            self.nodes[node.metadata.name] = node
            self.core.on_node(node)
            n += 1
        return n

    def delete_nodes(self, names: Iterable[str]) -> int:
        n = 0
        for name in names:
            if self.nodes.pop(name, None) is not None:
                self.core.on_node_delete(name)
                n += 1
        return n

    def upsert_pods(self, pods: Iterable[model.Pod]) -> int:
        n = 0
        for pod in pods:
            validate_pod(pod)
            md = pod.metadata
            md.namespace = md.namespace or "default"
            md.uid = md.uid or default_uid(md.namespace, md.name)
            old = self.pods.get(pod.key)
            if old is not None and old.metadata.uid != md.uid:
                # Same name, new object: the old one is gone.
                self.core.on_pod_delete(old)
            self.pods[pod.key] = pod
            self.core.on_pod(pod, source=self)
            n += 1
        return n

    def delete_pods(self, keys: Iterable[str]) -> int:
        n = 0
        for key in keys:
            pod = self.pods.pop(key, None)
            if pod is not None:
                self.core.on_pod_delete(pod)
                n += 1
        return n

    # ------------------------------------------------------------ Source

    async def bind(self, pod: model.Pod, node: str) -> None:
        current = self.pods.get(pod.key)
        if current is None or (pod.metadata.uid and current.metadata.uid != pod.metadata.uid):
            raise BindConflict(f'pods "{pod.metadata.name}" not found')
        bound = current.spec.node_name
        if bound == node:
            return  # a retried bind: already done
        if bound:
            raise BindConflict(f"pod {pod.key} is already assigned to node {bound!r}")
        if node not in self.nodes:
            raise BindError(f'nodes "{node}" not found')
        updated = msgspec.structs.replace(
            current,
            spec=msgspec.structs.replace(current.spec, node_name=node),
            status=msgspec.structs.replace(current.status, nominated_node_name=""),
        )
        self.pods[pod.key] = updated
        self.bindings.append((pod.key, node))
        self.core.on_pod(updated, source=self)

    async def evict(self, pod: model.Pod, reason: str) -> None:
        current = self.pods.pop(pod.key, None)
        if current is None:
            return
        self.evictions.append((pod.key, reason))
        self.core.on_pod_delete(current)

    async def nominate(self, pod: model.Pod, node: str) -> None:
        current = self.pods.get(pod.key)
        if current is None or current.status.nominated_node_name == node:
            return
        updated = msgspec.structs.replace(
            current, status=msgspec.structs.replace(current.status, nominated_node_name=node)
        )
        self.pods[pod.key] = updated
        self.core.on_pod(updated, source=self)

    async def report_unschedulable(self, pod: model.Pod, message: str) -> None:
        self.events.append((pod.key, "FailedScheduling", message))

    async def report_scheduled(self, pod: model.Pod, node: str) -> None:
        self.events.append((pod.key, "Scheduled", f"Successfully assigned {pod.key} to {node}"))

    def log_summary(self) -> None:
        bound = sum(1 for p in self.pods.values() if p.spec.node_name)
        log.info("embedded cluster: %d nodes, %d pods (%d bound)", len(self.nodes), len(self.pods), bound)
