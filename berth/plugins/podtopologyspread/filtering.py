"""PodTopologySpread's filtering: PreFilter, Filter and the PreFilterExtensions.

Mirrors kube-scheduler v1.37.2
``pkg/scheduler/framework/plugins/podtopologyspread/filtering.go``. PreFilter
takes the pod's ``DoNotSchedule`` constraints (none: Skip) and counts, per
constraint and domain, the matching pods on the nodes that count
(:mod:`~berth.plugins.podtopologyspread.common`). Filter: a node without a
constraint's key is UnschedulableAndUnresolvable (``node(s) didn't match pod
topology spread constraints (missing required label)``); otherwise
``count[domain] + selfMatch - globalMin > maxSkew`` is Unschedulable
(``node(s) didn't match pod topology spread constraints``), where globalMin
is 0 while fewer than ``minDomains`` domains exist. PreFilterExtensions
add/remove a pod's contribution (preemption).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from berth.cache.infos import NodeInfo, PodInfo
from berth.cache.table import NodeTable
from berth.framework import interface as fw
from berth.plugins.helpers import DomainCounts, first_untolerated
from berth.plugins.podtopologyspread.common import (
    DO_NOT_SCHEDULE_WHEN,
    Constraint,
    Counting,
    do_not_schedule,
    node_matches_required_affinity,
)

__all__ = ["ERR_REASON_CONSTRAINTS_NOT_MATCH", "ERR_REASON_NODE_LABEL_NOT_MATCH", "Filtering"]

IntArray = npt.NDArray[np.int64]

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"


@dataclasses.dataclass(slots=True)
class _PreFilterState:
    constraints: list[Constraint]
    # Per constraint: matching pods per domain.
    counts: list[DomainCounts]
    self_match: list[int]
    namespace: str


PRE_FILTER_KEY: fw.StateKey[_PreFilterState] = fw.StateKey("PreFilterPodTopologySpread")


class Filtering(Counting):
    """PodTopologySpread's PreFilter, Filter, AddPod and RemovePod (filtering.go's methods)."""

    _label_status: fw.Status
    _skew_status: fw.Status

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        constraints = self._constraints(pod.pod, DO_NOT_SCHEDULE_WHEN)
        if not constraints:
            return fw.PreFilterResult(fw.Status.skip())
        eligible = self._eligible(pod, nodes, constraints)
        counts = [
            DomainCounts.of_rows(nodes, c.key, self._node_counts(pod, nodes, c), elig)
            for c, elig in zip(constraints, eligible, strict=True)
        ]
        self_match = [1 if c.matches(pod.labels) else 0 for c in constraints]
        state.write(PRE_FILTER_KEY, _PreFilterState(constraints, counts, self_match, pod.namespace))
        return fw.PreFilterResult()

    def filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.NodeVerdicts:
        s = state.get(PRE_FILTER_KEY)
        n = len(rows)
        if s is None or not s.constraints:
            return fw.NodeVerdicts.all_ok(n)
        verdict = np.zeros(n, dtype=np.int32)  # 0 ok, 1 missing label, 2 skew
        for c, counts, self_match in zip(s.constraints, s.counts, s.self_match, strict=True):
            col = nodes.label_column(c.key)
            codes = col.codes[rows]
            per_code = counts.per_code(col)
            min_match = 0 if counts.domains() < c.min_domains else counts.minimum()
            missing = codes < 0
            skew = per_code[codes] + self_match - min_match
            undecided = verdict == 0
            verdict[undecided & missing] = 1
            verdict[undecided & ~missing & (skew > c.max_skew)] = 2
        ok = verdict == 0
        if ok.all():
            return fw.NodeVerdicts.all_ok(n)
        return fw.NodeVerdicts(ok, [self._label_status, self._label_status, self._skew_status], verdict)

    # PreFilterExtensions (preemption)

    def _update(self, state: fw.CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo, delta: int) -> None:
        s = state.get(PRE_FILTER_KEY)
        if s is None or other.namespace != s.namespace or node.node is None:
            return
        node_labels = node.node.metadata.labels
        if not all(c.key in node_labels for c in s.constraints):
            return
        for c, counts in zip(s.constraints, s.counts, strict=True):
            if not c.matches(other.labels):
                continue
            if c.honor_affinity and not node_matches_required_affinity(pod.pod, node.node):
                continue
            if c.honor_taints and first_untolerated(
                node.node.spec.taints, pod.pod.spec.tolerations, do_not_schedule, self.comparison_operators
            ):
                continue
            counts.add(node_labels[c.key], delta)

    def add_pod(self, state: fw.CycleState, pod: PodInfo, added: PodInfo, node: NodeInfo) -> None:
        self._update(state, pod, added, node, 1)

    def remove_pod(self, state: fw.CycleState, pod: PodInfo, removed: PodInfo, node: NodeInfo) -> None:
        self._update(state, pod, removed, node, -1)
