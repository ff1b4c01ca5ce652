"""Queue objects (berth.dev/v1alpha1): conversion, validation, the merge
with the configuration file's queues, and the core applying them as a
configuration reload of ``queues:`` does (berth.quota.objects)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from berth import app, config
from berth.cluster import queues
from berth.errors import InvalidArgument
from berth.quota import PreemptionSpec, QueueSpec
from berth.quota import objects as qo
from berth.quota.tree import LABEL_QUEUE, QueueStatus
from berth.testing import make_node, make_pod


def obj(name: str, spec: dict[str, Any] | None = None, *, gen: int = 1, created: str = "") -> queues.Queue:
    return queues.Queue(
        metadata=queues.QueueMeta(name=name, generation=gen, creation_timestamp=created or f"2026-01-01T00:00:0{gen}Z"),
        spec=spec or {},
    )


def cfg(*qs: dict[str, Any]) -> list[QueueSpec]:
    return [msgspec.convert(q, QueueSpec) for q in qs]


# ------------------------------------------------------------ spec_of


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ({}, QueueSpec(name="q")),
        (
            {"parent": "p", "guaranteed": {"cpu": "2"}, "max": {"cpu": 4}, "weight": 2, "namespaces": ["a", "b-*"]},
            QueueSpec(name="q", parent="p", guaranteed={"cpu": "2"}, max={"cpu": 4}, weight=2, namespaces=["a", "b-*"]),
        ),
        (
            {"preemption": {"reclaim": False, "withinQueue": "Never"}},
            QueueSpec(name="q", preemption=msgspec.convert({"reclaim": False, "withinQueue": "Never"}, PreemptionSpec)),
        ),
    ],
    ids=["defaults", "every-field", "preemption"],
)
def test_a_valid_spec_converts_to_the_configuration_queue(spec: dict[str, Any], want: QueueSpec) -> None:
    assert qo.spec_of(obj("q", spec)) == want


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"name": "x"}, "spec.name: unknown field (the queue's name is metadata.name)"),
        ({"wieght": 2}, "spec: Object contains unknown field `wieght`"),
        ({"weight": 0}, "spec.weight: must be greater than 0 and at most 1000000, got 0"),
        ({"weight": "heavy"}, "spec.weight: Expected `float`, got `str`"),
        ({"guaranteed": {"cpu": "lots"}}, 'spec.guaranteed[cpu]: Invalid value: "lots"'),
        ({"guaranteed": {"pods": "3"}}, "spec.guaranteed[pods]: not a quota resource"),
        ({"guaranteed": {"cpu": "4"}, "max": {"cpu": "2"}}, "spec.guaranteed[cpu]: 4 is more than max 2"),
        ({"namespaces": ["Bad_NS"]}, "spec.namespaces[0]: 'Bad_NS' is not a namespace name or pattern"),
        ({"preemption": {"withinQueue": "Always"}}, "spec.preemption.withinQueue: Invalid enum value 'Always'"),
    ],
    ids=[
        "name-in-spec",
        "unknown-field",
        "weight-zero",
        "weight-type",
        "bad-quantity",
        "pods",
        "max-below-guaranteed",
        "namespace-pattern",
        "within-queue-enum",
    ],
)
def test_an_invalid_spec_is_refused_naming_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument) as e:
        qo.spec_of(obj("q", spec))
    assert message in str(e.value)


def test_another_api_version_is_refused() -> None:
    q = obj("q")
    q.api_version = "scheduling.volcano.sh/v1beta1"
    with pytest.raises(InvalidArgument, match="apiVersion"):
        qo.spec_of(q)


# ------------------------------------------------------------ plan


def verdicts(p: qo.Plan) -> dict[str, tuple[bool, str, int]]:
    return {n: (v.accepted, v.reason, v.running) for n, v in p.verdicts.items()}


PLANS: list[tuple[str, list[dict[str, Any]], dict[str, queues.Queue], dict[str, tuple[bool, str, int]], list[str]]] = [
    (
        "objects-join-the-file-after-its-queues",
        [{"name": "root", "guaranteed": {"cpu": "8"}}],
        {"b": obj("b", {"parent": "root"}), "a": obj("a", {"parent": "root", "guaranteed": {"cpu": "2"}})},
        {"a": (True, qo.APPLIED, 1), "b": (True, qo.APPLIED, 1)},
        ["root", "a", "b"],
    ),
    (
        "a-name-of-the-file-is-refused-and-the-file-queue-stays",
        [{"name": "team", "weight": 3}],
        {"team": obj("team", {"weight": 1})},
        {"team": (False, qo.DEFINED_IN_CONFIGURATION, 0)},
        ["team"],
    ),
    (
        "an-unknown-parent-is-refused-and-the-others-run",
        [],
        {"orphan": obj("orphan", {"parent": "nowhere"}), "ok": obj("ok")},
        {"orphan": (False, qo.INVALID_HIERARCHY, 0), "ok": (True, qo.APPLIED, 1)},
        ["ok"],
    ),
    (
        "a-child-created-before-its-parent-still-gets-in",
        [],
        {
            "kid": obj("kid", {"parent": "mom"}, created="2026-01-01T00:00:00Z"),
            "mom": obj("mom", created="2026-02-01T00:00:00Z"),
        },
        {"kid": (True, qo.APPLIED, 1), "mom": (True, qo.APPLIED, 1)},
        ["mom", "kid"],
    ),
    (
        "the-newest-child-over-the-parents-guarantee-is-refused",
        [{"name": "p", "guaranteed": {"cpu": "4"}}],
        {
            "old": obj("old", {"parent": "p", "guaranteed": {"cpu": "3"}}, created="2026-01-01T00:00:00Z"),
            "new": obj("new", {"parent": "p", "guaranteed": {"cpu": "2"}}, created="2026-01-02T00:00:00Z"),
        },
        {"old": (True, qo.APPLIED, 1), "new": (False, qo.INVALID_HIERARCHY, 0)},
        ["p", "old"],
    ),
    (
        "a-cycle-between-objects-is-refused",
        [],
        {"x": obj("x", {"parent": "y"}), "y": obj("y", {"parent": "x"})},
        {"x": (False, qo.INVALID_HIERARCHY, 0), "y": (False, qo.INVALID_HIERARCHY, 0)},
        [],
    ),
    (
        "an-object-under-a-file-queue-with-namespaces-is-refused",
        [{"name": "leaf", "namespaces": ["a"]}],
        {"under": obj("under", {"parent": "leaf"})},
        {"under": (False, qo.INVALID_HIERARCHY, 0)},
        ["leaf"],
    ),
]


@pytest.mark.parametrize(("file", "objects", "want", "order"), [p[1:] for p in PLANS], ids=[p[0] for p in PLANS])
def test_plan_merges_objects_with_the_file(
    file: list[dict[str, Any]], objects: dict[str, queues.Queue], want: dict[str, Any], order: list[str]
) -> None:
    p = qo.plan(cfg(*file), objects, {})
    assert verdicts(p) == want
    assert [s.name for s in p.specs] == order


def test_an_invalid_hierarchy_message_names_the_object_fields_and_the_other_queues() -> None:
    p = qo.plan(
        cfg({"name": "p", "guaranteed": {"cpu": "4"}}),
        {
            "a": obj("a", {"parent": "p", "guaranteed": {"cpu": "3"}}),
            "b": obj("b", {"parent": "p", "guaranteed": {"cpu": "2"}}, gen=2),
        },
        {},
    )
    assert p.verdicts["b"].message == (
        "spec.guaranteed[cpu]: the children of 'p' are guaranteed 5 in all, more than its guaranteed 4"
    )


def test_a_refused_change_keeps_the_spec_that_ran() -> None:
    first = qo.plan([], {"q": obj("q", {"weight": 2})}, {})
    assert first.verdicts["q"].accepted
    second = qo.plan([], {"q": obj("q", {"weight": -1}, gen=2)}, first.admitted)
    v = second.verdicts["q"]
    assert (v.accepted, v.reason, v.generation, v.running) == (False, qo.INVALID_SPEC, 2, 1)
    assert [(s.name, s.weight) for s in second.specs] == [("q", 2.0)]
    assert qo.condition_message(v).endswith("; the queue keeps the spec of generation 1")


def test_an_invalid_file_is_refused_whatever_the_objects() -> None:
    with pytest.raises(InvalidArgument, match=r"queues\[0\].weight"):
        qo.plan([QueueSpec(name="x", weight=-1)], {"q": obj("q")}, {})


# ------------------------------------------------------------ status


def test_status_carries_the_condition_and_the_queues_numbers() -> None:
    v = qo.Acceptance(True, qo.APPLIED, "", 3, 3)
    q = QueueStatus(
        name="q",
        parent="",
        leaf=True,
        guaranteed={},
        max={},
        weight=1.0,
        allocated={"cpu": 1500, "memory": 2**31},
        pending_pods=2,
        pending={"cpu": 2000},
        dominant_share=0.123456,
        fair_share=0.5,
        namespaces=[],
        children=[],
    )
    got = qo.status_of({}, v, q, "2026-01-01T00:00:00Z")
    assert got == {
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": "Applied",
                "message": "generation 3 is applied",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "observedGeneration": 3,
            }
        ],
        "allocated": {"cpu": "1500m", "memory": "2Gi"},
        "pending": {"cpu": "2"},
        "pendingPods": 2,
        "dominantShare": 0.1235,
        "fairShare": 0.5,
    }
    # Same status later: the transition time stays; a new status moves it.
    assert qo.status_of(got, v, q, "2026-01-01T01:00:00Z") == got
    refused = qo.status_of(got, qo.Acceptance(False, qo.INVALID_SPEC, "bad", 4, 3), q, "2026-01-01T01:00:00Z")
    assert refused["conditions"][0]["lastTransitionTime"] == "2026-01-01T01:00:00Z"
    assert refused["conditions"][0]["observedGeneration"] == 4


# ------------------------------------------------------------ the core


@pytest.fixture
def berth() -> app.Berth:
    cfg_ = config.BerthConfiguration(queues=cfg({"name": "file", "guaranteed": {"cpu": "2"}}))
    b = app.build(cfg_, run_loop=False)
    b.cluster.upsert_nodes([make_node("n0", cpu="8")])
    return b


def names(b: app.Berth) -> list[str]:
    return [s.name for s in b.core.quota.status()]


def test_the_core_follows_object_changes_and_keeps_usage(berth: app.Berth) -> None:
    core = berth.core
    berth.cluster.upsert_pods(
        [make_pod("p0", scheduler_name="berth", labels={LABEL_QUEUE: "obj"}, requests={"cpu": "1"}, node_name="n0")]
    )
    core.on_queue_object(obj("obj", {"weight": 2}))
    assert names(berth) == ["file", "obj"]
    assert core.quota.get("obj").allocated == {"cpu": 1000}  # type: ignore[union-attr]
    core.on_queue_object(obj("obj", {"weight": 3, "max": {"cpu": "4"}}, gen=2))
    status = core.quota.get("obj")
    assert status is not None and (status.weight, status.max, status.allocated) == (3.0, {"cpu": 4000}, {"cpu": 1000})
    core.on_queue_object_delete("obj")
    assert names(berth) == ["file"]
    assert core.queue_objects.objects == {}


def test_a_status_only_update_does_not_rebuild_the_tree(berth: app.Berth, monkeypatch: pytest.MonkeyPatch) -> None:
    core = berth.core
    core.on_queue_object(obj("obj"))
    loads: list[object] = []
    monkeypatch.setattr(core.quota, "load", loads.append)
    again = obj("obj")
    again.status = {"pendingPods": 3}
    core.on_queue_object(again)
    assert loads == []


def test_a_file_reload_keeps_the_objects(berth: app.Berth) -> None:
    core = berth.core
    core.on_queue_object(obj("obj", {"parent": "file"}))
    core.reload_queues(cfg({"name": "file", "guaranteed": {"cpu": "4"}}, {"name": "other"}))
    assert names(berth) == ["file", "obj", "other"]
    assert core.cfg.queues == cfg({"name": "file", "guaranteed": {"cpu": "4"}}, {"name": "other"})
    # The file drops the object's parent: the object is refused and leaves the tree.
    core.reload_queues(cfg({"name": "other"}))
    assert names(berth) == ["other"]
    assert core.queue_objects.verdicts["obj"].reason == qo.INVALID_HIERARCHY


def test_the_cluster_files_queues_are_all_or_nothing(berth: app.Berth) -> None:
    core = berth.core
    with pytest.raises(InvalidArgument, match=r"^Queue bad: spec\.parent: no queue named 'nope'$"):
        core.load_queue_objects([obj("good"), obj("bad", {"parent": "nope"})])
    assert names(berth) == ["file"]
    with pytest.raises(InvalidArgument, match="declared twice"):
        core.load_queue_objects([obj("twice"), obj("twice")])
    core.load_queue_objects([obj("good"), obj("kid", {"parent": "good"})])
    assert names(berth) == ["file", "good", "kid"]


# ------------------------------------------------------------ the embedded cluster file


def test_the_cluster_file_takes_queue_objects() -> None:
    from berth.cluster import manifests

    m = manifests.loads(
        "apiVersion: berth.dev/v1alpha1\nkind: Queue\nmetadata: {name: team}\nspec: {weight: 2}\n", source="c.yaml"
    )
    [q] = m.queues
    assert (q.metadata.name, q.metadata.generation, q.spec) == ("team", 1, {"weight": 2})
    for text, message in [
        ("apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\n", "kind Queue is served as"),
        ("apiVersion: berth.dev/v1alpha1\nkind: Queue\nmetadata: {name: Bad_Name}\n", "metadata.name"),
        ("apiVersion: berth.dev/v1alpha1\nkind: Queue\nmetadata: {name: q}\nstatus: {pendingPods: 1}\n", "status"),
    ]:
        with pytest.raises(manifests.ManifestError, match=message):
            manifests.loads(text, source="c.yaml")
