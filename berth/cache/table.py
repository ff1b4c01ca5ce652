"""A columnar view of nodes, so a filter or a score sees every node at once.

kube-scheduler runs each Filter plugin once per node (in 16 goroutines);
Berth runs it once per pod over arrays that hold one row per node:

- ``alloc``/``req``/``req_nz``: int64 ``[nodes, resources]`` — allocatable,
  requested, and requested with scoring's non-zero defaults (kube-scheduler's
  ``NodeInfo.Allocatable``, ``Requested``, ``NonZeroRequested``); sums are
  checked (:meth:`NodeTable.usage_overflow`), never wrapped;
- ``unschedulable``, ``taint_group`` (nodes with the same taints share a group,
  so tolerations are judged once per distinct taint set), ``alive``;
- label columns, built lazily per key as categorical codes, so a node
  selector or a topology key becomes a few numpy comparisons;
- ``infos``: per node :class:`NodeInfo` (the node object, its pods, ports).

The cache keeps one live table and mutates it; a scheduling cycle reads a
:class:`Snapshot`, which copies only the rows whose generation moved since the
last cycle (``Cache.UpdateSnapshot`` in pkg/scheduler/backend/cache/cache.go).
The extender's full-object mode builds a throw-away table from the nodes in a
request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from berth.cache.infos import NodeInfo, PodInfo
from berth.cluster import model, resources
from berth.errors import ResourceExhausted

__all__ = ["INT64_MAX", "DerivedLabels", "LabelColumn", "NodeTable", "ResourceColumns", "UsageOverflow"]

#: The largest amount a column of ``req``/``req_nz`` holds.
INT64_MAX = int(np.iinfo(np.int64).max)

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
HOSTNAME_LABEL = "kubernetes.io/hostname"


class UsageOverflow(ResourceExhausted):
    """A node's requested amount of a resource would pass int64."""


def _replaces_alike(step: Iterable[tuple[str, int, PodInfo]]) -> bool:
    """A step that takes a pod off a node and counts one with the same
    usage there (a binding's confirmation, a status update): it leaves every
    sum where it was, so it cannot carry one past int64."""
    if not isinstance(step, (list, tuple)) or len(step) != 2:
        return False
    (node_a, sign_a, a), (node_b, sign_b, b) = step
    return node_a == node_b and sign_a == -sign_b and (a.usage is b.usage or a.usage == b.usage)


class ResourceColumns:
    """Which column of the resource arrays holds which resource.

    cpu, memory, ephemeral-storage and pods come first; other resources get a
    column the first time a node or a pod names one.
    """

    FIXED = (resources.CPU, resources.MEMORY, resources.EPHEMERAL_STORAGE, resources.PODS)

    def __init__(self) -> None:
        self.names: list[str] = list(self.FIXED)
        self.index: dict[str, int] = {n: i for i, n in enumerate(self.names)}

    def __len__(self) -> int:
        return len(self.names)

    def column(self, name: str) -> int:
        """The column of ``name``, adding one when it is new."""
        i = self.index.get(name)
        if i is None:
            i = self.index[name] = len(self.names)
            self.names.append(name)
        return i

    def copy(self) -> ResourceColumns:
        c = ResourceColumns()
        c.names = list(self.names)
        c.index = dict(self.index)
        return c


class _ImageIndex(Mapping[str, tuple[IntArray, IntArray]]):
    """Image name -> (rows that have it, its size on each), as one pair of
    arrays sliced per name: a pair of arrays for each name cost ~350 bytes,
    and 5000 nodes listing 18 images under a digest of their own each held
    90 000 names (~30 MB; bench.memory footprint)."""

    __slots__ = ("_at", "_rows", "_sizes", "_starts")

    def __init__(self, acc: dict[str, tuple[list[int], list[int]]]) -> None:
        self._at: dict[str, int] = {}
        rows: list[int] = []
        sizes: list[int] = []
        starts = [0]
        for name, (r, sz) in acc.items():
            self._at[name] = len(starts) - 1
            rows.extend(r)
            sizes.extend(sz)
            starts.append(len(rows))
        self._rows = np.asarray(rows, dtype=np.int64)
        self._sizes = np.asarray(sizes, dtype=np.int64)
        self._starts = np.asarray(starts, dtype=np.int64)

    def __getitem__(self, name: str) -> tuple[IntArray, IntArray]:
        k = self._at[name]
        a, b = self._starts[k], self._starts[k + 1]
        return self._rows[a:b], self._sizes[a:b]

    def __iter__(self) -> Iterator[str]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)


class DerivedLabels(Protocol):
    """Node labels computed from other objects (Volcano HyperNodes' tiers,
    :class:`berth.cluster.hypernodes.HyperNodeSet`): label columns read them
    for a node that does not carry the key itself. ``version`` moves when
    the objects change; ``compute`` maps label key -> node name -> value."""

    @property
    def version(self) -> int: ...

    def compute(self, nodes: Iterable[model.Node]) -> Mapping[str, Mapping[str, str]]: ...


@dataclasses.dataclass(slots=True)
class LabelColumn:
    """One label key over all nodes: ``codes[i]`` indexes ``values``, -1 = absent."""

    codes: npt.NDArray[np.int32]
    values: list[str]
    code_of: dict[str, int]

    def mask_in(self, values: Iterable[str]) -> BoolArray:
        codes = [self.code_of[v] for v in values if v in self.code_of]
        if not codes:
            return np.zeros(len(self.codes), dtype=bool)
        if len(codes) == 1:
            out: BoolArray = self.codes == codes[0]
            return out
        return np.isin(self.codes, codes)

    def present(self) -> BoolArray:
        return self.codes >= 0

    def mask_compare(self, op: str, bound: int) -> BoolArray:
        """Gt/Lt against each distinct value parsed as an integer."""
        ok = np.zeros(len(self.values) + 1, dtype=bool)  # last slot: absent (-1)
        for i, v in enumerate(self.values):
            try:
                have = int(v)
            except ValueError:
                continue
            ok[i] = have > bound if op == "Gt" else have < bound
        return ok[self.codes]


class NodeTable:
    """Rows of node state; see the module docstring."""

    def __init__(self, columns: ResourceColumns | None = None, capacity: int = 64) -> None:
        self.columns = columns if columns is not None else ResourceColumns()
        self.size = 0  # rows in use (alive or not)
        cap = max(capacity, 1)
        r = len(self.columns)
        self.alloc: IntArray = np.zeros((cap, r), dtype=np.int64)
        self.req: IntArray = np.zeros((cap, r), dtype=np.int64)
        self.req_nz: IntArray = np.zeros((cap, r), dtype=np.int64)
        self.alive: BoolArray = np.zeros(cap, dtype=bool)
        self.unschedulable: BoolArray = np.zeros(cap, dtype=bool)
        self.taint_group: npt.NDArray[np.int32] = np.zeros(cap, dtype=np.int32)
        self.gen: IntArray = np.zeros(cap, dtype=np.int64)
        #: Row -> its generation, oldest first (:meth:`stamp` moves a row to
        #: the end): a snapshot walks it from the newest back to the first
        #: row it has already seen, instead of comparing every row's
        #: generation (kube-scheduler's cache keeps its nodes in a list
        #: ordered by generation for the same walk: ``UpdateSnapshot`` in
        #: pkg/scheduler/backend/cache/cache.go).
        self.recent: dict[int, int] = {}
        #: The newest generation :meth:`stamp` gave a row (0: none yet).
        self.generation = 0
        self.infos: list[NodeInfo | None] = []
        self.index: dict[str, int] = {}
        # Distinct taint sets; group 0 is "no taints".
        self.taint_sets: list[tuple[model.Taint, ...]] = [()]
        self._taint_group_of: dict[tuple[model.Taint, ...], int] = {(): 0}
        # Bumped when anything label-, taint- or membership-shaped changes.
        self.shape_version = 0
        self._label_cols: dict[str, LabelColumn] = {}
        self._label_cols_version: object = -1
        #: Labels derived from other objects, shared with snapshots (None: none).
        self.derived: DerivedLabels | None = None
        self._derived_values: Mapping[str, Mapping[str, str]] | None = None
        self._order: IntArray | None = None
        self._images: _ImageIndex | None = None
        # The table whose row numbers this one shares: itself, or for a
        # snapshot the cache's live table. Indexes kept by row (see
        # berth.cache.podindex) apply to a table only when they share row space.
        self.row_space: NodeTable = self

    # ------------------------------------------------------------ growth

    def _grow_rows(self, need: int) -> None:
        cap = len(self.alive)
        if need <= cap:
            return
        new = max(need, cap * 2)

        def grow(a: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
            out = np.zeros((new, *a.shape[1:]), dtype=a.dtype)
            out[:cap] = a
            return out

        self.alloc = grow(self.alloc)  # type: ignore[assignment]
        self.req = grow(self.req)  # type: ignore[assignment]
        self.req_nz = grow(self.req_nz)  # type: ignore[assignment]
        self.alive = grow(self.alive)  # type: ignore[assignment]
        self.unschedulable = grow(self.unschedulable)  # type: ignore[assignment]
        self.taint_group = grow(self.taint_group)  # type: ignore[assignment]
        self.gen = grow(self.gen)  # type: ignore[assignment]

    def ensure_columns(self) -> None:
        """Widen the resource arrays after ``columns`` gained resources."""
        r = len(self.columns)
        have = self.alloc.shape[1]
        if r <= have:
            return
        pad = ((0, 0), (0, r - have))
        self.alloc = np.pad(self.alloc, pad)
        self.req = np.pad(self.req, pad)
        self.req_nz = np.pad(self.req_nz, pad)

    def vector(self, amounts: dict[str, int]) -> IntArray:
        """A resource dict as a row vector in this table's column order."""
        for name in amounts:
            if name not in self.columns.index:
                self.columns.column(name)
        self.ensure_columns()
        v = np.zeros(self.alloc.shape[1], dtype=np.int64)
        for name, amount in amounts.items():
            v[self.columns.index[name]] = amount
        return v

    # ------------------------------------------------------------ rows

    def stamp(self, i: int, generation: int) -> None:
        """Row ``i`` changed: it now has ``generation``, which must exceed
        every generation stamped before (the cache's counter)."""
        self.gen[i] = generation
        recent = self.recent
        recent.pop(i, None)
        recent[i] = generation
        self.generation = generation

    def row(self, name: str) -> int:
        """The row of node ``name``, creating a (not alive) one when new."""
        i = self.index.get(name)
        if i is None:
            i = self.size
            self._grow_rows(i + 1)
            self.size += 1
            self.index[name] = i
            self.infos.append(NodeInfo(name))
            self.shape_version += 1
        return i

    def set_node(self, i: int, node: model.Node) -> None:
        info = self.infos[i]
        assert info is not None
        old = info.node
        info.node = node
        alloc = resources.node_allocatable(node)
        alloc_row = self.vector(alloc)
        self.alloc[i] = alloc_row
        self.unschedulable[i] = node.spec.unschedulable
        taints = tuple(node.spec.taints)
        g = self._taint_group_of.get(taints)
        if g is None:
            g = self._taint_group_of[taints] = len(self.taint_sets)
            self.taint_sets.append(taints)
        self.taint_group[i] = g
        if (
            old is None
            or not self.alive[i]
            or old.metadata.labels != node.metadata.labels
            or old.status.images != node.status.images
            or old.spec.taints != node.spec.taints
        ):
            self.shape_version += 1
        self.alive[i] = True

    def clear_node(self, i: int) -> None:
        info = self.infos[i]
        assert info is not None
        info.node = None
        self.alive[i] = False
        self.alloc[i] = 0
        self.shape_version += 1

    def usage_overflow(
        self,
        steps: Iterable[Iterable[tuple[str, int, PodInfo]]],
        running: dict[tuple[str, str], list[int]] | None = None,
    ) -> str | None:
        """Why these changes, made step by step, would carry a requested column
        past int64 (which numpy would wrap silently); None when they would not.

        A step is a list of ``(node, +1 | -1, pod)``: the pods a change counts
        on or takes off a node, checked once the whole step is made — as the
        cache replaces a pod. Every step is checked, not only the end, because
        the changes are made in this order. Sums are Python integers (exact),
        and nothing is changed here. ``running`` carries the sums from one
        call to the next: a long sequence checked in parts, as if in one.
        """
        running = {} if running is None else running
        for step in steps:
            if _replaces_alike(step):
                continue
            grown: list[tuple[str, str]] = []
            for node, sign, pi in step:
                for name, (req, nz) in pi.usage.items():
                    key = (node, name)
                    sums = running.get(key)
                    if sums is None:
                        sums = running[key] = self._usage_of(node, name)
                    sums[0] += sign * req
                    sums[1] += sign * nz
                    if sign > 0:
                        grown.append(key)
            for node, name in grown:
                req, nz = running[(node, name)]
                if req > INT64_MAX or nz > INT64_MAX:
                    what, total = ("requested", req) if req > INT64_MAX else ("non-zero requested", nz)
                    return f"node {node!r}: {what} {name} would overflow int64 ({total} > {INT64_MAX})"
        return None

    def _usage_of(self, node: str, name: str) -> list[int]:
        i = self.index.get(node)
        c = self.columns.index.get(name)
        if i is None or c is None or c >= self.req.shape[1]:
            return [0, 0]
        return [self.req.item(i, c), self.req_nz.item(i, c)]

    def add_pod_usage(self, i: int, pi: PodInfo, sign: int) -> None:
        """Add (sign=1) or remove (sign=-1) a pod's requests on row ``i``.

        Checked: an addition that would pass int64 raises UsageOverflow
        before anything changes (callers that replace a pod check
        :meth:`usage_overflow` first).
        """
        req_col, nz_col = self.req, self.req_nz
        updates: list[tuple[int, int, int]] = []
        for name, (req, nz) in pi.usage.items():
            c = self.columns.index.get(name)
            if c is None or c >= req_col.shape[1]:
                c = self.columns.column(name)
                self.ensure_columns()
                req_col, nz_col = self.req, self.req_nz
            new_req = req_col.item(i, c) + sign * req
            new_nz = nz_col.item(i, c) + sign * nz
            if new_req > INT64_MAX or new_nz > INT64_MAX:
                raise UsageOverflow(f"node {self.name(i)!r}: requested {name} would overflow int64")
            updates.append((c, new_req, new_nz))
        for c, new_req, new_nz in updates:
            req_col[i, c] = new_req
            nz_col[i, c] = new_nz

    # ------------------------------------------------------------ derived, lazily

    def node(self, i: int) -> model.Node:
        info = self.infos[i]
        assert info is not None and info.node is not None
        return info.node

    def name(self, i: int) -> str:
        info = self.infos[i]
        assert info is not None
        return info.name

    def names_of(self, rows: Iterable[int]) -> list[str]:
        """:meth:`name` of each row, in order."""
        infos = self.infos
        out = []
        for i in rows:
            info = infos[i]
            assert info is not None
            out.append(info.name)
        return out

    def label_column(self, key: str) -> LabelColumn:
        self._fresh_label_columns()
        col = self._label_cols.get(key)
        if col is None:
            col = self._label_cols[key] = self._build_label_column(key)
        return col

    def _fresh_label_columns(self) -> None:
        """Drop the label columns built for an older shape or derived labels."""
        version = self.shape_version if self.derived is None else (self.shape_version, self.derived.version)
        if self._label_cols_version != version:
            self._label_cols = {}
            self._label_cols_version = version
            self._derived_values = None

    def _build_label_column(self, key: str) -> LabelColumn:
        codes = np.full(self.size, -1, dtype=np.int32)
        values: list[str] = []
        code_of: dict[str, int] = {}
        derived = self._derived_all().get(key) if self.derived is not None else None
        for i, info in enumerate(self.infos):
            if info is None or info.node is None:
                continue
            v = info.node.metadata.labels.get(key)
            if v is None and (derived is None or (v := derived.get(info.name)) is None):
                continue
            c = code_of.get(v)
            if c is None:
                c = code_of[v] = len(values)
                values.append(v)
            codes[i] = c
        return LabelColumn(codes, values, code_of)

    def _derived_all(self) -> Mapping[str, Mapping[str, str]]:
        """Label key -> node name -> derived value, computed once per shape."""
        assert self.derived is not None
        if self._derived_values is None:
            alive = self.alive
            self._derived_values = self.derived.compute(
                info.node for i, info in enumerate(self.infos) if info is not None and info.node and alive[i]
            )
        return self._derived_values

    def order(self) -> IntArray:
        """Alive rows in kube-scheduler's NodeTree order: zones round-robin.

        (pkg/scheduler/backend/cache/node_tree.go: ``list()`` takes one node
        from each zone in turn, so a partial scan samples every zone.)
        """
        if self._order is not None and self._order_version == self.shape_version:
            return self._order
        zones: dict[str, list[int]] = {}
        for i in np.flatnonzero(self.alive[: self.size]).tolist():
            labels = self.node(i).metadata.labels
            zone = labels.get(REGION_LABEL, "") + ":\x00:" + labels.get(ZONE_LABEL, "")
            zones.setdefault(zone, []).append(i)
        out: list[int] = []
        lists = list(zones.values())
        depth = max((len(z) for z in lists), default=0)
        for k in range(depth):
            for z in lists:
                if k < len(z):
                    out.append(z[k])
        self._order = np.asarray(out, dtype=np.int64)
        self._order_version = self.shape_version
        return self._order

    _order_version: int = -1

    def images(self) -> Mapping[str, tuple[IntArray, IntArray]]:
        """Image name, exactly as nodes report it -> (rows that have it, its size on each).

        kube-scheduler keys ``NodeInfo.ImageStates`` by the node's names
        unchanged; only the pod's image is normalised before the lookup. A
        node listing one image under two names counts it once per name.
        """
        if self._images is not None and self._images_version == self.shape_version:
            return self._images
        acc: dict[str, tuple[list[int], list[int]]] = {}
        for i, info in enumerate(self.infos):
            if info is None or info.node is None:
                continue
            seen: set[str] = set()
            for img in info.node.status.images:
                for name in img.names:
                    if name in seen:
                        continue
                    seen.add(name)
                    rows, sizes = acc.setdefault(name, ([], []))
                    rows.append(i)
                    sizes.append(img.size_bytes)
        self._images = _ImageIndex(acc)
        self._images_version = self.shape_version
        return self._images

    _images_version: int = -1

    def rows_of(self, names: Sequence[str]) -> IntArray:
        """The rows of ``names``, in order (every name must be in the table)."""
        return np.asarray([self.index[n] for n in names], dtype=np.int64)

    def alive_rows(self) -> IntArray:
        return np.flatnonzero(self.alive[: self.size])

    @classmethod
    def of_nodes(cls, nodes: Sequence[model.Node], columns: ResourceColumns | None = None) -> NodeTable:
        """A table of exactly these nodes, in this order, with no pods."""
        t = cls(columns.copy() if columns is not None else None, capacity=len(nodes))
        for node in nodes:
            i = t.row(node.metadata.name)
            t.set_node(i, node)
        return t

    def take(self, rows: Sequence[int]) -> NodeTable:
        """A table of copies of these rows (distinct), in this order, with
        their requested resources: :meth:`of_nodes` plus the usage, copied
        column by column instead of re-derived node by node (preemption's
        scratch tables). ``infos`` are shared: callers that change a row's
        pods put clones there."""
        n = len(rows)
        src = np.asarray(rows, dtype=np.int64)
        t = NodeTable(self.columns.copy(), capacity=max(n, 1))
        t.ensure_columns()
        width = min(t.req.shape[1], self.req.shape[1])
        t.alloc[:n, :width] = self.alloc[src, :width]
        t.req[:n, :width] = self.req[src, :width]
        t.req_nz[:n, :width] = self.req_nz[src, :width]
        t.unschedulable[:n] = self.unschedulable[src]
        t.taint_group[:n] = self.taint_group[src]
        t.taint_sets = list(self.taint_sets)
        t._taint_group_of = dict(self._taint_group_of)
        t.infos = [self.infos[r] for r in rows]
        t.index = {self.name(r): i for i, r in enumerate(rows)}
        t.size = n
        t.alive[:n] = True
        t.shape_version += 1
        if self.derived is not None:
            # The rows' derived labels as this table's nodes give them (a
            # HyperNode conflict is judged over all nodes, not the rows taken).
            self._fresh_label_columns()
            t.derived, t._derived_values = self.derived, self._derived_all()
            t._label_cols_version = (t.shape_version, self.derived.version)
        return t

    @classmethod
    def of_rows(
        cls,
        nodes: Sequence[model.Node],
        allocatable: Sequence[dict[str, int]],
        columns: ResourceColumns | None = None,
    ) -> NodeTable:
        """:meth:`of_nodes` built column by column, for nodes whose canonical
        allocatable (``resources.node_allocatable``) is already known — the
        extender's full-NodeList mode, which keeps both per node across
        requests. Names must be distinct (callers check them)."""
        n = len(nodes)
        t = cls(columns.copy() if columns is not None else None, capacity=n)
        names = [node.metadata.name for node in nodes]
        t.index = dict(zip(names, range(n), strict=True))
        t.infos = [NodeInfo(name, node) for name, node in zip(names, nodes, strict=True)]
        t.size = n
        cols = t.columns
        at_row: list[int] = []
        at_col: list[int] = []
        amounts: list[int] = []
        for i, alloc in enumerate(allocatable):
            for name, amount in alloc.items():
                c = cols.index.get(name)
                at_row.append(i)
                at_col.append(cols.column(name) if c is None else c)
                amounts.append(amount)
        t.ensure_columns()
        if amounts:
            t.alloc[at_row, at_col] = amounts
        t.unschedulable[:n] = [node.spec.unschedulable for node in nodes]
        group_of = t._taint_group_of
        for i, node in enumerate(nodes):
            if node.spec.taints:
                taints = tuple(node.spec.taints)
                g = group_of.get(taints)
                if g is None:
                    g = group_of[taints] = len(t.taint_sets)
                    t.taint_sets.append(taints)
                t.taint_group[i] = g
        t.alive[:n] = True
        t.shape_version += 1
        return t


def normalize_image(name: str) -> str:
    """ImageLocality's normalizedImageName: an untagged, undigested image is ``:latest``."""
    if name.rfind(":") <= name.rfind("/") and "@" not in name:
        return name + ":latest"
    return name
