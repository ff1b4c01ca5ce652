"""The asyncio client: every call of Berth's API as a typed coroutine.

    async with berth_client.AsyncClient("berth.example") as berth:
        results = await berth.submit([pod_manifest])
        waited = await berth.wait(results, timeout=60)

Reads return the contract's messages (typed by the generated ``.pyi``
stubs; :func:`berth_client.objects.to_dict` gives plain data); pods, nodes
and the other objects may be given as Kubernetes manifests (what YAML or
JSON decode) with quantity strings, or as messages. Every unary call has
the client's deadline (``timeout``) and is retried on ``UNAVAILABLE``
(:class:`~berth_client.Retry`); failures raise :mod:`berth_client.errors`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Iterator, Mapping
from typing import Any, Protocol, TypeAlias, TypeVar

import grpc

from berth_client import errors, objects, outcomes
from berth_client.api.v1 import cluster_pb2 as cpb
from berth_client.api.v1 import cluster_pb2_grpc, scheduler_pb2_grpc
from berth_client.api.v1 import model_pb2 as pb
from berth_client.api.v1 import scheduler_pb2 as spb
from berth_client.connection import DEFAULT_RETRY, Retry, Settings, Tls, target
from berth_client.watch import Backoff, Resume

__all__ = ["SUBMIT_BATCH", "AsyncClient", "PodLike", "submit_requests"]

log = logging.getLogger("berth_client")

#: A pod: a Kubernetes manifest (a mapping, quantities as strings) or the message.
PodLike: TypeAlias = Mapping[str, Any] | pb.Pod
GroupLike: TypeAlias = Mapping[str, Any] | pb.PodGroup

#: Pods outside gangs per Submit request: the server starts placing the
#: first ones while the client converts the next, and a request stays far
#: below gRPC's 4 MiB default message limit.
SUBMIT_BATCH = 1000

#: The label that makes a pod a member of the PodGroup of that name in its namespace.
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"

#: kind -> (Cluster RPC, its request's repeated field), in the order a feed sends them:
#: what others refer to first.
_UPSERTS: dict[str, tuple[str, str]] = {
    "Namespace": ("UpsertNamespaces", "namespaces"),
    "Node": ("UpsertNodes", "nodes"),
    "StorageClass": ("UpsertStorageClasses", "storage_classes"),
    "PersistentVolume": ("UpsertPersistentVolumes", "persistent_volumes"),
    "PersistentVolumeClaim": ("UpsertPersistentVolumeClaims", "persistent_volume_claims"),
    "CSINode": ("UpsertCSINodes", "csi_nodes"),
    "DeviceClass": ("UpsertDeviceClasses", "device_classes"),
    "ResourceSlice": ("UpsertResourceSlices", "resource_slices"),
    "ResourceClaim": ("UpsertResourceClaims", "resource_claims"),
    "PodGroup": ("UpsertPodGroups", "groups"),
    "PodDisruptionBudget": ("UpsertPodDisruptionBudgets", "budgets"),
    "Pod": ("UpsertPods", "pods"),
}
#: kind -> (Cluster RPC, whether its objects are namespaced).
_DELETES: dict[str, tuple[str, bool]] = {
    "Namespace": ("DeleteNamespaces", False),
    "Node": ("DeleteNodes", False),
    "StorageClass": ("DeleteStorageClasses", False),
    "PersistentVolume": ("DeletePersistentVolumes", False),
    "PersistentVolumeClaim": ("DeletePersistentVolumeClaims", True),
    "CSINode": ("DeleteCSINodes", False),
    "DeviceClass": ("DeleteDeviceClasses", False),
    "ResourceSlice": ("DeleteResourceSlices", False),
    "ResourceClaim": ("DeleteResourceClaims", True),
    "Pod": ("DeletePods", True),
}
#: Objects per feed call: each call is validated whole and applied all or nothing.
FEED_BATCH = 1000


def _pod(p: PodLike) -> pb.Pod:
    return p if isinstance(p, pb.Pod) else objects.message(p, pb.Pod)


def _manifests(pods: list[Any]) -> list[bytes]:
    """``SubmitRequest.pod_manifests``: each pod as written (a v1 Pod as
    JSON), in the order of ``pods``, so a Kubernetes-backed Berth creates the
    caller's whole object; none when a pod was given as a ``Pod`` message
    (the field holds one per pod or none)."""
    if not all(isinstance(p, Mapping) for p in pods):
        return []
    return [json.dumps(p, separators=(",", ":")).encode() for p in pods]


def _request(pods: list[Any], group: pb.PodGroup | None = None) -> spb.SubmitRequest:
    return spb.SubmitRequest(group=group, pods=[_pod(p) for p in pods], pod_manifests=_manifests(pods))


def _group(g: GroupLike | str, members: int, namespace: str) -> pb.PodGroup:
    if isinstance(g, pb.PodGroup):
        return g
    if isinstance(g, str):
        return pb.PodGroup(metadata=pb.ObjectMeta(name=g, namespace=namespace), min_member=members)
    return objects.message(g, pb.PodGroup)


def _kind(obj: Any) -> str:
    if isinstance(obj, pb.Pod):
        return "Pod"
    if isinstance(obj, pb.PodGroup):
        return "PodGroup"
    if isinstance(obj, Mapping):
        return objects.kind_of(obj)
    raise TypeError(f"expected a manifest (a mapping) or a berth.v1 message, got {type(obj).__name__}")


def _meta(obj: Any) -> tuple[str, str, Mapping[str, str]]:
    """(namespace or "default", name, labels) of a manifest or message."""
    if isinstance(obj, Mapping):
        md = obj.get("metadata") or {}
        return md.get("namespace") or "default", md.get("name") or "", md.get("labels") or {}
    md = obj.metadata
    return md.namespace or "default", md.name, md.labels


class _Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=_Named)


def _named(items: Iterable[N], name: str, missing: str) -> N:
    """The item called ``name`` (the API lists these but has no Get)."""
    for item in items:
        if item.name == name:
            return item
    raise errors.NotFound(missing)


def submit_requests(items: Iterable[PodLike | GroupLike], batch: int | None = None) -> Iterator[spb.SubmitRequest]:
    """The Submit requests for pods and PodGroups: one per PodGroup with
    the given pods labelled as its members (a gang goes whole), then the
    other pods ``batch`` (default :data:`SUBMIT_BATCH`) at a time; each
    request is converted when it is about to be sent."""
    batch = batch or SUBMIT_BATCH
    groups: dict[tuple[str, str], Any] = {}
    pods: list[Any] = []
    for obj in items:
        kind = _kind(obj)
        if kind == "PodGroup":
            groups[_meta(obj)[:2]] = obj
        elif kind == "Pod":
            pods.append(obj)
        else:
            raise objects.ManifestError(f"kind: {kind!r} cannot be submitted (Pod, PodGroup)")
    members: dict[tuple[str, str], list[Any]] = {key: [] for key in groups}
    plain: list[Any] = []
    for p in pods:
        ns, _, labels = _meta(p)
        key = (ns, labels.get(POD_GROUP_LABEL, ""))
        members.get(key, plain).append(p)
    for key, g in groups.items():
        yield _request(members[key], _group(g, len(members[key]), key[0]))
    for k in range(0, len(plain), batch):
        yield _request(plain[k : k + batch])


class AsyncClient:
    """A connection to one Berth (``server``: ``HOST[:PORT]``, port 50051
    by default); see :class:`~berth_client.Settings` for the rest. The
    channel opens at the first call, on the running event loop; close it
    with :meth:`close` or ``async with``."""

    def __init__(
        self,
        server: str = "localhost",
        *,
        tls: Tls | None = None,
        token: str | None = None,
        timeout: float = 30.0,
        retry: Retry = DEFAULT_RETRY,
    ) -> None:
        self.settings = Settings(server=server, tls=tls, token=token, timeout=timeout, retry=retry)
        self.address = target(server)
        self._channel: grpc.aio.Channel | None = None
        self._batches = True  # the server has WatchDecisionBatches, until it says otherwise
        #: The server's epoch as last answered ("" before any answer, or from a
        #: server without one); ``epoch_changes`` counts the times it changed.
        self.epoch = ""
        self.epoch_changes = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> AsyncClient:
        return cls(
            settings.server, tls=settings.tls, token=settings.token, timeout=settings.timeout, retry=settings.retry
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._channel is not None:
            channel, self._channel = self._channel, None
            await channel.close()

    @property
    def channel(self) -> grpc.aio.Channel:
        """The grpc.aio channel (opened on first use), for other services
        on the same port."""
        if self._channel is None:
            self._channel = self.settings.channel()
        return self._channel

    @property
    def scheduler(self) -> scheduler_pb2_grpc.SchedulerAsyncStub:
        return scheduler_pb2_grpc.SchedulerStub(self.channel)  # type: ignore[return-value]

    @property
    def cluster(self) -> cluster_pb2_grpc.ClusterAsyncStub:
        return cluster_pb2_grpc.ClusterStub(self.channel)  # type: ignore[return-value]

    async def _call(self, method: Any, request: Any) -> Any:
        try:
            response = await method(request, timeout=self.settings.timeout, metadata=self.settings.metadata())
        except grpc.aio.AioRpcError as e:
            raise errors.from_rpc_error(e, self.address) from None
        self._saw(getattr(response, "epoch", ""))
        return response

    def _saw(self, epoch: str) -> None:
        """Remember the server's epoch; a new one means it lost its state
        (a restarted in-memory Berth, a wiped store): warned once each."""
        if not epoch or epoch == self.epoch:
            return
        if self.epoch:
            self.epoch_changes += 1
            log.warning(
                "berth_client: %s has a new epoch (%s, was %s): its state was lost; resubmit or resync",
                self.address,
                epoch,
                self.epoch,
            )
        self.epoch = epoch

    # ------------------------------------------------------------ reads

    async def list_nodes(self) -> list[cpb.NodeSummary]:
        """Every node with allocatable and requested resources (canonical units)."""
        return list((await self._call(self.cluster.ListNodes, cpb.ListNodesRequest())).nodes)

    async def get_node(self, name: str) -> cpb.NodeSummary:
        return _named(await self.list_nodes(), name, f"node {name!r} not found")

    async def list_pods(self, namespace: str = "", *, queue: str = "", phase: str = "") -> list[spb.PodRow]:
        """The pods Berth schedules, pending or placed by it (``namespace``
        "": every namespace; ``phase``: one of :data:`outcomes.PHASES`)."""
        request = spb.ListPodsRequest(namespace=namespace, queue=queue, phase=phase)
        return list((await self._call(self.scheduler.ListPods, request)).pods)

    async def get_pod(self, name: str, namespace: str = "default") -> spb.PodRow:
        rows = await self.list_pods(namespace)
        return _named(rows, name, f"pod {namespace}/{name} not found among the pods Berth schedules")

    async def list_queues(self) -> list[spb.QueueStatus]:
        """Every batch queue, parents before children; empty when none are configured."""
        return list((await self._call(self.scheduler.ListQueues, spb.ListQueuesRequest())).queues)

    async def get_queue(self, name: str) -> spb.QueueStatus:
        result: spb.QueueStatus = await self._call(self.scheduler.GetQueue, spb.GetQueueRequest(name=name))
        return result

    async def list_pod_groups(self, namespace: str = "") -> list[spb.PodGroupRow]:
        """Every PodGroup (gang) with its members present, placed and waiting."""
        request = spb.ListPodGroupsRequest(namespace=namespace)
        return list((await self._call(self.scheduler.ListPodGroups, request)).groups)

    async def get_pod_group(self, name: str, namespace: str = "default") -> spb.PodGroupRow:
        return _named(await self.list_pod_groups(namespace), name, f"pod group {namespace}/{name} not found")

    async def list_profiles(self) -> list[spb.ProfileStatus]:
        """The profiles the server runs, as it resolved them: plugins per
        extension point in order, score weights, each plugin's arguments."""
        return list((await self._call(self.scheduler.ListProfiles, spb.ListProfilesRequest())).profiles)

    async def get_profile(self, name: str) -> spb.ProfileStatus:
        for p in await self.list_profiles():
            if p.scheduler_name == name or name in p.aliases:
                return p
        raise errors.NotFound(f"profile {name!r} not found")

    async def why(self, name: str, namespace: str = "default") -> spb.WhyResponse:
        """Why the pod waits, and what would let it run (NotFound for a pod
        Berth does not know or does not schedule)."""
        result: spb.WhyResponse = await self._call(self.scheduler.Why, spb.WhyRequest(namespace=namespace, name=name))
        return result

    async def whatif(self, pod: PodLike, replicas: int = 0, *, profile: str = "") -> spb.WhatIfResponse:
        """How many replicas of ``pod`` would fit now and where (0: until one
        does not); places nothing."""
        request = spb.WhatIfRequest(pod=_pod(pod), replicas=replicas, profile=profile)
        result: spb.WhatIfResponse = await self._call(self.scheduler.WhatIf, request)
        return result

    async def explain(self, pod: PodLike, *, profile: str = "", nodes: Iterable[str] = ()) -> spb.ExplainResponse:
        """Per node: whether it can take ``pod`` and why not, and the plugins' scores."""
        request = spb.ExplainRequest(pod=_pod(pod), profile=profile, node_names=list(nodes))
        result: spb.ExplainResponse = await self._call(self.scheduler.Explain, request)
        return result

    async def health(self, service: str = "") -> str:
        """``grpc.health.v1.Health/Check``: ``SERVING``, ``NOT_SERVING``, ...
        (``service`` "": the server as a whole)."""
        check = self.channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=_health_request,
            response_deserializer=_health_status,
        )
        result: str = await self._call(check, service)
        return result

    # ------------------------------------------------------------ changes

    async def submit(
        self, items: Iterable[PodLike | GroupLike], *, idempotency_keys: Mapping[str, str] | None = None
    ) -> list[spb.SubmitResult]:
        """Hand pods to the scheduling loop, with their PodGroups (pods
        labelled ``scheduling.x-k8s.io/pod-group`` go with their group, all
        or nothing); one result per pod, in the order sent. Idempotent per
        pod: a retry (same key: by default the pod's uid, or
        ``idempotency_keys[NAMESPACE/NAME]``) answers the first outcome."""
        results: list[spb.SubmitResult] = []
        for request in submit_requests(items):
            if idempotency_keys:
                request.idempotency_keys.extend(
                    idempotency_keys.get(f"{p.metadata.namespace or 'default'}/{p.metadata.name}", "")
                    for p in request.pods
                )
            results.extend((await self._call(self.scheduler.Submit, request)).results)
        return results

    async def submit_gang(
        self,
        group: GroupLike | str,
        pods: Iterable[PodLike],
        *,
        min_member: int | None = None,
        namespace: str = "default",
    ) -> list[spb.SubmitResult]:
        """Submit ``pods`` as one gang, placed all together or not at all:
        ``group`` is a PodGroup (manifest or message) or just its name (then
        ``min_member`` defaults to every pod given)."""
        given = list(pods)
        g = _group(group, min_member if min_member is not None else len(given), namespace)
        response = await self._call(self.scheduler.Submit, _request(given, g))
        return list(response.results)

    async def cancel(self, name: str, namespace: str = "default") -> spb.CancelResponse:
        """Withdraw a submitted pod that is not bound yet (``cancelled`` False
        with the reason for a bound, unknown or foreign pod)."""
        result: spb.CancelResponse = await self._call(
            self.scheduler.Cancel, spb.CancelRequest(namespace=namespace, name=name)
        )
        return result

    async def feed(self, items: Iterable[Mapping[str, Any]], *, resync: bool = False) -> dict[str, int]:
        """Upsert objects through the ``Cluster`` service (nodes, pods with
        or without a node, namespaces, PodGroups, budgets, storage and DRA
        objects), kind by kind, what others refer to first; how many of each
        kind were upserted.

        With ``resync``, ``items`` is the feeder's whole view of each kind
        it holds: each kind goes in one request flagged ``resync``, and
        Berth deletes, in the same call, the objects of that kind it has
        and the request lacks (register-and-replay after the feeder or
        Berth lost track)."""
        by_kind: dict[str, list[Any]] = {}
        for obj in items:
            by_kind.setdefault(objects.kind_of(obj), []).append(obj)
        counts: dict[str, int] = {}
        for kind, (rpc, field) in _UPSERTS.items():
            batch = by_kind.get(kind, [])
            step = max(len(batch), 1) if resync else FEED_BATCH
            for k in range(0, len(batch), step):
                chunk: list[Any] = [objects.message(o) for o in batch[k : k + step]]
                request_type = getattr(cpb, f"{rpc}Request")
                request = request_type(**{field: chunk}, **({"resync": True} if resync else {}))
                response = await self._call(getattr(self.cluster, rpc), request)
                counts[kind] = counts.get(kind, 0) + response.upserted
        return counts

    async def delete(self, kind: str, names: Iterable[str]) -> int:
        """Delete objects fed earlier by name (``NAMESPACE/NAME`` for pods,
        claims; ``NAME`` alone is in "default"); how many were deleted."""
        if kind not in _DELETES:
            raise ValueError(f"kind: {kind!r} cannot be deleted ({', '.join(_DELETES)})")
        rpc, namespaced = _DELETES[kind]
        request_type = getattr(cpb, f"{rpc}Request")
        if not namespaced:
            request = request_type(names=list(names))
        else:
            refs = [n.rpartition("/")[::2] for n in names]
            if kind == "Pod":
                request = request_type(pods=[cpb.PodRef(namespace=ns or "default", name=n) for ns, n in refs])
            else:
                field = request_type.DESCRIPTOR.fields[0].name
                request = request_type(
                    **{field: [cpb.NamespacedName(namespace=ns or "default", name=n) for ns, n in refs]}
                )
        deleted: int = (await self._call(getattr(self.cluster, rpc), request)).deleted
        return deleted

    # ------------------------------------------------------------ streams

    async def _decision_stream(
        self, keys: list[str], replay: bool, since: int | None = None, epoch: str = ""
    ) -> AsyncIterator[tuple[str, list[spb.Decision]]]:
        """One stream: WatchDecisionBatches, or WatchDecisions from a server
        older than it; after serial ``since`` of ``epoch`` when given. Each
        batch with the server's epoch ("" from a server without one)."""
        request = spb.WatchDecisionsRequest(pods=keys, replay=replay and since is None)
        if since is not None:
            request.since_serial, request.epoch = since, epoch
        metadata = self.settings.metadata()
        if self._batches:
            call = self.scheduler.WatchDecisionBatches(request, metadata=metadata)
            try:
                async for b in call:
                    yield b.epoch, list(b.decisions)
                return
            except grpc.aio.AioRpcError as e:
                if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise errors.from_rpc_error(e, self.address) from None
                self._batches = False
            finally:
                call.cancel()
        single = self.scheduler.WatchDecisions(request, metadata=metadata)
        try:
            async for d in single:
                yield d.epoch, [d]
        except grpc.aio.AioRpcError as e:
            raise errors.from_rpc_error(e, self.address) from None
        finally:
            single.cancel()

    async def watch_batches(
        self, pods: Iterable[str] = (), *, replay: bool = False
    ) -> AsyncGenerator[list[spb.Decision]]:
        """The scheduling loop's decisions as they happen, several at a time
        (``pods``: only these ``NAMESPACE/NAME``; ``replay``: first the
        latest decision of each pod the server holds). A broken stream is
        reopened with backoff for up to ``retry.reconnect_seconds`` and
        resumes as :mod:`berth_client.watch` describes; then Unavailable."""
        keys = list(pods)
        resume = Resume()
        retry = self.settings.retry
        backoff = Backoff(retry.initial_backoff, retry.max_backoff, retry.multiplier)
        loop = asyncio.get_running_loop()
        broken_since: float | None = None
        while True:
            try:
                since = resume.since()
                async for epoch, batch in self._decision_stream(keys, replay or resume.resumed, since, resume.epoch):
                    backoff.reset()
                    broken_since = None
                    fresh = [d for d in batch if resume.admit(d, epoch)]
                    if fresh:
                        yield fresh
                raise errors.Unavailable("the decision stream ended", server=self.address)
            except errors.OutOfRange as e:
                log.info("berth_client: watch of %s cannot resume (%s); relisting", self.address, e)
                resume.relist()
            except (errors.Unavailable, errors.ResourceExhausted) as e:
                now = loop.time()
                broken_since = now if broken_since is None else broken_since
                if now - broken_since >= retry.reconnect_seconds:
                    raise
                resume.resumed = True
                delay = backoff.next()
                log.info("berth_client: watch of %s broke (%s); reconnecting in %.1fs", self.address, e, delay)
                await asyncio.sleep(delay)

    async def watch(self, pods: Iterable[str] = (), *, replay: bool = False) -> AsyncGenerator[spb.Decision]:
        """:meth:`watch_batches`, one decision at a time."""
        async for batch in self.watch_batches(pods, replay=replay):
            for d in batch:
                yield d

    async def wait(
        self,
        results: Iterable[spb.SubmitResult],
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - at the timeout it says where each pod stands
    ) -> outcomes.Waited:
        """Follow submitted pods (Submit's results) to their outcomes, or
        until ``timeout`` seconds pass (None: no limit), and say where each
        stands then; see :mod:`berth_client.outcomes` for the words and when
        a pod is done."""
        waiter = outcomes.Waiter(results)
        if not waiter.left:
            return waiter.result(False)
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                stream = self.watch_batches(replay=True)
                try:
                    async for batch in stream:
                        waiter.feed(batch)
                        if not waiter.left:
                            break
                finally:
                    await stream.aclose()
        except TimeoutError:
            if not deadline.expired():
                raise
        return waiter.result(deadline.expired())


# ---------------------------------------------------------------- grpc.health.v1, by hand
# The health service's two messages are one field each (HealthCheckRequest
# {string service = 1}, HealthCheckResponse {ServingStatus status = 1});
# written out here so that the client needs no grpcio-health-checking.

_SERVING_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _health_request(service: str) -> bytes:
    data = service.encode()
    return b"\x0a" + _varint(len(data)) + data if data else b""


def _health_status(raw: bytes) -> str:
    status, i = 0, 0
    while i < len(raw):
        tag, i = _read_varint(raw, i)
        wire = tag & 7
        if wire == 0:
            value, i = _read_varint(raw, i)
            if tag >> 3 == 1:
                status = value
        elif wire == 2:
            size, i = _read_varint(raw, i)
            i += size
        else:  # fixed64 / fixed32: no such field in this message
            i += 8 if wire == 1 else 4
    return _SERVING_STATUS.get(status, str(status))


def _read_varint(raw: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = raw[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i
