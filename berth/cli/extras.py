"""``berth cancel``, ``version``, ``completion`` and ``options``: the small
commands around the scheduling ones."""

from __future__ import annotations

import argparse
import os
import platform
import sys
import textwrap
from typing import Any

import grpc

from berth.cli import common, contexts, output

__all__ = ["register"]

#: Options whose value is a path: the shells complete them as files.
_FILE_OPTIONS = frozenset(
    {"--file", "--config", "--cluster", "--kubeconfig", "--token-file", "--ca-file", "--cert-file", "--key-file"}
)
SHELLS = ("bash", "zsh")


# ---------------------------------------------------------------- cancel


def cmd_cancel(args: argparse.Namespace) -> int:
    """Withdraw pending pods; every name is checked before anything is cancelled."""
    keys = [common.pod_key(a, args.namespace) for a in args.pods]
    results: list[dict[str, Any]] = []
    with common.client(args) as c:
        for ns, name in keys:
            resp = c.cancel(name, ns)
            results.append({"pod": f"{ns}/{name}", "cancelled": resp.cancelled, "message": resp.message})
    if output.emit(results, args.output):
        pass
    else:
        for r in results:
            name = r["pod"].split("/", 1)[1]
            if r["cancelled"]:
                print(f"pod/{name}" if args.output == "name" else f"pod/{name} cancelled")
            else:
                print(f"berth: pod/{name} not cancelled: {r['message']}", file=sys.stderr)
    return common.EXIT_OK if all(r["cancelled"] for r in results) else common.EXIT_FAILED


# ---------------------------------------------------------------- version


def _client_version() -> dict[str, str]:
    import importlib.metadata  # only here: ~10 ms the other commands do without

    try:
        version = importlib.metadata.version("berth")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree without installing it
        version = "unknown"
    return {"version": version, "python": platform.python_version(), "grpcio": grpc.__version__}


def cmd_version(args: argparse.Namespace) -> int:
    """The client's version; with a server (``--server``, ``--context`` or
    ``$BERTH_SERVER``), whether it answers.

    Berth's API has no version RPC, so the server part is the standard gRPC
    health check (``grpc.health.v1.Health/Check``): it shows the address is
    a Berth that serves, over the TLS settings given.
    """
    out: dict[str, Any] = {"clientVersion": _client_version()}
    if args.server or args.context or os.environ.get(common.SERVER_ENV):
        with common.client(args) as c:
            out["server"] = {"address": args.server or c.address, "status": c.health()}
    if output.emit(out, args.output):
        return common.EXIT_OK
    v = out["clientVersion"]
    print(f"Client Version: {v['version']} (python {v['python']}, grpcio {v['grpcio']})")
    if "server" in out:
        s = out["server"]
        print(f"Server: {s['address']} {s['status']} (the server does not report its version)")
    return common.EXIT_OK


# ---------------------------------------------------------------- completion and options


def cmd_completion(args: argparse.Namespace) -> int:
    """A completion script generated from the parser itself (shtab), so it
    never falls behind the commands and flags."""
    import shtab  # only here: 50 ms of start-up

    root: argparse.ArgumentParser = args.root_parser
    _mark_files(root, shtab.FILE)
    print(shtab.complete(root, shell=args.shell), end="")
    return common.EXIT_OK


def _mark_files(parser: argparse.ArgumentParser, file: Any) -> None:
    for action in parser._actions:  # argparse keeps them here; shtab reads the same list
        if set(action.option_strings) & _FILE_OPTIONS:
            action.complete = file  # type: ignore[attr-defined]
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _mark_files(sub, file)


OPTIONS = f"""The connection options every client command takes:

{{options}}
Environment:
  {common.SERVER_ENV}   the server when neither --server nor --context is given
  {common.TOKEN_ENV}    the bearer token when --token-file is not given
  {contexts.PATH_ENV}   the contexts file (default ~/.config/berth/config; see berth config)
  KUBECONFIG     the kubeconfig whose current user's token is sent when no other is given
  GRPC_VERBOSITY  grpc's own logging (the CLI sets ERROR unless told)

The server: --server, else --context's, else ${common.SERVER_ENV}, else the current
context's, else localhost:50051; a HOST without a port means port 50051. A
context in effect gives TLS and the token file too, unless flags do.

The token: --token-file, else ${common.TOKEN_ENV}, else the context's tokenFile,
else the current kubeconfig context's user (token, tokenFile or an exec
credential plugin), that last one only over TLS or to a loopback address.
"""


def cmd_options(args: argparse.Namespace) -> int:
    p = argparse.ArgumentParser(prog="berth", add_help=False, formatter_class=common.Formatter)
    common.add_connection_options(p, hidden=False)
    group = p._action_groups[-1]
    formatter = p._get_formatter()
    formatter.add_arguments(group._group_actions)
    print(OPTIONS.format(options=textwrap.indent(formatter.format_help(), "  ")), end="")
    return common.EXIT_OK


# ---------------------------------------------------------------- registration


def register(sub: Any, formatter: type[argparse.HelpFormatter], root: argparse.ArgumentParser) -> None:
    c = sub.add_parser(
        "cancel",
        help="withdraw submitted pods that are not bound yet",
        formatter_class=formatter,
        epilog="Examples:\n  berth cancel batch/train-3\n  berth cancel web-0 web-1 -n shop\n\n"
        "Exit status: 0 when every pod was cancelled, 1 when one was not (bound, unknown, not Berth's).",
    )
    c.add_argument("pods", nargs="+", metavar="NS/NAME", help="pods to cancel (NAME alone: in --namespace)")
    c.add_argument("-n", "--namespace", default="default", help="namespace of pods given by NAME (default: default)")
    c.add_argument(
        "-o",
        "--output",
        choices=("text", "json", "yaml", "name"),
        default="text",
        help="text (default): pod/NAME cancelled; json, yaml: each verdict; name: pod/NAME of those cancelled",
    )
    common.add_connection_options(c)
    c.set_defaults(func=cmd_cancel)

    v = sub.add_parser(
        "version",
        help="print the client's version (and, given a server, whether it serves)",
        formatter_class=formatter,
        epilog="Examples:\n  berth version\n  berth version --server localhost -o json",
    )
    v.add_argument(
        "-o", "--output", choices=("text", "json", "yaml"), default="text", help="text (default), json or yaml"
    )
    common.add_connection_options(v)
    v.set_defaults(func=cmd_version)

    comp = sub.add_parser(
        "completion",
        help="print a shell completion script",
        formatter_class=formatter,
        description="A completion script generated from the parser (every command and flag).",
        epilog='Examples:\n  source <(berth completion bash)\n  berth completion zsh > "${fpath[1]}/_berth"',
    )
    comp.add_argument("shell", choices=SHELLS)
    comp.set_defaults(func=cmd_completion, root_parser=root)

    o = sub.add_parser(
        "options",
        help="list the connection options every client command takes (TLS, token, ...)",
        formatter_class=formatter,
        epilog="Examples:\n  berth options",
    )
    o.set_defaults(func=cmd_options)
