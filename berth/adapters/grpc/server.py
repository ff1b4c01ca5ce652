"""gRPC adapter: serves ``berth.v1.Scheduler`` and ``berth.v1.Cluster`` from the
core, plus the standard health and reflection services (grpc.aio; shape of
grpc's ``async_greeter_server_with_graceful_shutdown.py``).

Client mistakes (a bad pod, an unknown profile, an invalid manifest) become
INVALID_ARGUMENT with the core's message; anything unexpected is INTERNAL and
logged, and the server keeps serving.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from berth.adapters.grpc import convert
from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, model_pb2, scheduler_pb2, scheduler_pb2_grpc
from berth.cluster import manifests, model
from berth.cluster.embedded import EmbeddedCluster
from berth.config import TLSConfig
from berth.scheduling import batch, explain
from berth.scheduling.core import Core, VerbError
from berth.scheduling.verbs import Extender, VictimsRequest

__all__ = ["GrpcServer"]

log = logging.getLogger(__name__)

Req = TypeVar("Req")
Resp = TypeVar("Resp")

_CLIENT_ERRORS = (VerbError, manifests.ManifestError, ValueError)


async def _guard(context: grpc.aio.ServicerContext, call: Callable[[], Awaitable[Resp]]) -> Resp:
    try:
        return await call()
    except _CLIENT_ERRORS as e:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
    except grpc.aio.AbortError:
        raise
    except Exception as e:
        log.exception("internal error in gRPC call")
        await context.abort(grpc.StatusCode.INTERNAL, f"internal error: {e}")
    raise AssertionError("unreachable")


async def _now(value: Resp) -> Resp:
    return value


class SchedulerServicer(scheduler_pb2_grpc.SchedulerServicer):
    def __init__(self, core: Core, verbs: Extender) -> None:
        self.core = core
        self.verbs = verbs

    async def Filter(self, request: scheduler_pb2.FilterRequest, context: Any) -> scheduler_pb2.FilterResponse:
        def run() -> scheduler_pb2.FilterResponse:
            names, nodes = _node_set(request.nodes)
            res = self.verbs.filter(_pod(request.pod), names=names, nodes=nodes, profile=request.profile)
            return scheduler_pb2.FilterResponse(
                node_names=res.passed,
                failed_nodes=res.failed,
                failed_and_unresolvable_nodes=res.unresolvable,
                error=res.error,
            )

        return await _guard(context, lambda: _now(run()))

    async def Prioritize(
        self, request: scheduler_pb2.PrioritizeRequest, context: Any
    ) -> scheduler_pb2.PrioritizeResponse:
        def run() -> scheduler_pb2.PrioritizeResponse:
            names, nodes = _node_set(request.nodes)
            res = self.verbs.prioritize(_pod(request.pod), names=names, nodes=nodes, profile=request.profile)
            return scheduler_pb2.PrioritizeResponse(
                host_priorities=[
                    scheduler_pb2.HostPriority(host=n, score=s)
                    for n, s in zip(res.names, res.scores.tolist(), strict=True)
                ],
                error=res.error,
            )

        return await _guard(context, lambda: _now(run()))

    async def Preempt(self, request: scheduler_pb2.PreemptRequest, context: Any) -> scheduler_pb2.PreemptResponse:
        def run() -> scheduler_pb2.PreemptResponse:
            victims = {
                node: VictimsRequest(list(v.pod_uids), [convert.pod_from_pb(p) for p in v.pods])
                for node, v in request.node_name_to_victims.items()
            }
            resp = scheduler_pb2.PreemptResponse()
            for node, meta in self.verbs.preempt(_pod(request.pod), victims, profile=request.profile).items():
                resp.node_name_to_meta_victims[node].pod_uids.extend(meta.uids)
                resp.node_name_to_meta_victims[node].num_pdb_violations = meta.num_pdb_violations
            return resp

        return await _guard(context, lambda: _now(run()))

    async def Bind(self, request: scheduler_pb2.BindRequest, context: Any) -> scheduler_pb2.BindResponse:
        async def run() -> scheduler_pb2.BindResponse:
            r = request
            return scheduler_pb2.BindResponse(
                error=await self.verbs.bind(r.pod_namespace, r.pod_name, r.pod_uid, r.node)
            )

        return await _guard(context, run)

    async def Explain(self, request: scheduler_pb2.ExplainRequest, context: Any) -> scheduler_pb2.ExplainResponse:
        def run() -> scheduler_pb2.ExplainResponse:
            e = explain.explain(
                self.core, _pod(request.pod), profile=request.profile, node_names=list(request.node_names)
            )
            return convert.explanation_to_pb(e)

        return await _guard(context, lambda: _now(run()))

    async def Submit(self, request: scheduler_pb2.SubmitRequest, context: Any) -> scheduler_pb2.SubmitResponse:
        def run() -> scheduler_pb2.SubmitResponse:
            group = convert.podgroup_from_pb(request.group) if request.HasField("group") else None
            results = batch.submit(self.core, [convert.pod_from_pb(p) for p in request.pods], group)
            return scheduler_pb2.SubmitResponse(
                results=[
                    scheduler_pb2.SubmitResult(pod=r.pod, uid=r.uid, accepted=r.accepted, message=r.message)
                    for r in results
                ]
            )

        return await _guard(context, lambda: _now(run()))

    async def Cancel(self, request: scheduler_pb2.CancelRequest, context: Any) -> scheduler_pb2.CancelResponse:
        def run() -> scheduler_pb2.CancelResponse:
            res = batch.cancel(self.core, request.namespace, request.name)
            return scheduler_pb2.CancelResponse(cancelled=res.cancelled, message=res.message)

        return await _guard(context, lambda: _now(run()))

    async def WatchDecisions(
        self, request: scheduler_pb2.WatchDecisionsRequest, context: Any
    ) -> AsyncIterator[scheduler_pb2.Decision]:
        if self.core.scheduler is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "the scheduling loop is not running")
        async for decision in self.core.decisions.watch(request.pods, replay=request.replay):
            yield convert.decision_to_pb(decision)


def _pod(pod: model_pb2.Pod) -> model.Pod:
    if not pod.metadata.name and not pod.metadata.uid:
        raise VerbError("pod: required (a pod with metadata.name)")
    return convert.pod_from_pb(pod)


def _node_set(ns: scheduler_pb2.NodeSet) -> tuple[list[str] | None, list[model.Node] | None]:
    """Node names (nodeCacheCapable), or full node objects."""
    if ns.full_objects or len(ns.nodes):
        return None, [convert.node_from_pb(n) for n in ns.nodes]
    return list(ns.node_names), None


class ClusterServicer(cluster_pb2_grpc.ClusterServicer):
    """The state feed, written into the embedded cluster that owns fed objects."""

    def __init__(self, core: Core, feed: EmbeddedCluster) -> None:
        self.core = core
        self.feed = feed

    async def UpsertNodes(self, request: cluster_pb2.UpsertNodesRequest, context: Any) -> cluster_pb2.UpsertResponse:
        def run() -> cluster_pb2.UpsertResponse:
            nodes = [convert.node_from_pb(n) for n in request.nodes]
            for i, n in enumerate(nodes):
                _named(n.metadata.name, f"nodes[{i}]")
            return cluster_pb2.UpsertResponse(upserted=self.feed.upsert_nodes(nodes))

        return await _guard(context, lambda: _now(run()))

    async def DeleteNodes(self, request: cluster_pb2.DeleteNodesRequest, context: Any) -> cluster_pb2.DeleteResponse:
        return await _guard(
            context, lambda: _now(cluster_pb2.DeleteResponse(deleted=self.feed.delete_nodes(request.names)))
        )

    async def UpsertPods(self, request: cluster_pb2.UpsertPodsRequest, context: Any) -> cluster_pb2.UpsertResponse:
        def run() -> cluster_pb2.UpsertResponse:
            pods = [convert.pod_from_pb(p) for p in request.pods]
            for i, p in enumerate(pods):
                try:
                    manifests.validate_pod(p)
                except manifests.ManifestError as e:
                    raise VerbError(f"pods[{i}] ({p.key}): {e}") from None
            return cluster_pb2.UpsertResponse(upserted=self.feed.upsert_pods(pods))

        return await _guard(context, lambda: _now(run()))

    async def DeletePods(self, request: cluster_pb2.DeletePodsRequest, context: Any) -> cluster_pb2.DeleteResponse:
        keys = [model.pod_key(r.namespace, r.name) for r in request.pods]
        return await _guard(context, lambda: _now(cluster_pb2.DeleteResponse(deleted=self.feed.delete_pods(keys))))

    async def UpsertPodGroups(
        self, request: cluster_pb2.UpsertPodGroupsRequest, context: Any
    ) -> cluster_pb2.UpsertResponse:
        def run() -> cluster_pb2.UpsertResponse:
            for g in request.groups:
                group = convert.podgroup_from_pb(g)
                _named(group.metadata.name, "groups[]")
                group.metadata.namespace = group.metadata.namespace or "default"
                self.core.on_pod_group(group)
            return cluster_pb2.UpsertResponse(upserted=len(request.groups))

        return await _guard(context, lambda: _now(run()))

    async def UpsertPodDisruptionBudgets(
        self, request: cluster_pb2.UpsertPodDisruptionBudgetsRequest, context: Any
    ) -> cluster_pb2.UpsertResponse:
        def run() -> cluster_pb2.UpsertResponse:
            for b in request.budgets:
                pdb = convert.pdb_from_pb(b)
                _named(pdb.metadata.name, "budgets[]")
                pdb.metadata.namespace = pdb.metadata.namespace or "default"
                self.core.on_pdb(pdb)
            return cluster_pb2.UpsertResponse(upserted=len(request.budgets))

        return await _guard(context, lambda: _now(run()))

    async def ListNodes(self, request: cluster_pb2.ListNodesRequest, context: Any) -> cluster_pb2.ListNodesResponse:
        return await _guard(context, lambda: _now(convert.node_summaries_to_pb(explain.list_nodes(self.core))))


def _named(name: str, path: str) -> None:
    if not name:
        raise VerbError(f"{path}.metadata.name: required")


def server_credentials(tls: TLSConfig) -> grpc.ServerCredentials:
    try:
        key = Path(tls.key_file).read_bytes()
        cert = Path(tls.cert_file).read_bytes()
        ca = Path(tls.client_ca_file).read_bytes() if tls.client_ca_file else None
    except OSError as e:
        raise ValueError(f"grpc.tls: cannot read {e.filename}: {e.strerror}") from None
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=ca is not None)


class GrpcServer:
    """The grpc.aio server with Berth's services; start/stop with grace."""

    def __init__(self, core: Core, verbs: Extender, feed: EmbeddedCluster) -> None:
        cfg = core.cfg
        limit = cfg.grpc.max_message_bytes
        self.server = grpc.aio.server(
            options=[("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit)]
        )
        scheduler_pb2_grpc.add_SchedulerServicer_to_server(SchedulerServicer(core, verbs), self.server)
        cluster_pb2_grpc.add_ClusterServicer_to_server(ClusterServicer(core, feed), self.server)
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        names = (
            scheduler_pb2.DESCRIPTOR.services_by_name["Scheduler"].full_name,
            cluster_pb2.DESCRIPTOR.services_by_name["Cluster"].full_name,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        )
        reflection.enable_server_reflection(names, self.server)
        address = f"{cfg.grpc.host}:{cfg.grpc.port}"
        if cfg.grpc.tls is not None:
            self.port = self.server.add_secure_port(address, server_credentials(cfg.grpc.tls))
        else:
            self.port = self.server.add_insecure_port(address)
        if self.port == 0:
            raise OSError(f"cannot listen for gRPC on {address}")

    async def start(self) -> None:
        await self.server.start()
        await self.set_serving(True)

    async def set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for service in ("", "berth.v1.Scheduler", "berth.v1.Cluster"):
            await self.health.set(service, status)

    async def stop(self, grace: float = 5.0) -> None:
        await self.set_serving(False)
        await self.server.stop(grace)
