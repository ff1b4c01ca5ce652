"""The chart as an operator runs it: the leader-only Services (gRPC and the
dashboard reach the Pod the Lease holder labels), the RBAC for that label,
the NetworkPolicy, the priority class and the NOTES that name it all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from berth.adapters.kubernetes.leaderlabel import LABEL, SAME_BERTH_LABELS
from tests.helm.conftest import CHART, NAMESPACE, RELEASE, HelmError, Render, run_helm, values_file
from tests.helm.test_chart import _notes

FULLNAME = f"{RELEASE}-berth"
SELECTOR = {
    "app.kubernetes.io/name": "berth",
    "app.kubernetes.io/instance": RELEASE,
    "app.kubernetes.io/component": "berth",
}


def pod_labels(r: Any) -> dict[str, str]:
    return dict(r.one("Deployment", FULLNAME)["spec"]["template"]["metadata"]["labels"])


@pytest.mark.parametrize(
    ("role", "leader_only"),
    [("scheduler", True), ("extender", False)],
    ids=["scheduler-role-selects-the-leader", "extender-role-selects-every-replica"],
)
def test_grpc_and_dashboard_services_select_the_leader_in_the_scheduler_role(
    render: Render, role: str, leader_only: bool
) -> None:
    r = render({"role": role})
    expected = {**SELECTOR, LABEL: "true"} if leader_only else SELECTOR
    for name, port in ((f"{FULLNAME}-leader", 50051), (f"{FULLNAME}-ui", 8889)):
        svc = r.one("Service", name)
        assert svc["spec"]["selector"] == expected, name
        assert [p["port"] for p in svc["spec"]["ports"]] == [port]
    # kube-scheduler may call any replica: the extender's Service selects them all.
    assert r.one("Service", FULLNAME)["spec"]["selector"] == SELECTOR
    # The leader finds the other replicas of its Berth by these labels (stale-label sweep).
    assert all(pod_labels(r).get(k) for k in SAME_BERTH_LABELS)
    assert LABEL not in pod_labels(r), "the template never sets the label: only the leader does"


def test_the_pods_know_their_name_and_namespace(render: Render) -> None:
    env = {
        e["name"]: e for e in render({}).one("Deployment", FULLNAME)["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}


def test_only_the_scheduler_role_may_patch_its_pods_and_only_in_its_namespace(render: Render) -> None:
    r = render({})
    role = r.one("Role", f"{FULLNAME}-leader-label")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]
    binding = r.one("RoleBinding", f"{FULLNAME}-leader-label")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": NAMESPACE}]
    assert not [o for o in render({"role": "extender"}).all("Role") if o["metadata"]["name"].endswith("leader-label")]


@pytest.mark.parametrize(
    ("values", "expected"),
    [({}, "system-cluster-critical"), ({"priorityClassName": ""}, None), ({"priorityClassName": "x"}, "x")],
    ids=["default", "none", "custom"],
)
def test_priority_class(render: Render, values: dict[str, Any], expected: str | None) -> None:
    spec = render(values).one("Deployment", FULLNAME)["spec"]["template"]["spec"]
    assert spec.get("priorityClassName") == expected


def _ingress_by_port(policy: dict[str, Any]) -> dict[Any, list[dict[str, Any]]]:
    return {rule["ports"][0]["port"]: rule["from"] for rule in policy["spec"]["ingress"]}


def test_no_network_policy_unless_enabled(render: Render) -> None:
    assert not render({}).all("NetworkPolicy")


@pytest.mark.parametrize("role", ["scheduler", "extender"])
def test_network_policy_lets_kube_scheduler_reach_the_extender_and_named_namespaces_the_rest(
    render: Render, role: str
) -> None:
    values = {
        "role": role,
        "networkPolicy": {"enabled": True, "grpcFrom": ["batch"], "dashboardFrom": ["ops"], "metricsFrom": ["mon"]},
    }
    policy = render(values).one("NetworkPolicy", FULLNAME)
    assert policy["spec"]["podSelector"] == {"matchLabels": SELECTOR}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    rules = _ingress_by_port(policy)
    assert set(rules) == {"http", "grpc", 8889}
    static_scheduler = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
        "podSelector": {"matchLabels": {"component": "kube-scheduler"}},
    }
    ns = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mon"}}}
    charts_scheduler = {
        "podSelector": {
            "matchLabels": {**SELECTOR, "app.kubernetes.io/component": "kube-scheduler"},
        }
    }
    assert rules["http"] == ([static_scheduler, charts_scheduler, ns] if role == "extender" else [static_scheduler, ns])
    assert rules["grpc"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "batch"}}}]
    assert rules[8889] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ops"}}}]


def test_network_policy_without_grpc_or_dashboard_namespaces_admits_only_kube_scheduler(render: Render) -> None:
    policy = render({"networkPolicy": {"enabled": True}}).one("NetworkPolicy", FULLNAME)
    assert set(_ingress_by_port(policy)) == {"http"}


def test_network_policy_selector_is_configurable_and_checked(render: Render) -> None:
    # Helm merges maps with the defaults: a default label is dropped with null.
    custom = {"matchLabels": {"component": None, "tier": "control-plane"}}
    values = {"networkPolicy": {"enabled": True, "kubeScheduler": {"podSelector": custom}}}
    [rule] = _ingress_by_port(render(values).one("NetworkPolicy", FULLNAME))["http"]
    assert rule["podSelector"] == {"matchLabels": {"tier": "control-plane"}}
    with pytest.raises(HelmError, match="networkPolicy"):
        render({"networkPolicy": {"enabled": True, "grpcFrom": "batch"}})


def test_helm_lint_with_the_network_policy(helm: Path, kube_version: str, tmp_path: Path) -> None:
    values = {"networkPolicy": {"enabled": True, "grpcFrom": ["batch"], "dashboardFrom": ["ops"]}}
    proc = run_helm(
        helm,
        "lint",
        str(CHART),
        "--strict",
        "--namespace",
        NAMESPACE,
        "--kube-version",
        kube_version,
        "--values",
        str(values_file(tmp_path, values)),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("role", ["scheduler", "extender"])
def test_notes_name_the_dashboard_and_leader_services(render: Render, tmp_path: Path, role: str) -> None:
    notes = _notes(render, tmp_path, {"role": role})
    assert f"kubectl -n {NAMESPACE} port-forward service/{FULLNAME}-ui 8889" in notes
    assert (f"{FULLNAME}-leader.{NAMESPACE}.svc:50051" in notes) == (role == "scheduler")
    assert ("get pods -l berth.dev/leader=true" in notes) == (role == "scheduler")
    assert "restart the Deployment" not in _notes(render, tmp_path, {"tls": {"enabled": True}})


def test_the_podgroup_crd_is_scheduler_plugins_and_can_be_left_out(render: Render) -> None:
    """`berth submit` of a gang creates scheduler-plugins PodGroups in
    Kubernetes mode: the chart ships their CRD (kept on uninstall)."""
    crd = render({}).one("CustomResourceDefinition", "podgroups.scheduling.x-k8s.io")
    assert crd["spec"]["group"] == "scheduling.x-k8s.io" and crd["spec"]["names"]["kind"] == "PodGroup"
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1"]
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert crd["metadata"]["labels"]["app.kubernetes.io/part-of"] == "berth"
    off = render({"podGroups": {"crd": {"install": False}}})
    assert not [c for c in off.all("CustomResourceDefinition") if c["spec"]["group"] == "scheduling.x-k8s.io"]


@pytest.mark.parametrize(
    ("values", "api_versions", "issued_by"),
    [
        # The extender role's default mTLS: cert-manager where the cluster serves it...
        ({"role": "extender"}, ("cert-manager.io/v1",), "cert-manager"),
        # ...a Secret the chart generates (a CA and one certificate for both sides) otherwise.
        ({"role": "extender"}, (), "chart"),
        # Said explicitly, either way.
        ({"role": "extender", "tls": {"certManager": {"enabled": False}}}, ("cert-manager.io/v1",), "chart"),
        # An existing Secret: nobody issues anything.
        ({"role": "extender", "tls": {"secretName": "mine"}}, ("cert-manager.io/v1",), "nobody"),
        # The scheduler role serves no extender verb: no TLS by default.
        ({}, ("cert-manager.io/v1",), "none"),
    ],
)
def test_who_issues_the_extender_certificates(
    render: Render, values: dict[str, Any], api_versions: tuple[str, ...], issued_by: str
) -> None:
    r = render(values, api_versions=api_versions)
    certificates = [c["metadata"]["name"] for c in r.all("Certificate")]
    secrets = [s["metadata"]["name"] for s in r.all("Secret") if s.get("type") == "kubernetes.io/tls"]
    assert (f"{FULLNAME}" in certificates) == (issued_by == "cert-manager")
    assert (secrets == [f"{FULLNAME}-tls"]) == (issued_by == "chart")
    if issued_by == "chart":
        [secret] = [s for s in r.all("Secret") if s.get("type") == "kubernetes.io/tls"]
        assert set(secret["data"]) == {"ca.crt", "tls.crt", "tls.key"}
        assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_network_policy_admits_a_host_network_kube_scheduler_by_its_nodes_addresses(render: Render) -> None:
    values = {"networkPolicy": {"enabled": True, "kubeSchedulerCIDRs": ["10.0.0.0/24", "fd00::/64"]}}
    rules = _ingress_by_port(render(values).one("NetworkPolicy", FULLNAME))["http"]
    assert [r for r in rules if "ipBlock" in r] == [
        {"ipBlock": {"cidr": "10.0.0.0/24"}},
        {"ipBlock": {"cidr": "fd00::/64"}},
    ]
    with pytest.raises(HelmError, match="kubeSchedulerCIDRs"):
        render({"networkPolicy": {"enabled": True, "kubeSchedulerCIDRs": ["control-plane"]}})


def test_the_network_policy_is_off_by_default_and_the_values_say_why() -> None:
    values = (CHART / "values.yaml").read_text()
    assert yaml.safe_load(values)["networkPolicy"]["enabled"] is False
    why = values[: values.index("networkPolicy:")].rsplit("\n\n", 1)[1]
    assert "hostNetwork" in why and "fail closed" in why and "port-forward" in why
