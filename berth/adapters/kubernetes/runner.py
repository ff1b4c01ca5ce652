"""Berth in a Kubernetes cluster: informers feed the core, leader election
decides who schedules.

Every replica runs the informers, so every replica's cache converges to the
API server and serves the extender and gRPC reads. Only the leader of the
``coordination.k8s.io`` Lease (:mod:`.election`) runs the scheduling loop.
Each term starts from the informers' current state — a fresh queue holding
every pending pod of Berth's profiles — and ends at once when the lease is
lost: the loop is cancelled and whatever that term had assumed but not yet
bound is forgotten. On shutdown the leader ends its term, then releases the
Lease, so a standby takes over at its next retry.

The API server may be down when Berth starts or go away later: every call
of the start-up (PodGroup discovery, the informers' LIST and WATCH, the
Lease) retries with client-go's reflector backoff and never ends the
process; ``/readyz`` turns true only once every informer has listed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
import weakref
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from berth import access as berth_access
from berth.adapters.kubernetes import kubeconfig as _kubeconfig
from berth.adapters.kubernetes import writer as _writer
from berth.adapters.kubernetes.access import ApiServerReviewer, CallerWrites
from berth.adapters.kubernetes.backoff import Backoff, retrying
from berth.adapters.kubernetes.deadlines import bound_requests
from berth.adapters.kubernetes.election import LeaderElector
from berth.adapters.kubernetes.informer import Handlers, Informer, cancel_all
from berth.adapters.kubernetes.leaderlabel import LeaderLabel
from berth.adapters.kubernetes.queue_status import QueueStatusWriter
from berth.adapters.kubernetes.source import KubernetesSource
from berth.adapters.kubernetes.workload_api import PLURALS, PodGroupConditions
from berth.adapters.kubernetes.writer import Recipe
from berth.cluster import dra, hypernodes, model, queues, storage, topologies, workload_api
from berth.scheduling.core import Core
from berth.scheduling.loop import Scheduler

__all__ = ["KubernetesRunner", "load_api_client"]

log = logging.getLogger(__name__)

#: The PodGroup discovery request gives up (and is retried) after this.
DISCOVERY_TIMEOUT_SECONDS = 30.0


#: How each ApiClient of ``load_api_client`` was made, so the writer
#: subprocess can make its own the same way.
_RECIPES: weakref.WeakKeyDictionary[client.ApiClient, Recipe] = weakref.WeakKeyDictionary()


async def load_api_client(*, kubeconfig: str | None, in_cluster: bool) -> client.ApiClient:
    """The ApiClient for ``--kubeconfig``/``--in-cluster``; a ConfigError
    naming the file and the problem when they cannot be used."""
    api = await _kubeconfig.load_api_client(kubeconfig=kubeconfig, in_cluster=in_cluster)
    _kubeconfig.skip_proxy_lookups(api)
    # No request waits unbounded on a connection gone silent (berth.adapters.kubernetes.deadlines).
    bound_requests(api)
    _RECIPES[api] = Recipe(kubeconfig=kubeconfig, in_cluster=in_cluster)
    return api


class KubernetesRunner:
    def __init__(
        self, core: Core, api: client.ApiClient, *, identity: str | None = None, writer: Recipe | None = None
    ) -> None:
        """``writer``: how the writer subprocess reaches the API server; by
        default as ``api`` was made by :func:`load_api_client`. An ApiClient
        made otherwise (tests' in-process fakes) without a ``writer`` writes
        from this process."""
        self.core = core
        self.api = api
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        first_profile = core.cfg.profiles[0].scheduler_name
        recipe = writer or _RECIPES.get(api)
        process = None
        if recipe is not None:
            spawn = _writer.subprocess_spawner(recipe, identity=self.identity, scheduler_name=first_profile)
            process = _writer.WriterProcess(spawn)
        self.source = KubernetesSource(api, identity=self.identity, scheduler_name=first_profile, writer=process)
        # berth_events_dropped_total, from this process's recorder and the writer's.
        self.source.writes.events.on_drop = core.metrics.events_dropped.inc
        if process is not None:
            process.on_events_dropped = core.metrics.events_dropped.inc
        #: Our Pod labelled berth.dev/leader=true while we lead (None: not in a Pod).
        self.label = LeaderLabel.from_env(api)
        core.default_source = self.source
        # The batch API writes as its callers, and the doors ask the API
        # server who they are and what they may see (berth.access).
        self.as_caller = self.source.as_caller = CallerWrites(
            api, impersonate_certificates=core.cfg.grpc.auth.impersonate_certificate_callers
        )
        core.authority = berth_access.Authority(ApiServerReviewer(api))
        self.informers: list[Informer[Any]] = []
        #: Where PodGroup conditions go, once a PodGroup version is watched.
        self.pod_group_conditions: PodGroupConditions | None = None
        #: Writes the Queue objects' status while leading (None: Queues not served).
        self.queue_status: QueueStatusWriter | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._loop_task: asyncio.Task[None] | None = None
        self.leading = asyncio.Event()
        self.terms = 0

    # ------------------------------------------------------------ informers

    def _pod_handlers(self) -> Handlers[model.Pod]:
        core, source = self.core, self.source
        return Handlers.mirror(lambda p: core.on_pod(p, source=source), core.on_pod_delete)

    def _node_handlers(self) -> Handlers[model.Node]:
        core = self.core
        return Handlers.mirror(core.on_node, lambda n: core.on_node_delete(n.metadata.name))

    def _workload_informer(self, name: str, list_call: Any, kind: type[model.Workload]) -> Informer[Any]:
        core = self.core
        return Informer(
            name,
            list_call,
            kind,
            Handlers.mirror(
                core.on_workload, lambda w: core.on_workload_delete(w.kind, w.metadata.namespace, w.metadata.name)
            ),
        )

    async def _served(self, what: str, list_one: Any, otherwise: str) -> bool:
        """Whether ``list_one(limit=1)`` is served and readable (404 or 403:
        not); retried until the API server answers. ``otherwise`` is logged
        when it is not: what Berth does without it."""

        async def probe() -> bool:
            try:
                await list_one(limit=1, _request_timeout=DISCOVERY_TIMEOUT_SECONDS)
            except ApiException as e:
                if e.status in (404, 403):
                    return False
                raise
            return True

        backoff = Backoff(clock=asyncio.get_running_loop().time)
        served = await retrying(f"discovering {what}", probe, backoff=backoff, log=log)
        if not served:
            log.info("%s not served (or not readable) here: %s", what, otherwise)
        return served

    def _custom_list(self, group: str, version: str, plural: str) -> Any:
        """A cluster-scoped list call for a kind kubernetes-asyncio has no typed call for."""
        custom = client.CustomObjectsApi(self.api)

        async def list_objects(**kw: Any) -> Any:
            return await custom.list_cluster_custom_object(group, version, plural, **kw)

        return list_objects

    async def _pod_group_informers(self) -> list[Informer[Any]]:
        """An informer for each PodGroup kind of an enabled gang dialect
        (scheduler-plugins', Volcano's, KAI's: berth/gangs) that is served."""
        core = self.core
        out: list[Informer[Any]] = []
        for source in core.gangs.sources:
            if not source.api_version:
                continue  # Kueue's and YuniKorn's gangs live on the pods
            group, _, version = source.api_version.partition("/")
            list_call = self._custom_list(group, version, "podgroups")
            if not await self._served(
                f"PodGroups ({source.api_version})", list_call, f"{source.name} gangs wait for their PodGroup"
            ):
                continue

            def stamp(g: model.PodGroup, api_version: str = source.api_version) -> model.PodGroup:
                g.api_version = api_version  # a list's items may leave it to the envelope
                return g

            out.append(
                Informer(
                    "podgroups" if source.name == "scheduler-plugins" else f"{source.name}-podgroups",
                    list_call,
                    model.PodGroup,
                    Handlers(
                        on_add=core.on_pod_group,
                        on_update=lambda o, n: core.on_pod_group(n),
                        on_delete=core.on_pod_group_delete,
                    ),
                    prepare=stamp,
                )
            )
        return out

    async def _queues_served(self) -> bool:
        """Queue objects (berth.dev/v1alpha1): served once the chart's CRD is installed."""
        return await self._served(
            f"Queues ({queues.API_VERSION})",
            self._custom_list(queues.GROUP, queues.VERSION, queues.PLURAL),
            "batch queues come from the configuration file only",
        )

    async def _kueue_topology_informer(self) -> Informer[Any] | None:
        """Kueue Topology objects, in the newest version served (v1beta2, else
        v1beta1), when the configuration asks for them (``kueueTopologies``)."""
        core = self.core
        for api_version in topologies.VERSIONS:
            group, _, version = api_version.partition("/")
            listing = self._custom_list(group, version, "topologies")
            if not await self._served(f"Topologies ({api_version})", listing, "gangs use the configured topologies"):
                continue

            def stamp(t: topologies.KueueTopology, api_version: str = api_version) -> topologies.KueueTopology:
                t.api_version = api_version  # a list's items may leave it to the envelope
                return t

            return Informer(
                "kueue-topologies",
                listing,
                topologies.KueueTopology,
                Handlers.mirror(core.on_topology, lambda t: core.on_topology_delete(t.metadata.name)),
                prepare=stamp,
            )
        return None

    async def _hypernode_informer(self) -> Informer[Any] | None:
        """Volcano HyperNodes (topology.volcano.sh/v1alpha1) where served,
        when the configuration asks for them (``volcanoHyperNodes``)."""
        core = self.core
        listing = self._custom_list(hypernodes.GROUP, hypernodes.VERSION, hypernodes.PLURAL)
        handlers = Handlers.mirror(core.on_hypernode, lambda h: core.on_hypernode_delete(h.metadata.name))
        served = await self._served(f"HyperNodes ({hypernodes.API_VERSION})", listing, "no HyperNode topology")
        return Informer("volcano-hypernodes", listing, hypernodes.HyperNode, handlers) if served else None

    def _queue_informer(self) -> Informer[Any]:
        core = self.core
        return Informer(
            "queues",
            self._custom_list(queues.GROUP, queues.VERSION, queues.PLURAL),
            queues.Queue,
            Handlers.mirror(core.on_queue_object, lambda q: core.on_queue_object_delete(q.metadata.name)),
        )

    async def _dra_served(self) -> bool:
        """resource.k8s.io/v1: GA and on by default since v1.34."""
        return await self._served(
            "resource.k8s.io/v1", client.ResourceV1Api(self.api).list_device_class, "pods with ResourceClaims wait"
        )

    async def _device_taint_rules_served(self) -> bool:
        """DeviceTaintRules (resource.k8s.io/v1 from 1.37); asked only while
        the DRADeviceTaints gate is on."""
        return await self._served(
            "DeviceTaintRules (resource.k8s.io/v1)",
            self._custom_list("resource.k8s.io", "v1", "devicetaintrules"),
            "only the slices' own taints apply",
        )

    def _device_taint_rule_informer(self) -> Informer[Any]:
        core = self.core
        return Informer(
            "devicetaintrules",
            # kubernetes-asyncio 36 has no typed call for this kind yet.
            self._custom_list("resource.k8s.io", "v1", "devicetaintrules"),
            dra.DeviceTaintRule,
            Handlers.mirror(core.on_device_taint_rule, lambda r: core.on_device_taint_rule_delete(r.metadata.name)),
        )

    def _dra_informers(self) -> list[Informer[Any]]:
        """DeviceClasses, ResourceSlices, ResourceClaimTemplates and ResourceClaims
        (kube-scheduler's DRA manager: informers and the claims' assume cache)."""
        core, source = self.core, self.source
        resource = client.ResourceV1Api(self.api)
        return [
            Informer(
                "deviceclasses",
                resource.list_device_class,
                dra.DeviceClass,
                Handlers.mirror(core.on_device_class, lambda c: core.on_device_class_delete(c.metadata.name)),
            ),
            Informer(
                "resourceslices",
                resource.list_resource_slice,
                dra.ResourceSlice,
                Handlers.mirror(core.on_resource_slice, lambda s: core.on_resource_slice_delete(s.metadata.name)),
            ),
            Informer(
                "resourceclaimtemplates",
                resource.list_resource_claim_template_for_all_namespaces,
                dra.ResourceClaimTemplate,
                Handlers.mirror(
                    core.on_resource_claim_template,
                    lambda t: core.on_resource_claim_template_delete(t.metadata.namespace, t.metadata.name),
                ),
            ),
            Informer(
                "resourceclaims",
                resource.list_resource_claim_for_all_namespaces,
                dra.ResourceClaim,
                Handlers.mirror(
                    lambda c: core.on_resource_claim(c, source=source),
                    lambda c: core.on_resource_claim_delete(c.metadata.namespace, c.metadata.name),
                ),
            ),
        ]

    def _storage_informers(self) -> list[Informer[Any]]:
        """PersistentVolumes, claims, StorageClasses and the CSI objects (the
        informers kube-scheduler's volume plugins read; PVs and claims with
        the source PreBind writes them through)."""
        core, source = self.core, self.source
        core_v1 = client.CoreV1Api(self.api)
        st = client.StorageV1Api(self.api)
        return [
            Informer(
                "storageclasses",
                st.list_storage_class,
                storage.StorageClass,
                Handlers.mirror(core.on_storage_class, lambda o: core.on_storage_class_delete(o.metadata.name)),
            ),
            Informer(
                "csidrivers",
                st.list_csi_driver,
                storage.CSIDriver,
                Handlers.mirror(core.on_csi_driver, lambda o: core.on_csi_driver_delete(o.metadata.name)),
            ),
            Informer(
                "csinodes",
                st.list_csi_node,
                storage.CSINode,
                Handlers.mirror(core.on_csi_node, lambda o: core.on_csi_node_delete(o.metadata.name)),
            ),
            Informer(
                "csistoragecapacities",
                st.list_csi_storage_capacity_for_all_namespaces,
                storage.CSIStorageCapacity,
                Handlers.mirror(
                    core.on_csi_storage_capacity,
                    lambda o: core.on_csi_storage_capacity_delete(o.metadata.namespace, o.metadata.name),
                ),
            ),
            Informer(
                "persistentvolumes",
                core_v1.list_persistent_volume,
                storage.PersistentVolume,
                Handlers.mirror(
                    lambda o: core.on_persistent_volume(o, source=source),
                    lambda o: core.on_persistent_volume_delete(o.metadata.name),
                ),
            ),
            Informer(
                "persistentvolumeclaims",
                core_v1.list_persistent_volume_claim_for_all_namespaces,
                storage.PersistentVolumeClaim,
                Handlers.mirror(
                    lambda o: core.on_persistent_volume_claim(o, source=source),
                    lambda o: core.on_persistent_volume_claim_delete(o.metadata.namespace, o.metadata.name),
                ),
            ),
        ]

    async def start_informers(self) -> None:
        core_v1 = client.CoreV1Api(self.api)
        policy = client.PolicyV1Api(self.api)
        apps = client.AppsV1Api(self.api)
        core = self.core
        self.informers = [
            # Namespaces first: pod affinity's namespaceSelector selects by their
            # labels (kube-scheduler's InterPodAffinity reads its namespace lister).
            Informer(
                "namespaces",
                core_v1.list_namespace,
                model.Namespace,
                Handlers.mirror(core.on_namespace, lambda n: core.on_namespace_delete(n.metadata.name)),
            ),
            Informer("nodes", core_v1.list_node, model.Node, self._node_handlers()),
            Informer(
                "pods",
                core_v1.list_pod_for_all_namespaces,
                model.Pod,
                self._pod_handlers(),
                # kube-scheduler's pod informer skips terminated pods the same way.
                field_selector="status.phase!=Succeeded,status.phase!=Failed",
                # Nothing downstream changes a pod in place: equal and empty containers are shared.
                prepare=model.share_containers,
            ),
            Informer(
                "poddisruptionbudgets",
                policy.list_pod_disruption_budget_for_all_namespaces,
                model.PodDisruptionBudget,
                Handlers.mirror(core.on_pdb, lambda b: core.on_pdb_delete(b.metadata.namespace, b.metadata.name)),
            ),
            # Selectors only: PodTopologySpread's default constraints (as
            # kube-scheduler's plugin takes these four listers, plugin.go setListers).
            self._workload_informer("services", core_v1.list_service_for_all_namespaces, model.Service),
            self._workload_informer(
                "replicationcontrollers",
                core_v1.list_replication_controller_for_all_namespaces,
                model.ReplicationController,
            ),
            self._workload_informer("replicasets", apps.list_replica_set_for_all_namespaces, model.ReplicaSet),
            self._workload_informer("statefulsets", apps.list_stateful_set_for_all_namespaces, model.StatefulSet),
        ]
        self.informers.extend(await self._pod_group_informers())
        if core.cfg.kueue_topologies and (topologies := await self._kueue_topology_informer()) is not None:
            self.informers.append(topologies)
        if core.cfg.volcano_hyper_nodes and (hyper := await self._hypernode_informer()) is not None:
            self.informers.append(hyper)
        if await self._queues_served():
            self.informers.append(self._queue_informer())
            self.queue_status = QueueStatusWriter(core, self.source.write_queue_status)
        if await self._dra_served():
            self.informers.extend(self._dra_informers())
            # DeviceTaintRules taint devices by selector (DRADeviceTaints; served from 1.37).
            if self.core.features.dra_device_taints and await self._device_taint_rules_served():
                self.informers.append(self._device_taint_rule_informer())
        if core.features.generic_workload:
            self.informers.extend(await self._workload_api_informers())
        self.informers.extend(self._storage_informers())
        # Nodes first so pods land on known nodes; then the rest.
        for inf in self.informers:
            self._tasks.append(asyncio.create_task(inf.run(), name=f"informer-{inf.name}"))
        await asyncio.gather(*(inf.synced.wait() for inf in self.informers))
        log.info(
            "caches synced: %d namespaces, %d nodes, %d pods",
            len(core.namespaces),
            core.cache.node_count,
            len(core.pods),
        )

    # ------------------------------------------------------------ leadership

    async def _lead(self) -> None:
        """One term as leader: a fresh queue from current state, the loop, until cancelled."""
        self.terms += 1
        core = self.core
        scheduler = Scheduler(core)
        scheduler.attach()
        self.leading.set()
        log.info("%s is the leader (term %d): scheduling", self.identity, self.terms)
        # The label is written beside the loop (retried until it is): the
        # leader-only Service must not hold up scheduling, nor the other way round.
        label = self.label
        labelling = asyncio.create_task(label.set(), name="leader-label") if label is not None else None
        # The leader alone writes the Queue objects' status (berth.dev/v1alpha1).
        statuses = self.queue_status
        writing = asyncio.create_task(statuses.run(), name="queue-status") if statuses is not None else None
        try:
            await scheduler.run()
        finally:
            self.leading.clear()
            if writing is not None:
                await cancel_all([writing])
            if label is not None and labelling is not None:
                labelling.cancel()
                await asyncio.wait({labelling})
                # Before the Lease is released (the elector releases once the term has ended).
                await label.clear()
            await scheduler.detach()

    def reconnect_informers(self) -> int:
        """Move every informer's LIST or WATCH to a fresh connection (a term
        ended because the API server stopped answering: the watches' own
        connections may be half-open). How many were in flight."""
        return sum(inf.reconnect() for inf in self.informers)

    async def _elect(self) -> None:
        """Campaign until cancelled; then end the term and release the Lease."""
        le = self.core.cfg.leader_election
        core = self.core
        # client-go sets it to 0 when the elector is made, 1 while leading.
        status = core.metrics.leader_election_master_status.labels(le.resource_name)
        status.set(0)

        async def lead() -> None:
            status.set(1)
            try:
                await self._lead()
            finally:
                status.set(0)

        def on_holder(holder: str) -> None:
            core.leader = holder

        elector = LeaderElector(
            self.api,
            name=le.resource_name,
            namespace=le.resource_namespace or os.environ.get("POD_NAMESPACE", "kube-system"),
            identity=self.identity,
            lease_duration=le.lease_duration_seconds,
            renew_deadline=le.renew_deadline_seconds,
            retry_period=le.retry_period_seconds,
            lead=lead,
            on_holder=on_holder,
            on_unanswered=self.reconnect_informers,
        )
        # Bindings stop the moment the Lease may have passed to another replica.
        self.source.fence = elector.fence
        try:
            await elector.run()
        finally:
            self.source.fence = None

    async def run(self) -> None:
        """Informers, readiness, then schedule while leading; runs until cancelled."""
        if self.source.writer is not None:
            # Started beside the informers' LISTs: ready by the first bind.
            self._tasks.append(asyncio.create_task(self.source.writer.start(), name="writer-start"))
        try:
            await self.start_informers()
            self.core.ready = True
            if not self.core.cfg.run_scheduling_loop:
                await asyncio.Event().wait()
            if self.core.cfg.leader_election.leader_elect:
                self.core.leader = self.core.leader or ""  # an election runs here; the holder is not known yet
                await self._elect()
            else:
                await self._lead()
        finally:
            self.core.ready = False
            await cancel_all(self._tasks)

    async def _workload_api_informers(self) -> list[Informer[Any]]:
        """The Workload API kinds this release's scheduler reads, in the newest
        version served (GenericWorkload; see berth.adapters.kubernetes.workload_api),
        and the PodGroup conditions written back through that version."""
        core, out = self.core, []
        version = core.features.version
        for kind, typ in (("PodGroup", workload_api.PodGroup), ("Workload", workload_api.Workload)):
            for v in workload_api.served_versions(version, kind):
                plural = PLURALS[kind]
                listing = self._custom_list(workload_api.API_GROUP, v, plural)
                what = f"{kind}s ({workload_api.API_GROUP}/{v})"
                if not await self._served(what, listing, "pods naming them wait for their group"):
                    continue
                handlers = Handlers.mirror(core.on_scheduling_group, core.on_scheduling_group_delete)
                out.append(Informer(f"{plural}.{v}", listing, typ, handlers))
                if kind == "PodGroup":
                    self.pod_group_conditions = PodGroupConditions(self.api, v)
                    core.scheduling_groups.writer = self.pod_group_conditions.write
                break
        return out

    async def close(self) -> None:
        if self.pod_group_conditions is not None:
            await self.pod_group_conditions.close()
        try:
            await self.source.close()
        except Exception:
            log.exception("stopping the writer")
        with contextlib.suppress(Exception):
            await self.as_caller.close()
        with contextlib.suppress(Exception):
            await self.api.close()
