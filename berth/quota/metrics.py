"""The batch queues' Prometheus metrics, ``berth_queue_*``.

A custom collector (prometheus_client's ``Collector``) reads
:meth:`QueueTree.status` and :attr:`QueueTree.reclaims` at scrape time, so
placing or evicting a pod costs nothing here, and a hot reload of the
``queues`` section shows at the next scrape. It sits on the process's one
registry (:attr:`berth.metrics.Metrics.registry`), served at ``/metrics``.

Per queue, by resource (labels ``queue``, ``resource``, ``unit``):
``berth_queue_guaranteed``, ``berth_queue_max``, ``berth_queue_allocated``,
``berth_queue_pending``. Per queue: ``berth_queue_pending_pods``,
``berth_queue_dominant_share``, ``berth_queue_fair_share`` and the counter
``berth_queue_reclaim_preemptions_total`` (pods evicted by reclaim, by the
victim's queue).

Units are kube-scheduler's for ``kube_pod_resource_request``
(``pkg/scheduler/metrics/resources/resources.go``): the value is the quantity
as a float (``AsApproximateFloat64``) — CPU in cores, memory, storage and
hugepages in bytes, other resources as counts — and a ``unit`` label says
which (``cores``, ``bytes``, ``integer`` for attachable volumes, else empty).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from berth.cluster import resources
from berth.quota.tree import QueueStatus, QueueTree

__all__ = ["QueueCollector", "register", "unit_of", "value_of"]

_BY_RESOURCE = ("queue", "resource", "unit")

_BYTES = frozenset({resources.MEMORY, resources.EPHEMERAL_STORAGE, "storage"})


def unit_of(resource: str) -> str:
    """kube-scheduler's ``unit`` label for ``resource`` (resources.go)."""
    if resource == resources.CPU:
        return "cores"
    if resource in _BYTES or resource.startswith("hugepages-"):
        return "bytes"
    if resource.startswith("attachable-volumes-"):
        return "integer"
    return ""


def value_of(resource: str, amount: int) -> float:
    """A canonical amount (milli-cpu, bytes, counts) in the metric's unit."""
    return amount / 1000 if resource == resources.CPU else float(amount)


class QueueCollector:
    """``berth_queue_*`` from ``tree``, computed when scraped."""

    def __init__(self, tree: QueueTree) -> None:
        self.tree = tree

    def describe(self) -> Iterable[Metric]:
        # The names, so that registering a second collector with them fails.
        return list(self._families())

    def collect(self) -> Iterable[Metric]:
        families = self._families()
        guaranteed, maximum, allocated, pending, pods, dominant, fair, reclaims = families
        statuses = self.tree.status()
        for q in statuses:
            _by_resource(guaranteed, q.name, q.guaranteed, q.guaranteed)
            _by_resource(maximum, q.name, q.max, q.max)
            # Usage and demand are 0, not absent, for every resource the
            # queue has a guarantee or a cap on.
            shown = _shown_resources(q)
            _by_resource(allocated, q.name, q.allocated, shown)
            _by_resource(pending, q.name, q.pending, shown)
            pods.add_metric([q.name], q.pending_pods)
            dominant.add_metric([q.name], q.dominant_share)
            fair.add_metric([q.name], q.fair_share)
        # A counter stays for a queue removed by a reload: it never goes back.
        counted = dict.fromkeys([q.name for q in statuses], 0) | self.tree.reclaims
        for name, n in counted.items():
            if name:
                reclaims.add_metric([name], n)
        return families

    @staticmethod
    def _families() -> tuple[
        GaugeMetricFamily,
        GaugeMetricFamily,
        GaugeMetricFamily,
        GaugeMetricFamily,
        GaugeMetricFamily,
        GaugeMetricFamily,
        GaugeMetricFamily,
        CounterMetricFamily,
    ]:
        return (
            GaugeMetricFamily(
                "berth_queue_guaranteed",
                "Guaranteed resources of a batch queue (never reclaimed below this), by resource.",
                labels=_BY_RESOURCE,
            ),
            GaugeMetricFamily(
                "berth_queue_max",
                "Maximum resources of a batch queue (a hard cap), by resource.",
                labels=_BY_RESOURCE,
            ),
            GaugeMetricFamily(
                "berth_queue_allocated",
                "Requests of a batch queue's bound, assumed or nominated pods (its subtree's), by resource.",
                labels=_BY_RESOURCE,
            ),
            GaugeMetricFamily(
                "berth_queue_pending",
                "Requests of a batch queue's pending pods (its subtree's), by resource.",
                labels=_BY_RESOURCE,
            ),
            GaugeMetricFamily(
                "berth_queue_pending_pods",
                "Number of a batch queue's pending pods (its subtree's).",
                labels=["queue"],
            ),
            GaugeMetricFamily(
                "berth_queue_dominant_share",
                "A batch queue's dominant share (DRF): max over resources of allocated / cluster allocatable.",
                labels=["queue"],
            ),
            GaugeMetricFamily(
                "berth_queue_fair_share",
                "The dominant share a batch queue is entitled to (weighted among siblings, at least its guarantee).",
                labels=["queue"],
            ),
            CounterMetricFamily(
                "berth_queue_reclaim_preemptions",
                "Pods evicted by reclaim, by the victim's batch queue.",
                labels=["queue"],
            ),
        )


def _shown_resources(q: QueueStatus) -> list[str]:
    return sorted({*q.guaranteed, *q.max, *q.allocated, *q.pending})


def _by_resource(family: GaugeMetricFamily, queue: str, amounts: Mapping[str, int], names: Iterable[str]) -> None:
    for name in names:
        family.add_metric([queue, name, unit_of(name)], value_of(name, amounts.get(name, 0)))


def register(registry: CollectorRegistry, tree: QueueTree) -> QueueCollector:
    """Put ``tree``'s metrics on ``registry`` (the one ``/metrics`` serves)."""
    collector = QueueCollector(tree)
    registry.register(collector)
    return collector
