"""The decision log: the latest decision per pod and live subscribers (the
gRPC ``WatchDecisions`` stream). The Handle's DecisionRecorder."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection

from berth.framework.decision import Decision

__all__ = ["DecisionLog"]


class DecisionLog:
    def __init__(self) -> None:
        self.latest: dict[str, Decision] = {}  # pod key -> its last decision
        self._watchers: list[tuple[asyncio.Queue[Decision], frozenset[str]]] = []

    def emit(self, decision: Decision) -> None:
        self.latest[decision.pod] = decision
        for q, keys in self._watchers:
            if not keys or decision.pod in keys:
                q.put_nowait(decision)

    async def watch(self, pods: Collection[str] = (), *, replay: bool = False) -> AsyncIterator[Decision]:
        """Decisions about ``pods`` (all when empty) as they happen; with
        ``replay``, first the latest one of each pod already decided about."""
        keys = frozenset(pods)
        q: asyncio.Queue[Decision] = asyncio.Queue()
        entry = (q, keys)
        self._watchers.append(entry)
        try:
            if replay:
                for key, d in list(self.latest.items()):
                    if not keys or key in keys:
                        yield d
            while True:
                yield await q.get()
        finally:
            self._watchers.remove(entry)
