"""The HTTP port's TLS: HTTPS, and mTLS when a client CA is configured."""

from __future__ import annotations

import ssl
from collections.abc import Sequence

from berth.adapters import rotation
from berth.config import ConfigError, TLSConfig

__all__ = ["reloading_server_ssl_context", "server_ssl_context"]


def _readable(field: str, path: str) -> str:
    """``path``, once it opens: ssl reports a missing file without its name
    (``cannot read None``), so look first and name the field and the file."""
    try:
        with open(path, "rb"):
            return path
    except OSError as e:
        raise ConfigError(f"{field}: cannot read {path}: {e.strerror or e}") from None


def server_ssl_context(
    tls: TLSConfig | None,
    *,
    field: str = "http.tls",
    client_cert_optional: bool = False,
    extra_client_cas: Sequence[tuple[str, str]] = (),
) -> ssl.SSLContext | None:
    """A server context for ``tls`` (None: plain HTTP).

    With ``clientCAFile`` clients must present a certificate that CA signed
    (kube-scheduler's extender config ``tlsConfig.certFile/keyFile``); with
    ``client_cert_optional`` a client may also come without one (and then
    authenticate otherwise: a bearer token), but a certificate it presents
    must still verify (Go's ``tls.VerifyClientCertIfGiven``, which the API
    server uses beside its token authenticators).
    ``extra_client_cas`` (field, path) are CAs whose certificates a client
    may present besides (an authenticating proxy's, ``ui.auth.requestHeader``):
    with them alone a certificate is optional, as kube-apiserver's
    requestheader CA joins its client CA pool.
    Unreadable or mismatched files raise ConfigError, one line naming the
    field and the file (``http.tls.certFile: cannot read /x.pem: No such
    file or directory``).
    """
    if tls is None:
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    cert = _readable(f"{field}.certFile", tls.cert_file)
    key = _readable(f"{field}.keyFile", tls.key_file)
    try:
        # A key that needs a passphrase fails instead of prompting on a terminal.
        ctx.load_cert_chain(cert, key, password=lambda: b"")
    except (OSError, ssl.SSLError) as e:
        reason = getattr(e, "reason", None) or e
        raise ConfigError(f"{field}.certFile/keyFile: not a matching PEM certificate and key: {reason}") from None
    cas = [(f"{field}.clientCAFile", tls.client_ca_file)] if tls.client_ca_file else []
    for ca_field, path in [*cas, *extra_client_cas]:
        ca = _readable(ca_field, path)
        try:
            ctx.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as e:
            reason = getattr(e, "reason", None) or e
            raise ConfigError(f"{ca_field}: not a PEM CA certificate: {reason}") from None
    if tls.client_ca_file:
        ctx.verify_mode = ssl.CERT_OPTIONAL if client_cert_optional else ssl.CERT_REQUIRED
    elif extra_client_cas:
        ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def reloading_server_ssl_context(
    tls: TLSConfig | None,
    *,
    field: str = "http.tls",
    client_cert_optional: bool = False,
    extra_client_cas: Sequence[tuple[str, str]] = (),
) -> ssl.SSLContext | None:
    """As :func:`server_ssl_context`, re-read when the certificate, key or
    client CA files change (cert-manager renewals): each handshake polls
    the files (a stat at most once a second; a changed set is loaded in a
    worker thread, :mod:`berth.adapters.rotation`) and is served from the
    newest context that loaded — ``sni_callback`` runs for every ClientHello,
    with or without SNI, and switches the connection's context."""
    if tls is None:
        return None

    def build() -> ssl.SSLContext:
        ctx = server_ssl_context(
            tls, field=field, client_cert_optional=client_cert_optional, extra_client_cas=extra_client_cas
        )
        assert ctx is not None
        return ctx

    paths = [tls.cert_file, tls.key_file, *([tls.client_ca_file] if tls.client_ca_file else [])]
    paths += [path for _, path in extra_client_cas]
    watched = rotation.Watched(field, paths, build)
    outer = build()

    def pick(conn: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, ctx: ssl.SSLContext) -> None:
        watched.poll()
        if watched.value is not ctx:
            conn.context = watched.value

    outer.sni_callback = pick
    return outer
