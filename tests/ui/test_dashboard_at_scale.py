"""The dashboard with 2000 pending pods (tests/ui/clusters.py's
``pending_workload`` on the demo cluster), in headless Chromium: pending pods
grouped by reason, queue and gang with their counts, groups that open a page
at a time, columns that sort in natural order (``heavy-2`` before
``heavy-10``), the gangs view, node names on hover and a node search, one
decision-feed row per pod — and no value rendered as anything but text.

Each test saves a screenshot under its tmp_path."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest

from berth.adapters.grpc import convert
from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from berth.testing import make_pod
from tests.support import ROOT, demo_berth_serve, free_port
from tests.ui.clusters import PENDING, SMALL_QUEUE, write_demo_with_pending
from tests.ui.conftest import shot, wait_for

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route

TOTAL = sum(PENDING.values())
HEAVY_REASON = "46 Insufficient cpu."


class Server:
    def __init__(self, ui: int, grpc_port: int) -> None:
        self.base = f"http://127.0.0.1:{ui}"
        self.url = f"{self.base}/ui/"
        self.grpc_port = grpc_port

    def api(self, path: str) -> Any:
        with urllib.request.urlopen(self.base + path, timeout=30) as r:
            return json.loads(r.read())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("ui-scale")
    cfg = tmp / "berth.yaml"
    cfg.write_text((ROOT / "examples/berth.yaml").read_text() + SMALL_QUEUE)
    cluster = write_demo_with_pending(tmp / "cluster.json")
    ui = free_port()  # the dashboard's own listener
    extra = ("--config", str(cfg), "--cluster", str(cluster), "--ui-port", str(ui))
    with demo_berth_serve(*extra, ready_timeout=60) as (_, _http, grpc, _out):
        s = Server(ui, grpc)
        deadline = time.monotonic() + 60
        # Every pending pod attempted (its reason known) before the tests look.
        settled = {"Gated": PENDING["gated"] + PENDING["train"], "Rejected": PENDING["small"]}
        settled["Unschedulable"] = TOTAL - sum(settled.values())
        while s.api("/ui/api/pods?limit=1")["phases"] != settled:
            assert time.monotonic() < deadline, f"the 2000 pods were not all attempted within 60 s: {settled}"
            time.sleep(0.3)
        yield s


def ready(page: Page, server: Server) -> None:
    page.goto(server.url)
    page.wait_for_selector(f'html[data-nodes-drawn="50"][data-pods-ready="{TOTAL}"][data-gangs-ready]')


def texts(page: Page, selector: str, attribute: str) -> list[str]:
    return page.eval_on_selector_all(selector, f"(els) => els.map((e) => e.getAttribute('{attribute}'))")


def group_row(page: Page, text: str) -> Any:
    return page.locator("#pods tr.group", has_text=text)


def wait_rows(page: Page, first: list[str]) -> None:
    """Until the pod rows on show begin with ``first``."""
    wait_for(
        page,
        """(want) => {
            const got = [...document.querySelectorAll('#pods tbody tr[data-pod]')].map((r) => r.dataset.pod);
            return JSON.stringify(got.slice(0, want.length)) === JSON.stringify(want);
        }""",
        arg=first,
    )


def test_pending_pods_are_grouped_by_reason_with_counts_and_a_group_opens_a_page_at_a_time(
    server: Server, page: Page, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    start = time.monotonic()
    ready(page, server)
    took = time.monotonic() - start
    record_property("overview_2000_pending_seconds", round(took, 3))
    print(f"2000 pending pods: overview ready {took:.3f}s after goto")
    assert took < 5.0, f"the overview with 2000 pending pods took {took:.2f}s"  # no page of 2000 whys
    assert page.locator('[data-counter="pending"]').inner_text().startswith(str(TOTAL))
    want = server.api("/ui/api/pods?by=reason")["groups"]
    counts = [int(c) for c in texts(page, "#pods tr.group", "data-count")]
    assert counts == [g["count"] for g in want]  # the largest first, as the server counted them
    assert sum(counts) == TOTAL
    assert counts[:4] == [PENDING["heavy"], PENDING["mem"], PENDING["gated"], PENDING["small"]]
    assert page.locator("#pods tbody tr[data-pod]").count() == 0  # closed: no row sent, no why computed
    heavy = group_row(page, HEAVY_REASON)
    assert heavy.get_attribute("data-count") == str(PENDING["heavy"])
    assert "Unschedulable 1400" in heavy.inner_text()
    heavy.locator("button.toggle").click()
    wait_rows(page, [f"heavy/heavy-{i}" for i in range(25)])  # natural order: heavy-2 before heavy-10
    assert page.locator("#pods tbody tr[data-pod]").count() == 25
    assert "1\u201325 of 1400" in page.locator("#pods tr.group-pager").inner_text()
    assert "0/50 nodes are available" in page.locator('#pods tr[data-pod="heavy/heavy-3"] td.why').inner_text()
    shot(page, tmp_path / "grouped-by-reason.png")
    page.locator("#pods tr.group-pager button.next").click()
    wait_rows(page, [f"heavy/heavy-{i}" for i in range(25, 50)])
    # A second group opens beside the first; closing one leaves the other.
    group_row(page, "waiting for scheduling gates").locator("button.toggle").click()
    page.wait_for_selector('#pods tr[data-pod="gated/later-0"]')
    heavy.locator("button.toggle").click()
    wait_for(page, "!document.querySelector('#pods tr[data-pod=\"heavy/heavy-25\"]')")
    assert page.locator('#pods tr[data-pod^="gated/"]').count() == 25


def test_columns_sort_on_the_server_in_natural_order(server: Server, page: Page, tmp_path: Path) -> None:
    ready(page, server)
    group_row(page, HEAVY_REASON).locator("button.toggle").click()
    wait_rows(page, ["heavy/heavy-0", "heavy/heavy-1", "heavy/heavy-2", "heavy/heavy-3"])
    pod_header = page.locator('#pods th[data-sort="name"]')
    assert pod_header.get_attribute("aria-sort") == "ascending"
    pod_header.locator("button").click()
    wait_rows(page, ["heavy/heavy-1399", "heavy/heavy-1398"])
    assert pod_header.get_attribute("aria-sort") == "descending"
    pod_header.locator("button").click()
    wait_rows(page, ["heavy/heavy-0", "heavy/heavy-1"])
    # Ungrouped, across namespaces: batch/small-2 before batch/small-10.
    page.select_option("#f-by", "")
    wait_rows(page, [f"batch/small-{i}" for i in range(25)])
    assert "1\u201325 of 2000" in page.locator("#pods-pager").inner_text()
    # Another column: phase (in the order a pod goes through them), then by name.
    page.locator('#pods th[data-sort="phase"] button').click()
    wait_rows(page, ["gated/later-0", "gated/later-1", "gated/later-2"])
    page.locator('#pods th[data-sort="phase"] button').click()
    wait_rows(page, ["batch/small-59", "batch/small-58"])  # Rejected last, so first reversed
    shot(page, tmp_path / "sorted-by-phase.png")


@pytest.mark.parametrize(
    ("by", "want"),
    [
        ("queue", {"default": TOTAL - PENDING["small"], "small": PENDING["small"]}),
        (
            "gang",
            {"no gang": TOTAL - PENDING["train"] - PENDING["shard"], "ml/train": PENDING["train"]}
            | {f"ml/shard-{g}": 5 for g in range(PENDING["shard"] // 5)},
        ),
    ],
)
def test_pending_pods_group_by_queue_and_by_gang(server: Server, page: Page, by: str, want: dict[str, int]) -> None:
    ready(page, server)
    page.select_option("#f-by", by)
    page.wait_for_selector(f'html[data-pod-groups="{len(want)}"]')
    rows = page.locator("#pods tr.group")
    got = {
        rows.nth(i).locator(".group-key").inner_text(): int(rows.nth(i).get_attribute("data-count") or 0)
        for i in range(rows.count())
    }
    assert got == want
    # Filters apply before grouping: only the namespace ml's gangs.
    page.select_option("#f-namespace", "ml")
    wait_for(page, f"document.querySelector('#pods-count').textContent === '{PENDING['train'] + PENDING['shard']}'")


def test_the_gangs_view_shows_members_present_of_minimum_and_where_they_wait(
    server: Server, page: Page, tmp_path: Path
) -> None:
    ready(page, server)
    gangs = texts(page, "#gangs tbody tr[data-gang]", "data-gang")
    assert gangs == [f"ml/shard-{g}" for g in range(7)] + ["ml/train"]
    train = page.locator('#gangs tr[data-gang="ml/train"]')
    assert (train.get_attribute("data-members"), train.get_attribute("data-min")) == ("5", "8")
    assert train.locator("td.num.short").inner_text() == "5 / 8"  # short of its minimum
    assert "Pending" in train.locator("td").first.inner_text()  # scheduler-plugins' PodGroup phase
    where = train.locator('td.where li[data-phase="Gated"]').inner_text()
    assert where.startswith("Gated 5: ") and 'pod group "ml/train" has' in where
    shard = page.locator('#gangs tr[data-gang="ml/shard-3"]')
    assert "5 / 5" in shard.inner_text()
    assert "Insufficient nvidia.com/gpu" in shard.locator('td.where li[data-phase="Unschedulable"]').inner_text()
    assert page.locator("#gangs-count").inner_text() == "8 (8 incomplete)"
    shot(page, tmp_path / "gangs.png")
    # Sorted by name the other way; filtered by name.
    page.locator('#gangs th[data-sort="name"] button').click()
    page.wait_for_selector('#gangs th[data-sort="name"][aria-sort="descending"]')
    wait_for(page, "document.querySelector('#gangs tbody tr[data-gang]').dataset.gang === 'ml/train'")
    assert texts(page, "#gangs tbody tr[data-gang]", "data-gang")[1:3] == ["ml/shard-6", "ml/shard-5"]
    page.fill("#g-text", "train")
    wait_for(page, "document.querySelectorAll('#gangs tbody tr[data-gang]').length === 1")


def test_a_tile_names_its_node_on_hover_and_the_node_list_finds_nodes_by_name(
    server: Server, page: Page, tmp_path: Path
) -> None:
    ready(page, server)
    canvas = page.locator("#heatmap")
    box = canvas.bounding_box()
    assert box is not None
    cols, pitch, cell = (int(canvas.get_attribute(a) or 0) for a in ("data-cols", "data-pitch", "data-cell"))
    for k in (0, 17, 49):  # by name, in natural order: the k-th tile is node-k
        x, y = box["x"] + (k % cols) * pitch + cell / 2, box["y"] + (k // cols) * pitch + cell / 2
        page.mouse.move(x, y)
        wait_for(page, f"document.querySelector('#tip b')?.textContent === 'node-{k:02d}'")
    # The list under the map: a search keeps the matching nodes (natural order) and their tiles lit.
    assert texts(page, "#node-list li", "data-node")[:3] == ["node-00", "node-01", "node-02"]
    page.fill("#node-search", "NODE-4")  # case aside
    page.wait_for_selector('html[data-node-matches="10"]')
    assert texts(page, "#node-list li", "data-node") == [f"node-4{i}" for i in range(10)]
    assert page.locator("#node-matches").inner_text() == "10 of 50 match"
    page.fill("#node-search", "4")
    page.wait_for_selector('html[data-node-matches="14"]')
    assert texts(page, "#node-list li", "data-node")[:5] == ["node-04", "node-14", "node-24", "node-34", "node-40"]
    shot(page, tmp_path / "node-search.png")
    page.locator('#node-list li[data-node="node-42"] button').click()
    page.wait_for_selector("#node-detail h3:has-text('node-42')")
    page.fill("#node-search", "no-such-node")
    page.wait_for_selector('html[data-node-matches="0"]')


def test_the_decision_feed_keeps_one_row_per_pod_updated_in_place(server: Server, page: Page, tmp_path: Path) -> None:
    ready(page, server)
    page.wait_for_selector("#live.on")
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        fits = convert.pod_to_pb(make_pod("fits", requests={"cpu": "100m"}, scheduler_name="berth"))
        answer = scheduler_pb2_grpc.SchedulerStub(channel).Submit(scheduler_pb2.SubmitRequest(pods=[fits]), timeout=10)
        assert answer.results[0].accepted
    row = page.locator('#decisions li[data-pod="default/fits"]')
    page.wait_for_selector('#decisions li[data-pod="default/fits"][data-kind="Bound"]')
    assert row.count() == 1
    assert int(row.get_attribute("data-decisions") or 0) >= 2  # Queued (and Assumed) folded into it
    assert "Queued" in row.locator(".msg").inner_text()  # the trail of what came before
    pods = texts(page, "#decisions li", "data-pod")
    assert len(pods) > 1 and len(pods) == len(set(pods))  # one row per pod, replayed and live


# ---------------------------------------------------------------- values are text

#: Markup and script in every string the page shows: none may run or become an element.
PAYLOADS = (
    "<script>window.__xss = 1</script>",
    '<img src=x onerror="window.__xss = 1">',
    '"><svg onload="window.__xss = 1">',
    '\'><iframe srcdoc="<script>parent.__xss = 1</script>">',
    '<details open ontoggle="window.__xss = 1">',
    "javascript:window.__xss = 1",
    "</td></tr><img src=x onerror=window.__xss=1>",
    "<style>*{display:none}</style>",
)


#: The API's maps whose keys are data (resource, phase, label, plugin names), not field names.
DATA_MAPS = frozenset(
    {"used", "totals", "phases", "allocatable", "requested", "requests", "labels", "plugin_scores", "capacity"}
    | {"guaranteed", "max", "allocated", "pending", "reclaims", "min_resources"}
)


def poison(value: Any, seen: dict[str, str], *, keys: bool = False) -> Any:
    """``value`` with every string prefixed by a payload (the same string
    always by the same one, so cross-references hold): values, and the keys
    of :data:`DATA_MAPS`."""
    if isinstance(value, str):
        if value not in seen:
            seen[value] = PAYLOADS[len(seen) % len(PAYLOADS)] + value
        return seen[value]
    if isinstance(value, dict):
        return {
            (poison(k, seen) if keys else k): poison(v, seen, keys=k in DATA_MAPS and isinstance(v, dict))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [poison(v, seen) for v in value]
    return value


def test_names_reasons_and_labels_are_rendered_as_text_in_every_view(
    server: Server, page: Page, tmp_path: Path
) -> None:
    """Berth's API answers, every string replaced by markup: the groups, an
    open group's rows, the gangs, the node list, a tile's tip, a node's
    detail, the decision feed and a pod's page show it as text."""
    seen: dict[str, str] = {}

    def answer(route: Route) -> None:
        path = route.request.url.removeprefix(server.base)
        if path.startswith("/ui/api/decisions"):
            decisions = [poison(d, seen) for d in decisions_of(server)]
            body = "retry: 600000\n\n" + "".join(f"event: decision\ndata: {json.dumps(d)}\n\n" for d in decisions)
            route.fulfill(status=200, headers={"Content-Type": "text/event-stream"}, body=body)
            return
        real = unpoisoned(path)
        try:
            body = json.dumps(poison(server.api(real), seen))
        except urllib.error.HTTPError as e:
            route.fulfill(status=e.code, headers={"Content-Type": "application/json"}, body=e.read())
            return
        route.fulfill(status=200, headers={"Content-Type": "application/json"}, body=body)

    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.route("**/ui/api/**", answer)
    page.goto(server.url)
    page.wait_for_selector("html[data-nodes-drawn][data-pods-ready][data-gangs-ready]")
    box = page.locator("#heatmap").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + 3, box["y"] + 3)
    page.wait_for_selector("#tip:not([hidden])")
    page.locator("#pods tr.group button.toggle").first.click()
    page.wait_for_selector("#pods tbody tr[data-pod]")
    page.fill("#node-search", "node-1")
    page.wait_for_selector("#node-list li")
    page.locator("#node-list li button").first.click()
    page.wait_for_selector("#node-detail h3")
    page.wait_for_selector("#decisions li")
    shot(page, tmp_path / "poisoned-overview.png")
    overview = page.locator("#overview").inner_text()
    assert "<img src=x" in overview and "<script>" in overview  # shown, as text
    page.locator("#pods tbody tr[data-pod] a.pod-link").first.click()
    page.wait_for_selector("html[data-pod-ready]")
    page.wait_for_selector("#explain tbody tr")
    shot(page, tmp_path / "poisoned-pod.png")
    injected = page.evaluate(
        """() => ({
            ran: window.__xss ?? null,
            elements: document.querySelectorAll('body :is(script, img, svg, iframe, details, style)').length,
        })"""
    )
    assert injected == {"ran": None, "elements": 0}, injected
    assert dialogs == []


def unpoisoned(url: str) -> str:
    """``url`` (a path and query) as the page would ask with the real values."""

    def clean(text: str) -> str:
        for p in PAYLOADS:
            text = text.replace(p, "")
        return text

    parts = urllib.parse.urlsplit(url)
    path = urllib.parse.quote(clean(urllib.parse.unquote(parts.path)))
    query = urllib.parse.urlencode(
        [(k, clean(v)) for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)]
    )
    return f"{path}?{query}" if query else path


def decisions_of(server: Server) -> list[dict[str, Any]]:
    """A few real decisions, as the event stream sends them."""
    rows = server.api("/ui/api/pods?limit=5")["pods"]
    return [
        {
            "kind": "Unschedulable",
            "pod": f"{r['namespace']}/{r['name']}",
            "node": "node-01",
            "message": r["reason"],
            "reasons": [],
            "attempts": r["attempts"],
            "time": 0,
        }
        for r in rows
    ]
