"""The client library against a running Berth (its loop and gRPC server on
this event loop): both clients' calls, the bearer token, TLS, retries on
UNAVAILABLE, deadlines, and a watch that resumes across a server restart."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import berth_client
from berth.adapters.grpc.server import GrpcServer, SchedulerServicer
from berth.scheduling import batch
from berth.testing import make_pod
from tests.certs import CA
from tests.cli.test_inspect_cli import live

TOKEN = "client-token-0123456789abcdef"


def pod(name: str, cpu: str = "500m", **spec: Any) -> dict[str, Any]:
    """A manifest as YAML decodes it, with quantity strings."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}], **spec},
    }


# ---------------------------------------------------------------- the calls


async def test_the_blocking_client_submits_waits_explains_and_cancels() -> None:
    async with live() as s:

        def session() -> dict[str, Any]:
            with berth_client.Client(s.address) as c:
                results = c.submit([pod("web"), pod("big", "64"), pod("odd", schedulerName="nobody")])
                waited = c.wait(results, timeout=20)
                return {
                    "results": [(r.pod, r.accepted, r.message) for r in results],
                    "outcomes": [(o.pod, o.status, o.node, o.done) for o in waited.outcomes],
                    "why": c.why("big"),
                    "row": c.get_pod("big"),
                    "pods": [r.name for r in c.list_pods()],
                    "whatif": c.whatif(pod("r", "1"), 2),
                    "explain": c.explain(pod("e", "3")),
                    "cancel": c.cancel("big"),
                    "health": c.health(),
                    "nodes": [berth_client.to_dict(n) for n in c.list_nodes()],
                }

        got = await asyncio.to_thread(session)
    assert got["results"] == [
        ("default/web", True, 'spec.schedulerName defaulted to "berth", the only profile'),
        ("default/big", True, 'spec.schedulerName defaulted to "berth", the only profile'),
        # The client sends each manifest too (pod_manifests), which the server reads first.
        (
            "default/odd",
            False,
            'pod_manifests[2].spec.schedulerName: Unsupported value: "nobody": supported values: "berth"',
        ),
    ]
    assert got["outcomes"] == [
        ("default/web", "Bound", "a", True),
        ("default/big", "Unschedulable", "", True),  # bigger than any node: preemption cannot help
        ("default/odd", "Rejected", "", True),
    ]
    assert (got["why"].phase, got["row"].phase) == ("Unschedulable", "Unschedulable")
    assert got["pods"] == ["big", "web"]
    assert (got["whatif"].fit, got["whatif"].limited_by) == (2, "replicas")
    assert [n.node for n in got["explain"].nodes if n.feasible] == ["a"]
    assert got["cancel"].cancelled and got["health"] == "SERVING"
    assert got["nodes"][0]["allocatable"] == {"cpu": "4", "memory": "8Gi", "pods": "20"}
    assert got["nodes"][0]["requested"] == {"cpu": "500m"}


async def test_the_async_client_submits_a_gang_and_feeds_the_cluster() -> None:
    async with live() as s, berth_client.AsyncClient(s.address) as c:
        fed = await c.feed(
            [
                {"kind": "Node", "metadata": {"name": "n3"}, "status": {"allocatable": {"cpu": "8", "pods": "10"}}},
                {"kind": "Namespace", "metadata": {"name": "ml"}},
            ]
        )
        assert fed == {"Namespace": 1, "Node": 1}
        results = await c.submit_gang("train", [pod(f"w{i}", "3") for i in range(3)])
        waited = await c.wait(results, timeout=20)
        assert [o.status for o in waited.outcomes] == ["Bound"] * 3
        (group,) = await c.list_pod_groups()
        assert (group.name, group.min_member, group.members, group.bound, group.phase) == (
            "train",
            3,
            3,
            3,
            "Scheduled",
        )
        assert await c.delete("Node", ["n3", "ghost"]) == 1
        assert [n.name for n in await c.list_nodes()] == ["a", "b"]


async def test_an_unknown_object_is_not_found_and_a_bad_one_invalid() -> None:
    async with live() as s, berth_client.AsyncClient(s.address) as c:
        with pytest.raises(berth_client.NotFound, match="pod default/ghost not found"):
            await c.why("ghost")
        with pytest.raises(berth_client.NotFound, match="queue 'q' not found"):
            await c.get_queue("q")
        with pytest.raises(berth_client.InvalidArgument, match="phase: 'Sleeping' is not one of"):
            await c.list_pods(phase="Sleeping")
        with pytest.raises(berth_client.QuantityError, match=r"spec.containers\[0\].resources.requests\[cpu\]"):
            await c.submit([pod("p", "lots")])


# ---------------------------------------------------------------- token, TLS


async def test_changes_carry_the_bearer_token_and_reads_need_none(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    async with live({"auth": {"tokenFile": str(token)}}) as s:
        async with berth_client.AsyncClient(s.address) as anonymous:
            assert [n.name for n in await anonymous.list_nodes()] == ["a", "b"]
            with pytest.raises(berth_client.Unauthenticated, match="Submit changes state"):
                await anonymous.submit([pod("p")])
        async with berth_client.AsyncClient(s.address, token=TOKEN) as c:
            (result,) = await c.submit([pod("p")])
    assert result.accepted


async def test_tls_with_the_servers_ca_works_and_another_ca_says_why(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    ca, other = CA(tmp_path), CA(tmp_path / "other", "other-ca")
    leaf = ca.issue("berth", server=True)
    async with live({"tls": {"certFile": str(leaf.cert), "keyFile": str(leaf.key)}}) as s:
        async with berth_client.AsyncClient(s.address, tls=berth_client.Tls(ca_file=str(ca.path))) as c:
            assert len(await c.list_nodes()) == 2
        wrong = berth_client.Tls(ca_file=str(other.path))
        async with berth_client.AsyncClient(s.address, tls=wrong, retry=berth_client.Retry(attempts=1)) as c:
            with pytest.raises(berth_client.Unavailable) as e:
                await c.list_nodes()
    assert e.value.cause == "untrusted"
    assert (
        str(e.value)
        == f"TLS handshake with {s.address} failed: its certificate is not signed by a CA this client trusts"
    )


# ---------------------------------------------------------------- retries and deadlines


async def test_unavailable_is_retried_with_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server says UNAVAILABLE twice (shutting down, say), then answers:
    the call succeeds, retried by grpc's retry policy within its deadline."""
    import grpc

    calls: list[float] = []
    real = SchedulerServicer.ListQueues

    async def flaky(self: Any, request: Any, context: Any) -> Any:
        calls.append(asyncio.get_running_loop().time())
        if len(calls) < 3:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the server is shutting down; reconnect")
        return await real(self, request, context)

    monkeypatch.setattr(SchedulerServicer, "ListQueues", flaky)
    async with live() as s:
        retry = berth_client.Retry(attempts=4, initial_backoff=0.05, max_backoff=0.1)
        async with berth_client.AsyncClient(s.address, retry=retry) as c:
            assert await c.list_queues() == []
        async with berth_client.AsyncClient(s.address, retry=berth_client.Retry(attempts=1)) as c:
            calls.clear()
            with pytest.raises(berth_client.Unavailable, match="shutting down"):
                await c.list_queues()
    assert len(calls) == 1


async def test_a_call_past_its_deadline_is_deadline_exceeded(monkeypatch: pytest.MonkeyPatch) -> None:
    async def slow(self: Any, request: Any, context: Any) -> Any:
        await asyncio.sleep(5)

    monkeypatch.setattr(SchedulerServicer, "ListQueues", slow)
    async with live() as s, berth_client.AsyncClient(s.address, timeout=0.2) as c:
        with pytest.raises(berth_client.DeadlineExceeded):
            await c.list_queues()


# ---------------------------------------------------------------- the watch resumes


async def test_a_watch_resumes_across_a_server_restart_missing_and_repeating_nothing() -> None:
    """The decision stream breaks when the gRPC server stops (UNAVAILABLE);
    a pod is placed while it is down; once a server listens again on the same
    port the watch reconnects by itself, passes on that pod's decision
    (replayed) and none of those it had passed on already."""
    seen: list[tuple[str, str]] = []

    async def until(pod: str, kind: str = "BOUND") -> None:
        for _ in range(2000):
            if (pod, kind) in seen:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{pod} {kind} not seen: {seen}")

    async with live() as s:
        port = s.server.port
        retry = berth_client.Retry(initial_backoff=0.05, max_backoff=0.2, reconnect_seconds=30)
        async with berth_client.AsyncClient(s.address, retry=retry) as c:

            async def consume() -> None:
                async for d in c.watch():
                    seen.append((d.pod, berth_client.api.v1.scheduler_pb2.Decision.Kind.Name(d.kind)))

            consumer = asyncio.create_task(consume())
            for _ in range(400):  # subscribed
                if s.berth.core.decisions._watchers:
                    break
                await asyncio.sleep(0.01)
            s.berth.cluster.upsert_pods([make_pod("before", scheduler_name="berth", requests={"cpu": "1"})])
            await until("default/before")
            await s.server.stop(0)
            batch.submit(s.berth.core, [make_pod("meanwhile", scheduler_name="berth", requests={"cpu": "1"})])
            for _ in range(400):
                latest = s.berth.core.decisions.latest.get("default/meanwhile")
                if latest is not None and latest.kind.name == "BOUND":
                    break
                await asyncio.sleep(0.01)
            assert ("default/meanwhile", "BOUND") not in seen
            s.berth.core.cfg.grpc.port = port
            s.server = GrpcServer(s.berth.core, s.berth.extender, s.berth.cluster)
            await s.server.start()
            await until("default/meanwhile")
            consumer.cancel()
            await asyncio.gather(consumer, return_exceptions=True)
    assert seen.count(("default/before", "BOUND")) == 1
    assert seen.count(("default/meanwhile", "BOUND")) == 1
