"""Standalone Berth's durable state (see :mod:`berth.store.interface`):
``memory``, ``sqlite`` and ``postgres`` backends behind :class:`StateStore`,
chosen by the configuration's ``state:`` (:func:`new_store`)."""

from __future__ import annotations

import os
from pathlib import Path

from berth.config import ConfigError, LeaderElectionConfig, StateConfig
from berth.store.interface import Snapshot, StateStore
from berth.store.memory import MemoryStore
from berth.store.postgres import Lease, PostgresStore
from berth.store.sqlite import SqliteStore

__all__ = [
    "MemoryStore",
    "PostgresStore",
    "Snapshot",
    "SqliteStore",
    "StateStore",
    "default_dir",
    "describe",
    "new_store",
]


def default_dir() -> Path:
    """``$XDG_STATE_HOME/berth``, else ``~/.local/state/berth`` (the XDG
    base directory specification's place for state that survives restarts)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "berth"


def new_store(
    cfg: StateConfig, *, default_backend: str = "memory", lease: LeaderElectionConfig | None = None
) -> StateStore:
    """The store ``cfg`` names (``default_backend`` when it names none); not
    yet opened. A ``postgres`` store's replicas elect their leader with
    ``lease``'s durations (the configuration's ``leaderElection``)."""
    backend = cfg.backend or default_backend
    if backend == "sqlite":
        return SqliteStore(Path(cfg.dir).expanduser() if cfg.dir else default_dir())
    if backend == "postgres":
        le = lease or LeaderElectionConfig()
        return PostgresStore(
            _dsn(cfg), lease=Lease(le.lease_duration_seconds, le.renew_deadline_seconds, le.retry_period_seconds)
        )
    return MemoryStore()


def _dsn(cfg: StateConfig) -> str:
    if cfg.dsn:
        return cfg.dsn
    try:
        dsn = Path(cfg.dsn_file).expanduser().read_text().strip()
    except OSError as e:
        raise ConfigError(f"state.dsnFile: cannot read {cfg.dsn_file}: {e.strerror or e}") from None
    if not dsn:
        raise ConfigError(f"state.dsnFile: {cfg.dsn_file} is empty")
    return dsn


def describe(store: StateStore) -> str:
    """``sqlite at DIR``, ``postgres as IDENTITY`` or ``memory``: for the log."""
    if isinstance(store, SqliteStore):
        return f"sqlite at {store.dir}"
    if isinstance(store, PostgresStore):
        return f"postgres as {store.identity}"
    return store.backend
