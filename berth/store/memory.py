"""The memory store: the objects themselves in dicts, no I/O. State lives
as long as the process (or the store object, which tests reopen to model a
restart that kept it); its epoch is new with each store, so a client sees
that a restarted in-memory Berth forgot everything."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from berth.framework.decision import Decision
from berth.store.interface import Snapshot

__all__ = ["MemoryStore"]


class MemoryStore:
    backend = "memory"

    def __init__(self) -> None:
        self._epoch = uuid.uuid4().hex
        self._objects: dict[str, dict[str, object]] = {}
        self._decisions: dict[int, Decision] = {}
        self._opened = False
        self.on_durable: Callable[[int], None] | None = None

    @property
    def epoch(self) -> str:
        return self._epoch

    async def open(self) -> Snapshot:
        created, self._opened = not self._opened, True
        return Snapshot(
            self._epoch,
            {kind: dict(objs) for kind, objs in self._objects.items()},
            sorted(self._decisions.items()),
            created=created,
        )

    def put(self, kind: str, key: str, value: object) -> None:
        objs = self._objects.get(kind)
        if objs is None:
            objs = self._objects[kind] = {}
        objs[key] = value

    def delete(self, kind: str, key: str) -> None:
        objs = self._objects.get(kind)
        if objs is not None:
            objs.pop(key, None)

    def append_decision(self, serial: int, decision: Decision) -> None:
        self._decisions[serial] = decision
        # Nothing to wait for: durable (for this process's life) at once.
        if self.on_durable is not None:
            self.on_durable(serial)

    def trim_decisions(self, oldest_kept: int) -> None:
        for serial in [s for s in self._decisions if s < oldest_kept]:
            del self._decisions[serial]

    async def sync(self) -> None:
        return None

    async def close(self) -> None:
        return None
