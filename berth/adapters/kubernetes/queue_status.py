"""The leader writes each Queue object's ``status`` (berth.dev/v1alpha1).

::

    every INTERVAL_SECONDS, while leading:
        for each Queue object the informer holds
            wanted = Accepted condition + allocated/pending/shares (berth.quota.objects.status_of)
            wanted == the object's status ────────────────────────────► nothing
            wanted == what we wrote, and the object is still the version
                      we saw when writing (the watch has not caught up) ─► nothing
            otherwise ── JSON patch of /status ──► remembered

So a queue's status is written only when it changed and at most once per
interval (one second by default), however many pods are scheduled in
between: usage moves with every bind, and a write per bind would put the
API server's load in step with the scheduler's throughput. A write
that fails is logged and retried at the next tick; an object deleted
meanwhile (404) is dropped.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from berth.errors import NotFound
from berth.quota import objects as quota_objects
from berth.scheduling.core import Core

__all__ = ["INTERVAL_SECONDS", "QueueStatusWriter"]

log = logging.getLogger(__name__)

#: At most one status write per queue per this many seconds.
INTERVAL_SECONDS = 1.0

Write = Callable[[str, dict[str, Any]], Awaitable[None]]


def _now() -> str:
    """metav1.Time: RFC 3339 in UTC, seconds."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class QueueStatusWriter:
    """See the module docstring; ``write(name, status)`` replaces one
    object's status (:meth:`.source.KubernetesSource.write_queue_status`)."""

    def __init__(
        self, core: Core, write: Write, *, interval: float = INTERVAL_SECONDS, now: Callable[[], str] = _now
    ) -> None:
        self._core = core
        self._write = write
        self.interval = interval
        self._now = now
        #: name -> (the status written, the object's resourceVersion when we wrote it)
        self._written: dict[str, tuple[dict[str, Any], str]] = {}
        self.writes = 0

    async def run(self) -> None:
        """Write what changed every ``interval`` seconds until cancelled."""
        while True:
            try:
                await self.sync()
            except Exception:  # a bug must not end status writing for the term
                log.exception("writing Queue statuses failed; retrying")
            await asyncio.sleep(self.interval)

    async def sync(self) -> int:
        """One pass over the objects; the number of statuses written."""
        held = self._core.queue_objects
        if not held.objects:
            self._written.clear()
            return 0
        tree = {s.name: s for s in self._core.quota.status()}
        written = 0
        for name, obj in list(held.objects.items()):
            verdict = held.verdicts.get(name)
            if verdict is None:
                continue
            mine = self._written.get(name)
            # Until the watch brings our own write back, judge against it.
            previous = mine[0] if mine is not None and mine[1] == obj.metadata.resource_version else obj.status
            queue = tree.get(name) if name in held.admitted else None
            wanted = quota_objects.status_of(previous, verdict, queue, self._now())
            if wanted == obj.status or wanted == previous:
                continue
            try:
                await self._write(name, wanted)
            except NotFound:
                continue  # deleted meanwhile; the informer will say so
            except Exception as e:
                log.warning("writing the status of Queue %s failed (%s); retrying in %.0fs", name, e, self.interval)
                continue
            self._written[name] = (wanted, obj.metadata.resource_version)
            written += 1
        self.writes += written
        for gone in set(self._written) - set(held.objects):
            del self._written[gone]
        return written
