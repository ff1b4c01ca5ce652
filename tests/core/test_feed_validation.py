"""The Cluster feed validates a whole batch before it changes anything, as the
API server would judge each object, and applies all of it or none.

Messages are the API server's field errors (``k8s.io/apimachinery``
``util/validation``, ``apis/meta/v1/validation``; ``pkg/apis/core/validation``,
``pkg/apis/policy/validation``) with the object's place in the batch in front.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from berth import app, errors
from berth.cache.infos import PodInfo
from berth.cache.table import INT64_MAX, UsageOverflow
from berth.cluster import labels, model, validation
from berth.cluster.sources import BindError
from berth.scheduling import batch, explain
from berth.scheduling.verbs import VictimsRequest
from berth.testing import make_node, make_pod
from tests.core.feed import build, check_accounting, run_now, state

SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation "
    "is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def pdb(name: str = "budget", *, selector: dict[str, Any] | None = None, **spec: Any) -> model.PodDisruptionBudget:
    return msgspec.convert(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": selector if selector is not None else {"matchLabels": {"app": "web"}}, **spec},
        },
        model.PodDisruptionBudget,
    )


def group(name: str = "gang", **spec: Any) -> model.PodGroup:
    return msgspec.convert({"metadata": {"name": name}, "spec": {"minMember": 2, **spec}}, model.PodGroup)


def affinity_pod(operator: str) -> model.Pod:
    term = {"labelSelector": {"matchExpressions": [{"key": "app", "operator": operator, "values": ["x"]}]}}
    return make_pod(
        "p",
        spec={"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {**term, "topologyKey": "kubernetes.io/hostname"}
        ]}}},
    )  # fmt: skip


def with_meta(obj: model.Pod, **meta: Any) -> model.Pod:
    obj.metadata = msgspec.structs.replace(obj.metadata, **meta)
    return obj


# ---------------------------------------------------------------- one bad object -> the API server's message

Feed = Callable[[app.Berth], int]

BAD_BATCHES: list[tuple[str, Feed, type[Exception], str]] = [
    (
        "node name not a DNS subdomain",
        lambda b: b.cluster.upsert_nodes([make_node("Node_1", cpu="1")]),
        errors.InvalidArgument,
        f'nodes[0].metadata.name: Invalid value: "Node_1": {SUBDOMAIN}',
    ),
    (
        "node without a name",
        lambda b: b.cluster.upsert_nodes([make_node("a"), make_node("")]),
        errors.InvalidArgument,
        "nodes[1].metadata.name: Required value: name or generateName is required",
    ),
    (
        "node label key with a space",
        lambda b: b.cluster.upsert_nodes([make_node("a", labels={"bad key": "v"})]),
        errors.InvalidArgument,
        'nodes[0].metadata.labels: Invalid value: "bad key": name part must consist of alphanumeric characters',
    ),
    (
        "node taint effect",
        lambda b: b.cluster.upsert_nodes([make_node("a", taints=[model.Taint(key="k", effect="Sometimes")])]),
        errors.InvalidArgument,
        'nodes[0].spec.taints[0].effect: Unsupported value: "Sometimes": supported values: "NoSchedule", '
        '"PreferNoSchedule", "NoExecute"',
    ),
    (
        "node listed twice in one batch",
        lambda b: b.cluster.upsert_nodes([make_node("a"), make_node("b"), make_node("a")]),
        errors.InvalidArgument,
        'nodes[2].metadata.name: Duplicate value: "a": the same name as nodes[0]',
    ),
    (
        "pod name Foo_",
        lambda b: b.cluster.upsert_pods([make_pod("Foo_")]),
        errors.InvalidArgument,
        f'pods[0].metadata.name: Invalid value: "Foo_": {SUBDOMAIN}',
    ),
    (
        "pod namespace with a dot",
        lambda b: b.cluster.upsert_pods([make_pod("p", namespace="team.a")]),
        errors.InvalidArgument,
        'pods[0].metadata.namespace: Invalid value: "team.a": must not contain dots',
    ),
    (
        "pod label value too long",
        lambda b: b.cluster.upsert_pods([make_pod("p", labels={"app": "x" * 64})]),
        errors.InvalidArgument,
        'pods[0].metadata.labels: Invalid value: "' + "x" * 64 + '": must be no more than 63 characters',
    ),
    (
        "pod annotation key with two slashes",
        lambda b: b.cluster.upsert_pods([make_pod("p", annotations={"a/b/c": "v"})]),
        errors.InvalidArgument,
        'pods[0].metadata.annotations: Invalid value: "a/b/c": a valid label key must consist of',
    ),
    (
        "pod bound to a node name that cannot be one",
        lambda b: b.cluster.upsert_pods([make_pod("p", node_name="Node_A")]),
        errors.InvalidArgument,
        f'pods[0].spec.nodeName: Invalid value: "Node_A": {SUBDOMAIN}',
    ),
    (
        "pod anti-affinity selector operator Bogus",
        lambda b: b.cluster.upsert_pods([affinity_pod("Bogus")]),
        errors.InvalidArgument,
        "pods[0].spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector"
        '.matchExpressions[0].operator: Invalid value: "Bogus": not a valid selector operator',
    ),
    (
        "pod without containers",
        lambda b: b.cluster.upsert_pods([make_pod("p", containers=[])]),
        errors.InvalidArgument,
        "pods[0].spec.containers",
    ),
    (
        "pod whose own total cpu request passes int64",
        lambda b: b.cluster.upsert_pods(
            [
                make_pod(
                    "p", containers=[{"name": f"c{i}", "resources": {"requests": {"cpu": "9e15"}}} for i in range(2)]
                )
            ]
        ),
        errors.InvalidArgument,
        "pods[0].spec: Invalid value: ",
    ),
    (
        "two pods with one name in one batch",
        lambda b: b.cluster.upsert_pods([make_pod("web", uid="u1"), make_pod("web", uid="u2")]),
        errors.InvalidArgument,
        'pods[1].metadata.name: Duplicate value: "default/web": the same namespace and name as pods[0]',
    ),
    (
        "two pods with one uid in one batch",
        lambda b: b.cluster.upsert_pods([make_pod("a", uid="u"), make_pod("b", uid="u")]),
        errors.InvalidArgument,
        'pods[1].metadata.uid: Duplicate value: "u": the same uid as pods[0]',
    ),
    (
        "pod group minMember 0",
        lambda b: b.cluster.upsert_pod_groups([group(minMember=0)]),
        errors.InvalidArgument,
        "groups[0].spec.minMember: Invalid value: 0: must be greater than or equal to 1",
    ),
    (
        "pod group with a negative timeout",
        lambda b: b.cluster.upsert_pod_groups([group(scheduleTimeoutSeconds=-1)]),
        errors.InvalidArgument,
        "groups[0].spec.scheduleTimeoutSeconds: Invalid value: -1: must be greater than or equal to 0",
    ),
    (
        "pod group named twice",
        lambda b: b.cluster.upsert_pod_groups([group(), group()]),
        errors.InvalidArgument,
        'groups[1].metadata.name: Duplicate value: "default/gang"',
    ),
    (
        "PDB selector operator Bogus",
        lambda b: b.cluster.upsert_pdbs(
            [pdb(selector={"matchExpressions": [{"key": "app", "operator": "Bogus", "values": ["web"]}]})]
        ),
        errors.InvalidArgument,
        'budgets[0].spec.selector.matchExpressions[0].operator: Invalid value: "Bogus": not a valid selector operator',
    ),
    (
        "PDB selector In without values",
        lambda b: b.cluster.upsert_pdbs([pdb(selector={"matchExpressions": [{"key": "app", "operator": "In"}]})]),
        errors.InvalidArgument,
        "budgets[0].spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` "
        "is 'In' or 'NotIn'",
    ),
    (
        "PDB selector Exists with values",
        lambda b: b.cluster.upsert_pdbs(
            [pdb(selector={"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]})]
        ),
        errors.InvalidArgument,
        "budgets[0].spec.selector.matchExpressions[0].values: Forbidden: may not be specified when `operator` "
        "is 'Exists' or 'DoesNotExist'",
    ),
    (
        "PDB selector key with two slashes",
        lambda b: b.cluster.upsert_pdbs([pdb(selector={"matchExpressions": [{"key": "a/b/c", "operator": "Exists"}]})]),
        errors.InvalidArgument,
        'budgets[0].spec.selector.matchExpressions[0].key: Invalid value: "a/b/c"',
    ),
    (
        "PDB selector value with a space",
        lambda b: b.cluster.upsert_pdbs(
            [pdb(selector={"matchExpressions": [{"key": "app", "operator": "In", "values": ["a b"]}]})]
        ),
        errors.InvalidArgument,
        'budgets[0].spec.selector.matchExpressions[0].values[0]: Invalid value: "a b": a valid label must be',
    ),
    (
        "PDB matchLabels value with a space",
        lambda b: b.cluster.upsert_pdbs([pdb(selector={"matchLabels": {"app": "a b"}})]),
        errors.InvalidArgument,
        'budgets[0].spec.selector.matchLabels: Invalid value: "a b"',
    ),
    (
        "PDB with minAvailable and maxUnavailable",
        lambda b: b.cluster.upsert_pdbs([pdb(minAvailable=1, maxUnavailable=1)]),
        errors.InvalidArgument,
        'budgets[0].spec: Invalid value: "": minAvailable and maxUnavailable cannot be both set',
    ),
    (
        "PDB minAvailable 150%",
        lambda b: b.cluster.upsert_pdbs([pdb(minAvailable="150%")]),
        errors.InvalidArgument,
        'budgets[0].spec.minAvailable: Invalid value: "150%": must not be greater than 100%',
    ),
    (
        "PDB maxUnavailable -1",
        lambda b: b.cluster.upsert_pdbs([pdb(maxUnavailable=-1)]),
        errors.InvalidArgument,
        "budgets[0].spec.maxUnavailable: Invalid value: -1: must be greater than or equal to 0",
    ),
    (
        "PDB maxUnavailable not a percentage",
        lambda b: b.cluster.upsert_pdbs([pdb(maxUnavailable="half")]),
        errors.InvalidArgument,
        'budgets[0].spec.maxUnavailable: Invalid value: "half": a valid percent string must be',
    ),
]


@pytest.mark.parametrize(("case", "feed", "kind", "message"), BAD_BATCHES, ids=[c[0] for c in BAD_BATCHES])
def test_a_bad_object_is_refused_with_the_api_servers_message_and_nothing_changes(
    case: str, feed: Feed, kind: type[Exception], message: str
) -> None:
    berth = build()
    berth.cluster.upsert_nodes([make_node("n1", cpu="4", memory="8Gi", pods=10)])
    berth.cluster.upsert_pods([make_pod("resident", requests={"cpu": "1"}, node_name="n1")])
    before = state(berth)
    with pytest.raises(kind) as err:
        feed(berth)
    assert str(err.value).startswith(message), str(err.value)
    assert len(str(err.value)) <= errors.MAX_MESSAGE_CHARS
    assert state(berth) == before
    check_accounting(berth)


# ---------------------------------------------------------------- all or nothing


def test_a_rejected_upsert_nodes_leaves_none_of_its_batch_applied() -> None:
    berth = build()
    before = state(berth)
    with pytest.raises(errors.InvalidArgument, match=r"^nodes\[2\]\.metadata\.name"):
        berth.cluster.upsert_nodes([make_node("a", cpu="1"), make_node("b", cpu="1"), make_node("Bad_Name")])
    assert state(berth) == before
    assert berth.core.cache.node_count == 0


def test_a_rejected_upsert_pods_leaves_none_of_its_batch_applied() -> None:
    berth = build()
    berth.cluster.upsert_nodes([make_node("a", cpu="4")])
    before = state(berth)
    with pytest.raises(errors.InvalidArgument, match=r"^pods\[1\]"):
        berth.cluster.upsert_pods([make_pod("ok", requests={"cpu": "1"}, node_name="a"), make_pod("Not_OK")])
    assert state(berth) == before
    assert berth.cluster.pods == {}


def test_the_callers_pods_are_not_defaulted_by_a_refused_batch() -> None:
    berth = build()
    pod = make_pod("p")
    pod.metadata.namespace, pod.metadata.uid = "", ""
    with pytest.raises(errors.InvalidArgument):
        berth.cluster.upsert_pods([pod, make_pod("Bad_")])
    assert (pod.metadata.namespace, pod.metadata.uid) == ("", "")


# ---------------------------------------------------------------- uids and names


def test_a_uid_held_by_another_pod_is_already_exists() -> None:
    berth = build()
    berth.cluster.upsert_nodes([make_node("a", cpu="4")])
    berth.cluster.upsert_pods([make_pod("first", uid="same", requests={"cpu": "1"}, node_name="a")])
    before = state(berth)
    with pytest.raises(errors.AlreadyExists) as err:
        berth.cluster.upsert_pods([make_pod("second", uid="same", requests={"cpu": "2"}, node_name="a")])
    assert str(err.value) == "pods[0].metadata.uid: 'same' is already the uid of pod default/first"
    assert state(berth) == before
    check_accounting(berth)


def test_a_uid_held_by_a_pod_of_another_source_is_already_exists() -> None:
    berth = build()

    class Elsewhere:
        name = "elsewhere"

    berth.core.on_pod(make_pod("theirs", uid="u"), source=Elsewhere())  # type: ignore[arg-type]
    with pytest.raises(errors.AlreadyExists, match="is already the uid of pod default/theirs"):
        berth.cluster.upsert_pods([make_pod("mine", uid="u")])
    assert berth.cluster.pods == {}


def test_a_name_given_a_new_uid_replaces_the_old_pod_everywhere() -> None:
    berth = build()
    berth.cluster.upsert_nodes([make_node("a", cpu="4"), make_node("b", cpu="4")])
    berth.cluster.upsert_pods([make_pod("web", uid="v1", requests={"cpu": "1"}, node_name="a")])
    berth.cluster.upsert_pods([make_pod("web", uid="v2", requests={"cpu": "3"}, node_name="b")])
    check_accounting(berth)
    assert berth.core.pods.get("v1") is None
    # The old uid is free again.
    berth.cluster.upsert_pods([make_pod("other", uid="v1")])
    check_accounting(berth)


# ---------------------------------------------------------------- a pod's node


@pytest.mark.parametrize(("to", "shown"), [("b", "'b'"), ("", "''")], ids=["to another node", "to no node"])
def test_an_upsert_cannot_move_a_bound_pod(to: str, shown: str) -> None:
    berth = build()
    berth.cluster.upsert_nodes([make_node("a", cpu="4"), make_node("b", cpu="4")])
    berth.cluster.upsert_pods([make_pod("web", requests={"cpu": "1"}, node_name="a")])
    before = state(berth)
    with pytest.raises(errors.FailedPrecondition) as err:
        berth.cluster.upsert_pods([make_pod("web", requests={"cpu": "1"}, node_name=to)])
    assert str(err.value) == (
        f"pods[0].spec.nodeName: cannot change from 'a' to {shown} (pods are moved by Bind, or deleted and re-created)"
    )
    assert state(berth) == before
    check_accounting(berth)


def test_an_upsert_may_bind_a_pending_pod_and_update_a_bound_one_in_place() -> None:
    berth = build()
    berth.cluster.upsert_nodes([make_node("a", cpu="4")])
    berth.cluster.upsert_pods([make_pod("web", requests={"cpu": "1"})])
    berth.cluster.upsert_pods([make_pod("web", requests={"cpu": "1"}, node_name="a")])
    check_accounting(berth)
    berth.cluster.upsert_pods([make_pod("web", requests={"cpu": "2"}, labels={"v": "2"}, node_name="a")])
    check_accounting(berth)
    assert berth.core.cache.node_info("a").pods["uid-default-web"].requests == {"cpu": 2000}  # type: ignore[union-attr]


def test_a_pod_bound_to_an_unknown_node_counts_on_a_placeholder_until_the_node_arrives() -> None:
    # kube-scheduler's cacheImpl.addPod creates a NodeInfo without a Node for it.
    berth = build()
    berth.cluster.upsert_pods([make_pod("early", requests={"cpu": "1"}, node_name="later")])
    check_accounting(berth)
    assert berth.core.cache.node_count == 0
    berth.cluster.upsert_nodes([make_node("later", cpu="4")])
    check_accounting(berth)
    assert {n.name: n.requested["cpu"] for n in explain.list_nodes(berth.core)} == {"later": 1000}


def test_a_finished_pod_stops_counting_and_an_informer_unbinding_a_pod_releases_its_node() -> None:
    berth = build()
    berth.cluster.upsert_nodes([make_node("a", cpu="4")])
    berth.cluster.upsert_pods([make_pod("job", requests={"cpu": "1"}, node_name="a")])
    done = make_pod("job", requests={"cpu": "1"}, node_name="a")
    done.status.phase = "Succeeded"
    berth.cluster.upsert_pods([done])
    check_accounting(berth)
    # An informer cannot refuse: the core keeps the accounting exact instead.
    berth.core.on_pod(make_pod("x", requests={"cpu": "1"}, node_name="a"), source=berth.cluster)
    berth.core.on_pod(make_pod("x", requests={"cpu": "1"}), source=berth.cluster)
    assert berth.core.cache.pod_node("uid-default-x") is None


# ---------------------------------------------------------------- int64 sums

NEAR_MAX_CPU = f"{INT64_MAX // 1000 * 1000 - 1000}m"  # one core short of int64 in millicores


def test_bound_pods_whose_requests_pass_int64_are_refused_before_anything_changes() -> None:
    berth = build()
    berth.cluster.upsert_nodes([make_node("a", cpu="4")])
    berth.cluster.upsert_pods([make_pod("big", requests={"cpu": NEAR_MAX_CPU}, node_name="a")])
    before = state(berth)
    with pytest.raises(errors.ResourceExhausted) as err:
        berth.cluster.upsert_pods([make_pod("one-more", requests={"cpu": "2"}, node_name="a")])
    assert "node 'a': requested cpu would overflow int64" in str(err.value)
    assert state(berth) == before
    check_accounting(berth)
    # Within the bound it still fits exactly (no wrap).
    berth.cluster.upsert_pods([make_pod("last", requests={"cpu": "1"}, node_name="a")])
    check_accounting(berth)
    assert int(berth.core.cache.table.req[0, 0]) == INT64_MAX // 1000 * 1000


def test_one_batch_whose_pods_together_pass_int64_on_a_node_is_refused() -> None:
    berth = build()
    berth.cluster.upsert_nodes([make_node("a", cpu="4")])
    before = state(berth)
    half = f"{INT64_MAX // 2 + 1}m"
    with pytest.raises(errors.ResourceExhausted, match="would overflow"):
        berth.cluster.upsert_pods(
            [make_pod("x", requests={"cpu": half}, node_name="a"), make_pod("y", requests={"cpu": half}, node_name="a")]
        )
    assert state(berth) == before


def test_replacing_a_pod_frees_its_share_before_the_bound_is_checked() -> None:
    berth = build()
    berth.cluster.upsert_nodes([make_node("a", cpu="4")])
    berth.cluster.upsert_pods([make_pod("big", requests={"cpu": NEAR_MAX_CPU}, node_name="a")])
    berth.cluster.upsert_pods([make_pod("big", requests={"cpu": NEAR_MAX_CPU}, labels={"v": "2"}, node_name="a")])
    check_accounting(berth)


def test_a_bind_that_would_pass_int64_is_a_bind_error_and_changes_nothing() -> None:
    berth = build()
    berth.cluster.upsert_nodes([make_node("a", cpu="4")])
    berth.cluster.upsert_pods(
        [make_pod("big", requests={"cpu": NEAR_MAX_CPU}, node_name="a"), make_pod("p", requests={"cpu": "2"})]
    )
    before = state(berth)
    # The kubelet's admission refuses it first (the node is far over its
    # allocatable); either way the bind fails and nothing changes.
    with pytest.raises(BindError, match=r"^OutOf(cpu|pods): |would overflow"):
        run_now(berth.cluster.bind(berth.cluster.pods["default/p"], "a"))
    assert state(berth) == before


def test_the_cache_refuses_an_overflowing_pod_from_an_informer_and_keeps_its_sums(
    caplog: pytest.LogCaptureFixture,
) -> None:
    berth = build()
    berth.cluster.upsert_nodes([make_node("a", cpu="4")])
    berth.cluster.upsert_pods([make_pod("big", requests={"cpu": NEAR_MAX_CPU}, node_name="a")])
    cache = berth.core.cache
    req = cache.table.req.copy()
    with pytest.raises(UsageOverflow):
        cache.add_pod(PodInfo.of(make_pod("direct", requests={"cpu": "2"}, node_name="a")))
    with pytest.raises(UsageOverflow):
        cache.assume_pod(PodInfo.of(make_pod("assumed", requests={"cpu": "2"})), "a")
    assert cache.pod_count == 1 and cache.assumed_count == 0
    with caplog.at_level(logging.ERROR):
        berth.core.on_pod(make_pod("informed", requests={"cpu": "2"}, node_name="a"), source=berth.cluster)
    assert "is not counted as given" in caplog.text
    assert (cache.table.req == req).all()
    assert cache.pod_node("uid-default-informed") is None


# ---------------------------------------------------------------- PDBs and preemption


def test_an_invalid_pdb_from_an_informer_is_not_stored(caplog: pytest.LogCaptureFixture) -> None:
    berth = build()
    bogus = pdb(selector={"matchExpressions": [{"key": "app", "operator": "Bogus", "values": ["web"]}]})
    with caplog.at_level(logging.ERROR):
        berth.core.on_pdb(bogus)
    assert berth.core.pdbs.list() == []
    assert "not a valid selector operator" in caplog.text


def test_preempt_with_a_pdb_present_evaluates_it() -> None:
    berth = build()
    berth.cluster.upsert_nodes([make_node("a", cpu="2", memory="4Gi", pods=10)])
    low = make_pod("low", requests={"cpu": "2"}, node_name="a", priority=0, labels={"app": "web"})
    berth.cluster.upsert_pods([low])
    berth.cluster.upsert_pdbs(
        [pdb(selector={"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]})]
    )
    high = make_pod("high", requests={"cpu": "2"}, priority=100)
    out = berth.extender.preempt(high, {"a": VictimsRequest(["uid-default-low"], [])})
    assert out["a"].uids == ["uid-default-low"]
    assert out["a"].num_pdb_violations == 1


def test_label_selector_validation_is_apimachinerys() -> None:
    sel = model.LabelSelector(match_expressions=[model.LabelSelectorRequirement(key="k", operator="Bogus")])
    with pytest.raises(labels.SelectorError) as err:
        labels.validate_label_selector(sel, "spec.selector")
    assert isinstance(err.value, errors.InvalidArgument)
    assert (
        str(err.value)
        == 'spec.selector.matchExpressions[0].operator: Invalid value: "Bogus": not a valid selector operator'
    )


@pytest.mark.parametrize(
    ("check", "value", "message"),
    [
        (validation.is_dns1123_subdomain, "a" * 254, "must be no more than 253 characters"),
        (validation.is_dns1123_subdomain, "web\n", "a lowercase RFC 1123 subdomain"),
        (validation.is_dns1123_label, "a.b", "must not contain dots"),
        (validation.is_qualified_name, "/name", "prefix part must be non-empty"),
        (validation.is_qualified_name, "Example.com/x", "prefix part a lowercase RFC 1123 subdomain"),
        (validation.is_qualified_name, "x" * 64, "name part must be no more than 63 characters"),
        (validation.is_valid_label_value, "-x", "a valid label must be an empty string"),
    ],
)
def test_string_rules_match_apimachinery(check: Callable[[str], list[str]], value: str, message: str) -> None:
    assert check(value)[0].startswith(message)


@pytest.mark.parametrize(
    ("check", "value"),
    [
        (validation.is_dns1123_subdomain, "example.com"),
        (validation.is_dns1123_label, "my-name"),
        (validation.is_qualified_name, "scheduling.x-k8s.io/pod-group"),
        (validation.is_qualified_name, "My_Name.1"),
        (validation.is_valid_label_value, ""),
        (validation.is_valid_label_value, "Value_1.x"),
    ],
)
def test_valid_strings_pass(check: Callable[[str], list[str]], value: str) -> None:
    assert check(value) == []


# ---------------------------------------------------------------- Submit and Explain


def test_submit_of_two_different_pods_with_one_name_accepts_the_first_only() -> None:
    berth = build(run_loop=True)
    results = batch.submit(berth.core, [make_pod("web", uid="u1"), make_pod("web", uid="u2", labels={"v": "2"})])
    assert [(r.pod, r.accepted) for r in results] == [("default/web", True), ("default/web", False)]
    assert results[1].message.startswith("pods[1].metadata.name: already exists: a different pod default/web")
    assert [p.metadata.uid for p in berth.cluster.pods.values()] == ["u1"]


def test_submit_of_the_same_pod_twice_is_idempotent() -> None:
    berth = build(run_loop=True)
    results = batch.submit(berth.core, [make_pod("web"), make_pod("web")])
    defaulted = 'spec.schedulerName defaulted to "berth", the only profile'  # no name given: the only profile's
    assert [(r.accepted, r.message) for r in results] == [(True, defaulted), (True, "already submitted")]
    again = batch.submit(berth.core, [make_pod("web")])
    assert [(r.accepted, r.message) for r in again] == [(True, "already submitted")]


def test_submit_under_a_known_name_with_another_spec_is_refused() -> None:
    berth = build(run_loop=True)
    batch.submit(berth.core, [make_pod("web", requests={"cpu": "1"})])
    results = batch.submit(berth.core, [make_pod("web", requests={"cpu": "2"})])
    assert not results[0].accepted
    assert "already exists" in results[0].message
    assert berth.cluster.pods["default/web"].spec.containers[0].resources.requests == {"cpu": "1"}  # type: ignore[union-attr]


def test_submit_of_a_uid_another_pod_holds_is_refused() -> None:
    berth = build(run_loop=True)
    results = batch.submit(berth.core, [make_pod("a", uid="u"), make_pod("b", uid="u")])
    assert [r.accepted for r in results] == [True, False]
    assert results[1].message == "pods[1].metadata.uid: already exists: 'u' is pod default/a's"


def test_submit_of_an_invalid_group_is_refused_whole() -> None:
    berth = build(run_loop=True)
    with pytest.raises(errors.InvalidArgument, match=r"^group\.spec\.minMember: Invalid value: 0"):
        batch.submit(berth.core, [make_pod("a")], group(minMember=0))
    assert berth.cluster.pods == {}


def test_submit_refused_by_the_cluster_takes_its_group_back() -> None:
    berth = build(run_loop=True)
    berth.cluster.upsert_nodes([make_node("a", cpu="4")])
    berth.cluster.upsert_pods([make_pod("big", requests={"cpu": NEAR_MAX_CPU}, node_name="a")])
    with pytest.raises(errors.ResourceExhausted):
        batch.submit(berth.core, [make_pod("m", requests={"cpu": "2"}, node_name="a")], group())
    assert berth.core.pod_groups.get("default", "gang") is None


def test_explain_with_ten_thousand_unknown_nodes_says_so_in_a_bounded_message() -> None:
    berth = build()
    berth.cluster.upsert_nodes([make_node("a", cpu="1")])
    names = [f"no-such-{i}" for i in range(10_000)]
    with pytest.raises(errors.NotFound) as err:
        explain.explain(berth.core, make_pod("p"), node_names=["a", *names])
    message = str(err.value)
    assert message.startswith("node_names: unknown node(s) no-such-0, no-such-1, ")
    assert message.endswith("no-such-9 ... and 9990 more")
    assert len(message) <= errors.MAX_MESSAGE_CHARS


def test_explain_of_a_deleted_node_is_not_found() -> None:
    berth = build()
    berth.cluster.upsert_nodes([make_node("a", cpu="1")])
    berth.cluster.upsert_pods([make_pod("p", node_name="a")])
    berth.cluster.delete_nodes(["a"])
    with pytest.raises(errors.NotFound, match=r"unknown node\(s\) a$"):
        explain.explain(berth.core, make_pod("q"), node_names=["a"])


def test_explain_of_one_node_named_twenty_thousand_times_is_refused() -> None:
    # Found by the gRPC fuzzer (seed 2874763821, #2258): with a preferred
    # pod-affinity term every copy was scored against every other, and the
    # process grew past 18 GB.
    berth = build()
    berth.cluster.upsert_nodes([make_node("a", cpu="1")])
    with pytest.raises(
        errors.InvalidArgument, match=r'^node_names\[1\]: Duplicate value: "a" \(also node_names\[0\]\)$'
    ):
        explain.explain(berth.core, make_pod("q"), node_names=["a"] * 20_000)


def test_explain_cuts_long_unknown_names_short() -> None:
    berth = build()
    with pytest.raises(errors.NotFound) as err:
        explain.explain(berth.core, make_pod("q"), node_names=["x" * 100_000])
    assert str(err.value) == "node_names: unknown node(s) " + "x" * 64 + "..."


def test_a_batch_is_checked_in_the_order_it_is_applied() -> None:
    # Found by the state machine: a batch that fits at its end but not on the
    # way (a big pod added before another one shrinks) used to be admitted and
    # then lose the big pod's count half-way through.
    berth = build()
    berth.cluster.upsert_nodes([make_node("a", cpu="4")])
    berth.cluster.upsert_pods([make_pod("old", requests={"cpu": NEAR_MAX_CPU}, node_name="a")])
    grow = make_pod("new", requests={"cpu": NEAR_MAX_CPU}, node_name="a")
    shrink = make_pod("old", requests={"cpu": "1"}, node_name="a")
    before = state(berth)
    with pytest.raises(errors.ResourceExhausted, match="would overflow"):
        berth.cluster.upsert_pods([grow, shrink])
    assert state(berth) == before
    berth.cluster.upsert_pods([shrink, grow])
    check_accounting(berth)


def test_a_label_value_message_is_word_for_word_the_api_servers() -> None:
    # RegexError writes "'x', " then " or " between examples: two spaces, as the API server says it.
    assert validation.is_valid_label_value("-x") == [
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
        "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
        "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    ]
