"""The HTTP extender against kube-scheduler's wire format
(k8s.io/kube-scheduler/extender/v1 types, pkg/scheduler/extender.go)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from aiohttp.test_utils import TestClient, TestServer

from berth import app, config
from berth.adapters.http.server import build_app
from berth.cluster import model
from berth.cluster.embedded import EmbeddedCluster
from berth.scheduling.core import Core
from tests.http.payloads import api_node, api_pod, args, dumps, recase

NODES = [
    api_node("big", cpu="8", memory="16Gi"),
    api_node("small", cpu="1", memory="16Gi"),
    api_node("tainted", cpu="8", memory="16Gi", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
]
NAMES = [n["metadata"]["name"] for n in NODES]
INSUFFICIENT = ["Insufficient cpu"]
TAINT = "node(s) had untolerated taint(s)"  # v1.34.4 TaintToleration Filter, byte for byte


def make_berth(extra: dict[str, Any] | None = None) -> app.Berth:
    cfg = config.parse({"http": {"host": "127.0.0.1", "port": 0, "maxBodyBytes": 2 * 1024 * 1024}, **(extra or {})})
    berth = app.build(cfg, run_loop=False)
    core, cluster = berth.core, berth.cluster
    cluster.upsert_nodes([msgspec.convert(n, type=model.Node) for n in NODES])
    # "small" is 700m full: a 500m pod does not fit now, but would after preemption.
    cluster.upsert_pods([msgspec.convert(api_pod("resident", cpu="700m", node_name="small"), type=model.Pod)])
    core.ready = True
    return berth


@pytest.fixture
async def client() -> AsyncIterator[tuple[TestClient[Any, Any], Core, EmbeddedCluster]]:
    berth = make_berth()
    async with TestClient(TestServer(build_app(berth.core, berth.extender))) as c:
        yield c, berth.core, berth.cluster


async def post(c: TestClient[Any, Any], verb: str, body: bytes | Any, status: int = 200) -> Any:
    data = body if isinstance(body, bytes) else dumps(body)
    resp = await c.post(f"/scheduler/{verb}", data=data, headers={"Content-Type": "application/json"})
    text = await resp.read()
    assert resp.status == status, text
    assert resp.content_type == "application/json"
    return json.loads(text)


# ---------------------------------------------------------------- filter


async def test_filter_node_cache_mode_answers_names_and_every_node_is_accounted(client: Any) -> None:
    c, _, _ = client
    got = await post(c, "filter", args(api_pod(cpu="500m"), names=NAMES))
    assert got == {
        "Nodes": None,
        "NodeNames": ["big"],
        "FailedNodes": {"small": "Insufficient cpu"},
        "FailedAndUnresolvableNodes": {"tainted": TAINT},
        "Error": "",
    }


async def test_filter_full_node_mode_echoes_surviving_nodes_unchanged(client: Any) -> None:
    c, _, _ = client
    got = await post(c, "filter", args(api_pod(cpu="500m"), nodes=NODES))
    assert got["NodeNames"] is None
    assert got["Nodes"]["items"] == [NODES[0]]  # byte-for-byte the object sent, managedFields and all
    assert got["FailedNodes"] == {"small": "Insufficient cpu"}
    assert got["FailedAndUnresolvableNodes"] == {"tainted": TAINT}


async def test_filter_full_mode_judges_nodes_berth_has_never_seen() -> None:
    berth = make_berth()
    unknown = api_node("elsewhere", cpu="1", memory="1Gi")
    async with TestClient(TestServer(build_app(berth.core, berth.extender))) as c:
        got = await post(c, "filter", args(api_pod(cpu="2"), nodes=[unknown]))
    assert got["Nodes"]["items"] == []
    assert got["FailedAndUnresolvableNodes"] == {"elsewhere": "Insufficient cpu"}  # exceeds the whole node


async def test_filter_accepts_the_v1_2_form_with_pod_and_nodes_only(client: Any) -> None:
    c, _, _ = client
    got = await post(c, "filter", {"Pod": api_pod(), "Nodes": {"items": NODES[:1]}})
    assert [n["metadata"]["name"] for n in got["Nodes"]["items"]] == ["big"]


@pytest.mark.parametrize("how", ["lower", "upper"])
async def test_keys_match_in_any_case_like_go(client: Any, how: str) -> None:
    c, _, _ = client
    got = await post(c, "filter", recase(args(api_pod(), names=["big", "small"]), how))
    assert got["NodeNames"] == ["big"]


async def test_filter_reports_nodes_berth_does_not_know_as_unresolvable(client: Any) -> None:
    c, _, _ = client
    got = await post(c, "filter", args(api_pod(), names=["big", "ghost"]))
    assert got["NodeNames"] == ["big"]
    assert set(got["FailedAndUnresolvableNodes"]) == {"ghost"}


async def test_filter_never_returns_a_node_that_was_not_asked_about(client: Any) -> None:
    c, _, _ = client
    got = await post(c, "filter", args(api_pod(cpu="1m"), names=["small"]))
    assert got["NodeNames"] == ["small"]


# ---------------------------------------------------------------- prioritize


@pytest.mark.parametrize("mode", ["names", "nodes"])
async def test_prioritize_answers_a_bare_host_priority_list_within_0_to_10(client: Any, mode: str) -> None:
    c, _, _ = client
    body = args(api_pod(), names=["big", "tainted"]) if mode == "names" else args(api_pod(), nodes=[NODES[0], NODES[2]])
    got = await post(c, "prioritize", body)
    assert isinstance(got, list)
    assert [h["Host"] for h in got] == ["big", "tainted"]
    assert all(set(h) == {"Host", "Score"} and 0 <= h["Score"] <= 10 for h in got)


# ---------------------------------------------------------------- preempt


async def test_preempt_keeps_only_nodes_where_evicting_victims_makes_room(client: Any) -> None:
    c, _, cluster = client
    low = [api_pod(f"low-{i}", cpu="3", priority=0, node_name="big") for i in range(2)]
    cluster.upsert_pods([msgspec.convert(p, type=model.Pod) for p in low])
    pod = api_pod("urgent", cpu="4", priority=1000)
    body = {
        "Pod": pod,
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {
            "big": {"Pods": [{"UID": "uid-default-low-0"}, {"UID": "uid-default-low-1"}], "NumPDBViolations": 0},
            "small": {"Pods": [], "NumPDBViolations": 0},
        },
    }
    got = await post(c, "preempt", body)
    assert list(got) == ["NodeNameToMetaVictims"]
    victims = got["NodeNameToMetaVictims"]
    assert list(victims) == ["big"]  # never a node with no victims
    assert len(victims["big"]["Pods"]) == 1  # one eviction is enough: fewer than offered
    assert victims["big"]["NumPDBViolations"] == 0


async def test_preempt_accepts_full_victim_pods(client: Any) -> None:
    c, _, cluster = client
    low = api_pod("low", cpu="7", priority=0, node_name="big")
    cluster.upsert_pods([msgspec.convert(low, type=model.Pod)])
    body = {
        "pod": api_pod("urgent", cpu="4", priority=10),
        "nodeNameToVictims": {"big": {"pods": [low], "numPDBViolations": 0}},
    }
    got = await post(c, "preempt", body)
    assert got == {"NodeNameToMetaVictims": {"big": {"Pods": [{"UID": "uid-default-low"}], "NumPDBViolations": 0}}}


# ---------------------------------------------------------------- bind


async def test_bind_is_idempotent_and_refuses_another_node(client: Any) -> None:
    c, _, cluster = client
    cluster.upsert_pods([msgspec.convert(api_pod("web-1"), type=model.Pod)])
    bind = {"PodName": "web-1", "PodNamespace": "default", "PodUID": "uid-default-web-1", "Node": "big"}
    assert await post(c, "bind", bind) == {"Error": ""}
    assert await post(c, "bind", bind) == {"Error": ""}
    other = await post(c, "bind", {**bind, "Node": "small"})
    assert "already assigned to node 'big'" in other["Error"]
    assert cluster.bindings == [("default/web-1", "big")]


async def test_bind_of_an_unknown_pod_says_not_found(client: Any) -> None:
    c, _, _ = client
    got = await post(c, "bind", {"PodName": "nope", "PodNamespace": "default", "PodUID": "x", "Node": "big"})
    assert "not found" in got["Error"]


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("verb", "body", "message"),
    [
        ("filter", b"{not json", "ExtenderArgs: "),
        ("filter", b"[1, 2]", "ExtenderArgs: expected a JSON object"),
        ("filter", b"", "request body: empty"),
        ("filter", dumps({"Nodes": None, "NodeNames": ["big"]}), "Pod: required"),
        ("filter", dumps({"Pod": api_pod()}), "either NodeNames or Nodes is required"),
        (
            "filter",
            dumps({"Pod": {"metadata": {"name": "x"}, "spec": {"containers": "oops"}}, "NodeNames": []}),
            "Pod.spec.containers: Expected `array`, got `str`",
        ),
        ("prioritize", dumps({"Pod": api_pod(), "NodeNames": "big"}), "NodeNames: "),
        ("preempt", dumps({"Pod": api_pod(), "NodeNameToMetaVictims": {"big": {"Pods": [{}]}}}), "UID: required"),
        ("bind", dumps({"PodNamespace": "default", "Node": "big"}), "PodName: required"),
        ("bind", dumps({"PodName": "x"}), "Node: required"),
    ],
    ids=[
        "malformed JSON",
        "not an object",
        "empty body",
        "no pod",
        "neither names nor nodes",
        "pod of the wrong shape",
        "NodeNames not a list",
        "meta victim without UID",
        "bind without pod name",
        "bind without node",
    ],
)
async def test_bad_requests_get_a_clear_400_and_the_service_stays_up(
    client: Any, verb: str, body: bytes, message: str
) -> None:
    c, _, _ = client
    got = await post(c, verb, body, status=400)
    assert got["Error"].startswith(f"{verb}: ")
    assert message in got["Error"]
    assert (await post(c, "filter", args(api_pod(), names=["big"])))["NodeNames"] == ["big"]


async def test_oversized_body_gets_413(client: Any) -> None:
    c, _, _ = client
    huge = args(api_pod(), nodes=[api_node(f"n{i}") for i in range(2000)])
    got = await post(c, "filter", huge, status=413)
    assert "more than http.maxBodyBytes (2097152 bytes)" in got["Error"]


async def test_wrong_method_gets_405(client: Any) -> None:
    c, _, _ = client
    resp = await c.get("/scheduler/filter")
    assert resp.status == 405


async def test_unknown_fields_are_ignored_as_go_does(client: Any) -> None:
    c, _, _ = client
    got = await post(c, "filter", {**args(api_pod(), names=["big"]), "SomethingNew": 1})
    assert got["NodeNames"] == ["big"]


async def test_url_prefix_is_configurable() -> None:
    berth = make_berth({"extender": {"urlPrefix": "/berth/v1"}})
    async with TestClient(TestServer(build_app(berth.core, berth.extender))) as c:
        resp = await c.post(
            "/berth/v1/filter", data=dumps(args(api_pod(), names=["big"])), headers={"Content-Type": "application/json"}
        )
        assert resp.status == 200
        assert (await c.post("/scheduler/filter", data=b"{}")).status == 404


async def test_requests_are_counted_in_metrics(client: Any) -> None:
    c, _, _ = client
    await post(c, "filter", args(api_pod(), names=["big"]))
    await post(c, "filter", b"nope", status=400)
    text = await (await c.get("/metrics")).text()
    assert 'berth_extender_requests_total{code="200",verb="filter"} 1.0' in text
    assert 'berth_extender_requests_total{code="400",verb="filter"} 1.0' in text


@pytest.mark.parametrize(
    ("names", "scores"),
    [([], []), (["a"], [0]), (["n-1", "n-2", "n-3"], [10, 5, 0]), (['we"ird\\name', "é"], [3, 11])],
    ids=["empty", "one", "several", "characters JSON must escape, score out of the usual range"],
)
def test_host_priority_list_is_byte_identical_to_a_json_encoder(names: list[str], scores: list[int]) -> None:
    from berth.adapters.http.extender import _host_priority_list, _HostPieces

    want = msgspec.json.encode([{"Host": n, "Score": s} for n, s in zip(names, scores, strict=True)])
    assert _host_priority_list(names, scores, _HostPieces()) == want
