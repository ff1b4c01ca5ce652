"""The dashboard's doors: its own listener answers only for allowed Host
names and with a strict Content-Security-Policy; with an authority (the API
server in Kubernetes mode; here a fake :class:`berth.access.Reviewer` with a
table of who may what) every ``/ui/api/*`` request needs a caller — a
bearer header or a session from signing in — and shows only what that
caller may list; outside Kubernetes a static token file does the same for
one all-seeing caller, and loopback without one stays open."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict

from berth import access, config, errors
from berth.adapters.http import dashboard, security, signin
from berth.cluster import model
from berth.quota.tree import LABEL_QUEUE
from berth.scheduling.streams import StreamBudget
from berth.testing import make_node, make_pod
from tests.certs import CA
from tests.http.test_tls_rotation import client_context, install, served_cn, until_cn
from tests.loop.conftest import Berth, make_config, running

Client = TestClient[Any, Any]

GROUP = "berth.dev"


class TableReviewer:
    """A Reviewer from two tables: token -> user, and the grants
    ``(user, verb, resource, group, namespace, name)`` where "" in namespace
    is the cluster scope and "" in name any name. Counts what it is asked."""

    def __init__(self, tokens: dict[str, str], grants: set[tuple[str, str, str, str, str, str]]) -> None:
        self.tokens = dict(tokens)
        self.grants = set(grants)
        self.asked: list[tuple[str, access.Attributes]] = []

    async def review_token(self, token: str) -> access.Caller:
        user = self.tokens.get(token)
        if user is None:
            raise errors.Unauthenticated("the API server did not accept the bearer token (TokenReview): invalid")
        return access.Caller(user, ("system:authenticated",), token=token)

    async def review_access(self, caller: access.Caller, attrs: access.Attributes) -> tuple[bool, str]:
        self.asked.append((caller.user, attrs))
        for ns in {attrs.namespace, ""}:
            for name in {attrs.name, ""}:
                if (caller.user, attrs.verb, attrs.resource, attrs.group, ns, name) in self.grants:
                    return True, "RBAC: allowed"
        return False, ""


#: alice may list pods in team-a and get the queue qa; admin may list
#: everything; nobody is a valid token with no rights at all.
TOKENS = {"alice-token": "alice", "admin-token": "admin", "nobody-token": "nobody"}
GRANTS = {
    ("alice", "list", "pods", "", "team-a", ""),
    ("alice", "get", "queues", GROUP, "", "qa"),
    ("admin", "list", "pods", "", "", ""),
    ("admin", "list", "nodes", "", "", ""),
    ("admin", "list", "queues", GROUP, "", ""),
}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def pod(name: str, namespace: str, cpu: str, **kw: Any) -> model.Pod:
    return make_pod(name, namespace=namespace, scheduler_name="berth", requests={"cpu": cpu}, **kw)


@pytest.fixture
async def berth() -> AsyncIterator[Berth]:
    """Two namespaces, each with a placed pod, a pending one and a gang."""
    cfg = make_config(
        http={"host": "127.0.0.1", "port": 0},
        ui={"host": "127.0.0.1", "port": 0},
        queues=[{"name": "qa", "namespaces": ["team-a"]}, {"name": "qb", "namespaces": ["team-b"]}],
    )
    async with running(cfg) as b:
        b.nodes(make_node("n0", cpu="8", memory="8Gi", pods=110))
        for ns, q in (("team-a", "qa"), ("team-b", "qb")):
            meta = model.ObjectMeta(name="gang", namespace=ns)
            b.core.on_pod_group(model.PodGroup(metadata=meta, spec=model.PodGroupSpec(min_member=5)))
            b.pods(pod("small", ns, "1", labels={LABEL_QUEUE: q}), pod("huge", ns, "64", labels={LABEL_QUEUE: q}))
            b.pods(pod("member", ns, "1", labels={LABEL_QUEUE: q, model.LABEL_POD_GROUP: "gang"}))
        await b.settle()
        yield b


@pytest.fixture
def reviewer(berth: Berth) -> TableReviewer:
    r = TableReviewer(TOKENS, set(GRANTS))
    berth.core.authority = access.Authority(r)
    return r


@pytest.fixture
async def client(berth: Berth, reviewer: TableReviewer) -> AsyncIterator[Client]:
    async with TestClient(TestServer(dashboard.build_app(berth.core))) as c:
        yield c


async def get(c: Client, path: str, status: int = 200, **kw: Any) -> Any:
    resp = await c.get(path, allow_redirects=False, **kw)
    body = await resp.read()
    assert resp.status == status, (path, body)
    assert resp.content_type == "application/json"
    return json.loads(body)


API = [
    "/ui/api/whoami",
    "/ui/api/nodes",
    "/ui/api/nodes/n0",
    "/ui/api/queues",
    "/ui/api/pods",
    "/ui/api/pods?phase=all&by=reason",
    "/ui/api/pods/team-a/huge",
    "/ui/api/gangs",
    "/ui/api/decisions",
]


# ---------------------------------------------------------------- authentication


@pytest.mark.parametrize("path", API)
@pytest.mark.parametrize(
    "headers",
    [{}, bearer("wrong"), {"Authorization": "Basic YWxpY2U6eA=="}, {"Cookie": f"{signin.COOKIE}=forged"}],
    ids=["no credential", "unknown token", "another scheme", "forged session"],
)
async def test_every_api_route_needs_a_caller(client: Client, path: str, headers: dict[str, str]) -> None:
    resp = await client.get(path, headers=headers)
    body = await resp.json()
    assert resp.status == 401, body
    assert resp.headers["WWW-Authenticate"] == 'Bearer realm="berth-dashboard"'
    assert body["Error"].startswith(f"GET {path.split('?')[0]}: ")


@pytest.mark.parametrize("path", ["/ui/", "/ui/index.html", "/ui/app.js", "/ui/app.css"])
async def test_the_page_itself_needs_no_caller_it_holds_no_data(client: Client, path: str) -> None:
    resp = await client.get(path)
    assert resp.status == 200


async def test_a_bearer_header_names_the_caller(client: Client) -> None:
    assert await get(client, "/ui/api/whoami", headers=bearer("alice-token")) == {
        "user": "alice",
        "groups": ["system:authenticated"],
        "open": False,
    }


# ---------------------------------------------------------------- what each caller sees


def keys(page: dict[str, Any]) -> list[str]:
    return [f"{p['namespace']}/{p['name']}" for p in page["pods"]]


async def test_pods_show_only_namespaces_where_the_caller_may_list_pods(client: Client) -> None:
    alice = await get(client, "/ui/api/pods?phase=all", headers=bearer("alice-token"))
    assert keys(alice) == ["team-a/huge", "team-a/member", "team-a/small"]
    assert alice["namespaces"] == ["team-a"]
    assert sum(alice["phases"].values()) == 3
    admin = await get(client, "/ui/api/pods?phase=all", headers=bearer("admin-token"))
    assert {k.split("/")[0] for k in keys(admin)} == {"team-a", "team-b"}
    nobody = await get(client, "/ui/api/pods?phase=all&by=reason", headers=bearer("nobody-token"))
    assert (nobody["total"], nobody["groups"], nobody["namespaces"]) == (0, [], [])


async def test_a_pod_in_a_namespace_the_caller_may_not_list_is_forbidden_in_the_api_servers_words(
    client: Client,
) -> None:
    assert (await get(client, "/ui/api/pods/team-a/huge", headers=bearer("alice-token")))["pod"] == "team-a/huge"
    refused = await get(client, "/ui/api/pods/team-b/huge", 403, headers=bearer("alice-token"))
    assert refused["Error"] == (
        'GET /ui/api/pods/team-b/huge: pods is forbidden: User "alice" cannot list resource "pods" '
        'in API group "" in the namespace "team-b"'
    )


async def test_gangs_follow_the_pods_namespaces(client: Client) -> None:
    alice = await get(client, "/ui/api/gangs", headers=bearer("alice-token"))
    assert [g["gang"] for g in alice["gangs"]] == ["team-a/gang"]
    admin = await get(client, "/ui/api/gangs", headers=bearer("admin-token"))
    assert [g["gang"] for g in admin["gangs"]] == ["team-a/gang", "team-b/gang"]


async def test_nodes_need_list_nodes_at_the_cluster_scope(client: Client) -> None:
    for path in ("/ui/api/nodes", "/ui/api/nodes/n0"):
        refused = await get(client, path, 403, headers=bearer("alice-token"))
        assert 'cannot list resource "nodes" in API group "" at the cluster scope' in refused["Error"]
    assert (await get(client, "/ui/api/nodes", headers=bearer("admin-token")))["names"] == ["n0"]
    node = await get(client, "/ui/api/nodes/n0", headers=bearer("admin-token"))
    assert {k.split("/")[0] for k in node["pods"]} == {"team-a", "team-b"}


async def test_a_nodes_pods_are_cut_to_the_callers_namespaces(client: Client, reviewer: TableReviewer) -> None:
    reviewer.grants.add(("alice", "list", "nodes", "", "", ""))
    node = await get(client, "/ui/api/nodes/n0", headers=bearer("alice-token"))
    assert node["pods"] and all(k.startswith("team-a/") for k in node["pods"])
    assert node["pod_count"] == len(node["pods"])


async def test_queues_need_list_or_a_get_per_queue(client: Client) -> None:
    alice = await get(client, "/ui/api/queues", headers=bearer("alice-token"))
    assert [q["name"] for q in alice["queues"]] == ["qa"]
    admin = await get(client, "/ui/api/queues", headers=bearer("admin-token"))
    assert [q["name"] for q in admin["queues"]] == ["qa", "qb"]
    assert (await get(client, "/ui/api/queues", headers=bearer("nobody-token")))["queues"] == []


async def read_events(c: Client, headers: dict[str, str]) -> list[dict[str, Any]]:
    async with c.get("/ui/api/decisions?replay=100", headers=headers) as resp:
        assert resp.status == 200
        assert await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5) == b"retry: 2000\n\n"
        out = []
        while True:
            try:
                chunk = await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 0.5)
            except TimeoutError:
                return out
            out.append(json.loads(chunk.split(b"data: ", 1)[1]))


async def test_the_decision_stream_shows_only_the_callers_namespaces(client: Client, berth: Berth) -> None:
    alice = await read_events(client, bearer("alice-token"))
    assert alice and {d["pod"].split("/")[0] for d in alice} == {"team-a"}
    # A decision made while the stream is open, in each namespace: alice sees hers only.
    async with client.get("/ui/api/decisions?replay=0", headers=bearer("alice-token")) as resp:
        await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5)
        berth.pods(pod("late", "team-b", "64"), pod("late", "team-a", "64"))
        chunk = await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 10)
        assert json.loads(chunk.split(b"data: ", 1)[1])["pod"] == "team-a/late"
    admin = await read_events(client, bearer("admin-token"))
    assert {d["pod"].split("/")[0] for d in admin} == {"team-a", "team-b"}


async def test_answers_are_asked_once_per_namespace_not_per_pod(client: Client, reviewer: TableReviewer) -> None:
    await get(client, "/ui/api/pods?phase=all", headers=bearer("alice-token"))
    pods_asked = [a for u, a in reviewer.asked if a.resource == "pods"]
    assert sorted(a.namespace for a in pods_asked) == ["", "team-a", "team-b"]  # cluster first, then each namespace


# ---------------------------------------------------------------- signing in


def cookie_of(resp: Any) -> Any:
    return resp.cookies[signin.COOKIE]


async def login(c: Client, token: str, **headers: str) -> Any:
    return await c.post(
        "/ui/api/login", data=json.dumps({"token": token}), headers={"Content-Type": "application/json", **headers}
    )


async def test_signing_in_sets_a_strict_http_only_session_cookie_that_holds_no_token(client: Client) -> None:
    resp = await login(client, "alice-token")
    assert (resp.status, await resp.json()) == (200, {"user": "alice", "groups": ["system:authenticated"]})
    morsel = cookie_of(resp)
    assert morsel["httponly"] and morsel["samesite"] == "Strict" and morsel["path"] == "/ui/"
    assert not morsel["secure"]  # plain HTTP here; Secure with ui.tls
    assert "alice-token" not in morsel.value and len(morsel.value) >= 40
    # The jar sends it back: the caller is alice, and sees what alice may.
    assert (await get(client, "/ui/api/whoami"))["user"] == "alice"
    assert keys(await get(client, "/ui/api/pods?phase=all")) == ["team-a/huge", "team-a/member", "team-a/small"]
    # Signing out ends the session on the server, not only in this browser.
    sid = morsel.value
    out = await client.post("/ui/api/logout", data="{}", headers={"Content-Type": "application/json"})
    assert out.status == 200
    await get(client, "/ui/api/whoami", 401)
    await get(client, "/ui/api/whoami", 401, headers={"Cookie": f"{signin.COOKIE}={sid}"})


@pytest.mark.parametrize(
    ("data", "headers", "status"),
    [
        (json.dumps({"token": "wrong"}), {"Content-Type": "application/json"}, 401),
        (json.dumps({"token": ""}), {"Content-Type": "application/json"}, 400),
        (json.dumps({"tok": "alice-token"}), {"Content-Type": "application/json"}, 400),
        (b"not json", {"Content-Type": "application/json"}, 400),
        (json.dumps({"token": "alice-token"}), {"Content-Type": "text/plain"}, 415),
        ("token=alice-token", {"Content-Type": "application/x-www-form-urlencoded"}, 415),
        (
            json.dumps({"token": "alice-token"}),
            {"Content-Type": "application/json", "Origin": "http://evil.example"},
            403,
        ),
        (b"{" + b" " * (dashboard.MAX_LOGIN_BYTES + 1) + b"}", {"Content-Type": "application/json"}, 413),
    ],
    ids=["wrong token", "empty token", "no token field", "not json", "text/plain", "form", "other origin", "too large"],
)
async def test_a_refused_sign_in_opens_no_session(
    client: Client, data: Any, headers: dict[str, str], status: int
) -> None:
    resp = await client.post("/ui/api/login", data=data, headers=headers)
    assert resp.status == status, await resp.text()
    assert signin.COOKIE not in resp.cookies
    assert len(client.app[dashboard.DOOR].sessions) == 0


async def test_a_sign_in_from_this_origin_is_accepted(client: Client) -> None:
    origin = f"http://{client.server.host}:{client.server.port}"
    assert (await login(client, "alice-token", Origin=origin)).status == 200


async def test_a_session_ends_after_fifteen_idle_minutes(berth: Berth, reviewer: TableReviewer) -> None:
    now = [0.0]
    door = signin.Door(berth.core, clock=lambda: now[0])
    async with TestClient(TestServer(dashboard.build_app(berth.core, door))) as c:
        assert (await login(c, "alice-token")).status == 200
        now[0] += signin.IDLE_SECONDS - 1
        await get(c, "/ui/api/whoami")  # a use: the idle time starts again
        now[0] += signin.IDLE_SECONDS - 1
        await get(c, "/ui/api/whoami")
        now[0] += signin.IDLE_SECONDS
        body = await get(c, "/ui/api/whoami", 401)
        assert "the session ended" in body["Error"]


async def test_a_session_stops_working_when_the_api_server_stops_accepting_its_token(
    client: Client, reviewer: TableReviewer, berth: Berth
) -> None:
    assert (await login(client, "alice-token")).status == 200
    del reviewer.tokens["alice-token"]
    assert berth.core.authority is not None
    berth.core.authority._tokens.clear()  # as after its 10 s cache
    await get(client, "/ui/api/whoami", 401)


async def test_signing_out_ends_the_sessions_open_decision_stream(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dashboard.ui, "HEARTBEAT_SECONDS", 0.05)
    assert (await login(client, "alice-token")).status == 200
    async with client.get("/ui/api/decisions?replay=0") as resp:
        assert await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5) == b"retry: 2000\n\n"
        out = await client.post("/ui/api/logout", data="{}", headers={"Content-Type": "application/json"})
        assert out.status == 200
        rest = await asyncio.wait_for(resp.content.read(), 5)  # ends at the next heartbeat
        assert b"event: decision" not in rest


def test_sessions_are_bounded_least_recently_used_first() -> None:
    now = [0.0]
    s = signin.Sessions(clock=lambda: now[0], limit=3)
    ids = [s.open(f"t{i}") for i in range(3)]
    assert s.token(ids[0]) == "t0"  # used: now the most recent
    fourth = s.open("t3")
    assert (s.token(ids[1]), s.token(ids[0]), s.token(fourth)) == (None, "t0", "t3")
    assert len(s) == 3
    assert s.alive(ids[2])
    now[0] += signin.IDLE_SECONDS
    assert not s.alive(ids[2]) and len(s) == 0


# ---------------------------------------------------------------- standalone


async def static_token_app(berth: Berth, tmp_path: Path, **ui: Any) -> TestClient[Any, Any]:
    (tmp_path / "token").write_text("dashboard-secret\n")
    cfg = config.parse({"ui": {"host": "127.0.0.1", "auth": {"tokenFile": str(tmp_path / "token")}, **ui}})
    return TestClient(TestServer(dashboard.build_app(berth.core, signin.Door(berth.core, cfg.ui))))


async def test_standalone_a_token_file_guards_the_dashboard_and_its_holder_sees_everything(
    berth: Berth, tmp_path: Path
) -> None:
    async with await static_token_app(berth, tmp_path) as c:
        await get(c, "/ui/api/pods", 401)
        await get(c, "/ui/api/pods", 401, headers=bearer("nope"))
        everything = await get(c, "/ui/api/pods?phase=all", headers=bearer("dashboard-secret"))
        assert {k.split("/")[0] for k in keys(everything)} == {"team-a", "team-b"}
        assert (await login(c, "dashboard-secret")).status == 200
        assert (await get(c, "/ui/api/nodes"))["names"] == ["n0"]


async def test_standalone_on_loopback_without_a_token_file_the_dashboard_is_open(berth: Berth) -> None:
    async with TestClient(TestServer(dashboard.build_app(berth.core))) as c:
        assert await get(c, "/ui/api/whoami") == {
            "user": "system:anonymous",
            "groups": ["system:unauthenticated"],
            "open": True,
        }
        assert len((await get(c, "/ui/api/pods?phase=all"))["pods"]) == 6
        assert (await login(c, "anything")).status == 412  # nothing to sign in to


@pytest.mark.parametrize(
    ("ui", "kubernetes", "error"),
    [
        ({"host": "127.0.0.1"}, False, None),
        ({"host": "0.0.0.0"}, False, "ui.host: listening on 0.0.0.0 needs sign-in to the dashboard"),
        ({"host": "0.0.0.0"}, True, None),  # TokenReview vouches for callers
        ({"host": "0.0.0.0", "allowUnauthenticated": True}, False, None),
        ({"host": "0.0.0.0", "auth": {"tokenFile": "TOKEN"}}, False, None),
        ({"host": "0.0.0.0", "enabled": False}, False, None),
        ({"auth": {"tokenFile": "/nonexistent"}}, False, "ui.auth.tokenFile: cannot read /nonexistent"),
        ({"allowedHosts": ["http://x"]}, False, "ui.allowedHosts[0]: 'http://x' is not a host name"),
        ({"allowedHosts": ["x:8889"]}, False, "ui.allowedHosts[0]"),
        ({"allowedHosts": ["*"]}, False, "ui.allowedHosts[0]"),
    ],
    ids=[
        "loopback",
        "all interfaces",
        "kubernetes",
        "explicitly open",
        "token file",
        "disabled",
        "missing token file",
        "a URL as a host",
        "a port in a host",
        "a bare wildcard",
    ],
)
def test_a_dashboard_beyond_loopback_needs_sign_in_outside_kubernetes(
    tmp_path: Path, ui: dict[str, Any], kubernetes: bool, error: str | None
) -> None:
    if ui.get("auth", {}).get("tokenFile") == "TOKEN":
        (tmp_path / "t").write_text("x")
        ui["auth"]["tokenFile"] = str(tmp_path / "t")
    cfg = config.parse({"ui": ui})
    if error is None:
        security.validate_ui(cfg.ui, kubernetes=kubernetes)
    else:
        with pytest.raises(config.ConfigError) as e:
            security.validate_ui(cfg.ui, kubernetes=kubernetes)
        assert str(e.value).startswith(error), e.value


def test_an_open_dashboard_beyond_loopback_is_logged_as_a_warning(
    berth: Berth, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = config.parse({"ui": {"host": "0.0.0.0", "allowUnauthenticated": True}})
    with caplog.at_level(logging.WARNING, logger="berth.adapters.http.signin"):
        assert signin.Door(berth.core, cfg.ui).open
    assert any("allowUnauthenticated" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------- Host and headers


def host_check(**ui: Any) -> security.HostCheck:
    return security.HostCheck.of(config.parse({"ui": ui}).ui)


@pytest.mark.parametrize(
    ("ui", "host", "allowed"),
    [
        ({}, "localhost:8889", True),
        ({}, "LOCALHOST", True),
        ({}, "127.0.0.1:1", True),
        ({}, "[::1]:8889", True),
        ({}, "localhost.:8889", True),
        ({}, "attacker.example:8889", False),
        ({}, "localhost.attacker.example", False),
        ({}, "127.0.0.1.nip.io:8889", False),
        ({}, "", False),
        ({}, "localhost:88a9", False),
        ({}, "[::1", False),
        ({"host": "10.1.2.3"}, "10.1.2.3:8889", True),
        ({"host": "0.0.0.0"}, "0.0.0.0:8889", False),
        ({"host": "berth.internal"}, "berth.internal", True),
        ({"allowedHosts": ["berth.example.com"]}, "berth.example.com:443", True),
        ({"allowedHosts": ["berth.example.com"]}, "localhost:8889", False),  # the list replaces the defaults
        ({"allowedHosts": ["*.example.com"]}, "a.b.example.com", True),
        ({"allowedHosts": ["*.example.com"]}, "example.com", False),
        ({"allowedHosts": ["*.example.com"]}, "evilexample.com", False),
        ({"allowedHosts": ["[fd00::1]"]}, "[FD00::1]:8889", True),
    ],
)
def test_the_host_header_must_name_this_dashboard(ui: dict[str, Any], host: str, allowed: bool) -> None:
    assert host_check(**ui).allows(host) is allowed


_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
_names = st.lists(_label, min_size=1, max_size=4).map(".".join)
_ports = st.one_of(st.just(""), st.integers(0, 65535).map(lambda p: f":{p}"))


@settings(max_examples=200, deadline=None)
@given(name=_names, port=_ports)
def test_a_generated_host_passes_only_when_its_name_is_allowed(name: str, port: str) -> None:
    check = host_check(allowedHosts=["berth.example.com", "*.berth.example.com"])
    expected = name == "berth.example.com" or name.endswith(".berth.example.com")
    assert check.allows(name + port) is expected
    assert host_check().allows(name + port) is (name in ("localhost", "127.0.0.1"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=_names.filter(lambda n: n not in ("localhost", "127.0.0.1")), port=_ports)
async def test_a_request_under_another_name_is_refused_before_anything_else(
    berth: Berth, reviewer: TableReviewer, name: str, port: str
) -> None:
    async with TestClient(TestServer(dashboard.build_app(berth.core))) as c:
        for path in ("/ui/", "/ui/api/pods", "/ui/api/login"):
            resp = await c.get(path, headers={"Host": name + port, **bearer("admin-token")})
            assert resp.status == 403, path
            assert "is not one of ui.allowedHosts" in (await resp.json())["Error"]
            assert resp.headers["Content-Security-Policy"] == security.DASHBOARD_HEADERS["Content-Security-Policy"]


@pytest.mark.parametrize(
    ("method", "path", "headers", "status"),
    [
        ("GET", "/ui/", {}, 200),
        ("GET", "/ui/app.js", {}, 200),
        ("GET", "/ui/api/pods", bearer("alice-token"), 200),
        ("GET", "/ui/api/pods", {}, 401),
        ("GET", "/ui/api/nodes", bearer("alice-token"), 403),
        ("GET", "/ui/nope.js", {}, 404),
        ("POST", "/ui/", {}, 405),
        ("GET", "/ui", {}, 302),
    ],
)
async def test_every_answer_carries_the_security_headers(
    client: Client, method: str, path: str, headers: dict[str, str], status: int
) -> None:
    resp = await client.request(method, path, headers=headers, allow_redirects=False)
    assert resp.status == status
    for name, value in security.DASHBOARD_HEADERS.items():
        assert resp.headers[name] == value, name


def test_the_page_has_no_inline_script_style_or_handler() -> None:
    """What the policy would refuse (the browser tests catch it live too)."""
    files = {name: body.decode() for name, (body, _) in dashboard.ui.static_files().items()}
    html = files["index.html"]
    assert "<script>" not in html and "<style" not in html and " style=" not in html
    assert not [a for a in ("onclick=", "onsubmit=", "onload=", "onerror=", "javascript:") if a in html]
    assert 'setAttribute("style"' not in files["app.js"] and "innerHTML" not in files["app.js"]


async def test_a_caller_past_its_stream_bound_gets_429_and_the_others_still_stream(
    client: Client, berth: Berth
) -> None:
    berth.core.streams = StreamBudget(per_caller=1, total=10)
    async with client.get("/ui/api/decisions?replay=0", headers=bearer("alice-token")) as first:
        await asyncio.wait_for(first.content.readuntil(b"\n\n"), 5)
        again = await client.get("/ui/api/decisions?replay=0", headers=bearer("alice-token"))
        assert again.status == 429
        assert "alice" in (await again.json())["Error"] and "at most 1 per caller" in (await again.json())["Error"]
        async with client.get("/ui/api/decisions?replay=0", headers=bearer("admin-token")) as other:
            assert other.status == 200
    await asyncio.sleep(0.05)
    assert berth.core.streams.open_by == {}


# ---------------------------------------------------------------- behind an authenticating proxy


class ProxyBed:
    """A dashboard on TLS whose ``ui.auth.requestHeader`` trusts the proxy
    CA's ``front-proxy`` certificate; with ``users_ca`` ``ui.tls.clientCAFile``
    also trusts a users' CA (every client must then present a certificate;
    a user's passes the handshake but vouches for nobody)."""

    def __init__(self, tmp_path: Path, *, users_ca: bool = False) -> None:
        for d in ("server", "proxy", "users"):
            (tmp_path / d).mkdir()
        self.server_ca = CA(tmp_path / "server", "server-ca")
        self.proxy_ca = CA(tmp_path / "proxy", "proxy-ca")
        self.users_ca = CA(tmp_path / "users", "users-ca")
        served = self.server_ca.issue("dashboard", server=True)
        self.ui: dict[str, Any] = {
            "host": "127.0.0.1",
            "tls": {"certFile": str(served.cert), "keyFile": str(served.key)},
            "auth": {"requestHeader": {"clientCAFile": str(self.proxy_ca.path), "allowedNames": ["front-proxy"]}},
        }
        self.leaves = {
            "proxy": self.proxy_ca.issue("front-proxy", client=True),
            "proxy, name not allowed": self.proxy_ca.issue("another-proxy", client=True),
            "a user's certificate": self.users_ca.issue("alice", client=True),
        }
        if users_ca:
            self.ui["tls"]["clientCAFile"] = str(self.users_ca.path)

    def client_context(self, leaf: str | None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.server_ca.path))
        if leaf is not None:
            ctx.load_cert_chain(str(self.leaves[leaf].cert), str(self.leaves[leaf].key))
        return ctx


@pytest.fixture(params=[False, True], ids=["proxy CA only", "with a users' CA"])
async def proxied(
    berth: Berth, reviewer: TableReviewer, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[ProxyBed, Client]]:
    bed = ProxyBed(tmp_path, users_ca=request.param)
    ui = config.parse({"ui": bed.ui}).ui
    app = dashboard.build_app(berth.core, signin.Door(berth.core, ui))
    server = TestServer(app)
    await server.start_server(ssl=security.dashboard_ssl_context(ui))
    async with TestClient(server) as c:
        yield bed, c


REMOTE_ALICE = {"X-Remote-User": "alice", "X-Remote-Group": "team-a-devs"}


@pytest.mark.parametrize(
    ("leaf", "headers", "user"),
    [
        (None, REMOTE_ALICE, None),
        (None, {**REMOTE_ALICE, **bearer("admin-token")}, "admin"),
        ("proxy", REMOTE_ALICE, "alice"),
        ("proxy", {**REMOTE_ALICE, **bearer("admin-token")}, "alice"),
        ("proxy", {"X-Remote-Group": "system:masters"}, None),
        ("proxy, name not allowed", REMOTE_ALICE, None),
        ("a user's certificate", REMOTE_ALICE, None),
    ],
    ids=[
        "forged header without a certificate",
        "without a certificate the bearer token counts, not the header",
        "the proxy's certificate",
        "the proxy's header comes before a token",
        "the proxy's certificate without a user header",
        "a proxy certificate whose name is not allowed",
        "another trusted CA's certificate",
    ],
)
async def test_user_headers_count_only_from_the_proxys_certificate(
    proxied: tuple[ProxyBed, Client], leaf: str | None, headers: dict[str, str], user: str | None
) -> None:
    bed, c = proxied
    users_ca = "clientCAFile" in bed.ui["tls"]
    if (leaf is None and users_ca) or (leaf == "a user's certificate" and not users_ca):
        # ui.tls.clientCAFile requires a certificate; the proxy CA alone refuses a user's.
        with pytest.raises(aiohttp.ClientError):
            await c.get("/ui/api/whoami", headers=headers, ssl=bed.client_context(leaf))
        return
    resp = await c.get("/ui/api/whoami", headers=headers, ssl=bed.client_context(leaf))
    body = await resp.json()
    if user is None:
        assert resp.status == 401, body
    else:
        assert resp.status == 200, body
        assert body["user"] == user


async def test_a_proxied_user_sees_what_its_rbac_lets_it_list(
    proxied: tuple[ProxyBed, Client], reviewer: TableReviewer
) -> None:
    bed, c = proxied
    proxy = bed.client_context("proxy")
    alice = await get(c, "/ui/api/pods?phase=all", headers=REMOTE_ALICE, ssl=proxy)
    assert {k.split("/")[0] for k in keys(alice)} == {"team-a"}
    await get(c, "/ui/api/pods/team-b/huge", 403, headers=REMOTE_ALICE, ssl=proxy)
    await get(c, "/ui/api/nodes", 403, headers=REMOTE_ALICE, ssl=proxy)
    admin = await get(c, "/ui/api/pods?phase=all", headers={"X-Remote-User": "admin"}, ssl=proxy)
    assert {k.split("/")[0] for k in keys(admin)} == {"team-a", "team-b"}
    assert ("alice", access.Attributes("list", "pods", namespace="team-a")) in reviewer.asked


async def test_the_proxy_passes_groups_and_extra_fields_as_the_api_server_reads_them(
    proxied: tuple[ProxyBed, Client], berth: Berth
) -> None:
    bed, c = proxied
    seen: list[access.Caller] = []

    async def review(caller: access.Caller, attrs: access.Attributes) -> tuple[bool, str]:
        seen.append(caller)
        return False, ""

    assert berth.core.authority is not None
    berth.core.authority.reviewer.review_access = review  # type: ignore[method-assign]
    headers = [
        ("X-Remote-User", "carol"),
        ("X-Remote-Group", "one"),
        ("X-Remote-Group", "two"),
        ("X-Remote-Extra-Acme.com%2Fscopes", "read"),
        ("X-Remote-Extra-Acme.com%2Fscopes", "write"),
    ]
    body = await get(c, "/ui/api/whoami", headers=CIMultiDict(headers), ssl=bed.client_context("proxy"))
    assert body["user"] == "carol" and body["groups"] == ["one", "two"]
    await get(c, "/ui/api/pods", headers=CIMultiDict(headers), ssl=bed.client_context("proxy"))
    assert seen and seen[0].extra == (("acme.com/scopes", ("read", "write")),)


async def test_the_proxys_stream_lives_without_a_session(proxied: tuple[ProxyBed, Client]) -> None:
    bed, c = proxied
    async with c.get("/ui/api/decisions?replay=100", headers=REMOTE_ALICE, ssl=bed.client_context("proxy")) as resp:
        assert resp.status == 200
        assert await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5) == b"retry: 2000\n\n"
        event = await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5)
        assert json.loads(event.split(b"data: ", 1)[1])["pod"].startswith("team-a/")


@pytest.mark.parametrize(
    ("ui", "message"),
    [
        ({"auth": {"requestHeader": {"clientCAFile": "CA"}}}, "ui.auth.requestHeader: needs ui.tls"),
        (
            {"tls": "TLS", "auth": {"requestHeader": {"clientCAFile": "/nonexistent/ca.crt"}}},
            "ui.auth.requestHeader.clientCAFile: cannot read /nonexistent/ca.crt",
        ),
        (
            {"tls": "TLS", "auth": {"requestHeader": {"clientCAFile": "CA", "usernameHeaders": [" "]}}},
            "ui.auth.requestHeader.usernameHeaders: ' ' is not a header name",
        ),
        (
            {"tls": "TLS", "auth": {"requestHeader": {"clientCAFile": "CA", "usernameHeaders": []}}},
            "ui.auth.requestHeader.usernameHeaders: at least one header names the user",
        ),
    ],
    ids=["without TLS", "unreadable CA", "blank header name", "no user header"],
)
def test_a_request_header_configuration_that_cannot_work_is_refused(
    tmp_path: Path, ui: dict[str, Any], message: str
) -> None:
    bed = ProxyBed(tmp_path)
    text = (
        json.dumps(ui).replace('"TLS"', json.dumps(bed.ui["tls"])).replace('"CA"', json.dumps(str(bed.proxy_ca.path)))
    )
    cfg = config.parse({"ui": {"host": "0.0.0.0", **json.loads(text)}})
    with pytest.raises(config.ConfigError, match=re.escape(message)):
        security.validate_ui(cfg.ui, kubernetes=True)


# ---------------------------------------------------------------- the dashboard's TLS


async def test_the_dashboard_serves_a_renewed_certificate_to_new_connections(tmp_path: Path) -> None:
    ca = CA(tmp_path)
    first = ca.issue("first", server=True)
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    install(first.cert, first.key, cert, key)
    ui = config.parse({"ui": {"tls": {"certFile": str(cert), "keyFile": str(key)}}}).ui
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0, ssl=security.dashboard_ssl_context(ui))
    try:
        port = server.sockets[0].getsockname()[1]
        ctx = client_context(ca)
        assert await served_cn(port, ctx) == "first"
        second = ca.issue("second", server=True)
        install(second.cert, second.key, cert, key)
        assert await until_cn(port, ctx, "second") == "second"
    finally:
        server.close()
        await server.wait_closed()
