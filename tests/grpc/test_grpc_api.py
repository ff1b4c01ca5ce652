"""The gRPC adapter: contract verbs, the Cluster feed, health, reflection, errors."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from berth import app, config
from berth.adapters.grpc import convert
from berth.adapters.grpc.server import GrpcServer
from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, model_pb2, scheduler_pb2, scheduler_pb2_grpc
from berth.cluster.embedded import EmbeddedCluster
from berth.scheduling.core import Core
from berth.testing import make_node, make_pod


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[tuple[grpc.aio.Channel, Core, EmbeddedCluster]]:
    berth = app.build(config.parse({"grpc": {"host": "127.0.0.1", "port": 0}}))
    core, feed = berth.core, berth.cluster
    feed.upsert_nodes([make_node("a", cpu="4", memory="8Gi", pods=10), make_node("b", cpu="1", memory="1Gi", pods=10)])
    server = GrpcServer(core, berth.extender, feed)
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        yield channel, core, feed
    finally:
        await channel.close()
        await server.stop(0)


@pytest.fixture
async def api() -> AsyncIterator[tuple[grpc.aio.Channel, Core, EmbeddedCluster]]:
    async with serving() as s:
        yield s


async def test_list_nodes_reports_allocatable_and_requested(
    api: tuple[grpc.aio.Channel, Core, EmbeddedCluster],
) -> None:
    channel, _, feed = api
    feed.upsert_pods([make_pod("x", requests={"cpu": "500m"}, node_name="a")])
    resp = await cluster_pb2_grpc.ClusterStub(channel).ListNodes(cluster_pb2.ListNodesRequest())
    by_name = {n.name: n for n in resp.nodes}
    assert by_name["a"].allocatable["cpu"] == 4000
    assert by_name["a"].requested["cpu"] == 500
    assert by_name["a"].pods == 1


async def test_explain_gives_reasons_per_node_and_scores_for_feasible_ones(
    api: tuple[grpc.aio.Channel, Core, EmbeddedCluster],
) -> None:
    channel, _, _ = api
    pod = convert.pod_to_pb(make_pod("big", requests={"cpu": "2"}))
    resp = await scheduler_pb2_grpc.SchedulerStub(channel).Explain(
        scheduler_pb2.ExplainRequest(pod=pod, profile="berth")
    )
    nodes = {n.node: n for n in resp.nodes}
    assert nodes["a"].feasible and nodes["a"].score > 0 and "NodeResourcesFit" in nodes["a"].plugin_scores
    assert not nodes["b"].feasible
    assert [(r.plugin, r.reason) for r in nodes["b"].reasons] == [("NodeResourcesFit", "Insufficient cpu")]
    assert resp.summary == "1/2 nodes are available"


async def test_cluster_feed_upserts_and_deletes(api: tuple[grpc.aio.Channel, Core, EmbeddedCluster]) -> None:
    channel, core, _ = api
    stub = cluster_pb2_grpc.ClusterStub(channel)
    node = convert.node_to_pb(make_node("fed", cpu="2", allocatable={"example.com/fpga": 2}))
    assert (await stub.UpsertNodes(cluster_pb2.UpsertNodesRequest(nodes=[node]))).upserted == 1
    assert core.cache.node_info("fed") is not None
    assert (await stub.DeleteNodes(cluster_pb2.DeleteNodesRequest(names=["fed", "nope"]))).deleted == 1


@pytest.mark.parametrize(
    ("call", "request_", "message"),
    [
        ("Filter", scheduler_pb2.FilterRequest(), "pod: required"),
        (
            "Explain",
            scheduler_pb2.ExplainRequest(pod=model_pb2.Pod(metadata=model_pb2.ObjectMeta(name="p")), profile="ghost"),
            "unknown profile 'ghost'",
        ),
    ],
)
async def test_bad_requests_are_invalid_argument_and_the_server_keeps_serving(
    api: tuple[grpc.aio.Channel, Core, EmbeddedCluster], call: str, request_: object, message: str
) -> None:
    channel, _, _ = api
    stub = scheduler_pb2_grpc.SchedulerStub(channel)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await getattr(stub, call)(request_)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in (err.value.details() or "")
    assert (await cluster_pb2_grpc.ClusterStub(channel).ListNodes(cluster_pb2.ListNodesRequest())).nodes


async def test_invalid_fed_pod_is_rejected(api: tuple[grpc.aio.Channel, Core, EmbeddedCluster]) -> None:
    channel, _, _ = api
    bad = model_pb2.Pod(metadata=model_pb2.ObjectMeta(name="p"))  # no containers
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await cluster_pb2_grpc.ClusterStub(channel).UpsertPods(cluster_pb2.UpsertPodsRequest(pods=[bad]))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "spec.containers" in (err.value.details() or "")


async def test_health_and_reflection(api: tuple[grpc.aio.Channel, Core, EmbeddedCluster]) -> None:
    channel, _, _ = api
    health = await health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service="berth.v1.Scheduler")
    )
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)

    async def requests() -> AsyncIterator[reflection_pb2.ServerReflectionRequest]:
        yield reflection_pb2.ServerReflectionRequest(list_services="")

    names = []
    async for resp in stub.ServerReflectionInfo(requests()):
        names = [s.name for s in resp.list_services_response.service]
        break
    assert {"berth.v1.Scheduler", "berth.v1.Cluster", "grpc.health.v1.Health"} <= set(names)


async def test_submit_is_idempotent_per_uid_and_watch_streams_decisions(
    api: tuple[grpc.aio.Channel, Core, EmbeddedCluster],
) -> None:
    channel, core, _ = api
    stub = scheduler_pb2_grpc.SchedulerStub(channel)
    pod = convert.pod_to_pb(make_pod("job", requests={"cpu": "1"}, scheduler_name="berth"))
    first = await stub.Submit(scheduler_pb2.SubmitRequest(pods=[pod]))
    again = await stub.Submit(scheduler_pb2.SubmitRequest(pods=[pod]))
    assert first.results[0].accepted and again.results[0].message == "already submitted"
    qs = (await stub.Explain(scheduler_pb2.ExplainRequest(pod=pod))).queue
    assert qs.phase == "Active"
    stream = stub.WatchDecisions(scheduler_pb2.WatchDecisionsRequest(pods=["default/job"], replay=True))
    first_decision = await stream.read()
    assert first_decision.pod == "default/job"
    stream.cancel()
    cancelled = await stub.Cancel(scheduler_pb2.CancelRequest(namespace="default", name="job"))
    assert cancelled.cancelled
    assert core.pods.by_key("default/job") is None
