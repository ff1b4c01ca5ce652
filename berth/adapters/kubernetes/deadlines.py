"""A bound on every request Berth makes to the API server.

kubernetes-asyncio (36.x, ``client/rest.py``) sends a request without
``_request_timeout`` with ``aiohttp.ClientTimeout()`` — no bound at all —
and turns a number into ``ClientTimeout(total=n)`` only. On a connection
that went silent without a FIN or RST (a NAT or load balancer that dropped
its state: new connections work, old ones never answer) such a request
waits forever, and a bounded one waits its whole total before anything
notices. client-go bounds every request by its client timeout and pings
idle HTTP/2 connections (``ReadIdleTimeout`` 30 s, k8s.io/client-go
transport/cache.go ``http2.ConfigureTransports``, v0.37.2).

:func:`bound_requests` wraps an ApiClient's REST client so that

- a request with no bound of its own gets ``total`` =
  :data:`DEFAULT_TOTAL_SECONDS` (a watch, which is long by design, gets none
  and relies on its own ``_request_timeout`` and the informer's read-idle
  limit);
- every request gets a connect bound (:data:`CONNECT_SECONDS`) and a
  read-idle bound: :data:`READ_IDLE_SECONDS` of silence from the server
  while a response is awaited, :data:`WATCH_READ_IDLE_SECONDS` for a watch
  (the watch cache bookmarks about once a minute, so a longer silence is a
  dead peer).

aiohttp closes a connection whose request timed out instead of returning it
to the pool (``ClientSession._request``), so the caller's retry — the
informer's, the Lease's next attempt, the pod's next scheduling cycle —
runs on a fresh connection.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import aiohttp

__all__ = [
    "CONNECT_SECONDS",
    "DEFAULT_TOTAL_SECONDS",
    "READ_IDLE_SECONDS",
    "WATCH_READ_IDLE_SECONDS",
    "bound_requests",
    "timeout_for",
]

#: A request that names no bound of its own gives up after this (client-go's
#: kube-scheduler client has no total timeout but its API server ends a
#: non-watch request after 60 s, ``--request-timeout``; Berth's own calls
#: name 10-60 s).
DEFAULT_TOTAL_SECONDS = 60.0
#: Opening a connection (TCP and TLS) gives up after this.
CONNECT_SECONDS = 10.0
#: A non-watch response silent for this long is abandoned: its connection is
#: dead. The API server answers a Binding, a Lease update or a status patch
#: in milliseconds and a LIST page of 500 objects in well under a second;
#: one held by a paused etcd is abandoned too and retried, which is harmless
#: (a retried Binding to the same node is a success: berth.adapters.kubernetes.writes).
READ_IDLE_SECONDS = 15.0
#: A watch silent for this long is dead (bookmarks come about every minute:
#: k8s.io/apiserver pkg/storage/cacher/cacher.go ``defaultBookmarkFrequency``,
#: v0.37.2); the informer's own limit (berth.adapters.kubernetes.informer
#: ``WATCH_READ_IDLE_SECONDS``) is the same figure.
WATCH_READ_IDLE_SECONDS = 90.0

_Request = Callable[..., Awaitable[Any]]


def _is_watch(query_params: Iterable[tuple[str, Any]] | None) -> bool:
    return any(k == "watch" and v in (True, "true", "True", 1) for k, v in query_params or ())


def timeout_for(request_timeout: Any, *, watch: bool) -> aiohttp.ClientTimeout:
    """The aiohttp timeout a request is sent with, from the ``_request_timeout``
    its caller gave (None, a number, a (connect, read) pair or a ClientTimeout)."""
    read_idle = WATCH_READ_IDLE_SECONDS if watch else READ_IDLE_SECONDS
    if isinstance(request_timeout, aiohttp.ClientTimeout):
        t = request_timeout
        return aiohttp.ClientTimeout(
            total=t.total,
            connect=t.connect,
            sock_connect=t.sock_connect if t.sock_connect is not None else CONNECT_SECONDS,
            sock_read=t.sock_read if t.sock_read is not None else read_idle,
        )
    if isinstance(request_timeout, tuple) and len(request_timeout) == 2:
        connect, read = request_timeout
        return aiohttp.ClientTimeout(
            total=None if watch else DEFAULT_TOTAL_SECONDS, sock_connect=connect, sock_read=read
        )
    if isinstance(request_timeout, (int, float)) and not isinstance(request_timeout, bool) and request_timeout > 0:
        total = float(request_timeout)
        return aiohttp.ClientTimeout(
            total=total, sock_connect=min(total, CONNECT_SECONDS), sock_read=min(total, read_idle)
        )
    return aiohttp.ClientTimeout(
        total=None if watch else DEFAULT_TOTAL_SECONDS, sock_connect=CONNECT_SECONDS, sock_read=read_idle
    )


def bound_requests(api: Any) -> None:
    """Make every request of ``api`` (a kubernetes-asyncio ApiClient)
    bounded as described above; calling it twice changes nothing more."""
    rest = getattr(api, "rest_client", None)
    if rest is None or getattr(rest, "_berth_bounded", False):
        return
    inner: _Request = rest.request

    @functools.wraps(inner)
    async def request(
        method: str, url: str, query_params: Any = None, *args: Any, _request_timeout: Any = None, **kw: Any
    ) -> Any:
        timeout = timeout_for(_request_timeout, watch=_is_watch(query_params))
        return await inner(method, url, query_params, *args, _request_timeout=timeout, **kw)

    rest.request = request
    rest._berth_bounded = True
