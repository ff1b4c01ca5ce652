"""The gRPC door where an API server vouches for callers (Kubernetes mode,
``core.authority`` set): every Berth RPC needs a caller, reads show what
the caller's RBAC shows, Submit and Cancel write as the caller, and a
standby refuses the leader's state. The API server is
:class:`tests.access.fakes.TableReviewer`; the real one is in
tests/e2e/test_batch_on_kubernetes.py."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from berth import access, errors
from berth.adapters.grpc import convert
from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, model_pb2, scheduler_pb2, scheduler_pb2_grpc
from berth.testing import make_pod
from tests.access.fakes import TableReviewer
from tests.grpc.conftest import Served, serving

pytestmark = pytest.mark.asyncio

TOKENS = {"alice-token": "alice", "admin-token": "admin", "bob-token": "bob"}
GRANTS = [
    ("alice", "list", "pods", "", "team-a"),
    ("alice", "get", "pods", "", "team-a"),
    ("alice", "get", "queues", "berth.dev", ""),  # every queue by name (not list)
    ("admin", "list", "pods", "", ""),
    ("admin", "get", "pods", "", ""),
    ("admin", "list", "nodes", "", ""),
    ("admin", "list", "queues", "berth.dev", ""),
    ("admin", "create", "pods", "", ""),
]
QUEUES: list[dict[str, Any]] = [{"name": "gpu", "max": {"cpu": "3"}}, {"name": "cpu"}]


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


class Kubernetes:
    """Turns a served embedded Berth into one that asks an API server."""

    def __init__(self, s: Served) -> None:
        self.reviewer = TableReviewer(TOKENS, GRANTS)
        s.core.authority = access.Authority(self.reviewer)
        s.feed.upsert_pods(
            [
                make_pod("a1", namespace="team-a", scheduler_name="berth", requests={"cpu": "100"}),
                make_pod("b1", namespace="team-b", scheduler_name="berth", requests={"cpu": "100"}),
            ]
        )


async def _code(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return err.value.code(), err.value.details() or ""


async def test_every_berth_rpc_needs_a_caller_but_health_does_not() -> None:
    async with serving(None) as s:
        Kubernetes(s)
        async with s.channel() as ch:
            stub = scheduler_pb2_grpc.SchedulerStub(ch)
            code, details = await _code(stub.ListPods(scheduler_pb2.ListPodsRequest()))
            assert code == grpc.StatusCode.UNAUTHENTICATED and "Kubernetes token" in details
            code, details = await _code(stub.ListPods(scheduler_pb2.ListPodsRequest(), metadata=bearer("stolen")))
            assert code == grpc.StatusCode.UNAUTHENTICATED and "TokenReview" in details
            code, _ = await _code(cluster_pb2_grpc.ClusterStub(ch).ListNodes(cluster_pb2.ListNodesRequest()))
            assert code == grpc.StatusCode.UNAUTHENTICATED
            health = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest())
            assert health.status == health_pb2.HealthCheckResponse.SERVING


async def test_list_pods_shows_only_the_namespaces_the_caller_may_list() -> None:
    async with serving(None) as s:
        Kubernetes(s)
        async with s.channel() as ch:
            stub = scheduler_pb2_grpc.SchedulerStub(ch)
            alice = await stub.ListPods(scheduler_pb2.ListPodsRequest(), metadata=bearer("alice-token"))
            admin = await stub.ListPods(scheduler_pb2.ListPodsRequest(), metadata=bearer("admin-token"))
            bob = await stub.ListPods(scheduler_pb2.ListPodsRequest(), metadata=bearer("bob-token"))
            code, details = await _code(
                stub.ListPods(scheduler_pb2.ListPodsRequest(namespace="team-b"), metadata=bearer("alice-token"))
            )
    assert [(p.namespace, p.name) for p in alice.pods] == [("team-a", "a1")]
    assert [(p.namespace, p.name) for p in admin.pods] == [("team-a", "a1"), ("team-b", "b1")]
    assert list(bob.pods) == []
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert details == (
        'pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "team-b"'
    )


async def test_why_of_a_pod_the_caller_may_not_get_is_forbidden() -> None:
    async with serving(None) as s:
        Kubernetes(s)
        async with s.channel() as ch:
            stub = scheduler_pb2_grpc.SchedulerStub(ch)
            mine = await stub.Why(
                scheduler_pb2.WhyRequest(namespace="team-a", name="a1"), metadata=bearer("alice-token")
            )
            code, details = await _code(
                stub.Why(scheduler_pb2.WhyRequest(namespace="team-b", name="b1"), metadata=bearer("alice-token"))
            )
    assert mine.pod == "team-a/a1"
    assert code == grpc.StatusCode.PERMISSION_DENIED and 'pods "b1" is forbidden' in details


async def test_decisions_stream_only_the_callers_namespaces() -> None:
    async with serving(None) as s:
        Kubernetes(s)
        async with s.channel() as ch:
            stub = scheduler_pb2_grpc.SchedulerStub(ch)
            seen: list[str] = []
            stream = stub.WatchDecisions(
                scheduler_pb2.WatchDecisionsRequest(replay=True), metadata=bearer("alice-token")
            )
            s.feed.upsert_pods([make_pod("a2", namespace="team-a", scheduler_name="berth")])
            async for d in stream:
                seen.append(d.pod)
                if d.pod == "team-a/a2":
                    break
            stream.cancel()
    assert seen and all(p.startswith("team-a/") for p in seen)


async def test_node_reads_need_the_cluster_wide_list_nodes_grant() -> None:
    async with serving(None) as s:
        Kubernetes(s)
        async with s.channel() as ch:
            cluster = cluster_pb2_grpc.ClusterStub(ch)
            code, details = await _code(
                cluster.ListNodes(cluster_pb2.ListNodesRequest(), metadata=bearer("alice-token"))
            )
            nodes = await cluster.ListNodes(cluster_pb2.ListNodesRequest(), metadata=bearer("admin-token"))
            stub = scheduler_pb2_grpc.SchedulerStub(ch)
            pod = convert.pod_to_pb(make_pod("x", scheduler_name="berth"))
            explain_code, _ = await _code(
                stub.Explain(scheduler_pb2.ExplainRequest(pod=pod), metadata=bearer("alice-token"))
            )
    assert code == explain_code == grpc.StatusCode.PERMISSION_DENIED
    assert 'cannot list resource "nodes" in API group "" at the cluster scope' in details
    assert {n.name for n in nodes.nodes} == {"a", "b"}


async def test_queues_listed_by_name_where_the_caller_may_get_them() -> None:
    async with serving(None, queues=QUEUES) as s:
        Kubernetes(s)
        async with s.channel() as ch:
            stub = scheduler_pb2_grpc.SchedulerStub(ch)
            alice = await stub.ListQueues(scheduler_pb2.ListQueuesRequest(), metadata=bearer("alice-token"))
            bob = await stub.ListQueues(scheduler_pb2.ListQueuesRequest(), metadata=bearer("bob-token"))
            code, _ = await _code(
                stub.GetQueue(scheduler_pb2.GetQueueRequest(name="gpu"), metadata=bearer("bob-token"))
            )
    assert {q.name for q in alice.queues} >= {"gpu", "cpu"}
    assert list(bob.queues) == []
    assert code == grpc.StatusCode.PERMISSION_DENIED


async def test_reads_open_says_nobody_is_asked() -> None:
    async with serving({"auth": {"reads": "open"}}) as s:
        Kubernetes(s)
        async with s.channel() as ch:
            resp = await scheduler_pb2_grpc.SchedulerStub(ch).ListPods(scheduler_pb2.ListPodsRequest())
    assert len(resp.pods) == 2


async def test_a_standby_refuses_the_leaders_state_naming_the_leader() -> None:
    async with serving(None) as s:
        Kubernetes(s)
        scheduler, s.core.scheduler = s.core.scheduler, None
        s.core.leader = "berth-7f9c_1a2b"
        try:
            async with s.channel() as ch:
                stub = scheduler_pb2_grpc.SchedulerStub(ch)
                code, details = await _code(
                    stub.ListPods(scheduler_pb2.ListPodsRequest(), metadata=bearer("admin-token"))
                )
                # What the cache answers is every replica's: served.
                nodes = await cluster_pb2_grpc.ClusterStub(ch).ListNodes(
                    cluster_pb2.ListNodesRequest(), metadata=bearer("admin-token")
                )
        finally:
            s.core.scheduler = scheduler
    assert code == grpc.StatusCode.UNAVAILABLE
    assert details == "not the leader (leader is berth-7f9c_1a2b): ask the leader"
    assert len(nodes.nodes) == 2


class FakeWrites:
    """The API server's side of Submit/Cancel as the caller: alice may create
    and delete pods in team-a only; a pod without an image is invalid."""

    def __init__(self) -> None:
        self.created: list[tuple[str, Mapping[str, Any]]] = []
        self.deleted: list[tuple[str, str, str, str]] = []
        self.groups: list[Mapping[str, Any]] = []

    def _check(self, caller: access.Caller, namespace: str, verb: str) -> None:
        if caller.token is None:
            raise errors.Unauthenticated("send a Kubernetes bearer token")
        if caller.user != "admin" and namespace != "team-a":
            raise errors.PermissionDenied(
                f'pods is forbidden: User "{caller.user}" cannot {verb} resource "pods" in API group "" '
                f'in the namespace "{namespace}"'
            )

    async def create_pod(self, caller: access.Caller, pod: Mapping[str, Any]) -> Mapping[str, Any]:
        self._check(caller, pod["metadata"]["namespace"], "create")
        if not all(c.get("image") for c in pod["spec"]["containers"]):
            raise errors.InvalidArgument('Pod "x" is invalid: spec.containers[0].image: Required value')
        self.created.append((caller.user, pod))
        return {**pod, "metadata": {**pod["metadata"], "uid": f"uid-{len(self.created)}"}}

    async def delete_pod(self, caller: access.Caller, namespace: str, name: str, uid: str) -> None:
        self._check(caller, namespace, "delete")
        self.deleted.append((caller.user, namespace, name, uid))

    async def create_pod_group(self, caller: access.Caller, group: Mapping[str, Any]) -> Mapping[str, Any]:
        self._check(caller, group["metadata"]["namespace"], "create")
        self.groups.append(group)
        return group


def manifest(name: str, namespace: str, image: str = "busybox") -> bytes:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "annotations": {"keep": "me"}},
            "spec": {
                "schedulerName": "berth",
                "containers": [{"name": "c", "image": image, "command": ["sleep", "1"]}],
            },
        }
    ).encode()


async def test_submit_creates_the_callers_own_objects_as_the_caller() -> None:
    async with serving(None) as s:
        Kubernetes(s)
        writes = s.feed.as_caller = FakeWrites()  # type: ignore[attr-defined]
        async with s.channel() as ch:
            stub = scheduler_pb2_grpc.SchedulerStub(ch)
            req = scheduler_pb2.SubmitRequest(
                pod_manifests=[manifest("w1", "team-a"), manifest("w2", "team-a", image="")],
                group=model_pb2.PodGroup(metadata=model_pb2.ObjectMeta(name="g", namespace="team-a"), min_member=2),
            )
            resp = await stub.Submit(req, metadata=bearer("alice-token"))
            code, details = await _code(
                stub.Submit(
                    scheduler_pb2.SubmitRequest(pod_manifests=[manifest("x", "team-b")]), metadata=bearer("alice-token")
                )
            )
            unauth, _ = await _code(stub.Submit(scheduler_pb2.SubmitRequest(pod_manifests=[manifest("y", "team-a")])))
    ok, bad = resp.results
    assert (ok.pod, ok.accepted, ok.uid) == ("team-a/w1", True, "uid-1")
    assert (bad.accepted, bad.reason) == (False, "Invalid") and "image: Required value" in bad.message
    ((user, body),) = writes.created
    assert user == "alice"
    assert body["spec"]["containers"][0]["command"] == ["sleep", "1"]  # the client's object, as written
    assert body["metadata"]["annotations"] == {"keep": "me"}
    assert body["metadata"]["labels"] == {"scheduling.x-k8s.io/pod-group": "g"}
    assert [g["metadata"]["name"] for g in writes.groups] == ["g"]
    assert writes.groups[0]["spec"]["minMember"] == 2
    assert code == grpc.StatusCode.PERMISSION_DENIED and 'User "alice" cannot create' in details
    assert unauth == grpc.StatusCode.UNAUTHENTICATED
    assert s.core.pods.by_key("team-a/w1") is None  # the informer brings it, not the Submit


async def test_cancel_deletes_through_the_api_server_as_the_caller() -> None:
    async with serving(None) as s:
        Kubernetes(s)
        writes = s.feed.as_caller = FakeWrites()  # type: ignore[attr-defined]
        async with s.channel() as ch:
            stub = scheduler_pb2_grpc.SchedulerStub(ch)
            mine = await stub.Cancel(
                scheduler_pb2.CancelRequest(namespace="team-a", name="a1"), metadata=bearer("alice-token")
            )
            code, _ = await _code(
                stub.Cancel(scheduler_pb2.CancelRequest(namespace="team-b", name="b1"), metadata=bearer("alice-token"))
            )
            missing = await stub.Cancel(
                scheduler_pb2.CancelRequest(namespace="team-a", name="zz"), metadata=bearer("alice-token")
            )
    assert mine.cancelled and writes.deleted == [("alice", "team-a", "a1", "uid-team-a-a1")]
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert not missing.cancelled and "not found" in missing.message


async def test_a_client_guessing_tokens_is_held_before_the_api_server_is_asked_too_often() -> None:
    async with serving(None) as s:
        k = Kubernetes(s)
        async with s.channel() as ch:
            stub = scheduler_pb2_grpc.SchedulerStub(ch)
            for i in range(access.FAILURES_PER_WINDOW):
                code, _ = await _code(stub.ListPods(scheduler_pb2.ListPodsRequest(), metadata=bearer(f"guess-{i}")))
                assert code == grpc.StatusCode.UNAUTHENTICATED
            code, details = await _code(stub.ListPods(scheduler_pb2.ListPodsRequest(), metadata=bearer("guess-x")))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "too many failed authentications" in details
    assert k.reviewer.token_reviews == access.FAILURES_PER_WINDOW


async def test_a_pod_naming_no_scheduler_is_given_the_only_profile_and_told_so() -> None:
    async with serving(None) as s:
        Kubernetes(s)
        writes = s.feed.as_caller = FakeWrites()  # type: ignore[attr-defined]
        body = json.loads(manifest("plain", "team-a"))
        del body["spec"]["schedulerName"]
        async with s.channel() as ch:
            resp = await scheduler_pb2_grpc.SchedulerStub(ch).Submit(
                scheduler_pb2.SubmitRequest(pod_manifests=[json.dumps(body).encode()]), metadata=bearer("alice-token")
            )
    (result,) = resp.results
    assert result.accepted and result.message == 'spec.schedulerName defaulted to "berth", the only profile'
    assert writes.created[0][1]["spec"]["schedulerName"] == "berth"
