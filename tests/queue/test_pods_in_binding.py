"""Pods a preemptor can stop in their binding cycle: at Permit
(``waiting_pods_map.go``: Reject, Preempt) and in PreBind
(``pods_in_prebind_map_test.go`` v1.37.2: CancelPod, MarkPrebound)."""

from __future__ import annotations

import asyncio

import pytest

from berth.cache.infos import PodInfo
from berth.framework import interface as fw
from berth.queue.waiting import PodsInPreBind, WaitingPods
from berth.testing import make_pod

pytestmark = pytest.mark.looptime

UID = "uid-default-p"


@pytest.mark.parametrize(
    ("stop", "code"),
    [
        # Reject: the pod is unschedulable; Preempt: an error, so it is retried after backoff.
        ("reject", fw.Code.UNSCHEDULABLE),
        ("preempt", fw.Code.ERROR),
    ],
)
async def test_a_waiting_pod_stops_once_with_the_plugin_and_message(stop: str, code: fw.Code) -> None:
    waiting = WaitingPods()
    fut = waiting.add(PodInfo.of(make_pod("p")), "n0", {"Gang": 60.0})
    assert getattr(waiting, stop)(UID, "DefaultPreemption", "preempted") is True
    assert await fut == fw.Status(code, ("preempted",), "DefaultPreemption")
    assert waiting.get(UID) is None
    assert getattr(waiting, stop)(UID, "DefaultPreemption", "again") is False


async def test_cancel_pod_stops_a_running_pre_bind_with_its_cause() -> None:
    pods = PodsInPreBind()
    pods.add(UID)
    started = asyncio.Event()

    async def pre_bind() -> fw.Status:
        started.set()
        await asyncio.sleep(30)
        return fw.SUCCESS

    run = asyncio.ensure_future(pods.run(UID, pre_bind()))
    await started.wait()
    assert pods.cancel(UID, "preempted by DefaultPreemption") is True
    assert pods.cancel(UID, "twice") is True  # CancelPod: true until prebound, the first cause kept
    assert await run == fw.Status.error("preempted by DefaultPreemption")


async def test_cancel_pod_before_pre_bind_runs_fails_it_at_once() -> None:
    pods = PodsInPreBind()
    pods.add(UID)
    assert pods.cancel(UID, "preempted by DefaultPreemption")
    ran = False

    async def pre_bind() -> fw.Status:
        nonlocal ran
        ran = True
        return fw.SUCCESS

    coro = pre_bind()
    assert await pods.run(UID, coro) == fw.Status.error("preempted by DefaultPreemption")
    coro.close()
    assert not ran


async def test_a_pod_past_pre_bind_cannot_be_cancelled() -> None:
    """MarkPrebound: once PreBind is over the pod goes to Bind; CancelPod
    says false and the preemptor deletes the victim instead."""
    pods = PodsInPreBind()
    pods.add(UID)

    async def pre_bind() -> fw.Status:
        return fw.SUCCESS

    assert await pods.run(UID, pre_bind()) == fw.SUCCESS
    assert pods.cancel(UID, "too late") is False
    pods.remove(UID)
    assert pods.cancel(UID, "gone") is False


async def test_the_binding_cycle_cancelled_itself_is_not_a_preemption() -> None:
    pods = PodsInPreBind()
    pods.add(UID)

    async def pre_bind() -> fw.Status:
        await asyncio.sleep(30)
        return fw.SUCCESS

    run = asyncio.ensure_future(pods.run(UID, pre_bind()))
    await asyncio.sleep(1)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
