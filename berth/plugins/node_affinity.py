"""NodeAffinity: ``spec.nodeSelector`` and node affinity, required and preferred.

Mirrors kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go``
(with ``component-helpers/scheduling/corev1/nodeaffinity``; unchanged since
v1.34 but for SignPod and the deferred-resize skip of the alpha
InPlacePodVerticalScalingSchedulerPreemption, which Berth does not follow):

- PreFilter: Skip when the pod has neither a nodeSelector nor required node
  affinity and the profile adds none. When every required term pins
  ``metadata.name`` with ``In``, only those nodes are worth filtering (their
  union over terms, the intersection within a term); names that cancel out
  make the pod unschedulable: ``pod affinity terms conflict``.
- Filter: the scheduler-enforced ``addedAffinity`` first
  (``node(s) didn't match scheduler-enforced node affinity``), then
  nodeSelector AND required terms (``node(s) didn't match Pod's node
  affinity/selector``); both UnschedulableAndUnresolvable.
- PreScore/Score: the sum of the weights of the preferred terms (the pod's
  and the profile's added ones) a node matches; NormalizeScore is
  DefaultNormalizeScore (highest: 100).

Selectors are evaluated over every node at once on the table's label columns
(:mod:`berth.plugins.helpers`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

import msgspec
import numpy as np
import numpy.typing as npt

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import labels, model
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.plugins.helpers import (
    clamp_int32,
    default_normalize_score,
    label_selector_mask,
    node_selector_mask,
    term_mask,
)

__all__ = ["ERR_REASON_CONFLICT", "ERR_REASON_ENFORCED", "ERR_REASON_POD", "NodeAffinity", "NodeAffinityArgs"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"


class NodeAffinityArgs(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """NodeAffinityArgs: node affinity every pod of the profile must also satisfy / prefers."""

    added_affinity: model.NodeAffinity | None = None

    def validate(self) -> None:
        """ValidateNodeAffinityArgs: every requirement well-formed."""
        a = self.added_affinity
        if a is None:
            return
        req = a.required_during_scheduling_ignored_during_execution
        for i, term in enumerate(req.node_selector_terms if req is not None else []):
            path = f"addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"
            for j, r in enumerate(term.match_expressions):
                labels.validate_node_requirement(r, f"{path}.matchExpressions[{j}]")
        for i, pref in enumerate(a.preferred_during_scheduling_ignored_during_execution):
            path = f"addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            if not 1 <= pref.weight <= 100:
                raise ValueError(f"{path}.weight: must be in the range 1-100")
            for j, r in enumerate(pref.preference.match_expressions):
                labels.validate_node_requirement(r, f"{path}.preference.matchExpressions[{j}]")


@dataclasses.dataclass(frozen=True, slots=True)
class _PreFilterState:
    node_selector: dict[str, str]
    required: tuple[model.NodeSelectorTerm, ...] | None


PRE_FILTER_KEY: fw.StateKey[_PreFilterState] = fw.StateKey("PreFilterNodeAffinity")


def _required_terms(pod: model.Pod) -> tuple[model.NodeSelectorTerm, ...] | None:
    a = pod.spec.affinity
    if a is None or a.node_affinity is None:
        return None
    req = a.node_affinity.required_during_scheduling_ignored_during_execution
    return None if req is None else tuple(req.node_selector_terms)


def _preferred(pod: model.Pod) -> list[model.PreferredSchedulingTerm]:
    a = pod.spec.affinity
    if a is None or a.node_affinity is None:
        return []
    return list(a.node_affinity.preferred_during_scheduling_ignored_during_execution)


class NodeAffinity:
    NAME: ClassVar[str] = "NodeAffinity"
    Args: ClassVar[type[NodeAffinityArgs]] = NodeAffinityArgs

    def __init__(self, args: NodeAffinityArgs | None = None, handle: Handle | None = None) -> None:
        self.handle = handle
        added = args.added_affinity if args is not None else None
        req = added.required_during_scheduling_ignored_during_execution if added is not None else None
        self.added_required: tuple[model.NodeSelectorTerm, ...] | None = (
            tuple(req.node_selector_terms) if req is not None else None
        )
        self.added_preferred = (
            list(added.preferred_during_scheduling_ignored_during_execution) if added is not None else []
        )
        self._pod_status = fw.Status.unresolvable(ERR_REASON_POD, plugin=self.NAME)
        self._enforced_status = fw.Status.unresolvable(ERR_REASON_ENFORCED, plugin=self.NAME)

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        return (fw.ClusterEvent("Node", fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_LABEL),)

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        required = _required_terms(pod.pod)
        selector = pod.pod.spec.node_selector
        if required is None and self.added_required is None and not selector:
            return fw.PreFilterResult(fw.Status.skip())
        state.write(PRE_FILTER_KEY, _PreFilterState(dict(selector), required))
        if not required:
            return fw.PreFilterResult()
        names: set[str] | None = None
        for term in required:
            term_names: set[str] | None = None
            for r in term.match_fields:
                if r.key == "metadata.name" and r.operator == "In":
                    vals = set(r.values)
                    term_names = vals if term_names is None else term_names & vals
            if term_names is None:
                return fw.PreFilterResult()  # this term is not about names: every node may match
            names = term_names if names is None else names | term_names
        if names is not None and not names:
            return fw.PreFilterResult(fw.Status.unresolvable(ERR_REASON_CONFLICT, plugin=self.NAME))
        return fw.PreFilterResult(node_names=frozenset(names) if names else None)

    def filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.NodeVerdicts:
        n = len(rows)
        enforced_fail = np.zeros(n, dtype=bool)
        if self.added_required is not None:
            enforced_fail = ~node_selector_mask(nodes, self.added_required)[rows]
        s = state.get(PRE_FILTER_KEY)
        if s is None:
            s = _PreFilterState(dict(pod.pod.spec.node_selector), _required_terms(pod.pod))
        ok: BoolArray = np.ones(n, dtype=bool)
        if s.node_selector:
            ok &= label_selector_mask(nodes, s.node_selector)[rows]
        if s.required is not None:
            ok &= node_selector_mask(nodes, s.required)[rows]
        pod_fail = ~ok & ~enforced_fail
        if not enforced_fail.any():
            return fw.NodeVerdicts(ok, [self._pod_status])
        reason = np.where(enforced_fail, 1, 0).astype(np.int32)
        return fw.NodeVerdicts(~(enforced_fail | pod_fail), [self._pod_status, self._enforced_status], reason)

    # ------------------------------------------------------------ score

    def pre_score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.Status:
        if not _preferred(pod.pod) and not self.added_preferred:
            return fw.Status.skip()
        return fw.SUCCESS

    def score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> IntArray:
        total = np.zeros(nodes.size, dtype=np.int64)
        for pref in (*self.added_preferred, *_preferred(pod.pod)):
            if pref.weight == 0:
                continue
            # v1.PreferredSchedulingTerm.Weight is an int32 (see clamp_int32).
            total += np.where(term_mask(nodes, pref.preference), clamp_int32(pref.weight), 0)
        out: IntArray = total[rows]
        return out

    def normalize_score(self, state: fw.CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize_score(scores, fw.MAX_NODE_SCORE, reverse=False)
