"""Where Berth is and how to reach it: the address (port 50051 unless
given), TLS, the bearer token, retries and the deadline of each call."""

from __future__ import annotations

import dataclasses
import json
import ssl
from pathlib import Path

import grpc

from berth_client.errors import SettingsError

__all__ = ["DEFAULT_PORT", "DEFAULT_RETRY", "Retry", "Settings", "Tls", "read_token", "target"]

#: Berth's gRPC port (``grpc.port``) when an address names only a host.
DEFAULT_PORT = 50051

_SCHEMES = ("unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:", "vsock:")


def target(server: str) -> str:
    """A gRPC target for ``server``: ``HOST`` -> ``HOST:50051``, ``[::1]``
    and ``::1`` -> ``[::1]:50051``; ``HOST:PORT`` and URIs (``dns:///h:1``,
    ``unix:/run/berth.sock``) as they are."""
    s = server.strip()
    if not s:
        raise SettingsError("server", "empty address")
    if "://" in s or s.startswith(_SCHEMES):
        return s
    if s.startswith("["):  # [IPv6] or [IPv6]:PORT
        host, _, port = s.partition("]")
        if not port:
            return f"{s}:{DEFAULT_PORT}"
        return f"{host}]:{_port(server, port.removeprefix(':'))}" if port.startswith(":") else _bad(server)
    if s.count(":") > 1:  # a bare IPv6 address
        return f"[{s}]:{DEFAULT_PORT}"
    host, colon, port = s.partition(":")
    if not colon:
        return f"{s}:{DEFAULT_PORT}"
    return f"{host}:{_port(server, port)}" if host else _bad(server)


def _port(server: str, text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise SettingsError("server", f"{server!r}: the port must be a number from 1 to 65535")
    return int(text)


def _bad(server: str) -> str:
    raise SettingsError("server", f"{server!r} is not HOST, HOST:PORT or [IPv6]:PORT")


@dataclasses.dataclass(frozen=True, slots=True)
class Tls:
    """TLS to a port with ``grpc.tls``: trust ``ca_file`` (else the system's
    CAs), present ``cert_file``/``key_file`` when the server asks for a
    client certificate (``grpc.tls.clientCAFile``), and expect
    ``server_name`` in the server's certificate instead of the host
    connected to (kubectl's ``--tls-server-name``)."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        """The channel credentials; files that grpc would refuse only in its
        log (and then fail every call) are refused here, in one line."""
        if bool(self.cert_file) != bool(self.key_file):
            raise SettingsError("cert_file", "cert_file and key_file go together: a client certificate needs its key")
        ca = _read("ca_file", self.ca_file) if self.ca_file else None
        cert = _read("cert_file", self.cert_file) if self.cert_file else None
        key = _read("key_file", self.key_file) if self.key_file else None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if ca is not None:
            try:
                ctx.load_verify_locations(cadata=ca.decode("ascii", "replace"))
            except (ssl.SSLError, ValueError) as e:
                reason = getattr(e, "reason", None) or e
                raise SettingsError("ca_file", f"{self.ca_file} is not a PEM CA certificate: {reason}") from None
        if self.cert_file and self.key_file:
            try:
                # A key that needs a passphrase fails instead of prompting on a terminal.
                ctx.load_cert_chain(self.cert_file, self.key_file, password=lambda: b"")
            except (OSError, ssl.SSLError) as e:
                reason = getattr(e, "reason", None) or e
                raise SettingsError("cert_file/key_file", f"not a matching PEM certificate and key: {reason}") from None
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def _read(option: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise SettingsError(option, f"cannot read {path}: {e.strerror or e}") from None


def read_token(path: str) -> str:
    """The bearer token in the file ``path`` (surrounding blanks dropped)."""
    try:
        token = Path(path).read_text().strip()
    except OSError as e:
        raise SettingsError("token_file", f"cannot read {path}: {e.strerror or e}") from None
    if not token:
        raise SettingsError("token_file", f"{path} is empty")
    return token


@dataclasses.dataclass(frozen=True, slots=True)
class Retry:
    """How unary calls are retried when Berth is ``UNAVAILABLE`` (not
    reached, restarting, shutting down): up to ``attempts`` tries in all,
    waiting a random time up to ``initial_backoff`` seconds, growing by
    ``multiplier`` to ``max_backoff`` (gRPC's retry policy, applied by grpc
    itself within the call's deadline). Submit is idempotent per pod (the
    same pod again answers "already submitted"), so it is retried too; a
    Cancel whose answer was lost answers "not found" when retried.

    ``Retry(attempts=1)`` turns retries off. A watch whose stream breaks
    reconnects with the same backoff for up to ``reconnect_seconds``
    (:mod:`berth_client.watch` says what it resumes).
    """

    attempts: int = 4
    initial_backoff: float = 0.2
    max_backoff: float = 5.0
    multiplier: float = 2.0
    reconnect_seconds: float = 60.0

    def service_config(self) -> str:
        if self.attempts <= 1:
            return json.dumps({"methodConfig": [{"name": [{}], "retryPolicy": None}]})
        policy = {
            "maxAttempts": min(self.attempts, 5),  # grpc caps it at 5
            "initialBackoff": f"{self.initial_backoff:.3f}s",
            "maxBackoff": f"{self.max_backoff:.3f}s",
            "backoffMultiplier": self.multiplier,
            "retryableStatusCodes": ["UNAVAILABLE"],
        }
        return json.dumps({"methodConfig": [{"name": [{}], "retryPolicy": policy}]})


DEFAULT_RETRY = Retry()


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """Everything about reaching one Berth: ``server`` (``HOST[:PORT]``,
    see :func:`target`), ``tls`` (None: plaintext), ``token`` (sent as
    ``authorization: Bearer`` on every call; the server asks for it on
    mutating calls when ``grpc.auth.tokenFile`` is set), ``timeout`` (each
    unary call's deadline, seconds) and ``retry``."""

    server: str = "localhost"
    tls: Tls | None = None
    token: str | None = None
    timeout: float = 30.0
    retry: Retry = DEFAULT_RETRY

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()

    def channel(self) -> grpc.aio.Channel:
        """A new grpc.aio channel to the server (on the running event loop)."""
        options: list[tuple[str, object]] = [
            ("grpc.service_config", self.retry.service_config()),
            ("grpc.enable_retries", 1 if self.retry.attempts > 1 else 0),
            # grpc waits 1 s before it connects again after a failed attempt;
            # the retries' own backoff paces a restarting server better.
            ("grpc.initial_reconnect_backoff_ms", int(self.retry.initial_backoff * 1000)),
            ("grpc.max_reconnect_backoff_ms", int(self.retry.max_backoff * 1000)),
            # Berth's default grpc.maxMessageBytes: a ListPods of 100 000 pods.
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
        ]
        address = target(self.server)
        if self.tls is None:
            return grpc.aio.insecure_channel(address, options=options)
        if self.tls.server_name:
            options.append(("grpc.ssl_target_name_override", self.tls.server_name))
        return grpc.aio.secure_channel(address, self.tls.credentials(), options=options)
