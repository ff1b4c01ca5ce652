"""Pods by namespace and label, and pods with (anti-)affinity, with the row
of the node each is on: what PodTopologySpread and InterPodAffinity need to
count matching pods without walking every pod of every node per cycle.

kube-scheduler walks ``NodeInfo.Pods`` (and ``PodsWithAffinity`` /
``PodsWithRequiredAntiAffinity``) of every node in 16 goroutines; Berth keeps
these indexes up to date from the cache's pod events instead (hand-written:
no library indexes Kubernetes label selectors), so counting the pods a
selector matches costs the number of candidate pods, not of all pods.

The index follows the cache's *live* table; a snapshot shares its row
numbers (``NodeTable.row_space``) and, during a synchronous scheduling
cycle, its contents. A table with other rows (the extender's full-node mode,
preemption's scratch node) is scanned instead: :func:`matching_pods` hides
the difference.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import labels, model

if TYPE_CHECKING:
    from berth.cache.cache import Cache

__all__ = [
    "PodIndex",
    "has_affinity",
    "has_required_anti_affinity",
    "has_scoring_terms",
    "index_of",
    "matching_pods",
    "scan",
    "selector_row_counts",
    "simple_requirement",
]

_MAX_TRACKED = 1024


def has_affinity(pod: model.Pod) -> bool:
    a = pod.spec.affinity
    return a is not None and (a.pod_affinity is not None or a.pod_anti_affinity is not None)


def has_scoring_terms(pod: model.Pod) -> bool:
    """Terms that weigh in InterPodAffinity's Score when *another* pod is
    placed: required affinity (hardPodAffinityWeight) and preferred terms.
    (Required anti-affinity only filters.)"""
    a = pod.spec.affinity
    if a is None:
        return False
    pa, paa = a.pod_affinity, a.pod_anti_affinity
    return bool(
        (
            pa
            and (
                pa.required_during_scheduling_ignored_during_execution
                or pa.preferred_during_scheduling_ignored_during_execution
            )
        )
        or (paa and paa.preferred_during_scheduling_ignored_during_execution)
    )


def simple_requirement(selector: model.LabelSelector) -> tuple[str, str] | None:
    """(key, value) when the selector is exactly ``key = value``."""
    if len(selector.match_labels) == 1 and not selector.match_expressions:
        return next(iter(selector.match_labels.items()))
    if not selector.match_labels and len(selector.match_expressions) == 1:
        r = selector.match_expressions[0]
        if r.operator == "In" and len(set(r.values)) == 1:
            return r.key, r.values[0]
    return None


def has_required_anti_affinity(pod: model.Pod) -> bool:
    a = pod.spec.affinity
    return bool(
        a is not None
        and a.pod_anti_affinity
        and a.pod_anti_affinity.required_during_scheduling_ignored_during_execution
    )


@dataclasses.dataclass(slots=True)
class _Entry:
    info: PodInfo
    row: int


class PodIndex:
    """See the module docstring. Subscribes to ``cache`` on creation."""

    def __init__(self, cache: Cache) -> None:
        self._table = cache.table
        self.entries: dict[str, _Entry] = {}
        self.by_namespace: dict[str, dict[str, None]] = {}
        self.by_label: dict[tuple[str, str, str], dict[str, None]] = {}
        self.with_affinity: dict[str, None] = {}
        self.with_required_anti_affinity: dict[str, None] = {}
        self.with_scoring_terms: dict[str, None] = {}
        self.terminating: dict[str, None] = {}
        # (namespace, key, value) -> pods with that label per row, kept only
        # for the labels selectors have asked about (at most _MAX_TRACKED).
        self._tracked: dict[tuple[str, str, str], npt.NDArray[np.int64]] = {}
        cache.subscribe(self._on_pod)

    def shares_rows(self, table: NodeTable) -> bool:
        return table.row_space is self._table

    def _on_pod(self, pi: PodInfo, node: str, sign: int) -> None:
        uid, ns = pi.uid, pi.namespace
        if sign > 0:
            self.entries[uid] = _Entry(pi, self._table.index[node])
            self.by_namespace.setdefault(ns, {})[uid] = None
            row = self.entries[uid].row
            for k, v in pi.labels.items():
                self.by_label.setdefault((ns, k, v), {})[uid] = None
                self._bump((ns, k, v), row, 1)
            if pi.pod.metadata.deletion_timestamp is not None:
                self.terminating[uid] = None
            if has_affinity(pi.pod):
                self.with_affinity[uid] = None
                if has_required_anti_affinity(pi.pod):
                    self.with_required_anti_affinity[uid] = None
                if has_scoring_terms(pi.pod):
                    self.with_scoring_terms[uid] = None
            return
        entry = self.entries.pop(uid, None)
        if entry is None:
            return
        old = entry.info
        _discard(self.by_namespace, old.namespace, uid)
        for k, v in old.labels.items():
            _discard(self.by_label, (old.namespace, k, v), uid)
            self._bump((old.namespace, k, v), entry.row, -1)
        self.terminating.pop(uid, None)
        self.with_affinity.pop(uid, None)
        self.with_required_anti_affinity.pop(uid, None)
        self.with_scoring_terms.pop(uid, None)

    def _bump(self, key: tuple[str, str, str], row: int, delta: int) -> None:
        arr = self._tracked.get(key)
        if arr is None:
            return
        if row >= len(arr):
            arr = self._tracked[key] = np.concatenate((arr, np.zeros(max(row + 1, 2 * len(arr)) - len(arr), np.int64)))
        arr[row] += delta

    def row_counts(self, namespace: str, key: str, value: str) -> npt.NDArray[np.int64]:
        """Pods labelled ``key=value`` in ``namespace`` per row (length >= the table's size)."""
        k = (namespace, key, value)
        arr = self._tracked.get(k)
        if arr is None:
            if len(self._tracked) >= _MAX_TRACKED:
                del self._tracked[next(iter(self._tracked))]
            rows = np.asarray([self.entries[u].row for u in self.by_label.get(k, {})], dtype=np.int64)
            arr = self._tracked[k] = np.bincount(rows, minlength=max(self._table.size, 1)).astype(np.int64)
        elif len(arr) < self._table.size:
            arr = self._tracked[k] = np.concatenate((arr, np.zeros(self._table.size - len(arr), np.int64)))
        return arr

    def _candidates(self, namespace: str, selector: model.LabelSelector) -> tuple[Iterable[str], bool]:
        """Uids worth checking, and whether every one of them surely matches."""
        best: dict[str, None] | list[str] | None = None
        exact = False
        n_reqs = len(selector.match_labels) + len(selector.match_expressions)
        for k, v in selector.match_labels.items():
            found = self.by_label.get((namespace, k, v), {})
            if best is None or len(found) < len(best):
                best, exact = found, n_reqs == 1
        for r in selector.match_expressions:
            if r.operator != "In":
                continue
            union: list[str] = []
            for v in dict.fromkeys(r.values):
                union.extend(self.by_label.get((namespace, r.key, v), {}))
            if best is None or len(union) < len(best):
                best, exact = union, n_reqs == 1
        if best is None:
            return self.by_namespace.get(namespace, {}), n_reqs == 0
        return best, exact

    def matching(self, namespaces: Iterable[str], selector: model.LabelSelector) -> Iterator[tuple[PodInfo, int]]:
        """(pod, row) of every indexed pod in ``namespaces`` whose labels match ``selector``."""
        for ns in namespaces:
            uids, exact = self._candidates(ns, selector)
            for uid in uids:
                e = self.entries[uid]
                if exact or labels.match_label_selector(selector, e.info.labels):
                    yield e.info, e.row

    def namespaces(self) -> list[str]:
        return list(self.by_namespace)


def _discard(
    d: dict[tuple[str, str, str], dict[str, None]] | dict[str, dict[str, None]], key: object, uid: str
) -> None:
    bucket = d.get(key)  # type: ignore[call-overload]
    if bucket is None:
        return
    bucket.pop(uid, None)
    if not bucket:
        del d[key]  # type: ignore[arg-type]


def selector_row_counts(
    cache: Cache | None,
    nodes: NodeTable,
    namespaces: Iterable[str] | None,
    selector: model.LabelSelector,
    *,
    exclude_terminating: bool = False,
) -> npt.NDArray[np.int64] | None:
    """Matching pods per row of ``nodes`` for a ``key = value`` selector, from
    counts the index keeps up to date (numpy, no walk over pods); None when
    that shortcut does not apply and :func:`matching_pods` must be used."""
    idx = index_of(cache)
    if idx is None or namespaces is None or not idx.shares_rows(nodes):
        return None
    req = simple_requirement(selector)
    if req is None:
        return None
    nss = list(namespaces)
    total = np.zeros(nodes.size, dtype=np.int64)
    for ns in nss:
        total += idx.row_counts(ns, *req)[: nodes.size]
    if exclude_terminating:
        for uid in idx.terminating:
            e = idx.entries[uid]
            if e.info.namespace in nss and e.info.labels.get(req[0]) == req[1] and e.row < nodes.size:
                total[e.row] -= 1
    return total


def index_of(cache: Cache | None) -> PodIndex | None:
    """The cache's pod index (None without a cache: plugins then scan the table)."""
    if cache is None:
        return None
    return cache.pod_index


def scan(nodes: NodeTable) -> Iterator[tuple[PodInfo, int]]:
    """Every pod of every alive row of ``nodes``."""
    for row in nodes.alive_rows().tolist():
        info = nodes.infos[row]
        if info is not None:
            for pi in info.pods.values():
                yield pi, row


def matching_pods(
    cache: Cache | None,
    nodes: NodeTable,
    namespaces: Iterable[str] | None,
    selector: model.LabelSelector,
    keep: Callable[[PodInfo], bool] | None = None,
) -> Iterator[tuple[PodInfo, int]]:
    """(pod, row in ``nodes``) of the pods on ``nodes`` in ``namespaces`` (None:
    all) whose labels match ``selector``, through the index when it applies."""
    idx = index_of(cache)
    if idx is not None and idx.shares_rows(nodes):
        nss = idx.namespaces() if namespaces is None else namespaces
        for pi, row in idx.matching(nss, selector):
            if keep is None or keep(pi):
                yield pi, row
        return
    wanted = None if namespaces is None else set(namespaces)
    for pi, row in scan(nodes):
        if wanted is not None and pi.namespace not in wanted:
            continue
        if labels.match_label_selector(selector, pi.labels) and (keep is None or keep(pi)):
            yield pi, row
