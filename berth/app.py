"""The one place that wires a Berth process together: configuration, core,
sources, the scheduling loop, and the HTTP and gRPC servers."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from pathlib import Path
from typing import Any

from berth import config
from berth.adapters.grpc.server import GrpcServer
from berth.adapters.http import server as http_server
from berth.adapters.http.tls import server_ssl_context
from berth.cluster import manifests
from berth.cluster.embedded import EmbeddedCluster
from berth.scheduling.core import Core

__all__ = ["serve"]

log = logging.getLogger("berth")


async def serve(
    cfg: config.BerthConfiguration,
    *,
    cluster_file: str | Path | None = None,
    kubeconfig: str | None = None,
    in_cluster: bool = False,
    stop: asyncio.Event | None = None,
) -> None:
    """Run until SIGTERM/SIGINT (or ``stop`` is set), then shut down gracefully."""
    log.info("effective configuration:\n%s", config.to_yaml(cfg))
    core = Core(cfg)
    feed = EmbeddedCluster(core)
    core.default_source = feed
    loop_task: asyncio.Task[None] | None = None
    try:
        from berth.scheduling.loop import Scheduler
    except ImportError:  # the scheduling loop ships with a later milestone
        Scheduler = None  # type: ignore[assignment,misc]
    kube_task: asyncio.Task[None] | None = None
    runner_k8s = None
    if kubeconfig is not None or in_cluster:
        from berth.adapters.kubernetes.runner import KubernetesRunner, load_api_client

        api = await load_api_client(kubeconfig=kubeconfig, in_cluster=in_cluster)
        runner_k8s = KubernetesRunner(core, api)
        # Informers make /readyz ready after the first full sync; the leader schedules.
        kube_task = asyncio.create_task(runner_k8s.run(), name="kubernetes")
    else:
        if Scheduler is not None and cfg.run_scheduling_loop:
            core.scheduler = Scheduler(core)
        if cluster_file is not None:
            feed.load(manifests.load(cluster_file))
            feed.log_summary()
        core.ready = True

    # The loaded cluster is long-lived: keep it out of the cyclic GC's
    # generations so collections stay short while requests are served.
    gc.collect()
    gc.freeze()
    runner, http_port = await http_server.start(core, server_ssl_context(cfg.http.tls))
    grpc = GrpcServer(core, feed, cfg)
    await grpc.start()
    if core.scheduler is not None:
        loop_task = asyncio.create_task(core.scheduler.run(), name="scheduling-loop")
    log.info(
        "Berth serving: HTTP on %s:%d (extender at %s), gRPC on %s:%d; %d nodes, %d pods",
        cfg.http.host,
        http_port,
        cfg.extender.url_prefix,
        cfg.grpc.host,
        grpc.port,
        core.cache.node_count,
        core.cache.pod_count,
    )

    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    waiters: list[asyncio.Task[Any]] = [asyncio.create_task(stop.wait())]
    if kube_task is not None:
        waiters.append(kube_task)
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    if kube_task is not None and kube_task.done() and not kube_task.cancelled() and kube_task.exception():
        log.error("the Kubernetes adapter stopped: %s", kube_task.exception())
    log.info("shutting down")
    core.ready = False
    for task in (loop_task, kube_task):
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if runner_k8s is not None:
        await runner_k8s.close()
    await grpc.stop(grace=5.0)
    await runner.cleanup()
