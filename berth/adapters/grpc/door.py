"""The gRPC door on a loop of its own: grpc.aio takes calls there, Berth
answers them on its own loop.

Why: grpc.aio's server takes one new call at a time — ``_server_main_loop``
in grpc's ``src/python/grpcio/grpc/_cython/_cygrpc/aio/server.pyx.pxi``
(1.85) awaits each ``grpc_server_request_call`` before it asks for the next,
two or three turns of its loop per call. On Berth's loop, which the extender
and the scheduling loop keep busy, that was about 8 calls a second: of 1000
``WatchDecisions`` asked for at once beside the soak's extender load, grpc
core itself cancelled ~730 after ``grpc.server_max_unrequested_time_in_server``
(30 s) because the server had not taken them yet. On a loop that does nothing
else the same burst is taken in a few seconds, whatever Berth's loop is doing.

How:

- :class:`DoorThread` runs an event loop in a daemon thread; the server is
  built, started and stopped there (:class:`~berth.adapters.grpc.server.GrpcServer`).
- :class:`LoopBridge`, the outermost interceptor, wraps every unary-request
  handler (Berth's own interceptors included) so that it runs as *one task on
  Berth's loop*: the call's context variables (the caller), its fairness seat
  and its stream subscription live where the rest of Berth does, and no
  Berth object is touched from the door's thread.
- The handler sees a :class:`_Context`, which never touches grpc's call
  object from Berth's thread: what a handler reads of the call (peer,
  metadata, credentials, deadline) is copied on the door's loop when the call
  starts — grpc frees a finished call's C object on its own thread, and a
  read of it from Berth's (a caller that cancelled while its TokenReview was
  pending, a server stopping with calls in flight) crashed the process with
  a segmentation fault; setting its status is scheduled on the door's loop;
  ``write`` is run there; ``abort`` is raised as :class:`_Aborted` and turned
  into grpc's own abort on the door's loop (grpc asserts that the
  ``AbortError`` a handler ends with is the one its ``abort`` raised).
- A caller going away, a deadline passing or the server's grace ending
  cancels the call's task on the door's loop, which cancels its task on
  Berth's loop (``asyncio.run_coroutine_threadsafe`` chains cancellation).
- A server-streaming handler runs as one pump task on Berth's loop that hands
  each message over a one-slot queue on the door's loop: the pump waits until
  grpc has taken the previous one, so a slow reader still holds back its own
  stream and nothing else (the stream's bounded backlog stays where it was).
- Client-streaming handlers (only reflection's: descriptor look-ups, no
  Berth state) stay on the door's loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, TypeVar

import grpc

from berth.adapters.grpc.edge import WrappingInterceptor

__all__ = ["DoorThread", "LoopBridge"]

T = TypeVar("T")


class DoorThread:
    """An event loop in a daemon thread of its own, for grpc.aio's server."""

    def __init__(self, name: str = "berth-grpc") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.run_until_complete(self._cancel_the_rest())
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    async def _cancel_the_rest(self) -> None:
        """End what is left on the loop: first let it end by itself — grpc's
        task per call ends once grpc core reports the call closed, a moment
        after the server's stop, and cancelling it makes grpc log a traceback
        (``Exception not handled by _handle_exceptions in servicer method``)
        — then cancel what still runs."""
        rest = [t for t in asyncio.all_tasks(self.loop) if t is not asyncio.current_task()]
        if rest:
            await asyncio.wait(rest, timeout=_SETTLE_SECONDS)
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the door's loop and wait for it, blocking this thread
        (construction: building the server and binding its port)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the door's loop; await it from another loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    @property
    def closed(self) -> bool:
        return self.loop.is_closed() or not self._thread.is_alive()

    def close(self) -> None:
        """Stop the loop (its remaining tasks are cancelled) and wait for the
        thread: a moment, the server having stopped already."""
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join()

    async def aclose(self) -> None:
        """:meth:`close` without blocking the calling loop."""
        await asyncio.to_thread(self.close)


class _Aborted(grpc.aio.AbortError):
    """``context.abort`` called on Berth's loop; the bridge aborts the call with
    these on the door's loop."""

    def __init__(self, code: grpc.StatusCode, details: str, trailing_metadata: Any) -> None:
        super().__init__(details)
        self.code = code
        self.details = details
        self.trailing_metadata = trailing_metadata


class _Context:
    """The servicer context a bridged handler sees on Berth's loop, made on
    the door's loop when the call starts; ``time_remaining`` counts the
    server's request timeout too."""

    #: Setters of the call's status, run on the door's loop in call order
    #: (before the answer, which crosses after them).
    _SETTERS = frozenset(
        {"set_code", "set_details", "set_trailing_metadata", "set_compression", "disable_next_message_compression"}
    )

    def __init__(
        self, real: grpc.aio.ServicerContext, door: asyncio.AbstractEventLoop, ends: float | None = None
    ) -> None:
        self._real = real
        self._door = door
        self._ends = ends  # time.monotonic() when the server's request timeout passes
        theirs = real.time_remaining()
        self._their_ends = None if theirs is None else time.monotonic() + theirs
        self._peer = real.peer()
        self._peer_identities = real.peer_identities()
        self._auth_context = real.auth_context()
        self._metadata = real.invocation_metadata()

    def peer(self) -> str:
        return self._peer  # type: ignore[no-any-return]

    def peer_identities(self) -> Any:
        return self._peer_identities

    def auth_context(self) -> Any:
        return self._auth_context

    def invocation_metadata(self) -> Any:
        return self._metadata

    def time_remaining(self) -> float | None:
        now = time.monotonic()
        ends = [e for e in (self._their_ends, self._ends) if e is not None]
        return max(0.0, min(ends) - now) if ends else None

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: Any = ()) -> None:
        raise _Aborted(code, details, trailing_metadata)

    async def write(self, message: Any) -> None:
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._real.write(message), self._door))

    async def send_initial_metadata(self, metadata: Any) -> None:
        await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(self._real.send_initial_metadata(metadata), self._door)
        )

    def __getattr__(self, name: str) -> Any:
        if name in self._SETTERS:
            setter = getattr(self._real, name)
            return lambda *args: self._door.call_soon_threadsafe(setter, *args)
        raise AttributeError(f"{name}: not offered to a handler on Berth's loop (berth/adapters/grpc/door.py)")


async def _abort_with(context: grpc.aio.ServicerContext, aborted: _Aborted) -> None:
    await context.abort(aborted.code, aborted.details, aborted.trailing_metadata)


class LoopBridge(WrappingInterceptor):
    """Runs each unary-request handler on ``home`` (Berth's loop) while grpc
    serves the call on the loop the interceptor is called on."""

    def __init__(self, home: asyncio.AbstractEventLoop, request_timeout: float | None = None) -> None:
        super().__init__()
        self.home = home
        #: Seconds a unary call may run (``grpc.requestTimeoutSeconds``); None: unbounded.
        self.request_timeout = request_timeout
        #: The handlers running on Berth's loop, and their methods.
        self._running: dict[concurrent.futures.Future[Any], str] = {}

    def _on_home(self, coro: Coroutine[Any, Any, T], method: str) -> asyncio.Future[T]:
        """Start ``coro`` on Berth's loop; the door's future of it."""
        running = asyncio.run_coroutine_threadsafe(coro, self.home)
        self._running[running] = method
        running.add_done_callback(lambda f: self._running.pop(f, None))
        return asyncio.wrap_future(running)

    def running(self) -> list[str]:
        """The methods of the handlers still running, sorted."""
        return sorted(self._running.values())

    async def settle(self, seconds: float) -> None:
        """Wait (on Berth's loop) until the handlers the stopped server
        cancelled have ended: a stream's pump still hands its last message
        to the door's loop, which must be open for it."""
        if self._running:
            await asyncio.wait([asyncio.wrap_future(f) for f in list(self._running)], timeout=seconds)

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        if handler.response_streaming and inspect.isasyncgenfunction(handler.unary_stream):
            return grpc.unary_stream_rpc_method_handler(
                self._streaming(handler.unary_stream, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.response_streaming:  # a coroutine that writes with context.write (grpc's Health.Watch)
            return grpc.unary_stream_rpc_method_handler(
                self._unary(handler.unary_stream, method, bounded=False),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return grpc.unary_unary_rpc_method_handler(
            self._unary(handler.unary_unary, method),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _unary(
        self, behavior: Callable[[Any, Any], Coroutine[Any, Any, Any]], method: str, *, bounded: bool = True
    ) -> Callable[[Any, grpc.aio.ServicerContext], Coroutine[Any, Any, Any]]:
        limit = self.request_timeout if bounded else None

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            door = asyncio.get_running_loop()
            if limit is None:
                proxy = _Context(context, door)
                try:
                    return await self._on_home(behavior(request, proxy), method)
                except _Aborted as aborted:
                    await _abort_with(context, aborted)
                return None
            # A handler that reads time_remaining (WhatIf, between slices)
            # stops at the limit with its own answer; the rest are cancelled
            # a moment later, as kube-apiserver's timeout handler does.
            proxy = _Context(context, door, time.monotonic() + limit)
            try:
                async with asyncio.timeout(limit + _LATE):
                    return await self._on_home(behavior(request, proxy), method)
            except _Aborted as aborted:
                await _abort_with(context, aborted)
            except TimeoutError:
                await context.abort(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    f"the server's request timeout ({limit:g}s, grpc.requestTimeoutSeconds) passed; "
                    "the call was stopped",
                )
            return None

        return unary

    def _streaming(
        self, behavior: Callable[[Any, Any], AsyncIterator[Any]], method: str
    ) -> Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]:
        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            door = asyncio.get_running_loop()
            proxy = _Context(context, door)
            handoff: asyncio.Queue[Any] = asyncio.Queue(maxsize=1)

            async def pump() -> None:  # on Berth's loop
                items = behavior(request, proxy)
                try:
                    async for item in items:
                        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(handoff.put(item), door))
                finally:
                    await items.aclose()  # type: ignore[attr-defined]

            pumped = self._on_home(pump(), method)
            # The pump returned with its last message taken or still queued:
            # an end mark when there is room, else the check after each yield.
            pumped.add_done_callback(lambda _: None if handoff.full() else handoff.put_nowait(_END))
            try:
                while True:
                    item = await handoff.get()
                    if item is _END:
                        break
                    yield item
                    if pumped.done() and handoff.empty():
                        break
                pumped.result()  # the stream's own error, if it ended with one
            except _Aborted as aborted:
                await _abort_with(context, aborted)
            finally:
                pumped.cancel()  # the caller went away, or the server stopped

        return stream


#: How long a closing door waits for its remaining tasks to end by themselves.
_SETTLE_SECONDS = 1.0

#: How much later than the request timeout a handler that does not read its
#: deadline is cancelled (one that does answers by then).
_LATE = 0.5

#: Ends a bridged stream (its pump returned).
_END = object()
