"""The Helm chart (helm/berth): lint, render in every role and option, and
check what a cluster operator relies on — least-privilege RBAC, hardened pods,
probes, a BerthConfiguration Berth itself accepts, a kube-scheduler wired to
the Berth Service, a schema that rejects bad values — and, with the end-to-end
test bed, that the real kube-apiserver accepts every object (server-side
dry-run) and that Berth and kube-scheduler work under exactly the chart's RBAC.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from berth import config
from tests.e2e.controlplane.bed import free_port
from tests.helm.conftest import (
    CHART,
    NAMESPACE,
    RELEASE,
    ROOT,
    HelmError,
    Kube,
    Render,
    Rendered,
    find_binary,
    run_helm,
    unavailable,
    values_file,
)

FULLNAME = f"{RELEASE}-berth"
KS_NAME = f"{FULLNAME}-kube-scheduler"
CONFIG_DIR = "/etc/berth/config"
CONFIG_PATH = f"{CONFIG_DIR}/config.yaml"
TOKEN_SECRET = f"{FULLNAME}-grpc-token"

TLS = {"enabled": True}
MTLS = {"enabled": True, "clientAuth": True}

# Every combination the chart supports that changes what is rendered.
SCENARIOS: dict[str, dict[str, Any]] = {
    "scheduler": {},
    "extender": {"role": "extender"},
    "scheduler-tls": {"tls": TLS},
    "extender-tls": {"role": "extender", "tls": TLS},
    "extender-mtls": {"role": "extender", "tls": MTLS},
    "cert-manager": {"role": "extender", "tls": {**MTLS, "certManager": {"enabled": True}}},
    "cert-manager-issuer": {
        "tls": {
            "enabled": True,
            "certManager": {"enabled": True, "issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}},
        }
    },
    "servicemonitor": {"serviceMonitor": {"enabled": True}},
    "servicemonitor-tls": {"serviceMonitor": {"enabled": True}, "tls": TLS},
    "tuned": {
        "role": "extender",
        "schedulerName": "batch",
        "replicas": 3,
        "podAntiAffinity": "hard",
        "plugins": {"multiPoint": {"disabled": [{"name": "ImageLocality"}]}},
        "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}],
        "config": {"percentageOfNodesToScore": 50, "podMaxBackoffSeconds": 20, "gangScheduleTimeoutSeconds": 30},
        "extender": {"managedResources": ["example.com/gpu"], "passThroughUnmanaged": True, "weight": 5},
        "http": {"port": 9443},
        "grpc": {"port": 9090},
        "kubeScheduler": {"profileName": "gpu-aware"},
    },
}
EXTENDER_SCENARIOS = [k for k, v in SCENARIOS.items() if v.get("role") == "extender"]


def role_of(values: dict[str, Any]) -> str:
    return str(values.get("role", "scheduler"))


def raw_config(r: Rendered) -> dict[str, Any]:
    """The rendered BerthConfiguration document, as the ConfigMap holds it."""
    doc: dict[str, Any] = yaml.safe_load(r.one("ConfigMap", FULLNAME)["data"]["config.yaml"])
    return doc


def berth_config(r: Rendered) -> config.BerthConfiguration:
    """The rendered BerthConfiguration as Berth reads it (`berth serve --config`)."""
    return config.parse(raw_config(r))


def kube_scheduler_config(r: Rendered) -> dict[str, Any]:
    cm = r.one("ConfigMap", KS_NAME)
    doc: dict[str, Any] = yaml.safe_load(cm["data"]["config.yaml"])
    return doc


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"] if obj["kind"] == "Deployment" else obj["spec"]
    return spec


def container(r: Rendered, deployment: str = FULLNAME) -> dict[str, Any]:
    [c] = pod_spec(r.one("Deployment", deployment))["containers"]
    return dict(c)


def rules(obj: dict[str, Any]) -> set[tuple[str, str, str, tuple[str, ...]]]:
    """(apiGroup, resource, verb, resourceNames) for every permission a Role grants."""
    out = set()
    for rule in obj["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    out.add((group, resource, verb, tuple(rule.get("resourceNames", ()))))
    return out


def perms(*spec: str, names: Iterable[str] = ()) -> set[tuple[str, str, str, tuple[str, ...]]]:
    """perms("group/resource:verb,verb", ...); the core group is empty: "/pods/status:patch"."""
    out = set()
    for s in spec:
        what, verbs = s.split(":")
        group, resource = what.split("/", 1)
        for verb in verbs.split(","):
            out.add((group, resource, verb, tuple(names)))
    return out


# What Berth does against the API (the Kubernetes adapter's contract).
BERTH_EVERY_ROLE = perms(
    "/pods:get,list,watch",  # informer; get: the pod read back after a bind conflict
    "/nodes:list,watch",
    "/namespaces:list,watch",
    # Selectors for PodTopologySpread's default constraints.
    "/services:list,watch",
    "/replicationcontrollers:list,watch",
    "apps/replicasets:list,watch",
    "apps/statefulsets:list,watch",
    "policy/poddisruptionbudgets:list,watch",
    "scheduling.x-k8s.io/podgroups:list,watch",
    # The other gang dialects' PodGroups (docs/batch-on-kubernetes.md).
    "scheduling.volcano.sh/podgroups:list,watch",
    "scheduling.run.ai/podgroups:list,watch",
    "kueue.x-k8s.io/topologies:list,watch",  # Kueue's Topology objects (docs/topology.md)
    "topology.volcano.sh/hypernodes:list,watch",  # Volcano's HyperNode objects (docs/topology.md)
    # The Workload API (GenericWorkload, docs/workload-api.md).
    "scheduling.k8s.io/podgroups:list,watch",
    "scheduling.k8s.io/workloads:list,watch",
    "berth.dev/queues:get,list,watch",  # Queue objects (docs/queues.md)
    # The volume plugins' informers.
    "/persistentvolumes:list,watch",
    "/persistentvolumeclaims:list,watch",
    "storage.k8s.io/storageclasses:list,watch",
    "storage.k8s.io/csinodes:list,watch",
    "storage.k8s.io/csidrivers:list,watch",
    "storage.k8s.io/csistoragecapacities:list,watch",
    # DynamicResources' informers.
    "resource.k8s.io/deviceclasses:list,watch",
    "resource.k8s.io/resourceslices:list,watch",
    "resource.k8s.io/resourceclaims:list,watch",
    "resource.k8s.io/resourceclaimtemplates:list,watch",
    "resource.k8s.io/devicetaintrules:list,watch",  # served from 1.37 (DRADeviceTaints)
    "/pods/binding:create",
    # Who calls the gRPC API and the dashboard (berth.access: system:auth-delegator's rules).
    "authentication.k8s.io/tokenreviews:create",
    "authorization.k8s.io/subjectaccessreviews:create",
    "/events:create,patch",
    "events.k8s.io/events:create,patch",
)
BERTH_SCHEDULER_ONLY = perms(
    "/pods:delete",
    "/pods/eviction:create",
    "/pods/status:patch,update",
    # VolumeBinding's PreBind: a PV's claimRef, a claim's selected-node.
    "/persistentvolumes:patch",
    "/persistentvolumeclaims:patch",
    # DynamicResources' PreBind, Unreserve, PostFilter: merge patches; get after a conflict;
    # create / delete the claim for extended resources backed by DRA.
    "resource.k8s.io/resourceclaims:create,delete,get,patch",
    "resource.k8s.io/resourceclaims/status:patch",
    # The leader writes the Queue objects' status.
    "berth.dev/queues/status:patch,update",
    # PodGroupInitiallyScheduled (the Workload API).
    "scheduling.k8s.io/podgroups/status:patch",
    # PodGroup phases (berth/scheduling/gang_status.py): scheduler-plugins' through
    # /status, Volcano's on the object (its CRD has no status subresource).
    "scheduling.x-k8s.io/podgroups/status:patch",
    "scheduling.volcano.sh/podgroups:patch",
)


# ---------------------------------------------------------------- lint


@pytest.mark.parametrize("scenario", ["scheduler", "extender", "extender-mtls", "cert-manager", "servicemonitor-tls"])
def test_helm_lint(helm: Path, kube_version: str, tmp_path: Path, scenario: str) -> None:
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
        str(values_file(tmp_path, SCENARIOS[scenario])),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout


# ---------------------------------------------------------------- what is rendered


def test_scheduler_role_renders_berth_only(render: Render) -> None:
    r = render(SCENARIOS["scheduler"])
    assert r.kinds() == {
        ("ServiceAccount", FULLNAME),
        ("ConfigMap", FULLNAME),
        ("ClusterRole", FULLNAME),
        ("ClusterRoleBinding", FULLNAME),
        ("Role", f"{FULLNAME}-leader-election"),
        ("RoleBinding", f"{FULLNAME}-leader-election"),
        ("Service", FULLNAME),
        ("Deployment", FULLNAME),
        ("PodDisruptionBudget", FULLNAME),
        ("Pod", f"{FULLNAME}-test"),
        ("Secret", TOKEN_SECRET),
        ("CustomResourceDefinition", "queues.berth.dev"),  # queues.crd.install
        ("CustomResourceDefinition", "podgroups.scheduling.x-k8s.io"),  # podGroups.crd.install
        # The leader-only Services (gRPC, dashboard) and the Role to label the leader's Pod.
        ("Service", f"{FULLNAME}-leader"),
        ("Service", f"{FULLNAME}-ui"),
        ("Role", f"{FULLNAME}-leader-label"),
        ("RoleBinding", f"{FULLNAME}-leader-label"),
    }
    for doc in r.docs:
        if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"):
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["metadata"]


def test_extender_role_adds_a_kube_scheduler_and_drops_the_lease(render: Render) -> None:
    r = render(SCENARIOS["extender"])
    assert r.kinds() == {
        ("ServiceAccount", FULLNAME),
        ("ConfigMap", FULLNAME),
        ("ClusterRole", FULLNAME),
        ("ClusterRoleBinding", FULLNAME),
        ("Service", FULLNAME),
        ("Deployment", FULLNAME),
        ("PodDisruptionBudget", FULLNAME),
        ("Pod", f"{FULLNAME}-test"),
        ("Secret", TOKEN_SECRET),
        ("CustomResourceDefinition", "queues.berth.dev"),  # queues.crd.install
        ("CustomResourceDefinition", "podgroups.scheduling.x-k8s.io"),  # podGroups.crd.install
        ("Service", f"{FULLNAME}-leader"),
        ("Service", f"{FULLNAME}-ui"),
        # kube-scheduler calls the verbs over mTLS by default: a generated CA and certificate.
        ("Secret", f"{FULLNAME}-tls"),
        ("ServiceAccount", KS_NAME),
        ("ConfigMap", KS_NAME),
        ("ClusterRoleBinding", KS_NAME),
        ("ClusterRoleBinding", f"{FULLNAME}-volume-scheduler"),
        ("RoleBinding", f"{KS_NAME}-{NAMESPACE}"),
        ("Role", KS_NAME),
        ("RoleBinding", KS_NAME),
        ("Deployment", KS_NAME),
        ("PodDisruptionBudget", KS_NAME),
    }


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_object_is_labelled_and_named_for_the_release(render: Render, scenario: str) -> None:
    for doc in render(SCENARIOS[scenario]).docs:
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/part-of"] == "berth"
        if doc["kind"] != "CustomResourceDefinition":  # named <plural>.<group> by Kubernetes
            assert doc["metadata"]["name"].startswith(FULLNAME), doc["metadata"]["name"]
        assert len(doc["metadata"]["name"]) <= 63


# ---------------------------------------------------------------- BerthConfiguration


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rendered_berth_configuration_is_accepted_by_berth(render: Render, scenario: str) -> None:
    values = SCENARIOS[scenario]
    r = render(values)
    cfg = berth_config(r)  # berth.config.parse: what `berth serve --config` runs
    scheduler = role_of(values) == "scheduler"
    if values == {"role": "extender"}:
        # By default only kube-scheduler's client certificate opens the extender verbs.
        assert cfg.http.tls is not None and cfg.http.tls.client_ca_file
        assert not cfg.http.auth.allow_unauthenticated
    assert cfg.run_scheduling_loop is scheduler
    assert cfg.leader_election.leader_elect is scheduler
    assert cfg.leader_election.resource_namespace == NAMESPACE
    assert cfg.leader_election.resource_name == FULLNAME
    assert cfg.http.host == cfg.grpc.host == "0.0.0.0"
    assert cfg.http.port == values.get("http", {}).get("port", 8888)
    assert cfg.grpc.port == values.get("grpc", {}).get("port", 50051)
    name = values.get("schedulerName", "berth")
    assert [p.scheduler_name for p in cfg.profiles] == [name]
    assert cfg.extender.profile == name
    assert cfg.extender.url_prefix == "/scheduler"
    # A second scheduler exposes no extender verb; the extender role needs them.
    assert cfg.extender.enabled is not scheduler
    assert not (scheduler and cfg.http.auth.allow_unauthenticated)


def test_tuned_values_reach_the_configuration(render: Render) -> None:
    cfg = berth_config(render(SCENARIOS["tuned"]))
    assert cfg.percentage_of_nodes_to_score == 50
    assert cfg.pod_max_backoff_seconds == 20
    assert cfg.gang_schedule_timeout_seconds == 30
    [profile] = cfg.profiles
    assert [p.name for p in profile.plugins.multi_point.disabled] == ["ImageLocality"]
    assert profile.plugin_config[0].args == {"scoringStrategy": {"type": "MostAllocated"}}
    assert cfg.extender.managed_resources == ["example.com/gpu"]
    assert cfg.extender.pass_through_unmanaged is True


def test_full_profiles_list_is_passed_through(render: Render) -> None:
    profiles = [{"schedulerName": "berth"}, {"schedulerName": "berth-binpack", "randomizeTopN": 3}]
    cfg = berth_config(render({"profiles": profiles}))
    assert [p.scheduler_name for p in cfg.profiles] == ["berth", "berth-binpack"]
    assert cfg.profiles[1].randomize_top_n == 3


def test_values_config_accepts_exactly_berths_own_fields() -> None:
    """`config` takes every BerthConfiguration field the chart does not own, by
    its real (msgspec-encoded) name; a field added to or renamed in
    berth/config.py must be reflected in values.schema.json."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    chart_owned = {
        *("apiVersion", "kind", "profiles", "runSchedulingLoop"),
        *("http", "grpc", "ui", "extender", "leaderElection"),
        # Standalone Berth's store: in Kubernetes mode the API server is the only store.
        "state",
    }
    fields = {f.encode_name for f in msgspec.structs.fields(config.BerthConfiguration)}
    assert set(schema["properties"]["config"]["properties"]) == fields - chart_owned


@pytest.mark.parametrize("scenario", ["scheduler-tls", "extender-mtls"])
def test_tls_files_are_the_mounted_secret(render: Render, scenario: str) -> None:
    values = SCENARIOS[scenario]
    r = render(values)
    cfg = raw_config(r)
    mounts = {m["name"]: m for m in container(r)["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec(r.one("Deployment", FULLNAME))["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == f"{FULLNAME}-tls"
    tls_dir = mounts["tls"]["mountPath"]
    want = {"certFile": f"{tls_dir}/tls.crt", "keyFile": f"{tls_dir}/tls.key"}
    if values["tls"].get("clientAuth"):
        want["clientCAFile"] = f"{tls_dir}/ca.crt"
    assert cfg["http"]["tls"] == cfg["grpc"]["tls"] == want


def test_no_tls_means_no_secret(render: Render) -> None:
    r = render(SCENARIOS["scheduler"])
    cfg = raw_config(r)
    assert "tls" not in cfg["http"] and "tls" not in cfg["grpc"]
    assert "tls" not in {v["name"] for v in pod_spec(r.one("Deployment", FULLNAME))["volumes"]}


def test_config_checksum_rolls_the_pods_only_when_the_configuration_changes(render: Render) -> None:
    def checksum(values: dict[str, Any], name: str = FULLNAME) -> str:
        d = render(values).one("Deployment", name)
        return str(d["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    base = checksum({})
    assert re.fullmatch(r"[0-9a-f]{64}", base)
    assert checksum({}) == base
    assert checksum({"replicas": 3, "resources": {"requests": {"cpu": "1"}}}) == base
    assert checksum({"config": {"podMaxBackoffSeconds": 20}}) != base
    assert checksum({"pluginConfig": [{"name": "NodeResourcesFit", "args": {}}]}) != base
    assert checksum({"tls": TLS}) != base
    # Queues are hot-reloaded from the mounted file (berth/reload.py): no rollout.
    assert checksum({"config": {"queues": [{"name": "research", "max": {"cpu": "8"}}]}}) == base
    # The kube-scheduler's own configuration rolls its own pods.
    ks = checksum({"role": "extender"}, KS_NAME)
    assert checksum({"role": "extender", "extender": {"weight": 3}}, KS_NAME) != ks
    assert checksum({"role": "extender", "replicas": 5}, KS_NAME) == ks


# ---------------------------------------------------------------- the Berth Deployment


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_berth_runs_with_the_rendered_configuration(render: Render, scenario: str) -> None:
    r = render(SCENARIOS[scenario])
    c = container(r)
    assert [*c["command"], *c["args"]] == ["berth", "serve", "--config", CONFIG_PATH, "--in-cluster"]
    # The whole volume, never a subPath (a subPath mount never sees a ConfigMap update).
    [mount] = [m for m in c["volumeMounts"] if m["name"] == "config"]
    assert mount == {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}
    volumes = {v["name"]: v for v in pod_spec(r.one("Deployment", FULLNAME))["volumes"]}
    assert volumes["config"]["configMap"]["name"] == FULLNAME
    cfg = raw_config(r)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"http": cfg["http"]["port"], "grpc": cfg["grpc"]["port"]}
    svc = r.one("Service", FULLNAME)
    assert {p["name"]: p["port"] for p in svc["spec"]["ports"]} == ports
    assert {p["targetPort"] for p in svc["spec"]["ports"]} == {"http", "grpc"}
    assert pod_spec(r.one("Deployment", FULLNAME))["serviceAccountName"] == FULLNAME
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"


def test_replicas_spread_and_disruption_budget(render: Render) -> None:
    r = render({})
    dep = r.one("Deployment", FULLNAME)
    selector = dep["spec"]["selector"]["matchLabels"]
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["template"]["metadata"]["labels"].items() >= selector.items()
    [term] = pod_spec(dep)["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == selector
    pdb = r.one("PodDisruptionBudget", FULLNAME)
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector}}
    assert r.one("Service", FULLNAME)["spec"]["selector"] == selector
    # The helm test Pod must not be mistaken for a Berth replica.
    test_labels = r.one("Pod", f"{FULLNAME}-test")["metadata"]["labels"]
    assert not test_labels.items() >= selector.items()

    assert dep["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    hard = render(SCENARIOS["tuned"]).one("Deployment", FULLNAME)
    assert hard["spec"]["replicas"] == 3
    # One replica per node required: a surge pod could find no node.
    assert hard["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}
    [req] = pod_spec(hard)["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert req["labelSelector"]["matchLabels"] == selector
    assert (
        render({"podDisruptionBudget": {"enabled": True, "minAvailable": 1}}).one("PodDisruptionBudget", FULLNAME)[
            "spec"
        ]["minAvailable"]
        == 1
    )
    assert not render({"podDisruptionBudget": {"enabled": False}}).all("PodDisruptionBudget")


def test_resources_have_requests_and_a_memory_limit_but_no_cpu_limit(render: Render) -> None:
    # kube-scheduler's static manifests request CPU and set no CPU limit (CFS throttling).
    for scenario in ("scheduler", "extender"):
        r = render(SCENARIOS[scenario])
        for dep in r.all("Deployment"):
            for c in pod_spec(dep)["containers"]:
                assert {"cpu", "memory"} <= set(c["resources"]["requests"]), dep["metadata"]["name"]
                assert set(c["resources"]["limits"]) == {"memory"}, dep["metadata"]["name"]


def _user_of_the_image() -> int:
    [user] = re.findall(r"^USER\s+(\d+)(?::\d+)?\s*$", (ROOT / "Dockerfile").read_text(), flags=re.M)
    return int(user)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_pod_is_hardened(render: Render, scenario: str) -> None:
    r = render(SCENARIOS[scenario])
    pods = [*r.all("Deployment"), *r.all("Pod")]
    assert pods
    for obj in pods:
        spec = pod_spec(obj)
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        psc = spec["securityContext"]
        assert psc["runAsNonRoot"] is True, where
        assert psc["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert psc["runAsUser"] == _user_of_the_image(), where
        assert not spec.get("hostNetwork") and not spec.get("hostPID"), where
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["runAsNonRoot"] is True, where
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["capabilities"] == {"drop": ["ALL"]}, where
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, where
            assert not sc.get("privileged"), where
            image = c["image"]
            assert ":" in image.rsplit("/", 1)[-1] or "@sha256:" in image, f"{where}: unpinned image {image}"
            assert not image.endswith(":latest"), where


@pytest.mark.parametrize("scenario", ["scheduler", "scheduler-tls"])
def test_probes_ask_healthz_and_readyz(render: Render, scenario: str) -> None:
    r = render(SCENARIOS[scenario])
    c = container(r)
    scheme = "HTTPS" if SCENARIOS[scenario].get("tls") else "HTTP"
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http", "scheme": scheme}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http", "scheme": scheme}
    for probe in (c["livenessProbe"], c["readinessProbe"]):
        assert probe["periodSeconds"] > 0 and probe["timeoutSeconds"] > 0


def test_probes_under_mtls_present_the_pods_certificate(render: Render) -> None:
    """The kubelet cannot present a client certificate, so with mTLS the probe
    runs in the container: python with the mounted certificate."""
    r = render(SCENARIOS["extender-mtls"])
    c = container(r)
    tls, port = raw_config(r)["http"]["tls"], raw_config(r)["http"]["port"]
    assert tls["clientCAFile"]
    for probe, path in ((c["livenessProbe"], "/healthz"), (c["readinessProbe"], "/readyz")):
        cmd = probe["exec"]["command"]
        assert cmd[:2] == ["python", "-c"]
        code = cmd[2]
        compile(code, "probe", "exec")
        assert f"https://127.0.0.1:{port}{path}" in code
        for f in (tls["certFile"], tls["keyFile"], tls["clientCAFile"]):
            assert f in code


# ---------------------------------------------------------------- RBAC


def _no_wildcards(r: Rendered) -> None:
    for role in [*r.all("ClusterRole"), *r.all("Role")]:
        for rule in role["rules"]:
            for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(key, []), f"{role['metadata']['name']}: wildcard in {key}"
            assert "nonResourceURLs" not in rule


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rbac_has_no_wildcards_and_binds_the_pods_service_accounts(render: Render, scenario: str) -> None:
    r = render(SCENARIOS[scenario])
    _no_wildcards(r)
    sas = {d["metadata"]["name"] for d in r.all("ServiceAccount")}
    for binding in [*r.all("ClusterRoleBinding"), *r.all("RoleBinding")]:
        for subject in binding["subjects"]:
            assert subject == {"kind": "ServiceAccount", "name": subject["name"], "namespace": NAMESPACE}
            assert subject["name"] in sas
    for dep in r.all("Deployment"):
        assert pod_spec(dep)["serviceAccountName"] in sas


def test_scheduler_role_rbac_is_exactly_what_berth_does(render: Render) -> None:
    r = render(SCENARIOS["scheduler"])
    assert rules(r.one("ClusterRole", FULLNAME)) == BERTH_EVERY_ROLE | BERTH_SCHEDULER_ONLY
    binding = r.one("ClusterRoleBinding", FULLNAME)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": FULLNAME}
    # The Lease: create cannot be limited by name; get/update only this one.
    le = raw_config(r)["leaderElection"]
    assert le["leaderElect"] is True
    lease = r.one("Role", f"{FULLNAME}-leader-election")
    assert lease["metadata"]["namespace"] == le["resourceNamespace"]
    assert rules(lease) == perms("coordination.k8s.io/leases:create") | perms(
        "coordination.k8s.io/leases:get,update", names=[le["resourceName"]]
    )
    rb = r.one("RoleBinding", f"{FULLNAME}-leader-election")
    assert rb["roleRef"]["name"] == lease["metadata"]["name"]


def test_extender_role_rbac_leaves_preemption_status_and_leases_to_kube_scheduler(render: Render) -> None:
    r = render(SCENARIOS["extender"])
    assert rules(r.one("ClusterRole", FULLNAME)) == BERTH_EVERY_ROLE
    assert raw_config(r)["leaderElection"]["leaderElect"] is False
    # kube-scheduler: the standard roles, its authentication config, its own Lease.
    ks_roles = {b["roleRef"]["name"]: b for b in r.all("ClusterRoleBinding") if b["subjects"][0]["name"] == KS_NAME}
    assert set(ks_roles) == {"system:kube-scheduler", "system:volume-scheduler"}
    auth = r.one("RoleBinding", f"{KS_NAME}-{NAMESPACE}")
    assert auth["metadata"]["namespace"] == "kube-system"
    assert auth["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "extension-apiserver-authentication-reader",
    }
    le = kube_scheduler_config(r)["leaderElection"]
    lease = r.one("Role", KS_NAME)
    assert lease["metadata"]["namespace"] == le["resourceNamespace"] == NAMESPACE
    assert rules(lease) == perms("coordination.k8s.io/leases:create") | perms(
        "coordination.k8s.io/leases:get,update", names=[le["resourceName"]]
    )
    assert le["resourceName"] != "kube-scheduler"  # never the cluster scheduler's lease


def test_rbac_can_be_left_to_the_operator(render: Render) -> None:
    r = render({"role": "extender", "rbac": {"create": False}})
    assert not r.all("ClusterRole") and not r.all("Role")
    assert not r.all("ClusterRoleBinding") and not r.all("RoleBinding")


# ---------------------------------------------------------------- extender role: kube-scheduler


@pytest.mark.parametrize("scenario", EXTENDER_SCENARIOS)
def test_kube_scheduler_profile_calls_the_berth_service(render: Render, scenario: str) -> None:
    values = SCENARIOS[scenario]
    r = render(values)
    ksc = kube_scheduler_config(r)
    cfg = raw_config(r)
    assert ksc["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert ksc["kind"] == "KubeSchedulerConfiguration"
    profile_name = values.get("kubeScheduler", {}).get("profileName", "berth-extender")
    assert ksc["profiles"] == [{"schedulerName": profile_name}]
    assert profile_name != "default-scheduler"
    [ext] = ksc["extenders"]
    url = urlsplit(ext["urlPrefix"])
    svc = r.one("Service", FULLNAME)
    # The extender role's default: kube-scheduler calls Berth over mTLS.
    tls_values = values.get("tls", {})
    tls = bool(tls_values.get("enabled", True))
    mtls = tls and bool(tls_values.get("clientAuth", "enabled" not in tls_values))
    assert url.scheme == ("https" if tls else "http")
    assert url.hostname == f"{svc['metadata']['name']}.{NAMESPACE}.svc"
    [http_port] = [p["port"] for p in svc["spec"]["ports"] if p["name"] == "http"]
    assert url.port == http_port == cfg["http"]["port"]
    assert url.path == cfg["extender"]["urlPrefix"]
    assert (ext["filterVerb"], ext["prioritizeVerb"], ext["preemptVerb"], ext["bindVerb"]) == (
        "filter",
        "prioritize",
        "preempt",
        "bind",
    )
    assert ext["nodeCacheCapable"] is True
    assert ext["weight"] == values.get("extender", {}).get("weight", 1)
    assert ext["enableHTTPS"] is tls
    assert ext["ignorable"] is False
    assert [m["name"] for m in ext.get("managedResources", [])] == cfg["extender"]["managedResources"]
    assert all(m["ignoredByScheduler"] is True for m in ext.get("managedResources", []))
    assert cfg["runSchedulingLoop"] is False  # Berth never competes with the kube-scheduler it extends

    dep = r.one("Deployment", KS_NAME)
    spec = pod_spec(dep)
    [c] = spec["containers"]
    assert spec["serviceAccountName"] == KS_NAME
    assert c["command"][0] == "kube-scheduler"
    [cfg_arg] = [a for a in c["command"] if a.startswith("--config=")]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert cfg_arg == f"--config={mounts['config']}/config.yaml"
    assert volumes["config"]["configMap"]["name"] == KS_NAME
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}
    if tls:
        tls_dir = mounts["berth-tls"]
        assert volumes["berth-tls"]["secret"]["secretName"] == f"{FULLNAME}-tls"
        want = {"caFile": f"{tls_dir}/ca.crt"}
        if mtls:
            want |= {"certFile": f"{tls_dir}/tls.crt", "keyFile": f"{tls_dir}/tls.key"}
        assert ext["tlsConfig"] == want
    else:
        assert "tlsConfig" not in ext and "berth-tls" not in volumes


def test_kube_scheduler_image_follows_the_clusters_release(render: Render, kube_version: str) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    r = render({"role": "extender"})
    [c] = pod_spec(r.one("Deployment", KS_NAME))["containers"]
    assert c["image"] == f"registry.k8s.io/kube-scheduler:{kube_version}"
    assert chart["annotations"]["berth.dev/tested-kubernetes-version"] == kube_version
    custom = render({"role": "extender", "kubeScheduler": {"image": {"repository": "mirror/ks", "tag": "v1.36.1"}}})
    [c] = pod_spec(custom.one("Deployment", KS_NAME))["containers"]
    assert c["image"] == "mirror/ks:v1.36.1"


@pytest.mark.parametrize(
    ("cluster", "tag"),
    [("v1.35.4", "v1.35.4"), ("v1.36.3", "v1.36.3"), ("v1.37.2-eks-1a2b3c", "v1.37.2"), ("v1.37.0+k3s1", "v1.37.0")],
)
def test_kube_scheduler_tag_is_the_clusters_release_without_a_vendor_suffix(
    helm: Path, tmp_path: Path, cluster: str, tag: str
) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"role": "extender"}))
    proc = run_helm(
        helm,
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--kube-version",
        cluster,
        "--values",
        str(values),
    )
    assert proc.returncode == 0, proc.stderr
    images = re.findall(r"image: \"?(registry\.k8s\.io/kube-scheduler:[^\"\s]+)", proc.stdout)
    assert images == [f"registry.k8s.io/kube-scheduler:{tag}"]


@pytest.mark.parametrize("cluster", ["v1.34.4", "v1.29.0"])
def test_chart_refuses_clusters_older_than_the_oldest_supported_release(helm: Path, cluster: str) -> None:
    proc = run_helm(helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--kube-version", cluster)
    assert proc.returncode != 0
    assert "is incompatible with Kubernetes" in proc.stderr


# ---------------------------------------------------------------- TLS, cert-manager, ServiceMonitor


def test_cert_manager_issues_the_secret_berth_mounts(render: Render) -> None:
    r = render(SCENARIOS["cert-manager"])
    cert = r.one("Certificate", FULLNAME)
    assert cert["apiVersion"] == "cert-manager.io/v1"
    assert cert["spec"]["secretName"] == f"{FULLNAME}-tls"
    assert {f"{FULLNAME}.{NAMESPACE}.svc", FULLNAME} <= set(cert["spec"]["dnsNames"])
    assert urlsplit(kube_scheduler_config(r)["extenders"][0]["urlPrefix"]).hostname in cert["spec"]["dnsNames"]
    assert {"server auth", "client auth"} <= set(cert["spec"]["usages"])
    # No issuer given: a self-signed CA made for the release.
    ca = r.one("Certificate", f"{FULLNAME}-ca")
    assert ca["spec"]["isCA"] is True
    assert r.one("Issuer", f"{FULLNAME}-selfsigned")["spec"] == {"selfSigned": {}}
    assert r.one("Issuer", f"{FULLNAME}-ca")["spec"] == {"ca": {"secretName": ca["spec"]["secretName"]}}
    assert cert["spec"]["issuerRef"]["name"] == f"{FULLNAME}-ca"


def test_cert_manager_with_the_operators_issuer(render: Render) -> None:
    r = render(SCENARIOS["cert-manager-issuer"])
    assert not r.all("Issuer")
    assert [c["metadata"]["name"] for c in r.all("Certificate")] == [FULLNAME]
    assert r.one("Certificate")["spec"]["issuerRef"] == {
        "name": "corp-ca",
        "kind": "ClusterIssuer",
        "group": "cert-manager.io",
    }


def test_existing_secret_is_used_as_is(render: Render) -> None:
    r = render({"tls": {"enabled": True, "secretName": "my-certs"}})
    assert not r.all("Certificate")
    volumes = {v["name"]: v for v in pod_spec(r.one("Deployment", FULLNAME))["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "my-certs"


@pytest.mark.parametrize("scenario", ["servicemonitor", "servicemonitor-tls"])
def test_service_monitor_scrapes_metrics(render: Render, scenario: str) -> None:
    r = render(SCENARIOS[scenario])
    sm = r.one("ServiceMonitor", FULLNAME)
    svc = r.one("Service", FULLNAME)
    assert svc["metadata"]["labels"].items() >= sm["spec"]["selector"]["matchLabels"].items()
    [ep] = sm["spec"]["endpoints"]
    assert (ep["port"], ep["path"]) == ("http", "/metrics")
    if SCENARIOS[scenario].get("tls"):
        assert ep["scheme"] == "https"
        assert ep["tlsConfig"]["ca"]["secret"] == {"name": f"{FULLNAME}-tls", "key": "ca.crt"}
        assert ep["tlsConfig"]["serverName"] == f"{FULLNAME}.{NAMESPACE}.svc"
    else:
        assert ep["scheme"] == "http" and "tlsConfig" not in ep
    assert not render({}).all("ServiceMonitor")


# ---------------------------------------------------------------- helm test, NOTES


@pytest.mark.parametrize("scenario", ["scheduler", "extender-mtls"])
def test_helm_test_pod_asks_the_service(render: Render, scenario: str) -> None:
    values = SCENARIOS[scenario]
    r = render(values)
    pod = r.one("Pod", f"{FULLNAME}-test")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert pod["spec"]["restartPolicy"] == "Never"
    [c] = pod["spec"]["containers"]
    assert c["image"] == "curlimages/curl:8.11.1"
    args = c["args"]
    scheme = "https" if values.get("tls") else "http"
    base = f"{scheme}://{FULLNAME}.{NAMESPACE}.svc:{raw_config(r)['http']['port']}"
    assert {f"{base}/healthz", f"{base}/readyz"} <= set(args)
    assert "--fail" in args and "--fail-early" in args
    if values.get("tls"):
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        assert args[args.index("--cacert") + 1] == f"{mounts['tls']}/ca.crt"
        assert args[args.index("--cert") + 1] == f"{mounts['tls']}/tls.crt"
    custom = render({"test": {"image": {"repository": "curlimages/curl", "digest": "sha256:" + "a" * 64}}})
    [c] = custom.one("Pod", f"{FULLNAME}-test")["spec"]["containers"]
    assert c["image"] == "curlimages/curl@sha256:" + "a" * 64


def _notes(render: Render, tmp_path: Path, values: dict[str, Any]) -> str:
    """`helm template` does not print NOTES.txt: render it through tpl in a copy of the chart."""
    chart = tmp_path / "berth"
    if not chart.exists():
        shutil.copytree(CHART, chart)
        (chart / "templates" / "NOTES.txt").rename(chart / "notes.txt")
        (chart / "templates" / "zz-notes.yaml").write_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-berth-notes\n"
            "  labels: {app.kubernetes.io/instance: x, app.kubernetes.io/managed-by: x, app.kubernetes.io/part-of: x}\n"
            'data:\n  notes: {{ tpl (.Files.Get "notes.txt") . | toJson }}\n'
        )
    return str(render(values, chart=chart).one("ConfigMap", f"{FULLNAME}-notes")["data"]["notes"])


def test_notes_tell_each_role_how_pods_opt_in(render: Render, tmp_path: Path) -> None:
    sched = _notes(render, tmp_path, {})
    assert "schedulerName: berth" in sched
    assert f"get lease {FULLNAME}" in sched
    # The batch API: the leader-only Service, a Kubernetes token, the caller's RBAC.
    assert f"port-forward service/{FULLNAME}-leader 50051" in sched
    assert "create token" in sched and "berth submit -f pods.yaml" in sched
    assert "with the caller's own token" in sched
    ext = _notes(render, tmp_path, SCENARIOS["tuned"])
    assert "schedulerName: gpu-aware" in ext
    assert f"https://{FULLNAME}.{NAMESPACE}.svc:9443/scheduler" in ext  # mTLS by default
    assert "example.com/gpu" in ext
    assert "runSchedulingLoop: false" in ext
    mtls = _notes(render, tmp_path, SCENARIOS["extender-mtls"])
    assert "mTLS" in mtls and "https://" in mtls


# ---------------------------------------------------------------- values.schema.json


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"role": "both"}, 'role: role must be one of the following: "scheduler", "extender"'),
        ({"replicas": -1}, "replicas: Must be greater than or equal to 1"),
        ({"replicas": "two"}, "replicas: Invalid type. Expected: integer, given: string"),
        ({"replica": 3}, "Additional property replica is not allowed"),
        ({"schedulerName": "Berth_1"}, "schedulerName: Does not match pattern"),
        ({"http": {"port": 70000}}, "http.port: Must be less than or equal to 65535"),
        ({"config": {"http": {"port": 1}}}, "config: Additional property http is not allowed"),
        ({"config": {"percentageOfNodesToScore": 101}}, "config.percentageOfNodesToScore: Must be less than"),
        ({"config": {"podMaxBackofSeconds": 5}}, "config: Additional property podMaxBackofSeconds is not allowed"),
        ({"extender": {"urlPrefix": "scheduler"}}, "extender.urlPrefix: Does not match pattern"),
        ({"extender": {"httpTimeout": "30"}}, "extender.httpTimeout: Does not match pattern"),
        ({"podAntiAffinity": "always"}, "podAntiAffinity: podAntiAffinity must be one of the following"),
        ({"image": {"digest": "latest"}}, "image.digest: Does not match pattern"),
        ({"kubeScheduler": {"replicas": 0}}, "kubeScheduler.replicas: Must be greater than or equal to 1"),
        ({"tls": {"enabled": "yes"}}, "tls.enabled: Invalid type. Expected: [boolean,null]"),
        # Rules across values, checked by the templates.
        ({"tls": {"clientAuth": True}}, "tls.clientAuth: true needs tls.enabled: true"),
        ({"tls": {"certManager": {"enabled": True}}}, "tls.certManager.enabled: true needs tls.enabled: true"),
        ({"grpc": {"port": 8888}}, "http.port and grpc.port must differ"),
        (
            {"leaderElection": {"renewDeadlineSeconds": 20}},
            "leaderElection: need leaseDurationSeconds (15) > renewDeadlineSeconds (20) > retryPeriodSeconds (2)",
        ),
        ({"profiles": [{"schedulerName": "x"}]}, "extender.profile: set it to one of the profiles [x]"),
    ],
)
def test_bad_values_fail_with_a_clear_message(render: Render, values: dict[str, Any], message: str) -> None:
    with pytest.raises(HelmError) as e:
        render(values)
    assert message in str(e.value)


def test_schema_is_draft_07_and_covers_every_default_value() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())

    def walk(node: dict[str, Any], values: dict[str, Any], path: str) -> None:
        if "$ref" in node:
            node = schema["definitions"][node["$ref"].rsplit("/", 1)[-1]]
        props = node.get("properties")
        if props is None or node.get("additionalProperties", True) is not False:
            return
        for key, value in values.items():
            assert key in props, f"{path}{key} is in values.yaml but not in values.schema.json"
            if isinstance(value, dict):
                walk(props[key], value, f"{path}{key}.")

    walk(schema, defaults, "")


# ---------------------------------------------------------------- Dockerfile


def test_dockerfile_is_multi_stage_non_root_and_runs_berth() -> None:
    text = (ROOT / "Dockerfile").read_text()
    froms = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, flags=re.M | re.I)
    assert len(froms) == 2 and froms[0][1] == "build"
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim", text, flags=re.M)
    assert "pip wheel" in text and "venv" in text
    assert re.search(r"^USER\s+\d+:\d+\s*$", text, flags=re.M), "USER must be numeric (runAsNonRoot checks it)"
    assert re.search(r'^ENTRYPOINT \["berth"\]\s*$', text, flags=re.M)
    # No compilers in the final stage; the build context is an allow-list.
    final = text.split(froms[1][0], 1)[1].split("FROM", 1)[-1]
    assert not re.search(r"apt-get|gcc|build-essential", final)
    ignore = (ROOT / ".dockerignore").read_text().split()
    assert ignore[ignore.index("*") :][:1] == ["*"]
    for needed in ("pyproject.toml", "README.md", "berth/"):
        assert f"!{needed}" in ignore
    # Every package the wheel ships lives under a directory the context admits.
    pyproject = (ROOT / "pyproject.toml").read_text()
    for root in re.findall(r'"(\w+)(?:\.\w+)*"', pyproject.split("packages = [", 1)[1].split("]", 1)[0]):
        # A package lives at the top (berth/) or in its own distribution's
        # folder (berth_client: clients/python/, built into its own wheel).
        homes = {p.parent.parent.relative_to(ROOT).as_posix() for p in ROOT.glob(f"*/{root}/__init__.py")}
        homes |= {p.parent.parent.relative_to(ROOT).as_posix() for p in ROOT.glob(f"clients/*/{root}/__init__.py")}
        homes |= {"." for _ in ROOT.glob(f"{root}/__init__.py")}
        assert any(f"!{home}/" in ignore or (home == "." and f"!{root}/" in ignore) for home in homes), (root, homes)


# ---------------------------------------------------------------- the real kube-apiserver
#
# With the end-to-end test bed (etcd + kube-apiserver on loopback):
#   - every object of every scenario is created with ?dryRun=All and strict
#     field validation, so the apiserver's own schemas, defaulting and
#     admission judge it. Kinds served by CRDs (cert-manager's Certificate and
#     Issuer, prometheus-operator's ServiceMonitor) are checked only where
#     those CRDs are installed — the bare test bed has none, so they are
#     reported as skipped;
#   - the chart's ServiceAccounts and RBAC are created for real and the
#     apiserver's RBAC authorizer answers SubjectAccessReviews for every call
#     Berth and kube-scheduler make (and refuses calls they must not make);
#   - Berth (and, in the extender role, kube-scheduler) run with a token of
#     the chart's ServiceAccount, so exactly the chart's RBAC, and schedule.

CRD_GROUPS = {"cert-manager.io", "monitoring.coreos.com"}
E2E_TIMEOUT = 60.0


def _sa_user(namespace: str, name: str) -> tuple[str, list[str]]:
    return f"system:serviceaccount:{namespace}:{name}", [
        "system:serviceaccounts",
        f"system:serviceaccounts:{namespace}",
        "system:authenticated",
    ]


def _allowed(
    kube: Kube, user: tuple[str, list[str]], verb: str, what: str, namespace: str = "", name: str = ""
) -> bool:
    group, resource = what.split("/", 1)
    resource, _, subresource = resource.partition("/")
    attrs = {"verb": verb, "group": group, "resource": resource, "subresource": subresource}
    attrs |= {"namespace": namespace} if namespace else {}
    attrs |= {"name": name} if name else {}
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user[0], "groups": user[1], "resourceAttributes": attrs},
    }
    out = kube.ok("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return bool(out["status"].get("allowed"))


def _namespace(kube: Kube, name: str) -> None:
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, exist_ok=True)
    # No controller-manager in the bed: pods need their `default` ServiceAccount made by hand.
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": name}}
    kube.create(sa, exist_ok=True)


@contextlib.contextmanager
def _installed(kube: Kube, r: Rendered, kinds: set[str]) -> Iterator[list[dict[str, Any]]]:
    """Create the rendered objects of these kinds for real; delete them after."""
    made: list[dict[str, Any]] = []
    try:
        for doc in r.docs:
            if doc["kind"] in kinds:
                kube.create(doc)
                made.append(doc)
        yield made
    finally:
        for doc in reversed(made):
            kube.delete(doc)


@pytest.mark.e2e
def test_kube_apiserver_accepts_every_rendered_object(render: Render, kube: Kube) -> None:
    _namespace(kube, NAMESPACE)
    served = kube.served()
    checked, skipped, failures = 0, set(), []
    for scenario, values in SCENARIOS.items():
        for doc in render(values).docs:
            key = (doc["apiVersion"], doc["kind"])
            if key not in served:
                group = doc["apiVersion"].partition("/")[0]
                assert group in CRD_GROUPS, f"{scenario}: {key} is not served by kube-apiserver"
                skipped.add(key)
                continue
            status, out = kube.request("POST", kube.collection(doc), doc, dryRun="All", fieldValidation="Strict")
            checked += 1
            if status not in (200, 201):
                failures.append(f"{scenario}: {doc['kind']}/{doc['metadata']['name']}: HTTP {status}: {out}")
    assert not failures, "\n".join(failures)
    assert checked > 0
    if skipped:
        print(f"not validated (their CRDs are not installed in the test bed): {sorted(skipped)}")


@pytest.mark.e2e
@pytest.mark.parametrize("scenario", ["scheduler", "extender-mtls"])
def test_helm_installs_and_uninstalls_against_the_real_apiserver(
    helm: Path, admin_kubeconfig: Path, kube: Kube, tmp_path: Path, scenario: str
) -> None:
    """helm itself, against the bed: its kubeVersion check uses the server's
    version, it validates against the server's OpenAPI, and it creates (then
    deletes) every object. No kubelet runs, so the pods never start."""
    release, ns = f"inst-{scenario}"[:20].rstrip("-"), f"berth-inst-{scenario}"[:40].rstrip("-")
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(tmp_path / "cache"),
        "HELM_CONFIG_HOME": str(tmp_path / "config"),
        "HELM_DATA_HOME": str(tmp_path / "data"),
        "KUBECONFIG": str(admin_kubeconfig),
    }
    values = values_file(tmp_path, SCENARIOS[scenario])

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120, env=env, check=False)

    installed = run("install", release, str(CHART), "-n", ns, "--create-namespace", "--values", str(values))
    assert installed.returncode == 0, installed.stderr
    assert "STATUS: deployed" in installed.stdout
    assert "Pods opt in" in installed.stdout  # NOTES.txt
    status, dep = kube.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/{release}-berth")
    assert status == 200 and dep["spec"]["replicas"] == 2
    removed = run("uninstall", release, "-n", ns, "--wait", "--timeout", "60s")
    assert removed.returncode == 0, removed.stderr
    assert kube.request("GET", f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{release}-berth")[0] == 404


def _check_access(kube: Kube, user: tuple[str, list[str]], grants: list[tuple[bool, str, str, str, str]]) -> None:
    wrong = []
    for expected, verb, what, namespace, name in grants:
        got = _allowed(kube, user, verb, what, namespace, name)
        if got != expected:
            wrong.append(f"{user[0]} {verb} {what} {namespace}/{name}: {'allowed' if got else 'denied'}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.e2e
@pytest.mark.parametrize("role", ["scheduler", "extender"])
def test_rbac_grants_berth_exactly_what_it_does(render: Render, kube: Kube, role: str) -> None:
    release, ns = f"rbac-{role[:5]}", f"berth-rbac-{role[:5]}"
    _namespace(kube, ns)
    r = render({"role": role}, release=release, namespace=ns)
    name = f"{release}-berth"
    user = _sa_user(ns, name)
    le = yaml.safe_load(r.one("ConfigMap", name)["data"]["config.yaml"])["leaderElection"]
    lease_ns, lease = le["resourceNamespace"], le["resourceName"]
    sched = role == "scheduler"
    with _installed(kube, r, {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}):
        grants = [
            (True, "list", "/pods", "", ""),
            (True, "watch", "/pods", "", ""),
            (True, "get", "/pods", "team-a", "p"),
            (True, "list", "/nodes", "", ""),
            (True, "watch", "/nodes", "", ""),
            (True, "list", "/namespaces", "", ""),
            (True, "watch", "policy/poddisruptionbudgets", "", ""),
            (True, "watch", "scheduling.x-k8s.io/podgroups", "", ""),
            (True, "watch", "/services", "", ""),
            (True, "list", "/replicationcontrollers", "", ""),
            (True, "watch", "apps/replicasets", "", ""),
            (True, "list", "apps/statefulsets", "", ""),
            (False, "update", "apps/replicasets", "team-a", "rs"),
            (True, "create", "/pods/binding", "team-a", "p"),
            (True, "create", "/events", "team-a", ""),
            (True, "patch", "events.k8s.io/events", "team-a", "e"),
            (sched, "create", "/pods/eviction", "team-a", "p"),
            (sched, "delete", "/pods", "team-a", "p"),
            (sched, "patch", "/pods/status", "team-a", "p"),
            (sched, "update", "/pods/status", "team-a", "p"),
            (sched, "create", "coordination.k8s.io/leases", lease_ns, ""),
            (sched, "get", "coordination.k8s.io/leases", lease_ns, lease),
            (sched, "update", "coordination.k8s.io/leases", lease_ns, lease),
            # Never: anything else.
            (False, "get", "coordination.k8s.io/leases", lease_ns, "kube-scheduler"),
            (False, "update", "coordination.k8s.io/leases", "kube-system", lease),
            (False, "create", "/pods", "team-a", ""),
            (False, "update", "/pods", "team-a", "p"),
            (False, "patch", "/nodes", "", "n"),
            (False, "get", "/secrets", "team-a", "s"),
            (False, "list", "/secrets", "", ""),
            (False, "get", "/configmaps", ns, name),
            (False, "delete", "/events", "team-a", "e"),
        ]
        _check_access(kube, user, grants)
        if not sched:
            ks = _sa_user(ns, f"{name}-kube-scheduler")
            ks_lease = yaml.safe_load(r.one("ConfigMap", f"{name}-kube-scheduler")["data"]["config.yaml"])[
                "leaderElection"
            ]["resourceName"]
            _check_access(
                kube,
                ks,
                [
                    (True, "create", "coordination.k8s.io/leases", ns, ""),
                    (True, "get", "coordination.k8s.io/leases", ns, ks_lease),
                    (True, "update", "coordination.k8s.io/leases", ns, ks_lease),
                    (False, "update", "coordination.k8s.io/leases", ns, lease),
                    (True, "get", "/configmaps", "kube-system", "extension-apiserver-authentication"),
                    (True, "create", "/pods/binding", "team-a", "p"),
                    (True, "list", "/nodes", "", ""),
                    (True, "list", "storage.k8s.io/csinodes", "", ""),
                    (True, "update", "/persistentvolumeclaims", "team-a", "c"),  # system:volume-scheduler
                    (True, "create", "authentication.k8s.io/tokenreviews", "", ""),
                    (False, "get", "/secrets", "team-a", "s"),
                ],
            )


def _self_signed(directory: Path) -> Path:
    """tls.crt, tls.key and ca.crt (the certificate itself) in directory."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "berth")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (directory / "tls.crt").write_bytes(pem)
    (directory / "ca.crt").write_bytes(pem)
    (directory / "tls.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return directory


@pytest.mark.e2e
@pytest.mark.parametrize("scenario", EXTENDER_SCENARIOS)
def test_kube_scheduler_accepts_the_rendered_configuration(render: Render, tmp_path: Path, scenario: str) -> None:
    """The real kube-scheduler decodes (strictly), validates and builds the
    chart's configuration, extender TLS included, then writes it back out."""
    try:
        kube_scheduler = find_binary("kube-scheduler")
    except LookupError as e:
        unavailable(str(e))
    ksc = kube_scheduler_config(render(SCENARIOS[scenario]))
    tls = _self_signed(tmp_path / "tls")
    for key, path in ksc["extenders"][0].get("tlsConfig", {}).items():
        ksc["extenders"][0]["tlsConfig"][key] = str(tls / Path(path).name)
    # Nothing is contacted: kube-scheduler only needs a well-formed kubeconfig to build its clients.
    kubeconfig = Kube("https://127.0.0.1:1", insecure=True, token="unused").kubeconfig(tmp_path / "kubeconfig")
    ksc["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    (tmp_path / "in.yaml").write_text(yaml.safe_dump(ksc))
    out = tmp_path / "out.yaml"
    proc = subprocess.run(
        [str(kube_scheduler), f"--config={tmp_path / 'in.yaml'}", f"--write-config-to={out}", "--secure-port=0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and out.exists(), proc.stderr[-3000:]
    written = yaml.safe_load(out.read_text())
    assert [p["schedulerName"] for p in written["profiles"]] == [p["schedulerName"] for p in ksc["profiles"]]
    [ext] = written["extenders"]
    assert ext["urlPrefix"] == ksc["extenders"][0]["urlPrefix"]
    assert ext["bindVerb"] == "bind" and ext["nodeCacheCapable"] is True
    assert written["leaderElection"]["resourceName"] == ksc["leaderElection"]["resourceName"]


def _wait(
    what: str,
    check: Callable[[], Any],
    procs: Iterable[tuple[subprocess.Popen[bytes], Path]] = (),
    timeout: float = E2E_TIMEOUT,
) -> Any:
    procs = list(procs)

    def logs() -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-4000:]}" for _, log in procs)

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        for proc, log in procs:
            if proc.poll() is not None:
                raise AssertionError(f"{log.stem} exited ({proc.returncode}) while waiting for {what}\n{logs()}")
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}\n{logs()}")


def _token(kube: Kube, namespace: str, sa: str) -> Kube:
    req = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    out = kube.ok("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa}/token", req)
    return kube.with_token(out["status"]["token"])


def _node(kube: Kube, name: str, cpu: str = "2") -> None:
    kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"e2e": "helm"}}})
    status = {
        "status": {
            "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e"}],
        }
    }
    kube.ok("PATCH", f"/api/v1/nodes/{name}/status", status, content_type="application/merge-patch+json")
    # The TaintNodesByCondition admission plugin taints new nodes not-ready; no
    # node-lifecycle controller runs in the bed to lift it.
    kube.ok("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}}, content_type="application/merge-patch+json")


def _pod(kube: Kube, ns: str, name: str, scheduler: str, cpu: str = "100m", priority: str = "") -> None:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}],
    }
    if priority:
        spec["priorityClassName"] = priority
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec})


def _pod_node(kube: Kube, ns: str, name: str) -> str:
    status, pod = kube.request("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
    return str(pod["spec"].get("nodeName") or "") if status == 200 else ""


def _berth_config_file(r: Rendered, name: str, path: Path) -> tuple[Path, int]:
    """The chart's BerthConfiguration, listening on loopback ports of this machine."""
    doc = yaml.safe_load(r.one("ConfigMap", name)["data"]["config.yaml"])
    http_port = free_port()
    doc["http"] |= {"host": "127.0.0.1", "port": http_port}
    doc["grpc"] |= {"host": "127.0.0.1", "port": free_port()}
    doc["ui"] = doc.get("ui", {}) | {"host": "127.0.0.1", "port": free_port()}
    if "tokenFile" in doc["grpc"].get("auth", {}):  # the mounted Secret, on this machine
        token = path.with_name("grpc-token")
        token.write_bytes(base64.b64decode(r.one("Secret", f"{name}-grpc-token")["data"]["token"]))
        doc["grpc"]["auth"]["tokenFile"] = str(token)
    if "tls" in doc["http"]:  # the chart's generated TLS Secret, on this machine
        tls_dir = _tls_files(r, name, path.with_name("tls"))
        for server in ("http", "grpc", "ui"):
            for key, file in doc.get(server, {}).get("tls", {}).items():
                doc[server]["tls"][key] = str(tls_dir / Path(file).name)
    config.parse(doc)
    path.write_text(yaml.safe_dump(doc))
    return path, http_port


@contextlib.contextmanager
def _process(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _berth_binary() -> str:
    berth = Path(sys.executable).with_name("berth")
    assert berth.exists(), f"{berth}: the berth console script is not installed (make install)"
    return str(berth)


def _tls_files(r: Rendered, name: str, directory: Path) -> Path:
    """tls.crt, tls.key and ca.crt of the chart's generated Secret, in directory."""
    directory.mkdir(parents=True, exist_ok=True)
    for key, value in r.one("Secret", f"{name}-tls")["data"].items():
        (directory / key).write_bytes(base64.b64decode(value))
    return directory


def _ready(port: int, scheme: str = "http", path: str = "/readyz", client: Path | None = None) -> bool:
    ctx = ssl._create_unverified_context() if scheme == "https" else None
    if ctx is not None and client is not None:  # mTLS: present the chart's client certificate
        ctx.load_cert_chain(client / "tls.crt", client / "tls.key")
    try:
        with urllib.request.urlopen(f"{scheme}://127.0.0.1:{port}{path}", timeout=2, context=ctx) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.HTTPError):
        return False


def _forbidden_in(log: Path) -> list[str]:
    # Not the milliseconds of a log timestamp ("05:42:20,403"): a status 403 is never after "," or ".".
    return [
        line
        for line in log.read_text(errors="replace").splitlines()
        if re.search(r"(?<![,.])\b403\b|[Ff]orbidden", line)
    ]


@pytest.mark.e2e
def test_berth_schedules_and_preempts_under_the_charts_rbac(render: Render, kube: Kube, tmp_path: Path) -> None:
    """Scheduler role: Berth with a token of the chart's ServiceAccount takes
    its Lease, binds, writes events, and preempts (status patch + delete)."""
    release, ns = "run-sched", "berth-run-sched"
    _namespace(kube, ns)
    r = render({}, release=release, namespace=ns)
    name = f"{release}-berth"
    cfg_file, http_port = _berth_config_file(r, name, tmp_path / "berth.yaml")
    cfg = config.load(cfg_file)
    for pc in ("e2e-low", "e2e-high"):
        pclass = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": pc},
            "value": 1000 if pc == "e2e-high" else 10,
        }
        kube.create(pclass, exist_ok=True)
    node = "helm-run-sched-node"
    _node(kube, node, cpu="1")
    with _installed(kube, r, {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}):
        as_berth = _token(kube, ns, name)
        kubeconfig = as_berth.kubeconfig(tmp_path / "kubeconfig")
        log = tmp_path / "berth.log"
        argv = [_berth_binary(), "serve", "--config", str(cfg_file), "--kubeconfig", str(kubeconfig)]
        with _process(argv, log) as proc:
            procs = [(proc, log)]
            _wait("Berth to be ready", lambda: _ready(http_port), procs)
            _pod(kube, ns, "low", cfg.profiles[0].scheduler_name, cpu="800m", priority="e2e-low")
            _wait("Berth to bind the pod", lambda: _pod_node(kube, ns, "low") == node, procs)
            lease = kube.ok(
                "GET",
                f"/apis/coordination.k8s.io/v1/namespaces/{cfg.leader_election.resource_namespace}"
                f"/leases/{cfg.leader_election.resource_name}",
            )
            assert lease["spec"].get("holderIdentity")
            events = kube.ok("GET", f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]
            assert any(e["reason"] == "Scheduled" and e["regarding"]["name"] == "low" for e in events), events
            # Preemption: the high-priority pod only fits once the low one is gone.
            _pod(kube, ns, "high", cfg.profiles[0].scheduler_name, cpu="800m", priority="e2e-high")
            _wait("the preemptor to be bound", lambda: _pod_node(kube, ns, "high") == node, procs)
            assert kube.request("GET", f"/api/v1/namespaces/{ns}/pods/low")[0] == 404
        assert not _forbidden_in(log), _forbidden_in(log)
    kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/high", gracePeriodSeconds="0")
    kube.request("DELETE", f"/api/v1/nodes/{node}")


@pytest.mark.e2e
def test_kube_scheduler_extended_by_berth_under_the_charts_rbac(
    render: Render, kube: Kube, control_plane: Any, tmp_path: Path
) -> None:
    """Extender role: the chart's kube-scheduler configuration and Berth's,
    each process with a token of its own ServiceAccount, schedule a pod of the
    berth-extender profile; Berth binds it."""
    try:
        kube_scheduler = find_binary("kube-scheduler")
    except LookupError as e:
        unavailable(str(e))
    release, ns = "run-ext", "berth-run-ext"
    _namespace(kube, ns)
    r = render({"role": "extender"}, release=release, namespace=ns)
    name = f"{release}-berth"
    cfg_file, http_port = _berth_config_file(r, name, tmp_path / "berth.yaml")
    ksc = yaml.safe_load(r.one("ConfigMap", f"{name}-kube-scheduler")["data"]["config.yaml"])
    node = "helm-run-ext-node"
    _node(kube, node)
    with _installed(kube, r, {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}):
        berth_kc = _token(kube, ns, name).kubeconfig(tmp_path / "berth.kubeconfig")
        ks_kc = _token(kube, ns, f"{name}-kube-scheduler").kubeconfig(tmp_path / "ks.kubeconfig")
        # The chart's configuration; only where things are differs (loopback, no in-cluster config).
        ext = ksc["extenders"][0]
        url = urlsplit(ext["urlPrefix"])
        # By default the extender role's kube-scheduler calls Berth over mTLS
        # with the chart's generated certificate (it names 127.0.0.1 too).
        assert url.scheme == "https" and set(ext["tlsConfig"]) == {"caFile", "certFile", "keyFile"}
        tls_dir = tmp_path / "tls"
        ext["tlsConfig"] = {k: str(tls_dir / Path(v).name) for k, v in ext["tlsConfig"].items()}
        ext["urlPrefix"] = f"https://127.0.0.1:{http_port}{url.path}"
        ksc["clientConnection"] = {"kubeconfig": str(ks_kc)}
        (tmp_path / "ks.yaml").write_text(yaml.safe_dump(ksc))
        ks_port = free_port()
        berth_log, ks_log = tmp_path / "berth.log", tmp_path / "kube-scheduler.log"
        berth = [_berth_binary(), "serve", "--config", str(cfg_file), "--kubeconfig", str(berth_kc)]
        ks = [
            str(kube_scheduler),
            f"--config={tmp_path / 'ks.yaml'}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ks_port}",
            f"--authentication-kubeconfig={ks_kc}",
            f"--authorization-kubeconfig={ks_kc}",
            "--v=2",
        ]
        with _process(berth, berth_log) as berth_proc, _process(ks, ks_log) as ks_proc:
            procs = [(berth_proc, berth_log), (ks_proc, ks_log)]
            _wait("Berth to be ready", lambda: _ready(http_port, "https", client=tls_dir), procs)
            assert not _ready(http_port, "https")  # no client certificate, no extender port
            _wait("kube-scheduler to be healthy", lambda: _ready(ks_port, "https", "/healthz"), procs)
            _pod(kube, ns, "via-extender", ksc["profiles"][0]["schedulerName"])
            _wait("the pod to be bound", lambda: _pod_node(kube, ns, "via-extender") == node, procs)
            le = ksc["leaderElection"]
            lease = kube.ok(
                "GET", f"/apis/coordination.k8s.io/v1/namespaces/{le['resourceNamespace']}/leases/{le['resourceName']}"
            )
            assert lease["spec"].get("holderIdentity")
        assert not _forbidden_in(berth_log), _forbidden_in(berth_log)
        assert not _forbidden_in(ks_log), _forbidden_in(ks_log)
    kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/via-extender", gracePeriodSeconds="0")
    kube.request("DELETE", f"/api/v1/nodes/{node}")
