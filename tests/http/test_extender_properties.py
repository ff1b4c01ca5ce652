"""Properties of the extender's decode/encode, whatever the input
(Hypothesis; ``HYPOTHESIS_PROFILE=fuzz`` runs many more examples).

- Valid ExtenderArgs in full-object mode: filter answers 200 and
  ``Nodes.items`` is exactly the surviving nodes, each byte for byte as sent
  (whatever its formatting), in input order, and every node is accounted
  for once.
- Junk (random bytes, random JSON, valid requests with a random part):
  never a 5xx, always ``{"Error": ...}`` JSON when not 200.

The handlers are called in-process (no socket per example) on one event
loop for the module.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any
from unittest import mock

import msgspec
import pytest
from aiohttp import streams, web
from aiohttp.test_utils import make_mocked_request
from hypothesis import given
from hypothesis import strategies as st

from berth.adapters.http.server import build_app
from tests.http.payloads import api_node, api_pod
from tests.http.test_extender_wire import make_berth

VERBS = ("filter", "prioritize", "preempt", "bind")


@pytest.fixture(scope="module")
def handlers() -> Iterator[tuple[asyncio.AbstractEventLoop, dict[str, Any]]]:
    loop = asyncio.new_event_loop()
    berth = make_berth()
    app = build_app(berth.core, berth.extender)
    routes = {r.resource.canonical.rsplit("/", 1)[-1]: r.handler for r in app.router.routes() if r.resource}
    yield loop, routes
    loop.close()


def _call(handlers: tuple[asyncio.AbstractEventLoop, dict[str, Any]], verb: str, body: bytes) -> web.Response:
    loop, routes = handlers

    async def go() -> web.Response:
        payload = streams.StreamReader(mock.Mock(_reading_paused=False), 2**16, loop=loop)
        payload.feed_data(body)
        payload.feed_eof()
        request = make_mocked_request(
            "POST", f"/scheduler/{verb}", headers={"Content-Type": "application/json"}, payload=payload
        )
        resp: web.Response = await routes[verb](request)
        return resp

    return loop.run_until_complete(go())


# ---------------------------------------------------------------- valid requests

_names = st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True)
_cpu = st.sampled_from(["0", "100m", "500m", "1", "2", "4", "8"])
_memory = st.sampled_from(["0", "128Mi", "1Gi", "8Gi", "16Gi"])
_taints = st.lists(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(["dedicated", "gpu"]),
            "value": st.sampled_from(["", "x"]),
            "effect": st.sampled_from(["NoSchedule", "PreferNoSchedule"]),
        }
    ),
    max_size=2,
    unique_by=lambda t: (t["key"], t["effect"]),
)
_formats = st.sampled_from(
    [{}, {"indent": 2}, {"separators": (",", ":")}, {"sort_keys": True}, {"indent": "\t", "ensure_ascii": False}]
)


@st.composite
def _raw_nodes(draw: st.DrawFn) -> list[tuple[str, bytes]]:
    names = draw(st.lists(_names, min_size=0, max_size=8, unique=True))
    out = []
    for name in names:
        node = api_node(name, cpu=draw(_cpu), memory=draw(_memory), taints=draw(_taints) or None)
        if draw(st.booleans()):
            node["metadata"]["annotations"]["note"] = draw(st.text(max_size=20))
        out.append((name, json.dumps(node, **draw(_formats)).encode()))
    return out


class _NodeList(msgspec.Struct):
    items: list[msgspec.Raw]


class _FilterAnswer(msgspec.Struct):
    Nodes: _NodeList
    FailedNodes: dict[str, str]
    FailedAndUnresolvableNodes: dict[str, str]


@given(
    pod=st.builds(lambda cpu, mem: api_pod(cpu=cpu, memory=mem), _cpu, _memory),
    nodes=_raw_nodes(),
    spacing=st.sampled_from([b"", b" ", b"\n  "]),
)
def test_filter_in_full_mode_echoes_exactly_the_surviving_nodes_byte_for_byte(
    handlers: Any, pod: dict[str, Any], nodes: list[tuple[str, bytes]], spacing: bytes
) -> None:
    items = (b"," + spacing).join(raw for _, raw in nodes)
    body = b'{"Pod":' + json.dumps(pod).encode() + b',"Nodes":{"metadata":{},"items":[' + spacing + items + b"]}}"
    resp = _call(handlers, "filter", body)
    assert resp.status == 200, resp.body
    assert isinstance(resp.body, bytes)

    got = msgspec.json.decode(resp.body, type=_FilterAnswer)
    failed = set(got.FailedNodes) | set(got.FailedAndUnresolvableNodes)
    assert not set(got.FailedNodes) & set(got.FailedAndUnresolvableNodes)
    assert failed <= {name for name, _ in nodes}
    want = [raw for name, raw in nodes if name not in failed]
    assert [bytes(r) for r in got.Nodes.items] == want


# ---------------------------------------------------------------- junk

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.sampled_from(["1.5.3Gi", "1e400", "-1", "NaN", "", "1Ei", "9" * 40]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
_keys = st.sampled_from(
    [
        "Pod",
        "Nodes",
        "NodeNames",
        "pod",
        "NODES",
        "NodeNameToVictims",
        "NodeNameToMetaVictims",
        "PodName",
        "Node",
        "PodUID",
    ]
)


def _skeleton(verb: str) -> dict[str, Any]:
    pod = api_pod()
    return {
        "filter": {"Pod": pod, "Nodes": {"items": [api_node("big")]}, "NodeNames": None},
        "prioritize": {"Pod": pod, "NodeNames": ["big", "small"]},
        "preempt": {"Pod": pod, "NodeNameToMetaVictims": {"big": {"Pods": [{"UID": "u"}], "NumPDBViolations": 0}}},
        "bind": {"PodName": "web-1", "PodNamespace": "default", "PodUID": "u", "Node": "big"},
    }[verb]


def _replace(doc: Any, path: list[int], value: Any) -> Any:
    """``doc`` with the subtree that ``path`` picks (child indexes, taken modulo) replaced by ``value``."""
    if not path or not isinstance(doc, dict | list) or not doc:
        return value
    if isinstance(doc, dict):
        key = list(doc)[path[0] % len(doc)]
        return {**doc, key: _replace(doc[key], path[1:], value)}
    i = path[0] % len(doc)
    return [*doc[:i], _replace(doc[i], path[1:], value), *doc[i + 1 :]]


@st.composite
def _junk(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["bytes", "json", "keys", "mutated"]))
    if kind == "bytes":
        return draw(st.binary(min_size=1, max_size=200))
    if kind == "json":
        return json.dumps(draw(_json)).encode()
    if kind == "keys":
        return json.dumps(draw(st.dictionaries(_keys, _json, max_size=4))).encode()
    doc = _replace(_skeleton(draw(st.sampled_from(VERBS))), draw(st.lists(st.integers(0, 50), max_size=8)), draw(_json))
    return json.dumps(doc).encode()


@given(verb=st.sampled_from(VERBS), body=_junk())
def test_junk_never_gets_a_5xx(handlers: Any, verb: str, body: bytes) -> None:
    resp = _call(handlers, verb, body)
    assert resp.status < 500, resp.body
    assert resp.content_type == "application/json"
    if resp.status != 200:
        assert isinstance(resp.body, bytes)
        assert set(json.loads(resp.body)) == {"Error"}
