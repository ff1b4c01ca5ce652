"""The postgres store's leadership on a real server (berth.store.postgres):
one replica leads, a second stands by naming it and takes over when the
lease is released, expired or its holder's session gone, and a replica
that lost the lease commits nothing."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import asyncpg
import pytest

from berth import config
from berth.errors import FailedPrecondition, Unavailable
from berth.store import PostgresStore, new_store
from berth.testing import make_node
from tests.store.conftest import FAST_LEASE


def replica(dsn: str, name: str) -> PostgresStore:
    return PostgresStore(dsn, identity=name, lease=FAST_LEASE)


async def node_names(dsn: str) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        return [r["key"] for r in await conn.fetch("SELECT key FROM objects WHERE kind = 'nodes' ORDER BY key")]
    finally:
        await conn.close()


async def standing_by(store: PostgresStore) -> tuple[asyncio.Task[object], list[str]]:
    """``store`` opening (it waits while another leads), and the holders it reported."""
    holders: list[str] = []
    store.on_holder = holders.append
    task: asyncio.Task[object] = asyncio.create_task(store.open())
    async with asyncio.timeout(5):
        while not holders:  # noqa: ASYNC110 - filled by the store's callback
            await asyncio.sleep(0.05)
    return task, holders


async def test_a_second_replica_stands_by_naming_the_leader_and_leads_once_the_lease_is_released(
    pg_dsn: str,
) -> None:
    a, b = replica(pg_dsn, "a"), replica(pg_dsn, "b")
    await a.open()
    a.put("nodes", "n0", make_node("n0"))
    await a.sync()
    opening, holders = await standing_by(b)
    await asyncio.sleep(FAST_LEASE.retry_period * 2)
    assert not opening.done() and holders == ["a"]
    loop = asyncio.get_running_loop()
    released = loop.time()
    await a.close()
    snap = await asyncio.wait_for(opening, FAST_LEASE.retry_period * 3)
    try:
        assert loop.time() - released < FAST_LEASE.duration  # at the next retry, not after the lease
        assert holders[-1] == "b" and b.term == a.term + 1
        assert list(snap.objects["nodes"]) == ["n0"]  # type: ignore[attr-defined]
    finally:
        await b.close()


async def test_a_standby_takes_over_at_its_next_retry_when_the_leaders_session_ends(pg_dsn: str) -> None:
    a, b = replica(pg_dsn, "a"), replica(pg_dsn, "b")
    await a.open()
    opening, _ = await standing_by(b)
    loop = asyncio.get_running_loop()
    gone = loop.time()
    # As kill -9 leaves it: connections closed by the kernel, the lease not released.
    assert a._renewer is not None
    a._renewer.cancel()
    for conn in (a._conn, a._lease_conn):
        conn.terminate()
    await asyncio.wait_for(opening, FAST_LEASE.duration)
    try:
        assert loop.time() - gone < FAST_LEASE.duration
    finally:
        await b.close()


async def test_a_paused_leader_loses_the_lease_and_commits_nothing_after(pg_dsn: str) -> None:
    a, b = replica(pg_dsn, "a"), replica(pg_dsn, "b")
    await a.open()
    a.put("nodes", "n0", make_node("n0"))
    await a.sync()
    opening, _ = await standing_by(b)
    # Paused: no renewal, its session kept (so the standby waits out the lease).
    assert a._renewer is not None
    a._renewer.cancel()
    loop = asyncio.get_running_loop()
    paused = loop.time()
    await asyncio.wait_for(opening, FAST_LEASE.duration + 3 * FAST_LEASE.retry_period)
    try:
        assert loop.time() - paused >= FAST_LEASE.duration - FAST_LEASE.retry_period
        # Resumed: what it buffered meanwhile is refused, and nothing lands.
        a.put("nodes", "stale", make_node("stale"))
        with pytest.raises(Unavailable, match="lost the leadership"):
            await a.sync()
        assert a.lost.is_set()
        with pytest.raises(Unavailable):
            await a.sync()
        assert await node_names(pg_dsn) == ["n0"]
        b.put("nodes", "n1", make_node("n1"))
        await b.sync()
        assert await node_names(pg_dsn) == ["n0", "n1"]
    finally:
        await a.close()
        await b.close()


async def test_a_leader_paused_inside_a_commit_does_not_block_the_takeover(pg_dsn: str) -> None:
    a, b = replica(pg_dsn, "a"), replica(pg_dsn, "b")
    await a.open()
    assert a._renewer is not None
    a._renewer.cancel()
    # Mid-commit when paused: the leader row held FOR SHARE, the transaction left open.
    tx = a._conn.transaction()
    await tx.start()
    await a._conn.fetchval("SELECT term FROM leader WHERE id = 1 FOR SHARE")
    opening, _ = await standing_by(b)
    # The server ends the idle transaction's session after the lease; then the takeover proceeds.
    await asyncio.wait_for(opening, FAST_LEASE.duration * 2 + 3 * FAST_LEASE.retry_period)
    try:
        assert b.term == a.term + 1
    finally:
        with contextlib.suppress(Exception):
            await tx.rollback()
        await a.close()
        await b.close()


async def test_a_wiped_postgres_store_gets_a_new_epoch(pg_dsn: str) -> None:
    first = replica(pg_dsn, "a")
    epoch = (await first.open()).epoch
    await first.close()
    conn = await asyncpg.connect(pg_dsn)
    await conn.execute("DROP TABLE meta, objects, decisions, leader")
    await conn.close()
    again = replica(pg_dsn, "a")
    try:
        snap = await again.open()
        assert snap.created and snap.epoch != epoch
    finally:
        await again.close()


async def test_an_unreachable_server_is_one_clear_error() -> None:
    store = PostgresStore("postgresql://postgres@127.0.0.1:1/postgres", lease=FAST_LEASE)
    with pytest.raises(FailedPrecondition, match=r"state\.dsn: cannot connect to PostgreSQL"):
        await store.open()
    await store.close()


@pytest.mark.parametrize(
    ("state", "error"),
    [
        ({"backend": "postgres"}, "needs exactly one of dsn and dsnFile"),
        ({"backend": "postgres", "dsn": "postgresql://x/y", "dsnFile": "/f"}, "needs exactly one of dsn and dsnFile"),
        ({"backend": "sqlite", "dsn": "postgresql://x/y"}, "only for backend postgres"),
    ],
)
def test_the_postgres_keys_are_checked(state: dict[str, str], error: str) -> None:
    with pytest.raises(config.ConfigError, match=error):
        config.parse({"state": state})


def test_the_dsn_is_read_from_dsn_file_and_the_lease_from_leader_election(tmp_path: Path) -> None:
    (tmp_path / "dsn").write_text("postgresql://berth@db/berth\n")
    cfg = config.parse(
        {
            "state": {"backend": "postgres", "dsnFile": str(tmp_path / "dsn")},
            "leaderElection": {"leaseDurationSeconds": 20, "renewDeadlineSeconds": 12, "retryPeriodSeconds": 3},
        }
    )
    store = new_store(cfg.state, lease=cfg.leader_election)
    assert isinstance(store, PostgresStore)
    assert store.dsn == "postgresql://berth@db/berth"
    assert (store.lease.duration, store.lease.renew_deadline, store.lease.retry_period) == (20, 12, 3)
    cfg.state.dsn_file = str(tmp_path / "missing")
    with pytest.raises(config.ConfigError, match=r"state\.dsnFile: cannot read"):
        new_store(cfg.state)
