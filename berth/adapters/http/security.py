"""Who may call the HTTP doors, and the checks every answer carries.

The extender door (``filter``, ``prioritize``, ``preempt``, ``bind``)
accepts a caller that is authenticated by

- a client certificate signed by ``http.tls.clientCAFile``: kube-scheduler's
  extender ``tlsConfig`` (``certFile``/``keyFile``) presents one and sends
  no bearer token (``ExtenderTLSConfig`` in k8s.io/kube-scheduler
  config/v1/types.go, v0.37.2); or
- ``Authorization: Bearer <token>`` equal to the token read at start from
  ``http.auth.tokenFile`` (:func:`hmac.compare_digest`), for other callers.

A verb's body must be ``Content-Type: application/json``, which
kube-scheduler always sends (``HTTPExtender.send`` in
pkg/scheduler/extender.go, v1.37.2): 415 otherwise, so no "simple"
cross-origin request (text/plain, form encodings: no CORS preflight) from a
web page in a local browser can reach a verb.

With neither credential configured the verbs are open, which
:func:`validate_extender` allows only on loopback (``berth serve``'s
default ``http.host``) or when ``http.auth.allowUnauthenticated: true`` says
so explicitly — the rule ``grpc.auth`` follows
(:func:`berth.adapters.grpc.security.validate`).

The dashboard's listener checks the ``Host`` header against
``ui.allowedHosts`` (:class:`HostCheck`: DNS rebinding) and sends
:data:`DASHBOARD_HEADERS` with every answer; the extender port sends
``X-Content-Type-Options: nosniff``.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import ssl

from aiohttp import web

from berth import errors
from berth.adapters.credentials import is_loopback, read_token
from berth.adapters.http import requestheader
from berth.adapters.http.tls import reloading_server_ssl_context
from berth.config import ConfigError, HttpConfig, UiConfig

__all__ = [
    "DASHBOARD_HEADERS",
    "JSON",
    "ExtenderDoor",
    "HostCheck",
    "bearer",
    "dashboard_ssl_context",
    "extender_ssl_context",
    "is_json",
    "validate_extender",
    "validate_ui",
]

log = logging.getLogger(__name__)

JSON = "application/json"

#: Sent with every dashboard answer. The page has no inline script or style
#: (``berth/adapters/http/ui/``), so the policy needs no 'unsafe-inline'.
DASHBOARD_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}

_BEARER = "bearer "


def bearer(request: web.BaseRequest) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (None: no such header)."""
    value = request.headers.get("Authorization", "")
    if value[: len(_BEARER)].lower() != _BEARER:
        return None
    return value[len(_BEARER) :].strip() or None


def is_json(request: web.BaseRequest) -> bool:
    """Whether the body is declared ``application/json`` (parameters such as
    ``charset`` aside, any case: RFC 9110 section 8.3.1)."""
    return request.content_type.lower() == JSON


def _client_cas(cfg: HttpConfig) -> bool:
    return cfg.tls is not None and bool(cfg.tls.client_ca_file)


def extender_ssl_context(cfg: HttpConfig) -> ssl.SSLContext | None:
    """The extender port's TLS. With a client CA and also a token file (or
    ``allowUnauthenticated``) a certificate is optional at the handshake:
    a caller without one is then checked for the token per request."""
    optional = _client_cas(cfg) and (cfg.auth.token_file is not None or cfg.auth.allow_unauthenticated)
    # Re-read when cert-manager renews the files (no restart).
    return reloading_server_ssl_context(cfg.tls, field="http.tls", client_cert_optional=optional)


def validate_extender(cfg: HttpConfig) -> None:
    """Refuse a configuration that would expose unauthenticated extender
    verbs beyond loopback, or that names a file Berth cannot read
    (ConfigError, one line). Called before any port is bound."""
    extender_ssl_context(cfg)
    read_token("http.auth.tokenFile", cfg.auth.token_file)
    authenticated = cfg.auth.token_file is not None or _client_cas(cfg)
    if not authenticated and not cfg.auth.allow_unauthenticated and not is_loopback(cfg.host):
        raise ConfigError(
            f"http.host: listening on {cfg.host or '0.0.0.0'} needs authentication of the extender verbs: "
            "set http.tls.clientCAFile (kube-scheduler's extender tlsConfig presents a client certificate) "
            "or http.auth.tokenFile, or http.auth.allowUnauthenticated: true"
        )


def dashboard_ssl_context(cfg: UiConfig) -> ssl.SSLContext | None:
    """The dashboard's TLS, re-read when its files change (cert-manager
    renewals), as the extender port's. With ``ui.auth.requestHeader`` the
    proxy's CA joins the client CAs and a certificate becomes optional
    (people without one sign in with a token)."""
    rh = cfg.auth.request_header
    if rh is not None and cfg.tls is None:
        raise ConfigError(
            "ui.auth.requestHeader: needs ui.tls: the proxy proves itself with a client certificate over TLS"
        )
    extra = [("ui.auth.requestHeader.clientCAFile", rh.client_ca_file)] if rh is not None else []
    return reloading_server_ssl_context(cfg.tls, field="ui.tls", extra_client_cas=extra)


def validate_ui(cfg: UiConfig, *, kubernetes: bool) -> None:
    """Refuse a dashboard that would be open beyond loopback: outside
    Kubernetes (where no TokenReview vouches for callers) a non-loopback
    ``ui.host`` needs ``ui.auth.tokenFile`` or ``ui.allowUnauthenticated``.
    Its files must be readable and its allowed hosts well formed."""
    if not cfg.enabled:
        return
    dashboard_ssl_context(cfg)
    read_token("ui.auth.tokenFile", cfg.auth.token_file)
    HostCheck.of(cfg)
    if cfg.auth.request_header is not None:
        requestheader.RequestHeader(cfg.auth.request_header)  # header names and the CA file
    if (
        kubernetes
        or cfg.auth.token_file is not None
        or cfg.auth.request_header is not None
        or cfg.allow_unauthenticated
        or is_loopback(cfg.host)
    ):
        return
    raise ConfigError(
        f"ui.host: listening on {cfg.host or '0.0.0.0'} needs sign-in to the dashboard: "
        "set ui.auth.tokenFile, or ui.allowUnauthenticated: true"
    )


class ExtenderDoor:
    """Decides, per request, whether an extender verb may proceed."""

    def __init__(self, cfg: HttpConfig) -> None:
        validate_extender(cfg)
        self.token = read_token("http.auth.tokenFile", cfg.auth.token_file)
        self.client_certificates = _client_cas(cfg)
        #: False: every caller passes (loopback without credentials, or the
        #: configuration accepts unauthenticated callers).
        self.required = (self.token is not None or self.client_certificates) and not cfg.auth.allow_unauthenticated
        if cfg.auth.allow_unauthenticated:
            log.warning(
                "http.auth.allowUnauthenticated: true: the extender verbs (bind among them) accept callers "
                "without a token or client certificate on %s",
                cfg.host or "0.0.0.0",
            )
        if self.token is not None and cfg.tls is None and not is_loopback(cfg.host):
            log.warning("http.auth.tokenFile without http.tls: bearer tokens travel in plaintext")

    def check(self, request: web.BaseRequest, verb: str) -> None:
        """Raise :class:`errors.Unauthenticated` unless the caller may call ``verb``."""
        if not self.required:
            return
        # ssl keeps only a certificate that verified against clientCAFile
        # (CERT_REQUIRED, or CERT_OPTIONAL and one was given).
        transport = request.transport
        if self.client_certificates and transport is not None and transport.get_extra_info("peercert"):
            return
        presented = bearer(request)
        if self.token is not None and presented is not None:
            if hmac.compare_digest(presented.encode(), self.token):
                return
            raise errors.Unauthenticated("the bearer token is not the one in http.auth.tokenFile")
        how = []
        if self.client_certificates:
            how.append("present a client certificate signed by http.tls.clientCAFile")
        if self.token is not None:
            how.append("send 'Authorization: Bearer <token>' with the token in http.auth.tokenFile")
        raise errors.Unauthenticated(f"{verb} needs an authenticated caller: {' or '.join(how)}")


class HostCheck:
    """Whether a request's ``Host`` header names this dashboard.

    A page on another site can make a browser send requests here under its
    own name once its DNS answers with this machine's address (DNS
    rebinding); such requests carry that name in ``Host``. kubectl proxy
    refuses them the same way (``--accept-hosts``, default
    ``^localhost$,^127\\.0\\.0\\.1$,^\\[::1\\]$`` matched against the host
    without its port: k8s.io/kubectl pkg/proxy/proxy_server.go, v0.37.2);
    Berth takes names, not regular expressions, and ``*.example.com`` for
    the names under a domain."""

    def __init__(self, exact: frozenset[str], suffixes: tuple[str, ...]) -> None:
        self.exact = exact
        self.suffixes = suffixes

    @classmethod
    def of(cls, cfg: UiConfig) -> HostCheck:
        if not cfg.allowed_hosts:
            names = {"localhost", "127.0.0.1", "[::1]"}
            host = cfg.host.strip().lower()
            if host not in ("", "0.0.0.0", "::", "[::]"):  # all interfaces: no name a browser uses
                names.add(_bracketed(host))
            return cls(frozenset(names), ())
        exact: set[str] = set()
        suffixes: list[str] = []
        for i, raw in enumerate(cfg.allowed_hosts):
            name = raw.strip().lower()
            if name.startswith("[") and name.endswith("]"):
                valid = _bracketed(name[1:-1]) == name
            else:
                valid = bool(name) and not any(c in name for c in "/:@[] ")
            if not valid or name == "*." or "*" in name.removeprefix("*."):
                raise ConfigError(f"ui.allowedHosts[{i}]: {raw!r} is not a host name (no scheme, port or path)")
            if name.startswith("*."):
                suffixes.append(name[1:])
            else:
                exact.add(name)
        return cls(frozenset(exact), tuple(suffixes))

    def allows(self, host_header: str | None) -> bool:
        host = split_host(host_header or "")
        if host is None:
            return False
        return host in self.exact or any(host.endswith(s) and len(host) > len(s) for s in self.suffixes)


def _bracketed(host: str) -> str:
    """An IPv6 literal as a Host header spells it (``[::1]``)."""
    try:
        if ipaddress.ip_address(host).version == 6:
            return f"[{host}]"
    except ValueError:
        pass
    return host


def split_host(header: str) -> str | None:
    """The host of a ``Host`` header without its port, lower-cased
    (``[::1]:8889`` -> ``[::1]``); None when it is not ``host[:port]``."""
    header = header.strip().lower()
    if not header:
        return None
    if header.startswith("["):
        end = header.find("]")
        if end < 0:
            return None
        host, rest = header[: end + 1], header[end + 1 :]
    else:
        host, sep, port = header.partition(":")
        rest = sep + port
    if rest and not (rest.startswith(":") and rest[1:].isdigit() and rest[1:].isascii()):
        return None
    return host.rstrip(".") or None
