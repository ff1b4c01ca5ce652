"""Manifests: every shape Berth accepts, and errors naming document and field."""

from __future__ import annotations

import importlib.util
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from berth import errors
from berth.cluster import manifests, model, openapi

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
        # the wording is berth.cluster.resources' (the API server's); the place is ours
        'document 1 (Pod p): spec.containers[0].resources.requests[cpu]: Invalid value: "lots"',
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
        # the wording is berth.cluster.labels' (the API server's); the path is ours
        "nodeSelectorTerms[0].matchExpressions[0].operator: ",
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


# ---------------------------------------------------------------- strict fields
#
# kubectl --validate=strict has the API server refuse unknown and duplicate
# fields ("strict decoding error: unknown field \"spec.containers[0].resource\"",
# k8s.io/apimachinery/pkg/runtime/error.go); Berth checks the same fields,
# from the committed OpenAPI schema of the pinned version, and names the
# closest known one.

POD = "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n"

TYPOS = [
    (
        "resource instead of resources",
        POD + "    resource: {requests: {cpu: '64'}}\n",
        'document 1 (Pod p): spec.containers[0].resource: unknown field; did you mean "resources"?',
    ),
    (
        "requets",
        POD + "    resources: {requets: {cpu: '64'}}\n",
        'document 1 (Pod p): spec.containers[0].resources.requets: unknown field; did you mean "requests"?',
    ),
    (
        "nodeSelecter",
        POD + "  nodeSelecter: {disk: ssd}\n",
        'document 1 (Pod p): spec.nodeSelecter: unknown field; did you mean "nodeSelector"?',
    ),
    (
        "operater in a toleration",
        POD + "  tolerations: [{key: k, operater: Exists}]\n",
        'document 1 (Pod p): spec.tolerations[0].operater: unknown field; did you mean "operator"?',
    ),
    (
        "operater in a node affinity term",
        POD + "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
        "{nodeSelectorTerms: [{matchExpressions: [{key: k, operater: In, values: [a]}]}]}}}\n",
        "document 1 (Pod p): spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        '.nodeSelectorTerms[0].matchExpressions[0].operater: unknown field; did you mean "operator"?',
    ),
    (
        "unknown top-level field",
        POD + "specs: {}\n",
        'document 1 (Pod p): specs: unknown field; did you mean "spec"?',
    ),
    (
        "unknown field without a close match",
        POD + "    zzzzzz: 1\n",
        "document 1 (Pod p): spec.containers[0].zzzzzz: unknown field",
    ),
    (
        "a field in the wrong case",
        POD + "    ports: [{containerPort: 80, hostport: 80}]\n",
        'document 1 (Pod p): spec.containers[0].ports[0].hostport: unknown field; did you mean "hostPort"?',
    ),
    (
        "a field of a Node",
        "kind: Node\nmetadata: {name: n}\nstatus: {allocatble: {cpu: '4'}}\n",
        'document 1 (Node n): status.allocatble: unknown field; did you mean "allocatable"?',
    ),
    (
        "a PodDisruptionBudget's selector",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: b}\n"
        "spec: {minAvailable: 1, selector: {matchLabel: {app: web}}}\n",
        'document 1 (PodDisruptionBudget b): spec.selector.matchLabel: unknown field; did you mean "matchLabels"?',
    ),
    (
        "a PodGroup",
        "kind: PodGroup\nmetadata: {name: g}\nspec: {minMembers: 3}\n",
        'document 1 (PodGroup g): spec.minMembers: unknown field; did you mean "minMember"?',
    ),
    (
        "a list item",
        "apiVersion: v1\nkind: List\nitems:\n- kind: Node\n  metadata: {name: n}\n"
        "- kind: Pod\n  metadata: {name: q}\n  spec: {containers: [{name: c, imagee: x}]}\n",
        'document 1 items[1] (Pod q): spec.containers[0].imagee: unknown field; did you mean "image"?',
    ),
    (
        "a list's envelope",
        "apiVersion: v1\nkind: PodList\nmetadata: {}\nitemz: []\nitems: []\n",
        'document 1 (PodList): itemz: unknown field; did you mean "items"?',
    ),
    (
        "the second document",
        "kind: Node\nmetadata: {name: n}\n---\n" + POD + "    imagePullPolcy: Always\n",
        'document 2 (Pod p): spec.containers[0].imagePullPolcy: unknown field; did you mean "imagePullPolicy"?',
    ),
    (
        "every unknown field, joined as the API server does",
        POD + "    resource: {}\n  nodeSelecter: {}\n",
        'document 1 (Pod p): spec.containers[0].resource: unknown field; did you mean "resources"?, '
        'spec.nodeSelecter: unknown field; did you mean "nodeSelector"?',
    ),
    (
        "a duplicate field in YAML",
        "kind: Pod\nmetadata:\n  name: p\n  name: q\nspec: {containers: [{name: c}]}\n",
        "document 1 (Pod q): metadata.name: duplicate field (line 4)",
    ),
    (
        "a duplicate field in a list item, once",
        "kind: List\nitems:\n- kind: Node\n  metadata: {name: n, name: m}\n",
        "document 1 items[0] (Node m): metadata.name: duplicate field (line 4)",
    ),
    (
        "a duplicate label",
        "kind: Node\nmetadata:\n  name: n\n  labels:\n    zone: a\n    zone: b\n",
        "document 1 (Node n): metadata.labels[zone]: duplicate field (line 6)",
    ),
    (
        "a duplicate field in JSON",
        '{"kind": "Node", "metadata": {"name": "n"}, "spec": {"unschedulable": true, "unschedulable": false}}',
        "document 1 (Node n): spec.unschedulable: duplicate field",
    ),
    (
        "an object where a list belongs",
        "kind: Pod\nmetadata: {name: p}\nspec: {containers: {name: c}}\n",
        "document 1 (Pod p): spec.containers: expected a list, got an object",
    ),
    (
        "a list where an object belongs",
        POD + "    resources: [cpu]\n",
        "document 1 (Pod p): spec.containers[0].resources: expected an object, got a list",
    ),
]


@pytest.mark.parametrize(("case", "text", "message"), TYPOS, ids=[t[0] for t in TYPOS])
def test_unknown_and_duplicate_fields_are_rejected_with_path_and_suggestion(case: str, text: str, message: str) -> None:
    with pytest.raises(manifests.ManifestError) as err:
        manifests.loads(text, source="in.yaml")
    assert str(err.value) == f"in.yaml: {message}"
    assert isinstance(err.value, errors.InvalidArgument)


def test_warn_mode_loads_without_the_unknown_fields_and_warns_once_per_field(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = POD + "    resources: {requets: {cpu: '64'}, limits: {cpu: '2'}}\n  nodeSelecter: {disk: ssd}\n"
    with caplog.at_level(logging.WARNING, logger="berth.cluster.manifests"):
        m = manifests.loads(text, source="in.yaml", validate="warn")
    pod = m.pods[0]
    assert pod.spec.node_selector == {}
    resources = pod.spec.containers[0].resources
    assert resources is not None and resources.requests == {} and resources.limits == {"cpu": "2"}
    assert [r.getMessage() for r in caplog.records] == [
        'in.yaml: document 1 (Pod p): spec.containers[0].resources.requets: unknown field; did you mean "requests"? '
        "(--validate=warn: left out)",
        'in.yaml: document 1 (Pod p): spec.nodeSelecter: unknown field; did you mean "nodeSelector"? '
        "(--validate=warn: left out)",
    ]


def test_warn_mode_keeps_the_last_of_a_duplicate_and_still_refuses_a_wrong_shape(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="berth.cluster.manifests"):
        m = manifests.loads("kind: Node\nmetadata:\n  name: a\n  name: b\n", validate="warn")
    assert m.nodes[0].name == "b"
    assert "metadata.name: duplicate field (line 4) (--validate=warn: the last value is used)" in caplog.text
    with pytest.raises(manifests.ManifestError, match=r"spec.containers: expected a list, got an object"):
        manifests.loads("kind: Pod\nmetadata: {name: p}\nspec: {containers: {name: c}}\n", validate="warn")


def test_warn_mode_leaves_the_callers_documents_untouched() -> None:
    doc = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resource": {}}]}}
    before = json.dumps(doc)
    manifests.parse_documents([doc], validate="warn")
    assert json.dumps(doc) == before


def test_ignore_mode_loads_silently(caplog: pytest.LogCaptureFixture) -> None:
    text = POD + "    resource: {requests: {cpu: '64'}}\n  nodeSelecter: {disk: ssd}\nmetadata:\n  name: p\n"
    with caplog.at_level(logging.DEBUG):
        m = manifests.loads(text, validate="ignore")
    assert m.pods[0].spec.containers[0].resources is None
    assert not [r for r in caplog.records if r.name.startswith("berth")]


def test_an_unknown_validation_mode_is_refused() -> None:
    with pytest.raises(errors.InvalidArgument, match="validate: 'lenient' is not one of strict, warn, ignore"):
        manifests.parse_documents([], validate="lenient")  # type: ignore[arg-type]


EVERY_KIND = """\
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {topology.kubernetes.io/zone: a, example.com/any-Key_9: ''}
  annotations: {node.alpha.kubernetes.io/ttl: '0', anything/goes: 'yes'}
  managedFields:
  - manager: kubelet
    operation: Update
    fieldsType: FieldsV1
    fieldsV1: {f:status: {f:allocatable: {f:cpu: {}}}}
spec:
  unschedulable: false
  taints: [{key: dedicated, value: batch, effect: NoSchedule}]
  providerID: x://1
status:
  capacity: {cpu: '4', memory: 16Gi, pods: '110', example.com/fpga: '2'}
  allocatable: {cpu: 3900m, memory: 15Gi, pods: '110'}
  conditions: [{type: Ready, status: 'True', reason: KubeletReady}]
  images: [{names: [nginx], sizeBytes: 1000}]
  nodeInfo: {kubeletVersion: v1.34.4, architecture: amd64}
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: g, namespace: batch}
spec: {minMember: 2, scheduleTimeoutSeconds: 30, minResources: {cpu: '2'}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: b}
spec:
  maxUnavailable: 25%
  selector:
    matchLabels: {app: web}
    matchExpressions: [{key: tier, operator: In, values: [front]}]
  unhealthyPodEvictionPolicy: AlwaysAllow
---
apiVersion: v1
kind: PodList
metadata: {resourceVersion: '1'}
items:
- apiVersion: v1
  kind: Pod
  metadata:
    name: web-0
    namespace: shop
    labels: {app: web, scheduling.x-k8s.io/pod-group: g}
    ownerReferences: [{apiVersion: apps/v1, kind: StatefulSet, name: web, uid: u1, controller: true}]
  spec:
    schedulerName: berth
    priorityClassName: high
    priority: 1000
    preemptionPolicy: Never
    nodeSelector: {disk: ssd}
    overhead: {cpu: 10m}
    schedulingGates: [{name: example.com/wait}]
    tolerations: [{key: dedicated, operator: Equal, value: batch, effect: NoSchedule, tolerationSeconds: 5}]
    affinity:
      nodeAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]
        preferredDuringSchedulingIgnoredDuringExecution:
        - {weight: 1, preference: {matchFields: [{key: metadata.name, operator: In, values: [n1]}]}}
      podAntiAffinity:
        preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: web}}}
    topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}
    initContainers: [{name: init, image: busybox, resources: {requests: {cpu: 100m}}, restartPolicy: Always}]
    containers:
    - name: web
      image: nginx
      env: [{name: A, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}]
      ports: [{containerPort: 80, hostPort: 8080, protocol: TCP}]
      resources: {requests: {cpu: 500m, memory: 1Gi, nvidia.com/gpu: '1'}, limits: {nvidia.com/gpu: '1'}}
      livenessProbe: {httpGet: {path: /, port: http}}
      volumeMounts: [{name: data, mountPath: /data}]
    volumes: [{name: data, emptyDir: {sizeLimit: 1Gi}}]
  status: {phase: Running, nominatedNodeName: n1}
"""


def test_a_manifest_set_with_every_supported_kind_passes_strict_mode() -> None:
    m = manifests.loads(EVERY_KIND)
    assert (len(m.nodes), len(m.pods), len(m.pod_groups), len(m.pdbs)) == (1, 1, 1, 1)


def test_yaml_merge_keys_are_not_duplicates() -> None:
    text = "kind: Node\nmetadata:\n  <<: &base {name: base, labels: {a: b}}\n  name: n\n"
    assert manifests.loads(text).nodes[0].name == "n"


def test_nesting_beyond_the_decoder_is_one_error() -> None:
    with pytest.raises(manifests.ManifestError, match=r"in\.json: nested too deeply"):
        manifests.loads("[" * 100_000 + "]" * 100_000, source="in.json")


# ---------------------------------------------------------------- the schema

ROOT = Path(__file__).parents[2]
OPENAPI = ROOT / "berth" / "cluster" / "openapi" / "v1.37.json"


def test_committed_schema_parses_covers_every_kind_and_is_small() -> None:
    from tests.e2e.controlplane import bed

    raw = json.loads(OPENAPI.read_text())
    assert raw["kubernetesVersion"] == bed.SUPPORTED_VERSIONS[-1]  # the newest release Berth follows
    assert "scripts/gen_openapi.py" in raw["$comment"]
    s = openapi.schema()
    for kind in ("Node", "Pod", "PodGroup", "PodDisruptionBudget"):
        assert kind in s.kinds and kind + "List" in s.kinds
    assert s.list_envelope == {"apiVersion", "items", "kind", "metadata"}
    shapes = [shape for fields in s.types.values() for shape in fields.values()]
    for shape in shapes:
        inner = shape.lstrip("[]{}")
        assert inner in ("s", "*") or inner[1:] in s.types, shape
    assert OPENAPI.stat().st_size < 300_000


def _struct_types(t: msgspec.inspect.Type) -> Iterator[tuple[str, type[Any]]]:
    """The Struct types inside a field's type, with the shape prefix that leads to them."""
    if isinstance(t, msgspec.inspect.StructType):
        yield "@", t.cls
    elif isinstance(t, msgspec.inspect.UnionType):
        for u in t.types:
            yield from _struct_types(u)
    elif isinstance(t, msgspec.inspect.ListType):
        yield from (("[]" + p, c) for p, c in _struct_types(t.item_type))
    elif isinstance(t, msgspec.inspect.DictType):
        yield from (("{}" + p, c) for p, c in _struct_types(t.value_type))


#: Fields Berth reads from an older release's API server only, which the
#: newest release's schema no longer has (1.35's ``pod.spec.workloadRef``,
#: replaced by ``schedulingGroup`` in 1.36).
OLDER_RELEASES_ONLY = {"Pod.spec.workloadRef"}


@pytest.mark.parametrize("kind", ["Node", "Pod", "PodGroup", "PodDisruptionBudget"])
def test_every_field_berths_model_reads_is_known_to_the_schema(kind: str) -> None:
    """Strict mode would otherwise refuse a field Berth itself decodes."""
    s = openapi.schema()
    todo: list[tuple[type[Any], str, str]] = [(getattr(model, kind), s.kinds[kind][1:], kind)]
    while todo:
        cls, type_name, path = todo.pop()
        fields = s.types[type_name]
        for f in msgspec.inspect.type_info(cls).fields:  # type: ignore[attr-defined]
            if f"{path}.{f.encode_name}" in OLDER_RELEASES_ONLY:
                continue
            assert f.encode_name in fields, f"{path}.{f.encode_name}"
            for prefix, sub in _struct_types(f.type):
                shape = fields[f.encode_name]
                assert shape.startswith(prefix), f"{path}.{f.encode_name}: {shape}"
                todo.append((sub, shape[len(prefix) :], f"{path}.{f.encode_name}"))


def test_the_generator_reduces_openapi_shapes() -> None:
    """scripts/gen_openapi.py's reduction, on the shapes the API server publishes."""
    spec = importlib.util.spec_from_file_location("gen_openapi", ROOT / "scripts" / "gen_openapi.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    ref = {"allOf": [{"$ref": "#/components/schemas/T"}]}
    components = {
        "Q": {"oneOf": [{"type": "string"}, {"type": "number"}]},
        "Free": {"type": "object"},
        "T": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "self": ref,
                "quantity": {"$ref": "#/components/schemas/Q"},
                "port": {"type": "string", "format": "int-or-string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "items": {"type": "array", "items": ref},
                "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"a": {}}},
                "free": {"$ref": "#/components/schemas/Free"},
                "inline": {"type": "object", "properties": {"x": {"type": "integer"}}},
            },
        },
    }
    r = gen.Reducer()
    assert r.named("T", components) == "@T"
    assert r.types == {
        "T": {
            "free": "*",
            "inline": "@T.inline",
            "items": "[]@T",
            "labels": "{}s",
            "name": "s",
            "port": "s",
            "quantity": "s",
            "raw": "*",
            "self": "@T",
        },
        "T.inline": {"x": "s"},
    }


def test_preserve_unknown_fields_and_maps_are_never_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    s = openapi.Schema(
        kubernetes_version="test",
        kinds={"Thing": "@T"},
        types={"T": {"raw": "*", "labels": "{}s", "spec": "@S"}, "S": {"known": "s"}},
        list_envelope=frozenset(),
    )
    obj = {"raw": {"anything": {"at": ["all"]}}, "labels": {"any": "key"}, "spec": {"known": 1, "unknown": 2}}
    monkeypatch.setattr(openapi, "schema", lambda: s)
    out, problems = openapi.check(obj, "Thing")
    assert [str(p) for p in problems] == ['spec.unknown: unknown field; did you mean "known"?']
    assert out == {"raw": obj["raw"], "labels": obj["labels"], "spec": {"known": 1}}
