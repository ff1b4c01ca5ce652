"""Namespaces: the embedded cluster file and the Cluster feed take them, as
the API server would judge each (``ValidateNamespace``: a DNS-1123 label
name, no ``metadata.namespace``, valid labels) and default them
(``SetDefaults_Namespace``: ``kubernetes.io/metadata.name``), and hand their
labels to the core's namespace lister, which InterPodAffinity reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from berth import app, errors
from berth.cluster import manifests, model
from berth.cluster.embedded import EmbeddedCluster
from berth.testing import make_node, make_pod


def ns(name: str, labels: dict[str, str] | None = None, **meta: Any) -> model.Namespace:
    return model.Namespace(metadata=model.ObjectMeta(name=name, labels=dict(labels or {}), **meta))


def test_upserted_namespaces_carry_their_name_label_and_reach_the_lister() -> None:
    b = app.build(run_loop=False)
    given = ns("team-a", {"team": "a", "kubernetes.io/metadata.name": "forged"})
    assert b.cluster.upsert_namespaces([given, ns("team-b")]) == 2
    store = b.core.namespaces
    assert store.labels_of("team-a") == {"team": "a", "kubernetes.io/metadata.name": "team-a"}
    assert store.labels_of("team-b") == {"kubernetes.io/metadata.name": "team-b"}
    assert given.metadata.labels["kubernetes.io/metadata.name"] == "forged", "the caller's object is not changed"
    assert store.selected(model.LabelSelector(match_labels={"team": "a"})) == ["team-a"]
    assert store.selected(model.LabelSelector()) == ["team-a", "team-b"]
    assert store.labels_of("never-seen") == {}


def test_deleting_a_namespace_forgets_its_labels_and_skips_unknown_names() -> None:
    b = app.build(run_loop=False)
    b.cluster.upsert_namespaces([ns("team-a", {"team": "a"})])
    assert b.cluster.delete_namespaces(["team-a", "nope"]) == 1
    assert b.core.namespaces.get("team-a") is None
    assert b.core.namespaces.selected(model.LabelSelector(match_labels={"team": "a"})) == []


LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)

BAD_NAMESPACES: list[tuple[str, Callable[[EmbeddedCluster], object], str]] = [
    (
        "no name",
        lambda c: c.upsert_namespaces([ns("ok"), ns("")]),
        "namespaces[1].metadata.name: Required value: name or generateName is required",
    ),
    (
        "a name with dots (a subdomain, not a label)",
        lambda c: c.upsert_namespaces([ns("team.a")]),
        'namespaces[0].metadata.name: Invalid value: "team.a": must not contain dots',
    ),
    (
        "an upper-case name",
        lambda c: c.upsert_namespaces([ns("Team")]),
        f'namespaces[0].metadata.name: Invalid value: "Team": {LABEL_MSG}',
    ),
    (
        "a namespace of its own",
        lambda c: c.upsert_namespaces([ns("team-a", namespace="default")]),
        "namespaces[0].metadata.namespace: Forbidden: not allowed on this type",
    ),
    (
        "a bad label value",
        lambda c: c.upsert_namespaces([ns("team-a", {"team": "a b"})]),
        'namespaces[0].metadata.labels: Invalid value: "a b": a valid label must be an empty string',
    ),
    (
        "a bad label key",
        lambda c: c.upsert_namespaces([ns("team-a", {"a/b/c": "x"})]),
        'namespaces[0].metadata.labels: Invalid value: "a/b/c": a valid label key',
    ),
    (
        "one name twice in a batch",
        lambda c: c.upsert_namespaces([ns("team-a"), ns("team-a")]),
        'namespaces[1].metadata.name: Duplicate value: "team-a": the same name as namespaces[0]',
    ),
]


@pytest.mark.parametrize(("case", "feed", "message"), BAD_NAMESPACES, ids=[c[0] for c in BAD_NAMESPACES])
def test_a_bad_namespace_is_refused_with_the_api_servers_message_and_nothing_changes(
    case: str, feed: Callable[[EmbeddedCluster], object], message: str
) -> None:
    b = app.build(run_loop=False)
    with pytest.raises(errors.InvalidArgument) as err:
        feed(b.cluster)
    assert str(err.value).startswith(message), str(err.value)
    assert b.cluster.namespaces == {} and len(b.core.namespaces) == 0


CLUSTER_FILE = """
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {team: a}}
---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {zone: z1}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: v1
kind: Pod
metadata: {name: db, namespace: team-a, labels: {app: db}}
spec: {nodeName: n1, containers: [{name: c}]}
"""


def test_the_cluster_file_loads_namespaces_before_pods() -> None:
    m = manifests.loads(CLUSTER_FILE)
    assert [n.metadata.name for n in m.namespaces] == ["team-a"]
    b = app.build(run_loop=False)
    b.cluster.load(m)
    assert b.core.namespaces.labels_of("team-a") == {"team": "a", "kubernetes.io/metadata.name": "team-a"}
    # A pod whose anti-affinity selects team-a's namespace by label is kept off n1's zone.
    pod = make_pod(
        "web",
        spec={
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "topologyKey": "zone",
                            "labelSelector": {"matchLabels": {"app": "db"}},
                            "namespaceSelector": {"matchLabels": {"team": "a"}},
                        }
                    ]
                }
            }
        },
    )
    b.cluster.upsert_nodes([make_node("n2", cpu="4", memory="8Gi", pods=10, labels={"zone": "z2"})])
    res = b.extender.filter(pod, names=["n1", "n2"])
    assert res.passed == ["n2"]
    assert res.failed == {"n1": "node(s) didn't match pod anti-affinity rules"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\nspec: {finalizer: [x]}\n",
            'spec.finalizer: unknown field; did you mean "finalizers"?',
        ),
        ("apiVersion: v1\nkind: Namespace\nmetadata: {labels: {a: b}}\n", "metadata.name: required"),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c}]\n  affinity:\n"
            "    podAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
            "      - topologyKey: zone\n        namespaceSelector:\n"
            "          matchExpressions: [{key: team, operator: Within, values: [a]}]\n",
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector"
            '.matchExpressions[0].operator: Invalid value: "Within": not a valid selector operator',
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c}]\n  affinity:\n"
            "    podAntiAffinity:\n      preferredDuringSchedulingIgnoredDuringExecution:\n"
            "      - weight: 1\n        podAffinityTerm:\n          topologyKey: zone\n"
            "          namespaceSelector: {matchExpressions: [{key: team, operator: In}]}\n",
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm"
            ".namespaceSelector.matchExpressions[0].values: Required value",
        ),
    ],
    ids=[
        "a misspelt Namespace field (strict schema)",
        "a Namespace without a name",
        "a required term's namespaceSelector with an unknown operator",
        "a preferred term's namespaceSelector without values",
    ],
)
def test_manifest_namespaces_and_namespace_selectors_are_validated(text: str, message: str) -> None:
    with pytest.raises(manifests.ManifestError) as err:
        manifests.loads(text)
    assert message in str(err.value)


def test_berth_testing_cluster_takes_namespaces() -> None:
    """The SDK's test cluster feeds namespaces too, so a plugin author can
    test namespaceSelector terms against labelled namespaces."""
    from berth import testing

    team_a = model.Namespace(metadata=model.ObjectMeta(name="team-a", labels={"team": "a"}))
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "namespaceSelector": {"matchLabels": {"team": "a"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    nodes = [testing.make_node(n, cpu="4", pods=10, labels={"kubernetes.io/hostname": n}) for n in ("n1", "n2")]
    resident = testing.make_pod("db", namespace="team-a", node_name="n1", labels={"app": "db"})
    cluster = testing.Cluster(nodes, [resident])
    pod = testing.make_pod("web", spec={"affinity": anti})
    before = cluster.explain(pod)
    cluster.add(team_a)
    after = cluster.explain(pod)
    assert sorted(n.node for n in before.nodes if n.feasible) == ["n1", "n2"]  # team-a unknown: nothing selected
    assert sorted(n.node for n in after.nodes if n.feasible) == ["n2"]
