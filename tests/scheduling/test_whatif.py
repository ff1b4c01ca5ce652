"""``berth whatif``: how many replicas fit now, where, by which preemptions,
and what stopped the count (cluster-capacity semantics) — changing nothing."""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from berth import config
from berth.cluster import model
from berth.errors import DeadlineExceeded, InvalidArgument, ResourceExhausted
from berth.quota.tree import LABEL_QUEUE
from berth.scheduling import algorithm
from berth.scheduling import whatif as whatif_module
from berth.scheduling.core import Core, VerbError
from berth.scheduling.whatif import MAX_COST, MAX_REPLICAS, Placement, WhatIf, whatif
from berth.testing import Cluster, make_node, make_pod
from tests.loop.conftest import make_config, running


def ask(core: Core, template: model.Pod, replicas: int = 0, **kw: Any) -> WhatIf:
    """One question, run to its end on a loop of its own."""
    return asyncio.run(whatif(core, template, replicas, **kw))


def pod(name: str = "web", cpu: str = "1", **kw: Any) -> model.Pod:
    return make_pod(name, scheduler_name="berth", requests={"cpu": cpu}, **kw)


def nodes(n: int, cpu: str = "4") -> list[model.Node]:
    return [make_node(f"n{i}", cpu=cpu, memory="16Gi", pods=110) for i in range(n)]


def state_of(core: Core) -> Any:
    """Everything whatif must leave as it found it."""
    snap = core.snapshot()
    return (
        sorted((pi.key, node, assumed) for pi, node, assumed in core.cache.pods()),
        snap.req[: snap.size].tolist(),
        sorted(p.key for p in core.pods.all()),
        [(s.name, s.allocated, s.pending_pods) for s in core.quota.status()],
        sorted((n, sorted(p.uid for p in core.nominator.pods_on(n))) for n in core.nominator.nodes()),
        dict(core.decisions.latest),
        core.rng.getstate(),
        core.scheduler.queue.counts() if core.scheduler is not None else None,
    )


@pytest.mark.parametrize(
    ("replicas", "cpu", "fit", "limited_by"),
    [
        (0, "1", 12, "0/3 nodes are available: 3 Insufficient cpu."),
        (5, "1", 5, "replicas"),
        (12, "1", 12, "replicas"),
        (13, "1", 12, "0/3 nodes are available: 3 Insufficient cpu."),
        (0, "3", 3, "0/3 nodes are available: 3 Insufficient cpu."),
        (0, "5", 0, "0/3 nodes are available: 3 Insufficient cpu."),
    ],
)
def test_replicas_are_placed_one_after_another_until_the_count_or_the_first_that_fits_nowhere(
    replicas: int, cpu: str, fit: int, limited_by: str
) -> None:
    c = Cluster(nodes(3))
    got = ask(c.berth.core, pod(cpu=cpu), replicas)
    assert (got.fit, got.limited_by) == (fit, limited_by)
    assert len(got.placements) == fit and all(not p.preempts for p in got.placements)
    per_node = {n: sum(1 for p in got.placements if p.node == n) for n in ("n0", "n1", "n2")}
    assert sum(per_node.values()) == fit and max(per_node.values()) <= 4 // int(cpu[0])


def test_each_replica_sees_the_ones_before_it_and_the_pods_already_bound() -> None:
    c = Cluster(nodes(2), [pod("busy", cpu="3", node_name="n0")])
    got = ask(c.berth.core, pod(cpu="2"))
    assert got.fit == 2 and [p.node for p in got.placements] == ["n1", "n1"]


def test_a_replica_that_fits_only_by_preemption_names_its_victims() -> None:
    c = Cluster(
        nodes(2, cpu="2"),
        [
            pod("low0", cpu="2", node_name="n0", priority=0),
            pod("low1", cpu="1", node_name="n1", priority=0),
            pod("high", cpu="1", node_name="n1", priority=1000),
        ],
    )
    got = ask(c.berth.core, pod(cpu="2", priority=100))
    assert got.fit == 1
    assert got.placements == [Placement("n0", ["default/low0"])]
    assert got.limited_by.startswith("0/2 nodes are available: 2 Insufficient cpu.")


def test_a_pod_that_may_not_preempt_counts_only_free_room() -> None:
    c = Cluster(nodes(1, cpu="2"), [pod("low", cpu="2", node_name="n0", priority=0)])
    got = ask(c.berth.core, pod(cpu="1", priority=100, spec={"preemptionPolicy": "Never"}))
    assert (got.fit, got.limited_by) == (0, "0/1 nodes are available: 1 Insufficient cpu.")


def test_the_queue_stops_the_count_with_its_verdict_as_its_usage_grows() -> None:
    cfg = config.parse({"queues": [{"name": "c", "max": {"cpu": "4"}}]})
    c = Cluster(nodes(3), [pod("used", node_name="n0", labels={LABEL_QUEUE: "c"})], config=cfg)
    got = ask(c.berth.core, pod(labels={LABEL_QUEUE: "c"}))
    assert (got.fit, got.queue, got.quota_ok) == (3, "c", False)
    assert got.limited_by == got.quota_message == "queue c: cpu 5/4 over max"


def test_a_gated_pod_fits_nowhere_until_its_gates_are_removed() -> None:
    c = Cluster(nodes(1))
    got = ask(c.berth.core, pod(spec={"schedulingGates": [{"name": "hold"}]}))
    assert (got.fit, got.limited_by) == (0, "waiting for scheduling gates: [hold]")


@pytest.mark.parametrize(
    ("replicas", "profile", "error", "match"),
    [
        (-1, "", InvalidArgument, "replicas: must be between 0 and 1000, got -1"),
        (MAX_REPLICAS + 1, "", InvalidArgument, "replicas: must be between 0 and 1000"),
        (1, "nope", VerbError, "unknown profile 'nope'"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(
    replicas: int, profile: str, error: type[Exception], match: str
) -> None:
    c = Cluster(nodes(1))
    before = state_of(c.berth.core)
    with pytest.raises(error, match=match):
        ask(c.berth.core, pod(), replicas, profile=profile)
    assert state_of(c.berth.core) == before


@given(
    node_cpus=st.lists(st.integers(1, 8), min_size=1, max_size=5),
    bound=st.lists(st.tuples(st.integers(0, 4), st.integers(1, 4), st.integers(0, 200)), max_size=6),
    cpu=st.integers(1, 4),
    priority=st.integers(0, 200),
    replicas=st.integers(0, 20),
)
def test_whatif_never_changes_the_core(
    node_cpus: list[int], bound: list[tuple[int, int, int]], cpu: int, priority: int, replicas: int
) -> None:
    ns = [make_node(f"n{i}", cpu=str(c), pods=110) for i, c in enumerate(node_cpus)]
    pods = [pod(f"b{k}", cpu=str(c), node_name=f"n{i % len(ns)}", priority=p) for k, (i, c, p) in enumerate(bound)]
    c = Cluster(ns, pods)
    core = c.berth.core
    before = state_of(core)
    template = pod("t", cpu=str(cpu), priority=priority)
    kept = copy.deepcopy(msgspec.to_builtins(template))
    got = ask(core, template, replicas)
    assert state_of(core) == before
    assert msgspec.to_builtins(template) == kept
    assert got.fit == len(got.placements) <= (replicas or MAX_REPLICAS)
    if not any(p.preempts for p in got.placements):
        # Without preemption, cluster-capacity's count is exactly the free room.
        snap = core.snapshot()
        col = snap.columns.index["cpu"]
        free = (snap.alloc[: snap.size, col] - snap.req[: snap.size, col]) // (cpu * 1000)
        room = int(np.maximum(free, 0).sum())
        assert got.fit == (min(room, replicas) if replicas else room)


@pytest.mark.looptime
@pytest.mark.parametrize(
    ("node_cpus", "cpu", "queues"),
    [
        ([4, 4, 4], "1", []),
        ([3, 5], "2", []),
        ([8], "3", []),
        ([4, 4], "1", [{"name": "c", "max": {"cpu": "5"}}]),
    ],
)
async def test_whatifs_count_is_what_the_loop_then_places_for_identical_pods_on_an_idle_cluster(
    node_cpus: list[int], cpu: str, queues: list[dict[str, Any]]
) -> None:
    async with running(make_config(queues=queues)) as berth:
        berth.nodes(*(make_node(f"n{i}", cpu=str(c), pods=110) for i, c in enumerate(node_cpus)))
        labels = {LABEL_QUEUE: "c"} if queues else {}
        before = state_of(berth.core)
        got = await whatif(berth.core, pod("r", cpu=cpu, labels=labels))
        assert state_of(berth.core) == before
        berth.pods(*(pod(f"r-{i}", cpu=cpu, labels=labels) for i in range(got.fit + 3)))
        await berth.settle()
        assert len(berth.bound()) == got.fit
        if queues:
            # The 6th replica: the replicas together would ask more than the max.
            assert got.limited_by == "queue c: requests 6 cpu, more than its max 5"


# ---------------------------------------------------------------- bounded, sliced, cancellable


def plugins_of(core: Core) -> int:
    """The Filter and Score plugins a replica goes through (the cost model's factor)."""
    fwk = core.framework_for("")
    return len(fwk.filter) + len(fwk.score)


def test_a_question_over_the_cost_bound_is_refused_before_any_work() -> None:
    c = Cluster(nodes(400))
    core = c.berth.core
    per_replica = 400 * plugins_of(core)
    before = state_of(core)
    with pytest.raises(ResourceExhausted) as refused:
        ask(core, pod(), 1000)
    assert str(refused.value) == (
        f"replicas: 1000 replicas x 400 nodes x {plugins_of(core)} Filter and Score plugins = "
        f"{1000 * per_replica} node evaluations, over the bound of {MAX_COST} per question "
        f"(at most {MAX_COST // per_replica} replicas on this cluster)"
    )
    assert state_of(core) == before


# (replicas, pod cpu, the bound in replicas' worth, fit, limited_by or the refusal)
BOUNDED: list[tuple[int, str, int, int, str]] = [
    (100, "10m", 100, 100, "replicas"),  # exactly at the bound
    (101, "10m", 100, 0, "refused"),
    (0, "10m", 100, 100, "the limit of 100 replicas per question"),  # "until it does not fit" stops at the bound
    (0, "1", 100, 12, "0/3 nodes are available: 3 Insufficient cpu."),  # the cluster ran out first
    (0, "10m", 0, 0, "refused"),  # not even one replica within the bound
]


@pytest.mark.parametrize(("replicas", "cpu", "bound", "fit", "limited_by"), BOUNDED)
def test_the_bound_caps_the_replicas_a_question_may_place(
    monkeypatch: pytest.MonkeyPatch, replicas: int, cpu: str, bound: int, fit: int, limited_by: str
) -> None:
    c = Cluster(nodes(3))
    core = c.berth.core
    monkeypatch.setattr(whatif_module, "MAX_COST", bound * 3 * plugins_of(core))
    if limited_by == "refused":
        with pytest.raises(ResourceExhausted, match="over the bound of"):
            ask(core, pod(cpu=cpu), replicas)
        return
    got = ask(core, pod(cpu=cpu), replicas)
    assert (got.fit, got.limited_by) == (fit, limited_by)


def test_preemption_dry_runs_are_charged_and_stop_the_count_at_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    c = Cluster(nodes(2, cpu="2"), [pod(f"low{i}", cpu="1", node_name=f"n{i % 2}", priority=0) for i in range(4)])
    core = c.berth.core
    # One replica's pass over the nodes, and not one node's dry run more.
    monkeypatch.setattr(whatif_module, "MAX_COST", 2 * plugins_of(core) + 1)
    got = ask(core, pod(cpu="1", priority=100), 1)
    assert (got.fit, got.limited_by) == (0, f"the bound of {2 * plugins_of(core) + 1} node evaluations per question")


class Replicas:
    """Counts the replicas whatif sends through the framework; ``running``
    is set at the third."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        self.running = asyncio.Event()
        real = algorithm.schedule_pod

        def counted(*args: Any, **kw: Any) -> Any:
            self.count += 1
            if self.count == 3:
                self.running.set()
            return real(*args, **kw)

        monkeypatch.setattr(algorithm, "schedule_pod", counted)


#: The longest the event loop may wait for a turn while a question runs. A
#: slice is SLICE_SECONDS plus one replica (a few ms on 400 nodes);
#: generous, since these 2-core machines are noisy.
STALL_BOUND = 0.25
#: Replicas spread over zones: each one's pass weighs what it would on a busy cluster.
SPREAD = {
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
}


async def test_a_long_question_lets_other_coroutines_run_between_its_slices() -> None:
    zoned = [
        make_node(f"n{i}", cpu="64", memory="64Gi", pods=110, labels={"topology.kubernetes.io/zone": f"z{i % 3}"})
        for i in range(400)
    ]
    bound = [pod(f"b{i}", cpu="100m", node_name=f"n{i % 400}", labels={"app": "web"}) for i in range(800)]
    c = Cluster(zoned, bound)
    replicas = MAX_COST // (400 * plugins_of(c.berth.core))  # the longest question allowed on 400 nodes
    worst = 0.0
    turns = 0

    async def probe() -> None:
        nonlocal worst, turns
        last = time.monotonic()
        while True:
            await asyncio.sleep(0)
            now = time.monotonic()
            worst, last, turns = max(worst, now - last), now, turns + 1

    probing = asyncio.create_task(probe())
    await asyncio.sleep(0)
    started = time.monotonic()
    got = await whatif(c.berth.core, pod(cpu="100m", labels={"app": "web"}, spec=SPREAD), replicas)
    took = time.monotonic() - started
    probing.cancel()
    await asyncio.gather(probing, return_exceptions=True)
    assert got.fit == replicas
    assert took > 2 * STALL_BOUND, f"the question took {took:.2f}s: too short to show a stall"
    assert worst < STALL_BOUND, f"the loop waited {worst * 1000:.0f} ms for a turn while whatif ran {took:.2f}s"
    assert turns > 10


async def test_a_cancelled_question_stops_computing(monkeypatch: pytest.MonkeyPatch) -> None:
    c = Cluster(nodes(100, cpu="64"))
    replicas = Replicas(monkeypatch)
    asking = asyncio.create_task(whatif(c.berth.core, pod(cpu="100m"), 1000))
    await replicas.running.wait()
    asking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asking
    stopped_at = replicas.count
    for _ in range(50):
        await asyncio.sleep(0.001)
    assert replicas.count == stopped_at < 1000


async def test_a_question_past_its_deadline_stops_with_deadline_exceeded(monkeypatch: pytest.MonkeyPatch) -> None:
    c = Cluster(nodes(100, cpu="64"))
    replicas = Replicas(monkeypatch)
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match=r"^whatif: the deadline passed after \d+ of 1000 replicas"):
        await whatif(c.berth.core, pod(cpu="100m"), 1000, deadline=started + 0.1)
    assert time.monotonic() - started < 0.1 + STALL_BOUND
    stopped_at = replicas.count
    await asyncio.sleep(0.01)
    assert replicas.count == stopped_at < 1000
