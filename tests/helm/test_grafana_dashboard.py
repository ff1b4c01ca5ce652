"""The chart ships a Grafana dashboard (``dashboards/berth.json``) as an
optional ConfigMap for Grafana's dashboard sidecar, and every metric the
dashboard queries is one Berth's ``/metrics`` serves."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from berth import metrics
from berth.quota import metrics as quota_metrics
from berth.quota.tree import QueueTree
from tests.helm.conftest import CHART, NAMESPACE, HelmError, Render
from tests.helm.test_chart import FULLNAME

DASHBOARD = CHART / "dashboards" / "berth.json"
CONFIGMAP = f"{FULLNAME}-dashboard"


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels(dash: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in dash["panels"] if p["type"] != "row"]


def exprs(dash: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in panels(dash) for t in p["targets"]]


# PromQL words that are not metric names: aggregations, functions (followed
# by "(" anyway), set operators and modifiers.
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression selects."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings (label values, regexes)
    expr = re.sub(r"\{[^}]*\}", "{}", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "[]", expr)  # ranges ($__rate_interval)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)  # label lists
    names = set()
    for m in re.finditer(r"(?<![\w$.:])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()", expr):
        word = m.group(1)
        if word not in _KEYWORDS:
            names.add(word)
    return names


def served_series() -> set[str]:
    """Every series name Berth's registry serves, as the app composes it
    (berth.app: Metrics plus the batch queues' collector on its registry)."""
    m = metrics.Metrics()
    quota_metrics.register(m.registry, QueueTree([], counts=lambda pod: True, capacity=dict))
    return series_of(m.registry)


def series_of(registry: CollectorRegistry) -> set[str]:
    out = set()
    for fam in registry.collect():
        if fam.type == "counter":
            out.add(fam.name + "_total")
        elif fam.type == "histogram":
            out |= {fam.name + "_bucket", fam.name + "_sum", fam.name + "_count"}
        else:
            out.add(fam.name)
    return out


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (result) (rate(scheduler_schedule_attempts_total{profile=~"$p"}[$__rate_interval]))',
         {"scheduler_schedule_attempts_total"}),
        ("histogram_quantile(0.99, sum by (le) (rate(a_bucket[5m])))", {"a_bucket"}),
        ("sum(rate(a_sum[1m])) / sum(rate(a_count[1m]))", {"a_sum", "a_count"}),
        ('b{queue=~"x", resource="$r"} and on (queue) c', {"b", "c"}),
        ("up", {"up"}),
    ],
)  # fmt: skip
def test_metric_names_are_read_out_of_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_every_metric_the_dashboard_queries_is_served_by_berth() -> None:
    served = served_series()
    queried = set().union(*(metric_names(e) for e in exprs(dashboard())))
    assert queried, "the dashboard queries nothing"
    assert queried - served == set()


@pytest.mark.parametrize(
    "needed",
    [
        "scheduler_schedule_attempts_total",  # throughput
        "scheduler_scheduling_attempt_duration_seconds_bucket",  # attempt latency p50/p99
        "scheduler_pending_pods",
        "scheduler_unschedulable_pods",
        "scheduler_preemption_attempts_total",
        "scheduler_preemption_victims_sum",
        "berth_queue_allocated",
        "berth_queue_guaranteed",
        "berth_queue_max",
        "berth_extender_requests_total",
    ],
)
def test_the_dashboard_shows(needed: str) -> None:
    assert any(needed in metric_names(e) for e in exprs(dashboard()))


def test_the_dashboard_is_well_formed_for_grafana() -> None:
    dash = dashboard()
    assert dash["uid"] and dash["title"] and dash["schemaVersion"] >= 36
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    # One data source variable, used by every panel and query (no hard-wired UID).
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    for p in panels(dash):
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}"
            assert t["expr"].count("(") == t["expr"].count(")"), t["expr"]
        assert p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
    # Quantiles come from histogram buckets, summed by le.
    for e in exprs(dash):
        if "histogram_quantile" in e:
            assert re.search(r"sum by \(([\w, ]*\b)?le\)", e) and "_bucket" in e, e


# ---------------------------------------------------------------- the ConfigMap


def the_configmap(r: Any, namespace: str = NAMESPACE) -> dict[str, Any]:
    found: dict[str, Any] = r.one("ConfigMap", CONFIGMAP, namespace)
    return found


def test_no_dashboard_configmap_by_default(render: Render) -> None:
    assert ("ConfigMap", CONFIGMAP) not in render({}).kinds()


def test_enabled_renders_the_dashboard_for_the_sidecar(render: Render) -> None:
    cm = the_configmap(render({"grafanaDashboard": {"enabled": True}}))
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["labels"]["app.kubernetes.io/name"] == "berth"
    assert "annotations" not in cm["metadata"]
    assert json.loads(cm["data"]["berth.json"]) == dashboard()


@pytest.mark.parametrize(
    ("values", "labels", "annotations", "namespace"),
    [
        ({"labels": {"grafana_dashboard": "berth"}}, {"grafana_dashboard": "berth"}, None, NAMESPACE),
        (
            {"labels": {"team": "batch"}, "annotations": {"grafana_folder": "Kubernetes"}},
            {"grafana_dashboard": "1", "team": "batch"},
            {"grafana_folder": "Kubernetes"},
            NAMESPACE,
        ),
        ({"namespace": "monitoring"}, {"grafana_dashboard": "1"}, None, "monitoring"),
    ],
)
def test_labels_annotations_and_namespace_are_the_values(
    render: Render, values: dict[str, Any], labels: dict[str, str], annotations: dict[str, str] | None, namespace: str
) -> None:
    cm = the_configmap(render({"grafanaDashboard": {"enabled": True, **values}}), namespace)
    assert labels.items() <= cm["metadata"]["labels"].items()
    assert cm["metadata"].get("annotations") == annotations


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"enabled": "yes"}, "grafanaDashboard.enabled"),
        ({"labels": {"grafana_dashboard": 1}}, "grafanaDashboard.labels.grafana_dashboard"),
        ({"namespace": "Not_A_Namespace"}, "grafanaDashboard.namespace"),
        ({"folder": "x"}, "grafanaDashboard"),
    ],
)
def test_bad_dashboard_values_are_refused_naming_the_field(render: Render, values: dict[str, Any], field: str) -> None:
    with pytest.raises(HelmError, match=re.escape(field)):
        render({"grafanaDashboard": {"enabled": True, **values}})
