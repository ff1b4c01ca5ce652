"""``berth serve``: the service itself. Apart from the client commands so
that they never load the scheduler: :mod:`berth.cli.main` imports this
module only when ``serve`` runs."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from berth import app, config, errors
from berth.cli.common import CliError, UsageError
from berth.cluster import manifests

__all__ = ["cmd_serve"]


def cmd_serve(args: argparse.Namespace) -> int:
    """A configuration, cluster file or port Berth cannot use is a usage
    error (exit status 2), in one line."""
    try:
        return _serve(args)
    except (config.ConfigError, manifests.ManifestError) as e:
        raise UsageError(str(e)) from None
    except (errors.Unavailable, errors.FailedPrecondition) as e:
        # The state store: unreachable, in use by another berth serve, or
        # (postgres) this replica's leadership lost: one line, exit status 1.
        raise CliError(str(e)) from None


def _serve(args: argparse.Namespace) -> int:
    try:
        cfg = config.load(args.config)
    except config.ConfigError as e:
        raise config.ConfigError(f"invalid configuration: {e}") from None
    if args.http_port is not None:
        cfg.http.port = args.http_port
    if args.grpc_port is not None:
        cfg.grpc.port = args.grpc_port
    if args.ui_port is not None:
        cfg.ui.port = args.ui_port
    if getattr(args, "state_dir", None):
        if args.kubeconfig or args.in_cluster:
            raise CliError("--state-dir: Kubernetes mode keeps its state in the API server; no store to name")
        cfg.state.dir = args.state_dir
        cfg.state.backend = cfg.state.backend or "sqlite"
    if args.cluster is not None and (args.kubeconfig or args.in_cluster):
        raise CliError("--cluster and --kubeconfig/--in-cluster are exclusive: embedded or real, not both")
    if args.cluster is not None:
        # Fail before binding any port. With --validate=warn serve() warns
        # (once) when it loads the file for good.
        early: manifests.ValidationMode = "ignore" if args.validate == "warn" else args.validate
        try:
            manifests.load(args.cluster, validate=early)
        except manifests.ManifestError as e:
            raise manifests.ManifestError(f"invalid cluster file: {e}") from None
    # asyncio's own loop by default: measured here (bench/README.md), aiohttp
    # under uvloop answered 5000-node extender requests ~1.5 ms slower
    # (larger bodies arrive in more, smaller reads). --loop uvloop opts in.
    runner: Any = asyncio.run
    if args.loop == "uvloop":
        try:
            import uvloop
        except ImportError:
            raise CliError("--loop uvloop: uvloop is not installed") from None
        runner = uvloop.run
    runner(
        app.serve(
            cfg,
            cluster_file=args.cluster,
            cluster_validate=args.validate,
            kubeconfig=args.kubeconfig,
            in_cluster=args.in_cluster,
            config_file=args.config,
        )
    )
    return 0
