"""The extender door checks its caller: a bearer token from
``http.auth.tokenFile`` or a client certificate from ``http.tls.clientCAFile``
(kube-scheduler's extender ``tlsConfig``), ``Content-Type:
application/json`` on every verb (no CORS-simple request reaches one), and
a server beyond loopback refuses to start without either credential unless
``http.auth.allowUnauthenticated`` says so. A refused request changes
nothing: the pod stays unbound, the caches as they were."""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth import app, config
from berth.adapters.http import security
from berth.adapters.http import server as http_server
from berth.cluster import model
from tests.certs import CA
from tests.http.payloads import api_pod, args, dumps
from tests.http.test_extender_wire import make_berth

Client = TestClient[Any, Any]

TOKEN = "s3cret-token-for-the-extender"
JSON = {"Content-Type": "application/json"}
BIND = {"PodName": "web-1", "PodNamespace": "default", "PodUID": "uid-default-web-1", "Node": "big"}


def bodies() -> dict[str, bytes]:
    """A valid body for each verb (each answers 200 when let through)."""
    return {
        "filter": dumps(args(api_pod("probe"), names=["big", "small"])),
        "prioritize": dumps(args(api_pod("probe"), names=["big", "small"])),
        "preempt": dumps({"Pod": api_pod("probe"), "NodeNameToMetaVictims": {}}),
        "bind": dumps(BIND),
    }


VERBS = tuple(bodies())


def token_file(tmp_path: Path, token: str = TOKEN) -> str:
    path = tmp_path / "token"
    path.write_text(f"  {token}\n")  # surrounding whitespace is ignored
    return str(path)


def with_pending_pod(extra: dict[str, Any]) -> app.Berth:
    berth = make_berth(extra)
    berth.cluster.upsert_pods([msgspec.convert(api_pod("web-1"), type=model.Pod)])
    return berth


@pytest.fixture
async def guarded(tmp_path: Path) -> AsyncIterator[tuple[Client, app.Berth]]:
    berth = with_pending_pod({"http": {"host": "127.0.0.1", "port": 0, "auth": {"tokenFile": token_file(tmp_path)}}})
    async with TestClient(TestServer(http_server.build_app(berth.core, berth.extender))) as c:
        yield c, berth


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (None, 401),
        (f"Bearer {TOKEN}x", 401),
        ("Bearer ", 401),
        (f"Basic {TOKEN}", 401),
        (f"Bearer {TOKEN}", 200),
        (f"bearer   {TOKEN}", 200),  # the scheme is case-insensitive (RFC 9110 11.1)
    ],
    ids=["no credential", "wrong token", "empty token", "another scheme", "the token", "lower-case scheme"],
)
async def test_with_a_token_file_every_verb_needs_the_token(
    guarded: tuple[Client, app.Berth], verb: str, authorization: str | None, status: int
) -> None:
    c, berth = guarded
    headers = dict(JSON, **({"Authorization": authorization} if authorization is not None else {}))
    before = berth.core.metrics.extender_requests.labels(verb, str(status))._value.get()
    resp = await c.post(f"/scheduler/{verb}", data=bodies()[verb], headers=headers)
    body = await resp.json()
    assert resp.status == status, body
    if status == 401:
        assert body["Error"].startswith(f"{verb}: ")
        assert resp.headers["WWW-Authenticate"] == 'Bearer realm="berth"'
        assert TOKEN not in body["Error"]  # the expected token is never echoed
    # Counted like every other answer.
    assert berth.core.metrics.extender_requests.labels(verb, str(status))._value.get() == before + 1
    bound = [("default/web-1", "big")] if (verb, status) == ("bind", 200) else []
    assert berth.cluster.bindings == bound


async def test_health_and_metrics_stay_open_behind_a_token(guarded: tuple[Client, app.Berth]) -> None:
    c, _ = guarded
    for path in ("/healthz", "/readyz", "/livez", "/metrics"):
        assert (await c.get(path)).status == 200, path


@pytest.mark.parametrize("verb", VERBS)
async def test_on_loopback_without_credentials_the_verbs_stay_open(verb: str) -> None:
    berth = with_pending_pod({})
    async with TestClient(TestServer(http_server.build_app(berth.core, berth.extender))) as c:
        resp = await c.post(f"/scheduler/{verb}", data=bodies()[verb], headers=JSON)
        assert resp.status == 200, await resp.text()


@pytest.mark.parametrize("verb", VERBS)
async def test_with_the_extender_off_no_verb_is_served_and_nothing_changes(verb: str) -> None:
    # The chart's second-scheduler role: nobody calls the verbs, so none is there.
    berth = with_pending_pod({"extender": {"enabled": False}, "http": {"host": "0.0.0.0", "port": 0}})
    async with TestClient(TestServer(http_server.build_app(berth.core, berth.extender))) as c:
        resp = await c.post(f"/scheduler/{verb}", data=bodies()[verb], headers=JSON)
        assert resp.status == 404
        assert (await c.get("/healthz")).status == 200
    assert berth.cluster.pods["default/web-1"].spec.node_name == ""


# ---------------------------------------------------------------- content type

#: Types a page of another origin can send without a CORS preflight
#: (the Fetch standard's CORS-safelisted request headers), and others.
NOT_JSON = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""]


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("ctype", NOT_JSON, ids=["text", "form", "multipart", "none"])
async def test_a_verb_refuses_a_body_that_is_not_json_with_415_and_reads_nothing(verb: str, ctype: str) -> None:
    berth = with_pending_pod({})
    async with TestClient(TestServer(http_server.build_app(berth.core, berth.extender))) as c:
        headers = {"Content-Type": ctype} if ctype else {}
        resp = await c.post(
            f"/scheduler/{verb}", data=bodies()[verb], headers=headers, skip_auto_headers=["Content-Type"]
        )
        body = await resp.json()
        assert resp.status == 415, body
        assert body["Error"].startswith(f"{verb}: Content-Type must be application/json")
    assert berth.cluster.bindings == []


@pytest.mark.parametrize(
    "ctype",
    ["application/json", "application/json; charset=utf-8", "Application/JSON", "application/json;charset=UTF-8"],
)
async def test_json_with_parameters_or_in_any_case_is_json(ctype: str) -> None:
    berth = with_pending_pod({})
    async with TestClient(TestServer(http_server.build_app(berth.core, berth.extender))) as c:
        resp = await c.post("/scheduler/bind", data=dumps(BIND), headers={"Content-Type": ctype})
        assert (resp.status, await resp.json()) == (200, {"Error": ""})
    assert berth.cluster.bindings == [("default/web-1", "big")]


_media = st.from_regex(r"[a-z]{1,12}/[a-z0-9.+-]{1,20}", fullmatch=True).filter(lambda t: t != "application/json")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ctype=_media, params=st.sampled_from(["", "; charset=utf-8", "; x=application/json"]))
async def test_any_other_content_type_is_refused_and_binds_nothing(ctype: str, params: str) -> None:
    berth = with_pending_pod({})
    async with TestClient(TestServer(http_server.build_app(berth.core, berth.extender))) as c:
        resp = await c.post("/scheduler/bind", data=dumps(BIND), headers={"Content-Type": ctype + params})
        assert resp.status == 415
    assert berth.cluster.bindings == []


# ---------------------------------------------------------------- mTLS


async def tls_server(tmp_path: Path, ca: CA, auth: dict[str, Any]) -> tuple[Any, int, app.Berth]:
    srv = ca.issue("berth", server=True)
    tls = {"certFile": str(srv.cert), "keyFile": str(srv.key), "clientCAFile": str(ca.path)}
    berth = with_pending_pod({"http": {"host": "127.0.0.1", "port": 0, "tls": tls, "auth": auth}})
    cfg = berth.cfg.http
    runner, port = await http_server.start(berth.core, berth.extender, security.extender_ssl_context(cfg))
    return runner, port, berth


def client_context(ca: CA, cert: Any = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca.path))
    if cert is not None:
        ctx.load_cert_chain(str(cert.cert), str(cert.key))
    return ctx


async def bind_over_tls(port: int, ctx: ssl.SSLContext, headers: dict[str, str]) -> int:
    async with (
        aiohttp.ClientSession() as s,
        s.post(f"https://127.0.0.1:{port}/scheduler/bind", data=dumps(BIND), headers=headers, ssl=ctx) as r,
    ):
        return r.status


@pytest.mark.parametrize(
    ("cert", "authorization", "status"),
    [
        ("kube-scheduler", None, 200),  # kube-scheduler: a certificate, no token
        (None, f"Bearer {TOKEN}", 200),  # another caller: the token, no certificate
        (None, None, 401),
        (None, "Bearer nope", 401),
        ("stranger", f"Bearer {TOKEN}", "handshake"),  # a certificate given must verify
    ],
    ids=["certificate", "token", "neither", "wrong token", "certificate of another CA"],
)
async def test_with_client_ca_and_token_either_credential_passes(
    tmp_path: Path, cert: str | None, authorization: str | None, status: int | str
) -> None:
    ca, other = CA(tmp_path), CA(tmp_path, "other-ca")
    runner, port, berth = await tls_server(tmp_path, ca, {"tokenFile": token_file(tmp_path)})
    issued = {"kube-scheduler": ca.issue("kube-scheduler", client=True), "stranger": other.issue("x", client=True)}
    headers = dict(JSON, **({"Authorization": authorization} if authorization else {}))
    try:
        ctx = client_context(ca, issued[cert] if cert else None)
        if status == "handshake":
            with pytest.raises((aiohttp.ClientError, ssl.SSLError)):
                await bind_over_tls(port, ctx, headers)
        else:
            assert await bind_over_tls(port, ctx, headers) == status
    finally:
        await runner.cleanup()
    assert berth.cluster.bindings == ([("default/web-1", "big")] if status == 200 else [])


async def test_with_a_client_ca_only_the_handshake_refuses_a_caller_without_a_certificate(tmp_path: Path) -> None:
    ca = CA(tmp_path)
    runner, port, berth = await tls_server(tmp_path, ca, {})
    try:
        with pytest.raises((aiohttp.ClientError, ssl.SSLError)):
            await bind_over_tls(port, client_context(ca), JSON)
        assert berth.cluster.bindings == []
        assert await bind_over_tls(port, client_context(ca, ca.issue("kube-scheduler", client=True)), JSON) == 200
    finally:
        await runner.cleanup()


# ---------------------------------------------------------------- start-up


@pytest.mark.parametrize(
    ("http", "error"),
    [
        ({"host": "127.0.0.1"}, None),
        ({"host": "localhost"}, None),
        ({"host": "::1"}, None),
        ({"host": "0.0.0.0"}, "http.host: listening on 0.0.0.0 needs authentication of the extender verbs"),
        ({"host": ""}, "http.host: listening on 0.0.0.0 needs authentication"),
        ({"host": "10.0.0.7"}, "http.host: listening on 10.0.0.7 needs authentication"),
        ({"host": "0.0.0.0", "auth": {"allowUnauthenticated": True}}, None),
        ({"host": "0.0.0.0", "auth": {"tokenFile": "TOKEN"}}, None),
        ({"host": "0.0.0.0", "auth": {"tokenFile": "/nonexistent/token"}}, "http.auth.tokenFile: cannot read"),
        ({"host": "0.0.0.0", "auth": {"tokenFile": "EMPTY"}}, "http.auth.tokenFile: "),
    ],
    ids=[
        "loopback",
        "localhost",
        "ipv6 loopback",
        "all interfaces",
        "empty host",
        "an address",
        "explicitly unauthenticated",
        "token file",
        "missing token file",
        "empty token file",
    ],
)
def test_beyond_loopback_the_extender_needs_a_credential_or_an_explicit_opt_out(
    tmp_path: Path, http: dict[str, Any], error: str | None
) -> None:
    auth = http.get("auth", {})
    if auth.get("tokenFile") == "TOKEN":
        auth["tokenFile"] = token_file(tmp_path)
    elif auth.get("tokenFile") == "EMPTY":
        (tmp_path / "empty").write_text(" \n")
        auth["tokenFile"] = str(tmp_path / "empty")
    cfg = config.parse({"http": http})
    if error is None:
        security.validate_extender(cfg.http)
    else:
        with pytest.raises(config.ConfigError) as e:
            security.validate_extender(cfg.http)
        assert str(e.value).startswith(error), e.value
        assert "\n" not in str(e.value)


def test_a_client_ca_is_a_credential_beyond_loopback(tmp_path: Path) -> None:
    ca = CA(tmp_path)
    srv = ca.issue("berth", server=True)
    tls = {"certFile": str(srv.cert), "keyFile": str(srv.key), "clientCAFile": str(ca.path)}
    security.validate_extender(config.parse({"http": {"host": "0.0.0.0", "tls": tls}}).http)
    with pytest.raises(config.ConfigError, match="needs authentication"):
        tls_only = {"certFile": str(srv.cert), "keyFile": str(srv.key)}
        security.validate_extender(config.parse({"http": {"host": "0.0.0.0", "tls": tls_only}}).http)


def test_allow_unauthenticated_is_logged_as_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    cfg = config.parse({"http": {"host": "0.0.0.0", "auth": {"allowUnauthenticated": True}}})
    with caplog.at_level(logging.WARNING, logger="berth.adapters.http.security"):
        door = security.ExtenderDoor(cfg.http)
    assert not door.required
    assert any("allowUnauthenticated" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------- the port's other answers


async def test_the_extender_port_no_longer_serves_the_dashboard_and_says_where_it_is() -> None:
    berth = make_berth({"ui": {"port": 9999}})
    async with TestClient(TestServer(http_server.build_app(berth.core, berth.extender))) as c:
        for path in ("/ui", "/ui/", "/ui/app.js", "/ui/api/pods"):
            resp = await c.get(path, allow_redirects=False)
            body = await resp.json()
            assert resp.status == 404, path
            assert "Location" not in resp.headers
            assert "127.0.0.1:9999/ui/" in body["Error"]


async def test_every_answer_of_the_extender_port_says_nosniff() -> None:
    berth = make_berth()
    async with TestClient(TestServer(http_server.build_app(berth.core, berth.extender))) as c:
        for method, path in (("GET", "/healthz"), ("GET", "/metrics"), ("GET", "/nope"), ("POST", "/scheduler/bind")):
            resp = await c.request(method, path, data=b"{}", headers=JSON)
            assert resp.headers["X-Content-Type-Options"] == "nosniff", (method, path)
