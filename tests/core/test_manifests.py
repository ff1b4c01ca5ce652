"""Manifests: every shape Berth accepts, and errors naming document and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from berth.cluster import manifests

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_demo_cluster_loads_fifty_nodes_over_three_zones() -> None:
    m = manifests.load(EXAMPLES / "cluster.yaml")
    assert len(m.nodes) == 50
    zones = {n.metadata.labels["topology.kubernetes.io/zone"] for n in m.nodes}
    assert len(zones) == 3
    assert any(n.spec.taints for n in m.nodes)
    assert all(p.spec.node_name for p in m.pods)
    assert len(m.pdbs) == 1


@pytest.mark.parametrize("name", ["web.yaml", "gpu.yaml", "batch.yaml"])
def test_example_pods_load(name: str) -> None:
    m = manifests.load(EXAMPLES / "pods" / name)
    assert m.pods


def test_list_json_and_uids_default_stably() -> None:
    doc = {
        "kind": "List",
        "items": [{"kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": [{"name": "c"}]}}],
    }
    m1 = manifests.loads(json.dumps(doc))
    m2 = manifests.loads(json.dumps(doc))
    assert m1.pods[0].metadata.namespace == "default"
    assert m1.pods[0].metadata.uid and m1.pods[0].metadata.uid == m2.pods[0].metadata.uid


BAD = [
    ("not yaml", "kind: [", "not valid YAML or JSON"),
    ("scalar document", "42\n", "document 1: expected an object"),
    ("unknown kind", "kind: Deployment\nmetadata: {name: d}\n", "kind: 'Deployment' is not supported"),
    ("missing kind", "metadata: {name: x}\n", "kind: required"),
    ("pod without name", "kind: Pod\nspec: {containers: [{name: c}]}\n", "metadata.name: required"),
    ("pod without containers", "kind: Pod\nmetadata: {name: p}\nspec: {}\n", "spec.containers: at least one"),
    (
        "bad quantity",
        "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}\n",
        "document 1 (Pod p): spec.containers[0].resources.requests.cpu: invalid quantity 'lots'",
    ),
    (
        "wrong type",
        "kind: Pod\nmetadata: {name: p}\nspec: {priority: high, containers: [{name: c}]}\n",
        "spec.priority: Expected `int | null`, got `str`",
    ),
    (
        "bad operator",
        "kind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c}]\n  affinity: {nodeAffinity: "
        "{requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
        "[{matchExpressions: [{key: k, operator: Near, values: [a]}]}]}}}\n",
        "operator: unsupported operator 'Near'",
    ),
    (
        "bad taint effect",
        "kind: Node\nmetadata: {name: n}\nspec: {taints: [{key: k, effect: Sometimes}]}\n",
        "spec.taints[0].effect",
    ),
    (
        "second document",
        "kind: Node\nmetadata: {name: n}\n---\nkind: Node\nmetadata: {}\n",
        "document 2 (Node ?): metadata.name: required",
    ),
]


@pytest.mark.parametrize(("case", "text", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_manifest_is_rejected_with_its_location(case: str, text: str, message: str) -> None:
    with pytest.raises(manifests.ManifestError) as err:
        manifests.loads(text, source="in.yaml")
    assert message in str(err.value)
    assert str(err.value).startswith("in.yaml: ")
