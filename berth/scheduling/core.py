"""The core: what Berth knows and the profiles that judge pods.

Sources (the embedded cluster, Kubernetes informers, the gRPC Cluster feed)
report changes through the ``on_*`` methods (:class:`~berth.cluster.sources.ClusterListener`);
the verbs (:mod:`berth.scheduling.verbs`, :mod:`berth.scheduling.explain`)
and the scheduling loop (:mod:`berth.scheduling.loop`) read it. Everything
runs on one event loop: an evaluation never awaits, so it sees one
consistent snapshot. Built by :func:`berth.app.build`, the composition root.
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING

from berth import access, features
from berth.cache.cache import Cache, UsageOverflow
from berth.cache.infos import PodInfo
from berth.cache.snapshot import Snapshot
from berth.cluster import dra, model, storage, workload_api
from berth.cluster import hypernodes as cluster_hypernodes
from berth.cluster import queues as cluster_queues
from berth.cluster import topologies as cluster_topologies
from berth.cluster.sources import Source
from berth.config import BerthConfiguration
from berth.errors import AlreadyExists, InvalidArgument, Unavailable
from berth.framework import interface as fw
from berth.framework.runtime import Framework
from berth.gangs import GangIndex, topology
from berth.metrics import Metrics
from berth.queue.nominator import Nominator
from berth.queue.waiting import PodsInPreBind, WaitingPods
from berth.quota import QueueSpec, QueueTree
from berth.quota import objects as quota_objects
from berth.quota.naming import QueueNaming
from berth.scheduling import fairness
from berth.scheduling.algorithm import Sampler
from berth.scheduling.client import SourceClient
from berth.scheduling.decisions import DecisionLog
from berth.scheduling.dra_state import DraStore
from berth.scheduling.state import NamespaceStore, PodDisruptionBudgetStore, PodGroupStore, PodStore, WorkloadStore
from berth.scheduling.streams import StreamBudget
from berth.scheduling.volume_state import VolumeStore

if TYPE_CHECKING:
    from berth.scheduling.loop import Scheduler

__all__ = ["Core", "VerbError", "claim_names", "new_queue_tree", "scheduler_name_of"]

log = logging.getLogger(__name__)

#: Pods whose node totals :meth:`Core.admit_pods_steps` checks in one step.
ADMIT_CHECK_PART = 50

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


def new_queue_tree(
    cfg: BerthConfiguration,
    cache: Cache,
    nominator: Nominator | None = None,
    group_queue: Callable[[model.Pod], str] | None = None,
) -> QueueTree:
    """The batch queues of ``cfg``, counting Berth's own pods (those whose
    scheduler is one of its profiles) as the cache and nominator report them."""
    names = cfg.scheduler_names()
    tree = QueueTree(
        cfg.queues,
        counts=lambda pod: scheduler_name_of(pod) in names,
        capacity=cache.allocatable_total,
        naming=QueueNaming(tuple(cfg.queue_keys), dict(cfg.queue_aliases), group_queue or (lambda pod: "")),
    )
    cache.subscribe(tree.on_cache)
    if nominator is not None:
        nominator.listeners.append(tree.on_nominated)
    return tree


def claim_names(pod: model.Pod) -> set[str]:
    """The ResourceClaims ``pod`` uses, by name (``resourceclaim.Name``): its
    ``resourceClaimName`` references and the claims generated for its templates."""
    generated = {s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses}
    out: set[str] = set()
    for ref in pod.spec.resource_claims:
        name = ref.resource_claim_name or generated.get(ref.name)
        if name:
            out.add(name)
    return out


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
        in_pre_bind: PodsInPreBind | None = None,
        decisions: DecisionLog,
        client: SourceClient,
        metrics: Metrics,
        clock: Callable[[], float],
        rng: random.Random,
        workloads: WorkloadStore | None = None,
        quota: QueueTree | None = None,
        dra_store: DraStore | None = None,
        volume_store: VolumeStore | None = None,
        gangs: GangIndex | None = None,
        scheduling_groups: workload_api.GroupStore | None = None,
    ) -> None:
        self.cfg = cfg
        self.cache = cache
        self.pods = pods
        self.pod_groups = pod_groups
        #: Who is in which gang, in every enabled dialect (berth/gangs).
        self.gangs = gangs if gangs is not None else GangIndex(cfg.gang_sources)
        #: The topologies TopologyGang reads (berth.app shares its set here): Kueue Topology objects join it.
        self.topologies = topology.TopologySet(cfg.topologies)
        #: Volcano HyperNodes (``volcanoHyperNodes``): their tiers are node labels the table derives.
        self.hypernodes = cluster_hypernodes.HyperNodeSet()
        #: Every scheduler name Berth answers to (profiles and their aliases) -> profile.
        self._scheduler_names = cfg.scheduler_names()
        self.pdbs = pdbs
        self.namespaces = namespaces
        self.workloads = workloads if workloads is not None else WorkloadStore()
        #: DeviceClasses, ResourceSlices, ResourceClaims (the Handle's ``dra``).
        self.dra = dra_store if dra_store is not None else DraStore()
        #: PVs, PVCs, StorageClasses, CSI objects (the Handle's ``volumes``).
        self.volumes = volume_store if volume_store is not None else VolumeStore()
        #: The Workload API's PodGroups and Workloads (the Handle's ``scheduling_groups``).
        self.scheduling_groups = scheduling_groups if scheduling_groups is not None else workload_api.GroupStore()
        self.frameworks = dict(frameworks)
        self.nominator = nominator
        self.waiting = waiting
        #: Pods whose PreBind has work, which a preemptor may cancel.
        self.in_pre_bind = in_pre_bind if in_pre_bind is not None else PodsInPreBind()
        self.decisions = decisions
        self.client = client
        self.metrics = metrics
        # scheduler_cache_size, read from the cache at scrape time (it changes on every pod).
        metrics.cache_size_from(
            lambda: self.cache.node_count, lambda: self.cache.pod_count, lambda: self.cache.assumed_count
        )
        self.clock = clock
        self.rng = rng
        #: The batch queues (empty without ``queues`` in the configuration).
        self.quota = quota if quota is not None else new_queue_tree(cfg, cache, nominator)
        #: Queues declared as Queue objects, merged with ``cfg.queues`` into ``quota``.
        self.queue_objects = quota_objects.QueueObjects()
        self.queue_objects.specs = list(cfg.queues)
        self.samplers = {name: Sampler() for name in self.frameworks}
        self._snapshot: Snapshot = cache.new_snapshot()
        self.ready = False
        #: The scheduling loop, while this replica runs one (the leader).
        self.scheduler: Scheduler | None = None
        #: id(pod) -> (pod, its info) for the batch :meth:`admit_pods` checked
        #: last, taken by :meth:`on_pod` as it applies them.
        self._admitted: dict[int, tuple[model.Pod, PodInfo]] = {}
        #: The decision streams open on every door, per caller and in total.
        self.streams = StreamBudget()
        #: Large feed batches applied in slices; the loop and binds wait for one.
        self.feeding = client.feeding
        #: Per-caller seats and queues for the doors' reads and feeds.
        self.fairness = fairness.Fairness(
            {
                name: fairness.PriorityLevel(
                    name, concurrency=level.concurrency, per_caller=level.per_caller, queue_length=level.queue_length
                )
                for name, level in (("reads", cfg.fairness.reads), ("feeds", cfg.fairness.feeds))
            }
        )
        #: Who vouches for callers and answers "may they see this" (Kubernetes
        #: mode: TokenReview and SubjectAccessReview through the API server;
        #: None: the doors check only their own static credentials).
        self.authority: access.Authority | None = None
        #: Where leader election runs: the Lease holder as last seen ("" not
        #: known yet), so that a standby can say who leads. None: no election
        #: here (standalone, or a single replica that always leads).
        self.leader: str | None = None
        #: Standalone replicas sharing a postgres store: True while this one
        #: stands by. It holds no state at all (it restores when it leads),
        #: so its doors refuse every call, not only the leader-only reads.
        self.standby_holds_nothing = False

    @property
    def standby(self) -> bool:
        """A replica that runs a scheduling loop only while it leads, and
        does not lead now: its queue state is not the scheduler's."""
        return self.leader is not None and self.scheduler is None and self.cfg.run_scheduling_loop

    def refuse_on_standby(self, *, leaders_state: bool = True) -> None:
        """:class:`errors.Unavailable` naming the leader when this replica
        may not answer: a standby asked for the leader's state
        (``leaders_state``), or a postgres standby asked anything (it holds
        no state until it leads). Every door asks this (gRPC's
        ``Authenticator.admit``, the extender's verbs, the dashboard's reads)."""
        if (leaders_state and self.standby) or self.standby_holds_nothing:
            raise Unavailable(f"not the leader (leader is {self.leader or 'not known yet'}): ask the leader")

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

    @functools.cached_property
    def features(self) -> features.Features:
        """The release and gates Berth follows: every profile's Handle
        carries the same (:func:`berth.app.build`); read once, as every bound
        pod's info asks for it."""
        return next(iter(self.frameworks.values())).handle.features

    def framework_for(self, profile: str) -> Framework:
        name = profile or self.cfg.extender.profile
        fwk = self.frameworks.get(self._scheduler_names.get(name, name))
        if fwk is None:
            raise VerbError(f"unknown profile {profile!r} (profiles: {', '.join(self.frameworks)})")
        return fwk

    def activate(self, uids: Sequence[str]) -> None:
        """The plugins' PodActivator: these pending pods to activeQ now, when
        this replica schedules (the leader); otherwise nothing to move."""
        if self.scheduler is not None:
            self.scheduler.queue.activate(uids)

    def responsible_for(self, pod: model.Pod) -> Framework | None:
        """The profile that schedules this pod (by its schedulerName or one of
        the profile's ``aliases``), or None when it is another scheduler's."""
        name = scheduler_name_of(pod)
        return self.frameworks.get(self._scheduler_names.get(name, name))

    # ------------------------------------------------------------ ClusterListener

    def reload_queues(self, specs: list[QueueSpec]) -> None:
        """Take a new ``queues`` section (hot reload); raises InvalidArgument
        and keeps the running queues when it is invalid. Nothing is evicted:
        a queue shrunk below its usage only stops new placements."""
        p = self.queue_objects.plan(specs)  # the file alone must be valid; objects are judged again
        self.quota.load(p.specs)
        self.queue_objects.commit(p)
        self.cfg.queues = specs
        if self.scheduler is not None:
            self.scheduler.queues_changed()

    def on_queue_object(self, obj: cluster_queues.Queue) -> None:
        """A Queue object (berth.dev/v1alpha1) added or changed: judged with
        the file's queues and the other objects (:mod:`berth.quota.objects`);
        one Berth refuses gets a verdict and changes nothing."""
        self._queue_objects_changed({**self.queue_objects.objects, obj.metadata.name: obj})

    def on_queue_object_delete(self, name: str) -> None:
        """A Queue object gone: its queue leaves the tree as if removed from ``queues:``."""
        objects = dict(self.queue_objects.objects)
        if objects.pop(name, None) is not None:
            self._queue_objects_changed(objects)

    def load_queue_objects(self, objects: Sequence[cluster_queues.Queue]) -> None:
        """Queue objects of the embedded cluster file, all or nothing: raises
        InvalidArgument naming the first one Berth refuses."""
        seen: set[str] = set()
        for o in objects:
            if o.metadata.name in seen:
                raise InvalidArgument(f"Queue {o.metadata.name}: declared twice")
            seen.add(o.metadata.name)
        merged = {**self.queue_objects.objects, **{o.metadata.name: o for o in objects}}
        p = self.queue_objects.plan(self.cfg.queues, merged)
        for o in objects:
            v = p.verdicts[o.metadata.name]
            if not v.accepted:
                raise InvalidArgument(f"Queue {o.metadata.name}: {v.message}")
        self._queue_objects_changed(merged, p)

    def _queue_objects_changed(
        self, objects: dict[str, cluster_queues.Queue], p: quota_objects.Plan | None = None
    ) -> None:
        p = p or self.queue_objects.plan(self.cfg.queues, objects)
        # Status writes and refused changes leave the tree as it is: no reload.
        if p.specs != self.queue_objects.specs:
            self.quota.load(p.specs)
            if self.scheduler is not None:
                self.scheduler.queues_changed()
        self.queue_objects.commit(p, objects)

    def on_node(self, node: model.Node) -> None:
        self.quota.capacity_changed()
        self.cache.add_node(node)
        if self.scheduler is not None:
            self.scheduler.on_node(node)

    def on_node_delete(self, name: str) -> None:
        self.quota.capacity_changed()
        self.cache.remove_node(name)

    def node_usage(self, node: str, *, excluding: str = "") -> tuple[dict[str, int], int]:
        """The requests of the pods the cache holds on ``node`` (bound and
        assumed), summed, and their count, without pod ``excluding``."""
        info = self.cache.node_info(node)
        used: dict[str, int] = {}
        count = 0
        for uid, pi in (info.pods.items() if info is not None else ()):
            if uid == excluding:
                continue
            count += 1
            for name, amount in pi.requests.items():
                used[name] = used.get(name, 0) + amount
        return used, count

    def admit_pods(self, pods: Sequence[model.Pod]) -> None:
        """:meth:`admit_pods_steps` at once."""
        for _ in self.admit_pods_steps(pods):
            pass

    def admit_pods_steps(self, pods: Sequence[model.Pod]) -> Generator[None, None, None]:
        """Refuse a batch (valid pod by pod) that the core cannot take whole:
        a uid another pod holds (AlreadyExists), or a node whose requested
        amounts would pass int64 at any point while the batch is counted in
        order (ResourceExhausted). Changes nothing; a source calls it before
        applying any of the batch, and applies it in the same order. A step
        per pod (:mod:`berth.scheduling.feeding`: the state it checks
        against does not change until the batch is applied)."""
        steps: list[list[tuple[str, int, PodInfo]]] = []
        # The infos computed here are the ones on_pod counts next (the source
        # applies the same pod objects in the same order): computing a pod's
        # requests is most of taking it in (restoring 50 000 bound pods).
        self._admitted.clear()
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
                info = PodInfo.of(pod, like=self.cache.get_pod(uid), feats=self.features)
                self._admitted[id(pod)] = (pod, info)
                step.append((pod.spec.node_name, 1, info))
            steps.append(step)
            yield
        # The int64 totals per node, in parts of the same order (one part
        # of 20 000 pods is ~0.35 s).
        running: dict[tuple[str, str], list[int]] = {}
        for k in range(0, len(steps), ADMIT_CHECK_PART):
            self.cache.check_steps(steps[k : k + ADMIT_CHECK_PART], running)
            yield

    def on_pod(self, pod: model.Pod, *, source: Source) -> None:
        old = self.pods.put(pod, source)
        self.gangs.pod_changed(pod)
        self.scheduling_groups.pod_updated(pod)
        uid = pod.metadata.uid
        terminal = pod.status.phase in ("Succeeded", "Failed")
        if pod.spec.node_name and not terminal:
            try:
                # A bound pod counts as its release counts a pod resized in
                # place (component-helpers v0.35/v0.36/v0.37 differ).
                self.cache.add_pod(self._info_of(pod))
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

    def _info_of(self, pod: model.Pod) -> PodInfo:
        """``pod``'s info: the one :meth:`admit_pods` computed for this very
        object when there is one (same object, not an equal one), else anew."""
        admitted = self._admitted.pop(id(pod), None)
        if admitted is not None and admitted[0] is pod:
            return admitted[1]
        return PodInfo.of(pod, like=self.cache.get_pod(pod.metadata.uid), feats=self.features)

    def on_pod_delete(self, pod: model.Pod) -> None:
        self.pods.remove(pod)
        self.gangs.pod_removed(pod)
        self.scheduling_groups.pod_deleted(pod)
        self.decisions.pod_deleted(pod.key, pod.metadata.uid)
        removed = self.cache.remove_pod(pod.metadata.uid)
        self.quota.pod_deleted(pod.metadata.uid)
        if self.scheduler is not None:
            self.scheduler.on_pod_delete(pod, removed)

    def on_scheduling_group(self, obj: workload_api.PodGroup | workload_api.Workload) -> None:
        """A Workload API PodGroup or Workload (``scheduling.k8s.io``): stored,
        and its gang's pods woken (GangScheduling's PodGroup/Add and Update)."""
        old = self.scheduling_groups.get(obj.kind, obj.metadata.namespace, obj.metadata.name)
        self.scheduling_groups.put(obj)
        if self.scheduler is not None and workload_api.may_help(old, obj):
            self.scheduler.on_scheduling_group(obj)

    def on_scheduling_group_delete(self, obj: workload_api.PodGroup | workload_api.Workload) -> None:
        self.scheduling_groups.remove(obj.kind, obj.metadata.namespace, obj.metadata.name)

    def on_pod_group(self, group: model.PodGroup) -> None:
        """A PodGroup of any dialect Berth reads (scheduler-plugins', Volcano's,
        KAI's); the PodGroupStore keeps scheduler-plugins' ones, as before."""
        if group.api_version == model.PodGroup().api_version:
            self.pod_groups.put(group)
        key = self.gangs.put_group(group)
        if self.scheduler is not None and key is not None:
            self.scheduler.on_gang(key)

    def on_pod_group_delete(self, group: model.PodGroup) -> None:
        ns = group.metadata.namespace or "default"
        if group.api_version == model.PodGroup().api_version:
            self.pod_groups.remove(ns, group.metadata.name)
        self.gangs.remove_group(group.api_version, ns, group.metadata.name)

    def reload_queue_naming(self, keys: Sequence[str], aliases: Mapping[str, str]) -> None:
        """Take new ``queueKeys`` and ``queueAliases`` (hot reload): every
        pod is recounted into the queue it names now."""
        self.quota.naming.keys, self.quota.naming.aliases = tuple(keys), dict(aliases)
        self.cfg.queue_keys, self.cfg.queue_aliases = list(keys), dict(aliases)
        self.quota.reclassify()
        if self.scheduler is not None:
            self.scheduler.queues_changed()

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

    def on_topology(self, obj: cluster_topologies.KueueTopology) -> None:
        """A Kueue Topology object (kueue.x-k8s.io) added or changed: its
        levels join the topologies gangs may ask for, and the pods waiting for
        a topology are tried again. One Kueue would refuse, or whose name a
        configured topology has, is logged and left out."""
        try:
            spec = topology.from_kueue(obj)
        except ValueError as e:
            log.error("ignoring %s", e)
            self.on_topology_delete(obj.metadata.name)
            return
        if not self.topologies.put(spec):
            log.warning("ignoring Topology %s: the configuration has a topology of that name", obj.metadata.name)
            return
        self._topology_event(fw.ActionType.ADD | fw.ActionType.UPDATE)

    def on_topology_delete(self, name: str) -> None:
        if self.topologies.remove(name):
            self._topology_event(fw.ActionType.DELETE)

    def on_hypernode(self, obj: cluster_hypernodes.HyperNode) -> None:
        """A Volcano HyperNode added or changed: the node table's tier labels
        follow (berth.cluster.hypernodes), the topology ``volcano-hypernodes``
        holds the tiers present, and the pods waiting for a topology are tried
        again. One Volcano would refuse is logged and gives no labels."""
        self.cache.table.derived = self.hypernodes
        self.hypernodes.put(obj)
        self._hypernodes_changed(fw.ActionType.ADD | fw.ActionType.UPDATE)

    def on_hypernode_delete(self, name: str) -> None:
        if self.hypernodes.remove(name):
            self._hypernodes_changed(fw.ActionType.DELETE)

    def _hypernodes_changed(self, action: fw.ActionType) -> None:
        if tiers := self.hypernodes.tiers():
            spec = topology.from_hypernodes(tiers, self.hypernodes.tier_names())
            if not self.topologies.put(spec):
                log.warning("ignoring HyperNodes: the configuration has a topology named %s", spec.name)
        else:
            self.topologies.remove(cluster_hypernodes.TOPOLOGY_NAME)
        self._topology_event(action)

    def _topology_event(self, action: fw.ActionType) -> None:
        if self.scheduler is not None:
            self.scheduler.queue.on_event(fw.ClusterEvent("Topology", action))

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

    # Dynamic Resource Allocation. The events are the ones kube-scheduler's
    # DynamicResources registers (EventsToRegister): DeviceClass and
    # ResourceSlice add/update wake every pod it rejected; a claim's change
    # wakes the pods that use it, or all of them when it freed devices
    # (isSchedulableAfterClaimChange, the plugin's queueing hint).

    def on_device_class(self, obj: dra.DeviceClass) -> None:
        self.dra.put_class(obj)
        self._dra_event("DeviceClass")

    def on_device_class_delete(self, name: str) -> None:
        self.dra.remove_class(name)

    def on_resource_slice(self, obj: dra.ResourceSlice) -> None:
        self.dra.put_slice(obj)
        self._dra_event("ResourceSlice")

    def on_resource_slice_delete(self, name: str) -> None:
        self.dra.remove_slice(name)

    def on_device_taint_rule(self, obj: dra.DeviceTaintRule) -> None:
        """A DeviceTaintRule changes the taints of the devices it selects:
        for the allocator, the slices it sees changed."""
        self.dra.put_taint_rule(obj)
        self._dra_event("ResourceSlice")

    def on_device_taint_rule_delete(self, name: str) -> None:
        # Taints gone: devices they kept from pods may fit now.
        self.dra.remove_taint_rule(name)
        self._dra_event("ResourceSlice")

    def on_resource_claim(self, claim: dra.ResourceClaim, *, source: Source) -> None:
        old = self.dra.put_claim(claim, source)
        if old is not None and old.status.allocation is not None and claim.status.allocation is None:
            self._dra_event("ResourceClaim")  # deallocated: its devices are free for anyone
        elif old is None or old.status != claim.status:
            self._dra_event("ResourceClaim", uses=claim)

    def on_resource_claim_delete(self, namespace: str, name: str) -> None:
        old = self.dra.remove_claim(namespace, name)
        if old is not None and old.status.allocation is not None:
            # In Kubernetes the claim is deallocated (an update) before its
            # finalizer lets it go; a feed may delete it allocated.
            self._dra_event("ResourceClaim")

    def on_resource_claim_template(self, obj: dra.ResourceClaimTemplate) -> None:
        self.dra.put_template(obj)

    def on_resource_claim_template_delete(self, namespace: str, name: str) -> None:
        self.dra.remove_template(namespace, name)

    def _dra_event(self, resource: str, *, uses: dra.ResourceClaim | None = None) -> None:
        if self.scheduler is None:
            return
        event = fw.ClusterEvent(resource, fw.ActionType.ADD | fw.ActionType.UPDATE)
        if uses is None:
            self.scheduler.queue.on_event(event)
            return
        ns, name = uses.metadata.namespace, uses.metadata.name
        self.scheduler.queue.on_event(event, pred=lambda q: q.info.namespace == ns and name in claim_names(q.pod))

    # Storage. Each change wakes the pods whose rejecting plugins registered
    # for it (VolumeBinding, VolumeZone, VolumeRestrictions, NodeVolumeLimits:
    # their EventsToRegister); a PVC event only the pods in its namespace
    # that use it (their queueing hints, isSchedulableAfterPersistentVolumeClaimChange).

    def on_persistent_volume(self, pv: storage.PersistentVolume, *, source: Source) -> None:
        old = self.volumes.put_pv(pv, source)
        self._volume_event("PersistentVolume", fw.ActionType.UPDATE if old is not None else fw.ActionType.ADD)

    def on_persistent_volume_delete(self, name: str) -> None:
        self.volumes.remove_pv(name)

    def on_persistent_volume_claim(self, pvc: storage.PersistentVolumeClaim, *, source: Source) -> None:
        old = self.volumes.put_pvc(pvc, source)
        action = fw.ActionType.UPDATE if old is not None else fw.ActionType.ADD
        ns, name = pvc.metadata.namespace, pvc.metadata.name
        self._volume_event(
            "PersistentVolumeClaim",
            action,
            pred=lambda q: q.info.namespace == ns and any(c == name for _, c, _ in storage.pod_claims(q.pod)),
        )

    def on_persistent_volume_claim_delete(self, namespace: str, name: str) -> None:
        self.volumes.remove_pvc(namespace, name)

    def on_storage_class(self, obj: storage.StorageClass) -> None:
        old = self.volumes.put_class(obj)
        self._volume_event("StorageClass", fw.ActionType.UPDATE if old is not None else fw.ActionType.ADD)

    def on_storage_class_delete(self, name: str) -> None:
        self.volumes.remove_class(name)

    def on_csi_node(self, obj: storage.CSINode) -> None:
        old = self.volumes.put_csi_node(obj)
        self._volume_event("CSINode", fw.ActionType.UPDATE if old is not None else fw.ActionType.ADD)

    def on_csi_node_delete(self, name: str) -> None:
        self.volumes.remove_csi_node(name)

    def on_csi_driver(self, obj: storage.CSIDriver) -> None:
        old = self.volumes.put_csi_driver(obj)
        self._volume_event("CSIDriver", fw.ActionType.UPDATE if old is not None else fw.ActionType.ADD)

    def on_csi_driver_delete(self, name: str) -> None:
        self.volumes.remove_csi_driver(name)

    def on_csi_storage_capacity(self, obj: storage.CSIStorageCapacity) -> None:
        old = self.volumes.put_capacity(obj)
        self._volume_event("CSIStorageCapacity", fw.ActionType.UPDATE if old is not None else fw.ActionType.ADD)

    def on_csi_storage_capacity_delete(self, namespace: str, name: str) -> None:
        self.volumes.remove_capacity(namespace, name)

    def _volume_event(
        self, resource: str, action: fw.ActionType, *, pred: Callable[[fw.QueuedPodInfo], bool] | None = None
    ) -> None:
        if self.scheduler is not None:
            self.scheduler.queue.on_event(fw.ClusterEvent(resource, action), pred=pred)
