"""The composition root: the one place that builds a Berth (as YuniKorn's
``pkg/entrypoint/entrypoint.go`` does).

:func:`build` wires configuration -> cache -> stores -> frameworks (one per
profile, each with its typed Handle) -> core -> the embedded cluster ->
scheduling queue and loop, and returns them in a :class:`Berth`. ``berth
serve`` (:func:`serve`, which adds the adapters), the benchmarks, the test
fixtures and ``berth.testing`` all call it, with options for what differs:
the clock, the random source, whether the loop runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import functools
import gc
import logging
import random
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

from berth import config, features, gangs, reload
from berth import store as state_store
from berth.adapters.grpc import security as grpc_security
from berth.adapters.grpc.server import GrpcServer
from berth.adapters.http import security as http_security
from berth.adapters.http import server as http_server
from berth.cache.cache import Cache
from berth.cluster import manifests, workload_api
from berth.cluster.embedded import EmbeddedCluster
from berth.errors import InvalidArgument, Unavailable
from berth.framework import registry
from berth.framework.handle import Handle
from berth.framework.runtime import Framework
from berth.gangs import topology
from berth.metrics import Metrics
from berth.queue.nominator import Nominator
from berth.queue.waiting import PodsInPreBind, WaitingPods
from berth.quota import metrics as quota_metrics
from berth.scheduling.client import DEFAULT_BACKOFF, SourceClient
from berth.scheduling.core import Core, new_queue_tree
from berth.scheduling.decisions import DecisionLog
from berth.scheduling.dra_state import DraStore
from berth.scheduling.durable import Durable
from berth.scheduling.loop import Scheduler
from berth.scheduling.state import NamespaceStore, PodDisruptionBudgetStore, PodGroupStore, PodStore, WorkloadStore
from berth.scheduling.verbs import Extender
from berth.scheduling.volume_state import VolumeStore

__all__ = ["Berth", "build", "running", "serve"]

log = logging.getLogger("berth")


@dataclasses.dataclass(slots=True, eq=False)
class Berth:
    """One assembled Berth: what the adapters and tests talk to."""

    cfg: config.BerthConfiguration
    core: Core
    #: The embedded cluster: the default source outside Kubernetes, and where
    #: the gRPC Cluster feed and Submit write.
    cluster: EmbeddedCluster
    extender: Extender
    #: The scheduling loop, when this process runs one from the start (not in
    #: Kubernetes mode, where the leader starts it).
    scheduler: Scheduler | None
    #: Standalone Berth's state store (:mod:`berth.scheduling.durable`), when
    #: built with one; :meth:`Durable.restore` opens it and starts keeping.
    durable: Durable | None = None

    async def run_loop(self) -> None:
        """Run the scheduling loop until cancelled; then finish what it started."""
        if self.scheduler is None:
            return
        try:
            await self.scheduler.run()
        finally:
            await self.scheduler.drain()


@contextlib.contextmanager
def _port_in_use(field: str, flag: str, host: str, port: int) -> Iterator[None]:
    """A port someone else holds is a configuration problem: one line naming
    the address and what to change (the CLI prints it and exits 2)."""
    try:
        yield
    except OSError as e:
        if e.errno != errno.EADDRINUSE:
            raise
        raise config.ConfigError(
            f"{field}: {host}:{port} is already in use (another berth serve?); "
            f"choose another port with {flag} or {field} in the configuration"
        ) from None


def _url_host(host: str) -> str:
    """``host`` as a URL names it: all interfaces as loopback (what a
    browser on this machine opens), an IPv6 literal in brackets."""
    if host in ("", "0.0.0.0", "::"):
        return "127.0.0.1" if host != "::" else "[::1]"
    return f"[{host}]" if ":" in host else host


def build(
    cfg: config.BerthConfiguration | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
    run_loop: bool | None = None,
    metrics: Metrics | None = None,
    feats: features.Features | None = None,
    store: state_store.StateStore | None = None,
) -> Berth:
    """Assemble a Berth. ``run_loop`` defaults to ``cfg.runSchedulingLoop``;
    ``clock`` drives backoffs, assumed-pod expiry and the queue (tests pass
    the event loop's, virtual, clock); ``feats`` (default: the
    configuration's release and gates) is what the cluster's release gives."""
    cfg = cfg or config.parse({})
    feats = feats or cfg.features()
    metrics = metrics or Metrics(feats)
    cache = Cache(assumed_ttl=cfg.assumed_pod_ttl_seconds, clock=clock)
    pods, groups, pdbs = PodStore(), PodGroupStore(), PodDisruptionBudgetStore()
    namespaces, workloads = NamespaceStore(), WorkloadStore()
    nominator, waiting, decisions = Nominator(), WaitingPods(), DecisionLog()
    in_pre_bind = PodsInPreBind()
    dra_store = DraStore()
    volume_store = VolumeStore()
    scheduling_groups = workload_api.GroupStore(feats.version)
    # util.BindPod retries a Binding on retriable errors from 1.37 (utils.go v1.37.2).
    client = SourceClient(
        pods, dra_store, bind_backoff=DEFAULT_BACKOFF if feats.version >= features.KubeVersion(1, 37) else None
    )
    gang_index = gangs.GangIndex(
        cfg.gang_sources, workload_groups=scheduling_groups if feats.generic_workload else None
    )
    quota = new_queue_tree(cfg, cache, nominator, group_queue=gang_index.queue_of)
    quota_metrics.register(metrics.registry, quota)
    # The configuration's topologies, then Kueue Topology objects as they come (core.on_topology).
    topology_set = topology.TopologySet(cfg.topologies)
    frameworks: dict[str, Framework] = {}
    for prof in cfg.profiles:
        handle = Handle(
            profile=prof.scheduler_name,
            cache=cache,
            pods=pods,
            pod_groups=groups,
            pdbs=pdbs,
            namespaces=namespaces,
            workloads=workloads,
            queues=quota,
            dra=dra_store,
            volumes=volume_store,
            nominator=nominator,
            waiting_pods=waiting,
            pods_in_pre_bind=in_pre_bind,
            client=client,
            recorder=decisions,
            metrics=metrics,
            clock=clock,
            features=feats,
            scheduling_groups=scheduling_groups,
            gangs=gang_index,
            topologies=topology_set,
        )
        resolved = registry.resolve_profile(
            prof, feats, topology_aware=cfg.topology_aware(), reservations=cfg.holds_reservations()
        )
        frameworks[prof.scheduler_name] = Framework(resolved, handle)
    core = Core(
        cfg,
        cache=cache,
        pods=pods,
        pod_groups=groups,
        pdbs=pdbs,
        namespaces=namespaces,
        workloads=workloads,
        frameworks=frameworks,
        nominator=nominator,
        waiting=waiting,
        in_pre_bind=in_pre_bind,
        decisions=decisions,
        client=client,
        metrics=metrics,
        clock=clock,
        rng=rng or random.Random(),
        quota=quota,
        dra_store=dra_store,
        volume_store=volume_store,
        scheduling_groups=scheduling_groups,
        gangs=gang_index,
    )
    for fwk in frameworks.values():
        fwk.handle.activator = core
    core.topologies = topology_set
    cluster = EmbeddedCluster(core)
    client.default_source = cluster
    scheduler: Scheduler | None = None
    if cfg.run_scheduling_loop if run_loop is None else run_loop:
        scheduler = Scheduler(core)
        scheduler.attach()
    durable = None
    if store is not None:
        durable = Durable(store, core, cluster)
        core.decisions.max_history_entries = cfg.state.decisions.max_entries
        core.decisions.max_history_bytes = cfg.state.decisions.max_bytes
    return Berth(cfg, core, cluster, Extender(core), scheduler, durable)


@contextlib.asynccontextmanager
async def running(cfg: config.BerthConfiguration | None = None, **options: Any) -> AsyncIterator[Berth]:
    """A built Berth whose scheduling loop runs for the ``async with`` block;
    on exit the loop stops and every task it started is finished."""
    berth = build(cfg, **options)
    task = asyncio.create_task(berth.run_loop(), name="scheduling-loop")
    try:
        yield berth
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        berth.core.client.cancel()
        await berth.core.client.drain()


async def _restore(berth: Berth, cluster_file: str | Path | None, cluster_validate: manifests.ValidationMode) -> None:
    """Standalone start: the store's state (waiting, with a shared store,
    until this replica leads), else the demo's cluster file."""
    core, store = berth.core, berth.durable.store if berth.durable is not None else None
    restored = await berth.durable.restore() if berth.durable is not None else None
    if restored is not None:
        # A memory store made afresh (the demo's --cluster file) is nothing to report.
        fresh_memory = restored.created and isinstance(store, state_store.MemoryStore)
        log.log(
            logging.DEBUG if fresh_memory else logging.INFO,
            "state (%s, epoch %s): %s; %d objects, %d pods (%d bound), %d decisions up to serial %d in %.2f s",
            state_store.describe(store) if store is not None else "none",
            restored.epoch,
            "created" if restored.created else "restored",
            restored.objects,
            restored.pods,
            restored.bound,
            restored.decisions,
            restored.serial,
            restored.seconds,
        )
    if cluster_file is not None and restored is not None and not restored.created:
        log.info("%s not loaded: the state store already holds this Berth's cluster", cluster_file)
    elif cluster_file is not None:
        objects = manifests.load(cluster_file, validate=cluster_validate)
        berth.cluster.load(objects)
        if objects.queues:  # Queue objects: judged with the configuration's queues, all or nothing
            try:
                core.load_queue_objects(objects.queues)
            except InvalidArgument as e:
                raise manifests.ManifestError(f"{cluster_file}: {e}") from None
        berth.cluster.log_summary()


async def _lead_shared(
    berth: Berth,
    store: state_store.PostgresStore,
    cluster_file: str | Path | None,
    cluster_validate: manifests.ValidationMode,
) -> None:
    """A replica sharing a postgres store (:mod:`berth.store.postgres`):
    stand by until it leads, restore, then schedule until the leadership is
    lost, which raises :class:`Unavailable` (the process then exits, as
    kube-scheduler does on "leaderelection lost")."""
    await _restore(berth, cluster_file, cluster_validate)
    core = berth.core
    if berth.cfg.run_scheduling_loop:
        berth.scheduler = Scheduler(core)
        berth.scheduler.attach()
    core.standby_holds_nothing = False  # its doors answer from now on
    log.info("%s leads: scheduling", store.identity)
    tasks = {asyncio.create_task(berth.run_loop(), name="scheduling-loop"), asyncio.create_task(store.lost.wait())}
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if not store.lost.is_set():
            await store.lost.wait()
    finally:
        core.standby_holds_nothing = True  # what it holds is no longer the store's: refuse until it exits
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if berth.scheduler is not None:
            await berth.scheduler.detach()
    raise Unavailable(f"state: {store.identity} is no longer the leader; exiting (restart it to stand by again)")


async def serve(
    cfg: config.BerthConfiguration,
    *,
    cluster_file: str | Path | None = None,
    cluster_validate: manifests.ValidationMode = "strict",
    kubeconfig: str | None = None,
    in_cluster: bool = False,
    stop: asyncio.Event | None = None,
    config_file: str | Path | None = None,
) -> None:
    """Run until SIGTERM/SIGINT (or ``stop`` is set), then shut down gracefully.
    ``config_file``, where ``cfg`` came from, is re-read on change and SIGHUP
    and its ``queues`` applied (:mod:`berth.reload`)."""
    profiles = ", ".join(p.scheduler_name for p in cfg.profiles)
    log.info("configuration %s; profiles: %s", config_file or "(defaults)", profiles)
    log.debug("effective configuration:\n%s", config.to_yaml(cfg))
    registry.log_available()
    kube = kubeconfig is not None or in_cluster
    # Who may mutate over gRPC, and its certificate/token files: checked
    # before any port is bound (one ConfigError line otherwise).
    grpc_security.validate(cfg.grpc)
    # Likewise who may call the extender verbs, and who may read the dashboard.
    if cfg.extender.enabled:
        http_security.validate_extender(cfg.http)
    http_security.validate_ui(cfg.ui, kubernetes=kube)
    api = None
    feats = None
    if kube:
        from berth.adapters.kubernetes import discovery
        from berth.adapters.kubernetes.runner import load_api_client

        # A missing or broken kubeconfig is a ConfigError here, before any port is bound.
        api = await load_api_client(kubeconfig=kubeconfig, in_cluster=in_cluster)
        # The cluster's release decides which kube-scheduler Berth follows;
        # meanwhile the HTTP port says it is alive and not ready, so that a
        # liveness probe does not restart Berth for the API server's outage.
        with _port_in_use("http.port", "--http-port", cfg.http.host, cfg.http.port):
            waiting, _ = await http_server.start_waiting(
                cfg.http, http_security.extender_ssl_context(cfg.http), "reading the API server's release"
            )
        try:
            version = await discovery.cluster_version(api)
        finally:
            await http_server.stop(waiting, 0)
        if version is not None and cfg.kubernetes_version is not None and str(version) != cfg.kubernetes_version:
            log.warning(
                "kubernetesVersion %s ignored: the API server's release (%s) wins", cfg.kubernetes_version, version
            )
        feats = cfg.features(version)
    else:
        feats = cfg.features()
    log.info("following kube-scheduler %s; feature gates on: %s", feats.version, ", ".join(feats.enabled()))
    # Standalone Berth keeps its state (sqlite by default; memory for the
    # demo's --cluster file unless `state:` names a store); in Kubernetes
    # mode the API server is the only store.
    store = (
        None
        if kube
        else state_store.new_store(
            cfg.state, default_backend="memory" if cluster_file else "sqlite", lease=cfg.leader_election
        )
    )
    # Replicas sharing a postgres store stand by until they lead (_lead_shared).
    shared = store if isinstance(store, state_store.PostgresStore) else None
    # In Kubernetes mode the leader starts the loop (KubernetesRunner).
    berth = build(cfg, run_loop=False if kube or shared else None, feats=feats, store=store)
    core = berth.core
    runner_k8s = None
    if api is not None:
        from berth.adapters.kubernetes.runner import KubernetesRunner

        runner_k8s = KubernetesRunner(core, api)
    elif shared is not None:
        # A standby holds nothing (it restores when it leads): its doors
        # refuse every call, naming the leader, as a Kubernetes standby's.
        core.standby_holds_nothing = True
        core.leader = ""
        shared.on_holder = functools.partial(setattr, core, "leader")
        core.ready = True
    else:
        await _restore(berth, cluster_file, cluster_validate)
        core.ready = True

    # The loaded cluster is long-lived: keep it out of the cyclic GC's
    # generations so collections stay short while requests are served.
    gc.collect()
    gc.freeze()
    try:
        with _port_in_use("http.port", "--http-port", cfg.http.host, cfg.http.port):
            runner, http_port = await http_server.start(
                core, berth.extender, http_security.extender_ssl_context(cfg.http)
            )
        try:
            with _port_in_use("grpc.port", "--grpc-port", cfg.grpc.host, cfg.grpc.port):
                grpc = GrpcServer(core, berth.extender, berth.cluster, durable=berth.durable)
            await grpc.start()
        except BaseException:
            await runner.cleanup()
            raise
        ui_runner = None
        if cfg.ui.enabled:
            try:
                with _port_in_use("ui.port", "--ui-port", cfg.ui.host, cfg.ui.port):
                    ui_runner, ui_port = await http_server.start_dashboard(
                        core, http_security.dashboard_ssl_context(cfg.ui)  # re-read on renewal
                    )
            except BaseException:
                await asyncio.gather(runner.cleanup(), grpc.stop(grace=0))
                raise
    except BaseException:
        if runner_k8s is not None:
            await runner_k8s.close()
        raise
    # Informers make /readyz ready after the first full sync; the leader schedules.
    kube_task = asyncio.create_task(runner_k8s.run(), name="kubernetes") if runner_k8s is not None else None
    loop_task = asyncio.create_task(berth.run_loop(), name="scheduling-loop") if berth.scheduler else None
    lead_task = None
    if shared is not None:
        lead_task = asyncio.create_task(_lead_shared(berth, shared, cluster_file, cluster_validate), name="state-lead")
    dashboard = "off"
    if ui_runner is not None:
        dashboard = f"http{'s' if cfg.ui.tls else ''}://{_url_host(cfg.ui.host)}:{ui_port}/ui/"
    log.info(
        "Berth serving: HTTP on %s:%d (extender at %s), gRPC on %s:%d, dashboard %s; %d nodes, %d pods",
        cfg.http.host,
        http_port,
        cfg.extender.url_prefix,
        cfg.grpc.host,
        grpc.port,
        dashboard,
        core.cache.node_count,
        core.cache.pod_count,
    )

    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    reload_task: asyncio.Task[None] | None = None
    if config_file is not None:
        reloader = reload.ConfigReloader(config_file, core)
        reload_task = asyncio.create_task(reloader.run(), name="config-reload")
        on_hup = reloader.request
    else:
        # SIGHUP would otherwise end the process (its default action).
        def on_hup() -> None:
            log.warning("SIGHUP: no configuration file to re-read (berth serve runs without --config)")

    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGHUP, on_hup)
    waiters: list[asyncio.Task[Any]] = [asyncio.create_task(stop.wait())]
    if kube_task is not None:
        waiters.append(kube_task)
    if lead_task is not None:
        waiters.append(lead_task)
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    ended = lead_task.exception() if lead_task is not None and lead_task.done() and not lead_task.cancelled() else None
    if kube_task is not None and kube_task.done() and not kube_task.cancelled() and kube_task.exception():
        log.error("the Kubernetes adapter stopped: %s", kube_task.exception())
    log.info("shutting down")
    core.ready = False
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.remove_signal_handler(signal.SIGHUP)
    # Every door stops taking work first (the servers refuse new requests at
    # once and give those in flight shutdownGracePeriodSeconds), so that
    # nothing keeps feeding the loop while it stops; the loop and the
    # Kubernetes adapter (which ends its term and releases the Lease, so a
    # standby takes over meanwhile) are cancelled beside them, and waited
    # for no longer than the grace: shutdown ends whatever the load (a
    # server that kept answering for 90 s after SIGTERM was issue 28's).
    grace = cfg.shutdown_grace_period_seconds
    doors = asyncio.gather(
        http_server.stop(runner, grace),
        *([http_server.stop(ui_runner, grace)] if ui_runner is not None else []),
        grpc.stop(grace=grace),
    )
    tasks = [t for t in (reload_task, loop_task, kube_task, *waiters) if t is not None]
    for task in tasks:
        task.cancel()
    done, stuck = await asyncio.wait(tasks, timeout=grace + 1.0)
    for task in done:
        if not task.cancelled() and task.exception() is not None and task is not kube_task:
            log.error("shutdown: %s had failed: %s", task.get_name(), task.exception())
    for task in stuck:
        log.warning("shutdown: %s did not stop within %.0fs; leaving it", task.get_name(), grace + 1.0)
    await doors
    if runner_k8s is not None:
        await runner_k8s.close()
    if berth.durable is not None:
        await berth.durable.close()  # the last bindings' commit, then the lock
    if ended is not None:
        raise ended  # leadership of a shared store lost, or its restore failed: exit non-zero
