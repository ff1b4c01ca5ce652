"""Certificates and tokens rotated without a restart (berth/adapters/rotation.py):
after the files change, new connections to the HTTP and gRPC ports get the
new certificate, a renewal that does not load keeps the old one, and the
gRPC token file's new token is the one accepted."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import pytest

from berth.adapters import rotation
from berth.adapters.grpc import security
from berth.adapters.http import tls as http_tls
from berth.config import TLSConfig
from tests.certs import CA

pytestmark = pytest.mark.timeout(60)


def install(src_cert: Path, src_key: Path, cert: Path, key: Path) -> None:
    """Replace the files as the kubelet does: new inodes, renamed into place."""
    for src, dst in ((src_cert, cert), (src_key, key)):
        tmp = dst.with_name(dst.name + ".new")
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)


@pytest.fixture
def files(tmp_path: Path) -> tuple[CA, TLSConfig, Path, Path]:
    ca = CA(tmp_path)
    first = ca.issue("first", server=True)
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    install(first.cert, first.key, cert, key)
    return ca, TLSConfig(cert_file=str(cert), key_file=str(key)), cert, key


def client_context(ca: CA, alpn: list[str] | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca.path))
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


async def served_cn(port: int, ctx: ssl.SSLContext) -> str:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
    try:
        cert = writer.get_extra_info("peercert")
        return str(dict(x[0] for x in cert["subject"])["commonName"])
    finally:
        writer.close()


async def until_cn(port: int, ctx: ssl.SSLContext, want: str, limit: float = 10.0) -> str:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while True:
        cn = await served_cn(port, ctx)
        if cn == want or loop.time() > deadline:
            return cn
        await asyncio.sleep(0.2)


@pytest.fixture
async def https_port(files: tuple[CA, TLSConfig, Path, Path]) -> AsyncIterator[int]:
    _, cfg, _, _ = files
    ctx = http_tls.reloading_server_ssl_context(cfg)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
    yield server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()


async def test_https_serves_a_renewed_certificate_to_new_connections(
    files: tuple[CA, TLSConfig, Path, Path], https_port: int
) -> None:
    ca, _, cert, key = files
    ctx = client_context(ca)
    assert await served_cn(https_port, ctx) == "first"
    second = ca.issue("second", server=True)
    install(second.cert, second.key, cert, key)
    assert await until_cn(https_port, ctx, "second") == "second"


async def test_https_keeps_the_old_certificate_when_the_renewal_does_not_load(
    files: tuple[CA, TLSConfig, Path, Path], https_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    ca, _, cert, _ = files
    ctx = client_context(ca)
    other = ca.issue("other", server=True)
    # A certificate with someone else's key: a half-finished renewal.
    with caplog.at_level(logging.ERROR, logger="berth.adapters.rotation"):
        shutil.copyfile(other.cert, cert.with_name("c.new"))
        os.replace(cert.with_name("c.new"), cert)
        await asyncio.sleep(rotation.CHECK_INTERVAL_SECONDS + 0.2)
        for _ in range(5):
            assert await served_cn(https_port, ctx) == "first"
            await asyncio.sleep(0.1)
    assert "do not load" in caplog.text


async def test_grpc_serves_a_renewed_certificate_to_new_connections(files: tuple[CA, TLSConfig, Path, Path]) -> None:
    ca, cfg, cert, key = files
    server = grpc.aio.server()
    port = server.add_secure_port("127.0.0.1:0", security.reloading_server_credentials(cfg))
    await server.start()
    try:
        ctx = client_context(ca, alpn=["h2"])
        assert await served_cn(port, ctx) == "first"
        second = ca.issue("second", server=True)
        install(second.cert, second.key, cert, key)
        assert await until_cn(port, ctx, "second") == "second"
    finally:
        await server.stop(None)


async def wait_for(check: Callable[[], bool], limit: float = 10.0) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while loop.time() < deadline:
        if check():
            return True
        await asyncio.sleep(0.1)
    return False


@pytest.mark.parametrize(
    ("case", "new_content", "expected"),
    [
        ("a new token replaces the old", b"second-token\n", b"second-token"),
        ("an emptied file keeps the old token", b"\n", b"first-token"),
    ],
)
async def test_the_grpc_token_file_is_reread_when_it_changes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, case: str, new_content: bytes, expected: bytes
) -> None:
    path = tmp_path / "token"
    path.write_bytes(b"first-token\n")
    tokens = security.TokenFile(str(path))
    assert tokens.current() == b"first-token"
    tmp = tmp_path / "token.new"
    tmp.write_bytes(new_content)
    os.replace(tmp, path)
    assert tokens.current() == b"first-token", "checked at most once a second"
    await asyncio.sleep(rotation.CHECK_INTERVAL_SECONDS + 0.1)
    tokens.current()  # the check: the read happens in a worker thread
    assert await wait_for(lambda: tokens.current() == expected)
    if expected == b"first-token":
        await asyncio.sleep(0.3)
        assert tokens.current() == b"first-token"
        assert "is empty" in caplog.text


def test_a_watched_value_is_stated_at_most_once_per_interval(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("1")
    now = [0.0]
    loads: list[str] = []

    def load() -> str:
        loads.append(path.read_text())
        return loads[-1]

    w = rotation.Watched("f", [str(path)], load, clock=lambda: now[0])
    path.write_text("22")
    assert w.check() is False and w.value == "1", "not due yet"
    now[0] = 1.0
    assert w.check() is True and w.value == "22"
    now[0] = 2.0
    assert w.check() is False, "unchanged files are not read"
    assert loads == ["1", "22"]
