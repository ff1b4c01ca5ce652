"""One pod's decisions, in order, leave it in one of the server's phase
words (berth_client.outcomes): the words ``berth get pods`` and ``berth
why`` use, so ``submit --wait`` never says another word for the same state."""

from __future__ import annotations

from typing import Any

import pytest

from berth.scheduling import visibility
from berth_client import outcomes
from berth_client.api.v1 import scheduler_pb2 as spb

Kind = spb.Decision


def decision(
    kind: int, *, node: str = "", message: str = "", unresolvable: tuple[bool, ...] = (), plugin: str = "X"
) -> Any:
    return spb.Decision(
        kind=kind,  # type: ignore[arg-type]
        pod="default/p",
        uid="u",
        node=node,
        message=message,
        reasons=[spb.PluginReason(plugin=plugin, reason="r", unresolvable=u) for u in unresolvable],
    )


FOLLOW_CASES: list[tuple[str, list[Any], tuple[str, str, str, bool]]] = [
    ("queued only", [decision(Kind.QUEUED)], ("Active", "", "", False)),
    (
        "failed, nominated, retried, bound",
        [
            decision(Kind.NOMINATED, node="a", message="0/1 nodes: full"),
            decision(Kind.UNSCHEDULABLE, message="0/1 nodes: full", unresolvable=(False,)),
            decision(Kind.ASSUMED, node="a"),
            decision(Kind.BOUND, node="a"),
        ],
        ("Bound", "a", "", True),
    ),
    (
        "the nominating attempt's failure keeps the nominated node",
        [
            decision(Kind.NOMINATED, node="a", message="m"),
            decision(Kind.UNSCHEDULABLE, message="m", unresolvable=(False,)),
        ],
        ("Unschedulable", "a", "m", False),
    ),
    (
        "unresolvable everywhere: done, and still Unschedulable (not another word)",
        [decision(Kind.UNSCHEDULABLE, message="m", unresolvable=(True, True))],
        ("Unschedulable", "", "m", True),
    ),
    (
        "refused by the queues alone: the server's Rejected",
        [decision(Kind.UNSCHEDULABLE, message="q", unresolvable=(True,), plugin=outcomes.QUEUES_PLUGIN)],
        ("Rejected", "", "q", True),
    ),
    (
        "unresolvable on some nodes only",
        [decision(Kind.UNSCHEDULABLE, message="m", unresolvable=(True, False))],
        ("Unschedulable", "", "m", False),
    ),
    ("no reasons at all (no nodes)", [decision(Kind.UNSCHEDULABLE, message="m")], ("Unschedulable", "", "m", False)),
    (
        "a failed bind backs off",
        [decision(Kind.ASSUMED, node="a"), decision(Kind.BIND_FAILED, message="x")],
        ("Backoff", "", "x", False),
    ),
    ("gated", [decision(Kind.GATED, message="gate g")], ("Gated", "", "gate g", False)),
    ("cancelled", [decision(Kind.CANCELLED)], ("Cancelled", "", "cancelled", True)),
    (
        "bound stays bound",
        [decision(Kind.BOUND, node="a"), decision(Kind.PREEMPTED, message="p")],
        ("Bound", "a", "", True),
    ),
    (
        "preempted while binding",
        [decision(Kind.ASSUMED, node="a"), decision(Kind.PREEMPTED, message="p")],
        ("Preempted", "", "p", True),
    ),
]


@pytest.mark.parametrize(("decisions", "want"), [c[1:] for c in FOLLOW_CASES], ids=[c[0] for c in FOLLOW_CASES])
def test_the_outcome_follows_the_decisions(decisions: list[Any], want: tuple[str, str, str, bool]) -> None:
    o = outcomes.Outcome("default/p", "u")
    for d in decisions:
        o.follow(d)
    assert (o.status, o.node, o.reason, o.done) == want


def test_the_words_are_the_servers_phases() -> None:
    assert outcomes.PHASES == visibility.PHASES
    from berth.quota.tree import QUOTA_PLUGIN

    assert outcomes.QUEUES_PLUGIN == QUOTA_PLUGIN


def test_the_waiter_counts_the_pods_it_preempted_and_ignores_an_earlier_namesake() -> None:
    results = [
        spb.SubmitResult(pod="default/p", uid="u", accepted=True),
        spb.SubmitResult(pod="default/q", uid="", accepted=False, message="already exists"),
    ]
    w = outcomes.Waiter(results)
    assert w.left == 1
    w.feed(
        [
            spb.Decision(kind=Kind.BOUND, pod="default/p", uid="old", node="x"),  # an earlier pod p
            spb.Decision(
                kind=Kind.PREEMPTED, pod="default/v", uid="v", node="a", message="Preempted by pod u on node a"
            ),
            spb.Decision(kind=Kind.BOUND, pod="default/p", uid="u", node="a"),
        ]
    )
    waited = w.result(timed_out=False)
    assert [(o.pod, o.status, o.node) for o in waited.outcomes] == [
        ("default/p", "Bound", "a"),
        ("default/q", "Rejected", ""),
    ]
    assert [(o.pod, o.status) for o in waited.victims] == [("default/v", "Preempted")]
    assert list(waited.counts().items()) == [("Bound", 1), ("Rejected", 1)]
    assert [o.pod for o in waited.failed] == ["default/q"] and not waited.waiting
