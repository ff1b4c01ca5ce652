"""Runs one profile's plugins at each extension point (kube-scheduler's
``framework/runtime/framework.go``).

The vectorised twist: ``run_filter`` hands every plugin all candidate rows at
once and keeps, per row, the first plugin that rejected it — which is what
kube-scheduler's per-node loop that stops at the first failure yields.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.framework import interface as fw
from berth.framework import registry
from berth.framework.handle import Handle

__all__ = ["PRE_FILTER_PLUGINS_WITH_NODES", "FilterOutcome", "Framework", "ScoreOutcome"]

#: The PreFilter plugins whose result narrowed this cycle's node set, sorted:
#: RunPreFilterPlugins' ``pluginsWithNodes`` (v1.34), which the FitError
#: message names for the nodes they left out.
PRE_FILTER_PLUGINS_WITH_NODES: fw.StateKey[tuple[str, ...]] = fw.StateKey("PreFilterPluginsWithNodes")

log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


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
        for p in self.pre_enqueue:
            st = p.pre_enqueue(pod)
            if not st.ok:
                return st.with_plugin(p.NAME)
        return fw.SUCCESS

    # ------------------------------------------------------------ filtering

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
        for p in self.pre_filter:
            res = p.pre_filter(state, pod, nodes)
            st = res.status
            if st.code == fw.Code.SKIP:
                state.skip_filter.add(p.NAME)
                continue
            if not st.ok:
                if st.code == fw.Code.ERROR:
                    log.error("PreFilter %s failed for %s: %s", p.NAME, pod.key, st.message())
                return st.with_plugin(p.NAME), None
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

    def run_filter(
        self,
        state: fw.CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        rows: IntArray,
        *,
        all_reasons: bool = False,
    ) -> FilterOutcome:
        n = len(rows)
        ok = np.ones(n, dtype=bool)
        reason = np.full(n, -1, dtype=np.int32)
        statuses: list[fw.Status] = []
        extra: dict[int, list[fw.Status]] | None = {} if all_reasons else None
        for p in self.filter:
            if p.NAME in state.skip_filter:
                continue
            if not all_reasons and not ok.any():
                break
            v = p.filter(state, pod, nodes, rows)
            bad = ~v.ok
            if not bad.any():
                continue
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
        return FilterOutcome(rows, ok, reason, statuses, extra)

    def run_post_filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, failures: dict[int, fw.Status]
    ) -> fw.PostFilterResult:
        """RunPostFilterPlugins: the first success wins; unresolvable or an error
        stops; otherwise every plugin's reasons are kept, attributed to the first."""
        nominated = ""
        reasons: list[str] = []
        rejector = ""
        for p in self.post_filter:
            res = p.post_filter(state, pod, nodes, failures)
            st = res.status
            if st.ok:
                return res
            if st.code == fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE or not st.is_rejection:
                return fw.PostFilterResult(st.with_plugin(p.NAME), res.nominated_node)
            nominated = res.nominated_node or nominated
            reasons.extend(st.reasons)
            rejector = rejector or p.NAME
        return fw.PostFilterResult(fw.Status(fw.Code.UNSCHEDULABLE, tuple(reasons), rejector), nominated)

    # ------------------------------------------------------------ scoring

    def run_pre_score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.Status:
        for p in self.pre_score:
            st = p.pre_score(state, pod, nodes, rows)
            if st.code == fw.Code.SKIP:
                state.skip_score.add(p.NAME)
            elif not st.ok:
                return st.with_plugin(p.NAME)
        return fw.SUCCESS

    def run_score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> ScoreOutcome:
        total = np.zeros(len(rows), dtype=np.int64)
        by_plugin: dict[str, IntArray] = {}
        for p, weight in self._score_weights:
            if p.NAME in state.skip_score:
                continue
            raw = np.asarray(p.score(state, pod, nodes, rows), dtype=np.int64)
            if self._normalizes[p.NAME]:
                raw = np.asarray(p.normalize_score(state, pod, raw), dtype=np.int64)  # type: ignore[attr-defined]
            if raw.size and (raw.min() < fw.MIN_NODE_SCORE or raw.max() > fw.MAX_NODE_SCORE):
                # A plugin bug, never the request's fault (in-tree plugins keep
                # their range for any request): not a ValueError, which edges
                # read as a client error.
                raise RuntimeError(
                    f"plugin {p.NAME} returned scores outside "
                    f"[{fw.MIN_NODE_SCORE}, {fw.MAX_NODE_SCORE}]: {raw.min()}..{raw.max()}"
                )
            weighted = raw * weight
            by_plugin[p.NAME] = weighted
            total += weighted
        return ScoreOutcome(rows, total, by_plugin)

    @property
    def max_total_score(self) -> int:
        return fw.MAX_NODE_SCORE * sum(self.weights.get(p.NAME, 1) for p in self.score)

    # ------------------------------------------------------------ reserve & permit

    def run_reserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        for p in self.reserve:
            st = p.reserve(state, pod, node)
            if not st.ok:
                return st.with_plugin(p.NAME)
        return fw.SUCCESS

    def run_unreserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> None:
        for p in reversed(self.reserve):
            try:
                p.unreserve(state, pod, node)
            except Exception:
                log.exception("Unreserve %s failed for %s", p.NAME, pod.key)

    def run_permit(self, state: fw.CycleState, pod: PodInfo, node: str) -> tuple[fw.Status, dict[str, float]]:
        """Success, or Wait with per-plugin timeouts, or the first rejection."""
        waits: dict[str, float] = {}
        for p in self.permit:
            st, timeout = p.permit(state, pod, node)
            if st.code == fw.Code.WAIT:
                waits[p.NAME] = timeout
            elif not st.ok:
                return st.with_plugin(p.NAME), {}
        if waits:
            return fw.Status(fw.Code.WAIT), waits
        return fw.SUCCESS, {}

    # ------------------------------------------------------------ binding cycle

    async def run_pre_bind(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        for p in self.pre_bind:
            if p.NAME in state.skip_pre_bind:
                continue
            st = await p.pre_bind(state, pod, node)
            if not st.ok:
                return st.with_plugin(p.NAME)
        return fw.SUCCESS

    async def run_bind(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        for p in self.bind:
            st = await p.bind(state, pod, node)
            if st.code == fw.Code.SKIP:
                continue
            return st if st.ok else st.with_plugin(p.NAME)
        return fw.Status.error("no bind plugin bound the pod")

    def run_post_bind(self, state: fw.CycleState, pod: PodInfo, node: str) -> None:
        for p in self.post_bind:
            try:
                p.post_bind(state, pod, node)
            except Exception:
                log.exception("PostBind %s failed for %s", p.NAME, pod.key)
