"""`kill -9` of a real `berth serve` with its SQLite store (or its
PostgreSQL store, on a real server) in the middle of a burst of feeds and
submits, then a restart on the same store: nothing
acknowledged is lost, nothing duplicated, every pod bound once, the queue's
usage equal to what its bound pods request, and a watch that resumed on
its own (since_serial) missed and repeated nothing."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from berth_client import errors
from berth_client.aio import AsyncClient
from berth_client.api.v1 import scheduler_pb2 as spb
from tests.e2e.controlplane.bed import free_port

ROOT = Path(__file__).parents[2]
CONFIG = """\
apiVersion: berth.dev/v1
kind: BerthConfiguration
queues:
- name: team
  guaranteed: {cpu: "1000"}
  namespaces: [team]
"""
NODES, PODS, PER_SUBMIT, POD_MILLICPU = 50, 1200, 20, 100
#: The postgres replicas' lease (seconds): short, so that failovers are quick.
FAST_LEASE = "leaderElection: {leaseDurationSeconds: 4, renewDeadlineSeconds: 2.5, retryPeriodSeconds: 1}\n"


def node(i: int) -> dict[str, Any]:
    alloc = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"}, "status": {"allocatable": alloc}}


def pod(i: int) -> dict[str, Any]:
    requests = {"cpu": f"{POD_MILLICPU}m", "memory": "64Mi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p{i}", "namespace": "team"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
    }


class Serve:
    """`berth serve --state-dir` (or, given ``dsn``, on a postgres store) as
    a process, on fixed ports across restarts."""

    def __init__(self, tmp: Path, dsn: str = "", name: str = "serve") -> None:
        self.tmp = tmp
        self.dsn = dsn
        self.name = name
        self.config = tmp / f"{name}.yaml"
        state = f"state: {{backend: postgres, dsn: '{dsn}'}}\n{FAST_LEASE}" if dsn else ""
        self.config.write_text(CONFIG + state)
        self.grpc, self.http, self.ui = free_port(), free_port(), free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        argv = [sys.executable, "-m", "berth.cli.main", "serve", "--config", str(self.config)]
        if not self.dsn:
            argv += ["--state-dir", str(self.tmp / "state")]
        argv += ["--grpc-port", str(self.grpc), "--http-port", str(self.http), "--ui-port", str(self.ui)]
        log = open(self.tmp / f"{self.name}-{self.starts}.log", "wb")  # noqa: SIM115 - the process holds it
        self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)

    def logs(self) -> str:
        return "".join((self.tmp / f"{self.name}-{i}.log").read_text() for i in range(1, self.starts + 1))


@pytest.fixture(params=["sqlite", "postgres"])
def serve(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Serve]:
    s = Serve(tmp_path, request.getfixturevalue("pg_dsn") if request.param == "postgres" else "")
    yield s
    if s.proc is not None and s.proc.poll() is None:
        s.kill9()


async def ready(client: AsyncClient) -> None:
    async with asyncio.timeout(60):
        while True:
            with contextlib.suppress(errors.BerthError):
                if await client.health() == "SERVING":
                    return
            await asyncio.sleep(0.1)


async def test_kill_9_mid_burst_then_restart_loses_and_repeats_nothing(serve: Serve) -> None:
    serve.start()
    seen: list[spb.Decision] = []
    acknowledged: dict[str, str] = {}  # pod -> uid, answered accepted
    async with AsyncClient(f"127.0.0.1:{serve.grpc}", timeout=10) as client:
        await ready(client)

        async def watch() -> None:
            async for batch in client.watch_batches():
                seen.extend(batch)

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0.2)  # subscribed
        await client.feed([node(i) for i in range(NODES)])
        epoch = client.epoch
        assert epoch
        todo = list(range(0, PODS, PER_SUBMIT))

        async def submit(start: int) -> None:
            results = await client.submit([pod(i) for i in range(start, start + PER_SUBMIT)])
            for r in results:
                assert r.accepted, r.message
                acknowledged[r.pod] = r.uid

        # The burst: a third of it answered, then kill -9 while the rest is in flight.
        first = len(todo) // 3
        for start in todo[:first]:
            await submit(start)
        in_flight = [asyncio.create_task(submit(start)) for start in todo[first : first + 6]]
        await asyncio.sleep(0.05)
        serve.kill9()
        await asyncio.gather(*in_flight, return_exceptions=True)  # some answered, some not
        serve.start()
        await ready(client)
        # The client retries what it does not know the fate of: same pods, same keys (their uids).
        for start in todo[first:]:
            await submit(start)
        assert client.epoch == epoch  # a durable store: the same state, the same epoch

        async with asyncio.timeout(60):
            while True:
                rows = await client.list_pods("team")
                if len(rows) == PODS and all(r.phase == "Bound" for r in rows):
                    break
                await asyncio.sleep(0.2)
        queues = {q.name: q for q in await client.list_queues()}
        async with asyncio.timeout(10):
            while sum(1 for d in seen if d.kind == spb.Decision.BOUND) < PODS:  # noqa: ASYNC110 - filled by the watch task
                await asyncio.sleep(0.1)
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher

    assert serve.stop() == 0, serve.logs()
    logs = serve.logs()
    assert "restored; " in logs, logs
    # Nothing lost, nothing duplicated.
    assert {f"{r.namespace}/{r.name}" for r in rows} == {f"team/p{i}" for i in range(PODS)}
    assert len(rows) == PODS
    assert all(acknowledged.get(f"{r.namespace}/{r.name}") in (None, r.uid) for r in rows)
    # Queue usage is what the bound pods request.
    assert queues["team"].allocated["cpu"] == PODS * POD_MILLICPU
    # The watch missed and repeated nothing across the crash: consecutive serials, one epoch.
    serials = [d.serial for d in seen]
    assert serials == list(range(serials[0], serials[0] + len(serials))), _gaps(serials)
    # Every pod bound once, where it is bound now.
    bound: dict[str, list[str]] = {}
    for d in seen:
        if d.kind == spb.Decision.BOUND:
            bound.setdefault(d.pod, []).append(d.node)
    final = {f"{r.namespace}/{r.name}": r.node for r in rows}
    assert {k: v for k, v in bound.items() if len(v) != 1} == {}
    assert {k: v[0] for k, v in bound.items()} == final


def _gaps(serials: list[int]) -> str:
    gaps = [(a, b) for a, b in itertools.pairwise(serials) if b != a + 1]
    return f"{len(serials)} serials; breaks at {gaps[:10]}"
