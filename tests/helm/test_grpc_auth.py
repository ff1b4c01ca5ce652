"""The chart turns on authentication of Berth's mutating gRPC RPCs: a random
bearer token in a Secret, mounted into the pods and named by
``grpc.auth.tokenFile``, since Berth listens on 0.0.0.0 there."""

from __future__ import annotations

import base64
import string
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth import config
from berth.adapters.grpc import security
from tests.helm.conftest import CHART, NAMESPACE, RELEASE, HelmError, Render, run_helm
from tests.helm.test_chart import FULLNAME, SCENARIOS, TOKEN_SECRET, _notes, container, pod_spec, raw_config

TOKEN_FILE = "/etc/berth/grpc-auth/token"


def token_volume(values: dict[str, Any], render: Render) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    r = render(values)
    mounts = {m["name"]: m for m in container(r)["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec(r.one("Deployment", FULLNAME))["volumes"]}
    return mounts.get("grpc-token"), volumes.get("grpc-token")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_scenario_mounts_a_random_token_and_names_it_in_the_configuration(render: Render, scenario: str) -> None:
    r = render(SCENARIOS[scenario])
    grpc = raw_config(r)["grpc"]
    assert grpc["host"] == "0.0.0.0"
    assert grpc["auth"] == {"tokenFile": TOKEN_FILE, "allowUnauthenticatedMutations": False}
    secret = r.one("Secret", TOKEN_SECRET, NAMESPACE)
    token = base64.b64decode(secret["data"]["token"]).decode()
    assert len(token) == 48 and set(token) <= set(string.ascii_letters + string.digits)
    mount, volume = token_volume(SCENARIOS[scenario], render)
    assert mount == {"name": "grpc-token", "mountPath": str(Path(TOKEN_FILE).parent), "readOnly": True}
    assert volume is not None
    assert volume["secret"] == {
        "secretName": TOKEN_SECRET,
        "defaultMode": 0o440,
        "items": [{"key": "token", "path": "token"}],
    }


def test_berth_starts_on_the_rendered_configuration_only_with_its_token(render: Render, tmp_path: Path) -> None:
    """Berth's own start-up rule, on what the chart renders (the Secret's
    token written where the pod would mount it)."""
    r = render({})
    doc = raw_config(r)
    token = tmp_path / "token"
    token.write_bytes(base64.b64decode(r.one("Secret", TOKEN_SECRET)["data"]["token"]))
    doc["grpc"]["auth"]["tokenFile"] = str(token)
    security.validate(config.parse(doc).grpc)
    del doc["grpc"]["auth"]["tokenFile"]
    with pytest.raises(config.ConfigError, match=r"^grpc\.host: listening on 0\.0\.0\.0 needs authentication"):
        security.validate(config.parse(doc).grpc)


def test_an_existing_secret_is_mounted_instead_of_a_generated_one(render: Render) -> None:
    values = {"grpc": {"auth": {"existingSecret": "corp-berth-token"}}}
    r = render(values)
    assert not r.all("Secret")
    _, volume = token_volume(values, render)
    assert volume is not None and volume["secret"]["secretName"] == "corp-berth-token"
    assert raw_config(r)["grpc"]["auth"]["tokenFile"] == TOKEN_FILE


@pytest.mark.parametrize(
    ("values", "auth"),
    [
        (
            {"grpc": {"auth": {"token": False}}, "tls": {"enabled": True, "clientAuth": True}},
            {"allowUnauthenticatedMutations": False},
        ),
        (
            {"grpc": {"auth": {"token": False, "allowUnauthenticatedMutations": True}}},
            {"allowUnauthenticatedMutations": True},
        ),
    ],
    ids=["client certificates instead", "explicitly open"],
)
def test_without_a_token_there_is_no_secret(render: Render, values: dict[str, Any], auth: dict[str, Any]) -> None:
    r = render(values)
    assert raw_config(r)["grpc"]["auth"] == auth
    # No token Secret (the generated TLS Secret, when TLS is on, is another matter).
    assert not [s for s in r.all("Secret") if s["metadata"]["name"] == TOKEN_SECRET]
    assert token_volume(values, render) == (None, None)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"grpc": {"auth": {"token": False}}},
            "grpc.auth: Berth listens on 0.0.0.0 and refuses to start without authentication of mutating RPCs",
        ),
        ({"grpc": {"auth": {"tokn": True}}}, "grpc.auth: Additional property tokn is not allowed"),
        ({"grpc": {"auth": {"token": "yes"}}}, "grpc.auth.token: Invalid type. Expected: boolean"),
        ({"grpc": {"auth": {"existingSecret": "Not_A_Name"}}}, "grpc.auth.existingSecret: Does not match pattern"),
    ],
)
def test_bad_auth_values_fail_with_a_clear_message(render: Render, values: dict[str, Any], message: str) -> None:
    with pytest.raises(HelmError) as e:
        render(values)
    assert message in str(e.value)


def test_notes_say_how_to_fetch_and_send_the_token(render: Render, tmp_path: Path) -> None:
    notes = _notes(render, tmp_path, {})
    assert f"get secret {TOKEN_SECRET} -o jsonpath='{{.data.token}}'" in notes
    assert "--token-file berth.token" in notes
    open_notes = _notes(render, tmp_path, {"grpc": {"auth": {"token": False, "allowUnauthenticatedMutations": True}}})
    assert "a caller without a credential may call\nBind" in open_notes


def test_the_default_values_document_the_auth_settings() -> None:
    values = yaml.safe_load((Path(__file__).parents[2] / "helm/berth/values.yaml").read_text())
    assert values["grpc"]["auth"] == {
        "token": True,
        "existingSecret": "",
        "allowUnauthenticatedMutations": False,
        "impersonateCertificateCallers": False,
    }


CONSTRAINED = [
    {"apiGroups": ["authentication.k8s.io"], "resources": ["users", "groups"], "verbs": ["impersonate:user-info"]},
    {
        "apiGroups": [""],
        "resources": ["pods"],
        "verbs": ["impersonate-on:user-info:create", "impersonate-on:user-info:delete"],
    },
    {
        "apiGroups": ["scheduling.x-k8s.io"],
        "resources": ["podgroups"],
        "verbs": ["impersonate-on:user-info:create", "impersonate-on:user-info:get"],
    },
]
LEGACY = [{"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]}]


@pytest.mark.parametrize(
    ("impersonate", "kube_version", "granted"),
    [(False, "v1.37.2", []), (True, "v1.37.2", CONSTRAINED), (True, "v1.36.0", CONSTRAINED), (True, "v1.35.4", LEGACY)],
    ids=["off", "constrained on 1.37", "constrained from 1.36", "legacy before 1.36"],
)
def test_impersonation_of_certificate_callers_is_granted_only_when_asked_for_and_as_narrowly_as_the_cluster_allows(
    helm: Path, impersonate: bool, kube_version: str, granted: list[dict[str, Any]], tmp_path: Path
) -> None:
    values = {
        "tls": {"enabled": True, "clientAuth": True},
        "grpc": {"auth": {"impersonateCertificateCallers": impersonate}},
    }
    docs = template(helm, values, kube_version, tmp_path)
    [role] = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == FULLNAME]
    assert [r for r in role["rules"] if any(v.startswith("impersonate") for v in r["verbs"])] == granted
    [cm] = [d for d in docs if d["kind"] == "ConfigMap" and "config.yaml" in d.get("data", {})]
    raw = yaml.safe_load(cm["data"]["config.yaml"])
    assert raw["grpc"]["auth"].get("impersonateCertificateCallers", False) is impersonate
    assert config.parse(raw).grpc.auth.impersonate_certificate_callers is impersonate


def template(helm: Path, values: dict[str, Any], kube_version: str, tmp_path: Path) -> list[dict[str, Any]]:
    """helm template at ``kube_version`` (the fixture renders at the bed's)."""
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    proc = run_helm(
        helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--kube-version", kube_version, "-f", str(path)
    )
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]
