"""The core: what Berth knows and the profiles that judge pods.

Sources (the embedded cluster, Kubernetes informers, the gRPC Cluster feed)
report changes through the ``on_*`` methods (:class:`~berth.cluster.sources.ClusterListener`);
the verbs (:mod:`berth.scheduling.verbs`, :mod:`berth.scheduling.explain`)
and the scheduling loop (:mod:`berth.scheduling.loop`) read it. Everything
runs on one event loop: an evaluation never awaits, so it sees one
consistent snapshot. Built by :func:`berth.app.build`, the composition root.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from berth.cache.cache import Cache, UsageOverflow
from berth.cache.infos import PodInfo
from berth.cache.snapshot import Snapshot
from berth.cluster import model
from berth.cluster.sources import Source
from berth.config import BerthConfiguration
from berth.errors import AlreadyExists, InvalidArgument
from berth.framework.runtime import Framework
from berth.metrics import Metrics
from berth.queue.nominator import Nominator
from berth.queue.waiting import WaitingPods
from berth.quota import QueueSpec, QueueTree
from berth.scheduling.algorithm import Sampler
from berth.scheduling.client import SourceClient
from berth.scheduling.decisions import DecisionLog
from berth.scheduling.state import NamespaceStore, PodDisruptionBudgetStore, PodGroupStore, PodStore, WorkloadStore

if TYPE_CHECKING:
    from berth.scheduling.loop import Scheduler

__all__ = ["Core", "VerbError", "new_queue_tree", "scheduler_name_of"]

log = logging.getLogger(__name__)

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


def new_queue_tree(cfg: BerthConfiguration, cache: Cache, nominator: Nominator | None = None) -> QueueTree:
    """The batch queues of ``cfg``, counting Berth's own pods (those whose
    scheduler is one of its profiles) as the cache and nominator report them."""
    names = {p.scheduler_name for p in cfg.profiles}
    tree = QueueTree(
        cfg.queues,
        counts=lambda pod: scheduler_name_of(pod) in names,
        capacity=cache.allocatable_total,
    )
    cache.subscribe(tree.on_cache)
    if nominator is not None:
        nominator.listeners.append(tree.on_nominated)
    return tree


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
        namespaces: NamespaceStore,
        frameworks: Mapping[str, Framework],
        nominator: Nominator,
        waiting: WaitingPods,
        decisions: DecisionLog,
        client: SourceClient,
        metrics: Metrics,
        clock: Callable[[], float],
        rng: random.Random,
        workloads: WorkloadStore | None = None,
        quota: QueueTree | None = None,
    ) -> None:
        self.cfg = cfg
        self.cache = cache
        self.pods = pods
        self.pod_groups = pod_groups
        self.pdbs = pdbs
        self.namespaces = namespaces
        self.workloads = workloads if workloads is not None else WorkloadStore()
        self.frameworks = dict(frameworks)
        self.nominator = nominator
        self.waiting = waiting
        self.decisions = decisions
        self.client = client
        self.metrics = metrics
        self.clock = clock
        self.rng = rng
        #: The batch queues (empty without ``queues`` in the configuration).
        self.quota = quota if quota is not None else new_queue_tree(cfg, cache, nominator)
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

    def reload_queues(self, specs: list[QueueSpec]) -> None:
        """Take a new ``queues`` section (hot reload); raises InvalidArgument
        and keeps the running queues when it is invalid. Nothing is evicted:
        a queue shrunk below its usage only stops new placements."""
        self.quota.load(specs)
        self.cfg.queues = specs
        if self.scheduler is not None:
            self.scheduler.queues_changed()

    def on_node(self, node: model.Node) -> None:
        self.quota.capacity_changed()
        self.cache.add_node(node)
        if self.scheduler is not None:
            self.scheduler.on_node(node)
        self._cache_metrics()

    def on_node_delete(self, name: str) -> None:
        self.quota.capacity_changed()
        self.cache.remove_node(name)
        self._cache_metrics()

    def admit_pods(self, pods: Sequence[model.Pod]) -> None:
        """Refuse a batch (valid pod by pod) that the core cannot take whole:
        a uid another pod holds (AlreadyExists), or a node whose requested
        amounts would pass int64 at any point while the batch is counted in
        order (ResourceExhausted). Changes nothing; a source calls it before
        applying any of the batch, and applies it in the same order."""
        steps: list[list[tuple[str, int, PodInfo]]] = []
        for i, pod in enumerate(pods):
            uid = pod.metadata.uid
            holder = self.pods.get(uid)
            if holder is not None and holder.key != pod.key:
                raise AlreadyExists(f"pods[{i}].metadata.uid: {uid!r} is already the uid of pod {holder.key}")
            # What stops counting: this uid's old version (unless it stays
            # assumed, pending), and a different pod that had this name (the
            # source deletes it first).
            counts = bool(pod.spec.node_name) and pod.status.phase not in ("Succeeded", "Failed")
            replaced = self.pods.by_key(pod.key)
            step: list[tuple[str, int, PodInfo]] = []
            for old_uid in dict.fromkeys((uid, replaced.metadata.uid if replaced is not None else uid)):
                old, node = self.cache.get_pod(old_uid), self.cache.pod_node(old_uid)
                stays = old_uid == uid and not pod.spec.node_name and self.cache.is_assumed(uid)
                if old is not None and node is not None and not stays:
                    step.append((node, -1, old))
            if counts:
                step.append((pod.spec.node_name, 1, PodInfo.of(pod)))
            steps.append(step)
        self.cache.check_steps(steps)

    def on_pod(self, pod: model.Pod, *, source: Source) -> None:
        old = self.pods.put(pod, source)
        uid = pod.metadata.uid
        terminal = pod.status.phase in ("Succeeded", "Failed")
        if pod.spec.node_name and not terminal:
            try:
                self.cache.add_pod(PodInfo.of(pod))
            except UsageOverflow as e:
                # Only a source that cannot refuse (an informer) gets here: the
                # cache keeps what it counted before rather than wrap a column.
                log.error("pod %s is not counted as given: %s", pod.key, e)
        elif terminal or (self.cache.pod_node(uid) is not None and not self.cache.is_assumed(uid)):
            # Finished, or no longer bound: it stops counting on its old node
            # (an assumed pod keeps its place until its binding resolves).
            self.cache.remove_pod(uid)
        if self.scheduler is not None:
            self.scheduler.on_pod(old, pod)
        self._cache_metrics()

    def on_pod_delete(self, pod: model.Pod) -> None:
        self.pods.remove(pod)
        removed = self.cache.remove_pod(pod.metadata.uid)
        self.quota.pod_deleted(pod.metadata.uid)
        if self.scheduler is not None:
            self.scheduler.on_pod_delete(pod, removed)
        self._cache_metrics()

    def on_pod_group(self, group: model.PodGroup) -> None:
        self.pod_groups.put(group)
        if self.scheduler is not None:
            self.scheduler.on_pod_group(group)

    def on_pdb(self, pdb: model.PodDisruptionBudget) -> None:
        """Store a PDB. One the API server would reject (an unknown selector
        operator, say) is not stored — the embedded cluster refuses it before
        it gets here; from an informer, which cannot refuse, it is logged and
        treated as absent — so preemption never meets it."""
        try:
            self.pdbs.put(pdb)
        except InvalidArgument as e:
            key = model.pod_key(pdb.metadata.namespace, pdb.metadata.name)
            log.error("ignoring PodDisruptionBudget %s: %s", key, e)
            self.pdbs.remove(pdb.metadata.namespace, pdb.metadata.name)

    def on_pdb_delete(self, namespace: str, name: str) -> None:
        self.pdbs.remove(namespace, name)

    def on_namespace(self, namespace: model.Namespace) -> None:
        """Store a namespace's labels. No pod is requeued: as kube-scheduler's
        InterPodAffinity (whose EventsToRegister names Pod and Node events
        only), a label change waits for the next event that requeues the pod."""
        self.namespaces.put(namespace)

    def on_namespace_delete(self, name: str) -> None:
        self.namespaces.remove(name)

    def on_workload(self, obj: model.Workload) -> None:
        """Store a Service's, ReplicationController's, ReplicaSet's or
        StatefulSet's selector (PodTopologySpread's default constraints). One
        the API server would reject is logged and treated as absent, as a
        PDB is. No pod is requeued: kube-scheduler's PodTopologySpread
        registers no event for these kinds either."""
        try:
            self.workloads.put(obj)
        except InvalidArgument as e:
            key = model.pod_key(obj.metadata.namespace, obj.metadata.name)
            log.error("ignoring %s %s: %s", obj.kind, key, e)
            self.workloads.remove(obj.kind, obj.metadata.namespace, obj.metadata.name)

    def on_workload_delete(self, kind: str, namespace: str, name: str) -> None:
        self.workloads.remove(kind, namespace, name)

    def _cache_metrics(self) -> None:
        self.metrics.set_cache_size(self.cache.node_count, self.cache.pod_count, self.cache.assumed_count)
