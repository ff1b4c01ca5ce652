"""Every extension point of Berth's scheduling framework, in one place.

This is kube-scheduler's ``framework/interface.go`` in Python, with one
deliberate difference: Filter, Score and PreScore see **all candidate nodes
at once** (a :class:`~berth.cache.table.NodeTable` and the rows to judge) and
answer with arrays, so a plugin can be a few numpy operations instead of a
Python loop per node. Plugins that think per node subclass
:class:`NodeFilter` / :class:`NodeScorer`, which loop for them.

Order of a scheduling cycle (``berth.scheduling.loop`` / kube-scheduler's
``schedule_one.go``): PreEnqueue (before the queue) -> QueueSort -> PreFilter
-> Filter -> PostFilter (only when no node fits) -> PreScore -> Score ->
NormalizeScore -> Reserve -> Permit; then the binding cycle: WaitOnPermit ->
PreBind -> Bind -> PostBind. A failure after Reserve runs Unreserve in reverse
order.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from berth.cache.infos import NodeInfo, PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model

if TYPE_CHECKING:
    from berth.framework.handle import Handle

__all__ = [
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "SCORE_SCRATCH",
    "ActionType",
    "BindPlugin",
    "ClusterEvent",
    "Code",
    "CycleState",
    "EnqueueExtensions",
    "FilterPlugin",
    "NodeFilter",
    "NodeScorer",
    "NodeVerdicts",
    "PermitPlugin",
    "Plugin",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreBindPlugin",
    "PreBindPreFlight",
    "PreEnqueuePlugin",
    "PreFilterExtensions",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin",
    "QueueSortPlugin",
    "QueuedPodInfo",
    "ReservePlugin",
    "ScoreNormalizer",
    "ScorePlugin",
    "ScoreScratch",
    "StateKey",
    "Status",
    "score_memo",
]

#: framework.MaxNodeScore / MinNodeScore: a Score plugin's range after NormalizeScore.
MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


class Code(enum.IntEnum):
    """A plugin's verdict; each member says what the scheduler does next."""

    #: Go on with the next plugin / extension point.
    SUCCESS = 0
    #: Something broke (not the pod's fault): the attempt aborts and the pod
    #: goes to the backoff queue.
    ERROR = 1
    #: The node (or pod) does not fit now; preemption may help. The pod goes
    #: to the unschedulable pool until an event its rejecting plugins
    #: registered for arrives.
    UNSCHEDULABLE = 2
    #: The node cannot fit the pod and preemption would not change that (e.g.
    #: node affinity); PostFilter does not consider such nodes.
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    #: Permit only: the pod waits (bounded by a timeout) before binding.
    WAIT = 4
    #: PreFilter/PreScore only: this plugin's Filter/Score is not needed for
    #: this pod and is skipped.
    SKIP = 5
    #: The pod waits for something outside the scheduler (e.g. a gang to be
    #: complete); like UNSCHEDULABLE but never triggers preemption.
    PENDING = 6


@dataclasses.dataclass(frozen=True, slots=True)
class Status:
    """A code, human-readable reasons, and the plugin that said it."""

    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @classmethod
    def unschedulable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE, reasons, plugin)

    @classmethod
    def unresolvable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, plugin)

    @classmethod
    def error(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.ERROR, reasons, plugin)

    @classmethod
    def skip(cls) -> Status:
        return cls(Code.SKIP)

    @property
    def ok(self) -> bool:
        return self.code == Code.SUCCESS

    @property
    def is_rejection(self) -> bool:
        """Unschedulable, unresolvable or pending: the pod, not the scheduler, is stuck."""
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        return self if self.plugin == plugin else dataclasses.replace(self, plugin=plugin)


SUCCESS = Status()

T = TypeVar("T")


class StateKey(Generic[T]):
    """A typed key into :class:`CycleState` (instead of a string-keyed bag)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"StateKey({self.name!r})"


class CycleState:
    """Per-attempt data plugins hand from one extension point to the next."""

    __slots__ = ("_data", "skip_filter", "skip_pre_bind", "skip_score")

    def __init__(self) -> None:
        self._data: dict[StateKey[Any], Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()
        self.skip_pre_bind: set[str] = set()

    def write(self, key: StateKey[T], value: T) -> None:
        self._data[key] = value

    def read(self, key: StateKey[T]) -> T:
        try:
            return self._data[key]  # type: ignore[no-any-return]
        except KeyError:
            raise KeyError(f"{key.name}: no state written in this cycle (PreFilter skipped?)") from None

    def get(self, key: StateKey[T]) -> T | None:
        return self._data.get(key)


class ScoreScratch:
    """What the Score plugins of one ``Framework.run_score`` call share: work
    on the same rows of the same table (e.g. the rows' allocatable amounts,
    which NodeResourcesFit and NodeResourcesBalancedAllocation both read),
    done once. Lives for that one call only (:data:`SCORE_SCRATCH`), so
    nothing in it can outlive a change to the table; a plugin called outside
    ``run_score`` finds none (:func:`score_memo`) and does the work itself."""

    __slots__ = ("memo", "nodes", "rows")

    def __init__(self, nodes: object, rows: object) -> None:
        self.nodes = nodes
        self.rows = rows
        self.memo: dict[Any, Any] = {}


SCORE_SCRATCH: StateKey[ScoreScratch | None] = StateKey("ScoreScratch")


def score_memo(state: CycleState, nodes: object, rows: object) -> dict[Any, Any] | None:
    """The memo of the ``run_score`` call scoring exactly ``rows`` of ``nodes`` (same objects), if any."""
    s = state.get(SCORE_SCRATCH)
    if s is not None and s.nodes is nodes and s.rows is rows:
        return s.memo
    return None


# ---------------------------------------------------------------- events


class ActionType(enum.Flag):
    """What happened to a cluster object (framework.ActionType)."""

    ADD = enum.auto()
    DELETE = enum.auto()
    UPDATE_NODE_ALLOCATABLE = enum.auto()
    UPDATE_NODE_LABEL = enum.auto()
    UPDATE_NODE_TAINT = enum.auto()
    UPDATE_NODE_CONDITION = enum.auto()
    UPDATE_POD_LABEL = enum.auto()
    UPDATE_POD_SCALE_DOWN = enum.auto()
    UPDATE_POD_TOLERATION = enum.auto()
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = enum.auto()
    UPDATE = (
        UPDATE_NODE_ALLOCATABLE
        | UPDATE_NODE_LABEL
        | UPDATE_NODE_TAINT
        | UPDATE_NODE_CONDITION
        | UPDATE_POD_LABEL
        | UPDATE_POD_SCALE_DOWN
        | UPDATE_POD_TOLERATION
        | UPDATE_POD_SCHEDULING_GATES_ELIMINATED
    )
    ALL = ADD | DELETE | UPDATE


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A kind of change: resource ("Node", "Pod", "AssignedPod", "PodGroup", ...) and actions."""

    resource: str
    action: ActionType
    label: str = ""

    def matches(self, other: ClusterEvent) -> bool:
        """Whether this registered interest covers the event ``other``."""
        resource_ok = self.resource == other.resource or self.resource == "*"
        return resource_ok and bool(self.action & other.action)


# ---------------------------------------------------------------- results


@dataclasses.dataclass(slots=True)
class NodeVerdicts:
    """A Filter plugin's answer for a batch of rows.

    ``ok[k]`` judges ``rows[k]``; where it is False, ``statuses[reason[k]]``
    says why (``reason`` may be None when every failing row shares
    ``statuses[0]``).
    """

    ok: BoolArray
    statuses: list[Status] = dataclasses.field(default_factory=list)
    reason: npt.NDArray[np.int32] | None = None

    @classmethod
    def all_ok(cls, n: int) -> NodeVerdicts:
        return cls(np.ones(n, dtype=bool))

    @classmethod
    def fail_where(cls, failed: BoolArray, status: Status) -> NodeVerdicts:
        return cls(~failed, [status])

    @classmethod
    def per_node(cls, statuses: Iterable[Status | None]) -> NodeVerdicts:
        """Verdicts from one status per row (None or a success: the row
        passes), equal failure statuses sharing one entry: for plugins
        that judge node by node."""
        failures: list[Status] = []
        index: dict[Status, int] = {}
        ok_list: list[bool] = []
        reasons: list[int] = []
        for st in statuses:
            if st is None or st.ok:
                ok_list.append(True)
                reasons.append(0)
                continue
            i = index.get(st)
            if i is None:
                i = index[st] = len(failures)
                failures.append(st)
            ok_list.append(False)
            reasons.append(i)
        return cls(np.array(ok_list, dtype=bool), failures, np.array(reasons, dtype=np.int32))

    def status_at(self, k: int) -> Status:
        if self.ok[k]:
            return SUCCESS
        return self.statuses[0 if self.reason is None else int(self.reason[k])]


@dataclasses.dataclass(frozen=True, slots=True)
class PreFilterResult:
    """PreFilter's answer: a status, and optionally the only nodes worth filtering."""

    status: Status = SUCCESS
    node_names: frozenset[str] | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class PostFilterResult:
    """PostFilter's answer (``fwk.PostFilterResult``). ``nominated_node``
    is the NominatingInfo: None leaves the pod's nomination as it is (a nil
    result, ModeNoop), "" clears it and a node name sets it (ModeOverride)."""

    status: Status
    nominated_node: str | None = None


@dataclasses.dataclass(slots=True, eq=False)
class QueuedPodInfo:
    """A pod in the scheduling queue (framework.QueuedPodInfo)."""

    info: PodInfo
    #: When the pod was (re-)added: refreshed by every failed attempt, as
    #: upstream's Timestamp is; PrioritySort orders by it.
    timestamp: float
    initial_attempt_timestamp: float | None = None
    #: When the pod first entered the queue (never refreshed).
    enqueued: float = 0.0
    attempts: int = 0
    unschedulable_plugins: set[str] = dataclasses.field(default_factory=set)
    pending_plugins: set[str] = dataclasses.field(default_factory=set)
    gated_by: str = ""
    profile: str = ""
    #: Last moved out of unschedulablePods by podMaxInUnschedulablePodsDuration,
    #: not by an event (``WasFlushedFromUnschedulable``, v1.36): cleared by
    #: the next failed attempt, counted by scheduler_pod_scheduled_after_flush_total.
    was_flushed_from_unschedulable: bool = False

    @property
    def pod(self) -> model.Pod:
        return self.info.pod


# ---------------------------------------------------------------- plugins


@runtime_checkable
class Plugin(Protocol):
    """Every plugin has a NAME; its factory is ``cls(args, handle)``."""

    NAME: ClassVar[str]


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: PodInfo) -> Status:
        """Before a pod enters activeQ. Anything but Success keeps it gated
        (outside activeQ, counted as ``gated``) until an event the plugin
        registered for arrives. Must be cheap: it runs on every enqueue."""


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def sort_key(self, pod: QueuedPodInfo) -> Any:
        """Key ordering activeQ: smaller pops first. Only one QueueSort plugin
        may be enabled, and every profile must use the same one."""


@runtime_checkable
class EnqueueExtensions(Plugin, Protocol):
    def events_to_register(self) -> Sequence[ClusterEvent]:
        """Events that may make a pod this plugin rejected schedulable. A pod
        leaves the unschedulable pool only on such an event (or after the
        pool's maximum stay)."""


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> PreFilterResult:
        """Once per attempt, before Filter. Unschedulable ends the attempt for
        every node; Skip skips this plugin's Filter; a node set narrows the
        nodes Filter looks at (intersected across plugins)."""


@runtime_checkable
class PreFilterExtensions(Protocol):
    """PreFilter state that preemption's dry runs update instead of re-running
    PreFilter (``framework.PreFilterExtensions``)."""

    def add_pod(self, state: CycleState, pod: PodInfo, added: PodInfo, node: NodeInfo) -> None:
        """``added`` now counts on ``node``: update this plugin's PreFilter state."""

    def remove_pod(self, state: CycleState, pod: PodInfo, removed: PodInfo, node: NodeInfo) -> None:
        """``removed`` no longer counts on ``node``."""


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> NodeVerdicts:
        """Judge ``rows`` of ``nodes``. A node is feasible only when every
        Filter plugin passes it; the first plugin to fail it gives its reason.
        Unschedulable lets PostFilter (preemption) try the node;
        UnschedulableAndUnresolvable does not."""


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        failures: dict[int, Status],
    ) -> PostFilterResult:
        """Only when no node passed Filter (``failures`` maps row -> status).
        May make the pod schedulable later, e.g. by preempting victims and
        nominating a node. Success ends the PostFilter phase."""


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> Status:
        """Once per attempt with the feasible rows. Skip skips this plugin's
        Score; an error aborts the attempt."""


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> IntArray:
        """Raw scores for ``rows``. After :meth:`normalize_score` (if the plugin
        has one) they must lie in MIN_NODE_SCORE..MAX_NODE_SCORE; the framework
        multiplies them by the plugin's weight and sums over plugins."""


@runtime_checkable
class ScoreNormalizer(Protocol):
    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        """Rescale one plugin's scores over all feasible nodes."""


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """After the pod is assumed on ``node``. A failure runs Unreserve."""

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Undo :meth:`reserve`; must be idempotent and must not fail."""


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        """Last step of the scheduling cycle. Success binds; Wait holds the
        pod (up to the returned timeout, seconds) until a plugin allows or
        rejects it through the Handle; anything else unreserves it."""


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Before Bind (e.g. provisioning a volume). A failure unreserves."""


@runtime_checkable
class PreBindPreFlight(Protocol):
    """Optional for a PreBind plugin (``PreBindPlugin.PreBindPreFlight``,
    ``k8s.io/kube-scheduler/framework/interface.go`` v0.37.2): whether its
    PreBind has work for this pod on ``node``, asked at the start of the
    binding cycle. Success: it has (the pod's nominatedNodeName is written
    first, and a preemptor may cancel the pod during PreBind); Skip: nothing
    to do, its PreBind is skipped; Error fails the binding cycle. Cheap, no
    API call. A PreBind plugin without it counts as having work."""

    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node: str) -> Status: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Bind plugins are tried in order; Skip passes to the next one, the
        first other answer wins."""


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """After a successful bind; informational."""


# ---------------------------------------------------------------- per-node helpers


class NodeFilter:
    """Base for a Filter plugin written one node at a time.

    Subclasses set NAME and implement :meth:`filter_node`; the framework
    calls :meth:`filter`, which loops. Convenient for out-of-tree plugins;
    in-tree plugins work on arrays.
    """

    NAME: ClassVar[str] = ""

    def __init__(self, args: Any = None, handle: Handle | None = None) -> None:
        self.args = args
        self.handle = handle

    def filter_node(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        raise NotImplementedError

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> NodeVerdicts:
        def judge(row: int) -> Status:
            info = nodes.infos[row]
            assert info is not None
            return self.filter_node(state, pod, info)

        return NodeVerdicts.per_node(judge(row) for row in rows.tolist())


class NodeScorer:
    """Base for a Score plugin written one node at a time (see NodeFilter)."""

    NAME: ClassVar[str] = ""

    def __init__(self, args: Any = None, handle: Handle | None = None) -> None:
        self.args = args
        self.handle = handle

    def score_node(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        raise NotImplementedError

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> IntArray:
        out = np.zeros(len(rows), dtype=np.int64)
        for k, row in enumerate(rows.tolist()):
            info = nodes.infos[row]
            assert info is not None
            out[k] = self.score_node(state, pod, info)
        return out


def implements(plugin: object, points: Iterable[type]) -> list[type]:
    """Which extension-point protocols ``plugin`` implements."""
    return [p for p in points if isinstance(plugin, p)]
