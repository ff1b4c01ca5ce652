"""The HTTP port while Berth reads the API server's release, before its core
exists: alive (``/healthz``, ``/livez``), not ready, every other path 503
saying why; stopped, it frees the port for the real server."""

from __future__ import annotations

import aiohttp
import pytest

from berth import config
from berth.adapters.http import server

WHY = "reading the API server's release"


@pytest.mark.parametrize(
    ("method", "path", "status", "body"),
    [
        ("GET", "/healthz", 200, "ok"),
        ("GET", "/livez", 200, "ok"),
        ("GET", "/readyz", 503, '{"Error":"starting: reading the API server\'s release"}'),
        ("GET", "/metrics", 503, '{"Error":"starting: reading the API server\'s release"}'),
        ("POST", "/scheduler/filter", 503, '{"Error":"starting: reading the API server\'s release"}'),
    ],
)
async def test_the_port_says_alive_and_not_ready_while_berth_starts(
    method: str, path: str, status: int, body: str
) -> None:
    cfg = config.parse({"http": {"host": "127.0.0.1", "port": 0}}).http
    runner, port = await server.start_waiting(cfg, None, WHY)
    try:
        async with aiohttp.ClientSession() as s, s.request(method, f"http://127.0.0.1:{port}{path}") as resp:
            assert (resp.status, await resp.text()) == (status, body)
    finally:
        await server.stop(runner, 0)


async def test_stopped_it_frees_the_port_for_the_real_server() -> None:
    cfg = config.parse({"http": {"host": "127.0.0.1", "port": 0}}).http
    runner, port = await server.start_waiting(cfg, None, WHY)
    await server.stop(runner, 0)
    again = config.parse({"http": {"host": "127.0.0.1", "port": port}}).http
    runner, bound = await server.start_waiting(again, None, WHY)
    await server.stop(runner, 0)
    assert bound == port
