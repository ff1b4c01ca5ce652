"""A running Berth core with the scheduling loop on an embedded cluster."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest

from berth import config
from berth.cluster import model
from berth.cluster.embedded import EmbeddedCluster
from berth.scheduling.core import Core
from berth.scheduling.loop import Scheduler


class Berth:
    def __init__(self, core: Core, cluster: EmbeddedCluster) -> None:
        self.core = core
        self.cluster = cluster
        assert core.scheduler is not None
        self.scheduler: Scheduler = core.scheduler

    def nodes(self, *nodes: model.Node) -> None:
        self.cluster.upsert_nodes(nodes)

    def pods(self, *pods: model.Pod) -> None:
        self.cluster.upsert_pods(pods)

    def node_of(self, key: str) -> str:
        pod = self.cluster.pods.get(key)
        return pod.spec.node_name if pod is not None else ""

    def bound(self) -> dict[str, str]:
        return {k: p.spec.node_name for k, p in self.cluster.pods.items() if p.spec.node_name}

    async def settle(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - a test helper's deadline
        """Until nothing is active, backing off, waiting at Permit or binding."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        quiet = 0
        while loop.time() < deadline:
            c = self.scheduler.queue.counts()
            busy = (
                c["active"]
                or c["in_flight"]
                or c["backoff"]
                or self.scheduler._binding
                or self.scheduler.waiting.uids()
            )
            quiet = 0 if busy else quiet + 1
            if quiet >= 3:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"loop did not settle: {self.scheduler.queue.counts()}")

    def phase(self, key: str) -> str:
        pod = self.cluster.pods[key]
        return self.scheduler.queue.phase(pod.metadata.uid)


def make_config(**overrides: Any) -> config.BerthConfiguration:
    doc: dict[str, Any] = {
        "podInitialBackoffSeconds": 0.01,
        "podMaxBackoffSeconds": 0.05,
        "gangScheduleTimeoutSeconds": 0.5,
    }
    doc.update(overrides)
    return config.parse(doc)


@contextlib.asynccontextmanager
async def running(cfg: config.BerthConfiguration | None = None) -> AsyncIterator[Berth]:
    core = Core(cfg or make_config())
    cluster = EmbeddedCluster(core)
    core.default_source = cluster
    core.scheduler = Scheduler(core)
    task = asyncio.create_task(core.scheduler.run())
    try:
        yield Berth(core, cluster)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await core.scheduler.drain()


@pytest.fixture
async def berth() -> AsyncIterator[Berth]:
    async with running() as b:
        yield b


def keys(pods: Iterable[model.Pod]) -> list[str]:
    return [p.key for p in pods]
