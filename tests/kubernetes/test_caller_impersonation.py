"""The batch API's writes for a client-certificate caller
(``grpc.auth.impersonateCertificateCallers``): on Berth's own client and
credential, with one ``Impersonate-Group`` header line per group (the API
server reads each line as one group, k8s.io/apiserver@v0.37.2
pkg/endpoints/filters/impersonation), and never without the option. The
real API server's answer is tests/e2e/test_impersonation.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client

from berth import access, errors
from berth.adapters.kubernetes.access import CallerWrites, impersonation_headers

CAROL = access.Caller("carol", ("team-a-devs", "ops"), certificate=True)


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[Any]]]:
    seen: list[Any] = []

    async def create(request: web.Request) -> web.Response:
        seen.append((request.method, request.path, request.headers.copy(), await request.json()))
        return web.json_response({"metadata": {"name": "p", "uid": "u1"}}, status=201)

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{ns}/pods", create)
    async with TestServer(app) as srv:
        yield str(srv.make_url("")).rstrip("/"), seen


def berths_client(url: str) -> client.ApiClient:
    cfg = client.Configuration(host=url)
    cfg.api_key = {"BearerToken": "berths-own-token"}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    return client.ApiClient(cfg)


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"}, "spec": {}}


async def test_a_certificate_caller_is_impersonated_on_berths_own_credential(server: tuple[str, list[Any]]) -> None:
    url, seen = server
    async with berths_client(url) as api:
        created = await CallerWrites(api, impersonate_certificates=True).create_pod(CAROL, POD)
    assert created["metadata"]["uid"] == "u1"
    [(method, path, headers, body)] = seen
    assert (method, path, body) == ("POST", "/api/v1/namespaces/team-a/pods", POD)
    assert headers["Authorization"] == "Bearer berths-own-token"
    assert headers.getall("Impersonate-User") == ["carol"]
    assert headers.getall("Impersonate-Group") == ["team-a-devs", "ops"]


@pytest.mark.parametrize(
    ("caller", "impersonate", "message"),
    [
        (CAROL, False, "grpc.auth.impersonateCertificateCallers is true"),
        (access.Caller("someone"), True, "send a Kubernetes bearer token"),
    ],
    ids=["option off", "not a certificate caller"],
)
async def test_no_impersonation_without_the_option_or_a_certificate(
    server: tuple[str, list[Any]], caller: access.Caller, impersonate: bool, message: str
) -> None:
    url, seen = server
    async with berths_client(url) as api:
        with pytest.raises(errors.Unauthenticated, match=message):
            await CallerWrites(api, impersonate_certificates=impersonate).create_pod(caller, POD)
    assert seen == []


def test_extra_fields_and_uid_are_impersonated_with_escaped_keys() -> None:
    caller = access.Caller("u", ("g",), uid="42", extra=(("acme.com/scopes", ("a", "b")),), certificate=True)
    assert impersonation_headers(caller) == [
        ("Impersonate-User", "u"),
        ("Impersonate-Group", "g"),
        ("Impersonate-Uid", "42"),
        ("Impersonate-Extra-acme.com%2Fscopes", "a"),
        ("Impersonate-Extra-acme.com%2Fscopes", "b"),
    ]
