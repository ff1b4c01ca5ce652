"""A watch that goes silent without a FIN or RST (a NAT dropping state) is
replaced on a fresh connection after WATCH_READ_IDLE_SECONDS, instead of
waiting out its 330 s total timeout (issue 28: "no pod is bound for 295 s")."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from berth.adapters.kubernetes import informer
from berth.cluster import model

pytestmark = [pytest.mark.asyncio, pytest.mark.looptime]


class _Content:
    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks

    def iter_any(self) -> AsyncIterator[bytes]:
        return self._chunks


class Resp:
    def __init__(self, body: bytes = b"", stream: AsyncIterator[bytes] | None = None) -> None:
        self.status = 200
        self._body = body
        self.content = _Content(stream) if stream is not None else None
        self.closed = False

    async def read(self) -> bytes:
        return self._body

    def release(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _node_event(name: str, rv: str) -> bytes:
    obj = {"metadata": {"name": name, "resourceVersion": rv}}
    return json.dumps({"type": "ADDED", "object": obj}).encode() + b"\n"


class Server:
    """The first watch sends one event and then nothing, ever; the second
    (on a new connection) sends the next event."""

    def __init__(self) -> None:
        self.watches: list[tuple[float, Resp]] = []

    async def list_call(self, **kw: Any) -> Resp:
        if not kw.get("watch"):
            return Resp(json.dumps({"metadata": {"resourceVersion": "1"}, "items": []}).encode())
        n = len(self.watches)
        resp = Resp(stream=self._silent() if n == 0 else self._one(f"n{n}", str(10 + n)))
        self.watches.append((asyncio.get_running_loop().time(), resp))
        return resp

    async def _silent(self) -> AsyncIterator[bytes]:
        yield _node_event("n0", "2")
        await asyncio.Event().wait()  # the peer is gone: no byte, no close

    async def _one(self, name: str, rv: str) -> AsyncIterator[bytes]:
        yield _node_event(name, rv)
        await asyncio.Event().wait()


@pytest.mark.parametrize("read_idle", [informer.WATCH_READ_IDLE_SECONDS, 20.0])
async def test_a_silent_watch_is_closed_and_resumed_on_a_new_connection(read_idle: float) -> None:
    server = Server()
    seen: list[str] = []
    inf = informer.Informer(
        "nodes",
        server.list_call,
        model.Node,
        informer.Handlers.mirror(lambda n: seen.append(n.metadata.name), lambda n: None),
        read_idle=read_idle,
    )
    task = asyncio.create_task(inf.run())
    try:
        await asyncio.sleep(read_idle + 1)
        assert seen == ["n0", "n1"]
        (t0, first), (t1, second) = server.watches[:2]
        assert first.closed and not second.closed  # the dead connection is not reused
        assert t1 - t0 == pytest.approx(read_idle, abs=0.01)
        assert inf.silent_watches == 1
        assert inf.resource_version == "11"
    finally:
        await informer.cancel_all([task])


async def test_a_quiet_watch_with_bookmarks_is_kept() -> None:
    async def bookmarks() -> AsyncIterator[bytes]:
        for i in range(5):
            await asyncio.sleep(60)  # the watch cache's bookmark, roughly every minute
            obj = {"metadata": {"resourceVersion": str(100 + i)}}
            yield json.dumps({"type": "BOOKMARK", "object": obj}).encode() + b"\n"
        await asyncio.Event().wait()

    watches: list[Resp] = []

    async def list_call(**kw: Any) -> Resp:
        if not kw.get("watch"):
            return Resp(json.dumps({"metadata": {"resourceVersion": "1"}, "items": []}).encode())
        watches.append(Resp(stream=bookmarks()))
        return watches[-1]

    inf = informer.Informer("nodes", list_call, model.Node, informer.Handlers.mirror(lambda n: None, lambda n: None))
    task = asyncio.create_task(inf.run())
    try:
        await asyncio.sleep(5 * 60 + 1)
        assert len(watches) == 1 and inf.silent_watches == 0 and inf.resource_version == "104"
    finally:
        await informer.cancel_all([task])
