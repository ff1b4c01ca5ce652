"""The dashboard's listener (``ui.host``:``ui.port``): the page, its JSON API
(:mod:`berth.adapters.http.ui` computes the answers) and the doors in front.

Every answer, errors included, carries :data:`security.DASHBOARD_HEADERS`
(a Content-Security-Policy without inline script or style, nosniff, no
framing, no referrer). A request whose ``Host`` is not one of
``ui.allowedHosts`` gets 403 before anything else (DNS rebinding).

``/ui/api/*`` needs a caller unless the dashboard is open
(:class:`signin.Door`): 401 otherwise, and the page shows its sign-in form.
What a caller sees is what the API server would let it list
(:class:`berth.access.Scope`), as ``kubectl`` would show it:

=================================  ==========================================
pods, pending groups, gangs,       namespaces where it may ``list pods``
a pod's why/explain, decisions
nodes, the heat map, a node        ``list nodes`` at the cluster scope (a
                                   node's pods: as pods)
queues                             ``list queues.berth.dev`` cluster-wide, or
                                   ``get`` each queue by name
=================================  ==========================================

::

    GET  /ui/                  the page (and its app.js, app.css): open, it holds no data
    POST /ui/api/login         {"token": "..."} -> a session cookie (application/json only)
    POST /ui/api/logout        ends the session
    GET  /ui/api/whoami        the caller, and whether signing in is possible
    GET  /ui/api/...           as berth.adapters.http.ui lists them
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import urllib.parse
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

import msgspec
from aiohttp import web

from berth import access, errors
from berth.adapters.http import budget, security, signin, ui
from berth.adapters.http import errors as http_errors
from berth.framework.decision import Decision
from berth.scheduling import visibility
from berth.scheduling.core import Core

__all__ = ["DOOR", "MAX_LOGIN_BYTES", "Door", "build_app"]

Door = signin.Door

#: The application's :class:`signin.Door` (tests reach its sessions through it).
DOOR = web.AppKey("berth_dashboard_door", signin.Door)
#: A sign-in body larger than this is refused (a token is a few KiB at most).
MAX_LOGIN_BYTES = 64 * 1024
#: The queues' API group (the Queue custom resource).
QUEUES_GROUP = "berth.dev"

_login = msgspec.json.Decoder(dict[str, str])
_REALM = {"WWW-Authenticate": 'Bearer realm="berth-dashboard"'}


def _scope(core: Core, verb: str, resource: str, group: str = "") -> access.Scope:
    return access.Scope(core.authority, access.CALLER.get(), verb, resource, group)


async def _require(core: Core, attrs: access.Attributes) -> None:
    if core.authority is not None:
        await core.authority.require(access.CALLER.get(), attrs)


def _namespace(key: str) -> str:
    return key.partition("/")[0]


async def _visible_listing(core: Core, listing: ui.Listing) -> ui.Listing:
    """``listing`` cut to the namespaces where the caller may list pods."""
    scope = _scope(core, "list", "pods")
    if await scope.everything():
        return listing
    rows = await scope.filter(listing.rows, lambda i: i.row.namespace)
    return ui.Listing(rows, {i.row.key: i for i in rows}, listing.built)


async def _visible_queues(core: Core) -> dict[str, Any]:
    out = ui.queues(core)
    if core.authority is None:
        return out
    caller = access.CALLER.get()
    everything, _ = await core.authority.allowed(caller, access.Attributes("list", "queues", QUEUES_GROUP))
    if everything:
        return out
    names = [q["name"] for q in out["queues"]]
    answers = await asyncio.gather(
        *(core.authority.allowed(caller, access.Attributes("get", "queues", QUEUES_GROUP, name=n)) for n in names)
    )
    seen = {n for n, (ok, _) in zip(names, answers, strict=True) if ok}
    out["queues"] = [
        dict(q, children=[c for c in q["children"] if c in seen]) for q in out["queues"] if q["name"] in seen
    ]
    out["reclaims"] = {k: v for k, v in out["reclaims"].items() if k in seen}
    return out


async def _visible_node(core: Core, name: str) -> dict[str, Any]:
    await _require(core, access.Attributes("list", "nodes"))
    out = ui.node_detail(core, name)
    scope = _scope(core, "list", "pods")
    if not await scope.everything():
        await scope.learn(_namespace(k) for k in out["pods"])
        out["pods"] = [k for k in out["pods"] if scope.admits_known(_namespace(k))]
        out["pod_count"] = len(out["pods"])
    return out


def _same_origin(request: web.Request) -> None:
    """A sign-in or sign-out from another site's page is refused: browsers
    send ``Origin`` with every POST, and it must name this host."""
    origin = request.headers.get("Origin")
    if origin is None:
        return  # not a browser (curl, scripts): the token is the proof
    if urllib.parse.urlsplit(origin).netloc.lower() != request.host.lower():
        raise errors.PermissionDenied(f"cross-origin request from {origin[:100]!r} refused")


def build_app(
    core: Core, door: signin.Door | None = None, *, handler_args: dict[str, Any] | None = None
) -> web.Application:
    """The dashboard's application; ``door`` (default: from ``ui``'s
    configuration) decides who may read; ``handler_args`` are the
    connections' options (``server.handler_args``)."""
    door = door or signin.Door(core)
    hosts = security.HostCheck.of(core.cfg.ui)

    @web.middleware
    async def host_check(request: web.Request, handler: http_errors.Handler) -> web.StreamResponse:
        if not hosts.allows(request.headers.get("Host")):
            shown = request.headers.get("Host", "")[:100]
            return http_errors.answer(HTTPStatus.FORBIDDEN, f"Host {shown!r} is not one of ui.allowedHosts")
        return await handler(request)

    @web.middleware
    async def authenticate(request: web.Request, handler: http_errors.Handler) -> web.StreamResponse:
        if not request.path.startswith("/ui/api/") or request.path == "/ui/api/login":
            return await handler(request)
        try:
            caller = await door.authenticate(request)
        except errors.Unauthenticated as e:
            return http_errors.answer(
                HTTPStatus.UNAUTHORIZED, f"{request.method} {request.path}: {e}", headers=dict(_REALM)
            )
        except errors.ResourceExhausted as e:  # too many failed authentications from this address
            return http_errors.answer(HTTPStatus.TOO_MANY_REQUESTS, f"{request.method} {request.path}: {e}")
        access.CALLER.set(caller)  # this request's task only
        return await handler(request)

    app = web.Application(
        client_max_size=MAX_LOGIN_BYTES,
        middlewares=[
            host_check,
            http_errors.middleware,
            budget.middleware(core.cfg.ui.request_timeout_seconds, "ui.requestTimeoutSeconds"),
            authenticate,
        ],
        handler_args=handler_args,
    )
    app[DOOR] = door
    ui.init_streams(app)

    async def headers(_: web.Request, resp: web.StreamResponse) -> None:
        resp.headers.update(security.DASHBOARD_HEADERS)

    app.on_response_prepare.append(headers)
    _add_routes(app, core, door)
    return app


def _add_routes(app: web.Application, core: Core, door: signin.Door) -> None:
    files = ui.static_files()
    listings = ui.Listings()

    async def root(_: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/ui/")

    async def static(request: web.Request) -> web.Response:
        name = request.match_info.get("file") or "index.html"
        found = files.get(name)
        if found is None:
            raise errors.NotFound(f"no file {name[:64]!r} in the dashboard")
        body, ctype = found
        # Shipped with this version of Berth; revalidated on each load (small files).
        return web.Response(body=body, headers={"Content-Type": ctype, "Cache-Control": "no-cache"})

    def api(build: Callable[[web.Request], Awaitable[Any]]) -> Callable[[web.Request], Awaitable[web.Response]]:
        """A JSON read, holding a seat of the ``reads`` fairness level as the
        gRPC reads do (berth/scheduling/fairness.py): one caller flooding the
        dashboard's listings waits in its own queue; past it, 429."""

        async def handler(request: web.Request) -> web.Response:
            # The leader's state (queues, pending pods, decisions) on a
            # standby would be its idle one: 503 naming the leader, as gRPC.
            core.refuse_on_standby(leaders_state=build not in (whoami, nodes, node))
            try:
                async with core.fairness.seat("reads", _owner(request)):
                    return ui.json_response(await build(request))
            except errors.ResourceExhausted as e:
                return http_errors.answer(HTTPStatus.TOO_MANY_REQUESTS, str(e))

        return handler

    async def login(request: web.Request) -> web.Response:
        _same_origin(request)
        if not security.is_json(request):
            raise web.HTTPUnsupportedMediaType(text=f"Content-Type must be {security.JSON}")
        if door.open:
            raise errors.FailedPrecondition("this dashboard is open: there is nothing to sign in to")
        raw = await request.read()
        try:
            token = _login.decode(raw).get("token", "").strip()
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise errors.InvalidArgument('request body: expected {"token": "..."}') from None
        if not token:
            raise errors.InvalidArgument("token: required")
        try:
            caller = await door.caller_of(token, request.remote or "")
        except errors.Unauthenticated as e:
            return http_errors.answer(HTTPStatus.UNAUTHORIZED, f"sign in: {e}", headers=dict(_REALM))
        except errors.ResourceExhausted as e:  # too many failed sign-ins from this address
            return http_errors.answer(HTTPStatus.TOO_MANY_REQUESTS, f"sign in: {e}")
        resp = ui.json_response({"user": caller.user, "groups": list(caller.groups)})
        door.sign_in(resp, token)
        return resp

    async def logout(request: web.Request) -> web.Response:
        _same_origin(request)
        if not security.is_json(request):
            raise web.HTTPUnsupportedMediaType(text=f"Content-Type must be {security.JSON}")
        resp = ui.json_response({})
        door.sign_out(request, resp)
        return resp

    async def whoami(_: web.Request) -> dict[str, Any]:
        caller = access.CALLER.get()
        return {"user": caller.user, "groups": list(caller.groups), "open": door.open}

    async def nodes(_: web.Request) -> dict[str, Any]:
        await _require(core, access.Attributes("list", "nodes"))
        return ui.nodes_heatmap(core)

    async def node(request: web.Request) -> dict[str, Any]:
        return await _visible_node(core, request.match_info["name"])

    async def queues(_: web.Request) -> dict[str, Any]:
        return await _visible_queues(core)

    async def pods(request: web.Request) -> dict[str, Any]:
        kw = ui.pods_params(request)  # every parameter checked before the listing is built
        return await ui.pods_page(core, await _visible_listing(core, await listings.get(core)), **kw)

    async def pod(request: web.Request) -> dict[str, Any]:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        kw = ui.pod_params(request)
        scope = _scope(core, "list", "pods")
        if not await scope.admits(namespace):
            raise scope.denial(namespace)
        listing = await listings.get(core)
        # No await between here and the answer: one consistent state.
        return ui.pod_page(core, listing, f"{namespace}/{name}", **kw)

    async def gangs(request: web.Request) -> dict[str, Any]:
        kw = ui.gangs_params(request)
        listing = await _visible_listing(core, await listings.get(core))
        scope = _scope(core, "list", "pods")
        if not await scope.everything():
            await scope.learn(g.namespace for g in visibility.list_pod_groups(core))
            kw["namespaces"] = lambda ns: bool(scope.admits_known(ns))
        return ui.gangs_page(core, listing, **kw)

    @budget.long_running
    async def decisions(request: web.Request) -> web.StreamResponse:
        return await _decisions(request, core, door, app)

    app.router.add_get("/", root)
    app.router.add_get("/ui", root)
    app.router.add_get("/ui/", static)
    app.router.add_post("/ui/api/login", login)
    app.router.add_post("/ui/api/logout", logout)
    app.router.add_get("/ui/api/whoami", api(whoami))
    app.router.add_get("/ui/api/nodes", api(nodes))
    app.router.add_get("/ui/api/nodes/{name}", api(node))
    app.router.add_get("/ui/api/queues", api(queues))
    app.router.add_get("/ui/api/pods", api(pods))
    app.router.add_get("/ui/api/pods/{namespace}/{name}", api(pod))
    app.router.add_get("/ui/api/gangs", api(gangs))
    app.router.add_get("/ui/api/decisions", decisions)
    app.router.add_get("/ui/{file}", static)


class _Visible:
    """Which decisions one stream may show: the caller's ``list pods``
    namespaces, asked again once the authority's answers may have changed
    (:data:`berth.access.ALLOW_TTL_SECONDS`)."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.scope = _scope(core, "list", "pods")
        self.asked = asyncio.get_running_loop().time()

    async def __call__(self, d: Decision) -> bool:
        now = asyncio.get_running_loop().time()
        if now - self.asked >= access.ALLOW_TTL_SECONDS:
            self.scope, self.asked = _scope(self.core, "list", "pods"), now
        return await self.scope.admits(_namespace(d.pod))

    async def filter(self, decisions: list[Decision]) -> list[Decision]:
        """The visible ones of many (the replay): each namespace asked once."""
        return await self.scope.filter(decisions, lambda d: _namespace(d.pod))


def _owner(request: web.Request) -> str:
    """Who is calling, as the stream budget and the fairness levels count
    callers (the gRPC door's ``caller_of``): the user, else the address."""
    return access.flow_of(access.CALLER.get(), request.remote or "unknown")


async def _decisions(request: web.Request, core: Core, door: signin.Door, app: web.Application) -> web.StreamResponse:
    """The decision stream (server-sent events), as the caller may see it;
    it ends when the server stops or the session that opened it ends. Each
    caller holds a bounded number of them (:mod:`berth.scheduling.streams`):
    the one too many is 429; a standby's would be idle: 503 naming the leader."""
    core.refuse_on_standby()
    try:
        with core.streams.open(_owner(request)):
            return await _stream_decisions(request, core, door, app)
    except errors.ResourceExhausted as e:
        return http_errors.answer(HTTPStatus.TOO_MANY_REQUESTS, str(e))


async def _stream_decisions(
    request: web.Request, core: Core, door: signin.Door, app: web.Application
) -> web.StreamResponse:
    replay = ui.int_param(request, "replay", ui.DEFAULT_REPLAY, 0, ui.MAX_REPLAY)
    closing = ui.streams_closing(app)
    visible = _Visible(core)
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
    await resp.prepare(request)
    # The most recent decisions first (the log keeps each pod's latest),
    # then the live ones; subscribed before the first write, so none is missed.
    stream = core.decisions.watch()
    nxt: asyncio.Future[Decision] = asyncio.ensure_future(anext(stream))
    stop: asyncio.Future[Any] = asyncio.ensure_future(closing.wait())
    await asyncio.sleep(0)  # the watch subscribes (its first step) before the replay is taken
    latest = await visible.filter(list(core.decisions.latest.values()))
    recent = heapq.nlargest(replay, latest, key=lambda d: d.timestamp_ms)
    try:
        await resp.write(b"retry: 2000\n\n" + b"".join(ui.event(d) for d in reversed(recent)))
        while not closing.is_set() and door.session_alive(request):
            waiting: set[asyncio.Future[Any]] = {nxt, stop}
            done, _ = await asyncio.wait(waiting, timeout=ui.HEARTBEAT_SECONDS, return_when=asyncio.FIRST_COMPLETED)
            if nxt in done:
                d = nxt.result()
                nxt = asyncio.ensure_future(anext(stream))
                if await visible(d):
                    await resp.write(ui.event(d))
            elif not done:
                await resp.write(b": keep-alive\n\n")
    except (ConnectionError, RuntimeError):
        pass  # the browser went away (aiohttp: "Cannot write to closing transport")
    except errors.ResourceExhausted:
        pass  # it fell too far behind (decisions.MAX_BACKLOG_BYTES): it reconnects and replays
    finally:
        # A pending next() is always there: cancelling it ends the watch
        # (its generator's finally unsubscribes).
        for fut in (nxt, stop):
            fut.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await fut
    with contextlib.suppress(ConnectionError, RuntimeError):
        await resp.write_eof()
    return resp
