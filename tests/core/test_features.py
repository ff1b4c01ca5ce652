"""Feature gates per Kubernetes release (berth/features): the generated table,
overrides as ``--feature-gates`` takes them, and what the configuration and
the default plugin set follow."""

from __future__ import annotations

import pytest

from berth import config, features
from berth.framework import registry

V35, V36, V37 = features.SUPPORTED


@pytest.mark.parametrize(
    ("version", "gate", "default"),
    [
        # Each row read in that release's pkg/features/kube_features.go.
        (V35, "NodeDeclaredFeatures", False),  # alpha in 1.35
        (V36, "NodeDeclaredFeatures", True),  # beta in 1.36
        (V37, "NodeDeclaredFeatures", True),  # GA, locked, in 1.37
        (V36, "StorageCapacityScoring", False),
        (V37, "StorageCapacityScoring", True),  # beta and on in 1.37
        (V35, "DRAConsumableCapacity", False),
        (V36, "DRAConsumableCapacity", True),
        (V35, "DRAPartitionableDevices", False),
        (V37, "DRAPartitionableDevices", True),
        (V35, "DRADeviceTaints", False),
        (V37, "DRADeviceTaints", True),
        (V37, "GenericWorkload", False),  # beta but off in 1.37
        (V35, "NominatedNodeNameForExpectation", True),
        (V37, "DynamicResourceAllocation", True),
    ],
)
def test_each_release_has_its_own_defaults(version: features.KubeVersion, gate: str, default: bool) -> None:
    assert features.gates_for(version)[gate] is default


def test_a_gate_removed_upstream_is_unknown_in_that_release_only() -> None:
    # SchedulerQueueingHints was GA and locked in 1.35 and 1.36, removed in 1.37.
    assert features.gates_for(V35)["SchedulerQueueingHints"] is True
    with pytest.raises(features.FeatureGateError, match="unrecognized feature gate: SchedulerQueueingHints"):
        features.gates_for(V37, {"SchedulerQueueingHints": True})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"NoSuchGate": True}, "unrecognized feature gate: NoSuchGate"),
        (
            {"NodeDeclaredFeatures": False},
            "cannot set feature gate NodeDeclaredFeatures to false, feature is locked to true",
        ),
        ({"DRADeviceTaints": 1}, "DRADeviceTaints: expected true or false"),
    ],
)
def test_overrides_are_refused_as_feature_gates_refuses_them(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(features.FeatureGateError, match=message):
        features.gates_for(V37, overrides)  # type: ignore[arg-type]


def test_an_override_turns_a_gate_on_in_features() -> None:
    assert not features.Features.of(V37).generic_workload
    assert features.Features.of(V37, {"GenericWorkload": True}).generic_workload


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1.35", V35), ("v1.36.3", V36), ("v1.37.2-gke.1", V37), ("1.37.0", V37)],
)
def test_versions_parse_to_their_minor(text: str, expected: features.KubeVersion) -> None:
    assert features.parse_version(text) == expected


@pytest.mark.parametrize("text", ["1.34", "2.0", "latest", ""])
def test_other_versions_are_refused_naming_the_supported_ones(text: str) -> None:
    with pytest.raises(features.FeatureGateError, match=r"1\.35, 1\.36, 1\.37|not a Kubernetes version"):
        features.parse_version(text)


def test_configuration_names_the_field_of_a_bad_version_or_gate() -> None:
    with pytest.raises(config.ConfigError, match=r"^kubernetesVersion: Kubernetes 1.34 is not supported"):
        config.parse({"kubernetesVersion": "1.34"})
    with pytest.raises(config.ConfigError, match=r"^featureGates: unrecognized feature gate: Nope"):
        config.parse({"featureGates": {"Nope": True}})


def test_configuration_follows_the_newest_release_unless_it_names_one() -> None:
    assert config.parse({}).features().version == V37
    assert config.parse({"kubernetesVersion": "1.35"}).features().version == V35
    # The API server's release wins over the configuration's.
    assert config.parse({"kubernetesVersion": "1.35"}).features(V36).version == V36


@pytest.mark.parametrize(
    ("version", "first_filters", "declared_features"),
    [
        # default_plugins.go of each release: 1.37 moved NodeName first;
        # NodeDeclaredFeatures is appended while its gate is on.
        (V35, ["NodeUnschedulable", "NodeName"], False),
        (V36, ["NodeUnschedulable", "NodeName"], True),
        (V37, ["NodeName", "NodeUnschedulable"], True),
    ],
)
def test_default_plugins_follow_the_release(
    version: features.KubeVersion, first_filters: list[str], declared_features: bool
) -> None:
    names = [n for n, _ in registry.default_multi_point(features.Features.of(version))]
    assert names[2:4] == first_filters
    assert ("DynamicResources" in names) and names.index("DynamicResources") == names.index("DefaultPreemption") - 1
    if "NodeDeclaredFeatures" in registry.IN_TREE:
        assert ("NodeDeclaredFeatures" in names) is declared_features


def test_dynamic_resources_leaves_the_defaults_when_dra_is_off() -> None:
    # DynamicResourceAllocation is locked on from 1.35, so only a bare
    # Features (every gate off) shows the branch.
    names = [n for n, _ in registry.default_multi_point(features.Features(version=V37))]
    assert "DynamicResources" not in names
