"""PodTopologySpread: spread matching pods evenly over topology domains.

Mirrors kube-scheduler v1.34 ``pkg/scheduler/framework/plugins/podtopologyspread``
(``filtering.go``, ``scoring.go``, ``common.go``, ``plugin.go``):

- PreFilter takes the pod's ``DoNotSchedule`` constraints (none: Skip), merges
  ``matchLabelKeys`` into each selector, and counts, per constraint and
  domain, the pods in the pod's namespace (not terminating) that the
  selector matches, over the nodes that carry *every* constraint's topology
  key and pass the constraint's inclusion policies (``nodeAffinityPolicy``
  Honor by default: the pod's nodeSelector / required node affinity;
  ``nodeTaintsPolicy`` Ignore by default). An empty selector counts nothing.
- Filter: a node without a constraint's key is UnschedulableAndUnresolvable
  (``node(s) didn't match pod topology spread constraints (missing required
  label)``); otherwise ``count[domain] + selfMatch - globalMin > maxSkew`` is
  Unschedulable (``node(s) didn't match pod topology spread constraints``),
  where globalMin is 0 while fewer than ``minDomains`` domains exist.
- PreFilterExtensions add/remove a pod's contribution (preemption).
- PreScore/Score/NormalizeScore for ``ScheduleAnyway`` constraints: each node
  scores ``sum(count * log(domains + 2) + maxSkew - 1)``, rounded; nodes
  missing a key are ignored (score 0); normalised so the fewest matching pods
  score 100: ``100 * (max + min - s) / max``.

System default constraints (``defaultingType: System``) only apply to pods
owned by a Service, ReplicaSet, ReplicationController or StatefulSet, whose
selectors Berth does not watch; so, as documented, they never apply here.

Counting uses the cache's pod index (:mod:`berth.cache.podindex`): the work is
proportional to the pods a selector matches, not to all pods.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

import msgspec
import numpy as np
import numpy.typing as npt

from berth.cache import podindex
from berth.cache.table import HOSTNAME_LABEL, NodeInfo, NodeTable, PodInfo
from berth.cluster import labels, model
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.plugins.helpers import (
    DO_NOT_SCHEDULE,
    DomainCounts,
    first_untolerated,
    label_selector_mask,
    node_selector_mask,
)

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "PodTopologySpread",
    "PodTopologySpreadArgs",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
DO_NOT_SCHEDULE_WHEN = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR, IGNORE = "Honor", "Ignore"


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


@dataclasses.dataclass(frozen=True, slots=True)
class _Constraint:
    max_skew: int
    key: str
    selector: model.LabelSelector | None
    min_domains: int
    honor_affinity: bool
    honor_taints: bool

    def matches(self, pod_labels: dict[str, str]) -> bool:
        """labels.Selector.Matches (nil selector: nothing; empty: everything)."""
        return labels.match_label_selector(self.selector, pod_labels)

    @property
    def counts_nothing(self) -> bool:
        """countPodsMatchSelector returns 0 for an empty (or nil) selector."""
        s = self.selector
        return s is None or (not s.match_labels and not s.match_expressions)


def _constraints(pod: model.Pod, when: str) -> list[_Constraint]:
    """filterTopologySpreadConstraints: the pod's constraints of one kind, selectors merged."""
    out = []
    for c in pod.spec.topology_spread_constraints:
        if c.when_unsatisfiable != when:
            continue
        sel = c.label_selector
        if sel is not None and c.match_label_keys:
            extra = {k: pod.metadata.labels[k] for k in c.match_label_keys if k in pod.metadata.labels}
            sel = model.LabelSelector(
                match_labels={**sel.match_labels, **extra}, match_expressions=sel.match_expressions
            )
        out.append(
            _Constraint(
                max_skew=c.max_skew,
                key=c.topology_key,
                selector=sel,
                min_domains=(c.min_domains or 1) if when == DO_NOT_SCHEDULE_WHEN else 1,
                honor_affinity=(c.node_affinity_policy or HONOR) == HONOR,
                honor_taints=(c.node_taints_policy or IGNORE) == HONOR,
            )
        )
    return out


@dataclasses.dataclass(slots=True)
class _PreFilterState:
    constraints: list[_Constraint]
    # Per constraint: matching pods per domain.
    counts: list[DomainCounts]
    self_match: list[int]
    namespace: str


@dataclasses.dataclass(slots=True)
class _PreScoreState:
    constraints: list[_Constraint]
    # Per constraint: matching pods per domain (None for the hostname key).
    counts: list[DomainCounts | None]
    weights: list[float]
    ignored: BoolArray


PRE_FILTER_KEY: fw.StateKey[_PreFilterState] = fw.StateKey("PreFilterPodTopologySpread")
PRE_SCORE_KEY: fw.StateKey[_PreScoreState] = fw.StateKey("PreScorePodTopologySpread")


class PodTopologySpread:
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

    # ------------------------------------------------------------ counting

    def _eligible(self, pod: PodInfo, nodes: NodeTable, constraints: Sequence[_Constraint]) -> list[BoolArray]:
        """Per constraint: rows that count (every key present, inclusion policies passed)."""
        size = nodes.size
        base = nodes.alive[:size].copy()
        for c in constraints:
            base &= nodes.label_column(c.key).present()[:size]
        affinity: BoolArray | None = None
        taints_ok: BoolArray | None = None
        out = []
        for c in constraints:
            m = base
            if c.honor_affinity:
                if affinity is None:
                    affinity = _required_affinity_mask(pod.pod, nodes)
                m = m & affinity
            if c.honor_taints:
                if taints_ok is None:
                    taints_ok = _tolerated_mask(pod.pod, nodes)
                m = m & taints_ok
            out.append(m)
        return out

    def _node_counts(self, pod: PodInfo, nodes: NodeTable, c: _Constraint) -> IntArray:
        """countPodsMatchSelector for every row."""
        counts = np.zeros(nodes.size, dtype=np.int64)
        if c.counts_nothing:
            return counts
        assert c.selector is not None
        cache = self.handle.cache if self.handle is not None else None
        fast = podindex.selector_row_counts(cache, nodes, (pod.namespace,), c.selector, exclude_terminating=True)
        if fast is not None:
            return fast
        rows = [
            row
            for _pi, row in podindex.matching_pods(
                cache, nodes, (pod.namespace,), c.selector, keep=lambda p: p.pod.metadata.deletion_timestamp is None
            )
        ]
        if rows:
            counts += np.bincount(np.asarray(rows, dtype=np.int64), minlength=nodes.size)[: nodes.size]
        return counts

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        constraints = _constraints(pod.pod, DO_NOT_SCHEDULE_WHEN)
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
            if c.honor_affinity and not _node_matches_required_affinity(pod.pod, node.node):
                continue
            if c.honor_taints and first_untolerated(node.node.spec.taints, pod.pod.spec.tolerations, _do_not_schedule):
                continue
            counts.add(node_labels[c.key], delta)

    def add_pod(self, state: fw.CycleState, pod: PodInfo, added: PodInfo, node: NodeInfo) -> None:
        self._update(state, pod, added, node, 1)

    def remove_pod(self, state: fw.CycleState, pod: PodInfo, removed: PodInfo, node: NodeInfo) -> None:
        self._update(state, pod, removed, node, -1)

    # ------------------------------------------------------------ score

    def pre_score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.Status:
        constraints = _constraints(pod.pod, SCHEDULE_ANYWAY)
        if not constraints:
            return fw.Status.skip()
        has_all = np.ones(len(rows), dtype=bool)
        for c in constraints:
            has_all &= nodes.label_column(c.key).codes[rows] >= 0
        ignored = ~has_all
        eligible = self._eligible(pod, nodes, constraints)
        counts: list[DomainCounts | None] = []
        weights: list[float] = []
        kept = rows[has_all]
        for c, elig in zip(constraints, eligible, strict=True):
            if c.key == HOSTNAME_LABEL:
                counts.append(None)
                weights.append(float(np.log(len(kept) + 2)))
                continue
            col = nodes.label_column(c.key)
            domains = int((np.unique(col.codes[kept]) >= 0).sum())
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
            total += np.where(codes >= 0, cnt * weight + (c.max_skew - 1), 0.0)
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


def _do_not_schedule(t: model.Taint) -> bool:
    return t.effect in DO_NOT_SCHEDULE


def _required_affinity_mask(pod: model.Pod, nodes: NodeTable) -> BoolArray:
    """nodeaffinity.GetRequiredNodeAffinity(pod).Match over every row."""
    out = np.ones(nodes.size, dtype=bool)
    if pod.spec.node_selector:
        out &= label_selector_mask(nodes, pod.spec.node_selector)
    a = pod.spec.affinity
    req = a.node_affinity.required_during_scheduling_ignored_during_execution if a and a.node_affinity else None
    if req is not None:
        out &= node_selector_mask(nodes, req.node_selector_terms)
    return out


def _node_matches_required_affinity(pod: model.Pod, node: model.Node) -> bool:
    node_labels = node.metadata.labels
    if any(node_labels.get(k) != v for k, v in pod.spec.node_selector.items()):
        return False
    a = pod.spec.affinity
    req = a.node_affinity.required_during_scheduling_ignored_during_execution if a and a.node_affinity else None
    if req is None:
        return True
    return any(labels.node_term_matches(t, node_labels, node.metadata.name) for t in req.node_selector_terms)


def _tolerated_mask(pod: model.Pod, nodes: NodeTable) -> BoolArray:
    groups = nodes.taint_group[: nodes.size]
    ok_group = np.asarray(
        [first_untolerated(ts, pod.spec.tolerations, _do_not_schedule) is None for ts in nodes.taint_sets], dtype=bool
    )
    out: BoolArray = ok_group[groups]
    return out
