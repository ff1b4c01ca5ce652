"""What KubernetesSource writes for a pod that stays pending: the
PodScheduled condition always carries the latest reason (kube-scheduler's
``updatePod`` patches whenever the condition differs), while repeated
FailedScheduling events are rate-limited per message."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from berth.adapters.kubernetes.source import KubernetesSource
from berth.testing import make_pod

pytestmark = pytest.mark.looptime

QUOTA = "0/2 nodes are available: queue c: cpu 2/1 over max."
NODES = "0/2 nodes are available: 2 Insufficient cpu."


class FakeCoreV1:
    def __init__(self) -> None:
        self.conditions: list[str] = []
        self.fail = False

    async def patch_namespaced_pod_status(self, name: str, namespace: str, body: dict[str, Any], **_: Any) -> None:
        if self.fail:
            raise ApiException(status=500, reason="Internal Server Error")
        [condition] = body["status"]["conditions"]
        self.conditions.append(condition["message"])


class _Resp:
    status = 201

    def release(self) -> None:
        pass


class FakeEventsV1:
    def __init__(self) -> None:
        self.notes: list[str] = []

    async def create_namespaced_event(self, namespace: str, body: dict[str, Any], **_: Any) -> _Resp:
        self.notes.append(body["note"])
        return _Resp()


@pytest.fixture
async def source() -> KubernetesSource:
    src = KubernetesSource(client.ApiClient(client.Configuration(host="https://unused")), identity="t")
    src.core_v1, src.events_v1 = FakeCoreV1(), FakeEventsV1()
    return src


@pytest.mark.parametrize(
    ("reasons", "conditions", "events"),
    [
        # The same reason again: nothing new to write.
        ([QUOTA, QUOTA], [QUOTA], [QUOTA]),
        # A reason that comes back: the condition follows it; the event for a
        # message already reported within the minute is not repeated.
        ([QUOTA, NODES, QUOTA], [QUOTA, NODES, QUOTA], [QUOTA, NODES]),
    ],
)
async def test_the_condition_shows_the_latest_reason_and_events_are_not_repeated(
    source: KubernetesSource, reasons: list[str], conditions: list[str], events: list[str]
) -> None:
    pod = make_pod("held", uid="u1")
    for message in reasons:
        await source.report_unschedulable(pod, message)
    assert source.core_v1.conditions == conditions
    assert source.events_v1.notes == events


async def test_a_condition_the_api_refused_is_written_on_the_next_report(source: KubernetesSource) -> None:
    pod = make_pod("held", uid="u1")
    source.core_v1.fail = True
    await source.report_unschedulable(pod, QUOTA)
    source.core_v1.fail = False
    await source.report_unschedulable(pod, QUOTA)
    assert source.core_v1.conditions == [QUOTA]
    assert source.events_v1.notes == [QUOTA]  # the event went out the first time
