"""The Handle's ClusterClient: acts on each pod through the source that owns it.

Background work (evictions, nominations, FailedScheduling reports) runs as
tracked tasks, so shutdown and tests can wait for it (:meth:`drain`) and
nothing is left running behind them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from berth.cluster import model
from berth.cluster.sources import BindError, Source
from berth.framework import interface as fw
from berth.scheduling.state import PodStore

__all__ = ["SourceClient"]

log = logging.getLogger(__name__)


class SourceClient:
    def __init__(self, pods: PodStore) -> None:
        self._pods = pods
        #: The source of pods no source has claimed (the extender's Bind of a
        #: pod Berth never saw): the embedded cluster, or the API server.
        self.default_source: Source | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def source_of(self, pod: model.Pod) -> Source | None:
        return self._pods.source_of(pod.metadata.uid) or self.default_source

    # ------------------------------------------------------------ ClusterClient

    async def bind(self, pod: model.Pod, node: str) -> fw.Status:
        source = self.source_of(pod)
        if source is None:
            return fw.Status.error(f"no source owns pod {pod.key}")
        try:
            await source.bind(pod, node)
        except BindError as e:
            return fw.Status.error(str(e))
        return fw.SUCCESS

    def evict(self, pod: model.Pod, reason: str) -> None:
        source = self.source_of(pod)
        if source is not None:
            self.spawn(source.evict(pod, reason), f"evict {pod.key}")

    def nominate(self, pod: model.Pod, node: str) -> None:
        source = self.source_of(pod)
        if source is not None:
            self.spawn(source.nominate(pod, node), f"nominate {pod.key} to {node!r}")

    # ------------------------------------------------------------ reports

    def report_unschedulable(self, pod: model.Pod, message: str) -> None:
        source = self._pods.source_of(pod.metadata.uid)
        if source is not None:
            self.spawn(source.report_unschedulable(pod, message), f"report {pod.key}")

    async def report_scheduled(self, pod: model.Pod, node: str) -> None:
        source = self._pods.source_of(pod.metadata.uid)
        if source is not None:
            try:
                await source.report_scheduled(pod, node)
            except Exception as e:  # an event that failed to post changes nothing scheduled
                log.warning("reporting %s scheduled on %s: %s", pod.key, node, e)

    # ------------------------------------------------------------ tasks

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed: %s", task.get_name(), task.exception())

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    async def drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def cancel(self) -> None:
        for t in list(self._tasks):
            t.cancel()
