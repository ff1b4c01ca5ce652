"""The gRPC Cluster feed's PodGroups in every dialect with an object
(``PodGroup.dialect``: scheduler-plugins, Volcano, KAI): Volcano's fields
reach the gang, groups of one name in two dialects are two gangs (the
embedded cluster keys them by dialect too), ``ListPodGroups`` names each
row's dialect, and a dialect without an object is refused changing nothing."""

from __future__ import annotations

import grpc
import pytest

from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, model_pb2, scheduler_pb2, scheduler_pb2_grpc
from berth.gangs import GangKey
from berth_client import ManifestError, objects
from tests.grpc.conftest import Served, serving


def group(name: str, dialect: str = "", **fields: object) -> model_pb2.PodGroup:
    return model_pb2.PodGroup(
        metadata=model_pb2.ObjectMeta(name=name, namespace="team"),
        dialect=dialect,
        **fields,  # type: ignore[arg-type]
    )


async def upsert(served: Served, *groups: model_pb2.PodGroup) -> int:
    async with served.channel() as ch:
        reply = await cluster_pb2_grpc.ClusterStub(ch).UpsertPodGroups(
            cluster_pb2.UpsertPodGroupsRequest(groups=list(groups))
        )
        return int(reply.upserted)


async def test_volcanos_fields_reach_the_gang() -> None:
    async with serving() as served:
        vc = group(
            "train",
            "volcano",
            min_member=3,
            queue="research",
            min_task_member={"ps": 1, "worker": 2},
            min_resources={"cpu": 3000},
        )
        assert await upsert(served, vc) == 1
        gang = served.core.gangs.gang(GangKey("volcano", "team", "train"))
        assert gang is not None
        assert (gang.min_member, dict(gang.min_task_member), gang.queue) == (3, {"ps": 1, "worker": 2}, "research")
        assert dict(gang.min_resources) == {"cpu": 3000}


@pytest.mark.parametrize("together", [True, False], ids=["one batch", "two calls"])
async def test_groups_of_one_name_in_two_dialects_are_two_gangs(together: bool) -> None:
    async with serving() as served:
        sp, vc = group("g", "scheduler-plugins", min_member=2), group("g", "volcano", min_member=4)
        if together:
            assert await upsert(served, sp, vc) == 2
        else:
            assert await upsert(served, sp) == 1
            assert await upsert(served, vc) == 1
        assert sorted(g.api_version for g in served.feed.pod_groups.values()) == [
            "scheduling.volcano.sh/v1beta1",
            "scheduling.x-k8s.io/v1alpha1",
        ]
        gangs = served.core.gangs
        assert gangs.gang(GangKey("scheduler-plugins", "team", "g")).min_member == 2  # type: ignore[union-attr]
        assert gangs.gang(GangKey("volcano", "team", "g")).min_member == 4  # type: ignore[union-attr]
        async with served.channel() as ch:
            rows = (
                await scheduler_pb2_grpc.SchedulerStub(ch).ListPodGroups(scheduler_pb2.ListPodGroupsRequest())
            ).groups
        assert [(r.name, r.dialect, r.min_member) for r in rows] == [("g", "scheduler-plugins", 2), ("g", "volcano", 4)]


async def test_an_empty_dialect_is_scheduler_plugins() -> None:
    async with serving() as served:
        await upsert(served, group("g", min_member=2))
        (stored,) = served.feed.pod_groups.values()
        assert stored.api_version == "scheduling.x-k8s.io/v1alpha1"


@pytest.mark.parametrize("dialect", ["kueue", "yunikorn", "workload-api", "slurm"])
async def test_a_dialect_without_a_pod_group_object_is_refused_changing_nothing(dialect: str) -> None:
    async with serving() as served:
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await upsert(served, group("ok", min_member=1), group("g", dialect, min_member=2))
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert e.value.details() == (
            f"groups[1].dialect: {dialect!r} has no PodGroup object Berth reads "
            "(one of kai, scheduler-plugins, volcano, or empty)"
        )
        assert served.feed.pod_groups == {}
        assert served.core.gangs.keys() == []


async def test_submit_makes_scheduler_plugins_gangs_only() -> None:
    async with serving() as served:
        pod = model_pb2.Pod(metadata=model_pb2.ObjectMeta(name="p", namespace="team"))
        async with served.channel() as ch:
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await scheduler_pb2_grpc.SchedulerStub(ch).Submit(
                    scheduler_pb2.SubmitRequest(pods=[pod], group=group("g", "volcano", min_member=1))
                )
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "group.dialect: Submit makes scheduler-plugins gangs" in (e.value.details() or "")
        assert served.core.pods.by_key("team/p") is None


@pytest.mark.parametrize(
    ("api_version", "dialect"),
    [
        ("scheduling.x-k8s.io/v1alpha1", "scheduler-plugins"),
        ("scheduling.volcano.sh/v1beta1", "volcano"),
        ("scheduling.run.ai/v2alpha2", "kai"),
        (None, ""),  # no apiVersion: scheduler-plugins', as before
    ],
)
def test_a_manifests_api_version_is_its_dialect_and_volcanos_spec_is_read(
    api_version: str | None, dialect: str
) -> None:
    doc: dict[str, object] = {
        "kind": "PodGroup",
        "metadata": {"name": "g"},
        "spec": {"minMember": 2, "queue": "research", "minTaskMember": {"ps": 1}},
    }
    if api_version is not None:
        doc["apiVersion"] = api_version
    msg = objects.message(doc, model_pb2.PodGroup)
    assert (msg.dialect, msg.min_member, msg.queue, dict(msg.min_task_member)) == (dialect, 2, "research", {"ps": 1})


def test_a_manifest_of_a_pod_group_kind_berth_is_not_fed_is_refused() -> None:
    doc = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "g"}}
    with pytest.raises(ManifestError) as e:
        objects.message(doc)
    assert str(e.value).startswith('apiVersion: "scheduling.k8s.io/v1beta1" is not a PodGroup apiVersion Berth is fed')
