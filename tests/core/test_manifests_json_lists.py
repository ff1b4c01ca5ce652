"""Big JSON Lists are decoded item by item (``manifests._json_documents``):
the result, every warning and every error must be what decoding the whole
text first gave."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from berth.cluster import manifests


def _node(i: int) -> dict[str, Any]:
    """A node as the API server lists it, ~3 KB of JSON."""
    name = f"node-{i:05d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"00000000-0000-4000-8000-{i:012d}",
            "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": f"zone-{i % 3}"},
            "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}],
        },
        "spec": {"podCIDR": f"10.0.{i}.0/24", "taints": [{"key": "k", "effect": "NoSchedule"}] if i % 2 else []},
        "status": {
            "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "images": [
                {"names": [f"registry.example.com/s-{k}@sha256:{i * 31 + k:064x}"], "sizeBytes": 50000000 + k}
                for k in range(12)
            ],
        },
    }


NODES = [_node(i) for i in range(6)]  # over the lazy threshold


def _list(items: list[Any], **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": items, **extra}


def _whole(text: str, validate: manifests.ValidationMode) -> Any:
    """What the decoder gave before: ``json`` over the whole text, then the documents."""
    data = json.loads(text, object_pairs_hook=manifests._json_object)
    docs = data if isinstance(data, list) else [data]
    return manifests.parse_documents(docs, validate=validate, source="f.json")


def _outcome(fn: Any) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except manifests.ManifestError as e:
        return "error", str(e).removeprefix("f.json: ")


BAD_NODE = {**NODES[1], "spec": {**NODES[1]["spec"], "unschedulable": "yes"}}
TYPO_NODE = {**NODES[2], "spec": {"taint": []}}

CASES = {
    "a NodeList": json.dumps(_list(NODES)),
    "a NodeList with pods mixed in": json.dumps(
        _list([*NODES, {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}])
    ),
    "an array of Lists and objects": json.dumps([_list(NODES[:3]), NODES[3], _list(NODES[3:], metadata={})]),
    "an item of the wrong type": json.dumps(_list([NODES[0], BAD_NODE, *NODES[2:]])),
    "an unknown field in an item": json.dumps(_list([*NODES[:2], TYPO_NODE, *NODES[3:]])),
    "an item that is not an object": json.dumps(_list([*NODES, 3])),
    "an unknown field in the envelope": json.dumps(_list(NODES, metdata={})),
    "a duplicate field in the envelope": json.dumps(_list(NODES))[:-1] + ', "kind": "List"}',
    "a duplicate field in an item": json.dumps(_list(NODES)).replace(
        '"name": "node-00003",', '"name": "node-00003", "name": "node-00003",'
    ),
    "the same items under another key first": json.dumps({"metadata": {"x": NODES}, **_list(NODES)}),
    "items twice": f'{{"kind": "List", "items": {json.dumps(NODES[:3])}, "items": {json.dumps(NODES)}}}',
    "items that are not a list": json.dumps({"kind": "List", "items": {"x": NODES}}),
    "NaN, which only json takes": json.dumps(_list(NODES)).replace('"sizeBytes": 50000000', '"sizeBytes": NaN', 1),
    "malformed JSON": json.dumps(_list(NODES))[:-5],
}


@pytest.mark.parametrize("validate", manifests.VALIDATION_MODES)
@pytest.mark.parametrize("case", CASES)
def test_big_json_lists_decode_as_the_whole_text_did(
    case: str, validate: manifests.ValidationMode, caplog: pytest.LogCaptureFixture
) -> None:
    text = CASES[case]
    assert len(text) > 2 * manifests._LAZY_ITEMS_BYTES
    with caplog.at_level(logging.WARNING):
        lazy = _outcome(lambda: manifests.loads(text, source="f.json", validate=validate))
    lazy_log = caplog.text
    caplog.clear()
    if case == "malformed JSON":
        assert lazy[0] == "error" and "not valid YAML or JSON" in lazy[1]
        return
    with caplog.at_level(logging.WARNING):
        whole = _outcome(lambda: _whole(text, validate))
    assert lazy == whole
    assert lazy_log == caplog.text


def test_a_big_node_list_is_decoded_item_by_item() -> None:
    docs = manifests._json_documents(json.dumps(_list(NODES)))
    assert docs is not None and isinstance(docs[0], manifests._JSONList)
    assert len(docs[0].items) == len(NODES) and docs[0].envelope["items"] == []


def test_nodes_decoded_one_by_one_share_their_repeated_strings() -> None:
    """Each item has its own decoder run, so nothing shares strings by
    accident: image names and quantities are interned by the model."""
    nodes = [{**n, "status": {**n["status"], "images": [{"names": ["registry.example.com/app:v1"]}]}} for n in NODES]
    a, b = manifests.loads(json.dumps(_list(nodes))).nodes[:2]
    assert a.status.images[0].names[0] is b.status.images[0].names[0]
    assert a.status.allocatable["memory"] is b.status.allocatable["memory"]
    assert next(iter(a.status.capacity)) is next(iter(b.status.capacity))
