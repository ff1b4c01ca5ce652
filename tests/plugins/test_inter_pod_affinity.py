"""InterPodAffinity: cases ported from kube-scheduler v1.34's
interpodaffinity/filtering_test.go and scoring_test.go."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from berth import features
from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.plugins.interpodaffinity import InterPodAffinity, InterPodAffinityArgs
from berth.testing import Cluster, filter_statuses, make_node, make_pod, scores
from tests.support import cached

U = fw.Code.UNSCHEDULABLE
UU = fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
AFF = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
CODES = {AFF: UU, ANTI: U, EXISTING: U}


def term(key: str, match: dict[str, str], **kw: Any) -> dict[str, Any]:
    return {"topologyKey": key, "labelSelector": {"matchLabels": match}, **kw}


def affinity(required: list[dict[str, Any]] = (), anti: list[dict[str, Any]] = (), **pref: Any) -> dict[str, Any]:  # type: ignore[assignment]
    out: dict[str, Any] = {}
    if required or pref.get("preferred"):
        out["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": list(required),
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "podAffinityTerm": t} for w, t in pref.get("preferred", [])
            ],
        }
    if anti or pref.get("preferred_anti"):
        out["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": list(anti),
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "podAffinityTerm": t} for w, t in pref.get("preferred_anti", [])
            ],
        }
    return {"affinity": out}


NODES = [
    make_node("n1", labels={"region": "r1", "zone": "z1", "kubernetes.io/hostname": "n1"}),
    make_node("n2", labels={"region": "r1", "zone": "z2", "kubernetes.io/hostname": "n2"}),
    make_node("n3", labels={"region": "r2", "zone": "z3", "kubernetes.io/hostname": "n3"}),
    make_node("n4", labels={"zone": "z4"}),
]


def cluster(pods: list[Any], nodes: list[Any] = NODES) -> tuple[Any, Handle]:
    return cached(nodes, pods)


CASES: list[tuple[str, Any, list[Any], dict[str, str | None]]] = [
    (
        "affinity to a pod in the same region",
        make_pod("p", spec=affinity([term("region", {"service": "securityscan"})])),
        [make_pod("e", node_name="n1", labels={"service": "securityscan"})],
        {"n1": None, "n2": None, "n3": AFF, "n4": AFF},
    ),
    (
        "no pod matches and the pod does not match itself",
        make_pod("p", spec=affinity([term("region", {"service": "securityscan"})])),
        [],
        {"n1": AFF, "n2": AFF, "n3": AFF, "n4": AFF},
    ),
    (
        "first pod of a group matching its own terms goes anywhere with the key",
        make_pod("p", labels={"service": "securityscan"}, spec=affinity([term("region", {"service": "securityscan"})])),
        [],
        {"n1": None, "n2": None, "n3": None, "n4": AFF},
    ),
    (
        "affinity ignores pods of other namespaces",
        make_pod("p", spec=affinity([term("region", {"service": "securityscan"})])),
        [make_pod("e", namespace="other", node_name="n1", labels={"service": "securityscan"})],
        {"n1": AFF, "n2": AFF, "n3": AFF, "n4": AFF},
    ),
    (
        "affinity with namespaces listed",
        make_pod("p", spec=affinity([term("region", {"service": "securityscan"}, namespaces=["other"])])),
        [make_pod("e", namespace="other", node_name="n1", labels={"service": "securityscan"})],
        {"n1": None, "n2": None, "n3": AFF, "n4": AFF},
    ),
    (
        "affinity with an empty namespaceSelector: every namespace",
        make_pod("p", spec=affinity([term("region", {"service": "securityscan"}, namespaceSelector={})])),
        [make_pod("e", namespace="other", node_name="n3", labels={"service": "securityscan"})],
        {"n1": AFF, "n2": AFF, "n3": None, "n4": AFF},
    ),
    (
        "anti-affinity against a pod in the same zone",
        make_pod("p", spec=affinity(anti=[term("zone", {"app": "db"})])),
        [make_pod("e", node_name="n1", labels={"app": "db"})],
        {"n1": ANTI, "n2": None, "n3": None, "n4": None},
    ),
    (
        "existing pod's anti-affinity repels the incoming pod",
        make_pod("p", labels={"app": "web"}),
        [make_pod("e", node_name="n2", spec=affinity(anti=[term("region", {"app": "web"})]))],
        {"n1": EXISTING, "n2": EXISTING, "n3": None, "n4": None},
    ),
    (
        "existing anti-affinity that does not match the incoming pod",
        make_pod("p", labels={"app": "api"}),
        [make_pod("e", node_name="n2", spec=affinity(anti=[term("region", {"app": "web"})]))],
        {"n1": None, "n2": None, "n3": None, "n4": None},
    ),
    (
        "affinity checked before anti-affinity",
        make_pod(
            "p",
            spec=affinity([term("region", {"service": "x"})], anti=[term("zone", {"app": "db"})]),
        ),
        [make_pod("e1", node_name="n1", labels={"service": "x", "app": "db"})],
        {"n1": ANTI, "n2": None, "n3": AFF, "n4": AFF},
    ),
    (
        "matchLabelKeys narrows the selector to the pod's own value",
        make_pod(
            "p",
            labels={"app": "db", "version": "v2"},
            spec=affinity(anti=[term("zone", {"app": "db"}, matchLabelKeys=["version"])]),
        ),
        [
            make_pod("e1", node_name="n1", labels={"app": "db", "version": "v1"}),
            make_pod("e2", node_name="n2", labels={"app": "db", "version": "v2"}),
        ],
        {"n1": None, "n2": ANTI, "n3": None, "n4": None},
    ),
]


@pytest.mark.parametrize(("case", "pod", "pods", "want"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("indexed", [True, False], ids=["cache index", "scan"])
def test_filter(case: str, pod: Any, pods: list[Any], want: dict[str, str | None], indexed: bool) -> None:
    snap, handle = cluster(pods)
    got = filter_statuses(InterPodAffinity(None, handle if indexed else None), pod, snap)
    assert {n: (st.reasons[0] if st.reasons else None) for n, st in got.items()} == want
    for st in got.values():
        if st.reasons:
            assert st.code == CODES[st.reasons[0]]


def test_pre_filter_skips_when_nothing_is_involved() -> None:
    snap, handle = cluster([make_pod("e", node_name="n1", labels={"a": "b"})])
    res = InterPodAffinity(None, handle).pre_filter(fw.CycleState(), PodInfo.of(make_pod("p")), snap)
    assert res.status.code == fw.Code.SKIP


def test_preemption_extensions_track_removed_victims() -> None:
    victim = make_pod("e", node_name="n1", labels={"app": "db"})
    snap, handle = cluster([victim])
    plugin = InterPodAffinity(None, handle)
    pod = PodInfo.of(make_pod("p", spec=affinity(anti=[term("zone", {"app": "db"})])))
    state = fw.CycleState()
    plugin.pre_filter(state, pod, snap)
    info = snap.infos[snap.index["n1"]]
    assert info is not None
    rows = snap.alive_rows()
    assert plugin.filter(state, pod, snap, rows).ok.tolist() == [False, True, True, True]
    plugin.remove_pod(state, pod, info.pods["uid-default-e"], info)
    assert plugin.filter(state, pod, snap, rows).ok.tolist() == [True, True, True, True]
    plugin.add_pod(state, pod, info.pods["uid-default-e"], info)
    assert plugin.filter(state, pod, snap, rows).ok.tolist() == [False, True, True, True]


def test_index_follows_pods_leaving() -> None:
    existing = make_pod("e", node_name="n2", spec=affinity(anti=[term("region", {"app": "web"})]))
    cluster = Cluster(NODES, [existing])
    plugin = InterPodAffinity(None, cluster.handle())
    pod = make_pod("p", labels={"app": "web"})
    assert not cluster.filter(plugin, pod)["n1"].ok
    cluster.delete(existing)
    assert cluster.filter(plugin, pod)["n1"].ok


# scoring_test.go TestPreferredAffinity (shapes of its cases)
@pytest.mark.parametrize(
    ("pod", "pods", "want"),
    [
        (
            make_pod("p", spec=affinity(preferred=[(5, term("region", {"security": "S1"}))])),
            [make_pod("e", node_name="n1", labels={"security": "S1"})],
            {"n1": 100, "n2": 100, "n3": 0, "n4": 0},
        ),
        (
            make_pod("p", spec=affinity(preferred_anti=[(5, term("region", {"security": "S1"}))])),
            [make_pod("e", node_name="n1", labels={"security": "S1"})],
            {"n1": 0, "n2": 0, "n3": 100, "n4": 100},
        ),
        (
            make_pod("p", labels={"app": "web"}),
            [make_pod("e", node_name="n3", spec=affinity([term("zone", {"app": "web"})]))],
            {"n1": 0, "n2": 0, "n3": 100, "n4": 0},
        ),
        (
            make_pod("p", labels={"app": "web"}),
            [make_pod("e", node_name="n3", spec=affinity(preferred_anti=[(3, term("zone", {"app": "web"}))]))],
            {"n1": 100, "n2": 100, "n3": 0, "n4": 100},
        ),
    ],
    ids=[
        "preferred affinity to the region of a matching pod",
        "preferred anti-affinity away from it",
        "existing pod's required affinity counts with hardPodAffinityWeight",
        "existing pod's preferred anti-affinity",
    ],
)
def test_score(pod: Any, pods: list[Any], want: dict[str, int]) -> None:
    snap, handle = cluster(pods)
    assert scores(InterPodAffinity(None, handle), pod, snap) == want


def test_ignore_preferred_terms_of_existing_pods_skips_scoring() -> None:
    snap, handle = cluster([make_pod("e", node_name="n3", spec=affinity([term("zone", {"app": "web"})]))])
    plugin = InterPodAffinity(InterPodAffinityArgs(ignore_preferred_terms_of_existing_pods=True), handle)
    assert scores(plugin, make_pod("p", labels={"app": "web"}), snap) == {"n1": 0, "n2": 0, "n3": 0, "n4": 0}


# ---------------------------------------------------------------- namespaceSelector
#
# kube-scheduler v1.34 interpodaffinity/filtering_test.go (TestRequiredAffinitySingleNode's
# NamespaceSelector cases) and scoring_test.go (TestPreferredAffinity's and
# TestPreferredAffinityWithHardPodAffinitySymmetricWeight's), with their namespaces:
# the incoming pod's terms select namespaces by label at PreFilter / PreScore
# (mergeAffinityTermNamespacesIfNotEmpty); existing pods' terms are matched
# with the labels of the incoming pod's namespace (GetNamespaceLabelsSnapshot).

TEAM1, TEAM2 = {"team": "team1"}, {"team": "team2"}
NAMESPACES = {
    "subteam1.team1": TEAM1,
    "subteam2.team1": TEAM1,
    "subteam1.team2": TEAM2,
    "subteam2.team2": TEAM2,
}
IN_TEAM1 = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]}
SECURITYSCAN = {"matchExpressions": [{"key": "service", "operator": "In", "values": ["securityscan", "value2"]}]}
NODE1 = [make_node("node1", labels={"region": "r1", "zone": "z11"})]


def ns_term(key: str, selector: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {"topologyKey": key, "labelSelector": selector, **kw}


def with_namespaces(
    nodes: list[Any], pods: list[Any], namespaces: dict[str, dict[str, str]], *, indexed: bool = True
) -> tuple[Any, Handle]:
    """A snapshot and a Handle whose namespace lister knows ``namespaces``,
    reported as an informer would (upstream's names hold dots, which the
    embedded feed's validation refuses). Not ``indexed``: the snapshot is
    another cluster's, so the plugin scans pods instead of using the index."""
    c = Cluster(nodes, pods)
    for name, ns_labels in namespaces.items():
        c.berth.core.on_namespace(model.Namespace(metadata=model.ObjectMeta(name=name, labels=dict(ns_labels))))
    return (c.snapshot if indexed else Cluster(nodes, pods).snapshot), c.handle()


NS_FILTER_CASES: list[tuple[str, Any, list[Any], dict[str, str | None]]] = [
    (
        "affinity with NamespaceSelector",
        make_pod(
            "p", labels={"security": "S1"}, spec=affinity([ns_term("region", SECURITYSCAN, namespaceSelector=IN_TEAM1)])
        ),
        [make_pod("e", namespace="subteam1.team1", node_name="node1", labels={"service": "securityscan"})],
        {"node1": None},
    ),
    (
        "affinity with non-matching NamespaceSelector",
        make_pod(
            "p", labels={"security": "S1"}, spec=affinity([ns_term("region", SECURITYSCAN, namespaceSelector=IN_TEAM1)])
        ),
        [make_pod("e", namespace="subteam1.team2", node_name="node1", labels={"service": "securityscan"})],
        {"node1": AFF},
    ),
    (
        "anti-affinity with matching NamespaceSelector",
        make_pod(
            "p",
            namespace="subteam1.team1",
            labels={"security": "S1"},
            spec=affinity(anti=[ns_term("zone", SECURITYSCAN, namespaceSelector=IN_TEAM1)]),
        ),
        [make_pod("e", namespace="subteam2.team1", node_name="node1", labels={"service": "securityscan"})],
        {"node1": ANTI},
    ),
    (
        "anti-affinity with matching all NamespaceSelector",
        make_pod(
            "p",
            namespace="subteam1.team1",
            labels={"security": "S1"},
            spec=affinity(anti=[ns_term("zone", SECURITYSCAN, namespaceSelector={})]),
        ),
        [make_pod("e", namespace="subteam2.team1", node_name="node1", labels={"service": "securityscan"})],
        {"node1": ANTI},
    ),
    (
        "anti-affinity with non-matching NamespaceSelector",
        make_pod(
            "p",
            namespace="subteam1.team1",
            labels={"security": "S1"},
            spec=affinity(anti=[ns_term("zone", SECURITYSCAN, namespaceSelector=IN_TEAM1)]),
        ),
        [make_pod("e", namespace="subteam1.team2", node_name="node1", labels={"service": "securityscan"})],
        {"node1": None},
    ),
    # Berth's own: an existing pod's term with a namespaceSelector, against the
    # labels of the incoming pod's namespace (satisfyExistingPodsAntiAffinity).
    (
        "existing pod's anti-affinity selects the incoming pod's namespace by label",
        make_pod("p", namespace="subteam2.team1", labels={"service": "securityscan"}),
        [
            make_pod(
                "e",
                namespace="subteam1.team2",
                node_name="node1",
                spec=affinity(anti=[ns_term("zone", SECURITYSCAN, namespaceSelector=IN_TEAM1)]),
            )
        ],
        {"node1": EXISTING},
    ),
    (
        "existing pod's anti-affinity does not select a namespace of another team",
        make_pod("p", namespace="subteam2.team2", labels={"service": "securityscan"}),
        [
            make_pod(
                "e",
                namespace="subteam1.team1",
                node_name="node1",
                spec=affinity(anti=[ns_term("zone", SECURITYSCAN, namespaceSelector=IN_TEAM1)]),
            )
        ],
        {"node1": None},
    ),
    # A namespace Berth has not seen has no labels (GetNamespaceLabelsSnapshot
    # logs and returns an empty set; nsLister.List never returns it).
    (
        "an unseen namespace's labels are empty: an existing pod's DoesNotExist selector selects it",
        make_pod("p", namespace="ghost", labels={"service": "securityscan"}),
        [
            make_pod(
                "e",
                namespace="subteam1.team1",
                node_name="node1",
                spec=affinity(
                    anti=[
                        ns_term(
                            "zone",
                            SECURITYSCAN,
                            namespaceSelector={"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]},
                        )
                    ]
                ),
            )
        ],
        {"node1": EXISTING},
    ),
    (
        "an unseen namespace's labels are empty: an existing pod's In selector does not select it",
        make_pod("p", namespace="ghost", labels={"service": "securityscan"}),
        [
            make_pod(
                "e",
                namespace="subteam1.team1",
                node_name="node1",
                spec=affinity(anti=[ns_term("zone", SECURITYSCAN, namespaceSelector=IN_TEAM1)]),
            )
        ],
        {"node1": None},
    ),
    (
        "an unseen namespace is not selected by the incoming pod's term, even by its name",
        make_pod(
            "p",
            spec=affinity(
                [
                    ns_term(
                        "region",
                        SECURITYSCAN,
                        namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": "ghost"}},
                    )
                ]
            ),
        ),
        [make_pod("e", namespace="ghost", node_name="node1", labels={"service": "securityscan"})],
        {"node1": AFF},
    ),
    (
        "the incoming pod's NotIn selector selects only namespaces Berth knows",
        make_pod(
            "p",
            spec=affinity(
                anti=[
                    ns_term(
                        "zone",
                        SECURITYSCAN,
                        namespaceSelector={
                            "matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["team1"]}]
                        },
                    )
                ]
            ),
        ),
        [make_pod("e", namespace="ghost", node_name="node1", labels={"service": "securityscan"})],
        {"node1": None},
    ),
]


@pytest.mark.parametrize(("case", "pod", "pods", "want"), NS_FILTER_CASES, ids=[c[0] for c in NS_FILTER_CASES])
@pytest.mark.parametrize("indexed", [True, False], ids=["cache index", "scan"])
def test_filter_with_namespace_selector(
    case: str, pod: Any, pods: list[Any], want: dict[str, str | None], indexed: bool
) -> None:
    snap, handle = with_namespaces(NODE1, pods, NAMESPACES, indexed=indexed)
    got = filter_statuses(InterPodAffinity(None, handle), pod, snap)
    assert {n: (st.reasons[0] if st.reasons else None) for n, st in got.items()} == want
    for st in got.values():
        if st.reasons:
            assert st.code == CODES[st.reasons[0]]


def test_a_namespace_label_change_is_seen_by_the_next_cycle() -> None:
    pod = make_pod("p", spec=affinity([ns_term("region", SECURITYSCAN, namespaceSelector=IN_TEAM1)]))
    existing = make_pod("e", namespace="apps", node_name="node1", labels={"service": "securityscan"})
    c = Cluster(NODE1, [existing])
    core = c.berth.core
    plugin = InterPodAffinity(None, c.handle())
    assert c.handle().namespaces is core.namespaces, "plugins see the core's namespace store"
    core.on_namespace(model.Namespace(metadata=model.ObjectMeta(name="apps", labels=TEAM2)))
    assert c.filter(plugin, pod)["node1"].reasons == (AFF,)
    core.on_namespace(model.Namespace(metadata=model.ObjectMeta(name="apps", labels=TEAM1)))
    assert c.filter(plugin, pod)["node1"].ok
    core.on_namespace_delete("apps")
    assert c.filter(plugin, pod)["node1"].reasons == (AFF,)


def test_preemption_extensions_use_the_incoming_pods_namespace_labels() -> None:
    victim = make_pod(
        "e",
        namespace="subteam1.team2",
        node_name="node1",
        spec=affinity(anti=[ns_term("zone", SECURITYSCAN, namespaceSelector=IN_TEAM1)]),
    )
    snap, handle = with_namespaces(NODE1, [victim], NAMESPACES)
    plugin = InterPodAffinity(None, handle)
    pod = PodInfo.of(make_pod("p", namespace="subteam1.team1", labels={"service": "securityscan"}))
    state = fw.CycleState()
    plugin.pre_filter(state, pod, snap)
    info = snap.infos[snap.index["node1"]]
    assert info is not None
    rows = snap.alive_rows()
    assert plugin.filter(state, pod, snap, rows).ok.tolist() == [False]
    plugin.remove_pod(state, pod, info.pods["uid-subteam1.team2-e"], info)
    assert plugin.filter(state, pod, snap, rows).ok.tolist() == [True]
    plugin.add_pod(state, pod, info.pods["uid-subteam1.team2-e"], info)
    assert plugin.filter(state, pod, snap, rows).ok.tolist() == [False]


CHINA, INDIA, AZ1 = {"region": "China"}, {"region": "India"}, {"az": "az1"}
S1 = {"security": "S1"}
S1_IN = {"matchExpressions": [{"key": "security", "operator": "In", "values": ["S1"]}]}
NS_SELECTOR_PREF = (5, ns_term("region", S1_IN, namespaces=["subteam2.team2"], namespaceSelector=IN_TEAM1))
HARD = affinity(
    [
        ns_term(
            "region",
            {"matchExpressions": [{"key": "service", "operator": "In", "values": ["S1"]}]},
            namespaces=["default", "subteam2.team2"],
            namespaceSelector=IN_TEAM1,
        )
    ]
)
TWO_NODES = [make_node("node1", labels=CHINA), make_node("node2", labels=INDIA)]
THREE_NODES = [*TWO_NODES, make_node("node3", labels=AZ1)]


def _s1(ns: str, node: str, i: int) -> Any:
    return make_pod(f"e{i}", namespace=ns, node_name=node, labels=S1)


NS_SCORE_CASES: list[tuple[str, Any, list[Any], list[Any], dict[str, int]]] = [
    (
        "Affinity with pods matching NamespaceSelector",
        make_pod("p", namespace="subteam1.team1", labels=S1, spec=affinity(preferred=[NS_SELECTOR_PREF])),
        [
            _s1("subteam1.team1", "node1", 1),
            _s1("subteam1.team1", "node1", 2),
            _s1("subteam1.team2", "node1", 3),
            _s1("subteam2.team1", "node2", 4),
        ],
        TWO_NODES,
        {"node1": 100, "node2": 0},
    ),
    (
        "Affinity with pods matching both NamespaceSelector and Namespaces fields",
        make_pod("p", namespace="subteam1.team1", labels=S1, spec=affinity(preferred=[NS_SELECTOR_PREF])),
        [
            _s1("subteam1.team1", "node1", 1),
            _s1("subteam1.team1", "node1", 2),
            _s1("subteam2.team2", "node1", 3),
            _s1("subteam2.team1", "node2", 4),
        ],
        TWO_NODES,
        {"node1": 100, "node2": 0},
    ),
    (
        "Anti-affinity with pods matching NamespaceSelector",
        make_pod("p", namespace="subteam1.team1", labels=S1, spec=affinity(preferred_anti=[NS_SELECTOR_PREF])),
        [
            _s1("subteam1.team1", "node1", 1),
            _s1("subteam1.team1", "node1", 2),
            _s1("subteam1.team2", "node1", 3),
            _s1("subteam2.team1", "node2", 4),
        ],
        TWO_NODES,
        {"node1": 0, "node2": 100},
    ),
    (
        "Anti-affinity with pods matching both NamespaceSelector and Namespaces fields",
        make_pod("p", namespace="subteam1.team1", labels=S1, spec=affinity(preferred_anti=[NS_SELECTOR_PREF])),
        [
            _s1("subteam1.team1", "node1", 1),
            _s1("subteam1.team1", "node1", 2),
            _s1("subteam2.team2", "node1", 3),
            _s1("subteam2.team1", "node2", 4),
        ],
        TWO_NODES,
        {"node1": 0, "node2": 100},
    ),
    # TestPreferredAffinityWithHardPodAffinitySymmetricWeight: existing pods'
    # required affinity, with a namespaceSelector, for the incoming pod.
    (
        "hard pod affinity of existing pods: with default weight",
        make_pod("p", labels={"service": "S1"}),
        [make_pod("e1", node_name="node1", spec=HARD), make_pod("e2", node_name="node2", spec=HARD)],
        THREE_NODES,
        {"node1": 100, "node2": 100, "node3": 0},
    ),
    (
        "hard pod affinity of existing pods: with no matching namespace",
        make_pod("p", namespace="subteam1.team2", labels={"service": "S1"}),
        [make_pod("e1", node_name="node1", spec=HARD), make_pod("e2", node_name="node2", spec=HARD)],
        THREE_NODES,
        {"node1": 0, "node2": 0, "node3": 0},
    ),
    (
        "hard pod affinity of existing pods: with matching NamespaceSelector",
        make_pod("p", namespace="subteam1.team1", labels={"service": "S1"}),
        [make_pod("e1", node_name="node1", spec=HARD), make_pod("e2", node_name="node2", spec=HARD)],
        THREE_NODES,
        {"node1": 100, "node2": 100, "node3": 0},
    ),
    (
        "hard pod affinity of existing pods: with matching Namespaces",
        make_pod("p", namespace="subteam2.team2", labels={"service": "S1"}),
        [make_pod("e1", node_name="node1", spec=HARD), make_pod("e2", node_name="node2", spec=HARD)],
        THREE_NODES,
        {"node1": 100, "node2": 100, "node3": 0},
    ),
]


@pytest.mark.parametrize(("case", "pod", "pods", "nodes", "want"), NS_SCORE_CASES, ids=[c[0] for c in NS_SCORE_CASES])
@pytest.mark.parametrize("indexed", [True, False], ids=["cache index", "scan"])
def test_score_with_namespace_selector(
    case: str, pod: Any, pods: list[Any], nodes: list[Any], want: dict[str, int], indexed: bool
) -> None:
    snap, handle = with_namespaces(nodes, pods, NAMESPACES, indexed=indexed)
    assert scores(InterPodAffinity(None, handle), pod, snap) == want


def test_pre_score_skips_when_existing_terms_select_no_namespace_of_the_pod() -> None:
    # "with no matching namespace": PreScore finds nothing to count (Skip).
    snap, handle = with_namespaces(
        THREE_NODES,
        [make_pod("e1", node_name="node1", spec=HARD)],
        NAMESPACES,
    )
    pod = PodInfo.of(make_pod("p", namespace="subteam1.team2", labels={"service": "S1"}))
    status = InterPodAffinity(None, handle).pre_score(fw.CycleState(), pod, snap, snap.alive_rows())
    assert status.code == fw.Code.SKIP


NOT_TEAM1 = {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["team1"]}]}


@pytest.mark.parametrize(
    ("version", "want"),
    [
        # v1.37.2: mergeAffinityTermNamespacesIfNotEmpty(&term): the selector
        # becomes the namespaces Berth knows it selects; "ghost" is not one.
        (features.KubeVersion(1, 37), None),
        # v1.35.4 / v1.36.3: the merge went to a copy; the term kept its
        # selector and is matched with nil namespace labels, which NotIn
        # accepts: every namespace counts, "ghost" too.
        (features.KubeVersion(1, 36), ANTI),
        (features.KubeVersion(1, 35), ANTI),
    ],
    ids=str,
)
def test_a_selector_that_accepts_no_labels_selects_every_namespace_before_1_37(
    version: features.KubeVersion, want: str | None
) -> None:
    pod = make_pod("p", spec=affinity(anti=[ns_term("zone", SECURITYSCAN, namespaceSelector=NOT_TEAM1)]))
    pods = [make_pod("e", namespace="ghost", node_name="node1", labels={"service": "securityscan"})]
    snap, handle = with_namespaces(NODE1, pods, NAMESPACES)
    plugin = InterPodAffinity(None, dataclasses.replace(handle, features=features.Features.of(version)))
    got = filter_statuses(plugin, pod, snap)["node1"]
    assert (got.reasons[0] if got.reasons else None) == want


@pytest.mark.parametrize(("version", "want"), [(features.KubeVersion(1, 37), 0), (features.KubeVersion(1, 35), 100)])
def test_preferred_terms_merge_by_value_before_1_37(version: features.KubeVersion, want: int) -> None:
    # scoring.go PreScore merges the preferred terms the same way (v1.37.2 by
    # pointer, v1.35.4 by value). DoesNotExist accepts nil labels, so before
    # 1.37 the pod in the unseen namespace on node2 counts for the incoming
    # pod's preference; from 1.37 only the namespaces the selector selects do
    # (those Berth knows all have a team label).
    selector = {"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}
    pref = (5, ns_term("region", S1_IN, namespaceSelector=selector))
    pod = make_pod("p", namespace="subteam1.team1", labels=S1, spec=affinity(preferred=[pref]))
    snap, handle = with_namespaces(TWO_NODES, [_s1("ghost", "node2", 1)], NAMESPACES)
    plugin = InterPodAffinity(None, dataclasses.replace(handle, features=features.Features.of(version)))
    assert scores(plugin, pod, snap) == {"node1": 0, "node2": want}
