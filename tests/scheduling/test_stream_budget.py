"""Decision streams are bounded per caller and in total (issue 28: 2000
unauthenticated dashboard streams slowed binding 57-fold); the one too many
is refused, with a message saying which bound."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from berth.adapters.http import ui
from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from berth.errors import ResourceExhausted
from berth.framework.decision import Decision, DecisionKind
from berth.scheduling.streams import StreamBudget
from tests.grpc.conftest import serving


@pytest.mark.parametrize(
    ("held", "caller", "refused"),
    [
        ({"alice": 2}, "alice", "alice has 2 open (at most 2 per caller)"),
        ({"alice": 1}, "alice", None),
        ({"alice": 2, "bob": 2}, "carol", None),
        ({"alice": 2, "bob": 2, "carol": 1}, "dave", "5 open (the server's bound)"),
    ],
)
def test_a_stream_past_a_bound_is_refused_naming_it(held: dict[str, int], caller: str, refused: str | None) -> None:
    budget = StreamBudget(per_caller=2, total=5)
    budget.open_by = dict(held)
    if refused is None:
        with budget.open(caller):
            assert budget.open_by[caller] == held.get(caller, 0) + 1
        assert budget.open_by.get(caller, 0) == held.get(caller, 0)
        return
    with pytest.raises(ResourceExhausted, match="too many decision streams") as err, budget.open(caller):
        pass
    assert refused in str(err.value)
    assert budget.open_by == held  # nothing changed


def test_a_slot_is_given_back_when_the_stream_fails() -> None:
    budget = StreamBudget(per_caller=1, total=1)
    with pytest.raises(RuntimeError), budget.open("alice"):
        raise RuntimeError("the client went away")
    assert budget.open_by == {}
    with budget.open("alice"):
        pass


@pytest.mark.asyncio
async def test_grpc_watch_streams_past_the_callers_bound_are_resource_exhausted() -> None:
    async with serving(None) as s:
        s.core.streams = StreamBudget(per_caller=2, total=10)
        async with s.channel() as ch:
            stub = scheduler_pb2_grpc.SchedulerStub(ch)
            streams = [stub.WatchDecisions(scheduler_pb2.WatchDecisionsRequest()) for _ in range(2)]
            await asyncio.sleep(0.2)  # both reach the server (an idle stream sends no metadata to wait on)
            third = stub.WatchDecisions(scheduler_pb2.WatchDecisionsRequest())
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await third.read()
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "at most 2 per caller" in (err.value.details() or "")
            streams[0].cancel()
            await asyncio.sleep(0.2)
            fourth = stub.WatchDecisions(scheduler_pb2.WatchDecisionsRequest())
            await asyncio.sleep(0.2)
            assert sum(s.core.streams.open_by.values()) == 2
            for st in (streams[1], fourth):
                st.cancel()


def test_a_decision_is_encoded_once_for_every_stream() -> None:
    d = Decision(DecisionKind.BOUND, "default/p", "uid-1", node="n1")
    first = ui.event(d)
    assert ui.event(d) is first
    assert ui.event(Decision(DecisionKind.BOUND, "default/p", "uid-1", node="n1")) is first  # equal: same bytes
