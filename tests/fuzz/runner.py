"""The fuzz loops: send, check every answer, and check the canary and the
invariants as they go. Each request's :class:`random.Random` is seeded with
``"{seed}:{index}"``, so a failure's index and the run's seed name it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from typing import Any

import aiohttp
import grpc

from berth import errors
from berth.api.v1 import cluster_pb2, scheduler_pb2
from tests.fuzz import corpus
from tests.fuzz.corpus import GrpcCase, HttpCase
from tests.fuzz.harness import MAX_BODY, Runaway, Tally, Target, Watchdog, diff, excerpt

__all__ = ["check_grpc", "check_http", "fuzz_grpc", "fuzz_http", "send_grpc", "send_http"]

#: Longest error message an edge may send (errors.bounded) plus the verb's prefix.
MESSAGE_LIMIT = errors.MAX_MESSAGE_CHARS + 64
CANARY_EVERY = 250
_TIMEOUT = aiohttp.ClientTimeout(total=30)

_MUTATING_GRPC = {
    "/berth.v1.Scheduler/Bind",
    "/berth.v1.Scheduler/Submit",
    "/berth.v1.Scheduler/Cancel",
    *(
        f"/berth.v1.Cluster/{m}"
        for m in ("UpsertNodes", "DeleteNodes", "UpsertPods", "DeletePods", "UpsertNamespaces", "DeleteNamespaces")
    ),
}

RESPONSES = {
    f"/berth.v1.{svc}/{m.name}": (getattr(mod, m.output_type.name))
    for svc, mod in (("Scheduler", scheduler_pb2), ("Cluster", cluster_pb2))
    for m in mod.DESCRIPTOR.services_by_name[svc].methods
}


class Checker:
    """Canary and invariants, each failure reported once per distinct message."""

    def __init__(self, target: Target, tally: Tally, baseline: dict[str, Any]) -> None:
        self.target = target
        self.tally = tally
        self.baseline = baseline
        self.seen: set[str] = set()

    def invariants(self, index: int, what: str, payload: bytes) -> None:
        for v in self.target.invariants():
            if v not in self.seen:
                self.seen.add(v)
                self.tally.fail(f"invariant: {v}", index=index, what=what, payload=payload)

    async def canary(self, index: int) -> None:
        try:
            now = await self.target.canary()
        except Exception as e:  # the canary itself failing is the finding
            now = {"error": repr(e)}
        if now != self.baseline:
            d = diff(self.baseline, now)
            if d not in self.seen:
                self.seen.add(d)
                self.tally.fail(
                    f"canary changed: {sorted(k for k in now if now[k] != self.baseline.get(k))}",
                    index=index,
                    what="canary",
                    detail=d,
                )


# ---------------------------------------------------------------- HTTP


async def send_http(target: Target, case: HttpCase) -> tuple[int, bytes]:
    if case.raw is not None:
        return await _send_raw(target, case.raw)
    resp = await target.http.request(
        case.method, case.path, data=case.body, headers=case.headers, timeout=_TIMEOUT, auto_decompress=False
    )
    return resp.status, await resp.read()


async def _send_raw(target: Target, raw: bytes) -> tuple[int, bytes]:
    """A request aiohttp's client would never write; 0 when the server just closes."""
    reader, writer = await asyncio.open_connection(target.host, target.http_port)
    try:
        writer.write(raw)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length = next((int(v) for k, _, v in (h.partition(":") for h in lines[1:]) if k.lower() == "content-length"), 0)
        return status, await asyncio.wait_for(reader.readexactly(length), 10)
    except (asyncio.IncompleteReadError, ConnectionError):
        return 0, b""
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def check_http(case: HttpCase, status: int, body: bytes, tally: Tally, index: int) -> None:
    tally.record(case.verb, str(status))

    def fail(message: str) -> None:
        tally.fail(
            message,
            index=index,
            what=case.what,
            payload=case.raw or case.body,
            detail=f"{message}; answer {excerpt(body, 400)}",
        )

    doc: Any = None
    with contextlib.suppress(ValueError):
        doc = _loads(body) if body else None
    error = doc.get("Error") if isinstance(doc, dict) else None
    if status >= 500:
        fail(f"HTTP {status} from {case.verb}: {error if isinstance(error, str) else excerpt(body, 120)}")
    if status == 0:
        return  # the server closed a connection it could not parse: fine
    if not 200 <= status < 300:
        if not isinstance(error, str):
            fail(f"HTTP {status} from {case.verb} without a JSON {{'Error': ...}} body")
        elif len(error) > MESSAGE_LIMIT:
            fail(f"HTTP {status} from {case.verb}: an Error of {len(error)} characters")
        return
    if doc is None:
        fail(f"HTTP {status} from {case.verb} whose body is not JSON")
        return
    if case.plain_length > MAX_BODY:
        fail(f"HTTP {status} from {case.verb} for a body of {case.plain_length} bytes (over maxBodyBytes)")
    if case.verb == "prioritize" and isinstance(doc, list):
        bad = [
            h for h in doc if not (isinstance(h, dict) and isinstance(h.get("Score"), int) and 0 <= h["Score"] <= 10)
        ]
        if bad:
            fail(f"prioritize answered a score outside 0..10: {bad[0]}")


def _loads(body: bytes) -> Any:
    """JSON as any RFC 8259 parser reads it: a full-object answer echoes the
    nodes it was sent, and integers longer than CPython's 4300-digit limit
    are still JSON (kept as text here)."""
    return json.loads(body, parse_int=lambda s: int(s) if len(s) < 1000 else s)


def _error_of(body: bytes) -> str:
    """The ``Error`` of a JSON object answer ("" when none or not an object)."""
    try:
        doc = _loads(body)
    except ValueError:
        return ""
    return str(doc.get("Error") or "") if isinstance(doc, dict) else ""


async def fuzz_http(target: Target, n: int, seed: int, tally: Tally) -> None:
    print(f"\n{tally.name} fuzz: {n} requests, seed {seed}", flush=True)
    checker = Checker(target, tally, await target.canary())
    with Watchdog() as dog:
        for i in range(n):
            dog.request(f"#{i} building the fuzz case (the fuzzer itself)")
            case = corpus.http_case(random.Random(f"{seed}:{i}"))
            dog.request(f"#{i} {case.verb} [{case.what}]")
            before = target.state()
            try:
                status, body = await send_http(target, case)
            except (TimeoutError, aiohttp.ClientError, OSError, Runaway) as e:
                tally.record(case.verb, "error")
                tally.fail(
                    f"{case.verb}: no answer ({type(e).__name__})",
                    index=i,
                    what=case.what,
                    payload=case.body,
                    detail=repr(e),
                )
                continue
            check_http(case, status, body, tally, i)
            if case.verb == "bind" or not 200 <= status < 300:
                rejected = status >= 300 or _error_of(body) != ""
                if rejected and target.state() != before:
                    tally.fail(
                        f"a rejected {case.verb} changed the cluster", index=i, what=case.what, payload=case.body
                    )
                checker.invariants(i, case.what, case.body)
            if i % CANARY_EVERY == CANARY_EVERY - 1:
                await checker.canary(i)
    checker.invariants(n, "end", b"")
    await checker.canary(n)


# ---------------------------------------------------------------- gRPC


async def send_grpc(target: Target, case: GrpcCase) -> tuple[grpc.StatusCode, str, bytes]:
    try:
        if case.streaming:
            call = target.channel.unary_stream(case.method)(case.request, timeout=0.05)
            got = 0
            async for _ in call:
                got += 1
                if got >= 20:
                    call.cancel()
                    break
            return grpc.StatusCode.OK, "", b""
        resp = await target.channel.unary_unary(case.method)(case.request, timeout=30)
        return grpc.StatusCode.OK, "", resp
    except grpc.aio.AioRpcError as e:
        return e.code(), e.details() or "", b""


def check_grpc(
    target: Target, case: GrpcCase, code: grpc.StatusCode, details: str, resp: bytes, tally: Tally, index: int
) -> None:
    verb = case.method.rsplit("/", 1)[1]
    tally.record(verb, code.name)

    def fail(message: str) -> None:
        tally.fail(
            message, index=index, what=case.what, payload=case.request, detail=f"{message}: {excerpt(details, 400)}"
        )

    if code in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL):
        fail(f"{code.name} from {verb}: {details[:120]}")
    elif code == grpc.StatusCode.UNAVAILABLE:
        fail(f"UNAVAILABLE from {verb}")
    elif code == grpc.StatusCode.DEADLINE_EXCEEDED and not case.streaming:
        fail(f"{verb} did not answer within its deadline")
    dropped = details.startswith("Stream removed") and code != grpc.StatusCode.DEADLINE_EXCEEDED
    if dropped or "metadata size exceeds" in details:
        fail(f"{code.name} from {verb}: the transport dropped the answer ({details[:100]})")
    if len(details) > MESSAGE_LIMIT:
        fail(f"{code.name} from {verb} with details of {len(details)} characters")
    if code != grpc.StatusCode.OK or case.streaming:
        return
    try:
        msg = RESPONSES[case.method].FromString(resp)
    except Exception as e:
        fail(f"{verb} answered bytes that do not parse: {e}")
        return
    if isinstance(msg, scheduler_pb2.PrioritizeResponse):
        bad = [h for h in msg.host_priorities if not 0 <= h.score <= 10]
        if bad:
            fail(f"Prioritize answered a score outside 0..10: {bad[0].host!r:.40}={bad[0].score}")
    if isinstance(msg, scheduler_pb2.SubmitResponse):
        accepted: dict[str, str] = {}
        for r in msg.results:
            if not r.accepted:
                continue
            if accepted.setdefault(r.pod, r.uid) != r.uid:
                fail(f"Submit accepted two pods named {r.pod!r:.60} (uids {accepted[r.pod]!r:.40}, {r.uid!r:.40})")
            known = target.berth.core.pods.by_key(r.pod)
            held = known.metadata.uid if known is not None else None
            if held != r.uid:
                fail(f"Submit accepted {r.pod!r:.60} as {r.uid!r:.40} but Berth holds {held!r:.40}")


async def fuzz_grpc(target: Target, n: int, seed: int, tally: Tally) -> None:
    print(f"\n{tally.name} fuzz: {n} calls, seed {seed}", flush=True)
    checker = Checker(target, tally, await target.canary())
    with Watchdog() as dog:
        for i in range(n):
            live = [
                k.split("/", 1)[1] for k in list(target.berth.cluster.pods)[-8:] if not k.startswith("berth-canary/")
            ]
            dog.request(f"#{i} building the fuzz case (the fuzzer itself)")
            case = corpus.grpc_case(random.Random(f"{seed}:{i}"), corpus.grpc_strings(live))
            dog.request(f"#{i} {case.method} [{case.what}]")
            before = target.state()
            try:
                code, details, resp = await send_grpc(target, case)
            except Runaway as e:
                tally.record(case.method.rsplit("/", 1)[1], "runaway")
                tally.fail(str(e).split(":")[0], index=i, what=case.what, payload=case.request, detail=str(e))
                continue
            check_grpc(target, case, code, details, resp, tally, i)
            if case.method in _MUTATING_GRPC or case.method.startswith("/berth.v1.Cluster/Upsert"):
                if code != grpc.StatusCode.OK and target.state() != before:
                    tally.fail(
                        f"a rejected {case.method.rsplit('/', 1)[1]} ({code.name}) changed the cluster",
                        index=i,
                        what=case.what,
                        payload=case.request,
                    )
                checker.invariants(i, case.what, case.request)
            if i % CANARY_EVERY == CANARY_EVERY - 1:
                await checker.canary(i)
    checker.invariants(n, "end", b"")
    await checker.canary(n)
