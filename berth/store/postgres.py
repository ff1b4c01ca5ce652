"""The PostgreSQL store: several ``berth serve`` replicas share one
database; one of them leads (schedules and writes), the others stand by
and take over when it is gone.

The tables are SQLite's (:mod:`berth.store.sqlite`), plus the lease::

    meta(key, value)                   epoch, schema version
    objects(kind, key, value, seq)     msgpack (berth.store.codec); seq keeps
                                       the order objects were first written
    decisions(serial, value)           the decision log's retained tail
    leader(id = 1, term, holder,       who leads, since when, and its
           renewed_at, pid)            fencing token (term)

**Leadership** follows client-go's leader election
(``k8s.io/client-go/tools/leaderelection/leaderelection.go`` v0.37.2, the
Lease kube-scheduler holds), with the database's clock as the only clock:

- a replica *acquires* the lease when the ``leader`` row is released
  (``holder = ''``), expired (``now() - renewed_at > leaseDuration``), or its
  holder's session is gone; acquiring increments ``term``. The holder of term
  T keeps the session advisory lock ``(LOCK_SPACE, T)`` on its lease
  connection, so a standby that can take that lock knows the holder's
  session ended (killed, crashed: the server closed its connection) and
  takes over at its next retry instead of waiting out the lease; a paused
  holder still has its session, so it is waited out;
- the leader *renews* every ``retryPeriod`` (``UPDATE ... WHERE term = T``);
  a renewal that finds another term, or no successful renewal for
  ``renewDeadline``, ends its leadership (``lost`` is set: ``berth serve``
  then exits, as kube-scheduler exits on "leaderelection lost");
- **fencing**: every commit reads ``term`` with ``FOR SHARE`` in its own
  transaction and writes nothing unless it is still T. A takeover's
  ``UPDATE`` and a commit's ``FOR SHARE`` exclude each other, so a commit
  either lands before the takeover (the new leader then reads it) or sees
  the new term and is rolled back. A leader paused (SIGSTOP) past its lease
  therefore writes nothing once resumed; paused inside a transaction, the
  server ends its session after ``idle_in_transaction_session_timeout``
  (the lease), so it cannot hold the row lock and block the takeover.

A standby's :meth:`PostgresStore.open` waits until it leads, reporting the
holder meanwhile (``on_holder``: ``Core.leader``, so its doors answer
UNAVAILABLE naming the leader, as in Kubernetes mode); then it reads the
snapshot, and :class:`~berth.scheduling.durable.Durable` restores from it
as after any restart: bound pods stay bound, pods whose binding was not
committed come back pending, nothing is placed twice.

Commits are batched as SQLite's (:mod:`berth.store.batching`); a batch is
sent as arrays (``unnest``), one statement per table, one round trip each.
asyncpg (PyPI, maintained, binary protocol) is the driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import uuid
from collections.abc import Callable
from typing import Any

import asyncpg

from berth.errors import FailedPrecondition, Unavailable
from berth.store.batching import Batch, BatchingStore, decoded
from berth.store.interface import Snapshot

__all__ = ["LOCK_SPACE", "SCHEMA_VERSION", "Lease", "PostgresStore", "new_identity"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = "1"
#: The first key of Berth's advisory locks (the second is the term):
#: "berth" in ASCII, so other applications' locks on the server do not collide.
LOCK_SPACE = 0x6265727468 & 0x7FFFFFFF

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS objects (kind TEXT NOT NULL, key TEXT NOT NULL, value BYTEA NOT NULL,"
    " seq BIGINT GENERATED ALWAYS AS IDENTITY, PRIMARY KEY (kind, key))",
    "CREATE TABLE IF NOT EXISTS decisions (serial BIGINT PRIMARY KEY, value BYTEA NOT NULL)",
    "CREATE TABLE IF NOT EXISTS leader (id INT PRIMARY KEY CHECK (id = 1), term BIGINT NOT NULL,"
    " holder TEXT NOT NULL, renewed_at TIMESTAMPTZ NOT NULL)",
    # The one row, there before anyone campaigns: every attempt locks it
    # (FOR UPDATE), so two replicas starting together take turns.
    "INSERT INTO leader VALUES (1, 0, '', 'epoch') ON CONFLICT (id) DO NOTHING",
)

#: Rows a restore reads per round trip.
_PREFETCH = 5000
_DELETE_OBJECTS = (
    "DELETE FROM objects o USING unnest($1::text[], $2::text[]) AS d(kind, key) WHERE o.kind = d.kind AND o.key = d.key"
)
_UPSERT_OBJECTS = (
    "INSERT INTO objects (kind, key, value) SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[])"
    " ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value"
)
_UPSERT_DECISIONS = (
    "INSERT INTO decisions SELECT * FROM unnest($1::bigint[], $2::bytea[])"
    " ON CONFLICT (serial) DO UPDATE SET value = excluded.value"
)


def new_identity() -> str:
    """``hostname_<8 hex>``, as kube-scheduler's (hostname + "_" + a UUID)."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class Lease:
    """leaderElection's durations (seconds)."""

    __slots__ = ("duration", "renew_deadline", "retry_period")

    def __init__(self, duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0) -> None:
        if not 0 < retry_period < renew_deadline < duration:
            raise FailedPrecondition(
                "leaderElection: needs 0 < retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds"
            )
        self.duration = duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period


class PostgresStore(BatchingStore):
    backend = "postgres"

    def __init__(self, dsn: str, *, identity: str = "", lease: Lease | None = None) -> None:
        super().__init__()
        self.dsn = dsn
        self.identity = identity or new_identity()
        self.lease = lease or Lease()
        #: Called with the holder's identity while standing by ("" when none).
        self.on_holder: Callable[[str], None] | None = None
        #: Set when this replica led and no longer does.
        self.lost = asyncio.Event()
        #: The term this replica leads in (0: not leading).
        self.term = 0
        self._lease_conn: Any = None  # asyncpg.Connection: renewals and the advisory lock
        self._conn: Any = None  # asyncpg.Connection: commits
        self._renewer: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ open: lead, then read

    async def open(self) -> Snapshot:
        self._lease_conn = await self._connect()
        self._conn = await self._connect()
        created = await self._schema()
        await self._campaign()
        self._renewer = asyncio.get_running_loop().create_task(self._renew(), name="berth-state-lease")
        return await self._read(created)

    async def _connect(self) -> Any:
        # A transaction left idle (its process paused: a commit, or a
        # standby's attempt to acquire) must not hold the leader row past the
        # lease: the server ends such a session.
        idle = {"idle_in_transaction_session_timeout": str(int(self.lease.duration * 1000))}
        try:
            return await asyncpg.connect(self.dsn, timeout=self.lease.renew_deadline, server_settings=idle)
        except (TimeoutError, OSError, asyncpg.PostgresError) as e:
            raise FailedPrecondition(f"state.dsn: cannot connect to PostgreSQL: {e}") from None

    async def _schema(self) -> bool:
        """Create the tables once (replicas starting together take turns); True when this made the epoch."""
        conn = self._conn
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1, 0)", LOCK_SPACE)
            for statement in _SCHEMA:
                await conn.execute(statement)
            rows = {r["key"]: r["value"] for r in await conn.fetch("SELECT key, value FROM meta")}
            created = "epoch" not in rows
            if created:
                rows = {"epoch": uuid.uuid4().hex, "schema": SCHEMA_VERSION}
                await conn.executemany("INSERT INTO meta VALUES ($1, $2)", list(rows.items()))
        if rows.get("schema") != SCHEMA_VERSION:
            raise FailedPrecondition(
                f"state.dsn: the database has schema {rows.get('schema')!r}; this Berth reads {SCHEMA_VERSION!r}"
            )
        self._epoch = rows["epoch"]
        return created

    async def _campaign(self) -> None:
        """Until this replica leads (see the module docstring)."""
        conn, seen = self._lease_conn, None
        while True:
            term = await self._try_acquire()
            if term:
                self.term = term
                log.info("state: %s leads (term %d)", self.identity, term)
                if self.on_holder is not None:
                    self.on_holder(self.identity)
                return
            holder = await conn.fetchval("SELECT holder FROM leader WHERE id = 1") or ""
            if holder != seen:
                seen = holder
                log.info("state: standing by; the leader is %s", holder or "(none)")
                if self.on_holder is not None:
                    self.on_holder(holder)
            await asyncio.sleep(self.lease.retry_period)

    async def _try_acquire(self) -> int:
        """The new term when the lease could be taken, else 0."""
        conn = self._lease_conn
        async with conn.transaction():
            # Never wait on a commit holding the row for long: try again later.
            await conn.execute(f"SET LOCAL lock_timeout = {int(self.lease.retry_period * 1000)}")
            try:
                row = await conn.fetchrow(
                    "SELECT term, holder, now() - renewed_at > make_interval(secs => $1) AS expired"
                    " FROM leader WHERE id = 1 FOR UPDATE",
                    self.lease.duration,
                )
            except asyncpg.LockNotAvailableError:
                return 0
            if row is None or not (row["expired"] or not row["holder"] or await self._holder_gone(row["term"])):
                return 0
            term = int(row["term"]) + 1
            # The session lock that tells standbys this term's holder is
            # connected, taken before the term is visible (a session lock
            # outlives the transaction).
            if not await conn.fetchval("SELECT pg_try_advisory_lock($1, $2)", LOCK_SPACE, _lock_key(term)):
                return 0
            await conn.execute(
                "UPDATE leader SET term = $1, holder = $2, renewed_at = now() WHERE id = 1", term, self.identity
            )
        return term

    async def _holder_gone(self, term: int) -> bool:
        """Whether the session of term ``term``'s holder has ended (its advisory lock is free)."""
        conn = self._lease_conn
        if not await conn.fetchval("SELECT pg_try_advisory_lock($1, $2)", LOCK_SPACE, _lock_key(term)):
            return False
        await conn.execute("SELECT pg_advisory_unlock($1, $2)", LOCK_SPACE, _lock_key(term))
        return True

    async def _renew(self) -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            await asyncio.sleep(self.lease.retry_period)
            try:
                async with asyncio.timeout(self.lease.renew_deadline):
                    renewed = await self._lease_conn.fetchval(
                        "UPDATE leader SET renewed_at = now() WHERE id = 1 AND term = $1 RETURNING term", self.term
                    )
            except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as e:
                if loop.time() - last < self.lease.renew_deadline:
                    log.warning("state: renewing the lease failed (%s); retrying", e)
                    continue
                self._lose(f"the lease could not be renewed for {self.lease.renew_deadline:g}s ({e})")
                return
            if renewed is None:
                self._lose("another replica took the lease")
                return
            last = loop.time()

    def _lose(self, why: str) -> None:
        if self.lost.is_set():
            return
        log.error("state: %s is no longer the leader (term %d): %s", self.identity, self.term, why)
        self._fail(Unavailable(f"state: this replica lost the leadership (term {self.term}): {why}"))
        self.lost.set()

    async def _read(self, created: bool) -> Snapshot:
        conn = self._conn
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            # Streamed (a server-side cursor) into plain tuples: with all
            # 55 000 Records of a 5000-node, 50 000-pod store fetched at once
            # the restore took 10.4 s against 4.7-6.6 s this way (load ~4;
            # with the collector off, 5.9 s: the Records cost its passes).
            objects = [
                (r[0], r[1], r[2])
                async for r in conn.cursor("SELECT kind, key, value FROM objects ORDER BY seq", prefetch=_PREFETCH)
            ]
            decisions = [
                (r[0], r[1])
                async for r in conn.cursor("SELECT serial, value FROM decisions ORDER BY serial", prefetch=_PREFETCH)
            ]
        return decoded(self._epoch, objects, decisions, created=created)

    # ------------------------------------------------------------ commits (fenced)

    async def _commit_batch(self, b: Batch) -> None:
        conn = self._conn
        if conn is None or not self.term:
            raise FailedPrecondition("state store: not open")
        try:
            async with conn.transaction():
                term = await conn.fetchval("SELECT term FROM leader WHERE id = 1 FOR SHARE")
                if term != self.term:
                    raise _Fenced(term)
                for sql, rows in (
                    (_DELETE_OBJECTS, b.deletes),
                    (_UPSERT_OBJECTS, b.upserts),
                    (_UPSERT_DECISIONS, b.decisions),
                ):
                    if rows:  # one statement, its rows sent as one array per column
                        await conn.execute(sql, *(list(column) for column in zip(*rows, strict=True)))
                if b.trim:
                    await conn.execute("DELETE FROM decisions WHERE serial < $1", b.trim)
        except _Fenced as e:
            self._lose(f"the lease is in term {e.term}")
            raise self._failure or Unavailable("state: lost the leadership") from None
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as e:
            # Not known to be committed or not: this replica stops leading
            # (its successor restores whatever landed).
            self._lose(f"a commit failed: {e}")
            raise self._failure or Unavailable("state: a commit failed") from None

    async def close(self) -> None:
        """Commit what is pending, then release the lease (the standby
        takes over at its next retry, as client-go's ``ReleaseOnCancel``)."""
        if self.term and self._failure is None:
            with contextlib.suppress(Exception):
                await self.sync()
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._renewer
        if self.term and not self.lost.is_set() and self._lease_conn is not None:
            with contextlib.suppress(Exception):
                await self._lease_conn.execute("UPDATE leader SET holder = '' WHERE id = 1 AND term = $1", self.term)
        for conn in (self._conn, self._lease_conn):
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close(timeout=5)
        self._conn = self._lease_conn = None


class _Fenced(Exception):
    def __init__(self, term: int | None) -> None:
        super().__init__(term)
        self.term = term


def _lock_key(term: int) -> int:
    """An int4 advisory-lock key for a term (int8 terms wrap)."""
    return int(term % 0x7FFFFFFF)
