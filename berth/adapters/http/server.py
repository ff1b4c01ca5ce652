"""HTTP adapter: health, readiness, Prometheus metrics and the extender
routes on ``http``'s port; the read-only dashboard (``dashboard``) on a
listener of its own (``ui``'s port), so that the port kube-scheduler must
reach serves nothing a browser should see.

Connections follow Go's ``net/http.Server`` (``server.go``): a connection
with no request for ``http.idleTimeoutSeconds`` is closed (``IdleTimeout``,
aiohttp's ``keepalive_timeout``); once a request's first byte arrives (or
the connection opens) its request line and headers must be in within
``http.readHeaderTimeoutSeconds`` (``ReadHeaderTimeout``), else the answer is
408 and the connection closes; the extender reads bodies within
``http.readTimeoutSeconds`` (``body.read``); a request, body included, is
stopped after ``http.requestTimeoutSeconds`` with a 504 (``budget``), or as
soon as its caller goes away. Every error answer, down to an unparsable
request line, is ``{"Error": ...}`` JSON (``errors``).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from http import HTTPStatus
from typing import Any

import msgspec
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from berth.adapters.http import budget, dashboard, errors, extender, security, ui
from berth.config import HttpConfig
from berth.scheduling.core import Core
from berth.scheduling.verbs import Extender

__all__ = ["build_app", "start", "start_dashboard", "start_waiting", "stop"]

log = logging.getLogger(__name__)

#: How long a body nobody reads is drained after the answer before the
#: connection closes, so the client sees the answer rather than a reset.
#: Go waits 500 ms (``rstAvoidanceDelay`` in net/http/server.go); aiohttp's
#: default of 10 s would keep a slow sender's connection for that long.
LINGER_SECONDS = 0.5
REQUEST_TIMEOUT_KEY = "http.requestTimeoutSeconds"


class _Draining:
    """Set by :func:`stop`: answers from now on close their connection."""

    on = False


_DRAINING = web.AppKey("berth_draining", _Draining)


def handler_args(core: Core) -> dict[str, Any]:
    """RequestHandler options from the configuration (also used by test servers)."""
    return {
        "keepalive_timeout": core.cfg.http.idle_timeout_seconds,
        "lingering_time": LINGER_SECONDS,
        # Bodies are inflated by body.read, within the limit (see its docstring).
        "auto_decompress": False,
    }


def build_app(core: Core, verbs: Extender, door: security.ExtenderDoor | None = None) -> web.Application:
    """The extender port's application; ``door`` (default: from ``http``'s
    configuration) says who may call the verbs."""
    # The extender reads bodies itself (body.read, exact limit); this bounds
    # request.read()/post() should any other route ever call them.
    app = web.Application(
        client_max_size=core.cfg.http.max_body_bytes,
        middlewares=[errors.middleware, budget.middleware(core.cfg.http.request_timeout_seconds, REQUEST_TIMEOUT_KEY)],
        handler_args=handler_args(core),
    )
    _draining(app)

    async def nosniff(_: web.Request, resp: web.StreamResponse) -> None:
        resp.headers["X-Content-Type-Options"] = "nosniff"

    app.on_response_prepare.append(nosniff)

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        if core.ready:
            return web.Response(text="ok")
        return errors.answer(HTTPStatus.SERVICE_UNAVAILABLE, "cache not synced")

    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(core.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/metrics", metrics)
    if core.cfg.extender.enabled:
        extender.add_routes(app, core, verbs, door)

    ui_cfg = core.cfg.ui
    moved = (
        f"the dashboard is served on its own port: http{'s' if ui_cfg.tls else ''}://{ui_cfg.host}:{ui_cfg.port}/ui/ "
        "(ui.host, ui.port)"
        if ui_cfg.enabled
        else "the dashboard is off (ui.enabled: false)"
    )

    async def dashboard_moved(_: web.Request) -> web.Response:
        # A 404 without a redirect: nothing on this port points a browser anywhere.
        return errors.answer(HTTPStatus.NOT_FOUND, moved)

    app.router.add_get("/ui", dashboard_moved)
    app.router.add_get("/ui/{tail:.*}", dashboard_moved)
    return app


def _draining(app: web.Application) -> None:
    """Answers of ``app`` from now on close their connection (see build_app)."""
    app[_DRAINING] = _Draining()

    async def close_when_draining(_: web.Request, resp: web.StreamResponse) -> None:
        if app[_DRAINING].on:
            resp.force_close()  # the connection closes after this answer
            resp.headers["Connection"] = "close"  # and says so (headers are not written yet)

    app.on_response_prepare.append(close_when_draining)


_encoder = msgspec.json.Encoder()


class _Protocol(web.RequestHandler):
    """aiohttp's connection handler with JSON protocol errors and Go's
    ReadHeaderTimeout. Relies on a few of RequestHandler's attributes
    (``_waiter``: the loop waits for a request; ``_messages``: parsed
    requests; ``_keepalive_handle``); tests/http/test_connections.py pins them."""

    def __init__(self, manager: web.Server, *, read_header_timeout: float, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._header_timeout = read_header_timeout
        self._header_timer: asyncio.TimerHandle | None = None
        self._header_bytes = False

    # ------------------------------------------------ read header timeout

    def _waiting_for_request(self) -> bool:
        return self._waiter is not None and not self._waiter.done() and not self._messages

    def _arm(self) -> None:
        self._disarm()
        if self._header_timeout > 0:
            self._header_timer = self._loop.call_later(self._header_timeout, self._header_deadline)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        self._header_bytes = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm()  # Go: the first request's header deadline runs from accept

    def data_received(self, data: bytes) -> None:
        if data and (self._header_timer is not None or self._waiting_for_request()):
            # A request's first bytes: from here its headers' deadline applies,
            # not the idle one (Go: IdleTimeout until the first byte, then
            # ReadHeaderTimeout). aiohttp re-arms idle after the answer.
            if self._header_timer is None:
                self._arm()
            self._header_bytes = True
            if self._keepalive_handle is not None:
                self._keepalive_handle.cancel()
                self._keepalive_handle = None
        super().data_received(data)
        if self._messages:  # a request (or a parse error) is ready: headers are in
            self._disarm()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _header_deadline(self) -> None:
        self._header_timer = None
        if self.transport is None or self._messages:
            return
        if self._header_bytes:
            # Nothing was answered on this request yet, so a 408 can be written raw.
            limit = f"{self._header_timeout:g}s (http.readHeaderTimeoutSeconds)"
            body = _encoder.encode({"Error": f"request headers not received within {limit}"})
            head = (
                b"HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
            )
            self.transport.write(head + body)
        self.force_close()  # a connection that never sent a byte just closes, as Go's does

    # ------------------------------------------------ errors

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """aiohttp's answer to an unparsable request (400 with the parser's
        message) or an exception outside the middleware (500), as JSON."""
        if status >= 500:
            self.log_exception("Error handling request from %s", request.remote, exc_info=exc)
        else:  # a client's malformed request is not the server's error
            self.log_debug("Bad request from %s: %s", request.remote, message)
        if request.writer.output_size > 0:  # as aiohttp: an answer is under way, nothing to add
            raise ConnectionError("Response is sent already, cannot send another response with the error message")
        if status >= 500 or not message:
            message = HTTPStatus(status).phrase
        resp = errors.answer(status, message)
        resp.force_close()
        return resp

    def close_if_idle(self) -> None:
        """Close now unless a request is in flight (or its headers are arriving)."""
        if self._waiting_for_request() and not self._header_bytes:
            self.force_close()


class _Server(web.Server):
    def __init__(self, *args: Any, read_header_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read_header_timeout = read_header_timeout

    def __call__(self) -> web.RequestHandler:
        return _Protocol(self, loop=self._loop, read_header_timeout=self.read_header_timeout, **self._kwargs)


class _Runner(web.AppRunner):
    """An AppRunner whose connections are :class:`_Protocol`."""

    def __init__(self, app: web.Application, *, read_header_timeout: float, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._read_header_timeout = read_header_timeout

    async def _make_server(self) -> web.Server:
        base = await super()._make_server()  # runs the app's start-up, builds aiohttp's Server
        return _Server(
            base.request_handler,
            request_factory=base.request_factory,
            handler_cancellation=base.handler_cancellation,
            loop=asyncio.get_running_loop(),
            read_header_timeout=self._read_header_timeout,
            **base._kwargs,
        )


def make_runner(app: web.Application, core: Core, **kwargs: Any) -> web.AppRunner:
    """The AppRunner Berth serves ``app`` with: its connections time out slow
    headers and answer protocol-level errors in JSON, and a caller that goes
    away cancels its request's handler (aiohttp's ``handler_cancellation``,
    off by default: Go's http.Server cancels the request's context the same
    way). Test servers that should behave like ``berth serve`` wrap their
    app in it too."""
    kwargs.setdefault("handler_cancellation", True)
    return _Runner(app, read_header_timeout=core.cfg.http.read_header_timeout_seconds, **kwargs)


async def start(
    core: Core, verbs: Extender, ssl_context: ssl.SSLContext | None, door: security.ExtenderDoor | None = None
) -> tuple[web.AppRunner, int]:
    """Start serving; returns the runner and the bound port (useful with port 0).

    A port in use raises ``OSError`` (``EADDRINUSE``) naming the address."""
    cfg = core.cfg.http
    return await _serve(build_app(core, verbs, door), core, "http", cfg.host, cfg.port, ssl_context)


async def start_dashboard(
    core: Core, ssl_context: ssl.SSLContext | None, door: dashboard.Door | None = None
) -> tuple[web.AppRunner, int]:
    """Start the dashboard's listener (``ui.host``, ``ui.port``); as :func:`start`."""
    app = dashboard.build_app(core, door, handler_args=handler_args(core))
    _draining(app)
    return await _serve(app, core, "ui", core.cfg.ui.host, core.cfg.ui.port, ssl_context)


async def start_waiting(
    cfg: HttpConfig, ssl_context: ssl.SSLContext | None, why: str
) -> tuple[web.AppRunner, int]:
    """The HTTP port while Berth cannot build its core yet (``why``: it is
    reading the API server's release, which decides the plugins): ``/healthz``
    and ``/livez`` answer ``ok`` — the process is alive, and a kubelet must
    not restart it for the API server's outage (kube-scheduler serves its
    health at once too) — ``/readyz`` and every other path 503 saying why.
    :func:`stop` it before :func:`start` takes the port."""
    app = web.Application(middlewares=[errors.middleware])
    _draining(app)

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def waiting(_: web.Request) -> web.Response:
        return errors.answer(HTTPStatus.SERVICE_UNAVAILABLE, f"starting: {why}")

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", healthz)
    app.router.add_route("*", "/{tail:.*}", waiting)
    runner = _Runner(app, read_header_timeout=cfg.read_header_timeout_seconds, access_log=None)
    return await _bind(runner, "http", cfg.host, cfg.port, ssl_context)


async def _serve(
    app: web.Application, core: Core, field: str, host: str, port: int, ssl_context: ssl.SSLContext | None
) -> tuple[web.AppRunner, int]:
    return await _bind(make_runner(app, core, access_log=None), field, host, port, ssl_context)


async def _bind(
    runner: web.AppRunner, field: str, host: str, port: int, ssl_context: ssl.SSLContext | None
) -> tuple[web.AppRunner, int]:
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    try:
        await site.start()
    except OSError as e:
        await runner.cleanup()
        # asyncio's text already names the address ("[Errno 98] error while
        # attempting to bind on address ('127.0.0.1', 8888): address already
        # in use"); say which server it was.
        what = "HTTP" if field == "http" else "dashboard"
        raise OSError(e.errno, f"{what}: {e.strerror or e} ({field}.host {host!r}, {field}.port {port})") from e
    server: Any = site._server  # aiohttp exposes the bound sockets only here
    if server is not None and getattr(server, "sockets", None):
        port = int(server.sockets[0].getsockname()[1])
    return runner, port


async def stop(runner: web.AppRunner, grace: float) -> None:
    """Stop accepting, let in-flight requests finish for at most ``grace``
    seconds, then close everything.

    Not ``runner.cleanup()`` alone: it marks every connection closing first,
    after which aiohttp drops the rest of an upload in progress (so it can
    never finish), and then waits up to its 60 s shutdown timeout, twice."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(grace, 0.0)
    names = ", ".join(site.name for site in runner.sites)
    for site in list(runner.sites):
        await site.stop()
    server = runner.server
    app: web.Application = runner.app
    if server is not None:
        app[_DRAINING].on = True  # answers from now on carry Connection: close
        ui.close_streams(app)  # the dashboard's event streams end now, not at the grace period's end
        while True:
            for conn in server.connections:
                if isinstance(conn, _Protocol):
                    conn.close_if_idle()
            if not server.connections or loop.time() >= deadline:
                break
            await asyncio.sleep(min(0.02, max(deadline - loop.time(), 0)))
        # Past the grace period: cancel what is left (its body reads fail, its task ends).
        if server.connections and grace > 0:
            log.warning(
                "HTTP (%s): %d connection(s) still busy after the grace period (%gs, shutdownGracePeriodSeconds), "
                "cancelled",
                names,
                len(server.connections),
                grace,
            )
        await server.shutdown(0.01)
    await runner.cleanup()
