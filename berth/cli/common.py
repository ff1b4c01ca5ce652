"""What every ``berth`` client command shares: its error and its gRPC calls."""

from __future__ import annotations

from typing import Any

import grpc

__all__ = ["CliError", "call", "channel"]


class CliError(Exception):
    """Printed as ``berth: <message>``; exit status 1."""


def channel(server: str) -> grpc.Channel:
    return grpc.insecure_channel(server)


def call(fn: Any, request: Any, server: str) -> Any:
    """One unary call with a deadline; gRPC failures become a CliError."""
    try:
        return fn(request, timeout=30)
    except grpc.RpcError as e:
        code = e.code()
        if code == grpc.StatusCode.UNAVAILABLE:
            raise CliError(f"cannot reach Berth at {server}: {e.details()}") from None
        raise CliError(f"{code.name.lower()}: {e.details()}") from None
