"""``berth get pods``, ``berth why`` and ``berth whatif`` against a running
Berth (its scheduling loop and gRPC server on this event loop; the CLI in a
thread, or a process for ``--watch``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth import app, config
from berth.adapters.grpc.server import GrpcServer
from berth.cli import main as cli
from berth.cli import output
from berth.cluster import model
from berth.scheduling import batch
from berth.testing import make_node, make_pod

ROOT = Path(__file__).parents[2]
QUEUES: list[dict[str, Any]] = [{"name": "c", "max": {"cpu": "2"}}]


class Live:
    def __init__(self, berth: app.Berth, server: GrpcServer) -> None:
        self.berth = berth
        self.server = server

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def pods(self, *pods: model.Pod) -> None:
        self.berth.cluster.upsert_pods(pods)

    async def until(self, done: Callable[[], bool]) -> None:
        for _ in range(2000):
            if done():
                return
            await asyncio.sleep(0.005)
        raise AssertionError("condition not reached")

    def bound(self, key: str) -> bool:
        pod = self.berth.cluster.pods.get(key)
        return pod is not None and bool(pod.spec.node_name)

    def decided(self, key: str) -> bool:
        return key in self.berth.core.decisions.latest and self.berth.core.decisions.latest[key].kind.name != "QUEUED"


@contextlib.asynccontextmanager
async def live(grpc: dict[str, Any] | None = None, **top: Any) -> AsyncIterator[Live]:
    """A running Berth with nodes a (4 cpu) and b (2 cpu), and its gRPC port
    (``grpc`` merged into ``grpc:``)."""
    cfg = config.parse({"grpc": {"host": "127.0.0.1", "port": 0, **(grpc or {})}, **top})
    async with app.running(cfg) as b:
        b.cluster.upsert_nodes([make_node("a", cpu="4", memory="8Gi", pods=20), make_node("b", cpu="2", pods=20)])
        served = Live(b, GrpcServer(b.core, b.extender, b.cluster))
        await served.server.start()
        try:
            yield served
        finally:
            await served.server.stop(0)  # the one listening now (a test may have replaced it)


def pod(name: str, cpu: str = "1", **kw: Any) -> model.Pod:
    return make_pod(name, scheduler_name="berth", requests={"cpu": cpu}, **kw)


async def berth(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the command in a thread (its gRPC client blocks; the server runs on this loop)."""
    status = await asyncio.to_thread(cli.main, list(argv))
    out, err = capsys.readouterr()
    return status, out, err


# ---------------------------------------------------------------- get pods


async def test_get_pods_lists_pending_and_bound_pods_like_kubectl(capsys: pytest.CaptureFixture[str]) -> None:
    async with live(queues=QUEUES) as s:
        s.pods(pod("web"), *(pod(f"c{i}", labels={"berth.dev/queue": "c"}) for i in range(3)))
        await s.until(lambda: s.bound("default/web") and all(s.decided(f"default/c{i}") for i in range(3)))
        status, out, _ = await berth(capsys, "get", "pods", "--server", s.address)
        assert status == 0
        lines = out.splitlines()
        assert lines[0].split() == [
            "NAMESPACE", "NAME", "QUEUE", "PHASE", "NODE", "ATTEMPTS", "AGE", "REASON", "POSITION",
        ]  # fmt: skip
        rows = {line.split()[1]: line for line in lines[1:]}
        assert sorted(rows) == ["c0", "c1", "c2", "web"]
        assert rows["web"].split()[2:6] == ["<none>", "Bound", rows["web"].split()[4], "1"]
        # Held back by the queue: unschedulable, or backing off (quota freed while it was tried).
        waiting = [n for n in ("c0", "c1", "c2") if rows[n].split()[3] in ("Unschedulable", "Backoff")]
        assert len(waiting) == 1
        assert "0/2 nodes are available: queue c: cpu 3/2 over max." in rows[waiting[0]]
        assert rows[waiting[0]].split()[-1] == "1"  # first in its queue

        status, out, _ = await berth(capsys, "get", "pods", "--server", s.address, "-o", "json", "--queue", "c")
        docs = json.loads(out)
        assert status == 0 and [d["name"] for d in docs] == ["c0", "c1", "c2"]
        for d in docs:
            assert {"namespace", "name", "queue", "phase", "node", "attempts", "reason", "position"} <= set(d)
        assert [d["phase"] for d in docs].count("Bound") == 2

        status, out, _ = await berth(capsys, "get", "pods", "--server", s.address, "-o", "yaml", "--phase", "Bound")
        assert status == 0 and len(yaml.safe_load(out)) == 3

        status, out, _ = await berth(capsys, "get", "pods", "--server", s.address, "-o", "wide")
        assert out.splitlines()[0].split()[-4:] == ["NOMINATED", "NODE", "PRIORITY", "REQUESTS"]
        assert "cpu=1" in out


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        ((), ["a"]),
        (("-n", "team"), ["t"]),
        (("-A",), ["a", "t"]),
        (("--phase", "Gated", "-A"), ["t"]),
    ],
)
async def test_get_pods_namespaces_and_filters(
    argv: tuple[str, ...], names: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    async with live() as s:
        s.pods(pod("a"), pod("t", namespace="team", spec={"schedulingGates": [{"name": "x"}]}))
        await s.until(lambda: s.bound("default/a"))
        status, out, _ = await berth(capsys, "get", "pods", "--server", s.address, "-o", "json", *argv)
        assert status == 0 and [d["name"] for d in json.loads(out)] == names


async def test_get_pods_with_nothing_to_show_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    async with live() as s:
        status, out, err = await berth(capsys, "get", "pods", "--server", s.address, "-n", "empty")
        assert (status, out, err) == (0, "", "No pods found in empty namespace.\n")


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (("get", "pods", "-n", "x", "-A"), "berth: -n/--namespace and -A/--all-namespaces are exclusive\n"),
        (("why", "a/b/c"), "berth: 'a/b/c': expected NAMESPACE/NAME or NAME\n"),
        (("whatif", "-f", "-", "--replicas", "-2"), "berth: --replicas: must not be negative, got -2\n"),
    ],
)
async def test_bad_arguments_are_refused_with_one_line(
    argv: tuple[str, ...], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with live() as s:
        status, out, err = await berth(capsys, *argv, "--server", s.address)
        assert (status, out, err) == (1, "", error)
        assert len(s.berth.core.pods) == 0


async def test_get_pods_watch_prints_a_header_aligned_rows_and_deletions() -> None:
    """kubectl get --watch: the header first (even with no pods yet), each
    change as a row under it, columns where the header put them, and a pod
    that leaves shown once more with how it left."""
    async with live() as s:
        s.pods(pod("big", "64"))  # never fits: stays pending, to be cancelled
        await s.until(lambda: s.decided("default/big"))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "berth.cli.main", "get", "pods", "--watch", "--server", s.address,
            cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdout is not None

        async def line() -> str:
            text = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()  # type: ignore[union-attr]
            assert text, "the watch ended early"
            return text.rstrip("\n")

        try:
            header = await line()
            assert header.split() == [
                "NAMESPACE", "NAME", "QUEUE", "PHASE", "NODE", "ATTEMPTS", "AGE", "REASON", "POSITION",
            ]  # fmt: skip
            rows = [await line()]
            assert rows[0].split()[1:4] == ["big", "<none>", "Unschedulable"]
            for _ in range(400):
                if s.berth.core.decisions._watchers:
                    break
                await asyncio.sleep(0.01)
            s.pods(pod("w1"))
            while rows[-1].split()[1:4] != ["w1", "<none>", "Bound"]:
                rows.append(await line())
            batch.cancel(s.berth.core, "default", "big")
            while rows[-1].split()[1:2] != ["big"]:
                rows.append(await line())
            assert rows[-1].split()[3] == "Cancelled"
        finally:
            proc.send_signal(signal.SIGINT)
            code = await asyncio.wait_for(proc.wait(), 20)
        assert code == 0
    # Every column starts where its header does.
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    for row in rows:
        cells = re.finditer(r"(?<=   )\S|^\S", row)
        assert [m.start() for m in cells][: len(starts)] == starts, (header, row)


# ---------------------------------------------------------------- why


async def test_why_a_waiting_pod_exits_1_with_its_blockers(capsys: pytest.CaptureFixture[str]) -> None:
    async with live() as s:
        s.pods(pod("big", "3"), pod("filler", "3500m"))
        await s.until(lambda: s.decided("default/big") and s.decided("default/filler"))
        waiting = "default/big" if not s.bound("default/big") else "default/filler"
        status, out, _ = await berth(capsys, "why", waiting, "--server", s.address, "-o", "json")
        doc = json.loads(out)
        assert status == 1
        assert doc["pod"] == waiting and doc["phase"] == "Unschedulable"
        assert doc["summary"].startswith("0/2 nodes are available: ")
        assert [b["kind"] for b in doc["blockers"]] == ["fit"]
        assert set(doc["blockers"][0]) == {"kind", "message", "unblocksWhen"}
        assert doc["closestNodes"] and doc["closestNodes"][0]["lacks"].startswith("lacks ")

        status, out, _ = await berth(capsys, "why", waiting.split("/")[1], "--server", s.address)
        assert status == 1
        assert out.splitlines()[0] == f"pod {waiting}: Unschedulable"
        assert "  - fit: 0/2 nodes are available: " in out and "closest nodes:" in out


async def test_why_a_bound_pod_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    async with live() as s:
        s.pods(pod("web"))
        await s.until(lambda: s.bound("default/web"))
        status, out, _ = await berth(capsys, "why", "pod/web", "--server", s.address, "-o", "yaml")
        doc = yaml.safe_load(out)
        assert status == 0
        assert (doc["phase"], doc["summary"], doc["blockers"]) == ("Bound", f"bound to {doc['node']}", [])


async def test_why_an_unknown_pod_is_not_found_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    async with live() as s:
        status, out, err = await berth(capsys, "why", "default/ghost", "--server", s.address)
        assert (status, out, err) == (1, "", "berth: not_found: pod default/ghost not found\n")


# ---------------------------------------------------------------- whatif


async def test_whatif_counts_replicas_without_placing_any(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: r}\n"
        "spec:\n  schedulerName: berth\n  containers: [{name: c, image: x, resources: {requests: {cpu: '1'}}}]\n"
    )
    async with live() as s:
        status, out, _ = await berth(capsys, "whatif", "-f", str(manifest), "--server", s.address, "-o", "json")
        doc = json.loads(out)
        assert status == 0
        assert (doc["fit"], doc["limitedBy"]) == (6, "0/2 nodes are available: 2 Insufficient cpu.")
        assert sorted(p["node"] for p in doc["placements"]) == ["a"] * 4 + ["b"] * 2
        assert all(p["preempts"] == [] for p in doc["placements"])
        assert (doc["quotaOk"], doc["quotaMessage"]) == (True, "")
        assert len(s.berth.core.pods) == 0 and s.berth.core.cache.pod_count == 0

        status, out, _ = await berth(capsys, "whatif", "-f", str(manifest), "--replicas", "2", "--server", s.address)
        assert status == 0
        assert out.splitlines()[0] == "2 of 2 replicas of default/r fit now; stopped by: replicas"
        assert out.splitlines()[1].startswith("  r-0 -> ")


def test_age_is_kubectls_human_duration() -> None:
    cases = {0: "0s", 119: "119s", 120: "2m", 201: "3m21s", 600: "10m", 3 * 3600 + 60: "3h1m", 9 * 3600: "9h"}
    cases |= {50 * 3600: "2d2h", 10 * 86400: "10d", 800 * 86400: "2y70d"}
    assert {s: output.human_duration(s) for s in cases} == cases


# ---------------------------------------------------------------- one word for one state


async def test_a_pod_bigger_than_any_node_has_one_status_word_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """submit --wait, get pods and why all say Unschedulable (submit --wait
    said Rejected), and why names the largest node's allocatable instead of
    `closestNodes: []` and `unblocksWhen: ''`."""
    manifest = tmp_path / "heavy.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: heavy}\n"
        "spec:\n  schedulerName: berth\n  containers: [{name: c, image: x, resources: {requests: {cpu: '64'}}}]\n"
    )
    async with live() as s:
        status, out, _ = await berth(
            capsys, "submit", "-f", str(manifest), "--wait", "--server", s.address, "-o", "json"
        )
        (row,) = json.loads(out)
        assert (status, row["status"]) == (1, "Unschedulable")
        _, out, _ = await berth(capsys, "get", "pod", "heavy", "--server", s.address, "-o", "json")
        phase = json.loads(out)["phase"]
        status, out, _ = await berth(capsys, "why", "heavy", "--server", s.address, "-o", "yaml")
    doc = yaml.safe_load(out)
    assert (status, phase, doc["phase"]) == (1, "Unschedulable", "Unschedulable")
    (fit,) = doc["blockers"]
    assert fit["unblocksWhen"] == "runs only on a node with at least 64 cpu allocatable (the largest, a, has 4 cpu)"
    assert doc["closestNodes"] == [
        {"node": "a", "lacks": "lacks 60 cpu, 4 cpu allocatable"},
        {"node": "b", "lacks": "lacks 62 cpu, 2 cpu allocatable"},
    ]
