"""NodeName: a pod that names a node (``spec.nodeName``) fits only there.

Mirrors kube-scheduler v1.34 ``pkg/scheduler/framework/plugins/nodename/node_name.go``:
Filter answers UnschedulableAndUnresolvable ``node(s) didn't match the
requested node name`` on every other node; Node/Add is its only event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

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

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        return (fw.ClusterEvent("Node", fw.ActionType.ADD),)

    def filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.int64]
    ) -> fw.NodeVerdicts:
        wanted = pod.pod.spec.node_name
        if not wanted:
            return fw.NodeVerdicts.all_ok(len(rows))
        ok = rows == nodes.index.get(wanted, -1)
        return fw.NodeVerdicts(np.asarray(ok, dtype=bool), [self._status])
