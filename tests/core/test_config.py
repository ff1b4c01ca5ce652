"""BerthConfiguration: defaults, profiles, and errors that name the field path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from berth import app, config
from berth.framework import registry


def test_defaults_make_one_berth_profile_with_kube_schedulers_plugins_and_weights() -> None:
    cfg = config.parse({})
    assert [p.scheduler_name for p in cfg.profiles] == ["berth"]
    resolved = registry.resolve_profile(cfg.profiles[0])
    assert resolved.queue_sort == ["PrioritySort"]
    # v1.37.2 default_plugins.go: NodeName before NodeUnschedulable.
    assert resolved.points["filter"][:4] == ["NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity"]
    assert resolved.weights["TaintToleration"] == 3
    assert resolved.weights["NodeAffinity"] == 2
    assert resolved.weights["NodeResourcesFit"] == 1
    assert resolved.points["bind"] == ["DefaultBinder"]
    assert "SchedulingGates" in resolved.points["preEnqueue"]


def test_example_configuration_is_valid() -> None:
    cfg = config.load(Path(__file__).parents[2] / "examples" / "berth.yaml")
    assert cfg.http.port == 8888


def test_score_weight_and_disabled_plugins_apply_per_extension_point() -> None:
    cfg = config.parse(
        {
            "profiles": [
                {
                    "schedulerName": "batch",
                    "plugins": {
                        "score": {
                            "enabled": [{"name": "NodeResourcesFit", "weight": 5}],
                            "disabled": [{"name": "ImageLocality"}],
                        },
                        "multiPoint": {"disabled": [{"name": "NodePorts"}]},
                    },
                }
            ],
            "extender": {"profile": "batch"},
        }
    )
    resolved = registry.resolve_profile(cfg.profiles[0])
    assert resolved.weights["NodeResourcesFit"] == 5
    assert resolved.points["score"][0] == "NodeResourcesFit"
    assert "ImageLocality" not in resolved.points["score"]
    assert "NodePorts" not in resolved.points["filter"]
    assert "NodePorts" not in resolved.points["preFilter"]


def test_disabling_star_drops_every_default_at_that_point() -> None:
    cfg = config.parse({"profiles": [{"plugins": {"score": {"disabled": [{"name": "*"}]}}}]})
    assert registry.resolve_profile(cfg.profiles[0]).points["score"] == []


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("unknown top-level field", {"percentageOfNodesToScor": 5}, "percentageOfNodesToScor: unknown field"),
    ("wrong type", {"percentageOfNodesToScore": "lots"}, "percentageOfNodesToScore: Expected `int`"),
    ("out of range", {"percentageOfNodesToScore": 101}, "percentageOfNodesToScore: must be between"),
    (
        "lease not longer than the renew deadline",
        {"leaderElection": {"leaseDurationSeconds": 10, "renewDeadlineSeconds": 10}},
        "leaderElection.leaseDurationSeconds: must be greater than renewDeadlineSeconds",
    ),
    (
        "retry period under a second",
        {"leaderElection": {"retryPeriodSeconds": 0.5}},
        "leaderElection.retryPeriodSeconds: must be at least 1",
    ),
    ("wrong apiVersion", {"apiVersion": "v9"}, "apiVersion: must be 'berth.dev/v1'"),
    ("unknown nested field", {"http": {"prot": 1}}, "http.prot: unknown field"),
    ("bad port", {"grpc": {"port": 70000}}, "grpc.port: 70000 is not a valid port"),
    ("duplicate profile", {"profiles": [{}, {}]}, "profiles[1].schedulerName: duplicate profile 'berth'"),
    (
        "unknown plugin",
        {"profiles": [{"plugins": {"filter": {"enabled": [{"name": "Nope"}]}}}]},
        "profiles[0].plugins.filter.enabled[0].name: unknown plugin 'Nope'",
    ),
    (
        "misspelt plugin: did you mean",
        {"profiles": [{"plugins": {"filter": {"enabled": [{"name": "NodeAfinity"}]}}}]},
        "profiles[0].plugins.filter.enabled[0].name: unknown plugin 'NodeAfinity'; did you mean \"NodeAffinity\"?",
    ),
    (
        "plugin at a point it does not extend",
        {"profiles": [{"plugins": {"score": {"enabled": [{"name": "NodeName"}]}}}]},
        "profiles[0].plugins.score.enabled[0].name: plugin 'NodeName' does not extend score",
    ),
    (
        "weight out of range",
        {"profiles": [{"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": 0}]}}}]},
        "profiles[0].plugins.score.enabled[0].weight: must be between 1 and 100",
    ),
    (
        "bad plugin args",
        {"profiles": [{"pluginConfig": [{"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 200}}]}]},
        "profiles[0].pluginConfig[0].args: minCandidateNodesPercentage",
    ),
    (
        "unknown plugin arg",
        {"profiles": [{"pluginConfig": [{"name": "DefaultPreemption", "args": {"bogus": 1}}]}]},
        "profiles[0].pluginConfig[0].args.bogus: unknown field",
    ),
    ("extender profile missing", {"extender": {"profile": "ghost"}}, "extender.profile: no profile named 'ghost'"),
    ("no profiles", {"profiles": []}, "profiles: at least one profile is required"),
    ("bad scheduler name", {"profiles": [{"schedulerName": "Bad Name"}]}, "profiles[0].schedulerName"),
    ("zero grpc message limit", {"grpc": {"maxMessageBytes": 0}}, "grpc.maxMessageBytes: must be greater than 0"),
    ("zero idle timeout", {"http": {"idleTimeoutSeconds": 0}}, "http.idleTimeoutSeconds: must be greater than 0"),
    ("negative header timeout", {"http": {"readHeaderTimeoutSeconds": -1}}, "http.readHeaderTimeoutSeconds"),
    ("zero body timeout", {"http": {"readTimeoutSeconds": 0}}, "http.readTimeoutSeconds: must be greater than 0"),
    ("zero grpc idle timeout", {"grpc": {"idleTimeoutSeconds": 0}}, "grpc.idleTimeoutSeconds: must be greater than 0"),
    ("negative grace period", {"shutdownGracePeriodSeconds": -1}, "shutdownGracePeriodSeconds: must not be negative"),
    ("unknown auth field", {"grpc": {"auth": {"token": "x"}}}, "grpc.auth.token: unknown field"),
]


@pytest.mark.parametrize(("case", "doc", "message"), BAD, ids=[b[0] for b in BAD])
def test_invalid_configuration_names_the_field(case: str, doc: dict[str, Any], message: str) -> None:
    with pytest.raises(config.ConfigError) as err:
        config.parse(doc)
    assert message in str(err.value)


def test_load_reports_the_file_and_yaml_errors(tmp_path: Path) -> None:
    p = tmp_path / "berth.yaml"
    p.write_text("profiles: [\n")
    with pytest.raises(config.ConfigError, match=r"berth\.yaml: not valid YAML"):
        config.load(p)
    with pytest.raises(config.ConfigError, match="No such file"):
        config.load(tmp_path / "missing.yaml")
    p.write_text("a: 1\n---\nb: 2\n")
    with pytest.raises(config.ConfigError, match="expected one BerthConfiguration document"):
        config.load(p)


@pytest.mark.parametrize(
    ("doc", "read"),
    [
        ({"assumedPodTTLSeconds": 12}, lambda c: c.assumed_pod_ttl_seconds == 12),
        (
            {"http": {"tls": {"certFile": "c", "keyFile": "k", "clientCAFile": "ca"}}},
            lambda c: c.http.tls.client_ca_file == "ca",
        ),
    ],
    ids=["assumedPodTTLSeconds", "clientCAFile"],
)
def test_keys_spell_initialisms_as_kubernetes_does(doc: dict[str, Any], read: Any) -> None:
    assert read(config.parse(doc))


@pytest.mark.parametrize("key", ["assumedPodTtlSeconds", "clientCaFile"])
def test_camel_cased_initialisms_are_unknown_fields(key: str) -> None:
    doc: dict[str, Any] = (
        {key: 1} if key.startswith("assumed") else {"http": {"tls": {"certFile": "c", "keyFile": "k", key: "x"}}}
    )
    with pytest.raises(config.ConfigError, match="unknown field"):
        config.parse(doc)


def _coscheduling_timeout(cfg: config.BerthConfiguration) -> float:
    plugin = app.build(cfg, run_loop=False).core.frameworks["berth"].plugins["Coscheduling"]
    return float(plugin.args.schedule_timeout_seconds)


@pytest.mark.parametrize(
    ("doc", "timeout"),
    [
        ({}, 60.0),  # scheduler-plugins' default
        ({"profiles": [{"pluginConfig": [{"name": "Coscheduling", "args": {"scheduleTimeoutSeconds": 5}}]}]}, 5.0),
        ({"gangScheduleTimeoutSeconds": 7}, 7.0),  # deprecated global field, still honoured
        (  # the plugin's own argument wins over the deprecated field
            {
                "gangScheduleTimeoutSeconds": 7,
                "profiles": [{"pluginConfig": [{"name": "Coscheduling", "args": {"scheduleTimeoutSeconds": 5}}]}],
            },
            5.0,
        ),
    ],
)
def test_gang_timeout_is_coschedulings_argument(doc: dict[str, Any], timeout: float) -> None:
    assert _coscheduling_timeout(config.parse(doc)) == timeout


def test_the_deprecated_gang_timeout_warns(caplog: pytest.LogCaptureFixture) -> None:
    config.parse({"gangScheduleTimeoutSeconds": 7})
    assert "gangScheduleTimeoutSeconds is deprecated" in caplog.text


def test_coscheduling_rejects_a_non_positive_timeout() -> None:
    doc = {"profiles": [{"pluginConfig": [{"name": "Coscheduling", "args": {"scheduleTimeoutSeconds": 0}}]}]}
    with pytest.raises(config.ConfigError, match=r"pluginConfig\[0\]\.args: scheduleTimeoutSeconds: must be greater"):
        config.parse(doc)
