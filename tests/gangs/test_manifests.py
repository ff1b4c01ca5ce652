"""Embedded mode: manifest files may declare every PodGroup kind Berth reads."""

from __future__ import annotations

import pytest

from berth.cluster import manifests
from berth.cluster.documents import ManifestError

DOCS = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: spark-pi-pg}
spec: {minMember: 1, minResources: {cpu: "3"}, queue: default, priorityClassName: high}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: tf}
spec: {minMember: 3, minTaskMember: {ps: 1, worker: 2}}
---
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {name: pg-ray-0, namespace: team}
spec:
  minMember: 3
  queue: team-a
  subGroups: [{name: head, minMember: 1}, {name: workers, minMember: 2}]
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: g}
spec: {minMember: 2, scheduleTimeoutSeconds: 30}
"""


def test_volcano_kai_and_scheduler_plugins_podgroups_load_strictly() -> None:
    m = manifests.loads(DOCS, source="gangs.yaml")
    got = [(g.api_version, g.metadata.namespace, g.metadata.name) for g in m.pod_groups]
    assert got == [
        ("scheduling.volcano.sh/v1beta1", "default", "spark-pi-pg"),
        ("scheduling.volcano.sh/v1beta1", "default", "tf"),
        ("scheduling.run.ai/v2alpha2", "team", "pg-ray-0"),
        ("scheduling.x-k8s.io/v1alpha1", "default", "g"),
    ]
    assert m.pod_groups[1].spec.min_task_member == {"ps": 1, "worker": 2}
    assert [s.name for s in m.pod_groups[2].spec.sub_groups] == ["head", "workers"]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            "apiVersion: scheduling.example.com/v1\nkind: PodGroup\nmetadata: {name: x}\n",
            'apiVersion: Unsupported value: "scheduling.example.com/v1"',
        ),
        (
            "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: x}\n"
            "spec: {minTaskMember: {ps: -1}}\n",
            "spec.minTaskMember[ps]: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: x}\nspec: {minMember: 0}\n",
            "spec.minMember: Invalid value: 0: must be greater than or equal to 1",
        ),
    ],
)
def test_a_podgroup_berth_cannot_read_is_refused_naming_the_field(doc: str, message: str) -> None:
    with pytest.raises(ManifestError) as e:
        manifests.loads(doc, source="bad.yaml")
    assert message in str(e.value)


def test_a_volcano_resource_gang_may_ask_for_no_member() -> None:
    doc = (
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: x}\n"
        "spec: {minMember: 0, minResources: {cpu: '2'}}\n"
    )
    (group,) = manifests.loads(doc).pod_groups
    assert group.spec.min_member == 0
