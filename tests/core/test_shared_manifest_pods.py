"""Pods from cluster files (``berth serve --cluster``, ``make run``) share
their empty and repeated containers as the gRPC and Kubernetes doors' do
(issue 16: the per-pod footprint), encode exactly as before, and the
embedded cluster binding, preempting and deleting them leaves every shared
container as it was loaded (``berth.cluster.model``, "A pod is the object
Berth holds")."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import msgspec
import pytest

from bench import memory as bench_memory
from berth import app, config
from berth.cluster import manifests, model
from berth.framework.decision import DecisionKind
from berth.testing import make_node

EXAMPLES_CLUSTER = "examples/cluster.yaml"


def deployment_pod(i: int, *, prefix: str = "", priority: int = 0) -> dict[str, Any]:
    """bench.memory's Deployment-shaped pod of one of two ReplicaSets, as a Pod document."""
    doc = bench_memory.realistic_pod(i, replica_sets=2)
    doc["metadata"]["name"] = prefix + doc["metadata"]["name"]
    doc["metadata"]["uid"] = prefix + doc["metadata"]["uid"]
    doc["spec"]["priority"] = priority
    return doc


def as_yaml_stream(docs: list[dict[str, Any]]) -> str:
    return "".join(f"---\n{json.dumps(d)}\n" for d in docs)  # JSON documents are YAML


def rendered(pod: model.Pod) -> dict[str, Any]:
    """``pod``'s metadata, spec and status as builtins (apiVersion and kind
    apart: whether msgspec omits them as defaults depends on the string object)."""
    out: dict[str, Any] = msgspec.to_builtins(pod)
    return {k: v for k, v in out.items() if k not in ("apiVersion", "kind")}


def unshared(doc: dict[str, Any]) -> dict[str, Any]:
    """What the model keeps of ``doc``, decoded without sharing, rendered."""
    return rendered(msgspec.convert(doc, model.Pod))


@pytest.mark.parametrize(
    "load",
    [
        lambda docs: manifests.loads(as_yaml_stream(docs), source="pods.yaml"),
        lambda docs: manifests.loads(json.dumps({"kind": "List", "items": docs}), source="pods.json"),
        lambda docs: manifests.parse_documents(docs),
    ],
    ids=["yaml", "json-list", "documents"],
)
def test_pods_of_a_cluster_file_share_their_containers_and_encode_as_before(load: Any) -> None:
    docs = [deployment_pod(i) for i in range(4)]  # ReplicaSets 0, 1, 0, 1
    a, b, c, _ = load(docs).pods
    assert a.metadata.labels is c.metadata.labels and type(a.metadata.labels) is model.FrozenDict
    assert a.metadata.annotations is c.metadata.annotations
    assert a.metadata.owner_references is c.metadata.owner_references
    assert a.spec.containers is c.spec.containers
    assert a.spec.tolerations is b.spec.tolerations is model._EMPTY_LIST
    assert b.metadata.labels is not a.metadata.labels
    for pod, doc in zip(load(docs).pods, docs, strict=True):
        assert rendered(pod) == unshared(doc)


def test_a_cluster_file_pod_refuses_a_change_to_a_shared_map_and_keeps_it() -> None:
    (pod,) = manifests.loads(json.dumps(deployment_pod(0))).pods
    with pytest.raises(TypeError, match="read-only"):
        pod.metadata.labels["tier"] = "frontend"
    assert pod.metadata.labels["tier"] == "backend"
    # A changed copy is built instead, as Berth's own code does.
    changed = msgspec.structs.replace(
        pod, metadata=msgspec.structs.replace(pod.metadata, labels={**pod.metadata.labels, "tier": "frontend"})
    )
    assert changed.metadata.labels["tier"] == "frontend" and pod.metadata.labels["tier"] == "backend"


def test_the_demo_cluster_file_loads_shared() -> None:
    m = manifests.load(EXAMPLES_CLUSTER)
    assert m.pods
    assert all(p.spec.tolerations is model._EMPTY_LIST for p in m.pods if not p.spec.tolerations)
    assert all(type(p.metadata.labels) is model.FrozenDict for p in m.pods if p.metadata.labels)
    assert any(p.metadata.labels for p in m.pods)


async def _settled(berth: app.Berth, want: set[str], kind: DecisionKind) -> None:
    async for d in berth.core.decisions.watch(replay=True):
        if d.kind == kind:
            want.discard(d.pod)
        if not want:
            return


async def test_the_embedded_cluster_binding_preempting_and_deleting_file_pods_leaves_them_unchanged() -> None:
    """``make run``'s path: a cluster file loaded into the embedded cluster;
    its pods bound by the loop, four preempted by higher-priority pods from
    another file, one deleted — each pod the core holds is as it was loaded."""
    low = [deployment_pod(i) for i in range(8)]
    high = [deployment_pod(100 + i, prefix="hi-", priority=1000) for i in range(4)]
    pristine = {msgspec.convert(d, model.Pod).key: unshared(d) for d in low + high}
    async with app.running(config.parse({})) as berth:
        berth.cluster.upsert_nodes([make_node(f"n{i}", cpu="400m", memory="8Gi", pods=110) for i in range(2)])
        berth.cluster.load(manifests.loads(as_yaml_stream(low), source="low.yaml"))
        keys = {msgspec.convert(d, model.Pod).key for d in low}
        await asyncio.wait_for(_settled(berth, set(keys), DecisionKind.BOUND), timeout=60)
        berth.cluster.load(manifests.loads(as_yaml_stream(high), source="high.yaml"))
        keys = {msgspec.convert(d, model.Pod).key for d in high}
        await asyncio.wait_for(_settled(berth, set(keys), DecisionKind.BOUND), timeout=60)
        berth.cluster.delete_pods([msgspec.convert(high[0], model.Pod).key])
        held = berth.core.pods.all()
        stored = list(berth.cluster.pods.values())
    assert len(berth.cluster.evictions) >= 4
    assert model._EMPTY_LIST == [] and model._EMPTY_DICT == {}
    assert len(held) == len(low) + len(high) - len(berth.cluster.evictions) - 1
    for pod in [*held, *stored]:
        now, was = rendered(pod), pristine[pod.key]
        assert now["metadata"] == was["metadata"]
        assert {k: v for k, v in now["spec"].items() if k != "nodeName"} == was["spec"]
    by_rs: dict[str, list[model.Pod]] = {}
    for pod in held:  # still shared: one ReplicaSet's containers and owner reference are one object
        by_rs.setdefault(pod.metadata.owner_references[0].name, []).append(pod)
    assert len(by_rs) == 2
    for pods in by_rs.values():
        assert len({id(p.spec.containers) for p in pods}) == len({id(p.metadata.owner_references) for p in pods}) == 1
    for doc in low + high:  # a fresh load still gives what the first did
        (pod,) = manifests.loads(json.dumps(doc)).pods
        assert rendered(pod) == pristine[pod.key]
