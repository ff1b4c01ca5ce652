"""Reservations with backfill: the declared runtimes, the start estimate,
what a reservation holds and says, and the queue's ``reservation`` spec."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from berth.cluster import model
from berth.errors import InvalidArgument
from berth.gangs import reservations as rsv
from berth.quota.spec import QueueSpec, reservation_policy, validate_queues
from berth.testing import make_pod

CPU = "cpu"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("45", 45.0), (30, 30.0), ("90s", 90.0), ("10m", 600.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("0", 0.0)],
)
def test_durations_read_as_seconds(text: str | float, seconds: float) -> None:
    assert rsv.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "ten", "-5", "5d", "m", "inf", "nan"])
def test_a_malformed_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        rsv.parse_duration(text)


def pod(annotations: dict[str, str] | None = None, deadline: int | None = None) -> model.Pod:
    spec: dict[str, Any] = {"activeDeadlineSeconds": deadline} if deadline is not None else {}
    return make_pod("p", annotations=annotations, spec=spec)


@pytest.mark.parametrize(
    ("p", "runtime"),
    [
        (pod(), None),
        (pod(deadline=600), 600.0),
        (pod({rsv.KUEUE_MAX_EXEC_TIME: "300"}), 300.0),
        (pod({rsv.MAX_RUNTIME: "2m"}), 120.0),
        # The shortest declaration wins: the pod ends by then whatever the others say.
        (pod({rsv.MAX_RUNTIME: "2m", rsv.KUEUE_MAX_EXEC_TIME: "60"}, deadline=600), 60.0),
        # Malformed or zero declarations declare nothing.
        (pod({rsv.KUEUE_MAX_EXEC_TIME: "1m"}), None),
        (pod({rsv.MAX_RUNTIME: "soon"}), None),
        (pod({rsv.MAX_RUNTIME: "0"}), None),
        (pod({rsv.MAX_RUNTIME: "soon"}, deadline=30), 30.0),
    ],
)
def test_a_pods_declared_runtime_is_the_shortest_it_declares(p: model.Pod, runtime: float | None) -> None:
    assert rsv.declared_runtime(p) == runtime


@pytest.mark.parametrize(
    ("free", "ends", "start"),
    [
        # Enough already free: it can start now.
        (16, [], 100.0),
        # 4 free, 12 needed: the pods ending at 130 and 150 free 8 and 4.
        (4, [(130.0, 8), (150.0, 4), (200.0, 4)], 150.0),
        # Taken in order of their ends, whatever order they are given in.
        (4, [(200.0, 4), (150.0, 4), (130.0, 8)], 150.0),
        # A pod with no declared end is never counted: the others suffice.
        (4, [(None, 8), (130.0, 8), (140.0, 4)], 140.0),
        # ... or they do not, and the start is unknown.
        (4, [(None, 8), (130.0, 4)], None),
        # An end already past counts as now.
        (8, [(90.0, 8)], 100.0),
    ],
)
def test_a_reservation_starts_when_the_pods_ending_first_free_enough(
    free: int, ends: list[tuple[float | None, int]], start: float | None
) -> None:
    need = {CPU: 16_000}
    given = [(end, {CPU: cpu * 1000}) for end, cpu in ends]
    assert rsv.estimate_start(need, {CPU: free * 1000}, given, now=100.0) == start


def reservation(**kw: Any) -> rsv.Reservation:
    base: dict[str, Any] = {
        "owner": "research/train-64",
        "kind": "gang",
        "queue": "research",
        "need": {CPU: 64_000, "memory": 64 << 30},
        "nodes": ("a", "b", "c"),
        "domain": "block=b2",
        "since": 0.0,
        "expires": 3600.0,
    }
    return rsv.Reservation(**{**base, **kw})


def test_a_reservation_holds_what_is_free_node_by_node_up_to_its_need() -> None:
    r = reservation(need={CPU: 20_000})
    r.refresh({"a": {CPU: 8_000}, "b": {CPU: 16_000}, "c": {CPU: 4_000}, "elsewhere": {CPU: 64_000}})
    assert r.held == {"a": {CPU: 8_000}, "b": {CPU: 12_000}}
    assert r.reserved() == "20 of 20 cpu"


def test_a_reservation_says_what_it_holds_where_and_what_it_waits_for() -> None:
    r = reservation()
    r.refresh({"a": {CPU: 32_000, "memory": 64 << 30}, "b": {CPU: 16_000}})
    # cpu is the bottleneck (48 of 64), memory is all held.
    assert r.reserved() == "48 of 64 cpu"
    assert r.summary(now=0.0) == (
        "holding 48 of 64 cpu in block=b2; starts when 16 more cpu free (no estimate: a pod there declares no runtime)"
    )
    r.starts_at = 120.0
    assert r.summary(now=20.0).endswith("starts when 16 more cpu free (estimated in 100s)")
    r.refresh({"a": {CPU: 64_000, "memory": 64 << 30}})
    assert r.summary(now=0.0) == "holding 64 of 64 cpu in block=b2; all it needs is held"
    assert reservation(domain="").where() == "on 3 node(s)"


def spec(reservation: dict[str, Any]) -> QueueSpec:
    return msgspec.convert({"name": "research", "reservation": reservation}, QueueSpec)


def test_a_queues_reservation_reads_as_seconds_with_its_defaults() -> None:
    policy = reservation_policy(spec({"after": "10m"}))
    assert policy == rsv.ReservationPolicy("research", 600.0, 1, 3600.0)
    assert reservation_policy(QueueSpec(name="plain")) is None


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"after": "soon"}, r"queues\[0\]\.reservation\.after: 'soon' is not a duration"),
        ({"after": "1m", "timeout": "0"}, r"queues\[0\]\.reservation\.timeout: must be more than 0"),
        ({"after": "1m", "maxPerQueue": 0}, r"queues\[0\]\.reservation\.maxPerQueue: must be at least 1, got 0"),
    ],
)
def test_a_bad_reservation_is_refused_naming_the_field(fields: dict[str, Any], error: str) -> None:
    with pytest.raises(InvalidArgument, match=error):
        validate_queues([spec(fields)])


def test_a_reservation_needs_its_after() -> None:
    with pytest.raises(msgspec.ValidationError, match="missing required field `after`"):
        spec({"maxPerQueue": 2})
