"""The extender verbs' node sets: every node named once, and nothing of a request kept.

Full-object mode used to answer ``list index out of range`` for a node listed
twice, or a 200 that shifted a node's usage onto the next one in the list;
a nameless node was judged as a node called "". Now both are an
InvalidArgument naming the index (``field.Duplicate`` / ``field.Required``'s
wording, with the extender wire's Go field names). The node-name resolution
memo (kube-scheduler resends the same list for every pod) is keyed by a
digest and holds only integers, bounded by entries and bytes.
"""

from __future__ import annotations

import gc

import pytest

from berth import errors
from berth.cluster import model
from berth.scheduling import verbs
from berth.testing import Cluster, make_node, make_pod

NODES = [make_node(f"n{i}", cpu="4", memory="8Gi", pods=110) for i in range(3)]
BUSY = make_pod("busy", requests={"cpu": "3"}, node_name="n1")


def _extender() -> verbs.Extender:
    return Cluster(NODES, [BUSY]).berth.extender


def _nodes(*names: str) -> list[model.Node]:
    return [make_node(n, cpu="4", memory="8Gi", pods=110) for n in names]


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["n0", "n1", "n0"], 'Nodes.items[2].metadata.name: Duplicate value: "n0" (also Nodes.items[0].metadata.name)'),
        (["n1", "n1"], 'Nodes.items[1].metadata.name: Duplicate value: "n1" (also Nodes.items[0].metadata.name)'),
        (["n0", ""], "Nodes.items[1].metadata.name: Required value: a node name is required"),
        (["x" * 1000, "x" * 1000], "Nodes.items[1].metadata.name: Duplicate value: "),
    ],
)
@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_full_objects_name_every_node_once(verb: str, names: list[str], message: str) -> None:
    ext = _extender()
    with pytest.raises(errors.InvalidArgument) as e:
        getattr(ext, verb)(make_pod(requests={"cpu": "2"}), nodes=_nodes(*names))
    assert str(e.value).startswith(message)
    assert len(str(e.value)) < 700


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["n0", "n2", "n0"], 'NodeNames[2]: Duplicate value: "n0" (also NodeNames[0])'),
        (["ghost", "ghost"], 'NodeNames[1]: Duplicate value: "ghost" (also NodeNames[0])'),
        (["n0", ""], "NodeNames[1]: Required value: a node name is required"),
    ],
)
@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_node_names_are_listed_once(verb: str, names: list[str], message: str) -> None:
    with pytest.raises(errors.InvalidArgument) as e:
        getattr(_extender(), verb)(make_pod(requests={"cpu": "2"}), names=names)
    assert str(e.value) == message


def test_full_objects_keep_each_nodes_own_usage() -> None:
    # Before: with n1 listed twice, n1's usage (3 of 4 cpu) could land on the
    # neighbour. Now each distinct node keeps its own, whatever the order.
    ext = _extender()
    res = ext.filter(make_pod(requests={"cpu": "2"}), nodes=_nodes("n2", "n1", "n0"))
    assert res.passed == ["n2", "n0"]
    assert set(res.failed) == {"n1"}


def test_full_objects_with_a_bad_quantity_name_the_node() -> None:
    node = make_node("n0", allocatable={"cpu": "1.5.3Gi"})
    with pytest.raises(errors.InvalidArgument, match=r"^Nodes\.items\[1\]\.status\.allocatable\[cpu\]: Invalid value"):
        _extender().filter(make_pod(), nodes=[*_nodes("n2"), node])


def test_a_bad_pod_quantity_names_the_field() -> None:
    pod = make_pod(requests={"cpu": "1e400"})
    with pytest.raises(errors.InvalidArgument, match=r"^Pod\.spec\.containers\[0\]\.resources\.requests\[cpu\]: "):
        _extender().prioritize(pod, names=["n0"])


def test_unknown_names_are_reported_and_known_ones_judged() -> None:
    ext = _extender()
    res = ext.filter(make_pod(requests={"cpu": "2"}), names=["ghost", "n1", "n0"])
    assert res.passed == ["n0"]
    assert res.unresolvable == {"ghost": "node is unknown to Berth's cache"}
    assert set(res.failed) == {"n1"}
    again = ext.prioritize(make_pod(requests={"cpu": "2"}), names=["ghost", "n1", "n0"])
    assert again.names == ["ghost", "n1", "n0"]
    assert again.scores[0] == 0


@pytest.mark.parametrize(("lists", "length", "max_bytes"), [(12, 10_000, None), (12, 4_000, 100_000)])
def test_resolutions_are_bounded_by_entries_and_bytes_and_keep_no_names(
    monkeypatch: pytest.MonkeyPatch, lists: int, length: int, max_bytes: int | None
) -> None:
    # The attacker's case scaled down: many distinct long lists of unknown names.
    if max_bytes is not None:
        monkeypatch.setattr(verbs, "RESOLUTIONS_MAX_BYTES", max_bytes)
    ext = _extender()
    pod = make_pod()
    for k in range(lists):
        ext.prioritize(pod, names=[f"unknown-{k}-{i}" for i in range(length)])
        assert len(ext._resolutions) <= verbs.RESOLUTIONS_MAX_ENTRIES
        assert ext._resolutions_bytes <= verbs.RESOLUTIONS_MAX_BYTES
        assert ext._resolutions_bytes == sum(r.nbytes for r in ext._resolutions.values())
    assert ext._resolutions  # the latest lists are kept
    # Nothing but digests and integer arrays: no request string survives.
    for key, res in ext._resolutions.items():
        assert isinstance(key[1], bytes) and len(key[1]) == 16
        assert res.rows.dtype.kind == "i" and res.missing.dtype.kind == "i"


def test_a_list_too_big_to_keep_is_resolved_but_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verbs, "RESOLUTIONS_MAX_BYTES", 8_000)
    ext = _extender()
    names = [f"u{i}" for i in range(1_000)]
    res = ext.filter(make_pod(), names=names)
    assert len(res.unresolvable) == len(names)
    assert not ext._resolutions


def test_the_same_list_is_resolved_once_per_snapshot_shape() -> None:
    ext = _extender()
    for _ in range(3):
        ext.filter(make_pod(), names=["n0", "n1"])
    assert len(ext._resolutions) == 1


def test_request_pods_leave_nothing_in_the_affinity_terms_cache() -> None:
    from berth.plugins.interpodaffinity import terms

    cluster = Cluster(NODES, [BUSY])
    ext = cluster.berth.extender
    gc.collect()
    before = len(terms._terms_cache)
    for i in range(100):
        term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": f"a{i}"}}}
        spec = {
            "affinity": {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]},
                "podAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": term}]
                },
            }
        }
        pod = make_pod(f"p{i}", spec=spec)
        ext.filter(pod, names=["n0", "n1", "n2"])
        ext.prioritize(pod, names=["n0", "n1", "n2"])
    gc.collect()
    assert len(terms._terms_cache) <= before
