"""The bearer token of the current kubeconfig context's user, found as
kubectl finds it, for client commands given no other token.

Files: ``$KUBECONFIG`` (a list joined by ``os.pathsep``; files that do not
exist are skipped; the first file that sets ``current-context`` wins, and
the first that defines a context or user name wins it, as client-go's
``ClientConfigLoadingRules.Load`` merges them), else ``~/.kube/config``.

The user's credential, in client-go's order (``tools/clientcmd/
client_config.go`` v0.37.2, ``getUserIdentificationPartialConfig``; a
``tokenFile`` beside a ``token`` is the one its transport reads,
``NewBearerAuthWithRefreshRoundTripper``): ``tokenFile``, ``token``, then
an ``exec`` credential plugin run as kubectl runs it
(``plugin/pkg/client/auth/exec/exec.go``): the command with its ``args``
and ``env`` added to ours, ``KUBERNETES_EXEC_INFO`` holding an
``ExecCredential`` of the configured ``apiVersion``
(``client.authentication.k8s.io/v1`` or ``v1beta1``) with
``spec.interactive: false`` (and ``spec.cluster`` with
``provideClusterInfo``), its stdout an ``ExecCredential`` whose
``status.token`` is used. A relative command with a path separator is
relative to the kubeconfig's folder. A plugin that must talk to the user
(``interactiveMode: Always``) or answers with a client certificate only is
refused with how to pass a token instead. ``auth-provider`` (removed from
kubectl in 1.26) is not read.

Nothing here is imported unless a client command has no other token, and
YAML is parsed only when a file exists.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import subprocess
from pathlib import Path
from typing import Any

__all__ = [
    "EXEC_TIMEOUT_SECONDS",
    "KubeconfigError",
    "UserToken",
    "files",
    "user_token",
]

#: How long an exec plugin may take (kubectl waits without a limit; a CLI
#: command that hangs on a login helper is worse than one that says so).
EXEC_TIMEOUT_SECONDS = 60.0

_EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
_HOW_ELSE = "pass a token with --token-file or $BERTH_TOKEN"


class KubeconfigError(Exception):
    """The kubeconfig names a credential Berth cannot use; one line naming the file."""


@dataclasses.dataclass(frozen=True, slots=True)
class UserToken:
    token: str
    #: Where it came from, for messages: ``~/.kube/config user "alice" (exec: aws)``.
    source: str


def files(environ: dict[str, str] | os._Environ[str] | None = None) -> list[Path]:
    """The kubeconfig files kubectl would read, in order (existing ones only)."""
    env = os.environ if environ is None else environ
    raw = env.get("KUBECONFIG", "")
    if raw:
        paths = [Path(p).expanduser() for p in raw.split(os.pathsep) if p]
    else:
        paths = [Path(env.get("HOME") or Path.home()) / ".kube" / "config"]
    return [p for p in paths if p.is_file()]


def _load(path: Path) -> dict[str, Any]:
    import yaml  # only once a kubeconfig exists

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        doc = yaml.load(path.read_text(), Loader=loader)  # a safe loader (the C one when built)
    except OSError as e:
        raise KubeconfigError(f"{path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise KubeconfigError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise KubeconfigError(f"{path}: expected a kubeconfig object")
    return doc


def _named(doc: dict[str, Any], key: str, inner: str, path: Path) -> dict[str, tuple[dict[str, Any], Path]]:
    out: dict[str, tuple[dict[str, Any], Path]] = {}
    items = doc.get(key) or []
    if not isinstance(items, list):
        raise KubeconfigError(f"{path}: {key}: expected a list")
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise KubeconfigError(f"{path}: {key}[{i}]: expected an object with a name")
        body = item.get(inner) or {}
        if not isinstance(body, dict):
            raise KubeconfigError(f"{path}: {key}[{i}].{inner}: expected an object")
        out[item["name"]] = (body, path)
    return out


def user_token(
    environ: dict[str, str] | os._Environ[str] | None = None, *, timeout: float = EXEC_TIMEOUT_SECONDS
) -> UserToken | None:
    """The current context's user's token, or None when there is no
    kubeconfig, no current context or a user without a token credential
    (a client certificate is for the API server, not for Berth)."""
    current = ""
    contexts: dict[str, tuple[dict[str, Any], Path]] = {}
    users: dict[str, tuple[dict[str, Any], Path]] = {}
    clusters: dict[str, tuple[dict[str, Any], Path]] = {}
    for path in files(environ):
        doc = _load(path)
        current = current or str(doc.get("current-context") or "")
        for name, value in _named(doc, "contexts", "context", path).items():
            contexts.setdefault(name, value)
        for name, value in _named(doc, "users", "user", path).items():
            users.setdefault(name, value)
        for name, value in _named(doc, "clusters", "cluster", path).items():
            clusters.setdefault(name, value)
    if not current or current not in contexts:
        return None
    context, _ = contexts[current]
    user_name = str(context.get("user") or "")
    if user_name not in users:
        return None
    user, path = users[user_name]
    where = f'{path} user "{user_name}"'
    if user.get("tokenFile"):
        token_path = Path(str(user["tokenFile"])).expanduser()
        if not token_path.is_absolute():
            token_path = path.parent / token_path  # ResolvePaths: relative to the kubeconfig
        try:
            token = token_path.read_text().strip()
        except OSError as e:
            raise KubeconfigError(f"{where}: tokenFile {token_path}: {e.strerror or e}") from None
        if token:
            return UserToken(token, f"{where} (tokenFile)")
    if isinstance(user.get("token"), str) and user["token"].strip():
        return UserToken(user["token"].strip(), f"{where} (token)")
    if isinstance(user.get("exec"), dict):
        cluster = clusters.get(str(context.get("cluster") or ""), ({}, path))[0]
        return _run_exec(user["exec"], cluster, path, where, environ, timeout)
    return None


def _exec_cluster(cluster: dict[str, Any]) -> dict[str, Any]:
    """ExecCredential's ``spec.cluster`` from a kubeconfig cluster
    (``clientauthentication.Cluster``: server, tls-server-name,
    insecure-skip-tls-verify, certificate-authority-data, proxy-url,
    disable-compression and the ``client.authentication.k8s.io/exec``
    extension as ``config``)."""
    out: dict[str, Any] = {"server": cluster.get("server", "")}
    if cluster.get("tls-server-name"):
        out["tls-server-name"] = cluster["tls-server-name"]
    if cluster.get("insecure-skip-tls-verify"):
        out["insecure-skip-tls-verify"] = True
    ca = cluster.get("certificate-authority-data")
    if not ca and cluster.get("certificate-authority"):
        try:
            ca = base64.b64encode(Path(str(cluster["certificate-authority"])).expanduser().read_bytes()).decode()
        except OSError:
            ca = None
    if ca:
        out["certificate-authority-data"] = ca
    if cluster.get("proxy-url"):
        out["proxy-url"] = cluster["proxy-url"]
    if cluster.get("disable-compression"):
        out["disable-compression"] = True
    for ext in cluster.get("extensions") or []:
        if isinstance(ext, dict) and ext.get("name") == "client.authentication.k8s.io/exec":
            out["config"] = ext.get("extension")
    return out


def _run_exec(
    spec: dict[str, Any],
    cluster: dict[str, Any],
    path: Path,
    where: str,
    environ: dict[str, str] | os._Environ[str] | None,
    timeout: float,
) -> UserToken:
    command = spec.get("command")
    if not isinstance(command, str) or not command:
        raise KubeconfigError(f"{where}: exec.command: required")
    api_version = spec.get("apiVersion")
    if api_version not in _EXEC_API_VERSIONS:
        raise KubeconfigError(
            f"{where}: exec.apiVersion: {api_version!r} is not one of {', '.join(_EXEC_API_VERSIONS)}"
        )
    if spec.get("interactiveMode") == "Always":
        raise KubeconfigError(
            f"{where}: the exec plugin {command} needs a terminal (interactiveMode: Always), which berth does "
            f"not give it; {_HOW_ELSE} (e.g. the token `kubectl create token` or your login helper prints)"
        )
    if os.sep in command and not os.path.isabs(command):
        command = str(path.parent / command)  # GetAuthInfoFileReferences: relative to the kubeconfig
    cred: dict[str, Any] = {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    if spec.get("provideClusterInfo"):
        cred["spec"]["cluster"] = _exec_cluster(cluster)
    env = dict(os.environ if environ is None else environ)
    for i, item in enumerate(spec.get("env") or []):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise KubeconfigError(f"{where}: exec.env[{i}]: expected {{name, value}}")
        env[item["name"]] = str(item.get("value", ""))
    env["KUBERNETES_EXEC_INFO"] = json.dumps(cred)
    args = [str(a) for a in spec.get("args") or []]
    name = os.path.basename(command)
    try:
        done = subprocess.run(  # the user's own kubeconfig names the command, as for kubectl
            [command, *args],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        hint = spec.get("installHint")
        extra = f" ({' '.join(str(hint).split())})" if hint else ""
        raise KubeconfigError(f"{where}: exec plugin {command} not found{extra}; or {_HOW_ELSE}") from None
    except subprocess.TimeoutExpired:
        raise KubeconfigError(f"{where}: exec plugin {name} gave no credential within {timeout:g}s") from None
    except OSError as e:
        raise KubeconfigError(f"{where}: exec plugin {command}: {e.strerror or e}") from None
    if done.returncode != 0:
        said = " ".join(done.stderr.decode(errors="replace").split())[-300:]
        raise KubeconfigError(f"{where}: exec plugin {name} exited with {done.returncode}: {said or 'no message'}")
    try:
        out = json.loads(done.stdout)
    except ValueError:
        raise KubeconfigError(f"{where}: exec plugin {name} did not print an ExecCredential (JSON)") from None
    if not isinstance(out, dict) or out.get("kind") != "ExecCredential":
        raise KubeconfigError(f"{where}: exec plugin {name} did not print an ExecCredential")
    if out.get("apiVersion") != api_version:
        raise KubeconfigError(
            f"{where}: exec plugin is configured to use API version {api_version}, "
            f"plugin returned version {out.get('apiVersion')}"
        )
    status = out.get("status")
    if not isinstance(status, dict):
        raise KubeconfigError(f"{where}: exec plugin didn't return a status field")
    token = status.get("token")
    if not isinstance(token, str) or not token:
        raise KubeconfigError(
            f"{where}: exec plugin {name} returned no token (a client certificate is not sent to Berth); {_HOW_ELSE}"
        )
    return UserToken(token, f"{where} (exec: {name})")
