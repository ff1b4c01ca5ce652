"""kube-scheduler's extender verbs — Filter, Prioritize, Preempt, Bind — on
Berth's own model (``k8s.io/kube-scheduler/extender/v1``'s semantics; the
wire formats are the adapters': JSON in ``berth.adapters.http``, protobuf in
``berth.adapters.grpc``).

Nodes come either as names resolved in the cache (``nodeCacheCapable``) or
as full objects (a throw-away table of exactly those nodes, with the pods
Berth knows on them counted, as an informer-fed extender would). Either way
a node is named once: a name listed twice, or a node without one, is an
:class:`~berth.errors.InvalidArgument` naming the index (kube-scheduler
never sends either; answering for one of two would be a guess). Error paths
use the extender wire's Go field names (``Pod``, ``Nodes.items[3]``,
``NodeNames[3]``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections import OrderedDict

import msgspec
import numpy as np
import numpy.typing as npt

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model, resources
from berth.errors import InvalidArgument
from berth.framework import interface as fw
from berth.framework import preemption
from berth.plugins import image_locality
from berth.scheduling import algorithm
from berth.scheduling.core import Core, VerbError

__all__ = [
    "Extender",
    "FilterResult",
    "MetaVictims",
    "NodeNames",
    "NodeRows",
    "PrioritizeResult",
    "VictimsRequest",
    "check_node_names",
]

IntArray = npt.NDArray[np.int64]

#: k8s.io/kube-scheduler/extender/v1: MinExtenderPriority..MaxExtenderPriority.
MAX_EXTENDER_PRIORITY = 10

#: The node-name resolutions kept (one per distinct node list) and what they
#: may weigh in all: 8 bytes per name (its row, or its index when unknown).
#: 4 MiB holds eight lists of ~65 000 nodes; a list over 4 MiB is not kept.
RESOLUTIONS_MAX_ENTRIES = 8
RESOLUTIONS_MAX_BYTES = 4 << 20
_MISSING = "node is unknown to Berth's cache"

#: Tables of full node lists kept for reuse: Filter's and Prioritize's view
#: of the last list (each holds what its list holds: bounded by one request).
ROW_TABLES_KEPT = 2


def _quote(name: str) -> str:
    """A name as a field error quotes it, cut to a DNS subdomain's 253 characters."""
    return json.dumps(name if len(name) <= 253 else name[:253] + "...")


@dataclasses.dataclass(frozen=True, slots=True)
class _Resolution:
    """A node list resolved against one snapshot shape: the rows of the known
    names, in order, and the indexes of the unknown ones (no names are kept:
    the caller has the list)."""

    rows: IntArray
    missing: IntArray

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes + self.missing.nbytes) + 64


class NodeNames:
    """A NodeNames list checked once (every node named, and once:
    :func:`check_node_names`), with its resolution against the cache kept
    while the set of nodes (``shape_version``) holds.

    An adapter that sees the same list again (kube-scheduler sends the same
    one every cycle of a snapshot, to filter and then to prioritize) keeps
    one of these per list and hands it back: the list is then neither
    checked, digested nor resolved again. It holds what it derives from the
    list alone (rows: 8 bytes per name), so dropping it frees it.
    """

    __slots__ = ("_resolution", "_shape", "_table", "names")

    def __init__(self, names: list[str], *, checked: bool = False) -> None:
        """``checked``: the caller vouches that every name is non-empty and
        distinct (e.g. a subsequence of a checked list: Filter's survivors)."""
        if not checked:
            check_node_names(names, "NodeNames")
        self.names = names
        self._resolution: _Resolution | None = None
        self._table: NodeTable | None = None
        self._shape = -1

    def resolve(self, snap: NodeTable) -> _Resolution:
        """Which names are alive nodes of ``snap``, and their rows: kept while
        ``snap`` is the table last asked about and its shape holds (any node
        added, removed, revived or relabelled moves ``shape_version``)."""
        if self._resolution is None or self._table is not snap or self._shape != snap.shape_version:
            self._resolution = _resolution(snap, self.names)
            self._table = snap
            self._shape = snap.shape_version
        return self._resolution


def _resolution(snap: NodeTable, names: list[str]) -> _Resolution:
    """The rows of the alive nodes among ``names``, in order, and the indexes of the others."""
    rows = np.fromiter(map(snap.index.get, names, itertools.repeat(-1)), dtype=np.int64, count=len(names))
    known = rows >= 0
    known[known] = snap.alive[rows[known]]
    if not known.all():
        return _Resolution(_frozen(rows[known]), _frozen(np.flatnonzero(~known).astype(np.int64)))
    return _Resolution(_frozen(rows), _NO_ROWS)


def _frozen(a: IntArray) -> IntArray:
    """Kept across requests and handed to plugins: read-only, so none can change it for the next."""
    a.flags.writeable = False
    return a


_NO_ROWS: IntArray = _frozen(np.zeros(0, dtype=np.int64))


@dataclasses.dataclass(frozen=True, slots=True)
class NodeRows:
    """Full nodes as the table takes them: each node (only the fields the
    plugins read) beside its canonical allocatable
    (``resources.node_allocatable``), both already checked — the HTTP
    adapter decodes them from a NodeList and keeps them per resourceVersion."""

    nodes: list[model.Node]
    allocatable: list[dict[str, int]]


@dataclasses.dataclass(slots=True)
class _RowTable:
    """A table built from ``rows`` (kept alive here, so its id stays its own)
    and the rows into which the cache's pods were counted."""

    rows: NodeRows
    table: NodeTable
    counted: list[int]
    columns: int  # len(snapshot.columns) when built


@dataclasses.dataclass(slots=True)
class FilterResult:
    """The extender Filter's answer before any wire format: names that pass
    (in input order) and, for the others, why."""

    passed: list[str] = dataclasses.field(default_factory=list)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)
    unresolvable: dict[str, str] = dataclasses.field(default_factory=dict)
    error: str = ""


@dataclasses.dataclass(slots=True)
class PrioritizeResult:
    """Scores (0..MAX_EXTENDER_PRIORITY) aligned with ``names``."""

    names: list[str]
    scores: IntArray
    error: str = ""


@dataclasses.dataclass(slots=True)
class VictimsRequest:
    """kube-scheduler's proposed victims on one node: uids (nodeCacheCapable)
    or full pods Berth may not know."""

    uids: list[str] = dataclasses.field(default_factory=list)
    pods: list[model.Pod] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(slots=True)
class MetaVictims:
    uids: list[str]
    num_pdb_violations: int


class Extender:
    """The four extender verbs over one core."""

    def __init__(self, core: Core) -> None:
        self.core = core
        # (shape_version, digest of the node list) -> its resolution; LRU,
        # bounded by RESOLUTIONS_MAX_ENTRIES and RESOLUTIONS_MAX_BYTES.
        self._resolutions: OrderedDict[tuple[int, bytes], _Resolution] = OrderedDict()
        self._resolutions_bytes = 0
        # id(NodeRows) -> the table built from it, oldest first (see table_of_rows).
        self._row_tables: dict[int, _RowTable] = {}

    # ------------------------------------------------------------ verbs

    def filter(
        self,
        pod: model.Pod | PodInfo,
        *,
        names: list[str] | NodeNames | None = None,
        nodes: list[model.Node] | NodeRows | None = None,
        profile: str = "",
    ) -> FilterResult:
        """Names that pass, in input order, and why the others do not
        (kube-scheduler's ``findNodesThatPassExtenders`` reads this). When
        every name passes, ``passed`` is the very list given (not a copy).
        ``pod`` may be its :func:`pod_info` already (an adapter that keeps
        it for the same pod's next verb)."""
        pi, table, names, missing, rows = self._inputs(pod, names, nodes)
        return self._filter(pi, profile, table, names, missing, rows)

    def prioritize(
        self,
        pod: model.Pod | PodInfo,
        *,
        names: list[str] | NodeNames | None = None,
        nodes: list[model.Node] | NodeRows | None = None,
        profile: str = "",
    ) -> PrioritizeResult:
        """Scores in 0..10: Berth's weighted total scaled from 0..max to 0..10."""
        pi, table, names, missing, rows = self._inputs(pod, names, nodes)
        return self._prioritize(pi, profile, table, names, missing, rows)

    def preempt(
        self, pod: model.Pod, victims: dict[str, VictimsRequest], *, profile: str = ""
    ) -> dict[str, MetaVictims]:
        """Keep the candidates where removing (some of) the victims makes the pod fit."""
        core = self.core
        pi = pod_info(pod)
        fwk = core.framework_for(profile)
        snap = core.snapshot()
        out: dict[str, MetaVictims] = {}
        pdbs = core.pdbs.list()
        for node, proposed in victims.items():
            if node not in snap.index or not snap.alive[snap.index[node]]:
                continue
            info = snap.infos[snap.index[node]]
            assert info is not None
            uids = proposed.uids or [p.metadata.uid for p in proposed.pods]
            candidates = [info.pods[u] for u in uids if u in info.pods]
            # Victims Berth does not know on this node (full pods only) still count as removable.
            known = {c.uid for c in candidates}
            extra = [PodInfo.of(p) for p in proposed.pods if p.metadata.uid not in known]
            result = preemption.select_victims_on_node(
                fwk, pi, snap, info, candidates + extra, pdbs, restrict_to_candidates=True
            )
            if result is None or not result.victims:
                continue
            out[node] = MetaVictims([v.uid for v in result.victims], result.num_pdb_violations)
        return out

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        """Bind through the pod's source; the error message, or "" on success."""
        core = self.core
        pod = core.pods.get(uid) if uid else None
        if pod is None:
            pod = core.pods.by_key(model.pod_key(namespace, name))
        if pod is None:
            if core.default_source is None:
                return f'pods "{name}" not found'
            pod = model.Pod(metadata=model.ObjectMeta(name=name, namespace=namespace, uid=uid))
        if uid and pod.metadata.uid and pod.metadata.uid != uid:
            return f"pod {pod.key} has UID {pod.metadata.uid}, not {uid}"
        st = await core.client.bind(pod, node)
        return st.message()

    # ------------------------------------------------------------ node sets

    def reads_images(self, profile: str = "") -> bool:
        """Whether Prioritize reads nodes' ``status.images`` (ImageLocality
        scores); Filter never does. Decoders skip them otherwise."""
        return any(p.NAME == image_locality.ImageLocality.NAME for p in self.core.framework_for(profile).score)

    def _inputs(
        self,
        pod: model.Pod | PodInfo,
        names: list[str] | NodeNames | None,
        nodes: list[model.Node] | NodeRows | None,
    ) -> tuple[PodInfo, NodeTable, list[str], dict[str, str], IntArray | None]:
        """The pod, the table to judge on, the input names in order, the
        unknown ones, and the rows of ``names`` when every one is known."""
        pi = pod if isinstance(pod, PodInfo) else pod_info(pod)
        if nodes is not None:
            table = self.table_of_rows(nodes) if isinstance(nodes, NodeRows) else self.table_of_nodes(nodes)
            node_names = list(table.index)  # in row order: the nodes' order
            return pi, table, node_names, {}, np.arange(table.size, dtype=np.int64)
        snap = self.core.snapshot()
        if isinstance(names, NodeNames):
            found = names.resolve(snap)
            names = names.names
        else:
            names = names or []
            found = self._resolve(snap, names)
        if not len(found.missing):
            return pi, snap, names, {}, found.rows
        return pi, snap, names, dict.fromkeys((names[k] for k in found.missing.tolist()), _MISSING), None

    def _resolve(self, snap: NodeTable, names: list[str]) -> _Resolution:
        """Which names are alive nodes of the cache, and their rows.

        kube-scheduler sends the same node list again and again (every pod's
        filter, then its prioritize with the survivors), so resolutions are
        memoised per list while the set of nodes (``shape_version``) holds —
        keyed by a digest of the list, and holding only integers, so a
        request's names are not kept once it ends.
        """
        key = (snap.shape_version, hashlib.blake2b(msgspec.msgpack.encode(names), digest_size=16).digest())
        hit = self._resolutions.get(key)
        if hit is not None:
            self._resolutions.move_to_end(key)
            return hit
        check_node_names(names, "NodeNames")
        hit = _resolution(snap, names)
        if hit.nbytes <= RESOLUTIONS_MAX_BYTES:
            self._resolutions[key] = hit
            self._resolutions_bytes += hit.nbytes
            while len(self._resolutions) > RESOLUTIONS_MAX_ENTRIES or self._resolutions_bytes > RESOLUTIONS_MAX_BYTES:
                _, old = self._resolutions.popitem(last=False)
                self._resolutions_bytes -= old.nbytes
        return hit

    def table_of_nodes(self, nodes: list[model.Node]) -> NodeTable:
        """A table of exactly ``nodes`` (the extender's full-object mode), with
        the pods Berth knows on each of them counted, as an informer-fed
        extender would. Raises InvalidArgument for a nameless or repeated
        node, or a bad quantity, naming ``Nodes.items[i]``."""
        check_node_names([n.metadata.name for n in nodes], "Nodes.items", ".metadata.name")
        snap = self.core.snapshot()
        try:
            table = NodeTable.of_nodes(nodes, snap.columns)
        except resources.QuantityError as e:
            # Which node: looked for only now, the common case pays nothing.
            at = next((i for i, n in enumerate(nodes) if _bad_allocatable(n)), None)
            where = "Nodes.items" if at is None else f"Nodes.items[{at}]"
            raise resources.QuantityError(e.value, e.detail, f"{where}.{e.path}" if e.path else where) from None
        table.ensure_columns()
        self._count_known_pods(table, snap)
        return table

    def table_of_rows(self, rows: NodeRows) -> NodeTable:
        """:meth:`table_of_nodes` for nodes already checked (:class:`NodeRows`),
        built column by column.

        The table of the same ``rows`` object (the HTTP adapter hands the same
        one back while every node is unchanged, once for Filter's view and
        once for Prioritize's) is kept and reused: only what the cache's pods
        put in it (requested amounts, each node's pods) is counted again.
        Filter and Score only read a table, so nothing else can differ.
        """
        snap = self.core.snapshot()
        kept = self._row_tables.pop(id(rows), None)
        # Reused only while the cache's resource columns are those it was
        # built with (its first columns must mirror the snapshot's).
        if kept is not None and kept.rows is rows and kept.columns == len(snap.columns):
            table = kept.table
            table.req[:] = 0
            table.req_nz[:] = 0
            for i in kept.counted:
                info = table.infos[i]
                assert info is not None
                info.pods = {}
                info.used_ports = {}
        else:
            check_node_names([n.metadata.name for n in rows.nodes], "Nodes.items", ".metadata.name")
            table = NodeTable.of_rows(rows.nodes, rows.allocatable, snap.columns)
        counted = self._count_known_pods(table, snap)
        self._row_tables[id(rows)] = _RowTable(rows, table, counted, len(snap.columns))
        while len(self._row_tables) > ROW_TABLES_KEPT:
            del self._row_tables[next(iter(self._row_tables))]
        return table

    @staticmethod
    def _count_known_pods(table: NodeTable, snap: NodeTable) -> list[int]:
        """The pods Berth knows on the table's nodes, as an informer-fed
        extender counts them; the rows that got some."""
        if not snap.index:
            return []
        known = [(i, s) for i, s in enumerate(map(snap.index.get, table.index)) if s is not None]
        if known:
            dst = np.asarray([k for k, _ in known], dtype=np.int64)
            src = np.asarray([s for _, s in known], dtype=np.int64)
            width = min(table.req.shape[1], snap.req.shape[1])
            table.req[dst, :width] = snap.req[src, :width]
            table.req_nz[dst, :width] = snap.req_nz[src, :width]
            for d, s in known:
                src_info = snap.infos[s]
                dst_info = table.infos[d]
                if src_info is not None and dst_info is not None:
                    dst_info.pods = src_info.pods
                    dst_info.used_ports = src_info.used_ports
        return [d for d, _ in known]

    def _pass_through(self, pod: PodInfo) -> bool:
        ext = self.core.cfg.extender
        if not ext.pass_through_unmanaged or not ext.managed_resources:
            return False
        return not any(r in pod.requests for r in ext.managed_resources)

    # ------------------------------------------------------------ evaluation

    def _filter(
        self,
        pod: PodInfo,
        profile: str,
        table: NodeTable,
        names: list[str],
        missing: dict[str, str],
        rows: IntArray | None,
    ) -> FilterResult:
        fwk = self.core.framework_for(profile)
        res = FilterResult(unresolvable=dict(missing))
        known = [n for n in names if n not in missing] if missing else names
        if self._pass_through(pod):
            res.passed = known
            return res
        state = fw.CycleState()
        status, allowed = fwk.run_pre_filter(state, pod, table)
        if not status.ok:
            if status.code == fw.Code.ERROR:
                res.error = f"{status.plugin}: {status.message()}"
                return res
            unresolvable = status.code == fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            target = res.unresolvable if unresolvable else res.failed
            for n in known:
                target[n] = status.message()
            return res
        if allowed is not None:
            left_out = algorithm.absent_nodes_reason(state)  # kube-scheduler's text for these nodes
            for n in known:
                if n not in allowed:
                    res.unresolvable[n] = left_out
            known = [n for n in known if n in allowed]
        if rows is None or known is not names:
            rows = table.rows_of(known)
        out = fwk.run_filter(state, pod, table, rows)
        if out.ok.all():
            res.passed = known  # the caller's list when every name passes (see filter)
            return res
        res.passed = [known[k] for k in np.flatnonzero(out.ok).tolist()]
        for k in np.flatnonzero(~out.ok).tolist():
            st = out.statuses[int(out.reason[k])]
            target = res.unresolvable if st.code == fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE else res.failed
            target[known[k]] = st.message()
        return res

    def _prioritize(
        self,
        pod: PodInfo,
        profile: str,
        table: NodeTable,
        names: list[str],
        missing: dict[str, str],
        rows: IntArray | None,
    ) -> PrioritizeResult:
        fwk = self.core.framework_for(profile)
        scores = np.zeros(len(names), dtype=np.int64)
        res = PrioritizeResult(names, scores)
        known_at = np.asarray([k for k, n in enumerate(names) if n not in missing], dtype=np.int64) if missing else None
        known = [names[k] for k in known_at.tolist()] if known_at is not None else names
        if not known or self._pass_through(pod):
            return res
        state = fw.CycleState()
        status, _ = fwk.run_pre_filter(state, pod, table)
        if not (status.ok or status.code == fw.Code.SKIP):
            return res
        if rows is None:
            rows = table.rows_of(known)
        st = fwk.run_pre_score(state, pod, table, rows)
        if not st.ok:
            res.error = f"{st.plugin}: {st.message()}"
            return res
        total = fwk.run_score(state, pod, table, rows).total
        top = max(fwk.max_total_score, 1)
        scaled = (total * MAX_EXTENDER_PRIORITY + top // 2) // top
        if known_at is None:
            res.scores = scaled
        else:
            scores[known_at] = scaled
        return res


def pod_info(pod: model.Pod) -> PodInfo:
    """The pod a verb judges; namespace defaults to "default"."""
    if not pod.metadata.name and not pod.metadata.uid:
        raise VerbError("pod: required (a pod with metadata.name)")
    if not pod.metadata.namespace:
        pod.metadata.namespace = "default"
    try:
        return PodInfo.of(pod)
    except resources.QuantityError as e:
        raise resources.QuantityError(e.value, e.detail, f"Pod.{e.path}" if e.path else "Pod") from None


def _bad_allocatable(node: model.Node) -> bool:
    try:
        resources.node_allocatable(node)
    except resources.QuantityError:
        return True
    return False


def check_node_names(names: list[str], path: str, suffix: str = "") -> None:
    """Every node named, and once (``field.Required`` / ``field.Duplicate``'s wording)."""
    if len(set(names)) == len(names) and all(names):
        return
    first: dict[str, int] = {}
    for i, name in enumerate(names):
        if not name:
            raise InvalidArgument(f"{path}[{i}]{suffix}: Required value: a node name is required")
        if name in first:
            raise InvalidArgument(
                f"{path}[{i}]{suffix}: Duplicate value: {_quote(name)} (also {path}[{first[name]}]{suffix})"
            )
        first[name] = i
