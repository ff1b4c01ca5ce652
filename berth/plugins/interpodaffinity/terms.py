"""Affinity terms, resolved against their pods, and the pods they are matched against.

Mirrors kube-scheduler v1.37.2's ``framework.AffinityTerm`` and the terms
``PodInfo`` parses (``pkg/scheduler/framework/types.go``): a term matches a
pod when the pod's namespace is among the term's (``namespaces``; none and no
``namespaceSelector`` means the term owner's own) or the labels of the pod's
namespace match ``namespaceSelector`` (``AffinityTerm.Matches(pod,
nsLabels)``), and its labels match the term's selector (``matchLabelKeys`` /
``mismatchLabelKeys`` merged in as In / NotIn of the owner's values).

Namespace labels come from the namespace lister (the Handle's
``namespaces``), used the two ways ``plugin.go`` uses it:

- the incoming pod's terms are :meth:`Term.merged` at PreFilter / PreScore
  (``mergeAffinityTermNamespacesIfNotEmpty``): a non-empty
  ``namespaceSelector`` becomes the names of the namespaces it selects now,
  so existing pods are matched by namespace name alone (a namespace Berth
  has not seen is not selected); an empty one selects every namespace. Up to
  1.36 the merge went to a copy of the term (``mergeAffinityTermNamespacesIfNotEmpty``
  took an ``AffinityTerm`` by value until v1.37.0): the names reached the
  term through its shared set but the selector stayed, and is matched with
  nil labels — so a selector an empty label set satisfies (``NotIn``,
  ``DoesNotExist``) selects every namespace there;
- existing pods' terms are matched against the incoming pod with the labels
  of the incoming pod's namespace (``GetNamespaceLabelsSnapshot``: none for a
  namespace Berth has not seen, so only a selector that matches an empty
  label set — empty, ``NotIn``, ``DoesNotExist`` — selects it).

:class:`AffinityPods` finds,
for filtering and scoring alike, the pods to test through the cache's pod
index (:mod:`berth.cache.podindex`), as ``plugin.go``'s ``sharedLister`` does.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Iterable, Mapping

import msgspec

from berth.cache import podindex
from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import labels, model
from berth.framework.handle import Handle, NamespaceLister
from berth.plugins.helpers import clamp_int32

__all__ = ["NO_LABELS", "AffinityPods", "Term", "Terms", "terms_of"]

#: The namespace labels to match a merged term with (upstream passes nil):
#: its namespaces are names, or it selects every namespace.
NO_LABELS: Mapping[str, str] = {}


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

    def matches(self, pod: PodInfo, ns_labels: Mapping[str, str]) -> bool:
        """AffinityTerm.Matches: ``ns_labels`` are the labels of ``pod``'s namespace."""
        in_ns = pod.namespace in self.namespaces or (
            self.namespace_selector is not None and labels.match_label_selector(self.namespace_selector, ns_labels)
        )
        return in_ns and labels.match_label_selector(self.selector, pod.labels)

    def merged(self, namespaces: NamespaceLister | None, *, keeps_selector: bool = False) -> Term:
        """mergeAffinityTermNamespacesIfNotEmpty: a non-empty namespaceSelector
        unrolled into the namespaces it selects now (then matched by name,
        with :data:`NO_LABELS`); an empty one (every namespace) kept. With
        ``keeps_selector`` (1.35, 1.36: the merge by value, see the module
        docstring) a selector that no labels satisfy is kept too: it selects
        every namespace."""
        sel = self.namespace_selector
        if sel is None or (not sel.match_labels and not sel.match_expressions):
            return self
        if keeps_selector and labels.match_label_selector(sel, NO_LABELS):
            return self
        selected = frozenset(namespaces.selected(sel)) if namespaces is not None else frozenset()
        names = self.namespaces | selected
        return dataclasses.replace(
            self, namespaces=names, namespace_selector=None, sig=_sig(names, None, self.selector, self.topology_key)
        )

    def candidate_namespaces(self) -> list[str] | None:
        """Namespaces to search, None for all (an empty namespaceSelector, once :meth:`merged`)."""
        return None if self.namespace_selector is not None else sorted(self.namespaces)


def _sig(
    namespaces: frozenset[str],
    namespace_selector: model.LabelSelector | None,
    selector: model.LabelSelector | None,
    topology_key: str,
) -> bytes:
    return msgspec.json.encode((sorted(namespaces), namespace_selector, selector, topology_key))


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
    sig = _sig(namespaces, t.namespace_selector, sel, t.topology_key)
    # WeightedPodAffinityTerm.Weight is an int32 (helpers.clamp_int32).
    return Term(namespaces, t.namespace_selector, sel, t.topology_key, clamp_int32(weight), sig)


@dataclasses.dataclass(frozen=True, slots=True)
class Terms:
    required_affinity: tuple[Term, ...]
    required_anti_affinity: tuple[Term, ...]
    preferred_affinity: tuple[Term, ...]
    preferred_anti_affinity: tuple[Term, ...]

    @property
    def has_preferred(self) -> bool:
        return bool(self.preferred_affinity or self.preferred_anti_affinity)

    def merged(
        self, namespaces: NamespaceLister | None, *, required: bool, preferred: bool, keeps_selector: bool = False
    ) -> Terms:
        """These terms with the ``required`` (PreFilter) or ``preferred``
        (PreScore) ones :meth:`Term.merged`, as upstream merges each extension point's own."""

        def each(ts: tuple[Term, ...], on: bool) -> tuple[Term, ...]:
            return tuple(t.merged(namespaces, keeps_selector=keeps_selector) for t in ts) if on else ts

        return Terms(
            each(self.required_affinity, required),
            each(self.required_anti_affinity, required),
            each(self.preferred_affinity, preferred),
            each(self.preferred_anti_affinity, preferred),
        )


_NO_TERMS = Terms((), (), (), ())
#: The terms of each PodInfo, resolved once and forgotten with it
#: (kube-scheduler's PodInfo keeps them as fields). Weakly keyed: a cluster
#: pod's entry lives as long as the cache holds its PodInfo, and a request's
#: pod (an extender call, ``berth explain``) leaves nothing behind once the
#: request drops its PodInfo.
_terms_cache: weakref.WeakKeyDictionary[PodInfo, Terms] = weakref.WeakKeyDictionary()


def terms_of(pi: PodInfo) -> Terms:
    """The pod's terms, resolved once per PodInfo."""
    a = pi.pod.spec.affinity
    if a is None or (a.pod_affinity is None and a.pod_anti_affinity is None):
        return _NO_TERMS
    hit = _terms_cache.get(pi)
    if hit is not None:
        return hit
    out = _resolve(pi.pod, a)
    _terms_cache[pi] = out
    return out


def _resolve(pod: model.Pod, a: model.Affinity) -> Terms:
    pa, paa = a.pod_affinity, a.pod_anti_affinity
    return Terms(
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


class AffinityPods:
    """The pods InterPodAffinity's terms are matched against (a base of its filtering and scoring halves)."""

    handle: Handle | None
    #: :meth:`Term.merged`'s ``keeps_selector``: the release merges by value (before 1.37).
    merge_keeps_selector: bool

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

    def _namespaces(self) -> NamespaceLister | None:
        return self.handle.namespaces if self.handle is not None else None

    def _ns_labels(self, pod: PodInfo) -> Mapping[str, str]:
        """GetNamespaceLabelsSnapshot: the labels of ``pod``'s namespace, none when unknown."""
        lister = self._namespaces()
        return lister.labels_of(pod.namespace) if lister is not None else NO_LABELS

    def _matching(self, nodes: NodeTable, term: Term) -> Iterable[tuple[PodInfo, int]]:
        """Pods matching a :meth:`Term.merged` term: by namespace name (or in
        every namespace) and selector, so no namespace's labels are looked up."""
        if term.selector is None:
            return ()
        cache = self.handle.cache if self.handle is not None else None
        return podindex.matching_pods(cache, nodes, term.candidate_namespaces(), term.selector)
