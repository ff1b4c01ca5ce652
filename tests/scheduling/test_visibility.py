"""``berth get pods`` and ``berth why`` in the core: a running loop on an
embedded cluster, in virtual time — the five cases the issue names (gated,
over quota, gang incomplete, no node fits, waiting on preemption), and the
listing's phases, positions and filters."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from berth.cluster import model
from berth.errors import InvalidArgument, NotFound
from berth.quota.tree import LABEL_QUEUE
from berth.scheduling import visibility
from berth.testing import make_node, make_pod
from tests.loop.conftest import Berth, make_config, running

pytestmark = pytest.mark.looptime

GANG = {model.LABEL_POD_GROUP: "g"}


def pod(name: str, cpu: str = "1", **kw: Any) -> model.Pod:
    return make_pod(name, scheduler_name="berth", requests={"cpu": cpu}, **kw)


def add_gang(berth: Berth, name: str, *, min_member: int, timeout: int | None = None) -> None:
    spec = model.PodGroupSpec(min_member=min_member, schedule_timeout_seconds=timeout)
    berth.core.on_pod_group(model.PodGroup(metadata=model.ObjectMeta(name=name, namespace="default"), spec=spec))


def kinds(w: visibility.Why) -> list[str]:
    return [b.kind for b in w.blockers]


# ---------------------------------------------------------------- the five cases


async def test_why_a_gated_pod_names_its_scheduling_gates_and_what_frees_it() -> None:
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="4", pods=110))
        berth.pods(pod("held", spec={"schedulingGates": [{"name": "example.com/hold"}]}))
        await berth.settle()
        w = visibility.why(berth.core, "default/held")
        assert (w.phase, kinds(w)) == ("Gated", ["gate"])
        assert w.blockers[0].message == "waiting for scheduling gates: [example.com/hold]"
        assert w.blockers[0].unblocks_when == "frees when the scheduling gates are removed (example.com/hold)"
        assert w.summary == "waiting for scheduling gates: [example.com/hold]"


async def test_why_a_pod_over_its_queues_max_names_the_queue_the_resource_and_how_much_must_be_freed() -> None:
    async with running(make_config(queues=[{"name": "c", "max": {"cpu": "4"}}])) as berth:
        berth.nodes(*(make_node(f"n{i}", cpu="4", pods=110) for i in range(4)))
        berth.pods(*(pod(f"c{i}", labels={LABEL_QUEUE: "c"}) for i in range(5)))
        await berth.settle()
        (waiting,) = [k for k in (f"default/c{i}" for i in range(5)) if k not in berth.bound()]
        w = visibility.why(berth.core, waiting)
        assert (w.phase, w.queue, kinds(w)) == ("Unschedulable", "c", ["quota"])
        assert w.blockers[0].message == "queue c: cpu 5/4 over max"
        assert w.blockers[0].unblocks_when == "frees when 1 cpu is released in queue c"
        assert w.summary == "queue c: cpu 5/4 over max"


async def test_why_an_incomplete_gang_says_how_many_members_it_still_needs() -> None:
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="4", pods=110))
        add_gang(berth, "g", min_member=3)
        berth.pods(pod("m0", labels=GANG))
        await berth.settle()
        w = visibility.why(berth.core, "default/m0")
        assert (w.phase, kinds(w)) == ("Gated", ["gang"])
        assert w.blockers[0].message == "gang default/g has 1 of 3 required pods"
        assert w.blockers[0].unblocks_when == "needs 2 more members of gang default/g"


async def test_why_a_gang_member_waiting_at_permit_shows_members_placed_and_the_time_left() -> None:
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="4", pods=110))
        add_gang(berth, "g", min_member=3, timeout=30)
        berth.pods(
            pod("m0", labels=GANG),
            pod("m1", labels=GANG),
            pod("m2", labels=GANG, spec={"schedulingGates": [{"name": "hold"}]}),
        )
        await asyncio.sleep(10)
        w = visibility.why(berth.core, "default/m0")
        assert (w.phase, w.node, kinds(w)) == ("WaitingOnPermit", "n0", ["gang"])
        assert w.blockers[0].message.startswith("gang default/g: 2 of 3 members placed, this one waiting at Permit (")
        left = float(w.blockers[0].message.split("(")[1].split("s left")[0])
        assert 19 <= left <= 21
        assert w.blockers[0].unblocks_when == "needs 1 more member of gang default/g placed"
        await asyncio.sleep(30)  # the gang times out; nothing is left running


async def test_why_a_pod_no_node_fits_gives_kube_schedulers_summary_and_the_closest_nodes() -> None:
    async with running() as berth:
        berth.nodes(*(make_node(f"n{i}", cpu="4", pods=110) for i in range(4)))
        # Free cpu: n0 0.5, n1 1.5, n2 3, n3 none (tainted, so it fails for more than resources).
        taint = model.Taint(key="dedicated", value="x", effect="NoSchedule")
        berth.nodes(make_node("n3", cpu="4", pods=110, taints=[taint]))
        berth.pods(
            pod("a", "3500m", node_name="n0"),
            pod("b", "2500m", node_name="n1"),
            pod("c", "1", node_name="n2"),
            pod("big", "3500m"),
        )
        await berth.settle()
        w = visibility.why(berth.core, "default/big")
        assert (w.phase, kinds(w)) == ("Unschedulable", ["fit"])
        assert w.summary == ("0/4 nodes are available: 1 node(s) had untolerated taint(s), 3 Insufficient cpu.")
        assert berth.decision("default/big").message.startswith(w.summary)  # what the loop reported
        assert w.closest_nodes == [("n2", "lacks 500m cpu"), ("n1", "lacks 2 cpu"), ("n0", "lacks 3 cpu")]
        assert w.blockers[0].unblocks_when == "frees when 500m cpu is released on n2"


async def test_why_a_nominated_pod_waits_on_its_node_for_the_victims_to_terminate() -> None:
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="2", pods=110))
        victim = pod("low", "2", node_name="n0", priority=0)
        victim = msgspec.structs.replace(
            victim, metadata=msgspec.structs.replace(victim.metadata, deletion_timestamp="2025-01-01T00:00:00Z")
        )
        vip = pod("vip", "2", priority=100)
        vip = msgspec.structs.replace(vip, status=msgspec.structs.replace(vip.status, nominated_node_name="n0"))
        berth.pods(victim, vip)
        await berth.settle()
        w = visibility.why(berth.core, "default/vip")
        assert w.phase == "Unschedulable"
        assert kinds(w) == ["fit", "preemption"]
        assert w.blockers[1].message == "waiting on node n0 for 1 victim to terminate (default/low)"
        assert w.summary.endswith("; waiting on node n0 for 1 victim to terminate (default/low)")
        rows = {r.name: r for r in visibility.list_pods(berth.core)}
        assert rows["vip"].nominated_node == "n0"


# ---------------------------------------------------------------- bound, unknown, listing


async def test_why_a_bound_pod_has_no_blockers() -> None:
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="4", pods=110))
        berth.pods(pod("web"))
        await berth.settle()
        w = visibility.why(berth.core, "default/web")
        assert (w.phase, w.summary, w.blockers, w.node) == ("Bound", "bound to n0", [], "n0")


@pytest.mark.parametrize("key", ["default/nope", "nope", "other/web"])
async def test_why_an_unknown_pod_is_not_found(key: str) -> None:
    async with running() as berth:
        berth.pods(pod("web"))
        with pytest.raises(NotFound):
            visibility.why(berth.core, key)


async def test_why_another_schedulers_pod_is_not_found() -> None:
    async with running() as berth:
        berth.pods(make_pod("theirs", scheduler_name="someone-else"))
        with pytest.raises(NotFound, match="not scheduled by Berth"):
            visibility.why(berth.core, "default/theirs")


async def test_list_pods_shows_every_phase_with_positions_in_each_queue_lane() -> None:
    cfg = make_config(queues=[{"name": "a", "max": {"cpu": "1"}}, {"name": "b", "max": {"cpu": "2"}}])
    async with running(cfg) as berth:
        berth.nodes(make_node("n0", cpu="8", pods=110))
        berth.pods(
            *(pod(f"a{i}", labels={LABEL_QUEUE: "a"}, priority=i) for i in range(3)),
            pod("b0", labels={LABEL_QUEUE: "b"}),
            pod("gated", labels={LABEL_QUEUE: "b"}, spec={"schedulingGates": [{"name": "x"}]}),
            pod("nowhere", labels={LABEL_QUEUE: "missing"}),
            make_pod("theirs", scheduler_name="someone-else"),
        )
        await berth.settle()
        rows = {r.name: r for r in visibility.list_pods(berth.core)}
        assert "theirs" not in rows
        assert [r.name for r in visibility.list_pods(berth.core)] == sorted(rows)
        # a2 (highest priority) was placed first; a1 ahead of a0 by QueueSort.
        got = {n: (r.queue, r.phase, r.node, r.position) for n, r in rows.items()}
        assert got == {
            "a0": ("a", "Unschedulable", "", 2),
            "a1": ("a", "Unschedulable", "", 1),
            "a2": ("a", "Bound", "n0", 0),
            "b0": ("b", "Bound", "n0", 0),
            "gated": ("b", "Gated", "", 1),
            "nowhere": ("", "Rejected", "", 1),
        }
        assert rows["a0"].reason == "0/1 nodes are available: queue a: cpu 2/1 over max."
        assert rows["a0"].attempts >= 1 and rows["a2"].attempts == 1
        assert (rows["a0"].requests, rows["a0"].priority) == ({"cpu": 1000}, 0)


@pytest.mark.parametrize(
    ("filters", "names"),
    [
        ({"namespace": "default"}, ["a", "b"]),
        ({"namespace": "team"}, ["c"]),
        ({"queue": "q"}, ["a", "c"]),
        ({"phase": "Bound"}, ["a", "b", "c"]),
        ({"phase": "Gated"}, []),
        ({"namespace": "team", "queue": "q", "phase": "Bound"}, ["c"]),
    ],
)
async def test_list_pods_filters_by_namespace_queue_and_phase(filters: dict[str, str], names: list[str]) -> None:
    async with running(make_config(queues=[{"name": "q"}, {"name": "r"}])) as berth:
        berth.nodes(make_node("n0", cpu="8", pods=110))
        berth.pods(
            pod("a", labels={LABEL_QUEUE: "q"}),
            pod("b", labels={LABEL_QUEUE: "r"}),
            pod("c", namespace="team", labels={LABEL_QUEUE: "q"}),
        )
        await berth.settle()
        assert [r.name for r in visibility.list_pods(berth.core, **filters)] == names  # type: ignore[arg-type]


async def test_list_pods_refuses_an_unknown_phase() -> None:
    async with running() as berth:
        with pytest.raises(InvalidArgument, match="phase: 'Sleeping' is not one of"):
            visibility.list_pods(berth.core, phase="Sleeping")
