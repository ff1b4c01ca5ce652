"""The dashboard against the real API server: a ServiceAccount allowed to
``list pods`` in one namespace (Role + RoleBinding; its token from the
TokenRequest API) sees that namespace's pods in the dashboard's JSON and no
other's, through a bearer header and through signing in; without a token
it sees nothing (401); a token the API server does not know is refused."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed
from tests.e2e.kubeutil import node_of, pod, service_account_token

NAMESPACES = ("team-a", "team-b")


def call(port: int, path: str, token: str | None = None, *, data: bytes | None = None, cookie: str = "") -> Any:
    """(status, JSON body, Set-Cookie) of a dashboard request."""
    headers = {"Content-Type": "application/json"} if data is not None else {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if cookie:
        headers["Cookie"] = cookie
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read()), r.headers.get("Set-Cookie", "")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), ""


@pytest.fixture(scope="module")
def cluster(control_plane: bed.ControlPlane, kube: bed.Kube) -> None:
    control_plane.create_node("worker-0", cpu="4", memory="8Gi")
    for ns in NAMESPACES:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, exist_ok=True)
        # No controller-manager here: the namespace's default ServiceAccount, which admission needs.
        sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}}
        kube.create(sa, exist_ok=True)
        kube.create(pod("placed", namespace=ns))
        kube.create(pod("too-big", namespace=ns, cpu="64"))


def test_a_service_account_sees_only_the_namespace_it_may_list_pods_in(
    cluster: None, kube: bed.Kube, start_berth: Any
) -> None:
    ui = bed.free_port()
    start_berth(config={"ui": {"port": ui}})
    for ns in NAMESPACES:
        wait_for(f"{ns}/placed to be bound", lambda ns=ns: node_of(kube, "placed", ns), 30)
    token = service_account_token(
        kube, "team-a", "viewer", rules=[{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    )

    def listed(tok: str) -> list[str]:
        status, body, _ = call(ui, "/ui/api/pods?phase=all", tok)
        assert status == 200, body
        return sorted(f"{p['namespace']}/{p['name']}" for p in body["pods"])

    # Berth's informers have every pod before the answer is judged.
    wait_for("the viewer's pods", lambda: listed(token) == ["team-a/placed", "team-a/too-big"], 30)
    status, body, _ = call(ui, "/ui/api/pods/team-b/too-big", token)
    assert status == 403
    assert 'User "system:serviceaccount:team-a:viewer" cannot list resource "pods"' in body["Error"]
    assert 'in the namespace "team-b"' in body["Error"]
    assert call(ui, "/ui/api/pods/team-a/too-big", token)[0] == 200
    assert call(ui, "/ui/api/nodes", token)[0] == 403  # no cluster-wide list nodes

    # No token, or one the API server does not know: nothing.
    for tok in (None, "not-a-token"):
        status, body, _ = call(ui, "/ui/api/pods?phase=all", tok)
        assert status == 401, body
        assert "pods" not in body

    # Signing in keeps the token on the server; the cookie shows the same view.
    status, body, set_cookie = call(ui, "/ui/api/login", data=json.dumps({"token": token}).encode())
    assert (status, body["user"]) == (200, "system:serviceaccount:team-a:viewer")
    assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie and token not in set_cookie
    cookie = set_cookie.split(";", 1)[0]
    status, body, _ = call(ui, "/ui/api/pods?phase=all", cookie=cookie)
    assert status == 200
    assert {p["namespace"] for p in body["pods"]} == {"team-a"}
    assert body["namespaces"] == ["team-a"]
