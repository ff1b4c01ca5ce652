"""Prometheus metrics, with kube-scheduler's names where the meaning is the same
(``pkg/scheduler/metrics/metrics.go``). One registry per process, owned by
the core (no module-level singleton), exposed by the HTTP adapter.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["Metrics"]

_LATENCY_BUCKETS = (0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result.",
            ["result", "profile"],
            registry=r,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding).",
            ["result", "profile"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.algorithm_duration = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type.",
            ["queue"],
            registry=r,
        )
        self.cache_size = Gauge(
            "scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"],
            registry=r,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts", "Total preemption attempts in the cluster till now", registry=r
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            buckets=(1, 2, 4, 8, 16, 32, 64),
            registry=r,
        )
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
        self.queue_incoming = Counter(
            "scheduler_queue_incoming_pods",
            "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"],
            registry=r,
        )
        for q in ("active", "backoff", "unschedulable", "gated"):
            self.pending_pods.labels(q).set(0)

    def set_cache_size(self, nodes: int, pods: int, assumed: int) -> None:
        self.cache_size.labels("nodes").set(nodes)
        self.cache_size.labels("pods").set(pods)
        self.cache_size.labels("assumed_pods").set(assumed)
