"""NodeUnschedulable: cordoned nodes (``spec.unschedulable``) take no pods,
unless the pod tolerates ``node.kubernetes.io/unschedulable:NoSchedule``.

Mirrors kube-scheduler v1.37.2
``pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go``:
UnschedulableAndUnresolvable ``node(s) were unschedulable``; re-queued by a
node being added or uncordoned (Node/Add, Node/UpdateNodeTaint — the API
server mirrors ``unschedulable`` as that taint) and by the pod gaining a
toleration. The toleration is matched as TaintToleration matches it
(TaintTolerationComparisonOperators included). Not followed: v1.37's PreFilter
skipping pods whose resize is deferred
(InPlacePodVerticalScalingSchedulerPreemption, alpha and off).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from berth import features
from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.plugins.helpers import tolerates

__all__ = ["ERR_REASON", "NodeUnschedulable"]

ERR_REASON = "node(s) were unschedulable"
#: v1.TaintNodeUnschedulable with effect NoSchedule.
UNSCHEDULABLE_TAINT = model.Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


class NodeUnschedulable:
    NAME: ClassVar[str] = "NodeUnschedulable"
    Args: ClassVar[None] = None

    def __init__(self, args: None = None, handle: Handle | None = None) -> None:
        self.handle = handle
        self._status = fw.Status.unresolvable(ERR_REASON, plugin=self.NAME)
        feats = handle.features if handle is not None else features.Features.newest()
        self.comparison_operators = feats.taint_toleration_comparison_operators

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        return (
            fw.ClusterEvent("Node", fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_TAINT),
            fw.ClusterEvent("Pod", fw.ActionType.UPDATE_POD_TOLERATION),
        )

    def filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.int64]
    ) -> fw.NodeVerdicts:
        cordoned = nodes.unschedulable[rows]
        if not cordoned.any() or any(
            tolerates(t, UNSCHEDULABLE_TAINT, self.comparison_operators) for t in pod.pod.spec.tolerations
        ):
            return fw.NodeVerdicts.all_ok(len(rows))
        return fw.NodeVerdicts.fail_where(np.asarray(cordoned, dtype=bool), self._status)
