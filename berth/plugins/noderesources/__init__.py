"""kube-scheduler's noderesources plugins: NodeResourcesFit and NodeResourcesBalancedAllocation.

Mirrors kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/noderesources``
file by file: :mod:`~berth.plugins.noderesources.args` (the plugins' args and
``validation_pluginargs.go``'s checks), :mod:`~berth.plugins.noderesources.strategies`
(``resource_allocation.go``, ``least_allocated.go``, ``most_allocated.go``,
``requested_to_capacity_ratio.go``), :mod:`~berth.plugins.noderesources.fit`
(``fit.go``) and :mod:`~berth.plugins.noderesources.balanced_allocation`
(``balanced_allocation.go``). This package exports the two plugin classes and
their arguments.
"""

from berth.plugins.noderesources.args import (
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
)
from berth.plugins.noderesources.balanced_allocation import NodeResourcesBalancedAllocation
from berth.plugins.noderesources.fit import NodeResourcesFit

__all__ = [
    "NodeResourcesBalancedAllocation",
    "NodeResourcesBalancedAllocationArgs",
    "NodeResourcesFit",
    "NodeResourcesFitArgs",
    "RequestedToCapacityRatioParam",
    "ResourceSpec",
    "ScoringStrategy",
    "UtilizationShapePoint",
]
