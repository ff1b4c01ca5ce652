"""Services, ReplicationControllers, ReplicaSets and StatefulSets: read from
manifests (strict schema, selectors kept), fed through the embedded cluster
into the core's WorkloadStore, and used by PodTopologySpread's System
default constraints when Berth schedules."""

from __future__ import annotations

import pytest

from berth import errors
from berth.cluster import manifests, model
from berth.plugins.podtopologyspread import PodTopologySpread
from berth.testing import Cluster, make_node, scores

WORKLOADS_YAML = """
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: ReplicationController
metadata: {name: old, namespace: legacy}
spec:
  replicas: 2
  selector: {app: old}
  template:
    metadata: {labels: {app: old}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-5d4f}
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
    matchExpressions: [{key: tier, operator: In, values: [front]}]
  template:
    metadata: {labels: {app: web, tier: front}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: c, image: postgres}]}
"""


def test_manifests_keep_each_kinds_selector() -> None:
    m = manifests.loads(WORKLOADS_YAML)
    got = {(w.kind, w.metadata.namespace, w.metadata.name): w for w in m.workloads}
    assert set(got) == {
        ("Service", "default", "web"),
        ("ReplicationController", "legacy", "old"),
        ("ReplicaSet", "default", "web-5d4f"),
        ("StatefulSet", "default", "db"),
    }
    svc = got["Service", "default", "web"]
    assert isinstance(svc, model.Service) and svc.spec.selector == {"app": "web"}
    rs = got["ReplicaSet", "default", "web-5d4f"]
    assert isinstance(rs, model.ReplicaSet) and rs.spec.selector is not None
    assert rs.spec.selector.match_expressions[0].values == ["front"]


BAD: list[tuple[str, str, str]] = [
    (
        "a misspelt field is refused (strict schema)",
        "kind: Service\nmetadata: {name: web}\nspec: {selectr: {app: web}}\n",
        'spec.selectr: unknown field; did you mean "selector"?',
    ),
    (
        "a selector operator the API server rejects",
        "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: rs}\n"
        "spec: {selector: {matchExpressions: [{key: a, operator: Near}]}}\n",
        'spec.selector.matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator',
    ),
    (
        "a bad label value in a Service selector",
        "kind: Service\nmetadata: {name: web}\nspec: {selector: {app: 'not ok'}}\n",
        'spec.selector: Invalid value: "not ok"',
    ),
    (
        "a name that is not a DNS subdomain",
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: DB}\nspec: {selector: {matchLabels: {a: b}}}\n",
        'metadata.name: Invalid value: "DB"',
    ),
]


@pytest.mark.parametrize(("case", "text", "want"), BAD, ids=[b[0] for b in BAD])
def test_bad_workload_manifests_name_document_and_field(case: str, text: str, want: str) -> None:
    with pytest.raises(manifests.ManifestError) as e:
        manifests.loads(text)
    assert "document 1" in str(e.value)
    assert want in str(e.value)


def test_embedded_cluster_feeds_the_core_and_deletes() -> None:
    c = Cluster([], [])
    embedded, core = c.berth.cluster, c.berth.core
    assert embedded.upsert_workloads(manifests.loads(WORKLOADS_YAML).workloads) == 4
    assert len(core.workloads) == 4
    assert [s.metadata.name for s in core.workloads.services("default")] == ["web"]
    assert embedded.delete_workloads([("Service", "default/web"), ("Service", "default/unknown")]) == 1
    assert core.workloads.services("default") == []


def test_embedded_batch_is_all_or_nothing() -> None:
    c = Cluster([], [])
    embedded, core = c.berth.cluster, c.berth.core
    good = model.Service(metadata=model.ObjectMeta(name="a"), spec=model.ServiceSpec(selector={"x": "y"}))
    twice = [good, model.Service(metadata=model.ObjectMeta(name="a"))]
    with pytest.raises(errors.InvalidArgument, match=r"workloads\[1\]\.metadata\.name: Duplicate value"):
        embedded.upsert_workloads(twice)
    bad = model.ReplicaSet(
        metadata=model.ObjectMeta(name="rs"),
        spec=model.SelectorSpec(
            selector=model.LabelSelector(match_expressions=[model.LabelSelectorRequirement(key="a", operator="Near")])
        ),
    )
    with pytest.raises(errors.InvalidArgument, match=r"^workloads\[1\]\.spec\.selector"):
        embedded.upsert_workloads([good, bad])
    assert len(core.workloads) == 0


def test_a_service_spreads_its_pods_by_hostname_with_the_system_defaults() -> None:
    """The same pods scored with and without the Service that selects them."""
    nodes = [make_node(n, labels={"kubernetes.io/hostname": n}) for n in ("n1", "n2")]
    placed = manifests.loads(
        "\n---\n".join(
            f"kind: Pod\nmetadata: {{name: w{i}, labels: {{app: web}}}}\n"
            f"spec: {{nodeName: n1, containers: [{{name: c}}]}}"
            for i in range(3)
        )
    ).pods
    incoming = manifests.loads("kind: Pod\nmetadata: {name: w, labels: {app: web}}\nspec: {containers: [{name: c}]}")
    c = Cluster(nodes, placed)
    plugin = PodTopologySpread(None, c.handle())
    assert scores(plugin, incoming.pods[0], c.snapshot) == {"n1": 0, "n2": 0}  # PreScore skips
    c.berth.cluster.upsert_workloads(manifests.loads(WORKLOADS_YAML).workloads)
    got = scores(plugin, incoming.pods[0], c.snapshot)
    assert got["n2"] == 100 and got["n1"] < got["n2"]
