"""Runs one profile's plugins at each extension point (kube-scheduler's
``framework/runtime/framework.go``).

The vectorised twist: ``run_filter`` hands every plugin all candidate rows at
once and keeps, per row, the first plugin that rejected it — which is what
kube-scheduler's per-node loop that stops at the first failure yields.

Metrics as upstream records them: each extension point's duration
(``scheduler_framework_extension_point_duration_seconds``) in the scheduling
loop's cycles, and each plugin's (``scheduler_plugin_execution_duration_seconds``)
in the sampled ones (:class:`CycleMetrics`). A Filter plugin runs once per
batch of nodes here, so its duration is the batch's, not one node's.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np
import numpy.typing as npt

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.framework import interface as fw
from berth.framework import registry
from berth.framework.handle import Handle
from berth.framework.plugin_errors import (
    ERROR_FORMATS,
    PluginError,
    checked_scores,
    checked_verdicts,
    named,
    raised,
)
from berth.metrics import PLUGIN_METRICS_SAMPLE_PERCENT, STATUS_CODES

__all__ = [
    "CYCLE_METRICS",
    "PRE_FILTER_PLUGINS_WITH_NODES",
    "CycleMetrics",
    "FilterOutcome",
    "Framework",
    "ScoreOutcome",
    "filters_per_node",
]

#: The PreFilter plugins whose result narrowed this cycle's node set, sorted:
#: RunPreFilterPlugins' ``pluginsWithNodes`` (v1.34), which the FitError
#: message names for the nodes they left out.
PRE_FILTER_PLUGINS_WITH_NODES: fw.StateKey[tuple[str, ...]] = fw.StateKey("PreFilterPluginsWithNodes")

log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
P = ParamSpec("P")
R = TypeVar("R")


@dataclasses.dataclass(slots=True)
class CycleMetrics:
    """What the scheduling loop's cycle records (:meth:`Framework.begin_cycle`).
    States without it — Explain, whatif, the extender's verbs, a preemption
    check's own — record nothing."""

    #: This cycle is one of the sampled ones: time every plugin
    #: (``state.SetRecordPluginMetrics(rand.Intn(100) < pluginMetricsSamplePercent)``).
    plugins: bool
    #: Time the extension points. Off once the cycle failed Filter: what runs
    #: Filter after that is preemption's (or reclaim's) dry runs, which
    #: upstream does not count as the Filter extension point either.
    points: bool = True


CYCLE_METRICS: fw.StateKey[CycleMetrics] = fw.StateKey("CycleMetrics")

def _extension_point(
    point: str, code_of: Callable[[Any], int]
) -> Callable[
    [Callable[Concatenate[Framework, fw.CycleState, P], R]], Callable[Concatenate[Framework, fw.CycleState, P], R]
]:
    """Time a ``run_*`` method as the extension point ``point`` in the loop's cycles."""

    def wrap(
        fn: Callable[Concatenate[Framework, fw.CycleState, P], R],
    ) -> Callable[Concatenate[Framework, fw.CycleState, P], R]:
        @functools.wraps(fn)
        def timed(self: Framework, state: fw.CycleState, /, *args: P.args, **kwargs: P.kwargs) -> R:
            cm = state.get(CYCLE_METRICS)
            if cm is None or not cm.points:
                return fn(self, state, *args, **kwargs)
            started = time.perf_counter()
            code: int = fw.Code.ERROR
            try:
                out = fn(self, state, *args, **kwargs)
                code = code_of(out)
                return out
            finally:
                self.metrics.extension_point(point, code, time.perf_counter() - started)

        return timed

    return wrap


def _extension_point_async(
    point: str,
) -> Callable[
    [Callable[Concatenate[Framework, fw.CycleState, P], Awaitable[fw.Status]]],
    Callable[Concatenate[Framework, fw.CycleState, P], Awaitable[fw.Status]],
]:
    """:func:`_extension_point` for the binding cycle's coroutines."""

    def wrap(
        fn: Callable[Concatenate[Framework, fw.CycleState, P], Awaitable[fw.Status]],
    ) -> Callable[Concatenate[Framework, fw.CycleState, P], Awaitable[fw.Status]]:
        @functools.wraps(fn)
        async def timed(self: Framework, state: fw.CycleState, /, *args: P.args, **kwargs: P.kwargs) -> fw.Status:
            cm = state.get(CYCLE_METRICS)
            if cm is None or not cm.points:
                return await fn(self, state, *args, **kwargs)
            started = time.perf_counter()
            code = fw.Code.ERROR
            try:
                st = await fn(self, state, *args, **kwargs)
                code = st.code
                return st
            finally:
                self.metrics.extension_point(point, code, time.perf_counter() - started)

        return timed

    return wrap


def _out_of_range(raw: IntArray) -> bool:
    """Whether a score lies outside [MIN_NODE_SCORE, MAX_NODE_SCORE]: one
    reduction instead of a min and a max per plugin per cycle. As unsigned
    integers, a negative score is huge, so with MIN_NODE_SCORE == 0 the
    largest unsigned value alone says it."""
    if fw.MIN_NODE_SCORE == 0:
        # ufunc.reduce directly: ndarray.max's Python wrapper costs as much as the reduction here.
        return bool(np.maximum.reduce(raw.view(np.uint64), axis=None) > fw.MAX_NODE_SCORE)
    return bool(raw.min() < fw.MIN_NODE_SCORE or raw.max() > fw.MAX_NODE_SCORE)


def _sampled(state: fw.CycleState) -> bool:
    cm = state.get(CYCLE_METRICS)
    return cm is not None and cm.plugins


def filters_per_node(plugin: object) -> bool:
    """Whether a Filter plugin judges node by node (a :class:`fw.NodeFilter`,
    or a class with ``FILTER_PER_NODE = True``): :meth:`Framework.run_filter`
    then hands it only the rows it still needs. Vectorised plugins cost
    about the same for any number of rows and get them all."""
    return isinstance(plugin, fw.NodeFilter) or bool(getattr(plugin, "FILTER_PER_NODE", False))


def _success(_: object) -> int:
    return fw.Code.SUCCESS


def _status_code(st: fw.Status) -> int:
    return st.code


def _first_status_code(out: tuple[fw.Status, Any]) -> int:
    return out[0].code


@dataclasses.dataclass(slots=True)
class FilterOutcome:
    """Filter's verdict over ``rows``.

    ``reason[k]`` indexes ``statuses`` for rejected rows and is -1 for
    feasible ones. With ``all_reasons`` every rejecting plugin of a row is
    kept in ``extra`` (for Explain), not only the first.
    """

    rows: IntArray
    ok: BoolArray
    reason: npt.NDArray[np.int32]
    statuses: list[fw.Status]
    extra: dict[int, list[fw.Status]] | None = None

    def feasible(self) -> IntArray:
        return self.rows[self.ok]

    def failures(self, limit: int | None = None) -> dict[int, fw.Status]:
        """Rejected rows and why; only among the first ``limit`` rows when given."""
        ok = self.ok if limit is None else self.ok[:limit]
        bad = np.flatnonzero(~ok)
        rows = self.rows[bad].tolist()
        reasons = self.reason[bad].tolist()
        return {r: self.statuses[i] for r, i in zip(rows, reasons, strict=True)}

    def all_failures(self, row: int) -> list[fw.Status]:
        if self.extra is not None:
            return self.extra.get(row, [])
        k = int(np.flatnonzero(self.rows == row)[0])
        return [] if self.ok[k] else [self.statuses[int(self.reason[k])]]


@dataclasses.dataclass(slots=True)
class ScoreOutcome:
    rows: IntArray
    total: IntArray
    #: Weighted, normalised scores per plugin, aligned with ``rows``.
    by_plugin: dict[str, IntArray]


class Framework:
    """The plugins of one profile, ready to run."""

    def __init__(self, resolved: registry.ResolvedProfile, handle: Handle) -> None:
        self.name = resolved.name
        self.handle = handle
        self.resolved = resolved
        handle.runner = self
        self.metrics = handle.metrics.profile(self.name)
        # Which cycles are sampled for plugin durations; its own generator,
        # so sampling never shifts the scheduling's seeded randomness.
        self._sample_rng = random.Random()
        self.plugin_metrics_sample_percent = PLUGIN_METRICS_SAMPLE_PERCENT
        self.plugins: dict[str, Any] = registry.build(resolved, handle)

        def at(point: str) -> list[Any]:
            return [self.plugins[n] for n in resolved.points[point]]

        self.pre_enqueue: list[fw.PreEnqueuePlugin] = at("preEnqueue")
        self.queue_sort: fw.QueueSortPlugin = at("queueSort")[0]
        self.pre_filter: list[fw.PreFilterPlugin] = at("preFilter")
        self.filter: list[fw.FilterPlugin] = at("filter")
        self.post_filter: list[fw.PostFilterPlugin] = at("postFilter")
        self.pre_score: list[fw.PreScorePlugin] = at("preScore")
        self.score: list[fw.ScorePlugin] = at("score")
        self.reserve: list[fw.ReservePlugin] = at("reserve")
        self.permit: list[fw.PermitPlugin] = at("permit")
        self.pre_bind: list[fw.PreBindPlugin] = at("preBind")
        self.bind: list[fw.BindPlugin] = at("bind")
        self.post_bind: list[fw.PostBindPlugin] = at("postBind")
        self.weights = dict(resolved.weights)
        # Resolved once: isinstance against a runtime-checkable Protocol is slow per cycle.
        self._normalizes = {p.NAME: isinstance(p, fw.ScoreNormalizer) for p in self.score}
        self._score_weights = [(p, self.weights.get(p.NAME, 1)) for p in self.score]
        self._pre_flights: dict[str, fw.PreBindPreFlight | None] = {
            p.NAME: p if isinstance(p, fw.PreBindPreFlight) else None for p in self.pre_bind
        }
        # Preemption's dry runs update these plugins' PreFilter state.
        self.pre_filter_extensions: list[fw.PreFilterExtensions] = []
        for p in (*self.filter, *self.pre_filter):
            if isinstance(p, fw.PreFilterExtensions) and p not in self.pre_filter_extensions:
                self.pre_filter_extensions.append(p)

    # ------------------------------------------------------------ queueing

    def events_to_register(self) -> dict[str, Sequence[fw.ClusterEvent]]:
        out: dict[str, Sequence[fw.ClusterEvent]] = {}
        for name, plugin in self.plugins.items():
            if isinstance(plugin, fw.EnqueueExtensions):
                out[name] = plugin.events_to_register()
        return out

    def run_pre_enqueue(self, pod: PodInfo) -> fw.Status:
        # The queue times the extension point; the plugins are sampled per
        # call, as upstream's queue does (runPreEnqueuePlugins).
        sample = self._sample_rng.randrange(100) < self.plugin_metrics_sample_percent
        for p in self.pre_enqueue:
            started = time.perf_counter() if sample else 0.0
            try:
                st = p.pre_enqueue(pod)
            except Exception as e:
                st = raised("PreEnqueue", p.NAME, pod, e)
            if sample:
                self.metrics.plugin(p.NAME, "PreEnqueue", st.code, time.perf_counter() - started)
            if not st.ok:
                return named("PreEnqueue", p.NAME, st)
        return fw.SUCCESS

    # ------------------------------------------------------------ metrics

    def begin_cycle(self, state: fw.CycleState) -> None:
        """Make ``state`` a scheduling cycle's, whose extension points are
        timed and, in a sample of cycles, its plugins."""
        state.write(CYCLE_METRICS, CycleMetrics(self._sample_rng.randrange(100) < self.plugin_metrics_sample_percent))

    def dry_runs_follow(self, state: fw.CycleState) -> None:
        """The cycle's own extension points are over (see :class:`CycleMetrics`)."""
        cm = state.get(CYCLE_METRICS)
        if cm is not None:
            cm.points = False

    # ------------------------------------------------------------ filtering

    @_extension_point("PreFilter", _first_status_code)
    def run_pre_filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[fw.Status, frozenset[str] | None]:
        """PreFilter plugins in order; the first rejection ends the phase.

        The plugins that narrowed the node set go to
        :data:`PRE_FILTER_PLUGINS_WITH_NODES`; when their sets do not
        intersect, the message is RunPreFilterPlugins' (v1.34), byte for byte.
        """
        allowed: frozenset[str] | None = None
        with_nodes: set[str] = set()
        sample = _sampled(state)
        for p in self.pre_filter:
            started = time.perf_counter() if sample else 0.0
            try:
                res = p.pre_filter(state, pod, nodes)
            except Exception as e:
                res = fw.PreFilterResult(raised("PreFilter", p.NAME, pod, e))
            st = res.status
            if sample:
                self.metrics.plugin(p.NAME, "PreFilter", st.code, time.perf_counter() - started)
            if st.code == fw.Code.SKIP:
                state.skip_filter.add(p.NAME)
                continue
            if not st.ok:
                return named("PreFilter", p.NAME, st), None
            if res.node_names is not None:
                with_nodes.add(p.NAME)
                state.write(PRE_FILTER_PLUGINS_WITH_NODES, tuple(sorted(with_nodes)))
                allowed = res.node_names if allowed is None else allowed & res.node_names
                if not allowed:
                    names = sorted(with_nodes)
                    msg = (
                        f"node(s) didn't satisfy plugin {names[0]}"
                        if len(names) == 1
                        else f"node(s) didn't satisfy plugin(s) [{' '.join(names)}] simultaneously"
                    )
                    return fw.Status.unresolvable(msg, plugin=p.NAME), None
        return fw.SUCCESS, allowed

    @_extension_point("Filter", _success)
    def run_filter(
        self,
        state: fw.CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        rows: IntArray,
        *,
        all_reasons: bool = False,
        want: int | None = None,
        last: Callable[[IntArray], dict[int, fw.Status]] | None = None,
    ) -> FilterOutcome:
        """Filter ``rows`` (RunFilterPlugins per node, in ``rows``' order).

        Vectorised plugins judge every row at once. A plugin that judges node
        by node (:func:`filters_per_node`), and the plugins after it, see only
        the rows every plugin before them passed, a batch at a time, until
        ``want`` rows have passed every plugin and ``last`` (a final check of
        the rows that passed, a batch at a time: the nominated pods', which
        answers with the failures only, by position in the batch); the
        rest are not looked at. That is
        ``findNodesThatPassFilters`` (schedule_one.go v1.34), which cancels its
        parallel per-node Filter once ``feasibleNodesLen >= numNodesToFind``.
        The outcome covers the rows processed, a prefix of ``rows`` (all of
        them without ``want``, or when fewer fit); each rejected row there
        has the first plugin, in order, that rejected it, as if every plugin
        had judged every row. With ``all_reasons`` (Explain) every plugin
        judges every row and ``extra`` keeps all their reasons.
        """
        n = len(rows)
        ok = np.ones(n, dtype=bool)
        reason = np.full(n, -1, dtype=np.int32)
        statuses: list[fw.Status] = []
        extra: dict[int, list[fw.Status]] | None = {} if all_reasons else None
        sample = _sampled(state)
        plugins = [p for p in self.filter if p.NAME not in state.skip_filter]
        split = len(plugins)
        if not all_reasons:
            split = next((i for i, p in enumerate(plugins) if filters_per_node(p)), split)
        for p in plugins[:split]:
            if not all_reasons and not ok.any():
                break
            started = time.perf_counter() if sample else 0.0
            v = self._filter_one(p, state, pod, nodes, rows)
            if sample:
                code = fw.Code.UNSCHEDULABLE if not v.ok.any() else fw.Code.SUCCESS
                self.metrics.plugin(p.NAME, "Filter", code, time.perf_counter() - started)
            if v.ok.all():  # the usual verdict: no negated copy of it to make
                continue
            bad = ~v.ok
            base = len(statuses)
            statuses.extend(st.with_plugin(p.NAME) for st in v.statuses)
            newly = bad & ok
            if newly.any():
                reason[newly] = base + (0 if v.reason is None else v.reason[newly])
                ok &= v.ok
            if extra is not None:
                for k in np.flatnonzero(bad).tolist():
                    idx = base + (0 if v.reason is None else int(v.reason[k]))
                    extra.setdefault(int(rows[k]), []).append(statuses[idx])
        tail = plugins[split:]
        if not tail and last is None:
            return FilterOutcome(rows, ok, reason, statuses, extra)
        processed = self._filter_rows_in_turn(state, pod, nodes, rows, tail, ok, reason, statuses, want, last)
        return FilterOutcome(rows[:processed], ok[:processed], reason[:processed], statuses, extra)

    @staticmethod
    def _filter_one(
        p: fw.FilterPlugin, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray
    ) -> fw.NodeVerdicts:
        """One Filter plugin's verdicts on ``rows``, or :class:`PluginError`."""
        try:
            v = p.filter(state, pod, nodes, rows)
        except Exception as e:
            raise PluginError(raised("Filter", p.NAME, pod, e), "Filter") from e
        return checked_verdicts(p.NAME, v, len(rows))

    def _filter_rows_in_turn(
        self,
        state: fw.CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        rows: IntArray,
        plugins: Sequence[fw.FilterPlugin],
        ok: BoolArray,
        reason: npt.NDArray[np.int32],
        statuses: list[fw.Status],
        want: int | None,
        last: Callable[[IntArray], dict[int, fw.Status]] | None,
    ) -> int:
        """:meth:`run_filter`'s per-node part: ``plugins`` judge the rows
        still feasible in ``ok``, in order, updating ``ok``/``reason``/``statuses``,
        until ``want`` rows pass; returns how many rows (from the start) were
        processed.

        Each batch is the next ``want - found`` rows still feasible (a row is
        feasible at most once, so no batch overshoots): when they all pass,
        exactly ``want`` rows were found and the last of them ends the
        processed prefix. Vectorised plugins among ``plugins`` judge every row
        once, when first needed (cheap), and are read per batch."""
        n = len(rows)
        sample = _sampled(state)
        candidates = np.flatnonzero(ok)
        target = n if want is None else want
        found = at = 0
        processed = n
        whole: dict[int, tuple[fw.NodeVerdicts, int]] = {}
        # Per plugin: time spent, and whether it rejected every row it saw (the metric's code).
        spent: dict[int, list[Any]] = {}
        while found < target and at < len(candidates):
            batch = candidates[at : at + target - found]
            at += len(batch)
            live = batch
            for i, p in enumerate(plugins):
                if not live.size:
                    break
                started = time.perf_counter() if sample else 0.0
                if filters_per_node(p):
                    v = self._filter_one(p, state, pod, nodes, rows[live])
                    passed = v.ok
                    base = len(statuses)
                    if not passed.all():
                        statuses.extend(st.with_plugin(p.NAME) for st in v.statuses)
                    why = v.reason
                else:
                    got = whole.get(i)
                    if got is None:
                        v = self._filter_one(p, state, pod, nodes, rows)
                        got = whole[i] = (v, len(statuses))
                        statuses.extend(st.with_plugin(p.NAME) for st in v.statuses)
                    v, base = got
                    passed = v.ok[live]
                    why = None if v.reason is None else v.reason[live]
                if sample:
                    acc = spent.setdefault(i, [0.0, True])
                    acc[0] += time.perf_counter() - started
                    acc[1] = acc[1] and not passed.any()
                if passed.all():
                    continue
                hit = live[~passed]
                ok[hit] = False
                reason[hit] = base + (0 if why is None else why[~passed])
                live = live[passed]
            if last is not None and live.size:
                failed = last(rows[live])  # by position in live; usually none
                if failed:
                    keep = np.ones(len(live), dtype=bool)
                    for k, st in sorted(failed.items()):
                        pos = int(live[k])
                        keep[k] = False
                        ok[pos] = False
                        reason[pos] = len(statuses)
                        statuses.append(st)
                    live = live[keep]
            found += len(live)
            if found >= target:
                processed = int(batch[-1]) + 1
        for i, (seconds, rejected_all) in spent.items():
            code = fw.Code.UNSCHEDULABLE if rejected_all else fw.Code.SUCCESS
            self.metrics.plugin(plugins[i].NAME, "Filter", code, seconds)
        return processed

    @_extension_point("PostFilter", lambda res: res.status.code)
    def run_post_filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, failures: dict[int, fw.Status]
    ) -> fw.PostFilterResult:
        """RunPostFilterPlugins: the first success wins; unresolvable or an error
        stops; otherwise every plugin's reasons are kept, attributed to the first."""
        nominated: str | None = None
        reasons: list[str] = []
        rejector = ""
        self.dry_runs_follow(state)
        sample = _sampled(state)
        for p in self.post_filter:
            started = time.perf_counter() if sample else 0.0
            try:
                res = p.post_filter(state, pod, nodes, failures)
            except Exception as e:
                res = fw.PostFilterResult(raised("PostFilter", p.NAME, pod, e))
            st = res.status
            if sample:
                self.metrics.plugin(p.NAME, "PostFilter", st.code, time.perf_counter() - started)
            if st.ok:
                return res
            if st.code == fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return fw.PostFilterResult(st.with_plugin(p.NAME), res.nominated_node)
            if not st.is_rejection:  # an error: no result (framework.go v1.37.2 returns nil)
                return fw.PostFilterResult(named("PostFilter", p.NAME, st))
            if res.nominated_node is not None:  # the last result that is not ModeNoop
                nominated = res.nominated_node
            reasons.extend(st.reasons)
            rejector = rejector or p.NAME
        return fw.PostFilterResult(fw.Status(fw.Code.UNSCHEDULABLE, tuple(reasons), rejector), nominated)

    # ------------------------------------------------------------ scoring

    @_extension_point("PreScore", _status_code)
    def run_pre_score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.Status:
        sample = _sampled(state)
        for p in self.pre_score:
            started = time.perf_counter() if sample else 0.0
            try:
                st = p.pre_score(state, pod, nodes, rows)
            except Exception as e:
                st = raised("PreScore", p.NAME, pod, e)
            if sample:
                self.metrics.plugin(p.NAME, "PreScore", st.code, time.perf_counter() - started)
            if st.code == fw.Code.SKIP:
                state.skip_score.add(p.NAME)
            elif not st.ok:
                return named("PreScore", p.NAME, st)
        return fw.SUCCESS

    @_extension_point("Score", _success)
    def run_score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> ScoreOutcome:
        by_plugin: dict[str, IntArray] = {}
        weighted_all: list[IntArray] = []
        sample = _sampled(state)
        # The plugins share work on these rows for this call only (fw.ScoreScratch).
        state.write(fw.SCORE_SCRATCH, fw.ScoreScratch(nodes, rows))
        try:
            for p, weight in self._score_weights:
                if p.NAME in state.skip_score:
                    continue
                started = time.perf_counter() if sample else 0.0
                try:
                    got = p.score(state, pod, nodes, rows)
                except Exception as e:
                    raise PluginError(raised("Score", p.NAME, pod, e), "Score") from e
                raw = checked_scores(p.NAME, "Score", got, len(rows))
                if sample:
                    self.metrics.plugin(p.NAME, "Score", fw.Code.SUCCESS, time.perf_counter() - started)
                if self._normalizes[p.NAME]:
                    started = time.perf_counter() if sample else 0.0
                    try:
                        got = p.normalize_score(state, pod, raw)  # type: ignore[attr-defined]
                    except Exception as e:
                        raise PluginError(
                            raised("ScoreExtensionNormalize", p.NAME, pod, e), "ScoreExtensionNormalize"
                        ) from e
                    raw = checked_scores(p.NAME, "ScoreExtensionNormalize", got, len(rows))
                    if sample:
                        self.metrics.plugin(
                            p.NAME, "ScoreExtensionNormalize", fw.Code.SUCCESS, time.perf_counter() - started
                        )
                if raw.size and _out_of_range(raw):
                    # A plugin bug, never the request's fault (in-tree plugins keep
                    # their range for any request). Upstream's words (framework.go
                    # v1.37.2 RunScorePlugins), with the range Berth saw.
                    bad = raw[(raw < fw.MIN_NODE_SCORE) | (raw > fw.MAX_NODE_SCORE)][0]
                    raise PluginError(
                        fw.Status.error(
                            f'applying score defaultWeights on Score plugins: plugin "{p.NAME}" returns an '
                            f"invalid score {bad}, it should in the range of [{fw.MIN_NODE_SCORE}, "
                            f"{fw.MAX_NODE_SCORE}] after normalizing (scores {raw.min()}..{raw.max()})",
                            plugin=p.NAME,
                        ),
                        "Score",
                    )
                # Weight 1 (most plugins' default) keeps the plugin's own array:
                # nothing writes into by_plugin's arrays.
                weighted = raw * weight if weight != 1 else raw
                by_plugin[p.NAME] = weighted
                weighted_all.append(weighted)
        finally:
            state.write(fw.SCORE_SCRATCH, None)
        # The total is a new array (never one of by_plugin's), summed in plugin order.
        total = np.zeros(len(rows), dtype=np.int64)
        for w in weighted_all:
            total += w
        return ScoreOutcome(rows, total, by_plugin)

    @property
    def max_total_score(self) -> int:
        return fw.MAX_NODE_SCORE * sum(self.weights.get(p.NAME, 1) for p in self.score)

    # ------------------------------------------------------------ reserve & permit

    @_extension_point("Reserve", _status_code)
    def run_reserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        sample = _sampled(state)
        for p in self.reserve:
            started = time.perf_counter() if sample else 0.0
            try:
                st = p.reserve(state, pod, node)
            except Exception as e:
                st = raised("Reserve", p.NAME, pod, e)
            if sample:
                self.metrics.plugin(p.NAME, "Reserve", st.code, time.perf_counter() - started)
            if not st.ok:
                return named("Reserve", p.NAME, st)
        return fw.SUCCESS

    @_extension_point("Unreserve", _success)
    def run_unreserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> None:
        sample = _sampled(state)
        for p in reversed(self.reserve):
            started = time.perf_counter() if sample else 0.0
            try:
                p.unreserve(state, pod, node)
            except Exception:
                log.exception("Unreserve %s failed for %s", p.NAME, pod.key)
            if sample:
                self.metrics.plugin(p.NAME, "Unreserve", fw.Code.SUCCESS, time.perf_counter() - started)

    @_extension_point("Permit", _first_status_code)
    def run_permit(self, state: fw.CycleState, pod: PodInfo, node: str) -> tuple[fw.Status, dict[str, float]]:
        """Success, or Wait with per-plugin timeouts, or the first rejection."""
        waits: dict[str, float] = {}
        sample = _sampled(state)
        for p in self.permit:
            started = time.perf_counter() if sample else 0.0
            try:
                st, timeout = p.permit(state, pod, node)
            except Exception as e:
                st, timeout = raised("Permit", p.NAME, pod, e), 0.0
            if sample:
                self.metrics.plugin(p.NAME, "Permit", st.code, time.perf_counter() - started)
            if st.code == fw.Code.WAIT:
                waits[p.NAME] = timeout
            elif not st.ok:
                return named("Permit", p.NAME, st), {}
        if waits:
            return fw.Status(fw.Code.WAIT), waits
        return fw.SUCCESS, {}

    # ------------------------------------------------------------ binding cycle

    @_extension_point("PreBindPreFlight", _status_code)
    def run_pre_bind_pre_flights(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        """RunPreBindPreFlights (framework.go v1.37.2): Success when some
        PreBind plugin has work for the pod, Skip when none has (each that
        said Skip is skipped at PreBind), or the first error. Another code
        from a plugin is an error too, as upstream's."""
        sample = _sampled(state)
        out = fw.Status(fw.Code.SKIP)
        skipped: set[str] = set()
        for p in self.pre_bind:
            pre_flight = self._pre_flights[p.NAME]
            if pre_flight is None:
                out = fw.SUCCESS  # no pre-flight: it may have work
                continue
            started = time.perf_counter() if sample else 0.0
            try:
                st = pre_flight.pre_bind_pre_flight(state, pod, node)
            except Exception as e:
                st = fw.Status.error(f"{type(e).__name__}: {e}")
                log.error("PreBindPreFlight plugin %s failed for pod %s", p.NAME, pod.key, exc_info=e)
            if sample:
                self.metrics.plugin(p.NAME, "PreBindPreFlight", st.code, time.perf_counter() - started)
            if st.code == fw.Code.ERROR:
                # framework.go v1.37.2 names the plugin in the message only (no WithPlugin).
                return fw.Status.error(ERROR_FORMATS["PreBindPreFlight"].format(plugin=p.NAME, message=st.message()))
            if st.ok:
                out = fw.SUCCESS
            elif st.code == fw.Code.SKIP:
                skipped.add(p.NAME)
            else:
                return fw.Status.error(
                    f'PreBindPreFlight {p.NAME} returned "{STATUS_CODES[st.code]}", which is unsupported. '
                    "It is supposed to return Success, Skip, or Error status"
                )
        state.skip_pre_bind = skipped
        return out

    @_extension_point_async("PreBind")
    async def run_pre_bind(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        sample = _sampled(state)
        for p in self.pre_bind:
            if p.NAME in state.skip_pre_bind:
                continue
            started = time.perf_counter() if sample else 0.0
            try:
                st = await p.pre_bind(state, pod, node)
            except Exception as e:
                st = raised("PreBind", p.NAME, pod, e)
            if sample:
                self.metrics.plugin(p.NAME, "PreBind", st.code, time.perf_counter() - started)
            if not st.ok:
                return named("PreBind", p.NAME, st)
        return fw.SUCCESS

    @_extension_point_async("Bind")
    async def run_bind(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        sample = _sampled(state)
        for p in self.bind:
            started = time.perf_counter() if sample else 0.0
            try:
                st = await p.bind(state, pod, node)
            except Exception as e:
                st = raised("Bind", p.NAME, pod, e)
            if sample:
                self.metrics.plugin(p.NAME, "Bind", st.code, time.perf_counter() - started)
            if st.code == fw.Code.SKIP:
                continue
            return st if st.ok else named("Bind", p.NAME, st)
        return fw.Status.error("no bind plugin bound the pod")

    @_extension_point("PostBind", _success)
    def run_post_bind(self, state: fw.CycleState, pod: PodInfo, node: str) -> None:
        sample = _sampled(state)
        for p in self.post_bind:
            started = time.perf_counter() if sample else 0.0
            try:
                p.post_bind(state, pod, node)
            except Exception:
                log.exception("PostBind %s failed for %s", p.NAME, pod.key)
            if sample:
                self.metrics.plugin(p.NAME, "PostBind", fw.Code.SUCCESS, time.perf_counter() - started)
