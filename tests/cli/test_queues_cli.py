"""``berth queues``: the batch queues as a table (kubectl get's shape), wide,
JSON or YAML, over gRPC like ``berth nodes``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth.cli import main as cli
from berth.testing import make_pod
from tests.grpc.conftest import Served, serving

QUEUES: list[dict[str, Any]] = [
    {"name": "research", "guaranteed": {"cpu": "2", "memory": "4Gi"}, "max": {"cpu": "3"}, "weight": 2},
    {"name": "research-vision", "parent": "research", "guaranteed": {"cpu": "1"}, "namespaces": ["vision", "cv-*"]},
    {"name": "batch", "max": {"nvidia.com/gpu": "2"}, "weight": 0.5},
]


@pytest.fixture
async def server() -> AsyncIterator[Served]:
    """serving()'s nodes (a: 4 cpu 8Gi, b: 1 cpu 1Gi), the queues above, a
    bound and a pending pod in each leaf (the loop is not running)."""
    async with serving(None, queues=QUEUES) as s:
        s.feed.upsert_pods(
            [
                make_pod(
                    "x",
                    namespace="vision",
                    scheduler_name="berth",
                    node_name="a",
                    requests={"cpu": "500m", "memory": "1Gi"},
                ),
                make_pod(
                    "y",
                    scheduler_name="berth",
                    node_name="a",
                    labels={"berth.dev/queue": "batch"},
                    requests={"cpu": "1"},
                ),
                make_pod("p", namespace="cv-1", scheduler_name="berth", requests={"cpu": "250m"}),
                make_pod("q", scheduler_name="berth", labels={"berth.dev/queue": "batch"}, requests={"cpu": "2"}),
            ]
        )
        yield s


async def berth(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the command in a thread (its gRPC client blocks; the server runs on this loop)."""
    status = await asyncio.to_thread(cli.main, list(argv))
    out, err = capsys.readouterr()
    return status, out, err


async def test_table_shows_one_line_per_queue(server: Served, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = await berth(capsys, "queues", "--server", server.address)
    assert status == 0
    assert out == (
        "NAME              PARENT     WEIGHT   GUARANTEED         MAX                "
        "ALLOCATED             PENDING   DOMINANT-SHARE\n"
        "research          <none>     2        cpu=2,memory=4Gi   cpu=3              "
        "cpu=500m,memory=1Gi   1         0.111\n"
        "research-vision   research   1        cpu=1              <none>             "
        "cpu=500m,memory=1Gi   1         0.111\n"
        "batch             <none>     0.5      <none>             nvidia.com/gpu=2   "
        "cpu=1                 1         0.200\n"
    )


async def test_wide_adds_fair_share_pending_requests_reclaims_and_namespaces(
    server: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    server.core.quota.count_reclaim("batch")
    status, out, _ = await berth(capsys, "queues", "--server", server.address, "-o", "wide")
    assert status == 0
    header, research, vision, batch = (line.split() for line in out.splitlines())
    assert header[-5:] == ["FAIR-SHARE", "PENDING-REQUESTS", "RECLAIMED", "NAMESPACES", "RESERVATIONS"]
    assert research[-5:] == ["0.800", "cpu=250m", "0", "<none>", "<none>"]
    assert vision[-5:] == ["0.800", "cpu=250m", "0", "vision,cv-*", "<none>"]
    assert batch[-5:] == ["0.200", "cpu=2", "1", "<none>", "<none>"]


async def test_json_is_a_list_of_queues_with_quantity_strings(
    server: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = await berth(capsys, "queues", "--server", server.address, "-o", "json")
    assert status == 0
    rows = json.loads(out)
    assert [r["name"] for r in rows] == ["research", "research-vision", "batch"]
    assert rows[0] == {
        "name": "research",
        "parent": "",
        "leaf": False,
        "guaranteed": {"cpu": "2", "memory": "4Gi"},
        "max": {"cpu": "3"},
        "weight": 2.0,
        "allocated": {"cpu": "500m", "memory": "1Gi"},
        "pendingPods": 1,
        "pending": {"cpu": "250m"},
        "dominantShare": pytest.approx(1 / 9),
        "fairShare": pytest.approx(0.8),
        "namespaces": [],
        "children": ["research-vision"],
        "reclaimPreemptions": 0,
        "reservations": [],
    }
    assert rows[2]["max"] == {"nvidia.com/gpu": "2"}
    assert (rows[2]["allocated"], rows[2]["pending"], rows[2]["pendingPods"]) == ({"cpu": "1"}, {"cpu": "2"}, 1)


async def test_yaml_says_the_same_as_json(server: Served, capsys: pytest.CaptureFixture[str]) -> None:
    _, as_json, _ = await berth(capsys, "queues", "--server", server.address, "-o", "json")
    status, as_yaml, _ = await berth(capsys, "queues", "--server", server.address, "-o", "yaml")
    assert status == 0
    assert yaml.safe_load(as_yaml) == json.loads(as_json)


async def test_a_named_queue_prints_as_one_object(server: Served, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = await berth(capsys, "queues", "batch", "--server", server.address, "-o", "json")
    assert status == 0
    got = json.loads(out)
    assert (got["name"], got["allocated"]) == ("batch", {"cpu": "1"})
    status, out, _ = await berth(capsys, "queues", "batch", "--server", server.address)
    assert [line.split()[0] for line in out.splitlines()] == ["NAME", "batch"]


async def test_an_unknown_queue_is_not_found(server: Served, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = await berth(capsys, "queues", "ghost", "--server", server.address)
    assert (status, out) == (1, "")
    assert err == "berth: not_found: queue 'ghost' not found (queues: research, research-vision, batch)\n"


@pytest.mark.parametrize(
    ("output", "printed"),
    [
        ("text", "No queues are configured.\n"),
        ("wide", "No queues are configured.\n"),
        ("json", "[]\n"),
        ("yaml", "[]\n"),
    ],
)
async def test_without_queues_the_list_is_empty(capsys: pytest.CaptureFixture[str], output: str, printed: str) -> None:
    async with serving() as s:
        status, out, _ = await berth(capsys, "queues", "--server", s.address, "-o", output)
    assert (status, out) == (0, printed)


async def test_queues_needs_no_token(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("cli-queues-token-0123456789")
    async with serving({"auth": {"tokenFile": str(token)}}, queues=QUEUES) as s:
        status, out, _ = await berth(capsys, "queues", "--server", s.address, "-o", "json")
    assert status == 0 and len(json.loads(out)) == 3
