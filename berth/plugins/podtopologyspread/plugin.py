"""PodTopologySpread: spread matching pods evenly over topology domains.

Mirrors kube-scheduler v1.34
``pkg/scheduler/framework/plugins/podtopologyspread/plugin.go``: the plugin
class (its filtering half from :mod:`~berth.plugins.podtopologyspread.filtering`,
``filtering.go``; its scoring half from
:mod:`~berth.plugins.podtopologyspread.scoring`, ``scoring.go``; what both
share in :mod:`~berth.plugins.podtopologyspread.common`, ``common.go``), its
arguments (``PodTopologySpreadArgs``) and the cluster events that may make a
pod it rejected schedulable. System default constraints (``defaultingType:
System``) only apply to pods owned by a Service, ReplicaSet,
ReplicationController or StatefulSet, whose selectors Berth does not watch;
so, as documented, they never apply here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import msgspec

from berth.cluster import model
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.plugins.podtopologyspread.filtering import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    Filtering,
)
from berth.plugins.podtopologyspread.scoring import Scoring

__all__ = ["PodTopologySpread", "PodTopologySpreadArgs"]


class PodTopologySpreadArgs(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    default_constraints: list[model.TopologySpreadConstraint] = []
    defaulting_type: str = "System"

    def validate(self) -> None:
        if self.defaulting_type not in ("System", "List"):
            raise ValueError(f'defaultingType: Unsupported value: "{self.defaulting_type}"')
        if self.defaulting_type == "System" and self.default_constraints:
            raise ValueError("defaultConstraints: Invalid value: when .defaultingType is System, must be empty")
        for i, c in enumerate(self.default_constraints):
            if c.max_skew <= 0:
                raise ValueError(
                    f"defaultConstraints[{i}].maxSkew: Invalid value: {c.max_skew}: must be greater than zero"
                )
            if c.label_selector is not None:
                raise ValueError(
                    f"defaultConstraints[{i}].labelSelector: Forbidden: constraint must not define a selector"
                )


class PodTopologySpread(Filtering, Scoring):
    NAME: ClassVar[str] = "PodTopologySpread"
    Args: ClassVar[type[PodTopologySpreadArgs]] = PodTopologySpreadArgs

    def __init__(self, args: PodTopologySpreadArgs | None = None, handle: Handle | None = None) -> None:
        self.args = args or PodTopologySpreadArgs()
        self.handle = handle
        self._label_status = fw.Status.unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH, plugin=self.NAME)
        self._skew_status = fw.Status.unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH, plugin=self.NAME)

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        return (
            fw.ClusterEvent("AssignedPod", fw.ActionType.ALL),
            fw.ClusterEvent(
                "Node",
                fw.ActionType.ADD
                | fw.ActionType.DELETE
                | fw.ActionType.UPDATE_NODE_LABEL
                | fw.ActionType.UPDATE_NODE_TAINT,
            ),
            fw.ClusterEvent("Pod", fw.ActionType.UPDATE_POD_LABEL),
        )
