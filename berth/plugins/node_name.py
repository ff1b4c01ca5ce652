"""NodeName: a pod that names a node (``spec.nodeName``) fits only there.

Mirrors kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/nodename/node_name.go``:
Filter answers UnschedulableAndUnresolvable ``node(s) didn't match the
requested node name`` on every other node; Node/Add is its only event. From
1.37 PreFilter also narrows the nodes to the named one (PreFilterResult), so
the other nodes are not filtered at all and a FitError counts them as
``node(s) didn't satisfy plugin(s) [NodeName]``; 1.35 and 1.36 have no
PreFilter (added in v1.37.0, no feature gate).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from berth import features
from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.framework import interface as fw
from berth.framework.handle import Handle

__all__ = ["ERR_REASON", "NodeName"]

ERR_REASON = "node(s) didn't match the requested node name"


class NodeName:
    NAME: ClassVar[str] = "NodeName"
    Args: ClassVar[None] = None

    def __init__(self, args: None = None, handle: Handle | None = None) -> None:
        self.handle = handle
        self._status = fw.Status.unresolvable(ERR_REASON, plugin=self.NAME)
        version = handle.features.version if handle is not None else features.NEWEST
        self._narrows = version >= features.KubeVersion(1, 37)

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        return (fw.ClusterEvent("Node", fw.ActionType.ADD),)

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        """node_name.go PreFilter (v1.37.2): only the named node, if any."""
        wanted = pod.pod.spec.node_name
        if wanted and self._narrows:
            return fw.PreFilterResult(node_names=frozenset((wanted,)))
        return fw.PreFilterResult()

    def filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.int64]
    ) -> fw.NodeVerdicts:
        wanted = pod.pod.spec.node_name
        if not wanted:
            return fw.NodeVerdicts.all_ok(len(rows))
        ok = rows == nodes.index.get(wanted, -1)
        return fw.NodeVerdicts(np.asarray(ok, dtype=bool), [self._status])
