"""InterPodAffinity: cases ported from kube-scheduler v1.34's
interpodaffinity/filtering_test.go and scoring_test.go."""

from __future__ import annotations

from typing import Any

import pytest

from berth.cache.infos import PodInfo
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
