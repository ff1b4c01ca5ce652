"""NodeResourcesFit: does the node have room for the pod, and how full would it be?

Mirrors kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/noderesources/fit.go``:
PreFilter computes the pod's request once (``computePodResourceRequest``:
``resource.PodRequests`` — containers summed, raised to the largest init
container, sidecars, pod-level resources, overhead); Filter (``fitsRequest``)
checks, over all candidate rows at once, ``requested + podRequest >
allocatable`` for the pod count ("Too many pods"), cpu, memory,
ephemeral-storage and every scalar resource the pod requests (extended,
hugepages, ``*kubernetes.io/*``), skipping extended resources listed in
``ignoredResources`` / whose domain is in ``ignoredResourceGroups``. A node
failing several resources reports all of them, in that order. The status is
Unschedulable, or UnschedulableAndUnresolvable when a failing request exceeds
the node's whole allocatable (``InsufficientResource.Unresolvable``: evicting
pods cannot help, so preemption skips the node). PreScore/Score score with the
configured strategy (:mod:`berth.plugins.noderesources.strategies`), and
there, unlike in PreFilter/Filter, the pod's request ignores pod-level
resources (``spec.resources``): ``nodeResourceStrategyTypeMap`` (fit.go,
unchanged from v1.34 to v1.37.2) builds the scorer without ``enablePodLevelResources``, so
``calculatePodResourceRequest`` (resource_allocation.go) passes
``SkipPodLevelResources: true`` and a pod is scored by its containers (with
the 100m / 200Mi defaults) plus overhead; BalancedAllocation does use them. The
arguments are :class:`~berth.plugins.noderesources.args.NodeResourcesFitArgs`.

Extended resources backed by DRA (``DRAExtendedResource``, on from 1.36):
``shouldDelegateResourceToDRA`` leaves a request that a DeviceClass names
(:mod:`berth.dra.extended`) to DynamicResources on every node whose
allocatable has none of it (no device plugin provides it there).

Scoring counts such a resource, on a node without allocatable of it, in
devices of the class that names it (``calculateDRAExtendedResourceAllocatableRequest``;
only for a resource in the scoring strategy's list, cpu and memory by
default: :class:`berth.dra.extended.ScoringSource`).

Not followed from v1.37.2: the deltas of a bound pod
whose resize is deferred (``InPlacePodVerticalScalingSchedulerPreemption``,
alpha, off); ``SignPod`` and ``ScorePlacement`` (opportunistic batching and
topology-aware workload scheduling, alpha).
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
from berth.cluster import resources
from berth.dra import extended
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.plugins.noderesources.args import NodeResourcesFitArgs
from berth.plugins.noderesources.strategies import DraTotals, scorer_for

__all__ = ["PRE_SCORE_STATE_KEY", "STATE_KEY", "NodeResourcesFit"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_TOO_MANY_PODS = "Too many pods"
#: cpu, memory, ephemeral-storage, pods: checked by name, never as scalar resources.
_FIXED = frozenset((resources.CPU, resources.MEMORY, resources.EPHEMERAL_STORAGE, resources.PODS))


@dataclasses.dataclass(frozen=True, slots=True)
class _PreFilterState:
    """fit.go preFilterState: the pod's request and what Filter checks, in reason order."""

    request: IntArray
    names: tuple[str, ...]
    amounts: tuple[int, ...]
    #: Of ``names``, those a DeviceClass backs (DRAExtendedResource): not
    #: checked on a node without allocatable of them.
    dra_backed: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True, slots=True)
class _PreScoreState:
    """fit.go preScoreState: the pod's request per configured scoring resource."""

    pod_requests: tuple[int, ...]
    #: draPreScoreState: device counts for DRA-backed scored resources, if any.
    dra: DraTotals | None = None


#: fit.go preFilterStateKey.
STATE_KEY: fw.StateKey[_PreFilterState] = fw.StateKey("PreFilterNodeResourcesFit")
#: fit.go preScoreStateKey.
PRE_SCORE_STATE_KEY: fw.StateKey[_PreScoreState] = fw.StateKey("PreScoreNodeResourcesFit")


class NodeResourcesFit:
    """kube-scheduler's NodeResourcesFit (fit.go): PreFilter, Filter, PreScore, Score."""

    NAME: ClassVar[str] = "NodeResourcesFit"
    Args: ClassVar[type[NodeResourcesFitArgs]] = NodeResourcesFitArgs

    def __init__(self, args: NodeResourcesFitArgs | None = None, handle: Handle | None = None) -> None:
        feats = handle.features if handle is not None else features.Features.newest()
        self.args = args if args is not None else NodeResourcesFitArgs()
        self.args.validate(feats)
        self.handle = handle
        self.dra_extended_resource = feats.dra_extended_resource
        self._classes = extended.ResolverCache()
        self._devices = extended.ScoringSource(release=feats.version.minor) if feats.dra_extended_resource else None
        self.ignored_resources = frozenset(self.args.ignored_resources)
        self.ignored_groups = frozenset(self.args.ignored_resource_groups)
        assert self.args.scoring_strategy is not None
        self.scorer = scorer_for(self.args.scoring_strategy)

    # ------------------------------------------------------------ queueing

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        """fit.go EventsToRegister (InPlacePodVerticalScaling on, no queueing
        hints), with DeviceClass add / update while DRAExtendedResource is on
        (v1.37.2: a class may come to name the extended resource a pod asks for)."""
        events = [
            fw.ClusterEvent("AssignedPod", fw.ActionType.DELETE | fw.ActionType.UPDATE_POD_SCALE_DOWN),
            fw.ClusterEvent(
                "Node",
                fw.ActionType.ADD
                | fw.ActionType.UPDATE_NODE_ALLOCATABLE
                | fw.ActionType.UPDATE_NODE_TAINT
                | fw.ActionType.UPDATE_NODE_LABEL,
            ),
        ]
        if self.dra_extended_resource:
            events.append(fw.ClusterEvent("DeviceClass", fw.ActionType.ADD | fw.ActionType.UPDATE))
        return tuple(events)

    # ------------------------------------------------------------ filtering

    def _ignored(self, name: str) -> bool:
        if not resources.is_extended(name):
            return False
        return name in self.ignored_resources or (
            bool(self.ignored_groups) and name.split("/", 1)[0] in self.ignored_groups
        )

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        reqs = pod.requests
        names: list[str] = [
            n for n in (resources.CPU, resources.MEMORY, resources.EPHEMERAL_STORAGE) if reqs.get(n, 0) > 0
        ]
        # Go ranges over a map here (random order); Berth reports scalars by name.
        for name in sorted(reqs):
            if name in _FIXED or reqs[name] <= 0 or not resources.is_scalar(name):
                continue
            if self._ignored(name):
                continue
            names.append(name)
        request = nodes.vector(reqs)
        backed: frozenset[str] = frozenset()
        if self.dra_extended_resource and self.handle is not None and self.handle.dra is not None:
            resolver = self._classes.get(self.handle.dra)
            backed = frozenset(n for n in names if resolver.device_class(n) is not None)
        state.write(STATE_KEY, _PreFilterState(request, tuple(names), tuple(reqs[n] for n in names), backed))
        return fw.PreFilterResult()

    def filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.NodeVerdicts:
        s = state.get(STATE_KEY)
        n = len(rows)
        if s is None:
            err = fw.Status.error(f'error reading "{STATE_KEY.name}" from cycleState: not found', plugin=self.NAME)
            return fw.NodeVerdicts.fail_where(np.ones(n, dtype=bool), err)
        index = nodes.columns.index
        pods = index[resources.PODS]
        size = nodes.size
        # Compare whole contiguous columns, then pick the rows: cheaper than
        # gathering every row of every column first. Most cycles find every
        # candidate with room: one pass over the columns says so, and only
        # when a row fails are the reasons worked out.
        cols_at = nodes.alloc[:size], nodes.req[:size]
        full = cols_at[1][:, pods] >= cols_at[0][:, pods]
        for name, amount in zip(s.names, s.amounts, strict=True):
            c = index[name]
            short_of = cols_at[0][:, c] - cols_at[1][:, c] < amount
            if name in s.dra_backed:
                short_of &= cols_at[0][:, c] > 0  # shouldDelegateResourceToDRA
            full |= short_of
        # Rarely any row is full at all: a scan of the contiguous column
        # says so before the (costlier) gather of the candidate rows.
        if not full.any():
            return fw.NodeVerdicts.all_ok(n)
        bad: BoolArray = full[rows]
        if not bad.any():
            return fw.NodeVerdicts.all_ok(n)
        # Some rows are full: the reasons are worked out for those rows only
        # (``full`` is exactly "too many pods or short of some resource").
        # Once nodes fill up (PreemptionAsync: 4 low-priority pods a node)
        # some rows are full for every pod, and gathering every candidate
        # row's columns to name them was most of this plugin's time.
        at = np.flatnonzero(bad)
        sub = rows[at]
        too_many = nodes.req[sub, pods] >= nodes.alloc[sub, pods]
        labels = [_TOO_MANY_PODS]
        if s.names:
            cols = np.asarray([index[name] for name in s.names], dtype=np.int64)
            need = np.asarray(s.amounts, dtype=np.int64)
            alloc_sub = nodes.alloc[np.ix_(sub, cols)]
            short = need > alloc_sub - nodes.req[np.ix_(sub, cols)]
            if s.dra_backed:
                backed = np.asarray([name in s.dra_backed for name in s.names], dtype=bool)
                short &= ~(backed & (alloc_sub <= 0))
            unresolvable: BoolArray = np.asarray((short & (need > alloc_sub)).any(axis=1), dtype=bool)
            failed = np.column_stack([too_many, short])
            labels.extend(f"Insufficient {name}" for name in s.names)
        else:
            unresolvable = np.zeros(len(at), dtype=bool)
            failed = too_many[:, None]
        masks, inverse = _distinct_rows(np.column_stack([failed, unresolvable]))
        statuses = []
        for mask in masks:
            reasons = tuple(label for label, hit in zip(labels, mask[:-1], strict=True) if hit)
            code = fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE if mask[-1] else fw.Code.UNSCHEDULABLE
            statuses.append(fw.Status(code, reasons, self.NAME))
        reason = np.zeros(n, dtype=np.int32)
        reason[at] = inverse
        return fw.NodeVerdicts(~bad, statuses, reason)

    # ------------------------------------------------------------ scoring

    def pre_score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.Status:
        state.write(PRE_SCORE_STATE_KEY, self._pre_score_state(pod))
        return fw.SUCCESS

    def _pre_score_state(self, pod: PodInfo) -> _PreScoreState:
        """fit.go PreScore's state (and Score's, when PreScore did not run)."""
        dra = None
        if self._devices is not None and self.handle is not None and self.handle.dra is not None:
            dra = self._devices.for_cycle(self.handle.dra, self.scorer.names)
        return _PreScoreState(tuple(self.scorer.pod_requests(pod)), dra)

    def score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> IntArray:
        s = state.get(PRE_SCORE_STATE_KEY) or self._pre_score_state(pod)
        return self.scorer.score(nodes, rows, s.pod_requests, fw.score_memo(state, nodes, rows), s.dra)


def _distinct_rows(matrix: BoolArray) -> tuple[BoolArray, npt.NDArray[np.int32]]:
    """The distinct rows of a boolean matrix and, per row, which one it is.

    Rows become integer bitmasks when they fit in 62 bits (the common case:
    a handful of resources), else ``np.unique(axis=0)`` does the work.
    """
    width = matrix.shape[1]
    if width <= 62:
        weights = np.left_shift(np.int64(1), np.arange(width, dtype=np.int64))
        keys = matrix.astype(np.int64) @ weights
        uniq, inverse = np.unique(keys, return_inverse=True)
        masks = ((uniq[:, None] >> np.arange(width, dtype=np.int64)) & 1).astype(bool)
        return masks, inverse.reshape(-1).astype(np.int32)
    masks, inverse = np.unique(matrix, axis=0, return_inverse=True)
    return masks, inverse.reshape(-1).astype(np.int32)
