"""InterPodAffinity: required and preferred pod (anti-)affinity.

Mirrors kube-scheduler v1.34 ``pkg/scheduler/framework/plugins/interpodaffinity``
(``filtering.go``, ``scoring.go``, ``plugin.go``) and ``framework.AffinityTerm``:

- A term matches a pod when the pod's namespace is among the term's
  (``namespaces``; none and no ``namespaceSelector`` means the term owner's
  own) or its namespace labels match ``namespaceSelector`` (Berth knows only
  the ``kubernetes.io/metadata.name`` label every namespace carries), and
  its labels match the term's selector (``matchLabelKeys`` /
  ``mismatchLabelKeys`` merged in as In / NotIn of the owner's values).
- PreFilter counts per (topologyKey, value): existing pods' required
  anti-affinity terms the incoming pod matches; existing pods that match all
  of the incoming pod's required affinity terms; and those matching each of
  its required anti-affinity terms. Nothing to count: Skip.
- Filter, in this order: ``node(s) didn't match pod affinity rules``
  (UnschedulableAndUnresolvable; a node lacking a term's key fails; the first
  pod of a group that matches its own terms passes when no pod anywhere
  matches), ``node(s) didn't match pod anti-affinity rules`` and
  ``node(s) didn't satisfy existing pods anti-affinity rules`` (both
  Unschedulable: preemption can remove the offending pods).
- PreFilterExtensions add/remove a pod's contribution (preemption).
- PreScore/Score: per (topologyKey, value), +weight for each existing pod
  matching a preferred affinity term of the incoming pod, -weight for
  anti-affinity; and the existing pods' own terms the incoming pod matches
  (required affinity x ``hardPodAffinityWeight``, preferred ± weight) unless
  ``ignorePreferredTermsOfExistingPods``. NormalizeScore: min-max to 0..100.

Pods are found through the cache's pod index (:mod:`berth.cache.podindex`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, ClassVar

import msgspec
import numpy as np
import numpy.typing as npt

from berth.cache import podindex
from berth.cache.table import NodeInfo, NodeTable, PodInfo
from berth.cluster import labels, model
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.plugins.helpers import DomainCounts

if TYPE_CHECKING:
    from berth.cache.cache import Cache

__all__ = [
    "ERR_REASON_AFFINITY",
    "ERR_REASON_ANTI_AFFINITY",
    "ERR_REASON_EXISTING_ANTI_AFFINITY",
    "InterPodAffinity",
    "InterPodAffinityArgs",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

ERR_REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"

Pair = tuple[str, str]


class InterPodAffinityArgs(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False

    def validate(self) -> None:
        if not 0 <= self.hard_pod_affinity_weight <= 100:
            raise ValueError(
                f"hardPodAffinityWeight: Invalid value: {self.hard_pod_affinity_weight}: not in valid range [0, 100]"
            )


@dataclasses.dataclass(frozen=True, slots=True)
class Term:
    """framework.AffinityTerm: a term resolved against the pod that owns it."""

    namespaces: frozenset[str]
    namespace_selector: model.LabelSelector | None
    selector: model.LabelSelector | None
    topology_key: str
    weight: int = 0
    #: Equal for terms that match the same pods the same way (weight aside).
    sig: bytes = b""

    def matches(self, pod: PodInfo) -> bool:
        ns = pod.namespace
        in_ns = ns in self.namespaces or (
            self.namespace_selector is not None
            and labels.match_label_selector(self.namespace_selector, {podindex.NAMESPACE_NAME_LABEL: ns})
        )
        return in_ns and labels.match_label_selector(self.selector, pod.labels)

    def candidate_namespaces(self) -> list[str] | None:
        """Namespaces to search, None for all (a namespaceSelector is set)."""
        return None if self.namespace_selector is not None else sorted(self.namespaces)


def _term(owner: model.Pod, t: model.PodAffinityTerm, weight: int = 0) -> Term:
    sel = t.label_selector
    if sel is not None and (t.match_label_keys or t.mismatch_label_keys):
        own = owner.metadata.labels
        exprs = list(sel.match_expressions)
        exprs += [
            model.LabelSelectorRequirement(key=k, operator="In", values=[own[k]])
            for k in t.match_label_keys
            if k in own
        ]
        exprs += [
            model.LabelSelectorRequirement(key=k, operator="NotIn", values=[own[k]])
            for k in t.mismatch_label_keys
            if k in own
        ]
        sel = model.LabelSelector(match_labels=dict(sel.match_labels), match_expressions=exprs)
    namespaces = frozenset(t.namespaces)
    if not namespaces and t.namespace_selector is None:
        namespaces = frozenset((owner.metadata.namespace or "default",))
    sig = msgspec.json.encode((sorted(namespaces), t.namespace_selector, sel, t.topology_key))
    return Term(namespaces, t.namespace_selector, sel, t.topology_key, weight, sig)


@dataclasses.dataclass(frozen=True, slots=True)
class Terms:
    required_affinity: tuple[Term, ...]
    required_anti_affinity: tuple[Term, ...]
    preferred_affinity: tuple[Term, ...]
    preferred_anti_affinity: tuple[Term, ...]

    @property
    def has_preferred(self) -> bool:
        return bool(self.preferred_affinity or self.preferred_anti_affinity)


_NO_TERMS = Terms((), (), (), ())
_terms_cache: dict[int, tuple[model.Pod, Terms]] = {}


def terms_of(pod: model.Pod) -> Terms:
    """The pod's terms, resolved once per pod object (PodInfo does this in kube-scheduler)."""
    a = pod.spec.affinity
    if a is None or (a.pod_affinity is None and a.pod_anti_affinity is None):
        return _NO_TERMS
    hit = _terms_cache.get(id(pod))
    if hit is not None and hit[0] is pod:
        return hit[1]
    pa, paa = a.pod_affinity, a.pod_anti_affinity
    out = Terms(
        tuple(_term(pod, t) for t in pa.required_during_scheduling_ignored_during_execution) if pa else (),
        tuple(_term(pod, t) for t in paa.required_during_scheduling_ignored_during_execution) if paa else (),
        tuple(
            _term(pod, w.pod_affinity_term, w.weight) for w in pa.preferred_during_scheduling_ignored_during_execution
        )
        if pa
        else (),
        tuple(
            _term(pod, w.pod_affinity_term, w.weight) for w in paa.preferred_during_scheduling_ignored_during_execution
        )
        if paa
        else (),
    )
    if len(_terms_cache) > 65536:
        _terms_cache.clear()
    _terms_cache[id(pod)] = (pod, out)
    return out


@dataclasses.dataclass(slots=True)
class _AntiGroup:
    term: Term
    rows: dict[int, int]  # row -> pods with this term there


class _AntiTermIndex:
    """Existing pods' required anti-affinity terms, grouped by what they match.

    Pods of one workload share their terms, so PreFilter judges each distinct
    term once against the incoming pod and counts its pods per domain with
    numpy, instead of walking every such pod (kube-scheduler's
    ``PodsWithRequiredAntiAffinity`` walk). Follows the cache's live table.
    """

    def __init__(self, cache: Cache) -> None:
        self.table = cache.table
        self.groups: dict[bytes, _AntiGroup] = {}
        cache.subscribe(self._on_pod)

    def _on_pod(self, pi: PodInfo, node: str, sign: int) -> None:
        terms = terms_of(pi.pod).required_anti_affinity
        if not terms:
            return
        row = self.table.index[node]
        for t in terms:
            g = self.groups.get(t.sig)
            if g is None:
                if sign < 0:
                    continue
                g = self.groups[t.sig] = _AntiGroup(t, {})
            left = g.rows.get(row, 0) + sign
            if left > 0:
                g.rows[row] = left
            else:
                g.rows.pop(row, None)
                if not g.rows:
                    del self.groups[t.sig]


@dataclasses.dataclass(slots=True)
class _PreFilterState:
    terms: Terms
    # Per topology key: pods per domain.
    existing_anti: dict[str, DomainCounts]
    affinity: dict[str, DomainCounts]
    anti: dict[str, DomainCounts]
    self_match: bool


PRE_FILTER_KEY: fw.StateKey[_PreFilterState] = fw.StateKey("PreFilterInterPodAffinity")


@dataclasses.dataclass(slots=True)
class _PreScoreState:
    scores: dict[str, dict[str, int]]


PRE_SCORE_KEY: fw.StateKey[_PreScoreState] = fw.StateKey("PreScoreInterPodAffinity")


def _node_value(nodes: NodeTable, row: int, key: str) -> str | None:
    info = nodes.infos[row]
    if info is None or info.node is None:
        return None
    return info.node.metadata.labels.get(key)


class InterPodAffinity:
    NAME: ClassVar[str] = "InterPodAffinity"
    Args: ClassVar[type[InterPodAffinityArgs]] = InterPodAffinityArgs

    def __init__(self, args: InterPodAffinityArgs | None = None, handle: Handle | None = None) -> None:
        self.args = args or InterPodAffinityArgs()
        self.handle = handle
        self._anti_index: _AntiTermIndex | None = None
        self._statuses = [
            fw.Status.unresolvable(ERR_REASON_AFFINITY, plugin=self.NAME),
            fw.Status.unschedulable(ERR_REASON_ANTI_AFFINITY, plugin=self.NAME),
            fw.Status.unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY, plugin=self.NAME),
        ]

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        return (
            fw.ClusterEvent("AssignedPod", fw.ActionType.ALL),
            fw.ClusterEvent("Node", fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_LABEL),
        )

    def _pods_with(self, nodes: NodeTable, which: str) -> Iterable[tuple[PodInfo, int]]:
        """Pods whose terms count in scoring / with required anti-affinity, through the index when it applies."""
        idx = podindex.index_of(self.handle.cache if self.handle is not None else None)
        if idx is not None and idx.shares_rows(nodes):
            uids = idx.with_scoring_terms if which == "scoring" else idx.with_required_anti_affinity
            for uid in uids:
                e = idx.entries[uid]
                yield e.info, e.row
            return
        test = podindex.has_scoring_terms if which == "scoring" else podindex.has_required_anti_affinity
        for pi, row in podindex.scan(nodes):
            if test(pi.pod):
                yield pi, row

    def _anti_terms(self, nodes: NodeTable) -> _AntiTermIndex | None:
        """The anti-affinity term index, when ``nodes`` shares the live cache's rows."""
        cache = self.handle.cache if self.handle is not None else None
        if cache is None or nodes.row_space is not cache.table:
            return None
        if self._anti_index is None:
            self._anti_index = _AntiTermIndex(cache)
        return self._anti_index

    def _matching(self, nodes: NodeTable, term: Term) -> Iterable[tuple[PodInfo, int]]:
        if term.selector is None:
            return ()
        cache = self.handle.cache if self.handle is not None else None
        return podindex.matching_pods(
            cache,
            nodes,
            term.candidate_namespaces(),
            term.selector,
            keep=term.matches if term.namespace_selector else None,
        )

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        terms = terms_of(pod.pod)
        size = nodes.size
        per_row: dict[str, dict[str, IntArray]] = {"existing": {}, "affinity": {}, "anti": {}}

        def rows_of(kind: str, key: str) -> IntArray:
            arr = per_row[kind].get(key)
            if arr is None:
                arr = per_row[kind][key] = np.zeros(size, dtype=np.int64)
            return arr

        index = self._anti_terms(nodes)
        if index is not None:
            for g in index.groups.values():
                if g.term.matches(pod):
                    rows = np.fromiter(g.rows.keys(), dtype=np.int64, count=len(g.rows))
                    weights = np.fromiter(g.rows.values(), dtype=np.int64, count=len(g.rows))
                    np.add.at(rows_of("existing", g.term.topology_key), rows, weights)
        else:
            for other, row in self._pods_with(nodes, "anti"):
                for t in terms_of(other.pod).required_anti_affinity:
                    if t.matches(pod):
                        rows_of("existing", t.topology_key)[row] += 1
        if terms.required_affinity:
            matched = self._matching_rows(nodes, terms.required_affinity, size)
            for t in terms.required_affinity:
                rows_of("affinity", t.topology_key)[:] += matched
        for t in terms.required_anti_affinity:
            rows_of("anti", t.topology_key)[:] += self._matching_rows(nodes, (t,), size)
        if not per_row["existing"] and not terms.required_affinity and not terms.required_anti_affinity:
            return fw.PreFilterResult(fw.Status.skip())
        counts = {
            kind: {key: DomainCounts.of_rows(nodes, key, arr) for key, arr in by_key.items()}
            for kind, by_key in per_row.items()
        }
        self_match = all(t.matches(pod) for t in terms.required_affinity)
        state.write(
            PRE_FILTER_KEY,
            _PreFilterState(terms, counts["existing"], counts["affinity"], counts["anti"], self_match),
        )
        return fw.PreFilterResult()

    def _matching_rows(self, nodes: NodeTable, terms: Sequence[Term], size: int) -> IntArray:
        """Per row: pods matching every term (counted by the pod index when one simple term)."""
        first = terms[0]
        if first.selector is None:
            return np.zeros(size, dtype=np.int64)
        if len(terms) == 1 and first.namespace_selector is None:
            cache = self.handle.cache if self.handle is not None else None
            fast = podindex.selector_row_counts(cache, nodes, first.candidate_namespaces(), first.selector)
            if fast is not None:
                return fast
        rows = [row for other, row in self._matching(nodes, first) if all(t.matches(other) for t in terms[1:])]
        return np.bincount(np.asarray(rows, dtype=np.int64), minlength=size)[:size].astype(np.int64)

    def filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.NodeVerdicts:
        s = state.get(PRE_FILTER_KEY)
        n = len(rows)
        if s is None:
            return fw.NodeVerdicts.all_ok(n)
        verdict = np.full(n, -1, dtype=np.int32)  # -1 ok, else index into statuses

        def fail(mask: BoolArray, k: int) -> None:
            verdict[(verdict < 0) & mask] = k

        def positive(counts: DomainCounts | None, key: str) -> tuple[BoolArray, BoolArray]:
            """Per row: whether the row has ``key``, and whether its domain has pods."""
            col = nodes.label_column(key)
            codes = col.codes[rows]
            if counts is None:
                return codes >= 0, np.zeros(n, dtype=bool)
            return codes >= 0, counts.per_code(col)[codes] > 0

        # satisfyPodAffinity
        if s.terms.required_affinity:
            missing = np.zeros(n, dtype=bool)
            no_pods = np.zeros(n, dtype=bool)
            for t in s.terms.required_affinity:
                has_key, has_pods = positive(s.affinity.get(t.topology_key), t.topology_key)
                missing |= ~has_key
                no_pods |= ~has_pods
            first_of_group = s.self_match and not any(c.any_positive() for c in s.affinity.values())
            fail(missing | (no_pods & (not first_of_group)), 0)
        # satisfyPodAntiAffinity
        for t in s.terms.required_anti_affinity:
            fail(positive(s.anti.get(t.topology_key), t.topology_key)[1], 1)
        # satisfyExistingPodsAntiAffinity
        for key, counts in s.existing_anti.items():
            fail(positive(counts, key)[1], 2)
        ok = verdict < 0
        if ok.all():
            return fw.NodeVerdicts.all_ok(n)
        return fw.NodeVerdicts(ok, list(self._statuses), np.maximum(verdict, 0))

    # PreFilterExtensions (preemption): updateWithPod.

    def _update(self, state: fw.CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo, delta: int) -> None:
        s = state.get(PRE_FILTER_KEY)
        if s is None or node.node is None:
            return
        node_labels = node.node.metadata.labels

        def bump(counts: dict[str, DomainCounts], key: str) -> None:
            if key in node_labels:
                counts.setdefault(key, DomainCounts.empty()).add(node_labels[key], delta)

        for t in terms_of(other.pod).required_anti_affinity:
            if t.matches(pod):
                bump(s.existing_anti, t.topology_key)
        if s.terms.required_affinity and all(t.matches(other) for t in s.terms.required_affinity):
            for t in s.terms.required_affinity:
                bump(s.affinity, t.topology_key)
        for t in s.terms.required_anti_affinity:
            if t.matches(other):
                bump(s.anti, t.topology_key)

    def add_pod(self, state: fw.CycleState, pod: PodInfo, added: PodInfo, node: NodeInfo) -> None:
        self._update(state, pod, added, node, 1)

    def remove_pod(self, state: fw.CycleState, pod: PodInfo, removed: PodInfo, node: NodeInfo) -> None:
        self._update(state, pod, removed, node, -1)

    # ------------------------------------------------------------ score

    def pre_score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.Status:
        terms = terms_of(pod.pod)
        has_constraints = terms.has_preferred
        if self.args.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return fw.Status.skip()
        scores: dict[str, dict[str, int]] = {}

        def add(key: str, row: int, amount: int) -> None:
            v = _node_value(nodes, row, key)
            if v is not None:
                per = scores.setdefault(key, {})
                per[v] = per.get(v, 0) + amount

        # The incoming pod's preferred terms against existing pods.
        for sign, group in ((1, terms.preferred_affinity), (-1, terms.preferred_anti_affinity)):
            for t in group:
                for _other, row in self._matching(nodes, t):
                    add(t.topology_key, row, sign * t.weight)
        # Existing pods' terms against the incoming pod.
        if not self.args.ignore_preferred_terms_of_existing_pods:
            hard = self.args.hard_pod_affinity_weight
            for other, row in self._pods_with(nodes, "scoring"):
                ot = terms_of(other.pod)
                if hard > 0:
                    for t in ot.required_affinity:
                        if t.matches(pod):
                            add(t.topology_key, row, hard)
                for t in ot.preferred_affinity:
                    if t.matches(pod):
                        add(t.topology_key, row, t.weight)
                for t in ot.preferred_anti_affinity:
                    if t.matches(pod):
                        add(t.topology_key, row, -t.weight)
        if not scores:
            return fw.Status.skip()
        state.write(PRE_SCORE_KEY, _PreScoreState(scores))
        return fw.SUCCESS

    def score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> IntArray:
        s = state.get(PRE_SCORE_KEY)
        out = np.zeros(len(rows), dtype=np.int64)
        if s is None:
            return out
        for key, per_value in s.scores.items():
            col = nodes.label_column(key)
            per_code = np.asarray([per_value.get(v, 0) for v in col.values] + [0], dtype=np.int64)
            out += per_code[col.codes[rows]]
        return out

    def normalize_score(self, state: fw.CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        s = state.get(PRE_SCORE_KEY)
        if s is None or not s.scores or len(scores) == 0:
            return scores
        lo, hi = int(scores.min()), int(scores.max())
        if hi - lo <= 0:
            return np.zeros(len(scores), dtype=np.int64)
        # int64(float64(MaxNodeScore) * (float64(s - min) / float64(max - min))): truncation.
        out: IntArray = (fw.MAX_NODE_SCORE * ((scores - lo) / (hi - lo))).astype(np.int64)
        return out
