"""Vectorised pieces several in-tree plugins share.

- :func:`default_normalize_score`: ``plugins/helper/normalize_score.go``.
- :func:`tolerates` / :func:`first_untolerated`: ``v1.Toleration.ToleratesTaint``
  and ``v1helper.FindMatchingUntoleratedTaint`` (k8s.io/api, component-helpers).
- :func:`term_mask` / :func:`node_selector_mask`: node selector terms over
  every row at once, with :mod:`service.labels`' meanings (terms ORed,
  requirements ANDed, an empty term matches nothing, an invalid requirement
  makes its term match nothing — nodeaffinity's lazy-error selector).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from service import labels, model
from service.nodetable import NodeTable

__all__ = [
    "DO_NOT_SCHEDULE",
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


def default_normalize_score(scores: IntArray, max_priority: int = 100, reverse: bool = False) -> IntArray:
    """helper.DefaultNormalizeScore: scale to 0..max_priority by the highest
    score (integer division), optionally reversed; all zeros stay zero, or
    become max_priority when reversed."""
    scores = np.asarray(scores, dtype=np.int64)
    top = int(scores.max()) if scores.size else 0
    if top == 0:
        return np.full_like(scores, max_priority) if reverse else scores.copy()
    out = max_priority * scores // top
    out = np.asarray(out, dtype=np.int64)
    return max_priority - out if reverse else out


def tolerates(t: model.Toleration, taint: model.Taint) -> bool:
    """v1.Toleration.ToleratesTaint."""
    if t.effect and t.effect != taint.effect:
        return False
    if t.key and t.key != taint.key:
        return False
    if t.operator in ("", "Equal"):
        return t.value == taint.value
    return t.operator == "Exists"


def first_untolerated(
    taints: Iterable[model.Taint],
    tolerations: Sequence[model.Toleration],
    keep: Callable[[model.Taint], bool],
) -> model.Taint | None:
    """v1helper.FindMatchingUntoleratedTaint: the first taint ``keep`` selects
    that no toleration tolerates."""
    for taint in taints:
        if keep(taint) and not any(tolerates(t, taint) for t in tolerations):
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
