"""Full NodeLists read straight into the table's rows
(:mod:`berth.adapters.http.nodelist`) against the per-node model path
(every item a ``model.Node``, ``Extender.table_of_nodes``):

- the same table (names, allocatable, requested, taints, unschedulable,
  labels, images, the cache's pods) and the same Filter/Prioritize answers,
  for a table of node shapes and for Hypothesis-generated nodes;
- the same error, word for word, for bad nodes;
- rows reused only for an unchanged (name, resourceVersion), never without a
  resourceVersion, and dropped when the node changes or leaves the list; a
  kept table still counts the cache's pods as they are now.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berth import app, errors
from berth.adapters.http import nodelist
from berth.cache.table import NodeTable
from berth.cluster import model
from berth.scheduling import verbs
from tests.http.payloads import api_node, api_pod
from tests.http.test_extender_wire import make_berth

# ---------------------------------------------------------------- helpers


def _items(nodes: list[dict[str, Any]]) -> list[msgspec.Raw]:
    return [msgspec.Raw(json.dumps(n).encode()) for n in nodes]


def _model_path(b: app.Berth, items: list[msgspec.Raw], images: bool) -> list[model.Node]:
    """The per-node path: every item a model Node (``old_nodes`` keeps its checks)."""
    return nodelist.old_nodes(items, images=images)


def _table_summary(t: NodeTable) -> dict[str, Any]:
    cols = t.columns.names

    def amounts(a: Any, i: int) -> dict[str, int]:
        return {cols[c]: int(v) for c, v in enumerate(a[i].tolist()) if v}

    rows = range(t.size)
    return {
        "names": list(t.index),
        "alloc": [amounts(t.alloc, i) for i in rows],
        "req": [amounts(t.req, i) for i in rows],
        "req_nz": [amounts(t.req_nz, i) for i in rows],
        "alive": t.alive[: t.size].tolist(),
        "unschedulable": t.unschedulable[: t.size].tolist(),
        "taints": [t.taint_sets[g] for g in t.taint_group[: t.size].tolist()],
        "labels": [t.node(i).metadata.labels for i in rows],
        "images": {k: (r.tolist(), s.tolist()) for k, (r, s) in t.images().items()},
        "pods": [sorted(info.pods) if info is not None else None for info in t.infos],
        "order": t.order().tolist(),
    }


def _answers(b: app.Berth, pod: dict[str, Any], nodes: list[model.Node] | verbs.NodeRows) -> tuple[Any, Any]:
    p = msgspec.convert(pod, type=model.Pod)
    f = b.extender.filter(p, nodes=nodes)
    r = b.extender.prioritize(msgspec.convert(pod, type=model.Pod), nodes=nodes)
    return (f.passed, f.failed, f.unresolvable, f.error), (r.names, r.scores.tolist(), r.error)


def _outcome(fn: Any) -> Any:
    try:
        return fn()
    except errors.InvalidArgument as e:
        return ("error", str(e))


def _with(node: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``node`` with ``a:b:c`` set (``value`` DELETE removes it; ":" since keys hold dots)."""
    out = copy.deepcopy(node)
    *parents, last = path.split(":")
    cur = out
    for p in parents:
        cur = cur.setdefault(p, {})
    if value is DELETE:
        cur.pop(last, None)
    else:
        cur[last] = value
    return out


DELETE = object()
BASE = api_node("n-base", cpu="4", memory="8Gi")

# Node shapes: name -> node. "small" is in the cache with a 700m pod on it.
SHAPES: dict[str, dict[str, Any]] = {
    "plain": api_node("n-plain"),
    "known to the cache": api_node("small", cpu="1", memory="16Gi"),
    "tainted": api_node(
        "n-tainted",
        taints=[
            {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
            {"key": "spot", "value": "", "effect": "PreferNoSchedule"},
        ],
    ),
    "same taints again": api_node("n-tainted-2", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
    "unschedulable": _with(api_node("n-cordoned"), "spec:unschedulable", True),
    "capacity only": _with(api_node("n-capacity", cpu="2"), "status:allocatable", DELETE),
    "extended resource": _with(api_node("n-gpu"), "status:allocatable:example.com/gpu", "2"),
    "hugepages and numbers": _with(
        _with(api_node("n-num"), "status:allocatable:cpu", 3), "status:allocatable:hugepages-2Mi", "1Gi"
    ),
    "no status": _with(api_node("n-nostatus"), "status", DELETE),
    "no spec, no labels": _with(_with(api_node("n-bare"), "spec", DELETE), "metadata:labels", DELETE),
    "no resourceVersion": _with(api_node("n-norv"), "metadata:resourceVersion", DELETE),
    "other zone and labels": api_node("n-zone", zone="z2", labels={"disk": "ssd", "tier": "7"}),
    "images": _with(
        api_node("n-images"),
        "status:images",
        [
            {"names": ["registry.example.com/web:1.0", "registry.example.com/web@sha256:1"], "sizeBytes": 500_000_000},
            {"names": ["busybox"], "sizeBytes": 1_000_000},
            {"names": ["registry.example.com/web:1.0"], "sizeBytes": 7},
        ],
    ),
    "empty allocatable quantities": _with(api_node("n-zero", cpu="0", memory="0"), "status:allocatable:pods", "0"),
}

PODS: dict[str, dict[str, Any]] = {
    "plain": api_pod(cpu="500m"),
    "big": api_pod(cpu="3", memory="4Gi"),
    "tolerates gpu": api_pod(
        tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    ),
    "zone selector": api_pod(nodeSelector={"topology.kubernetes.io/zone": "z2"}),
    "gpu request": _with(
        api_pod(),
        "spec:containers",
        [
            {
                "name": "app",
                "image": "busybox",
                "resources": {"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "1"}},
            }
        ],
    ),
}


@pytest.fixture
def berth() -> app.Berth:
    return make_berth()


# ---------------------------------------------------------------- same table, same answers


@pytest.mark.parametrize("images", [False, True], ids=["filter view", "prioritize view"])
def test_rows_build_the_same_table_as_model_nodes_for_every_node_shape(berth: app.Berth, images: bool) -> None:
    items = _items(list(SHAPES.values()))
    rows = nodelist.NodeListReader().read(items, images=images)
    new = berth.extender.table_of_rows(rows)
    old = berth.extender.table_of_nodes(_model_path(berth, items, images))
    assert _table_summary(new) == _table_summary(old)
    assert _table_summary(new)["req"][1]["cpu"] == 700  # "small" holds the cache's 700m pod


@pytest.mark.parametrize("pod", PODS.values(), ids=PODS.keys())
def test_rows_give_the_same_filter_and_prioritize_answers_as_model_nodes(berth: app.Berth, pod: dict[str, Any]) -> None:
    items = _items(list(SHAPES.values()))
    reader = nodelist.NodeListReader()
    for _ in range(2):  # read, then reused rows and table
        new_f, _ = _answers(berth, pod, reader.read(items, images=False))
        _, new_p = _answers(berth, pod, reader.read(items, images=True))
        old_f, old_p = _answers(berth, pod, _model_path(berth, items, images=True))
        assert new_f == old_f
        assert new_p == old_p
    assert reader.reused == len(items) - 1  # all but the node without a resourceVersion


# ---------------------------------------------------------------- same errors

BAD: list[tuple[str, list[dict[str, Any]], bool, str]] = [
    (
        "absurd quantity",
        [_with(BASE, "status:allocatable:cpu", "1e400")],
        False,
        'Nodes.items[0].status.allocatable[cpu]: Invalid value: "1e400"',
    ),
    (
        "negative quantity",
        [BASE, _with(api_node("n2"), "status:allocatable:memory", "-1")],
        False,
        "Nodes.items[1].status.allocatable[memory]: Invalid value",
    ),
    (
        "malformed quantity",
        [_with(_with(BASE, "status:allocatable", DELETE), "status:capacity:cpu", "1.5.3Gi")],
        False,
        "Nodes.items[0].status.capacity[cpu]: Invalid value",
    ),
    (
        "int64 overflow",
        [_with(BASE, "status:allocatable:memory", "9223372036854775808")],
        False,
        "Nodes.items[0].status.allocatable[memory]: Invalid value",
    ),
    (
        "allocatable not an object",
        [_with(BASE, "status:allocatable", 5)],
        False,
        "Nodes.items[0].status.allocatable: Expected `object`, got `int`",
    ),
    (
        "label value not a string",
        [_with(BASE, "metadata:labels:x", 1)],
        False,
        "Nodes.items[0].metadata.labels[...]: Expected `str`, got `int`",
    ),
    (
        "taints not a list",
        [_with(BASE, "spec:taints", {"key": "x"})],
        False,
        "Nodes.items[0].spec.taints: Expected `array`, got `object`",
    ),
    (
        "taint without effect",
        [_with(BASE, "spec:taints", [{"key": "x"}])],
        False,
        "Nodes.items[0].spec.taints[0]: Object missing required field `effect`",
    ),
    (
        "name not a string",
        [BASE, _with(api_node("n2"), "metadata:name", 7)],
        False,
        "Nodes.items[1].metadata.name: Expected `str`, got `int`",
    ),
    (
        "resourceVersion not a string",
        [_with(BASE, "metadata:resourceVersion", 7)],
        False,
        "Nodes.items[0].metadata.resourceVersion: Expected `str`, got `int`",
    ),
    ("item not an object", [BASE, 5], False, "Nodes.items[1]: Expected `object`, got `int`"),  # type: ignore[list-item]
    (
        "nameless node",
        [BASE, _with(api_node("n2"), "metadata:name", DELETE)],
        False,
        "Nodes.items[1].metadata.name: Required value",
    ),
    (
        "duplicate before a bad quantity",
        [BASE, _with(BASE, "status:allocatable:cpu", "x")],
        False,
        'Nodes.items[1].metadata.name: Duplicate value: "n-base"',
    ),
    (
        "type error after a bad quantity",
        [_with(BASE, "status:allocatable:cpu", "x"), _with(api_node("n2"), "spec:unschedulable", "yes")],
        False,
        "Nodes.items[1].spec.unschedulable: Expected `bool`, got `str`",
    ),
    (
        "image size beyond int64",
        [_with(BASE, "status:images", [{"names": ["x"], "sizeBytes": 2**63}])],
        True,
        "Nodes.items[0].status.images[0].sizeBytes: Invalid value: 9223372036854775808",
    ),
    (
        "image names not a list",
        [_with(BASE, "status:images", [{"names": "x"}])],
        True,
        "Nodes.items[0].status.images[0].names: Expected `array`, got `str`",
    ),
]


@pytest.mark.parametrize(("nodes", "images", "message"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_nodes_get_the_model_paths_error_word_for_word(
    berth: app.Berth, nodes: list[dict[str, Any]], images: bool, message: str
) -> None:
    items = _items(nodes)
    reader = nodelist.NodeListReader()
    reader.read(_items([api_node("warm")]), images=images)  # a warm reader reads keys first
    new = _outcome(lambda: berth.extender.table_of_rows(reader.read(items, images=images)))
    old = _outcome(lambda: berth.extender.table_of_nodes(_model_path(berth, items, images)))
    assert new == old
    assert new[0] == "error" and message in new[1]
    # A rejected request leaves the kept rows as they were.
    reader.read(_items([api_node("warm")]), images=images)
    assert reader.reused == 1


def test_fields_no_plugin_reads_are_not_validated(berth: app.Berth) -> None:
    node = _with(_with(BASE, "status:conditions", "not a list"), "metadata:annotations", 5)
    rows = nodelist.NodeListReader().read(_items([node]), images=False)
    assert [n.metadata.name for n in rows.nodes] == ["n-base"]


# ---------------------------------------------------------------- reuse


def _changed(node: dict[str, Any], rv: str, **allocatable: str) -> dict[str, Any]:
    out = _with(node, "metadata:resourceVersion", rv)
    for k, v in allocatable.items():
        out = _with(out, f"status:allocatable:{k}", v)
    return out


def test_unchanged_nodes_are_reused_and_a_changed_resource_version_is_read_again() -> None:
    a, b, c = api_node("a"), api_node("b"), api_node("c")
    reader = nodelist.NodeListReader()
    first = reader.read(_items([a, b, c]), images=False)
    assert (reader.decoded, reader.reused) == (3, 0)
    again = reader.read(_items([a, b, c]), images=False)
    assert (reader.decoded, reader.reused) == (0, 3)
    assert again is first  # the same rows: the core reuses its table
    bumped = reader.read(_items([a, _changed(b, "1235", cpu="32"), c]), images=False)
    assert (reader.decoded, reader.reused) == (1, 2)
    assert bumped.allocatable[1]["cpu"] == 32000
    assert bumped.nodes[0] is first.nodes[0] and bumped.nodes[2] is first.nodes[2]


def test_a_node_that_left_the_list_is_read_again_when_it_returns() -> None:
    a, b = api_node("a"), api_node("b")
    reader = nodelist.NodeListReader()
    reader.read(_items([a, b]), images=False)
    reader.read(_items([a]), images=False)
    reader.read(_items([a, b]), images=False)
    assert (reader.decoded, reader.reused) == (1, 1)


def test_a_node_without_resource_version_is_never_reused() -> None:
    bare = _with(api_node("a"), "metadata:resourceVersion", DELETE)
    reader = nodelist.NodeListReader()
    reader.read(_items([bare]), images=False)
    reader.read(_items([bare]), images=False)
    assert (reader.decoded, reader.reused) == (1, 0)


def test_reuse_trusts_the_resource_version_but_not_a_changed_length() -> None:
    reader = nodelist.NodeListReader()
    reader.read(_items([api_node("a", cpu="4")]), images=False)
    # Same name and resourceVersion, as an informer never sends for a changed node:
    same_length = reader.read(_items([api_node("a", cpu="8")]), images=False)
    assert same_length.allocatable[0]["cpu"] == 4000  # taken on the resourceVersion's word
    longer = reader.read(_items([api_node("a", cpu="16")]), images=False)
    assert longer.allocatable[0]["cpu"] == 16000


def test_filter_and_prioritize_views_are_kept_apart() -> None:
    node = api_node("a")
    reader = nodelist.NodeListReader()
    lean = reader.read(_items([node]), images=False)
    full = reader.read(_items([node]), images=True)
    assert lean.nodes[0].status.images == [] and full.nodes[0].status.images != []
    assert reader.read(_items([node]), images=False) is lean
    assert reader.read(_items([node]), images=True) is full


def test_a_kept_table_counts_the_caches_pods_as_they_are_now(berth: app.Berth) -> None:
    # "big" (8 cpu) is in the cache, empty; the pod asks for 7.5 cpu.
    items = _items([api_node("big", cpu="8", memory="16Gi")])
    reader = nodelist.NodeListReader()
    pod = api_pod(cpu="7500m")
    first = berth.extender.filter(msgspec.convert(pod, type=model.Pod), nodes=reader.read(items, images=False))
    assert first.passed == ["big"]
    berth.cluster.upsert_pods([msgspec.convert(api_pod("resident-2", cpu="1", node_name="big"), type=model.Pod)])
    rows = reader.read(items, images=False)
    assert reader.reused == 1
    second = berth.extender.filter(msgspec.convert(pod, type=model.Pod), nodes=rows)
    assert second.passed == [] and second.failed == {"big": "Insufficient cpu"}
    berth.cluster.delete_pods(["default/resident-2"])
    third = berth.extender.filter(msgspec.convert(pod, type=model.Pod), nodes=reader.read(items, images=False))
    assert third.passed == ["big"]


# ---------------------------------------------------------------- the property

_quantity = st.sampled_from(["0", "1", "250m", "4", "16Gi", "1e3", "1.5.3Gi", "-1", "1e400", "9223372036854775807"])
_label_values = st.sampled_from(["a", "b", "z1", "z2", "7", ""])


@st.composite
def _nodes(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(["n1", "n2", "n3", "big", "small", ""]), max_size=5))
    out = []
    for name in names:
        node: dict[str, Any] = {"kind": "Node", "metadata": {"name": name}}
        if draw(st.booleans()):
            node["metadata"]["labels"] = draw(
                st.dictionaries(
                    st.sampled_from(["topology.kubernetes.io/zone", "disk", "tier"]), _label_values, max_size=3
                )
            )
        spec: dict[str, Any] = {}
        if draw(st.booleans()):
            spec["unschedulable"] = draw(st.booleans())
        taints = draw(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "key": st.sampled_from(["dedicated", "gpu"]),
                        "effect": st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
                    }
                ),
                max_size=2,
            )
        )
        if taints:
            spec["taints"] = taints
        node["spec"] = spec
        status: dict[str, Any] = {}
        for part in ("allocatable", "capacity"):
            if draw(st.booleans()):
                status[part] = draw(
                    st.dictionaries(
                        st.sampled_from(["cpu", "memory", "pods", "example.com/gpu"]), _quantity, max_size=3
                    )
                )
        if draw(st.booleans()):
            status["images"] = [
                {
                    "names": draw(
                        st.lists(st.sampled_from(["registry.example.com/web:1.0", "busybox", "x"]), max_size=2)
                    ),
                    "sizeBytes": draw(st.sampled_from([0, 10**6, 2**63 - 1, 2**63])),
                }
            ]
        node["status"] = status
        if draw(st.booleans()):  # a resourceVersion that changes with the content, as the API server's does
            node["metadata"]["resourceVersion"] = hashlib.sha256(json.dumps(node, sort_keys=True).encode()).hexdigest()[
                :8
            ]
        out.append(node)
    return out


_PROPERTY_BERTH = make_berth()
_PROPERTY_READER = nodelist.NodeListReader()  # shared: examples also exercise reuse


@settings(deadline=None)
@given(
    nodes=_nodes(),
    cpu=st.sampled_from(["100m", "1", "3", "7500m"]),
    selector=st.sampled_from([None, {"disk": "a"}, {"topology.kubernetes.io/zone": "z1"}]),
    tolerate=st.booleans(),
)
def test_the_column_path_and_the_model_path_agree_on_generated_nodes(
    nodes: list[dict[str, Any]], cpu: str, selector: dict[str, str] | None, tolerate: bool
) -> None:
    b = _PROPERTY_BERTH
    extra: dict[str, Any] = {"nodeSelector": selector} if selector else {}
    if tolerate:
        extra["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    pod = api_pod(cpu=cpu, **extra)
    items = _items(nodes)

    def column() -> Any:
        f, _ = _answers(b, pod, _PROPERTY_READER.read(items, images=False))
        _, p = _answers(b, pod, _PROPERTY_READER.read(items, images=True))
        return f, p

    def per_node() -> Any:
        f, _ = _answers(b, pod, nodelist.old_nodes(items, images=False))
        _, p = _answers(b, pod, nodelist.old_nodes(items, images=True))
        return f, p

    assert _outcome(column) == _outcome(per_node)
