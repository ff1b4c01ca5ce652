"""The core: what Berth knows and the profiles that judge pods.

Sources (the embedded cluster, Kubernetes informers, the gRPC Cluster feed)
report changes through the ``on_*`` methods (:class:`~berth.cluster.sources.ClusterListener`);
the verbs (:mod:`berth.scheduling.verbs`, :mod:`berth.scheduling.explain`)
and the scheduling loop (:mod:`berth.scheduling.loop`) read it. Everything
runs on one event loop: an evaluation never awaits, so it sees one
consistent snapshot. Built by :func:`berth.app.build`, the composition root.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from berth.cache.cache import Cache
from berth.cache.infos import PodInfo
from berth.cache.snapshot import Snapshot
from berth.cluster import model
from berth.cluster.sources import Source
from berth.config import BerthConfiguration
from berth.errors import InvalidArgument
from berth.framework.runtime import Framework
from berth.metrics import Metrics
from berth.queue.nominator import Nominator
from berth.queue.waiting import WaitingPods
from berth.scheduling.algorithm import Sampler
from berth.scheduling.client import SourceClient
from berth.scheduling.decisions import DecisionLog
from berth.scheduling.state import PodDisruptionBudgetStore, PodGroupStore, PodStore

if TYPE_CHECKING:
    from berth.scheduling.loop import Scheduler

__all__ = ["Core", "VerbError", "scheduler_name_of"]

LEGACY_SCHEDULER_ANNOTATION = "scheduler.alpha.kubernetes.io/name"
DEFAULT_SCHEDULER_NAME = "default-scheduler"


class VerbError(InvalidArgument):
    """A request the core cannot evaluate (bad pod, unknown profile); a client error."""


def scheduler_name_of(pod: model.Pod) -> str:
    """spec.schedulerName, else the legacy annotation, else default-scheduler."""
    return (
        pod.spec.scheduler_name
        or pod.metadata.annotations.get(LEGACY_SCHEDULER_ANNOTATION, "")
        or DEFAULT_SCHEDULER_NAME
    )


class Core:
    """Berth's state and profiles; see the module docstring."""

    def __init__(
        self,
        cfg: BerthConfiguration,
        *,
        cache: Cache,
        pods: PodStore,
        pod_groups: PodGroupStore,
        pdbs: PodDisruptionBudgetStore,
        frameworks: Mapping[str, Framework],
        nominator: Nominator,
        waiting: WaitingPods,
        decisions: DecisionLog,
        client: SourceClient,
        metrics: Metrics,
        clock: Callable[[], float],
        rng: random.Random,
    ) -> None:
        self.cfg = cfg
        self.cache = cache
        self.pods = pods
        self.pod_groups = pod_groups
        self.pdbs = pdbs
        self.frameworks = dict(frameworks)
        self.nominator = nominator
        self.waiting = waiting
        self.decisions = decisions
        self.client = client
        self.metrics = metrics
        self.clock = clock
        self.rng = rng
        self.samplers = {name: Sampler() for name in self.frameworks}
        self._snapshot: Snapshot = cache.new_snapshot()
        self.ready = False
        #: The scheduling loop, while this replica runs one (the leader).
        self.scheduler: Scheduler | None = None

    @property
    def default_source(self) -> Source | None:
        return self.client.default_source

    @default_source.setter
    def default_source(self, source: Source | None) -> None:
        self.client.default_source = source

    # ------------------------------------------------------------ reading

    def snapshot(self) -> Snapshot:
        self.cache.update_snapshot(self._snapshot)
        return self._snapshot

    def framework_for(self, profile: str) -> Framework:
        fwk = self.frameworks.get(profile or self.cfg.extender.profile)
        if fwk is None:
            raise VerbError(f"unknown profile {profile!r} (profiles: {', '.join(self.frameworks)})")
        return fwk

    def responsible_for(self, pod: model.Pod) -> Framework | None:
        """The profile that schedules this pod, or None when it is another scheduler's."""
        return self.frameworks.get(scheduler_name_of(pod))

    # ------------------------------------------------------------ ClusterListener

    def on_node(self, node: model.Node) -> None:
        self.cache.add_node(node)
        if self.scheduler is not None:
            self.scheduler.on_node(node)
        self._cache_metrics()

    def on_node_delete(self, name: str) -> None:
        self.cache.remove_node(name)
        self._cache_metrics()

    def on_pod(self, pod: model.Pod, *, source: Source) -> None:
        old = self.pods.put(pod, source)
        terminal = pod.status.phase in ("Succeeded", "Failed")
        if pod.spec.node_name and not terminal:
            self.cache.add_pod(PodInfo.of(pod))
        elif terminal:
            self.cache.remove_pod(pod.metadata.uid)
        if self.scheduler is not None:
            self.scheduler.on_pod(old, pod)
        self._cache_metrics()

    def on_pod_delete(self, pod: model.Pod) -> None:
        self.pods.remove(pod)
        removed = self.cache.remove_pod(pod.metadata.uid)
        if self.scheduler is not None:
            self.scheduler.on_pod_delete(pod, removed)
        self._cache_metrics()

    def on_pod_group(self, group: model.PodGroup) -> None:
        self.pod_groups.put(group)
        if self.scheduler is not None:
            self.scheduler.on_pod_group(group)

    def on_pdb(self, pdb: model.PodDisruptionBudget) -> None:
        self.pdbs.put(pdb)

    def on_pdb_delete(self, namespace: str, name: str) -> None:
        self.pdbs.remove(namespace, name)

    def _cache_metrics(self) -> None:
        self.metrics.set_cache_size(self.cache.node_count, self.cache.pod_count, self.cache.assumed_count)
