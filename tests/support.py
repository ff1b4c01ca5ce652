"""Shorthands of Berth's own tests: plugin tables over :mod:`berth.testing`, and a running demo ``berth serve``."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path

from berth.cache.table import NodeTable
from berth.cluster import model
from berth.framework.handle import Handle
from berth.testing import Cluster
from tests.e2e.controlplane.bed import free_port

__all__ = ["cached", "demo_berth_serve", "table"]

ROOT = Path(__file__).parents[1]


class ManualClock:
    """A clock tests move by hand (``clock.now += 5``); call it for the time."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def table(nodes: Iterable[model.Node], pods: Iterable[model.Pod] = ()) -> NodeTable:
    """A snapshot holding ``nodes`` and the bound ``pods`` (spec.nodeName set)."""
    return Cluster(nodes, pods).snapshot


def cached(nodes: Iterable[model.Node], pods: Iterable[model.Pod] = ()) -> tuple[NodeTable, Handle]:
    """A snapshot of a live cache holding ``nodes`` and bound ``pods``, and the
    Handle on that cache (so plugins use the cache's pod index)."""
    c = Cluster(nodes, pods)
    return c.snapshot, c.handle()


@contextlib.contextmanager
def demo_berth_serve(
    *extra: str, ready_timeout: float = 30.0
) -> Iterator[tuple[subprocess.Popen[bytes], int, int, Callable[[], str]]]:
    """``berth serve`` on the demo cluster as ``make run`` starts it, on free
    loopback ports, once /readyz answers: (process, HTTP port, gRPC port, its
    output so far). On exit: SIGTERM, and it must stop cleanly (status 0, no
    traceback). ``extra`` may repeat ``--cluster``/``--config`` (the last
    one counts); ``ready_timeout`` allows for a large cluster file."""
    http, grpc_port = free_port(), free_port()
    argv = [sys.executable, "-m", "berth.cli.main", "serve", "--cluster", "examples/cluster.yaml"]
    argv += ["--config", "examples/berth.yaml", "--http-port", str(http), "--grpc-port", str(grpc_port)]
    if "--ui-port" not in extra:  # a free one, unless the caller chose (and so knows) it
        argv += ["--ui-port", str(free_port())]
    argv += extra
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)

        final: list[str] = []  # what it wrote, once it has exited (the file is closed by then)

        def output() -> str:
            if final:
                return final[0]
            log.seek(0)
            return log.read().decode(errors="replace")

        try:
            deadline = time.monotonic() + ready_timeout
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{http}/readyz", timeout=1) as r:
                        if r.status == 200:
                            break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise AssertionError(f"berth serve did not become ready:\n{output()[-4000:]}") from None
                    time.sleep(0.2)
            yield proc, http, grpc_port, output
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=30)
            final.append(output())
            assert code == 0, output()[-4000:]
            assert "Traceback" not in output(), output()[-4000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


class Turns:
    """How many turns the event loop made (:func:`counting_turns`)."""

    count = 0


@contextlib.asynccontextmanager
async def counting_turns() -> AsyncIterator[Turns]:
    """Count the loop's turns while the block runs: a step that holds the
    loop is one turn however long it takes."""
    turns = Turns()

    async def count() -> None:
        while True:
            await asyncio.sleep(0)
            turns.count += 1

    counter = asyncio.create_task(count())
    try:
        yield turns
    finally:
        counter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await counter
