"""PodGroup phases written back, for the dialects whose PodGroup has one.

scheduler-plugins' and Volcano's job controllers read a PodGroup's
``status.phase`` (Volcano's create their pods only once it is ``Inqueue``);
their schedulers keep it. Berth, scheduling in their place, does too: when
a gang's members change (added, placed, running, gone) or its PodGroup
does, the phase its dialect computes (:meth:`berth.gangs.GangIndex.phase`) is
compared with the object's and written when it differs — through the source
when it can write one (:class:`PhaseWriter`: the Kubernetes source), else set
on the stored object (the embedded cluster, whose objects the core shares).

Recomputations are coalesced to one per gang per loop turn; only the leader's
scheduler writes (it owns this object).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from berth.cluster import model
from berth.errors import NotFound
from berth.gangs import GangKey, InvalidGang, PhaseCounts

if TYPE_CHECKING:
    from berth.scheduling.core import Core

__all__ = ["GangPhases", "PhaseWriter"]

log = logging.getLogger(__name__)


@runtime_checkable
class PhaseWriter(Protocol):
    async def write_pod_group_phase(self, group: model.PodGroup, phase: str) -> None:
        """Set ``status.phase`` of ``group``; raises NotFound when it is gone."""


class GangPhases:
    def __init__(self, core: Core) -> None:
        self.core = core
        self._dirty: set[GangKey] = set()
        self._scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()

    def touch(self, key: GangKey) -> None:
        """The gang changed: recompute its phase at the end of this loop turn."""
        if self.core.gangs.group_of(key) is None:
            return  # no object, no phase (Kueue, YuniKorn)
        self._dirty.add(key)
        if self._scheduled:
            return
        self._scheduled = True
        try:
            asyncio.get_running_loop().call_soon(self.flush)
        except RuntimeError:  # no loop (a synchronous test): at once
            self.flush()

    def touch_pod(self, pod: model.Pod) -> None:
        try:
            m = self.core.gangs.member_of(pod)
        except InvalidGang:
            return
        if m is not None:
            self.touch(m.key)

    def flush(self) -> None:
        self._scheduled = False
        dirty, self._dirty = self._dirty, set()
        for key in sorted(dirty):
            self._update(key)

    def phase_of(self, key: GangKey) -> str | None:
        """The phase the gang's PodGroup should have now (None: none to write)."""
        gangs = self.core.gangs
        group = gangs.group_of(key)
        try:
            gang = gangs.gang(key)
        except InvalidGang:
            return None
        if group is None or gang is None:
            return None
        members = gangs.members(key)
        cache = self.core.cache
        placed = [m for m in members if cache.get_pod(m.metadata.uid) is not None or m.spec.node_name]
        running = sum(1 for m in members if m.status.phase == "Running")
        counts = PhaseCounts(len(members), len(placed), running, group.status.phase)
        return gangs.phase(gang, counts, admissible=self._fits(gang.min_resources))

    def _fits(self, need: Mapping[str, int]) -> bool:
        """Whether ``need`` (canonical amounts) is free in the cluster now (Volcano's enqueue)."""
        if not need:
            return True
        t = self.core.cache.table
        alive = t.alive[: t.size]
        if not alive.any():
            return False
        left = np.clip(t.alloc[: t.size][alive] - t.req[: t.size][alive], 0, None).sum(axis=0, dtype=object)
        free = {t.columns.names[c]: int(v) for c, v in enumerate(left)}
        return all(free.get(name, 0) >= amount for name, amount in need.items())

    def _update(self, key: GangKey) -> None:
        group = self.core.gangs.group_of(key)
        phase = self.phase_of(key)
        if group is None or phase is None or phase == group.status.phase:
            return
        source = self.core.default_source
        if isinstance(source, PhaseWriter):
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # no loop, no writes (a synchronous test)
            task = loop.create_task(self._write(source, group, phase))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            group.status.phase = phase  # the embedded cluster's object, shared with the core

    async def _write(self, writer: PhaseWriter, group: model.PodGroup, phase: str) -> None:
        try:
            await writer.write_pod_group_phase(group, phase)
        except NotFound:
            return  # deleted meanwhile
        except Exception as e:  # the next change of the gang tries again
            log.warning(
                "writing phase %s to PodGroup %s/%s: %s", phase, group.metadata.namespace, group.metadata.name, e
            )

    async def drain(self) -> None:
        """Wait for the writes in flight."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
