"""``berth submit --wait`` follows each pod to its outcome — Bound, or done
without a node (Unschedulable where preemption cannot help, Rejected,
Cancelled, Preempted) — through nomination and preemption, or reports the
last state when ``--timeout`` passes first: a table, a summary line, and at
a timeout one bounded line on stderr. The status words are the server's
phases (:mod:`berth_client.outcomes`, whose own tests follow decisions one
by one in tests/client)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

import berth_client
from berth import app, config
from berth.adapters.grpc.server import GrpcServer, SchedulerServicer
from berth.api.v1 import scheduler_pb2
from berth.cli import main as cli
from berth.cluster import manifests
from berth.scheduling import batch
from berth.testing import make_node, make_pod
from tests.grpc.conftest import Served

Kind = scheduler_pb2.Decision


@contextlib.asynccontextmanager
async def scheduling() -> AsyncIterator[Served]:
    """A Berth whose loop runs, on one node "a" (2 cpu) where a low-priority
    pod already runs; backoffs short so a retried pod is retried at once."""
    cfg = config.parse(
        {
            "grpc": {"host": "127.0.0.1", "port": 0},
            "podInitialBackoffSeconds": 0.01,
            "podMaxBackoffSeconds": 0.02,
        }
    )
    async with app.running(cfg) as berth:
        berth.cluster.upsert_nodes([make_node("a", cpu="2", memory="4Gi", pods=10)])
        berth.cluster.upsert_pods(
            [make_pod("low", scheduler_name="berth", node_name="a", priority=1, requests={"cpu": "2"})]
        )
        server = GrpcServer(berth.core, berth.extender, berth.cluster)
        await server.start()
        try:
            yield Served(server, berth.core, berth.cluster)
        finally:
            await server.stop(0)


def manifest(tmp_path: Path, name: str, *, priority: int = 0, **spec: Any) -> Path:
    requests = spec.pop("requests", {"cpu": "2"})
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "berth",
            "priority": priority,
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}],
            **spec,
        },
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


async def berth(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = await asyncio.to_thread(cli.main, list(argv))
    out, err = capsys.readouterr()
    return status, out, err


async def test_a_pod_let_in_by_the_preemption_it_triggered_ends_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its first attempt fails (the node is full) and nominates "a" after
    evicting "low"; submit --wait follows it to the bind instead of stopping
    at that first failure."""
    path = manifest(tmp_path, "high", priority=100)
    async with scheduling() as s:
        status, out, err = await berth(
            capsys, "submit", "-f", str(path), "--wait", "--timeout", "20", "--server", s.address, "-o", "json"
        )
        assert s.core.decisions.latest["default/high"].kind == Kind.BOUND
    assert status == 0, err
    rows = {r["pod"]: r for r in json.loads(out)}
    assert rows["default/high"] == {"pod": "default/high", "node": "a", "status": "Bound", "reason": ""}
    assert rows["default/low"]["status"] == "Preempted"
    uid = manifests.default_uid("default", "high")
    assert rows["default/low"]["reason"] == f"Preempted by pod {uid} on node a"


async def test_a_pod_that_never_fits_exits_2_after_the_timeout_with_its_last_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Node "a" is full with a pod of higher priority than this one: no room
    and no victim, so every attempt fails (and could succeed once "low" leaves)."""
    path = manifest(tmp_path, "late", requests={"cpu": "1"})
    async with scheduling() as s:
        status, out, err = await berth(
            capsys, "submit", "-f", str(path), "--wait", "--timeout", "1", "--server", s.address
        )
    assert status == 2
    lines = out.splitlines()
    assert lines[0].split() == ["POD", "STATUS", "NODE", "REASON"]
    pod, status_word, node, reason = lines[1].split(None, 3)
    assert (pod, status_word, node) == ("default/late", "Unschedulable", "-")
    # The whole FitError; its DynamicResources part is that plugin's to word.
    assert reason.startswith("0/1 nodes are available: 1 Insufficient cpu. ")
    assert reason.endswith("preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
    assert lines[2] == "1 pod: 1 Unschedulable"
    assert err == "berth: timed out after 1s waiting for default/late (Unschedulable)\n"


async def test_an_unresolvable_only_verdict_ends_the_wait_unschedulable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No node has the label: preemption cannot help, so waiting cannot
    either; the pod is Unschedulable, as `berth get pods` and `berth why`
    say too (it was "Rejected" here before)."""
    path = manifest(tmp_path, "picky", requests={"cpu": "100m"}, nodeSelector={"disk": "ssd"})
    async with scheduling() as s:
        status, out, _ = await berth(
            capsys, "submit", "-f", str(path), "--wait", "--timeout", "20", "--server", s.address, "-o", "json"
        )
    assert status == 1
    (row,) = json.loads(out)
    assert row["status"] == "Unschedulable"
    assert "didn't match Pod's node affinity/selector" in row["reason"]


async def test_a_pod_cancelled_while_waited_for_ends_cancelled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = manifest(tmp_path, "doomed", requests={"cpu": "1"})
    async with scheduling() as s:
        waiter = asyncio.create_task(
            berth(capsys, "submit", "-f", str(path), "--wait", "--timeout", "20", "--server", s.address, "-o", "json")
        )
        async for _ in s.core.decisions.watch(["default/doomed"], replay=True):
            break  # submitted, and the CLI is following it
        assert batch.cancel(s.core, "default", "doomed").cancelled
        status, out, _ = await waiter
    assert status == 1
    assert json.loads(out) == [{"pod": "default/doomed", "node": None, "status": "Cancelled", "reason": "cancelled"}]


async def test_a_pod_refused_at_submission_exits_1_without_waiting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second, different pod under a name the cluster already holds."""
    path = manifest(tmp_path, "low", requests={"cpu": "1"})
    async with scheduling() as s:
        status, out, _ = await berth(
            capsys, "submit", "-f", str(path), "--wait", "--timeout", "20", "--server", s.address, "-o", "json"
        )
    assert status == 1
    (row,) = json.loads(out)
    assert row["status"] == "Rejected" and "already exists" in row["reason"]


def many(tmp_path: Path, n: int, cpu: str = "10m") -> Path:
    """``n`` small pods (10m cpu each) in one List manifest."""
    docs = [yaml.safe_load(manifest(tmp_path, f"m{i:02d}", requests={"cpu": cpu}).read_text()) for i in range(n)]
    path = tmp_path / "many.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs}))
    return path


@pytest.mark.parametrize("batch_streams", [True, False], ids=["decision batches", "server without them"])
async def test_many_pods_go_in_batches_and_are_followed_to_the_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, batch_streams: bool
) -> None:
    """Seven pods, three per Submit request: three requests, every pod
    Bound; followed over WatchDecisionBatches, or over WatchDecisions when
    the server does not implement the batched stream."""
    monkeypatch.setattr(berth_client.aio, "SUBMIT_BATCH", 3)
    sizes: list[int] = []
    real_submit = SchedulerServicer.Submit

    async def counting_submit(self: Any, request: Any, context: Any) -> Any:
        sizes.append(len(request.pods))
        return await real_submit(self, request, context)

    monkeypatch.setattr(SchedulerServicer, "Submit", counting_submit)
    if not batch_streams:

        async def unimplemented(self: Any, request: Any, context: Any) -> AsyncIterator[Any]:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not implemented!")
            yield None  # pragma: no cover - an async generator, never reached

        monkeypatch.setattr(SchedulerServicer, "WatchDecisionBatches", unimplemented)
    path = many(tmp_path, 7)
    async with scheduling() as s:
        # Node "a" is full ("low" takes its 2 cpu): the pods go to a second node.
        s.feed.upsert_nodes([make_node("b", cpu="2", memory="4Gi", pods=20)])
        status, out, err = await berth(
            capsys, "submit", "-f", str(path), "--wait", "--timeout", "20", "--server", s.address, "-o", "json"
        )
    assert status == 0, err
    assert sizes == [3, 3, 1]
    rows = json.loads(out)
    assert [r["pod"] for r in rows] == [f"default/m{i:02d}" for i in range(7)]
    assert {r["status"] for r in rows} == {"Bound"}
    assert {r["node"] for r in rows} == {"b"}


async def test_a_timeout_with_many_pods_waiting_is_one_bounded_line_and_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Twelve pods that cannot fit yet (node "a" is full with a pod of higher
    priority): stderr names the first five and counts the rest, instead of
    one line naming every pod (66 686 bytes for 2000 of them); the table ends
    with a summary line."""
    path = many(tmp_path, 12, cpu="1")
    async with scheduling() as s:
        status, out, err = await berth(
            capsys, "submit", "-f", str(path), "--wait", "--timeout", "2", "--server", s.address
        )
    assert status == 2
    names = ", ".join(f"default/m{i:02d} (Unschedulable)" for i in range(5))
    assert err == f"berth: timed out after 2s waiting for 12 pods: {names}, ... and 7 more\n"
    lines = out.splitlines()
    assert len(lines) == 1 + 12 + 1
    assert lines[-1] == "12 pods: 12 Unschedulable"


@pytest.mark.parametrize("timeout", ["0", "-1"])
def test_a_timeout_that_is_not_positive_is_refused_before_submitting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], timeout: str
) -> None:
    path = manifest(tmp_path, "p")
    # Nothing listens there: the refusal comes before any connection.
    status = cli.main(["submit", "-f", str(path), "--wait", "--timeout", timeout, "--server", "127.0.0.1:1"])
    assert status == 1
    assert capsys.readouterr().err == f"berth: --timeout: must be more than 0 seconds, not {float(timeout):g}\n"
