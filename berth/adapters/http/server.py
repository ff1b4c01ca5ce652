"""HTTP adapter: health, readiness, Prometheus metrics and the extender routes."""

from __future__ import annotations

import ssl
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from berth.adapters.http import extender
from berth.scheduling.core import Core
from berth.scheduling.verbs import Extender

__all__ = ["build_app"]

# Headroom over the body limit for the multipart/headers aiohttp counts itself.
_SLACK = 64 * 1024


def build_app(core: Core, verbs: Extender) -> web.Application:
    app = web.Application(client_max_size=core.cfg.http.max_body_bytes + _SLACK)

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        if core.ready:
            return web.Response(text="ok")
        return web.Response(status=503, text="cache not synced")

    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(core.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/metrics", metrics)
    extender.add_routes(app, core, verbs)
    return app


async def start(core: Core, verbs: Extender, ssl_context: ssl.SSLContext | None) -> tuple[web.AppRunner, int]:
    """Start serving; returns the runner and the bound port (useful with port 0)."""
    runner = web.AppRunner(build_app(core, verbs), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, core.cfg.http.host, core.cfg.http.port, ssl_context=ssl_context)
    await site.start()
    port = core.cfg.http.port
    server: Any = site._server  # aiohttp exposes the bound sockets only here
    if server is not None and getattr(server, "sockets", None):
        port = int(server.sockets[0].getsockname()[1])
    return runner, port
