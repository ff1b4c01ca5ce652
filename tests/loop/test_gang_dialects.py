"""Gangs in every dialect, scheduled all or nothing by the running loop (virtual time)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from berth.cluster import model
from berth.testing import make_node, make_pod
from tests.loop.conftest import Berth, Looks, make_config, running


def said(berth: Berth, key: str) -> str:
    """What PreEnqueue says of the pod now (its Gated decision keeps the first count)."""
    return berth.scheduler.last_message(berth.cluster.pods[key].metadata.uid)


def podgroup(api_version: str, name: str, **spec: Any) -> model.PodGroup:
    return msgspec.convert(
        {
            "apiVersion": api_version,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": spec,
        },
        model.PodGroup,
    )


def member(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    cpu: str = "1",
    scheduler: str = "berth",
) -> model.Pod:
    return make_pod(name, scheduler_name=scheduler, labels=labels, annotations=annotations, requests={"cpu": cpu})


_YK_GROUPS = json.dumps([{"name": "workers", "minMember": 3, "minResource": {"cpu": "1"}}])

#: dialect -> (its PodGroup, or None; how its i-th member is written)
DIALECTS: dict[str, tuple[model.PodGroup | None, Callable[[int], model.Pod]]] = {
    "volcano": (
        podgroup("scheduling.volcano.sh/v1beta1", "g", minMember=3),
        lambda i: member(f"m{i}", annotations={"scheduling.k8s.io/group-name": "g"}),
    ),
    "kai": (
        podgroup("scheduling.run.ai/v2alpha2", "g", minMember=3),
        lambda i: member(f"m{i}", annotations={"pod-group-name": "g"}),
    ),
    "kueue": (
        None,
        lambda i: member(
            f"m{i}",
            labels={"kueue.x-k8s.io/pod-group-name": "g"},
            annotations={"kueue.x-k8s.io/pod-group-total-count": "3"},
        ),
    ),
    "yunikorn": (
        None,
        lambda i: member(
            f"m{i}",
            labels={"applicationId": "app"},
            annotations={
                "yunikorn.apache.org/task-groups": _YK_GROUPS,
                "yunikorn.apache.org/task-group-name": "workers",
            },
        ),
    ),
    "scheduler-plugins": (
        podgroup("scheduling.x-k8s.io/v1alpha1", "g", minMember=3),
        lambda i: member(f"m{i}", labels={"scheduling.x-k8s.io/pod-group": "g"}),
    ),
}


@pytest.mark.parametrize("dialect", list(DIALECTS))
async def test_a_gang_waits_for_its_members_then_binds_all_together(dialect: str) -> None:
    group, make = DIALECTS[dialect]
    async with running() as berth:
        berth.nodes(*(make_node(f"n{i}", cpu="4", pods=110) for i in range(2)))
        if group is not None:
            berth.core.on_pod_group(group)
        berth.pods(make(0), make(1))
        await berth.settle()
        assert berth.bound() == {}
        assert berth.phase("default/m0") == "Gated"
        assert "has 2 of 3 required pods" in said(berth, "default/m0")
        berth.pods(make(2))
        await berth.settle()
        assert sorted(berth.bound()) == ["default/m0", "default/m1", "default/m2"]


@pytest.mark.parametrize("dialect", list(DIALECTS))
async def test_a_gang_that_cannot_fit_whole_binds_no_member(dialect: str) -> None:
    group, make = DIALECTS[dialect]
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="2", pods=110))  # room for 2 of 3
        if group is not None:
            berth.core.on_pod_group(group)
        berth.pods(*(make(i) for i in range(3)))
        await asyncio.sleep(30)
        assert berth.bound() == {}
        assert berth.cluster.bindings == []
        berth.nodes(make_node("n1", cpu="2", pods=110))
        await asyncio.sleep(30)
        assert sorted(berth.bound()) == ["default/m0", "default/m1", "default/m2"]


async def test_per_task_minimums_hold_the_gang_until_each_task_has_its_pods() -> None:
    """Volcano's minTaskMember: 1 ps and 2 workers, whatever else exists."""
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="8", pods=110))
        berth.core.on_pod_group(
            podgroup("scheduling.volcano.sh/v1beta1", "tf", minMember=3, minTaskMember={"ps": 1, "worker": 2})
        )

        def task(name: str, t: str) -> model.Pod:
            return member(name, annotations={"scheduling.k8s.io/group-name": "tf", "volcano.sh/task-spec": t})

        berth.pods(*(task(f"w{i}", "worker") for i in range(3)))
        await berth.settle()
        assert berth.bound() == {}
        assert 'has 0 of 1 required pods of task "ps"' in said(berth, "default/w0")
        berth.pods(task("ps0", "ps"))
        await berth.settle()
        assert sorted(berth.bound()) == ["default/ps0", "default/w0", "default/w1", "default/w2"]


async def test_a_resource_gang_waits_until_its_min_resources_are_free() -> None:
    """Spark on Volcano: minMember 1, minResources = driver + executors (Volcano's enqueue)."""
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="4", pods=110))
        berth.core.on_pod_group(
            podgroup("scheduling.volcano.sh/v1beta1", "spark-pi-pg", minMember=1, minResources={"cpu": "6"})
        )
        driver = member("driver", annotations={"scheduling.k8s.io/group-name": "spark-pi-pg"})
        berth.pods(driver)
        await berth.settle()
        assert berth.bound() == {}
        assert said(berth, "default/driver").endswith("waits for its minResources to be free: cpu 4 free of 6")
        berth.nodes(make_node("n1", cpu="4", pods=110))
        await berth.settle()
        assert berth.node_of("default/driver")
        # Admitted: the executors follow one by one, the gate no longer applies.
        berth.pods(member("exec-1", cpu="4", annotations={"scheduling.k8s.io/group-name": "spark-pi-pg"}))
        await berth.settle()
        assert berth.node_of("default/exec-1")


def _yunikorn(name: str, style: str) -> model.Pod:
    return member(
        name,
        labels={"applicationId": "app"},
        annotations={
            "yunikorn.apache.org/task-groups": _YK_GROUPS,
            "yunikorn.apache.org/task-group-name": "workers",
            "yunikorn.apache.org/schedulingPolicyParameters": (
                f"placeholderTimeoutInSeconds=60 gangSchedulingStyle={style}"
            ),
        },
    )


@pytest.mark.parametrize(("style", "bound_after_timeout"), [("Soft", 2), ("Hard", 0)])
async def test_a_soft_gang_runs_as_no_gang_after_its_timeout_a_hard_one_keeps_waiting(
    style: str, bound_after_timeout: int
) -> None:
    """YuniKorn: Soft (the default) falls back to normal scheduling when the
    placeholders time out; Hard fails the application (Berth: it stays a gang)."""
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="8", pods=110))
        berth.pods(_yunikorn("a", style), _yunikorn("b", style))
        await asyncio.sleep(59)
        assert berth.bound() == {}
        await asyncio.sleep(2)
        assert len(berth.bound()) == bound_after_timeout


async def test_a_pod_with_invalid_gang_keys_waits_with_the_reason_and_others_are_scheduled() -> None:
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="8", pods=110))
        berth.pods(
            member(
                "bad-json",
                labels={"applicationId": "x"},
                annotations={"yunikorn.apache.org/task-groups": "[{", "yunikorn.apache.org/task-group-name": "t"},
            ),
            member(
                "two-dialects",
                labels={"scheduling.x-k8s.io/pod-group": "a"},
                annotations={"scheduling.k8s.io/group-name": "b"},
            ),
            member("plain"),
        )
        await berth.settle()
        assert sorted(berth.bound()) == ["default/plain"]
        assert berth.phase("default/bad-json") == "Gated"
        assert (
            "annotation yunikorn.apache.org/task-groups: not valid JSON" in berth.decision("default/bad-json").message
        )
        assert (
            'gang: pod is claimed by two gang sources, scheduler-plugins (group "a") and volcano (group "b")'
            in said(berth, "default/two-dialects")
        )


async def test_a_dialect_left_out_of_gang_sources_is_scheduled_pod_by_pod() -> None:
    cfg = make_config(gangSources=["scheduler-plugins", "kueue"])
    async with running(cfg) as berth:
        berth.nodes(make_node("n0", cpu="8", pods=110))
        berth.pods(DIALECTS["volcano"][1](0))  # its PodGroup never comes
        await berth.settle()
        assert sorted(berth.bound()) == ["default/m0"]


async def test_a_profile_schedules_the_pods_of_its_aliases() -> None:
    cfg = make_config(profiles=[{"schedulerName": "berth", "aliases": ["volcano", "yunikorn"]}])
    async with running(cfg) as berth:
        berth.nodes(make_node("n0", cpu="8", pods=110))
        berth.pods(
            member("v", scheduler="volcano"),
            member("y", scheduler="yunikorn"),
            member("other", scheduler="kai-scheduler"),
        )
        await berth.settle()
        assert sorted(berth.bound()) == ["default/v", "default/y"]
        assert berth.phase("default/other") == ""  # another scheduler's


@pytest.mark.parametrize(
    ("group", "make", "phases"),
    [
        pytest.param(
            podgroup("scheduling.volcano.sh/v1beta1", "g", minMember=2),
            lambda i: member(f"m{i}", annotations={"scheduling.k8s.io/group-name": "g"}),
            ("Inqueue", "Inqueue"),
            id="volcano: Inqueue once admitted (its controllers create pods then)",
        ),
        pytest.param(
            podgroup("scheduling.volcano.sh/v1beta1", "g", minMember=2, minResources={"cpu": "64"}),
            lambda i: member(f"m{i}", annotations={"scheduling.k8s.io/group-name": "g"}),
            ("Pending", "Pending"),
            id="volcano: Pending while its minResources are not free",
        ),
        pytest.param(
            podgroup("scheduling.x-k8s.io/v1alpha1", "g", minMember=2),
            lambda i: member(f"m{i}", labels={"scheduling.x-k8s.io/pod-group": "g"}),
            ("Pending", "Scheduling"),
            id="scheduler-plugins: Pending, then Scheduling with minMember pods",
        ),
    ],
)
async def test_the_podgroups_phase_is_written_back_as_its_dialect_keeps_it(
    group: model.PodGroup, make: Callable[[int], model.Pod], phases: tuple[str, str]
) -> None:
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="8", pods=110))
        berth.cluster.upsert_pod_groups([group])
        berth.pods(make(0))
        await berth.settle()
        stored = berth.core.gangs.pod_group(group.api_version, "default", "g")
        assert stored is not None and stored.status.phase == phases[0]
        berth.pods(make(1))
        await berth.settle()
        assert stored.status.phase == phases[1]


async def test_queue_keys_and_aliases_put_pods_in_berth_queues_and_reload() -> None:
    cfg = make_config(
        queues=[{"name": "research", "max": {"cpu": "8"}}, {"name": "sandbox", "max": {"cpu": "8"}}],
        queueAliases={"root.sandbox": "sandbox"},
    )
    async with running(cfg) as berth:
        quota = berth.core.quota
        kueue = make_pod("k", labels={"kueue.x-k8s.io/queue-name": "research"})
        yk = make_pod("y", annotations={"yunikorn.apache.org/queue": "root.sandbox"})
        volcano = make_pod("v", annotations={"scheduling.k8s.io/group-name": "g"})
        berth.core.on_pod_group(podgroup("scheduling.volcano.sh/v1beta1", "g", minMember=1, queue="research"))
        assert quota.leaf_of(kueue) == ("research", "")
        assert quota.leaf_of(yk) == ("sandbox", "")
        assert quota.leaf_of(volcano) == ("research", "")
        unknown = make_pod("u", labels={"kai.scheduler/queue": "gpu"})
        assert quota.leaf_of(unknown) == ("", 'pod names queue "gpu" (kai.scheduler/queue), which does not exist')
        berth.core.reload_queue_naming(["berth.dev/queue"], {})  # hot reload: only Berth's own key
        assert quota.leaf_of(kueue) == ("", "")  # unqueued: no queue matches its namespace
        assert quota.leaf_of(yk) == ("", "")
        assert quota.leaf_of(volcano) == ("research", "")  # its PodGroup still names it


async def test_a_new_member_wakes_only_its_own_gang_so_a_feed_of_gangs_stays_linear(queue_looks: Looks) -> None:
    """Each arriving member wakes its parked siblings, looked up in the gang
    index; scanning every parked pod per member made 4000 gang pods take 36 s
    to feed. The queue looks at no more pods than the members have siblings."""
    gangs, size = 60, 5
    async with running() as berth:
        berth.cluster.upsert_nodes([make_node("n", cpu="1", pods=110)])  # room for no gang
        berth.cluster.upsert_pods(
            [
                member(f"g{g}-{i}", labels={"scheduling.x-k8s.io/pod-group": f"g{g}"})
                for g in range(gangs)
                for i in range(size)
            ]
        )
        await asyncio.sleep(1)
    assert queue_looks.count <= gangs * size * size  # a scan per member would be ~ (gangs * size)**2 / 2 = 45 000
