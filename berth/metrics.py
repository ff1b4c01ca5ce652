"""Prometheus metrics, with kube-scheduler's names, help, labels, buckets
and stability levels where Berth does the same thing
(``pkg/scheduler/metrics/metrics.go`` at v1.37.2; component-base prefixes
each help with ``[STABLE]``, ``[BETA]`` or ``[ALPHA]``;
``tests/core/test_metrics_parity.py`` holds the comparison and the reasons
for what is left out). A metric a release does not have is not registered
when Berth follows that release (:class:`~berth.features.Features`). What
Berth adds of its own is ``berth_*``.

One registry per process, owned by the core (no module-level singleton),
exposed by the HTTP adapter. The hot paths (the loop, the framework, the
queue) go through the small recorders below, which resolve each labelled
child once: ``labels()`` costs more than the observation itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.metrics_core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from berth import features

__all__ = [
    "ENTITY_POD",
    "PLUGIN_METRICS_SAMPLE_PERCENT",
    "QUEUES",
    "STATUS_CODES",
    "Metrics",
    "Observations",
    "ProfileRecorder",
    "QueueRecorder",
    "exponential_buckets",
]

#: The queues ``scheduler_pending_pods`` and ``scheduler_queued_entities`` count.
QUEUES = ("active", "backoff", "unschedulable", "gated")
#: ``scheduler_queued_entities``' and ``scheduler_queue_incoming_entities_total``'s
#: type of a pod that belongs to no (Workload API) pod group.
ENTITY_POD = "pod"


def _help(level: str, text: str) -> str:
    """component-base's ``annotateStabilityLevel``: ``[LEVEL] help``."""
    return f"[{level}] {text}"


#: kube-scheduler records ``scheduler_plugin_execution_duration_seconds`` in
#: this percentage of scheduling cycles only (``pluginMetricsSamplePercent``,
#: ``pkg/scheduler/scheduler.go``).
PLUGIN_METRICS_SAMPLE_PERCENT = 10

#: ``Code.String()`` (``k8s.io/kube-scheduler/framework/interface.go``),
#: indexed by :class:`berth.framework.interface.Code`'s values: the
#: ``status``/``result`` label values.
STATUS_CODES = ("Success", "Error", "Unschedulable", "UnschedulableAndUnresolvable", "Wait", "Skip", "Pending")


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """client_golang's ``ExponentialBuckets``, by the same repeated
    multiplication, so the float boundaries are the same bit for bit."""
    if count < 1 or start <= 0 or factor <= 1:
        raise ValueError(f"exponential_buckets({start}, {factor}, {count}): need count >= 1, start > 0, factor > 1")
    out = []
    for _ in range(count):
        out.append(start)
        start *= factor
    return tuple(out)


# Berth's own latency buckets (the extender's requests).
_LATENCY_BUCKETS = (0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10)


class Observations:
    """A histogram child's observations, counted into it in bulk.

    prometheus_client's ``Histogram.observe`` takes two locks and walks the
    buckets for every value; the scheduling loop observes ~15 durations
    per pod, which cost more than some of the steps they time. Here an
    observation is appended to a list, and the list is counted into the
    child (one ``searchsorted`` for the buckets, one increment per bucket
    hit) once it holds :attr:`BATCH` values and whenever the registry is
    collected (:class:`_CountPending`, registered before every metric), so a
    scrape never misses one. Values and buckets are the child's own:
    ``amount <= bound`` picks the bucket as ``Histogram.observe`` does.
    Observations come from the event loop's thread; a scrape from another
    thread counts what was appended before it.
    """

    __slots__ = ("_bounds", "_child", "_values")

    BATCH = 1024

    def __init__(self, child: Any) -> None:
        self._child = child
        self._bounds = np.asarray(child._upper_bounds, dtype=np.float64)
        self._values: list[float] = []

    def observe(self, amount: float) -> None:
        self._values.append(amount)
        if len(self._values) >= self.BATCH:
            self.flush()

    def flush(self) -> None:
        values, self._values = self._values, []
        if not values:
            return
        child = self._child
        child._sum.inc(sum(values))
        hits = np.bincount(np.searchsorted(self._bounds, values, side="left"), minlength=len(self._bounds))
        for bucket, n in enumerate(hits.tolist()):
            if n:
                child._buckets[bucket].inc(n)


class _CountPending(Collector):
    """Counts every :class:`Observations` into its histogram when the
    registry is collected; registered first, so before the histograms are
    read. Yields no metric of its own."""

    def __init__(self) -> None:
        self.pending: dict[Any, Observations] = {}

    def collect(self) -> Iterator[Metric]:
        for o in list(self.pending.values()):
            o.flush()
        return iter(())


class Metrics:
    """Berth's registry. ``feats`` says which release's metrics to
    register (default: the newest release Berth follows)."""

    def __init__(self, feats: features.Features | None = None) -> None:
        version = feats.version if feats is not None else features.NEWEST
        # No *_created series: kube-scheduler (component-base) exposes none.
        # prometheus-client's switch is process-wide (read at each scrape).
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry()
        r = self.registry
        self._pending = _CountPending()
        r.register(self._pending)
        # --- kube-scheduler's (metrics.go InitMetrics, in its order)
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts_total",
            _help(
                "STABLE",
                "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be "
                "scheduled, while 'error' means an internal scheduler problem.",
            ),
            ["result", "profile"],
            registry=r,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            _help("STABLE", "Scheduling attempt latency in seconds (scheduling algorithm + binding)"),
            ["result", "profile"],
            buckets=exponential_buckets(0.001, 2, 15),
            registry=r,
        )
        self.algorithm_duration = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            _help("BETA", "Scheduling algorithm latency in seconds"),
            buckets=exponential_buckets(0.001, 2, 15),
            registry=r,
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            _help("STABLE", "Number of selected preemption victims for preemption initiated by a single pod"),
            buckets=exponential_buckets(1, 2, 7),
            registry=r,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts_total",
            _help("STABLE", "Total preemption attempts in the cluster till now"),
            registry=r,
        )
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            _help(
                "STABLE",
                "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' "
                "means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulableEntities "
                "that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods "
                "that the scheduler never attempted to schedule because they are gated; 'incomplete' means number "
                "of pods in incompletePodGroupPods; 'pending' means number of pods in pendingPodGroupPods.",
            ),
            ["queue"],
            registry=r,
        )
        #: By queue and entity type (1.37); None before. Every Berth pod is
        #: an entity of its own (no Workload API pod groups): type "pod".
        self.queued_entities: Gauge | None = None
        if version >= features.KubeVersion(1, 37):
            self.queued_entities = Gauge(
                "scheduler_queued_entities",
                _help(
                    "ALPHA",
                    "Number of queued scheduling entities ('pod' or 'podgroup'; 'pod' stands for individual pods "
                    "that are not members of any podgroup) by the queue type. 'active' means number of entities in "
                    "activeQ; 'backoff' means number of entities in backoffQ; 'unschedulable' means number of "
                    "entities in unschedulableEntities that the scheduler attempted to schedule and failed; 'gated' "
                    "is the number of unschedulable entities that the scheduler never attempted to schedule because "
                    "they are gated.",
                ),
                ["queue", "type"],
                registry=r,
            )
        # Berth's "goroutines" are asyncio tasks; only the binding cycles run
        # apart from the loop (Filter/Score are vectorised, not fanned out to
        # workers), so operation="binding" is the one label value.
        self.goroutines = Gauge(
            "scheduler_goroutines",
            _help("BETA", "Number of running goroutines split by the work they do such as binding."),
            ["operation"],
            registry=r,
        )
        self.pod_scheduling_sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            _help(
                "BETA",
                "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and "
                "might involve multiple scheduling attempts.",
            ),
            ["attempts"],
            buckets=exponential_buckets(0.01, 2, 20),
            registry=r,
        )
        self.pod_scheduling_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            _help("STABLE", "Number of attempts to successfully schedule a pod."),
            buckets=exponential_buckets(1, 2, 5),
            registry=r,
        )
        #: Pods bound after podMaxInUnschedulablePodsDuration flushed them (1.36); None before.
        self.pod_scheduled_after_flush: Counter | None = None
        if version >= features.KubeVersion(1, 36):
            self.pod_scheduled_after_flush = Counter(
                "scheduler_pod_scheduled_after_flush_total",
                _help(
                    "ALPHA",
                    "Number of pods that were successfully scheduled after being flushed from unschedulableEntities "
                    "due to timeout. This metric helps detect potential queueing hint misconfigurations or event "
                    "handling issues.",
                ),
                registry=r,
            )
        self.extension_point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            _help("STABLE", "Latency for running all plugins of a specific extension point."),
            ["extension_point", "status", "profile"],
            buckets=exponential_buckets(0.0001, 2, 12),
            registry=r,
        )
        self.plugin_execution_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            _help("BETA", "Duration for running a plugin at a specific extension point."),
            ["plugin", "extension_point", "status"],
            buckets=exponential_buckets(0.00001, 1.5, 20),
            registry=r,
        )
        self.queue_incoming = Counter(
            "scheduler_queue_incoming_pods_total",
            _help("STABLE", "Number of pods added to scheduling queues by event and queue type."),
            ["queue", "event"],
            registry=r,
        )
        #: By queue, event and entity type (1.37); None before.
        self.queue_incoming_entities: Counter | None = None
        if version >= features.KubeVersion(1, 37):
            self.queue_incoming_entities = Counter(
                "scheduler_queue_incoming_entities_total",
                _help(
                    "ALPHA",
                    "Number of scheduling entities added to scheduling queues by event, queue type, and entity type. "
                    "Entity types are either 'pod' (for individual pods that are not members of any podgroup) or "
                    "'podgroup'.",
                ),
                ["queue", "event", "type"],
                registry=r,
            )
        self.permit_wait_duration = Histogram(
            "scheduler_permit_wait_duration_seconds",
            _help("BETA", "Duration of waiting on permit."),
            ["result"],
            buckets=exponential_buckets(0.001, 2, 15),
            registry=r,
        )
        self.cache_size = Gauge(
            "scheduler_cache_size",
            _help("ALPHA", "Number of nodes, pods, and assumed (bound) pods in the scheduler cache."),
            ["type"],
            registry=r,
        )
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods",
            _help(
                "BETA",
                "The number of unschedulable pods broken down by plugin name. A pod will increment the gauge for "
                "all plugins that caused it to not schedule and so this metric have meaning only when broken down "
                "by plugin.",
            ),
            ["plugin", "profile"],
            registry=r,
        )
        # Registered with GenericWorkload only (metrics.go Register, v1.37.2);
        # Berth's preemptors are pods: preemptor="pod".
        self.preemption_evaluation_duration: Histogram | None = None
        self.preemption_execution_duration: Histogram | None = None
        self.preemption_pdb_violations: Counter | None = None
        if version >= features.KubeVersion(1, 37) and feats is not None and feats.generic_workload:
            self.preemption_evaluation_duration = Histogram(
                "scheduler_preemption_evaluation_duration_seconds",
                _help("ALPHA", "Duration in seconds for identifying the target preemption victims."),
                ["preemptor", "result"],
                buckets=exponential_buckets(0.001, 2, 16),
                registry=r,
            )
            self.preemption_execution_duration = Histogram(
                "scheduler_preemption_execution_duration_seconds",
                _help(
                    "ALPHA",
                    "Duration in seconds for preempting the target preemption victims. With async preemption "
                    "enabled, preemption execution does not block the scheduling of other pods.",
                ),
                ["preemptor", "result"],
                buckets=exponential_buckets(0.001, 2, 16),
                registry=r,
            )
            self.preemption_pdb_violations = Counter(
                "scheduler_preemption_pdb_violations_total",
                _help("ALPHA", "Total number of pod disruption budget violations caused by preemption."),
                ["preemptor"],
                registry=r,
            )
        # DRADeviceBindingConditions only (metrics.go v1.37.2 Register; since 1.36).
        self.dra_binding_conditions_allocations: Counter | None = None
        self.dra_binding_conditions_wait: Histogram | None = None
        if version >= features.KubeVersion(1, 36) and feats is not None and feats.dra_device_binding_conditions:
            self.dra_binding_conditions_allocations = Counter(
                "scheduler_dra_bindingconditions_allocations_total",
                _help(
                    "ALPHA",
                    "Number of allocations using devices with BindingConditions, counted per driver per "
                    "scheduling attempt",
                ),
                ["profile", "driver", "status"],
                registry=r,
            )
            self.dra_binding_conditions_wait = Histogram(
                "scheduler_dra_bindingconditions_wait_duration_seconds",
                _help("ALPHA", "Time in seconds spent waiting for BindingConditions to be satisfied during PreBind."),
                ["profile", "driver", "status"],
                buckets=exponential_buckets(0.1, 2, 14),
                registry=r,
            )
        # DRAExtendedResource only: k8s.io/dynamic-resource-allocation v0.37.2
        # resourceclaim/metrics (registered by kube-scheduler's metrics.go and
        # kube-controller-manager alike, hence no scheduler_ prefix).
        self.resourceclaim_creates: Counter | None = None
        if feats is not None and feats.dra_extended_resource:
            self.resourceclaim_creates = Counter(
                "dynamic_resource_allocation_resourceclaim_creates_total",
                _help(
                    "ALPHA",
                    "Number of ResourceClaims creation requests, categorized by creation status, admin access, "
                    "and owning API group and kind (either Pod or scheduling.k8s.io/PodGroup)",
                ),
                ["status", "admin_access", "owner_api_group", "owner_api_kind"],
                registry=r,
            )
        # --- Berth's own
        self.extender_requests = Counter(
            "berth_extender_requests",
            "Extender requests served, by verb and outcome.",
            ["verb", "code"],
            registry=r,
        )
        self.extender_duration = Histogram(
            "berth_extender_request_duration_seconds",
            "Extender request latency (decode, evaluate, encode), by verb.",
            ["verb"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        # --- operations (docs/operations.md, docs/metrics.md)
        #: client-go's leader gauge, as kube-scheduler exports it
        #: (k8s.io/component-base@v0.37.2 metrics/prometheus/clientgo/
        #: leaderelection/metrics.go; set on/off in client-go's
        #: tools/leaderelection/leaderelection.go). name: the Lease's name.
        #: Only where leader election runs: a replica campaigning shows 0.
        self.leader_election_master_status = Gauge(
            "leader_election_master_status",
            _help(
                "ALPHA",
                "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates "
                "master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            ),
            ["name"],
            registry=r,
        )
        # kube-scheduler has no metric for events its broadcaster drops
        # (client-go only logs them), nor reloads its configuration.
        self.events_dropped = Counter(
            "berth_events_dropped",
            "Events (events.k8s.io/v1) not written because more than the recorder's queue limit were waiting.",
            registry=r,
        )
        # Prometheus' own reload metrics' shape (prometheus_config_last_reload_successful
        # and _success_timestamp_seconds, cmd/prometheus/main.go) plus a failure counter.
        self.config_reload_failures = Counter(
            "berth_config_reload_failures",
            "Re-reads of the configuration file that were refused (unreadable, invalid, or queues not applicable).",
            registry=r,
        )
        self.config_last_reload_successful = Gauge(
            "berth_config_last_reload_successful",
            "Whether the last re-read of the configuration file was applied (1) or refused (0).",
            registry=r,
        )
        self.config_last_reload_successful.set(1)
        self.config_last_reload_success_timestamp = Gauge(
            "berth_config_last_reload_success_timestamp_seconds",
            "Unix time of the last configuration re-read that was applied.",
            registry=r,
        )
        # Reservations with backfill (berth.plugins.reservation), set by the plugin.
        self.reservations = Gauge(
            "berth_reservations",
            "Reservations held for gangs and pods that waited past their queue's reservation.after, by queue.",
            ["queue"],
            registry=r,
        )
        self.reservation_held = Gauge(
            "berth_reservation_held_resources",
            "Free capacity held by reservations, by queue and resource (cpu in cores, memory in bytes).",
            ["queue", "resource"],
            registry=r,
        )
        for q in QUEUES:
            self.pending_pods.labels(q).set(0)
            if self.queued_entities is not None:
                self.queued_entities.labels(q, ENTITY_POD).set(0)
        self.goroutines.labels("binding").set(0)

        # scheduler_cache_size, read at scrape time from what set_cache_size
        # last said (it is called on every pod and node event).
        self._cache_size = {"nodes": 0, "pods": 0, "assumed_pods": 0}
        for kind in self._cache_size:
            self.cache_size.labels(kind).set_function(functools.partial(self._cache_size.__getitem__, kind))

    def set_cache_size(self, nodes: int, pods: int, assumed: int) -> None:
        c = self._cache_size
        c["nodes"], c["pods"], c["assumed_pods"] = nodes, pods, assumed

    def cache_size_from(self, nodes: Callable[[], int], pods: Callable[[], int], assumed: Callable[[], int]) -> None:
        """scheduler_cache_size read from these functions at scrape time
        (instead of what :meth:`set_cache_size` said)."""
        for kind, fn in (("nodes", nodes), ("pods", pods), ("assumed_pods", assumed)):
            self.cache_size.labels(kind).set_function(fn)

    def state_store_from(self, backend: str, commits: Callable[[], int]) -> None:
        """``berth_state_commits_total{backend}``, read from ``commits`` at
        scrape time: standalone Berth's store (:mod:`berth.store`); each
        commit is one transaction of a whole batch of changes."""
        self.registry.register(_StateStoreCollector(backend, commits))

    def observations(self, child: Any) -> Observations:
        """``child`` (a labelled histogram child, or an unlabelled
        histogram) observed through :class:`Observations`; one per child,
        however many recorders ask (frameworks are rebuilt on reload)."""
        o = self._pending.pending.get(child)
        if o is None:
            o = self._pending.pending[child] = Observations(child)
        return o

    def profile(self, name: str) -> ProfileRecorder:
        return ProfileRecorder(self, name)


class _StateStoreCollector(Collector):
    def __init__(self, backend: str, commits: Callable[[], int]) -> None:
        self.backend = backend
        self.commits = commits

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(
            "berth_state_commits",
            "Transactions the state store committed (each holds a whole batch of changes).",
            labels=["backend"],
        )
        family.add_metric([self.backend], self.commits())
        yield family


class ProfileRecorder:
    """The framework's metrics for one profile, children resolved once."""

    __slots__ = ("_metrics", "_plugins", "_points", "profile")

    def __init__(self, metrics: Metrics, profile: str) -> None:
        self._metrics = metrics
        self.profile = profile
        self._points: dict[tuple[str, int], Any] = {}
        self._plugins: dict[tuple[str, str, int], Any] = {}

    def extension_point(self, point: str, code: int, seconds: float) -> None:
        """scheduler_framework_extension_point_duration_seconds."""
        child = self._points.get((point, code))
        if child is None:
            m = self._metrics
            child = self._points[point, code] = m.observations(
                m.extension_point_duration.labels(point, STATUS_CODES[code], self.profile)
            )
        child.observe(seconds)

    def plugin(self, plugin: str, point: str, code: int, seconds: float) -> None:
        """scheduler_plugin_execution_duration_seconds (in sampled cycles)."""
        child = self._plugins.get((plugin, point, code))
        if child is None:
            m = self._metrics
            child = self._plugins[plugin, point, code] = m.observations(
                m.plugin_execution_duration.labels(plugin, point, STATUS_CODES[code])
            )
        child.observe(seconds)


class QueueRecorder:
    """The scheduling queue's metrics; every method is a no-op without a
    registry (the queue's own unit tests)."""

    __slots__ = ("_incoming", "_metrics", "_pre_enqueue", "_unschedulable")

    def __init__(self, metrics: Metrics | None) -> None:
        self._metrics = metrics
        # (queue, event) -> the pods child, and the entities child (1.37) or None.
        self._incoming: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._unschedulable: dict[tuple[str, str], Any] = {}
        self._pre_enqueue: dict[str, ProfileRecorder] = {}

    def incoming(self, queue: str, event: str) -> None:
        """scheduler_queue_incoming_pods_total{queue, event} and, from 1.37,
        scheduler_queue_incoming_entities_total{queue, event, type="pod"}:
        the queue calls this when a pod enters ``queue`` from elsewhere,
        which is when upstream's ``recordIncomingEntitiesMetrics`` counts
        an entity too (``scheduling_queue.go`` v1.37.2)."""
        m = self._metrics
        if m is None:
            return
        children = self._incoming.get((queue, event))
        if children is None:
            entities = m.queue_incoming_entities
            children = self._incoming[queue, event] = (
                m.queue_incoming.labels(queue, event),
                None if entities is None else entities.labels(queue, event, ENTITY_POD),
            )
        children[0].inc()
        if children[1] is not None:
            children[1].inc()

    def unschedulable(self, plugins: Iterable[str], profile: str, delta: int) -> None:
        """scheduler_unschedulable_pods{plugin, profile} += delta for each plugin."""
        if self._metrics is None:
            return
        for plugin in plugins:
            child = self._unschedulable.get((plugin, profile))
            if child is None:
                child = self._unschedulable[plugin, profile] = self._metrics.unschedulable_pods.labels(plugin, profile)
            child.inc(delta)

    def pre_enqueue(self, profile: str, code: int, seconds: float) -> None:
        """The PreEnqueue extension point, timed by the queue as upstream's is."""
        if self._metrics is None:
            return
        rec = self._pre_enqueue.get(profile)
        if rec is None:
            rec = self._pre_enqueue[profile] = ProfileRecorder(self._metrics, profile)
        rec.extension_point("PreEnqueue", code, seconds)
