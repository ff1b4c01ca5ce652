"""Reservations with backfill (the Reservation plugin) in the running loop, in
virtual time: an 8-pod gang that waits while single pods keep arriving is
placed within a bound once its queue holds capacity for it, never without;
only pods that declare a short enough runtime use what is held."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from berth import config
from berth.adapters.http import ui
from berth.cluster import model
from berth.gangs import reservations as rsv
from berth.plugins.reservation import Reservation
from berth.scheduling import reservations, visibility, whatif
from berth.testing import make_node, make_pod
from tests.loop.conftest import Berth, make_config, running
from tests.loop.test_gang_preemption import kueue_member

HOST = "kubernetes.io/hostname"
#: The gang: 8 members of 2 cpu, the whole of the four 4-cpu nodes.
GANG, SIZE = "train", 8


def queue_config(reservation: dict[str, Any] | None) -> config.BerthConfiguration:
    queue: dict[str, Any] = {"name": "research", "namespaces": ["default"]}
    if reservation is not None:
        queue["reservation"] = reservation
    return make_config(queues=[queue])


def member(i: int) -> model.Pod:
    return kueue_member(GANG, i, SIZE)


def single(name: str, runtime: float | None) -> model.Pod:
    annotations = {rsv.MAX_RUNTIME: f"{runtime:g}s"} if runtime is not None else {}
    return make_pod(name, scheduler_name="berth", annotations=annotations, requests={"cpu": "1"})


def gang_bound(berth: Berth) -> int:
    return sum(1 for k in berth.bound() if k.startswith(f"default/{GANG}-"))


@contextlib.asynccontextmanager
async def stream(berth: Berth, *, every: float, runtime: float) -> AsyncIterator[list[str]]:
    """Single pods of 1 cpu arriving every ``every`` seconds, each deleted
    ``runtime`` seconds after it is bound (it declares that runtime); yields
    the names of those created."""
    created: list[str] = []
    bound_at: dict[str, float] = {}
    loop = asyncio.get_running_loop()

    async def arrive() -> None:
        n = 0
        while True:
            name = f"s{n}"
            berth.pods(single(name, runtime))
            created.append(name)
            n += 1
            await asyncio.sleep(every)

    async def finish() -> None:
        while True:
            now = loop.time()
            for key in berth.bound():
                if key.startswith("default/s"):
                    bound_at.setdefault(key, now)
            done = [k for k, t in bound_at.items() if now - t >= runtime and k in berth.cluster.pods]
            if done:
                berth.cluster.delete_pods(done)
            await asyncio.sleep(1)

    tasks = [asyncio.create_task(arrive()), asyncio.create_task(finish())]
    try:
        yield created
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def plugin(berth: Berth) -> Reservation:
    for fwk in berth.core.frameworks.values():
        for p in fwk.post_filter:
            if isinstance(p, Reservation):
                return p
    raise AssertionError("the Reservation plugin is not running")


async def starved_or_placed(reservation: dict[str, Any] | None, *, run: float) -> float | None:
    """When the gang was placed whole (virtual seconds after it arrived), or
    None if it was not within ``run`` seconds."""
    async with running(queue_config(reservation)) as berth:
        berth.nodes(*(make_node(f"n{i}", cpu="4", pods=110, labels={HOST: f"n{i}"}) for i in range(4)))
        loop = asyncio.get_running_loop()
        async with stream(berth, every=2.0, runtime=40.0):
            await asyncio.sleep(10)  # the singles fill the cluster first
            start = loop.time()
            berth.pods(*(member(i) for i in range(SIZE)))
            while loop.time() - start < run:
                if gang_bound(berth) == SIZE:
                    return loop.time() - start
                await asyncio.sleep(1)
    return None


async def test_a_gang_starved_by_a_stream_of_single_pods_is_placed_once_its_queue_reserves() -> None:
    # Without reservations every core that frees goes to the next single pod:
    # the gang's 16 cpu are never free at once.
    assert await starved_or_placed(None, run=600) is None
    # With them, held capacity accumulates from 30 s on: the gang starts once
    # the singles running then end (40 s), plus backoff — well within 120 s.
    waited = await starved_or_placed({"after": "30s"}, run=600)
    assert waited is not None
    assert 30 <= waited <= 120


async def test_only_pods_that_end_before_the_reservation_can_start_use_held_capacity() -> None:
    async with running(queue_config({"after": 0})) as berth:
        berth.nodes(*(make_node(f"n{i}", cpu="4", pods=110, labels={HOST: f"n{i}"}) for i in range(4)))
        # 12 of 16 cpu busy with pods ending in 100 s: the gang waits for them.
        berth.pods(*(single(f"busy{i}", 100) for i in range(12)))
        await berth.settle()
        berth.pods(*(member(i) for i in range(SIZE)))
        await asyncio.sleep(5)
        [r] = plugin(berth).reservations()
        assert r.owner == f"default/{GANG}" and r.kind == "gang"
        assert r.reserved() == "4 of 16 cpu"
        assert r.starts_at is not None
        registry = plugin(berth).handle.metrics.registry
        assert registry.get_sample_value("berth_reservations", {"queue": "research"}) == 1
        assert (
            registry.get_sample_value("berth_reservation_held_resources", {"queue": "research", "resource": "cpu"}) == 4
        )
        why = visibility.why(berth.core, f"default/{GANG}-0")
        [blocker] = [b for b in why.blockers if b.kind == "reservation"]
        assert blocker.message == "holding 4 of 16 cpu on 4 node(s)"
        assert blocker.unblocks_when.startswith("starts when 12 more cpu free (estimated in ")
        assert reservations.by_queue(berth.core) == {
            "research": [f"gang default/{GANG}: {r.summary(asyncio.get_running_loop().time())}"]
        }
        gang_message = berth.scheduler.last_message(berth.cluster.pods[f"default/{GANG}-0"].metadata.uid)
        assert (
            "reservation: holding 4 of 16 cpu on 4 node(s); starts when 12 more cpu free (estimated in" in gang_message
        )
        # Shown in the dashboard's queues card, and what-if answers by it.
        assert ui.queues(berth.core)["reservations"] == reservations.by_queue(berth.core)
        probe = await whatif.whatif(berth.core, single("probe", None), 0)
        assert probe.fit == 0
        assert f"4 node(s) held for gang default/{GANG} (reserved 4 of 16 cpu)" in probe.limited_by
        # A short pod backfills; what-if counts one: the next would run beside
        # a hypothetical replica whose start Berth never saw (no Reserve), so
        # the start is unknown and nothing more backfills.
        assert (await whatif.whatif(berth.core, single("probe", 10), 0)).fit == 1
        # A pod ending in 30 s backfills; one that runs 300 s, or says nothing, does not.
        berth.pods(single("short", 30), single("long", 300), single("unknown", None))
        await asyncio.sleep(5)
        bound = berth.bound()
        assert "default/short" in bound
        assert "default/long" not in bound and "default/unknown" not in bound
        message = berth.scheduler.last_message(berth.cluster.pods["default/long"].metadata.uid)
        assert f"node(s) held for gang default/{GANG} (reserved 3 of 16 cpu)" in message
        # The busy pods and the short one end: the gang is placed whole, and
        # its reservation goes.
        berth.cluster.delete_pods([f"default/busy{i}" for i in range(12)] + ["default/short"])
        await asyncio.sleep(60)
        assert gang_bound(berth) == SIZE
        # (The long pod, now waiting with the cluster full, holds the next one.)
        assert [r.owner for r in plugin(berth).reservations()] == ["default/long"]


async def test_a_reservation_is_released_when_its_gang_is_deleted() -> None:
    async with running(queue_config({"after": 0})) as berth:
        berth.nodes(make_node("n0", cpu="4", pods=110, labels={HOST: "n0"}))
        berth.pods(single("busy", None))
        await berth.settle()
        berth.pods(*(member(i) for i in range(SIZE)))  # 16 cpu: more than the node, never placed
        await asyncio.sleep(5)
        assert plugin(berth).reservations() == []  # no node set could ever hold it: nothing held
        berth.nodes(*(make_node(f"n{i}", cpu="4", pods=110, labels={HOST: f"n{i}"}) for i in range(1, 4)))
        await asyncio.sleep(15)
        assert [r.owner for r in plugin(berth).reservations()] == [f"default/{GANG}"]
        berth.cluster.delete_pods([f"default/{GANG}-{i}" for i in range(SIZE)])
        berth.pods(single("other", None))
        await asyncio.sleep(15)
        assert plugin(berth).reservations() == []
        assert "default/other" in berth.bound()
