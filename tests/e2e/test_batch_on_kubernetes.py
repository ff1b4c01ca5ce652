"""The gRPC batch API on a real cluster: Submit and Cancel write through
the API server with the caller's own ServiceAccount token (its RBAC decides,
its message comes back), and reads show what the caller's RBAC shows
(TokenReview + SubjectAccessReview, :mod:`berth.access`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc
from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed
from tests.e2e.kubeutil import get_pod, node_of, pod, service_account_token

pytestmark = pytest.mark.e2e

POD_RULES = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete", "get", "list", "watch"]}]


@pytest.fixture(scope="module")
def cluster(control_plane: bed.ControlPlane) -> dict[str, str]:
    """Two nodes; namespaces team-a and team-b; alice may handle pods in team-a only."""
    for i in range(2):
        control_plane.create_node(f"batch-{i}", cpu="2", memory="4Gi")
    for ns in ("team-a", "team-b"):
        control_plane.ensure_namespace(ns)
    kube = control_plane.kube()
    return {"alice": service_account_token(kube, "team-a", "alice", rules=POD_RULES)}


@pytest.fixture
def channel(cluster: dict[str, str], start_berth: Any) -> Iterator[grpc.Channel]:
    berth = start_berth()
    with grpc.insecure_channel(f"127.0.0.1:{berth.grpc_port}") as ch:
        yield ch


@pytest.fixture
def stub(channel: grpc.Channel) -> scheduler_pb2_grpc.SchedulerStub:
    return scheduler_pb2_grpc.SchedulerStub(channel)


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def refused(call: Any, *args: Any, **kw: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        call(*args, timeout=30, **kw)
    return err.value


def test_submit_creates_the_pod_as_the_caller_and_berth_binds_it(
    cluster: dict[str, str], stub: scheduler_pb2_grpc.SchedulerStub, kube: bed.Kube
) -> None:
    manifest = pod("job-1", namespace="team-a")
    manifest["metadata"]["annotations"] = {"owner": "alice"}
    resp = stub.Submit(
        scheduler_pb2.SubmitRequest(pod_manifests=[json.dumps(manifest).encode()]),
        metadata=bearer(cluster["alice"]),
        timeout=30,
    )
    (result,) = resp.results
    assert result.accepted, result.message
    created = get_pod(kube, "job-1", "team-a")
    assert created["metadata"]["uid"] == result.uid
    assert created["metadata"]["annotations"]["owner"] == "alice"
    # The API server's own record of who created it: alice's ServiceAccount, not Berth.
    fields = {f.get("manager") for f in created["metadata"].get("managedFields", [])}
    assert fields and "berth" not in fields
    assert wait_for("job-1 bound", lambda: node_of(kube, "job-1", "team-a"), 30)


def test_the_api_servers_refusal_reaches_the_caller(
    cluster: dict[str, str], stub: scheduler_pb2_grpc.SchedulerStub
) -> None:
    body = json.dumps(pod("job-2", namespace="team-b")).encode()
    err = refused(stub.Submit, scheduler_pb2.SubmitRequest(pod_manifests=[body]), metadata=bearer(cluster["alice"]))
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    assert 'User "system:serviceaccount:team-a:alice" cannot create resource "pods"' in (err.details() or "")
    invalid = pod("job-3", namespace="team-a")
    invalid["spec"]["containers"][0]["image"] = ""
    resp = stub.Submit(
        scheduler_pb2.SubmitRequest(pod_manifests=[json.dumps(invalid).encode()]),
        metadata=bearer(cluster["alice"]),
        timeout=30,
    )
    assert (resp.results[0].accepted, resp.results[0].reason) == (False, "Invalid")
    assert "image" in resp.results[0].message
    anonymous = refused(stub.Submit, scheduler_pb2.SubmitRequest(pod_manifests=[body]))
    assert anonymous.code() == grpc.StatusCode.UNAUTHENTICATED


def test_cancel_deletes_as_the_caller(
    cluster: dict[str, str], stub: scheduler_pb2_grpc.SchedulerStub, kube: bed.Kube
) -> None:
    big = pod("too-big", namespace="team-a", cpu="64")
    stub.Submit(
        scheduler_pb2.SubmitRequest(pod_manifests=[json.dumps(big).encode()]),
        metadata=bearer(cluster["alice"]),
        timeout=30,
    )
    why = wait_for(
        "too-big judged",
        lambda: (
            w
            if (
                w := stub.Why(
                    scheduler_pb2.WhyRequest(namespace="team-a", name="too-big"),
                    metadata=bearer(cluster["alice"]),
                    timeout=10,
                )
            ).phase
            == "Unschedulable"
            else None
        ),
        30,
    )
    assert "Insufficient cpu" in why.summary or "Insufficient cpu" in str(why)
    res = stub.Cancel(
        scheduler_pb2.CancelRequest(namespace="team-a", name="too-big"), metadata=bearer(cluster["alice"]), timeout=30
    )
    assert res.cancelled, res.message
    wait_for("too-big deleted", lambda: kube.request("GET", "/api/v1/namespaces/team-a/pods/too-big")[0] == 404, 30)


def test_reads_show_only_what_the_callers_rbac_shows(
    cluster: dict[str, str], channel: grpc.Channel, stub: scheduler_pb2_grpc.SchedulerStub, kube: bed.Kube
) -> None:
    kube.create(pod("theirs", namespace="team-b", cpu="64"))
    kube.create(pod("mine", namespace="team-a", cpu="64"))
    admin_view = service_account_token(
        kube,
        "default",
        "viewer",
        cluster_rules=[
            {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["get", "list"]},
        ],
    )
    alice = bearer(cluster["alice"])

    def names(md: Any) -> set[str]:
        return {
            f"{p.namespace}/{p.name}"
            for p in stub.ListPods(scheduler_pb2.ListPodsRequest(), metadata=md, timeout=10).pods
        }

    wait_for("Berth to see both pods", lambda: {"team-a/mine", "team-b/theirs"} <= names(bearer(admin_view)), 30)
    assert {n.split("/")[0] for n in names(alice)} == {"team-a"}
    err = refused(stub.Why, scheduler_pb2.WhyRequest(namespace="team-b", name="theirs"), metadata=alice)
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    assert refused(stub.ListPods, scheduler_pb2.ListPodsRequest()).code() == grpc.StatusCode.UNAUTHENTICATED
    cluster_stub = cluster_pb2_grpc.ClusterStub(channel)
    nodes = cluster_stub.ListNodes(cluster_pb2.ListNodesRequest(), metadata=bearer(admin_view), timeout=10)
    assert {"batch-0", "batch-1"} <= {n.name for n in nodes.nodes}
    alice_nodes = refused(cluster_stub.ListNodes, cluster_pb2.ListNodesRequest(), metadata=alice)
    assert alice_nodes.code() == grpc.StatusCode.PERMISSION_DENIED
