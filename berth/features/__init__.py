"""Kubernetes feature gates, per release: which behaviour of kube-scheduler
1.35, 1.36 or 1.37 Berth follows.

kube-scheduler reads its gates once (``--feature-gates`` over the release's
defaults in ``pkg/features/kube_features.go``) and hands the plugins a plain
struct of booleans (``pkg/scheduler/framework/plugins/feature/feature.go``,
v1.37.2), so no plugin asks the global gate. Berth does the same:

- :func:`gates_for` resolves the gates of one release (``kube_features.json``
  beside this file, generated from each release's source by
  ``scripts/gen_feature_gates.py``) with the configuration's overrides,
  refusing what kube-scheduler refuses (an unknown gate, a locked one set to
  the other value);
- :class:`Features` is the struct the plugins see, built once per process and
  handed to every plugin through its Handle.

Which release: in Kubernetes mode the API server's (``/version``, read at
start), else the configuration's ``kubernetesVersion``, else the newest
supported one. A release outside :data:`SUPPORTED` is refused, naming the
supported ones; a patch release follows its minor.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "NEWEST",
    "SUPPORTED",
    "FeatureGateError",
    "Features",
    "KubeVersion",
    "gates_for",
    "parse_version",
]


class FeatureGateError(ValueError):
    """An unknown gate, a locked gate set to the other value, or a release
    Berth does not follow."""


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class KubeVersion:
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


#: The releases Berth follows (Kubernetes' supported releases on 2026-11-27).
SUPPORTED: tuple[KubeVersion, ...] = (KubeVersion(1, 35), KubeVersion(1, 36), KubeVersion(1, 37))
NEWEST = SUPPORTED[-1]

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?$")


def parse_version(text: str) -> KubeVersion:
    """``1.36``, ``v1.36.3`` or ``v1.37.2-gke.100`` -> that minor; raises
    FeatureGateError for anything else or an unsupported release."""
    m = _VERSION.match(text.strip())
    if m is None:
        raise FeatureGateError(f"{text!r} is not a Kubernetes version (expected e.g. 1.37 or v1.37.2)")
    version = KubeVersion(int(m.group(1)), int(m.group(2)))
    if version not in SUPPORTED:
        supported = ", ".join(str(v) for v in SUPPORTED)
        raise FeatureGateError(f"Kubernetes {version} is not supported: Berth follows {supported}")
    return version


@functools.cache
def _table() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((Path(__file__).with_name("kube_features.json")).read_text())
    return data["releases"]  # type: ignore[no-any-return]


def gates_for(version: KubeVersion = NEWEST, overrides: Mapping[str, bool] | None = None) -> dict[str, bool]:
    """Every gate of ``version`` with its default, then ``overrides`` applied
    as ``--feature-gates`` would be (component-base's ``featuregate.Set``:
    ``unrecognized feature gate: X``, ``cannot set feature gate X to Y,
    feature is locked to Z``)."""
    known: dict[str, list[Any]] = _table()[str(version)]["gates"]
    gates = {name: bool(spec[0]) for name, spec in known.items()}
    for name, value in (overrides or {}).items():
        if not isinstance(value, bool):
            raise FeatureGateError(f"{name}: expected true or false, got {value!r}")
        spec = known.get(name)
        if spec is None:
            raise FeatureGateError(f"unrecognized feature gate: {name} (Kubernetes {version})")
        default, _, locked = spec
        if locked and value != default:
            raise FeatureGateError(
                f"cannot set feature gate {name} to {str(value).lower()}, feature is locked to {str(default).lower()}"
            )
        gates[name] = value
    return gates


def _gate(name: str) -> Any:
    """A Features field read from gate ``name`` (kept in the field's metadata)."""
    return dataclasses.field(default=False, metadata={"gate": name})


@dataclasses.dataclass(frozen=True, slots=True)
class Features:
    """The gates the scheduler's plugins and core read (upstream's
    ``feature.Features``, v1.37.2, plus the core's own: async preemption, the
    NominatedNodeName expectation, popping from backoff). Build it with
    :meth:`of`; ``Features()`` alone has every gate off and is for tests that
    name what they turn on."""

    version: KubeVersion = NEWEST
    dra_extended_resource: bool = _gate("DRAExtendedResource")
    dra_prioritized_list: bool = _gate("DRAPrioritizedList")
    dra_admin_access: bool = _gate("DRAAdminAccess")
    dra_consumable_capacity: bool = _gate("DRAConsumableCapacity")
    dra_fractional_capacity_range: bool = _gate("DRAFractionalCapacityRange")
    dra_device_taints: bool = _gate("DRADeviceTaints")
    dra_device_binding_conditions: bool = _gate("DRADeviceBindingConditions")
    dra_partitionable_devices: bool = _gate("DRAPartitionableDevices")
    dra_resource_claim_device_status: bool = _gate("DRAResourceClaimDeviceStatus")
    dra_scheduler_filter_timeout: bool = _gate("DRASchedulerFilterTimeout")
    dynamic_resource_allocation: bool = _gate("DynamicResourceAllocation")
    volume_attributes_class: bool = _gate("VolumeAttributesClass")
    volume_limit_scaling: bool = _gate("VolumeLimitScaling")
    node_inclusion_policy_in_pod_topology_spread: bool = _gate("NodeInclusionPolicyInPodTopologySpread")
    match_label_keys_in_pod_topology_spread: bool = _gate("MatchLabelKeysInPodTopologySpread")
    in_place_pod_vertical_scaling: bool = _gate("InPlacePodVerticalScaling")
    in_place_pod_level_resources_vertical_scaling: bool = _gate("InPlacePodLevelResourcesVerticalScaling")
    async_preemption: bool = _gate("SchedulerAsyncPreemption")
    pod_level_resources: bool = _gate("PodLevelResources")
    storage_capacity_scoring: bool = _gate("StorageCapacityScoring")
    node_declared_features: bool = _gate("NodeDeclaredFeatures")
    generic_workload: bool = _gate("GenericWorkload")
    taint_toleration_comparison_operators: bool = _gate("TaintTolerationComparisonOperators")
    nominated_node_name_for_expectation: bool = _gate("NominatedNodeNameForExpectation")
    pop_from_backoff_q: bool = _gate("SchedulerPopFromBackoffQ")

    @classmethod
    def of(cls, version: KubeVersion = NEWEST, overrides: Mapping[str, bool] | None = None) -> Features:
        """The features of ``version`` with ``overrides`` (see :func:`gates_for`)."""
        gates = gates_for(version, overrides)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            name = f.metadata.get("gate")
            if name is not None:
                values[f.name] = gates.get(name, False)
        return cls(version=version, **values)

    @classmethod
    def newest(cls) -> Features:
        return _newest()

    def enabled(self) -> list[str]:
        """The gate names that are on, for the start-up log."""
        return [f.metadata["gate"] for f in dataclasses.fields(self) if "gate" in f.metadata and getattr(self, f.name)]


@functools.cache
def _newest() -> Features:
    return Features.of(NEWEST)
