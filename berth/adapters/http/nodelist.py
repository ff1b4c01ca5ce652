"""Full NodeLists (the extender's non-``nodeCacheCapable`` mode) decoded
straight into the node table's rows, reusing the rows of unchanged nodes.

kube-scheduler sends its informer's Node objects, as the API server wrote
them: conditions, addresses, nodeInfo, images, managedFields — about 6 KB a
node, 30 MB for 5000. Of that the plugins read a node's name, labels,
``spec.unschedulable``, ``spec.taints``, allocatable (capacity where
allocatable is unset) and ``status.declaredFeatures`` (NodeDeclaredFeatures),
and Prioritize's ImageLocality its images. So:

- each item is decoded by msgspec into Structs that declare only those
  fields (``_Node``; ``_NodeImages`` when the profile scores images): msgspec
  skips the rest in C without building anything, and the Structs are
  untracked by the garbage collector (``gc=False``: they hold only strings);
- the rows of the last request are kept, keyed by (name, resourceVersion):
  an informer's object keeps its resourceVersion until the node changes, so
  an item whose key matches (and whose JSON has the same length) is not
  decoded again — only its key is read. This trusts the client as client-go
  trusts the API server: other content under the same resourceVersion gets
  the first content's row. Nodes without a resourceVersion are never reused.
  Only the last request's rows are kept (per variant), so a node that
  changes or leaves the list is dropped at the next request, and what is
  held is bounded by one request (``http.maxBodyBytes``). When every row is
  reused in the same order, the same :class:`~berth.scheduling.verbs.NodeRows`
  object is returned, and the core reuses the table it built from it.
- the fields no plugin reads are not validated: a malformed annotation or
  condition passes, as it passes every plugin. On any error in the fields
  read, the request is checked again the old way (every item as a
  :class:`berth.cluster.model.Node`, then names, then quantities), so a bad
  request gets the same message as before, naming the same field.

The table is then built column by column (``NodeTable.of_rows``) and each
surviving item answered with its bytes as received.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

import msgspec

from berth import errors
from berth.adapters.http import bounds
from berth.cluster import model, resources
from berth.scheduling import verbs

__all__ = ["NodeListReader", "RawNodeList", "decode_error", "old_nodes"]


class RawNodeList(msgspec.Struct):
    """A v1.NodeList with each item kept raw (answered back byte for byte)."""

    items: list[msgspec.Raw] | None = None


class _Key(msgspec.Struct, gc=False, rename="camel"):
    name: str = ""
    resource_version: str = ""


class _KeyNode(msgspec.Struct, gc=False):
    """Only what says whether a node is the one seen last time."""

    metadata: _Key = msgspec.field(default_factory=_Key)


class _Meta(msgspec.Struct, gc=False, rename="camel"):
    name: str = ""
    resource_version: str = ""
    labels: dict[str, str] = {}


class _Status(msgspec.Struct, gc=False):
    capacity: model.ResourceList = {}
    allocatable: model.ResourceList = {}
    declared_features: list[str] = msgspec.field(default_factory=list, name="declaredFeatures")


class _StatusImages(msgspec.Struct, gc=False):
    capacity: model.ResourceList = {}
    allocatable: model.ResourceList = {}
    declared_features: list[str] = msgspec.field(default_factory=list, name="declaredFeatures")
    images: list[model.ContainerImage] = []


class _Node(msgspec.Struct, gc=False):
    """A Node as Filter reads it."""

    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: model.NodeSpec = msgspec.field(default_factory=model.NodeSpec)
    status: _Status = msgspec.field(default_factory=_Status)


class _NodeImages(msgspec.Struct, gc=False):
    """A Node as Prioritize reads it when ImageLocality scores."""

    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: model.NodeSpec = msgspec.field(default_factory=model.NodeSpec)
    status: _StatusImages = msgspec.field(default_factory=_StatusImages)


class _LeanStatus(msgspec.Struct, rename="camel"):
    capacity: model.ResourceList = {}
    allocatable: model.ResourceList = {}


class _LeanNode(msgspec.Struct):
    """The old Filter view, for error messages: a Node without ``status.images``."""

    metadata: model.ObjectMeta = msgspec.field(default_factory=model.ObjectMeta)
    spec: model.NodeSpec = msgspec.field(default_factory=model.NodeSpec)
    status: _LeanStatus = msgspec.field(default_factory=_LeanStatus)

    def to_model(self) -> model.Node:
        status = model.NodeStatus(capacity=self.status.capacity, allocatable=self.status.allocatable)
        return model.Node(metadata=self.metadata, spec=self.spec, status=status)


_key = msgspec.json.Decoder(_KeyNode)
_node = msgspec.json.Decoder(_Node)
_node_images = msgspec.json.Decoder(_NodeImages)
_old_lean = msgspec.json.Decoder(list[_LeanNode])
_old_full = msgspec.json.Decoder(list[model.Node])

#: Distinct allocatable lists whose canonical form is kept (instance types, in practice).
ALLOCATABLE_MEMO_ENTRIES = 1024

#: A node: the model object the plugins see, its canonical allocatable, and
#: the length of its JSON.
_Row = tuple[model.Node, dict[str, int], int]


def decode_error(e: msgspec.DecodeError | msgspec.ValidationError, what: str) -> str:
    """msgspec's "MESSAGE - at `$.a[0].b`" as a field error: "WHAT.a[0].b: MESSAGE"."""
    text = str(e)
    path = ""
    if text.endswith("`") and " - at `$" in text:
        text, _, at = text[:-1].rpartition(" - at `$")
        path = at
    if text.startswith("Expected `object`") and not path:
        text = "expected a JSON object"
    return f"{what}{path}: {text}"


class NodeListReader:
    """NodeList items -> :class:`~berth.scheduling.verbs.NodeRows`, reusing
    the rows of nodes unchanged since the last request (see the module
    docstring). One per HTTP app; not shared between threads."""

    def __init__(self) -> None:
        # Per variant (with images or not): the last request's rows by
        # (name, resourceVersion), and its answer (returned again, the same
        # object, when every row is reused in the same order: the core then
        # reuses the table it built from it).
        self._last: dict[bool, dict[tuple[str, str], _Row]] = {False: {}, True: {}}
        self._last_rows: dict[bool, tuple[list[_Row], verbs.NodeRows] | None] = {False: None, True: None}
        #: Rows decoded and reused by the last read (for tests and metrics).
        self.decoded = 0
        self.reused = 0
        # Canonical allocatable by the quantities as written: nodes of one
        # instance type share one dict (read-only). Bounded by entries.
        self._allocatable: dict[tuple[bool, tuple[tuple[str, model.Quantity], ...]], dict[str, int]] = {}

    def read(self, items: list[msgspec.Raw], *, images: bool) -> verbs.NodeRows:
        """The nodes of ``items`` (``images``: with ``status.images``).
        Raises InvalidArgument as the old per-node path did."""
        with _gc_paused():
            return self._read(items, images)

    def _read(self, items: list[msgspec.Raw], images: bool) -> verbs.NodeRows:
        last = self._last[images]
        i = 0
        try:
            if last:
                key_of = _key.decode
                metas = [key_of(raw).metadata for raw in items]
                keys = [(m.name, m.resource_version) for m in metas]
                found: list[_Row | None] = list(map(last.get, keys))
            else:
                keys = []
                found = [None] * len(items)
            rows: list[_Row] = []
            reused = 0
            for i, row in enumerate(found):
                # A node without a resourceVersion is never reused; nor one
                # whose bytes changed length (a cheap guard against a client
                # that sends other content under the same resourceVersion).
                if row is not None and keys[i][1] and len(items[i]) == row[2]:
                    reused += 1
                else:
                    row = self._row(items[i], i, images)
                rows.append(row)
        except (msgspec.DecodeError, msgspec.ValidationError, errors.InvalidArgument) as e:
            old_nodes(items, images=images)  # raises the old path's error when it finds one first
            if isinstance(e, errors.InvalidArgument):
                raise
            raise errors.InvalidArgument(decode_error(e, f"Nodes.items[{i}]")) from None
        except RecursionError:
            raise errors.InvalidArgument("Nodes: JSON nested too deeply") from None
        self.decoded, self.reused = len(items) - reused, reused
        previous = self._last_rows[images]
        if previous is not None and reused == len(rows) and previous[0] == rows:
            return previous[1]  # every row as last time, in the same order
        nodes = [row[0] for row in rows]
        # Checked before anything is kept, so a rejected request leaves the rows as they were.
        verbs.check_node_names([n.metadata.name for n in nodes], "Nodes.items", ".metadata.name")
        kept = {
            (n.metadata.name, n.metadata.resource_version): row
            for row in rows
            if (n := row[0]).metadata.resource_version
        }
        out = verbs.NodeRows(nodes, [row[1] for row in rows])
        self._last[images] = kept
        self._last_rows[images] = (rows, out)
        return out

    def _row(self, raw: msgspec.Raw, i: int, images: bool) -> _Row:
        """One item decoded and checked: its model Node and canonical allocatable."""
        n: _Node | _NodeImages = _node_images.decode(raw) if images else _node.decode(raw)
        meta = n.metadata
        status = n.status
        if isinstance(status, _StatusImages):
            for j, image in enumerate(status.images):
                bounds.check_int64(image.size_bytes, f"Nodes.items[{i}].status.images[{j}].sizeBytes")
            node_status = model.NodeStatus(
                capacity=status.capacity,
                allocatable=status.allocatable,
                images=status.images,
                declared_features=status.declared_features,
            )
        else:
            node_status = model.NodeStatus(
                capacity=status.capacity, allocatable=status.allocatable, declared_features=status.declared_features
            )
        node = model.Node(
            metadata=model.ObjectMeta(name=meta.name, resource_version=meta.resource_version, labels=meta.labels),
            spec=n.spec,
            status=node_status,
        )
        given = bool(status.allocatable)
        key = (given, tuple((status.allocatable if given else status.capacity).items()))
        alloc = self._allocatable.get(key)
        if alloc is None:
            try:
                alloc = resources.node_allocatable(node)
            except resources.QuantityError as e:
                raise resources.QuantityError(e.value, e.detail, f"Nodes.items[{i}].{e.path}") from None
            if len(self._allocatable) >= ALLOCATABLE_MEMO_ENTRIES:
                self._allocatable.clear()
            self._allocatable[key] = alloc
        return node, alloc, len(raw)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No garbage collection while a NodeList is read. Every object made
    here lives at least until the answer (the rows are kept), so a
    collection in between finds nothing, yet reading 5000 changed nodes makes
    ~50 000 tracked objects: ~70 young collections and one or more full ones
    over the whole heap (measured: 170 of 250 ms CPU with every node changed).
    Paused, the next collection sees them once."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def old_nodes(items: list[msgspec.Raw], *, images: bool) -> list[model.Node]:
    """The old per-node path's checks, in its order (only on the error path):
    every item decoded as a model Node, image sizes within int64, names
    given and distinct, quantities parseable. Raises its first error."""
    joined = b"[" + b",".join(bytes(raw) for raw in items) + b"]"
    try:
        if images:
            nodes: list[model.Node] = _old_full.decode(joined)
            for i, n in enumerate(nodes):
                for j, image in enumerate(n.status.images):
                    bounds.check_int64(image.size_bytes, f"Nodes.items[{i}].status.images[{j}].sizeBytes")
        else:
            nodes = [n.to_model() for n in _old_lean.decode(joined)]
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise errors.InvalidArgument(decode_error(e, "Nodes.items")) from None
    except RecursionError:
        raise errors.InvalidArgument("Nodes: JSON nested too deeply") from None
    verbs.check_node_names([n.metadata.name for n in nodes], "Nodes.items", ".metadata.name")
    for i, n in enumerate(nodes):
        try:
            resources.node_allocatable(n)
        except resources.QuantityError as e:
            raise resources.QuantityError(e.value, e.detail, f"Nodes.items[{i}].{e.path}") from None
    return nodes
