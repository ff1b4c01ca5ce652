"""The arguments of the noderesources plugins and their validation.

``NodeResourcesFitArgs`` (with ``ScoringStrategy``, ``ResourceSpec``,
``RequestedToCapacityRatioParam``, ``UtilizationShapePoint``) and
``NodeResourcesBalancedAllocationArgs``, as kube-scheduler v1.37.2's
``apis/config/types_pluginargs.go``, defaulted as ``apis/config/v1/defaults.go``
does (no strategy -> LeastAllocated; no resources -> cpu:1, memory:1; weight
0 -> 1) and validated as ``apis/config/validation/validation_pluginargs.go``'s
``ValidateNodeResourcesFitArgs`` / ``ValidateNodeResourcesBalancedAllocationArgs``
do, errors naming the field path; resource names are checked with
apimachinery's ``IsQualifiedName``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import msgspec

from berth import features
from berth.cluster import resources, validation

__all__ = [
    "LEAST_ALLOCATED",
    "MAX_CUSTOM_PRIORITY_SCORE",
    "MAX_UTILIZATION",
    "MOST_ALLOCATED",
    "REQUESTED_TO_CAPACITY_RATIO",
    "NodeResourcesBalancedAllocationArgs",
    "NodeResourcesFitArgs",
    "RequestedToCapacityRatioParam",
    "ResourceSpec",
    "ScoringStrategy",
    "UtilizationShapePoint",
    "default_resources",
    "raise_aggregate",
    "validate_function_shape",
    "validate_resources",
]

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
_STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)

#: config.MaxCustomPriorityScore: the top of a RequestedToCapacityRatio shape's score axis.
MAX_CUSTOM_PRIORITY_SCORE = 10
#: requested_to_capacity_ratio.go maxUtilization.
MAX_UTILIZATION = 100


# ---------------------------------------------------------------- validation helpers


def _go_value(value: object) -> str:
    """How field.Error prints a bad value: strings quoted, numbers bare."""
    return json.dumps(value) if isinstance(value, str) else str(value)


def _invalid(path: str, value: object, detail: str) -> str:
    return f"{path}: Invalid value: {_go_value(value)}: {detail}"


def raise_aggregate(errors: Sequence[str]) -> None:
    """utilerrors.Aggregate's message: one error as is, several as ``[a, b]``."""
    unique = list(dict.fromkeys(errors))
    if not unique:
        return
    raise ValueError(unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]")


# ---------------------------------------------------------------- arguments


class _Args(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """Base: camelCase keys, unknown keys rejected (KubeSchedulerConfiguration is strict)."""


class ResourceSpec(_Args):
    """config.ResourceSpec: a resource and its weight in a score.

    Weight 0 (or omitted) becomes 1, as ``SetDefaults_NodeResourcesFitArgs``
    and ``SetDefaults_NodeResourcesBalancedAllocationArgs`` do.
    """

    name: str
    weight: int = 0

    def __post_init__(self) -> None:
        if self.weight == 0:
            self.weight = 1


def default_resources() -> list[ResourceSpec]:
    """defaultResourceSpec: cpu and memory, weight 1 each."""
    return [ResourceSpec(name=resources.CPU, weight=1), ResourceSpec(name=resources.MEMORY, weight=1)]


class UtilizationShapePoint(_Args):
    """config.UtilizationShapePoint: utilization 0..100 -> score 0..MaxCustomPriorityScore."""

    utilization: int
    score: int


class RequestedToCapacityRatioParam(_Args):
    shape: list[UtilizationShapePoint] = []


class ScoringStrategy(_Args):
    """config.ScoringStrategy. No resources means cpu:1, memory:1 (v1 defaults)."""

    type: str = ""
    resources: list[ResourceSpec] = []
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None

    def __post_init__(self) -> None:
        if not self.resources:
            self.resources = default_resources()


class NodeResourcesFitArgs(_Args):
    """config.NodeResourcesFitArgs (``pluginConfig`` args of NodeResourcesFit).

    ``scoringStrategy`` defaults to LeastAllocated over cpu and memory.
    :meth:`validate` is ``ValidateNodeResourcesFitArgs``.
    """

    ignored_resources: list[str] = []
    ignored_resource_groups: list[str] = []
    scoring_strategy: ScoringStrategy | None = None

    def __post_init__(self) -> None:
        if self.scoring_strategy is None:
            self.scoring_strategy = ScoringStrategy(type=LEAST_ALLOCATED)

    def validate(self, features: features.Features | None = None) -> None:
        """Raise ValueError naming every invalid field (validation_pluginargs.go
        of ``features``' release, default the newest)."""
        version = features.version if features is not None else _NEWEST
        errs: list[str] = []
        for i, res in enumerate(self.ignored_resources):
            errs.extend(_invalid(f"ignoredResources[{i}]", res, m) for m in validation.is_qualified_name(res))
        for i, group in enumerate(self.ignored_resource_groups):
            path = f"ignoredResourceGroups[{i}]"
            if "/" in group:
                errs.append(_invalid(path, group, "resource group name can't contain '/'"))
            errs.extend(_invalid(path, group, m) for m in validation.is_qualified_name(group))
        strategy = self.scoring_strategy
        if strategy is not None:
            if strategy.type not in _STRATEGIES:
                supported = ", ".join(json.dumps(s) for s in sorted(_STRATEGIES))
                value = _go_value(strategy.type)
                errs.append(f"scoringStrategy.type: Unsupported value: {value}: supported values: {supported}")
            errs.extend(validate_resources(strategy.resources, "scoringStrategy.resources"))
            rtcr = strategy.requested_to_capacity_ratio
            if rtcr is not None and (strategy.type == REQUESTED_TO_CAPACITY_RATIO or version < _V1_36):
                # v1.35.4 reports these under "scoringStrategy.shape" (Berth names
                # the field the user wrote); v1.36.0 and later under this path.
                errs.extend(validate_function_shape(rtcr.shape, "scoringStrategy.requestedToCapacityRatio.shape"))
            elif rtcr is not None:
                # Since v1.36.0 (validation_pluginargs.go): only RequestedToCapacityRatio takes a shape.
                errs.append(
                    "scoringStrategy.requestedToCapacityRatio: Forbidden: "
                    "must be nil when type is not RequestedToCapacityRatio"
                )
            elif strategy.type == REQUESTED_TO_CAPACITY_RATIO:
                # v1.36.0's message; v1.35.4's NewFit dereferences a nil pointer here.
                errs.append(
                    "scoringStrategy.requestedToCapacityRatio: Required value: "
                    "must be specified when type is RequestedToCapacityRatio"
                )
        raise_aggregate(errs)


def validate_resources(specs: Sequence[ResourceSpec], path: str) -> list[str]:
    """validation_pluginargs.go validateResources: weights in (0, 100]."""
    return [
        _invalid(f"{path}[{i}].weight", r.weight, f"resource weight of {r.name} not in valid range (0, 100]")
        for i, r in enumerate(specs)
        if r.weight <= 0 or r.weight > 100
    ]


def validate_function_shape(shape: Sequence[UtilizationShapePoint], path: str) -> list[str]:
    """validation_pluginargs.go validateFunctionShape."""
    if not shape:
        return [f"{path}: Required value: at least one point must be specified"]
    errs: list[str] = []
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            errs.append(
                _invalid(f"{path}[{i}].utilization", shape[i].utilization, "values must be sorted in increasing order")
            )
            break
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= MAX_UTILIZATION:
            errs.append(
                _invalid(f"{path}[{i}].utilization", point.utilization, f"not in valid range [0, {MAX_UTILIZATION}]")
            )
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            errs.append(
                _invalid(f"{path}[{i}].score", point.score, f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]")
            )
    return errs


_NEWEST = features.NEWEST
_V1_36 = features.KubeVersion(1, 36)


class NodeResourcesBalancedAllocationArgs(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """config.NodeResourcesBalancedAllocationArgs; no resources means cpu and memory."""

    resources: list[ResourceSpec] = []

    def __post_init__(self) -> None:
        if not self.resources:
            self.resources = default_resources()

    def validate(self) -> None:
        """ValidateNodeResourcesBalancedAllocationArgs: raise ValueError naming the field."""
        errs: list[str] = []
        seen: set[str] = set()
        for i, res in enumerate(self.resources):
            if res.name in seen:
                errs.append(f"resources[{i}].name: Duplicate value: {json.dumps(res.name)}")
            else:
                seen.add(res.name)
            if res.weight != 1:
                errs.append(f"resources[{i}].weight: Invalid value: {res.weight}: must be 1")
        if errs:
            raise ValueError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
