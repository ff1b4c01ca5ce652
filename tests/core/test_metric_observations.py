"""Histogram observations counted in bulk (metrics.Observations) read the
same as prometheus_client's own ``observe``, at every scrape."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Histogram

from berth import app, config, metrics
from berth.testing import make_node, make_pod

BUCKETS = (0.001, 0.01, 0.1, 1.0)


def _samples(registry: CollectorRegistry, name: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in registry.collect()
        if fam.name == name
        for s in fam.samples
        if not s.name.endswith("_created")
    }


@pytest.mark.parametrize(
    "values",
    [
        [],
        [0.0005],
        [0.001, 0.01, 0.1, 1.0],  # on each bound: that bucket (amount <= bound), as Histogram.observe
        [0.0011, 0.5, 2.0, 1e9, 0.0],
        [i / 1000 for i in range(3000)],  # more than one batch
    ],
    ids=["none", "one", "on-bounds", "spread", "several-batches"],
)
def test_bulk_observations_read_as_direct_ones(values: list[float]) -> None:
    direct_reg = CollectorRegistry()
    direct = Histogram("h", "h", ["l"], buckets=BUCKETS, registry=direct_reg).labels("x")
    m = metrics.Metrics()
    bulk = Histogram("h", "h", ["l"], buckets=BUCKETS, registry=m.registry)
    obs = m.observations(bulk.labels("x"))
    for v in values:
        direct.observe(v)
        obs.observe(v)
    want, got = _samples(direct_reg, "h"), _samples(m.registry, "h")
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert math.isclose(got[k], v, rel_tol=1e-12), k


def test_a_scrape_counts_what_is_still_pending() -> None:
    m = metrics.Metrics()
    obs = m.observations(m.algorithm_duration)
    obs.observe(0.002)
    assert m.registry.get_sample_value("scheduler_scheduling_algorithm_duration_seconds_count") == 1
    obs.observe(0.004)
    obs.observe(0.008)
    assert m.registry.get_sample_value("scheduler_scheduling_algorithm_duration_seconds_count") == 3
    assert m.registry.get_sample_value("scheduler_scheduling_algorithm_duration_seconds_sum") == pytest.approx(0.014)


def test_one_batch_per_child_however_many_ask() -> None:
    m = metrics.Metrics()
    child = m.attempt_duration.labels("scheduled", "default-scheduler")
    assert m.observations(child) is m.observations(child)
    assert m.observations(child) is not m.observations(m.attempt_duration.labels("error", "default-scheduler"))


def test_cache_size_is_what_was_last_set() -> None:
    m = metrics.Metrics()
    m.set_cache_size(5, 7, 2)
    m.set_cache_size(6, 8, 1)
    got = {
        k: m.registry.get_sample_value("scheduler_cache_size", {"type": k}) for k in ("nodes", "pods", "assumed_pods")
    }
    assert got == {"nodes": 6, "pods": 8, "assumed_pods": 1}


def test_cache_size_is_read_from_the_cache_at_scrape_time() -> None:
    berth = app.build(config.parse({}))
    berth.cluster.upsert_nodes([make_node("a"), make_node("b")])
    berth.cluster.upsert_pods([make_pod("p", node_name="a"), make_pod("q")])
    reg = berth.core.metrics.registry
    got = {k: reg.get_sample_value("scheduler_cache_size", {"type": k}) for k in ("nodes", "pods", "assumed_pods")}
    assert got == {"nodes": 2, "pods": 1, "assumed_pods": 0}
    berth.cluster.delete_nodes(["b"])
    assert reg.get_sample_value("scheduler_cache_size", {"type": "nodes"}) == 1
