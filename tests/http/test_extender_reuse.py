"""What the extender door keeps between requests (``_Memo``: pods by their
bytes, NodeNames lists by their bytes with their rows and encoded answer
pieces, Filter's survivors as the list Prioritize is sent next) never
changes an answer: after any cluster change a warm server answers byte for
byte as a fresh one, and every memo stays within its bounds."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np
import pytest
from aiohttp.test_utils import TestClient, TestServer

from berth.adapters.http import bounds, nodelist
from berth.adapters.http import extender as ext
from berth.adapters.http.server import build_app
from berth.cluster import model
from berth.cluster.embedded import EmbeddedCluster
from berth.scheduling.verbs import FilterResult, NodeNames
from tests.http.payloads import api_node, api_pod, args, dumps
from tests.http.test_extender_wire import make_berth

ZONE_PREFERENCE = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 50,
                "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
            }
        ]
    }
}
# "later" is not a node until a change adds it; "big", "small", "tainted" are make_berth's.
NAMES = ["big", "small", "tainted", "n-1", "n-2", "later"]


def _pod(name: str = "web-1") -> dict[str, Any]:
    return api_pod(name, cpu="500m", affinity=ZONE_PREFERENCE)


def _node(name: str, **kw: Any) -> model.Node:
    return msgspec.convert(api_node(name, **kw), type=model.Node)


def _setup(cluster: EmbeddedCluster) -> None:
    cluster.upsert_nodes([_node("n-1", cpu="2"), _node("n-2", cpu="4", labels={"disk": "ssd"})])


def _bound_pod(name: str, node: str, cpu: str) -> model.Pod:
    return msgspec.convert(api_pod(name, cpu=cpu, node_name=node), type=model.Pod)


Change = Callable[[EmbeddedCluster], object]

CHANGES: list[tuple[str, Change]] = [
    ("nothing", lambda c: None),
    ("a listed node is added", lambda c: c.upsert_nodes([_node("later", cpu="16")])),
    ("a node is deleted", lambda c: c.delete_nodes(["n-1"])),
    ("a node is cordoned", lambda c: c.upsert_nodes([_cordoned("n-2")])),
    ("a node is tainted", lambda c: c.upsert_nodes([_node("n-2", taints=[{"key": "k", "effect": "NoSchedule"}])])),
    ("a node is relabelled", lambda c: c.upsert_nodes([_node("n-1", cpu="2", labels={"disk": "ssd"})])),
    ("a node's allocatable changes", lambda c: c.upsert_nodes([_node("n-2", cpu="1", labels={"disk": "ssd"})])),
    ("a pod is bound to a node", lambda c: c.upsert_pods([_bound_pod("filler", "n-1", "1800m")])),
    ("a pod leaves a node", lambda c: c.delete_pods(["default/resident"])),
]


def _cordoned(name: str) -> model.Node:
    node = api_node(name, cpu="4", labels={"disk": "ssd"})
    node["spec"]["unschedulable"] = True
    return msgspec.convert(node, type=model.Node)


async def _ask(c: TestClient[Any, Any], verb: str, body: bytes) -> bytes:
    resp = await c.post(f"/scheduler/{verb}", data=body, headers={"Content-Type": "application/json"})
    text = await resp.read()
    assert resp.status == 200, text
    return text


def go_json(obj: Any) -> bytes:
    """As encoding/json writes it: compact, keys in the order given (ExtenderArgs' field order)."""
    return json.dumps(obj, separators=(",", ":")).encode()


async def _cycle(c: TestClient[Any, Any], pod: dict[str, Any], encode: Callable[[Any], bytes]) -> list[bytes]:
    """One kube-scheduler cycle: filter, then prioritize of all the names and of the survivors."""
    filtered = await _ask(c, "filter", encode(args(pod, names=NAMES)))
    survivors = json.loads(filtered)["NodeNames"]
    everything = await _ask(c, "prioritize", encode(args(pod, names=NAMES)))
    return [filtered, everything, await _ask(c, "prioritize", encode(args(pod, names=survivors)))]


@pytest.mark.parametrize("encode", [go_json, dumps], ids=["as encoding/json writes it", "spaced"])
@pytest.mark.parametrize("change", [c for _, c in CHANGES], ids=[n for n, _ in CHANGES])
async def test_a_warm_server_answers_as_a_fresh_one_after_a_cluster_change(
    change: Change, encode: Callable[[Any], bytes]
) -> None:
    warm = make_berth()
    _setup(warm.cluster)
    async with TestClient(TestServer(build_app(warm.core, warm.extender))) as c:
        pod = _pod()
        first = await _cycle(c, pod, encode)
        assert first == await _cycle(c, pod, encode)  # the same pod and lists again: every memo hit, same bytes
        change(warm.cluster)
        after = await _cycle(c, pod, encode)
        after_next_pod = await _cycle(c, _pod("web-2"), encode)
    fresh = make_berth()
    _setup(fresh.cluster)
    change(fresh.cluster)
    async with TestClient(TestServer(build_app(fresh.core, fresh.extender))) as c:
        assert after == await _cycle(c, pod, encode)
        assert after_next_pod == await _cycle(c, _pod("web-2"), encode)


def _tail(names: list[str]) -> bytes:
    return b',"NodeNames":' + go_json(names) + b"}"


POD_JSON = go_json(_pod())

# Bodies ending with a kept list's bytes whose rest is not kube-scheduler's
# shape: each must be answered as a server that keeps nothing answers it.
TAILED = [
    ("kube-scheduler's shape", b'{"Pod":' + POD_JSON + b',"Nodes":null' + _tail(["big", "n-1"])),
    ("Nodes given too", b'{"Pod":' + POD_JSON + b',"Nodes":{"items":[]}' + _tail(["big", "n-1"])),
    ("NodeNames twice", b'{"Pod":' + POD_JSON + b',"NodeNames":["small"]' + _tail(["big", "n-1"])),
    ("keys in another case", b'{"pod":' + POD_JSON + b',"nodes":null' + _tail(["big", "n-1"])),
    ("a broken rest", b'{"Pod":' + POD_JSON[:-1] + b',"Nodes":null' + _tail(["big", "n-1"])),
    ("an unterminated string before", b'{"Pod":' + POD_JSON + b',"x":"' + _tail(["big", "n-1"])),
    ("no pod", b'{"Nodes":null' + _tail(["big", "n-1"])),
    ("a bad pod", b'{"Pod":' + go_json(api_pod(cpu="1x")) + _tail(["big", "n-1"])),
]


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
@pytest.mark.parametrize("body", [b for _, b in TAILED], ids=[n for n, _ in TAILED])
async def test_a_body_ending_with_a_kept_list_is_answered_as_without_it(verb: str, body: bytes) -> None:
    answers = []
    for warm in (True, False):
        berth = make_berth()
        _setup(berth.cluster)
        async with TestClient(TestServer(build_app(berth.core, berth.extender))) as c:
            if warm:  # the list is kept, by its bytes
                await _ask(c, verb, go_json(args(_pod("other"), names=["big", "n-1"])))
            resp = await c.post(f"/scheduler/{verb}", data=body, headers={"Content-Type": "application/json"})
            answers.append((resp.status, await resp.read()))
    assert answers[0] == answers[1]


async def test_filters_survivors_are_kept_as_the_list_prioritize_gets_next() -> None:
    berth = make_berth()
    _setup(berth.cluster)
    application = build_app(berth.core, berth.extender)
    async with TestClient(TestServer(application)) as c:
        filtered = json.loads(await _ask(c, "filter", dumps(args(_pod(), names=NAMES))))
        assert filtered["NodeNames"] == ["big", "n-1", "n-2"]  # small is full, tainted untolerated, later unknown
        kept = application[ext.MEMO].lists.get(msgspec.Raw(msgspec.json.encode(filtered["NodeNames"])))
        assert kept.nodes.names == filtered["NodeNames"]
        assert kept is application[ext.MEMO].lists.get(msgspec.Raw(msgspec.json.encode(filtered["NodeNames"])))


async def test_a_rejected_request_keeps_nothing() -> None:
    berth = make_berth()
    application = build_app(berth.core, berth.extender)
    memo = application[ext.MEMO]
    async with TestClient(TestServer(application)) as c:
        await _ask(c, "filter", dumps(args(_pod(), names=["big"])))  # this pod and list are kept
        assert len(memo.lists._entries) == len(memo.pods._by_raw) == 1
        for body in (
            dumps(args(_pod(), names=["big", "big"])),  # a repeated name
            dumps(args(_pod(), names=["big", ""])),  # a nameless node
            dumps(args(api_pod(cpu="1x"), names=["big"])),  # a quantity the core cannot take
            dumps(args(api_pod(priority=1 << 70), names=["big"])),  # an integer outside int64
        ):
            before = ([e.raw for e in memo.lists._entries], list(memo.pods._by_raw))
            resp = await c.post("/scheduler/filter", data=body, headers={"Content-Type": "application/json"})
            assert resp.status == 400, await resp.text()
            assert "Error" in await resp.json()
            assert ([e.raw for e in memo.lists._entries], list(memo.pods._by_raw)) == before


def test_name_lists_stay_within_entries_and_bytes() -> None:
    lists = ext._NameLists()
    raws = [msgspec.json.encode([f"node-{k}-{i}" for i in range(50)]) for k in range(ext._NameLists.MAX_ENTRIES + 3)]
    for raw in raws:
        assert lists.get(msgspec.Raw(raw)).nodes.names == json.loads(raw)
    assert [e.raw for e in lists._entries] == raws[::-1][: ext._NameLists.MAX_ENTRIES]
    big = msgspec.json.encode([f"n-{i:07d}" for i in range(ext._NameLists.MAX_BYTES // 8)])
    assert len(big) > ext._NameLists.MAX_BYTES
    assert len(lists.get(msgspec.Raw(big)).nodes.names) == ext._NameLists.MAX_BYTES // 8  # answered, not kept
    assert all(e.raw != big for e in lists._entries)
    assert lists._bytes == sum(len(e.raw) for e in lists._entries) <= ext._NameLists.MAX_BYTES


def test_pods_stay_within_entries_and_bytes() -> None:
    pods = ext._Pods()
    raws = [json.dumps(api_pod(f"p-{k}")).encode() for k in range(ext._Pods.MAX_ENTRIES + 2)]
    for raw in raws:
        assert pods.get(msgspec.Raw(raw)).pod.metadata.name == json.loads(raw)["metadata"]["name"]
    assert list(pods._by_raw) == raws[-ext._Pods.MAX_ENTRIES :]
    assert pods.get(msgspec.Raw(raws[-1])) is pods.get(msgspec.Raw(raws[-1]))
    large = api_pod("large")
    large["metadata"]["annotations"] = {"a": "x" * ext._Pods.MAX_POD_BYTES}
    raw = json.dumps(large).encode()
    assert pods.get(msgspec.Raw(raw)) is not pods.get(msgspec.Raw(raw))  # decoded each time, never kept
    assert raw not in pods._by_raw
    assert pods._bytes == sum(map(len, pods._by_raw)) <= ext._Pods.MAX_BYTES


def _host_piece(name: str) -> bytes:
    return b',{"Host":' + msgspec.json.encode(name) + b',"Score":'


# (what another caller's lists left in the table, the list an answer needs);
# the table is made to hold 8 names and 2 KiB.
HOST_PIECE_CASES = [
    ("crossing the entries bound after another caller's list", [f"other-{i}" for i in range(7)], ["other-0", "a", "b"]),
    ("longer than the entries bound", [], [f"n-{i}" for i in range(20)]),
    ("longer than the entries bound, partly seen", [f"n-{i}" for i in range(5)], [f"n-{i}" for i in range(20)]),
    ("names passing the bytes bound", [], [f"{i}-" + "x" * 300 for i in range(10)]),
    ("crossing the bytes bound after another caller's list", ["y" * 500, "z" * 500], ["y" * 500, "w" * 300]),
]


@pytest.mark.parametrize(("before", "names"), [c[1:] for c in HOST_PIECE_CASES], ids=[c[0] for c in HOST_PIECE_CASES])
def test_host_pieces_empty_the_table_without_taking_the_answers_pieces(
    monkeypatch: pytest.MonkeyPatch, before: list[str], names: list[str]
) -> None:
    monkeypatch.setattr(ext._HostPieces, "MAX_ENTRIES", 8)
    monkeypatch.setattr(ext._HostPieces, "MAX_BYTES", 2048)
    hosts = ext._HostPieces()
    hosts.of(before)
    assert hosts.of(names) == [_host_piece(n) for n in names]
    assert hosts.of(names) == [_host_piece(n) for n in names]  # again, from what the first kept
    assert len(hosts._by_name) <= 8
    assert hosts._bytes <= 2048


async def test_prioritize_answers_a_list_bigger_than_the_host_piece_bound() -> None:
    berth = make_berth({"http": {"host": "127.0.0.1", "port": 0, "maxBodyBytes": 16 << 20}})
    names = ["big", *(f"{i:05d}-" + "n" * 240 for i in range(18_000))]  # 4.4 MB of names; 9 MB of pieces
    async with TestClient(TestServer(build_app(berth.core, berth.extender))) as c:
        for _ in range(2):
            got = json.loads(await _ask(c, "prioritize", go_json(args(_pod(), names=names))))
            assert [h["Host"] for h in got] == names


async def test_another_callers_lists_cannot_make_prioritize_fail() -> None:
    """A caller fills the host-piece table to just below its bound; the next
    list crosses it while its answer is being built, kube-scheduler's or not."""
    berth = make_berth({"http": {"host": "127.0.0.1", "port": 0, "maxBodyBytes": 16 << 20}})
    filler = [f"filler-{i}" for i in range(ext._HostPieces.MAX_ENTRIES - 1)]
    names = ["big", "small", *(f"new-{i}" for i in range(100))]
    async with TestClient(TestServer(build_app(berth.core, berth.extender))) as c:
        for _ in range(3):
            await _ask(c, "prioritize", go_json(args(_pod("other"), names=filler)))
            got = json.loads(await _ask(c, "prioritize", go_json(args(_pod(), names=names))))
            assert [h["Host"] for h in got] == names


@pytest.mark.parametrize(
    ("names", "passed", "failed", "unresolvable", "error"),
    [
        (["a", "b"], None, {}, {}, ""),
        (["a", "b", "c"], ["a"], {"b": "Insufficient cpu"}, {"c": "node(s) had untolerated taint(s)"}, ""),
        (["a"], [], {"a": 'a "quoted" \\ reason'}, {}, ""),
        ([], None, {}, {}, ""),
        (["a"], [], {}, {}, "PluginX: failed"),
    ],
    ids=["every node passes", "some fail", "none passes", "no nodes", "an error"],
)
def test_node_names_filter_answers_are_the_bytes_a_json_encoder_writes(
    names: list[str], passed: list[str] | None, failed: dict[str, str], unresolvable: dict[str, str], error: str
) -> None:
    a = ext._Args(dumps(args(_pod(), names=names)), nodelist.NodeListReader(), images=False)
    assert a.name_list is not None
    res = FilterResult(a.name_list.nodes.names if passed is None else passed, failed, unresolvable, error)
    want = msgspec.json.encode(
        {
            "Nodes": None,
            "NodeNames": res.passed,
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable,
            "Error": error,
        }
    )
    lists = ext._NameLists()
    assert ext._filter_body(a, res, lists) == want
    assert ext._filter_body(a, res, lists) == want  # again, from what the first kept


def test_a_kept_frame_answers_any_scores_as_a_json_encoder() -> None:
    names = ["n-1", 'we"ird', "é", "n-4"]
    hosts = ext._HostPieces()
    frame = ext._Frame(hosts.of(names))
    for scores in ([0, 10, 5, 3], [10, 10, 10, 10], [1, 2, 3, 4], [0, 0, 0, 11], [10, 0, 0, 10], [-1, 0, 9, 10]):
        want = msgspec.json.encode([{"Host": n, "Score": s} for n, s in zip(names, scores, strict=True)])
        assert ext._host_priority_list(names, np.asarray(scores), hosts, frame) == want


@pytest.mark.parametrize(
    ("doc", "within"),
    [
        (b'{"a":"short","n":9223372036854775807}', False),  # 19 digits: may not fit, walked
        (b'{"a":"short","n":922337203685477580}', True),
        (b'{"a":"x","n":-12}', True),
        (b'{"a":"' + b"x" * bounds.MAX_STRING_BYTES + b'"}', False),
    ],
    ids=["19 digits", "18 digits", "small", "longer than a string may be"],
)
def test_only_documents_that_cannot_break_a_bound_skip_the_walk(doc: bytes, within: bool) -> None:
    assert bounds.within_bounds(doc) is within
    if within:
        bounds.check_bounds(msgspec.json.decode(doc), "doc")  # what the walk would have said


def test_a_resolution_is_read_only_for_the_plugins() -> None:
    berth = make_berth()
    found = NodeNames(["big", "small"]).resolve(berth.core.snapshot())
    with pytest.raises(ValueError, match="read-only"):
        found.rows[0] = 1


def test_each_app_keeps_its_own_memo() -> None:
    one, two = make_berth(), make_berth()
    assert build_app(one.core, one.extender)[ext.MEMO] is not build_app(two.core, two.extender)[ext.MEMO]


@pytest.mark.parametrize(
    ("body", "fast"),
    [(b, n == "kube-scheduler's shape") for n, b in TAILED if n not in ("no pod", "a bad pod")],
    ids=[n for n, _ in TAILED if n not in ("no pod", "a bad pod")],
)
def test_only_kube_schedulers_shape_skips_decoding_a_kept_list(body: bytes, fast: bool) -> None:
    memo = ext._Memo()
    kept = memo.lists.get(msgspec.Raw(go_json(["big", "n-1"])))
    found = ext._kept_tail(body, memo)
    assert (found is not None) is fast
    if found is not None:
        assert found[1] is kept
        assert found[0].pod.metadata.name == "web-1"
