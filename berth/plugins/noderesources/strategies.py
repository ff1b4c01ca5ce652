"""The noderesources scoring strategies and the resource-allocation scoring they share.

The scoring NodeResourcesFit and NodeResourcesBalancedAllocation share, as
kube-scheduler v1.37.2's ``pkg/scheduler/framework/plugins/noderesources``
splits it: ``resource_allocation.go`` (:class:`ResourceAllocationScorer` sums,
per configured resource, the node's requested amount and the pod's, and
hands a scorer both sums — with the pod and without it, ``requested`` and
``allocated``, since v1.36 — and the allocatable amounts; cpu and
memory use the *non-zero* amounts — a container that does not request them
counts 100m / 200Mi, :func:`non_missing_requests` — unless ``useRequested``;
an extended resource the pod does not request, and a resource the node does
not have, are left out; pod-level resources, ``spec.resources``, count only
where the scorer enables them — BalancedAllocation does, NodeResourcesFit
does not: :class:`ResourceAllocationScorer`), ``least_allocated.go`` / ``most_allocated.go`` /
``requested_to_capacity_ratio.go`` (+ ``helper/shape_score.go``'s
:func:`broken_linear`): the three scoring strategies, with Go's integer
arithmetic (truncating division, ``math.Round`` for RequestedToCapacityRatio),
vectorised over node rows; and ``fit.go``'s ``nodeResourceStrategyTypeMap``
(:func:`scorer_for`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model, resources
from berth.framework import interface as fw
from berth.plugins.noderesources.args import (
    LEAST_ALLOCATED,
    MAX_CUSTOM_PRIORITY_SCORE,
    MAX_UTILIZATION,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
)

__all__ = [
    "ColumnScorer",
    "DraTotals",
    "ResourceAllocationScorer",
    "Scorer",
    "broken_linear",
    "least_allocated_columns",
    "non_missing_requests",
    "scorer_for",
]

IntArray = npt.NDArray[np.int64]
#: A cycle's device counts for DRA-backed extended resources:
#: (resource, node) -> (devices, allocated), None where no class backs it.
DraTotals = Callable[[str, model.Node], "tuple[int, int] | None"]

#: Amounts above this go through exact (Python int) arithmetic: below it,
#: ``amount * MaxNodeScore`` summed over a few resources stays in int64.
_SAFE = np.iinfo(np.int64).max // (16 * fw.MAX_NODE_SCORE)


#: numpy scalars for the column scorers' in-place operations (a Python int
#: operand costs a conversion per call).
_MAX_SCORE = np.int64(fw.MAX_NODE_SCORE)
_ZERO = np.int64(0)


# ---------------------------------------------------------------- requests


def _is_scalar(name: str) -> bool:
    return resources.is_scalar(name)


def _without_pod_level(pod: model.Pod) -> model.Pod:
    """The pod as ``PodResourcesOptions{SkipPodLevelResources: true}`` sees it."""
    if pod.spec.resources is None:
        return pod
    return msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, resources=None))


def non_missing_requests(pod: model.Pod, *, skip_pod_level: bool = False) -> dict[str, int]:
    """``resource.PodRequests`` with ``NonMissingContainerRequests`` {cpu: 100m, memory: 200Mi}.

    A container (init containers included) whose requests — after the API
    server copied missing requests from limits — do not *name* cpu or memory
    counts the default; an explicit ``cpu: 0`` stays 0 (component-helpers
    ``applyNonMissing``). Done by adding the defaults to a copy of the pod and
    summing it with :func:`resources.pod_requests`. With ``skip_pod_level``
    the pod's ``spec.resources`` are ignored (``SkipPodLevelResources``).
    """
    if skip_pod_level:
        pod = _without_pod_level(pod)
    spec = pod.spec

    def with_defaults(c: model.Container) -> model.Container:
        res = c.resources
        named = set(res.requests) | set(res.limits) if res is not None else set()
        add: dict[str, model.Quantity] = {}
        if resources.CPU not in named:
            add[resources.CPU] = f"{resources.DEFAULT_MILLI_CPU_REQUEST}m"
        if resources.MEMORY not in named:
            add[resources.MEMORY] = resources.DEFAULT_MEMORY_REQUEST
        if not add:
            return c
        requests = {**(res.requests if res is not None else {}), **add}
        limits = dict(res.limits) if res is not None else {}
        return msgspec.structs.replace(c, resources=model.ResourceRequirements(requests=requests, limits=limits))

    patched = msgspec.structs.replace(
        spec,
        containers=[with_defaults(c) for c in spec.containers],
        init_containers=[with_defaults(c) for c in spec.init_containers],
    )
    return resources.pod_requests(msgspec.structs.replace(pod, spec=patched))


# ---------------------------------------------------------------- scoring


def _trunc_div(a: IntArray, b: IntArray | int) -> IntArray:
    """Go's integer division (truncates toward zero) for a positive divisor."""
    q: IntArray = np.where(a >= 0, a // b, -((-a) // b))
    return q


def broken_linear(shape: Sequence[tuple[int, int]], p: IntArray) -> IntArray:
    """helper.BuildBrokenLinearFunction over an array of utilizations.

    ``shape`` is (utilization, score) points in increasing utilization.
    """
    out = np.full(p.shape, shape[-1][1], dtype=np.int64)
    done = np.zeros(p.shape, dtype=bool)
    for i, (u, s) in enumerate(shape):
        hit = (p <= u) & ~done
        if not hit.any():
            continue
        if i == 0:
            val: IntArray | int = s
        else:
            u0, s0 = shape[i - 1]
            val = s0 + _trunc_div((s - s0) * (p - u0), u - u0)
        out = np.where(hit, val, out)
        done |= hit
    return out


def _gather(table: IntArray, rows: IntArray, cols: list[int]) -> IntArray:
    """``table[rows][:, cols]``: whole rows first (one contiguous take), then
    the columns — several times faster than ``table[np.ix_(rows, cols)]``.
    The result is C-contiguous: the dozen operations scoring does on it
    then run about twice as fast as on a strided view."""
    picked = table.take(rows, axis=0)
    if cols == list(range(cols[0], cols[-1] + 1)):
        out: IntArray = np.ascontiguousarray(picked[:, cols[0] : cols[-1] + 1])
        return out
    return picked[:, cols]


#: requested (the pod's request added) [n, R], allocated (without it) [n, R],
#: allocatable [n, R] (0 = resource left out), weights [R] -> scores [n]:
#: resource_allocation.go's ``scorer func(requested, allocated, allocatable
#: []int64) int64`` (v1.36+), vectorised. The arrays are int64, or Python
#: ints (dtype object) for absurd amounts
#: (:meth:`ResourceAllocationScorer.node_allocatable_request`).
Scorer = Callable[[IntArray, IntArray, IntArray, IntArray], IntArray]


def _least_allocated(req: IntArray, _allocated: IntArray, alloc: IntArray, weights: IntArray) -> IntArray:
    """least_allocated.go leastResourceScorer / leastRequestedScore."""
    valid = alloc > 0
    weight_sum = int(weights.sum())
    if alloc.dtype == np.int64 and weight_sum > 0 and valid.all():
        # Every resource counted on every row (the default profiles): the
        # same integer arithmetic without the masks.
        per = np.where(req > alloc, 0, (alloc - req) * fw.MAX_NODE_SCORE // alloc)
        fast: IntArray = (per @ weights) // weight_sum
        return fast
    safe = np.where(valid, alloc, 1)
    per = np.where(req > alloc, 0, (alloc - req) * fw.MAX_NODE_SCORE // safe)
    w = np.where(valid, weights, 0)
    node_score = (per * w).sum(axis=1)
    weight_sum = w.sum(axis=1)
    out: IntArray = np.where(weight_sum == 0, 0, node_score // np.maximum(weight_sum, 1))
    return out


#: The resource scorers' form for the common case, one 1-D array per
#: configured resource: requested (the pod's added; never negative),
#: allocated (the node's alone; never negative) and allocatable (at least 1:
#: every resource counts on every row), every amount at most ``_SAFE``,
#: weights with a positive sum -> scores. Each
#: gives its general scorer's answer exactly on such input
#: (tests/plugins/test_score_fast_paths.py) with fewer numpy operations on
#: contiguous arrays (:meth:`ResourceAllocationScorer.score`). The weights
#: come as Python ints.
ColumnScorer = Callable[[Sequence[IntArray], Sequence[IntArray], Sequence[IntArray], Sequence[int]], IntArray]


def least_allocated_columns(
    req: Sequence[IntArray], _allocated: Sequence[IntArray], alloc: Sequence[IntArray], weights: Sequence[int]
) -> IntArray:
    """:func:`_least_allocated` per column: ``(alloc - req) * MaxNodeScore //
    alloc``, which is negative exactly where requested exceeds capacity, so
    clamping it at 0 is leastRequestedScore's ``requested > capacity: 0``."""
    total: IntArray | None = None
    for q, a, w in zip(req, alloc, weights, strict=True):
        per: IntArray = a - q
        np.multiply(per, _MAX_SCORE, out=per)
        per //= a
        np.maximum(per, _ZERO, out=per)
        if w != 1:
            per *= w
        if total is None:
            total = per
        else:
            total += per
    assert total is not None
    weight_sum = sum(weights)
    if weight_sum & (weight_sum - 1) == 0 and all(w > 0 for w in weights):
        # A power of two over a non-negative total (every term is): the
        # same floor division as a shift, several times cheaper in numpy.
        total >>= weight_sum.bit_length() - 1
    else:
        total //= weight_sum
    return total


def _most_allocated(req: IntArray, _allocated: IntArray, alloc: IntArray, weights: IntArray) -> IntArray:
    """most_allocated.go mostResourceScorer / mostRequestedScore (requested capped at capacity)."""
    valid = alloc > 0
    safe = np.where(valid, alloc, 1)
    per = np.minimum(req, alloc) * fw.MAX_NODE_SCORE // safe
    w = np.where(valid, weights, 0)
    node_score = (per * w).sum(axis=1)
    weight_sum = w.sum(axis=1)
    out: IntArray = np.where(weight_sum == 0, 0, node_score // np.maximum(weight_sum, 1))
    return out


def _requested_to_capacity_ratio(shape: Sequence[UtilizationShapePoint]) -> Scorer:
    """requested_to_capacity_ratio.go: a broken-linear function of utilization.

    Shape scores (0..MaxCustomPriorityScore) are scaled to 0..MaxNodeScore; only
    resources scoring above 0 count, and the weighted mean is ``math.Round``-ed.
    """
    scale = fw.MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    points = [(p.utilization, p.score * scale) for p in shape]

    def score(req: IntArray, _allocated: IntArray, alloc: IntArray, weights: IntArray) -> IntArray:
        valid = alloc > 0
        safe = np.where(valid, alloc, 1)
        # scaledUtilization: requested clamped to [0, capacity], so util is in [0, maxUtilization].
        util = np.asarray(np.where(req > alloc, MAX_UTILIZATION, req * MAX_UTILIZATION // safe), dtype=np.int64)
        per = broken_linear(points, util)
        counted = valid & (per > 0)
        w = np.where(counted, weights, 0)
        node_score = (per * w).sum(axis=1)
        weight_sum = w.sum(axis=1)
        # math.Round(float64(nodeScore)/float64(weightSum)) for non-negative operands.
        rounded = (2 * node_score + weight_sum) // np.maximum(2 * weight_sum, 1)
        out: IntArray = np.where(weight_sum == 0, 0, rounded)
        return out

    return score


class ResourceAllocationScorer:
    """resource_allocation.go resourceAllocationScorer, vectorised over rows.

    ``use_requested`` picks ``NodeInfo.Requested`` (and the pod's plain
    requests) over ``NonZeroRequested`` (and requests with the 100m / 200Mi
    defaults) for cpu and memory. ``pod_level`` is the scorer's
    ``enablePodLevelResources``: the pod's own request
    (``calculatePodResourceRequest``) honours ``spec.resources`` only when it
    is set (``SkipPodLevelResources: !r.enablePodLevelResources``,
    resource_allocation.go ``calculatePodResourceRequest``, v1.37.2 as
    v1.34). It is set for BalancedAllocation (``NewBalancedAllocation``:
    ``enablePodLevelResources: fts.EnablePodLevelResources``) but never for
    NodeResourcesFit's scorer (fit.go ``nodeResourceStrategyTypeMap`` builds
    it with only Name, scorer and resources), so Fit scores pod-level pods by
    their containers. The node side (``Requested`` / ``NonZeroRequested``) is
    the cache's and includes pod-level resources either way. Since v1.36 the
    scorer is handed the node's amounts with and without the pod
    (:data:`Scorer`); only BalancedAllocation's reads the latter.
    """

    def __init__(
        self,
        specs: Sequence[ResourceSpec],
        scorer: Scorer,
        *,
        use_requested: bool,
        pod_level: bool,
        columns: ColumnScorer | None = None,
    ) -> None:
        self.names = [s.name for s in specs]
        self.weights = np.asarray([s.weight for s in specs], dtype=np.int64)
        self.scorer = scorer
        #: ``scorer``'s :data:`ColumnScorer` form, if it has one.
        self.column_scorer = columns
        self._weights = tuple(int(w) for w in self.weights)
        self.use_requested = use_requested
        self.pod_level = pod_level
        # _columns' answer for the table columns it was last asked about.
        self._columns_of: tuple[list[str], int, range | None] | None = None

    def _columns(self, nodes: NodeTable) -> range | None:
        """The consecutive columns holding the configured resources, in
        order, when every one is cpu or memory (read from one array,
        never left out for being unrequested): the default profiles'
        case, which :meth:`node_allocatable_request` serves without its
        per-resource bookkeeping. None otherwise. Remembered per column
        layout (columns are only ever appended)."""
        names = nodes.columns.names
        cached = self._columns_of
        if cached is not None and cached[0] is names and cached[1] == len(names):
            return cached[2]
        index = nodes.columns.index
        cols = [index.get(n) for n in self.names]
        span: range | None = None
        if (
            cols
            and all(n in (resources.CPU, resources.MEMORY) for n in self.names)
            and all(c is not None for c in cols)
            and cols == list(range(cols[0] or 0, (cols[0] or 0) + len(cols)))
        ):
            span = range(cols[0] or 0, (cols[0] or 0) + len(cols))
        self._columns_of = (names, len(names), span)
        return span

    def pod_requests(self, pod: PodInfo) -> list[int]:
        """calculatePodResourceRequestList: the pod's request for each configured resource."""
        if not self.use_requested:
            if self.pod_level or pod.pod.spec.resources is None:
                # non_missing_requests without skipping pod-level resources
                # (or with none to skip) is the pod's NonZero requests, which
                # PodInfo computed once: no copy of the pod per cycle.
                reqs = pod.non_zero
            else:
                reqs = non_missing_requests(pod.pod, skip_pod_level=True)
        elif self.pod_level or pod.pod.spec.resources is None:
            reqs = pod.requests
        else:
            reqs = resources.pod_requests(_without_pod_level(pod.pod))
        return [reqs.get(name, 0) for name in self.names]

    def node_allocatable_request(
        self, nodes: NodeTable, rows: IntArray, pod_requests: Sequence[int], dra: DraTotals | None = None
    ) -> tuple[IntArray, IntArray, IntArray]:
        """calculateNodeAllocatableRequest (resource_allocation.go v1.37.2):
        ``[n, R]`` arrays (requested, allocated, allocatable), 0 = left out;
        requested is allocated plus the pod's request.

        Normally int64. When an amount is big enough that ``requested *
        MaxNodeScore`` or ``node requested + pod request`` could overflow
        (each amount fits an int64, :mod:`berth.cluster.resources` sees to
        that, their products may not), the arrays hold Python ints instead
        (dtype object): exact, as upstream's ``scaledUtilization`` is with
        its 128-bit intermediate, and as fast as it matters for absurd input.
        Requested and allocated amounts are clamped at 0 (a node's sums of
        non-negative requests are never below it; only hand-made tables are).

        ``dra`` (DRAExtendedResource, a cycle's :class:`~berth.dra.extended.DeviceTotals`):
        a scored extended resource the pod requests and a node has no
        allocatable of counts, there, the devices of the DeviceClass naming
        it, and those allocated (``calculateResourceAllocatableRequest``).
        """
        n, r = len(rows), len(self.names)
        span = self._columns(nodes)
        if span is not None and n and max(pod_requests) <= _SAFE and min(pod_requests) >= -_SAFE:
            # The general path below, for one block of consecutive columns.
            at_span = list(span)
            allocatable = _gather(nodes.alloc, rows, at_span)
            requested = _gather(nodes.req if self.use_requested else nodes.req_nz, rows, at_span)
            if int(allocatable.max()) <= _SAFE and int(requested.max()) <= _SAFE:
                total = requested + np.asarray(pod_requests, dtype=np.int64)
                if not allocatable.all():
                    total = np.where(allocatable == 0, 0, total)
                    requested = np.where(allocatable == 0, 0, requested)
                return np.maximum(total, 0), np.maximum(requested, 0), allocatable
        index = nodes.columns.index
        # Per source array (req or req_nz): [(output position, column, pod request)].
        picked: dict[int, tuple[IntArray, list[tuple[int, int, int]]]] = {}
        for i, (name, pod_req) in enumerate(zip(self.names, pod_requests, strict=True)):
            if pod_req == 0 and _is_scalar(name):
                continue  # an extended resource the pod does not request is not scored
            if name in (resources.CPU, resources.MEMORY):
                source = nodes.req if self.use_requested else nodes.req_nz
            elif name == resources.EPHEMERAL_STORAGE or _is_scalar(name):
                source = nodes.req
            else:
                continue  # not a resource NodeInfo tracks ("pods", unqualified names)
            c = index.get(name)
            if c is None:
                continue  # no node has it: allocatable 0
            picked.setdefault(id(source), (source, []))[1].append((i, c, pod_req))
        # One gather per source array: [n, k] blocks, placed at their positions.
        blocks = []
        for source, cols in picked.values():
            at = [c for _, c, _ in cols]
            pod = np.asarray([q for _, _, q in cols], dtype=np.int64)
            blocks.append(([i for i, _, _ in cols], _gather(nodes.alloc, rows, at), _gather(source, rows, at), pod))
        # Only large positive amounts can carry the arithmetic past int64: a
        # node's requested amounts are sums of non-negative requests, and a
        # negative allocatable leaves its column out of the row's score
        # (weight 0) whatever the arithmetic gave there.
        exact = any(
            max(pod_req for _, _, pod_req in cols) > _SAFE or min(pod_req for _, _, pod_req in cols) < -_SAFE
            for _, cols in picked.values()
        ) or any(n and max(int(a.max()), int(q.max())) > _SAFE for _, a, q, _ in blocks)
        if not exact and len(blocks) == 1 and blocks[0][0] == list(range(r)):
            # Every configured resource from one array, in order (the default profiles).
            _, alloc, allocated, pod = blocks[0]
            req = allocated + pod
        else:
            dtype: type = object if exact else np.int64
            alloc = np.zeros((n, r), dtype=dtype)
            allocated = np.zeros((n, r), dtype=dtype)
            req = np.zeros((n, r), dtype=dtype)
            for at, a, q, pod in blocks:
                alloc[:, at] = a.astype(object) if exact else a
                allocated[:, at] = q.astype(object) if exact else q
                req[:, at] = (q.astype(object) + pod.astype(object)) if exact else q + pod
        if dra is not None:
            req, allocated, alloc = self._with_devices(nodes, rows, pod_requests, dra, req, allocated, alloc)
        # "Only fill the extended resource entry when it's non-zero."
        left_out = alloc == 0
        req = np.maximum(np.where(left_out, 0, req), 0)
        allocated = np.maximum(np.where(left_out, 0, allocated), 0)
        return req, allocated, alloc

    def _with_devices(
        self,
        nodes: NodeTable,
        rows: IntArray,
        pod_requests: Sequence[int],
        dra: DraTotals,
        req: IntArray,
        allocated: IntArray,
        alloc: IntArray,
    ) -> tuple[IntArray, IntArray, IntArray]:
        """The DRA-backed resources' amounts, where a node has no allocatable of them."""
        req, allocated, alloc = req.copy(), allocated.copy(), alloc.copy()
        for i, (name, pod_req) in enumerate(zip(self.names, pod_requests, strict=True)):
            if pod_req == 0 or not _is_scalar(name):
                continue
            for k, row in enumerate(rows.tolist()):
                if alloc[k, i] != 0:
                    continue
                got = dra(name, nodes.node(row))
                if got is not None and got[0] > 0:
                    alloc[k, i], allocated[k, i], req[k, i] = got[0], got[1], got[1] + pod_req
        return req, allocated, alloc

    def columns(
        self, nodes: NodeTable, rows: IntArray, pod_requests: Sequence[int], memo: dict[Any, Any]
    ) -> tuple[list[IntArray], list[IntArray], list[IntArray]] | None:
        """:meth:`node_allocatable_request` as per-resource columns (requested,
        allocated, allocatable) when they meet :data:`ColumnScorer`'s terms, else None.

        Only for the default profiles' layout (cpu and/or memory in
        consecutive columns, :meth:`_columns`), a pod requesting at most
        ``_SAFE`` of each, and rows whose allocatable is in ``[1, _SAFE]`` and
        requested in ``[0, _SAFE]``: then the general computation adds the
        pod's request, leaves nothing out and clamps nothing, which is what
        the columns hold. ``memo`` keeps each table column's gathered rows and
        their checks: the scorers of one ``run_score`` call (Fit and
        BalancedAllocation both read allocatable) share them
        (:class:`fw.ScoreScratch`); the returned arrays are not written to.
        """
        span = self._columns(nodes)
        if span is None or sum(self._weights) <= 0:
            return None
        if not all(0 <= p <= _SAFE for p in pod_requests):
            return None
        source = nodes.req if self.use_requested else nodes.req_nz
        req: list[IntArray] = []
        allocated: list[IntArray] = []
        alloc: list[IntArray] = []
        for c, p in zip(span, pod_requests, strict=True):
            a = _column(memo, nodes.alloc, rows, c, 1)
            q = _column(memo, source, rows, c, 0)
            if a is None or q is None:
                return None
            alloc.append(a)
            allocated.append(q)
            req.append(q + p if p else q)
        return req, allocated, alloc

    def score(
        self,
        nodes: NodeTable,
        rows: IntArray,
        pod_requests: Sequence[int],
        memo: dict[Any, Any] | None = None,
        dra: DraTotals | None = None,
    ) -> IntArray:
        """The rows' scores. ``memo``: the ``run_score`` call's shared work
        (:meth:`columns`); ``dra``: see :meth:`node_allocatable_request`."""
        if len(rows) == 0:
            return np.zeros(0, dtype=np.int64)
        if self.column_scorer is not None and dra is None:
            cols = self.columns(nodes, rows, pod_requests, memo if memo is not None else {})
            if cols is not None:
                fast: IntArray = self.column_scorer(cols[0], cols[1], cols[2], self._weights)
                return fast
        req, allocated, alloc = self.node_allocatable_request(nodes, rows, pod_requests, dra)
        out: IntArray = np.asarray(self.scorer(req, allocated, alloc, self.weights), dtype=np.int64)
        return out


def _column(memo: dict[Any, Any], table: IntArray, rows: IntArray, c: int, low: int) -> IntArray | None:
    """``table[rows, c]`` (contiguous) if every amount is in ``[low, _SAFE]``, else None; memoised."""
    key = (id(table), c, low)
    if key in memo:
        hit: IntArray | None = memo[key]
        return hit
    # Indexing the column view: several times faster than .take on a strided view.
    col: IntArray = table[:, c][rows]
    # As unsigned, an amount below ``low`` is huge: one reduction checks both ends.
    shifted = col - low if low else col
    ok = not col.size or int(np.maximum.reduce(shifted.view(np.uint64))) <= _SAFE - low
    memo[key] = col if ok else None
    return col if ok else None


def scorer_for(strategy: ScoringStrategy) -> ResourceAllocationScorer:
    """fit.go nodeResourceStrategyTypeMap."""
    columns: ColumnScorer | None = None
    if strategy.type == LEAST_ALLOCATED:
        fn: Scorer = _least_allocated
        columns = least_allocated_columns
    elif strategy.type == MOST_ALLOCATED:
        fn = _most_allocated
    elif strategy.type == REQUESTED_TO_CAPACITY_RATIO:
        assert strategy.requested_to_capacity_ratio is not None
        fn = _requested_to_capacity_ratio(strategy.requested_to_capacity_ratio.shape)
    else:  # validate() rejects it first
        raise ValueError(f"scoring strategy {strategy.type} is not supported")
    # fit.go builds these scorers without enablePodLevelResources (see ResourceAllocationScorer).
    return ResourceAllocationScorer(strategy.resources, fn, use_requested=False, pod_level=False, columns=columns)
