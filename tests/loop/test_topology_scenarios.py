"""Issue 30's topology scenarios, run by the loop in virtual time: four levels
(zone, block, rack, host) fragmented so only one rack holds an 8-pod gang;
preferred falling back level by level; slices; each dialect once (KAI,
Volcano, the Workload API, Berth's own); the domain sticking across retries;
the balanced choice; members packed inside their domain; and upstream's
KEP-5732 placement cases (v1.37.2 ``pkg/scheduler/framework/plugins/
topologyaware/topology_placement_test.go``) where their semantics match."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import msgspec

from berth import app, config
from berth.cluster import manifests, model, workload_api
from berth.cluster import topologies as cluster_topologies
from berth.gangs import topology as tp
from berth.plugins.topology_gang import Choice, TopologyGang
from berth.quota.tree import LABEL_QUEUE
from berth.scheduling import visibility, whatif
from berth.testing import make_node, make_pod
from tests.loop.conftest import Berth, make_config, running

HOST = tp.HOSTNAME
LEVELS = ("zone", "block", "rack", HOST)


def four_levels(**extra: object) -> config.BerthConfiguration:
    return make_config(topology={"levels": [{"nodeLabel": lv} for lv in LEVELS]}, **extra)


def host(name: str, zone: str, block: str, rack: str, cpu: str = "4") -> model.Node:
    return make_node(name, cpu=cpu, pods=110, labels={HOST: name, "zone": zone, "block": block, "rack": rack})


def datacenter(cpu: str = "4") -> list[model.Node]:
    """2 zones x 2 blocks x 2 racks x 4 hosts of ``cpu`` each (32 hosts)."""
    return [
        host(f"z{z}b{b}r{r}h{h}", f"z{z}", f"z{z}b{b}", f"z{z}b{b}r{r}", cpu)
        for z in (1, 2)
        for b in (1, 2)
        for r in (1, 2)
        for h in (1, 2, 3, 4)
    ]


def filler(node: str, cpu: str = "1") -> model.Pod:
    return make_pod(f"fill-{node}", requests={"cpu": cpu}, node_name=node)


def member(
    gang: str, i: int, count: int, annotations: dict[str, str] | None = None, *, cpu: str = "2", **kw: object
) -> model.Pod:
    """A member of a Kueue pod group; ``annotations`` carry the topology request."""
    return make_pod(
        f"{gang}-{i}",
        scheduler_name="berth",
        labels={"kueue.x-k8s.io/pod-group-name": gang},
        annotations={
            "kueue.x-k8s.io/pod-group-total-count": str(count),
            tp.COMPLETION_INDEX_ANNOTATION: str(i),
            **(annotations or {}),
        },
        requests={"cpu": cpu},
    )


def gang(name: str, count: int, annotations: dict[str, str], cpu: str = "2") -> list[model.Pod]:
    return [member(name, i, count, annotations, cpu=cpu) for i in range(count)]


def placed(berth: Berth, name: str, label: str) -> dict[str, str]:
    """Each bound member of gang ``name`` -> its node's ``label``."""
    nodes = berth.cluster.nodes
    return {k: nodes[n].metadata.labels[label] for k, n in berth.bound().items() if k.startswith(f"default/{name}-")}


def domains(berth: Berth, name: str, label: str) -> set[str]:
    return set(placed(berth, name, label).values())


def plugin(berth: Berth) -> TopologyGang:
    p = berth.core.framework_for("berth").plugins["TopologyGang"]
    assert isinstance(p, TopologyGang)
    return p


def fragment(berth: Berth, keep: Iterable[str]) -> None:
    """A 1-cpu pod on one host of every rack but ``keep``: no other rack has 16 free cpu."""
    kept = set(keep)
    berth.pods(
        *(
            filler(n.metadata.name)
            for n in datacenter()
            if n.metadata.name.endswith("h1") and n.metadata.labels["rack"] not in kept
        )
    )


async def test_only_one_rack_of_a_fragmented_four_level_cluster_holds_the_8_pod_gang() -> None:
    async with running(four_levels()) as berth:
        berth.nodes(*datacenter())
        fragment(berth, keep={"z2b1r2"})
        await berth.settle()
        berth.pods(*gang("g", 8, {tp.REQUIRED_ANNOTATION: "rack"}))
        await berth.settle()
        assert len(placed(berth, "g", "rack")) == 8
        assert domains(berth, "g", "rack") == {"z2b1r2"}


async def test_a_required_rack_gang_waits_whole_when_no_rack_holds_it_and_says_per_rack_what_fits() -> None:
    async with running(four_levels()) as berth:
        berth.nodes(*datacenter())
        fragment(berth, keep=())
        berth.pods(*gang("g", 8, {tp.REQUIRED_ANNOTATION: "rack"}))
        await asyncio.sleep(30)
        assert placed(berth, "g", "rack") == {}
        message = berth.scheduler.last_message(berth.cluster.pods["default/g-0"].metadata.uid)
        assert "no domain of topology level rack can hold the gang's 8 unplaced pods" in message
        assert "holds 7" in message and "7 of 8 members fit" in message


async def test_preferred_falls_back_level_by_level() -> None:
    async with running(four_levels()) as berth:
        berth.nodes(*datacenter())
        fragment(berth, keep=())  # no rack holds 8; every block holds 14 members
        berth.pods(*gang("b", 8, {tp.PREFERRED_ANNOTATION: "rack"}))
        await berth.settle()
        assert len(placed(berth, "b", "rack")) == 8
        assert len(domains(berth, "b", "block")) == 1
        assert len(domains(berth, "b", "rack")) == 2
        # 16 members of 2 cpu: no block (at most 28 cpu free now) holds them; a zone does.
        berth.pods(*gang("z", 16, {tp.PREFERRED_ANNOTATION: "rack"}))
        await berth.settle()
        assert len(placed(berth, "z", "zone")) == 16
        assert len(domains(berth, "z", "zone")) == 1
        # 40 members: no zone holds them; preferred places them anywhere.
        berth.pods(*gang("a", 20, {tp.PREFERRED_ANNOTATION: "rack"}, cpu="1"))
        await berth.settle()
        assert len(placed(berth, "a", "zone")) == 20


async def test_slices_each_in_one_rack_all_in_one_block() -> None:
    slices = {tp.REQUIRED_ANNOTATION: "block", tp.SLICE_REQUIRED_ANNOTATION: "rack", tp.SLICE_SIZE_ANNOTATION: "4"}
    async with running(four_levels()) as berth:
        berth.nodes(*datacenter())
        # Every rack has room for 6 members (12 of 16 cpu): 8 members take two racks.
        berth.pods(*(filler(n.metadata.name, "4") for n in datacenter() if n.metadata.name.endswith("h1")))
        berth.pods(*gang("s", 8, slices))
        await berth.settle()
        by_rack = placed(berth, "s", "rack")
        assert len(by_rack) == 8
        assert len(domains(berth, "s", "block")) == 1
        # Members 0-3 share a rack, 4-7 share another.
        first = {by_rack[f"default/s-{i}"] for i in range(4)}
        second = {by_rack[f"default/s-{i}"] for i in range(4, 8)}
        assert len(first) == 1 and len(second) == 1 and first != second


async def test_a_slice_no_rack_holds_keeps_the_gang_waiting() -> None:
    slices = {tp.SLICE_REQUIRED_ANNOTATION: "rack", tp.SLICE_SIZE_ANNOTATION: "8"}
    async with running(four_levels()) as berth:
        berth.nodes(*datacenter())
        fragment(berth, keep=())
        berth.pods(*gang("s", 8, slices))
        await asyncio.sleep(30)
        assert placed(berth, "s", "rack") == {}


async def test_kai_annotations_preferred_rack_within_required_block() -> None:
    kai = {
        tp.KAI_REQUIRED_ANNOTATION: "block",
        tp.KAI_PREFERRED_ANNOTATION: "rack",
        tp.KAI_TOPOLOGY_ANNOTATION: "default",
    }
    async with running(four_levels()) as berth:
        berth.nodes(*datacenter())
        fragment(berth, keep=("z1b2r1",))
        berth.pods(*gang("k", 8, kai))
        await berth.settle()
        assert domains(berth, "k", "rack") == {"z1b2r1"}
        # 12 members: no rack holds them, a block does (required: never wider).
        berth.pods(*gang("w", 12, kai))
        await berth.settle()
        assert len(placed(berth, "w", "rack")) == 12
        assert len(domains(berth, "w", "block")) == 1


async def test_berths_own_annotation() -> None:
    async with running(four_levels()) as berth:
        berth.nodes(*datacenter())
        fragment(berth, keep=("z1b1r2",))
        berth.pods(*gang("o", 8, {tp.BERTH_REQUIRED_ANNOTATION: "rack"}))
        await berth.settle()
        assert domains(berth, "o", "rack") == {"z1b1r2"}


async def test_volcano_network_topology_hard_tier_one_is_a_rack() -> None:
    async with running(four_levels()) as berth:
        berth.nodes(*datacenter())
        fragment(berth, keep=("z2b2r1",))
        berth.core.on_pod_group(
            model.PodGroup(
                api_version="scheduling.volcano.sh/v1beta1",
                metadata=model.ObjectMeta(name="v", namespace="default"),
                spec=model.PodGroupSpec(
                    min_member=8, network_topology=model.NetworkTopologySpec(mode="hard", highest_tier_allowed=1)
                ),
            )
        )
        berth.pods(
            *(
                make_pod(
                    f"v-{i}",
                    scheduler_name="berth",
                    annotations={"scheduling.k8s.io/group-name": "v"},
                    requests={"cpu": "2"},
                )
                for i in range(8)
            )
        )
        await berth.settle()
        assert domains(berth, "v", "rack") == {"z2b2r1"}
        assert len(placed(berth, "v", "rack")) == 8


async def test_workload_api_scheduling_constraints_topology() -> None:
    async with running(four_levels(featureGates={"GenericWorkload": True})) as berth:
        berth.nodes(*datacenter())
        fragment(berth, keep=("z1b1r1",))
        berth.core.on_scheduling_group(
            workload_api.decode(
                {
                    "apiVersion": "scheduling.k8s.io/v1alpha3",
                    "kind": "PodGroup",
                    "metadata": {"name": "w", "namespace": "default", "generation": 1},
                    "spec": {
                        "schedulingPolicy": {"gang": {"minCount": 8}},
                        "schedulingConstraints": {"topology": [{"key": "rack"}]},
                    },
                }
            )
        )
        berth.pods(
            *(
                make_pod(
                    f"w-{i}",
                    scheduler_name="berth",
                    requests={"cpu": "2"},
                    spec={"schedulingGroup": {"podGroupName": "w"}},
                )
                for i in range(8)
            )
        )
        await berth.settle()
        assert len(placed(berth, "w", "rack")) == 8
        assert domains(berth, "w", "rack") == {"z1b1r1"}


async def test_the_domain_sticks_to_the_gang_across_retries() -> None:
    async with running(make_config(topology={"levels": [{"nodeLabel": "rack"}, {"nodeLabel": HOST}]})) as berth:
        berth.nodes(
            *(make_node(f"a{i}", cpu="4", pods=110, labels={HOST: f"a{i}", "rack": "ra"}) for i in range(2)),
            *(make_node(f"b{i}", cpu="4", pods=110, labels={HOST: f"b{i}", "rack": "rb"}) for i in range(3)),
        )
        p = plugin(berth)
        # The gang was last given rack rb (a preemptor cleared it, say); both
        # racks hold it and BestFit alone would pick the tighter ra.
        key = berth.core.gangs.member_of(member("g", 0, 4))
        assert key is not None
        p.pin(key.key, Choice("rack", "rb"))
        berth.pods(*gang("g", 4, {tp.REQUIRED_ANNOTATION: "rack"}))
        await berth.settle()
        assert domains(berth, "g", "rack") == {"rb"}


async def test_a_sticky_domain_that_no_longer_holds_the_gang_is_left() -> None:
    async with running(make_config(topology={"levels": [{"nodeLabel": "rack"}, {"nodeLabel": HOST}]})) as berth:
        berth.nodes(
            *(make_node(f"a{i}", cpu="4", pods=110, labels={HOST: f"a{i}", "rack": "ra"}) for i in range(2)),
            make_node("b0", cpu="4", pods=110, labels={HOST: "b0", "rack": "rb"}),
        )
        key = berth.core.gangs.member_of(member("g", 0, 4))
        assert key is not None
        plugin(berth).pin(key.key, Choice("rack", "rb"))
        berth.pods(*gang("g", 4, {tp.REQUIRED_ANNOTATION: "rack"}))
        await berth.settle()
        assert domains(berth, "g", "rack") == {"ra"}


async def test_balanced_picks_the_emptiest_domain_bestfit_the_tightest() -> None:
    for choice, expected in (("BestFit", "small"), ("Balanced", "big")):
        cfg = make_config(
            topology={"levels": [{"nodeLabel": "rack"}, {"nodeLabel": HOST}]},
            profiles=[
                {"schedulerName": "berth", "pluginConfig": [{"name": "TopologyGang", "args": {"domainChoice": choice}}]}
            ],
        )
        async with running(cfg) as berth:
            berth.nodes(
                *(make_node(f"s{i}", cpu="4", pods=110, labels={HOST: f"s{i}", "rack": "small"}) for i in range(2)),
                *(make_node(f"b{i}", cpu="4", pods=110, labels={HOST: f"b{i}", "rack": "big"}) for i in range(4)),
            )
            berth.pods(*gang("g", 4, {tp.REQUIRED_ANNOTATION: "rack"}))
            await berth.settle()
            assert domains(berth, "g", "rack") == {expected}, choice


async def test_members_are_packed_inside_their_domain() -> None:
    async with running(make_config(topology={"levels": [{"nodeLabel": "rack"}, {"nodeLabel": HOST}]})) as berth:
        berth.nodes(*(make_node(f"a{i}", cpu="8", pods=110, labels={HOST: f"a{i}", "rack": "ra"}) for i in range(4)))
        berth.pods(*gang("g", 4, {tp.REQUIRED_ANNOTATION: "rack"}))
        await berth.settle()
        # 4 members of 2 cpu fill one 8-cpu host rather than spreading over four.
        assert len(domains(berth, "g", HOST)) == 1


# ---------------------------------------------------------------- KEP-5732 (v1.37.2 topology_placement_test.go)


async def test_kep5732_only_nodes_with_the_key_are_domains() -> None:
    """'with topology key constraint, returns placement for each topology
    domain': nodes without the key are never used; the domains are d1, d2, d3."""
    async with running(make_config(topology={"levels": [{"nodeLabel": "topology1"}, {"nodeLabel": HOST}]})) as berth:
        labels = [
            ("topology2", "d1"),
            ("topology2", "d4"),
            ("topology1", "d1"),
            ("topology1", "d2"),
            ("topology1", "d1"),
            ("topology1", "d3"),
        ]
        berth.nodes(
            *(
                make_node(f"node{i}", cpu="2", pods=110, labels={HOST: f"node{i}", k: v})
                for i, (k, v) in enumerate(labels)
            )
        )
        berth.pods(*gang("g", 3, {tp.REQUIRED_ANNOTATION: "topology1"}))  # 6 cpu: no domain holds it
        await asyncio.sleep(30)
        assert berth.bound() == {}
        reports = plugin(berth).domain_reports(berth.cluster.pods["default/g-0"], berth.core.snapshot())
        assert sorted(r.value for r in reports) == ["d1", "d2", "d3"]


async def test_kep5732_without_a_matching_label_nothing_is_placed() -> None:
    """'without matching topology label, returns empty'."""
    async with running(make_config(topology={"levels": [{"nodeLabel": "topology3"}, {"nodeLabel": HOST}]})) as berth:
        berth.nodes(make_node("node0", cpu="8", pods=110, labels={HOST: "node0", "topology1": "d1"}))
        berth.pods(*gang("g", 2, {tp.REQUIRED_ANNOTATION: "topology3"}))
        await asyncio.sleep(30)
        assert berth.bound() == {}
        message = berth.scheduler.last_message(berth.cluster.pods["default/g-0"].metadata.uid)
        assert "no schedulable node has the label topology3" in message


async def test_kep5732_members_already_scheduled_pin_their_domain() -> None:
    """'with pods already scheduled in a single domain, returns that domain'."""
    async with running(make_config(topology={"levels": [{"nodeLabel": "topology"}, {"nodeLabel": HOST}]})) as berth:
        berth.nodes(
            make_node("node0", cpu="8", pods=110, labels={HOST: "node0", "topology": "d2"}),
            make_node("node1", cpu="8", pods=110, labels={HOST: "node1", "topology": "d1"}),
            make_node("node2", cpu="2", pods=110, labels={HOST: "node2", "topology": "d1"}),
        )
        members = gang("g", 3, {tp.REQUIRED_ANNOTATION: "topology"})
        members[0].spec.node_name = "node2"
        berth.pods(*members)
        await berth.settle()
        assert domains(berth, "g", "topology") == {"d1"}
        assert len(berth.bound()) == 3


async def test_kep5732_members_scheduled_in_two_domains_place_no_more() -> None:
    """'with pods already scheduled in conflicting domains, returns error'."""
    async with running(make_config(topology={"levels": [{"nodeLabel": "topology"}, {"nodeLabel": HOST}]})) as berth:
        berth.nodes(
            make_node("node1", cpu="8", pods=110, labels={HOST: "node1", "topology": "d1"}),
            make_node("node2", cpu="8", pods=110, labels={HOST: "node2", "topology": "d0"}),
        )
        members = gang("g", 3, {tp.REQUIRED_ANNOTATION: "topology"})
        members[0].spec.node_name = "node1"
        members[1].spec.node_name = "node2"
        berth.pods(*members)
        await asyncio.sleep(30)
        assert "default/g-2" not in berth.bound()
        message = berth.scheduler.last_message(berth.cluster.pods["default/g-2"].metadata.uid)
        assert "its placed members' domain has no room" in message


# ---------------------------------------------------------------- explanations


async def test_why_says_per_domain_what_fits_and_that_the_queue_is_over_max() -> None:
    cfg = four_levels(queues=[{"name": "research", "max": {"cpu": "8"}}])
    async with running(cfg) as berth:
        berth.nodes(*datacenter())
        fragment(berth, keep=())  # every rack holds 7 members
        pods = gang("g", 8, {tp.PREFERRED_ANNOTATION: "rack"})
        for p in pods:
            p.metadata.labels[LABEL_QUEUE] = "research"
        berth.pods(*pods)
        await berth.settle()
        assert placed(berth, "g", "rack") == {}
        w = visibility.why(berth.core, "default/g-0")
        topo = [b for b in w.blockers if b.kind == "topology"]
        assert len(topo) == 1, w.blockers
        assert topo[0].message.startswith("rack=z1b1r1: 7 of 8 members fit; ")
        assert topo[0].message.endswith(
            "block=z1b1: all 8 members fit but gang default/g (8 pods): queue research: "
            "requests 16 cpu, more than its max 8"
        )


async def test_whatif_places_a_topology_gangs_replicas_in_one_domain() -> None:
    async with running(four_levels()) as berth:
        berth.nodes(*datacenter())
        fragment(berth, keep={"z2b2r1"})
        template = member("t", 0, 8, {tp.REQUIRED_ANNOTATION: "rack"})
        answer = await whatif.whatif(berth.core, template, 8)
        assert answer.fit == 8
        racks = {berth.cluster.nodes[p.node].metadata.labels["rack"] for p in answer.placements}
        assert racks == {"z2b2r1"}
        # Nine do not fit in any rack: the answer says so, per rack.
        answer = await whatif.whatif(berth.core, template, 9)
        assert answer.fit == 0
        assert "no domain of topology level rack can hold the gang's 9 unplaced pods" in answer.limited_by
        assert not any(k.startswith("default/t-") for k in berth.bound())


# ---------------------------------------------------------------- Kueue Topology objects


def kueue_topology(
    name: str, *levels: str, api_version: str = "kueue.x-k8s.io/v1beta2"
) -> cluster_topologies.KueueTopology:
    return msgspec.convert(
        {
            "apiVersion": api_version,
            "kind": "Topology",
            "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": lv} for lv in levels]},
        },
        cluster_topologies.KueueTopology,
    )


async def test_a_kueue_topology_object_gives_the_levels_and_wakes_the_waiting_gang() -> None:
    async with running(make_config(kueueTopologies=True)) as berth:
        assert "TopologyGang" in berth.core.framework_for("berth").plugins
        berth.nodes(*datacenter())
        fragment(berth, keep={"z1b2r2"})
        berth.pods(*gang("g", 8, {tp.REQUIRED_ANNOTATION: "rack"}))
        await asyncio.sleep(5)
        assert placed(berth, "g", "rack") == {}
        message = berth.scheduler.last_message(berth.cluster.pods["default/g-0"].metadata.uid)
        assert "'rack' is not a level of any configured topology (levels: none)" in message
        berth.core.on_topology(
            kueue_topology("dc", "zone", "block", "rack", HOST, api_version="kueue.x-k8s.io/v1beta1")
        )
        await berth.settle()
        assert domains(berth, "g", "rack") == {"z1b2r2"}
        assert len(placed(berth, "g", "rack")) == 8
        berth.core.on_topology_delete("dc")
        assert list(berth.core.topologies) == []


async def test_a_kueue_topology_kueue_would_refuse_or_named_as_a_configured_one_is_left_out() -> None:
    async with running(four_levels(kueueTopologies=True)) as berth:
        berth.core.on_topology(kueue_topology("bad", "rack", "rack"))
        berth.core.on_topology(kueue_topology("default", "rack"))
        assert [t.name for t in berth.core.topologies] == ["default"]
        assert berth.core.topologies[0].labels == LEVELS


def test_the_cluster_file_declares_kueue_topologies() -> None:
    docs = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Topology",
            "metadata": {"name": "dc"},
            "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": HOST}]},
        }
    ]
    objects = manifests.parse_documents(docs)
    assert [(t.metadata.name, [lv.node_label for lv in t.spec.levels]) for t in objects.topologies] == [
        ("dc", ["rack", HOST])
    ]
    berth_app = app.build(config.parse({"kueueTopologies": True}))
    berth_app.cluster.load(objects)
    assert [(t.name, t.labels) for t in berth_app.core.topologies] == [("dc", ("rack", HOST))]
