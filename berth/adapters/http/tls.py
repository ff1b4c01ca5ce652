"""The HTTP port's TLS: HTTPS, and mTLS when a client CA is configured."""

from __future__ import annotations

import ssl

from berth.config import ConfigError, TLSConfig

__all__ = ["server_ssl_context"]


def _readable(field: str, path: str) -> str:
    """``path``, once it opens: ssl reports a missing file without its name
    (``cannot read None``), so look first and name the field and the file."""
    try:
        with open(path, "rb"):
            return path
    except OSError as e:
        raise ConfigError(f"{field}: cannot read {path}: {e.strerror or e}") from None


def server_ssl_context(tls: TLSConfig | None, *, field: str = "http.tls") -> ssl.SSLContext | None:
    """A server context for ``tls`` (None: plain HTTP).

    With ``clientCAFile`` clients must present a certificate that CA signed
    (kube-scheduler's extender config ``tlsConfig.certFile/keyFile``).
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
    if tls.client_ca_file:
        ca = _readable(f"{field}.clientCAFile", tls.client_ca_file)
        try:
            ctx.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as e:
            reason = getattr(e, "reason", None) or e
            raise ConfigError(f"{field}.clientCAFile: not a PEM CA certificate: {reason}") from None
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx
