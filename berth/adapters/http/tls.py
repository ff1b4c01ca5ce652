"""The HTTP port's TLS: HTTPS, and mTLS when a client CA is configured."""

from __future__ import annotations

import ssl

from berth.config import TLSConfig

__all__ = ["server_ssl_context"]


def server_ssl_context(tls: TLSConfig | None, *, field: str = "http.tls") -> ssl.SSLContext | None:
    """A server context for ``tls`` (None: plain HTTP).

    With ``clientCAFile`` clients must present a certificate that CA signed
    (kube-scheduler's extender config ``tlsConfig.certFile/keyFile``).
    Unreadable or mismatched files raise ValueError naming the field.
    """
    if tls is None:
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
    except FileNotFoundError as e:
        raise ValueError(f"{field}: cannot read {e.filename}: {e.strerror}") from None
    except ssl.SSLError as e:
        raise ValueError(f"{field}.certFile/keyFile: not a matching PEM certificate and key: {e.reason}") from None
    if tls.client_ca_file:
        try:
            ctx.load_verify_locations(cafile=tls.client_ca_file)
        except FileNotFoundError as e:
            raise ValueError(f"{field}.clientCAFile: cannot read {e.filename}: {e.strerror}") from None
        except ssl.SSLError as e:
            raise ValueError(f"{field}.clientCAFile: not a PEM CA certificate: {e.reason}") from None
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx
