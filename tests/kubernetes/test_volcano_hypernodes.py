"""Volcano HyperNode objects read from the API server when
``volcanoHyperNodes`` asks for them, where the kind is served."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from kubernetes_asyncio import client

from tests.kubernetes import test_kueue_topologies as kueue_tests
from tests.kubernetes.fakeapi import FakeApiServer
from tests.kubernetes.test_kueue_topologies import runner
from tests.kubernetes.test_runner import running, until
from tests.loop import test_hypernode_scenarios as scenarios

pytestmark = pytest.mark.looptime

PATH = "/apis/topology.volcano.sh/v1alpha1/hypernodes"


#: The fake API server, as the Kueue Topology tests make it.
fake = kueue_tests.fake


def hypernode(name: str, tier: int, *nodes: str) -> dict[str, Any]:
    members = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes]
    doc: dict[str, Any] = msgspec.to_builtins(scenarios.hypernode(name, tier, members, "leaf"))
    doc["metadata"]["resourceVersion"] = "7"
    return doc


async def test_served_hypernodes_become_the_volcano_topology(fake: FakeApiServer, api: client.ApiClient) -> None:
    fake.hypernodes = [hypernode("leaf-a", 1, "n1", "n2"), hypernode("bad", 1)]
    r = runner(api, volcanoHyperNodes=True)
    async with running(r.run()):
        await until("/readyz", lambda: r.core.ready)
        assert [(t.name, t.labels) for t in r.core.topologies] == [
            ("volcano-hypernodes", ("topology.volcano.sh/tier-1", "kubernetes.io/hostname"))
        ]
        assert dict(r.core.hypernodes.left_out()) == {"bad": "spec.members: member must have at least one member"}
        assert "TopologyGang" in r.core.framework_for("berth").plugins
        assert ("GET", PATH) in fake.requests


@pytest.mark.parametrize(
    ("asked", "served", "read"),
    [(True, False, True), (False, True, False)],
    ids=["asked-not-served", "served-not-asked"],
)
async def test_not_served_or_not_asked_for_no_topology_comes(
    fake: FakeApiServer, api: client.ApiClient, asked: bool, served: bool, read: bool
) -> None:
    fake.hypernodes = [hypernode("leaf-a", 1, "n1")] if served else None
    r = runner(api, volcanoHyperNodes=asked)
    async with running(r.run()):
        await until("/readyz", lambda: r.core.ready)
        assert (list(r.core.topologies), ("GET", PATH) in fake.requests) == ([], read)
