"""Any sequence of feeds, submits, cancels, binds and restarts (clean or a
crash) leaves the restored Berth equal to a model of what was acknowledged:
the same nodes, the same pods each bound where the model says, queue usage
equal to what its bound pods request, decision serials that never go back —
on SQLite, and on PostgreSQL (a real server; fewer examples), where a crash
leaves the lease held and the restarted replica takes it over."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from pathlib import Path
from typing import Any

import asyncpg
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from berth import app
from berth.cluster.sources import BindError
from berth.store import PostgresStore, SqliteStore, StateStore
from berth.store.postgres import Lease
from tests.store.conftest import cfg, nodes, pods

NODES = [f"n{i}" for i in range(3)]
PODS = [f"p{i}" for i in range(6)]
CPU = {"n0": 1000, "n1": 2000, "n2": 4000}  # milli-cpu
POD_CPU = 700


class Restarts(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tmp = tempfile.TemporaryDirectory()
        self.nodes: set[str] = set()
        self.pods: dict[str, str] = {}  # key -> node ("" pending)
        self.serial = 0
        self.berth = self.run(self.start())

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    async def new_store(self) -> StateStore:
        return SqliteStore(Path(self.tmp.name))

    async def crash(self, store: StateStore) -> None:
        """Stop ``store`` as a killed process leaves it: nothing more committed."""
        assert isinstance(store, SqliteStore)
        await self.loop.run_in_executor(store._thread, store._close)  # the file is left as it is
        store._thread.shutdown()

    async def start(self) -> app.Berth:
        b = app.build(cfg(), store=await self.new_store())
        assert b.durable is not None
        await b.durable.restore()
        return b

    async def stop(self, *, crash: bool) -> None:
        b = self.berth
        assert b.durable is not None
        b.core.client.cancel()
        await b.core.client.drain()
        if crash:
            await self.crash(b.durable.store)
        else:
            await b.durable.close()

    async def synced(self) -> None:
        assert self.berth.durable is not None
        await self.berth.durable.sync()

    # ------------------------------------------------------------ rules

    @rule(names=st.sets(st.sampled_from(NODES), min_size=1))
    def feed_nodes(self, names: set[str]) -> None:
        fed = [n for n in nodes(3) if n.metadata.name in names]
        for n in fed:
            n.status.allocatable["cpu"] = f"{CPU[n.metadata.name]}m"
        self.berth.cluster.upsert_nodes(fed)
        self.run(self.synced())
        self.nodes |= names

    @rule(name=st.sampled_from(NODES))
    def delete_node(self, name: str) -> None:
        self.berth.cluster.delete_nodes([name])
        self.run(self.synced())
        self.nodes.discard(name)

    @rule(names=st.lists(st.sampled_from(PODS), min_size=1, max_size=3, unique=True))
    def submit(self, names: list[str]) -> None:
        assert self.berth.durable is not None
        results = self.berth.durable.submit(pods(names, cpu=f"{POD_CPU}m"))
        self.run(self.synced())
        for r in results:
            assert r.accepted, r.message
            self.pods.setdefault(r.pod, "")

    @rule(name=st.sampled_from(PODS))
    def cancel(self, name: str) -> None:
        assert self.berth.durable is not None
        res = self.berth.durable.cancel("team", name)
        self.run(self.synced())
        key = f"team/{name}"
        assert res.cancelled == (self.pods.get(key) == ""), res.message
        if res.cancelled:
            del self.pods[key]

    @precondition(lambda self: any(not n for n in self.pods.values()) and self.nodes)
    @rule(data=st.data())
    def bind(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(k for k, n in self.pods.items() if not n)))
        node = data.draw(st.sampled_from(sorted(self.nodes)))
        try:
            self.run(self.berth.cluster.bind(self.berth.cluster.pods[key], node))
        except BindError:
            used = sum(POD_CPU for n in self.pods.values() if n == node)
            assert used + POD_CPU > CPU[node]  # refused only for want of room
            return
        self.run(self.synced())
        self.pods[key] = node

    @rule(crash=st.booleans())
    def restart(self, crash: bool) -> None:
        self.serial = self.berth.core.decisions.serial
        self.run(self.stop(crash=crash))
        self.berth = self.run(self.start())
        assert self.berth.core.decisions.serial >= self.serial

    # ------------------------------------------------------------ the model

    @invariant()
    def equal_to_the_model(self) -> None:
        b = self.berth
        assert set(b.cluster.nodes) == self.nodes
        assert {k: p.spec.node_name for k, p in b.cluster.pods.items()} == self.pods
        team = next(q for q in b.core.quota.status() if q.name == "team")
        assert team.allocated.get("cpu", 0) == POD_CPU * sum(1 for n in self.pods.values() if n)

    def teardown(self) -> None:
        with contextlib.suppress(Exception):
            self.run(self.stop(crash=False))
        self.loop.close()
        self.tmp.cleanup()


# max_examples from the suite's Hypothesis profile (tests/conftest.py).
Restarts.TestCase.settings = settings(stateful_step_count=20)
test_restored_state_equals_the_model = Restarts.TestCase


#: A crashed replica's successor takes the lease at its next retry (the
#: crashed session is gone): short retries keep the examples quick.
RESTART_LEASE = Lease(duration=3.0, renew_deadline=2.0, retry_period=0.1)


class PostgresRestarts(Restarts):
    """The same machine on a postgres store, its tables dropped first."""

    dsn = ""

    def __init__(self) -> None:
        self.fresh = True
        super().__init__()

    async def new_store(self) -> StateStore:
        if self.fresh:
            self.fresh = False
            conn = await asyncpg.connect(self.dsn)
            await conn.execute("DROP TABLE IF EXISTS meta, objects, decisions, leader")
            await conn.close()
        return PostgresStore(self.dsn, lease=RESTART_LEASE)

    async def crash(self, store: StateStore) -> None:
        """Connections cut, the lease not released, nothing more committed."""
        assert isinstance(store, PostgresStore) and store._renewer is not None
        store._renewer.cancel()
        for conn in (store._conn, store._lease_conn):
            conn.terminate()


def test_restored_state_equals_the_model_on_postgres(pg_dsn: str) -> None:
    PostgresRestarts.dsn = pg_dsn
    run_state_machine_as_test(
        PostgresRestarts, settings=settings(settings.default, max_examples=8, stateful_step_count=15)
    )
