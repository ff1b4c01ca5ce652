"""ListPods, Why and WhatIf over gRPC: read-only views of the core
(:mod:`berth.scheduling.visibility`, :mod:`berth.scheduling.whatif`)."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from berth.adapters.grpc import convert, security
from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from berth.cluster import model
from berth.testing import make_pod
from tests.grpc.conftest import serving

QUEUES: list[dict[str, Any]] = [{"name": "c", "max": {"cpu": "3"}}]


def pending(name: str, **kw: Any) -> model.Pod:
    return make_pod(name, scheduler_name="berth", **kw)


def pb(pod: model.Pod) -> Any:
    return convert.pod_to_pb(pod)


async def test_list_pods_returns_pending_pods_with_their_queue_phase_and_position() -> None:
    async with serving(None, queues=QUEUES) as s:
        s.feed.upsert_pods(
            [
                pending("b", labels={"berth.dev/queue": "c"}, requests={"cpu": "1"}, priority=5),
                pending("a", labels={"berth.dev/queue": "c"}, requests={"cpu": "500m"}),
                pending("held", spec={"schedulingGates": [{"name": "x"}]}),
                make_pod("theirs", scheduler_name="other"),
            ]
        )
        async with s.channel() as ch:
            stub = scheduler_pb2_grpc.SchedulerStub(ch)
            resp = await stub.ListPods(scheduler_pb2.ListPodsRequest())
            only_gated = await stub.ListPods(scheduler_pb2.ListPodsRequest(phase="Gated"))
            only_c = await stub.ListPods(scheduler_pb2.ListPodsRequest(queue="c", namespace="default"))
    rows = {r.name: r for r in resp.pods}
    assert [r.name for r in resp.pods] == ["a", "b", "held"]
    assert (rows["b"].queue, rows["b"].phase, rows["b"].position, rows["b"].priority) == ("c", "Active", 1, 5)
    assert (rows["a"].queue, rows["a"].phase, rows["a"].position) == ("c", "Active", 2)
    assert dict(rows["a"].requests) == {"cpu": 500}
    assert (rows["held"].queue, rows["held"].phase) == ("", "Gated")
    assert rows["a"].created_ms > 0 and rows["a"].uid == "uid-default-a"
    assert [r.name for r in only_gated.pods] == ["held"]
    assert [r.name for r in only_c.pods] == ["a", "b"]


async def test_why_answers_with_blockers_and_closest_nodes() -> None:
    async with serving(None) as s:
        # a: 4 cpu, b: 1 cpu; 3 of a's are taken.
        s.feed.upsert_pods([make_pod("busy", scheduler_name="berth", node_name="a", requests={"cpu": "3"})])
        s.feed.upsert_pods([pending("big", requests={"cpu": "2"})])
        async with s.channel() as ch:
            resp = await scheduler_pb2_grpc.SchedulerStub(ch).Why(scheduler_pb2.WhyRequest(name="big"))
    assert (resp.pod, resp.phase) == ("default/big", "Active")
    assert resp.summary == "0/2 nodes are available: 2 Insufficient cpu."
    assert [(b.kind, b.message) for b in resp.blockers] == [("fit", resp.summary)]
    assert resp.blockers[0].unblocks_when == "frees when 1 cpu is released on a"
    # b (1 cpu in all) could never hold 2 cpu: freeing it would not help, so it is not "close".
    assert [(c.node, c.lacks) for c in resp.closest_nodes] == [("a", "lacks 1 cpu")]


async def test_whatif_counts_replicas_and_changes_nothing() -> None:
    async with serving(None) as s:
        before = sorted((pi.key, node) for pi, node, _ in s.core.cache.pods())
        async with s.channel() as ch:
            resp = await scheduler_pb2_grpc.SchedulerStub(ch).WhatIf(
                scheduler_pb2.WhatIfRequest(pod=pb(pending("r", requests={"cpu": "1"})))
            )
        assert sorted((pi.key, node) for pi, node, _ in s.core.cache.pods()) == before
        assert len(s.core.pods) == 0
    assert (resp.pod, resp.fit, resp.replicas) == ("default/r", 5, 0)
    assert sorted(p.node for p in resp.placements) == ["a", "a", "a", "a", "b"]
    assert resp.limited_by == "0/2 nodes are available: 2 Insufficient cpu."
    assert resp.quota_ok and resp.profile == "berth"


@pytest.mark.parametrize(
    ("method", "request_", "code", "detail"),
    [
        ("Why", scheduler_pb2.WhyRequest(name="ghost"), grpc.StatusCode.NOT_FOUND, "pod default/ghost not found"),
        ("Why", scheduler_pb2.WhyRequest(namespace="x"), grpc.StatusCode.INVALID_ARGUMENT, "name: required"),
        (
            "ListPods",
            scheduler_pb2.ListPodsRequest(phase="Sleeping"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "phase: 'Sleeping' is not one of",
        ),
        (
            "WhatIf",
            scheduler_pb2.WhatIfRequest(pod=pb(pending("r")), replicas=-1),
            grpc.StatusCode.INVALID_ARGUMENT,
            "replicas: must be between 0 and 1000",
        ),
        ("WhatIf", scheduler_pb2.WhatIfRequest(), grpc.StatusCode.INVALID_ARGUMENT, "pod: required"),
    ],
)
async def test_bad_requests_get_a_clear_status(method: str, request_: Any, code: grpc.StatusCode, detail: str) -> None:
    async with serving(None) as s, s.channel() as ch:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await getattr(scheduler_pb2_grpc.SchedulerStub(ch), method)(request_)
    assert err.value.code() == code
    assert detail in (err.value.details() or "")


@pytest.mark.parametrize("method", ["ListPods", "Why", "WhatIf"])
def test_the_visibility_rpcs_are_read_only(method: str) -> None:
    assert f"/berth.v1.Scheduler/{method}" not in security.MUTATING_METHODS
