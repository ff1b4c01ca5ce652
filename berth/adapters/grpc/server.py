"""gRPC adapter: serves ``berth.v1.Scheduler`` and ``berth.v1.Cluster`` from the
core, plus the standard health and reflection services (grpc.aio; shape of
grpc's ``async_greeter_server_with_graceful_shutdown.py``).

Servicers raise :mod:`berth.errors` kinds; :class:`edge.EdgeInterceptor`
decodes every request, authenticates mutating calls and maps the kinds to
status codes in one place (undecodable bytes are INVALID_ARGUMENT, a bug is
INTERNAL and logged), and the server keeps serving.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import functools
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterable
from typing import Any, TypeVar

import grpc
import msgspec
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from berth import access, errors
from berth.adapters.grpc import convert, door, durability, edge, security
from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, model_pb2, scheduler_pb2, scheduler_pb2_grpc
from berth.cluster import manifests, model
from berth.cluster.embedded import EmbeddedCluster
from berth.config import GrpcConfig
from berth.dra import cel
from berth.framework.decision import Decision
from berth.scheduling import batch, explain, reservations, turnstile, visibility, whatif
from berth.scheduling.core import Core, VerbError
from berth.scheduling.durable import Durable
from berth.scheduling.verbs import Extender, VictimsRequest

__all__ = ["GrpcServer", "validate"]

log = logging.getLogger(__name__)

Req = TypeVar("Req")
Resp = TypeVar("Resp")
T = TypeVar("T")

#: Checks a gRPC configuration before any port is bound (ConfigError).
validate = security.validate

#: How long WatchDecisionBatches lets decisions gather before it sends a
#: batch (:meth:`~berth.scheduling.decisions.DecisionLog.watch_batches`):
#: one message per few milliseconds rather than one or two per pod, which
#: cost the server ~15 % of its CPU in ``sendmsg`` when pods flow at ~1000/s.
DECISION_LINGER = 0.005


def _converting(items: Iterable[Any], conv: Callable[[Any, str], T], field: str) -> Generator[None, None, list[T]]:
    """:func:`_each` a step per message, for a large feed converted in
    slices (berth/scheduling/feeding.py: 20 000 pods take seconds)."""
    out = []
    for i, x in enumerate(items):
        out.append(conv(x, f"{field}[{i}]"))
        yield
    return out


def _each(items: Iterable[Any], conv: Callable[[Any, str], T], field: str) -> list[T]:
    """Every message of a repeated field converted, each error naming its
    element (``budgets[3].spec...``): the Cluster feed's upserts."""
    return [conv(x, f"{field}[{i}]") for i, x in enumerate(items)]


class SchedulerServicer(scheduler_pb2_grpc.SchedulerServicer):
    def __init__(self, core: Core, verbs: Extender, durable: Durable | None = None) -> None:
        self.core = core
        self.verbs = verbs
        #: Standalone Berth's state (Submit's idempotency keys, commits before answering).
        self.durable = durable
        #: The calls that evaluate pods queue here, fairly with the extender port.
        self.turns = turnstile.Turnstile(turnstile.GRPC_WIDTH)

    @property
    def epoch(self) -> str:
        """What answers carry and a resuming watch names: the decision log's,
        which is the state store's once restored (else the process's own)."""
        return self.core.decisions.epoch

    async def Filter(self, request: scheduler_pb2.FilterRequest, context: Any) -> scheduler_pb2.FilterResponse:
        names, nodes = _node_set(request.nodes)
        async with self.turns:
            res = self.verbs.filter(_pod(request.pod), names=names, nodes=nodes, profile=request.profile)
        return scheduler_pb2.FilterResponse(
            node_names=res.passed,
            failed_nodes=res.failed,
            failed_and_unresolvable_nodes=res.unresolvable,
            error=res.error,
        )

    async def Prioritize(
        self, request: scheduler_pb2.PrioritizeRequest, context: Any
    ) -> scheduler_pb2.PrioritizeResponse:
        names, nodes = _node_set(request.nodes)
        async with self.turns:
            res = self.verbs.prioritize(_pod(request.pod), names=names, nodes=nodes, profile=request.profile)
        return scheduler_pb2.PrioritizeResponse(
            host_priorities=[
                scheduler_pb2.HostPriority(host=n, score=s) for n, s in zip(res.names, res.scores.tolist(), strict=True)
            ],
            error=res.error,
        )

    async def Preempt(self, request: scheduler_pb2.PreemptRequest, context: Any) -> scheduler_pb2.PreemptResponse:
        victims = {
            node: VictimsRequest(list(v.pod_uids), convert.pods_from_pb(v.pods, f"node_name_to_victims[{node}].pods"))
            for node, v in request.node_name_to_victims.items()
        }
        resp = scheduler_pb2.PreemptResponse()
        for node, meta in self.verbs.preempt(_pod(request.pod), victims, profile=request.profile).items():
            resp.node_name_to_meta_victims[node].pod_uids.extend(meta.uids)
            resp.node_name_to_meta_victims[node].num_pdb_violations = meta.num_pdb_violations
        return resp

    async def Bind(self, request: scheduler_pb2.BindRequest, context: Any) -> scheduler_pb2.BindResponse:
        r = request
        await self._require(
            access.Attributes(
                "create", "pods", namespace=r.pod_namespace or "default", name=r.pod_name, subresource="binding"
            )
        )
        return scheduler_pb2.BindResponse(error=await self.verbs.bind(r.pod_namespace, r.pod_name, r.pod_uid, r.node))

    async def Explain(self, request: scheduler_pb2.ExplainRequest, context: Any) -> scheduler_pb2.ExplainResponse:
        pod = _pod(request.pod)
        async with self.turns:
            e = explain.explain(self.core, pod, profile=request.profile, node_names=list(request.node_names))
        return convert.explanation_to_pb(e)

    async def Submit(self, request: scheduler_pb2.SubmitRequest, context: Any) -> scheduler_pb2.SubmitResponse:
        """Each pod is converted once, here at the door, and judged on its
        own: one that cannot be converted is rejected with the field at
        fault (``pods[i]...``) and the others go on, so a batch of N pods
        answers as N single submits do. In Kubernetes mode the pods are
        created through the API server as the caller (:func:`batch.submit_as`)."""
        await self.core.feeding.quiet()  # not between a feed batch's slices
        group = convert.podgroup_from_pb(request.group, "group") if request.HasField("group") else None
        entries = _submitted(request)
        pods: list[model.Pod] = []
        bodies: list[dict[str, Any] | None] = []
        paths: list[str] = []
        refused: dict[int, scheduler_pb2.SubmitResult] = {}
        for i, (path, pod, body, key) in enumerate(entries):
            if isinstance(pod, errors.InvalidArgument):
                refused[i] = scheduler_pb2.SubmitResult(pod=key, message=str(pod), reason=batch.INVALID)
                continue
            pods.append(pod)
            bodies.append(body)
            paths.append(path)
        writes = batch.caller_writes(self.core)
        keys = _idempotency_keys(request, len(entries), refused)
        if any(keys) and self.durable is None:
            raise errors.FailedPrecondition(
                "idempotency_keys: this Berth keeps no state store (Kubernetes mode: the pod itself is its key)"
            )
        if writes is not None:
            caller = access.CALLER.get()
            judged = iter(await batch.submit_as(self.core, writes, caller, pods, group, bodies=bodies, paths=paths))
        else:
            if self.durable is not None:
                judged = iter(self.durable.submit(pods, group, keys=keys, paths=paths))
                await self.durable.sync()  # answered once the pods are committed
            else:
                judged = iter(batch.submit(self.core, pods, group, paths=paths))
        results = []
        for i in range(len(entries)):
            r = refused.get(i) or next(judged)
            if isinstance(r, batch.SubmitResult):
                r = scheduler_pb2.SubmitResult(
                    pod=r.pod, uid=r.uid, accepted=r.accepted, message=r.message, reason=r.reason
                )
            results.append(r)
        return scheduler_pb2.SubmitResponse(results=results)

    async def Cancel(self, request: scheduler_pb2.CancelRequest, context: Any) -> scheduler_pb2.CancelResponse:
        await self.core.feeding.quiet()  # not between a feed batch's slices
        writes = batch.caller_writes(self.core)
        if writes is not None:
            ns = request.namespace or "default"
            res = await batch.cancel_as(self.core, writes, access.CALLER.get(), ns, request.name)
        else:
            if self.durable is not None:
                res = self.durable.cancel(request.namespace, request.name)
                await self.durable.sync()
            else:
                res = batch.cancel(self.core, request.namespace, request.name)
        return scheduler_pb2.CancelResponse(cancelled=res.cancelled, message=res.message)

    async def _require(self, attrs: access.Attributes) -> None:
        """PermissionDenied (the API server's words) unless the caller may do ``attrs``."""
        authority = self.core.authority
        if authority is not None:
            await authority.require(access.CALLER.get(), attrs)

    def _pods(self) -> access.Scope:
        """The namespaces whose pods this call's caller may see (``list pods``)."""
        return access.Scope(self.core.authority, access.CALLER.get(), "list", "pods")

    async def _queues_visible(self, names: list[str]) -> set[str]:
        """The queues this call's caller may see: all with ``list
        queues.berth.dev``, else those it may ``get`` by name."""
        authority = self.core.authority
        caller = access.CALLER.get()
        if authority is None or (await authority.allowed(caller, QUEUES_LIST))[0]:
            return set(names)
        seen = set()
        for name in names:
            if (await authority.allowed(caller, access.Attributes("get", "queues", "berth.dev", name=name)))[0]:
                seen.add(name)
        return seen

    async def WatchDecisions(  # type: ignore[override]  # bytes: written as is by the edge's serializer
        self, request: scheduler_pb2.WatchDecisionsRequest, context: Any
    ) -> AsyncIterator[bytes]:
        """Each decision the caller may see, as its ``berth.v1.Decision``
        message encoded once for every stream (:func:`encoded_decision`)."""
        if self.core.scheduler is None:
            raise errors.FailedPrecondition("the scheduling loop is not running here (runSchedulingLoop: false)")
        scope = self._pods()
        with self.core.streams.open(edge.caller_of(context)):
            async for pairs in self._decisions(request, 0.0):
                for serial, decision in pairs:
                    if await scope.admits(_namespace_of(decision.pod)):
                        yield encoded_decision(serial, decision)  # written as is (edge.py)

    async def WatchDecisionBatches(
        self, request: scheduler_pb2.WatchDecisionsRequest, context: Any
    ) -> AsyncIterator[scheduler_pb2.DecisionBatch]:
        if self.core.scheduler is None:
            raise errors.FailedPrecondition("the scheduling loop is not running here (runSchedulingLoop: false)")
        scope = self._pods()
        with self.core.streams.open(edge.caller_of(context)):
            async for pairs in self._decisions(request, DECISION_LINGER):
                shown = await scope.filter(pairs, lambda p: _namespace_of(p[1].pod))
                if shown:
                    message = convert.decision_batch_to_pb(d for _, d in shown)
                    for m, (serial, _) in zip(message.decisions, shown, strict=True):
                        m.serial = serial
                    yield message

    def _decisions(
        self, request: scheduler_pb2.WatchDecisionsRequest, linger: float
    ) -> AsyncIterator[list[tuple[int, Decision]]]:
        """(serial, decision) batches: live (after a ``replay``), or resumed
        after ``since_serial`` of ``epoch`` (OUT_OF_RANGE when that is not
        this server's state, or was compacted)."""
        log_ = self.core.decisions
        if not request.HasField("since_serial"):
            return log_.watch_serials(request.pods, replay=request.replay, linger=linger)
        if request.epoch and request.epoch != self.epoch:
            raise errors.OutOfRange(
                f"epoch: {request.epoch!r} is not this server's ({self.epoch!r}): its state was lost "
                "since; list and watch again",
                oldest=log_.oldest,
            )
        if request.replay:
            raise errors.InvalidArgument("replay: not with since_serial (a resumed watch replays what it missed)")
        return log_.watch_since(request.pods, since=request.since_serial, linger=linger)

    async def ListQueues(
        self, request: scheduler_pb2.ListQueuesRequest, context: Any
    ) -> scheduler_pb2.ListQueuesResponse:
        quota = self.core.quota
        queues = quota.status()
        visible = await self._queues_visible([q.name for q in queues])
        held = reservations.by_queue(self.core)
        return scheduler_pb2.ListQueuesResponse(
            queues=[
                convert.queue_status_to_pb(q, quota.reclaims.get(q.name, 0), held.get(q.name, ()))
                for q in queues
                if q.name in visible
            ]
        )

    async def GetQueue(self, request: scheduler_pb2.GetQueueRequest, context: Any) -> scheduler_pb2.QueueStatus:
        quota = self.core.quota
        if not request.name:
            raise errors.InvalidArgument("name: required (a queue name)")
        await self._require(access.Attributes("get", "queues", "berth.dev", name=request.name))
        q = quota.get(request.name)
        if q is None:
            known = ", ".join(quota.names) if quota.enabled else "none are configured"
            raise errors.NotFound(f"queue {request.name!r} not found (queues: {known})")
        return convert.queue_status_to_pb(
            q, quota.reclaims.get(q.name, 0), reservations.by_queue(self.core).get(q.name, ())
        )

    async def ListPods(self, request: scheduler_pb2.ListPodsRequest, context: Any) -> scheduler_pb2.ListPodsResponse:
        scope = self._pods()
        if request.namespace and not await scope.admits(request.namespace):
            raise scope.denial(request.namespace)
        rows = await visibility.list_pods_in_slices(
            self.core, namespace=request.namespace or None, queue=request.queue or None, phase=request.phase or None
        )
        rows = await scope.filter(rows, lambda r: r.namespace)
        answer = scheduler_pb2.ListPodsResponse()
        for start in range(0, len(rows), _ROWS_A_SLICE):  # 50 000 rows are ~0.26 s of messages
            await asyncio.sleep(0)
            answer.pods.extend(convert.pod_row_to_pb(r) for r in rows[start : start + _ROWS_A_SLICE])
        return answer

    async def ListPodGroups(
        self, request: scheduler_pb2.ListPodGroupsRequest, context: Any
    ) -> scheduler_pb2.ListPodGroupsResponse:
        scope = self._pods()
        if request.namespace and not await scope.admits(request.namespace):
            raise scope.denial(request.namespace)
        rows = visibility.list_pod_groups(self.core, namespace=request.namespace or None)
        return convert.pod_group_rows_to_pb(await scope.filter(rows, lambda r: r.namespace))

    async def ListProfiles(
        self, request: scheduler_pb2.ListProfilesRequest, context: Any
    ) -> scheduler_pb2.ListProfilesResponse:
        """The profiles as resolved: defaults, the release's plugin set and
        the configuration's changes applied (what runs, not what was written)."""
        out = scheduler_pb2.ListProfilesResponse()
        for name, fwk in self.core.frameworks.items():
            resolved = fwk.resolved
            prof = self.core.cfg.profile(name)
            status = out.profiles.add(scheduler_name=name, aliases=list(prof.aliases) if prof is not None else [])
            for point, plugins in resolved.points.items():
                if plugins:
                    status.extension_points.add(extension_point=point, plugins=list(plugins))
            status.weights.update(resolved.weights)
            for plugin, args in resolved.args.items():
                if args:
                    status.args_json[plugin] = msgspec.json.encode(args).decode()
        return out

    async def Why(self, request: scheduler_pb2.WhyRequest, context: Any) -> scheduler_pb2.WhyResponse:
        if not request.name:
            raise errors.InvalidArgument("name: required (a pod name)")
        namespace = request.namespace or "default"
        await self._require(access.Attributes("get", "pods", namespace=namespace, name=request.name))
        key = model.pod_key(namespace, request.name)
        async with self.turns:
            return convert.why_to_pb(visibility.why(self.core, key))

    async def WhatIf(self, request: scheduler_pb2.WhatIfRequest, context: Any) -> scheduler_pb2.WhatIfResponse:
        """In slices, each through the turnstile; stops at the caller's
        deadline (DEADLINE_EXCEEDED) or when grpc cancels the call."""
        pod = _pod(request.pod)
        remaining = context.time_remaining()
        deadline = None if remaining is None else time.monotonic() + remaining
        answer = await whatif.whatif(
            self.core, pod, request.replicas, profile=request.profile, deadline=deadline, turns=self.turns
        )
        return convert.whatif_to_pb(answer)


#: ListPods' rows converted between two turns of the loop (~5 ms).
_ROWS_A_SLICE = 1000

#: Every queue, cluster-wide (the Queue resource is cluster-scoped).
QUEUES_LIST = access.Attributes("list", "queues", "berth.dev")

#: Pod manifests one Submit may carry (each is parsed on the event loop).
MAX_MANIFESTS = 5000


def _namespace_of(key: str) -> str:
    return key.partition("/")[0]


def _idempotency_keys(request: scheduler_pb2.SubmitRequest, count: int, refused: dict[int, Any]) -> list[str]:
    """The key of each pod judged (those not ``refused`` at the door), in
    order; all empty without ``idempotency_keys`` (each pod's uid then)."""
    keys = request.idempotency_keys
    if not keys:
        return [""] * (count - len(refused))
    if len(keys) != count:
        raise errors.InvalidArgument(f"idempotency_keys: {len(keys)} keys for {count} pods: give one per pod, or none")
    return [k for i, k in enumerate(keys) if i not in refused]


def _submitted(
    request: scheduler_pb2.SubmitRequest,
) -> list[tuple[str, model.Pod | errors.InvalidArgument, dict[str, Any] | None, str]]:
    """(path, pod or why not, the client's own object or None, NAMESPACE/NAME)
    for each pod of a Submit: from ``pods``, or from ``pod_manifests`` where
    given (a v1 Pod as JSON each; parsed and validated as a manifest file)."""
    out: list[tuple[str, model.Pod | errors.InvalidArgument, dict[str, Any] | None, str]] = []
    raw = request.pod_manifests
    if raw and request.pods and len(raw) != len(request.pods):
        raise errors.InvalidArgument(
            f"pod_manifests: {len(raw)} manifests for {len(request.pods)} pods: give one per pod, or only manifests"
        )
    if len(raw) > MAX_MANIFESTS:
        raise errors.ResourceExhausted(f"pod_manifests: {len(raw)} manifests; at most {MAX_MANIFESTS} per call")
    count = len(raw) or len(request.pods)
    for i in range(count):
        path = f"pod_manifests[{i}]" if raw else f"pods[{i}]"
        fallback = request.pods[i] if i < len(request.pods) else None
        key = model.pod_key(
            (fallback.metadata.namespace if fallback else "") or "default", fallback.metadata.name if fallback else ""
        )
        try:
            if raw:
                pod, body = _manifest_pod(raw[i], path)
                key = pod.key
            else:
                assert fallback is not None
                pod, body = convert.pod_from_pb(fallback, path), None
        except errors.InvalidArgument as e:
            out.append((path, e, None, key))
            continue
        out.append((path, pod, body, key))
    return out


def _manifest_pod(raw: bytes, path: str) -> tuple[model.Pod, dict[str, Any]]:
    """Berth's pod and the client's own object. The bytes are decoded twice
    on purpose: the API server must get the object as written (every field,
    Berth's model keeps only the scheduling ones), and Berth's pod comes from
    the manifest parser with its strict checks (unknown and duplicate fields,
    which a plain decode loses). A Submit holds at most MAX_MANIFESTS."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise errors.InvalidArgument(f"{path}: not a JSON object: {e}") from None
    if not isinstance(body, dict) or body.get("kind", "Pod") != "Pod":
        raise errors.InvalidArgument(f"{path}: expected a v1 Pod object")
    try:
        parsed = manifests.loads(raw.decode(), source=path)
    except (ValueError, UnicodeDecodeError) as e:
        raise errors.InvalidArgument(str(e)) from None
    if len(parsed.pods) != 1:
        raise errors.InvalidArgument(f"{path}: expected one Pod")
    return parsed.pods[0], body


def _pod(pod: model_pb2.Pod) -> model.Pod:
    if not pod.metadata.name and not pod.metadata.uid:
        raise VerbError("pod: required (a pod with metadata.name)")
    return convert.pod_from_pb(pod, "pod")


def _node_set(ns: scheduler_pb2.NodeSet) -> tuple[list[str] | None, list[model.Node] | None]:
    """Node names (nodeCacheCapable), or full node objects."""
    if ns.full_objects or len(ns.nodes):
        return None, convert.nodes_from_pb(ns.nodes, "nodes.nodes")
    return list(ns.node_names), None


def _after_feeds(servicer: Any, core: Core) -> None:
    """Each ``Upsert*``/``Delete*`` of ``servicer`` first waits for a sliced
    feed batch in progress to end (berth/scheduling/feeding.py): those that
    apply at once (small kinds) do not land between its slices."""
    for name in dir(type(servicer)):
        if name.startswith(("Upsert", "Delete")) and callable(getattr(servicer, name)):
            setattr(servicer, name, _quiet_first(getattr(servicer, name), core))


def _quiet_first(method: Callable[[Any, Any], Any], core: Core) -> Any:
    @functools.wraps(method)
    async def call(request: Any, context: Any) -> Any:
        await core.feeding.quiet()
        return await method(request, context)

    return call


#: Decisions whose WatchDecisions message is kept encoded: every stream
#: writes the same bytes for one decision, serialised once, as the API
#: server's watch cache serialises an event once for all its watchers
#: (``cachingObject``, staging/src/k8s.io/apiserver/pkg/storage/cacher/caching_object.go,
#: v0.37.2); the dashboard does the same (berth/adapters/http/ui.py ``event``).
#: A decision is immutable and hashable; its serial is the log's.
ENCODED_DECISIONS = 4096


@functools.lru_cache(maxsize=ENCODED_DECISIONS)
def encoded_decision(serial: int, decision: Decision) -> bytes:
    """The ``berth.v1.Decision`` message of ``decision`` numbered ``serial``, encoded."""
    message = convert.decision_to_pb(decision)
    message.serial = serial
    return message.SerializeToString()


class ClusterServicer(cluster_pb2_grpc.ClusterServicer):
    """The state feed: each call converts its batch and hands it to the embedded
    cluster, which validates the whole batch and applies all of it or none
    (:mod:`berth.cluster.embedded`)."""

    def __init__(self, core: Core, feed: EmbeddedCluster) -> None:
        self.core = core
        self.feed = feed

    async def UpsertNodes(self, request: cluster_pb2.UpsertNodesRequest, context: Any) -> cluster_pb2.UpsertResponse:
        nodes = await self.core.feeding.pure(_converting(request.nodes, convert.node_from_pb, "nodes"))
        return cluster_pb2.UpsertResponse(upserted=await self.core.feeding.run(self.feed.upsert_nodes_steps(nodes)))

    async def DeleteNodes(self, request: cluster_pb2.DeleteNodesRequest, context: Any) -> cluster_pb2.DeleteResponse:
        return cluster_pb2.DeleteResponse(deleted=self.feed.delete_nodes(request.names))

    async def UpsertPods(self, request: cluster_pb2.UpsertPodsRequest, context: Any) -> cluster_pb2.UpsertResponse:
        pods = await self.core.feeding.pure(_converting(request.pods, convert.pod_from_pb, "pods"))
        return cluster_pb2.UpsertResponse(upserted=await self.core.feeding.run(self.feed.upsert_pods_steps(pods)))

    async def DeletePods(self, request: cluster_pb2.DeletePodsRequest, context: Any) -> cluster_pb2.DeleteResponse:
        keys = [model.pod_key(r.namespace, r.name) for r in request.pods]
        return cluster_pb2.DeleteResponse(deleted=await self.core.feeding.run(self.feed.delete_pods_steps(keys)))

    async def UpsertPodGroups(
        self, request: cluster_pb2.UpsertPodGroupsRequest, context: Any
    ) -> cluster_pb2.UpsertResponse:
        groups = _each(request.groups, convert.podgroup_from_pb, "groups")
        return cluster_pb2.UpsertResponse(upserted=self.feed.upsert_pod_groups(groups))

    async def UpsertPodDisruptionBudgets(
        self, request: cluster_pb2.UpsertPodDisruptionBudgetsRequest, context: Any
    ) -> cluster_pb2.UpsertResponse:
        budgets = _each(request.budgets, convert.pdb_from_pb, "budgets")
        return cluster_pb2.UpsertResponse(upserted=self.feed.upsert_pdbs(budgets))

    async def UpsertNamespaces(
        self, request: cluster_pb2.UpsertNamespacesRequest, context: Any
    ) -> cluster_pb2.UpsertResponse:
        namespaces = _each(request.namespaces, convert.namespace_from_pb, "namespaces")
        return cluster_pb2.UpsertResponse(upserted=self.feed.upsert_namespaces(namespaces))

    async def DeleteNamespaces(
        self, request: cluster_pb2.DeleteNamespacesRequest, context: Any
    ) -> cluster_pb2.DeleteResponse:
        return cluster_pb2.DeleteResponse(deleted=self.feed.delete_namespaces(request.names))

    # ------------------------------------------------------------ storage

    async def UpsertPersistentVolumes(
        self, request: cluster_pb2.UpsertPersistentVolumesRequest, context: Any
    ) -> cluster_pb2.UpsertResponse:
        pvs = _each(request.persistent_volumes, convert.pv_from_pb, "persistent_volumes")
        return cluster_pb2.UpsertResponse(upserted=self.feed.upsert_persistent_volumes(pvs))

    async def DeletePersistentVolumes(
        self, request: cluster_pb2.DeletePersistentVolumesRequest, context: Any
    ) -> cluster_pb2.DeleteResponse:
        return cluster_pb2.DeleteResponse(deleted=self.feed.delete_persistent_volumes(request.names))

    async def UpsertPersistentVolumeClaims(
        self, request: cluster_pb2.UpsertPersistentVolumeClaimsRequest, context: Any
    ) -> cluster_pb2.UpsertResponse:
        claims = _each(request.persistent_volume_claims, convert.pvc_from_pb, "persistent_volume_claims")
        return cluster_pb2.UpsertResponse(upserted=self.feed.upsert_persistent_volume_claims(claims))

    async def DeletePersistentVolumeClaims(
        self, request: cluster_pb2.DeletePersistentVolumeClaimsRequest, context: Any
    ) -> cluster_pb2.DeleteResponse:
        keys = [model.pod_key(r.namespace, r.name) for r in request.persistent_volume_claims]
        return cluster_pb2.DeleteResponse(deleted=self.feed.delete_persistent_volume_claims(keys))

    async def UpsertStorageClasses(
        self, request: cluster_pb2.UpsertStorageClassesRequest, context: Any
    ) -> cluster_pb2.UpsertResponse:
        classes = _each(request.storage_classes, convert.storage_class_from_pb, "storage_classes")
        return cluster_pb2.UpsertResponse(upserted=self.feed.upsert_storage_classes(classes))

    async def DeleteStorageClasses(
        self, request: cluster_pb2.DeleteStorageClassesRequest, context: Any
    ) -> cluster_pb2.DeleteResponse:
        return cluster_pb2.DeleteResponse(deleted=self.feed.delete_storage_classes(request.names))

    async def UpsertCSINodes(
        self, request: cluster_pb2.UpsertCSINodesRequest, context: Any
    ) -> cluster_pb2.UpsertResponse:
        objs = _each(request.csi_nodes, convert.csi_node_from_pb, "csi_nodes")
        return cluster_pb2.UpsertResponse(upserted=self.feed.upsert_csi_nodes(objs))

    async def DeleteCSINodes(
        self, request: cluster_pb2.DeleteCSINodesRequest, context: Any
    ) -> cluster_pb2.DeleteResponse:
        return cluster_pb2.DeleteResponse(deleted=self.feed.delete_csi_nodes(request.names))

    # ------------------------------------------------------------ resource.k8s.io/v1

    async def UpsertDeviceClasses(
        self, request: cluster_pb2.UpsertDeviceClassesRequest, context: Any
    ) -> cluster_pb2.UpsertResponse:
        classes = _each(request.device_classes, convert.device_class_from_pb, "device_classes")
        for i, c in enumerate(classes):  # the API server's cost limit (berth/dra/cel_cost.py)
            cel.refuse_too_complex(cel.class_selectors(c.spec, f"device_classes[{i}].spec"))
        return cluster_pb2.UpsertResponse(upserted=self.feed.upsert_device_classes(classes))

    async def DeleteDeviceClasses(
        self, request: cluster_pb2.DeleteDeviceClassesRequest, context: Any
    ) -> cluster_pb2.DeleteResponse:
        return cluster_pb2.DeleteResponse(deleted=self.feed.delete_device_classes(request.names))

    async def UpsertResourceSlices(
        self, request: cluster_pb2.UpsertResourceSlicesRequest, context: Any
    ) -> cluster_pb2.UpsertResponse:
        slices = _each(request.resource_slices, convert.resource_slice_from_pb, "resource_slices")
        return cluster_pb2.UpsertResponse(upserted=self.feed.upsert_resource_slices(slices))

    async def DeleteResourceSlices(
        self, request: cluster_pb2.DeleteResourceSlicesRequest, context: Any
    ) -> cluster_pb2.DeleteResponse:
        return cluster_pb2.DeleteResponse(deleted=self.feed.delete_resource_slices(request.names))

    async def UpsertResourceClaims(
        self, request: cluster_pb2.UpsertResourceClaimsRequest, context: Any
    ) -> cluster_pb2.UpsertResponse:
        claims = _each(request.resource_claims, convert.resource_claim_from_pb, "resource_claims")
        for i, claim in enumerate(claims):  # the API server's cost limit (berth/dra/cel_cost.py)
            cel.refuse_too_complex(cel.claim_selectors(claim.spec, f"resource_claims[{i}].spec"))
        return cluster_pb2.UpsertResponse(upserted=self.feed.upsert_resource_claims(claims))

    async def DeleteResourceClaims(
        self, request: cluster_pb2.DeleteResourceClaimsRequest, context: Any
    ) -> cluster_pb2.DeleteResponse:
        keys = [model.pod_key(r.namespace, r.name) for r in request.resource_claims]
        return cluster_pb2.DeleteResponse(deleted=self.feed.delete_resource_claims(keys))

    async def ListNodes(self, request: cluster_pb2.ListNodesRequest, context: Any) -> cluster_pb2.ListNodesResponse:
        return convert.node_summaries_to_pb(explain.list_nodes(self.core))


class GrpcServer:
    """The grpc.aio server with Berth's services; start/stop with grace.

    Construction checks the configuration (:func:`validate`), reads the
    credentials and binds the port: an address already in use is
    ``OSError(EADDRINUSE)`` naming it. ``grpc.so_reuseport`` is off, so a
    second ``berth serve`` on the same port fails instead of silently
    sharing it (grpc turns SO_REUSEPORT on by default; both would listen
    and clients would reach either).
    """

    def __init__(
        self, core: Core, verbs: Extender, feed: EmbeddedCluster, *, durable: Durable | None = None
    ) -> None:
        cfg = core.cfg.grpc
        auth = security.Authenticator(cfg, core)
        self.edge = edge.EdgeInterceptor(auth, core.fairness)
        scheduling = SchedulerServicer(core, verbs, durable)
        self.epoch = durability.EpochInterceptor(lambda: scheduling.epoch)
        # grpc.aio serves on a loop of its own; every handler runs on this
        # one (berth/adapters/grpc/door.py says why).
        self.bridge = door.LoopBridge(asyncio.get_running_loop(), cfg.request_timeout_seconds)
        feeds = ClusterServicer(core, feed)
        _after_feeds(feeds, core)
        if durable is not None:
            durability.durable_feeds(feeds, durable)
        self.health = health.aio.HealthServicer()
        self.door = door.DoorThread()
        try:
            self.server, self.port = self.door.call(self._build(cfg, scheduling, feeds))
        except BaseException:
            self.door.close()
            raise

    async def _build(
        self, cfg: GrpcConfig, scheduling: SchedulerServicer, feeds: ClusterServicer
    ) -> tuple[grpc.aio.Server, int]:
        """The server, on the door's loop (grpc.aio binds a server to the loop it is made on)."""
        limit = cfg.max_message_bytes
        server = grpc.aio.server(
            interceptors=[self.bridge, self.edge, self.epoch],
            options=[
                ("grpc.so_reuseport", 0),
                # Applied by grpc core after decompression: a small gzip
                # message that inflates past the limit is RESOURCE_EXHAUSTED.
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", limit),
                ("grpc.max_connection_idle_ms", int(cfg.idle_timeout_seconds * 1000)),
            ],
        )
        scheduler_pb2_grpc.add_SchedulerServicer_to_server(scheduling, server)
        cluster_pb2_grpc.add_ClusterServicer_to_server(feeds, server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        names = (
            scheduler_pb2.DESCRIPTOR.services_by_name["Scheduler"].full_name,
            cluster_pb2.DESCRIPTOR.services_by_name["Cluster"].full_name,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        )
        reflection.enable_server_reflection(names, server)
        return server, _bind(server, cfg)

    async def start(self) -> None:
        await self.door.run(self.server.start())
        await self.set_serving(True)

    async def set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for service in ("", "berth.v1.Scheduler", "berth.v1.Cluster"):
            await self.health.set(service, status)

    async def stop(self, grace: float = 5.0) -> None:
        """Health turns NOT_SERVING, streams end (``UNAVAILABLE``: they never
        finish on their own), new calls are refused, unary calls in flight
        get ``grace`` seconds, then the rest are cancelled. A second stop
        does nothing."""
        if self.door.closed:
            return
        await self.set_serving(False)
        self.edge.end_streams()
        try:
            stopping = asyncio.ensure_future(self.door.run(self.server.stop(grace)))
            await asyncio.wait([stopping], timeout=grace)
            if not stopping.done() and (left := self.bridge.running()):
                # Which calls held the stop for the whole grace, then were cancelled.
                counts = collections.Counter(m.rsplit("/", 1)[-1] for m in left)
                log.warning(
                    "gRPC: %d call(s) still running after the grace period (%gs, shutdownGracePeriodSeconds), "
                    "cancelled: %s",
                    len(left),
                    grace,
                    ", ".join(f"{m} x{n}" if n > 1 else m for m, n in sorted(counts.items())),
                )
            await stopping
            await self.bridge.settle(_SETTLE_SECONDS)
        finally:
            await self.door.aclose()


#: How long a stopped server waits for its cancelled handlers to end.
_SETTLE_SECONDS = 2.0


def _bind(server: grpc.aio.Server, cfg: GrpcConfig) -> int:
    address = f"{cfg.host}:{cfg.port}"
    try:
        if cfg.tls is not None:
            port = int(server.add_secure_port(address, security.reloading_server_credentials(cfg.tls)))
        else:
            port = int(server.add_insecure_port(address))
    except RuntimeError:
        port = 0  # grpc says only "Failed to bind"; ask the OS why below
    if port == 0:
        raise _bind_error(cfg.host, cfg.port)
    return port


def _bind_error(host: str, port: int) -> OSError:
    """Why grpc could not bind ``host:port``: it logs the reason but raises a
    bare RuntimeError, so try the same bind with a plain socket."""
    address = f"{host}:{port}"
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _, sockaddr in infos:
            with socket.socket(family, kind, proto) as s:
                s.bind(sockaddr)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            return OSError(errno.EADDRINUSE, f"gRPC: address {address} is already in use")
        return OSError(e.errno, f"gRPC: cannot listen on {address}: {e.strerror or e}")
    return OSError(f"gRPC: cannot listen on {address} (GRPC_VERBOSITY=debug logs grpc's reason)")
