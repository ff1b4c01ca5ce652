"""Reading a request body within ``http.maxBodyBytes`` and ``http.readTimeoutSeconds``.

The limit is exact (one byte over is 413) and applies to what the handler
would hold: the bytes received and, for ``Content-Encoding: gzip``/``deflate``,
the bytes after inflating. Inflating is ours, in steps of at most the room
left under the limit (``zlib``'s ``max_length``), so a 10 KB body that would
inflate to gigabytes stops at limit + 1 byte and its tail is never inflated.
aiohttp's own decompression is off (``auto_decompress=False`` in
``server.HANDLER_ARGS``): it would inflate on the parser's schedule and keep
inflating the unread rest while it lingers after our 413.

Go's net/http does not decode request bodies at all; Berth accepts the two
encodings any HTTP client can send (RFC 9110 section 8.4.1) and answers 415 to
others, as RFC 9110 section 15.5.16 says.
"""

from __future__ import annotations

import asyncio
import zlib
from typing import Protocol

from aiohttp import hdrs, web

from berth import errors

__all__ = ["ENCODINGS", "Disconnected", "Stream", "collect", "read"]

#: Content-Encoding values accepted (lower-cased); x-gzip is gzip (RFC 9110 8.4.1.3).
ENCODINGS = frozenset({"identity", "gzip", "x-gzip", "deflate"})


class Disconnected(Exception):
    """The client closed its connection before its body was in: nobody is
    left to answer, and it is no bug of the server's (logged at debug)."""


class Stream(Protocol):
    """What :func:`collect` reads: aiohttp's ``StreamReader`` (``request.content``)."""

    async def readany(self) -> bytes: ...


def _too_large(limit: int, what: str) -> errors.ResourceExhausted:
    return errors.ResourceExhausted(f"request body: {what} more than http.maxBodyBytes ({limit} bytes)")


class _Inflater:
    """gzip (RFC 1952, members may be concatenated) or deflate, never
    producing more than the room left under the limit."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._z: zlib._Decompress | None = None

    def _new(self, first: int) -> zlib._Decompress:
        if self.encoding == "deflate":
            # HTTP's "deflate" is zlib-wrapped (RFC 1950); some clients send raw
            # deflate (RFC 1951). The zlib header's low nibble is 8; aiohttp's
            # DeflateBuffer sniffs the same way.
            return zlib.decompressobj(15 if first & 0x0F == 8 else -15)
        return zlib.decompressobj(16 + zlib.MAX_WBITS)

    def feed(self, data: bytes, out: bytearray, limit: int) -> None:
        """Inflate ``data`` into ``out``; raises once ``out`` would pass ``limit``."""
        while data:
            if self._z is None:
                self._z = self._new(data[0])
            try:
                out += self._z.decompress(data, limit - len(out) + 1)
            except zlib.error as e:
                raise errors.InvalidArgument(f"request body: Content-Encoding {self.encoding}: {e}") from None
            if len(out) > limit:
                raise _too_large(limit, "inflates to")
            data = self._z.unconsumed_tail
            if self._z.eof:
                data = self._z.unused_data + data
                if data and self.encoding == "deflate":
                    raise errors.InvalidArgument(
                        "request body: Content-Encoding deflate: data after the end of the stream"
                    )
                self._z = None  # gzip: another member may follow (RFC 1952 2.2)

    def finish(self) -> None:
        if self._z is not None:
            raise errors.InvalidArgument(f"request body: Content-Encoding {self.encoding}: truncated stream")


async def collect(stream: Stream, *, limit: int, encoding: str = "identity") -> bytes:
    """The body, inflated per ``encoding``; at most ``limit`` bytes of it are ever held."""
    received = 0
    if encoding == "identity":
        chunks: list[bytes] = []  # joined once: cheaper than growing a buffer
        while chunk := await stream.readany():
            received += len(chunk)
            if received > limit:
                raise _too_large(limit, "received")
            chunks.append(chunk)
        return b"".join(chunks)
    inflater = _Inflater(encoding)
    out = bytearray()
    while chunk := await stream.readany():
        received += len(chunk)
        if received > limit:
            raise _too_large(limit, "received")
        inflater.feed(chunk, out, limit)
    inflater.finish()
    return bytes(out)


async def read(request: web.BaseRequest, *, limit: int, seconds: float) -> bytes:
    """The request's body within the limit and the time allowed; 413, 415,
    408 or 400 (malformed chunked framing or compression) otherwise, and
    :class:`Disconnected` when the client goes away before it is in."""
    encoding = request.headers.get(hdrs.CONTENT_ENCODING, "identity").strip().lower() or "identity"
    if encoding not in ENCODINGS:
        raise web.HTTPUnsupportedMediaType(
            text=f"Content-Encoding: unsupported value {encoding[:64]!r} (accepted: identity, gzip, deflate)"
        )
    length = request.content_length
    if length is not None and length > limit:
        raise _too_large(limit, f"Content-Length {length} is")
    try:
        async with asyncio.timeout(seconds):
            return await collect(request.content, limit=limit, encoding=encoding)
    except TimeoutError:
        raise web.HTTPRequestTimeout(
            text=f"request body: not received within {seconds:g}s (http.readTimeoutSeconds)"
        ) from None
    except web.RequestPayloadError as e:  # broken chunked framing, a short body
        raise errors.InvalidArgument(f"request body: {e}") from None
    except ConnectionResetError as e:  # aiohttp's "Connection lost" (ClientConnectionResetError is one too)
        raise Disconnected(f"request body: the client disconnected before the whole body arrived ({e})") from None
