"""The one place that wires a Berth process together: configuration, core,
sources, the scheduling loop, and the HTTP and gRPC servers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from pathlib import Path

from adapters.grpc.server import GrpcServer
from adapters.http import server as http_server
from adapters.http.tls import server_ssl_context
from service import config, manifests
from service.core import Core
from service.embedded import EmbeddedCluster

__all__ = ["serve"]

log = logging.getLogger("berth")


async def serve(
    cfg: config.BerthConfiguration,
    *,
    cluster_file: str | Path | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run until SIGTERM/SIGINT (or ``stop`` is set), then shut down gracefully."""
    log.info("effective configuration:\n%s", config.to_yaml(cfg))
    core = Core(cfg)
    feed = EmbeddedCluster(core)
    core.default_source = feed
    loop_task: asyncio.Task[None] | None = None
    try:
        from service.scheduler import Scheduler
    except ImportError:  # the scheduling loop ships with a later milestone
        Scheduler = None  # type: ignore[assignment,misc]  # noqa: N806
    if Scheduler is not None:
        core.scheduler = Scheduler(core)
    if cluster_file is not None:
        feed.load(manifests.load(cluster_file))
        feed.log_summary()
    core.ready = True

    runner, http_port = await http_server.start(core, server_ssl_context(cfg.http.tls))
    grpc = GrpcServer(core, feed, cfg)
    await grpc.start()
    if core.scheduler is not None:
        loop_task = asyncio.create_task(core.scheduler.run(), name="scheduling-loop")
    log.info(
        "Berth serving: HTTP on %s:%d (extender at %s), gRPC on %s:%d; %d nodes, %d pods",
        cfg.http.host, http_port, cfg.extender.url_prefix, cfg.grpc.host, grpc.port,
        core.cache.node_count, core.cache.pod_count,
    )

    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    core.ready = False
    if loop_task is not None:
        loop_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop_task
    await grpc.stop(grace=5.0)
    await runner.cleanup()
