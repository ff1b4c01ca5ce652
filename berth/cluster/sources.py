"""Where cluster state comes from and where decisions go back to.

A :class:`Source` is one origin of nodes and pods — the embedded in-memory
cluster, the gRPC Cluster feed, or the Kubernetes API (``berth.adapters/kubernetes``)
— and it carries out what the core decides about the pods it owns: bind them,
evict victims, record a nominated node and report outcomes. The core talks to
every source through this interface and never knows which one it is.
"""

from __future__ import annotations

from typing import Protocol

from berth.cluster import model

__all__ = ["BindConflict", "BindError", "Source"]


class BindError(Exception):
    """Binding failed; the pod goes back to the queue."""


class BindConflict(BindError):
    """The pod is already bound elsewhere (or gone): never retry on the same node blindly."""


class Source(Protocol):
    name: str

    async def bind(self, pod: model.Pod, node: str) -> None:
        """Bind ``pod`` to ``node``. Idempotent: binding a pod already bound
        to ``node`` succeeds; one bound to another node raises BindConflict."""

    async def evict(self, pod: model.Pod, reason: str) -> None:
        """Remove a preemption victim, saying why."""

    async def nominate(self, pod: model.Pod, node: str) -> None:
        """Record ``status.nominatedNodeName`` (empty clears it)."""

    async def report_unschedulable(self, pod: model.Pod, message: str) -> None:
        """FailedScheduling: the pod stays pending, with kube-scheduler's message."""

    async def report_scheduled(self, pod: model.Pod, node: str) -> None:
        """Scheduled: the pod was bound to ``node``."""
