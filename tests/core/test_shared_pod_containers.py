"""Pods share their empty and repeated containers (issue 16: the per-pod
footprint), and sharing changes nothing anyone can see: the same pods,
encodings, requests and answers; a shared map refuses changes; a shared
list or struct is never changed by scheduling, binding, preemption or
deletion (``berth.cluster.model``, "A pod is the object Berth holds")."""

from __future__ import annotations

import asyncio
import copy
import pickle
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from bench import memory as bench_memory
from berth import app, config
from berth.adapters.grpc import convert
from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.framework.decision import Decision, DecisionKind
from berth.scheduling import batch
from berth.scheduling.decisions import DecisionLog, decision_bytes
from berth.testing import make_node, make_pod


def deployment_pod(i: int, **spec: Any) -> dict[str, Any]:
    """bench.memory's Deployment-shaped pod (labels, annotations, owner
    reference, a container with requests, limits and a port), ``spec`` merged in."""
    doc = bench_memory.realistic_pod(i, replica_sets=2)
    doc["spec"].update(spec)
    return doc


def via_grpc(doc: dict[str, Any]) -> model.Pod:
    """The pod as the gRPC door builds it (protobuf in, model out)."""
    return convert.pod_from_pb(convert.pod_to_pb(msgspec.convert(doc, model.Pod)))


def via_json(doc: dict[str, Any]) -> model.Pod:
    """The pod decoded from JSON and then shared, as a door may do."""
    return model.share_containers(msgspec.json.decode(msgspec.json.encode(doc), type=model.Pod))


DOORS = {"grpc": via_grpc, "json": via_json}


# ---------------------------------------------------------------- what is shared


@pytest.mark.parametrize("door", DOORS.values(), ids=DOORS.keys())
def test_pods_of_one_replica_set_share_labels_annotations_requests_and_containers(
    door: Callable[[dict[str, Any]], model.Pod],
) -> None:
    a, b = door(deployment_pod(0)), door(deployment_pod(2))  # replica set 0 both
    assert a.metadata.name != b.metadata.name
    assert a.metadata.labels is b.metadata.labels
    assert a.metadata.annotations is b.metadata.annotations
    assert a.metadata.owner_references is b.metadata.owner_references
    assert a.spec.containers is b.spec.containers
    assert a.spec.tolerations is b.spec.tolerations is a.spec.volumes  # the one shared empty list
    assert a.spec.node_selector is b.spec.node_selector is a.spec.overhead  # the one shared empty dict
    other = door(deployment_pod(1))  # replica set 1: other labels, another owner
    assert other.metadata.labels is not a.metadata.labels
    assert other.metadata.owner_references is not a.metadata.owner_references
    assert other.metadata.labels == {**a.metadata.labels, "app": "web-1", "pod-template-hash": f"{1:010x}"}


def test_pod_infos_of_pods_requesting_the_same_share_their_derived_maps() -> None:
    a, b = PodInfo.of(via_grpc(deployment_pod(0))), PodInfo.of(via_grpc(deployment_pod(1)))
    assert a.requests is b.requests and a.non_zero is b.non_zero and a.usage is b.usage
    assert a.requests == {"cpu": 100, "memory": 500 * 2**20}
    assert a.host_ports == [] and a.host_ports is b.host_ports
    none = PodInfo.of(via_grpc(deployment_pod(3, containers=[{"name": "c"}])))
    assert none.requests == {} and none.non_zero == {"cpu": 100, "memory": 200 * 2**20}
    assert none.usage == {"cpu": (0, 100), "memory": (0, 200 * 2**20), "pods": (1, 1)}


@pytest.mark.parametrize("door", DOORS.values(), ids=DOORS.keys())
def test_a_shared_pod_encodes_as_before_with_no_empty_fields(door: Callable[[dict[str, Any]], model.Pod]) -> None:
    doc = deployment_pod(7)
    pod = door(doc)
    out = msgspec.to_builtins(pod)
    # omit_defaults still drops every absent field: the shared empties are exact [] and {}.
    assert _empty_fields(out) == [".status"]  # a status with nothing set, as before
    assert set(out["metadata"]) == {"name", "namespace", "uid", "labels", "annotations", "ownerReferences"}
    assert out["metadata"]["labels"] == doc["metadata"]["labels"]
    if door is via_json:  # (a protobuf map has an order of its own)
        assert list(out["metadata"]["labels"]) == list(doc["metadata"]["labels"])  # same order
    assert msgspec.json.decode(msgspec.json.encode(pod), type=model.Pod) == pod


def _empty_fields(obj: Any, path: str = "") -> list[str]:
    """Paths of the empty lists and maps in a rendered object."""
    if isinstance(obj, dict):
        return [path] if not obj else [p for k, v in obj.items() for p in _empty_fields(v, f"{path}.{k}")]
    if isinstance(obj, list):
        return [path] if not obj else [p for i, v in enumerate(obj) for p in _empty_fields(v, f"{path}[{i}]")]
    return []


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"cpu": 1}, {"cpu": 1.0}),
        ({"cpu": 1}, {"cpu": True}),
        ({"cpu": 1}, {"cpu": "1"}),
        ({"a": "1", "b": "2"}, {"b": "2", "a": "1"}),
    ],
    ids=["int-float", "int-bool", "int-str", "order"],
)
def test_maps_equal_under_eq_but_encoded_differently_are_not_shared(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    a, b = model.shared_map(dict(first)), model.shared_map(dict(second))
    assert a is not b
    assert msgspec.json.encode(a) == msgspec.json.encode(first)
    assert msgspec.json.encode(b) == msgspec.json.encode(second)


@pytest.mark.parametrize(
    "given",
    [{}, {"k": ["unhashable"]}],
    ids=["empty", "unhashable value"],
)
def test_maps_that_cannot_be_shared_come_back_as_given(given: dict[str, Any]) -> None:
    assert model.shared_map(given) is given


def test_the_shared_map_table_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model, "_SHARED_MAPS_MAX", 4)
    monkeypatch.setattr(model, "_shared_maps", {})
    held = [model.shared_map({"k": str(i)}) for i in range(10)]
    assert len(model._shared_maps) <= 4
    assert [m["k"] for m in held] == [str(i) for i in range(10)]  # maps handed out stay intact


# ---------------------------------------------------------------- read-only maps

MUTATIONS: dict[str, Callable[[dict[str, Any]], object]] = {
    "setitem": lambda m: m.__setitem__("x", "y"),
    "delitem": lambda m: m.__delitem__("app"),
    "update": lambda m: m.update(x="y"),
    "ior": lambda m: m.__ior__({"x": "y"}),
    "pop": lambda m: m.pop("app"),
    "popitem": lambda m: m.popitem(),
    "setdefault": lambda m: m.setdefault("x", "y"),
    "clear": lambda m: m.clear(),
}


@pytest.mark.parametrize("mutate", MUTATIONS.values(), ids=MUTATIONS.keys())
def test_a_shared_map_refuses_every_change_and_stays_as_it_was(mutate: Callable[[dict[str, Any]], object]) -> None:
    pod = via_grpc(deployment_pod(0))
    labels = pod.metadata.labels
    before = dict(labels)
    with pytest.raises(TypeError, match="read-only"):
        mutate(labels)
    assert labels == before == via_grpc(deployment_pod(2)).metadata.labels


@pytest.mark.parametrize(
    "copier",
    [dict, lambda m: m.copy(), copy.copy, copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m)), lambda m: {**m}],
    ids=["dict", "copy-method", "copy.copy", "copy.deepcopy", "pickle", "unpack"],
)
def test_a_copy_of_a_shared_map_is_an_ordinary_dict(copier: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    labels = via_grpc(deployment_pod(0)).metadata.labels
    mine = copier(labels)
    assert type(mine) is dict and mine == labels
    mine["x"] = "y"
    assert "x" not in labels


@pytest.mark.parametrize(
    "copier", [copy.deepcopy, lambda p: pickle.loads(pickle.dumps(p))], ids=["copy.deepcopy", "pickle"]
)
def test_a_deep_copy_of_a_shared_pod_is_its_own_and_mutable(copier: Callable[[model.Pod], model.Pod]) -> None:
    pod = via_grpc(deployment_pod(0))
    mine = copier(pod)
    assert mine == pod
    mine.metadata.labels["x"] = "y"
    mine.spec.tolerations.append(model.Toleration(key="k"))
    mine.spec.containers[0].image = "other"
    assert pod == via_grpc(deployment_pod(0))
    assert model._EMPTY_LIST == []


def test_a_replaced_pod_keeps_sharing() -> None:
    pod = via_grpc(deployment_pod(0))
    bound = msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name="n1"))
    assert bound.metadata.labels is pod.metadata.labels
    assert bound.spec.containers is pod.spec.containers and bound.spec.overhead is pod.spec.overhead


def test_a_pod_built_in_python_is_left_mutable() -> None:
    """berth.testing.make_pod and plugins' tests change their pods before
    handing them over (examples/plugins/berth-gpu-affinity does)."""
    pods = [make_pod(f"p{i}", requests={"cpu": "1"}, labels={"app": "a"}) for i in range(2)]
    pods.append(msgspec.json.decode(msgspec.json.encode(pods[0]), type=model.Pod))  # decoded, not shared
    for pod in pods:
        pod.metadata.annotations["gpu.berth.dev/model"] = pod.metadata.name
        pod.metadata.labels["tier"] = pod.metadata.name
        pod.spec.tolerations.append(model.Toleration(key=pod.metadata.name))
    assert [p.metadata.annotations for p in pods] == [{"gpu.berth.dev/model": n} for n in ("p0", "p1", "p0")]
    assert [p.spec.tolerations[0].key for p in pods] == ["p0", "p1", "p0"] and len(pods[0].spec.tolerations) == 1
    assert model._EMPTY_LIST == [] and model._EMPTY_DICT == {}


def test_changing_a_shared_empty_in_place_is_caught_at_the_next_pod() -> None:
    pod = via_grpc(deployment_pod(0))
    pod.spec.tolerations.append(model.Toleration(key="oops"))  # what nothing in Berth may do
    try:
        with pytest.raises(RuntimeError, match="changed in place"):
            via_grpc(deployment_pod(1))
    finally:
        model._EMPTY_LIST.clear()


# ---------------------------------------------------------------- nothing changes them


async def _bound(berth: app.Berth, want: set[str]) -> None:
    async for d in berth.core.decisions.watch(replay=True):
        if d.kind == DecisionKind.BOUND:
            want.discard(d.pod)
        if not want:
            return


async def test_scheduling_binding_preemption_and_deletion_leave_shared_containers_unchanged() -> None:
    """Pods submitted as the gRPC door does (conversion, then batch.submit),
    bound, some preempted by higher-priority pods of the same shape, others
    deleted: afterwards every shared container is as it was converted."""
    low = [deployment_pod(i, priority=0) for i in range(8)]
    high = [deployment_pod(100 + i, priority=1000) for i in range(4)]
    for d in high:
        d["metadata"]["name"] = "hi-" + d["metadata"]["name"]
    pristine = {msgspec.convert(d, model.Pod).key: msgspec.to_builtins(via_grpc(d)) for d in low + high}
    async with app.running(config.parse({})) as berth:
        # Two nodes with room for four 100m pods each: the high-priority pods preempt.
        berth.cluster.upsert_nodes([make_node(f"n{i}", cpu="400m", memory="8Gi", pods=110) for i in range(2)])
        assert all(r.accepted for r in batch.submit(berth.core, [via_grpc(d) for d in low]))
        await asyncio.wait_for(_bound(berth, {msgspec.convert(d, model.Pod).key for d in low}), timeout=60)
        assert all(r.accepted for r in batch.submit(berth.core, [via_grpc(d) for d in high]))
        await asyncio.wait_for(_bound(berth, {msgspec.convert(d, model.Pod).key for d in high}), timeout=60)
        berth.cluster.delete_pods([msgspec.convert(high[0], model.Pod).key])
        held = list(berth.core.pods.all())
        preempted = [d for d in berth.core.decisions.latest.values() if d.kind == DecisionKind.PREEMPTED]
    assert len(preempted) >= 4
    assert model._EMPTY_LIST == [] and model._EMPTY_DICT == {}
    assert len(held) >= 3
    for pod in held:
        now = msgspec.to_builtins(pod)
        was = pristine[pod.key]
        assert now["metadata"] == was["metadata"]
        assert {k: v for k, v in now["spec"].items() if k != "nodeName"} == was["spec"]
    for d in low + high:  # a fresh conversion still gives what the first did
        assert msgspec.to_builtins(via_grpc(d)) == pristine[msgspec.convert(d, model.Pod).key]


# ---------------------------------------------------------------- the decision log's bytes


def test_the_decision_log_accounts_the_bytes_it_holds_without_keeping_sizes() -> None:
    log = DecisionLog(max_bytes=4000, max_deleted_bytes=1200)

    def d(i: int, kind: DecisionKind = DecisionKind.BOUND, message: str = "") -> Decision:
        return Decision(kind=kind, pod=f"default/p{i}", uid=f"u{i}", node="n1", message=message)

    for i in range(12):
        log.emit(d(i, message="x" * i))
        if i % 3 == 0:
            log.pod_deleted(f"default/p{i}", f"u{i}")
        log.emit(d(i % 4, DecisionKind.QUEUED))
    assert log.nbytes == sum(decision_bytes(x) for x in log.latest.values()) <= 4000
    assert log._deleted_bytes == sum(decision_bytes(log.latest[k]) for k in log._deleted) <= 1200


# ---------------------------------------------------------------- the bench


def test_the_footprint_bench_with_no_pods_does_not_wait_for_decisions() -> None:
    # Port 1: nothing listens there; with no pods nothing is dialled at all.
    assert asyncio.run(asyncio.wait_for(bench_memory._submit_all(1, [], 500), timeout=5)) == 0.0


@pytest.mark.parametrize("argv", [["footprint", "--pods", "-1"], ["footprint", "--pods", "many"]])
def test_the_footprint_bench_refuses_a_pod_count_that_is_not_a_count(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as e:
        bench_memory.main(argv)
    assert e.value.code == 2
