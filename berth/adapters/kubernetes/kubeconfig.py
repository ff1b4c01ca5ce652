"""From ``--kubeconfig`` or the pod's service account to an ApiClient, or one
clear line saying what is wrong.

kubernetes-asyncio's loaders assume a well-formed file: a missing one ends in
``Invalid kube-config file. Expected key current-context in kube-config``, an
empty one in an AttributeError, bad certificate data in an SSL error at the
first request. Before calling them we check what client-go's
``clientcmd.ConfirmUsable`` checks for the chosen context
(``k8s.io/client-go/tools/clientcmd/validation.go``: the context exists, it
names a known cluster and user, the cluster has a server, referenced
certificate files can be read) plus that every ``*-data`` field is base64 and
the TLS material loads, and raise :class:`berth.config.ConfigError`, which
``berth serve`` prints as one line with exit status 2::

    kubeconfig /x/config: no current-context set (kubectl config use-context NAME)

In-cluster mode checks what ``rest.InClusterConfig`` needs
(``k8s.io/client-go/rest/config.go``): the service host and port variables,
then the token and CA files.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import ssl
from pathlib import Path
from typing import Any

import msgspec
import yaml
from kubernetes_asyncio import client, config
from kubernetes_asyncio.config import incluster_config

from berth.config import ConfigError

__all__ = ["load_api_client", "skip_proxy_lookups"]

#: Where a pod's service-account credentials are mounted (client-go's
#: ``rest.InClusterConfig`` reads the same files).
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class _Named(msgspec.Struct):
    name: str = ""


class _Cluster(msgspec.Struct, rename="kebab"):
    server: str = ""
    certificate_authority: str = ""
    certificate_authority_data: str = ""
    insecure_skip_tls_verify: bool = False


class _NamedCluster(_Named):
    cluster: _Cluster | None = None


class _User(msgspec.Struct, rename="kebab"):
    client_certificate: str = ""
    client_certificate_data: str = ""
    client_key: str = ""
    client_key_data: str = ""
    token_file: str = msgspec.field(default="", name="tokenFile")


class _NamedUser(_Named):
    user: _User | None = None


class _Context(msgspec.Struct):
    cluster: str = ""
    user: str = ""


class _NamedContext(_Named):
    context: _Context | None = None


class _KubeConfig(msgspec.Struct, rename="kebab"):
    clusters: list[_NamedCluster] | None = None
    users: list[_NamedUser] | None = None
    contexts: list[_NamedContext] | None = None
    current_context: str = ""


def _field_error(err: msgspec.ValidationError) -> str:
    """msgspec's ``Expected `str`, got `int` - at `$.users[0].name``` as ``users[0].name: Expected ...``."""
    msg, _, where = str(err).partition(" - at `")
    path = where.rstrip("`").removeprefix("$").removeprefix(".")
    return f"{path}: {msg}" if path else msg


def _names(items: list[Any]) -> str:
    names = [i.name for i in items if i.name]
    return ", ".join(names) if names else "none"


def _check_data(where: str, key: str, value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"{where}.{key}: not valid base64") from None


def _check_file(where: str, key: str, value: str, base: Path) -> Path:
    path = (base / Path(value).expanduser()).resolve()
    try:
        with path.open("rb"):
            pass
    except OSError as e:
        raise ConfigError(f"{where}.{key}: cannot read {path} ({e.strerror})") from None
    return path


def _validate(doc: Any, base: Path) -> tuple[str, str]:
    """client-go's ConfirmUsable for the current context; raises ConfigError
    without the file's name. Returns the names of the CA and client
    certificate fields in use, for :func:`_check_tls`'s messages."""
    if doc is None or doc == {}:
        raise ConfigError("the file is empty (no clusters, users or contexts)")
    if not isinstance(doc, dict):
        raise ConfigError(f"expected a kubeconfig mapping (kind: Config), got {type(doc).__name__}")
    try:
        kc = msgspec.convert(doc, _KubeConfig, strict=False)
    except msgspec.ValidationError as e:
        raise ConfigError(_field_error(e)) from None
    if not kc.current_context:
        raise ConfigError("no current-context set (kubectl config use-context NAME)")
    contexts = kc.contexts or []
    ctx = next((c for c in contexts if c.name == kc.current_context), None)
    if ctx is None:
        raise ConfigError(f"current-context {kc.current_context!r} is not in contexts (have: {_names(contexts)})")
    where = f"contexts[name={ctx.name}]"
    context = ctx.context or _Context()
    if not context.cluster:
        raise ConfigError(f"{where}: cluster was not specified for context {ctx.name!r}")
    clusters = kc.clusters or []
    named_cluster = next((c for c in clusters if c.name == context.cluster), None)
    if named_cluster is None:
        raise ConfigError(
            f"{where}: cluster {context.cluster!r} was not found for context {ctx.name!r} (have: {_names(clusters)})"
        )
    users = kc.users or []
    named_user = next((u for u in users if u.name == context.user), None)
    if context.user and named_user is None:
        raise ConfigError(
            f"{where}: user {context.user!r} was not found for context {ctx.name!r} (have: {_names(users)})"
        )
    cluster = named_cluster.cluster or _Cluster()
    where = f"clusters[name={named_cluster.name}].cluster"
    if not cluster.server:
        raise ConfigError(f"{where}.server: no server found for cluster {named_cluster.name!r}")
    ca_field = f"{where}.certificate-authority"
    if cluster.certificate_authority_data:
        _check_data(where, "certificate-authority-data", cluster.certificate_authority_data)
        ca_field += "-data"
    elif cluster.certificate_authority:
        _check_file(where, "certificate-authority", cluster.certificate_authority, base)
    if named_user is None or named_user.user is None:
        return ca_field, ""
    user = named_user.user
    where = f"users[name={named_user.name}].user"
    for key, data, file in (
        ("client-certificate", user.client_certificate_data, user.client_certificate),
        ("client-key", user.client_key_data, user.client_key),
    ):
        if data:
            _check_data(where, f"{key}-data", data)
        elif file:
            _check_file(where, key, file, base)
    has_cert = bool(user.client_certificate_data or user.client_certificate)
    has_key = bool(user.client_key_data or user.client_key)
    if has_cert != has_key:
        raise ConfigError(f"{where}: client-certificate and client-key must be given together")
    if user.token_file:
        _check_file(where, "tokenFile", user.token_file, base)
    return ca_field, f"{where}.client-certificate/client-key"


def _check_tls(
    configuration: client.Configuration,
    ca_field: str = "certificate-authority",
    cert_field: str = "client-certificate/client-key",
) -> None:
    """Build the TLS context the way kubernetes-asyncio's RESTClientObject
    will, so bad PEM data fails here, naming the field, and not at the first request."""
    ca = getattr(configuration, "ssl_ca_cert", None)
    try:
        ctx = ssl.create_default_context(cafile=ca)
    except (ssl.SSLError, OSError, ValueError) as e:
        raise ConfigError(f"{ca_field}: not a usable PEM certificate ({_ssl_reason(e)})") from None
    cert, key = getattr(configuration, "cert_file", None), getattr(configuration, "key_file", None)
    if cert:
        try:
            ctx.load_cert_chain(cert, keyfile=key)
        except (ssl.SSLError, OSError, ValueError) as e:
            raise ConfigError(f"{cert_field}: not a usable PEM certificate and key ({_ssl_reason(e)})") from None


def _ssl_reason(e: BaseException) -> str:
    """``[X509: NO_CERTIFICATE_OR_CRL_FOUND] no certificate or crl found`` without ``(_ssl.c:4149)``."""
    return re.sub(r"\s*\(_ssl\.c:\d+\)$", "", str(e)) or type(e).__name__


def _read(path: str) -> tuple[Path, tuple[str, str]]:
    """Read, parse and validate the kubeconfig; its path and TLS field names."""
    file = Path(path).expanduser()
    try:
        text = file.read_text()
    except FileNotFoundError:
        raise ConfigError("no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read it ({getattr(e, 'strerror', None) or e})") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"not valid YAML ({getattr(e, 'problem', None) or e}{at})") from None
    return file, _validate(doc, file.resolve().parent)


async def _from_kubeconfig(path: str) -> client.Configuration:
    file, tls_fields = _read(path)
    configuration = client.Configuration()
    try:
        await config.load_kube_config(config_file=str(file), client_configuration=configuration)
    except ConfigError:
        raise
    except Exception as e:  # the library's own checks, an exec plugin failing, ...
        raise ConfigError(str(e).removeprefix("Invalid kube-config file. ") or type(e).__name__) from None
    _check_tls(configuration, *tls_fields)
    return configuration


def _in_cluster() -> client.Configuration:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST", ""), os.environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        # client-go's rest.ErrNotInCluster says the same.
        raise ConfigError(
            "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined"
            " (not running in a pod? use --kubeconfig outside a cluster)"
        )
    token, ca = SERVICE_ACCOUNT_DIR / "token", SERVICE_ACCOUNT_DIR / "ca.crt"
    for what, path in (("service-account token", token), ("cluster CA certificate", ca)):
        try:
            if not path.read_bytes().strip():
                raise ConfigError(f"{what} {path} is empty")
        except OSError as e:
            raise ConfigError(
                f"cannot read the {what} {path} ({e.strerror}; is automountServiceAccountToken false?)"
            ) from None
    configuration = client.Configuration()
    try:
        loader = incluster_config.InClusterConfigLoader(token_filename=str(token), cert_filename=str(ca))
        loader.load_and_set(configuration)
    except Exception as e:
        raise ConfigError(str(e)) from None
    _check_tls(configuration)
    return configuration


async def load_api_client(*, kubeconfig: str | None, in_cluster: bool) -> client.ApiClient:
    """An ApiClient for the cluster; ConfigError (one line) when the
    kubeconfig or the in-cluster credentials cannot be used."""
    if in_cluster:
        try:
            configuration = _in_cluster()
        except ConfigError as e:
            raise ConfigError(f"in-cluster configuration: {e}") from None
    else:
        if not kubeconfig:
            raise ConfigError("--kubeconfig: empty path")
        path = kubeconfig
        try:
            configuration = await _from_kubeconfig(path)
        except ConfigError as e:
            raise ConfigError(f"kubeconfig {path}: {e}") from None
    return client.ApiClient(configuration)


_PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "NETRC")


def skip_proxy_lookups(api: client.ApiClient) -> None:
    """kubernetes-asyncio opens its aiohttp session with ``trust_env=True``,
    so every request looks up proxy variables and ~/.netrc in a worker thread
    (two thread hops per Binding, event and patch). With none of those
    variables set there is nothing to find: turn the lookups off. With any
    set, the session is left as the library made it."""
    if any(os.environ.get(k) for k in _PROXY_ENV) or getattr(api.configuration, "proxy", None):
        return
    session = getattr(api.rest_client, "pool_manager", None)
    if session is not None and hasattr(session, "_trust_env"):
        session._trust_env = False
