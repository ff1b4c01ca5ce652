"""Every HTTP request but a stream runs under the server's request timeout,
as kube-apiserver's ``WithTimeoutForNonLongRunningRequests`` filter does
(``staging/src/k8s.io/apiserver/pkg/server/filters/timeout.go`` v1.37.2,
``--request-timeout`` 1m): past it the handler is cancelled and the client
gets ``504`` — kube-apiserver says ``Timeout: request did not complete within
requested timeout``; Berth names the key that sets it. The gRPC door has the
same bound (``grpc.requestTimeoutSeconds``, :mod:`berth.adapters.grpc.door`).

Streams (the dashboard's decision stream) are long-running, as watches are
for kube-apiserver: a handler marked :func:`long_running` is not bounded.

A caller that goes away cancels its handler too (the runner's
``handler_cancellation``, :func:`berth.adapters.http.server.make_runner`).
Work that must not stop half-done (the extender's ``bind``) shields itself.
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus

from aiohttp import web
from aiohttp.typedefs import Middleware

from berth.adapters.http import errors

__all__ = ["long_running", "middleware"]

_LONG_RUNNING = "_berth_long_running"


def long_running(handler: errors.Handler) -> errors.Handler:
    """Mark a route's handler as a stream: no request timeout for it."""
    setattr(handler, _LONG_RUNNING, True)
    return handler


def middleware(seconds: float, key: str) -> Middleware:
    """The request timeout of one port: ``seconds`` (0: none), set by ``key``."""

    @web.middleware
    async def bounded(request: web.Request, handler: errors.Handler) -> web.StreamResponse:
        route = request.match_info.handler
        if seconds <= 0 or getattr(route, _LONG_RUNNING, False):
            return await handler(request)
        budget = asyncio.timeout(seconds)
        try:
            async with budget:
                return await handler(request)
        except TimeoutError:
            if not budget.expired():
                raise  # the handler's own timeout, not this one
            return errors.answer(
                HTTPStatus.GATEWAY_TIMEOUT,
                f"{request.method} {request.path}: request did not complete within the server's request "
                f"timeout ({seconds:g}s, {key}); it was stopped",
            )

    return bounded
