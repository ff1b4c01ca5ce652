"""Two real `berth serve` replicas on one PostgreSQL store (a real server):
the standby refuses calls naming the leader; the leader stopped (SIGTERM,
or kill -9) -> the standby takes over within the lease and carries on from
the store (bound pods stay bound, none placed twice); a leader paused with
SIGSTOP past its lease writes nothing once resumed, and exits."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import grpc
import pytest

from berth.cluster import model
from berth.framework.decision import DecisionKind
from berth.store import codec
from berth_client import errors
from berth_client.aio import AsyncClient
from berth_client.connection import Retry
from tests.store.test_kill9 import Serve, node, pod, ready

#: The replicas' lease (test_kill9.FAST_LEASE): 4 s, renewed every 1 s.
LEASE = 4.0
NO_RETRY = Retry(attempts=1)


@pytest.fixture
def pair(tmp_path: Path, pg_dsn: str) -> Iterator[tuple[Serve, Serve]]:
    a, b = Serve(tmp_path, pg_dsn, "a"), Serve(tmp_path, pg_dsn, "b")
    yield a, b
    for s in (a, b):
        if s.proc is not None and s.proc.poll() is None:
            s.proc.send_signal(signal.SIGCONT)
            s.kill9()


async def logged(s: Serve, pattern: str, within: float = 60.0) -> re.Match[str]:
    async with asyncio.timeout(within):
        while True:
            found = re.search(pattern, s.logs())
            if found is not None:
                return found
            await asyncio.sleep(0.1)


async def leads(s: Serve, within: float = 60.0) -> str:
    """The replica's identity once it leads."""
    return (await logged(s, r"state: (\S+) leads \(term \d+\)", within)).group(1)


async def all_bound(client: AsyncClient, count: int) -> dict[str, str]:
    async with asyncio.timeout(60):
        while True:
            rows = await client.list_pods("team")
            if len(rows) == count and all(r.phase == "Bound" for r in rows):
                return {f"{r.namespace}/{r.name}": r.node for r in rows}
            await asyncio.sleep(0.2)


async def rows(dsn: str) -> tuple[list[tuple[str, str, bytes]], list[int]]:
    """Every object row and decision serial the store holds."""
    conn = await asyncpg.connect(dsn)
    try:
        objects = [tuple(r) for r in await conn.fetch("SELECT kind, key, value FROM objects ORDER BY kind, key")]
        serials = [r[0] for r in await conn.fetch("SELECT serial FROM decisions ORDER BY serial")]
        return objects, serials
    finally:
        await conn.close()


async def stored_bindings(dsn: str) -> dict[str, str]:
    """pod -> node of every bound pod the store holds."""
    conn = await asyncpg.connect(dsn)
    try:
        stored = await conn.fetch("SELECT key, value FROM objects WHERE kind = 'pods'")
    finally:
        await conn.close()
    pods = {key: codec.decode("pods", key, value) for key, value in stored}
    return {key: p.spec.node_name for key, p in pods.items() if isinstance(p, model.Pod) and p.spec.node_name}


async def settled_rows(dsn: str) -> tuple[list[tuple[str, str, bytes]], list[int]]:
    """The store's rows once two reads 0.3 s apart agree."""
    last = await rows(dsn)
    async with asyncio.timeout(30):
        while True:
            await asyncio.sleep(0.3)
            now = await rows(dsn)
            if now == last:
                return now
            last = now


async def committed_bindings(dsn: str, count: int) -> dict[str, str]:
    """Until the store holds ``count`` bound pods: pod -> node."""
    async with asyncio.timeout(30):
        while True:
            placed = await stored_bindings(dsn)
            if len(placed) == count:
                return placed
            await asyncio.sleep(0.1)


async def bound_decisions(dsn: str) -> dict[str, list[tuple[int, str]]]:
    """pod -> (serial, node) of each BOUND decision the stored log holds for it."""
    conn = await asyncpg.connect(dsn)
    try:
        stored = [(r[0], codec.decode_decision(r[1])) for r in await conn.fetch("SELECT serial, value FROM decisions")]
    finally:
        await conn.close()
    bound: dict[str, list[tuple[int, str]]] = {}
    for serial, d in sorted(stored, key=lambda sd: sd[0]):
        if d.kind == DecisionKind.BOUND:
            bound.setdefault(d.pod, []).append((serial, d.node))
    return bound


async def two_replicas(a: Serve, b: Serve) -> tuple[str, dict[str, str]]:
    """A leading with 30 pods bound on 5 nodes, B standing by naming it."""
    a.start()
    leader = await leads(a)
    b.start()
    await logged(b, rf"standing by; the leader is {re.escape(leader)}")
    async with AsyncClient(f"127.0.0.1:{a.grpc}", timeout=10) as client:
        await ready(client)
        await client.feed([node(i) for i in range(5)])
        assert all(r.accepted for r in await client.submit([pod(i) for i in range(30)]))
        await all_bound(client, 30)
    # What the replicas agree on is what was committed (a binding is
    # acknowledged, to a watch, once it is): wait for all of it.
    placed = await committed_bindings(a.dsn, 30)
    async with AsyncClient(f"127.0.0.1:{b.grpc}", timeout=10, retry=NO_RETRY) as standby:
        await ready(standby)
        with pytest.raises(errors.BerthError, match=f"not the leader \\(leader is {re.escape(leader)}\\)") as e:
            await standby.list_pods("team")
        assert e.value.code == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(errors.BerthError, match="not the leader"):
            await standby.feed([node(99)])  # a standby holds nothing: feeds are refused too
    return leader, placed


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
async def test_the_leader_stopped_the_standby_takes_over_within_the_lease_and_carries_on(
    pair: tuple[Serve, Serve], pg_dsn: str, how: signal.Signals
) -> None:
    a, b = pair
    _, placed = await two_replicas(a, b)
    loop = asyncio.get_running_loop()
    stopped = loop.time()
    assert a.proc is not None
    a.proc.send_signal(how)
    await leads(b, within=LEASE + 10)
    took = loop.time() - stopped
    assert took < LEASE, f"took over after {took:.1f}s"
    async with AsyncClient(f"127.0.0.1:{b.grpc}", timeout=10) as client:
        assert await all_bound(client, 30) == placed  # bound stay bound where they were
        assert all(r.accepted for r in await client.submit([pod(i) for i in range(30, 40)]))
        now = await all_bound(client, 40)
        assert {k: v for k, v in now.items() if k in placed} == placed
    a.proc.wait(timeout=30)
    assert b.stop() == 0, b.logs()  # its last bindings committed
    # Every pod bound once: one BOUND decision each in the log both leaders wrote.
    bound = await bound_decisions(pg_dsn)
    assert sorted(bound) == sorted(f"team/p{i}" for i in range(40))
    assert {pod: got for pod, got in bound.items() if len(got) != 1} == {}, a.logs() + b.logs()


async def test_a_leader_paused_past_its_lease_writes_nothing_after_it_resumes(
    pair: tuple[Serve, Serve], pg_dsn: str
) -> None:
    a, b = pair
    leader, placed = await two_replicas(a, b)
    assert a.proc is not None
    loop = asyncio.get_running_loop()
    a.proc.send_signal(signal.SIGSTOP)
    paused = loop.time()
    successor = await leads(b, within=LEASE + 15)
    took = loop.time() - paused
    # A paused leader keeps its session: the lease is waited out (plus a retry).
    assert LEASE - 1.0 <= took < LEASE + 5, f"took over after {took:.1f}s"
    async with AsyncClient(f"127.0.0.1:{b.grpc}", timeout=10) as client:
        assert await all_bound(client, 30) == placed
        assert all(r.accepted for r in await client.submit([pod(i) for i in range(30, 35)]))
        await all_bound(client, 35)
    await committed_bindings(pg_dsn, 35)
    before = await settled_rows(pg_dsn)  # the successor has nothing more to write
    # Work reaches the paused leader (queued in its socket), then it resumes.
    async with AsyncClient(f"127.0.0.1:{a.grpc}", timeout=30, retry=NO_RETRY) as late:
        submit = asyncio.create_task(late.submit([pod(i) for i in range(100, 110)]))
        feed = asyncio.create_task(late.feed([node(i) for i in range(100, 103)]))
        await asyncio.sleep(0.5)
        a.proc.send_signal(signal.SIGCONT)
        outcomes = await asyncio.gather(submit, feed, return_exceptions=True)
    # Nothing it did after resuming is acknowledged as durable, and nothing landed.
    assert all(isinstance(o, errors.BerthError) for o in outcomes), outcomes
    assert a.proc.wait(timeout=30) != 0
    assert "is no longer the leader" in a.logs()
    assert await rows(pg_dsn) == before
    assert successor != leader
    with contextlib.suppress(Exception):
        assert b.stop() == 0, b.logs()
