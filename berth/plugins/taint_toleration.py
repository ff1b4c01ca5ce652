"""TaintToleration: a pod goes only where it tolerates the NoSchedule and
NoExecute taints, and prefers nodes with fewer PreferNoSchedule taints it
does not tolerate.

Mirrors kube-scheduler v1.34
``pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go``:

- Filter: the first NoSchedule/NoExecute taint (in the node's order) no
  toleration tolerates fails the node, UnschedulableAndUnresolvable,
  ``node(s) had untolerated taint {KEY: VALUE}``.
- PreScore keeps the tolerations whose effect is empty or PreferNoSchedule;
  Score counts the node's PreferNoSchedule taints those do not tolerate;
  NormalizeScore is DefaultNormalizeScore reversed (fewest taints: 100).

Nodes with identical taints share a taint group in the NodeTable, so each
distinct taint set is judged once per pod, then spread over rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.plugins.helpers import DO_NOT_SCHEDULE, PREFER_NO_SCHEDULE, default_normalize_score, first_untolerated

__all__ = ["PRE_SCORE_KEY", "TaintToleration"]

IntArray = npt.NDArray[np.int64]


@dataclasses.dataclass(frozen=True, slots=True)
class _PreScoreState:
    tolerations: tuple[model.Toleration, ...]


PRE_SCORE_KEY: fw.StateKey[_PreScoreState] = fw.StateKey("PreScoreTaintToleration")


def _do_not_schedule(t: model.Taint) -> bool:
    return t.effect in DO_NOT_SCHEDULE


class TaintToleration:
    NAME: ClassVar[str] = "TaintToleration"
    Args: ClassVar[None] = None

    def __init__(self, args: None = None, handle: Handle | None = None) -> None:
        self.handle = handle

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
        statuses: list[fw.Status] = []
        # Per distinct taint group: -1 tolerated, else index into statuses.
        verdict = np.full(len(nodes.taint_sets), -1, dtype=np.int32)
        by_text: dict[str, int] = {}
        for g in np.unique(groups).tolist():
            taint = first_untolerated(nodes.taint_sets[g], tolerations, _do_not_schedule)
            if taint is None:
                continue
            text = f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
            k = by_text.get(text)
            if k is None:
                k = by_text[text] = len(statuses)
                statuses.append(fw.Status.unresolvable(text, plugin=self.NAME))
            verdict[g] = k
        per_row = verdict[groups]
        ok = per_row < 0
        return fw.NodeVerdicts(ok, statuses, np.maximum(per_row, 0).astype(np.int32))

    def pre_score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.Status:
        prefer = tuple(t for t in pod.pod.spec.tolerations if t.effect in ("", PREFER_NO_SCHEDULE))
        state.write(PRE_SCORE_KEY, _PreScoreState(prefer))
        return fw.SUCCESS

    def score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> IntArray:
        s = state.get(PRE_SCORE_KEY)
        tolerations = s.tolerations if s is not None else ()
        groups = nodes.taint_group[rows]
        counts = np.zeros(len(nodes.taint_sets), dtype=np.int64)
        for g in np.unique(groups).tolist():
            counts[g] = sum(
                1
                for taint in nodes.taint_sets[g]
                if taint.effect == PREFER_NO_SCHEDULE
                and first_untolerated((taint,), tolerations, lambda _t: True) is not None
            )
        out: IntArray = counts[groups]
        return out

    def normalize_score(self, state: fw.CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize_score(scores, fw.MAX_NODE_SCORE, reverse=True)
