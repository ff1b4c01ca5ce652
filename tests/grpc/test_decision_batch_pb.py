"""A DecisionBatch filled in place holds exactly the messages decision_to_pb
builds one by one, in order."""

from __future__ import annotations

from berth.adapters.grpc import convert
from berth.api.v1 import scheduler_pb2
from berth.framework.decision import Decision, DecisionKind, Reason

DECISIONS = [
    Decision(kind=DecisionKind.QUEUED, pod="default/a", uid="u1"),
    Decision(kind=DecisionKind.ASSUMED, pod="default/a", uid="u1", node="n1", attempts=1, timestamp_ms=17),
    Decision(
        kind=DecisionKind.UNSCHEDULABLE,
        pod="team/b",
        uid="u2",
        message="0/3 nodes are available: 3 Insufficient cpu.",
        reasons=(Reason("NodeResourcesFit", "Insufficient cpu"), Reason("NodeAffinity", "no match", True)),
        attempts=4,
        timestamp_ms=1763900000000,
    ),
    Decision(kind=DecisionKind.BOUND, pod="default/a", uid="u1", node="n1", attempts=1, timestamp_ms=18),
]


def test_a_batch_filled_in_place_equals_the_messages_built_one_by_one() -> None:
    for k in range(len(DECISIONS) + 1):
        want = scheduler_pb2.DecisionBatch(decisions=[convert.decision_to_pb(d) for d in DECISIONS[:k]])
        got = convert.decision_batch_to_pb(DECISIONS[:k])
        assert got == want
        assert got.SerializeToString(deterministic=True) == want.SerializeToString(deterministic=True)
    assert len(convert.decision_batch_to_pb(DECISIONS).decisions[2].reasons) == 2
