"""Berth exposes kube-scheduler's metrics under the same names, types, labels,
buckets, help and stability levels where it does the same thing, for the
release it follows, and they move as upstream's do.

``UPSTREAM`` is transcribed from kube-scheduler's
``pkg/scheduler/metrics/metrics.go`` at v1.37.2 (``InitMetrics``; buckets as
the ``metrics.ExponentialBuckets(start, factor, count)`` arguments written
there), with the release that added each metric since v1.34 (from the
v1.35.4 and v1.36.3 files) and the gate ``Register`` needs for it. When the
Go module cache holds that file (``make e2e-deps`` builds kube-scheduler
from the same module, so CI has it), a test checks the table, and Berth's
help texts, against it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path

import msgspec
import pytest
from prometheus_client import CollectorRegistry

from berth import features, metrics
from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.features import Features, KubeVersion
from berth.framework import interface as fw
from berth.queue import scheduling_queue
from berth.testing import make_node, make_pod
from tests.loop.conftest import Berth, make_config, running

pytestmark = pytest.mark.looptime

METRICS_GO = Path.home() / "go/pkg/mod/k8s.io/kubernetes@v1.37.2/pkg/scheduler/metrics/metrics.go"

V135, V136, V137 = KubeVersion(1, 35), KubeVersion(1, 36), KubeVersion(1, 37)

BATCHING = (
    "OpportunisticBatching only (beta, on since 1.35): Berth does not reuse a previous pod's scores for the "
    "next identical pod (no node hints), so it has no batch to count or time"
)
WORKLOAD = (
    "GenericWorkload only (off by default): Berth's gangs are scheduler-plugins PodGroups scheduled pod by "
    "pod, not Workload API pod groups scheduled as one"
)
PLACEMENTS = "TopologyAwareWorkloadScheduling only: Berth generates no placements for pod groups"


@dataclasses.dataclass(frozen=True)
class Upstream:
    name: str
    type: str  # counter | gauge | histogram
    level: str  # component-base StabilityLevel: ALPHA | BETA | STABLE
    labels: tuple[str, ...] = ()
    buckets: tuple[float, float, int] | None = None  # ExponentialBuckets(start, factor, count)
    #: The first release Berth follows that has it.
    since: KubeVersion = V135
    #: The gate metrics.go Register needs for it ("" = always registered).
    gate: str = ""
    deprecated: str = ""  # DeprecatedVersion
    #: Why Berth does not expose it ("" = it does).
    missing: str = ""


UPSTREAM = [
    Upstream("scheduler_schedule_attempts_total", "counter", "STABLE", ("result", "profile")),
    Upstream("scheduler_event_handling_duration_seconds", "histogram", "ALPHA", ("event",), (0.0001, 2, 12),
             missing="not instrumented: Berth's handlers (Scheduler.on_node) are not told an add from an update, "
                     "so the event label could not say what upstream's does"),
    Upstream("scheduler_scheduling_attempt_duration_seconds", "histogram", "STABLE", ("result", "profile"),
             (0.001, 2, 15)),
    Upstream("scheduler_scheduling_algorithm_duration_seconds", "histogram", "BETA", (), (0.001, 2, 15)),
    Upstream("scheduler_preemption_victims", "histogram", "STABLE", (), (1, 2, 7)),
    Upstream("scheduler_preemption_attempts_total", "counter", "STABLE"),
    Upstream("scheduler_pending_pods", "gauge", "STABLE", ("queue",)),
    Upstream("scheduler_queued_entities", "gauge", "ALPHA", ("queue", "type"), since=V137),
    Upstream("scheduler_inflight_events", "gauge", "ALPHA", ("event",),
             missing="QueueingHints only: Berth has no queueing hints, so no in-flight event list to measure"),
    Upstream("scheduler_goroutines", "gauge", "BETA", ("operation",)),
    Upstream("scheduler_batch_attempts_total", "counter", "ALPHA", ("profile", "result"), missing=BATCHING),
    Upstream("scheduler_batch_cache_flushed_total", "counter", "ALPHA", ("profile", "reason"), missing=BATCHING),
    Upstream("scheduler_batch_rescore_attempts_total", "counter", "ALPHA", ("profile",), since=V137,
             missing=BATCHING),
    Upstream("scheduler_pod_scheduling_sli_duration_seconds", "histogram", "BETA", ("attempts",), (0.01, 2, 20)),
    Upstream("scheduler_pod_scheduling_attempts", "histogram", "STABLE", (), (1, 2, 5)),
    Upstream("scheduler_pod_scheduled_after_flush_total", "counter", "ALPHA", since=V136),
    Upstream("scheduler_pre_queueing_hint_evaluations_total", "counter", "ALPHA", ("plugin", "result"), since=V137,
             missing="QueueingHints only: Berth requeues by registered events, it runs no (pre-)queueing hints"),
    Upstream("scheduler_framework_extension_point_duration_seconds", "histogram", "STABLE",
             ("extension_point", "status", "profile"), (0.0001, 2, 12)),
    Upstream("scheduler_plugin_execution_duration_seconds", "histogram", "BETA",
             ("plugin", "extension_point", "status"), (0.00001, 1.5, 20)),
    Upstream("scheduler_queueing_hint_execution_duration_seconds", "histogram", "ALPHA", ("plugin", "event", "hint"),
             (0.00001, 1.5, 20), missing="QueueingHints only: Berth requeues by registered events, it runs no hints"),
    Upstream("scheduler_queue_incoming_pods_total", "counter", "STABLE", ("queue", "event")),
    Upstream("scheduler_queue_incoming_entities_total", "counter", "ALPHA", ("queue", "event", "type"), since=V137),
    Upstream("scheduler_permit_wait_duration_seconds", "histogram", "BETA", ("result",), (0.001, 2, 15)),
    Upstream("scheduler_cache_size", "gauge", "ALPHA", ("type",)),
    Upstream("scheduler_unschedulable_pods", "gauge", "BETA", ("plugin", "profile")),
    Upstream("scheduler_plugin_evaluation_total", "counter", "BETA", ("plugin", "extension_point", "profile"),
             missing="counts one plugin call per node; Berth's Filter and Score run each plugin once over every "
                     "candidate node (vectorised), so the count would not mean the same"),
    Upstream("scheduler_preemption_goroutines_duration_seconds", "histogram", "ALPHA", ("result",), (0.01, 2, 20),
             gate="SchedulerAsyncPreemption", deprecated="1.37.0",
             missing="SchedulerAsyncPreemption only: Berth's preemption evicts within the cycle, no goroutine"),
    Upstream("scheduler_preemption_goroutines_execution_total", "counter", "ALPHA", ("result",),
             gate="SchedulerAsyncPreemption", missing="SchedulerAsyncPreemption only (as above)"),
    Upstream("scheduler_async_api_call_execution_total", "counter", "ALPHA", ("call_type", "result"),
             gate="SchedulerAsyncAPICalls",
             missing="SchedulerAsyncAPICalls only (off by default); Berth's writes are not dispatched through "
                     "such a queue"),
    Upstream("scheduler_async_api_call_execution_duration_seconds", "histogram", "ALPHA", ("call_type", "result"),
             (0.001, 2, 15), gate="SchedulerAsyncAPICalls", missing="SchedulerAsyncAPICalls only (as above)"),
    Upstream("scheduler_pending_async_api_calls", "gauge", "ALPHA", ("call_type",), gate="SchedulerAsyncAPICalls",
             missing="SchedulerAsyncAPICalls only (as above)"),
    Upstream("scheduler_dra_bindingconditions_allocations_total", "counter", "ALPHA", ("profile", "driver", "status"),
             since=V136, gate="DRADeviceBindingConditions"),
    Upstream("scheduler_dra_bindingconditions_wait_duration_seconds", "histogram", "ALPHA",
             ("profile", "driver", "status"), (0.1, 2, 14), since=V136, gate="DRADeviceBindingConditions"),
    Upstream("scheduler_get_node_hint_duration_seconds", "histogram", "ALPHA", ("hinted", "profile"),
             (0.00001, 2, 12), missing=BATCHING),
    Upstream("scheduler_store_schedule_results_duration_seconds", "histogram", "ALPHA", ("profile",),
             (0.00001, 2, 12), missing=BATCHING),
    Upstream("scheduler_batch_rescore_duration_seconds", "histogram", "ALPHA", ("profile",), (0.00001, 2, 12),
             since=V137, missing=BATCHING),
    Upstream("scheduler_podgroup_schedule_attempts_total", "counter", "ALPHA", ("result", "profile"), since=V136,
             gate="GenericWorkload", missing=WORKLOAD),
    Upstream("scheduler_podgroup_scheduling_attempt_duration_seconds", "histogram", "ALPHA", ("result", "profile"),
             (0.001, 2, 15), since=V136, gate="GenericWorkload", missing=WORKLOAD),
    Upstream("scheduler_podgroup_scheduling_algorithm_duration_seconds", "histogram", "ALPHA", (), (0.001, 2, 15),
             since=V136, gate="GenericWorkload", missing=WORKLOAD),
    Upstream("scheduler_workload_preemption_attempts_total", "counter", "ALPHA", ("result",), since=V137,
             gate="GenericWorkload", missing=WORKLOAD),
    Upstream("scheduler_workload_preemption_victims", "histogram", "ALPHA", (), (1, 2, 11), since=V137,
             gate="GenericWorkload", missing=WORKLOAD),
    Upstream("scheduler_preemption_workload_disruptions", "histogram", "ALPHA", ("preemptor",), (1, 2, 11),
             since=V137, gate="GenericWorkload", missing=WORKLOAD),
    Upstream("scheduler_preemption_evaluation_duration_seconds", "histogram", "ALPHA", ("preemptor", "result"),
             (0.001, 2, 16), since=V137, gate="GenericWorkload"),
    Upstream("scheduler_preemption_execution_duration_seconds", "histogram", "ALPHA", ("preemptor", "result"),
             (0.001, 2, 16), since=V137, gate="GenericWorkload"),
    Upstream("scheduler_preemption_pdb_violations_total", "counter", "ALPHA", ("preemptor",), since=V137,
             gate="GenericWorkload"),
    Upstream("scheduler_generated_placements_total", "counter", "ALPHA", ("profile",), since=V137,
             gate="TopologyAwareWorkloadScheduling", missing=PLACEMENTS),
    Upstream("scheduler_placement_evaluations_total", "counter", "ALPHA", ("result", "profile"), since=V137,
             gate="TopologyAwareWorkloadScheduling", missing=PLACEMENTS),
    Upstream("scheduler_placement_evaluation_duration_seconds", "histogram", "ALPHA", ("result", "profile"),
             (0.001, 2, 15), since=V137, gate="TopologyAwareWorkloadScheduling", missing=PLACEMENTS),
]  # fmt: skip

#: What ``Features`` field each gate of the table is (the ones Berth reads).
GATE_FIELDS = {"GenericWorkload": "generic_workload", "DRADeviceBindingConditions": "dra_device_binding_conditions"}


def go_exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    """client_golang's ExponentialBuckets, written out again here."""
    out = []
    for _ in range(count):
        out.append(start)
        start *= factor
    return out


@dataclasses.dataclass
class Family:
    type: str
    labels: set[str]
    buckets: list[float]
    help: str


def families(registry: CollectorRegistry) -> dict[str, Family]:
    """Exposed families by their exposition name (a counter's with ``_total``)."""
    out: dict[str, Family] = {}
    for fam in registry.collect():
        name = fam.name + "_total" if fam.type == "counter" else fam.name
        labels: set[str] = set()
        buckets: list[float] = []
        for s in fam.samples:
            labels |= set(s.labels) - {"le"}
            if s.name.endswith("_bucket") and s.labels.get("le") != "+Inf":
                le = float(s.labels["le"])
                if le not in buckets:
                    buckets.append(le)
        out[name] = Family(fam.type, labels, sorted(buckets), fam.documentation)
    return out


def exposed_by(feats: Features) -> dict[str, Family]:
    m = metrics.Metrics(feats)
    # A child of every labelled family, so it shows its label names and buckets.
    m.schedule_attempts.labels("scheduled", "p").inc()
    m.queue_incoming.labels("active", "UnscheduledPodAdd").inc()
    m.unschedulable_pods.labels("x", "p").inc()
    m.attempt_duration.labels("scheduled", "p").observe(1)
    m.pod_scheduling_sli_duration.labels("1").observe(1)
    m.extension_point_duration.labels("Bind", "Success", "p").observe(1)
    m.plugin_execution_duration.labels("x", "Bind", "Success").observe(1)
    m.permit_wait_duration.labels("Success").observe(1)
    if m.queue_incoming_entities is not None:
        m.queue_incoming_entities.labels("active", "UnscheduledPodAdd", "pod").inc()
    if m.preemption_evaluation_duration is not None:
        m.preemption_evaluation_duration.labels("pod", "Success").observe(1)
    if m.preemption_execution_duration is not None:
        m.preemption_execution_duration.labels("pod", "success").observe(1)
    if m.preemption_pdb_violations is not None:
        m.preemption_pdb_violations.labels("pod").inc()
    if m.dra_binding_conditions_allocations is not None and m.dra_binding_conditions_wait is not None:
        m.dra_binding_conditions_allocations.labels("p", "d", "success").inc()
        m.dra_binding_conditions_wait.labels("p", "d", "success").observe(1)
    if m.resourceclaim_creates is not None:
        m.resourceclaim_creates.labels("success", "false", "", "Pod").inc()
    m.set_cache_size(1, 1, 0)
    return families(m.registry)


@pytest.fixture
def exposed() -> dict[str, Family]:
    """The newest release's metrics, with every gate a metric of the table needs on."""
    return exposed_by(Features.of(features.NEWEST, {"GenericWorkload": True}))


def registered_upstream(up: Upstream, feats: Features) -> bool:
    """Whether kube-scheduler of ``feats``' release, with its gates, registers ``up``."""
    if up.since > feats.version:
        return False
    field = GATE_FIELDS.get(up.gate)
    return not up.gate or (field is not None and bool(getattr(feats, field)))


@pytest.mark.parametrize("up", [u for u in UPSTREAM if not u.missing], ids=lambda u: u.name)
def test_berth_exposes_the_upstream_metric_with_its_type_labels_buckets_and_level(
    up: Upstream, exposed: dict[str, Family]
) -> None:
    assert up.name in exposed, f"{up.name} is not exposed"
    fam = exposed[up.name]
    assert fam.type == up.type
    assert fam.labels == set(up.labels)
    assert fam.help.startswith(f"[{up.level}] ")
    if up.buckets is not None:
        assert fam.buckets == go_exponential_buckets(*up.buckets)


@pytest.mark.parametrize("version", [V135, V136, V137], ids=str)
@pytest.mark.parametrize("generic_workload", [False, True], ids=["gates-default", "GenericWorkload"])
def test_berth_registers_what_that_release_registers(version: KubeVersion, generic_workload: bool) -> None:
    """A metric a release does not have (or registers behind a gate that is
    off) is not exposed when Berth follows that release."""
    feats = Features.of(version, {"GenericWorkload": True} if generic_workload else None)
    ours = {n for n in exposed_by(feats) if n.startswith("scheduler_")}
    assert ours == {u.name for u in UPSTREAM if not u.missing and registered_upstream(u, feats)}


@pytest.mark.parametrize("up", [u for u in UPSTREAM if u.missing], ids=lambda u: u.name)
def test_what_berth_leaves_out_is_absent_and_says_why(up: Upstream, exposed: dict[str, Family]) -> None:
    assert up.name not in exposed
    assert len(up.missing) > 20


def test_every_scheduler_metric_berth_exposes_is_upstreams(exposed: dict[str, Family]) -> None:
    ours = {n for n in exposed if n.startswith("scheduler_")}
    assert ours <= {u.name for u in UPSTREAM}
    # And the ones kube-scheduler exposes from other modules: client-go's
    # leader election (k8s.io/component-base/metrics/prometheus/clientgo/
    # leaderelection, v0.37.2) and the DRA library's claim creations.
    others = {"leader_election_master_status", RESOURCECLAIM_CREATES}
    assert all(n.startswith(("scheduler_", "berth_")) or n in others for n in exposed)


RESOURCECLAIM_CREATES = "dynamic_resource_allocation_resourceclaim_creates_total"
DRA_METRICS_GO = Path.home() / "go/pkg/mod/k8s.io/dynamic-resource-allocation@v0.37.2/resourceclaim/metrics/metrics.go"


@pytest.mark.parametrize(
    ("version", "exposed_then"),
    [(V135, False), (V136, True), (V137, True)],  # DRAExtendedResource: alpha (off), beta, locked on
)
def test_claim_creations_are_counted_as_the_dra_library_counts_them_while_extended_resources_are_on(
    version: KubeVersion, exposed_then: bool
) -> None:
    """k8s.io/dynamic-resource-allocation v0.37.2 resourceclaim/metrics:
    registered by kube-scheduler's metrics.go only with DRAExtendedResource."""
    fams = exposed_by(Features.of(version, {}))
    assert (RESOURCECLAIM_CREATES in fams) == exposed_then
    if exposed_then:
        fam = fams[RESOURCECLAIM_CREATES]
        assert (fam.type, fam.labels) == ("counter", {"status", "admin_access", "owner_api_group", "owner_api_kind"})
        assert fam.help.startswith("[ALPHA] Number of ResourceClaims creation requests")
        if DRA_METRICS_GO.exists():
            assert fam.help.removeprefix("[ALPHA] ") in DRA_METRICS_GO.read_text()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((1, 2, 5), [1, 2, 4, 8, 16]),
        ((1, 2, 7), [1, 2, 4, 8, 16, 32, 64]),
        ((0.001, 2, 3), [0.001, 0.002, 0.004]),
        ((0.00001, 1.5, 3), [0.00001, 0.000015, 0.0000225]),
    ],
)
def test_exponential_buckets_are_client_golangs(args: tuple[float, float, int], expected: list[float]) -> None:
    assert list(metrics.exponential_buckets(*args)) == pytest.approx(expected)
    assert list(metrics.exponential_buckets(*args)) == go_exponential_buckets(*args)


@pytest.mark.parametrize("args", [(0, 2, 3), (1, 1, 3), (1, 2, 0), (-1, 2, 3)])
def test_exponential_buckets_refuse_what_client_golang_panics_on(args: tuple[float, float, int]) -> None:
    with pytest.raises(ValueError, match="exponential_buckets"):
        metrics.exponential_buckets(*args)


def parse_metrics_go(src: str) -> dict[str, tuple[Upstream, str]]:
    """InitMetrics' metrics, each with its help text."""
    start = src.index("func InitMetrics()")
    body = src[start : src.index("metricsList = []metrics.Registerable", start)]
    found: dict[str, tuple[Upstream, str]] = {}
    for block in re.split(r"\n\t\w+ = metrics\.New", body)[1:]:
        kind = re.match(r"(Counter|Gauge|Histogram)", block)
        assert kind is not None
        name = "scheduler_" + re.search(r'Name:\s+"([^"]+)"', block).group(1)  # type: ignore[union-attr]
        level = re.search(r"StabilityLevel:\s+metrics\.(\w+)", block).group(1)  # type: ignore[union-attr]
        help_text = re.search(r'Help:\s+"((?:[^"\\]|\\.)*)"', block).group(1)  # type: ignore[union-attr]
        deprecated = re.search(r'DeprecatedVersion:\s+"([^"]+)"', block)
        labels = re.search(r"\[\]string\{([^}]*)\}", block)
        buckets = re.search(r"ExponentialBuckets\(([^)]*)\)", block)
        found[name] = (
            Upstream(
                name,
                kind.group(1).lower(),
                level,
                tuple(re.findall(r'"([^"]+)"', labels.group(1))) if labels else (),
                tuple(float(x) if "." in x else int(x) for x in buckets.group(1).split(", ")) if buckets else None,  # type: ignore[arg-type]
                deprecated=deprecated.group(1) if deprecated else "",
            ),
            help_text,
        )
    return found


@pytest.mark.skipif(not METRICS_GO.exists(), reason="kube-scheduler v1.37.2 source not in the Go module cache")
def test_the_table_is_the_pinned_metrics_go() -> None:
    found = parse_metrics_go(METRICS_GO.read_text())

    def shape(u: Upstream) -> tuple[object, ...]:
        return (u.type, u.level, u.labels, u.buckets, u.deprecated)

    assert {u.name: shape(u) for u in UPSTREAM} == {name: shape(u) for name, (u, _) in found.items()}


@pytest.mark.skipif(not METRICS_GO.exists(), reason="kube-scheduler v1.37.2 source not in the Go module cache")
def test_berth_says_what_upstream_says_in_each_metrics_help(exposed: dict[str, Family]) -> None:
    """component-base's help: ``[LEVEL] `` then metrics.go's text."""
    for name, (up, help_text) in parse_metrics_go(METRICS_GO.read_text()).items():
        if name in exposed:
            assert exposed[name].help == f"[{up.level}] {help_text}", name


# ---------------------------------------------------------------- behaviour


def berth_pod(name: str, **kw: object) -> model.Pod:
    return make_pod(name, scheduler_name="berth", **kw)  # type: ignore[arg-type]


def value(berth: Berth, name: str, **labels: str) -> float:
    v = berth.core.metrics.registry.get_sample_value(name, labels)
    return 0.0 if v is None else v


async def test_a_run_moves_the_attempt_queue_and_extension_point_metrics_as_upstreams() -> None:
    async with running() as berth:
        berth.nodes(*(make_node(f"n{i}", cpu="2", memory="8Gi", pods=110) for i in range(2)))
        berth.pods(*(berth_pod(f"p{i}", requests={"cpu": "1"}) for i in range(4)))
        berth.pods(berth_pod("big", requests={"cpu": "3"}))
        await berth.settle()
        assert len(berth.bound()) == 4 and berth.phase("default/big") == "Unschedulable"

        def v(name: str, **labels: str) -> float:
            return value(berth, name, **labels)

        # schedule_one: one attempt per pop, by result and profile.
        assert v("scheduler_schedule_attempts_total", result="scheduled", profile="berth") == 4
        failed = v("scheduler_schedule_attempts_total", result="unschedulable", profile="berth")
        assert failed >= 1
        assert v("scheduler_scheduling_attempt_duration_seconds_count", result="scheduled", profile="berth") == 4
        # bindingCycle: attempts observed once per bound pod, the SLI by attempts.
        assert v("scheduler_pod_scheduling_attempts_count") == 4
        assert v("scheduler_pod_scheduling_attempts_sum") == 4
        assert v("scheduler_pod_scheduling_sli_duration_seconds_count", attempts="1") == 4
        # The queue: every new pod entered activeQ on its add; each failure went
        # to unschedulablePods or, with an event in flight, backoffQ.
        assert v("scheduler_queue_incoming_pods_total", queue="active", event="UnscheduledPodAdd") == 5
        # 1.37: each pod is an entity of its own, counted on the same moves.
        assert v("scheduler_queue_incoming_entities_total", queue="active", event="UnscheduledPodAdd", type="pod") == 5
        after_failure = sum(
            v("scheduler_queue_incoming_pods_total", queue=q, event="ScheduleAttemptFailure")
            for q in ("unschedulable", "backoff")
        )
        assert after_failure == failed
        assert v("scheduler_pending_pods", queue="unschedulable") == 1
        # The pod waiting counts for the plugin that rejected it, once.
        assert v("scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile="berth") == 1
        # Extension points of the loop's cycles, by status.
        point = "scheduler_framework_extension_point_duration_seconds_count"
        for ep in ("Reserve", "Permit", "PreBind", "Bind", "PostBind"):
            assert v(point, extension_point=ep, status="Success", profile="berth") == 4, ep
        assert v(point, extension_point="PreFilter", status="Success", profile="berth") == 4 + failed
        assert v(point, extension_point="PostFilter", status="Unschedulable", profile="berth") == failed
        assert v(point, extension_point="PreEnqueue", status="Success", profile="berth") >= 5
        # No binding cycle left running.
        assert v("scheduler_goroutines", operation="binding") == 0

        # The pod leaves: its rejector count goes with it.
        berth.cluster.delete_pods(["default/big"])
        assert v("scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile="berth") == 0


async def test_a_retried_pod_counts_its_attempts_and_leaves_the_unschedulable_gauge() -> None:
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="1", pods=110))
        berth.pods(berth_pod("late", requests={"cpu": "2"}))
        await berth.settle()
        assert value(berth, "scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile="berth") == 1
        berth.nodes(make_node("n1", cpu="4", pods=110))
        await berth.settle()
        assert berth.node_of("default/late") == "n1"
        assert value(berth, "scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile="berth") == 0
        assert value(berth, "scheduler_pod_scheduling_attempts_count") == 1
        assert value(berth, "scheduler_pod_scheduling_attempts_sum") == 2
        assert value(berth, "scheduler_pod_scheduling_sli_duration_seconds_count", attempts="2") == 1
        # Woken by the node's arrival: the event's label, ClusterEvent.Label().
        moved = [
            s.labels["event"]
            for fam in berth.core.metrics.registry.collect()
            if fam.name == "scheduler_queue_incoming_pods"
            for s in fam.samples
            if s.name.endswith("_total") and s.labels["queue"] in ("active", "backoff") and s.value
        ]
        assert any(e.startswith("Node") for e in moved), moved


@pytest.mark.parametrize(
    ("version", "resource", "target"),
    [
        # framework/events.go: the pending pod's resource is "UnschedulablePod" until 1.36; 1.37
        # calls it "UnscheduledPod", and its update of itself "TargetPod" (kube-scheduler types.go v0.37.2).
        ("1.35", "UnschedulablePod", "UnschedulablePod"),
        ("1.36", "UnschedulablePod", "UnschedulablePod"),
        ("1.37", "UnscheduledPod", "TargetPod"),
    ],
)
async def test_a_gated_pod_counts_as_unschedulable_by_its_gate(version: str, resource: str, target: str) -> None:
    async with running(make_config(kubernetesVersion=version)) as berth:
        berth.nodes(make_node("n0", cpu="2", pods=110))
        gated = berth_pod("gated", spec={"schedulingGates": [{"name": "example.com/wait"}]})
        berth.pods(gated)
        await berth.settle()
        assert value(berth, "scheduler_pending_pods", queue="gated") == 1
        entities = berth.core.metrics.registry.get_sample_value(
            "scheduler_queued_entities", {"queue": "gated", "type": "pod"}
        )
        assert entities == (1 if version == "1.37" else None)  # queued_entities is 1.37's
        assert value(berth, "scheduler_queue_incoming_pods_total", queue="unschedulable", event=f"{resource}Add") == 1
        assert value(berth, "scheduler_unschedulable_pods", plugin="SchedulingGates", profile="berth") == 1
        assert (
            value(
                berth,
                "scheduler_framework_extension_point_duration_seconds_count",
                extension_point="PreEnqueue",
                status="UnschedulableAndUnresolvable",
                profile="berth",
            )
            == 1
        )
        berth.pods(msgspec.structs.replace(gated, spec=msgspec.structs.replace(gated.spec, scheduling_gates=[])))
        await berth.settle()
        assert berth.node_of("default/gated") == "n0"
        # The pod's update of itself, by what changed (PodSchedulingPropertiesChange).
        event = f"{target}UpdatePodSchedulingGatesEliminated"
        assert value(berth, "scheduler_queue_incoming_pods_total", queue="active", event=event) == 1
        assert value(berth, "scheduler_unschedulable_pods", plugin="SchedulingGates", profile="berth") == 0


async def test_preemption_counts_the_attempt_and_its_victims() -> None:
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="2", pods=110))
        berth.pods(
            make_pod("low-a", requests={"cpu": "1"}, node_name="n0", priority=1),
            make_pod("low-b", requests={"cpu": "1"}, node_name="n0", priority=5),
        )
        berth.pods(berth_pod("vip", requests={"cpu": "2"}, priority=100))
        await berth.settle()
        await berth.settle()
        assert berth.node_of("default/vip") == "n0"
        assert value(berth, "scheduler_preemption_attempts_total") >= 1
        assert value(berth, "scheduler_preemption_victims_count") == 1
        assert value(berth, "scheduler_preemption_victims_sum") == 2
        assert value(berth, "scheduler_preemption_victims_bucket", le="2.0") == 1


async def test_permit_wait_is_observed_by_result_for_a_gang() -> None:
    async with running() as berth:
        berth.nodes(*(make_node(f"n{i}", cpu="4", pods=110) for i in range(2)))
        group = model.PodGroup(
            metadata=model.ObjectMeta(name="g", namespace="default"), spec=model.PodGroupSpec(min_member=2)
        )
        berth.core.on_pod_group(group)
        member = {"scheduling.x-k8s.io/pod-group": "g"}
        berth.pods(berth_pod("m0", labels=member, requests={"cpu": "1"}))
        await berth.settle()
        await asyncio.sleep(3)  # virtual: the first member waits at Permit for a while
        berth.pods(berth_pod("m1", labels=member, requests={"cpu": "1"}))
        await berth.settle()
        assert sorted(berth.bound()) == ["default/m0", "default/m1"]
        waited = value(berth, "scheduler_permit_wait_duration_seconds_count", result="Success")
        assert waited >= 1
        assert value(berth, "scheduler_permit_wait_duration_seconds_sum", result="Success") >= 0


@pytest.mark.parametrize(("percent", "sampled"), [(0, False), (100, True)])
async def test_plugin_durations_are_recorded_in_sampled_cycles_only(percent: int, sampled: bool) -> None:
    async with running() as berth:
        fwk = berth.core.frameworks["berth"]
        assert fwk.plugin_metrics_sample_percent == metrics.PLUGIN_METRICS_SAMPLE_PERCENT == 10
        fwk.plugin_metrics_sample_percent = percent
        berth.nodes(make_node("n0", cpu="2", pods=110))
        berth.pods(berth_pod("p", requests={"cpu": "1"}))
        await berth.settle()
        assert berth.node_of("default/p") == "n0"
        recorded = value(
            berth,
            "scheduler_plugin_execution_duration_seconds_count",
            plugin="NodeResourcesFit",
            extension_point="Filter",
            status="Success",
        )
        assert recorded == (1 if sampled else 0)
        # The extension points are timed in every cycle either way.
        assert (
            value(
                berth,
                "scheduler_framework_extension_point_duration_seconds_count",
                extension_point="Filter",
                status="Success",
                profile="berth",
            )
            >= 1
        )


async def test_queries_outside_the_loop_record_no_cycle_metrics() -> None:
    """Explain, whatif and the extender's verbs run the framework on states of
    their own, which are not scheduling cycles."""
    async with running() as berth:
        berth.nodes(make_node("n0", cpu="2", pods=110))
        fwk = berth.core.frameworks["berth"]
        fwk.run_pre_filter(fw.CycleState(), PodInfo.of(berth_pod("q")), berth.core.snapshot())
        assert (
            value(
                berth,
                "scheduler_framework_extension_point_duration_seconds_count",
                extension_point="PreFilter",
                status="Success",
                profile="berth",
            )
            == 0
        )


@pytest.mark.parametrize(
    ("event", "label"),
    [
        (fw.ClusterEvent("Node", fw.ActionType.ADD), "NodeAdd"),
        (fw.ClusterEvent("AssignedPod", fw.ActionType.DELETE), "AssignedPodDelete"),
        (fw.ClusterEvent("AssignedPod", fw.ActionType.UPDATE_POD_LABEL), "AssignedPodUpdatePodLabel"),
        (fw.ClusterEvent("Queue", fw.ActionType.UPDATE), "QueueUpdate"),
        (fw.ClusterEvent("Node", fw.ActionType.UPDATE_NODE_TAINT | fw.ActionType.UPDATE_NODE_LABEL), "NodeUpdate"),
        (fw.ClusterEvent("Queue", fw.ActionType.ALL), "QueueAll"),
        (
            fw.ClusterEvent("Node", fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_ALLOCATABLE),
            "NodeAdd|UpdateNodeAllocatable",
        ),
        (fw.ClusterEvent("*", fw.ActionType.ALL, label="UnschedulableTimeout"), "UnschedulableTimeout"),
    ],
)
def test_incoming_pods_event_label_is_cluster_event_label(event: fw.ClusterEvent, label: str) -> None:
    """``ClusterEvent.Label()``: resource then ``ActionType.String()``."""
    assert scheduling_queue.event_label(event) == label
