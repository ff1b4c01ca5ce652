"""The loop places, gates, retries and preempts with kube-scheduler's semantics."""

from __future__ import annotations

import asyncio

import msgspec

from berth.cluster import model
from berth.framework.decision import DecisionKind
from berth.testing import make_node, make_pod
from tests.loop.conftest import Berth, make_config, running


def add_gang(berth: Berth, name: str, *, min_member: int) -> None:
    group = model.PodGroup(
        metadata=model.ObjectMeta(name=name, namespace="default"), spec=model.PodGroupSpec(min_member=min_member)
    )
    berth.core.on_pod_group(group)


def berth_pod(name: str, **kw: object) -> model.Pod:
    return make_pod(name, scheduler_name="berth", **kw)  # type: ignore[arg-type]


async def test_pods_are_bound_without_overcommitting_any_node(berth: Berth) -> None:
    berth.nodes(*(make_node(f"n{i}", cpu="2", memory="8Gi", pods=110) for i in range(3)))
    berth.pods(*(berth_pod(f"p{i}", requests={"cpu": "1"}) for i in range(7)))
    await berth.settle()
    bound = berth.bound()
    assert len(bound) == 6
    assert sorted(bound.values()).count("n0") == 2
    (left,) = [k for k in berth.cluster.pods if k not in bound]
    assert berth.phase(left) == "Unschedulable"
    d = berth.decision(left)
    assert d.message == (
        "0/3 nodes are available: 3 Insufficient cpu. "
        "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    )
    assert (left, "FailedScheduling", d.message) in berth.cluster.events


async def test_other_schedulers_pods_are_left_alone_but_count_on_their_node(berth: Berth) -> None:
    berth.nodes(make_node("n0", cpu="2", pods=110))
    berth.pods(
        make_pod("theirs", requests={"cpu": "1500m"}, node_name="n0", scheduler_name="default-scheduler"),
        make_pod("pending-theirs", requests={"cpu": "1"}, scheduler_name="default-scheduler"),
        berth_pod("mine", requests={"cpu": "1"}),
    )
    await berth.settle()
    assert berth.node_of("default/pending-theirs") == ""
    assert berth.phase("default/pending-theirs") == ""  # never queued by Berth
    assert berth.node_of("default/mine") == ""  # 1.5 + 1 > 2
    assert "Insufficient cpu" in berth.decision("default/mine").message


async def test_legacy_scheduler_annotation_selects_the_profile(berth: Berth) -> None:
    berth.nodes(make_node("n0", cpu="2", pods=110))
    pod = make_pod("legacy")
    pod.metadata.annotations = {"scheduler.alpha.kubernetes.io/name": "berth"}
    berth.pods(pod)
    await berth.settle()
    assert berth.node_of("default/legacy") == "n0"


async def test_an_unschedulable_pod_is_retried_when_a_node_arrives(berth: Berth) -> None:
    berth.nodes(make_node("small", cpu="1", pods=110))
    berth.pods(berth_pod("big", requests={"cpu": "4"}))
    await berth.settle()
    assert berth.phase("default/big") == "Unschedulable"
    berth.nodes(make_node("large", cpu="8", pods=110))
    await berth.settle()
    assert berth.node_of("default/big") == "large"


async def test_gated_pod_waits_and_is_scheduled_once_its_gates_are_removed(berth: Berth) -> None:
    berth.nodes(make_node("n0", cpu="2", pods=110))
    gated = berth_pod("gated", spec={"schedulingGates": [{"name": "example.com/wait"}]})
    berth.pods(gated)
    await berth.settle()
    assert berth.phase("default/gated") == "Gated"
    assert berth.core.metrics.registry.get_sample_value("scheduler_pending_pods", {"queue": "gated"}) == 1
    assert berth.decision("default/gated").kind == DecisionKind.GATED
    berth.pods(msgspec.structs.replace(gated, spec=msgspec.structs.replace(gated.spec, scheduling_gates=[])))
    await berth.settle()
    assert berth.node_of("default/gated") == "n0"
    assert berth.core.metrics.registry.get_sample_value("scheduler_pending_pods", {"queue": "gated"}) == 0


async def test_higher_priority_pod_preempts_the_lowest_priority_victims(berth: Berth) -> None:
    berth.nodes(make_node("n0", cpu="2", pods=110))
    berth.pods(
        make_pod("low-a", requests={"cpu": "1"}, node_name="n0", priority=1),
        make_pod("low-b", requests={"cpu": "1"}, node_name="n0", priority=5),
    )
    berth.pods(berth_pod("vip", requests={"cpu": "1"}, priority=100))
    await berth.settle()
    await berth.settle()
    assert berth.node_of("default/vip") == "n0"
    assert [k for k, _ in berth.cluster.evictions] == ["default/low-a"]  # lowest priority, and one is enough
    assert "default/low-b" in berth.cluster.pods


async def test_preemption_policy_never_does_not_preempt(berth: Berth) -> None:
    berth.nodes(make_node("n0", cpu="1", pods=110))
    berth.pods(make_pod("low", requests={"cpu": "1"}, node_name="n0", priority=1))
    berth.pods(berth_pod("polite", requests={"cpu": "1"}, priority=100, spec={"preemptionPolicy": "Never"}))
    await berth.settle()
    assert berth.cluster.evictions == []
    # kube-scheduler's FitError plus the PostFilter message (v1.37: no
    # DynamicResources reason for a pod without claims).
    assert berth.decision("default/polite").message == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."
    )


async def test_gang_waits_for_min_member_then_binds_all_together() -> None:
    async with running() as berth:
        berth.nodes(*(make_node(f"n{i}", cpu="4", pods=110) for i in range(2)))
        add_gang(berth, "g", min_member=3)
        member = {"scheduling.x-k8s.io/pod-group": "g"}
        berth.pods(
            berth_pod("m0", labels=member, requests={"cpu": "1"}), berth_pod("m1", labels=member, requests={"cpu": "1"})
        )
        await berth.settle()
        assert berth.bound() == {}
        assert berth.phase("default/m0") == "Gated"
        berth.pods(berth_pod("m2", labels=member, requests={"cpu": "1"}))
        await berth.settle()
        assert sorted(berth.bound()) == ["default/m0", "default/m1", "default/m2"]


async def test_a_gang_that_cannot_fit_binds_no_member_and_backs_off() -> None:
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="4", pods=110))
        add_gang(berth, "g", min_member=3)
        member = {"scheduling.x-k8s.io/pod-group": "g"}
        berth.pods(*(berth_pod(f"m{i}", labels=member, requests={"cpu": "2"}) for i in range(3)))
        # Two members fit and wait at Permit; the third fits nowhere, and its
        # PostFilter rejects the waiting two, releasing what they assumed.
        # Their room freed wakes the others (handleBindingCycleError's
        # AssignedPod/Delete) and SchedulerPopFromBackoffQ pops them at once:
        # without Coscheduling's group backoff (10 s) the gang retried
        # without pause, thousands of attempts a minute. (125 s: mid-backoff.)
        await asyncio.sleep(125)
        assert berth.bound() == {}
        assert berth.cluster.bindings == []
        attempts = [berth.scheduler.queue.get(berth.cluster.pods[f"default/m{i}"].metadata.uid) for i in range(3)]
        assert all(a is not None and 5 <= a.attempts <= 2 * 125 / 10 + 2 for a in attempts), [
            a and a.attempts for a in attempts
        ]
        assert {berth.phase(f"default/m{i}") for i in range(3)} == {"Gated"}  # held for the backoff


async def test_a_gang_that_failed_is_tried_again_when_its_backoff_ends() -> None:
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="4", pods=110))
        add_gang(berth, "g", min_member=3)
        member = {"scheduling.x-k8s.io/pod-group": "g"}
        berth.pods(*(berth_pod(f"m{i}", labels=member, requests={"cpu": "2"}) for i in range(3)))
        await asyncio.sleep(1)
        assert berth.bound() == {}
        # Room arrives during the backoff: the gang waits for it to end, then
        # its members are activated together (no cluster event needed).
        berth.nodes(make_node("n1", cpu="4", pods=110))
        await asyncio.sleep(5)
        assert berth.bound() == {}
        await asyncio.sleep(10)
        assert sorted(berth.bound()) == ["default/m0", "default/m1", "default/m2"]


async def test_binding_failure_forgets_the_pod_and_requeues_it(berth: Berth) -> None:
    berth.nodes(make_node("n0", cpu="2", pods=110))
    real_bind = berth.cluster.bind
    calls = 0

    async def flaky(pod: model.Pod, node: str) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            from berth.cluster.sources import BindError

            raise BindError("apiserver hiccup")
        await real_bind(pod, node)

    berth.cluster.bind = flaky  # type: ignore[method-assign]
    berth.pods(berth_pod("p", requests={"cpu": "1"}))
    await berth.settle()
    assert berth.node_of("default/p") == "n0"
    assert calls == 2
    assert berth.core.cache.assumed_count == 0


async def test_randomize_top_n_spreads_choices_among_the_best_nodes() -> None:
    cfg = make_config(profiles=[{"schedulerName": "berth", "randomizeTopN": 3}])
    async with running(cfg) as berth:
        berth.nodes(*(make_node(f"n{i}", cpu="100", memory="100Gi", pods=500) for i in range(3)))
        berth.pods(*(berth_pod(f"p{i}", requests={"cpu": "10m"}) for i in range(30)))
        await berth.settle()
        assert len(set(berth.bound().values())) == 3


async def test_deleting_a_pending_pod_removes_it_from_the_queue(berth: Berth) -> None:
    berth.pods(berth_pod("ghost", requests={"cpu": "1"}))
    await berth.settle()
    uid = berth.cluster.pods["default/ghost"].metadata.uid
    assert uid in berth.scheduler.queue
    berth.cluster.delete_pods(["default/ghost"])
    assert uid not in berth.scheduler.queue


ZONES = {"a0": "za", "a1": "za", "b0": "zb", "c0": "zc"}


def zone_nodes() -> list[model.Node]:
    return [
        make_node(
            n, cpu="8", memory="16Gi", pods=110, labels={"topology.kubernetes.io/zone": z, "kubernetes.io/hostname": n}
        )
        for n, z in ZONES.items()
    ]


async def test_topology_spread_keeps_zones_within_max_skew(berth: Berth) -> None:
    berth.nodes(*zone_nodes())
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "s"}},
        }
    ]
    berth.pods(*(berth_pod(f"s{i}", labels={"app": "s"}, spec={"topologySpreadConstraints": spread}) for i in range(6)))
    await berth.settle()
    per_zone: dict[str, int] = {}
    for node in berth.bound().values():
        per_zone[ZONES[node]] = per_zone.get(ZONES[node], 0) + 1
    assert per_zone == {"za": 2, "zb": 2, "zc": 2}


async def test_required_anti_affinity_puts_one_replica_per_node_and_leaves_the_rest_pending(berth: Berth) -> None:
    berth.nodes(*zone_nodes())
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "db"}}}
            ]
        }
    }
    berth.pods(*(berth_pod(f"db{i}", labels={"app": "db"}, spec={"affinity": anti}) for i in range(5)))
    await berth.settle()
    bound = berth.bound()
    assert sorted(bound.values()) == sorted(ZONES)
    (left,) = [k for k in berth.cluster.pods if k not in bound]
    assert "didn't match pod anti-affinity rules" in berth.decision(left).message


async def test_required_affinity_follows_the_pod_it_names(berth: Berth) -> None:
    berth.nodes(*zone_nodes())
    berth.pods(make_pod("cache", labels={"app": "cache"}, node_name="b0", scheduler_name="default-scheduler"))
    aff = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"app": "cache"}}}
            ]
        }
    }
    berth.pods(*(berth_pod(f"web{i}", spec={"affinity": aff}) for i in range(3)))
    await berth.settle()
    assert {berth.node_of(f"default/web{i}") for i in range(3)} == {"b0"}


async def test_waiting_gang_members_are_released_when_coschedulings_timeout_runs_out() -> None:
    """Two members fit and wait at Permit; the third stays behind a scheduling
    gate, so after Coscheduling's scheduleTimeoutSeconds (60 s by default, on
    the virtual clock) the waiting two are rejected and release their nodes."""
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="4", pods=110))
        add_gang(berth, "g", min_member=3)
        member = {"scheduling.x-k8s.io/pod-group": "g"}
        berth.pods(
            berth_pod("m0", labels=member, requests={"cpu": "1"}),
            berth_pod("m1", labels=member, requests={"cpu": "1"}),
            berth_pod("m2", labels=member, requests={"cpu": "1"}, spec={"schedulingGates": [{"name": "hold"}]}),
        )
        await asyncio.sleep(59)
        assert sorted(berth.scheduler.waiting.uids()) == ["uid-default-m0", "uid-default-m1"]
        assert berth.core.cache.assumed_count == 2
        await asyncio.sleep(2)
        # Rejected at 60 s: nothing was bound, and the FailedScheduling report says why.
        assert berth.bound() == {}
        timed_out = "rejected due to timeout after waiting 60s at plugin Coscheduling"
        assert any(timed_out in m for _, r, m in berth.cluster.events if r == "FailedScheduling"), berth.cluster.events
