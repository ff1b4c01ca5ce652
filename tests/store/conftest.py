"""Standalone Berth with a state store, in this process: start it on a
store, stop it (closing the store, or abandoning it as a crash would), and
start it again on the same store."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from berth import app, config
from berth.cluster import model
from berth.store import MemoryStore, PostgresStore, SqliteStore, StateStore
from berth.store.postgres import Lease
from berth.testing import make_node, make_pod
from tests.store import pgserver

QUEUES = {"queues": [{"name": "team", "guaranteed": {"cpu": "1000"}, "namespaces": ["team"]}]}


def cfg(**extra: Any) -> config.BerthConfiguration:
    return config.parse({**QUEUES, **extra})


@contextlib.asynccontextmanager
async def standalone(store: StateStore, *, loop: bool = True, **extra: Any) -> AsyncIterator[app.Berth]:
    """A Berth restored from ``store`` whose loop runs for the block (with
    ``loop=False`` it is built but never started: nothing is scheduled);
    the store is closed on the way out (a clean stop)."""
    berth = app.build(cfg(**extra), store=store)
    assert berth.durable is not None
    await berth.durable.restore()
    task = asyncio.create_task(berth.run_loop()) if loop else None
    try:
        yield berth
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        berth.core.client.cancel()
        await berth.core.client.drain()
        await berth.durable.close()


def sqlite(path: Path) -> SqliteStore:
    return SqliteStore(path)


def memory() -> MemoryStore:
    return MemoryStore()


def nodes(n: int, cpu: str = "4") -> list[model.Node]:
    return [make_node(f"n{i}", cpu=cpu, memory="16Gi", pods=110) for i in range(n)]


def pods(names: Iterable[str], cpu: str = "500m", namespace: str = "team") -> list[model.Pod]:
    return [make_pod(name, namespace=namespace, uid="", requests={"cpu": cpu}) for name in names]


async def settled(berth: app.Berth, within: float = 10.0) -> None:
    """Until the loop has nothing left to try (every pod bound or unschedulable)."""
    async with asyncio.timeout(within):
        while True:
            await asyncio.sleep(0.02)
            if berth.durable is not None:
                await berth.durable.sync()
            scheduler = berth.core.scheduler
            assert scheduler is not None
            counts = scheduler.queue.counts()
            if not (counts["active"] or counts["backoff"] or counts["in_flight"]) and all(
                p.spec.node_name or scheduler.queue.phase(p.metadata.uid) for p in berth.cluster.pods.values()
            ):
                return


def bound(berth: app.Berth) -> dict[str, str]:
    """pod key -> node, of every bound pod the cluster holds."""
    return {key: p.spec.node_name for key, p in berth.cluster.pods.items() if p.spec.node_name}


def usage(berth: app.Berth) -> dict[str, int]:
    """The team queue's allocated amounts."""
    return dict(next(q for q in berth.core.quota.status() if q.name == "team").allocated)


# ------------------------------------------------------------ PostgreSQL

#: Short leases for the failover tests (leaderElection's durations).
FAST_LEASE = Lease(duration=3.0, renew_deadline=2.0, retry_period=0.5)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pgserver.PgServer]:
    """One real PostgreSQL server for the session (skipped where none is installed)."""
    why = pgserver.available()
    if why:
        pytest.skip(why)
    with pgserver.running() as server:
        yield server


_databases = itertools.count()


async def _admin(server: pgserver.PgServer, sql: str) -> None:
    conn = await asyncpg.connect(server.dsn)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture
def pg_dsn(pg_server: pgserver.PgServer) -> Iterator[str]:
    """A database of its own for one test, on the session's server."""
    name = f"berth_{next(_databases)}"
    asyncio.run(_admin(pg_server, f"CREATE DATABASE {name}"))
    yield pg_server.dsn.rsplit("/", 1)[0] + "/" + name
    asyncio.run(_admin(pg_server, f"DROP DATABASE {name} WITH (FORCE)"))


@pytest.fixture(params=["sqlite", "postgres"])
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], StateStore]:
    """A durable backend's store, made anew on the same place at each call
    (a restarted Berth's)."""
    if request.param == "sqlite":
        return lambda: SqliteStore(tmp_path)
    dsn = request.getfixturevalue("pg_dsn")
    return lambda: PostgresStore(dsn, lease=FAST_LEASE)
