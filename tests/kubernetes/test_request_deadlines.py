"""Every request to the API server is bounded (issue 28: half-open
connections): one that names no bound gets one, every one gets a read-idle
bound, and a request abandoned on a silent connection is retried on a fresh
one — against a real TCP server whose first connection never answers."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from berth.adapters.kubernetes import deadlines, writes
from berth.adapters.kubernetes.deadlines import bound_requests, timeout_for


@pytest.mark.parametrize(
    ("given", "watch", "total", "sock_connect", "sock_read"),
    [
        # kubernetes-asyncio would send these two with no bound at all.
        (None, False, deadlines.DEFAULT_TOTAL_SECONDS, deadlines.CONNECT_SECONDS, deadlines.READ_IDLE_SECONDS),
        (None, True, None, deadlines.CONNECT_SECONDS, deadlines.WATCH_READ_IDLE_SECONDS),
        # A number was a total only: now a read-idle bound too, never above the total.
        (30.0, False, 30.0, deadlines.CONNECT_SECONDS, deadlines.READ_IDLE_SECONDS),
        (5, False, 5.0, 5.0, 5.0),
        (330, True, 330.0, deadlines.CONNECT_SECONDS, deadlines.WATCH_READ_IDLE_SECONDS),
        # A (connect, read) pair is kept, with a total added.
        ((3.0, 4.0), False, deadlines.DEFAULT_TOTAL_SECONDS, 3.0, 4.0),
        # A ClientTimeout keeps what it sets and gets what it leaves out.
        (aiohttp.ClientTimeout(total=7, sock_read=2), False, 7, deadlines.CONNECT_SECONDS, 2),
    ],
)
def test_each_request_timeout_becomes_a_bounded_one(
    given: Any, watch: bool, total: float | None, sock_connect: float, sock_read: float
) -> None:
    t = timeout_for(given, watch=watch)
    assert (t.total, t.sock_connect, t.sock_read) == (total, sock_connect, sock_read)


class HalfOpenServer:
    """Accepts every connection; the first ``silent`` ones read the request
    and then never answer nor close (a peer whose NAT state is gone); the
    rest answer ``200 {"kind": "Namespace"...}``."""

    def __init__(self, silent: int = 1) -> None:
        self.silent = silent
        self.accepted = 0
        self.port = 0
        self._held: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        n = self.accepted
        with contextlib.suppress(ConnectionError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")), 0
                )
                if length:
                    await reader.readexactly(length)
                if n <= self.silent:
                    self._held.append(writer)
                    return  # never a byte, never a FIN
                body = json.dumps({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "x"}}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[str]:
        server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{self.port}"
        finally:
            for w in self._held:
                w.close()
            server.close()
            await server.wait_closed()


@pytest.fixture
def short_read_idle(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(deadlines, "READ_IDLE_SECONDS", 0.3)
    return 0.3


async def test_a_request_without_a_bound_is_abandoned_on_a_silent_connection_and_retried_on_a_fresh_one(
    short_read_idle: float,
) -> None:
    server = HalfOpenServer(silent=1)
    async with server.serving() as url:
        api = client.ApiClient(client.Configuration(host=url))
        bound_requests(api)
        bound_requests(api)  # twice changes nothing more
        try:
            core = client.CoreV1Api(api)
            loop = asyncio.get_running_loop()
            began = loop.time()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(core.read_namespace("x"), 10)  # without bound_requests: forever
            assert loop.time() - began < 5 * short_read_idle
            ns = await core.read_namespace("x")
            assert ns.metadata.name == "x"
            assert server.accepted == 2, "the retry must not reuse the silent connection"
        finally:
            await api.close()


async def test_a_binding_on_a_silent_connection_is_abandoned_before_its_total(short_read_idle: float) -> None:
    server = HalfOpenServer(silent=1)
    async with server.serving() as url:
        api = client.ApiClient(client.Configuration(host=url))
        try:
            raw = writes.RawRequests(api)
            assert raw._timeout.total == writes.REQUEST_TIMEOUT_SECONDS
            loop = asyncio.get_running_loop()
            began = loop.time()
            with pytest.raises(TimeoutError):
                await raw("POST", "/api/v1/namespaces/default/pods/p/binding", {"target": {}}, "application/json")
            assert loop.time() - began < 5 * short_read_idle
            status, _ = await raw("POST", "/api/v1/namespaces/default/pods/p/binding", {}, "application/json")
            assert status == 200 and server.accepted == 2
        finally:
            await api.close()
