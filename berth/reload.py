"""Hot reload of ``berth serve --config FILE``: FILE is re-read when it
changes and on SIGHUP, and its ``queues`` replace the running ones.

::

    every POLL_INTERVAL_SECONDS ─┐
    SIGHUP (forced) ─────────────┤
                                 ▼
                 stat FILE through its symlinks ── same as last time, not forced ──► nothing
                                 │
                        config.load(FILE) ──── ConfigError ──────┐
                                 │                               ├─► one ERROR line naming the field,
                 core.reload_queues(queues) ── InvalidArgument ──┘   the running configuration stays
                                 │
        fields other than queues differ from what Berth started with ──► a WARNING naming them (not applied),
                                                                          once per value: a re-read of the
                                                                          same file says nothing again

Only ``queues`` (with ``queueKeys`` and ``queueAliases``, where pods name
their queue) is applied: every other field shaped what :func:`berth.app.build`
wired (frameworks, ports, TLS, the lease), so those need a restart. Shrinking
a queue below its usage evicts nothing (``Core.reload_queues``): it only stops
new placements.

Why poll ``os.stat`` rather than watch: the kubelet updates a ConfigMap volume
by writing a new timestamped directory and atomically renaming a ``..data``
symlink to it (kubernetes ``pkg/volume/util/atomic_writer.go``); the file is
a symlink through ``..data``, so an inotify watch on it would stay on the old
target. A stat through the symlinks sees the new inode, and costs nothing next
to the kubelet's own delay (up to its sync period plus the ConfigMap cache TTL,
about a minute).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from berth import config
from berth.errors import InvalidArgument

if TYPE_CHECKING:
    from berth.scheduling.core import Core

__all__ = ["POLL_INTERVAL_SECONDS", "ConfigReloader"]

log = logging.getLogger(__name__)

#: How often the file is stat'ed for a change.
POLL_INTERVAL_SECONDS = 2.0

#: (device, inode, size, mtime in ns) of the file a path resolves to; None
#: when it cannot be stat'ed.
_Signature = tuple[int, int, int, int] | None


def _signature(path: Path) -> _Signature:
    try:
        st = os.stat(path)  # follows symlinks: a swapped ..data is a new inode
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _fields(cfg: config.BerthConfiguration) -> dict[str, Any]:
    """Top-level fields by their YAML names, without ``queues``."""
    doc: dict[str, Any] = msgspec.to_builtins(cfg)
    doc.pop("queues", None)
    # Where pods name their queue is re-read with the queues.
    doc.pop("queueKeys", None)
    doc.pop("queueAliases", None)
    return doc


class ConfigReloader:
    """Re-reads one configuration file for a running Berth: :meth:`run` polls
    it, :meth:`request` (SIGHUP) forces a re-read, :meth:`check` is one step."""

    def __init__(self, path: str | Path, core: Core) -> None:
        self.path = Path(path)
        self._core = core
        self._wake = asyncio.Event()
        # What the file held at start, before command-line overrides (ports):
        # the reference for "changed, needs a restart". Stat first, so a
        # change racing this read is seen by the next check.
        self._signature = _signature(self.path)
        self._started_with: dict[str, Any] | None = None
        # The differing fields last reported, with the file's values: each
        # new value is reported once, not at every re-read or SIGHUP.
        self._reported: dict[str, Any] = {}
        try:
            started = config.load(self.path)
        except config.ConfigError:  # broken since Berth read it: the first check says why
            self._signature = None
        else:
            self._started_with = _fields(started)
            if started.queues != core.cfg.queues:
                self._signature = None  # changed since Berth read it: applied at the first check

    def request(self) -> None:
        """Re-read the file now, changed or not (the SIGHUP handler)."""
        self._wake.set()

    async def run(self, interval: float | None = None) -> None:
        """Check every ``interval`` seconds (default :data:`POLL_INTERVAL_SECONDS`),
        and at once on :meth:`request`, until cancelled."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval or POLL_INTERVAL_SECONDS):
                    await self._wake.wait()
            forced = self._wake.is_set()
            self._wake.clear()
            try:
                await self.check_off_loop(force=forced)
            except Exception:  # a bug must not end reloading for the life of the process
                log.exception("re-reading the configuration %s failed; keeping the running configuration", self.path)

    def check(self, *, force: bool = False) -> bool:
        """Re-read the file if it changed since the last check (or ``force``);
        True when new queues were applied."""
        if not self._due(force):
            return False
        return self._apply(self._load())

    async def check_off_loop(self, *, force: bool = False) -> bool:
        """:meth:`check`, parsing the file in a worker thread: reading and
        validating a large file must not hold the event loop (issue 28); the
        result is applied on the loop, where the core lives."""
        if not self._due(force):
            return False
        return self._apply(await asyncio.to_thread(self._load))

    def _due(self, force: bool) -> bool:
        signature = _signature(self.path)
        if signature == self._signature and not force:
            return False
        self._signature = signature
        return True

    def _load(self) -> config.BerthConfiguration | config.ConfigError:
        """The file's configuration, or why it cannot be one (pure: no state
        of Berth's is read or changed here, so it may run in a thread)."""
        try:
            return config.load(self.path)
        except config.ConfigError as e:
            return e

    def _apply(self, new: config.BerthConfiguration | config.ConfigError) -> bool:
        if isinstance(new, config.ConfigError):
            self._refuse(str(new))
            return False
        applied = False
        if new.queues == self._core.cfg.queues:
            log.info("configuration %s re-read: queues unchanged", self.path)
        else:
            try:
                self._core.reload_queues(new.queues)
            except InvalidArgument as e:
                self._refuse(str(e))
                return False
            log.info("queues reloaded from %s: %d queues", self.path, len(new.queues))
            applied = True
        cfg = self._core.cfg
        if (new.queue_keys, new.queue_aliases) != (cfg.queue_keys, cfg.queue_aliases):
            self._core.reload_queue_naming(new.queue_keys, new.queue_aliases)
            log.info("queueKeys and queueAliases reloaded from %s", self.path)
            applied = True
        fields = _fields(new)
        if self._started_with is None:
            self._started_with = fields
        differing = {name: value for name, value in fields.items() if self._started_with.get(name) != value}
        changed = [
            name for name, value in differing.items() if name not in self._reported or self._reported[name] != value
        ]
        self._reported = differing
        metrics = self._core.metrics
        metrics.config_last_reload_successful.set(1)
        metrics.config_last_reload_success_timestamp.set_to_current_time()
        if changed:
            log.warning(
                "configuration %s: %s changed: restart Berth to apply them (only queues are reloaded)",
                self.path,
                ", ".join(changed),
            )
        return applied

    def _refuse(self, message: str) -> None:
        self._core.metrics.config_reload_failures.inc()
        self._core.metrics.config_last_reload_successful.set(0)
        # config.load names the file first; the line names it once.
        message = message.removeprefix(f"{self.path}: ")
        message = " ".join(message.split())  # one line, whatever the file's values hold
        log.error("configuration %s refused: %s; keeping the running configuration", self.path, message)
