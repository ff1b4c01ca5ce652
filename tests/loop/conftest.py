"""A running Berth (the composition root's, with its scheduling loop) on an
embedded cluster, in virtual time: the loop, backoffs, gang timeouts and
assumed-pod expiry run on the event loop's clock, which ``looptime``
fast-forwards whenever every task waits — so these tests never sleep for real
and their timings are exact."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest

from berth import app, config
from berth.cluster import model
from berth.framework.decision import Decision
from berth.queue.scheduling_queue import SchedulingQueue

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test of this folder runs in virtual time."""
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.looptime)


class Berth:
    """Test-side view of a running :class:`berth.app.Berth`."""

    def __init__(self, berth: app.Berth) -> None:
        self.app = berth
        self.core = berth.core
        self.cluster = berth.cluster
        assert berth.scheduler is not None
        self.scheduler = berth.scheduler

    def nodes(self, *nodes: model.Node) -> None:
        self.cluster.upsert_nodes(nodes)

    def pods(self, *pods: model.Pod) -> None:
        self.cluster.upsert_pods(pods)

    def node_of(self, key: str) -> str:
        pod = self.cluster.pods.get(key)
        return pod.spec.node_name if pod is not None else ""

    def bound(self) -> dict[str, str]:
        return {k: p.spec.node_name for k, p in self.cluster.pods.items() if p.spec.node_name}

    def decision(self, key: str) -> Decision:
        return self.core.decisions.latest[key]

    async def settle(self, timeout: float = 60.0) -> None:  # noqa: ASYNC109 - a test helper's (virtual) deadline
        """Until nothing is active, backing off, waiting at Permit or binding."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        quiet = 0
        while loop.time() < deadline:
            c = self.scheduler.queue.counts()
            busy = c["active"] or c["in_flight"] or c["backoff"] or self.scheduler.busy
            quiet = 0 if busy else quiet + 1
            if quiet >= 3:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"loop did not settle: {self.scheduler.queue.counts()}")

    def phase(self, key: str) -> str:
        pod = self.cluster.pods[key]
        return self.scheduler.queue.phase(pod.metadata.uid)


def make_config(**overrides: Any) -> config.BerthConfiguration:
    return config.parse(overrides)


@contextlib.asynccontextmanager
async def running(cfg: config.BerthConfiguration | None = None) -> AsyncIterator[Berth]:
    async with app.running(cfg or make_config(), clock=asyncio.get_running_loop().time) as b:
        yield Berth(b)


@pytest.fixture
async def berth() -> AsyncIterator[Berth]:
    async with running() as b:
        yield b


def keys(pods: Iterable[model.Pod]) -> list[str]:
    return [p.key for p in pods]


class Looks:
    """How many parked pods the queue asked an event's interest of."""

    count = 0


@pytest.fixture
def queue_looks(monkeypatch: pytest.MonkeyPatch) -> Looks:
    """Counts :meth:`SchedulingQueue._interested` calls: a wake-up that scans
    every parked pod shows here as a count that grows with the pods fed."""
    looks = Looks()
    real = SchedulingQueue._interested

    def counted(self: SchedulingQueue, qpi: Any, event: Any) -> bool:
        looks.count += 1
        return real(self, qpi, event)

    monkeypatch.setattr(SchedulingQueue, "_interested", counted)
    return looks
