"""InterPodAffinity's filtering: PreFilter, Filter and the PreFilterExtensions.

Mirrors kube-scheduler v1.37.2
``pkg/scheduler/framework/plugins/interpodaffinity/filtering.go``. PreFilter
counts per (topologyKey, value): existing pods' required anti-affinity terms
the incoming pod matches; existing pods that match all of the incoming pod's
required affinity terms; and those matching each of its required
anti-affinity terms. Nothing to count: Skip. Filter, in this order:
``node(s) didn't match pod affinity rules`` (UnschedulableAndUnresolvable; a
node lacking a term's key fails; the first pod of a group that matches its
own terms passes when no pod anywhere matches), ``node(s) didn't match pod
anti-affinity rules`` and ``node(s) didn't satisfy existing pods
anti-affinity rules`` (both Unschedulable: preemption can remove the
offending pods). PreFilterExtensions add/remove a pod's contribution
(preemption). The incoming pod's terms are merged with the namespaces their
``namespaceSelector`` selects, and existing pods' terms judged with the
labels of the incoming pod's namespace (see
:mod:`~berth.plugins.interpodaffinity.terms`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from berth.cache import podindex
from berth.cache.infos import NodeInfo, PodInfo
from berth.cache.table import NodeTable
from berth.framework import interface as fw
from berth.plugins.helpers import DomainCounts
from berth.plugins.interpodaffinity.terms import NO_LABELS, AffinityPods, Term, Terms, terms_of

if TYPE_CHECKING:
    from berth.cache.cache import Cache

__all__ = [
    "ERR_REASON_AFFINITY",
    "ERR_REASON_ANTI_AFFINITY",
    "ERR_REASON_EXISTING_ANTI_AFFINITY",
    "Filtering",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

ERR_REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"


@dataclasses.dataclass(slots=True)
class _AntiGroup:
    term: Term
    #: Per row of the live table: pods with this term there (grown with the table).
    counts: IntArray
    #: Pods with this term anywhere (the group goes when none is left).
    total: int = 0

    def add(self, row: int, sign: int, capacity: int) -> None:
        if row >= len(self.counts):
            grown = np.zeros(max(capacity, row + 1), dtype=np.int64)
            grown[: len(self.counts)] = self.counts
            self.counts = grown
        self.counts[row] += sign
        self.total += sign

    def per_row(self, size: int) -> IntArray:
        """The counts of rows ``[0, size)``."""
        if len(self.counts) >= size:
            return self.counts[:size]
        out = np.zeros(size, dtype=np.int64)
        out[: len(self.counts)] = self.counts
        return out


class _AntiTermIndex:
    """Existing pods' required anti-affinity terms, grouped by what they match.

    Pods of one workload share their terms, so PreFilter judges each distinct
    term once against the incoming pod and counts its pods per domain with
    numpy, instead of walking every such pod (kube-scheduler's
    ``PodsWithRequiredAntiAffinity`` walk). Follows the cache's live table;
    each group keeps its pods per row as an array, which PreFilter adds
    whole (a dict of rows cost a conversion of thousands of entries per
    cycle once a workload spread over thousands of nodes).
    """

    def __init__(self, cache: Cache) -> None:
        self.table = cache.table
        self.groups: dict[bytes, _AntiGroup] = {}
        cache.subscribe(self._on_pod)

    def _on_pod(self, pi: PodInfo, node: str, sign: int) -> None:
        terms = terms_of(pi).required_anti_affinity
        if not terms:
            return
        row = self.table.index[node]
        capacity = len(self.table.alive)
        for t in terms:
            g = self.groups.get(t.sig)
            if g is None:
                if sign < 0:
                    continue
                g = self.groups[t.sig] = _AntiGroup(t, np.zeros(capacity, dtype=np.int64))
            g.add(row, sign, capacity)
            if g.total <= 0:
                del self.groups[t.sig]


@dataclasses.dataclass(slots=True)
class _PreFilterState:
    #: The incoming pod's terms, required ones merged (Term.merged).
    terms: Terms
    #: The labels of the incoming pod's namespace, for existing pods' terms.
    ns_labels: Mapping[str, str]
    # Per topology key: pods per domain.
    existing_anti: dict[str, DomainCounts]
    affinity: dict[str, DomainCounts]
    anti: dict[str, DomainCounts]
    self_match: bool


PRE_FILTER_KEY: fw.StateKey[_PreFilterState] = fw.StateKey("PreFilterInterPodAffinity")


class Filtering(AffinityPods):
    """InterPodAffinity's PreFilter, Filter, AddPod and RemovePod (filtering.go's methods)."""

    _anti_index: _AntiTermIndex | None
    #: Filter's failures, by index: affinity, anti-affinity, existing pods' anti-affinity.
    _statuses: list[fw.Status]

    def _anti_terms(self, nodes: NodeTable) -> _AntiTermIndex | None:
        """The anti-affinity term index, when ``nodes`` shares the live cache's rows."""
        cache = self.handle.cache if self.handle is not None else None
        if cache is None or nodes.row_space is not cache.table:
            return None
        if self._anti_index is None:
            self._anti_index = _AntiTermIndex(cache)
        return self._anti_index

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        terms = terms_of(pod).merged(
            self._namespaces(), required=True, preferred=False, keeps_selector=self.merge_keeps_selector
        )
        ns_labels = self._ns_labels(pod)
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
                if g.term.matches(pod, ns_labels):
                    rows_of("existing", g.term.topology_key)[:] += g.per_row(size)
        else:
            for other, row in self._pods_with(nodes, "anti"):
                for t in terms_of(other).required_anti_affinity:
                    if t.matches(pod, ns_labels):
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
        self_match = all(t.matches(pod, NO_LABELS) for t in terms.required_affinity)
        state.write(
            PRE_FILTER_KEY,
            _PreFilterState(terms, ns_labels, counts["existing"], counts["affinity"], counts["anti"], self_match),
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
        rows = [
            row for other, row in self._matching(nodes, first) if all(t.matches(other, NO_LABELS) for t in terms[1:])
        ]
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

        for t in terms_of(other).required_anti_affinity:
            if t.matches(pod, s.ns_labels):
                bump(s.existing_anti, t.topology_key)
        if s.terms.required_affinity and all(t.matches(other, NO_LABELS) for t in s.terms.required_affinity):
            for t in s.terms.required_affinity:
                bump(s.affinity, t.topology_key)
        for t in s.terms.required_anti_affinity:
            if t.matches(other, NO_LABELS):
                bump(s.anti, t.topology_key)

    def add_pod(self, state: fw.CycleState, pod: PodInfo, added: PodInfo, node: NodeInfo) -> None:
        self._update(state, pod, added, node, 1)

    def remove_pod(self, state: fw.CycleState, pod: PodInfo, removed: PodInfo, node: NodeInfo) -> None:
        self._update(state, pod, removed, node, -1)
