"""The gRPC batch API on a real cluster: Submit and Cancel write through
the API server with the caller's own ServiceAccount token (its RBAC decides,
its message comes back), and reads show what the caller's RBAC shows
(TokenReview + SubjectAccessReview, :mod:`berth.access`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc
from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed
from tests.e2e.kubeutil import get_pod, node_of, pod, service_account_token

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BERTH = [sys.executable, "-m", "berth.cli.main"]
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


GANG = """\
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: NAME, namespace: team-a}
spec: {minMember: 3}
""" + "".join(
    f"""---
apiVersion: v1
kind: Pod
metadata: {{name: NAME-{i}, namespace: team-a, labels: {{scheduling.x-k8s.io/pod-group: NAME}}}}
spec:
  schedulerName: berth
  containers: [{{name: c, image: registry.k8s.io/pause:3.10, resources: {{requests: {{cpu: CPU}}}}}}]
"""
    for i in range(3)
)


def test_the_cli_submits_a_gang_as_the_caller_and_it_is_placed_all_or_nothing(
    cluster: dict[str, str], start_berth: Any, kube: bed.Kube, tmp_path: Path
) -> None:
    """What the chart's NOTES tell a user to do: `berth submit -f gang.yaml
    --wait` with a token of their own; the PodGroup and the pods are created
    as them (the chart ships scheduler-plugins' PodGroup CRD)."""
    crd = yaml.safe_load((ROOT / "helm/berth/files/scheduling.x-k8s.io_podgroups.yaml").read_text())
    kube.create(crd, exist_ok=True)
    wait_for(
        "the PodGroup CRD served", lambda: kube.request("GET", "/apis/scheduling.x-k8s.io/v1alpha1/podgroups")[0] == 200
    )
    podgroups = {"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups"], "verbs": ["create", "get"]}
    gang_rules = [*POD_RULES, podgroups]
    token = tmp_path / "token"
    token.write_text(service_account_token(kube, "team-a", "gangs", rules=gang_rules))
    berth = start_berth()
    server = f"127.0.0.1:{berth.grpc_port}"

    def submit(name: str, cpu: str, timeout: str) -> subprocess.CompletedProcess[str]:
        (tmp_path / f"{name}.yaml").write_text(GANG.replace("NAME", name).replace("CPU", cpu))
        argv = [*BERTH, "submit", "-f", str(tmp_path / f"{name}.yaml"), "--wait", "--timeout", timeout]
        argv += ["--server", server, "--token-file", str(token)]
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)}
        )

    # Two nodes of 2 cpu: three pods of 1.5 cpu cannot all fit, and none binds.
    big = submit("big", "1500m", "8")
    assert big.returncode != 0, big.stdout + big.stderr
    assert all(node_of(kube, f"big-{i}", "team-a") is None for i in range(3))
    created = kube.ok("GET", "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/team-a/podgroups/big")
    assert created["spec"]["minMember"] == 3
    for i in range(3):  # make room: the big gang goes
        kube.request("DELETE", f"/api/v1/namespaces/team-a/pods/big-{i}", gracePeriodSeconds="0")
    # Three pods of 500m fit: all bind, and --wait says so.
    small = submit("small", "500m", "60")
    assert small.returncode == 0, small.stdout + small.stderr
    assert {node_of(kube, f"small-{i}", "team-a") for i in range(3)} <= {"batch-0", "batch-1"}
    assert all(node_of(kube, f"small-{i}", "team-a") for i in range(3))
