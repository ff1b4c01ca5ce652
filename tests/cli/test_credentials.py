"""The CLI's bearer token comes from where kubectl users expect (issues 26,
27, 31): ``--token-file``, else ``$BERTH_TOKEN``, else the context's
``tokenFile``, else the current kubeconfig context's user (``tokenFile``,
``token``, an ``exec`` credential plugin run as kubectl runs it) — the
kubeconfig's only over TLS or to this machine."""

from __future__ import annotations

import stat
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth.cli import common, contexts, kubeconfig
from berth.cli import main as cli

ExecCase = Callable[[Path], dict[str, Any]]


@pytest.fixture(autouse=True)
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(contexts.PATH_ENV, str(tmp_path / "berth-config"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.delenv(common.TOKEN_ENV, raising=False)
    monkeypatch.delenv(common.SERVER_ENV, raising=False)


def write_kubeconfig(
    path: Path, user: dict[str, Any], *, current: str = "dev", cluster: dict[str, Any] | None = None
) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": current,
        "contexts": [{"name": "dev", "context": {"cluster": "c", "user": "alice"}}],
        "clusters": [{"name": "c", "cluster": cluster or {"server": "https://k8s.example:6443"}}],
        "users": [{"name": "alice", "user": user}],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def plugin(tmp_path: Path, body: str) -> Path:
    """An exec credential plugin: a Python script printing what ``body`` computes as ``out``."""
    script = tmp_path / "bin" / "cred-plugin"
    script.parent.mkdir(exist_ok=True)
    script.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n" + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


V1 = "client.authentication.k8s.io/v1"


def token_of(argv: list[str]) -> str | None:
    args = cli._parser().parse_args(["get", "pods", *argv])
    return common.settings(args).token


# ---------------------------------------------------------------- each source


def test_the_token_file_flag(tmp_path: Path) -> None:
    (tmp_path / "t").write_text(" from-flag\n")
    assert token_of(["--token-file", str(tmp_path / "t")]) == "from-flag"


def test_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(common.TOKEN_ENV, "from-env")
    assert token_of([]) == "from-env"


def test_the_berth_context(tmp_path: Path) -> None:
    (tmp_path / "ctx-token").write_text("from-context")
    assert (
        cli.main(
            ["config", "set-context", "local", "--server", "localhost", "--token-file", str(tmp_path / "ctx-token")]
        )
        == 0
    )
    assert cli.main(["config", "use-context", "local"]) == 0
    assert token_of([]) == "from-context"


KUBECONFIG_CASES: list[tuple[str, Callable[[Path], dict[str, Any]], str]] = [
    ("token", lambda d: {"token": "kube-token"}, "kube-token"),
    ("tokenFile, relative to the kubeconfig", lambda d: {"tokenFile": "sa.token"}, "kube-file-token"),
    (
        "tokenFile over token (client-go's transport reads the file)",
        lambda d: {"token": "stale", "tokenFile": "sa.token"},
        "kube-file-token",
    ),
    (
        "exec, v1",
        lambda d: {
            "exec": {
                "apiVersion": V1,
                "command": str(
                    plugin(
                        d,
                        """
                        assert info == {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                                        "spec": {"interactive": False}}, info
                        out = {"apiVersion": info["apiVersion"], "kind": "ExecCredential",
                               "status": {"token": "exec-" + sys.argv[1] + "-" + os.environ["TEAM"]}}
                        """,
                    )
                ),
                "args": ["v1"],
                "env": [{"name": "TEAM", "value": "ml"}],
                "interactiveMode": "Never",
            }
        },
        "exec-v1-ml",
    ),
    (
        "exec, v1beta1, relative command, cluster info provided",
        lambda d: {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": "./"
                + str(
                    plugin(
                        d,
                        """
                    c = info["spec"]["cluster"]
                    out = {"apiVersion": info["apiVersion"], "kind": "ExecCredential",
                           "status": {"token": c["server"] + "|" + json.dumps(c["config"])}}
                    """,
                    ).relative_to(d)
                ),
                "provideClusterInfo": True,
            }
        },
        'https://k8s.example:6443|{"audience": "berth"}',
    ),
]


@pytest.mark.parametrize(("user", "want"), [c[1:] for c in KUBECONFIG_CASES], ids=[c[0] for c in KUBECONFIG_CASES])
def test_the_kubeconfig_users_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user: Callable[[Path], dict[str, Any]], want: str
) -> None:
    (tmp_path / "sa.token").write_text("kube-file-token\n")
    cluster = {
        "server": "https://k8s.example:6443",
        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "berth"}}],
    }
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", user(tmp_path), cluster=cluster)))
    assert token_of([]) == want


def test_kubeconfig_files_merge_as_kubectl_merges_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The first file that sets current-context wins; the first to define a user wins it.
    first = tmp_path / "a"
    first.write_text(
        yaml.safe_dump({"current-context": "dev", "users": [{"name": "alice", "user": {"token": "a-wins"}}]})
    )
    second = write_kubeconfig(tmp_path / "b", {"token": "b-loses"}, current="other")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{first}:{second}")
    assert token_of([]) == "a-wins"


# ---------------------------------------------------------------- precedence


def test_precedence_flag_then_env_then_context_then_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", {"token": "kube"})))
    assert token_of([]) == "kube"
    (tmp_path / "ctx").write_text("context")
    assert (
        cli.main(
            ["config", "set-context", "local", "--server", "127.0.0.1:50051", "--token-file", str(tmp_path / "ctx")]
        )
        == 0
    )
    assert cli.main(["config", "use-context", "local"]) == 0
    assert token_of([]) == "context"
    monkeypatch.setenv(common.TOKEN_ENV, "env")
    assert token_of([]) == "env"
    (tmp_path / "flag").write_text("flag")
    assert token_of(["--token-file", str(tmp_path / "flag")]) == "flag"


@pytest.mark.parametrize(
    ("argv", "sent"),
    [
        ([], True),
        (["--server", "127.0.0.1:7"], True),
        (["--server", "[::1]"], True),
        (["--server", "berth.example"], False),
        (["--server", "berth.example", "--tls"], True),
        (["--server", "10.0.0.5:50051", "--ca-file", "ca.pem"], True),
    ],
    ids=["localhost", "127.0.0.1", "::1", "remote plaintext", "remote TLS", "remote with a CA"],
)
def test_the_kubeconfig_token_crosses_a_network_only_over_tls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], sent: bool
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", {"token": "kube"})))
    assert token_of(argv) == ("kube" if sent else None)


def test_the_token_goes_as_bearer_metadata(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", {"token": "kube"})))
    args = cli._parser().parse_args(["get", "pods"])
    assert common.settings(args).metadata() == (("authorization", "Bearer kube"),)


# ---------------------------------------------------------------- what cannot be used


BAD_CASES: list[tuple[str, Callable[[Path], dict[str, Any]], str]] = [
    (
        "an interactive plugin",
        lambda d: {"exec": {"apiVersion": V1, "command": "kubelogin", "interactiveMode": "Always"}},
        "needs a terminal (interactiveMode: Always), which berth does not give it; pass a token with --token-file",
    ),
    (
        "a plugin not installed",
        lambda d: {"exec": {"apiVersion": V1, "command": "no-such-plugin-xyz", "installHint": "brew install xyz"}},
        "exec plugin no-such-plugin-xyz not found (brew install xyz); or pass a token with --token-file",
    ),
    (
        "a plugin that fails",
        lambda d: {"exec": {"apiVersion": V1, "command": str(plugin(d, "sys.stderr.write('expired'); sys.exit(3)"))}},
        "exec plugin cred-plugin exited with 3: expired",
    ),
    (
        "a plugin answering another version",
        lambda d: {
            "exec": {
                "apiVersion": V1,
                "command": str(
                    plugin(
                        d,
                        "out = {'apiVersion': 'client.authentication.k8s.io/v1beta1', 'kind': 'ExecCredential',"
                        " 'status': {'token': 't'}}",
                    )
                ),
            }
        },
        "exec plugin is configured to use API version client.authentication.k8s.io/v1, "
        "plugin returned version client.authentication.k8s.io/v1beta1",
    ),
    (
        "a plugin answering a certificate only",
        lambda d: {
            "exec": {
                "apiVersion": V1,
                "command": str(
                    plugin(
                        d,
                        "out = {'apiVersion': info['apiVersion'], 'kind': 'ExecCredential',"
                        " 'status': {'clientCertificateData': 'x', 'clientKeyData': 'y'}}",
                    )
                ),
            }
        },
        "returned no token (a client certificate is not sent to Berth); pass a token with --token-file",
    ),
    (
        "an unknown exec apiVersion",
        lambda d: {"exec": {"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "x"}},
        "exec.apiVersion: 'client.authentication.k8s.io/v1alpha1' is not one of",
    ),
]


@pytest.mark.parametrize(("user", "said"), [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES])
def test_a_kubeconfig_credential_berth_cannot_use_is_one_warning_and_no_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], user: ExecCase, said: str
) -> None:
    kc = write_kubeconfig(tmp_path / "kubeconfig", user(tmp_path))
    monkeypatch.setenv("KUBECONFIG", str(kc))
    assert token_of([]) is None
    err = capsys.readouterr().err
    assert err.startswith(f'berth: warning: no token from the kubeconfig: {kc} user "alice": '), err
    assert said in err
    assert err.count("\n") == 1


def test_a_user_with_a_client_certificate_only_sends_no_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kc = write_kubeconfig(tmp_path / "kubeconfig", {"client-certificate-data": "eA==", "client-key-data": "eQ=="})
    monkeypatch.setenv("KUBECONFIG", str(kc))
    assert kubeconfig.user_token() is None
    assert token_of([]) is None


def test_no_kubeconfig_means_no_yaml_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    # The common case costs a stat per file: nothing is read or imported.
    monkeypatch.setattr(kubeconfig, "_load", lambda path: pytest.fail("read a kubeconfig that does not exist"))
    assert kubeconfig.user_token() is None


def test_a_kubeconfig_that_is_not_yaml_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kc = tmp_path / "kubeconfig"
    kc.write_text("users: [\n")
    monkeypatch.setenv("KUBECONFIG", str(kc))
    with pytest.raises(kubeconfig.KubeconfigError, match=rf"^{kc}: not valid YAML: "):
        kubeconfig.user_token()
