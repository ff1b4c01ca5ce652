"""Large feed batches are applied in slices, all or nothing, and nothing
that must see a whole batch runs between its slices (issue 28: one
DeletePods of 20 000 pods held /healthz for 19.7 s)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berth import app, config, errors
from berth.scheduling import feeding
from berth.testing import make_node, make_pod


def ticking(step: float = 0.001) -> Callable[[], float]:
    """A clock that moves ``step`` each time it is read: slices by count, not by wall time."""
    counter = itertools.count()
    return lambda: next(counter) * step


class Probe:
    """Counts the loop turns another task gets while it runs."""

    def __init__(self) -> None:
        self.turns = 0
        self._task = asyncio.ensure_future(self._spin())

    async def _spin(self) -> None:
        while True:
            await asyncio.sleep(0)
            self.turns += 1

    def stop(self) -> int:
        self._task.cancel()
        return self.turns


def _berth(clock: Callable[[], float] | None = None) -> app.Berth:
    berth = app.build(config.parse({}), run_loop=False)
    berth.core.feeding.clock = clock or ticking()
    berth.cluster.upsert_nodes([make_node(f"n{i}", cpu="64", memory="256Gi", pods=500) for i in range(4)])
    return berth


@pytest.mark.parametrize(
    ("kind", "count"),
    [("upsert pods", 400), ("delete pods", 400), ("upsert nodes", 400)],
)
async def test_a_large_batch_gives_the_loop_a_turn_every_slice(kind: str, count: int) -> None:
    berth = _berth()
    cluster, gate = berth.cluster, berth.core.feeding
    pods = [make_pod(f"p{i}", node_name=f"n{i % 4}", requests={"cpu": "10m"}) for i in range(count)]
    if kind == "delete pods":
        cluster.upsert_pods(pods)
    steps = {
        "upsert pods": lambda: cluster.upsert_pods_steps(pods),
        "delete pods": lambda: cluster.delete_pods_steps([p.key for p in pods]),
        "upsert nodes": lambda: cluster.upsert_nodes_steps([make_node(f"m{i}") for i in range(count)]),
    }[kind]()
    probe = Probe()
    applied = await gate.run(steps)
    turns = probe.stop()
    assert applied == count
    # Each step reads the clock once (1 ms a read), a slice is 5 ms: a turn
    # every 5 steps or so. Steps per object: a pod's defaults, its checks,
    # its admission (uids, node totals) and its apply (with the node totals
    # checked every 50 pods); a node's checks and apply; a delete.
    per_object = {"upsert pods": 4 + 1 / 50, "upsert nodes": 2, "delete pods": 1}[kind]
    assert gate.turns == pytest.approx(count * per_object / 5, rel=0.05)
    assert turns >= gate.turns - 1  # the other task ran between slices
    assert not gate.busy


async def test_a_batch_with_one_bad_pod_changes_nothing_even_in_slices() -> None:
    berth = _berth()
    good = [make_pod(f"p{i}") for i in range(300)]
    clash = make_pod("clash", uid=good[0].metadata.uid)  # the uid of another pod in the batch
    with pytest.raises(errors.InvalidArgument, match=r"pods\[300\].metadata.uid"):
        await berth.core.feeding.run(berth.cluster.upsert_pods_steps([*good, clash]))
    assert berth.cluster.pods == {}
    assert berth.core.feeding.turns > 0  # the checks themselves were sliced
    assert not berth.core.feeding.busy


async def test_a_bind_waits_for_the_batch_in_progress() -> None:
    berth = _berth()
    berth.cluster.upsert_pods([make_pod("lone", scheduler_name="other", requests={"cpu": "1"})])
    batch = [make_pod(f"p{i}", node_name="n0", requests={"cpu": "100m"}) for i in range(300)]
    order: list[str] = []

    async def feed() -> None:
        await berth.core.feeding.run(berth.cluster.upsert_pods_steps(batch))

    async def bind() -> None:
        await asyncio.sleep(0)  # the batch has started
        assert berth.core.feeding.busy
        message = await berth.extender.bind("default", "lone", "", "n0")
        order.append(f"bound {message!r} with {len(berth.cluster.pods) - 1} of the batch's pods there")

    await asyncio.gather(feed(), bind())
    assert order[0] == "bound '' with 300 of the batch's pods there"
    assert berth.cluster.pods["default/lone"].spec.node_name == "n0"


async def test_a_cancelled_caller_leaves_the_whole_batch_applied() -> None:
    berth = _berth()
    batch = [make_pod(f"p{i}") for i in range(300)]
    call = asyncio.ensure_future(berth.core.feeding.run(berth.cluster.upsert_pods_steps(batch)))
    for _ in range(80):  # well into the apply (the checks take ~60 slices' worth of turns at most)
        await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await berth.core.feeding.quiet()
    assert len(berth.cluster.pods) == 300


async def test_the_scheduling_loop_waits_for_a_batch_in_progress() -> None:
    async with app.running(config.parse({})) as berth:
        assert berth.scheduler is not None
        berth.core.feeding.clock = ticking()
        berth.cluster.upsert_nodes([make_node("n0", cpu="64", memory="256Gi", pods=500)])
        batch = [make_pod(f"p{i}", scheduler_name="berth", requests={"cpu": "10m"}) for i in range(200)]
        bound_during: list[int] = []

        async def watch() -> None:
            await asyncio.sleep(0)  # the batch has started
            while berth.core.feeding.busy:
                bound_during.append(sum(1 for p in berth.cluster.pods.values() if p.spec.node_name))
                await asyncio.sleep(0)

        watching = asyncio.ensure_future(watch())
        await berth.core.feeding.run(berth.cluster.upsert_pods_steps(batch))
        await watching
        assert berth.core.feeding.turns > 10 and len(bound_during) > 10
        assert set(bound_during) == {0}  # no cycle ran between the slices
        for _ in range(500):  # then the loop schedules them all
            if all(p.spec.node_name for p in berth.cluster.pods.values()):
                break
            await asyncio.sleep(0.01)
        assert sorted({p.spec.node_name for p in berth.cluster.pods.values()}) == ["n0"]


async def test_a_slice_must_have_a_length() -> None:
    with pytest.raises(ValueError, match="slice_seconds: 0 must be positive"):
        feeding.FeedGate(slice_seconds=0)


@settings(max_examples=25, deadline=None)
@given(
    size=st.integers(min_value=1, max_value=60),
    bad_at=st.one_of(st.none(), st.integers(min_value=0, max_value=59)),
    bound=st.booleans(),
)
def test_a_sliced_batch_is_all_or_nothing(size: int, bad_at: int | None, bound: bool) -> None:
    async def scenario() -> None:
        berth = _berth()
        before = dict(berth.cluster.pods)
        batch = [make_pod(f"p{i}", node_name="n1" if bound else "", requests={"cpu": "10m"}) for i in range(size)]
        if bad_at is not None and bad_at < size:
            batch[bad_at] = make_pod("bad", uid=batch[0].metadata.uid) if bad_at else make_pod("", uid="x")
            with pytest.raises(errors.InvalidArgument):
                await berth.core.feeding.run(berth.cluster.upsert_pods_steps(batch))
            assert berth.cluster.pods == before
            assert berth.core.cache.pod_count == 0
        else:
            assert await berth.core.feeding.run(berth.cluster.upsert_pods_steps(batch)) == size
            assert len(berth.cluster.pods) == size
            assert berth.core.cache.pod_count == (size if bound else 0)
        assert not berth.core.feeding.busy

    asyncio.run(scenario())
