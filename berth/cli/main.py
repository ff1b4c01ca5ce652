"""The ``berth`` command: ``serve`` runs the service; the rest are clients
of a running Berth through the client library (:mod:`berth_client`).

Client commands start fast: this module and the ones it imports load
grpc, the generated stubs and PyYAML at most — never numpy, the framework,
the configuration or the model (an import-linter contract holds it).
``serve`` imports the service when it runs (:mod:`berth.cli.serve`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

import berth_client
from berth.cli import common, contexts, extras, get, inspect, submit
from berth.cli.common import CliError, Formatter, UsageError
from berth.cluster import documents

__all__ = ["main"]

DESCRIPTION = """Berth: a scheduling service for Kubernetes and batch systems.

`berth serve` runs it; every other command is a gRPC client of a running
Berth (--server HOST[:PORT], --context NAME or $BERTH_SERVER; `berth options`
lists the TLS and token flags)."""

EPILOG = """Examples:
  berth serve --cluster examples/cluster.yaml --config examples/berth.yaml
  berth get nodes
  berth submit -f examples/pods/batch.yaml --wait --timeout 10
  berth get pods -A --watch
  berth why batch/report
  berth config set-context prod --server berth.example.com:443 --ca-file ca.pem

Exit status:
  0    done as asked
  1    refused or not done: an error from Berth or the connection, a pod not
       cancelled, a submitted pod rejected or done without a node, `why` of a
       pod that is not Bound
  2    a usage error (a bad flag, manifest, configuration or port), nothing
       sent; `submit --wait` whose --timeout passed with pods still waiting
  130  interrupted (Ctrl-C)"""


def cmd_serve(args: argparse.Namespace) -> int:
    # The service only when it runs: client commands never load it.
    serve = importlib.import_module("berth.cli.serve")
    return int(serve.cmd_serve(args))


def _serve_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "serve",
        help="run the Berth service",
        formatter_class=Formatter,
        epilog="Examples:\n"
        "  berth serve --cluster examples/cluster.yaml         # the embedded demo cluster\n"
        "  berth serve --config berth.yaml --kubeconfig ~/.kube/config\n"
        "  berth serve --config berth.yaml --in-cluster         # as the Helm chart runs it\n\n"
        "Exit status: 2 when the configuration, the cluster file or a port cannot be used.",
    )
    s.add_argument("--config", help="BerthConfiguration YAML file")
    s.add_argument("--cluster", help="run on an embedded cluster loaded from this manifest file")
    s.add_argument("--http-port", type=int, help="extender, health and metrics port (default 8888)")
    s.add_argument("--grpc-port", type=int, help="gRPC API port (default 50051)")
    s.add_argument("--ui-port", type=int, help="dashboard port (default 8889)")
    s.add_argument(
        "--state-dir",
        help="keep standalone state in SQLite here (default without --cluster: $XDG_STATE_HOME/berth, "
        "~/.local/state/berth; with --cluster: in memory unless this or state: is given)",
    )
    s.add_argument("--kubeconfig", help="schedule in the cluster this kubeconfig points at")
    s.add_argument("--in-cluster", action="store_true", help="use the pod's service account")
    s.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio", help="event loop (default asyncio)")
    s.add_argument(
        "--validate",
        choices=documents.VALIDATION_MODES,
        default="strict",
        help="unknown or duplicate fields in the cluster file: strict (default) refuses it, "
        "warn logs each and leaves it out, ignore skips the check",
    )
    s.set_defaults(func=cmd_serve)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="berth", description=DESCRIPTION, epilog=EPILOG, formatter_class=Formatter)
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _serve_parser(sub)
    get.register(sub, Formatter)
    inspect.register(sub, Formatter)
    submit.register(sub, Formatter)
    extras.register(sub, Formatter, p)
    contexts.register(sub, Formatter)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args))
    except (UsageError, documents.ManifestError) as e:
        # A flag, manifest or configuration Berth cannot take: a usage error
        # like a bad flag, one line naming the file and field.
        print(f"berth: {e}", file=sys.stderr)
        return common.EXIT_USAGE
    except (CliError, contexts.ContextError) as e:
        print(f"berth: {e}", file=sys.stderr)
        return common.EXIT_FAILED
    except (berth_client.BerthError, berth_client.SettingsError) as e:
        print(f"berth: {common.failure(e)}", file=sys.stderr)
        return common.EXIT_FAILED
    except KeyboardInterrupt:
        return common.EXIT_INTERRUPTED
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly, as coreutils do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return common.EXIT_PIPE


if __name__ == "__main__":
    sys.exit(main())
