"""The Kubernetes adapter against an API server that is down at start, goes
away mid-run, and a Lease held at shutdown — in virtual time, with
:class:`tests.kubernetes.fakeapi.FakeApiServer` under kubernetes-asyncio."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from kubernetes_asyncio import client

from berth import app, config
from berth.adapters.kubernetes.runner import KubernetesRunner
from berth.cluster import model
from tests.kubernetes.fakeapi import FakeApiServer, namespace, node

pytestmark = pytest.mark.looptime

LEASE = {
    "leaderElect": True,
    "leaseDurationSeconds": 15,
    "renewDeadlineSeconds": 10,
    "retryPeriodSeconds": 2,
    "resourceNamespace": "kube-system",
    "resourceName": "berth",
}


@pytest.fixture
async def fake() -> FakeApiServer:
    return FakeApiServer()


def kube_runner(api: client.ApiClient, leader_election: dict[str, object], identity: str = "a") -> KubernetesRunner:
    cfg = config.parse({"leaderElection": leader_election})
    return KubernetesRunner(app.build(cfg, run_loop=False).core, api, identity=identity)


async def until(what: str, check: Callable[[], bool], timeout: float = 300.0) -> None:  # noqa: ASYNC109 - virtual
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def running(coro: Awaitable[None]) -> AsyncIterator[asyncio.Task[None]]:
    task: asyncio.Task[None] = asyncio.ensure_future(coro)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_an_api_server_down_at_start_is_waited_for_and_readyz_turns_true_once_caches_sync(
    fake: FakeApiServer, api: client.ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    runner = kube_runner(api, {"leaderElect": False})
    fake.go_down()
    with caplog.at_level(logging.INFO, logger="berth.adapters.kubernetes"):
        async with running(runner.run()) as task:
            await asyncio.sleep(60)
            assert not task.done(), "the adapter gave up while the API server was down"
            assert not runner.core.ready, "/readyz before any cache synced"
            steps = [r for r in caplog.records if r.levelno == logging.WARNING]
            # One line per backoff step (0.8 s growing to 30 s): a handful in a minute, not one per attempt.
            assert 4 <= len(steps) == fake.refused <= 8, [r.getMessage() for r in steps]
            assert (
                "discovering PodGroups (scheduling.x-k8s.io/v1alpha1) failed (ClientConnectionError: Cannot connect"
                in (steps[0].getMessage())
            )

            fake.set_nodes([node("n1"), node("n2")])
            fake.come_up()
            await until("/readyz", lambda: runner.core.ready, timeout=120)
            assert runner.core.cache.node_count == 2
            assert runner.leading.is_set(), "without leader election this replica schedules"
            assert not task.done()


async def test_an_api_server_going_away_mid_run_is_waited_out_and_the_caches_catch_up(
    fake: FakeApiServer, api: client.ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    fake.set_nodes([node("n1")])
    runner = kube_runner(api, {"leaderElect": False})
    async with running(runner.run()) as task:
        await until("/readyz", lambda: runner.core.ready)
        lists_before = fake.requests.count(("GET", "/api/v1/nodes"))
        with caplog.at_level(logging.WARNING, logger="berth.adapters.kubernetes"):
            fake.go_down()
            await asyncio.sleep(120)
        assert not task.done()
        assert runner.core.ready, "the caches stay synced (as kube-scheduler's do) while the API server is away"
        lost = [r.getMessage() for r in caplog.records if "informer" in r.getMessage()]
        assert lost and all("cannot reach the API server" in m for m in lost), lost
        assert len(lost) <= len(runner.informers) * 8, "one line per backoff step per informer"

        fake.set_nodes([node("n1"), node("n2")])
        fake.come_up()
        await until("the node added during the outage", lambda: runner.core.cache.node_count == 2, timeout=120)
        assert fake.requests.count(("GET", "/api/v1/nodes")) > lists_before


async def test_the_leader_ends_its_term_then_releases_the_lease_on_shutdown(
    fake: FakeApiServer, api: client.ApiClient
) -> None:
    runner = kube_runner(api, LEASE)
    async with running(runner.run()):
        await until("leadership", runner.leading.is_set)
        assert fake.holder("kube-system", "berth") == "a"
        held = fake.leases[("kube-system", "berth")]["spec"]
    assert not runner.leading.is_set(), "the term ended"
    spec = fake.leases[("kube-system", "berth")]["spec"]
    # client-go's release(): no holder, a 1 s lease, transitions kept.
    assert spec["holderIdentity"] == ""
    assert spec["leaseDurationSeconds"] == 1
    assert spec.get("leaseTransitions") == held.get("leaseTransitions")
    assert fake.requests[-1][0] == "PUT"


async def test_a_lease_taken_over_meanwhile_is_not_released(fake: FakeApiServer, api: client.ApiClient) -> None:
    runner = kube_runner(api, LEASE)
    async with running(runner.run()):
        await until("leadership", runner.leading.is_set)
        lease = fake.leases[("kube-system", "berth")]
        lease["spec"]["holderIdentity"] = "b"
        lease["metadata"]["resourceVersion"] = fake.next_rv()
    assert fake.holder("kube-system", "berth") == "b"


async def test_a_released_lease_is_taken_by_a_standby_at_its_next_retry(
    fake: FakeApiServer, api: client.ApiClient
) -> None:
    a, b = kube_runner(api, LEASE, "a"), kube_runner(api, LEASE, "b")
    leader = asyncio.create_task(a.run())
    await until("a leads", a.leading.is_set)
    async with running(b.run()):
        await asyncio.sleep(10)
        assert not b.leading.is_set(), "a standby while the lease is held"
        leader.cancel()  # SIGTERM: serve() cancels the adapter
        with contextlib.suppress(asyncio.CancelledError):
            await leader
        loop = asyncio.get_running_loop()
        released = loop.time()
        await until("b leads", b.leading.is_set)
        # Within a retry period (2 s, jittered by the library up to 1.2x), not the 15 s lease duration.
        assert loop.time() - released <= 2 * 1.2 + 0.5
        assert fake.holder("kube-system", "berth") == "b"


async def test_a_follower_waits_for_an_unreachable_api_server_one_line_per_backoff_step(
    fake: FakeApiServer, api: client.ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    fake.leases[("kube-system", "berth")] = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "berth", "namespace": "kube-system", "resourceVersion": fake.next_rv()},
        "spec": {
            "holderIdentity": "b",
            "leaseDurationSeconds": 15,
            "acquireTime": "2030-01-01T00:00:00.000000Z",
            "renewTime": "2030-01-01T00:00:00.000000Z",
        },
    }
    runner = kube_runner(api, LEASE)
    async with running(runner.run()) as task:
        await until("/readyz", lambda: runner.core.ready)
        await asyncio.sleep(5)
        assert not runner.leading.is_set(), "berth-b holds the lease"
        with caplog.at_level(logging.WARNING, logger="berth.adapters.kubernetes.election"):
            fake.go_down()
            await asyncio.sleep(120)
        waits = [r.getMessage() for r in caplog.records if r.name == "berth.adapters.kubernetes.election"]
        assert waits and all("API server unreachable" in m for m in waits), waits
        assert len(waits) <= 9, "backoff steps, not one line per 2 s retry"
        assert not task.done()
        fake.come_up()
        await asyncio.sleep(60)
        assert not task.done()
        assert fake.holder("kube-system", "berth") == "b", "a follower never writes a lease it does not hold"


async def test_the_namespace_informer_gives_the_core_every_namespace_and_its_labels(
    fake: FakeApiServer, api: client.ApiClient
) -> None:
    fake.namespaces = [namespace("default", {}), namespace("team-a", {"team": "a"})]
    runner = kube_runner(api, {"leaderElect": False})
    async with running(runner.run()):
        await until("/readyz", lambda: runner.core.ready)
        store = runner.core.namespaces
        assert store.labels_of("team-a") == {"kubernetes.io/metadata.name": "team-a", "team": "a"}
        assert store.selected(model.LabelSelector(match_labels={"team": "a"})) == ["team-a"]
        assert ("GET", "/api/v1/namespaces") in fake.requests
