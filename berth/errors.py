"""The error kinds every layer raises for a client's mistake, one per answer.

Each edge maps them once: gRPC to the status code of the same name
(``INVALID_ARGUMENT``, ``NOT_FOUND``, ``ALREADY_EXISTS``,
``FAILED_PRECONDITION``, ``RESOURCE_EXHAUSTED``, ``DEADLINE_EXCEEDED``,
``UNAUTHENTICATED``, ``PERMISSION_DENIED``), HTTP to
400/404/409/412/413/504/401/403 with
``{"Error": message}``. Anything else escaping a handler is a bug: the edge
logs it once with its traceback and answers 500/INTERNAL.

The classes derive from :class:`ValueError` (except the auth ones) so code
that already catches ``ValueError`` for a bad request keeps working. The
message starts with the field path when there is one
(``pods[2].spec.containers[0].resources.requests[cpu]: ...``), as the API
server's field errors do (``k8s.io/apimachinery/pkg/util/validation/field``).

This module imports nothing from Berth, so every layer may raise these.
"""

from __future__ import annotations

__all__ = [
    "MAX_MESSAGE_CHARS",
    "AlreadyExists",
    "BerthError",
    "DeadlineExceeded",
    "FailedPrecondition",
    "InvalidArgument",
    "NotFound",
    "OutOfRange",
    "PermissionDenied",
    "ResourceExhausted",
    "Unauthenticated",
    "Unavailable",
    "bounded",
]

#: Longest error message an edge sends back (gRPC's status details travel
#: in metadata, whose default limit is 8 KiB; we stay well under it).
MAX_MESSAGE_CHARS = 2048


def bounded(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``message`` cut to ``limit`` characters, saying how much was left out."""
    if len(message) <= limit:
        return message
    cut = message[: limit - 40]
    return f"{cut}... ({len(message) - len(cut)} more characters)"


class BerthError(Exception):
    """Base of the client-error kinds; ``str()`` is the message."""


class InvalidArgument(BerthError, ValueError):
    """The request itself is malformed or names an impossible value (400 / INVALID_ARGUMENT)."""


class NotFound(BerthError, ValueError):
    """The request names an object Berth does not know (404 / NOT_FOUND)."""


class AlreadyExists(BerthError, ValueError):
    """A name or uid collides with another object's (409 / ALREADY_EXISTS)."""


class FailedPrecondition(BerthError, ValueError):
    """Valid, but not in this state (e.g. no scheduling loop here) (412 / FAILED_PRECONDITION)."""


class ResourceExhausted(BerthError, ValueError):
    """Too big: a body, a message, a batch (413 / RESOURCE_EXHAUSTED)."""


class OutOfRange(BerthError, ValueError):
    """A position no longer (or never) kept: a decision serial compacted
    away (410 Gone / OUT_OF_RANGE, as a watch from a too old
    resourceVersion). ``oldest`` is the oldest position kept."""

    def __init__(self, message: str, *, oldest: int = 0) -> None:
        super().__init__(message)
        self.oldest = oldest


class DeadlineExceeded(BerthError):
    """The caller's deadline passed before the answer was ready; the work
    stopped there (504 / DEADLINE_EXCEEDED)."""


class Unauthenticated(BerthError):
    """No or bad credentials for a mutating call (401 / UNAUTHENTICATED)."""


class PermissionDenied(BerthError):
    """Authenticated, but the call is refused here (403 / PERMISSION_DENIED)."""


class Unavailable(BerthError):
    """Not served here now; another replica or a retry may serve it: a
    standby asked for the leader's state, the API server unreachable for a
    review (503 / UNAVAILABLE)."""
