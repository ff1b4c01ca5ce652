"""NodeResourcesBalancedAllocation: prefer nodes whose resources fill up evenly.

Mirrors kube-scheduler v1.37.2
``pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go`` (on
top of ``resource_allocation.go``, shared with NodeResourcesFit:
:mod:`berth.plugins.noderesources.strategies`). PreScore computes the pod's
request for each configured resource from its *actual* requests
(``useRequested``: no 100m / 200Mi defaults; pod-level resources,
``spec.resources``, replace the containers' sum for cpu, memory and
hugepages, as ``enablePodLevelResources`` is set — unlike NodeResourcesFit's
score) and returns Skip for a pod that requests none of them (a best-effort
pod; kubernetes/kubernetes#129138), so such pods are not piled onto one node.

Score. A node's balance (``balancedResourceScore``): per resource the
fraction ``requested / allocatable`` (capped at 1; resources the node does
not have, and extended resources the pod does not request, are left out),
then ``(1 - std) * MaxNodeScore`` where std is ``|f0 - f1| / 2`` for two
resources and the population standard deviation for more, in float64
exactly as Go computes it — a value in [50, 100]. Which balance is the
score depends on the release:

- 1.36 and later (``balancedResourceScorer`` since v1.36.0): how much the pod
  improves the node's balance, ``MaxNodeScore/2 + (MaxNodeScore/2 +
  S(with the pod) - S(without it)) / 2`` in int64 — 75 for no change, towards
  100 for a pod that evens the node out, towards 50 for one that skews it;
- 1.35 (v1.35.4's ``balancedResourceScorer``, unchanged since v1.34):
  ``S(with the pod)``.

DRA-backed extended resources count in the score (``DRAExtendedResource``,
alpha and off in 1.35, on in 1.36 and 1.37: a configured extended resource no
device plugin provides on a node is counted there in devices of the
DeviceClass that names it, :class:`berth.dra.extended.ScoringSource`). Not
modelled: ``SignPod`` (opportunistic batching); v1.36.3's and v1.37.2's
files are the same. The arguments,
:class:`~berth.plugins.noderesources.args.NodeResourcesBalancedAllocationArgs`
(``resources``, default cpu and memory, weight defaulted to 1;
``ValidateNodeResourcesBalancedAllocationArgs`` requires weight 1 and no
duplicate names), live in :mod:`berth.plugins.noderesources.args`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from berth import features
from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.dra import extended
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.plugins.noderesources.args import NodeResourcesBalancedAllocationArgs
from berth.plugins.noderesources.strategies import ColumnScorer, DraTotals, ResourceAllocationScorer, Scorer

__all__ = [
    "PRE_SCORE_STATE_KEY",
    "NodeResourcesBalancedAllocation",
    "balanced_resource_columns",
    "balanced_resource_columns_v1_35",
    "balanced_resource_score",
    "balanced_resource_scorer",
    "balanced_resource_scorer_v1_35",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

_HALF_MAX = fw.MAX_NODE_SCORE // 2


def balanced_resource_score(req: IntArray, alloc: IntArray) -> IntArray:
    """balanced_allocation.go balancedResourceScore (v1.37.2), vectorised over rows.

    Columns are visited in the configured order and left-out resources
    (allocatable 0) are skipped, so every row sums the same float64 terms in
    the same order as Go's per-node loop.
    """
    n, r = req.shape
    valid = alloc > 0
    # float64(requested) / float64(allocable), capped at 1 as Go caps it; the
    # operands may be Python ints (absurd amounts), and requested is never
    # negative (node_allocatable_request clamps it), so every fraction is in
    # [0, 1], std in [0, 0.5] and the score in [50, 100].
    req_f = np.asarray(req, dtype=np.float64)
    if r <= 2 and valid.all():
        # Every resource counted on every row (the default profiles: cpu and
        # memory on every node): the same float64 operations, fewer arrays.
        if r < 2:
            return np.full(n, fw.MAX_NODE_SCORE, dtype=np.int64)
        alloc_f = np.asarray(alloc, dtype=np.float64)
        f0 = np.minimum(req_f[:, 0] / alloc_f[:, 0], 1.0)
        f1 = np.minimum(req_f[:, 1] / alloc_f[:, 1], 1.0)
        two: IntArray = ((1 - np.abs((f0 - f1) / 2)) * float(fw.MAX_NODE_SCORE)).astype(np.int64)
        return two
    alloc_f = np.asarray(np.where(valid, alloc, 1), dtype=np.float64)
    fractions: FloatArray = np.clip(req_f / alloc_f, 0.0, 1.0)
    count = valid.sum(axis=1)
    total = np.zeros(n, dtype=np.float64)
    first = np.zeros(n, dtype=np.float64)
    second = np.zeros(n, dtype=np.float64)
    seen = np.zeros(n, dtype=np.int64)
    for j in range(r):
        v = valid[:, j]
        f = fractions[:, j]
        total = np.where(v, total + f, total)
        first = np.where(v & (seen == 0), f, first)
        second = np.where(v & (seen == 1), f, second)
        seen += v
    mean = total / np.maximum(count, 1)
    squares = np.zeros(n, dtype=np.float64)
    for j in range(r):
        d = fractions[:, j] - mean
        squares = np.where(valid[:, j], squares + d * d, squares)
    std = np.zeros(n, dtype=np.float64)
    std = np.where(count == 2, np.abs((first - second) / 2), std)
    many = count > 2
    std = np.where(many, np.sqrt(squares / np.maximum(count, 1)), std)
    # int64((1 - std) * float64(MaxNodeScore)): truncation toward zero.
    out: IntArray = ((1 - std) * float(fw.MAX_NODE_SCORE)).astype(np.int64)
    return out


def _improvement(with_pod: IntArray, without_pod: IntArray) -> IntArray:
    """``MaxNodeScore/2 + (MaxNodeScore/2 + with - without) / 2``, in place in ``with_pod``.

    Go divides int64s truncating toward zero; both balances are in [50, 100]
    (:func:`balanced_resource_score`), so the dividend is in [0, 100] and a
    shift by one is that division."""
    with_pod -= without_pod
    with_pod += _HALF_MAX
    with_pod >>= 1
    with_pod += _HALF_MAX
    return with_pod


def balanced_resource_scorer(req: IntArray, allocated: IntArray, alloc: IntArray, weights: IntArray) -> IntArray:
    """balanced_allocation.go balancedResourceScorer (v1.36.0 and later): the
    change the pod makes to the node's balance."""
    return _improvement(balanced_resource_score(req, alloc), balanced_resource_score(allocated, alloc))


def balanced_resource_scorer_v1_35(req: IntArray, allocated: IntArray, alloc: IntArray, weights: IntArray) -> IntArray:
    """balanced_allocation.go balancedResourceScorer as v1.35.4 has it: the
    node's balance with the pod."""
    return balanced_resource_score(req, alloc)


def _two_columns_score(r0: IntArray, r1: IntArray, a0: IntArray, a1: IntArray) -> IntArray:
    """:func:`balanced_resource_score` of two full columns: the same float64
    operations in the same order — ``float64(requested) /
    float64(allocatable)`` (numpy's int64 true division converts both
    operands first, as Go does), capped at 1, ``|f0 - f1| / 2`` — on 1-D
    arrays, in place."""
    f0: FloatArray = np.true_divide(r0, a0)
    f1: FloatArray = np.true_divide(r1, a1)
    return _score_of_fractions(f0, f1)


def _score_of_fractions(f0: FloatArray, f1: FloatArray) -> IntArray:
    """``int64((1 - |min(f0, 1) - min(f1, 1)| / 2) * MaxNodeScore)``, in place in ``f0`` and ``f1``."""
    np.minimum(f0, _ONE, out=f0)
    np.minimum(f1, _ONE, out=f1)
    std = np.subtract(f0, f1, out=f0)
    # x * 0.5 is x / 2 exactly (the same real value, rounded once), and cheaper.
    np.multiply(std, _HALF, out=std)
    np.abs(std, out=std)
    score = np.subtract(_ONE, std, out=std)
    np.multiply(score, _MAX_SCORE, out=score)
    out: IntArray = score.astype(np.int64)
    return out


def balanced_resource_columns(
    req: Sequence[IntArray], allocated: Sequence[IntArray], alloc: Sequence[IntArray], weights: Sequence[int]
) -> IntArray:
    """:func:`balanced_resource_scorer` on :data:`~berth.plugins.noderesources.strategies.ColumnScorer`'s
    input (every resource counted on every row). For two resources the
    balances with and without the pod are worked out side by side, as the
    two rows of one array: half the numpy calls of one after the other."""
    if len(req) != 2:
        return balanced_resource_scorer(
            np.column_stack(req), np.column_stack(allocated), np.column_stack(alloc), np.asarray(weights)
        )
    n = len(alloc[0])
    f0: FloatArray = np.empty((2, n), dtype=np.float64)
    f1: FloatArray = np.empty((2, n), dtype=np.float64)
    np.true_divide(req[0], alloc[0], out=f0[0])
    np.true_divide(allocated[0], alloc[0], out=f0[1])
    np.true_divide(req[1], alloc[1], out=f1[0])
    np.true_divide(allocated[1], alloc[1], out=f1[1])
    scores = _score_of_fractions(f0, f1)
    return _improvement(scores[0], scores[1])


def balanced_resource_columns_v1_35(
    req: Sequence[IntArray], allocated: Sequence[IntArray], alloc: Sequence[IntArray], weights: Sequence[int]
) -> IntArray:
    """:func:`balanced_resource_scorer_v1_35` on column input."""
    if len(req) != 2:
        return balanced_resource_score(np.column_stack(req), np.column_stack(alloc))
    return _two_columns_score(req[0], req[1], alloc[0], alloc[1])


#: numpy scalars for the column scorers' in-place operations.
_ONE = np.float64(1.0)
_HALF = np.float64(0.5)
_MAX_SCORE = np.float64(fw.MAX_NODE_SCORE)


def scorers_for(version: features.KubeVersion) -> tuple[Scorer, ColumnScorer]:
    """The release's balancedResourceScorer and its column form. The formula
    changed in v1.36.0 without a feature gate (balanced_allocation.go,
    kubernetes/kubernetes#135573, CHANGELOG-1.36: "The score will now take
    into consideration both balance with and without the requested pod")."""
    if version < features.KubeVersion(1, 36):
        return balanced_resource_scorer_v1_35, balanced_resource_columns_v1_35
    return balanced_resource_scorer, balanced_resource_columns


@dataclasses.dataclass(frozen=True, slots=True)
class _PreScoreState:
    """balanced_allocation.go balancedAllocationPreScoreState."""

    pod_requests: tuple[int, ...]
    #: draPreScoreState: device counts for DRA-backed scored resources, if any.
    dra: DraTotals | None = None


#: balanced_allocation.go balancedAllocationPreScoreStateKey.
PRE_SCORE_STATE_KEY: fw.StateKey[_PreScoreState] = fw.StateKey("PreScoreNodeResourcesBalancedAllocation")


class NodeResourcesBalancedAllocation:
    """kube-scheduler's NodeResourcesBalancedAllocation: PreScore and Score."""

    NAME: ClassVar[str] = "NodeResourcesBalancedAllocation"
    Args: ClassVar[type[NodeResourcesBalancedAllocationArgs]] = NodeResourcesBalancedAllocationArgs

    def __init__(self, args: NodeResourcesBalancedAllocationArgs | None = None, handle: Handle | None = None) -> None:
        self.args = args if args is not None else NodeResourcesBalancedAllocationArgs()
        self.args.validate()
        self.handle = handle
        feats = handle.features if handle is not None else features.Features.newest()
        scorer, columns = scorers_for(feats.version)
        # NewBalancedAllocation: useRequested, enablePodLevelResources from its gate.
        self.scorer = ResourceAllocationScorer(
            self.args.resources,
            scorer,
            use_requested=True,
            pod_level=feats.pod_level_resources,
            columns=columns,
        )
        self._devices = extended.ScoringSource(release=feats.version.minor) if feats.dra_extended_resource else None

    def _device_totals(self) -> DraTotals | None:
        """getDRAPreScoredParams (balanced_allocation.go PreScore, v1.37.2)."""
        if self._devices is None or self.handle is None or self.handle.dra is None:
            return None
        return self._devices.for_cycle(self.handle.dra, self.scorer.names)

    @staticmethod
    def _best_effort(pod_requests: Sequence[int]) -> bool:
        """resource_allocation.go isBestEffortPod: no request for any configured resource."""
        return all(r == 0 for r in pod_requests)

    def pre_score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.Status:
        pod_requests = tuple(self.scorer.pod_requests(pod))
        if self._best_effort(pod_requests):
            return fw.Status.skip()
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(pod_requests, self._device_totals()))
        return fw.SUCCESS

    def score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> IntArray:
        s = state.get(PRE_SCORE_STATE_KEY)
        if s is None:  # PreScore not run: compute here, as Score does in Go
            pod_requests = tuple(self.scorer.pod_requests(pod))
            if self._best_effort(pod_requests):
                return np.zeros(len(rows), dtype=np.int64)
            dra = self._device_totals()
        else:
            pod_requests, dra = s.pod_requests, s.dra
        return self.scorer.score(nodes, rows, pod_requests, fw.score_memo(state, nodes, rows), dra)
