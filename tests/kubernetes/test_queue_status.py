"""The leader's Queue status writes (berth.adapters.kubernetes.queue_status):
only when something changed, never twice for the same status while the
watch catches up, at most once per interval however many pods bind."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from berth import app, config
from berth.adapters.kubernetes.queue_status import QueueStatusWriter
from berth.cluster import queues
from berth.errors import NotFound
from berth.quota.tree import LABEL_QUEUE
from berth.testing import make_node, make_pod


def obj(
    name: str, spec: dict[str, Any] | None = None, *, rv: str = "1", status: dict[str, Any] | None = None
) -> queues.Queue:
    return queues.Queue(
        metadata=queues.QueueMeta(name=name, generation=1, resource_version=rv), spec=spec or {}, status=status or {}
    )


class Recorder:
    def __init__(self) -> None:
        self.writes: list[tuple[str, dict[str, Any]]] = []
        self.gone: set[str] = set()

    async def __call__(self, name: str, status: dict[str, Any]) -> None:
        if name in self.gone:
            raise NotFound(f'queues.berth.dev "{name}" not found')
        self.writes.append((name, status))


@pytest.fixture
def berth() -> app.Berth:
    b = app.build(config.BerthConfiguration(), run_loop=False)
    b.cluster.upsert_nodes([make_node("n0", cpu="4")])
    return b


def bind(b: app.Berth, name: str, queue: str) -> None:
    b.cluster.upsert_pods(
        [make_pod(name, scheduler_name="berth", labels={LABEL_QUEUE: queue}, requests={"cpu": "1"}, node_name="n0")]
    )


async def test_a_status_is_written_once_until_it_changes(berth: app.Berth) -> None:
    write = Recorder()
    w = QueueStatusWriter(berth.core, write, now=lambda: "2026-01-01T00:00:00Z")
    berth.core.on_queue_object(obj("q"))
    assert await w.sync() == 1
    [(name, status)] = write.writes
    assert name == "q" and status["conditions"][0]["status"] == "True" and status["allocated"] == {}
    # The watch has not brought the write back yet: nothing new to write.
    assert await w.sync() == 0
    # The object comes back with what was written: still nothing.
    berth.core.on_queue_object(obj("q", rv="2", status=status))
    assert await w.sync() == 0
    # Three pods bind between two ticks: one write, with all three.
    for i in range(3):
        bind(berth, f"p{i}", "q")
    assert await w.sync() == 1
    assert write.writes[-1][1]["allocated"] == {"cpu": "3"}


async def test_a_refused_object_gets_its_condition_and_no_numbers(berth: app.Berth) -> None:
    write = Recorder()
    w = QueueStatusWriter(berth.core, write, now=lambda: "2026-01-01T00:00:00Z")
    berth.core.on_queue_object(obj("orphan", {"parent": "nowhere"}))
    await w.sync()
    [(_, status)] = write.writes
    assert set(status) == {"conditions"}
    cond = status["conditions"][0]
    assert (cond["status"], cond["reason"]) == ("False", "InvalidHierarchy")


async def test_a_deleted_object_is_dropped_quietly(berth: app.Berth) -> None:
    write = Recorder()
    write.gone.add("q")
    w = QueueStatusWriter(berth.core, write)
    berth.core.on_queue_object(obj("q"))
    assert await w.sync() == 0


@pytest.mark.looptime
async def test_run_writes_at_most_once_per_interval(berth: app.Berth) -> None:
    write = Recorder()
    w = QueueStatusWriter(berth.core, write, interval=1.0)
    berth.core.on_queue_object(obj("q"))
    task = asyncio.create_task(w.run())
    for i in range(20):  # a bind every 100 ms for 2 s
        bind(berth, f"p{i % 4}-{i}", "q") if i < 4 else None
        await asyncio.sleep(0.1)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert 1 <= len(write.writes) <= 3
