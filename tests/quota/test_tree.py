"""The queue tree's arithmetic, table-driven; each row names the anchor
behaviour it follows (YuniKorn ``queue_config.md``/``sorting_policies.md``,
Kueue ``cluster_queue.md``/``cohort.md``/``preemption.md``, Volcano's
``proportion``/``drf`` plugins and ``reclaim`` action)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.cache.infos import PodInfo
from berth.errors import InvalidArgument
from berth.quota import QueueSpec, QueueTree
from berth.quota.tree import LABEL_QUEUE
from berth.testing import make_pod

CLUSTER = {"cpu": 16_000, "memory": 64 * 2**30, "nvidia.com/gpu": 8}


def specs(*queues: dict[str, Any]) -> list[QueueSpec]:
    return [msgspec.convert(q, QueueSpec) for q in queues]


def tree(*queues: dict[str, Any]) -> QueueTree:
    return QueueTree(specs(*queues), capacity=lambda: dict(CLUSTER))


def pod(name: str, queue: str | None = None, *, cpu: str = "1", priority: int = 0, **kw: Any) -> PodInfo:
    labels = {LABEL_QUEUE: queue} if queue else {}
    requests = {"cpu": cpu, **kw.pop("requests", {})}
    return PodInfo.of(make_pod(name, labels=labels, requests=requests, priority=priority, **kw))


def place(t: QueueTree, queue: str, n: int, *, cpu: str = "1", prefix: str = "", **kw: Any) -> list[PodInfo]:
    out = [pod(f"{prefix or queue}-run{i}", queue, cpu=cpu, **kw) for i in range(n)]
    for p in out:
        t.on_cache(p, "n0", 1)
    return out


def wait(t: QueueTree, queue: str, n: int, *, cpu: str = "1") -> None:
    for i in range(n):
        t.pending_entered(pod(f"{queue}-wait{i}", queue, cpu=cpu))


TWO_HALVES = ({"name": "a", "guaranteed": {"cpu": "8"}}, {"name": "b", "guaranteed": {"cpu": "8"}})
RESEARCH = (
    {"name": "research", "guaranteed": {"cpu": "8"}, "max": {"cpu": "12"}},
    {"name": "vision", "parent": "research", "guaranteed": {"cpu": "4"}},
    {"name": "nlp", "parent": "research", "guaranteed": {"cpu": "4"}},
    {"name": "batch"},
)


@pytest.mark.parametrize(
    ("queues", "placed", "waiting", "incoming", "message"),
    [
        pytest.param(
            ({"name": "c", "max": {"cpu": "4"}},),
            {"c": 4},
            {},
            pod("x", "c"),
            "queue c: cpu 5/4 over max",
            id="yunikorn-max-caps-the-queue",
        ),
        pytest.param(
            RESEARCH,
            {"vision": 6, "nlp": 6},
            {},
            pod("x", "vision"),
            "queue research: cpu 13/12 over max",
            id="yunikorn-a-childs-usage-counts-against-its-parents-max",
        ),
        pytest.param(
            ({"name": "c", "max": {"cpu": "4"}},),
            {},
            {},
            pod("x", "c", cpu="5"),
            "queue c: requests 5 cpu, more than its max 4",
            id="a-request-above-max-can-never-fit",
        ),
        pytest.param(
            ({"name": "c", "max": {"cpu": "4"}},),
            {"c": 4},
            {},
            pod("x", "c", cpu="0", requests={"memory": "1Gi"}),
            "",
            id="a-resource-absent-from-max-is-not-capped",
        ),
        pytest.param(
            TWO_HALVES,
            {"a": 12},
            {},
            pod("x", "a"),
            "",
            id="kueue-borrowing-idle-guarantees-when-nobody-waits",
        ),
        pytest.param(
            TWO_HALVES,
            {"a": 8},
            {"b": 8},
            pod("x", "a"),
            "queue a: cpu 9/8 over guaranteed, and 0 cpu is free to borrow beyond the 8 cpu held for queue b "
            "(waiting for its guarantee)",
            id="kueue-no-borrowing-what-a-waiting-queue-is-owed",
        ),
        pytest.param(
            TWO_HALVES,
            {"a": 8},
            {"b": 2},
            pod("x", "a", cpu="6"),
            "",
            id="a-waiting-queue-is-owed-only-its-pending-demand",
        ),
        pytest.param(
            TWO_HALVES,
            {"a": 8},
            {"b": 2},
            pod("x", "a", cpu="7"),
            "queue a: cpu 15/8 over guaranteed, and 6 cpu is free to borrow beyond the 2 cpu held for queue b "
            "(waiting for its guarantee)",
            id="borrowing-stops-where-the-owed-demand-starts",
        ),
        pytest.param(
            TWO_HALVES,
            {"a": 4, "b": 10},
            {"a": 4},
            pod("x", "a"),
            "",
            id="within-its-guarantee-a-queue-is-never-held-back",
        ),
        pytest.param(
            RESEARCH,
            {"vision": 4, "batch": 8},
            {"nlp": 4},
            pod("x", "vision"),
            "queue vision: cpu 5/4 over guaranteed, and 0 cpu is free to borrow beyond the 4 cpu held for "
            "queue nlp (waiting for its guarantee)",
            id="a-sibling-leaf-waiting-inside-the-parent-holds-its-guarantee",
        ),
        pytest.param(
            RESEARCH,
            {"vision": 4},
            {"nlp": 4},
            pod("x", "vision"),
            "",
            id="borrowing-from-the-cluster-while-the-sibling-still-gets-its-guarantee",
        ),
    ],
)
def test_check(
    queues: tuple[dict[str, Any], ...], placed: dict[str, int], waiting: dict[str, int], incoming: PodInfo, message: str
) -> None:
    t = tree(*queues)
    for q, n in placed.items():
        place(t, q, n)
    for q, n in waiting.items():
        wait(t, q, n)
    verdict = t.check([incoming])
    assert (verdict.ok, verdict.message) == (not message, message)


def test_a_request_above_max_is_unresolvable_and_one_over_usage_is_not() -> None:
    t = tree({"name": "c", "max": {"cpu": "4"}})
    assert t.check([pod("x", "c", cpu="5")]).unresolvable
    place(t, "c", 4)
    v = t.check([pod("y", "c")])
    assert not v.ok and not v.unresolvable and (v.queue, v.resource) == ("c", "cpu")


def test_a_gang_is_checked_as_a_whole() -> None:
    t = tree({"name": "g", "max": {"cpu": "4"}})
    assert t.check([pod("m0", "g", cpu="2"), pod("m1", "g", cpu="2")]).ok
    assert t.check([pod("m0", "g", cpu="2"), pod("m1", "g", cpu="2"), pod("m2", "g", cpu="2")]).message == (
        "queue g: requests 6 cpu, more than its max 4"
    )


@pytest.mark.parametrize(
    ("queues", "placed", "lanes", "expected"),
    [
        pytest.param(
            ({"name": "x"}, {"name": "y"}), {"x": 2, "y": 1}, ["x", "y"], "y", id="drf-lowest-dominant-share-first"
        ),
        pytest.param(
            ({"name": "x", "weight": 1}, {"name": "y", "weight": 3}),
            {"x": 1, "y": 2},
            ["x", "y"],
            "y",
            id="volcano-weight-divides-the-share",
        ),
        pytest.param(({"name": "x"}, {"name": "y"}), {}, ["y", "x"], "x", id="ties-by-name"),
        pytest.param(({"name": "x"}, {"name": "y"}), {"x": 3}, ["x"], "x", id="only-lanes-with-pods-are-considered"),
        pytest.param(RESEARCH, {"vision": 1}, ["vision", "nlp", "batch"], "batch", id="hierarchical-from-the-root"),
        pytest.param(RESEARCH, {"vision": 1, "batch": 4}, ["vision", "nlp", "batch"], "nlp", id="then-among-children"),
        pytest.param(({"name": "x"},), {}, ["x", ""], "", id="unqueued-pods-go-first"),
    ],
)
def test_pick(queues: tuple[dict[str, Any], ...], placed: dict[str, int], lanes: list[str], expected: str) -> None:
    t = tree(*queues)
    for q, n in placed.items():
        place(t, q, n)
    assert t.pick(lanes) == expected


def test_the_dominant_share_is_the_largest_over_resources() -> None:
    # DRF (Ghodsi et al.; Volcano drf): 1 GPU of 8 dominates 1 cpu of 16.
    t = tree({"name": "gpu"}, {"name": "cpu"})
    place(t, "gpu", 1, cpu="0", requests={"nvidia.com/gpu": "1"})
    place(t, "cpu", 1, cpu="1")
    status = {s.name: s for s in t.status()}
    assert status["gpu"].dominant_share == pytest.approx(1 / 8)
    assert status["cpu"].dominant_share == pytest.approx(1 / 16)
    assert t.pick(["gpu", "cpu"]) == "cpu"


def test_fair_share_splits_by_weight_and_never_falls_below_the_guarantee() -> None:
    t = tree(
        {"name": "x", "weight": 1},
        {"name": "y", "weight": 3, "guaranteed": {"cpu": "2"}},
        {"name": "y1", "parent": "y", "guaranteed": {"cpu": "2"}},
        {"name": "y2", "parent": "y"},
    )
    shares = {s.name: s.fair_share for s in t.status()}
    assert shares == pytest.approx({"x": 0.25, "y": 0.75, "y1": 0.375, "y2": 0.375})
    t = tree({"name": "x", "guaranteed": {"cpu": "12"}}, {"name": "y"})
    assert {s.name: s.fair_share for s in t.status()} == pytest.approx({"x": 0.75, "y": 0.5})


@pytest.mark.parametrize(
    ("queues", "placed", "incoming", "may"),
    [
        pytest.param(TWO_HALVES, {"b": 7}, pod("x", "b"), True, id="volcano-reclaim-up-to-the-guarantee"),
        pytest.param(TWO_HALVES, {"b": 8}, pod("x", "b"), False, id="not-beyond-it"),
        pytest.param(
            ({"name": "b", "guaranteed": {"cpu": "8"}, "preemption": {"reclaim": False}},),
            {},
            pod("x", "b"),
            False,
            id="a-queue-that-does-not-reclaim",
        ),
        pytest.param(({"name": "b"},), {}, pod("x", "b"), False, id="no-guarantee-nothing-to-reclaim"),
        pytest.param(RESEARCH, {"nlp": 4}, pod("x", "vision"), True, id="within-every-guarantee-on-the-path"),
        pytest.param(RESEARCH, {"nlp": 6}, pod("x", "vision", cpu="3"), False, id="the-parent-would-pass-its-own"),
    ],
)
def test_may_reclaim(queues: tuple[dict[str, Any], ...], placed: dict[str, int], incoming: PodInfo, may: bool) -> None:
    t = tree(*queues)
    for q, n in placed.items():
        place(t, q, n)
    assert t.may_reclaim(incoming) is may


def test_reclaim_victims_come_from_the_queue_furthest_above_fair_share_lowest_priority_first() -> None:
    t = tree(
        {"name": "a", "guaranteed": {"cpu": "4"}},
        {"name": "b", "guaranteed": {"cpu": "4"}},
        {"name": "c", "guaranteed": {"cpu": "4"}},
        {"name": "d", "guaranteed": {"cpu": "4"}},
    )
    a = place(t, "a", 4)  # at its guarantee: never a victim
    b = place(t, "b", 5, priority=5)  # 1 above
    c_low = place(t, "c", 3, priority=1, prefix="c-low")
    c_high = place(t, "c", 4, priority=9, prefix="c-high")  # 7: furthest above its share
    me = pod("x", "d")
    order = t.reclaim_order(me, [*a, *b, *c_low, *c_high])
    assert {p.key for p in order[:3]} == {p.key for p in c_low}  # lowest priority first
    assert {p.key for p in order[3:7]} == {p.key for p in c_high}
    assert {p.key for p in order[7:]} == {p.key for p in b}
    assert not {p.key for p in a} & {p.key for p in order}
    # Never below a victim's guarantee: c can give 3, b can give 1.
    allowed = t.reclaimable(me, order)
    assert len([p for p in allowed if p.key.startswith("default/c")]) == 3
    assert len([p for p in allowed if p.key.startswith("default/b")]) == 1


def test_priority_preemption_stays_inside_a_leaf() -> None:
    t = tree({"name": "a"}, {"name": "b", "preemption": {"withinQueue": "Never"}})
    assert t.within_queue(pod("x", "a"), pod("y", "a"))
    assert not t.within_queue(pod("x", "a"), pod("y", "b"))
    assert not t.within_queue(pod("x", "b"), pod("y", "b"))
    assert t.within_queue(pod("x"), pod("y"))  # unqueued among unqueued
    assert tree().within_queue(pod("x", "a"), pod("y", "b"))  # no queues: as kube-scheduler


@pytest.mark.parametrize(
    ("labels", "namespace", "leaf", "message"),
    [
        ({LABEL_QUEUE: "vision"}, "x", "vision", ""),
        ({}, "vision-2", "vision", ""),
        ({}, "elsewhere", "default", ""),
        ({LABEL_QUEUE: "nope"}, "x", "", 'pod names queue "nope" (berth.dev/queue), which does not exist'),
        (
            {LABEL_QUEUE: "research"},
            "x",
            "",
            'pod names queue "research" (berth.dev/queue), which is not a leaf (its children: vision)',
        ),
    ],
)
def test_leaf_of(labels: dict[str, str], namespace: str, leaf: str, message: str) -> None:
    t = tree(
        {"name": "research"}, {"name": "vision", "parent": "research", "namespaces": ["vision-*"]}, {"name": "default"}
    )
    p = make_pod("p", namespace=namespace, labels=labels)
    assert t.leaf_of(p) == (leaf, message)
    assert tree({"name": "x"}).leaf_of(make_pod("p")) == ("", "")  # no default: unqueued


def test_usage_counts_bound_assumed_and_nominated_once_and_leaves_with_what_it_brought() -> None:
    t = tree({"name": "q"})
    p = pod("p", "q", cpu="2")
    t.on_cache(p, "n0", 1)
    t.on_nominated(p, "n0")
    assert t.get("q").allocated == {"cpu": 2000}  # type: ignore[union-attr]
    t.on_cache(p, "n0", -1)
    assert t.get("q").allocated == {"cpu": 2000}  # type: ignore[union-attr]  # still nominated
    t.on_nominated(p, "")
    assert t.get("q").allocated == {}  # type: ignore[union-attr]


def test_a_reload_recounts_and_an_invalid_one_changes_nothing() -> None:
    t = tree({"name": "a"}, {"name": "b"})
    place(t, "a", 3)
    wait(t, "b", 2)
    t.load(specs({"name": "a", "max": {"cpu": "2"}}, {"name": "b"}, {"name": "c"}))
    status = {s.name: s for s in t.status()}
    assert status["a"].allocated == {"cpu": 3000} and status["a"].max == {"cpu": 2000}
    assert status["b"].pending_pods == 2 and "c" in status
    with pytest.raises(InvalidArgument, match=r"queues\[1\].parent: no queue named 'zz'"):
        t.load(specs({"name": "a"}, {"name": "b", "parent": "zz"}))
    assert [s.name for s in t.status()] == ["a", "b", "c"]
    assert not t.check([pod("x", "a")]).ok  # still over the reloaded max


@pytest.mark.parametrize(
    ("queues", "error"),
    [
        ([{"name": "a b"}], "queues[0].name: 'a b' is not a valid queue name"),
        ([{"name": "a"}, {"name": "a"}], "queues[1].name: duplicate queue 'a' (also queues[0])"),
        ([{"name": "a", "parent": "b"}], "queues[0].parent: no queue named 'b'"),
        (
            [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}],
            "queues[0].parent: the parents of 'a' form a cycle",
        ),
        ([{"name": "a", "weight": 0}], "queues[0].weight: must be greater than 0"),
        ([{"name": "a", "guaranteed": {"cpu": "-1"}}], "queues[0].guaranteed[cpu]: Invalid value"),
        (
            [{"name": "a", "guaranteed": {"cpu": "4"}, "max": {"cpu": "2"}}],
            "queues[0].guaranteed[cpu]: 4 is more than max 2",
        ),
        (
            [
                {"name": "p", "guaranteed": {"cpu": "4"}},
                {"name": "c1", "parent": "p", "guaranteed": {"cpu": "3"}},
                {"name": "c2", "parent": "p", "guaranteed": {"cpu": "2"}},
            ],
            "queues[2].guaranteed[cpu]: the children of 'p' are guaranteed 5 in all, more than its guaranteed 4",
        ),
        ([{"name": "p", "namespaces": ["x"]}, {"name": "c", "parent": "p"}], "queues[0].namespaces: only leaf queues"),
        ([{"name": "a", "namespaces": ["Bad_NS"]}], "queues[0].namespaces[0]: 'Bad_NS' is not a namespace"),
        ([{"name": "a", "guaranteed": {"pods": "3"}}], "queues[0].guaranteed[pods]: not a quota resource"),
    ],
)
def test_invalid_queues_are_refused_naming_the_field(queues: list[dict[str, Any]], error: str) -> None:
    with pytest.raises(InvalidArgument) as e:
        QueueTree(specs(*queues))
    assert str(e.value).startswith(error)


@settings(deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["place", "unplace", "wait", "leave", "nominate", "mark"]),
            st.sampled_from(["vision", "nlp", "batch"]),
            st.integers(0, 5),
            st.integers(1, 4),
        ),
        max_size=40,
    )
)
def test_cached_shares_and_owed_amounts_always_equal_fresh_ones(ops: list[tuple[str, str, int, int]]) -> None:
    """The per-queue caches are dropped along a pod's path on every change:
    after any sequence of changes they equal values computed afresh."""
    t = tree(*RESEARCH)
    pods: dict[tuple[str, int], PodInfo] = {}
    for op, queue, i, cpu in ops:
        p = pods.setdefault((queue, i), pod(f"{queue}-{i}", queue, cpu=str(cpu)))
        if op == "place":
            t.on_cache(p, "n0", 1)
        elif op == "unplace":
            t.on_cache(p, "n0", -1)
        elif op == "wait":
            t.pending_entered(p)
        elif op == "leave":
            t.pending_left(p.uid)
        elif op == "nominate":
            t.on_nominated(p, "n0")
        else:
            t.mark_leaving(p.uid)
        t.check([pod("probe", queue, cpu="2")])  # fills the caches
        t.pick(["vision", "nlp", "batch"])
    cached = {s.name: (s.dominant_share, dict(t._owed(t._queues[s.name]))) for s in t.status()}
    for q in t._queues.values():
        q._owed, q._share = None, None
    fresh = {s.name: (s.dominant_share, dict(t._owed(t._queues[s.name]))) for s in t.status()}
    assert cached == fresh
