"""NodeResourcesFit: does the node have room for the pod, and how full would it be?

Mirrors kube-scheduler v1.34 ``pkg/scheduler/framework/plugins/noderesources``:

- ``fit.go``: PreFilter computes the pod's request once
  (``computePodResourceRequest``: ``resource.PodRequests`` — containers summed,
  raised to the largest init container, sidecars, pod-level resources,
  overhead); Filter (``fitsRequest``) checks, over all candidate rows at once,
  ``requested + podRequest > allocatable`` for the pod count ("Too many
  pods"), cpu, memory, ephemeral-storage and every scalar resource the pod
  requests (extended, hugepages, ``*kubernetes.io/*``), skipping extended
  resources listed in ``ignoredResources`` / whose domain is in
  ``ignoredResourceGroups``. A node failing several resources reports all of
  them, in that order. The status is Unschedulable, or
  UnschedulableAndUnresolvable when a failing request exceeds the node's
  whole allocatable (``InsufficientResource.Unresolvable``: evicting pods
  cannot help, so preemption skips the node).
- ``resource_allocation.go``: Score sums, per configured resource, the node's
  requested amount and the pod's; cpu and memory use the *non-zero* amounts
  (a container that does not request them counts 100m / 200Mi) unless
  ``useRequested``; an extended resource the pod does not request, and a
  resource the node does not have, are left out.
- ``least_allocated.go`` / ``most_allocated.go`` /
  ``requested_to_capacity_ratio.go`` (+ ``helper/shape_score.go``): the three
  scoring strategies, with Go's integer arithmetic (truncating division,
  ``math.Round`` for RequestedToCapacityRatio).
- Arguments: ``NodeResourcesFitArgs`` with ``apis/config/v1/defaults.go``'s
  defaulting (no strategy -> LeastAllocated; no resources -> cpu:1, memory:1;
  weight 0 -> 1) and ``apis/config/validation/validation_pluginargs.go``'s
  ``ValidateNodeResourcesFitArgs`` (errors name the field path).

DRA-backed extended resources (``DRAExtendedResource``, alpha in v1.34 and off
by default) are not modelled.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from typing import ClassVar

import msgspec
import numpy as np
import numpy.typing as npt

from berth.cache.table import NodeTable, PodInfo
from berth.cluster import model, resources
from berth.framework import interface as fw
from berth.framework.handle import Handle

__all__ = [
    "LEAST_ALLOCATED",
    "MOST_ALLOCATED",
    "PRE_SCORE_STATE_KEY",
    "REQUESTED_TO_CAPACITY_RATIO",
    "STATE_KEY",
    "NodeResourcesFit",
    "NodeResourcesFitArgs",
    "RequestedToCapacityRatioParam",
    "ResourceAllocationScorer",
    "ResourceSpec",
    "ScoringStrategy",
    "UtilizationShapePoint",
    "broken_linear",
    "default_resources",
    "non_missing_requests",
    "validate_resources",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
_STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)

#: config.MaxCustomPriorityScore: the top of a RequestedToCapacityRatio shape's score axis.
MAX_CUSTOM_PRIORITY_SCORE = 10
#: requested_to_capacity_ratio.go maxUtilization.
MAX_UTILIZATION = 100

_TOO_MANY_PODS = "Too many pods"
#: cpu, memory, ephemeral-storage, pods: checked by name, never as scalar resources.
_FIXED = frozenset((resources.CPU, resources.MEMORY, resources.EPHEMERAL_STORAGE, resources.PODS))


# ---------------------------------------------------------------- validation helpers


def _go_value(value: object) -> str:
    """How field.Error prints a bad value: strings quoted, numbers bare."""
    return json.dumps(value) if isinstance(value, str) else str(value)


def _invalid(path: str, value: object, detail: str) -> str:
    return f"{path}: Invalid value: {_go_value(value)}: {detail}"


def _raise_aggregate(errors: Sequence[str]) -> None:
    """utilerrors.Aggregate's message: one error as is, several as ``[a, b]``."""
    unique = list(dict.fromkeys(errors))
    if not unique:
        return
    raise ValueError(unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]")


_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_RE = re.compile("^" + _QNAME_FMT + "$")
_QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS1123_SUBDOMAIN_RE = re.compile("^" + _DNS1123_SUBDOMAIN_FMT + "$")
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """apimachinery validation.RegexError."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}'," for e in examples)
    return f"{msg} (e.g. {shown} regex used for validation is '{fmt}')"


def _qualified_name_errors(value: str) -> list[str]:
    """apimachinery validation.IsQualifiedName (what metav1validation.ValidateLabelName runs)."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errs.append("prefix part must be no more than 253 characters")
            if not _DNS1123_SUBDOMAIN_RE.match(prefix):
                errs.append(
                    "prefix part " + _regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com")
                )
    else:
        return [
            "a qualified name "
            + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _QNAME_RE.match(name):
        errs.append("name part " + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


# ---------------------------------------------------------------- arguments


class _Args(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """Base: camelCase keys, unknown keys rejected (KubeSchedulerConfiguration is strict)."""


class ResourceSpec(_Args):
    """config.ResourceSpec: a resource and its weight in a score.

    Weight 0 (or omitted) becomes 1, as ``SetDefaults_NodeResourcesFitArgs``
    and ``SetDefaults_NodeResourcesBalancedAllocationArgs`` do.
    """

    name: str
    weight: int = 0

    def __post_init__(self) -> None:
        if self.weight == 0:
            self.weight = 1


def default_resources() -> list[ResourceSpec]:
    """defaultResourceSpec: cpu and memory, weight 1 each."""
    return [ResourceSpec(name=resources.CPU, weight=1), ResourceSpec(name=resources.MEMORY, weight=1)]


class UtilizationShapePoint(_Args):
    """config.UtilizationShapePoint: utilization 0..100 -> score 0..MaxCustomPriorityScore."""

    utilization: int
    score: int


class RequestedToCapacityRatioParam(_Args):
    shape: list[UtilizationShapePoint] = []


class ScoringStrategy(_Args):
    """config.ScoringStrategy. No resources means cpu:1, memory:1 (v1 defaults)."""

    type: str = ""
    resources: list[ResourceSpec] = []
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None

    def __post_init__(self) -> None:
        if not self.resources:
            self.resources = default_resources()


class NodeResourcesFitArgs(_Args):
    """config.NodeResourcesFitArgs (``pluginConfig`` args of NodeResourcesFit).

    ``scoringStrategy`` defaults to LeastAllocated over cpu and memory.
    :meth:`validate` is ``ValidateNodeResourcesFitArgs``.
    """

    ignored_resources: list[str] = []
    ignored_resource_groups: list[str] = []
    scoring_strategy: ScoringStrategy | None = None

    def __post_init__(self) -> None:
        if self.scoring_strategy is None:
            self.scoring_strategy = ScoringStrategy(type=LEAST_ALLOCATED)

    def validate(self) -> None:
        """Raise ValueError naming every invalid field (validation_pluginargs.go)."""
        errs: list[str] = []
        for i, res in enumerate(self.ignored_resources):
            errs.extend(_invalid(f"ignoredResources[{i}]", res, m) for m in _qualified_name_errors(res))
        for i, group in enumerate(self.ignored_resource_groups):
            path = f"ignoredResourceGroups[{i}]"
            if "/" in group:
                errs.append(_invalid(path, group, "resource group name can't contain '/'"))
            errs.extend(_invalid(path, group, m) for m in _qualified_name_errors(group))
        strategy = self.scoring_strategy
        if strategy is not None:
            if strategy.type not in _STRATEGIES:
                supported = ", ".join(json.dumps(s) for s in sorted(_STRATEGIES))
                value = _go_value(strategy.type)
                errs.append(f"scoringStrategy.type: Unsupported value: {value}: supported values: {supported}")
            errs.extend(validate_resources(strategy.resources, "scoringStrategy.resources"))
            if strategy.requested_to_capacity_ratio is not None:
                # kube-scheduler reports these under "scoringStrategy.shape"; Berth names the
                # field the user actually wrote.
                errs.extend(
                    _validate_shape(
                        strategy.requested_to_capacity_ratio.shape, "scoringStrategy.requestedToCapacityRatio.shape"
                    )
                )
            elif strategy.type == REQUESTED_TO_CAPACITY_RATIO:
                # kube-scheduler's NewFit dereferences a nil pointer here; Berth says why.
                errs.append(
                    "scoringStrategy.requestedToCapacityRatio: Required value: "
                    "a shape is required for the RequestedToCapacityRatio strategy"
                )
        _raise_aggregate(errs)


def validate_resources(specs: Sequence[ResourceSpec], path: str) -> list[str]:
    """validation_pluginargs.go validateResources: weights in (0, 100]."""
    return [
        _invalid(f"{path}[{i}].weight", r.weight, f"resource weight of {r.name} not in valid range (0, 100]")
        for i, r in enumerate(specs)
        if r.weight <= 0 or r.weight > 100
    ]


def _validate_shape(shape: Sequence[UtilizationShapePoint], path: str) -> list[str]:
    """validation_pluginargs.go validateFunctionShape."""
    if not shape:
        return [f"{path}: Required value: at least one point must be specified"]
    errs: list[str] = []
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            errs.append(
                _invalid(f"{path}[{i}].utilization", shape[i].utilization, "values must be sorted in increasing order")
            )
            break
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= MAX_UTILIZATION:
            errs.append(
                _invalid(f"{path}[{i}].utilization", point.utilization, f"not in valid range [0, {MAX_UTILIZATION}]")
            )
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            errs.append(
                _invalid(f"{path}[{i}].score", point.score, f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]")
            )
    return errs


# ---------------------------------------------------------------- requests


def _is_scalar(name: str) -> bool:
    return resources.is_scalar(name)


def non_missing_requests(pod: model.Pod) -> dict[str, int]:
    """``resource.PodRequests`` with ``NonMissingContainerRequests`` {cpu: 100m, memory: 200Mi}.

    A container (init containers included) whose requests — after the API
    server copied missing requests from limits — do not *name* cpu or memory
    counts the default; an explicit ``cpu: 0`` stays 0 (component-helpers
    ``applyNonMissing``). Done by adding the defaults to a copy of the pod and
    summing it with :func:`resources.pod_requests`.
    """
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


#: requested [n, R], allocatable [n, R] (0 = resource left out), weights [R] -> scores [n].
Scorer = Callable[[IntArray, IntArray, IntArray], IntArray]


def _least_allocated(req: IntArray, alloc: IntArray, weights: IntArray) -> IntArray:
    """least_allocated.go leastResourceScorer / leastRequestedScore."""
    valid = alloc > 0
    safe = np.where(valid, alloc, 1)
    per = np.where(req > alloc, 0, (alloc - req) * fw.MAX_NODE_SCORE // safe)
    w = np.where(valid, weights, 0)
    node_score = (per * w).sum(axis=1)
    weight_sum = w.sum(axis=1)
    out: IntArray = np.where(weight_sum == 0, 0, node_score // np.maximum(weight_sum, 1))
    return out


def _most_allocated(req: IntArray, alloc: IntArray, weights: IntArray) -> IntArray:
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

    def score(req: IntArray, alloc: IntArray, weights: IntArray) -> IntArray:
        valid = alloc > 0
        safe = np.where(valid, alloc, 1)
        util = np.where(req > alloc, MAX_UTILIZATION, req * MAX_UTILIZATION // safe)
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
    defaults) for cpu and memory.
    """

    def __init__(self, specs: Sequence[ResourceSpec], scorer: Scorer, *, use_requested: bool) -> None:
        self.names = [s.name for s in specs]
        self.weights = np.asarray([s.weight for s in specs], dtype=np.int64)
        self.scorer = scorer
        self.use_requested = use_requested

    def pod_requests(self, pod: PodInfo) -> list[int]:
        """calculatePodResourceRequestList: the pod's request for each configured resource."""
        reqs = pod.requests if self.use_requested else non_missing_requests(pod.pod)
        return [reqs.get(name, 0) for name in self.names]

    def allocatable_requested(
        self, nodes: NodeTable, rows: IntArray, pod_requests: Sequence[int]
    ) -> tuple[IntArray, IntArray]:
        """calculateResourceAllocatableRequest for every resource: ``[n, R]`` arrays, 0 = left out."""
        n, r = len(rows), len(self.names)
        alloc = np.zeros((n, r), dtype=np.int64)
        req = np.zeros((n, r), dtype=np.int64)
        index = nodes.columns.index
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
            alloc[:, i] = nodes.alloc[rows, c]
            req[:, i] = source[rows, c] + pod_req
        # "Only fill the extended resource entry when it's non-zero."
        req[alloc == 0] = 0
        return alloc, req

    def score(self, nodes: NodeTable, rows: IntArray, pod_requests: Sequence[int]) -> IntArray:
        if len(rows) == 0:
            return np.zeros(0, dtype=np.int64)
        alloc, req = self.allocatable_requested(nodes, rows, pod_requests)
        return self.scorer(req, alloc, self.weights)


def _scorer_for(strategy: ScoringStrategy) -> ResourceAllocationScorer:
    """fit.go nodeResourceStrategyTypeMap."""
    if strategy.type == LEAST_ALLOCATED:
        fn: Scorer = _least_allocated
    elif strategy.type == MOST_ALLOCATED:
        fn = _most_allocated
    elif strategy.type == REQUESTED_TO_CAPACITY_RATIO:
        assert strategy.requested_to_capacity_ratio is not None
        fn = _requested_to_capacity_ratio(strategy.requested_to_capacity_ratio.shape)
    else:  # validate() rejects it first
        raise ValueError(f"scoring strategy {strategy.type} is not supported")
    return ResourceAllocationScorer(strategy.resources, fn, use_requested=False)


# ---------------------------------------------------------------- plugin


@dataclasses.dataclass(frozen=True, slots=True)
class _PreFilterState:
    """fit.go preFilterState: the pod's request and what Filter checks, in reason order."""

    request: IntArray
    names: tuple[str, ...]
    amounts: tuple[int, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class _PreScoreState:
    """fit.go preScoreState: the pod's request per configured scoring resource."""

    pod_requests: tuple[int, ...]


#: fit.go preFilterStateKey.
STATE_KEY: fw.StateKey[_PreFilterState] = fw.StateKey("PreFilterNodeResourcesFit")
#: fit.go preScoreStateKey.
PRE_SCORE_STATE_KEY: fw.StateKey[_PreScoreState] = fw.StateKey("PreScoreNodeResourcesFit")


class NodeResourcesFit:
    """kube-scheduler's NodeResourcesFit (fit.go): PreFilter, Filter, PreScore, Score."""

    NAME: ClassVar[str] = "NodeResourcesFit"
    Args: ClassVar[type[NodeResourcesFitArgs]] = NodeResourcesFitArgs

    def __init__(self, args: NodeResourcesFitArgs | None = None, handle: Handle | None = None) -> None:
        self.args = args if args is not None else NodeResourcesFitArgs()
        self.args.validate()
        self.handle = handle
        self.ignored_resources = frozenset(self.args.ignored_resources)
        self.ignored_groups = frozenset(self.args.ignored_resource_groups)
        assert self.args.scoring_strategy is not None
        self.scorer = _scorer_for(self.args.scoring_strategy)

    # ------------------------------------------------------------ queueing

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        """fit.go EventsToRegister (InPlacePodVerticalScaling on, no queueing hints)."""
        return (
            fw.ClusterEvent("AssignedPod", fw.ActionType.DELETE | fw.ActionType.UPDATE_POD_SCALE_DOWN),
            fw.ClusterEvent(
                "Node",
                fw.ActionType.ADD
                | fw.ActionType.UPDATE_NODE_ALLOCATABLE
                | fw.ActionType.UPDATE_NODE_TAINT
                | fw.ActionType.UPDATE_NODE_LABEL,
            ),
        )

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
            if name in _FIXED or reqs[name] <= 0 or not _is_scalar(name):
                continue
            if self._ignored(name):
                continue
            names.append(name)
        request = nodes.vector(reqs)
        state.write(STATE_KEY, _PreFilterState(request, tuple(names), tuple(reqs[n] for n in names)))
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
        # gathering every row of every column first.
        too_many = (nodes.req[:size, pods] >= nodes.alloc[:size, pods])[rows]
        labels = [_TOO_MANY_PODS]
        if s.names:
            cols = np.asarray([index[name] for name in s.names], dtype=np.int64)
            need = np.asarray(s.amounts, dtype=np.int64)
            alloc_all = nodes.alloc[:size, cols]
            short = (need > alloc_all - nodes.req[:size, cols])[rows]
            bad: BoolArray = too_many | short.any(axis=1)
            if not bad.any():
                return fw.NodeVerdicts.all_ok(n)
            unresolvable: BoolArray = np.asarray((short & (need > alloc_all[rows])).any(axis=1), dtype=bool)
            failed = np.column_stack([too_many, short])
            labels.extend(f"Insufficient {name}" for name in s.names)
        else:
            bad = too_many
            if not bad.any():
                return fw.NodeVerdicts.all_ok(n)
            unresolvable = np.zeros(n, dtype=bool)
            failed = too_many[:, None]
        masks, inverse = _distinct_rows(np.column_stack([failed[bad], unresolvable[bad]]))
        statuses = []
        for mask in masks:
            reasons = tuple(label for label, hit in zip(labels, mask[:-1], strict=True) if hit)
            code = fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE if mask[-1] else fw.Code.UNSCHEDULABLE
            statuses.append(fw.Status(code, reasons, self.NAME))
        reason = np.zeros(n, dtype=np.int32)
        reason[bad] = inverse
        return fw.NodeVerdicts(~bad, statuses, reason)

    # ------------------------------------------------------------ scoring

    def pre_score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.Status:
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(tuple(self.scorer.pod_requests(pod))))
        return fw.SUCCESS

    def score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> IntArray:
        s = state.get(PRE_SCORE_STATE_KEY)
        pod_requests = s.pod_requests if s is not None else tuple(self.scorer.pod_requests(pod))
        return self.scorer.score(nodes, rows, pod_requests)


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
