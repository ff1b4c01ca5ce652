"""Every history the server keeps is bounded in bytes (docs/architecture.md "Memory
bounds"): insert past the bound, the oldest goes, the estimate stays under
it; and the model shares the strings that repeat from pod to pod."""

from __future__ import annotations

import asyncio
import gc

import msgspec
import pytest

from berth.cluster import embedded, model
from berth.errors import ResourceExhausted
from berth.framework.decision import Decision, DecisionKind, Reason
from berth.scheduling.decisions import DecisionLog, decision_bytes
from berth.testing import make_node, make_pod
from tests.http.payloads import api_pod


def _d(i: int, *, uid: str | None = None, kind: DecisionKind = DecisionKind.BOUND, message: str = "") -> Decision:
    return Decision(kind=kind, pod=_key(i), uid=uid or f"uid-{i:04d}", node="node-1", message=message)


def _key(i: int) -> str:
    return f"ns/pod-{i:04d}"  # one width: every decision here weighs the same


SIZE = decision_bytes(_d(0))


# ---------------------------------------------------------------- decision log


@pytest.mark.parametrize("count", [1, 10, 100])
def test_decisions_past_the_byte_bound_drop_the_oldest_first(count: int) -> None:
    log = DecisionLog(max_bytes=10 * SIZE)
    for i in range(count + 10):
        log.emit(_d(i))
        assert log.nbytes <= log.max_bytes
    kept = sorted(int(k.rsplit("-", 1)[1]) for k in log.latest)
    assert kept == list(range(count, count + 10))  # the ten newest


def test_a_decision_counts_its_strings_and_reasons() -> None:
    plain = _d(1)
    wordy = Decision(
        kind=DecisionKind.UNSCHEDULABLE,
        pod=plain.pod,
        uid=plain.uid,
        message="x" * 1000,
        reasons=(Reason("NodeResourcesFit", "Insufficient cpu"),) * 3,
    )
    assert decision_bytes(wordy) > decision_bytes(plain) + 1000 + 3 * len("Insufficient cpu")


def test_a_newer_decision_replaces_the_pods_and_moves_it_last() -> None:
    log = DecisionLog(max_bytes=3 * SIZE)
    for i in range(3):
        log.emit(_d(i))
    log.emit(_d(0, kind=DecisionKind.ASSUMED))  # pod-0 decided again: now the newest
    log.emit(_d(3))
    assert list(log.latest) == [_key(2), _key(0), _key(3)]
    assert log.latest[_key(0)].kind == DecisionKind.ASSUMED
    assert log.nbytes == sum(decision_bytes(d) for d in log.latest.values())


def test_deleted_pods_keep_their_decision_only_among_the_most_recently_deleted() -> None:
    log = DecisionLog(max_bytes=1000 * SIZE, max_deleted_bytes=3 * SIZE)
    for i in range(10):
        log.emit(_d(i))
    for i in range(6):
        log.pod_deleted(_key(i), f"uid-{i:04d}")
    # The three most recently deleted stay as history, the live four all stay.
    assert sorted(log.latest) == [_key(i) for i in (3, 4, 5, 6, 7, 8, 9)]


def test_a_decision_about_a_deleted_pod_stays_history() -> None:
    """Cancel deletes the pod, then says CANCELLED: still history, still bounded."""
    log = DecisionLog(max_deleted_bytes=2 * SIZE)
    log.emit(_d(1))
    log.pod_deleted(_key(1), "uid-0001")
    log.emit(_d(1, kind=DecisionKind.CANCELLED))
    assert log.latest[_key(1)].kind == DecisionKind.CANCELLED
    for i in range(2, 5):
        log.emit(_d(i))
        log.pod_deleted(_key(i), f"uid-{i:04d}")
    assert _key(1) not in log.latest


def test_a_pod_recreated_under_its_name_is_live_again() -> None:
    log = DecisionLog(max_deleted_bytes=SIZE)
    log.emit(_d(1))
    log.pod_deleted(_key(1), "uid-0001")
    log.emit(_d(1, uid="uid-0001-new"))  # same name, a new pod
    for i in range(2, 6):
        log.emit(_d(i))
        log.pod_deleted(_key(i), f"uid-{i:04d}")
    assert log.latest[_key(1)].uid == "uid-0001-new"


@pytest.mark.parametrize(("key", "uid"), [("ns/unknown", "uid-x"), (_key(1), "another-uid")])
def test_deleting_a_pod_the_log_does_not_hold_changes_nothing(key: str, uid: str) -> None:
    log = DecisionLog(max_deleted_bytes=0)
    log.emit(_d(1))
    log.pod_deleted(key, uid)
    assert list(log.latest) == [_key(1)] and log.nbytes == SIZE


@pytest.mark.parametrize("field", ["max_bytes", "max_deleted_bytes", "max_backlog_bytes"])
def test_a_negative_bound_is_refused(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        DecisionLog(**{field: -1})


async def test_a_watcher_past_its_backlog_bound_is_ended_and_others_go_on() -> None:
    log = DecisionLog(max_backlog_bytes=8 * SIZE)
    slow, fast = log.watch(), log.watch()
    first_slow = asyncio.ensure_future(anext(slow))
    first_fast = asyncio.ensure_future(anext(fast))
    await asyncio.sleep(0)  # both subscribed
    log.emit(_d(0))
    assert (await first_slow).pod == _key(0) and (await first_fast).pod == _key(0)
    for i in range(1, 12):
        log.emit(_d(i))
        if i < 6:
            assert (await anext(fast)).pod == _key(i)  # the fast one keeps up
    with pytest.raises(ResourceExhausted, match="too slow"):
        await anext(slow)  # 11 unread: past 8
    assert [(await anext(fast)).pod for _ in range(6, 12)] == [_key(i) for i in range(6, 12)]
    await fast.aclose()


# ---------------------------------------------------------------- embedded cluster histories


@pytest.mark.parametrize("history", ["bindings", "events"])
async def test_the_embedded_clusters_histories_keep_only_the_newest(
    history: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from berth import app

    monkeypatch.setattr(embedded, "HISTORY_MAX_BYTES", 40 * embedded._HISTORY_ENTRY_BYTES)
    berth = app.build(run_loop=False)
    berth.cluster.upsert_nodes([make_node("n1", cpu="64", pods=500)])
    pods = [make_pod(f"p{i}", requests={"cpu": "10m"}) for i in range(200)]
    berth.cluster.upsert_pods(pods)
    for p in pods:
        await berth.cluster.bind(p, "n1")
        await berth.cluster.report_scheduled(p, "n1")
    kept = getattr(berth.cluster, history)
    assert 30 <= len(kept) <= 40
    assert kept[-1][0] == "default/p199"  # the newest stays
    assert all(k != "default/p0" for k, *_ in kept)  # the oldest went


# ---------------------------------------------------------------- model


def test_pods_decoded_apart_share_their_repeated_strings() -> None:
    def decoded(i: int) -> model.Pod:
        raw = api_pod(f"web-{i}", namespace="team-a")
        raw["metadata"]["labels"] = {"app": "".join(["we", "b"])}  # a fresh string each time
        return msgspec.json.decode(msgspec.json.encode(raw), type=model.Pod)

    a, b = decoded(1), decoded(2)
    assert a.metadata.namespace is b.metadata.namespace
    [(ka, va)], [(kb, vb)] = a.metadata.labels.items(), b.metadata.labels.items()
    assert ka is kb and va is vb
    assert a.spec.containers[0].image is b.spec.containers[0].image
    assert a.key is model.pod_key("team-a", "web-1")  # one key string, however often asked for


def test_long_values_are_kept_but_not_interned() -> None:
    long = "v" * 4000
    a, b = (model.ObjectMeta(name="x", annotations={"last-applied": long + ""}) for _ in range(2))
    assert a.annotations == b.annotations == {"last-applied": long}


def test_model_objects_carry_no_cyclic_gc_header_and_encode_unchanged() -> None:
    raw = api_pod("web-1", namespace="team-a")
    pod = msgspec.convert(raw, model.Pod)
    assert not gc.is_tracked(pod) and not gc.is_tracked(pod.metadata)
    again = msgspec.convert(model.to_builtins(pod), model.Pod)
    assert again == pod
