"""The steps of one scheduling attempt, shared by the loop and the verbs.

Mirrors ``pkg/scheduler/schedule_one.go``: ``schedulePod`` ->
``findNodesThatFitPod`` (PreFilter, the nominated node first, Filter over a
rotating window honouring percentageOfNodesToScore) -> ``prioritizeNodes``
-> ``selectHost``; and ``FitError`` for the message a pending pod carries.

The FitError message is the Kubernetes-facing text (the FailedScheduling
event, the PodScheduled condition): it is v1.34.4's ``FitError.Error()``
byte for byte, including the nodes a PreFilter result left out, counted
under ``node(s) didn't satisfy plugin(s) [NodeAffinity]``.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.framework import interface as fw
from berth.framework import preemption
from berth.framework.plugin_errors import PluginError
from berth.framework.runtime import PRE_FILTER_PLUGINS_WITH_NODES, FilterOutcome, Framework, ScoreOutcome

__all__ = [
    "Diagnosis",
    "FitError",
    "Sampler",
    "ScheduleResult",
    "absent_nodes_reason",
    "num_feasible_nodes_to_find",
    "schedule_pod",
    "select_host",
]

IntArray = npt.NDArray[np.int64]

# schedule_one.go
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """How many feasible nodes are enough (``numFeasibleNodesToFind``)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    num = num_all_nodes * percentage // 100
    return max(num, MIN_FEASIBLE_NODES_TO_FIND)


def absent_nodes_reason(state: fw.CycleState) -> str:
    """Why the nodes this cycle's PreFilter results left out fail
    (findNodesThatFitPod, schedule_one.go v1.34: ``fmt.Sprintf("node(s) didn't
    satisfy plugin(s) %v", sets.List(unscheduledPlugins))``; Go prints the
    sorted names as ``[A B]``)."""
    plugins = state.get(PRE_FILTER_PLUGINS_WITH_NODES) or ()
    return f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(plugins))}]"


class Diagnosis:
    """Why a pod did not fit (framework.Diagnosis).

    ``node_to_status`` holds the nodes Filter examined (NodeToStatus's
    explicit nodes); every other node has ``absent_nodes_status``
    (``AbsentNodesStatus``: no reasons unless a PreFilter result left nodes out).

    A pod that fits few nodes leaves thousands of failures, and a pod that
    is placed anyway needs only their number: :meth:`defer_failures` keeps
    the failed rows as they are, and ``node_to_status`` names them the first
    time it is read (a row's name never changes, so the table may have moved
    on by then).
    """

    __slots__ = (
        "_deferred",
        "_node_to_status",
        "absent_nodes_status",
        "num_all_nodes",
        "pending_plugins",
        "post_filter_msg",
        "pre_filter_msg",
        "unschedulable_plugins",
    )

    def __init__(
        self,
        num_all_nodes: int,
        node_to_status: dict[str, fw.Status] | None = None,
        absent_nodes_status: fw.Status | None = None,
        pre_filter_msg: str = "",
        post_filter_msg: str = "",
        unschedulable_plugins: set[str] | None = None,
        pending_plugins: set[str] | None = None,
    ) -> None:
        self.num_all_nodes = num_all_nodes
        self._node_to_status: dict[str, fw.Status] = node_to_status if node_to_status is not None else {}
        self.absent_nodes_status = (
            absent_nodes_status
            if absent_nodes_status is not None
            else fw.Status(fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        )
        self.pre_filter_msg = pre_filter_msg
        self.post_filter_msg = post_filter_msg
        self.unschedulable_plugins: set[str] = unschedulable_plugins if unschedulable_plugins is not None else set()
        self.pending_plugins: set[str] = pending_plugins if pending_plugins is not None else set()
        self._deferred: list[tuple[NodeTable, list[int], list[int], list[fw.Status]]] = []

    def defer_failures(self, nodes: NodeTable, rows: list[int], reasons: list[int], statuses: list[fw.Status]) -> None:
        """``rows`` of ``nodes`` failed with ``statuses[reasons[k]]``; added
        to ``node_to_status`` (in this order) when it is next read."""
        self._deferred.append((nodes, rows, reasons, statuses))

    @property
    def node_to_status(self) -> dict[str, fw.Status]:
        if self._deferred:
            for nodes, rows, reasons, statuses in self._deferred:
                self._node_to_status.update(zip(nodes.names_of(rows), [statuses[i] for i in reasons], strict=True))
            self._deferred.clear()
        return self._node_to_status

    @property
    def num_examined_failures(self) -> int:
        """``len(node_to_status)``, without naming deferred failures (a
        deferred row is never also in the dict: each row is diagnosed once)."""
        return len(self._node_to_status) + sum(len(rows) for _, rows, _, _ in self._deferred)

    def __repr__(self) -> str:
        return (
            f"Diagnosis(num_all_nodes={self.num_all_nodes}, node_to_status={self.node_to_status!r}, "
            f"absent_nodes_status={self.absent_nodes_status!r}, pre_filter_msg={self.pre_filter_msg!r}, "
            f"post_filter_msg={self.post_filter_msg!r}, unschedulable_plugins={self.unschedulable_plugins!r}, "
            f"pending_plugins={self.pending_plugins!r})"
        )


class FitError(Exception):
    """No node fits the pod; ``str()`` is kube-scheduler's FitError message."""

    def __init__(self, pod: PodInfo, diagnosis: Diagnosis) -> None:
        super().__init__()
        self.pod = pod
        self.diagnosis = diagnosis

    def __str__(self) -> str:
        # framework/types.go FitError.Error() (v1.34): NoNodeAvailableMsg, then
        # the PreFilter message, or else a histogram of the explicit nodes'
        # reasons plus the absent nodes' (NumAllNodes - NodeToStatus.Len()),
        # "count reason" sorted as strings; then the PostFilter message.
        d = self.diagnosis
        msg = f"0/{d.num_all_nodes} nodes are available:"
        if d.pre_filter_msg:
            msg += f" {d.pre_filter_msg}."
        else:
            histogram: Counter[str] = Counter()
            for st in d.node_to_status.values():
                for r in st.reasons:
                    histogram[r] += 1
            absent = d.num_all_nodes - len(d.node_to_status)
            if absent > 0:
                for r in d.absent_nodes_status.reasons:
                    histogram[r] += absent
            parts = sorted(f"{count} {reason}" for reason, count in histogram.items())
            if parts:
                msg += f" {', '.join(parts)}."
        if d.post_filter_msg:  # fmt.Sprintf(" %v", postFilterMsg): no period of its own
            msg += f" {d.post_filter_msg}"
        return msg


@dataclasses.dataclass(slots=True)
class ScheduleResult:
    node: str
    evaluated_nodes: int
    feasible_nodes: int


class Sampler:
    """Where the next partial scan starts (``nextStartNodeIndex``), per profile."""

    def __init__(self) -> None:
        self.next_start = 0


def _feasible_window(outcome_ok: npt.NDArray[np.bool_], want: int) -> int:
    """How many rows (from the window start) were 'processed' to find ``want``."""
    hits = np.flatnonzero(outcome_ok)
    if len(hits) <= want:
        return len(outcome_ok)
    return int(hits[want - 1]) + 1


def find_nodes_that_fit(
    fwk: Framework,
    state: fw.CycleState,
    pod: PodInfo,
    nodes: NodeTable,
    *,
    percentage: int,
    sampler: Sampler | None,
) -> tuple[IntArray, Diagnosis, FilterOutcome | None]:
    """Feasible rows and the diagnosis for the rest (``findNodesThatFitPod``)."""
    order = nodes.order()
    diagnosis = Diagnosis(num_all_nodes=len(order))
    status, allowed = fwk.run_pre_filter(state, pod, nodes)
    # diagnosis.UnschedulablePlugins = the plugins whose PreFilter result narrowed the nodes.
    with_nodes = state.get(PRE_FILTER_PLUGINS_WITH_NODES) or ()
    diagnosis.unschedulable_plugins.update(with_nodes)
    if not status.ok:
        diagnosis.pre_filter_msg = status.message()
        if status.is_rejection:
            diagnosis.unschedulable_plugins.add(status.plugin)
            diagnosis.absent_nodes_status = status
            for r in order.tolist():
                diagnosis.node_to_status[nodes.name(r)] = status
            return np.zeros(0, dtype=np.int64), diagnosis, None
        raise PluginError(status, "PreFilter")  # the runtime named the plugin

    # The pods nominated to nodes (after preemption) count there too.
    last = _nominated_pods_check(fwk, state, pod, nodes)
    # The node a previous preemption nominated goes first: if it fits, done.
    nominated = pod.pod.status.nominated_node_name
    if nominated and nominated in nodes.index:
        row = nodes.index[nominated]
        if nodes.alive[row] and (allowed is None or nominated in allowed):
            rows = np.asarray([row], dtype=np.int64)
            out = fwk.run_filter(state, pod, nodes, rows, last=last)
            if out.ok.all():
                return rows, diagnosis, out

    if allowed is not None:
        # A mask from the (usually few) allowed names, not a name lookup per row.
        keep = np.zeros(nodes.size, dtype=bool)
        keep[[nodes.index[name] for name in allowed if name in nodes.index]] = True
        order = order[keep[order]]
        diagnosis.absent_nodes_status = fw.Status.unresolvable(absent_nodes_reason(state))
    n = len(order)
    want = num_feasible_nodes_to_find(percentage, n) if sampler is not None else n
    if sampler is not None and n:
        start = sampler.next_start % n
        if start:
            order = np.concatenate((order[start:], order[:start]))
    # Filter stops once ``want`` rows passed (findNodesThatPassFilters): the
    # outcome covers the rows processed, so the window below is the same as
    # if every row had been filtered.
    outcome = fwk.run_filter(state, pod, nodes, order, want=want, last=last)
    processed = _feasible_window(outcome.ok, want) if n else 0
    if sampler is not None and n:
        sampler.next_start = (sampler.next_start + processed) % n
    ok_in_window = outcome.ok[:processed]
    feasible = order[:processed][ok_in_window]
    # Like findNodesThatPassFilters, only the nodes examined to find enough
    # feasible ones are diagnosed (all of them when too few fit).
    # A pod that fits few nodes has thousands of failures here: named only
    # when someone reads them, and each distinct status's plugin counted once.
    bad = np.flatnonzero(~ok_in_window)
    if bad.size:
        reasons = outcome.reason[bad].tolist()
        statuses = outcome.statuses
        diagnosis.defer_failures(nodes, outcome.rows[bad].tolist(), reasons, statuses)
        for i in sorted(set(reasons)):
            st = statuses[i]
            if st.plugin:
                (diagnosis.pending_plugins if st.code == fw.Code.PENDING else diagnosis.unschedulable_plugins).add(
                    st.plugin
                )
    return feasible, diagnosis, outcome


def _nominated_pods_check(
    fwk: Framework, state: fw.CycleState, pod: PodInfo, nodes: NodeTable
) -> Callable[[IntArray], dict[int, fw.Status]] | None:
    """The last Filter check of the rows that passed every plugin: would
    ``pod`` still fit once the pods nominated there (after preemption)
    arrive (``RunFilterPluginsWithNominatedPods``)? None when no pod is
    nominated."""
    if not fwk.handle.nominator:
        return None

    def check(rows: IntArray) -> dict[int, fw.Status]:
        return preemption.fits_with_nominated_rows(fwk, state, pod, nodes, rows)

    return check


def select_host(rows: IntArray, totals: IntArray, *, top_n: int = 0, rng: random.Random | None = None) -> int:
    """The chosen row: the best score, ties broken at random (``selectHost``);
    with ``top_n`` > 1, a random pick among the ``top_n`` best (randomizeTopN).
    """
    rng = rng or random.Random()
    if len(rows) == 0:
        raise ValueError("no nodes to select from")
    if top_n > 1 and len(rows) > 1:
        k = min(top_n, len(rows))
        best = np.argpartition(-totals, k - 1)[:k]
        return int(rows[best[rng.randrange(k)]])
    top = np.flatnonzero(totals == totals.max())
    return int(rows[top[rng.randrange(len(top))]])


def schedule_pod(
    fwk: Framework,
    state: fw.CycleState,
    pod: PodInfo,
    nodes: NodeTable,
    *,
    percentage: int,
    sampler: Sampler | None,
    top_n: int = 0,
    rng: random.Random | None = None,
) -> ScheduleResult:
    """One attempt's decision, or FitError (``schedulePod``)."""
    feasible, diagnosis, _ = find_nodes_that_fit(fwk, state, pod, nodes, percentage=percentage, sampler=sampler)
    if len(feasible) == 0:
        raise FitError(pod, diagnosis)
    evaluated = len(feasible) + diagnosis.num_examined_failures
    if len(feasible) == 1:
        return ScheduleResult(nodes.name(int(feasible[0])), evaluated, 1)
    st = fwk.run_pre_score(state, pod, nodes, feasible)
    if not st.ok:
        raise PluginError(st, "PreScore")
    scores: ScoreOutcome = fwk.run_score(state, pod, nodes, feasible)
    row = select_host(feasible, scores.total, top_n=top_n, rng=rng)
    return ScheduleResult(nodes.name(row), evaluated, len(feasible))
