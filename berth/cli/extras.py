"""``berth cancel``, ``berth version`` and ``berth completion``: the small
commands around the scheduling ones."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
import sys
from collections.abc import Callable
from typing import Any

import grpc
import shtab
from grpc_health.v1 import health_pb2, health_pb2_grpc

from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from berth.cli import common
from berth.cli.common import CliError

__all__ = ["register"]

#: Options whose value is a path: the shells complete them as files.
_FILE_OPTIONS = frozenset(
    {"--file", "--config", "--cluster", "--kubeconfig", "--token-file", "--ca-file", "--cert-file", "--key-file"}
)
SHELLS = ("bash", "zsh")


# ---------------------------------------------------------------- cancel


def _pod_key(arg: str, namespace: str) -> tuple[str, str]:
    """``NS/NAME``, or ``NAME`` in ``--namespace``; ``pod/`` as kubectl accepts it."""
    ref = arg.removeprefix("pod/").removeprefix("pods/")
    ns, sep, name = ref.rpartition("/")
    if not sep:
        ns = namespace
    if not ns or not name or "/" in ns:
        raise CliError(f"{arg!r}: expected NAMESPACE/NAME or NAME")
    return ns, name


def cmd_cancel(args: argparse.Namespace) -> int:
    """Withdraw pending pods; every name is checked before anything is cancelled."""
    keys = [_pod_key(a, args.namespace) for a in args.pods]
    results: list[dict[str, Any]] = []
    with common.connect(args) as ch:
        stub = scheduler_pb2_grpc.SchedulerStub(ch)
        for ns, name in keys:
            resp = common.call(stub.Cancel, scheduler_pb2.CancelRequest(namespace=ns, name=name), args.server)
            results.append({"pod": f"{ns}/{name}", "cancelled": resp.cancelled, "message": resp.message})
    if args.output == "json":
        print(json.dumps(results, indent=2))
    else:
        for r in results:
            name = r["pod"].split("/", 1)[1]
            if r["cancelled"]:
                print(f"pod/{name} cancelled")
            else:
                print(f"berth: pod/{name} not cancelled: {r['message']}", file=sys.stderr)
    return 0 if all(r["cancelled"] for r in results) else 1


# ---------------------------------------------------------------- version


def _client_version() -> dict[str, str]:
    try:
        version = importlib.metadata.version("berth")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree without installing it
        version = "unknown"
    return {"version": version, "python": platform.python_version(), "grpcio": grpc.__version__}


def cmd_version(args: argparse.Namespace) -> int:
    """The client's version; with ``--server``, whether that server answers.

    Berth's API has no version RPC, so the server part is the standard gRPC
    health check (``grpc.health.v1.Health/Check``): it shows the address is
    a Berth that serves, over the TLS settings given.
    """
    out: dict[str, Any] = {"clientVersion": _client_version()}
    if args.server:
        with common.connect(args) as ch:
            resp = common.call(health_pb2_grpc.HealthStub(ch).Check, health_pb2.HealthCheckRequest(), args.server)
        out["server"] = {
            "address": args.server,
            "status": health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status),
        }
    if args.output == "json":
        print(json.dumps(out, indent=2))
        return 0
    c = out["clientVersion"]
    print(f"Client Version: {c['version']} (python {c['python']}, grpcio {c['grpcio']})")
    if "server" in out:
        s = out["server"]
        print(f"Server: {s['address']} {s['status']} (the server does not report its version)")
    return 0


# ---------------------------------------------------------------- completion


def cmd_completion(args: argparse.Namespace) -> int:
    """A completion script generated from the parser itself (shtab), so it
    never falls behind the commands and flags."""
    root: argparse.ArgumentParser = args.root_parser
    _mark_files(root)
    print(shtab.complete(root, shell=args.shell), end="")
    return 0


def _mark_files(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:  # argparse keeps them here; shtab reads the same list
        if set(action.option_strings) & _FILE_OPTIONS:
            action.complete = shtab.FILE  # type: ignore[attr-defined]
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _mark_files(sub)


# ---------------------------------------------------------------- registration


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    client: Callable[..., argparse.ArgumentParser],
    root: argparse.ArgumentParser,
) -> None:
    """Adds the commands to ``berth``'s subparsers; ``client`` is main's
    factory for a gRPC client command (``--server``, TLS, ``-o``)."""
    c = client("cancel", "withdraw submitted pods that are not bound yet")
    c.add_argument("pods", nargs="+", metavar="NS/NAME", help="pods to cancel (NAME alone: in --namespace)")
    c.add_argument("-n", "--namespace", default="default", help="namespace of pods given by NAME (default: default)")
    c.set_defaults(func=cmd_cancel)

    v = sub.add_parser("version", help="print the client's version (and, with --server, the server's status)")
    common.add_connection_options(v, server_default=None)
    v.add_argument("-o", "--output", choices=("text", "json"), default="text")
    v.set_defaults(func=cmd_version)

    comp = sub.add_parser(
        "completion",
        help="print a shell completion script",
        description='bash: source <(berth completion bash); zsh: berth completion zsh > "${fpath[1]}/_berth"',
    )
    comp.add_argument("shell", choices=SHELLS)
    comp.set_defaults(func=cmd_completion, root_parser=root)
