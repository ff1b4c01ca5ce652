"""The Queue CRD (queues.berth.dev, v1alpha1): the chart's template and the
plain copy in helm/crds cannot drift, the schema has exactly the fields of
a configuration queue, and — against the real API server — it accepts the
valid examples, rejects the invalid ones it can express, and prints the
columns it declares."""

from __future__ import annotations

import copy
import typing
from typing import Any

import msgspec
import pytest
import yaml

from berth.cluster import queues
from berth.quota import PreemptionSpec, QueueSpec
from tests.e2e.conftest import wait_for
from tests.e2e.controlplane.bed import Kube
from tests.helm.conftest import ROOT, Render

COPY = ROOT / "helm" / "crds" / "queues.berth.dev.yaml"
CRD_NAME = f"{queues.PLURAL}.{queues.GROUP}"


def the_copy() -> dict[str, Any]:
    out: dict[str, Any] = yaml.safe_load(COPY.read_text())
    return out


def schema(crd: dict[str, Any]) -> dict[str, Any]:
    [version] = crd["spec"]["versions"]
    out: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return out


def test_the_chart_installs_the_crd_of_the_plain_copy(render: Render) -> None:
    crd = render().one("CustomResourceDefinition", CRD_NAME)
    assert crd["spec"] == the_copy()["spec"], f"copy helm/berth/templates/queues-crd.yaml's spec to {COPY}"
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}


def test_the_crd_can_be_left_out(render: Render) -> None:
    r = render({"queues": {"crd": {"install": False}}})
    assert not [c for c in r.all("CustomResourceDefinition") if c["metadata"]["name"] == "queues.berth.dev"]
    # Berth still reads Queues wherever the CRD came from.
    assert ("berth.dev", "queues", "watch", ()) in {
        (g, res, v, tuple(rule.get("resourceNames", ())))
        for rule in r.one("ClusterRole")["rules"]
        for g in rule["apiGroups"]
        for res in rule["resources"]
        for v in rule["verbs"]
    }


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def test_the_spec_has_exactly_the_fields_of_a_configuration_queue() -> None:
    spec = schema(the_copy())["properties"]["spec"]["properties"]
    fields = {_camel(f) for f in QueueSpec.__struct_fields__} - {"name"}  # the name is metadata.name
    assert set(spec) == fields
    assert set(spec["preemption"]["properties"]) == {_camel(f) for f in PreemptionSpec.__struct_fields__}
    within = typing.get_type_hints(PreemptionSpec)["within_queue"]
    assert spec["preemption"]["properties"]["withinQueue"]["enum"] == list(typing.get_args(within))
    defaults = msgspec.to_builtins(PreemptionSpec())
    assert {k: v["default"] for k, v in spec["preemption"]["properties"].items()} == defaults
    assert spec["weight"]["default"] == QueueSpec(name="x").weight


# ---------------------------------------------------------------- the real API server

VALID: list[tuple[str, dict[str, Any]]] = [
    ("empty", {}),
    ("root", {"guaranteed": {"cpu": "8", "memory": "32Gi"}, "max": {"cpu": 16}, "weight": 2}),
    ("leaf", {"parent": "Research", "namespaces": ["team-a", "team-*", "t?"], "weight": 0.5}),
    ("preemption", {"preemption": {"reclaim": False, "withinQueue": "Never"}}),
    ("max-equal", {"guaranteed": {"nvidia.com/gpu": 4}, "max": {"nvidia.com/gpu": "4"}}),
    ("max-in-other-units", {"guaranteed": {"memory": "1Gi"}, "max": {"memory": "1100M"}}),
]

INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("weight-zero", {"weight": 0}, "spec.weight"),
    ("weight-negative", {"weight": -1}, "spec.weight"),
    ("weight-huge", {"weight": 2000000}, "spec.weight"),
    ("unknown-field", {"wieght": 2}, 'unknown field "spec.wieght"'),
    ("bad-quantity", {"guaranteed": {"cpu": "lots"}}, "spec.guaranteed.cpu"),
    ("negative-quantity", {"max": {"cpu": "-1"}}, "quantities must not be negative"),
    ("pods", {"guaranteed": {"pods": 10}}, "pods is not a quota resource"),
    ("max-below-guaranteed", {"guaranteed": {"cpu": "4"}, "max": {"cpu": "3500m"}}, "max must be at least guaranteed"),
    ("own-parent", {"parent": "{name}"}, "a queue cannot be its own parent"),
    ("bad-parent", {"parent": "no spaces"}, "spec.parent"),
    ("bad-namespace", {"namespaces": ["Team_A"]}, "spec.namespaces[0]"),
    ("within-queue", {"preemption": {"withinQueue": "Always"}}, "spec.preemption.withinQueue"),
]


def queue_object(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    spec = copy.deepcopy(spec)
    if spec.get("parent") == "{name}":
        spec["parent"] = name
    return {"apiVersion": queues.API_VERSION, "kind": queues.KIND, "metadata": {"name": name}, "spec": spec}


def install_crd(kube: Kube, render: Render) -> None:
    """The chart's CRD, created (or replaced) and served."""
    crd = render().one("CustomResourceDefinition", CRD_NAME)
    status, have = kube.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}")
    if status == 200:
        crd["metadata"]["resourceVersion"] = have["metadata"]["resourceVersion"]
        kube.ok("PUT", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}", crd)
    else:
        kube.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)

    def established() -> bool:
        got = kube.ok("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}")
        conds = {c["type"]: c["status"] for c in got.get("status", {}).get("conditions", [])}
        return (
            conds.get("Established") == "True" and kube.request("GET", f"/apis/{queues.API_VERSION}/queues")[0] == 200
        )

    wait_for("the Queue CRD to be served", established, 30)


@pytest.mark.e2e
def test_the_api_server_accepts_the_valid_queues_and_rejects_the_invalid(kube: Kube, render: Render) -> None:
    install_crd(kube, render)
    base = f"/apis/{queues.API_VERSION}/queues"
    for name, spec in VALID:
        status, out = kube.request("POST", base, queue_object(f"crd-ok-{name}", spec), dryRun="All")
        assert status == 201, (name, out)
    for name, spec, message in INVALID:
        status, out = kube.request(
            "POST", base, queue_object(f"crd-bad-{name}", spec), dryRun="All", fieldValidation="Strict"
        )
        assert status == 422 or (status == 400 and "unknown field" in str(out)), (name, status, out)
        assert message in out["message"], (name, out["message"])


@pytest.mark.e2e
def test_kubectl_get_prints_the_declared_columns(kube: Kube, render: Render) -> None:
    install_crd(kube, render)
    base = f"/apis/{queues.API_VERSION}/queues"
    name = "crd-columns"
    kube.request("DELETE", f"{base}/{name}")
    kube.ok("POST", base, queue_object(name, {"parent": "top", "weight": 3}))
    status = {
        "allocated": {"cpu": "1500m", "memory": "2Gi"},
        "pendingPods": 4,
        "dominantShare": 0.25,
        "fairShare": 0.5,
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": "Applied",
                "message": "generation 1 is applied",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "observedGeneration": 1,
            }
        ],
    }
    kube.ok("PATCH", f"{base}/{name}/status", {"status": status}, content_type="application/merge-patch+json")
    table = table_of(kube, f"{base}/{name}")
    crd = the_copy()
    [version] = crd["spec"]["versions"]
    declared = [c["name"] for c in version["additionalPrinterColumns"]]
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", *declared]
    [row] = table["rows"]
    cells = dict(zip(["Name", *declared], row["cells"], strict=True))
    assert {k: v for k, v in cells.items() if k != "Age"} == {
        "Name": name,
        "Parent": "top",
        "Weight": 3,
        "Accepted": "True",
        "CPU": "1500m",
        "Memory": "2Gi",
        "Pending": 4,
        "Share": 0.25,
        "Fair": 0.5,
    }
    priorities = {c["name"]: c.get("priority", 0) for c in table["columnDefinitions"]}
    assert {n for n, p in priorities.items() if p} == {"Memory", "Fair"}  # kubectl get -o wide
    kube.ok("DELETE", f"{base}/{name}")


def table_of(kube: Kube, path: str) -> dict[str, Any]:
    """GET as kubectl does for its table (``Accept: ...;as=Table``)."""
    import json
    import urllib.request

    req = urllib.request.Request(kube.server + path, method="GET")
    req.add_header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
    if kube.token:
        req.add_header("Authorization", f"Bearer {kube.token}")
    with urllib.request.urlopen(req, context=kube.ctx, timeout=30) as resp:
        out: dict[str, Any] = json.loads(resp.read())
    return out
