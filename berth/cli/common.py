"""What every ``berth`` client command shares: its error and its gRPC calls."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

import grpc

__all__ = ["TOKEN_ENV", "CliError", "call", "channel"]

#: Where client commands find the bearer token when --token-file is not given.
TOKEN_ENV = "BERTH_TOKEN"


class CliError(Exception):
    """Printed as ``berth: <message>``; exit status 1."""


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


def channel(server: str, token_file: str | None = None) -> grpc.Channel:
    """A channel to ``server`` whose calls carry the bearer token, if any."""
    ch = grpc.insecure_channel(server)
    token = _token(token_file)
    return ch if token is None else grpc.intercept_channel(ch, _Bearer(token))


def call(fn: Any, request: Any, server: str) -> Any:
    """One unary call with a deadline; gRPC failures become a CliError."""
    try:
        return fn(request, timeout=30)
    except grpc.RpcError as e:
        code = e.code()
        if code == grpc.StatusCode.UNAVAILABLE:
            raise CliError(f"cannot reach Berth at {server}: {e.details()}") from None
        raise CliError(f"{code.name.lower()}: {e.details()}") from None
