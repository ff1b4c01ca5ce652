"""kube-scheduler's HTTP extender protocol, translated to the core's verbs.

The wire types are ``k8s.io/kube-scheduler/extender/v1/types.go``; they have
no JSON tags, so keys are Go field names (``Pod``, ``NodeNames``,
``FailedNodes``...), and Go's decoder matches them case-insensitively:
Berth accepts any case and answers in Go's spelling. Embedded Pods and Nodes
are ordinary Kubernetes JSON. How kube-scheduler calls and reads these is
``pkg/scheduler/extender.go`` (``HTTPExtender.Filter/Prioritize/
ProcessPreemption/Bind``): a non-200 answer is an error whatever the body,
an ``Error`` in a 200 answer is the extender's verdict.

- ``POST {prefix}/filter`` ExtenderArgs -> ExtenderFilterResult. With
  ``NodeNames`` (``nodeCacheCapable: true``) the nodes come from Berth's
  cache and the answer carries names; with full ``Nodes`` (or the v1.2 form,
  ``Pod`` and ``Nodes`` only) Berth judges the given objects and answers with
  the surviving ones byte for byte as received.
- ``POST {prefix}/prioritize`` ExtenderArgs -> HostPriorityList (0..10).
- ``POST {prefix}/preempt`` ExtenderPreemptionArgs -> ExtenderPreemptionResult.
- ``POST {prefix}/bind`` ExtenderBindingArgs -> ExtenderBindingResult.

Bad requests get 400 with ``{"Error": "<verb>: <field path>: ..."}`` (the
kinds of :mod:`berth.errors` map to their statuses in ``errors``); bodies
over ``http.maxBodyBytes``, inflated or not, get 413 (``body``). Before
anything is decoded the body must be UTF-8; msgspec's own recursion guard
bounds nesting (a too-deep document is a 400, never a RecursionError); the
decoded pods are checked for integers outside int64 and overlong strings
(``_check_bounds``) before the core sees them, and a quantity the core
cannot take (``resources.QuantityError``) is a 400 naming its field.

Decoding is msgspec's: the top level in one pass when its keys are spelled
as kube-scheduler writes them (``_GoArgs``), else as raw fields so keys can
be matched without regard to case; nested objects are decoded straight into
the core's structs. In full mode each node item is kept as raw bytes to be
echoed unchanged, and read into the table's rows by
:mod:`berth.adapters.http.nodelist` (only the fields plugins read, rows of
unchanged nodes reused). NodeNames lists are kept by their bytes
(``_NameLists``): the same list, decoded, checked and resolved once, for
filter and prioritize; so are pods (``_Pods``), with their ``PodInfo``.
Answers in node-names mode are assembled from pieces encoded once per list.
Every verb calls the core's model-level door
(:class:`berth.scheduling.verbs.Extender`), the same one the gRPC adapter
uses; no protobuf is involved.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from http import HTTPStatus
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt
from aiohttp import web

from berth import errors
from berth.adapters.http import body as http_body
from berth.adapters.http import bounds, nodelist, security
from berth.adapters.http import errors as http_errors
from berth.cache.infos import PodInfo
from berth.cluster import model, resources
from berth.scheduling import turnstile
from berth.scheduling.core import Core
from berth.scheduling.verbs import Extender, FilterResult, NodeNames, NodeRows, VictimsRequest, pod_info

__all__ = ["MAX_STRING_BYTES", "add_routes"]

log = logging.getLogger(__name__)

_JSON = "application/json"


MAX_STRING_BYTES = bounds.MAX_STRING_BYTES
_NULL = msgspec.Raw(b"null")


class _GoArgs(msgspec.Struct, forbid_unknown_fields=True):
    """ExtenderArgs keyed exactly as kube-scheduler's encoding/json writes it
    (``Pod``, ``Nodes``, ``NodeNames``): decoded in one pass, the node items
    kept raw. Any other key (another case, an unknown field) or any error
    sends the body down the general path (:func:`_fields`), which answers as
    before."""

    pod: msgspec.Raw = msgspec.field(name="Pod", default=_NULL)
    nodes: nodelist.RawNodeList | None = msgspec.field(name="Nodes", default=None)
    node_names: msgspec.Raw = msgspec.field(name="NodeNames", default=_NULL)


_raw_object = msgspec.json.Decoder(dict[str, msgspec.Raw])
_raw_list = msgspec.json.Decoder(list[msgspec.Raw])
_go_args = msgspec.json.Decoder(_GoArgs)
_pod = msgspec.json.Decoder(model.Pod)
_node_list = msgspec.json.Decoder(nodelist.RawNodeList)
_names = msgspec.json.Decoder(list[str] | None)
_encoder = msgspec.json.Encoder()


def _fields(raw: bytes | msgspec.Raw, what: str) -> dict[str, msgspec.Raw]:
    """A Go struct's fields by lower-cased name (encoding/json matches keys case-insensitively)."""
    obj: dict[str, msgspec.Raw] = _decode(_raw_object, raw, what)
    out: dict[str, msgspec.Raw] = {}
    for k, v in obj.items():
        out.setdefault(k.lower(), v)  # Go: an exact match wins, else the first case-insensitive one
    return out


def _utf8(body: bytes) -> None:
    """JSON is UTF-8 (RFC 8259 8.1); msgspec would raise UnicodeDecodeError
    deep inside, and copy invalid bytes into echoed raw nodes unchecked."""
    if body.isascii():  # the usual case, at memory speed
        return
    try:
        body.decode()
    except UnicodeDecodeError as e:
        bad = body[e.start : e.start + 4]
        raise errors.InvalidArgument(f"request body: invalid UTF-8 at byte {e.start} ({bad!r})") from None


def _is_null(raw: msgspec.Raw | None) -> bool:
    # Short first: bytes() of a 30 MB NodeList would copy it to look.
    return raw is None or (len(raw) < 64 and bytes(raw).strip() == b"null")


def _decode(decoder: msgspec.json.Decoder[Any], raw: bytes | msgspec.Raw, what: str) -> Any:
    try:
        return decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise errors.InvalidArgument(nodelist.decode_error(e, what)) from None
    except RecursionError:
        # msgspec's C decoder guards its recursion (Py_EnterRecursiveCall), so
        # a document nested past Python's recursion limit fails cleanly here.
        # An explicit lower bound would need a scan of the whole body first:
        # a vectorised one costs more than decoding it (0.48 s vs 0.32 s on
        # the 30 MB full-NodeList benchmark body).
        raise errors.InvalidArgument(f"{what}: JSON nested too deeply") from None


def _pod_of(raw: msgspec.Raw | None) -> model.Pod:
    if _is_null(raw):
        raise errors.InvalidArgument("Pod: required")
    assert raw is not None
    pod: model.Pod = _decode(_pod, raw, "Pod")
    if not bounds.within_bounds(raw):
        bounds.check_bounds(pod, "Pod")
    if not pod.metadata.name and not pod.metadata.uid:
        raise errors.InvalidArgument("Pod: metadata.name is required")
    return pod


class _Args:
    """ExtenderArgs: the pod and either node names or full nodes (``rows``,
    with ``raw_nodes`` the items as received)."""

    def __init__(
        self, body: bytes, reader: nodelist.NodeListReader, memo: _Memo | None = None, *, images: bool
    ) -> None:
        memo = memo or _Memo()
        self.names: list[str] | None = None
        self.name_list: _NameList | None = None
        self.raw_nodes: list[msgspec.Raw] | None = None
        self.rows: NodeRows | None = None
        kept = _kept_tail(body, memo)
        if kept is not None:
            self.pod, self.name_list = kept
            self.names = self.name_list.nodes.names
            return
        items: list[msgspec.Raw] | None = None
        try:
            go: _GoArgs | None = _go_args.decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            go = None
        if go is not None:
            f = {"pod": go.pod, "nodenames": go.node_names}
            if go.nodes is not None:
                items = go.nodes.items or []
        else:
            f = _fields(body, "ExtenderArgs")
        self.pod = memo.pods.get(f.get("pod"))  # its PodInfo
        names_raw = f.get("nodenames")
        if not _is_null(names_raw):
            assert names_raw is not None
            self.name_list = memo.lists.get(names_raw)
            self.names = self.name_list.nodes.names
            return
        if go is None:
            nodes_raw = f.get("nodes")
            if not _is_null(nodes_raw):
                assert nodes_raw is not None
                items = _decode(_node_list, nodes_raw, "Nodes").items or []
        if items is None:
            raise errors.InvalidArgument("ExtenderArgs: either NodeNames or Nodes is required")
        self.raw_nodes = items
        self.rows = reader.read(items, images=images)


_NAMES_KEY = b',"NodeNames":'


def _kept_tail(body: bytes, memo: _Memo) -> tuple[PodInfo, _NameList] | None:
    """The pod and the kept NodeNames list of a body that ends with one:
    ``{"Pod":...,"Nodes":null,"NodeNames":[...]}``, as kube-scheduler's
    encoding/json writes ExtenderArgs (fields in declaration order, so
    NodeNames last). The list's bytes are compared, not parsed again: only
    the rest (``...,"Nodes":null}``) is decoded. That rest must be a whole
    valid object on its own, so the body is one too (a kept list is valid
    JSON), and must hold no other NodeNames and no Nodes; anything else
    (another key order, whitespace, a list not kept) returns None and the
    body takes the general path."""
    end = len(body) - 1
    if not body.endswith(b"}"):
        return None
    for entry in memo.lists.entries():
        start = end - len(entry.raw)
        if body.endswith(entry.raw, 0, end) and body.endswith(_NAMES_KEY, 0, start):
            try:
                go = _go_args.decode(body[: start - len(_NAMES_KEY)] + b"}")
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                return None
            if go.nodes is not None or not _is_null(go.node_names):
                return None
            pod = memo.pods.get(go.pod)  # judged first, as on the general path
            memo.lists.touch(entry)
            return pod, entry
    return None


class _Pods:
    """The last few pods by their bytes: kube-scheduler sends a pod to filter
    and then, unchanged, to prioritize; it is decoded and checked once and
    the core's view of it (``PodInfo``: requests, ports) built once. Only
    what derives from the pod's own bytes is kept, so no cluster change can
    make an entry stale, and only a pod that passed every check is kept.
    Bounded by entries and by the bytes of the pods kept (a decoded pod
    weighs a small multiple of its JSON); a larger pod is not kept."""

    MAX_ENTRIES = 8
    MAX_POD_BYTES = 64 << 10
    MAX_BYTES = 256 << 10

    def __init__(self) -> None:
        self._by_raw: OrderedDict[bytes, PodInfo] = OrderedDict()
        self._bytes = 0

    def get(self, raw: msgspec.Raw | None) -> PodInfo:
        """The pod's info; raises InvalidArgument (a field error) for a bad pod."""
        if raw is None or len(raw) > self.MAX_POD_BYTES:
            return self._judged(raw)
        key = bytes(raw)
        hit = self._by_raw.get(key)
        if hit is not None:
            self._by_raw.move_to_end(key)
            return hit
        info = self._judged(raw)
        self._by_raw[key] = info
        self._bytes += len(key)
        while len(self._by_raw) > self.MAX_ENTRIES or self._bytes > self.MAX_BYTES:
            old, _ = self._by_raw.popitem(last=False)
            self._bytes -= len(old)
        return info

    @staticmethod
    def _judged(raw: msgspec.Raw | None) -> PodInfo:
        pod = _pod_of(raw)
        with _core_view({"Pod": pod}, None):
            return pod_info(pod)


@dataclasses.dataclass(slots=True, eq=False)
class _NameList:
    """A NodeNames list as received (``raw``), decoded and checked
    (``nodes``, which also keeps its rows in the cache) and, once answers
    needed them, the list encoded (a filter answer where every node passes)
    and the prioritize answer's frame (:class:`_Frame`)."""

    raw: bytes
    nodes: NodeNames
    encoded: bytes | None = None
    frame: _Frame | None = None


class _NameLists:
    """The last few NodeNames lists by their bytes. kube-scheduler sends the
    same list to filter and then prioritize, and again for the next pod:
    it is decoded, checked and resolved once and its answers' pieces
    encoded once. Found by comparing bytes (``memcmp``, stopping at the
    first difference; hashing a 70 KB list costs more), most recent first.
    Bounded by entries and by the bytes of the lists kept; what an entry
    derives is a small multiple of its list (rows: 8 bytes a name; the
    frame: the answer's bytes and 8 bytes a name)."""

    MAX_ENTRIES = 4
    MAX_BYTES = 2 << 20

    def __init__(self) -> None:
        self._entries: list[_NameList] = []
        self._bytes = 0

    def entries(self) -> list[_NameList]:
        """The lists kept, most recent first (a copy)."""
        return list(self._entries)

    def touch(self, entry: _NameList) -> None:
        """Make a kept ``entry`` the most recent."""
        if self._entries[0] is not entry:
            self._entries.remove(entry)
            self._entries.insert(0, entry)

    def get(self, raw: msgspec.Raw) -> _NameList:
        key = bytes(raw)
        for entry in self._entries:
            if entry.raw == key:
                self.touch(entry)
                return entry
        names: list[str] = _decode(_names, raw, "NodeNames") or []
        # No name can be longer than the list that holds it.
        if len(key) > MAX_STRING_BYTES and max(map(len, names)) > MAX_STRING_BYTES:
            raise errors.InvalidArgument(f"NodeNames: Too long: may not be more than {MAX_STRING_BYTES} bytes")
        entry = _NameList(key, NodeNames(names))  # raises for a nameless or repeated node
        self.add(entry)
        return entry

    def add(self, entry: _NameList) -> None:
        """Keep ``entry`` as the most recent (unless its list alone passes the bytes bound)."""
        if len(entry.raw) > self.MAX_BYTES:
            return
        self._entries.insert(0, entry)
        self._bytes += len(entry.raw)
        while len(self._entries) > self.MAX_ENTRIES or self._bytes > self.MAX_BYTES:
            self._bytes -= len(self._entries.pop().raw)


#: k8s.io/kube-scheduler/extender/v1 MaxExtenderPriority (MinExtenderPriority is 0).
MAX_EXTENDER_PRIORITY = 10


class _HostPieces:
    """Each host's encoded ``,{"Host":"NAME","Score":`` piece, kept across
    requests (kube-scheduler asks about the same nodes every cycle). Keyed
    by request contents, so bounded by bytes as well as entries: emptied
    when an addition would pass either (5000 nodes take ~250 KB).

    An answer collects its pieces into its own list as it goes, so emptying
    the table never takes a piece from the answer being built, whoever
    filled it; a list whose new pieces alone pass the bound empties it once
    and keeps only what fits (the rest is encoded for this answer alone)."""

    MAX_BYTES = 4 << 20
    MAX_ENTRIES = 65536

    def __init__(self) -> None:
        self._by_name: dict[str, bytes] = {}
        self._bytes = 0

    def of(self, names: list[str]) -> list[bytes]:
        """Each of ``names``' pieces, in order."""
        by_name = self._by_name
        try:
            return list(map(by_name.__getitem__, names))  # every host seen before: the usual case
        except KeyError:
            pass
        out: list[bytes] = []
        emptied = False
        for n in names:
            piece = by_name.get(n)
            if piece is None:
                piece = b',{"Host":' + _encoder.encode(n) + b',"Score":'
                # What an entry weighs: its key and value objects, roughly.
                weight = len(piece) + len(n) + 120
                if self._bytes + weight > self.MAX_BYTES or len(by_name) >= self.MAX_ENTRIES:
                    if emptied:  # this list alone passes the bound
                        out.append(piece)
                        continue
                    by_name.clear()
                    self._bytes = 0
                    emptied = True
                by_name[n] = piece
                self._bytes += weight
            out.append(piece)
        return out


@dataclasses.dataclass(slots=True)
class _Memo:
    """What the extender door keeps between requests (see docs/architecture.md, "Memory bounds")."""

    pods: _Pods = dataclasses.field(default_factory=_Pods)
    lists: _NameLists = dataclasses.field(default_factory=_NameLists)
    hosts: _HostPieces = dataclasses.field(default_factory=_HostPieces)


class _Frame:
    """The HostPriorityList for fixed ``names`` with a one-digit place for
    each score, ``[{"Host":"a","Score":0},{"Host":"b","Score":0}]``, as a
    byte array, and where each place is: an answer is this with the digits
    written in (one numpy step) and, for scores of 10, one more byte each."""

    __slots__ = ("at", "template")

    def __init__(self, pieces: list[bytes]) -> None:
        """``pieces``: each host's ``,{"Host":"NAME","Score":`` (:class:`_HostPieces`)."""
        joined = b"0}".join(pieces) + b"0}"
        self.template = np.frombuffer(b"[" + joined[1:] + b"]", dtype=np.uint8)
        # The place of each score: the piece's end, counted over the pieces
        # and "0}"s before it ("[" stands where the first piece's "," was).
        ends = np.cumsum(np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces)) + 2)
        self.at = ends - 2


#: The ASCII digit written at a score's place: 0..9, and for 10 its "1" (its "0" is inserted after).
_DIGITS = np.array([*b"0123456789", ord("1")], dtype=np.uint8)


def _host_priority_list(
    names: list[str], scores: npt.ArrayLike, hosts: _HostPieces, frame: _Frame | None = None
) -> bytes:
    """``[{"Host":..,"Score":..},...]`` as encoding/json writes it.

    From a :class:`_Frame` of ``names`` (kept with the list): a copy of its
    bytes with each score's digit set by one fancy-indexing step, and a
    ``0`` inserted after the ``1`` of each 10. A list of 5000 structs for
    msgspec costs more to build than the answer is worth (0.5 ms against
    0.05 ms), as does joining 10 000 pieces (0.13 ms); the bytes are the
    same. Scores outside 0..10 (never kube-scheduler's range) are joined
    from the hosts' pieces.
    """
    if not names:
        return b"[]"
    s = np.asarray(scores, dtype=np.int64)
    if s.min() < 0 or s.max() > MAX_EXTENDER_PRIORITY:
        pieces = hosts.of(names)
        body = b"".join(p + b"%d}" % v for p, v in zip(pieces, s.tolist(), strict=True))
        return b"[" + body[1:] + b"]"
    frame = frame if frame is not None else _Frame(hosts.of(names))
    out = frame.template.copy()
    out[frame.at] = _DIGITS[s]
    tens = np.flatnonzero(s == MAX_EXTENDER_PRIORITY)
    if tens.size:
        out = np.insert(out, frame.at[tens] + 1, ord("0"))
    return out.tobytes()


def _passed_names(args: _Args, res: FilterResult, lists: _NameLists | None) -> bytes:
    """Filter's surviving names, encoded. When every node passes the list
    is the request's, encoded once per list. Otherwise the survivors are
    kept (in ``lists``) as the list kube-scheduler is about to send to
    prioritize: it sends the nodes that passed every filter, encoded by
    encoding/json, whose bytes for node names (DNS subdomains: nothing it
    escapes) are these; when its own filters dropped more, the bytes differ
    and the list is decoded as any other."""
    listed = args.name_list
    if listed is not None and res.passed is listed.nodes.names:
        if listed.encoded is None:
            listed.encoded = _encoder.encode(res.passed)
        return listed.encoded
    names = _encoder.encode(res.passed)
    if lists is not None and res.passed:
        lists.add(_NameList(names, NodeNames(res.passed, checked=True), encoded=names))
    return names


def _filter_body(args: _Args, res: FilterResult, lists: _NameLists | None = None) -> bytes:
    failed = res.failed
    unresolvable = res.unresolvable
    if args.names is not None:
        # Node-names mode, assembled: the same bytes msgspec writes for the dict below.
        names = _passed_names(args, res, lists)
        return b"".join(
            (
                b'{"Nodes":null,"NodeNames":',
                names,
                b',"FailedNodes":',
                _encoder.encode(failed),
                b',"FailedAndUnresolvableNodes":',
                _encoder.encode(unresolvable),
                b',"Error":',
                _encoder.encode(res.error),
                b"}",
            )
        )
    assert args.rows is not None and args.raw_nodes is not None
    keep = args.raw_nodes
    if len(res.passed) != len(keep):
        passed = set(res.passed)
        keep = [raw for raw, n in zip(keep, args.rows.nodes, strict=True) if n.metadata.name in passed]
    # The items as received, joined in C (msgspec writes each Raw as is).
    # FailedNodes maps are always objects ({} when empty), as an extender
    # that make()s them renders; kube-scheduler reads null and {} alike.
    return _encoder.encode(
        {
            "Nodes": {"metadata": {}, "items": keep},
            "NodeNames": None,
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable,
            "Error": res.error,
        }
    )


def _victims(raw: msgspec.Raw, what: str, full: bool) -> VictimsRequest:
    out = VictimsRequest()
    if _is_null(raw):
        return out
    f = _fields(raw, what)
    pods_raw = f.get("pods")
    if not _is_null(pods_raw):
        assert pods_raw is not None
        for i, item in enumerate(_decode(_raw_list, pods_raw, f"{what}.Pods")):
            if full:
                victim: model.Pod = _decode(_pod, item, f"{what}.Pods[{i}]")
                bounds.check_bounds(victim, f"{what}.Pods[{i}]")
                out.pods.append(victim)
            else:
                uid = _fields(item, f"{what}.Pods[{i}]").get("uid")
                if _is_null(uid):
                    raise errors.InvalidArgument(f"{what}.Pods[{i}].UID: required")
                assert uid is not None
                out.uids.append(_decode(msgspec.json.Decoder(str), uid, f"{what}.Pods[{i}].UID"))
    violations = f.get("numpdbviolations")
    if not _is_null(violations):
        assert violations is not None
        # Decoded to reject a malformed count; Berth recounts violations itself.
        bounds.check_bounds(
            _decode(msgspec.json.Decoder(int), violations, f"{what}.NumPDBViolations"), f"{what}.NumPDBViolations"
        )
    return out


def _preempt_request(body: bytes) -> tuple[model.Pod, dict[str, VictimsRequest]]:
    f = _fields(body, "ExtenderPreemptionArgs")
    pod = _pod_of(f.get("pod"))
    victims: dict[str, VictimsRequest] = {}
    for key, full in (("nodenametovictims", True), ("nodenametometavictims", False)):
        raw = f.get(key)
        if _is_null(raw):
            continue
        assert raw is not None
        label = "NodeNameToVictims" if full else "NodeNameToMetaVictims"
        # Node names are map keys, not field names: their case is kept.
        for node, victims_raw in _decode(_raw_object, raw, label).items():
            victims[node] = _victims(victims_raw, f"{label}[{node}]", full)
    return pod, victims


def _bind_request(body: bytes) -> dict[str, str]:
    """PodName, PodNamespace (default "default"), PodUID and Node."""
    f = _fields(body, "ExtenderBindingArgs")
    out = {"name": "", "namespace": "", "uid": "", "node": ""}
    text = msgspec.json.Decoder(str)
    for key, attr, label in (
        ("podname", "name", "PodName"),
        ("podnamespace", "namespace", "PodNamespace"),
        ("poduid", "uid", "PodUID"),
        ("node", "node", "Node"),
    ):
        raw = f.get(key)
        if not _is_null(raw):
            assert raw is not None
            out[attr] = _decode(text, raw, label)
    if not out["name"]:
        raise errors.InvalidArgument("PodName: required")
    if not out["node"]:
        raise errors.InvalidArgument("Node: required")
    out["namespace"] = out["namespace"] or "default"
    return out


def _response(body: bytes, status: int = 200) -> web.Response:
    return web.Response(body=body, status=status, content_type=_JSON)


@contextlib.contextmanager
def _core_view(pods: dict[str, model.Pod], nodes: list[model.Node] | None) -> Iterator[None]:
    """Around a verb: a quantity (or other value) the core cannot take is the
    client's field error, with the path of the object holding it."""
    try:
        yield
    except resources.QuantityError as e:
        raise _core_view_error(e, pods, nodes) from None
    except errors.BerthError:
        raise
    except ValueError as e:
        raise _core_view_error(e, pods, nodes) from None


def _core_view_error(
    e: ValueError, pods: dict[str, model.Pod], nodes: list[model.Node] | None
) -> errors.InvalidArgument:
    """A ValueError from turning the request's objects into the core's view
    (a quantity the core cannot take), as a field error: find which object
    holds it (only on this error path) and put its path in front."""
    for what, pod in pods.items():
        try:
            resources.pod_requests(pod)
        except ValueError as found:
            return errors.InvalidArgument(f"{what}.{found}")
    for i, node in enumerate(nodes or ()):
        try:
            resources.node_allocatable(node)
        except ValueError as found:
            return errors.InvalidArgument(f"Nodes.items[{i}].{found}")
    return errors.InvalidArgument(str(e))


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


#: The extender door's turnstile (berth.scheduling.turnstile), per application.
TURNSTILE = web.AppKey("berth_extender_turnstile", turnstile.Turnstile)
#: What the extender door keeps between requests, per application (for tests and inspection).
MEMO = web.AppKey("berth_extender_memo", _Memo)


def _guard(
    core: Core,
    verb: str,
    handler: Callable[[bytes], Awaitable[web.Response]],
    turns: turnstile.Turnstile,
    door: security.ExtenderDoor,
) -> Handler:
    """Check the caller (401) and the body's type (415) before reading a
    byte of it, read the body within its limits, turn bad input into its 4xx
    (never a 500 with a trace), and count and time every request."""
    requests = core.metrics.extender_requests
    duration = core.metrics.extender_duration.labels(verb)
    limit = core.cfg.http.max_body_bytes
    timeout = core.cfg.http.read_timeout_seconds

    async def answer(request: web.Request) -> web.Response:
        try:
            door.check(request, verb)
            # A postgres standby knows no nodes or pods until it leads; a
            # Kubernetes standby's informers keep its cache, so it answers.
            core.refuse_on_standby(leaders_state=False)
            if not security.is_json(request):
                # Nothing is read: a cross-origin "simple" request (text/plain,
                # a form) never reaches the verb (module docstring of security).
                raise web.HTTPUnsupportedMediaType(
                    text=f"Content-Type must be {security.JSON}, got {request.content_type[:64]!r}"
                )
            body = await http_body.read(request, limit=limit, seconds=timeout)
            if not body.strip():
                raise errors.InvalidArgument("request body: empty")
            _utf8(body)
            async with turns:  # the body is in: queue for the core, fairly with the gRPC door
                return await handler(body)
        except errors.Unauthenticated as e:
            resp = http_errors.from_exception(e, f"{verb}: ")
            resp.headers["WWW-Authenticate"] = 'Bearer realm="berth"'
            return resp
        except (errors.BerthError, web.HTTPException) as e:
            return http_errors.from_exception(e, f"{verb}: ")
        except http_body.Disconnected as e:  # nobody to answer; not a bug, and any client can cause it
            log.debug("extender %s: %s", verb, e)
            return http_errors.answer(HTTPStatus.BAD_REQUEST, f"{verb}: {e}")
        except asyncio.CancelledError:
            if request.transport is None or request.transport.is_closing():
                # The caller went away (the runner cancels its handler): not a bug either.
                log.debug("extender %s: the client went away; the request was stopped", verb)
            raise
        except Exception:  # a bug: logged once with its traceback; the service stays up
            log.exception("extender %s failed", verb)
            return http_errors.internal_error(f"{verb}: ")

    counters: dict[int, Any] = {}  # status -> its counter child: labels() costs a lock and a tuple per call

    async def wrapped(request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        resp = await answer(request)
        duration.observe(time.perf_counter() - started)
        counter = counters.get(resp.status)
        if counter is None:
            counter = counters[resp.status] = requests.labels(verb, str(resp.status))
        counter.inc()
        return resp

    return wrapped


def _log_abandoned_bind(task: asyncio.Future[str]) -> None:
    """A bind whose request was stopped may still fail: say so, once."""
    if not task.cancelled() and task.exception() is not None:
        log.error("extender bind failed after its request was stopped", exc_info=task.exception())


def add_routes(app: web.Application, core: Core, verbs: Extender, door: security.ExtenderDoor | None = None) -> None:
    """The four verbs under ``extender.urlPrefix``; ``door`` (default: from
    ``http``'s configuration) says who may call them."""
    door = door or security.ExtenderDoor(core.cfg.http)
    prefix = "/" + core.cfg.extender.url_prefix.strip("/")
    prefix = "" if prefix == "/" else prefix

    reader = nodelist.NodeListReader()
    memo = app[MEMO] = _Memo()
    turns = app[TURNSTILE] = turnstile.Turnstile(
        turnstile.EXTENDER_WIDTH, budget=turnstile.EXTENDER_BUDGET_SECONDS, most=turnstile.EXTENDER_MOST
    )

    async def filter_(body: bytes) -> web.Response:
        args = _Args(body, reader, memo, images=False)
        with _core_view({"Pod": args.pod.pod}, None):
            names = args.name_list.nodes if args.name_list is not None else None
            res = verbs.filter(args.pod, names=names, nodes=args.rows)
        return _response(_filter_body(args, res, memo.lists))

    async def prioritize(body: bytes) -> web.Response:
        args = _Args(body, reader, memo, images=verbs.reads_images())
        with _core_view({"Pod": args.pod.pod}, None):
            names = args.name_list.nodes if args.name_list is not None else None
            res = verbs.prioritize(args.pod, names=names, nodes=args.rows)
        if res.error:  # the framework failed (a plugin's error), not the request
            return http_errors.answer(HTTPStatus.INTERNAL_SERVER_ERROR, f"prioritize: {res.error}")
        frame = None
        if args.name_list is not None and res.names is args.name_list.nodes.names:
            if args.name_list.frame is None:
                args.name_list.frame = _Frame(memo.hosts.of(res.names))
            frame = args.name_list.frame
        return _response(_host_priority_list(res.names, res.scores, memo.hosts, frame))

    async def preempt(body: bytes) -> web.Response:
        pod, victims = _preempt_request(body)
        pods = {"Pod": pod} | {
            f"NodeNameToVictims[{node}].Pods[{i}]": p for node, v in victims.items() for i, p in enumerate(v.pods)
        }
        with _core_view(pods, None):
            chosen = verbs.preempt(pod, victims)
        meta = {
            node: {"Pods": [{"UID": uid} for uid in v.uids], "NumPDBViolations": v.num_pdb_violations}
            for node, v in chosen.items()
        }
        return _response(_encoder.encode({"NodeNameToMetaVictims": meta}))

    async def bind(body: bytes) -> web.Response:
        args = _bind_request(body)
        # A bind is finished even when its caller goes away or its time is up:
        # a Binding sent and then abandoned is worse than an answer nobody
        # reads (the informer then tells what became of the pod).
        task = asyncio.ensure_future(verbs.bind(args["namespace"], args["name"], args["uid"], args["node"]))
        try:
            error = await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(_log_abandoned_bind)
            raise
        return _response(_encoder.encode({"Error": error}))

    for verb, handler in (("filter", filter_), ("prioritize", prioritize), ("preempt", preempt), ("bind", bind)):
        app.router.add_post(f"{prefix}/{verb}", _guard(core, verb, handler, turns, door))
