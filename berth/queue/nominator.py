"""Pods nominated to nodes by preemption (the ``nominator`` of
kube-scheduler's ``backend/queue/scheduling_queue.go``).

A nominated pod is not on its node yet, but Filter must count it there
(``RunFilterPluginsWithNominatedPods``) so that the room preemption made is
not taken by another pod meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable

from berth.cache.infos import PodInfo

__all__ = ["Nominator"]


class Nominator:
    """Pods nominated to nodes by preemption (``nominator`` in scheduling_queue.go)."""

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}
        #: Told (pod, node) on every nomination and (pod, "") when one ends
        #: (the batch queues count nominated pods in their usage).
        self.listeners: list[Callable[[PodInfo, str], None]] = []

    def add(self, pod: PodInfo, node: str) -> None:
        self._drop(pod.uid)
        if node:
            self._by_node.setdefault(node, {})[pod.uid] = pod
            self._node_of[pod.uid] = node
        for listener in self.listeners:
            listener(pod, node)

    def update(self, old_node: str, pod: PodInfo) -> None:
        """A pod's update from the cluster (``updateNominatedPodUnlocked``,
        backend/queue/nominator.go v1.37.2): its nomination becomes the one
        the update carries — added, moved or removed — except when neither
        the old nor the new object names a node, where the nomination kept
        here (made in this process, its write not yet seen back) stays. An
        update that removes ``status.nominatedNodeName`` removes it here too,
        so a watch event of an earlier write, arriving after the nomination
        was cleared here, is undone by the event of the clearing write."""
        node = pod.pod.status.nominated_node_name
        if not node and not old_node:
            node = self._node_of.get(pod.uid, "")
            if not node:
                return
        if node:
            self.add(pod, node)
        else:
            self.delete(pod.uid)

    def _drop(self, uid: str) -> PodInfo | None:
        node = self._node_of.pop(uid, None)
        if node is None:
            return None
        pods = self._by_node.get(node, {})
        pod = pods.pop(uid, None)
        if not pods:
            self._by_node.pop(node, None)
        return pod

    def delete(self, uid: str) -> None:
        pod = self._drop(uid)
        if pod is not None:
            for listener in self.listeners:
                listener(pod, "")

    def node_of(self, uid: str) -> str:
        return self._node_of.get(uid, "")

    def pods_on(self, node: str) -> list[PodInfo]:
        return list(self._by_node.get(node, {}).values())

    def nodes(self) -> list[str]:
        return list(self._by_node)

    def __bool__(self) -> bool:
        """Whether any pod is nominated to any node."""
        return bool(self._by_node)
