"""What every ``berth`` client command shares: its error, its connection
options (``--server``, TLS, the bearer token) and its gRPC calls."""

from __future__ import annotations

import argparse
import dataclasses
import os
import ssl
from pathlib import Path
from typing import Any, NamedTuple

import grpc

__all__ = [
    "TOKEN_ENV",
    "CliError",
    "Tls",
    "add_connection_options",
    "call",
    "channel",
    "connect",
    "rpc_error",
    "tls_of",
]

#: Where client commands find the bearer token when --token-file is not given.
TOKEN_ENV = "BERTH_TOKEN"

DEFAULT_SERVER = "localhost:50051"


class CliError(Exception):
    """Printed as ``berth: <message>``; exit status 1."""


@dataclasses.dataclass(frozen=True, slots=True)
class Tls:
    """How to reach a TLS-enabled gRPC port (the server's ``grpc.tls``).

    The flags are grpcurl's and kubectl's ideas under Berth's names: trust
    ``ca_file`` (else the system's CAs), present ``cert_file``/``key_file``
    when the server asks for a client certificate (``grpc.tls.clientCAFile``),
    and check the server's certificate for ``server_name`` instead of the
    host in ``--server`` (kubectl's ``--tls-server-name``).
    """

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None


def add_connection_options(p: argparse.ArgumentParser, *, server_default: str | None = DEFAULT_SERVER) -> None:
    """``--server``, ``--token-file`` and the TLS flags, for every client command."""
    p.add_argument(
        "--server",
        default=server_default,
        help=f"Berth's gRPC address (HOST:PORT; default {server_default})"
        if server_default
        else "Berth's gRPC address",
    )
    p.add_argument(
        "--token-file",
        help="a file holding the bearer token for Submit/Cancel (the server's grpc.auth.tokenFile; "
        f"default: ${TOKEN_ENV})",
    )
    g = p.add_argument_group("TLS (a gRPC port with grpc.tls)")
    g.add_argument("--tls", action="store_true", help="connect with TLS, trusting the system's CAs")
    g.add_argument("--ca-file", help="trust this PEM CA bundle for the server's certificate (implies --tls)")
    g.add_argument("--cert-file", help="client certificate (PEM) for a server with grpc.tls.clientCAFile")
    g.add_argument("--key-file", help="the client certificate's private key (PEM, unencrypted)")
    g.add_argument("--server-name", help="the name to expect in the server's certificate (default: HOST)")


def tls_of(args: argparse.Namespace) -> Tls | None:
    """The TLS settings the flags ask for; None for a plaintext connection."""
    ca, cert, key, name = (getattr(args, a, None) for a in ("ca_file", "cert_file", "key_file", "server_name"))
    if not (getattr(args, "tls", False) or ca or cert or key or name):
        return None
    if bool(cert) != bool(key):
        raise CliError("--cert-file and --key-file go together: a client certificate needs its key")
    return Tls(ca_file=ca, cert_file=cert, key_file=key, server_name=name)


def connect(args: argparse.Namespace) -> grpc.Channel:
    """The channel a client command's flags describe (``--server``, TLS, token)."""
    return channel(args.server, getattr(args, "token_file", None), tls=tls_of(args))


def _token(token_file: str | None) -> str | None:
    """The bearer token for mutating RPCs: --token-file, else $BERTH_TOKEN."""
    if token_file is not None:
        try:
            token = Path(token_file).read_text().strip()
        except OSError as e:
            raise CliError(f"--token-file: cannot read {token_file}: {e.strerror or e}") from None
        if not token:
            raise CliError(f"--token-file: {token_file} is empty")
        return token
    return os.environ.get(TOKEN_ENV, "").strip() or None


def _read(flag: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise CliError(f"{flag}: cannot read {path}: {e.strerror or e}") from None


def _credentials(tls: Tls) -> grpc.ChannelCredentials:
    """grpc core only logs why it refuses PEM material and then fails every
    call; OpenSSL through :mod:`ssl` says it first, in one line (as the
    server's ``security._check_pem`` does)."""
    ca = _read("--ca-file", tls.ca_file) if tls.ca_file else None
    cert = _read("--cert-file", tls.cert_file) if tls.cert_file else None
    key = _read("--key-file", tls.key_file) if tls.key_file else None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca is not None:
        try:
            ctx.load_verify_locations(cadata=ca.decode("ascii", "replace"))
        except (ssl.SSLError, ValueError) as e:
            reason = getattr(e, "reason", None) or e
            raise CliError(f"--ca-file: {tls.ca_file} is not a PEM CA certificate: {reason}") from None
    if tls.cert_file and tls.key_file:
        try:
            # A key that needs a passphrase fails instead of prompting on a terminal.
            ctx.load_cert_chain(tls.cert_file, tls.key_file, password=lambda: b"")
        except (OSError, ssl.SSLError) as e:
            reason = getattr(e, "reason", None) or e
            raise CliError(f"--cert-file/--key-file: not a matching PEM certificate and key: {reason}") from None
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


class _CallDetails(
    NamedTuple(
        "_CallDetails",
        [
            ("method", str),
            ("timeout", Any),
            ("metadata", Any),
            ("credentials", Any),
            ("wait_for_ready", Any),
            ("compression", Any),
        ],
    ),
    grpc.ClientCallDetails,  # type: ignore[misc]
):
    """Changed call details, built as grpc's own interceptor examples do."""


class _Bearer(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):  # type: ignore[misc]
    """Adds ``authorization: Bearer <token>`` to every call (the server's
    ``grpc.auth.tokenFile``)."""

    def __init__(self, token: str) -> None:
        self.metadata = ("authorization", f"Bearer {token}")

    def _with_token(self, d: Any) -> _CallDetails:
        metadata = [*(d.metadata or ()), self.metadata]
        return _CallDetails(d.method, d.timeout, metadata, d.credentials, d.wait_for_ready, d.compression)

    def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return continuation(self._with_token(client_call_details), request)

    def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return continuation(self._with_token(client_call_details), request)


def channel(server: str, token_file: str | None = None, *, tls: Tls | None = None) -> grpc.Channel:
    """A channel to ``server`` (over TLS when ``tls`` is given) whose calls
    carry the bearer token, if any."""
    token = _token(token_file)
    if tls is None:
        ch = grpc.insecure_channel(server)
    else:
        options = [("grpc.ssl_target_name_override", tls.server_name)] if tls.server_name else []
        ch = grpc.secure_channel(server, _credentials(tls), options=options)
    return ch if token is None else grpc.intercept_channel(ch, _Bearer(token))


def _unavailable(details: str, server: str) -> str:
    """One line for a connection that failed, with what to change when the
    cause is TLS (grpc's own message names OpenSSL's error deep inside)."""
    if "CERTIFICATE_VERIFY_FAILED" in details:
        return (
            f"TLS handshake with {server} failed: its certificate is not signed by a CA this client trusts "
            "(give the CA that signed it with --ca-file)"
        )
    if "Hostname Verification" in details or "Peer name" in details:
        return (
            f"TLS handshake with {server} failed: its certificate does not name the host connected to "
            "(connect by a name the certificate holds, or set --server-name)"
        )
    if "WRONG_VERSION_NUMBER" in details:
        return f"TLS handshake with {server} failed: the port does not speak TLS (leave out --tls and --ca-file)"
    if "Socket closed" in details:
        # What a TLS port does to a plaintext client, and to one whose client
        # certificate it does not accept: the client sees no more than this.
        return (
            f"cannot reach Berth at {server}: the connection was closed (a TLS port needs --tls/--ca-file, "
            "and with grpc.tls.clientCAFile a client certificate it trusts: --cert-file/--key-file)"
        )
    return f"cannot reach Berth at {server}: {details}"


def call(fn: Any, request: Any, server: str) -> Any:
    """One unary call with a deadline; gRPC failures become a CliError."""
    try:
        return fn(request, timeout=30)
    except grpc.RpcError as e:
        raise CliError(rpc_error(e, server)) from None


def rpc_error(e: grpc.RpcError, server: str) -> str:
    """A failed call as the one line ``berth:`` prints."""
    code = e.code()
    if code == grpc.StatusCode.UNAVAILABLE:
        return _unavailable(e.details() or "", server)
    return f"{code.name.lower()}: {e.details()}"


def print_table(table: list[list[str]]) -> None:
    """Rows under a header, columns padded to the widest cell plus three
    spaces (kubectl's tabwriter), trailing blanks trimmed."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
