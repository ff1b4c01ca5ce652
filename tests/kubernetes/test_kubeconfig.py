"""A kubeconfig or in-cluster environment Berth cannot use stops ``berth
serve`` with one line naming the file and what is wrong (exit status 2),
never a traceback or kubernetes-asyncio's ``Expected key current-context``.
Cases follow client-go's ``clientcmd.ConfirmUsable``
(``k8s.io/client-go/tools/clientcmd/validation.go``)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth.adapters.kubernetes import kubeconfig, runner
from berth.cli import main as cli
from berth.config import ConfigError
from tests.certs import CA


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[CA, Any]:
    d = tmp_path_factory.mktemp("pki")
    ca = CA(d)
    return ca, ca.issue("berth", client=True)


def good(ca: CA, leaf: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "bed", "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority": str(ca.path)}}
        ],
        "users": [{"name": "admin", "user": {"client-certificate": str(leaf.cert), "client-key": str(leaf.key)}}],
        "contexts": [{"name": "bed", "context": {"cluster": "bed", "user": "admin"}}],
        "current-context": "bed",
    }


SERVER = "https://127.0.0.1:6443"


def cluster(kc: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    return {**kc, "clusters": [{"name": "bed", "cluster": fields}]}


def user(kc: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    return {**kc, "users": [{"name": "admin", "user": fields}]}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def without(d: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != key}


# (case, how to break the good kubeconfig, what the one line must say after "kubeconfig PATH: ")
BROKEN: list[tuple[str, Any, str]] = [
    ("empty file", lambda kc, ca, leaf: "", "the file is empty (no clusters, users or contexts)"),
    ("only a comment", lambda kc, ca, leaf: "# nothing here\n", "the file is empty"),
    ("not YAML", lambda kc, ca, leaf: "clusters: [\n", "not valid YAML ("),
    ("a list", lambda kc, ca, leaf: "- a\n- b\n", "expected a kubeconfig mapping (kind: Config), got list"),
    (
        "no current-context",
        lambda kc, ca, leaf: without(kc, "current-context"),
        "no current-context set (kubectl config use-context NAME)",
    ),
    (
        "current-context names no context",
        lambda kc, ca, leaf: {**kc, "current-context": "prod"},
        "current-context 'prod' is not in contexts (have: bed)",
    ),
    (
        "context names an unknown cluster",
        lambda kc, ca, leaf: {**kc, "contexts": [{"name": "bed", "context": {"cluster": "gone", "user": "admin"}}]},
        "contexts[name=bed]: cluster 'gone' was not found for context 'bed' (have: bed)",
    ),
    (
        "context names no cluster",
        lambda kc, ca, leaf: {**kc, "contexts": [{"name": "bed", "context": {"user": "admin"}}]},
        "contexts[name=bed]: cluster was not specified for context 'bed'",
    ),
    (
        "context names an unknown user",
        lambda kc, ca, leaf: {**kc, "contexts": [{"name": "bed", "context": {"cluster": "bed", "user": "root"}}]},
        "contexts[name=bed]: user 'root' was not found for context 'bed' (have: admin)",
    ),
    (
        "cluster without a server",
        lambda kc, ca, leaf: cluster(kc, {"certificate-authority": str(ca.path)}),
        "clusters[name=bed].cluster.server: no server found for cluster 'bed'",
    ),
    (
        "server of the wrong type",
        lambda kc, ca, leaf: cluster(kc, {"server": 6443}),
        "clusters[0].cluster.server: Expected `str`, got `int`",
    ),
    (
        "CA data not base64",
        lambda kc, ca, leaf: {
            **kc,
            "clusters": [
                {"name": "bed", "cluster": {"server": "https://h", "certificate-authority-data": "@@not b64"}}
            ],
        },
        "clusters[name=bed].cluster.certificate-authority-data: not valid base64",
    ),
    (
        "CA data not a certificate",
        lambda kc, ca, leaf: {
            **kc,
            "clusters": [
                {"name": "bed", "cluster": {"server": "https://h", "certificate-authority-data": b64(b"junk")}}
            ],
        },
        "clusters[name=bed].cluster.certificate-authority-data: not a usable PEM certificate (",
    ),
    (
        "CA file missing",
        lambda kc, ca, leaf: cluster(kc, {"server": SERVER, "certificate-authority": "/nope/ca.crt"}),
        "clusters[name=bed].cluster.certificate-authority: cannot read /nope/ca.crt (No such file or directory)",
    ),
    (
        "client key data not base64",
        lambda kc, ca, leaf: user(kc, {"client-certificate": str(leaf.cert), "client-key-data": "%%%"}),
        "users[name=admin].user.client-key-data: not valid base64",
    ),
    (
        "client certificate without a key",
        lambda kc, ca, leaf: user(kc, {"client-certificate": str(leaf.cert)}),
        "users[name=admin].user: client-certificate and client-key must be given together",
    ),
    (
        "client key that does not match the certificate",
        lambda kc, ca, leaf: {
            **kc,
            "users": [
                {"name": "admin", "user": {"client-certificate": str(leaf.cert), "client-key": str(ca.key_path)}}
            ],
        },
        "users[name=admin].user.client-certificate/client-key: not a usable PEM certificate and key (",
    ),
]


@pytest.mark.parametrize(("case", "breaks", "message"), BROKEN, ids=[c[0] for c in BROKEN])
async def test_a_broken_kubeconfig_is_one_line_naming_the_file(
    tmp_path: Path, pki: tuple[CA, Any], case: str, breaks: Any, message: str
) -> None:
    ca, leaf = pki
    doc = breaks(good(ca, leaf), ca, leaf)
    path = tmp_path / "config"
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as err:
        await runner.load_api_client(kubeconfig=str(path), in_cluster=False)
    text = str(err.value)
    assert text.startswith(f"kubeconfig {path}: "), text
    assert message in text, text
    assert "\n" not in text


@pytest.mark.parametrize(
    ("case", "path", "message"),
    [
        ("missing", "missing/config", "no such file"),
        ("a directory", ".", "cannot read it (Is a directory)"),
    ],
)
async def test_an_unreadable_kubeconfig_is_one_line(tmp_path: Path, case: str, path: str, message: str) -> None:
    where = str(tmp_path / path)
    with pytest.raises(ConfigError, match="^kubeconfig .*: " + message.replace("(", r"\(").replace(")", r"\)")):
        await runner.load_api_client(kubeconfig=where, in_cluster=False)


async def test_a_usable_kubeconfig_gives_a_client_for_its_server(tmp_path: Path, pki: tuple[CA, Any]) -> None:
    ca, leaf = pki
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(good(ca, leaf)))
    api = await runner.load_api_client(kubeconfig=str(path), in_cluster=False)
    try:
        assert api.configuration.host == "https://127.0.0.1:6443"
        assert api.configuration.cert_file == str(leaf.cert)
    finally:
        await api.close()


@pytest.mark.parametrize(
    ("case", "env", "files", "message"),
    [
        (
            "not in a pod",
            {},
            {"token": "t", "ca.crt": None},
            "in-cluster configuration: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined",
        ),
        (
            "no token mounted",
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
            {},
            "in-cluster configuration: cannot read the service-account token ",
        ),
        (
            "an empty token",
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
            {"token": "", "ca.crt": None},
            "in-cluster configuration: service-account token ",
        ),
        (
            "no CA",
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
            {"token": "t"},
            "in-cluster configuration: cannot read the cluster CA certificate ",
        ),
        (
            "a CA that is not a certificate",
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
            {"token": "t", "ca.crt": "junk"},
            "in-cluster configuration: certificate-authority: not a usable PEM certificate",
        ),
    ],
)
async def test_in_cluster_without_its_credentials_is_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pki: tuple[CA, Any],
    case: str,
    env: dict[str, str],
    files: dict[str, str | None],
    message: str,
) -> None:
    ca, _ = pki
    for var in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    for name, content in files.items():
        (tmp_path / name).write_bytes(ca.path.read_bytes() if content is None else content.encode())
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT_DIR", tmp_path)
    with pytest.raises(ConfigError) as err:
        await runner.load_api_client(kubeconfig=None, in_cluster=True)
    assert str(err.value).startswith(message), str(err.value)


async def test_in_cluster_with_its_credentials_gives_a_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pki: tuple[CA, Any]
) -> None:
    ca, _ = pki
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_bytes(ca.path.read_bytes())
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT_DIR", tmp_path)
    api = await runner.load_api_client(kubeconfig=None, in_cluster=True)
    try:
        assert api.configuration.host == "https://10.0.0.1:443"
    finally:
        await api.close()


def test_berth_serve_with_a_kubeconfig_lacking_current_context_exits_2_with_one_line(
    tmp_path: Path, pki: tuple[CA, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    ca, leaf = pki
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(without(good(ca, leaf), "current-context")))
    status = cli.main(["serve", "--kubeconfig", str(path), "--http-port", "0", "--grpc-port", "0"])
    err = capsys.readouterr().err
    assert status == 2
    assert err == f"berth: kubeconfig {path}: no current-context set (kubectl config use-context NAME)\n"
