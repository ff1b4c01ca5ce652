"""Vectorised pieces several in-tree plugins share.

- :func:`default_normalize_score`: ``plugins/helper/normalize_score.go``.
- :func:`tolerates` / :func:`first_untolerated`: ``v1.Toleration.ToleratesTaint``
  and ``v1helper.FindMatchingUntoleratedTaint`` (k8s.io/api v0.37.2,
  component-helpers v0.37.2), with the ``Lt`` / ``Gt`` operators of
  TaintTolerationComparisonOperators.
- :func:`term_mask` / :func:`node_selector_mask`: node selector terms over
  every row at once, with :mod:`berth.cluster.labels`' meanings (terms ORed,
  requirements ANDed, an empty term matches nothing, an invalid requirement
  makes its term match nothing — nodeaffinity's lazy-error selector).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from berth.cache.table import LabelColumn, NodeTable
from berth.cluster import labels, model

__all__ = [
    "DO_NOT_SCHEDULE",
    "INT32_MAX",
    "INT32_MIN",
    "DomainCounts",
    "clamp_int32",
    "default_normalize_score",
    "first_untolerated",
    "label_selector_mask",
    "node_selector_mask",
    "term_mask",
    "tolerates",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
#: helper.DoNotScheduleTaintsFilterFunc: the effects Filter enforces.
DO_NOT_SCHEDULE = frozenset((NO_SCHEDULE, NO_EXECUTE))

#: The range of the API's int32 fields that feed scores (affinity weights,
#: maxSkew). A pod that reached Berth without the API server's validation
#: may carry any integer there; bounding it keeps every sum in int64.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def clamp_int32(value: int) -> int:
    """``value`` bounded to int32, the type the Kubernetes API gives it."""
    return min(max(value, INT32_MIN), INT32_MAX)


def default_normalize_score(scores: IntArray, max_priority: int = 100, reverse: bool = False) -> IntArray:
    """helper.DefaultNormalizeScore: scale to 0..max_priority by the highest
    score (integer division), optionally reversed; all zeros stay zero, or
    become max_priority when reversed.

    The result is always in [0, max_priority]. Upstream's raw scores are
    never negative (weights the API server bounds to 1..100); a negative one
    here (a weight only a request that skipped that validation can carry)
    counts as 0, where Go would return it unchanged and fail the cycle. A
    maximum too large for ``max_priority * score`` in int64 is scaled exactly.
    """
    scores = np.maximum(np.asarray(scores, dtype=np.int64), 0)
    top = int(scores.max()) if scores.size else 0
    if top == 0:
        return np.full_like(scores, max_priority) if reverse else scores.copy()
    if top > np.iinfo(np.int64).max // max(max_priority, 1):
        out = np.asarray(scores.astype(object) * max_priority // top, dtype=np.int64)
    else:
        out = np.asarray(max_priority * scores // top, dtype=np.int64)
    return max_priority - out if reverse else out


def _decimal_int64(value: str) -> int | None:
    """apimachinery ``content.IsDecimalInteger`` then ``strconv.ParseInt(v, 10, 64)``:
    an optional ``-``, no leading zero (``0`` alone is fine), digits only,
    within int64; None otherwise."""
    digits = value[1:] if value.startswith("-") else value
    if not digits or not digits.isascii() or not digits.isdigit() or (digits[0] == "0" and value != "0"):
        return None
    if len(digits) > 19:  # longer than any int64 (and no huge int is ever built)
        return None
    n = int(value)
    return n if -(2**63) <= n < 2**63 else None


def tolerates(t: model.Toleration, taint: model.Taint, comparison_operators: bool = False) -> bool:
    """v1.Toleration.ToleratesTaint (k8s.io/api v0.37.2 core/v1/toleration.go).

    ``Lt`` / ``Gt`` compare the taint's value with the toleration's as
    int64s (the taint's must be less / greater) when ``comparison_operators``
    (TaintTolerationComparisonOperators, alpha and off in 1.35-1.37) is on;
    without it, or when either value is not a decimal integer, they
    tolerate nothing."""
    if t.effect and t.effect != taint.effect:
        return False
    if t.key and t.key != taint.key:
        return False
    if t.operator in ("", "Equal"):
        return t.value == taint.value
    if t.operator == "Exists":
        return True
    if t.operator in ("Lt", "Gt") and comparison_operators:
        mine, theirs = _decimal_int64(t.value), _decimal_int64(taint.value)
        if mine is None or theirs is None:
            return False
        return theirs < mine if t.operator == "Lt" else theirs > mine
    return False


def first_untolerated(
    taints: Iterable[model.Taint],
    tolerations: Sequence[model.Toleration],
    keep: Callable[[model.Taint], bool],
    comparison_operators: bool = False,
) -> model.Taint | None:
    """v1helper.FindMatchingUntoleratedTaint: the first taint ``keep`` selects
    that no toleration tolerates."""
    for taint in taints:
        if keep(taint) and not any(tolerates(t, taint, comparison_operators) for t in tolerations):
            return taint
    return None


def _requirement_mask(table: NodeTable, r: model.NodeSelectorRequirement) -> BoolArray | None:
    """One matchExpressions requirement over all rows; None when invalid."""
    try:
        labels.validate_node_requirement(r, "")
    except labels.SelectorError:
        return None
    col = table.label_column(r.key)
    if r.operator == "In":
        return col.mask_in(r.values)
    if r.operator == "NotIn":
        return ~col.mask_in(r.values)
    if r.operator == "Exists":
        return col.present()
    if r.operator == "DoesNotExist":
        return ~col.present()
    return col.mask_compare(r.operator, int(r.values[0]))


def _field_mask(table: NodeTable, r: model.NodeSelectorRequirement) -> BoolArray | None:
    """One matchFields requirement: only ``metadata.name`` with In / NotIn is valid."""
    if r.key != "metadata.name" or r.operator not in ("In", "NotIn") or not r.values:
        return None
    named = np.zeros(table.size, dtype=bool)
    for v in r.values:
        i = table.index.get(v)
        if i is not None:
            named[i] = True
    return named if r.operator == "In" else ~named


def term_mask(table: NodeTable, term: model.NodeSelectorTerm) -> BoolArray:
    """A NodeSelectorTerm over every row of ``table`` (size ``table.size``)."""
    out = np.zeros(table.size, dtype=bool)
    if not term.match_expressions and not term.match_fields:
        return out
    out[:] = True
    for r in term.match_expressions:
        m = _requirement_mask(table, r)
        if m is None:
            out[:] = False
            return out
        out &= m[: table.size]
    for r in term.match_fields:
        m = _field_mask(table, r)
        if m is None:
            out[:] = False
            return out
        out &= m
    return out


def node_selector_mask(table: NodeTable, terms: Sequence[model.NodeSelectorTerm]) -> BoolArray:
    """ORed terms over every row (no terms: nothing matches)."""
    out = np.zeros(table.size, dtype=bool)
    for term in terms:
        out |= term_mask(table, term)
    return out


def label_selector_mask(table: NodeTable, selector: Mapping[str, str]) -> BoolArray:
    """``spec.nodeSelector``: every key present with exactly that value."""
    out = np.ones(table.size, dtype=bool)
    for key, value in selector.items():
        out &= table.label_column(key).mask_in((value,))[: table.size]
    return out


class DomainCounts:
    """Matching pods per value of one topology key, as an array over the codes
    of the label column they were counted on — thousands of hostnames cost
    one numpy array, not a dict — plus a small dict of later changes
    (preemption's add/remove of a pod).

    ``present`` marks the values that are domains (topology spread counts a
    domain with zero pods; inter-pod affinity only values with pods).
    """

    __slots__ = ("_cache", "col", "counts", "delta", "present")

    def __init__(self, col: LabelColumn, counts: IntArray, present: BoolArray | None = None) -> None:
        self.col = col
        self.counts = counts
        self.present = counts > 0 if present is None else present
        self.delta: dict[str, int] = {}
        self._cache: tuple[LabelColumn, IntArray] | None = None

    @classmethod
    def of_rows(cls, nodes: NodeTable, key: str, per_row: IntArray, eligible: BoolArray | None = None) -> DomainCounts:
        """Sum ``per_row`` (indexed by row) by the row's value of ``key``,
        over ``eligible`` rows (every row with the key when None)."""
        col = nodes.label_column(key)
        codes = col.codes[: nodes.size]
        valid = codes >= 0
        if eligible is not None:
            valid &= eligible[: nodes.size]
        vc = codes[valid]
        counts = np.bincount(vc, weights=per_row[: nodes.size][valid], minlength=len(col.values)).astype(np.int64)
        present = np.bincount(vc, minlength=len(col.values)) > 0 if eligible is not None else None
        return cls(col, counts, present)

    @classmethod
    def empty(cls) -> DomainCounts:
        return cls(LabelColumn(np.zeros(0, dtype=np.int32), [], {}), np.zeros(0, dtype=np.int64))

    def add(self, value: str, delta: int) -> None:
        self.delta[value] = self.delta.get(value, 0) + delta
        self._cache = None

    def get(self, value: str) -> int:
        code = self.col.code_of.get(value)
        base = int(self.counts[code]) if code is not None else 0
        return base + self.delta.get(value, 0)

    def per_code(self, col: LabelColumn) -> IntArray:
        """Counts aligned with ``col``'s codes, plus a trailing 0 for rows without the key."""
        if self._cache is not None and self._cache[0] is col:
            return self._cache[1]
        if col is self.col:
            out = np.append(self.counts, 0)
        else:
            out = np.zeros(len(col.values) + 1, dtype=np.int64)
            for i, v in enumerate(col.values):
                code = self.col.code_of.get(v)
                if code is not None:
                    out[i] = self.counts[code]
        for v, d in self.delta.items():
            code = col.code_of.get(v)
            if code is not None:
                out[code] += d
        self._cache = (col, out)
        return out

    def _values(self) -> IntArray:
        vals = self.counts[self.present]
        if not self.delta:
            return vals
        extra = [self.get(v) for v in self.delta if (c := self.col.code_of.get(v)) is None or not self.present[c]]
        adjusted = [self.get(self.col.values[c]) for c in np.flatnonzero(self.present).tolist()]
        return np.asarray(adjusted + extra, dtype=np.int64)

    def domains(self) -> int:
        return len(self._values())

    def minimum(self) -> int:
        vals = self._values()
        return int(vals.min()) if len(vals) else 0

    def any_positive(self) -> bool:
        return bool((self._values() > 0).any())

    def positive_values(self) -> list[str]:
        return [
            v
            for v in (*(self.col.values[c] for c in np.flatnonzero(self.present).tolist()), *self.delta)
            if self.get(v) > 0
        ]
