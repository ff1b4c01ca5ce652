"""PodTopologySpread's scoring: PreScore, Score and NormalizeScore.

Mirrors kube-scheduler v1.37.2
``pkg/scheduler/framework/plugins/podtopologyspread/scoring.go``, for
``ScheduleAnyway`` constraints: each node scores ``sum(count * log(domains +
2) + maxSkew - 1)``, rounded; nodes missing a key are ignored (score 0);
normalised so the fewest matching pods score 100: ``100 * (max + min - s) /
max``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from berth.cache.infos import PodInfo
from berth.cache.table import HOSTNAME_LABEL, NodeTable
from berth.framework import interface as fw
from berth.plugins.helpers import INT32_MAX, DomainCounts
from berth.plugins.podtopologyspread.common import SCHEDULE_ANYWAY, Constraint, Counting

__all__ = ["Scoring"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclasses.dataclass(slots=True)
class _PreScoreState:
    constraints: list[Constraint]
    # Per constraint: matching pods per domain (None for the hostname key).
    counts: list[DomainCounts | None]
    weights: list[float]
    ignored: BoolArray


PRE_SCORE_KEY: fw.StateKey[_PreScoreState] = fw.StateKey("PreScorePodTopologySpread")


class Scoring(Counting):
    """PodTopologySpread's PreScore, Score and NormalizeScore (scoring.go's methods)."""

    def pre_score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.Status:
        constraints = self._constraints(pod.pod, SCHEDULE_ANYWAY)
        if not constraints:
            return fw.Status.skip()
        # Only the pod's own (or List) constraints require every key: with the
        # System defaults a node without a zone still spreads by hostname.
        require_all = bool(pod.pod.spec.topology_spread_constraints) or not self.system_defaulted
        has_all = np.ones(len(rows), dtype=bool)
        if require_all:
            for c in constraints:
                has_all &= nodes.label_column(c.key).codes[rows] >= 0
        ignored = ~has_all
        eligible = self._eligible(pod, nodes, constraints, require_all=require_all)
        counts: list[DomainCounts | None] = []
        weights: list[float] = []
        kept = rows[has_all]
        for c, elig in zip(constraints, eligible, strict=True):
            if c.key == HOSTNAME_LABEL:
                counts.append(None)
                weights.append(float(np.log(len(kept) + 2)))
                continue
            col = nodes.label_column(c.key)
            codes = col.codes[kept]
            # Distinct values among the scored nodes; one without the key adds
            # upstream's "" value (node.Labels[key] of a missing key).
            domains = int((np.unique(codes) >= 0).sum()) + int(bool((codes < 0).any()))
            counts.append(DomainCounts.of_rows(nodes, c.key, self._node_counts(pod, nodes, c), elig))
            weights.append(float(np.log(domains + 2)))
        state.write(PRE_SCORE_KEY, _PreScoreState(constraints, counts, weights, ignored))
        return fw.SUCCESS

    def score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> IntArray:
        s = state.get(PRE_SCORE_KEY)
        if s is None:
            return np.zeros(len(rows), dtype=np.int64)
        total = np.zeros(len(rows), dtype=np.float64)
        for c, counts, weight in zip(s.constraints, s.counts, s.weights, strict=True):
            col = nodes.label_column(c.key)
            codes = col.codes[rows]
            if counts is None:
                cnt = self._node_counts(pod, nodes, c)[rows]
            else:
                cnt = counts.per_code(col)[codes]
            # maxSkew is an int32 >= 1 in Kubernetes (validation); bounded so
            # the score can be neither negative nor beyond int64.
            skew = min(max(c.max_skew - 1, 0), INT32_MAX)
            total += np.where(codes >= 0, cnt * weight + skew, 0.0)
        out: IntArray = np.floor(total + 0.5).astype(np.int64)  # math.Round, non-negative
        out[s.ignored] = 0
        return out

    def normalize_score(self, state: fw.CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        s = state.get(PRE_SCORE_KEY)
        if s is None:
            return scores
        valid = ~s.ignored
        out = np.zeros(len(scores), dtype=np.int64)
        if not valid.any():
            return out
        lo, hi = int(scores[valid].min()), int(scores[valid].max())
        if hi == 0:
            out[valid] = fw.MAX_NODE_SCORE
            return out
        out[valid] = fw.MAX_NODE_SCORE * (hi + lo - scores[valid]) // hi
        return out
