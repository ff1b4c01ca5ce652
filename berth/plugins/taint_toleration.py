"""TaintToleration: a pod goes only where it tolerates the NoSchedule and
NoExecute taints, and prefers nodes with fewer PreferNoSchedule taints it
does not tolerate.

Mirrors kube-scheduler v1.37.2
``pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go``:

- Filter: a NoSchedule/NoExecute taint no toleration tolerates fails the
  node, UnschedulableAndUnresolvable, ``node(s) had untolerated taint(s)``
  (:data:`ERR_REASON_NOT_MATCH`) — byte for byte what v1.37.2's (as v1.34.4's) Filter
  returns (``fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) had
  untolerated taint(s)")``; the taint itself only goes to its V(4) log
  line, "node had untolerated taints" with ``untoleratedTaint``). Older
  releases wrote ``node(s) had untolerated taint {KEY: VALUE}``; the
  FailedScheduling histogram now counts all such nodes under one reason.
- PreScore keeps the tolerations whose effect is empty or PreferNoSchedule;
  Score counts the node's PreferNoSchedule taints those do not tolerate;
  NormalizeScore is DefaultNormalizeScore reversed (fewest taints: 100).
- Both honour ``Lt`` / ``Gt`` tolerations (a numeric comparison with the
  taint's value) when TaintTolerationComparisonOperators is on (alpha, off by
  default in 1.35-1.37; :func:`~berth.plugins.helpers.tolerates`).

Not followed: v1.37's PreFilter that skips pods whose resize is deferred
(InPlacePodVerticalScalingSchedulerPreemption, alpha and off; Berth does not
schedule a bound pod again).

Nodes with identical taints share a taint group in the NodeTable, so each
distinct taint set is judged once per pod, then spread over rows.
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
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.plugins.helpers import (
    DO_NOT_SCHEDULE,
    PREFER_NO_SCHEDULE,
    default_normalize_score,
    first_untolerated,
    tolerates,
)

__all__ = ["ERR_REASON_NOT_MATCH", "PRE_SCORE_KEY", "TaintToleration"]

IntArray = npt.NDArray[np.int64]


@dataclasses.dataclass(frozen=True, slots=True)
class _PreScoreState:
    tolerations: tuple[model.Toleration, ...]


PRE_SCORE_KEY: fw.StateKey[_PreScoreState] = fw.StateKey("PreScoreTaintToleration")
#: The all-zero counts Score last returned in this cycle, which NormalizeScore then need not scan.
_NONE_COUNTED: fw.StateKey[IntArray] = fw.StateKey("TaintTolerationNoneCounted")

#: Filter's reason (taint_toleration.go, v1.37.2: the literal in Filter's NewStatus).
ERR_REASON_NOT_MATCH = "node(s) had untolerated taint(s)"


def _do_not_schedule(t: model.Taint) -> bool:
    return t.effect in DO_NOT_SCHEDULE


class TaintToleration:
    NAME: ClassVar[str] = "TaintToleration"
    Args: ClassVar[None] = None

    def __init__(self, args: None = None, handle: Handle | None = None) -> None:
        self.handle = handle
        feats = handle.features if handle is not None else features.Features.newest()
        self.comparison_operators = feats.taint_toleration_comparison_operators

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        return (
            fw.ClusterEvent("Node", fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_TAINT),
            fw.ClusterEvent("Pod", fw.ActionType.UPDATE_POD_TOLERATION),
        )

    def filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.NodeVerdicts:
        groups = nodes.taint_group[rows]
        if not groups.any():  # group 0: no taints at all
            return fw.NodeVerdicts.all_ok(len(rows))
        tolerations = pod.pod.spec.tolerations
        # Per distinct taint group: does some NoSchedule/NoExecute taint go untolerated?
        untolerated = np.zeros(len(nodes.taint_sets), dtype=bool)
        for g in np.unique(groups).tolist():
            untolerated[g] = (
                first_untolerated(nodes.taint_sets[g], tolerations, _do_not_schedule, self.comparison_operators)
                is not None
            )
        bad = untolerated[groups]
        if not bad.any():
            return fw.NodeVerdicts.all_ok(len(rows))
        return fw.NodeVerdicts.fail_where(bad, fw.Status.unresolvable(ERR_REASON_NOT_MATCH, plugin=self.NAME))

    def pre_score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.Status:
        prefer = tuple(t for t in pod.pod.spec.tolerations if t.effect in ("", PREFER_NO_SCHEDULE))
        state.write(PRE_SCORE_KEY, _PreScoreState(prefer))
        return fw.SUCCESS

    def score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> IntArray:
        if len(nodes.taint_sets) == 1:
            # Only group 0 (no taints) was ever seen: no node has a taint to count.
            return self._none_counted(state, len(rows))
        s = state.get(PRE_SCORE_KEY)
        tolerations = s.tolerations if s is not None else ()
        groups = nodes.taint_group[rows]
        if not groups.any():  # group 0: no taints at all, nothing to count
            return self._none_counted(state, len(rows))
        counts = np.zeros(len(nodes.taint_sets), dtype=np.int64)
        for g in np.unique(groups).tolist():
            counts[g] = sum(
                1
                for taint in nodes.taint_sets[g]
                if taint.effect == PREFER_NO_SCHEDULE
                and not any(tolerates(t, taint, self.comparison_operators) for t in tolerations)
            )
        out: IntArray = counts[groups]
        return out

    def _none_counted(self, state: fw.CycleState, n: int) -> IntArray:
        """All-zero counts, remembered (by identity) for :meth:`normalize_score`."""
        zeros = np.zeros(n, dtype=np.int64)
        state.write(_NONE_COUNTED, zeros)
        return zeros

    def normalize_score(self, state: fw.CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        if scores is state.get(_NONE_COUNTED):
            # DefaultNormalizeScore(reverse) of all zeros: every node MaxNodeScore.
            return np.full(len(scores), fw.MAX_NODE_SCORE, dtype=np.int64)
        return default_normalize_score(scores, fw.MAX_NODE_SCORE, reverse=True)
