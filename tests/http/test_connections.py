"""Connection-level limits (Go net/http's IdleTimeout, ReadHeaderTimeout,
ReadTimeout) and a shutdown bounded by its grace period. Real time with
sub-second timeouts: these are the event loop's own timers."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from berth import app
from berth.adapters.http import server
from tests.http.payloads import api_pod, args, dumps
from tests.http.test_extender_wire import make_berth

SHORT = 0.3
BODY = dumps(args(api_pod(), names=["big"]))


def _berth(**http: Any) -> app.Berth:
    cfg = {
        "host": "127.0.0.1",
        "port": 0,
        "maxBodyBytes": 1 << 20,
        "idleTimeoutSeconds": SHORT,
        "readHeaderTimeoutSeconds": SHORT,
        "readTimeoutSeconds": SHORT,
        **http,
    }
    return make_berth({"http": cfg})


@pytest.fixture
async def serving() -> AsyncIterator[tuple[web.AppRunner, int]]:
    berth = _berth()
    runner, port = await server.start(berth.core, berth.extender, None)
    try:
        yield runner, port
    finally:
        await server.stop(runner, 1.0)


async def _open(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


def _request(body: bytes = BODY, *, length: int | None = None) -> bytes:
    head = (
        b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % (len(body) if length is None else length)
    )
    return head + body


async def _response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines[1:] if line)}
    body = await asyncio.wait_for(reader.readexactly(int(headers.get("content-length", "0"))), 5)
    return int(lines[0].split()[1]), headers, body


async def _closed(reader: asyncio.StreamReader, within: float) -> float:
    """Seconds until the server closes the connection (EOF)."""
    started = time.perf_counter()
    rest = await asyncio.wait_for(reader.read(), within)
    assert rest == b""
    return time.perf_counter() - started


async def test_an_idle_keep_alive_connection_is_closed_after_the_idle_timeout(serving: Any) -> None:
    _, port = serving
    reader, writer = await _open(port)
    writer.write(_request())
    status, headers, _ = await _response(reader)
    assert status == 200 and headers.get("connection", "").lower() != "close"
    waited = await _closed(reader, 3)
    assert SHORT * 0.8 <= waited < SHORT + 1.0
    writer.close()


async def test_a_connection_that_never_sends_is_closed_without_an_answer(serving: Any) -> None:
    _, port = serving
    reader, writer = await _open(port)
    assert await _closed(reader, 3) < SHORT + 1.0
    writer.close()


async def test_headers_trickled_past_the_header_timeout_get_a_json_408(serving: Any) -> None:
    _, port = serving
    reader, writer = await _open(port)
    writer.write(b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\n")
    started = time.perf_counter()

    async def trickle() -> None:  # one byte every 20 ms, never the blank line
        with contextlib.suppress(ConnectionError):
            for byte in b"X-Slow: 1\r\n" * 10:
                await asyncio.sleep(0.02)
                writer.write(bytes([byte]))
                await writer.drain()

    slow = asyncio.create_task(trickle())
    status, headers, body = await _response(reader)
    slow.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await slow
    assert status == 408 and headers["connection"] == "close"
    assert headers["content-type"] == "application/json"
    assert "http.readHeaderTimeoutSeconds" in json.loads(body)["Error"]
    assert time.perf_counter() - started < SHORT + 1.0
    writer.close()


async def test_a_body_trickled_past_the_read_timeout_gets_a_json_408(serving: Any) -> None:
    _, port = serving
    reader, writer = await _open(port)
    writer.write(_request(BODY[:10], length=len(BODY)))
    started = time.perf_counter()
    status, headers, body = await _response(reader)
    assert status == 408 and headers["connection"] == "close"
    assert json.loads(body)["Error"] == "filter: request body: not received within 0.3s (http.readTimeoutSeconds)"
    assert time.perf_counter() - started < SHORT + 1.0
    await _closed(reader, 2)  # lingers at most LINGER_SECONDS, then closes
    writer.close()


CUT_BODIES = [
    ("a Content-Length body", _request(BODY[:10], length=len(BODY))),
    (
        "a chunked body",
        b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n10\r\n" + BODY[:16],
    ),
]


@pytest.mark.parametrize("head", [h for _, h in CUT_BODIES], ids=[n for n, _ in CUT_BODIES])
async def test_a_client_that_disconnects_mid_body_is_logged_at_debug_without_a_traceback(
    serving: Any, head: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    _, port = serving
    caplog.set_level(logging.DEBUG)
    reader, writer = await _open(port)
    writer.write(head)
    await writer.drain()
    await asyncio.sleep(0.05)  # the handler is reading the body
    writer.close()
    for _ in range(100):
        if any("went away" in r.getMessage() for r in caplog.records):
            break
        await asyncio.sleep(0.01)
    # The runner cancels the handler of a caller that went away (the body's
    # read ends there): one debug line, no traceback.
    gone = [r for r in caplog.records if "went away" in r.getMessage()]
    assert [(r.levelno, r.exc_info, r.getMessage()) for r in gone] == [
        (logging.DEBUG, None, "extender filter: the client went away; the request was stopped")
    ]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    reader, writer = await _open(port)
    writer.write(_request())
    assert (await _response(reader))[0] == 200  # and the server goes on answering
    writer.close()


async def test_a_request_in_flight_finishes_during_a_graceful_stop() -> None:
    berth = _berth(readTimeoutSeconds=5)
    runner, port = await server.start(berth.core, berth.extender, None)
    reader, writer = await _open(port)
    writer.write(_request()[:-20])  # the body is not all there yet
    await asyncio.sleep(0.05)
    idle_reader, idle_writer = await _open(port)
    idle_writer.write(_request())
    assert (await _response(idle_reader))[0] == 200  # an idle keep-alive connection
    stopping = asyncio.create_task(server.stop(runner, 2.0))
    await asyncio.sleep(0.1)
    writer.write(_request()[-20:])
    status, headers, body = await _response(reader)
    assert status == 200 and headers["connection"] == "close"
    assert json.loads(body)["NodeNames"] == ["big"]
    await asyncio.wait_for(stopping, 3)
    assert await idle_reader.read() == b""
    writer.close()
    idle_writer.close()


async def test_a_slow_upload_cannot_hold_shutdown_past_the_grace_period(caplog: pytest.LogCaptureFixture) -> None:
    berth = _berth(readTimeoutSeconds=60)
    runner, port = await server.start(berth.core, berth.extender, None)
    reader, writer = await _open(port)
    writer.write(_request(BODY[:10], length=len(BODY)))
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    await server.stop(runner, 0.3)
    assert time.perf_counter() - started < 0.3 + 0.5
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"HTTP (http://127.0.0.1:{port}): 1 connection(s) still busy after the grace period "
        "(0.3s, shutdownGracePeriodSeconds), cancelled"
    ]
    await _closed(reader, 1)
    with pytest.raises(OSError):
        await _open(port)  # no longer accepting
    writer.close()


async def test_a_port_in_use_raises_eaddrinuse_naming_the_address(serving: Any) -> None:
    _, port = serving
    berth = _berth(port=port)
    with pytest.raises(OSError) as caught:
        await server.start(berth.core, berth.extender, None)
    assert caught.value.errno == errno.EADDRINUSE
    assert "127.0.0.1" in str(caught.value) and str(port) in str(caught.value)
