"""When a term ends because the API server stopped answering the Lease
renewals, every informer moves to a fresh connection at once (issue 28: on
half-open connections the informers stayed on dead watches for five
minutes while a re-elected Berth scheduled from stale state); a term lost
to another holder, with the API server answering, leaves them be."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from berth.adapters.kubernetes import informer
from berth.adapters.kubernetes.election import _Lock
from berth.cluster import model
from tests.kubernetes.fakeapi import FakeApiServer, node
from tests.kubernetes.test_informer_silent_watch import Resp, _node_event
from tests.kubernetes.test_lease_fencing import elector
from tests.kubernetes.test_runner import fake as fake
from tests.kubernetes.test_runner import kube_runner, running, until

pytestmark = pytest.mark.looptime


async def test_reconnect_resumes_the_watch_at_once_from_the_last_version_on_a_new_connection() -> None:
    watches: list[tuple[str, Resp]] = []
    lists = 0

    async def stream(n: int) -> AsyncIterator[bytes]:
        yield _node_event(f"n{n}", str(10 + n))
        await asyncio.Event().wait()  # silent, never closed

    async def list_call(**kw: Any) -> Resp:
        nonlocal lists
        if not kw.get("watch"):
            lists += 1
            return Resp(json.dumps({"metadata": {"resourceVersion": "1"}, "items": []}).encode())
        watches.append((kw["resource_version"], Resp(stream=stream(len(watches)))))
        return watches[-1][1]

    seen: list[str] = []
    inf = informer.Informer(
        "nodes", list_call, model.Node, informer.Handlers.mirror(lambda n: seen.append(n.metadata.name), lambda n: None)
    )
    task = asyncio.create_task(inf.run())
    try:
        await asyncio.sleep(5)
        assert inf.reconnect()
        await asyncio.sleep(0.01)  # at once: not after the read-idle limit
        assert [rv for rv, _ in watches] == ["1", "10"]
        assert watches[0][1].closed and not watches[1][1].closed
        assert seen == ["n0", "n1"] and lists == 1 and inf.reconnects == 1
    finally:
        await informer.cancel_all([task])
    assert not inf.reconnect(), "nothing in flight once stopped"


@pytest.mark.parametrize(
    ("lease_answers", "reconnected"),
    [
        # A renewal that times out (a half-open connection, a paused etcd).
        (False, 1),
        # A renewal the API server answers (another replica took the Lease).
        (True, 0),
    ],
)
async def test_a_term_lost_to_an_unanswered_renewal_moves_the_watches_to_fresh_connections(
    fake: FakeApiServer, api: client.ApiClient, lease_answers: bool, reconnected: int
) -> None:
    calls: list[str] = []
    el = elector(api=api, on_unanswered=lambda: calls.append("reconnect"))
    lock = _Lock("berth", "kube-system", "me", api, el)
    await el._start_term()
    if not lease_answers:
        fake.lease_gate = asyncio.Event()  # never answers
    began = asyncio.get_running_loop().time()
    ok, _ = await lock.get("berth", "kube-system")
    assert not ok
    assert asyncio.get_running_loop().time() - began <= el.request_timeout + 0.01
    assert el.unanswered is not lease_answers
    await el._lost()
    assert calls == ["reconnect"] * reconnected
    assert not el.leading


async def test_the_runner_reconnects_every_informer(fake: FakeApiServer, api: client.ApiClient) -> None:
    fake.set_nodes([node("n1")])
    runner = kube_runner(api, {"leaderElect": False})
    async with running(runner.run()):
        await until("/readyz", lambda: runner.core.ready)
        await asyncio.sleep(1)
        assert runner.reconnect_informers() == len(runner.informers)
        await asyncio.sleep(0.1)
        assert [inf.reconnects for inf in runner.informers] == [1] * len(runner.informers)
        assert runner.core.ready
