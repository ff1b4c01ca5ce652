"""Berth's plugin SDK: everything a plugin sees, importable from here.

A plugin is a class with a ``NAME``, an optional ``Args`` (a msgspec Struct
its ``pluginConfig`` args decode into, with an optional ``validate()``),
built as ``cls(args, handle)``, implementing the extension points it extends
(:mod:`berth.framework.interface` documents each one, when it runs and what
each :class:`Code` makes the scheduler do next). Publish it under the
``berth.plugins`` entry-point group; ``docs/plugins.md`` walks through
``examples/plugins/`` and :mod:`berth.testing` runs it in tests.

Filter and Score see every candidate node at once: a :class:`NodeTable`
(read it, never write it: it is the cycle's snapshot) and the rows to judge.
:class:`NodeFilter` / :class:`NodeScorer` loop over :class:`NodeInfo` for
plugins that think one node at a time.
"""

from __future__ import annotations

from berth.cache.infos import NodeInfo, PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model
from berth.framework.decision import Decision, DecisionKind, Reason
from berth.framework.handle import (
    ClusterClient,
    DecisionRecorder,
    Handle,
    Nominator,
    PodDisruptionBudgetLister,
    PodGroupLister,
    PodLister,
    WaitingPods,
)
from berth.framework.interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    ActionType,
    BindPlugin,
    ClusterEvent,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    NodeFilter,
    NodeScorer,
    NodeVerdicts,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueuedPodInfo,
    QueueSortPlugin,
    ReservePlugin,
    ScoreNormalizer,
    ScorePlugin,
    StateKey,
    Status,
)

__all__ = [
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "ActionType",
    "BindPlugin",
    "ClusterClient",
    "ClusterEvent",
    "Code",
    "CycleState",
    "Decision",
    "DecisionKind",
    "DecisionRecorder",
    "EnqueueExtensions",
    "FilterPlugin",
    "Handle",
    "NodeFilter",
    "NodeInfo",
    "NodeScorer",
    "NodeTable",
    "NodeVerdicts",
    "Nominator",
    "PermitPlugin",
    "Plugin",
    "PodDisruptionBudgetLister",
    "PodGroupLister",
    "PodInfo",
    "PodLister",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterExtensions",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin",
    "QueueSortPlugin",
    "QueuedPodInfo",
    "Reason",
    "ReservePlugin",
    "ScoreNormalizer",
    "ScorePlugin",
    "StateKey",
    "Status",
    "WaitingPods",
    "model",
]
