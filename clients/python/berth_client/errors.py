"""What a call can fail with: one exception class per gRPC status Berth
answers, each carrying the server's one-line message.

Berth answers a client's mistake with ``INVALID_ARGUMENT``, ``NOT_FOUND``,
``ALREADY_EXISTS``, ``FAILED_PRECONDITION``, ``RESOURCE_EXHAUSTED``,
``DEADLINE_EXCEEDED``, ``UNAUTHENTICATED`` or ``PERMISSION_DENIED``;
``UNAVAILABLE`` is the network or a server shutting down (retried, see
:class:`berth_client.Retry`); ``INTERNAL`` is a bug in Berth. A message
starts with the field at fault when there is one
(``pods[2].spec.containers[0].resources.requests[cpu]: ...``).
"""

from __future__ import annotations

import grpc

__all__ = [
    "AlreadyExists",
    "BerthError",
    "Cancelled",
    "DeadlineExceeded",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "NotFound",
    "OutOfRange",
    "PermissionDenied",
    "ResourceExhausted",
    "SettingsError",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "from_rpc_error",
]


class BerthError(Exception):
    """A call Berth (or the way to it) refused; ``code`` is the gRPC status."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, details: str, *, code: grpc.StatusCode | None = None) -> None:
        super().__init__(details)
        self.details = details
        if code is not None:
            self.code = code


class InvalidArgument(BerthError, ValueError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(BerthError, LookupError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(BerthError):
    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(BerthError):
    """The call cannot be served here: a replica without the scheduling
    loop, or Submit to a Berth that schedules a Kubernetes cluster."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class ResourceExhausted(BerthError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class OutOfRange(BerthError):
    """A decision serial the server no longer keeps (compacted), or one of
    another epoch: list again, then watch from the newest serial seen."""

    code = grpc.StatusCode.OUT_OF_RANGE


class DeadlineExceeded(BerthError, TimeoutError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Unauthenticated(BerthError):
    code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(BerthError):
    code = grpc.StatusCode.PERMISSION_DENIED


class Cancelled(BerthError):
    code = grpc.StatusCode.CANCELLED


class Unimplemented(BerthError):
    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(BerthError):
    """A bug in Berth (it logged the traceback)."""

    code = grpc.StatusCode.INTERNAL


class Unavailable(BerthError, ConnectionError):
    """Berth could not be reached, or went away (after the retries).

    ``cause`` says why, when the client can tell: ``"untrusted"`` (the
    server's certificate is signed by no CA this client trusts),
    ``"hostname"`` (the certificate does not name the host),
    ``"not-tls"`` (TLS to a plaintext port), ``"closed"`` (the server closed
    the connection: plaintext to a TLS port, or a client certificate it
    refuses), ``""`` otherwise.
    """

    code = grpc.StatusCode.UNAVAILABLE

    def __init__(self, details: str, *, server: str = "", cause: str = "") -> None:
        super().__init__(details)
        self.server = server
        self.cause = cause


class SettingsError(ValueError):
    """A connection setting the client cannot use (an unreadable CA file, a
    certificate without its key); ``option`` names the setting."""

    def __init__(self, option: str, detail: str) -> None:
        super().__init__(detail if detail.startswith(option) else f"{option}: {detail}")
        self.option = option
        self.detail = detail


_BY_CODE: dict[grpc.StatusCode, type[BerthError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        AlreadyExists,
        FailedPrecondition,
        ResourceExhausted,
        OutOfRange,
        DeadlineExceeded,
        Unauthenticated,
        PermissionDenied,
        Cancelled,
        Unimplemented,
        Internal,
    )
}

#: grpc core's words for a failed connection -> the cause, most specific first.
_CAUSES = (
    ("CERTIFICATE_VERIFY_FAILED", "untrusted", "its certificate is not signed by a CA this client trusts"),
    ("Hostname Verification", "hostname", "its certificate does not name the host connected to"),
    ("Peer name", "hostname", "its certificate does not name the host connected to"),
    ("WRONG_VERSION_NUMBER", "not-tls", "the port does not speak TLS"),
)


def unavailable(details: str, server: str) -> Unavailable:
    """A failed connection in one line, with its cause when grpc's message
    (which names OpenSSL's error deep inside) shows it."""
    for needle, cause, what in _CAUSES:
        if needle in details:
            return Unavailable(f"TLS handshake with {server} failed: {what}", server=server, cause=cause)
    if "Socket closed" in details:
        return Unavailable(f"cannot reach Berth at {server}: the connection was closed", server=server, cause="closed")
    return Unavailable(f"cannot reach Berth at {server}: {details}", server=server)


def from_rpc_error(e: grpc.RpcError, server: str) -> BerthError:
    """The exception for a failed call."""
    code: grpc.StatusCode = e.code()
    details: str = e.details() or ""
    if code == grpc.StatusCode.UNAVAILABLE:
        return unavailable(details, server)
    return _BY_CODE.get(code, BerthError)(details, code=code)
