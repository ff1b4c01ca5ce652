"""The dashboard's JSON and event-stream endpoints (``/ui/api/*``) with
aiohttp's test client, on a running Berth: what each returns, that bad
parameters are a 400 naming the field and change nothing, that every route
is read-only, and that a stopping server ends open event streams at once."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from berth.adapters.http import dashboard, server, ui
from berth.cluster import model
from berth.quota.tree import LABEL_QUEUE
from berth.testing import make_node, make_pod
from tests.loop.conftest import Berth, make_config, running
from tests.support import counting_turns

Client = TestClient[Any, Any]

GPU_TAINT = model.Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")


def pod(name: str, cpu: str, **kw: Any) -> model.Pod:
    return make_pod(name, scheduler_name="berth", requests={"cpu": cpu}, **kw)


@pytest.fixture
async def berth() -> AsyncIterator[Berth]:
    """n0 (8 cpu) runs someone else's 1-cpu pod; n1 is cordoned; g0 has GPUs
    and a taint. Berth places "a" (queue q, 2 cpu) on n0; "b" would take q
    over its 3-cpu max; no node fits "huge"."""
    cfg = make_config(
        http={"host": "127.0.0.1", "port": 0},
        ui={"host": "127.0.0.1", "port": 0},
        queues=[{"name": "q", "guaranteed": {"cpu": "2"}, "max": {"cpu": "3"}}],
    )
    async with running(cfg) as b:
        b.nodes(
            make_node("n0", cpu="8", memory="8Gi", pods=110),
            make_node("n1", cpu="2", memory="4Gi", pods=110, unschedulable=True),
            make_node("g0", cpu="8", memory="16Gi", pods=110, allocatable={"nvidia.com/gpu": 2}, taints=[GPU_TAINT]),
        )
        b.pods(make_pod("resident", requests={"cpu": "1", "memory": "2Gi"}, node_name="n0"))
        b.pods(pod("a", "2", labels={LABEL_QUEUE: "q"}))
        await b.settle()
        b.pods(pod("b", "2", labels={LABEL_QUEUE: "q"}), pod("huge", "64", namespace="big"))
        await b.settle()
        yield b


@pytest.fixture
async def client(berth: Berth) -> AsyncIterator[Client]:
    async with TestClient(TestServer(dashboard.build_app(berth.core))) as c:
        yield c


async def get(c: Client, path: str, status: int = 200) -> Any:
    resp = await c.get(path, allow_redirects=False)
    body = await resp.read()
    assert resp.status == status, body
    assert resp.content_type == "application/json"
    return json.loads(body)


# ---------------------------------------------------------------- the page


@pytest.mark.parametrize(
    ("path", "ctype", "holds"),
    [
        ("/ui/", "text/html", b'<canvas id="heatmap"'),
        ("/ui/index.html", "text/html", b"<title>Berth</title>"),
        ("/ui/app.js", "javascript", b"EventSource"),
        ("/ui/app.css", "text/css", b"#heatmap"),
    ],
)
async def test_the_page_and_its_files_come_from_the_package(
    client: Client, path: str, ctype: str, holds: bytes
) -> None:
    resp = await client.get(path)
    assert resp.status == 200
    assert ctype in resp.headers["Content-Type"]
    assert holds in await resp.read()


async def test_ui_without_its_slash_redirects_and_an_unknown_file_is_a_json_404(client: Client) -> None:
    resp = await client.get("/ui", allow_redirects=False)
    assert (resp.status, resp.headers["Location"]) == (302, "/ui/")
    body = await get(client, "/ui/nope.js", 404)
    assert "no file 'nope.js' in the dashboard" in body["Error"]


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize(
    "path", ["/ui/", "/ui/api/nodes", "/ui/api/pods", "/ui/api/pods/default/b", "/ui/api/decisions"]
)
async def test_every_route_is_read_only(client: Client, method: str, path: str) -> None:
    resp = await client.request(method, path)
    assert resp.status == 405
    assert "Error" in await resp.json()


# ---------------------------------------------------------------- nodes and queues


async def test_the_heat_map_sends_each_nodes_share_per_resource_in_permille(client: Client) -> None:
    d = await get(client, "/ui/api/nodes")
    assert d["count"] == 3
    assert d["names"] == ["g0", "n0", "n1"]
    assert d["resources"][:3] == ["cpu", "memory", "pods"]
    assert "nvidia.com/gpu" in d["resources"]
    assert d["used"]["cpu"] == [0, 375, 0]  # n0: resident 1 + a 2 of 8 cpu
    assert d["used"]["nvidia.com/gpu"] == [0, -1, -1]  # -1: the node has none
    assert d["used"]["memory"][1] == 250  # 2Gi of 8Gi
    assert d["flags"] == [2, 0, 1]  # g0 tainted, n1 cordoned
    assert d["totals"]["cpu"] == {"allocatable": 18000, "requested": 3000}


async def test_a_nodes_detail_and_an_unknown_node(client: Client) -> None:
    d = await get(client, "/ui/api/nodes/n0")
    assert d["allocatable"]["cpu"] == 8000 and d["requested"]["cpu"] == 3000
    assert (d["pod_count"], d["pods"]) == (2, ["default/a", "default/resident"])
    d = await get(client, "/ui/api/nodes/g0")
    assert d["taints"] == ["nvidia.com/gpu=present:NoSchedule"]
    body = await get(client, "/ui/api/nodes/nope", 404)
    assert "node 'nope' not found" in body["Error"]


async def test_queues_carry_guarantee_usage_max_and_pending(client: Client) -> None:
    d = await get(client, "/ui/api/queues")
    assert d["enabled"] is True
    (q,) = d["queues"]
    assert (q["name"], q["guaranteed"], q["max"], q["allocated"]) == ("q", {"cpu": 2000}, {"cpu": 3000}, {"cpu": 2000})
    assert (q["pending_pods"], q["pending"]) == (1, {"cpu": 2000})
    assert d["capacity"]["cpu"] == 18000


# ---------------------------------------------------------------- pods


@pytest.mark.parametrize(
    ("query", "keys"),
    [
        ("", ["big/huge", "default/b"]),  # pending by default
        ("?phase=all", ["big/huge", "default/a", "default/b"]),
        ("?phase=Bound", ["default/a"]),
        ("?namespace=big", ["big/huge"]),
        ("?queue=q&phase=all", ["default/a", "default/b"]),
        ("?q=HUG", ["big/huge"]),  # name, case-insensitively
        ("?q=over%20max", ["default/b"]),  # or its last reason
        ("?limit=1", ["big/huge"]),
        ("?limit=1&offset=1", ["default/b"]),
        ("?offset=9", []),
    ],
)
async def test_pods_are_filtered_and_paged(client: Client, query: str, keys: list[str]) -> None:
    d = await get(client, "/ui/api/pods" + query)
    assert [f"{p['namespace']}/{p['name']}" for p in d["pods"]] == keys
    assert d["phases"] == {"Bound": 1, "Unschedulable": 2}  # over all pods, whatever the filter
    assert d["namespaces"] == ["big", "default"]


async def test_each_pending_pod_carries_its_why_summary(client: Client) -> None:
    d = await get(client, "/ui/api/pods")
    why = {p["name"]: p["why"] for p in d["pods"]}
    assert why["b"] == "queue q: cpu 4/3 over max"
    assert why["huge"].startswith("0/3 nodes are available:")
    b = next(p for p in d["pods"] if p["name"] == "b")
    assert (b["queue"], b["phase"], b["position"], b["requests"]) == ("q", "Unschedulable", 1, {"cpu": 2000})
    assert b["age"] >= 0


async def test_a_pending_pods_page_has_why_and_every_nodes_verdict_and_plugin_scores(client: Client) -> None:
    d = await get(client, "/ui/api/pods/default/b")
    assert d["why"]["summary"] == "queue q: cpu 4/3 over max"
    assert [b["kind"] for b in d["why"]["blockers"]] == ["quota"]
    e = d["explain"]
    assert (e["feasible_nodes"], e["total_nodes"], e["total"]) == (1, 3, 3)
    assert "NodeResourcesFit" in e["plugins"]
    first, *rest = e["nodes"]
    assert (first["node"], first["feasible"]) == ("n0", True)  # g0's taint, n1 cordoned
    assert set(first["plugin_scores"]) == set(e["plugins"]) and first["score"] > 0
    assert all(not n["feasible"] and n["reasons"] for n in rest)  # feasible first
    page = await get(client, "/ui/api/pods/default/b?limit=1&offset=1&show=infeasible")
    assert (page["explain"]["total"], len(page["explain"]["nodes"])) == (2, 1)
    assert not page["explain"]["nodes"][0]["feasible"]


async def test_a_placed_pods_page_says_where_without_node_verdicts(client: Client) -> None:
    d = await get(client, "/ui/api/pods/default/a")
    assert (d["why"]["phase"], d["why"]["summary"], d["explain"]) == ("Bound", "bound to n0", None)
    assert d["row"]["node"] == "n0"


async def test_an_unknown_pod_is_a_json_404(client: Client) -> None:
    body = await get(client, "/ui/api/pods/default/nope", 404)
    assert "pod default/nope not found" in body["Error"]


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/ui/api/pods?offset=-1", "offset: -1 is out of range"),
        ("/ui/api/pods?limit=0", "limit: 0 is out of range [1, 100]"),
        ("/ui/api/pods?limit=101", "limit: 101 is out of range [1, 100]"),
        ("/ui/api/pods/default/b?limit=501", "limit: 501 is out of range [1, 500]"),
        ("/ui/api/pods?limit=ten", "limit: 'ten' is not an integer"),
        ("/ui/api/pods?phase=Sleeping", "phase: 'Sleeping' is not one of pending, all, Gated"),
        ("/ui/api/pods/default/b?show=some", "show: 'some' is not one of all, feasible, infeasible"),
        ("/ui/api/pods/default/b?offset=x", "offset: 'x' is not an integer"),
        ("/ui/api/decisions?replay=1000", "replay: 1000 is out of range [0, 500]"),
    ],
)
async def test_a_bad_parameter_is_a_400_naming_it_and_changes_nothing(
    client: Client, berth: Berth, path: str, says: str
) -> None:
    before = await pods_state(client)
    body = await get(client, path, 400)
    assert says in body["Error"]
    assert await pods_state(client) == before
    assert len(berth.core.decisions._watchers) == 0  # a refused stream subscribes to nothing


async def pods_state(c: Client) -> list[dict[str, Any]]:
    """Every pod row, less its age (which grows by itself) and creation time
    (visibility derives it from the clock: now less the time queued)."""
    d = await get(c, "/ui/api/pods?phase=all")
    return [{k: v for k, v in p.items() if k not in ("age", "created")} for p in d["pods"]]


# ---------------------------------------------------------------- the decision stream


def close_streams(c: Client) -> None:
    assert c.app is not None
    ui.close_streams(c.app)


async def events(resp: aiohttp.ClientResponse, n: int) -> list[dict[str, Any]]:
    """The next ``n`` decision events (comments and the retry line skipped)."""
    out: list[dict[str, Any]] = []
    while len(out) < n:
        block = (await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5)).decode()
        if block.startswith("event: decision\n"):
            out.append(json.loads(block.split("data: ", 1)[1]))
    return out


async def test_the_stream_replays_recent_decisions_then_sends_new_ones_live(client: Client, berth: Berth) -> None:
    async with client.get("/ui/api/decisions?replay=10") as resp:
        assert resp.headers["Content-Type"] == "text/event-stream"
        replayed = await events(resp, 3)
        assert {(d["pod"], d["kind"]) for d in replayed} == {
            ("default/a", "Bound"),
            ("default/b", "Unschedulable"),
            ("big/huge", "Unschedulable"),
        }
        berth.pods(pod("c", "1"))
        live = [(d["pod"], d["kind"]) for d in await events(resp, 2)]
        assert live[0] == ("default/c", "Queued")
        while live[-1] != ("default/c", "Bound"):
            live += [(d["pod"], d["kind"]) for d in await events(resp, 1)]
        close_streams(client)
        assert await asyncio.wait_for(resp.content.read(), 5) == b""  # the stream ended
    await asyncio.sleep(0)
    assert berth.core.decisions._watchers == []


async def test_an_idle_stream_sends_a_heartbeat_comment(
    client: Client, berth: Berth, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ui, "HEARTBEAT_SECONDS", 0.05)
    async with client.get("/ui/api/decisions?replay=0") as resp:
        assert await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5) == b"retry: 2000\n\n"
        assert await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5) == b": keep-alive\n\n"
        close_streams(client)
        await resp.read()


async def test_stopping_the_server_ends_open_streams_at_once_not_at_the_grace_periods_end(berth: Berth) -> None:
    runner, port = await server.start_dashboard(berth.core, None)
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession() as session:
        resp = await session.get(f"http://127.0.0.1:{port}/ui/api/decisions?replay=0")
        assert await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5) == b"retry: 2000\n\n"
        start = loop.time()
        await server.stop(runner, grace=10)
        assert loop.time() - start < 2
        assert await asyncio.wait_for(resp.content.read(), 5) == b""
        resp.release()
    assert berth.core.decisions._watchers == []


# ---------------------------------------------------------------- at scale: groups, sorting, gangs


def gang_member(name: str, group: str, **kw: Any) -> model.Pod:
    return pod(name, "1", namespace="ml", labels={model.LABEL_POD_GROUP: group}, **kw)


def pod_group(name: str, min_member: int) -> model.PodGroup:
    meta = model.ObjectMeta(name=name, namespace="ml")
    return model.PodGroup(metadata=meta, spec=model.PodGroupSpec(min_member=min_member, schedule_timeout_seconds=600))


async def quiet(b: Berth, waiting: int) -> None:
    """Until nothing is active, in flight or backing off and ``waiting`` pods wait at Permit."""
    for _ in range(2000):
        c = b.scheduler.queue.counts()
        if not (c["active"] or c["in_flight"] or c["backoff"]) and len(b.core.waiting.uids()) == waiting:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not quiet: {b.scheduler.queue.counts()}")


@pytest.fixture
async def crowd() -> AsyncIterator[Berth]:
    """Two 4-cpu nodes. Pending: heavy-0..heavy-11 (no node fits 64 cpu),
    four pods over queue tight's max (Rejected), the gang ml/pair
    (minMember 3: two members wait at Permit, the third behind a
    scheduling gate) and ml/trio (minMember 3, two members: gated)."""
    cfg = make_config(
        http={"host": "127.0.0.1", "port": 0},
        ui={"host": "127.0.0.1", "port": 0},
        queues=[{"name": "tight", "max": {"cpu": "1"}}, {"name": "default"}],
    )
    async with running(cfg) as b:
        b.nodes(*(make_node(f"n{i}", cpu="4", memory="8Gi", pods=110) for i in range(2)))
        b.pods(*(pod(f"heavy-{i}", "64", namespace="heavy") for i in range(12)))
        b.pods(*(pod(f"q-{i}", "2", namespace="batch", labels={LABEL_QUEUE: "tight"}) for i in range(4)))
        b.core.on_pod_group(pod_group("pair", 3))
        b.core.on_pod_group(pod_group("trio", 3))
        gate = {"schedulingGates": [{"name": "example.com/hold"}]}
        b.pods(gang_member("pair-0", "pair"), gang_member("pair-1", "pair"), gang_member("pair-2", "pair", spec=gate))
        b.pods(gang_member("trio-0", "trio"), gang_member("trio-1", "trio"))
        await quiet(b, waiting=2)
        yield b


@pytest.fixture
async def crowd_client(crowd: Berth) -> AsyncIterator[Client]:
    async with TestClient(TestServer(dashboard.build_app(crowd.core))) as c:
        yield c


def keys_of(d: dict[str, Any]) -> list[str]:
    return [f"{p['namespace']}/{p['name']}" for p in d["pods"]]


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("namespace=heavy", [f"heavy/heavy-{i}" for i in range(12)]),  # natural: heavy-2 before heavy-10
        ("namespace=heavy&order=desc", [f"heavy/heavy-{i}" for i in range(11, -1, -1)]),
        ("namespace=heavy&sort=node", [f"heavy/heavy-{i}" for i in range(12)]),  # ties by name
        ("sort=phase&limit=3", ["ml/pair-2", "ml/trio-0", "ml/trio-1"]),  # Gated first, then by name
        ("sort=phase&order=desc&limit=2", ["batch/q-3", "batch/q-2"]),  # Rejected last
        ("sort=queue&order=desc&limit=2", ["batch/q-3", "batch/q-2"]),  # tight after default
        ("sort=reason&namespace=batch&limit=2", ["batch/q-0", "batch/q-1"]),
        ("namespace=ml&sort=node&limit=3", ["ml/pair-2", "ml/trio-0", "ml/trio-1"]),  # no node first, ties by name
    ],
)
async def test_pods_sort_by_a_column_on_the_server_in_natural_order(
    crowd_client: Client, query: str, first: list[str]
) -> None:
    d = await get(crowd_client, f"/ui/api/pods?{query}")
    assert keys_of(d)[: len(first)] == first


async def test_pods_sorted_by_age_come_youngest_first(crowd_client: Client, crowd: Berth) -> None:
    await asyncio.sleep(0.05)
    crowd.pods(pod("newest", "64", namespace="heavy"))
    await quiet(crowd, waiting=2)
    d = await get(crowd_client, "/ui/api/pods?sort=age&limit=1")
    assert keys_of(d) == ["heavy/newest"]
    d = await get(crowd_client, "/ui/api/pods?sort=age&order=desc&namespace=heavy&limit=1")
    assert keys_of(d) != ["heavy/newest"]


@pytest.mark.parametrize(
    ("by", "counts"),
    [
        ("queue", {"default": 17, "tight": 4}),
        ("gang", {"": 16, "ml/pair": 3, "ml/trio": 2}),  # waiting at Permit is pending too
    ],
)
async def test_pending_pods_are_counted_by_group_the_largest_first(
    crowd_client: Client, by: str, counts: dict[str, int]
) -> None:
    d = await get(crowd_client, f"/ui/api/pods?by={by}")
    got = {g["key"]: g["count"] for g in d["groups"]}
    assert got == counts
    assert [g["count"] for g in d["groups"]] == sorted(got.values(), reverse=True)
    assert (d["group_count"], d["total"], d["pods"]) == (len(got), sum(got.values()), [])  # no page: no why computed


async def test_pods_grouped_by_reason_share_the_schedulers_message(crowd_client: Client) -> None:
    d = await get(crowd_client, "/ui/api/pods?by=reason")
    first, second, *_ = d["groups"]
    assert (first["count"], first["phases"]) == (12, {"Unschedulable": 12})
    assert first["key"].startswith("0/2 nodes are available: 2 Insufficient cpu.")
    assert (second["count"], second["phases"]) == (4, {"Rejected": 4})
    assert "queue tight" in second["key"]


async def test_a_groups_page_holds_that_group_only_sorted_and_paged_each_row_with_its_why(crowd_client: Client) -> None:
    groups = (await get(crowd_client, "/ui/api/pods?by=reason"))["groups"]
    heavy = urllib.parse.quote(groups[0]["key"])
    d = await get(crowd_client, f"/ui/api/pods?by=reason&group={heavy}&sort=name&order=desc&offset=2&limit=3")
    assert (d["total"], keys_of(d)) == (12, ["heavy/heavy-9", "heavy/heavy-8", "heavy/heavy-7"])
    assert all(p["why"].startswith("0/2 nodes are available") for p in d["pods"])
    d = await get(crowd_client, "/ui/api/pods?by=queue&group=tight")
    assert keys_of(d) == [f"batch/q-{i}" for i in range(4)]
    d = await get(crowd_client, "/ui/api/pods?by=gang&group=&namespace=heavy&limit=2")  # "": no gang
    assert (d["total"], keys_of(d)) == (12, ["heavy/heavy-0", "heavy/heavy-1"])


async def test_gangs_show_members_present_of_minimum_and_where_they_wait(crowd_client: Client) -> None:
    d = await get(crowd_client, "/ui/api/gangs")
    assert (d["total"], d["incomplete"]) == (2, 2)
    pair, trio = d["gangs"]
    assert (pair["gang"], pair["members"], pair["min_member"], pair["placed"], pair["pending"]) == (
        "ml/pair",
        3,
        3,
        2,
        1,
    )
    gated, at_permit = pair["where"]
    assert (gated["phase"], gated["count"], gated["nodes"]) == ("Gated", 1, [])
    assert gated["reason"] == "waiting for scheduling gates: [example.com/hold]"
    assert (at_permit["phase"], at_permit["count"], at_permit["nodes"]) == ("WaitingOnPermit", 2, ["n0", "n1"])
    assert (trio["gang"], trio["members"], trio["min_member"], trio["phase"]) == ("ml/trio", 2, 3, "Pending")
    (waiting,) = trio["where"]
    assert (waiting["phase"], waiting["count"]) == ("Gated", 2)
    assert waiting["reason"] == 'pod group "ml/trio" has 2 of 3 required pods'
    d = await get(crowd_client, "/ui/api/gangs?sort=name&order=desc&limit=1")
    assert [g["gang"] for g in d["gangs"]] == ["ml/trio"]
    d = await get(crowd_client, "/ui/api/gangs?q=PAIR")
    assert [g["gang"] for g in d["gangs"]] == ["ml/pair"]


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/ui/api/pods?by=node", "by: 'node' is not one of reason, queue, gang"),
        ("/ui/api/pods?group=x", "group: needs by (reason, queue or gang)"),
        (
            "/ui/api/pods?sort=why",
            "sort: 'why' is not one of name, queue, phase, position, node, attempts, age, reason",
        ),
        ("/ui/api/pods?order=up", "order: 'up' is not one of asc, desc"),
        ("/ui/api/gangs?sort=age", "sort: 'age' is not one of name, members, min, placed, pending"),
        ("/ui/api/gangs?limit=201", "limit: 201 is out of range [1, 200]"),
    ],
)
async def test_a_bad_grouping_or_sort_is_a_400_naming_it(crowd_client: Client, path: str, says: str) -> None:
    body = await get(crowd_client, path, 400)
    assert says in body["Error"]


# ---------------------------------------------------------------- the listing: bounded, shared


async def test_the_listing_is_built_in_slices_so_the_loop_keeps_turning(
    crowd: Berth, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With slices of no time each pod is a turn of its own; with long
    slices the whole walk is one."""
    pods = len(crowd.core.pods)
    for slice_seconds, most, least in ((0.0, 10 * pods, pods), (60.0, 2, 0)):
        monkeypatch.setattr(ui, "SLICE_SECONDS", slice_seconds)
        async with counting_turns() as turns:
            listing = await ui.build_listing(crowd.core)
        assert least <= turns.count <= most, (slice_seconds, turns.count)
        assert len(listing.rows) == 21  # every pod Berth schedules, whatever the slices


async def test_concurrent_requests_share_one_listing_until_it_is_too_old(
    crowd_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds = 0
    build = ui.build_listing

    async def counted(core: Any) -> ui.Listing:
        nonlocal builds
        builds += 1
        return await build(core)

    monkeypatch.setattr(ui, "build_listing", counted)
    paths = ["/ui/api/pods?by=reason", "/ui/api/pods?by=gang&group=ml/pair", "/ui/api/gangs", "/ui/api/pods/ml/pair-0"]
    await asyncio.gather(*(get(crowd_client, p) for p in paths))
    assert builds == 1
    monkeypatch.setattr(ui, "LISTING_MAX_AGE", 0.0)
    await get(crowd_client, "/ui/api/gangs")
    assert builds == 2


async def test_a_caller_past_its_reads_queue_is_told_429_and_another_caller_is_served(
    berth: Berth, client: Client
) -> None:
    """The dashboard's JSON reads take seats of the ``reads`` fairness level,
    as the gRPC reads do: with this address's seats and queue taken, its next
    listing is 429 naming the limit; another caller's seat is not in its way."""
    level = berth.core.fairness.levels["reads"]
    me = "address 127.0.0.1"
    release = asyncio.Event()

    async def hold(caller: str) -> None:
        async with berth.core.fairness.seat("reads", caller):
            await release.wait()

    holders = [asyncio.create_task(hold(me)) for _ in range(level.per_caller + level.queue_length)]
    try:
        for _ in range(1000):  # the holders take their seats and queue in a few loop turns
            if level.waiting(me) >= level.queue_length:
                break
            await asyncio.sleep(0)
        r = await client.get("/ui/api/queues")
        assert r.status == 429
        assert "queue" in (await r.text()).lower()
        release.set()
        await asyncio.gather(*holders)
        r = await client.get("/ui/api/queues")
        assert r.status == 200
    finally:
        release.set()
        for t in holders:
            t.cancel()
