"""Kueue Topology objects read from the API server when ``kueueTopologies``
asks for them: the newest version served (v1beta2, else v1beta1), and none
when the kind is not served."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from berth import app, config
from berth.adapters.kubernetes.runner import KubernetesRunner
from tests.kubernetes.fakeapi import FakeApiServer
from tests.kubernetes.test_runner import running, until

pytestmark = pytest.mark.looptime

V1BETA2 = "/apis/kueue.x-k8s.io/v1beta2/topologies"
V1BETA1 = "/apis/kueue.x-k8s.io/v1beta1/topologies"


@pytest.fixture
async def fake() -> FakeApiServer:
    return FakeApiServer()


def topology(name: str, version: str, *levels: str) -> dict[str, Any]:
    return {
        "apiVersion": f"kueue.x-k8s.io/{version}",
        "kind": "Topology",
        "metadata": {"name": name, "resourceVersion": "7"},
        "spec": {"levels": [{"nodeLabel": lv} for lv in levels]},
    }


def runner(api: client.ApiClient, **cfg: Any) -> KubernetesRunner:
    return KubernetesRunner(
        app.build(config.parse({"leaderElection": {"leaderElect": False}, **cfg}), run_loop=False).core, api
    )


@pytest.mark.parametrize(
    ("served", "read_from"),
    [({"v1beta2": [], "v1beta1": []}, V1BETA2), ({"v1beta1": []}, V1BETA1)],
)
async def test_the_newest_served_version_is_read(
    fake: FakeApiServer, api: client.ApiClient, served: dict[str, list[dict[str, Any]]], read_from: str
) -> None:
    version = read_from.split("/")[3]
    fake.kueue_topologies = {
        v: [topology("dc", version, "rack", "kubernetes.io/hostname")] if v == version else [] for v in served
    }
    r = runner(api, kueueTopologies=True)
    async with running(r.run()):
        await until("/readyz", lambda: r.core.ready)
        assert [(t.name, t.labels) for t in r.core.topologies] == [("dc", ("rack", "kubernetes.io/hostname"))]
        assert "TopologyGang" in r.core.framework_for("berth").plugins
        assert ("GET", read_from) in fake.requests


async def test_not_served_or_not_asked_for_nothing_is_read(fake: FakeApiServer, api: client.ApiClient) -> None:
    r = runner(api, kueueTopologies=True)
    async with running(r.run()):
        await until("/readyz", lambda: r.core.ready)
        assert list(r.core.topologies) == []
        assert {("GET", V1BETA2), ("GET", V1BETA1)} <= set(fake.requests)
    fake.kueue_topologies = {"v1beta2": [topology("dc", "v1beta2", "rack")]}
    fake.requests.clear()
    r = runner(api)
    async with running(r.run()):
        await until("/readyz", lambda: r.core.ready)
        assert list(r.core.topologies) == []
        assert not any("kueue" in path for _, path in fake.requests)
