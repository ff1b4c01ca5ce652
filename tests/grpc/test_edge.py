"""The gRPC edge: undecodable and malformed requests are the client's
mistake (INVALID_ARGUMENT, never UNKNOWN or INTERNAL), each error kind has its
status code, details are bounded, message size limits hold after inflating."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import grpc
import pytest
from google.protobuf import descriptor_pool
from hypothesis import given
from hypothesis import strategies as st

from berth import errors
from berth.adapters.grpc import convert, edge, server
from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, model_pb2, scheduler_pb2, scheduler_pb2_grpc
from berth.testing import make_node, make_pod
from tests.grpc.conftest import Served, serving

pool = descriptor_pool.Default()

#: Every berth.v1 method: (full name, server-streaming).
METHODS = [
    (f"/{service.full_name}/{m.name}", m.server_streaming)
    for pb in (scheduler_pb2, cluster_pb2)
    for service in pb.DESCRIPTOR.services_by_name.values()
    for m in service.methods
]

#: Bytes no berth.v1 request decodes from: a tag whose varint never ends, an
#: end-group tag without its start, wire type 7, a length running past the
#: end, a varint value that never ends; and where field 1 is a string or a
#: message, invalid UTF-8 in it.
UNDECODABLE = {
    "unterminated tag": b"\xff",
    "end group without start": b"\x0c",
    "wire type 7": b"\x0f",
    "length past the end": b"\x0a\x7f\x01",
    "unterminated varint": b"\x08\xff",
}


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    async with serving() as s:
        yield s


async def raw_call(served: Served, method: str, streaming: bool, payload: bytes) -> grpc.aio.AioRpcError:
    async with served.channel() as ch:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            if streaming:
                async for _ in ch.unary_stream(method)(payload):
                    pass
            else:
                await ch.unary_unary(method)(payload)
    return err.value


@pytest.mark.parametrize(("method", "streaming"), METHODS, ids=[m for m, _ in METHODS])
async def test_undecodable_bytes_are_invalid_argument_for_every_method(
    served: Served, method: str, streaming: bool
) -> None:
    cases = dict(UNDECODABLE)
    request_type = pool.FindMethodByName(method.strip("/").replace("/", ".")).input_type
    if 1 in request_type.fields_by_number:
        cases["invalid UTF-8 in field 1"] = b"\x0a\x02\xff\xfe"
    for name, payload in cases.items():
        err = await raw_call(served, method, streaming, payload)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (name, err.code(), err.details())
        assert (err.details() or "").startswith("request: cannot decode berth.v1."), name


@given(st.binary(max_size=64))
def test_any_bytes_decode_or_are_invalid_argument(raw: bytes) -> None:
    decode = edge._decoder(scheduler_pb2.SubmitRequest.FromString)
    try:
        assert isinstance(decode(raw), scheduler_pb2.SubmitRequest)
    except errors.InvalidArgument as e:
        assert str(e).startswith("request: cannot decode berth.v1.SubmitRequest: ")


def pod_with(**containers: dict[str, int]) -> model_pb2.Pod:
    pod = convert.pod_to_pb(make_pod("p", requests={"cpu": "1"}))
    pod.spec.containers[0].requests.clear()
    pod.spec.containers[0].requests.update(containers.get("requests", {}))
    return pod


HUGE_MS = 2**63 - 1


@pytest.mark.parametrize(
    ("call", "request_", "message"),
    [
        (
            "Filter",
            scheduler_pb2.FilterRequest(
                pod=pod_with(),
                nodes=scheduler_pb2.NodeSet(
                    full_objects=True,
                    nodes=[convert.node_to_pb(make_node("a")), model_pb2.Node(status={"allocatable": {"memory": -5}})],
                ),
            ),
            "nodes.nodes[1].status.allocatable[memory]: Invalid value: -5",
        ),
        (
            "Explain",
            scheduler_pb2.ExplainRequest(
                pod=model_pb2.Pod(metadata=model_pb2.ObjectMeta(name="p", creation_timestamp_ms=HUGE_MS))
            ),
            f"pod.metadata.creation_timestamp_ms: Invalid value: {HUGE_MS}: not a time between the years 1 and 9999",
        ),
        (
            "Submit",
            scheduler_pb2.SubmitRequest(group=model_pb2.PodGroup(min_resources={"cpu": -2})),
            "group.min_resources[cpu]: Invalid value: -2",
        ),
        (
            "Preempt",
            scheduler_pb2.PreemptRequest(
                pod=pod_with(),
                node_name_to_victims={"a": scheduler_pb2.Victims(pods=[pod_with(requests={"memory": -1})])},
            ),
            "node_name_to_victims[a].pods[0].spec.containers[0].requests[memory]: Invalid value: -1",
        ),
        ("Filter", scheduler_pb2.FilterRequest(), "pod: required"),
        (
            "Explain",
            scheduler_pb2.ExplainRequest(pod=model_pb2.Pod(metadata=model_pb2.ObjectMeta(name="p")), profile="ghost"),
            "unknown profile 'ghost'",
        ),
    ],
    ids=[
        "negative allocatable names the node in the set",
        "timestamp beyond datetime",
        "negative gang minimum",
        "negative victim request",
        "no pod",
        "unknown profile",
    ],
)
async def test_malformed_values_are_invalid_argument_with_the_field_path(
    served: Served, call: str, request_: object, message: str
) -> None:
    async with served.channel() as ch:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await getattr(scheduler_pb2_grpc.SchedulerStub(ch), call)(request_)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert message in (err.value.details() or "")
        # ... and the server keeps serving.
        assert (await cluster_pb2_grpc.ClusterStub(ch).ListNodes(cluster_pb2.ListNodesRequest())).nodes


async def test_explain_with_ten_thousand_unknown_nodes_answers_a_bounded_message(served: Served) -> None:
    names = [f"no-such-node-{i:05d}" for i in range(10_000)]
    request = scheduler_pb2.ExplainRequest(pod=pod_with(), node_names=names)
    async with served.channel() as ch:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await scheduler_pb2_grpc.SchedulerStub(ch).Explain(request)
    details = err.value.details() or ""
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert details.startswith("node_names: unknown node(s) no-such-node-00000")
    assert len(details) <= errors.MAX_MESSAGE_CHARS


KINDS = [
    (errors.InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NotFound, grpc.StatusCode.NOT_FOUND),
    (errors.AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (errors.FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.ResourceExhausted, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.Unauthenticated, grpc.StatusCode.UNAUTHENTICATED),
    (errors.PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
    (ValueError, grpc.StatusCode.INVALID_ARGUMENT),
]


@pytest.mark.parametrize(("kind", "code"), KINDS, ids=[k.__name__ for k, _ in KINDS])
async def test_each_error_kind_answers_its_status_code(
    served: Served, monkeypatch: pytest.MonkeyPatch, kind: type[Exception], code: grpc.StatusCode
) -> None:
    def fail(*_: object, **__: object) -> None:
        raise kind("pod: something about it " + "x" * 5000)

    monkeypatch.setattr(server.explain, "explain", fail)
    async with served.channel() as ch:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await scheduler_pb2_grpc.SchedulerStub(ch).Explain(scheduler_pb2.ExplainRequest(pod=pod_with()))
    assert err.value.code() == code
    details = err.value.details() or ""
    assert details.startswith("pod: something about it x") and len(details) <= errors.MAX_MESSAGE_CHARS


async def test_a_bug_is_internal_logged_once_with_its_traceback_and_the_server_keeps_serving(
    served: Served, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def bug(*_: object, **__: object) -> None:
        raise IndexError("list index out of range")

    monkeypatch.setattr(server.explain, "explain", bug)
    async with served.channel() as ch:
        with (
            caplog.at_level(logging.ERROR, logger="berth.adapters.grpc.edge"),
            pytest.raises(grpc.aio.AioRpcError) as err,
        ):
            await scheduler_pb2_grpc.SchedulerStub(ch).Explain(scheduler_pb2.ExplainRequest(pod=pod_with()))
        assert err.value.code() == grpc.StatusCode.INTERNAL
        assert "IndexError: list index out of range" in (err.value.details() or "")
        logged = [r for r in caplog.records if r.name == "berth.adapters.grpc.edge"]
        assert len(logged) == 1 and logged[0].exc_info is not None
        assert "/berth.v1.Scheduler/Explain" in logged[0].getMessage()
        assert (await cluster_pb2_grpc.ClusterStub(ch).ListNodes(cluster_pb2.ListNodesRequest())).nodes


async def test_watch_decisions_without_a_scheduling_loop_is_failed_precondition() -> None:
    async with serving(runSchedulingLoop=False) as s, s.channel() as ch:
        stream = scheduler_pb2_grpc.SchedulerStub(ch).WatchDecisions(scheduler_pb2.WatchDecisionsRequest())
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stream.read()
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "runSchedulingLoop: false" in (err.value.details() or "")


LIMIT = 64 * 1024


def upsert_of(label_bytes: int) -> cluster_pb2.UpsertNodesRequest:
    node = convert.node_to_pb(make_node("fat", cpu="1"))
    node.metadata.annotations["padding"] = "a" * label_bytes
    return cluster_pb2.UpsertNodesRequest(nodes=[node])


@pytest.mark.parametrize("compression", [grpc.Compression.NoCompression, grpc.Compression.Gzip])
async def test_message_limit_holds_after_inflating(compression: grpc.Compression) -> None:
    big = upsert_of(4 * LIMIT)  # gzip shrinks it far below LIMIT on the wire
    assert big.ByteSize() > LIMIT
    async with serving({"maxMessageBytes": LIMIT}) as s, s.channel(compression=compression) as ch:
        stub = cluster_pb2_grpc.ClusterStub(ch)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.UpsertNodes(big)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert s.core.cache.node_info("fat") is None
        assert (await stub.UpsertNodes(upsert_of(LIMIT // 2))).upserted == 1
