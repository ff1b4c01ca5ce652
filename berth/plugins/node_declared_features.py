"""NodeDeclaredFeatures: a pod goes only to nodes that declare every feature
it needs (``status.declaredFeatures``).

Mirrors kube-scheduler v1.37.2
``pkg/scheduler/framework/plugins/nodedeclaredfeatures/nodedeclaredfeatures.go``
over :mod:`berth.cluster.nodedeclaredfeatures` (component-helpers'
inference, with the registry of the release Berth follows). It acts only
with the NodeDeclaredFeatures gate (GA in 1.37, beta and on in 1.36, alpha
and off in 1.35), which also adds it to the default plugins; without the
gate it is inert: PreFilter skips, Filter passes, no events.

- PreFilter infers the features the pod's spec needs; none: Skip.
- Filter: a node whose declared features lack one of them is
  UnschedulableAndUnresolvable ``node(s) didn't match Pod's required
  features``; 1.35 said instead ``node declared features check failed -
  unsatisfied requirements: A, B`` (the missing features, sorted here).
- Events: a node added or updated (upstream's UpdateNodeDeclaredFeature is
  one of the updates Berth does not tell apart), the pod's own update (its
  requirements may change).

Not ported: the InPlacePodVerticalScalingSchedulerPreemption skip for pods
whose resize is deferred (alpha, off in every release Berth follows) and
SignPod (Berth's framework has no pod signatures).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from berth import features
from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import nodedeclaredfeatures as ndf
from berth.framework import interface as fw
from berth.framework.handle import Handle

__all__ = ["ERR_REASON_UNSATISFIED_REQUIREMENTS", "NodeDeclaredFeatures"]

IntArray = npt.NDArray[np.int64]

ERR_REASON_UNSATISFIED_REQUIREMENTS = "node(s) didn't match Pod's required features"


@dataclasses.dataclass(frozen=True, slots=True)
class _State:
    """preFilterState: the features the pod needs."""

    required: frozenset[str]


#: preFilterStateKey.
STATE_KEY: fw.StateKey[_State] = fw.StateKey("PreFilterNodeDeclaredFeatures")


class NodeDeclaredFeatures:
    NAME: ClassVar[str] = "NodeDeclaredFeatures"
    #: Filter judges node by node: run_filter hands it only the rows it still needs.
    FILTER_PER_NODE: ClassVar[bool] = True
    Args: ClassVar[None] = None

    def __init__(self, args: None = None, handle: Handle | None = None) -> None:
        feats = handle.features if handle is not None else features.Features.newest()
        self.enabled = feats.node_declared_features
        self._version = feats.version
        self._registry = ndf.registry(feats.version)
        # nodedeclaredfeatures.go v1.36.3 gave every rejection one reason;
        # v1.35.4 listed the features the node lacks.
        self._list_missing = feats.version < features.KubeVersion(1, 36)
        self._unsatisfied = fw.Status.unresolvable(ERR_REASON_UNSATISFIED_REQUIREMENTS, plugin=self.NAME)

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        if not self.enabled:
            return ()
        return (
            fw.ClusterEvent("Node", fw.ActionType.ADD | fw.ActionType.UPDATE),
            fw.ClusterEvent("Pod", fw.ActionType.UPDATE),
        )

    def required(self, pod: PodInfo) -> frozenset[str]:
        """The features ``pod`` needs on its node (InferForPodScheduling)."""
        return ndf.infer_for_pod_scheduling(pod.pod.spec, self._registry, self._version)

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        if not self.enabled:
            return fw.PreFilterResult(fw.Status.skip())
        required = self.required(pod)
        if not required:
            return fw.PreFilterResult(fw.Status.skip())
        state.write(STATE_KEY, _State(required))
        return fw.PreFilterResult()

    def filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.NodeVerdicts:
        if not self.enabled:
            return fw.NodeVerdicts.all_ok(len(rows))
        s = state.get(STATE_KEY)
        if s is None:
            err = fw.Status.error(f'error reading "{STATE_KEY.name}" from cycle-state: not found', plugin=self.NAME)
            return fw.NodeVerdicts.fail_where(np.ones(len(rows), dtype=bool), err)

        def judge(row: int) -> fw.Status | None:
            info = nodes.infos[row]
            if info is None or info.node is None:
                return None
            missing = ndf.unsatisfied(s.required, info.node.status.declared_features)
            if not missing:
                return None
            if self._list_missing:
                return fw.Status.unresolvable(
                    "node declared features check failed - unsatisfied requirements: " + ", ".join(missing),
                    plugin=self.NAME,
                )
            return self._unsatisfied

        return fw.NodeVerdicts.per_node(judge(row) for row in rows.tolist())
