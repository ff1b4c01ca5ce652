"""One error model for every HTTP answer that is not 2xx: ``application/json``
``{"Error": "..."}``, as kube-scheduler's extender types spell it.

A client's mistake is a :mod:`berth.errors` kind (or one of aiohttp's own
HTTP exceptions: the router's 404/405, 408, 415) and gets its status with the
message as raised, cut by :func:`berth.errors.bounded`. Anything else is a bug:
logged once with its traceback, answered 500 without internals.

Three places produce error answers and all go through :func:`answer`: the
extender's guard (which counts them in metrics), :func:`middleware` for every
other route (health, metrics, the router's own 404/405), and the connection
level (``server._Protocol.handle_error``: unparsable request lines and
headers, which never reach a route).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from http import HTTPStatus

import msgspec
from aiohttp import web

from berth import errors

__all__ = ["STATUS", "Handler", "answer", "from_exception", "internal_error", "middleware", "status_of"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

log = logging.getLogger(__name__)

#: The answer each client-error kind gets (berth/errors.py names the pairs).
STATUS: dict[type[errors.BerthError], int] = {
    errors.InvalidArgument: HTTPStatus.BAD_REQUEST,
    errors.NotFound: HTTPStatus.NOT_FOUND,
    errors.AlreadyExists: HTTPStatus.CONFLICT,
    errors.FailedPrecondition: HTTPStatus.PRECONDITION_FAILED,
    errors.ResourceExhausted: HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
    errors.OutOfRange: HTTPStatus.GONE,
    errors.DeadlineExceeded: HTTPStatus.GATEWAY_TIMEOUT,
    errors.Unauthenticated: HTTPStatus.UNAUTHORIZED,
    errors.PermissionDenied: HTTPStatus.FORBIDDEN,
    errors.Unavailable: HTTPStatus.SERVICE_UNAVAILABLE,
}

#: After these the connection is closed: the rest of the body was not (or
#: could not be) read, so the next request's first byte is unknown.
_CLOSE = frozenset({HTTPStatus.REQUEST_TIMEOUT, HTTPStatus.REQUEST_ENTITY_TOO_LARGE})

_encoder = msgspec.json.Encoder()


def status_of(exc: errors.BerthError) -> int:
    for kind in type(exc).__mro__:
        if kind in STATUS:
            return STATUS[kind]
    return HTTPStatus.BAD_REQUEST


def answer(status: int, message: str, *, headers: dict[str, str] | None = None) -> web.Response:
    """``{"Error": message}`` with ``status``; 408/413 also close the connection."""
    body = _encoder.encode({"Error": errors.bounded(message)})
    resp = web.Response(body=body, status=status, content_type="application/json", headers=headers)
    if status in _CLOSE:
        resp.force_close()
    return resp


def from_exception(exc: web.HTTPException | errors.BerthError, prefix: str = "") -> web.Response:
    """The JSON answer for a client error; ``prefix`` (e.g. ``"filter: "``) leads the message."""
    if isinstance(exc, web.HTTPException):
        # aiohttp's own text is "404: Not Found"; keep what it says after the code,
        # and headers that matter to the client (Allow on a 405).
        text = exc.text or exc.reason
        text = text.removeprefix(f"{exc.status}: ")
        keep = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "retry-after")}
        return answer(exc.status, prefix + text, headers=keep or None)
    return answer(status_of(exc), prefix + str(exc))


def internal_error(prefix: str = "") -> web.Response:
    """A bug's answer: no traceback or internals go to the client (the caller logged it)."""
    return answer(HTTPStatus.INTERNAL_SERVER_ERROR, f"{prefix}internal error; see the server log")


@web.middleware
async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """JSON for the router's 404/405 and anything a route raises."""
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.status < 400:  # redirects and the like are not errors
            raise
        return from_exception(e, f"{request.method} {request.path}: ")
    except errors.BerthError as e:
        return from_exception(e, f"{request.method} {request.path}: ")
    except Exception:  # the last resort: a bug, logged once, answered 500
        log.exception("%s %s failed", request.method, request.path)
        return internal_error(f"{request.method} {request.path}: ")
