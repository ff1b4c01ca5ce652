"""Standalone Berth's durable state (see :mod:`berth.store.interface`):
``memory`` and ``sqlite`` backends behind :class:`StateStore`, chosen by
the configuration's ``state:`` (:func:`open_store`)."""

from __future__ import annotations

import os
from pathlib import Path

from berth.config import StateConfig
from berth.store.interface import Snapshot, StateStore
from berth.store.memory import MemoryStore
from berth.store.sqlite import SqliteStore

__all__ = ["MemoryStore", "Snapshot", "SqliteStore", "StateStore", "default_dir", "describe", "new_store"]


def default_dir() -> Path:
    """``$XDG_STATE_HOME/berth``, else ``~/.local/state/berth`` (the XDG
    base directory specification's place for state that survives restarts)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "berth"


def new_store(cfg: StateConfig, *, default_backend: str = "memory") -> StateStore:
    """The store ``cfg`` names (``default_backend`` when it names none); not yet opened."""
    backend = cfg.backend or default_backend
    if backend == "sqlite":
        return SqliteStore(Path(cfg.dir).expanduser() if cfg.dir else default_dir())
    return MemoryStore()


def describe(store: StateStore) -> str:
    """``sqlite at DIR`` or ``memory``: for the log."""
    if isinstance(store, SqliteStore):
        return f"sqlite at {store.dir}"
    return store.backend
