"""Every gRPC call passes here: decode, authenticate, map errors to codes.

One server interceptor wraps each unary-request method (unary and
server-streaming) so that

1. the handler receives the raw request bytes and decodes them itself:
   grpc.aio answers UNKNOWN or INTERNAL when its ``request_deserializer``
   raises, but bytes that are not a ``berth.v1`` message are the client's
   mistake, so they become ``INVALID_ARGUMENT "request: cannot decode
   berth.v1.X: ..."``;
2. :class:`security.Authenticator` admits the call (a standby refuses the
   leader's state) and identifies its caller (static token, client
   certificate, or a Kubernetes token the API server vouches for), which
   the servicers read from :data:`berth.access.CALLER`;
3. the error kinds of :mod:`berth.errors` become the status code of the
   same name (:data:`CODES`); a remaining :class:`ValueError` is a bad
   request too (INVALID_ARGUMENT); anything else is a bug: logged once with
   its traceback and answered INTERNAL. Every details string is cut by
   :func:`berth.errors.bounded`: status details travel in a header, and an
   error listing 10 000 node names would not fit.

Server-streaming calls (``WatchDecisions``, grpc's own ``Health.Watch``)
end with ``UNAVAILABLE`` as soon as the server stops
(:meth:`EdgeInterceptor.end_streams`): an idle stream would otherwise hold a
graceful stop for its whole grace period, and the client reconnects to a
replica that serves (with ``replay`` to catch up). Client-streaming methods
(only reflection's) pass through untouched.
Message size limits (``grpc.maxMessageBytes``) are grpc core's, applied
after decompression, before anything here runs.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from berth import access, errors
from berth.adapters.grpc import security
from berth.scheduling.fairness import Fairness

__all__ = ["CODES", "LEVELS", "EdgeInterceptor", "WrappingInterceptor", "caller_of", "level_of", "status_of"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: What a stream the server ends while stopping says.
STOPPING = "the server is shutting down; reconnect"

#: Each client-error kind's gRPC status code (the first match wins).
CODES: tuple[tuple[type[BaseException], grpc.StatusCode], ...] = (
    (errors.InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NotFound, grpc.StatusCode.NOT_FOUND),
    (errors.AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (errors.FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.ResourceExhausted, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.OutOfRange, grpc.StatusCode.OUT_OF_RANGE),
    (errors.DeadlineExceeded, grpc.StatusCode.DEADLINE_EXCEEDED),
    (errors.Unauthenticated, grpc.StatusCode.UNAUTHENTICATED),
    (errors.PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
    (errors.Unavailable, grpc.StatusCode.UNAVAILABLE),
    # Not one of Berth's kinds, but a bad value all the same (older core
    # code, protobuf's own range checks).
    (ValueError, grpc.StatusCode.INVALID_ARGUMENT),
)


def status_of(e: BaseException) -> tuple[grpc.StatusCode, str]:
    """The code and bounded details a failed call answers with."""
    for kind, code in CODES:
        if isinstance(e, kind):
            return code, errors.bounded(str(e))
    return grpc.StatusCode.INTERNAL, errors.bounded(f"internal error: {type(e).__name__}: {e}")


async def _fail(context: grpc.aio.ServicerContext, method: str, e: Exception) -> None:
    code, details = status_of(e)
    if code == grpc.StatusCode.INTERNAL:
        log.error("internal error in %s", method, exc_info=e)
    elif not isinstance(e, errors.BerthError):
        # A plain ValueError: most likely the client's, but keep the trace at hand.
        log.debug("%s: %s treated as a bad request", method, type(e).__name__, exc_info=e)
    await context.abort(code, details)


def _decoder(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any]:
    if deserializer is None:
        return lambda raw: raw
    full_name = getattr(getattr(getattr(deserializer, "__self__", None), "DESCRIPTOR", None), "full_name", "message")
    protobuf_prefix = f"Error parsing message with type '{full_name}': "

    def decode(raw: bytes) -> Any:
        try:
            return deserializer(raw)
        except Exception as e:  # whatever the bytes did to the parser, they are not a valid request
            detail = str(e).removeprefix(protobuf_prefix) or type(e).__name__
            raise errors.InvalidArgument(f"request: cannot decode {full_name}: {detail}") from None

    return decode


def _as_is_if_encoded(serializer: Callable[[Any], bytes] | None) -> Callable[[Any], bytes] | None:
    """A stream's serializer that writes bytes as they are: a message
    encoded once for every stream (``WatchDecisions``) is not encoded again."""
    if serializer is None:
        return None
    encode = serializer

    def serialize(message: Any) -> bytes:
        return message if type(message) is bytes else encode(message)

    return serialize


async def _until(stopping: asyncio.Event, items: AsyncGenerator[T, None]) -> AsyncIterator[T]:
    """``items`` until ``stopping`` is set, then :class:`_Stopping`;
    whichever comes first, even while ``items`` waits for its next one."""
    stop = asyncio.ensure_future(stopping.wait())
    nxt: asyncio.Future[T] | None = None
    try:
        while True:
            nxt = asyncio.ensure_future(anext(items))
            await asyncio.wait((nxt, stop), return_when=asyncio.FIRST_COMPLETED)
            if not nxt.done():
                break
            try:
                item = nxt.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        stop.cancel()
        if nxt is not None and not nxt.done():
            nxt.cancel()  # raised where the stream waits: its own finally runs
            await asyncio.wait((nxt,))
        if nxt is not None and not nxt.cancelled():
            # Its error (a refusal raised as the caller went away) is this
            # call's, already answered or moot: read here, so asyncio does
            # not log it as "Task exception was never retrieved".
            nxt.exception()
        await items.aclose()
    raise _Stopping(STOPPING)


async def _enter(auth: security.Authenticator, method: str, context: grpc.aio.ServicerContext) -> None:
    """Before a call runs: this replica may answer it, and its caller is
    known (:data:`berth.access.CALLER`, read by the servicers that filter
    what they answer by the caller's RBAC)."""
    auth.admit(method)
    access.CALLER.set(await auth.identify(method, context))


class _Stopping(Exception):
    """A stream ended because the server is stopping."""


class WrappingInterceptor(grpc.aio.ServerInterceptor):
    """Wraps the handler of each method it :meth:`wants` once, and keeps the
    wrapped one (grpc looks handlers up per call; unknown methods get None
    and are not kept)."""

    def __init__(self) -> None:
        self._wrapped: dict[str, grpc.RpcMethodHandler] = {}

    def wants(self, method: str, handler: grpc.RpcMethodHandler) -> bool:
        return not handler.request_streaming

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        raise NotImplementedError

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method: str = handler_call_details.method
        wrapped = self._wrapped.get(method)
        if wrapped is not None:
            return wrapped
        handler = await continuation(handler_call_details)
        if handler is None or not self.wants(method, handler):
            return handler
        wrapped = self._wrapped[method] = self._wrap(method, handler)
        return wrapped


#: The fairness level (berth/scheduling/fairness.py) of each method that has
#: one; the others (the extender verbs Filter, Prioritize, Preempt, Bind,
#: streams, health) are never queued.
LEVELS: dict[str, str] = {
    **{
        f"/berth.v1.Scheduler/{m}": "reads"
        for m in ("Explain", "Why", "WhatIf", "ListPods", "ListPodGroups", "ListQueues", "GetQueue", "ListProfiles")
    },
    "/berth.v1.Cluster/ListNodes": "reads",
    "/berth.v1.Scheduler/Submit": "feeds",
    "/berth.v1.Scheduler/Cancel": "feeds",
}


def level_of(method: str) -> str | None:
    """``reads``, ``feeds`` (every Cluster Upsert and Delete), or None (exempt)."""
    level = LEVELS.get(method)
    if level is None and method.startswith(("/berth.v1.Cluster/Upsert", "/berth.v1.Cluster/Delete")):
        return "feeds"
    return level


def caller_of(context: grpc.aio.ServicerContext) -> str:
    """Who is calling: the authenticated user, else the client's address
    (without its port: one client, many connections)."""
    return access.flow_of(access.CALLER.get(), str(context.peer() or "unknown").rsplit(":", 1)[0])


class EdgeInterceptor(WrappingInterceptor):
    """Wraps each unary-request handler in decode -> authenticate -> (a seat
    of its fairness level) -> run -> map."""

    def __init__(self, authenticator: security.Authenticator, fairness: Fairness | None = None) -> None:
        super().__init__()
        self.auth = authenticator
        self.fairness = fairness
        self._stopping = asyncio.Event()

    def end_streams(self) -> None:
        """End every server-streaming call, now and from now on, with
        ``UNAVAILABLE`` (the server is stopping)."""
        self._stopping.set()

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        decode = _decoder(handler.request_deserializer)
        auth = self.auth
        if handler.response_streaming:
            return grpc.unary_stream_rpc_method_handler(
                self._streaming(method, handler.unary_stream, decode),
                request_deserializer=None,
                response_serializer=_as_is_if_encoded(handler.response_serializer),
            )
        behavior = handler.unary_unary
        level = level_of(method)
        fairness = self.fairness if level is not None else None

        async def unary(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
            try:
                await _enter(auth, method, context)
                if fairness is None or level is None:
                    return await behavior(decode(raw), context)
                async with fairness.seat(level, caller_of(context)):
                    return await behavior(decode(raw), context)
            except grpc.aio.AbortError:
                raise
            except Exception as e:
                await _fail(context, method, e)

        return grpc.unary_unary_rpc_method_handler(
            unary, request_deserializer=None, response_serializer=handler.response_serializer
        )

    def _streaming(self, method: str, behavior: Any, decode: Callable[[bytes], Any]) -> Any:
        auth = self.auth
        stopping = self._stopping
        if inspect.isasyncgenfunction(behavior):

            async def generate(raw: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                try:
                    await _enter(auth, method, context)
                    async for item in _until(stopping, behavior(decode(raw), context)):
                        yield item
                except grpc.aio.AbortError:
                    raise
                except _Stopping as e:
                    await context.abort(grpc.StatusCode.UNAVAILABLE, str(e))
                except Exception as e:
                    await _fail(context, method, e)

            return generate

        # A coroutine that writes with context.write() (grpc's own Health.Watch).
        async def write(raw: bytes, context: grpc.aio.ServicerContext) -> None:
            try:
                await _enter(auth, method, context)
                writing = asyncio.ensure_future(behavior(decode(raw), context))
                stop = asyncio.ensure_future(stopping.wait())
                try:
                    await asyncio.wait((writing, stop), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    stop.cancel()
                    if not writing.done():
                        writing.cancel()
                        await asyncio.wait((writing,))
                if not writing.cancelled():
                    writing.result()  # its error, if any
                    return
            except grpc.aio.AbortError:
                raise
            except Exception as e:
                await _fail(context, method, e)
                return
            await context.abort(grpc.StatusCode.UNAVAILABLE, STOPPING)

        return write
