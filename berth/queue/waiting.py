"""Pods held in their binding cycle, where a preemptor can stop them in
memory: at Permit (kube-scheduler's ``waitingPodsMap`` and ``waitingPod``
in ``framework/runtime/waiting_pods_map.go``) and in PreBind
(``podsInPreBindMap``, ``pods_in_prebind_map.go``, v1.36).

A pod waits at Permit until every plugin that said Wait allows it, or one
rejects it, or the shortest of their timeouts passes. Timers run on the
event loop (``loop.call_later``), so they follow the loop's clock, virtual
in tests.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable

from berth.cache.infos import PodInfo
from berth.framework import interface as fw

__all__ = ["PodsInPreBind", "WaitingPods"]


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

    def reject(self, uid: str, plugin: str, message: str) -> bool:
        """The pod is unschedulable (``waitingPod.Reject``); False when it
        was not waiting."""
        if uid not in self._pods:
            return False
        self._finish(uid, fw.Status.unschedulable(message, plugin=plugin))
        return True

    def preempt(self, uid: str, plugin: str, message: str) -> bool:
        """The pod is a preemption victim (``waitingPod.Preempt``,
        ``waiting_pods_map.go`` v1.36): unlike a rejection, an error, so the
        pod is retried after backoff rather than parked as unschedulable.
        False when it was not waiting."""
        if uid not in self._pods:
            return False
        self._finish(uid, fw.Status.error(message, plugin=plugin))
        return True

    def _finish(self, uid: str, status: fw.Status) -> None:
        w = self._pods.pop(uid)
        for t in w.timers:
            t.cancel()
        if not w.future.done():
            w.future.set_result(status)


@dataclasses.dataclass(slots=True, eq=False)
class _InPreBind:
    #: The task running the pod's PreBind plugins (None until started).
    run: asyncio.Future[fw.Status] | None = None
    #: Why it was cancelled (``context.Cause``), or None.
    cause: str | None = None
    #: PreBind is over and the pod goes to Bind: too late to cancel.
    prebound: bool = False


class PodsInPreBind:
    """Pods whose PreBind plugins have work (``podsInPreBindMap``,
    ``framework/runtime/pods_in_prebind_map.go`` v1.37.2): a preemptor may
    cancel one (:meth:`cancel`) until its PreBind is over
    (:meth:`mark_prebound`); the binding cycle then fails with the cause."""

    def __init__(self) -> None:
        self._pods: dict[str, _InPreBind] = {}

    def add(self, uid: str) -> None:
        self._pods[uid] = _InPreBind()

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def __contains__(self, uid: str) -> bool:
        return uid in self._pods

    async def run(self, uid: str, pre_bind: Awaitable[fw.Status]) -> fw.Status:
        """Run ``pre_bind`` for pod ``uid`` (added first) where :meth:`cancel`
        can stop it; an error Status with the cause when cancelled, before
        or after PreBind returned."""
        entry = self._pods[uid]
        if entry.cause is not None:
            return fw.Status.error(entry.cause)
        run = entry.run = asyncio.ensure_future(pre_bind)
        try:
            st = await run
        except asyncio.CancelledError:
            if entry.cause is None:
                raise  # the binding cycle itself was cancelled
            return fw.Status.error(entry.cause)
        if st.ok and not self.mark_prebound(uid):
            return fw.Status.error(entry.cause or "cancelled")
        return st

    def cancel(self, uid: str, message: str) -> bool:
        """``CancelPod``: stop the pod's PreBind with ``message`` as the
        cause. False when the pod is not in PreBind or already past it."""
        entry = self._pods.get(uid)
        if entry is None or entry.prebound:
            return False
        if entry.cause is None:
            entry.cause = message
            if entry.run is not None:
                entry.run.cancel()
        return True

    def mark_prebound(self, uid: str) -> bool:
        """``MarkPrebound``: PreBind is over, nothing may cancel the pod now;
        False when it was cancelled meanwhile."""
        entry = self._pods.get(uid)
        if entry is None:
            return True
        if entry.cause is not None:
            return False
        entry.prebound = True
        return True
