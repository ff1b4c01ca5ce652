"""HTTPS and mTLS on the extender port (kube-scheduler's enableHTTPS / tlsConfig)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from berth import app, config
from berth.adapters.http import server as http_server
from berth.adapters.http.tls import server_ssl_context
from tests.certs import CA
from tests.http.payloads import api_pod, args, dumps


async def serve(tls: dict[str, Any]) -> tuple[Any, int]:
    cfg = config.parse({"http": {"host": "127.0.0.1", "port": 0, "tls": tls}})
    berth = app.build(cfg, run_loop=False)
    core = berth.core
    core.ready = True
    return await http_server.start(core, berth.extender, server_ssl_context(cfg.http.tls))


def client_context(ca: CA, cert: Any = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca.path))
    if cert is not None:
        ctx.load_cert_chain(str(cert.cert), str(cert.key))
    return ctx


async def call(port: int, ctx: ssl.SSLContext) -> int:
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            f"https://127.0.0.1:{port}/scheduler/filter",
            data=dumps(args(api_pod(), names=[])),
            headers={"Content-Type": "application/json"},
            ssl=ctx,
        ) as r,
    ):
        return r.status


async def test_https_serves_the_extender(tmp_path: Path) -> None:
    ca = CA(tmp_path)
    srv = ca.issue("berth", server=True)
    runner, port = await serve({"certFile": str(srv.cert), "keyFile": str(srv.key)})
    try:
        assert await call(port, client_context(ca)) == 200
    finally:
        await runner.cleanup()


async def test_mtls_requires_a_client_certificate_from_the_ca(tmp_path: Path) -> None:
    ca = CA(tmp_path)
    other = CA(tmp_path, "other-ca")
    srv = ca.issue("berth", server=True)
    runner, port = await serve({"certFile": str(srv.cert), "keyFile": str(srv.key), "clientCAFile": str(ca.path)})
    try:
        assert await call(port, client_context(ca, ca.issue("kube-scheduler", client=True))) == 200
        for bad in (None, other.issue("stranger", client=True)):
            with pytest.raises((aiohttp.ClientError, ssl.SSLError)):
                await call(port, client_context(ca, bad))
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(
    ("which", "message"),
    [
        ("cert", "http.tls.certFile: cannot read"),
        ("ca", "http.tls.clientCAFile: cannot read"),
        ("mismatch", "certFile/keyFile"),
    ],
    ids=["missing certificate", "missing client CA", "key of another certificate"],
)
def test_unusable_tls_files_name_the_field(tmp_path: Path, which: str, message: str) -> None:
    ca = CA(tmp_path)
    srv = ca.issue("berth", server=True)
    other = ca.issue("other", server=True)
    tls = config.TLSConfig(cert_file=str(srv.cert), key_file=str(srv.key), client_ca_file=str(ca.path))
    if which == "cert":
        tls.cert_file = str(tmp_path / "absent.crt")
    elif which == "ca":
        tls.client_ca_file = str(tmp_path / "absent-ca.crt")
    else:
        tls.key_file = str(other.key)
    with pytest.raises(ValueError, match=message):
        server_ssl_context(tls)
