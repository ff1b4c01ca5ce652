"""Kubernetes' Workload API as one of berth.gangs' sources (``workload-api``):
membership, the gang its PodGroup defines, claims shared with another
dialect, ``gangSources:`` turning it off, and the views (``get podgroups``,
``why``, the dashboard's gang card) listing its gangs beside the other
dialects'. GangScheduling's own behaviour is tests/plugins/test_gangscheduling.py's."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from berth import features
from berth.adapters.http import ui
from berth.cluster import model, workload_api
from berth.gangs import Gang, GangIndex, GangKey, InvalidGang, Membership
from berth.gangs.sources import WORKLOAD_API_PERMIT_TIMEOUT_SECONDS, workload_gang_key, workload_group_key
from berth.scheduling import visibility
from berth.testing import make_node, make_pod
from tests.loop.conftest import Berth, make_config, running

GATES: dict[str, Any] = {"featureGates": {"GenericWorkload": True}}


def pg(name: str, min_count: int | None, namespace: str = "default") -> workload_api.PodGroup:
    policy: dict[str, Any] = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    out = workload_api.decode(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "generation": 1},
            "spec": {"schedulingPolicy": policy},
        }
    )
    assert isinstance(out, workload_api.PodGroup)
    return out


def member(name: str, group: str, *, cpu: str = "1", **kw: Any) -> model.Pod:
    spec = {"schedulingGroup": {"podGroupName": group}}
    return make_pod(name, uid=name, scheduler_name="berth", requests={"cpu": cpu}, spec=spec, **kw)


def index_with(*objs: workload_api.PodGroup | workload_api.Workload, version: str = "1.37") -> GangIndex:
    store = workload_api.GroupStore(features.parse_version(version))
    for o in objs:
        store.put(o)
    return GangIndex(workload_groups=store)


# ---------------------------------------------------------------- the source


@pytest.mark.parametrize(
    ("group", "name"),
    [
        (workload_api.GroupKey("ns", "pg"), "pg"),
        (workload_api.GroupKey("ns", "workers", "job", ""), "job/workers"),
        (workload_api.GroupKey("ns", "workers", "job", "r/0"), "job/workers/r/0"),
    ],
)
def test_a_workload_api_group_key_round_trips_through_the_registrys_key(
    group: workload_api.GroupKey, name: str
) -> None:
    key = workload_gang_key(group)
    assert key == GangKey("workload-api", "ns", name)
    assert workload_group_key(key) == group


@pytest.mark.parametrize(
    ("min_count", "want"),
    [
        (3, 3),
        (1, 1),
        (None, 1),  # basic: no constraint, each member alone
    ],
)
def test_the_pod_groups_policy_makes_the_gang(min_count: int | None, want: int) -> None:
    index = index_with(pg("g", min_count))
    pod = member("a", "g")
    m = index.member_of(pod)
    assert m == Membership(GangKey("workload-api", "default", "g"))
    assert index.gang(m.key) == Gang(
        m.key,
        min_member=want,
        timeout_seconds=WORKLOAD_API_PERMIT_TIMEOUT_SECONDS,
        origin="PodGroup scheduling.k8s.io/v1beta1 default/g",
    )


def test_a_1_35_pod_names_its_workloads_pod_group_and_replica() -> None:
    workload = workload_api.decode(
        {
            "apiVersion": "scheduling.k8s.io/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": "job", "namespace": "default"},
            "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]},
        }
    )
    assert isinstance(workload, workload_api.Workload)
    index = index_with(workload, version="1.35")
    ref = {"workloadRef": {"name": "job", "podGroup": "workers", "podGroupReplicaKey": "0"}}
    m = index.member_of(make_pod("a", uid="a", spec=ref))
    assert m is not None and m.key == GangKey("workload-api", "default", "job/workers/0")
    gang = index.gang(m.key)
    assert gang is not None and (gang.min_member, gang.origin) == (2, "Workload default/job podGroup workers")


def test_without_the_workload_api_store_the_source_claims_no_pod() -> None:
    """The GenericWorkload gate off: the field is not the scheduler's to read."""
    assert GangIndex().member_of(member("a", "g")) is None
    assert not GangIndex().claims("workload-api")


def test_a_missing_pod_group_is_no_gang_yet() -> None:
    index = index_with()
    m = index.member_of(member("a", "g"))
    assert m is not None and index.gang(m.key) is None


def test_a_changed_min_count_is_read_at_once() -> None:
    """minCount is mutable (GangScheduling's PodGroup/Update): the index does not keep an old gang."""
    index = index_with(pg("g", 3))
    key = GangKey("workload-api", "default", "g")
    assert index.gang(key) is not None and index.gang(key).min_member == 3  # type: ignore[union-attr]
    assert index.workload_groups is not None
    index.workload_groups.put(pg("g", 2))
    assert index.gang(key).min_member == 2  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("labels", "annotations", "other"),
    [
        ({model.LABEL_POD_GROUP: "sp"}, {}, 'scheduler-plugins (group "sp")'),
        ({}, {"scheduling.k8s.io/group-name": "vc"}, 'volcano (group "vc")'),
        ({"kueue.x-k8s.io/pod-group-name": "kq"}, {}, 'kueue (group "kq")'),
    ],
)
def test_a_pod_the_workload_api_and_another_dialect_claim_is_refused_naming_both(
    labels: dict[str, str], annotations: dict[str, str], other: str
) -> None:
    index = index_with(pg("g", 2))
    with pytest.raises(InvalidGang) as e:
        index.member_of(member("a", "g", labels=labels, annotations=annotations))
    assert str(e.value) == (
        f'pod is claimed by two gang sources, workload-api (group "g") and {other}: remove one dialect\'s keys'
    )


def test_keys_list_a_workload_api_pod_group_that_has_no_member_yet() -> None:
    index = index_with(pg("empty", 2))
    assert index.keys() == [GangKey("workload-api", "default", "empty")]
    assert index_with(pg("empty", 2)).keys() != GangIndex().keys()  # without the store: not listed


# ---------------------------------------------------------------- the loop

#: The loop's tests run in virtual time (tests/loop/conftest.py).
looptime = pytest.mark.looptime


@contextlib.asynccontextmanager
async def served(*groups: workload_api.PodGroup, cpu: str = "8", **cfg: Any) -> AsyncIterator[Berth]:
    """A running Berth with GenericWorkload, one node of ``cpu`` and ``groups``."""
    async with running(make_config(**GATES, **cfg)) as berth:
        berth.nodes(make_node("n0", cpu=cpu, pods=110))
        for g in groups:
            berth.core.on_scheduling_group(g)
        yield berth


@looptime
async def test_a_pod_in_a_workload_api_gang_and_a_volcano_one_is_held_naming_both() -> None:
    async with served(pg("g", 1)) as berth:
        berth.pods(member("both", "g", annotations={"scheduling.k8s.io/group-name": "vc"}))
        await berth.settle()
        assert berth.bound() == {}
        assert berth.phase("default/both") == "Gated"
        assert 'workload-api (group "g") and volcano (group "vc")' in berth.decision("default/both").message


@looptime
async def test_gang_sources_without_the_workload_api_schedule_its_members_one_by_one() -> None:
    async with served(pg("g", 3), cpu="2", gangSources=["scheduler-plugins"]) as berth:
        berth.pods(*(member(f"m{i}", "g") for i in range(3)))
        await berth.settle()
        assert len(berth.bound()) == 2  # room for two of three: a gang would bind none


@looptime
async def test_coscheduling_leaves_a_workload_api_gang_to_gang_scheduling() -> None:
    """Both read the registry; only GangScheduling holds the gang (its message, not Coscheduling's)."""
    async with served(pg("g", 3)) as berth:
        berth.pods(member("m0", "g"), member("m1", "g"))
        await berth.settle()
        decision = berth.decision("default/m0")
        assert decision.message == "waiting for minCount pods from a gang to appear in scheduling queue"
        berth.pods(member("m2", "g"))
        await berth.settle()
        assert sorted(berth.bound()) == ["default/m0", "default/m1", "default/m2"]


# ---------------------------------------------------------------- the views


def _volcano_group(name: str, min_member: int) -> model.PodGroup:
    return model.PodGroup(
        api_version="scheduling.volcano.sh/v1beta1",
        metadata=model.ObjectMeta(name=name, namespace="default"),
        spec=model.PodGroupSpec(min_member=min_member, queue="research"),
    )


def _sp_group(name: str, min_member: int) -> model.PodGroup:
    return model.PodGroup(
        metadata=model.ObjectMeta(name=name, namespace="default"), spec=model.PodGroupSpec(min_member=min_member)
    )


@looptime
async def test_get_podgroups_lists_every_dialects_gangs_with_the_dialect() -> None:
    async with served(pg("wl", 3)) as berth:
        berth.cluster.upsert_pod_groups([_sp_group("g", 2), _volcano_group("g", 2)])
        berth.pods(
            member("w0", "wl"),
            make_pod("s0", uid="s0", scheduler_name="berth", labels={model.LABEL_POD_GROUP: "g"}),
            make_pod("v0", uid="v0", scheduler_name="berth", annotations={"scheduling.k8s.io/group-name": "g"}),
            make_pod("v1", uid="v1", scheduler_name="berth", annotations={"scheduling.k8s.io/group-name": "g"}),
        )
        await berth.settle()
        rows = visibility.list_pod_groups(berth.core)
        got = [(r.name, r.dialect, r.min_member, r.members, r.bound, r.phase) for r in rows]
        assert got == [
            ("g", "scheduler-plugins", 2, 1, 0, "Pending"),
            ("g", "volcano", 2, 2, 2, "Scheduled"),
            ("wl", "workload-api", 3, 1, 0, "Pending"),
        ]
        assert rows[2].schedule_timeout_seconds == 300
        assert [r.gang for r in rows] == ["default/g", "default/g (volcano)", "default/wl (workload-api)"]


@looptime
async def test_why_and_the_dashboard_show_a_workload_api_gang() -> None:
    async with served(pg("wl", 3)) as berth:
        berth.pods(member("w0", "wl"), member("w1", "wl"))
        await berth.settle()
        why = visibility.why(berth.core, "default/w0")
        gang = [b for b in why.blockers if b.kind == "gang"]
        assert [(b.message, b.unblocks_when) for b in gang] == [
            (
                "gang default/wl (workload-api) has 2 of 3 required pods",
                "needs 1 more member of gang default/wl (workload-api)",
            )
        ]
        listing = await ui.build_listing(berth.core)
        page = ui.gangs_page(berth.core, listing)
        (card,) = page["gangs"]
        assert (card["gang"], card["dialect"], card["members"], card["min_member"]) == (
            "default/wl (workload-api)",
            "workload-api",
            2,
            3,
        )
        assert [w["count"] for w in card["where"]] == [2]  # both members found by the registry, not by a label
