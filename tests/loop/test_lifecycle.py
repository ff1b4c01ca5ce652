"""A pod's way from its scheduling cycle to its binding, as each release
Berth follows has it (``schedule_one.go``, ``framework/preemption`` and
``backend/queue`` of kube-scheduler v1.35.4, v1.36.3 and v1.37.2): the
preemption message, victims stopped in memory, the nominatedNodeName
written before binding, Bind retried, flushed pods counted, assumed pods
deleted."""

from __future__ import annotations

import asyncio
import itertools
from typing import ClassVar

import msgspec
import pytest

from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.cluster.sources import BindRetriable
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.testing import make_node, make_pod, register
from tests.loop.conftest import Berth, make_config, running

RELEASES = ["1.35", "1.36", "1.37"]
HOLD = {"hold": "yes"}


def berth_pod(name: str, **kw: object) -> model.Pod:
    return make_pod(name, scheduler_name="berth", **kw)  # type: ignore[arg-type]


def failed(berth: Berth, key: str) -> list[str]:
    return [m for k, reason, m in berth.cluster.events if k == key and reason == "FailedScheduling"]


def preempted(berth: Berth, key: str) -> list[str]:
    return [m for k, reason, m in berth.cluster.events if k == key and reason == "Preempted"]


class HoldAtPermit:
    """Permit holds pods labelled ``hold=yes`` (for 10 minutes)."""

    NAME: ClassVar[str] = "HoldAtPermit"
    Args: ClassVar[None] = None

    def __init__(self, args: None, handle: Handle) -> None:
        pass

    def permit(self, state: fw.CycleState, pod: PodInfo, node: str) -> tuple[fw.Status, float]:
        if pod.labels.get("hold") == "yes":
            return fw.Status(fw.Code.WAIT, plugin=self.NAME), 600.0
        return fw.SUCCESS, 0.0


class SlowPreBind:
    """PreBind has work for pods labelled ``hold=yes``: 30 seconds of it."""

    NAME: ClassVar[str] = "SlowPreBind"
    Args: ClassVar[None] = None

    def __init__(self, args: None, handle: Handle) -> None:
        pass

    def pre_bind_pre_flight(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        return fw.SUCCESS if pod.labels.get("hold") == "yes" else fw.Status.skip()

    async def pre_bind(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        await asyncio.sleep(30)
        return fw.SUCCESS


class RejectFirstFilter:
    """Filter rejects each pod once, and registers for no event: only a
    flush of the unschedulable pool brings the pod back."""

    NAME: ClassVar[str] = "RejectFirstFilter"
    Args: ClassVar[None] = None
    FILTER_PER_NODE: ClassVar[bool] = True
    seen: ClassVar[set[str]] = set()

    def __init__(self, args: None, handle: Handle) -> None:
        pass

    def events_to_register(self) -> list[fw.ClusterEvent]:
        return []

    def filter(self, state: fw.CycleState, pod: PodInfo, nodes: object, rows: object) -> fw.NodeVerdicts:
        import numpy as np

        n = len(rows)  # type: ignore[arg-type]
        if pod.uid in self.seen:
            return fw.NodeVerdicts(np.ones(n, dtype=bool), [])
        self.seen.add(pod.uid)
        return fw.NodeVerdicts.fail_where(np.ones(n, dtype=bool), fw.Status.unschedulable("not yet", plugin=self.NAME))


def config(version: str, plugin: type, **gates: bool) -> object:
    register(plugin)
    profile = {"schedulerName": "berth", "plugins": {"multiPoint": {"enabled": [{"name": plugin.NAME}]}}}  # type: ignore[attr-defined]
    return make_config(profiles=[profile], kubernetesVersion=version, featureGates=gates)


# ---------------------------------------------------------------- the preemptor's message


@pytest.mark.parametrize(
    ("version", "post_filter"),
    [
        ("1.35", ""),
        ("1.36", ""),
        # preemption.go Preempt (v1.37.2), "preemption: " from DefaultPreemption.PostFilter.
        ("1.37", " preemption: found a potential placement for pod on node n0, preempting 2 victims"),
    ],
)
async def test_a_successful_preemption_says_where_it_found_room_from_1_37(version: str, post_filter: str) -> None:
    async with running(make_config(kubernetesVersion=version)) as berth:
        berth.nodes(make_node("n0", cpu="2", pods=110))
        berth.pods(
            make_pod("low-a", requests={"cpu": "1"}, node_name="n0", priority=1),
            make_pod("low-b", requests={"cpu": "1"}, node_name="n0", priority=2),
        )
        berth.pods(berth_pod("vip", requests={"cpu": "2"}, priority=100))
        await berth.settle()
        await berth.settle()
        assert berth.node_of("default/vip") == "n0"
        assert failed(berth, "default/vip")[0] == "0/1 nodes are available: 1 Insufficient cpu." + post_filter
        assert sorted(k for k, _ in berth.cluster.evictions) == ["default/low-a", "default/low-b"]
        # Victims deleted through the API have the plain event message in every release.
        assert preempted(berth, "default/low-a") == []  # the eviction records its own event
        assert ("default/low-a", "Preempted by pod uid-default-vip on node n0") in berth.cluster.evictions


# ---------------------------------------------------------------- victims stopped in memory


@pytest.mark.parametrize(
    ("version", "victim_message", "event"),
    [
        # preemption.go v1.35.4: waitingPod.Reject(plugin, "preempted"): a rejection.
        ("1.35", "0/1 nodes are available: 1 preempted.", "Preempted by pod uid-default-vip on node n0"),
        # executor.go v1.36.3: waitingPod.Preempt: an error, WaitOnPermit's.
        (
            "1.36",
            "waiting on permit for pod: preempted",
            "Preempted by pod uid-default-vip on node n0 (in kube-scheduler memory).",
        ),
        (
            "1.37",
            "waiting on permit for pod: preempted",
            "Preempted by pod uid-default-vip on node n0 (in kube-scheduler memory).",
        ),
    ],
)
async def test_a_victim_waiting_at_permit_is_preempted_in_memory_and_requeued(
    version: str, victim_message: str, event: str
) -> None:
    async with running(config(version, HoldAtPermit)) as berth:  # type: ignore[arg-type]
        berth.nodes(make_node("n0", cpu="2", pods=110))
        berth.pods(berth_pod("low", requests={"cpu": "2"}, priority=1, labels=HOLD))
        await asyncio.sleep(1)
        assert berth.scheduler.waiting.uids() == ["uid-default-low"]
        berth.pods(berth_pod("vip", requests={"cpu": "2"}, priority=100))
        await berth.settle()
        await berth.settle()
        assert berth.node_of("default/vip") == "n0"
        # Not deleted: stopped at Permit, unreserved, back in the queue.
        assert berth.cluster.evictions == []
        assert "default/low" in berth.cluster.pods and berth.node_of("default/low") == ""
        assert failed(berth, "default/low")[0] == victim_message
        assert preempted(berth, "default/low") == [event]
        assert berth.decision("default/low").kind.name == "UNSCHEDULABLE"


@pytest.mark.parametrize("version", ["1.36", "1.37"])
async def test_a_victim_in_pre_bind_is_cancelled_in_memory_from_1_36(version: str) -> None:
    async with running(config(version, SlowPreBind)) as berth:  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()
        berth.nodes(make_node("n0", cpu="2", pods=110))
        berth.pods(berth_pod("low", requests={"cpu": "2"}, priority=1, labels=HOLD))
        await asyncio.sleep(1)
        assert "uid-default-low" in berth.core.in_pre_bind
        started = loop.time()
        berth.pods(berth_pod("vip", requests={"cpu": "2"}, priority=100))
        await berth.settle()
        await berth.settle()
        assert berth.node_of("default/vip") == "n0"
        # Cancelled at once (podsInPreBindMap.CancelPod), not after its 30 s.
        assert loop.time() - started < 30
        assert berth.cluster.evictions == []
        assert failed(berth, "default/low")[0] == "preempted by DefaultPreemption"
        event = "Preempted by pod uid-default-vip on node n0 (in kube-scheduler memory)."
        assert preempted(berth, "default/low") == [event]
        # Its nomination (written before PreBind) is cleared with the failure.
        assert berth.cluster.pods["default/low"].status.nominated_node_name == ""


async def test_a_victim_in_pre_bind_is_deleted_in_1_35() -> None:
    async with running(config("1.35", SlowPreBind)) as berth:  # type: ignore[arg-type]
        berth.nodes(make_node("n0", cpu="2", pods=110))
        berth.pods(berth_pod("low", requests={"cpu": "2"}, priority=1, labels=HOLD))
        await asyncio.sleep(1)
        assert "uid-default-low" not in berth.core.in_pre_bind
        berth.pods(berth_pod("vip", requests={"cpu": "2"}, priority=100))
        await asyncio.sleep(60)
        await berth.settle()
        assert berth.node_of("default/vip") == "n0"
        assert [k for k, _ in berth.cluster.evictions] == ["default/low"]


# ---------------------------------------------------------------- nominatedNodeName before binding


@pytest.mark.parametrize(
    ("plugin", "gate", "written"),
    [
        # schedule_one.go bindingCycle: Permit waits, or PreBind has work.
        (HoldAtPermit, True, "n0"),
        (SlowPreBind, True, "n0"),
        # NominatedNodeNameForExpectation off: nothing is written.
        (HoldAtPermit, False, ""),
        (SlowPreBind, False, ""),
    ],
)
async def test_the_nominated_node_is_written_before_a_wait_at_permit_or_pre_bind(
    plugin: type, gate: bool, written: str
) -> None:
    cfg = config("1.37", plugin, NominatedNodeNameForExpectation=gate)
    async with running(cfg) as berth:  # type: ignore[arg-type]
        berth.nodes(make_node("n0", cpu="2", pods=110))
        berth.pods(berth_pod("p", requests={"cpu": "1"}, labels=HOLD))
        await asyncio.sleep(1)
        assert berth.node_of("default/p") == ""
        assert berth.cluster.pods["default/p"].status.nominated_node_name == written


def with_nomination(pod: model.Pod, node: str) -> model.Pod:
    return msgspec.structs.replace(pod, status=msgspec.structs.replace(pod.status, nominated_node_name=node))


async def test_an_update_that_clears_the_nominated_node_frees_its_room() -> None:
    """The watch event of the write that nominated a pod (made before it
    waited at Permit) can arrive after the rejection cleared the nomination
    in memory; the clearing write's own event must undo it
    (updateNominatedPodUnlocked, backend/queue/nominator.go v1.37.2), or the
    node keeps room for a pod that no longer goes there. Seen on the real
    control plane: a gang's second attempt found its node full of its own
    members' stale nominations."""
    async with running(make_config(kubernetesVersion="1.37")) as berth:
        berth.nodes(make_node("n0", cpu="2", pods=110))
        parked = berth_pod("parked", requests={"cpu": "1"}, spec={"nodeSelector": {"pool": "none"}})
        berth.pods(parked)
        await berth.settle()
        berth.pods(with_nomination(berth.cluster.pods["default/parked"], "n0"))  # the late event
        assert berth.scheduler.queue.nominator.node_of("uid-default-parked") == "n0"
        berth.pods(with_nomination(berth.cluster.pods["default/parked"], ""))  # the clearing write's
        assert berth.scheduler.queue.nominator.node_of("uid-default-parked") == ""
        berth.pods(berth_pod("next", requests={"cpu": "2"}))
        await berth.settle()
        assert berth.node_of("default/next") == "n0"


async def test_a_rejected_pod_clears_the_nomination_written_before_its_watch_event_arrives() -> None:
    """The pod waited at Permit with its nominatedNodeName written, and was
    rejected before the watch brought that write back: the failure still
    clears it, though the pod as last seen names no node."""
    async with running(config("1.37", HoldAtPermit)) as berth:  # type: ignore[arg-type]
        writes: list[tuple[str, str]] = []

        async def nominate(pod: model.Pod, node: str) -> None:
            writes.append((pod.key, node))  # written; its watch event not delivered

        berth.cluster.nominate = nominate  # type: ignore[method-assign]
        berth.nodes(make_node("n0", cpu="2", pods=110))
        berth.pods(berth_pod("p", requests={"cpu": "1"}, labels=HOLD))
        await asyncio.sleep(1)
        assert writes == [("default/p", "n0")]
        assert berth.core.waiting.reject("uid-default-p", "HoldAtPermit", "the gang cannot be completed")
        await berth.settle()
        assert writes == [("default/p", "n0"), ("default/p", "")]
        assert berth.scheduler.queue.nominator.node_of("uid-default-p") == ""


async def test_a_nomination_made_here_survives_an_update_that_names_no_node() -> None:
    """Neither the old nor the new object names a node: the nomination this
    process made and has not yet seen written stays (nominator.go's one
    case of keeping it)."""
    async with running(make_config(kubernetesVersion="1.37")) as berth:
        berth.nodes(make_node("n0", cpu="2", pods=110))
        berth.pods(berth_pod("parked", requests={"cpu": "1"}, spec={"nodeSelector": {"pool": "none"}}))
        await berth.settle()
        nominator = berth.scheduler.queue.nominator
        info = PodInfo.of(berth.cluster.pods["default/parked"])
        nominator.add(info, "n0")  # in memory only, as preemption does before its write
        relabelled = berth.cluster.pods["default/parked"]
        relabelled = msgspec.structs.replace(
            relabelled, metadata=msgspec.structs.replace(relabelled.metadata, labels={"x": "y"})
        )
        berth.pods(relabelled)
        assert nominator.node_of("uid-default-parked") == "n0"
        assert nominator.pods_on("n0")[0].pod.metadata.labels == {"x": "y"}  # the pointer follows


async def test_nothing_is_written_before_binding_when_neither_permit_nor_pre_bind_waits() -> None:
    async with running(config("1.37", SlowPreBind)) as berth:  # type: ignore[arg-type]
        nominations: list[tuple[str, str]] = []
        real = berth.cluster.nominate

        async def nominate(pod: model.Pod, node: str) -> None:
            nominations.append((pod.key, node))
            await real(pod, node)

        berth.cluster.nominate = nominate  # type: ignore[method-assign]
        berth.nodes(make_node("n0", cpu="2", pods=110))
        berth.pods(berth_pod("plain", requests={"cpu": "1"}))  # its pre-flight says Skip
        await berth.settle()
        assert berth.node_of("default/plain") == "n0"
        assert nominations == []


# ---------------------------------------------------------------- Bind retried


@pytest.mark.parametrize(
    ("version", "failures", "calls", "bound_within"),
    [
        # util.BindPod (utils.go v1.37.2): retry.OnError(DefaultBackoff, Retriable): 4 tries,
        # 10 ms, 50 ms, 250 ms apart (+ up to 10 %).
        ("1.37", 3, 4, 0.4),
        # Before 1.37 a failed Binding fails the binding cycle: the pod is retried after backoff (1 s).
        ("1.36", 1, 2, 2.0),
        ("1.35", 1, 2, 2.0),
    ],
)
async def test_a_binding_the_api_server_may_take_if_asked_again_is_retried_from_1_37(
    version: str, failures: int, calls: int, bound_within: float
) -> None:
    async with running(make_config(kubernetesVersion=version)) as berth:
        loop = asyncio.get_running_loop()
        real = berth.cluster.bind
        tries: list[float] = []

        async def flaky(pod: model.Pod, node: str) -> None:
            tries.append(loop.time())
            if len(tries) <= failures:
                raise BindRetriable("binding default/p to n0: HTTP 503: unavailable")
            await real(pod, node)

        berth.cluster.bind = flaky  # type: ignore[method-assign]
        berth.nodes(make_node("n0", cpu="2", pods=110))
        berth.pods(berth_pod("p", requests={"cpu": "1"}))
        await berth.settle()
        assert berth.node_of("default/p") == "n0"
        assert len(tries) == calls
        assert tries[-1] - tries[0] <= bound_within
        if version == "1.37":
            gaps = [b - a for a, b in itertools.pairwise(tries)]
            for gap, base in zip(gaps, (0.010, 0.050, 0.250), strict=True):
                assert base <= gap <= base * 1.1 + 1e-9
            assert failed(berth, "default/p") == []


async def test_a_binding_that_fails_every_try_fails_with_the_last_error() -> None:
    async with running(make_config(kubernetesVersion="1.37")) as berth:
        tries = 0

        async def down(pod: model.Pod, node: str) -> None:
            nonlocal tries
            tries += 1
            raise BindRetriable(f"binding default/p to n0: HTTP 500: try {tries}")

        berth.cluster.bind = down  # type: ignore[method-assign]
        berth.nodes(make_node("n0", cpu="2", pods=110))
        berth.pods(berth_pod("p", requests={"cpu": "1"}))
        await asyncio.sleep(0.5)
        assert tries == 4
        # Named as framework.go (v1.37.2) RunBindPlugins wraps it.
        assert failed(berth, "default/p") == [
            'running Bind plugin "DefaultBinder": binding default/p to n0: HTTP 500: try 4'
        ]


# ---------------------------------------------------------------- flushed, then scheduled


@pytest.mark.parametrize(("version", "counted"), [("1.35", None), ("1.36", 1.0), ("1.37", 1.0)])
async def test_a_pod_scheduled_after_a_flush_of_the_unschedulable_pool_is_counted_from_1_36(
    version: str, counted: float | None
) -> None:
    RejectFirstFilter.seen = set()
    async with running(config(version, RejectFirstFilter)) as berth:  # type: ignore[arg-type]
        berth.nodes(make_node("n0", cpu="2", pods=110))
        berth.pods(berth_pod("p", requests={"cpu": "1"}))
        await berth.settle()
        assert berth.phase("default/p") == "Unschedulable"
        # No event wakes it: podMaxInUnschedulablePodsDuration (5 min) does, at a 30 s pass.
        await asyncio.sleep(300)
        assert berth.node_of("default/p") == ""
        await asyncio.sleep(31)
        await berth.settle()
        assert berth.node_of("default/p") == "n0"
        got = berth.core.metrics.registry.get_sample_value("scheduler_pod_scheduled_after_flush_total")
        assert got == counted


# ---------------------------------------------------------------- an assumed pod deleted


async def test_an_assumed_pod_being_deleted_frees_its_room_at_once() -> None:
    """handleAssumedPodDeletion (eventhandlers.go, v1.35): rejected at Permit,
    and the pods its room may help are woken."""
    async with running(config("1.35", HoldAtPermit)) as berth:  # type: ignore[arg-type]
        berth.nodes(make_node("n0", cpu="2", pods=110))
        berth.pods(berth_pod("held", requests={"cpu": "2"}, labels=HOLD))
        await asyncio.sleep(1)
        berth.pods(berth_pod("next", requests={"cpu": "2"}))
        await asyncio.sleep(1)
        assert berth.phase("default/next") == "Unschedulable"
        held = berth.cluster.pods["default/held"]
        deleting = msgspec.structs.replace(
            held, metadata=msgspec.structs.replace(held.metadata, deletion_timestamp="2026-11-27T00:00:00Z")
        )
        berth.pods(deleting)
        await berth.settle()
        assert berth.scheduler.waiting.uids() == []
        assert berth.node_of("default/next") == "n0"
        assert failed(berth, "default/held")[-1] == "0/1 nodes are available: 1 removed."


# ---------------------------------------------------------------- rejections after Filter


async def test_a_rejection_at_permit_reads_as_a_fit_error_on_its_node() -> None:
    """schedule_one.go: a Permit (or Reserve, or WaitOnPermit) rejection is a
    FitError with NumAllNodes 1 and the node's status."""

    class RejectAtPermit:
        NAME: ClassVar[str] = "RejectAtPermit"
        Args: ClassVar[None] = None

        def __init__(self, args: None, handle: Handle) -> None:
            pass

        def permit(self, state: fw.CycleState, pod: PodInfo, node: str) -> tuple[fw.Status, float]:
            return fw.Status.unschedulable("no entry", plugin=self.NAME), 0.0

    async with running(config("1.37", RejectAtPermit)) as berth:  # type: ignore[arg-type]
        berth.nodes(make_node("n0", cpu="2", pods=110))
        berth.pods(berth_pod("p", requests={"cpu": "1"}))
        await berth.settle()
        assert failed(berth, "default/p") == ["0/1 nodes are available: 1 no entry."]
        qpi = berth.scheduler.queue.get("uid-default-p")
        assert qpi is not None and qpi.unschedulable_plugins == {"RejectAtPermit"}
