"""Pods nominated to nodes by preemption (the ``nominator`` of
kube-scheduler's ``backend/queue/scheduling_queue.go``).

A nominated pod is not on its node yet, but Filter must count it there
(``RunFilterPluginsWithNominatedPods``) so that the room preemption made is
not taken by another pod meanwhile.
"""

from __future__ import annotations

from berth.cache.infos import PodInfo

__all__ = ["Nominator"]


class Nominator:
    """Pods nominated to nodes by preemption (``nominator`` in scheduling_queue.go)."""

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}

    def add(self, pod: PodInfo, node: str) -> None:
        self.delete(pod.uid)
        if not node:
            return
        self._by_node.setdefault(node, {})[pod.uid] = pod
        self._node_of[pod.uid] = node

    def delete(self, uid: str) -> None:
        node = self._node_of.pop(uid, None)
        if node is not None:
            pods = self._by_node.get(node, {})
            pods.pop(uid, None)
            if not pods:
                self._by_node.pop(node, None)

    def node_of(self, uid: str) -> str:
        return self._node_of.get(uid, "")

    def pods_on(self, node: str) -> list[PodInfo]:
        return list(self._by_node.get(node, {}).values())

    def nodes(self) -> list[str]:
        return list(self._by_node)
