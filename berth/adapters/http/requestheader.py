"""The dashboard behind an authenticating proxy (``ui.auth.requestHeader``).

Mirrors kube-apiserver's request-header authenticator
(k8s.io/apiserver@v0.37.2 pkg/authentication/request/headerrequest/
requestheader.go, wrapped by ``x509request.NewDynamicCAVerifier`` in
pkg/authentication/request/x509/x509.go):

- a request without a TLS client certificate is not authenticated this
  way (``req.TLS == nil || len(PeerCertificates) == 0``): its headers are
  ignored and the other credentials (bearer token, session) count;
- the certificate must verify against ``clientCAFile`` for client
  authentication (``ExtKeyUsageClientAuth``) and, when ``allowedNames`` is
  not empty, have one of those common names (``verifySubject``); otherwise
  the headers are ignored too (the API server reports the error and tries
  its other authenticators);
- the user is the first non-empty of ``usernameHeaders`` (``headerValue``;
  none: not authenticated this way), the uid likewise, the groups every
  non-empty value of every ``groupHeaders`` (``allHeaderValues``), the extra
  fields each header starting with one of ``extraHeaderPrefixes``, its key
  the rest of the name lower-cased and %-unescaped (``newExtra``).

The user is then authorised by SubjectAccessReview exactly as a signed-in
caller is (it carries no token: the proxy vouched for it). Outside
Kubernetes, where nothing reviews access, it sees everything, as the holder
of ``ui.auth.tokenFile`` does.

The TLS layer has already verified the chain against the union of
``ui.tls.clientCAFile`` and this CA (:func:`berth.adapters.http.tls.server_ssl_context`);
here the leaf must be issued by this CA itself — Python 3.11's ``ssl``
gives the leaf only, so intermediates between the proxy and the CA are not
supported. The CA file is re-read when it changes (:mod:`berth.adapters.rotation`).
"""

from __future__ import annotations

import datetime
import logging
import urllib.parse
from typing import Any

from aiohttp import web
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from berth import access
from berth.adapters import rotation
from berth.config import ConfigError, UiRequestHeaderConfig

__all__ = ["FIELD", "RequestHeader", "load_cas"]

log = logging.getLogger(__name__)

FIELD = "ui.auth.requestHeader"


def load_cas(path: str, field: str = f"{FIELD}.clientCAFile") -> list[x509.Certificate]:
    """The PEM certificates in ``path`` (ConfigError naming the field when none)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConfigError(f"{field}: cannot read {path}: {e.strerror or e}") from None
    try:
        cas = x509.load_pem_x509_certificates(data)
    except ValueError as e:
        raise ConfigError(f"{field}: not a PEM CA certificate: {e}") from None
    return cas


def _valid_header(field: str, name: str) -> str:
    trimmed = name.strip()  # as trimHeaders
    if not trimmed or any(c in trimmed for c in " \t\r\n:"):
        raise ConfigError(f"{field}: {name!r} is not a header name")
    return trimmed


class RequestHeader:
    """Who an authenticating proxy says the caller is (module docstring)."""

    def __init__(self, cfg: UiRequestHeaderConfig) -> None:
        self.allowed_names = frozenset(cfg.allowed_names)
        self.username_headers = [_valid_header(f"{FIELD}.usernameHeaders", h) for h in cfg.username_headers]
        self.uid_headers = [_valid_header(f"{FIELD}.uidHeaders", h) for h in cfg.uid_headers]
        self.group_headers = [_valid_header(f"{FIELD}.groupHeaders", h) for h in cfg.group_headers]
        self.extra_prefixes = [
            _valid_header(f"{FIELD}.extraHeaderPrefixes", h).lower() for h in cfg.extra_header_prefixes
        ]
        if not self.username_headers:
            raise ConfigError(f"{FIELD}.usernameHeaders: at least one header names the user")
        path = cfg.client_ca_file
        self._cas = rotation.Watched(f"{FIELD}.clientCAFile", [path], lambda: load_cas(path))

    def _proxy_certificate(self, request: web.BaseRequest) -> x509.Certificate | None:
        """The request's client certificate when this CA issued it for client
        authentication, within its validity, with an allowed common name."""
        transport = request.transport
        ssl_object: Any = transport.get_extra_info("ssl_object") if transport is not None else None
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if not der:
            return None
        self._cas.poll()
        leaf = x509.load_der_x509_certificate(der)
        if not any(self._issued_by(leaf, ca) for ca in self._cas.value):
            log.debug("%s: a client certificate not issued by the proxy CA: headers ignored", FIELD)
            return None
        now = datetime.datetime.now(datetime.UTC)
        if not leaf.not_valid_before_utc <= now <= leaf.not_valid_after_utc:
            return None
        try:
            usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        except x509.ExtensionNotFound:
            usages = None  # no restriction (Go's Verify: any usage)
        if usages is not None and ExtendedKeyUsageOID.CLIENT_AUTH not in usages:
            return None
        if self.allowed_names:
            names = leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
            cn = str(names[0].value) if names else ""
            if cn not in self.allowed_names:
                log.info("%s: x509: subject with cn=%s is not in the allowed list: headers ignored", FIELD, cn)
                return None
        return leaf

    @staticmethod
    def _issued_by(leaf: x509.Certificate, ca: x509.Certificate) -> bool:
        try:
            leaf.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            return False
        return True

    def caller(self, request: web.BaseRequest, *, unrestricted: bool) -> access.Caller | None:
        """The user the proxy names, or None: the request was not vouched
        for by the proxy (no or another certificate, or no user header)."""
        if self._proxy_certificate(request) is None:
            return None
        h = request.headers
        user = next((v for name in self.username_headers if (v := h.get(name, ""))), "")
        if not user:
            return None
        uid = next((v for name in self.uid_headers if (v := h.get(name, ""))), "")
        groups = tuple(v for name in self.group_headers for v in h.getall(name, ()) if v)
        extra: dict[str, list[str]] = {}
        for prefix in self.extra_prefixes:
            for name, value in h.items():
                if name.lower().startswith(prefix):
                    key = urllib.parse.unquote(name[len(prefix) :].lower())
                    extra.setdefault(key, []).append(value)
        return access.Caller(
            user=user,
            groups=groups,
            uid=uid,
            extra=tuple(sorted((k, tuple(v)) for k, v in extra.items())),
            unrestricted=unrestricted,
        )
