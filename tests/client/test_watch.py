"""What a reconnected watch passes on (berth_client.watch.Resume): each
pod's latest decision if it is newer than what was passed on before the
break, nothing twice; before any decision, everything (a relist)."""

from __future__ import annotations

import pytest

from berth_client.api.v1 import scheduler_pb2 as spb
from berth_client.watch import Backoff, Resume

Kind = spb.Decision


def d(pod: str, ms: int, kind: int = Kind.BOUND) -> spb.Decision:
    return spb.Decision(kind=kind, pod=pod, uid=f"uid-{pod}", timestamp_ms=ms)  # type: ignore[arg-type]


RESUME_CASES: list[tuple[str, list[spb.Decision], list[spb.Decision], list[str]]] = [
    (
        "replayed ones already passed on are not passed on again",
        [d("a", 10), d("b", 20)],
        [d("a", 10), d("b", 20)],
        [],
    ),
    ("a pod decided while away passes", [d("a", 10)], [d("a", 10), d("b", 30)], ["b@30"]),
    ("a pod decided again while away passes", [d("a", 10)], [d("a", 40)], ["a@40"]),
    (
        "a decision older than the newest seen is not new (it was seen, or came before the watch)",
        [d("a", 50)],
        [d("z", 20), d("a", 50)],
        [],
    ),
    (
        "decisions in the same millisecond as the newest seen pass unless seen",
        [d("a", 50)],
        [d("a", 50), d("b", 50)],
        ["b@50"],
    ),
    ("before any decision, a reconnect replays every pod (a relist)", [], [d("z", 20), d("a", 50)], ["z@20", "a@50"]),
]


@pytest.mark.parametrize(
    ("before", "replayed", "passed"), [c[1:] for c in RESUME_CASES], ids=[c[0] for c in RESUME_CASES]
)
def test_a_reconnected_watch_passes_on_only_what_is_new(
    before: list[spb.Decision], replayed: list[spb.Decision], passed: list[str]
) -> None:
    r = Resume()
    assert all(r.admit(x) for x in before)  # a live stream passes everything
    r.resumed = True
    assert [f"{x.pod}@{x.timestamp_ms}" for x in replayed if r.admit(x)] == passed


def test_the_backoff_grows_to_its_ceiling_with_jitter_and_resets() -> None:
    b = Backoff(initial=0.2, maximum=1.0, multiplier=2.0)
    waits = [b.next() for _ in range(6)]
    assert all(0.1 <= w <= 0.2 for w in waits[:1]) and all(0.5 <= w <= 1.0 for w in waits[3:])
    b.reset()
    assert b.next() <= 0.2
