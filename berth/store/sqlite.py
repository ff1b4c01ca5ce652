"""The SQLite store: one file (``state.db``, WAL) in the state directory,
one writer (this process: an exclusive ``flock`` on ``berth.lock`` there,
so a second ``berth serve`` on the same directory fails at start instead of
interleaving writes).

Every read and write runs on one thread of its own, so the event loop never
waits on the disk; what the loop hands over is a batch: everything written
since the previous commit began (:meth:`SqliteStore.sync`), one transaction,
one commit. While a commit runs, new writes gather for the next one, so
under load a commit carries hundreds of bindings and costs one fsync.

Hand-written on :mod:`sqlite3` rather than on aiosqlite (0.22.1 on PyPI,
maintained): aiosqlite sends each statement to its thread as its own job
and leaves batching to the caller, which is the part that matters here; a
single-worker executor running one function per batch is all of it, with
no dependency.

``synchronous=NORMAL`` with WAL: a commit survives the process being
killed (``kill -9``, a crash) — the WAL is in the OS's hands once written;
only a power loss may lose the last commits (``synchronous=FULL`` would
fsync each one). The schema::

    meta(key, value)                 epoch, schema version
    objects(kind, key, value)        msgpack (berth.store.codec)
    decisions(serial, value)         the decision log's retained tail
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from berth.errors import FailedPrecondition
from berth.store.batching import Batch, BatchingStore, decoded
from berth.store.interface import Snapshot

__all__ = ["DB_FILE", "LOCK_FILE", "SCHEMA_VERSION", "SqliteStore"]

DB_FILE = "state.db"
LOCK_FILE = "berth.lock"
SCHEMA_VERSION = "1"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS objects (kind TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,"
    " PRIMARY KEY (kind, key))",
    "CREATE TABLE IF NOT EXISTS decisions (serial INTEGER PRIMARY KEY, value BLOB NOT NULL)",
)


class SqliteStore(BatchingStore):
    backend = "sqlite"

    def __init__(self, directory: str | Path) -> None:
        super().__init__()
        self.dir = Path(directory)
        self._db: sqlite3.Connection | None = None
        self._lock_fd = -1
        # One thread: sqlite3 connections are not shared across threads, and one writer is the design.
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="berth-state")

    # ------------------------------------------------------------ open

    async def open(self) -> Snapshot:
        loop = asyncio.get_running_loop()
        snap = await loop.run_in_executor(self._thread, self._open)
        self._epoch = snap.epoch
        return snap

    def _open(self) -> Snapshot:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise FailedPrecondition(f"state.dir: cannot create {self.dir}: {e.strerror or e}") from None
        fd = os.open(self.dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise FailedPrecondition(
                f"state.dir: {self.dir} is in use by another berth serve (it holds {self.dir / LOCK_FILE})"
            ) from None
        self._lock_fd = fd
        db = self._db = sqlite3.connect(self.dir / DB_FILE, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        with _transaction(db):
            for statement in _SCHEMA:
                db.execute(statement)
            rows = dict(db.execute("SELECT key, value FROM meta").fetchall())
            created = "epoch" not in rows
            if created:
                rows = {"epoch": uuid.uuid4().hex, "schema": SCHEMA_VERSION}
                db.executemany("INSERT INTO meta VALUES (?, ?)", rows.items())
        if rows.get("schema") != SCHEMA_VERSION:
            raise FailedPrecondition(
                f"state.dir: {self.dir / DB_FILE} has schema {rows.get('schema')!r}; "
                f"this Berth reads {SCHEMA_VERSION!r}"
            )
        return decoded(
            rows["epoch"],
            db.execute("SELECT kind, key, value FROM objects ORDER BY rowid"),
            db.execute("SELECT serial, value FROM decisions ORDER BY serial"),
            created=created,
        )

    # ------------------------------------------------------------ commits

    async def _commit_batch(self, batch: Batch) -> None:
        await asyncio.get_running_loop().run_in_executor(self._thread, self._commit, batch)

    def _commit(self, b: Batch) -> None:
        db = self._db
        if db is None:
            raise FailedPrecondition("state store: not open")
        with _transaction(db):
            if b.deletes:
                db.executemany("DELETE FROM objects WHERE kind = ? AND key = ?", b.deletes)
            if b.upserts:
                db.executemany(
                    "INSERT INTO objects (kind, key, value) VALUES (?, ?, ?)"
                    " ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value",
                    b.upserts,
                )
            if b.decisions:
                db.executemany("INSERT OR REPLACE INTO decisions VALUES (?, ?)", b.decisions)
            if b.trim:
                db.execute("DELETE FROM decisions WHERE serial < ?", (b.trim,))

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.sync()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._close)
        self._thread.shutdown(wait=True)

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Any:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
