"""PodGroup conditions written back to the API server (the Workload API, GenericWorkload)."""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from berth.adapters.kubernetes.workload_api import PodGroupConditions
from berth.cluster import workload_api


class FakeCustomObjects:
    """``patch_namespaced_custom_object_status``, recording each call; slow
    to answer, so that a second write would overtake the first if unordered."""

    def __init__(self, fail: int | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.fail = fail

    async def patch_namespaced_custom_object_status(self, *args: Any, **kw: Any) -> None:
        await asyncio.sleep(0.05 if not self.calls else 0.0)
        self.calls.append((*args, kw["_content_type"]))
        if self.fail is not None:
            raise ApiException(status=self.fail, reason="Not Found" if self.fail == 404 else "Conflict")


def group() -> workload_api.PodGroup:
    return workload_api.PodGroup(metadata=workload_api.ObjectMeta(name="trainers", namespace="ml"))


def cond(status: str, reason: str, message: str = "") -> workload_api.Condition:
    return workload_api.Condition(type="PodGroupInitiallyScheduled", status=status, reason=reason, message=message)


async def test_conditions_are_patched_in_order_with_a_strategic_merge_on_the_status() -> None:
    api = client.ApiClient(client.Configuration(host="https://unused"))
    writes = PodGroupConditions(api, "v1beta1")
    fake = FakeCustomObjects()
    writes._custom = fake
    writes.write(group(), cond("False", "Unschedulable", "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"))
    writes.write(group(), cond("True", "Scheduled"))
    await writes.close()
    assert [c[:5] for c in fake.calls] == [("scheduling.k8s.io", "v1beta1", "ml", "podgroups", "trainers")] * 2
    bodies = [c[5]["status"]["conditions"] for c in fake.calls]
    assert [[(x["status"], x["reason"]) for x in b] for b in bodies] == [
        [("False", "Unschedulable")],
        [("True", "Scheduled")],
    ]
    assert {c[6] for c in fake.calls} == {"application/strategic-merge-patch+json"}
    assert writes._last == {}
    await api.close()


async def test_a_pod_group_gone_or_a_refused_write_is_logged_not_raised(caplog: Any) -> None:
    for code, logged in ((404, False), (409, True)):
        api = client.ApiClient(client.Configuration(host="https://unused"))
        writes = PodGroupConditions(api, "v1beta1")
        writes._custom = FakeCustomObjects(fail=code)
        caplog.clear()
        writes.write(group(), cond("True", "Scheduled"))
        await writes.close()
        assert ("HTTP 409" in caplog.text) is logged
        await api.close()
