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
