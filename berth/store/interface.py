"""The state store's contract: what standalone Berth keeps across restarts,
and the one interface every backend implements.

What is kept (``kind`` names a table of objects by key)::

    objects    every object fed through the Cluster service or submitted
               (nodes, pods with their bindings, gangs, namespaces, DRA and
               storage objects): kind -> key -> the object, last write wins
    decisions  the decision log, by a serial that only grows; the oldest go
               first past the retention (entries and bytes)
    meta       the epoch: a random id made when the store is first created

Queue usage is not stored: it follows from the bound pods when they are
restored, as kube-scheduler's cache rebuilds it from informers.

Writes are **buffered, then committed as one batch** (:meth:`StateStore.sync`
waits until everything written so far is durable). A backend commits
whatever is pending when its previous commit ends, so a burst of bindings,
a feed call or a Submit costs one commit, never one per pod (group commit,
as PostgreSQL's ``commit_delay`` or a journal's fsync batching). Commits
happen in order: after a crash the store holds a prefix of the writes.

A backend that several replicas share (PostgreSQL: a leader lock with a
fencing token every write checks) implements the same five verbs; only
:meth:`StateStore.open` would wait for the lock, and :meth:`sync` fail with
``Unavailable`` once the token is stale.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Protocol

from berth.framework.decision import Decision

__all__ = ["Snapshot", "StateStore"]


@dataclasses.dataclass(slots=True)
class Snapshot:
    """Everything a store held when it was opened."""

    epoch: str
    #: kind -> key -> object (decoded), in the order they were first written.
    objects: dict[str, dict[str, object]] = dataclasses.field(default_factory=dict)
    #: (serial, decision), oldest first.
    decisions: list[tuple[int, Decision]] = dataclasses.field(default_factory=list)
    #: Whether the store was created by this open (nothing to restore; a new epoch).
    created: bool = False


class StateStore(Protocol):
    """One backend. ``put``/``delete``/``append_decision``/``trim_decisions``
    only buffer (no I/O, never blocking the event loop); :meth:`sync`
    commits. Keys and kinds are plain strings; values are the core's own
    objects (a backend that writes bytes encodes them with
    :mod:`berth.store.codec` when it commits, so a pod changed five times
    between two commits is encoded once)."""

    #: "memory" or "sqlite".
    backend: str

    @property
    def epoch(self) -> str:
        """The store's id: the same across restarts of a durable store,
        new when its state was lost (a memory store restarting, a store wiped)."""
        ...

    #: Called after each commit with the highest decision serial it made
    #: durable (the decision log shows decisions only once they are).
    on_durable: Callable[[int], None] | None

    async def open(self) -> Snapshot:
        """Create or open the store and read everything it holds."""
        ...

    def put(self, kind: str, key: str, value: object) -> None: ...

    def delete(self, kind: str, key: str) -> None: ...

    def append_decision(self, serial: int, decision: Decision) -> None: ...

    def trim_decisions(self, oldest_kept: int) -> None:
        """Forget decisions whose serial is below ``oldest_kept``."""
        ...

    async def sync(self) -> None:
        """Return once everything buffered so far is committed."""
        ...

    async def close(self) -> None:
        """Commit what is pending and release the store."""
        ...
