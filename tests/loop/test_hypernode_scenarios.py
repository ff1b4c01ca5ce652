"""Volcano HyperNodes as the topology of Volcano gangs, run by the loop in
virtual time: 32 hosts in 8 racks; tier-1 HyperNodes are racks (selected by
label, by regex or by name), tier 2 blocks, tier 3 zones; a PodGroup's
``networkTopology`` maps tier N onto the tier-N HyperNodes
(docs/topology.md "Volcano HyperNode objects")."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from berth import app, config
from berth.cluster import hypernodes, manifests, model
from berth.testing import make_pod
from tests.loop.conftest import Berth, make_config, running
from tests.loop.test_topology_scenarios import datacenter, fragment, placed

RACKS = [f"z{z}b{b}r{r}" for z in (1, 2) for b in (1, 2) for r in (1, 2)]


def rack_members(rack: str) -> list[dict[str, Any]]:
    """Racks of zone 1 by label, of zone 2 by regex on the host name, z2b2r2 by name."""
    if rack == "z2b2r2":
        return [{"type": "Node", "selector": {"exactMatch": {"name": f"{rack}h{h}"}}} for h in (1, 2, 3, 4)]
    if rack.startswith("z1"):
        return [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": rack}}}}]
    return [{"type": "Node", "selector": {"regexMatch": {"pattern": f"^{rack}h[0-9]+$"}}}]


def hypernode(name: str, tier: int, members: list[dict[str, Any]], tier_name: str) -> hypernodes.HyperNode:
    doc = {
        "apiVersion": hypernodes.API_VERSION,
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "tierName": tier_name, "members": members},
    }
    return msgspec.convert(doc, hypernodes.HyperNode)


def fabric() -> list[hypernodes.HyperNode]:
    """The racks, blocks and zones of tests.loop.test_topology_scenarios.datacenter as HyperNodes."""
    out = [hypernode(f"leaf-{rack}", 1, rack_members(rack), "leaf") for rack in RACKS]
    for block in sorted({r[:4] for r in RACKS}):
        racks = [
            {"type": "HyperNode", "selector": {"exactMatch": {"name": f"leaf-{r}"}}} for r in RACKS if r[:4] == block
        ]
        out.append(hypernode(f"spine-{block}", 2, racks, "spine"))
    for zone in ("z1", "z2"):
        blocks = [{"type": "HyperNode", "selector": {"exactMatch": {"name": f"spine-{zone}b{b}"}}} for b in (1, 2)]
        out.append(hypernode(f"core-{zone}", 3, blocks, "core"))
    return out


def volcano_gang(berth: Berth, name: str, count: int, **network: Any) -> None:
    berth.core.on_pod_group(
        model.PodGroup(
            api_version="scheduling.volcano.sh/v1beta1",
            metadata=model.ObjectMeta(name=name, namespace="default"),
            spec=model.PodGroupSpec(min_member=count, network_topology=model.NetworkTopologySpec(**network)),
        )
    )
    berth.pods(
        *(
            make_pod(
                f"{name}-{i}",
                scheduler_name="berth",
                annotations={"scheduling.k8s.io/group-name": name},
                requests={"cpu": "2"},
            )
            for i in range(count)
        )
    )


def with_fabric(berth: Berth) -> None:
    for obj in fabric():
        berth.core.on_hypernode(obj)


@pytest.mark.parametrize("keep", ["z1b2r1", "z2b1r2", "z2b2r2"], ids=["by-label", "by-regex", "by-name"])
async def test_a_hard_tier_one_gang_lands_in_one_tier_one_hypernode(keep: str) -> None:
    async with running(make_config(volcanoHyperNodes=True)) as berth:
        assert "TopologyGang" in berth.core.framework_for("berth").plugins
        berth.nodes(*datacenter())
        with_fabric(berth)
        assert [(t.name, t.labels[0], t.labels[-2]) for t in berth.core.topologies] == [
            ("volcano-hypernodes", "topology.volcano.sh/tier-3", "topology.volcano.sh/tier-1")
        ]
        fragment(berth, keep={keep})
        volcano_gang(berth, "v", 8, mode="hard", highest_tier_allowed=1)
        await berth.settle()
        assert set(placed(berth, "v", "rack").values()) == {keep}
        assert len(placed(berth, "v", "rack")) == 8


async def test_no_tier_one_hypernode_big_enough_binds_nothing_and_says_why() -> None:
    async with running(make_config(volcanoHyperNodes=True)) as berth:
        berth.nodes(*datacenter())
        with_fabric(berth)
        fragment(berth, keep=())
        volcano_gang(berth, "v", 8, mode="hard", highest_tier_allowed=1)
        await asyncio.sleep(30)
        assert placed(berth, "v", "rack") == {}
        message = berth.scheduler.last_message(berth.cluster.pods["default/v-0"].metadata.uid)
        assert "no domain of topology level topology.volcano.sh/tier-1 can hold the gang's 8 unplaced pods" in message
        assert "topology.volcano.sh/tier-1=leaf-" in message


async def test_highest_tier_name_maps_by_the_hypernodes_tier_name() -> None:
    async with running(make_config(volcanoHyperNodes=True)) as berth:
        berth.nodes(*datacenter())
        with_fabric(berth)
        fragment(berth, keep=())  # no rack holds 8 members; every block holds 14
        volcano_gang(berth, "v", 8, mode="hard", highest_tier_name="spine")
        await berth.settle()
        assert len(placed(berth, "v", "block")) == 8
        assert len(set(placed(berth, "v", "block").values())) == 1


async def test_hypernodes_arriving_wake_the_waiting_gang_and_leaving_take_the_topology_away() -> None:
    async with running(make_config(volcanoHyperNodes=True)) as berth:
        berth.nodes(*datacenter())
        fragment(berth, keep={"z1b1r2"})
        volcano_gang(berth, "v", 8, mode="hard", highest_tier_allowed=1)
        await asyncio.sleep(5)
        assert placed(berth, "v", "rack") == {}
        message = berth.scheduler.last_message(berth.cluster.pods["default/v-0"].metadata.uid)
        assert "spec.networkTopology: no topology is configured" in message
        with_fabric(berth)
        await berth.settle()
        assert set(placed(berth, "v", "rack").values()) == {"z1b1r2"}
        for obj in fabric():
            berth.core.on_hypernode_delete(obj.metadata.name)
        assert list(berth.core.topologies) == []


def test_the_cluster_file_declares_hypernodes() -> None:
    docs = [msgspec.to_builtins(obj) for obj in fabric()]
    objects = manifests.parse_documents(docs)
    assert len(objects.hypernodes) == len(RACKS) + 4 + 2
    berth_app = app.build(config.parse({"volcanoHyperNodes": True}))
    berth_app.cluster.load(manifests.Manifests(nodes=datacenter(), hypernodes=objects.hypernodes))
    assert berth_app.core.topologies[0].labels == (
        "topology.volcano.sh/tier-3",
        "topology.volcano.sh/tier-2",
        "topology.volcano.sh/tier-1",
        "kubernetes.io/hostname",
    )
    col = berth_app.core.cache.table.label_column("topology.volcano.sh/tier-2")
    assert sorted(col.values) == ["spine-z1b1", "spine-z1b2", "spine-z2b1", "spine-z2b2"]
