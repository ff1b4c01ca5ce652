"""Label and node selectors, with apimachinery's meanings.

- A LabelSelector requirement: ``In`` (key present, value listed), ``NotIn``
  (key absent or value not listed), ``Exists``, ``DoesNotExist``; matchLabels
  are ``In`` with one value; an empty selector matches everything and a
  missing (None) one nothing (``metav1.LabelSelectorAsSelector``).
- A NodeSelectorRequirement adds ``Gt``/``Lt``: one integer value compared
  with the label parsed as an integer (no match when either does not parse).
  Terms are ORed, requirements within a term ANDed; a term with no
  requirements matches nothing, and so does a selector with no terms
  (``component-helpers/scheduling/corev1/nodeaffinity``).

These functions judge one object; :mod:`berth.cache.table` evaluates the same
requirements over every node at once. Selectors are validated where objects
come in (:mod:`berth.cluster.validation`), so matching never meets an
operator it does not know.
"""

from __future__ import annotations

from collections.abc import Mapping

from berth.cluster import model, validation
from berth.errors import InvalidArgument

__all__ = [
    "SelectorError",
    "match_label_selector",
    "match_node_requirement",
    "node_term_matches",
    "validate_label_selector",
    "validate_node_requirement",
]

LABEL_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
NODE_OPERATORS = LABEL_OPERATORS | {"Gt", "Lt"}


class SelectorError(InvalidArgument):
    """A selector that Kubernetes' validation would reject."""


def validate_label_selector(sel: model.LabelSelector | None, path: str) -> None:
    """metav1validation.ValidateLabelSelector: operators, keys and values
    (:func:`berth.cluster.validation.validate_label_selector`); raises SelectorError."""
    try:
        validation.validate_label_selector(sel, path)
    except InvalidArgument as e:
        raise SelectorError(str(e)) from None


def validate_node_requirement(r: model.NodeSelectorRequirement, path: str) -> None:
    """core validation's ValidateNodeSelectorRequirement; raises SelectorError."""
    try:
        validation.validate_node_selector_requirement(r, path)
    except InvalidArgument as e:
        raise SelectorError(str(e)) from None


def _label_requirement(labels: Mapping[str, str], key: str, op: str, values: list[str]) -> bool:
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    raise SelectorError(f"unsupported operator {op!r}")


def match_label_selector(sel: model.LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` match ``sel`` (None matches nothing, empty everything)."""
    if sel is None:
        return False
    for k, v in sel.match_labels.items():
        if labels.get(k) != v:
            return False
    return all(_label_requirement(labels, r.key, r.operator, r.values) for r in sel.match_expressions)


def match_node_requirement(r: model.NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    if r.operator in ("Gt", "Lt"):
        if r.key not in labels:
            return False
        try:
            have, want = int(labels[r.key]), int(r.values[0])
        except (ValueError, IndexError):
            return False
        return have > want if r.operator == "Gt" else have < want
    return _label_requirement(labels, r.key, r.operator, r.values)


def node_term_matches(term: model.NodeSelectorTerm, labels: Mapping[str, str], name: str) -> bool:
    """One NodeSelectorTerm against a node's labels and name (matchFields)."""
    if not term.match_expressions and not term.match_fields:
        return False
    for r in term.match_expressions:
        if not match_node_requirement(r, labels):
            return False
    for f in term.match_fields:
        if f.key != "metadata.name":
            return False
        if not _label_requirement({"metadata.name": name}, f.key, f.operator, f.values):
            return False
    return True
