"""A standalone Berth stopped and started again on its store carries on
(berth.scheduling.durable): bound pods stay bound, pending ones are queued
again, queue usage follows, decisions keep their serials; Submit's
idempotency keys, Cancel, and a feed's resync."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from berth.cluster import manifests, model, workload_api
from berth.cluster import queues as cluster_queues
from berth.errors import InvalidArgument, OutOfRange
from berth.scheduling import batch
from berth.store import SqliteStore
from berth.testing import make_pod
from tests.store.conftest import bound, nodes, pods, settled, standalone, usage


async def test_bound_pods_stay_bound_and_queue_usage_follows_them_after_a_restart(tmp_path: Path) -> None:
    async with standalone(SqliteStore(tmp_path)) as b:
        b.cluster.upsert_nodes(nodes(4))
        assert b.durable is not None
        results = b.durable.submit(pods(f"p{i}" for i in range(20)))
        assert all(r.accepted for r in results)
        await settled(b)
        before, used, serial = bound(b), usage(b), b.core.decisions.serial
    assert len(before) == 20 and used["cpu"] == 20 * 500
    async with standalone(SqliteStore(tmp_path)) as b:
        assert bound(b) == before
        assert usage(b) == used
        assert b.core.decisions.serial == serial
        assert b.durable is not None and b.durable.restored is not None and not b.durable.restored.created
        b.durable.submit(pods(["late"]))
        await settled(b)
        assert b.core.decisions.serial > serial
        assert bound(b).keys() == {*before, "team/late"}


async def test_a_binding_not_yet_committed_comes_back_pending_and_is_placed_once(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    async with standalone(store, loop=False) as b:
        b.cluster.upsert_nodes(nodes(2))
        assert b.durable is not None
        b.durable.submit(pods(["a"]))
        await b.durable.sync()
        # A crash after the bind but before its commit: the store never sees it.
        store.put = lambda *args: None  # type: ignore[method-assign]
        await b.cluster.bind(b.cluster.pods["team/a"], "n0")
    async with standalone(SqliteStore(tmp_path)) as b:
        await settled(b)
        assert list(bound(b)) == ["team/a"]
        assert usage(b)["cpu"] == 500


async def test_a_retried_submit_gets_its_first_outcome_and_submits_nothing(tmp_path: Path) -> None:
    async with standalone(SqliteStore(tmp_path), loop=False) as b:
        assert b.durable is not None
        first = b.durable.submit(pods(["a", "b"]), keys=["k-a", "k-b"])
        await b.durable.sync()
    async with standalone(SqliteStore(tmp_path), loop=False) as b:
        assert b.durable is not None
        # After a restart, the same keys: the first outcomes, even for a changed pod.
        again = b.durable.submit(pods(["a", "b"], cpu="2"), keys=["k-a", "k-b"])
        assert [(r.pod, r.uid, r.accepted, r.message) for r in again] == [
            (r.pod, r.uid, r.accepted, r.message) for r in first
        ]
        resources = b.cluster.pods["team/a"].spec.containers[0].resources
        assert resources is not None and resources.requests["cpu"] == "500m"


@pytest.mark.parametrize(
    ("keys", "error"),
    [
        (["only-one"], "idempotency_keys: 1 keys for 2 pods"),
    ],
)
async def test_idempotency_keys_must_be_one_per_pod(tmp_path: Path, keys: list[str], error: str) -> None:
    async with standalone(SqliteStore(tmp_path), loop=False) as b:
        assert b.durable is not None
        with pytest.raises(InvalidArgument, match=error):
            b.durable.submit(pods(["a", "b"]), keys=keys)
        assert not b.cluster.pods


async def test_a_key_used_twice_in_one_request_refuses_the_second_pod(tmp_path: Path) -> None:
    async with standalone(SqliteStore(tmp_path), loop=False) as b:
        assert b.durable is not None
        r = b.durable.submit(pods(["a", "b"]), keys=["same", "same"])
        assert r[0].accepted and not r[1].accepted and r[1].reason == batch.INVALID
        assert "also pod 0's" in r[1].message


async def test_a_cancelled_pod_submitted_again_is_created_again(tmp_path: Path) -> None:
    async with standalone(SqliteStore(tmp_path), loop=False) as b:
        assert b.durable is not None
        b.durable.submit(pods(["a"]))
        assert b.durable.cancel("team", "a").cancelled
        assert "team/a" not in b.cluster.pods
        (r,) = b.durable.submit(pods(["a"]))
        assert r.accepted and r.message != "already submitted" and "team/a" in b.cluster.pods
        await b.durable.sync()
    async with standalone(SqliteStore(tmp_path), loop=False) as b:
        assert "team/a" in b.cluster.pods


async def test_a_resync_deletes_what_the_feeder_no_longer_has(tmp_path: Path) -> None:
    async with standalone(SqliteStore(tmp_path), loop=False) as b:
        assert b.durable is not None
        b.cluster.upsert_nodes(nodes(5))
        with b.durable.resync("nodes") as result:
            b.cluster.upsert_nodes(nodes(2))
        assert result.deleted == 3 and sorted(b.cluster.nodes) == ["n0", "n1"]
        # A refused upsert deletes nothing.
        bad = nodes(1)
        bad[0].metadata.name = "Not A Name"
        with pytest.raises(InvalidArgument), b.durable.resync("nodes"):
            b.cluster.upsert_nodes(bad)
        assert sorted(b.cluster.nodes) == ["n0", "n1"]
        await b.durable.sync()
    async with standalone(SqliteStore(tmp_path), loop=False) as b:
        assert sorted(b.cluster.nodes) == ["n0", "n1"]


async def test_a_watch_resumes_after_a_serial_or_says_it_was_compacted(tmp_path: Path) -> None:
    async with standalone(SqliteStore(tmp_path), state={"decisions": {"maxEntries": 8}}) as b:
        b.cluster.upsert_nodes(nodes(2))
        assert b.durable is not None
        b.durable.submit(pods(f"p{i}" for i in range(4)))
        await settled(b)
        log = b.core.decisions
        assert log.serial >= 8 and len(log.history) <= 8
        with pytest.raises(OutOfRange, match="was compacted") as e:
            await anext(log.watch_since(since=0))
        assert e.value.oldest == log.oldest
        with pytest.raises(OutOfRange, match="is past the last serial"):
            await anext(log.watch_since(since=log.serial + 1))
        stream = log.watch_since(since=log.serial - 2)
        first = await anext(stream)
        assert [s for s, _ in first] == [log.serial - 1, log.serial]
        b.durable.submit([make_pod("q", namespace="team", uid="", requests={"cpu": "1"})])
        nxt = await anext(stream)
        assert nxt[0][0] == first[-1][0] + 1
        await stream.aclose()


async def test_a_submitted_gang_is_restored_with_its_pods(tmp_path: Path) -> None:
    group = model.PodGroup(metadata=model.ObjectMeta(name="g", namespace="team"), spec=model.PodGroupSpec(min_member=2))
    async with standalone(SqliteStore(tmp_path), loop=False) as b:
        assert b.durable is not None
        assert all(r.accepted for r in b.durable.submit(pods(["a", "b"]), group))
        await b.durable.sync()
    async with standalone(SqliteStore(tmp_path), loop=False) as b:
        restored = b.core.pod_groups.get("team", "g")
        assert restored is not None and restored.spec.min_member == 2
        assert {p.metadata.labels.get(model.LABEL_POD_GROUP) for p in b.cluster.pods.values()} == {"g"}


async def test_the_stores_commits_are_exported(tmp_path: Path) -> None:
    from prometheus_client import generate_latest

    async with standalone(SqliteStore(tmp_path)) as b:
        b.cluster.upsert_nodes(nodes(2))
        await b.durable.sync()  # type: ignore[union-attr]
        text = generate_latest(b.core.metrics.registry).decode()
    [line] = [x for x in text.splitlines() if x.startswith("berth_state_commits_total{")]
    assert line.startswith('berth_state_commits_total{backend="sqlite"}')
    assert float(line.rsplit(" ", 1)[1]) >= 1


async def test_a_restore_does_not_validate_again_what_was_validated_when_fed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from berth.cluster import validation

    async with standalone(SqliteStore(tmp_path), loop=False) as b:
        b.cluster.upsert_nodes(nodes(2))
        b.cluster.upsert_pods(pods(["a", "b"]))
        await b.durable.sync()  # type: ignore[union-attr]
    checked: list[str] = []
    real = validation.validate_pod

    def counting(pod: Any) -> None:
        checked.append(pod.metadata.name)
        real(pod)

    monkeypatch.setattr(validation, "validate_pod", counting)
    async with standalone(SqliteStore(tmp_path), loop=False) as b:
        assert sorted(p.rsplit("/", 1)[1] for p in b.cluster.pods) == ["a", "b"]
        assert checked == []  # restored as stored
        b.cluster.upsert_pods(pods(["c"]))
        assert checked == ["c"]  # a feed is still checked


def budget(name: str) -> model.PodDisruptionBudget:
    return msgspec.convert(
        {"metadata": {"name": name, "namespace": "team"}, "spec": {"minAvailable": 1, "selector": {}}},
        model.PodDisruptionBudget,
    )


def gang(name: str) -> model.PodGroup:
    return msgspec.convert({"metadata": {"name": name, "namespace": "team"}, "spec": {"minMember": 2}}, model.PodGroup)


#: kind -> (feed these names, the names the core holds).
RESYNCED: dict[str, tuple[Any, Any]] = {
    "pdbs": (
        lambda b, names: b.cluster.upsert_pdbs([budget(n) for n in names]),
        lambda b: sorted(p.metadata.name for p in b.core.pdbs.list()),
    ),
    "pod_groups": (
        lambda b, names: b.cluster.upsert_pod_groups([gang(n) for n in names]),
        lambda b: sorted(g.metadata.name for g in b.core.pod_groups.all()),
    ),
}


@pytest.mark.parametrize("kind", sorted(RESYNCED))
async def test_a_resync_of_pod_groups_or_pdbs_deletes_what_the_feeder_no_longer_has(tmp_path: Path, kind: str) -> None:
    feed, held = RESYNCED[kind]
    async with standalone(SqliteStore(tmp_path), loop=False) as b:
        assert b.durable is not None
        feed(b, ["a", "b", "c"])
        with b.durable.resync(kind) as result:
            feed(b, ["b"])
        assert result.deleted == 2
        assert held(b) == ["b"]
        await b.durable.sync()
    async with standalone(SqliteStore(tmp_path), loop=False) as b:
        assert held(b) == ["b"]
        assert len(getattr(b.cluster, kind)) == 1


def queue_object(name: str, cpu: str) -> cluster_queues.Queue:
    return cluster_queues.Queue(
        metadata=cluster_queues.QueueMeta(name=name, generation=1, creation_timestamp="2026-01-01T00:00:01Z"),
        spec={"guaranteed": {"cpu": cpu}, "namespaces": [name]},
    )


def scheduling_group(name: str, min_count: int) -> workload_api.PodGroup | workload_api.Workload:
    return workload_api.decode(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "team", "generation": 1},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
        }
    )


async def test_workload_api_groups_and_queue_objects_are_kept_across_a_restart(tmp_path: Path) -> None:
    async with standalone(SqliteStore(tmp_path), loop=False) as b:
        assert b.durable is not None
        # As the cluster file brings them (berth serve --cluster on a new store).
        b.cluster.load(manifests.Manifests(scheduling_groups=[scheduling_group("g1", 2), scheduling_group("g2", 3)]))
        b.core.load_queue_objects([queue_object("batch", "8"), queue_object("ml", "4")])
        b.core.on_scheduling_group_delete(scheduling_group("g2", 3))
        b.core.on_queue_object_delete("ml")
        b.core.on_queue_object(queue_object("batch", "16"))
        await b.durable.sync()
    async with standalone(SqliteStore(tmp_path), loop=False) as b:
        assert b.core.scheduling_groups.pod_group("team", "g2") is None
        g1 = b.core.scheduling_groups.pod_group("team", "g1")
        assert g1 is not None and g1.spec.scheduling_policy is not None
        assert sorted(b.core.queue_objects.objects) == ["batch"]
        assert b.core.queue_objects.objects["batch"].spec["guaranteed"] == {"cpu": "16"}
        assert b.core.queue_objects.verdicts["batch"].accepted
        assert {q.name for q in b.core.quota.status()} >= {"batch", "team"}
        assert "ml" not in {q.name for q in b.core.quota.status()}
