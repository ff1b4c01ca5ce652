"""What PodTopologySpread's filtering and scoring share: constraints and pod counting.

Mirrors kube-scheduler v1.37.2
``pkg/scheduler/framework/plugins/podtopologyspread/common.go``: a pod's
constraints of one kind (``filterTopologySpreadConstraints``), with
``matchLabelKeys`` merged into each selector — or, for a pod with none, the
default constraints (``buildDefaultConstraints``) selecting what the Services
and controller selecting it select (``helper.DefaultSelector``); the nodes that count for them
(every constraint's topology key present, and the inclusion policies passed:
``nodeAffinityPolicy`` Honor by default — the pod's nodeSelector / required
node affinity; ``nodeTaintsPolicy`` Ignore by default, its tolerations matched
as TaintToleration matches them, TaintTolerationComparisonOperators included); and, per node, the
pods in the pod's namespace (not terminating) a selector matches
(``countPodsMatchSelector``; an empty selector counts nothing), through the
cache's pod index (:mod:`berth.cache.podindex`): the work is proportional to
the pods a selector matches, not to all pods.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from berth.cache import podindex
from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import labels, model
from berth.framework.handle import Handle, WorkloadLister
from berth.plugins.helpers import DO_NOT_SCHEDULE, first_untolerated, label_selector_mask, node_selector_mask

__all__ = [
    "DO_NOT_SCHEDULE_WHEN",
    "HONOR",
    "IGNORE",
    "SCHEDULE_ANYWAY",
    "Constraint",
    "Counting",
    "build_default_constraints",
    "constraints_for",
    "constraints_of",
    "default_selector",
    "do_not_schedule",
    "node_matches_required_affinity",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

DO_NOT_SCHEDULE_WHEN = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR, IGNORE = "Honor", "Ignore"


@dataclasses.dataclass(frozen=True, slots=True)
class Constraint:
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


def constraints_of(pod: model.Pod, when: str) -> list[Constraint]:
    """filterTopologySpreadConstraints: the pod's constraints of one kind, selectors merged."""
    return _filter_constraints(pod.spec.topology_spread_constraints, pod.metadata.labels, when)


def _filter_constraints(
    constraints: Sequence[model.TopologySpreadConstraint], pod_labels: Mapping[str, str], when: str
) -> list[Constraint]:
    out = []
    for c in constraints:
        if c.when_unsatisfiable != when:
            continue
        sel = c.label_selector
        if sel is not None and c.match_label_keys:
            extra = {k: pod_labels[k] for k in c.match_label_keys if k in pod_labels}
            sel = model.LabelSelector(
                match_labels={**sel.match_labels, **extra}, match_expressions=sel.match_expressions
            )
        out.append(
            Constraint(
                max_skew=c.max_skew,
                key=c.topology_key,
                selector=sel,
                min_domains=(c.min_domains or 1) if when == DO_NOT_SCHEDULE_WHEN else 1,
                honor_affinity=(c.node_affinity_policy or HONOR) == HONOR,
                honor_taints=(c.node_taints_policy or IGNORE) == HONOR,
            )
        )
    return out


def build_default_constraints(
    pod: model.Pod,
    defaults: Sequence[model.TopologySpreadConstraint],
    workloads: WorkloadLister | None,
    when: str,
) -> list[Constraint]:
    """common.go buildDefaultConstraints: ``defaults`` of one kind, each
    selecting what :func:`default_selector` deduces; none when it selects nothing."""
    constraints = _filter_constraints(defaults, pod.metadata.labels, when)
    if not constraints or workloads is None:
        return []
    selector = default_selector(pod, workloads)
    if selector is None:
        return []
    return [dataclasses.replace(c, selector=selector) for c in constraints]


def constraints_for(
    pod: model.Pod,
    defaults: Sequence[model.TopologySpreadConstraint],
    workloads: WorkloadLister | None,
    when: str,
) -> list[Constraint]:
    """The pod's own constraints of one kind; the defaults only for a pod that
    has no ``topologySpreadConstraints`` at all (of either kind), as
    calPreFilterState and initPreScoreState choose."""
    if pod.spec.topology_spread_constraints:
        return constraints_of(pod, when)
    return build_default_constraints(pod, defaults, workloads, when)


#: helper/spread.go's rcKind, rsKind, ssKind: the controllers whose selector counts.
_CONTROLLERS = {
    ("v1", "ReplicationController"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "StatefulSet"),
}


def default_selector(pod: model.Pod, workloads: WorkloadLister) -> model.LabelSelector | None:
    """helper.DefaultSelector (``pkg/scheduler/framework/plugins/helper/spread.go``):
    the selectors of the Services in the pod's namespace that select it
    (a Service without a selector selects nothing), merged, and that of the
    ReplicationController, ReplicaSet or StatefulSet controlling it (its
    controller owner reference). None when that selects nothing (``selector.Empty()``)."""
    ns = pod.metadata.namespace
    label_set: dict[str, str] = {}
    for svc in workloads.services(ns):
        # Services, RCs, RSs and SSs that select the pod cannot disagree on a
        # label, so merging is safe (upstream's comment).
        if svc.spec.selector and all(pod.metadata.labels.get(k) == v for k, v in svc.spec.selector.items()):
            label_set.update(svc.spec.selector)
    expressions: list[model.LabelSelectorRequirement] = []
    owner = next((o for o in pod.metadata.owner_references if o.controller), None)  # GetControllerOfNoCopy
    if owner is not None and (owner.api_version, owner.kind) in _CONTROLLERS:
        obj = workloads.get(owner.kind, ns, owner.name)
        if isinstance(obj, model.ReplicationController):
            label_set.update(obj.spec.selector or {})
        elif isinstance(obj, model.ReplicaSet | model.StatefulSet) and obj.spec.selector is not None:
            # selector.Add(LabelSelectorAsSelector(spec.selector).Requirements()...)
            sel = obj.spec.selector
            expressions += [
                model.LabelSelectorRequirement(key=k, operator="In", values=[v]) for k, v in sel.match_labels.items()
            ]
            expressions += sel.match_expressions
    if not label_set and not expressions:
        return None
    return model.LabelSelector(match_labels=label_set, match_expressions=expressions)


class Counting:
    """Which nodes count for a pod's constraints and how many matching pods each has
    (a base of PodTopologySpread's filtering and scoring halves)."""

    handle: Handle | None
    default_constraints: Sequence[model.TopologySpreadConstraint]
    system_defaulted: bool
    #: TaintTolerationComparisonOperators: ``Lt`` / ``Gt`` tolerations in nodeTaintsPolicy Honor.
    comparison_operators: bool

    def _constraints(self, pod: model.Pod, when: str) -> list[Constraint]:
        workloads = self.handle.workloads if self.handle is not None else None
        return constraints_for(pod, self.default_constraints, workloads, when)

    def _eligible(
        self, pod: PodInfo, nodes: NodeTable, constraints: Sequence[Constraint], *, require_all: bool = True
    ) -> list[BoolArray]:
        """Per constraint: rows that count (every key present — or, unless
        ``require_all``, this constraint's key — and inclusion policies passed)."""
        size = nodes.size
        base = nodes.alive[:size].copy()
        if require_all:
            for c in constraints:
                base &= nodes.label_column(c.key).present()[:size]
        affinity: BoolArray | None = None
        taints_ok: BoolArray | None = None
        out = []
        for c in constraints:
            m = base if require_all else base & nodes.label_column(c.key).present()[:size]
            if c.honor_affinity:
                if affinity is None:
                    affinity = _required_affinity_mask(pod.pod, nodes)
                m = m & affinity
            if c.honor_taints:
                if taints_ok is None:
                    taints_ok = _tolerated_mask(pod.pod, nodes, self.comparison_operators)
                m = m & taints_ok
            out.append(m)
        return out

    def _node_counts(self, pod: PodInfo, nodes: NodeTable, c: Constraint) -> IntArray:
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


def do_not_schedule(t: model.Taint) -> bool:
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


def node_matches_required_affinity(pod: model.Pod, node: model.Node) -> bool:
    node_labels = node.metadata.labels
    if any(node_labels.get(k) != v for k, v in pod.spec.node_selector.items()):
        return False
    a = pod.spec.affinity
    req = a.node_affinity.required_during_scheduling_ignored_during_execution if a and a.node_affinity else None
    if req is None:
        return True
    return any(labels.node_term_matches(t, node_labels, node.metadata.name) for t in req.node_selector_terms)


def _tolerated_mask(pod: model.Pod, nodes: NodeTable, comparison_operators: bool) -> BoolArray:
    groups = nodes.taint_group[: nodes.size]
    tolerations = pod.spec.tolerations
    ok_group = np.asarray(
        [first_untolerated(ts, tolerations, do_not_schedule, comparison_operators) is None for ts in nodes.taint_sets],
        dtype=bool,
    )
    out: BoolArray = ok_group[groups]
    return out
