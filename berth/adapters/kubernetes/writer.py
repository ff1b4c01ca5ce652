"""The pod writes in a subprocess, so the scheduling loop keeps its core.

On a real API server the loop's process spent as much CPU on the requests a
scheduled pod causes — the Binding POST, the Scheduled event, their TLS and
response parsing — as on scheduling it (py-spy, bench/README.md).
kube-scheduler runs its binding cycles and event broadcaster on other
goroutines; Berth, one Python thread, runs them in another process::

    scheduling loop (berth serve)               writer (python -m berth.adapters.kubernetes.writer)
    assume pod on node
    binding cycle: Bind(id, pod, node)  ----->  POST pods/{name}/binding
                          ... awaits ...         (409: GET the pod: same node is success)
    Done(id, outcome, message)          <-----
    finish_binding, or forget + requeue
    Scheduled(pod, node)                ----->  Scheduled event (client-go's series, queue, retries)
    Unschedulable(pod, message)         ----->  PodScheduled=False patch, FailedScheduling event
    Evict(victim, reason) / Nominate    ----->  DisruptionTarget patch, DELETE, Preempted event /
                                                nominatedNodeName patch
    Event(pod, related, type, reason..) ----->  a plugin's event (BindingConditionsPending)

Only the Binding has an answer the loop waits for: the scheduling cycle
still assumes before the bind and the binding cycle still forgets on a
failure (``schedule_one.go`` ``bindingCycle`` / ``handleBindingCycleError``).
Events and conditions are best effort, as in kube-scheduler.

Messages are msgpack (msgspec) in length-prefixed frames over a socketpair;
the messages a loop iteration produces go out as one frame. The writer
builds its own API client from the same kubeconfig (or in-cluster account)
and exits when its socket closes — after the writes in flight — so it never
outlives ``berth serve``. If it dies, the Bindings waiting on it fail
(BindError: the pods are forgotten and requeued) and the next write starts
a new one; after :data:`MAX_QUICK_DEATHS` deaths within
:data:`QUICK_DEATH_SECONDS` of starting, the source writes in process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import logging
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import Awaitable, Callable

import msgspec

from berth.adapters.kubernetes import kubeconfig as _kubeconfig
from berth.adapters.kubernetes.deadlines import bound_requests
from berth.adapters.kubernetes.writes import REQUEST_TIMEOUT_SECONDS, PodRef, PodWrites
from berth.cluster.sources import BindConflict, BindError, BindRetriable

__all__ = ["Recipe", "WriterProcess", "serve"]

log = logging.getLogger(__name__)

#: A Binding unanswered for this long fails (the writer's own request gives up at REQUEST_TIMEOUT_SECONDS).
BIND_DEADLINE_SECONDS = REQUEST_TIMEOUT_SECONDS + 15.0
#: A writer that dies this soon after starting, this many times in a row, is given up for in-process writes.
QUICK_DEATH_SECONDS = 10.0
MAX_QUICK_DEATHS = 3
#: How long the scheduler's messages may wait to go out together (a Binding
#: takes milliseconds at the API server; the loop schedules a pod in ~1-3 ms).
SEND_DELAY_SECONDS = 0.002
#: How long a closing writer waits for its queued events.
EVENT_GRACE_SECONDS = 5.0
#: A frame larger than this is refused (no message comes near it).
MAX_FRAME = 64 << 20

_HEADER = struct.Struct(">I")


# ------------------------------------------------------------------ messages


class Recipe(msgspec.Struct, frozen=True):
    """How the writer builds its API client: the kubeconfig (or the in-cluster
    account) ``berth serve`` was given, or — tests — a plain server URL."""

    kubeconfig: str | None = None
    in_cluster: bool = False
    host: str | None = None


class Bind(msgspec.Struct, array_like=True, tag=1):
    id: int
    pod: PodRef
    node: str


class Scheduled(msgspec.Struct, array_like=True, tag=2):
    pod: PodRef
    node: str


class Unschedulable(msgspec.Struct, array_like=True, tag=3):
    pod: PodRef
    message: str
    nominated: str | None = None  # also status.nominatedNodeName, in the same patch


class Evict(msgspec.Struct, array_like=True, tag=5):
    pod: PodRef
    reason: str
    scheduler_name: str


class Nominate(msgspec.Struct, array_like=True, tag=6):
    pod: PodRef
    node: str


class Preempted(msgspec.Struct, array_like=True, tag=7):
    pod: PodRef
    message: str


#: Outcomes of a Bind.
OK, CONFLICT, ERROR, RETRIABLE = 0, 1, 2, 3


class Done(msgspec.Struct, array_like=True, tag=4):
    id: int
    outcome: int
    message: str = ""


class EventsDropped(msgspec.Struct, array_like=True, tag=8):
    """The writer's event recorder dropped ``count`` more events."""

    count: int


class Event(msgspec.Struct, array_like=True, tag=9):
    """A plugin's event (``EventRecorder().Eventf``)."""

    regarding: PodRef
    related: PodRef | None
    event_type: str
    reason: str
    action: str
    note: str


Message = Bind | Scheduled | Unschedulable | Evict | Nominate | Preempted | Done | EventsDropped | Event

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[Message])


class _Framer:
    """Length-prefixed msgpack frames in and out of a byte stream. Messages
    wait up to ``delay`` seconds (0: the end of the loop iteration) and go
    out as one frame: one write and one wake-up of the reader, which on a
    busy machine cost more than the encoding (py-spy: ~90 us a write)."""

    def __init__(self, write: Callable[[bytes], None], delay: float = 0.0) -> None:
        self._write = write
        self._delay = delay
        self._out: list[Message] = []
        self._buf = bytearray()

    def send(self, msg: Message) -> None:
        if not self._out:
            loop = asyncio.get_running_loop()
            if self._delay:
                loop.call_later(self._delay, self.flush)
            else:
                loop.call_soon(self.flush)
        self._out.append(msg)

    def flush(self) -> None:
        if self._out:
            body = _encoder.encode(self._out)
            self._out = []
            self._write(_HEADER.pack(len(body)) + body)

    def feed(self, data: bytes) -> list[list[Message] | msgspec.DecodeError]:
        """The complete frames in ``data`` (with what came before), decoded; a
        frame that does not decode is returned as its error (the stream stays
        in step: the length says where the next frame starts)."""
        self._buf += data
        frames: list[list[Message] | msgspec.DecodeError] = []
        while len(self._buf) >= 4:
            (n,) = _HEADER.unpack_from(self._buf)
            if n > MAX_FRAME:
                raise ValueError(f"frame of {n} bytes (at most {MAX_FRAME})")
            if len(self._buf) < 4 + n:
                break
            body = bytes(self._buf[4 : 4 + n])
            del self._buf[: 4 + n]
            try:
                frames.append(_decoder.decode(body))
            except msgspec.DecodeError as e:
                frames.append(e)
        return frames


# ------------------------------------------------------------------ the writer (child side)


async def _logged(write: Awaitable[None], what: str) -> None:
    """A write nobody waits for: its failure is logged here."""
    try:
        await write
    except Exception as e:
        log.error("%s failed: %s", what, e)


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, writes: PodWrites) -> None:
    """Perform the messages read until the stream ends, then finish what is
    in flight (Bindings, reports, queued events) and return."""
    framer = _Framer(writer.write)
    tasks: set[asyncio.Task[None]] = set()
    unreported = 0

    def report_drops() -> None:
        nonlocal unreported
        if unreported:
            framer.send(EventsDropped(unreported))
            unreported = 0

    def dropped(n: int) -> None:
        # A burst of drops goes back as one message.
        nonlocal unreported
        if not unreported:
            asyncio.get_running_loop().call_soon(report_drops)
        unreported += n

    writes.events.on_drop = dropped

    def spawn(coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def bind(msg: Bind) -> None:
        try:
            await writes.bind(msg.pod, msg.node)
            framer.send(Done(msg.id, OK))
        except BindConflict as e:
            framer.send(Done(msg.id, CONFLICT, str(e)))
        except BindRetriable as e:
            framer.send(Done(msg.id, RETRIABLE, str(e)))
        except Exception as e:
            framer.send(Done(msg.id, ERROR, str(e) or type(e).__name__))

    while True:
        data = await reader.read(1 << 16)
        if not data:
            break
        for frame in framer.feed(data):
            if isinstance(frame, msgspec.DecodeError):
                log.error("writer: undecodable message from the scheduler ignored: %s", frame)
                continue
            for msg in frame:
                if isinstance(msg, Bind):
                    spawn(bind(msg))
                elif isinstance(msg, Scheduled):
                    writes.report_scheduled(msg.pod, msg.node)
                elif isinstance(msg, Unschedulable):
                    spawn(writes.report_unschedulable(msg.pod, msg.message, msg.nominated))
                elif isinstance(msg, Evict):
                    spawn(_logged(writes.evict(msg.pod, msg.reason, msg.scheduler_name), f"evicting {msg.pod.key}"))
                elif isinstance(msg, Nominate):
                    spawn(writes.nominate(msg.pod, msg.node))
                elif isinstance(msg, Preempted):
                    writes.report_preempted(msg.pod, msg.message)
                elif isinstance(msg, Event):
                    writes.record_event(msg.regarding, msg.related, msg.event_type, msg.reason, msg.action, msg.note)
                else:
                    log.error("writer: unexpected message %r ignored", msg)
    while tasks:
        await asyncio.gather(*list(tasks), return_exceptions=True)
    framer.flush()
    # Events still waiting get a moment; one retrying against an API server
    # that went away must not hold up the scheduler's shutdown.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(writes.events.flush(), EVENT_GRACE_SECONDS)
    await writes.close()
    report_drops()
    framer.flush()
    with contextlib.suppress(ConnectionError):
        await writer.drain()
    writer.close()


async def _child(fd: int, recipe: Recipe, identity: str, scheduler_name: str) -> None:
    if recipe.host is not None:
        from kubernetes_asyncio import client

        api = client.ApiClient(client.Configuration(host=recipe.host))
    else:
        api = await _kubeconfig.load_api_client(kubeconfig=recipe.kubeconfig, in_cluster=recipe.in_cluster)
    _kubeconfig.skip_proxy_lookups(api)
    bound_requests(api)  # every request bounded, as the parent's (berth.adapters.kubernetes.deadlines)
    reader, writer = await asyncio.open_connection(sock=socket.socket(fileno=fd))
    writes = PodWrites(api, identity=identity, scheduler_name=scheduler_name)
    try:
        await serve(reader, writer, writes)
    finally:
        await api.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m berth.adapters.kubernetes.writer")
    p.add_argument("--fd", type=int, required=True)
    p.add_argument("--recipe", required=True, help="JSON Recipe")
    p.add_argument("--identity", required=True)
    p.add_argument("--scheduler-name", required=True)
    args = p.parse_args(argv)
    # The scheduler ends the writer by closing its socket, after its own last
    # bind: a Ctrl-C or SIGTERM to the process group must not cut that short.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s writer: %(message)s")
    recipe = msgspec.json.decode(args.recipe, type=Recipe)
    # uvloop (a dependency; not Windows): its sockets and TLS cost the writer
    # less CPU than asyncio's. The writer serves no extender bodies, the case
    # for which ``berth serve`` keeps asyncio's loop.
    try:
        import uvloop

        factory: Callable[[], asyncio.AbstractEventLoop] | None = uvloop.new_event_loop
    except ImportError:
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(_child(args.fd, recipe, args.identity, args.scheduler_name))


# ------------------------------------------------------------------ the scheduler's side

#: Start a writer: returns the scheduler's end of its socket and something to wait for its exit.
Spawn = Callable[[], Awaitable[tuple[socket.socket, Callable[[], Awaitable[None]]]]]


def subprocess_spawner(recipe: Recipe, *, identity: str, scheduler_name: str) -> Spawn:
    async def spawn() -> tuple[socket.socket, Callable[[], Awaitable[None]]]:
        ours, theirs = socket.socketpair()
        try:
            proc = await asyncio.create_subprocess_exec(
                *(sys.executable, "-m", "berth.adapters.kubernetes.writer", "--fd", str(theirs.fileno())),
                *("--recipe", msgspec.json.encode(recipe).decode()),
                *("--identity", identity, "--scheduler-name", scheduler_name),
                pass_fds=(theirs.fileno(),),
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()

        async def wait() -> None:
            # The socket closed: the writer is ending (it finishes in-flight writes first).
            try:
                await asyncio.wait_for(proc.wait(), REQUEST_TIMEOUT_SECONDS + 5)
            except TimeoutError:
                proc.kill()
                await proc.wait()

        return ours, wait

    return spawn


class _Protocol(asyncio.Protocol):
    def __init__(self, owner: WriterProcess, wait_exit: Callable[[], Awaitable[None]]) -> None:
        self.owner = owner
        self.wait_exit = wait_exit
        self.framer: _Framer | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

        def write(data: bytes) -> None:
            if not transport.is_closing():  # else the writer is gone: _lost failed what waited
                transport.write(data)

        self.framer = _Framer(write, SEND_DELAY_SECONDS)

    def data_received(self, data: bytes) -> None:
        assert self.framer is not None
        try:
            frames = self.framer.feed(data)
        except ValueError as e:
            log.error("writer process: %s; restarting it", e)
            assert self.transport is not None
            self.transport.abort()
            return
        for frame in frames:
            if isinstance(frame, msgspec.DecodeError):
                log.error("writer process: undecodable answer ignored: %s", frame)
                continue
            for msg in frame:
                if isinstance(msg, Done):
                    self.owner._answer(msg)
                elif isinstance(msg, EventsDropped) and self.owner.on_events_dropped is not None:
                    self.owner.on_events_dropped(msg.count)

    def connection_lost(self, exc: Exception | None) -> None:
        self.owner._lost(self, exc)


class WriterProcess:
    """The scheduler's end: sends writes, resolves each Binding from its
    answer, restarts the writer when it died."""

    def __init__(self, spawn: Spawn, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._spawn = spawn
        self._clock = clock
        self._proto: _Protocol | None = None
        self._starting: asyncio.Task[_Protocol] | None = None
        self._reaping: set[asyncio.Future[None]] = set()
        self._pending: dict[int, asyncio.Future[Done]] = {}
        self._ids = itertools.count(1)
        self._started_at = 0.0
        self._quick_deaths = 0
        self.starts = 0
        #: Set once the writer kept dying at start: the source writes in process.
        self.broken = False
        #: Called with the number of events the writer's recorder dropped.
        self.on_events_dropped: Callable[[int], None] | None = None
        self._closing = False

    async def _connected(self) -> _Protocol:
        if self._proto is not None:
            return self._proto
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        try:
            return await asyncio.shield(self._starting)
        finally:
            if self._starting is not None and self._starting.done():
                self._starting = None

    async def _start(self) -> _Protocol:
        sock, wait_exit = await self._spawn()
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        _, proto = await loop.connect_accepted_socket(lambda: _Protocol(self, wait_exit), sock=sock)
        self.starts += 1
        self._started_at = self._clock()
        if self.starts > 1:
            log.info("writer process restarted (start %d)", self.starts)
        self._proto = proto
        return proto

    async def start(self) -> None:
        """Start the writer ahead of the first write (its imports take a while)."""
        try:
            await self._connected()
        except OSError as e:
            log.warning("cannot start the writer process: %s", e)

    async def _send(self, msg: Message) -> None:
        proto = await self._connected()
        assert proto.framer is not None
        proto.framer.send(msg)

    # ------------------------------------------------------------ writes

    async def bind(self, pod: PodRef, node: str) -> None:
        """As :meth:`PodWrites.bind`, in the writer."""
        if self._closing:
            raise BindError(f"binding {pod.key} to {node}: shutting down")
        ident = next(self._ids)
        answer: asyncio.Future[Done] = asyncio.get_running_loop().create_future()
        self._pending[ident] = answer
        try:
            try:
                await self._send(Bind(ident, pod, node))
            except OSError as e:
                raise BindError(f"binding {pod.key} to {node}: cannot start the writer process: {e}") from e
            try:
                done = await asyncio.wait_for(answer, BIND_DEADLINE_SECONDS)
            except TimeoutError:
                raise BindError(f"binding {pod.key} to {node}: no answer from the writer process") from None
        finally:
            self._pending.pop(ident, None)
        if done.outcome == OK:
            return
        if done.outcome == CONFLICT:
            raise BindConflict(done.message)
        if done.outcome == RETRIABLE:
            raise BindRetriable(done.message)
        raise BindError(done.message)

    async def report_scheduled(self, pod: PodRef, node: str) -> None:
        await self._send(Scheduled(pod, node))

    async def report_unschedulable(self, pod: PodRef, message: str, nominated: str | None = None) -> None:
        await self._send(Unschedulable(pod, message, nominated))

    async def evict(self, pod: PodRef, reason: str, scheduler_name: str) -> None:
        await self._send(Evict(pod, reason, scheduler_name))

    async def nominate(self, pod: PodRef, node: str) -> None:
        await self._send(Nominate(pod, node))

    async def report_preempted(self, pod: PodRef, message: str) -> None:
        await self._send(Preempted(pod, message))

    async def record_event(
        self, regarding: PodRef, related: PodRef | None, type_: str, reason: str, action: str, note: str
    ) -> None:
        await self._send(Event(regarding, related, type_, reason, action, note))

    # ------------------------------------------------------------ answers

    def _answer(self, done: Done) -> None:
        fut = self._pending.get(done.id)
        if fut is not None and not fut.done():
            fut.set_result(done)

    def _lost(self, proto: _Protocol, exc: Exception | None) -> None:
        if self._proto is proto:
            self._proto = None
        lived = self._clock() - self._started_at
        if not self._closing:
            self._quick_deaths = self._quick_deaths + 1 if lived < QUICK_DEATH_SECONDS else 0
            if self._quick_deaths >= MAX_QUICK_DEATHS and not self.broken:
                self.broken = True
                log.error("the writer process keeps exiting at start: writing from the scheduler's process")
            else:
                log.warning("writer process exited after %.1fs (%s)", lived, exc or "its socket closed")
            # (close() waits for the writer itself)
            reap = asyncio.ensure_future(proto.wait_exit())  # no zombie left behind
            self._reaping.add(reap)
            reap.add_done_callback(self._reaping.discard)
        # Every Binding sent to that writer has no answer coming: fail it (the loop forgets and requeues).
        for fut in self._pending.values():
            if not fut.done():
                fut.set_result(Done(0, ERROR, "the writer process exited before answering"))

    async def close(self) -> None:
        """Close the socket — the writer finishes what is in flight and exits — and wait for it."""
        self._closing = True
        if self._starting is not None:
            with contextlib.suppress(Exception):
                await self._starting
        proto = self._proto
        if proto is not None and proto.framer is not None and proto.transport is not None:
            proto.framer.flush()
            if proto.transport.can_write_eof():
                proto.transport.write_eof()
            else:
                proto.transport.close()
        if proto is not None:
            await proto.wait_exit()
            if proto.transport is not None:
                proto.transport.close()
        if self._reaping:
            await asyncio.gather(*self._reaping, return_exceptions=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
