"""ListPods over many pods is built in slices: the loop turns while it is
built, and the answer is the one list_pods gives in one step (50 000
pending pods were 1.6 s of rows and messages in one step)."""

from __future__ import annotations

import pytest

from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from berth.scheduling import visibility
from berth.testing import make_pod
from tests.grpc.conftest import serving
from tests.support import counting_turns

PODS = 300


@pytest.mark.parametrize(("slice_seconds", "least_turns"), [(0.0, PODS), (60.0, 1)])
async def test_list_pods_gives_the_loop_turns_and_answers_as_list_pods(
    monkeypatch: pytest.MonkeyPatch, slice_seconds: float, least_turns: int
) -> None:
    monkeypatch.setattr(visibility, "SLICE_SECONDS", slice_seconds)
    async with serving() as served:
        served.feed.upsert_pods(
            [make_pod(f"p{i:03d}", scheduler_name="berth", requests={"cpu": "100"}) for i in range(PODS)]
        )
        channel = served.channel()
        async with counting_turns() as turns:
            answer = await scheduler_pb2_grpc.SchedulerStub(channel).ListPods(scheduler_pb2.ListPodsRequest())
        expected = visibility.list_pods(served.core)
        await channel.close()
    assert turns.count >= least_turns
    assert [(r.namespace, r.name, r.phase, r.position) for r in answer.pods] == [
        (r.namespace, r.name, r.phase, r.position) for r in expected
    ]
    assert len(answer.pods) == PODS
