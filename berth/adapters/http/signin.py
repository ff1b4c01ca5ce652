"""Who is looking at the dashboard: bearer tokens, sign-in and sessions.

A caller of ``/ui/api/*`` presents a token, either in an ``Authorization:
Bearer`` header (scripts, ``curl``) or by signing in on the page, as the
Kubernetes Dashboard's login does: the page POSTs the token to
``/ui/api/login``, Berth checks it (a TokenReview in Kubernetes mode, the
static ``ui.auth.tokenFile`` otherwise) and answers with a cookie holding a
random session id; the token stays on the server, mapped from that id
(:class:`Sessions`). The cookie is ``HttpOnly`` (no script reads it),
``SameSite=Strict`` (no other site's page sends it) and ``Secure`` when the
dashboard serves TLS. A session ends at ``/ui/api/logout`` or after
:data:`IDLE_SECONDS` without a request — the Dashboard's default token TTL
(``DefaultTokenTTL = 900`` in kubernetes/dashboard
src/app/backend/auth/api/types.go, v2.7.0) — and at most
:data:`MAX_SESSIONS` are kept (the least recently used goes first).

Every request with a session re-checks its token through the
:class:`~berth.access.Authority` (cached 10 s), so a token the API server
stops accepting stops working here within seconds, session or not.

:class:`Door` decides whether the dashboard is open (standalone, no token
file, loopback or ``ui.allowUnauthenticated``) or needs a caller. Behind an
authenticating proxy (``ui.auth.requestHeader``) the proxy's user headers
name the caller, first, but only on a connection whose client certificate
the proxy CA signed (:mod:`berth.adapters.http.requestheader`); such a
request has no session.
"""

from __future__ import annotations

import collections
import dataclasses
import hmac
import logging
import secrets
import time
from collections.abc import Callable

from aiohttp import web

from berth import access, errors
from berth.adapters.credentials import is_loopback, read_token
from berth.adapters.http import requestheader, security
from berth.config import UiConfig
from berth.scheduling.core import Core

__all__ = ["COOKIE", "IDLE_SECONDS", "MAX_SESSIONS", "STATIC_TOKEN_CALLER", "Door", "Sessions"]

log = logging.getLogger(__name__)

#: The session cookie's name.
COOKIE = "berth_session"
#: A session unused this long ends (the Kubernetes Dashboard's token TTL).
IDLE_SECONDS = 900.0
#: Sessions kept at most; signing in beyond this ends the least recently used.
MAX_SESSIONS = 1000
#: Set on a request the authenticating proxy vouched for (it has no session).
_PROXIED = web.RequestKey("berth_proxied", bool)
#: Who the holder of ``ui.auth.tokenFile``'s token is: it sees everything.
STATIC_TOKEN_CALLER = access.Caller("berth:dashboard-token", ("system:authenticated",), unrestricted=True)


@dataclasses.dataclass(slots=True)
class _Session:
    token: str
    seen: float


class Sessions:
    """Session id -> the token it signed in with, least recently used first."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        idle_seconds: float = IDLE_SECONDS,
        limit: int = MAX_SESSIONS,
    ) -> None:
        self._clock = clock
        self._idle = idle_seconds
        self._limit = limit
        self._by_id: collections.OrderedDict[str, _Session] = collections.OrderedDict()

    def __len__(self) -> int:
        self._expire()
        return len(self._by_id)

    def _expire(self) -> None:
        # Used sessions move to the end: the expired ones are at the front.
        deadline = self._clock() - self._idle
        while self._by_id:
            sid, session = next(iter(self._by_id.items()))
            if session.seen > deadline:
                break
            del self._by_id[sid]

    def open(self, token: str) -> str:
        """A new session for ``token``: its id (256 random bits)."""
        self._expire()
        while len(self._by_id) >= self._limit:
            self._by_id.popitem(last=False)
        sid = secrets.token_urlsafe(32)
        self._by_id[sid] = _Session(token, self._clock())
        return sid

    def token(self, sid: str) -> str | None:
        """The token of a live session, which counts as a use (None: no such session)."""
        self._expire()
        session = self._by_id.get(sid)
        if session is None:
            return None
        session.seen = self._clock()
        self._by_id.move_to_end(sid)
        return session.token

    def alive(self, sid: str) -> bool:
        """Whether the session still exists, without counting as a use."""
        self._expire()
        return sid in self._by_id

    def close(self, sid: str) -> bool:
        return self._by_id.pop(sid, None) is not None


class Door:
    """Authenticates the dashboard's API callers (module docstring)."""

    def __init__(self, core: Core, cfg: UiConfig | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        cfg = cfg or core.cfg.ui
        self.core = core
        self.token = read_token("ui.auth.tokenFile", cfg.auth.token_file)
        #: Standalone without a token file, reads are open on loopback or when
        #: the configuration says so (security.validate_ui refused the rest).
        self.may_be_open = is_loopback(cfg.host) or cfg.allow_unauthenticated
        self.secure_cookie = cfg.tls is not None
        self.sessions = Sessions(clock=clock)
        #: An authenticating proxy's user headers, trusted from its certificate only.
        rh = cfg.auth.request_header
        self.proxy = requestheader.RequestHeader(rh) if rh is not None else None
        if cfg.enabled and cfg.allow_unauthenticated and not is_loopback(cfg.host) and self.token is None:
            log.warning(
                "ui.allowUnauthenticated: true: outside Kubernetes the dashboard on %s shows everything to anyone",
                cfg.host or "0.0.0.0",
            )

    @property
    def authority(self) -> access.Authority | None:
        # Read per request: the Kubernetes adapter sets it on the core.
        return self.core.authority

    @property
    def open(self) -> bool:
        """True: every caller is :data:`berth.access.ANYONE` (no sign-in)."""
        return self.authority is None and self.token is None and self.proxy is None and self.may_be_open

    async def caller_of(self, token: str, client: str = "") -> access.Caller:
        """Whose ``token`` is (:class:`errors.Unauthenticated` when nobody's);
        ``client``: the address failures are counted against."""
        if self.token is not None and hmac.compare_digest(token.encode(), self.token):
            return STATIC_TOKEN_CALLER
        if self.authority is None:
            if self.token is None:
                raise errors.Unauthenticated("nothing here can check a token (no ui.auth.tokenFile)")
            raise errors.Unauthenticated("the token is not the one in ui.auth.tokenFile")
        return await self.authority.authenticate(token, client=client)

    async def authenticate(self, request: web.BaseRequest) -> access.Caller:
        """The caller of ``request``: its bearer token's, else its session's."""
        if self.open:
            return access.ANYONE
        if self.proxy is not None:
            # Before any token, as kube-apiserver's union puts requestheader first.
            caller = self.proxy.caller(request, unrestricted=self.authority is None)
            if caller is not None:
                request[_PROXIED] = True
                return caller
        token = security.bearer(request)
        if token is None:
            sid = request.cookies.get(COOKIE)
            token = self.sessions.token(sid) if sid else None
            if token is None:
                why = "the session ended" if sid else "no credential"
                raise errors.Unauthenticated(f"{why}: sign in with a token, or send 'Authorization: Bearer <token>'")
        return await self.caller_of(token, request.remote or "")

    def session_alive(self, request: web.BaseRequest) -> bool:
        """False once the session ``request`` came with has ended (logout,
        idle): an open event stream then ends too. Requests that came with
        a bearer header, or to an open dashboard, have no session to end."""
        if self.open or security.bearer(request) is not None or request.get(_PROXIED, False):
            return True
        sid = request.cookies.get(COOKIE)
        return sid is not None and self.sessions.alive(sid)

    def sign_in(self, resp: web.StreamResponse, token: str) -> None:
        """Open a session for ``token`` (already checked) and set its cookie on ``resp``."""
        sid = self.sessions.open(token)
        resp.set_cookie(COOKIE, sid, path="/ui/", httponly=True, samesite="Strict", secure=self.secure_cookie)

    def sign_out(self, request: web.BaseRequest, resp: web.StreamResponse) -> None:
        sid = request.cookies.get(COOKIE)
        if sid:
            self.sessions.close(sid)
        resp.del_cookie(COOKIE, path="/ui/", httponly=True, samesite="Strict", secure=self.secure_cookie)
