"""Request bodies: the limit is exact, applies after inflating, and a
decompression bomb stops at the limit (``berth.adapters.http.body``)."""

from __future__ import annotations

import time
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from berth import errors
from berth.adapters.http import body
from berth.adapters.http.server import build_app
from tests.http.payloads import api_pod, args, dumps
from tests.http.test_extender_wire import make_berth

LIMIT = 64 * 1024
#: What kube-scheduler sends (the verbs refuse any other type with 415).
JSON = {"Content-Type": "application/json"}


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    berth = make_berth({"http": {"host": "127.0.0.1", "port": 0, "maxBodyBytes": LIMIT}})
    async with TestClient(TestServer(build_app(berth.core, berth.extender))) as c:
        yield c


def _padded(size: int) -> bytes:
    """A valid filter request of exactly ``size`` bytes (JSON allows trailing whitespace)."""
    doc = dumps(args(api_pod(), names=["big"]))
    assert len(doc) <= size
    return doc + b" " * (size - len(doc))


def _compress(data: bytes, encoding: str) -> bytes:
    wbits = {"gzip": 31, "deflate": 15, "raw deflate": -15}[encoding]
    c = zlib.compressobj(9, zlib.DEFLATED, wbits)
    return c.compress(data) + c.flush()


def bomb(inflated: int, encoding: str = "gzip") -> bytes:
    """A stream that inflates to ``inflated`` zero bytes, built without
    materialising them: after a full flush the compressor forgets its
    history, so one flushed megabyte compresses to the same block every
    time. The trailer is left off (the server must stop long before)."""
    wbits = 31 if encoding == "gzip" else 15
    c = zlib.compressobj(9, zlib.DEFLATED, wbits)
    mb = bytes(1 << 20)
    head = c.compress(mb) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(mb) + c.flush(zlib.Z_FULL_FLUSH)
    return head + block * (inflated // len(mb) - 1)


async def _post(c: TestClient[Any, Any], data: bytes, **headers: str) -> tuple[int, dict[str, Any]]:
    resp = await c.post("/scheduler/filter", data=data, headers={"Content-Type": "application/json", **headers})
    assert resp.content_type == "application/json"
    return resp.status, await resp.json()


@pytest.mark.parametrize(
    ("size", "chunked", "status"),
    [
        (LIMIT, False, 200),
        (LIMIT + 1, False, 413),
        (LIMIT, True, 200),
        (LIMIT + 1, True, 413),
    ],
    ids=["exactly the limit", "one byte over", "chunked, exactly the limit", "chunked, one byte over"],
)
async def test_the_body_limit_is_exact(client: TestClient[Any, Any], size: int, chunked: bool, status: int) -> None:
    data = _padded(size)

    async def stream() -> AsyncIterator[bytes]:
        for i in range(0, len(data), 1000):
            yield data[i : i + 1000]

    resp = await client.post("/scheduler/filter", data=stream() if chunked else data, headers=JSON)
    assert resp.status == status, await resp.text()
    assert resp.content_type == "application/json"
    if status == 413:
        assert f"more than http.maxBodyBytes ({LIMIT} bytes)" in (await resp.json())["Error"]


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw deflate"])
async def test_compressed_bodies_are_inflated_once(client: TestClient[Any, Any], encoding: str) -> None:
    header = "deflate" if encoding == "raw deflate" else encoding
    status, got = await _post(client, _compress(_padded(LIMIT), encoding), **{"Content-Encoding": header})
    assert status == 200 and got["NodeNames"] == ["big"]


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_body_that_inflates_past_the_limit_is_413(client: TestClient[Any, Any], encoding: str) -> None:
    status, got = await _post(client, _compress(_padded(LIMIT + 1), encoding), **{"Content-Encoding": encoding})
    assert status == 413
    assert "inflates to more than http.maxBodyBytes" in got["Error"]


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_decompression_bomb_is_refused_quickly(encoding: str) -> None:
    limit = 1 << 20
    data = bomb(300 << 20, encoding)  # ~300 KB, under the limit, inflating to 300 MB
    assert len(data) < limit
    berth = make_berth({"http": {"host": "127.0.0.1", "port": 0, "maxBodyBytes": limit}})
    async with TestClient(TestServer(build_app(berth.core, berth.extender))) as c:
        started = time.perf_counter()
        status, got = await _post(c, data, **{"Content-Encoding": encoding})
        assert time.perf_counter() - started < 2.0
    assert status == 413 and "inflates to more than http.maxBodyBytes (1048576 bytes)" in got["Error"]


class _Counting:
    """A body stream that counts what the reader took."""

    def __init__(self, data: bytes, chunk: int) -> None:
        self._chunks: Iterator[bytes] = (data[i : i + chunk] for i in range(0, len(data), chunk))
        self.taken = 0

    async def readany(self) -> bytes:
        piece = next(self._chunks, b"")
        self.taken += len(piece)
        return piece


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_the_reader_stops_inflating_at_the_limit(encoding: str) -> None:
    chunk = 16 * 1024
    stream = _Counting(bomb(300 << 20, encoding), chunk)
    with pytest.raises(errors.ResourceExhausted, match="inflates to more than"):
        await body.collect(stream, limit=LIMIT, encoding=encoding)
    # 64 KiB of zeros is well under one 16 KiB chunk compressed: the reader took
    # one chunk and inflated at most LIMIT + 1 bytes of it, not 300 MB.
    assert stream.taken <= chunk


@pytest.mark.parametrize(
    ("data", "encoding", "message"),
    [
        (b"\x1f\x8b\x08\x00garbage", "gzip", "Content-Encoding gzip: "),
        (_compress(b'{"a": 1}', "gzip")[:-6], "gzip", "truncated stream"),
        (_compress(b'{"a": 1}', "deflate") + b"xx", "deflate", "data after the end of the stream"),
    ],
    ids=["corrupt gzip", "truncated gzip", "trailing bytes after deflate"],
)
async def test_broken_compression_is_a_400(
    client: TestClient[Any, Any], data: bytes, encoding: str, message: str
) -> None:
    status, got = await _post(client, data, **{"Content-Encoding": encoding})
    assert status == 400 and message in got["Error"]


async def test_concatenated_gzip_members_are_one_body(client: TestClient[Any, Any]) -> None:
    doc = dumps(args(api_pod(), names=["big"]))
    data = _compress(doc[:50], "gzip") + _compress(doc[50:], "gzip")
    status, got = await _post(client, data, **{"Content-Encoding": "gzip"})
    assert status == 200 and got["NodeNames"] == ["big"]


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress", "gzip, gzip"])
async def test_unknown_encodings_are_415(client: TestClient[Any, Any], encoding: str) -> None:
    status, got = await _post(client, b"{}", **{"Content-Encoding": encoding})
    assert status == 415
    assert "Content-Encoding: unsupported value" in got["Error"]
