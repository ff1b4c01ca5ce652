"""Every non-2xx answer is ``{"Error": ...}`` JSON with the status of its
kind; no malformed request gets a 500 (issue 11's black-box findings, case
by case)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from berth import errors
from berth.adapters.http import errors as http_errors
from berth.adapters.http import server
from berth.adapters.http.server import build_app
from tests.http.payloads import api_node, api_pod, args, dumps
from tests.http.test_extender_wire import NODES, make_berth, post


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    berth = make_berth()
    async with TestClient(TestServer(build_app(berth.core, berth.extender))) as c:
        yield c


def _pod_with(**changes: Any) -> dict[str, Any]:
    pod = api_pod()
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        at: Any = pod
        for p in parents:
            at = at[int(p)] if isinstance(at, list) else at[p]
        at[leaf] = value
    return pod


def _cpu(q: Any) -> dict[str, Any]:
    pod = api_pod()
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = q
    return pod


def _node_cpu(q: Any) -> dict[str, Any]:
    node = api_node("big")
    node["status"]["allocatable"]["cpu"] = q
    return node


_REQ = "Pod.spec.containers[0].resources.requests[cpu]"
_DEEP = b"[" * 100_000 + b"]" * 100_000

MALFORMED: list[tuple[str, str, bytes, int, str]] = [
    # (id, verb, body, status, what the message must say)
    (
        "quantity 1.5.3Gi",
        "filter",
        dumps(args(_cpu("1.5.3Gi"), names=["big"])),
        400,
        f'{_REQ}: Invalid value: "1.5.3Gi"',
    ),
    ("quantity 1e400", "prioritize", dumps(args(_cpu("1e400"), names=["big"])), 400, f'{_REQ}: Invalid value: "1e400"'),
    (
        "node quantity 1e400",
        "filter",
        dumps(args(api_pod(), nodes=[_node_cpu("1e400")])),
        400,
        'Nodes.items[0].status.allocatable[cpu]: Invalid value: "1e400"',
    ),
    (
        "quantity as a number out of float range",
        "filter",
        dumps(args(api_pod(), names=["big"])).replace(b'"500m"', b"1e400"),
        400,
        "Pod.spec.containers[0].resources.requests[...]: Number out of range",
    ),
    (
        "deeply nested pod",
        "filter",
        b'{"Pod":' + _DEEP + b', "NodeNames": []}',
        400,
        "ExtenderArgs: JSON nested too deeply",
    ),
    ("deeply nested unknown field", "prioritize", b'{"X":' + _DEEP + b', "Pod": {}}', 400, "JSON nested too deeply"),
    (
        "deeply nested victims",
        "preempt",
        b'{"Pod": {"metadata": {"name": "a"}}, "NodeNameToVictims": {"big": ' + _DEEP + b"}}",
        400,
        "nested too deeply",
    ),
    (
        "priority beyond int64 (C long)",
        "filter",
        dumps(args(_pod_with(spec__priority=2**70), names=["big"])),
        400,
        "Pod.spec.priority: Invalid value: 1180591620717411303424: must fit in a 64-bit signed integer",
    ),
    (
        "integer beyond 4300 digits",
        "filter",
        b'{"Pod": {"metadata": {"name": "a"}, "spec": {"priority": ' + b"9" * 5000 + b'}}, "NodeNames": []}',
        400,
        "Pod.spec.priority: Integer value out of range",
    ),
    (
        "port beyond int64",
        "filter",
        dumps(args(_pod_with(spec__containers__0__ports=[{"containerPort": 2**64}]), names=["big"])),
        400,
        "Pod.spec.containers[0].ports[0].containerPort: Invalid value: 18446744073709551616",
    ),
    (
        "toleration seconds below int64",
        "filter",
        dumps(
            args(
                _pod_with(spec__tolerations=[{"key": "k", "operator": "Exists", "tolerationSeconds": -(2**63) - 1}]),
                names=["big"],
            )
        ),
        400,
        "Pod.spec.tolerations[0].tolerationSeconds: Invalid value: -9223372036854775809",
    ),
    (
        "NumPDBViolations beyond int64",
        "preempt",
        dumps({"Pod": api_pod(), "NodeNameToMetaVictims": {"big": {"Pods": [], "NumPDBViolations": 2**63}}}),
        400,
        "NodeNameToMetaVictims[big].NumPDBViolations: Invalid value: 9223372036854775808",
    ),
    (
        "image size beyond int64",
        "prioritize",
        dumps(
            args(
                api_pod(),
                nodes=[
                    {**NODES[0], "status": {**NODES[0]["status"], "images": [{"names": ["x"], "sizeBytes": 2**63}]}}
                ],
            )
        ),
        400,
        "Nodes.items[0].status.images[0].sizeBytes: Invalid value: 9223372036854775808",
    ),
    (
        "invalid UTF-8 in a name",
        "filter",
        b'{"Pod": {"metadata": {"name": "\xff\xfe"}}, "NodeNames": ["big"]}',
        400,
        "request body: invalid UTF-8 at byte 31",
    ),
    ("invalid UTF-8 in a key", "filter", b'{"P\xffod": {}, "NodeNames": []}', 400, "invalid UTF-8 at byte 3"),
    (
        "invalid UTF-8 in an echoed node",
        "filter",
        dumps(args(api_pod(), nodes=NODES[:1])).replace(b'"10.0.0.1"', b'"\xc3("'),
        400,
        "invalid UTF-8",
    ),
    (
        "overlong string",
        "filter",
        dumps(args(_pod_with(metadata__annotations={"a": "x" * ((3 << 19) + 1)}), names=["big"])),
        400,
        "Pod.metadata.annotations[a]: Too long: may not be more than 1572864 bytes",
    ),
    ("overlong node name", "filter", dumps(args(api_pod(), names=["n" * ((3 << 19) + 1)])), 400, "NodeNames: Too long"),
    (
        "wrong type deep inside",
        "filter",
        dumps(args(_pod_with(spec__containers__0__ports=[{"containerPort": "x"}]), names=[])),
        400,
        "Pod.spec.containers[0].ports[0].containerPort: Expected `int`, got `str`",
    ),
    ("top level a string", "filter", b'"hello"', 400, "ExtenderArgs: expected a JSON object"),
    ("truncated JSON", "filter", dumps(args(api_pod(), names=["big"]))[:-7], 400, "ExtenderArgs: "),
    ("trailing garbage", "filter", dumps(args(api_pod(), names=["big"])) + b"]]", 400, "ExtenderArgs: "),
    (
        "NaN literal",
        "filter",
        b'{"Pod": {"metadata": {"name": "a"}, "spec": {"priority": NaN}}, "NodeNames": []}',
        400,
        "ExtenderArgs: ",
    ),
    (
        "victim pods not a list",
        "preempt",
        dumps({"Pod": api_pod(), "NodeNameToVictims": {"big": {"Pods": 7}}}),
        400,
        "NodeNameToVictims[big].Pods: Expected `array`, got `int`",
    ),
    (
        "victim UID not a string",
        "preempt",
        dumps({"Pod": api_pod(), "NodeNameToMetaVictims": {"big": {"Pods": [{"UID": 7}]}}}),
        400,
        "NodeNameToMetaVictims[big].Pods[0].UID: Expected `str`, got `int`",
    ),
    (
        "bind node not a string",
        "bind",
        dumps({"PodName": "x", "Node": ["big"]}),
        400,
        "Node: Expected `str`, got `array`",
    ),
]


@pytest.mark.parametrize(
    ("verb", "body", "status", "message"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED]
)
async def test_malformed_requests_get_a_json_4xx_naming_the_field_never_a_500(
    client: TestClient[Any, Any], verb: str, body: bytes, status: int, message: str
) -> None:
    got = await post(client, verb, body, status=status)
    assert got["Error"].startswith(f"{verb}: ")
    assert message in got["Error"]
    assert len(got["Error"]) <= errors.MAX_MESSAGE_CHARS
    # and the service is still fine
    assert (await post(client, "filter", args(api_pod(), names=["big"])))["NodeNames"] == ["big"]


@pytest.mark.parametrize(
    ("method", "path", "status", "message"),
    [
        ("GET", "/nope", 404, "GET /nope: Not Found"),
        ("POST", "/scheduler/nope", 404, "POST /scheduler/nope: Not Found"),
        ("GET", "/scheduler/filter", 405, "GET /scheduler/filter: Method Not Allowed"),
        ("DELETE", "/healthz", 405, "DELETE /healthz: Method Not Allowed"),
    ],
)
async def test_router_errors_are_json(
    client: TestClient[Any, Any], method: str, path: str, status: int, message: str
) -> None:
    resp = await client.request(method, path)
    assert resp.status == status
    assert resp.content_type == "application/json"
    assert await resp.json() == {"Error": message}
    if status == 405:
        assert "Allow" in resp.headers


async def test_readyz_not_ready_is_json() -> None:
    berth = make_berth()
    berth.core.ready = False
    async with TestClient(TestServer(build_app(berth.core, berth.extender))) as c:
        resp = await c.get("/readyz")
        assert (resp.status, resp.content_type) == (503, "application/json")
        assert await resp.json() == {"Error": "cache not synced"}


@pytest.mark.parametrize(
    ("kind", "status"),
    [
        (errors.InvalidArgument, 400),
        (errors.NotFound, 404),
        (errors.AlreadyExists, 409),
        (errors.FailedPrecondition, 412),
        (errors.ResourceExhausted, 413),
        (errors.Unauthenticated, 401),
        (errors.PermissionDenied, 403),
    ],
)
async def test_each_error_kind_gets_its_status_and_a_bounded_message(
    kind: type[errors.BerthError], status: int
) -> None:
    resp = http_errors.from_exception(kind("x" * 10_000), "filter: ")
    assert resp.status == status
    assert resp.body is not None
    got = json.loads(bytes(resp.body))  # type: ignore[arg-type]
    assert got["Error"].startswith("filter: xxx")
    assert len(got["Error"]) <= errors.MAX_MESSAGE_CHARS


async def test_a_bug_is_a_500_logged_once_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    berth = make_berth()

    def broken(*_: Any, **__: Any) -> Any:
        raise ZeroDivisionError("internal detail")

    berth.extender.filter = broken  # type: ignore[method-assign]
    async with TestClient(TestServer(build_app(berth.core, berth.extender))) as c:
        with caplog.at_level(logging.ERROR):
            got = await post(c, "filter", args(api_pod(), names=["big"]), status=500)
    assert got == {"Error": "filter: internal error; see the server log"}
    logged = [r for r in caplog.records if r.exc_info]
    assert len(logged) == 1 and "ZeroDivisionError" in caplog.text


async def test_a_bug_outside_the_extender_is_a_json_500(caplog: pytest.LogCaptureFixture) -> None:
    berth = make_berth()
    app = build_app(berth.core, berth.extender)

    async def boom(_: web.Request) -> web.Response:
        raise KeyError("nope")

    app.router.add_get("/boom", boom)
    async with TestClient(TestServer(app)) as c:
        resp = await c.get("/boom")
        assert (resp.status, resp.content_type) == (500, "application/json")
        assert await resp.json() == {"Error": "GET /boom: internal error; see the server log"}
    assert sum(1 for r in caplog.records if r.exc_info) == 1


# ---------------------------------------------------------------- protocol level


async def _raw(port: int, data: bytes) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


@pytest.fixture
async def port() -> AsyncIterator[int]:
    berth = make_berth()
    runner, bound = await server.start(berth.core, berth.extender, None)
    try:
        yield bound
    finally:
        await server.stop(runner, 1.0)


@pytest.mark.parametrize(
    ("request_bytes", "message"),
    [
        (b"\x16\x03\x01\x00\xa5garbage\r\n\r\n", "HTTPS traffic on an HTTP port"),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", ""),
        (b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n", ""),
        (b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", ""),
        (b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", ""),
        (b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", ""),
    ],
    ids=[
        "TLS to the plain port",
        "header without colon",
        "bad version",
        "request line too long",
        "two Content-Lengths",
        "bad chunk size",
    ],
)
async def test_protocol_level_errors_are_json_400s(port: int, request_bytes: bytes, message: str) -> None:
    status, headers, body = await _raw(port, request_bytes)
    assert status == 400
    assert headers["content-type"].startswith("application/json")
    got = json.loads(body)
    assert set(got) == {"Error"} and message in got["Error"]


# ---------------------------------------------------------------- full-object mode duplicates


@pytest.mark.parametrize(
    ("verb", "body", "message"),
    [
        ("filter", args(api_pod(), nodes=[NODES[0], NODES[0], NODES[1]]), "big"),
        ("prioritize", args(api_pod(), nodes=[NODES[1], NODES[0], NODES[1]]), "small"),
        ("filter", args(api_pod(), names=["big", "small", "big"]), "big"),
        ("prioritize", args(api_pod(), names=["big", "big"]), "big"),
        ("filter", args(api_pod(), nodes=[{"metadata": {}}]), "name"),
    ],
    ids=[
        "filter: a node twice in Nodes",
        "prioritize: a node twice in Nodes",
        "filter: a name twice",
        "prioritize: a name twice",
        "a nameless node",
    ],
)
async def test_a_node_listed_twice_or_without_a_name_is_a_400(
    client: TestClient[Any, Any], verb: str, body: dict[str, Any], message: str
) -> None:
    got = await post(client, verb, body, status=400)
    assert got["Error"].startswith(f"{verb}: ") and message in got["Error"]
