"""What every ``berth`` client command shares: its errors and exit codes,
the connection options (``--server``, ``--context``, TLS, the bearer token)
and the :class:`berth_client.Client` they describe.

Where the server comes from, first match wins (kubectl's order, with
``$BERTH_SERVER`` where ``$KUBECONFIG``'s context would be):
``--server``; the context named by ``--context``; ``$BERTH_SERVER``; the
contexts file's current context; ``localhost:50051``. A context in effect
(the one named, or the current one when it gives the server) also gives
TLS and the token file unless flags do.

The bearer token, sent as ``authorization: Bearer`` on every call, first
match wins: ``--token-file``; ``$BERTH_TOKEN``; the context's
``tokenFile``; the current kubeconfig context's user (``tokenFile``,
``token`` or an ``exec`` credential plugin: :mod:`berth.cli.kubeconfig`) —
that last one only over TLS or to a loopback address (``kubectl
port-forward``), so a Kubernetes credential never crosses a network in
clear text to a server the kubeconfig does not name.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from typing import Any

import berth_client
from berth.cli import contexts

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PIPE",
    "EXIT_USAGE",
    "SERVER_ENV",
    "TOKEN_ENV",
    "CliError",
    "Formatter",
    "UsageError",
    "add_connection_options",
    "client",
    "failure",
    "pod_key",
    "settings",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_PIPE = 141

#: Where client commands find the bearer token when --token-file is not given.
TOKEN_ENV = "BERTH_TOKEN"
#: Where client commands find the server when --server and --context are not given.
SERVER_ENV = "BERTH_SERVER"


class CliError(Exception):
    """Printed as ``berth: <message>``; exit status 1."""


class UsageError(CliError):
    """A flag or a manifest the command cannot take; exit status 2, before anything is sent."""


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's examples as written, and leaves out of help pages
    the options marked ``hidden`` (the TLS and token flags, listed once by
    ``berth options``); they still parse and complete."""

    def add_arguments(self, actions: Any) -> None:
        super().add_arguments([a for a in actions if not getattr(a, "hidden", False)])

    def add_usage(self, usage: Any, actions: Any, groups: Any, prefix: Any = None) -> None:
        super().add_usage(usage, [a for a in actions if not getattr(a, "hidden", False)], groups, prefix)


#: The client library's setting names, as the flags spell them.
FLAGS = {
    "server": "--server",
    "ca_file": "--ca-file",
    "cert_file": "--cert-file",
    "key_file": "--key-file",
    "server_name": "--server-name",
    "token_file": "--token-file",
}


def add_connection_options(p: argparse.ArgumentParser, *, hidden: bool = True) -> None:
    """``--server`` and ``--context`` on the help page; the token and TLS
    flags parse everywhere but are listed only by ``berth options``
    (``hidden=False``)."""
    g = p.add_argument_group("connection (TLS and token flags: berth options)")
    g.add_argument(
        "--server",
        metavar="HOST[:PORT]",
        help=f"Berth's gRPC address; port 50051 unless given (default: --context, ${SERVER_ENV}, "
        "the current context, localhost)",
    )
    g.add_argument("--context", metavar="NAME", help=f"a context of {contexts.describe_path()} (berth config)")

    def secret(*flags: str, **kw: Any) -> None:
        action = g.add_argument(*flags, **kw)
        action.hidden = hidden  # type: ignore[attr-defined]

    secret(
        "--token-file",
        metavar="FILE",
        help=f"the bearer token, sent with every call; default ${TOKEN_ENV}, then the context's tokenFile, "
        "then the current kubeconfig user's token (over TLS or to localhost only)",
    )
    secret("--tls", action="store_true", help="connect with TLS, trusting the system's CAs")
    secret("--ca-file", metavar="PEM", help="trust this CA bundle for the server's certificate (implies --tls)")
    secret("--cert-file", metavar="PEM", help="client certificate, for a server with grpc.tls.clientCAFile")
    secret("--key-file", metavar="PEM", help="the client certificate's private key (unencrypted)")
    secret("--server-name", metavar="NAME", help="the name to expect in the server's certificate (default: HOST)")
    secret(
        "--request-timeout",
        metavar="SECONDS",
        type=float,
        default=30.0,
        help="deadline of each call (default 30); UNAVAILABLE is retried within it",
    )


def _tls_flags(args: argparse.Namespace) -> berth_client.Tls | None:
    ca, cert, key, name = (getattr(args, a, None) for a in ("ca_file", "cert_file", "key_file", "server_name"))
    if not (getattr(args, "tls", False) or ca or cert or key or name):
        return None
    return berth_client.Tls(ca_file=ca, cert_file=cert, key_file=key, server_name=name)


def settings(args: argparse.Namespace) -> berth_client.Settings:
    """The connection the flags, the environment and the contexts file describe."""
    named = getattr(args, "context", None)
    ctx = contexts.load().get(named) if named else None
    server = getattr(args, "server", None) or (ctx.server if ctx else None) or os.environ.get(SERVER_ENV)
    if not server and not named:
        ctx = contexts.load().current()  # the current context gives the server, so its TLS and token too
        server = ctx.server if ctx else None
    tls = _tls_flags(args) or (ctx.tls if ctx else None)
    token_file = getattr(args, "token_file", None)
    token = None
    if token_file:
        token = berth_client.connection.read_token(token_file)
    elif os.environ.get(TOKEN_ENV, "").strip():
        token = os.environ[TOKEN_ENV].strip()
    elif ctx is not None and ctx.token_file:
        token = berth_client.connection.read_token(ctx.token_file)
    elif tls is not None or _loopback(server or "localhost"):
        token = _kubeconfig_token()
    return berth_client.Settings(
        server=server or "localhost",
        tls=tls,
        token=token,
        timeout=getattr(args, "request_timeout", None) or 30.0,
    )


def _loopback(server: str) -> bool:
    """Whether ``server`` (HOST[:PORT], [IPv6][:PORT] or a gRPC URI) is this machine."""
    try:
        target = berth_client.target(server)
    except berth_client.SettingsError:
        return False
    if target.startswith("unix:"):
        return True
    host = target.rsplit(":", 1)[0].rpartition("/")[2].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _kubeconfig_token() -> str | None:
    """The kubeconfig user's token; a kubeconfig that cannot give one is a
    warning (the command goes on without a token: most reads need none)."""
    from berth.cli import kubeconfig  # only when no other token is given

    try:
        found = kubeconfig.user_token()
    except kubeconfig.KubeconfigError as e:
        print(f"berth: warning: no token from the kubeconfig: {e}", file=sys.stderr)
        return None
    return found.token if found is not None else None


def client(args: argparse.Namespace) -> berth_client.Client:
    """A blocking client for the command's connection; close it (``with``)."""
    s = settings(args)
    berth_client.target(s.server)  # a malformed --server fails before a thread starts
    return berth_client.Client.from_settings(s)


_HINTS = {
    "untrusted": "give the CA that signed it with --ca-file",
    "hostname": "connect by a name the certificate holds, or set --server-name",
    "not-tls": "leave out --tls and --ca-file",
    "closed": "a TLS port needs --tls/--ca-file, and with grpc.tls.clientCAFile a client certificate it trusts: "
    "--cert-file/--key-file",
}


def failure(e: Exception) -> str:
    """A client-library error as the one line ``berth:`` prints."""
    if isinstance(e, berth_client.SettingsError):
        detail = e.detail
        for option, flag in FLAGS.items():
            if "_" in option:  # setting names, not words ("server" is both)
                detail = detail.replace(option, flag)
        flag = "/".join(FLAGS.get(o, o) for o in e.option.split("/"))
        return detail if detail.startswith("--") else f"{flag}: {detail}"
    if isinstance(e, berth_client.Unavailable):
        hint = _HINTS.get(e.cause)
        return f"{e.details} ({hint})" if hint else e.details
    if isinstance(e, berth_client.BerthError):
        return f"{e.code.name.lower()}: {e.details}"
    return str(e)


def pod_key(arg: str, namespace: str | None) -> tuple[str, str]:
    """``NS/NAME`` (kubectl's ``pod/`` prefix accepted), or ``NAME`` in ``-n``."""
    ref = arg.removeprefix("pod/").removeprefix("pods/")
    ns, sep, name = ref.rpartition("/")
    if not sep:
        ns = namespace or "default"
    if not ns or not name or "/" in ns:
        raise CliError(f"{arg!r}: expected NAMESPACE/NAME or NAME")
    return ns, name
