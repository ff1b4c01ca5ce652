"""Files re-read when they change, without a restart: the TLS certificate,
key and CA of the HTTP and gRPC ports, and the gRPC token file.

cert-manager renews a certificate into its Secret and the kubelet swaps the
mounted files (an atomic rename of the volume's ``..data`` link); a token
Secret is rotated the same way. Each :class:`Watched` set of files is
stat()ed at most once per :data:`CHECK_INTERVAL_SECONDS`; when a file's
(inode, size, mtime) changed, the files are read again and the new value
replaces the old only if it loads — a half-written or mismatched pair is
logged and the last good value kept, so a bad renewal never takes a port
down.

Where the check runs: the HTTP port's TLS handshake calls
:meth:`Watched.poll`, which only stats and, on a change, hands the read to a
worker thread (the event loop never reads a file); connections accepted
after the reload completes get the new certificate. grpc core calls the
gRPC port's fetcher on its own thread, which reads there.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["CHECK_INTERVAL_SECONDS", "Watched", "signature"]

log = logging.getLogger(__name__)

#: Files are stat()ed at most this often.
CHECK_INTERVAL_SECONDS = 1.0

T = TypeVar("T")

Signature = tuple[tuple[int, int, int] | None, ...]


def signature(paths: Sequence[str]) -> Signature:
    """(inode, size, mtime_ns) of each path; None for one that cannot be stat()ed."""
    out: list[tuple[int, int, int] | None] = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            out.append(None)
        else:
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


class Watched(Generic[T]):
    """A value loaded from ``paths`` by ``load`` (which raises on bad
    content), loaded again when the files change. ``what`` names it in logs."""

    def __init__(
        self,
        what: str,
        paths: Sequence[str],
        load: Callable[[], T],
        *,
        interval: float = CHECK_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.paths = tuple(paths)
        self._load = load
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._signature = signature(self.paths)
        #: The value in use; the first load's errors reach the caller (start-up).
        self.value: T = load()
        self._checked = clock()
        self._reloading = False
        #: How many times a changed set of files was loaded and put in use.
        self.reloads = 0

    def _due(self) -> bool:
        now = self._clock()
        if now - self._checked < self._interval or self._reloading:
            return False
        self._checked = now
        return True

    def check(self) -> bool:
        """Stat (if due) and, on a change, load here; True when a new value
        is in use. For callers off the event loop (grpc core's fetcher)."""
        with self._lock:
            if not self._due():
                return False
        return self._reload_if_changed()

    def poll(self) -> None:
        """From the event loop: stat (if due) and, on a change, load in a
        worker thread; the new value is in use once that finishes."""
        with self._lock:
            if not self._due():
                return
            sig = signature(self.paths)
            if sig == self._signature:
                return
            self._reloading = True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._finish(self._reload_if_changed)
            return
        loop.run_in_executor(None, self._finish, self._reload_if_changed)

    def _finish(self, fn: Callable[[], bool]) -> bool:
        try:
            return fn()
        finally:
            self._reloading = False

    def _reload_if_changed(self) -> bool:
        sig = signature(self.paths)
        if sig == self._signature:
            return False
        try:
            value = self._load()
        except Exception as e:  # a bad renewal: keep serving with the last good files
            log.error("%s: the changed files do not load (%s); keeping the ones in use", self.what, e)
            self._signature = sig  # reported once; the next change is tried again
            return False
        self.value = value
        self._signature = sig
        self.reloads += 1
        log.info("%s: reloaded %s", self.what, ", ".join(self.paths))
        return True
