"""Client-certificate callers Submit on a real API server by impersonation
(``grpc.auth.impersonateCertificateCallers``): Berth, running as a user
that may not create pods itself, writes with Impersonate-User/-Group headers
taken from the caller's verified certificate (CN the user, each O a group),
so the API server authorises the write as that caller — and refuses Berth
when its own RBAC lacks ``impersonate``, or when the option is off."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from tests.certs import CA
from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed
from tests.e2e.kubeutil import get_pod, node_of, pod

pytestmark = pytest.mark.e2e

RBAC = "rbac.authorization.k8s.io/v1"
#: What Berth needs to schedule (reads, binds, events, reviews), without
#: creating pods; the impersonating identity also gets `impersonate`.
BERTH_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch", "update"]},
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
]
#: A refusal of the API server's 403, as a call's status or a pod's result.
FORBIDDEN = (grpc.StatusCode.PERMISSION_DENIED, "Forbidden")
#: What the chart grants with grpc.auth.impersonateCertificateCallers:
#: constrained impersonation from 1.36 (the batch API's writes only), else legacy.
GRANTS: dict[str, list[dict[str, Any]]] = {
    "constrained": [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["users", "groups"], "verbs": ["impersonate:user-info"]},
        {
            "apiGroups": [""],
            "resources": ["pods"],
            "verbs": ["impersonate-on:user-info:create", "impersonate-on:user-info:delete"],
        },
    ],
    "legacy": [{"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]}],
    "none": [],
}


def grant(kube: bed.Kube, name: str, rules: list[dict[str, Any]], subject: dict[str, str]) -> None:
    kube.create({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules}, exist_ok=True)
    binding = {
        "apiVersion": RBAC,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", **subject}],
    }
    kube.create(binding, exist_ok=True)


@pytest.fixture(scope="module")
def certs(control_plane: bed.ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Berth's gRPC serving certificate and a client CA; carol (group
    team-a-devs, which may create pods in team-a: the group, not the user,
    is granted) and dave (no group, no rights)."""
    control_plane.create_node("imp-0", cpu="2", memory="4Gi")
    for ns in ("team-a", "team-b"):
        control_plane.ensure_namespace(ns)
    kube = control_plane.kube()
    role = {
        "apiVersion": RBAC,
        "kind": "Role",
        "metadata": {"name": "pod-maker", "namespace": "team-a"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete", "get", "list"]}],
    }
    kube.create(role, exist_ok=True)
    kube.create(
        {
            "apiVersion": RBAC,
            "kind": "RoleBinding",
            "metadata": {"name": "team-a-devs-make-pods", "namespace": "team-a"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-maker"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team-a-devs"}],
        },
        exist_ok=True,
    )
    d = tmp_path_factory.mktemp("impersonation")
    ca = CA(d, "grpc-client-ca")
    server = ca.issue("berth-grpc", server=True)
    carol = ca.issue("carol", client=True, organizations=("team-a-devs",))
    dave = ca.issue("dave", client=True)
    return {
        "ca": ca.path,
        "server.crt": server.cert,
        "server.key": server.key,
        "carol.crt": carol.cert,
        "carol.key": carol.key,
        "dave.crt": dave.cert,
        "dave.key": dave.key,
    }


def berth_as(
    control_plane: bed.ControlPlane, start_berth: Any, certs: dict[str, Path], grants: str, *, impersonate: bool
) -> Any:
    """Berth running as a user of its own with BERTH_RULES and ``GRANTS[grants]``,
    with mTLS on its gRPC port."""
    user = f"berth-{grants}-{'on' if impersonate else 'off'}"
    grant(control_plane.kube(), user, BERTH_RULES + GRANTS[grants], {"kind": "User", "name": user})
    tls = {"certFile": str(certs["server.crt"]), "keyFile": str(certs["server.key"]), "clientCAFile": str(certs["ca"])}
    cfg = {"grpc": {"tls": tls, "auth": {"impersonateCertificateCallers": impersonate}}}
    return start_berth(cfg, kubeconfig=control_plane.kubeconfig_for_user(user), name=user)


@pytest.fixture
def connect(certs: dict[str, Path]) -> Iterator[Any]:
    channels: list[grpc.Channel] = []

    def open_as(port: int, who: str) -> scheduler_pb2_grpc.SchedulerStub:
        creds = grpc.ssl_channel_credentials(
            root_certificates=certs["ca"].read_bytes(),
            private_key=certs[f"{who}.key"].read_bytes(),
            certificate_chain=certs[f"{who}.crt"].read_bytes(),
        )
        ch = grpc.secure_channel(f"127.0.0.1:{port}", creds, options=[("grpc.ssl_target_name_override", "localhost")])
        channels.append(ch)
        return scheduler_pb2_grpc.SchedulerStub(ch)

    yield open_as
    for ch in channels:
        ch.close()


def submit(stub: scheduler_pb2_grpc.SchedulerStub, manifest: dict[str, Any]) -> Any:
    resp = stub.Submit(scheduler_pb2.SubmitRequest(pod_manifests=[json.dumps(manifest).encode()]), timeout=30)
    (result,) = resp.results
    return result


def refusal(stub: scheduler_pb2_grpc.SchedulerStub, manifest: dict[str, Any]) -> tuple[Any, str]:
    """(status code or result reason, message) of a Submit that must not create the pod."""
    try:
        result = submit(stub, manifest)
    except grpc.RpcError as e:
        return e.code(), e.details() or ""
    assert not result.accepted
    return result.reason, result.message


@pytest.mark.parametrize(
    "grants",
    [
        pytest.param(
            "constrained",
            marks=pytest.mark.skipif(
                bed.KUBERNETES_VERSION < "v1.36", reason="constrained impersonation (KEP-5284) is served from 1.36"
            ),
        ),
        "legacy",
    ],
)
def test_a_certificate_caller_submits_as_itself_and_its_groups_rbac_decides(
    control_plane: bed.ControlPlane,
    start_berth: Any,
    certs: dict[str, Path],
    connect: Any,
    kube: bed.Kube,
    grants: str,
) -> None:
    berth = berth_as(control_plane, start_berth, certs, grants, impersonate=True)
    carol = connect(berth.grpc_port, "carol")
    job = f"carols-{grants}-job"
    result = submit(carol, pod(job, namespace="team-a"))
    assert result.accepted, result.message
    assert get_pod(kube, job, "team-a")["metadata"]["uid"] == result.uid
    assert wait_for(f"{job} bound", lambda: node_of(kube, job, "team-a"), 30)
    # Cancel deletes as her too (a pod that fits nowhere stays pending).
    big = f"carols-{grants}-big"
    assert submit(carol, pod(big, namespace="team-a", cpu="64")).accepted
    cancelled = carol.Cancel(scheduler_pb2.CancelRequest(namespace="team-a", name=big), timeout=30)
    assert cancelled.cancelled, cancelled.message
    wait_for(f"{big} deleted", lambda: kube.request("GET", f"/api/v1/namespaces/team-a/pods/{big}")[0] == 404, 30)
    # Her group may not create pods in team-b; dave has no group at all.
    reason, message = refusal(carol, pod("carols-other", namespace="team-b"))
    assert reason in FORBIDDEN and 'User "carol" cannot create resource "pods"' in message, message
    assert 'namespace "team-b"' in message
    reason, message = refusal(connect(berth.grpc_port, "dave"), pod("daves-job", namespace="team-a"))
    assert reason in FORBIDDEN and 'User "dave" cannot create resource "pods"' in message, message
    for name, ns in (("carols-other", "team-b"), ("daves-job", "team-a")):
        assert kube.request("GET", f"/api/v1/namespaces/{ns}/pods/{name}")[0] == 404


def test_berth_without_the_impersonate_grant_writes_nothing(
    control_plane: bed.ControlPlane, start_berth: Any, certs: dict[str, Path], connect: Any, kube: bed.Kube
) -> None:
    berth = berth_as(control_plane, start_berth, certs, "none", impersonate=True)
    _, message = refusal(connect(berth.grpc_port, "carol"), pod("carols-second", namespace="team-a"))
    # v1.37.2 names the constrained check (impersonate-on:user-info:create) it tried.
    assert 'User "berth-none-on" cannot impersonate' in message, message
    assert kube.request("GET", "/api/v1/namespaces/team-a/pods/carols-second")[0] == 404


def test_with_impersonation_off_a_certificate_caller_reads_but_cannot_submit(
    control_plane: bed.ControlPlane, start_berth: Any, certs: dict[str, Path], connect: Any, kube: bed.Kube
) -> None:
    berth = berth_as(control_plane, start_berth, certs, "legacy", impersonate=False)
    carol = connect(berth.grpc_port, "carol")
    code, message = refusal(carol, pod("carols-third", namespace="team-a"))
    assert code in (grpc.StatusCode.UNAUTHENTICATED, "Unauthorized"), (code, message)
    assert "grpc.auth.impersonateCertificateCallers" in message, message
    assert kube.request("GET", "/api/v1/namespaces/team-a/pods/carols-third")[0] == 404
    listed = carol.ListPods(scheduler_pb2.ListPodsRequest(namespace="team-a"), timeout=30)
    assert listed is not None
