"""``berth_queue_*``: the queue tree read at scrape time from the registry that
``/metrics`` serves, in kube-scheduler's units (cpu in cores, bytes)."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from berth import config, errors
from berth.cluster import model
from berth.quota import metrics as quota_metrics
from berth.quota.spec import QueueSpec
from berth.quota.tree import LABEL_QUEUE, QueueTree
from berth.testing import make_node, make_pod
from tests.loop.conftest import Berth, make_config, running

GiB = 2**30


def queued(name: str, queue: str, cpu: str, memory: str = "1Gi") -> model.Pod:
    return make_pod(name, scheduler_name="berth", labels={LABEL_QUEUE: queue}, requests={"cpu": cpu, "memory": memory})


def scrape(berth: Berth) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every berth_queue_* sample as /metrics serves it (the HTTP adapter
    answers ``generate_latest(core.metrics.registry)``), parsed back."""
    text = generate_latest(berth.core.metrics.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("berth_queue_")
    }


def sample(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted(labels.items()))


QUEUES: list[dict[str, Any]] = [
    {"name": "research", "guaranteed": {"cpu": "4", "memory": "8Gi"}, "max": {"cpu": "6"}},
    {"name": "research-cv", "parent": "research"},
    {"name": "batch", "guaranteed": {"cpu": "4"}},
]


async def test_gauges_follow_the_pods_the_loop_binds() -> None:
    async with running(make_config(queues=QUEUES)) as berth:
        berth.nodes(*(make_node(f"n{i}", cpu="4", memory="64Gi", pods=110) for i in range(2)))
        # research may borrow batch's idle guarantee up to its max (6 cpu):
        # three 2-cpu pods run, the fourth waits.
        berth.pods(*(queued(f"cv{i}", "research-cv", "2") for i in range(4)), queued("b0", "batch", "1", "512Mi"))
        await berth.settle()
        assert len(berth.bound()) == 4
        got = scrape(berth)
    cpu, mem = {"resource": "cpu", "unit": "cores"}, {"resource": "memory", "unit": "bytes"}
    expected = {
        sample("berth_queue_guaranteed", queue="research", **cpu): 4.0,
        sample("berth_queue_guaranteed", queue="research", **mem): 8.0 * GiB,
        sample("berth_queue_guaranteed", queue="batch", **cpu): 4.0,
        sample("berth_queue_max", queue="research", **cpu): 6.0,
        # A child's usage and demand count against its parent too.
        sample("berth_queue_allocated", queue="research", **cpu): 6.0,
        sample("berth_queue_allocated", queue="research", **mem): 3.0 * GiB,
        sample("berth_queue_allocated", queue="research-cv", **cpu): 6.0,
        sample("berth_queue_allocated", queue="research-cv", **mem): 3.0 * GiB,
        sample("berth_queue_allocated", queue="batch", **cpu): 1.0,
        sample("berth_queue_allocated", queue="batch", **mem): 0.5 * GiB,
        sample("berth_queue_pending", queue="research", **cpu): 2.0,
        sample("berth_queue_pending", queue="research", **mem): 1.0 * GiB,
        sample("berth_queue_pending", queue="research-cv", **cpu): 2.0,
        sample("berth_queue_pending", queue="research-cv", **mem): 1.0 * GiB,
        # Zero, not absent, for a resource the queue has quota on.
        sample("berth_queue_pending", queue="batch", **cpu): 0.0,
        sample("berth_queue_pending", queue="batch", **mem): 0.0,
        sample("berth_queue_pending_pods", queue="research"): 1.0,
        sample("berth_queue_pending_pods", queue="research-cv"): 1.0,
        sample("berth_queue_pending_pods", queue="batch"): 0.0,
        sample("berth_queue_reclaim_preemptions_total", queue="research"): 0.0,
        sample("berth_queue_reclaim_preemptions_total", queue="research-cv"): 0.0,
        sample("berth_queue_reclaim_preemptions_total", queue="batch"): 0.0,
    }
    shares = {k: v for k, v in got.items() if k[0] in ("berth_queue_dominant_share", "berth_queue_fair_share")}
    assert {k: v for k, v in got.items() if k not in shares} == expected
    # DRF over 8 cpu and 128Gi: cpu dominates.
    assert shares[sample("berth_queue_dominant_share", queue="research")] == pytest.approx(6 / 8)
    assert shares[sample("berth_queue_dominant_share", queue="batch")] == pytest.approx(1 / 8)
    assert shares[sample("berth_queue_fair_share", queue="batch")] == pytest.approx(0.5)


async def test_reclaims_count_against_the_victims_queue() -> None:
    halves = [{"name": "a", "guaranteed": {"cpu": "4"}}, {"name": "b", "guaranteed": {"cpu": "4"}}]
    async with running(make_config(queues=halves)) as berth:
        berth.nodes(*(make_node(f"n{i}", cpu="4", memory="64Gi", pods=110) for i in range(2)))
        berth.pods(*(queued(f"a{i}", "a", "1") for i in range(8)))
        await berth.settle()
        # b is owed its guarantee: two of a's borrowed pods are evicted.
        berth.pods(*(queued(f"b{i}", "b", "1") for i in range(2)))
        await berth.settle()
        await berth.settle()
        got = scrape(berth)
        assert berth.core.quota.reclaims == {"a": 2}
        assert len([k for k, _ in berth.cluster.evictions if k.startswith("default/a")]) == 2
    assert got[sample("berth_queue_reclaim_preemptions_total", queue="a")] == 2.0
    assert got[sample("berth_queue_reclaim_preemptions_total", queue="b")] == 0.0
    assert got[sample("berth_queue_allocated", queue="a", resource="cpu", unit="cores")] == 6.0
    assert got[sample("berth_queue_allocated", queue="b", resource="cpu", unit="cores")] == 2.0


async def test_a_reload_shows_at_the_next_scrape_and_a_bad_one_changes_nothing() -> None:
    async with running(make_config(queues=QUEUES)) as berth:
        before = scrape(berth)
        assert sample("berth_queue_max", queue="research", resource="cpu", unit="cores") in before
        bad = [QueueSpec(name="x", guaranteed={"cpu": "2"}, max={"cpu": "1"})]
        with pytest.raises(errors.InvalidArgument, match=r"queues\[0\]\.guaranteed\[cpu\]"):
            berth.core.reload_queues(bad)
        assert scrape(berth) == before
        berth.core.reload_queues(config.parse({"queues": [{"name": "solo", "max": {"nvidia.com/gpu": "2"}}]}).queues)
        after = scrape(berth)
    assert {k[1] for k in after if k[0] == "berth_queue_max"} == {
        (("queue", "solo"), ("resource", "nvidia.com/gpu"), ("unit", ""))
    }
    assert after[sample("berth_queue_max", queue="solo", resource="nvidia.com/gpu", unit="")] == 2.0
    assert not any(dict(labels).get("queue") == "research" for _, labels in after)


async def test_without_queues_there_are_no_queue_samples() -> None:
    async with running(make_config()) as berth:
        berth.nodes(make_node("n0", cpu="4"))
        berth.pods(make_pod("p", scheduler_name="berth", requests={"cpu": "1"}))
        await berth.settle()
        assert scrape(berth) == {}
        assert b"# TYPE berth_queue_allocated gauge" in generate_latest(berth.core.metrics.registry)


@pytest.mark.parametrize(
    ("resource", "amount", "unit", "value"),
    [
        # kube_pod_resource_request's units (kube-scheduler
        # pkg/scheduler/metrics/resources/resources.go).
        ("cpu", 1500, "cores", 1.5),
        ("memory", 2 * GiB, "bytes", 2.0 * GiB),
        ("ephemeral-storage", 10, "bytes", 10.0),
        ("hugepages-2Mi", 4 * 2**20, "bytes", 4.0 * 2**20),
        ("attachable-volumes-aws-ebs", 3, "integer", 3.0),
        ("nvidia.com/gpu", 8, "", 8.0),
    ],
)
def test_values_are_in_kube_scheduler_units(resource: str, amount: int, unit: str, value: float) -> None:
    assert (quota_metrics.unit_of(resource), quota_metrics.value_of(resource, amount)) == (unit, value)


def test_the_collector_cannot_be_registered_twice_on_one_registry() -> None:
    registry = CollectorRegistry()
    tree = QueueTree(make_config(queues=QUEUES).queues)
    quota_metrics.register(registry, tree)
    with pytest.raises(ValueError, match="berth_queue_allocated"):
        quota_metrics.register(registry, tree)
