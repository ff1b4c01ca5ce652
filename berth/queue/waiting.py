"""Pods held at Permit (kube-scheduler's ``waitingPodsMap`` and
``waitingPod`` in ``framework/runtime/waiting_pods_map.go``).

A pod waits until every plugin that said Wait allows it, or one rejects it,
or the shortest of their timeouts passes. Timers run on the event loop
(``loop.call_later``), so they follow the loop's clock, virtual in tests.
"""

from __future__ import annotations

import asyncio
import dataclasses

from berth.cache.infos import PodInfo
from berth.framework import interface as fw

__all__ = ["WaitingPods"]


@dataclasses.dataclass(slots=True, eq=False)
class _Waiting:
    pod: PodInfo
    node: str
    pending: set[str]
    future: asyncio.Future[fw.Status]
    timers: list[asyncio.TimerHandle]


class WaitingPods:
    """Pods held at Permit (framework's waitingPodsMap); plugins allow or reject them."""

    def __init__(self) -> None:
        self._pods: dict[str, _Waiting] = {}

    def add(self, pod: PodInfo, node: str, waits: dict[str, float]) -> asyncio.Future[fw.Status]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[fw.Status] = loop.create_future()
        w = _Waiting(pod, node, set(waits), fut, [])
        self._pods[pod.uid] = w
        for plugin, timeout in waits.items():
            w.timers.append(
                loop.call_later(
                    timeout,
                    self.reject,
                    pod.uid,
                    plugin,
                    f"rejected due to timeout after waiting {timeout:g}s at plugin {plugin}",
                )
            )
        return fut

    def get(self, uid: str) -> PodInfo | None:
        w = self._pods.get(uid)
        return None if w is None else w.pod

    def uids(self) -> list[str]:
        return list(self._pods)

    def deadline(self, uid: str) -> float | None:
        """The event-loop time at which the pod's first wait times out (None: not waiting)."""
        w = self._pods.get(uid)
        return min((t.when() for t in w.timers), default=None) if w is not None else None

    def allow(self, uid: str, plugin: str) -> None:
        w = self._pods.get(uid)
        if w is None:
            return
        w.pending.discard(plugin)
        if not w.pending:
            self._finish(uid, fw.SUCCESS)

    def reject(self, uid: str, plugin: str, message: str) -> None:
        if uid in self._pods:
            self._finish(uid, fw.Status.unschedulable(message, plugin=plugin))

    def _finish(self, uid: str, status: fw.Status) -> None:
        w = self._pods.pop(uid)
        for t in w.timers:
            t.cancel()
        if not w.future.done():
            w.future.set_result(status)
