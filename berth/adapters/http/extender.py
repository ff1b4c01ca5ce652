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

Decoding is msgspec's (top level as raw fields so keys can be matched
without regard to case, nested objects decoded straight into the core's
structs); nodes in full mode are kept as raw bytes to be echoed unchanged.
Every verb calls the core's model-level door
(:class:`berth.scheduling.verbs.Extender`), the same one the gRPC adapter
uses; no protobuf is involved.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from http import HTTPStatus
from typing import Any

import msgspec
from aiohttp import web

from berth import errors
from berth.adapters.http import body as http_body
from berth.adapters.http import errors as http_errors
from berth.cluster import model, resources
from berth.scheduling.core import Core
from berth.scheduling.verbs import Extender, FilterResult, VictimsRequest

__all__ = ["MAX_STRING_BYTES", "add_routes"]

log = logging.getLogger(__name__)

_JSON = "application/json"


#: The longest string a decoded object may hold: etcd's default request
#: limit (``--max-request-bytes``, 1.5 MiB), so no stored object has a longer one.
MAX_STRING_BYTES = 3 << 19

_INT64 = (-(1 << 63), (1 << 63) - 1)


class _NodeList(msgspec.Struct):
    """A v1.NodeList with each item kept raw."""

    items: list[msgspec.Raw] | None = None


class _LeanStatus(msgspec.Struct, rename="camel"):
    capacity: model.ResourceList = {}
    allocatable: model.ResourceList = {}


class _LeanNode(msgspec.Struct):
    """A Node without ``status.images``: Filter never looks at images, and
    decoding a realistic node's dozens of image names is most of its cost."""

    metadata: model.ObjectMeta = msgspec.field(default_factory=model.ObjectMeta)
    spec: model.NodeSpec = msgspec.field(default_factory=model.NodeSpec)
    status: _LeanStatus = msgspec.field(default_factory=_LeanStatus)

    def to_model(self) -> model.Node:
        status = model.NodeStatus(capacity=self.status.capacity, allocatable=self.status.allocatable)
        return model.Node(metadata=self.metadata, spec=self.spec, status=status)


class _LeanNodeList(msgspec.Struct):
    items: list[_LeanNode] | None = None


class _FullNodeList(msgspec.Struct):
    items: list[model.Node] | None = None


_raw_object = msgspec.json.Decoder(dict[str, msgspec.Raw])
_raw_list = msgspec.json.Decoder(list[msgspec.Raw])
_pod = msgspec.json.Decoder(model.Pod)
_lean_nodes = msgspec.json.Decoder(_LeanNodeList)
_full_nodes = msgspec.json.Decoder(_FullNodeList)
_node_list = msgspec.json.Decoder(_NodeList)
_names = msgspec.json.Decoder(list[str] | None)
_encoder = msgspec.json.Encoder()


def _fields(raw: bytes | msgspec.Raw, what: str) -> dict[str, msgspec.Raw]:
    """A Go struct's fields by lower-cased name (encoding/json matches keys case-insensitively)."""
    obj: dict[str, msgspec.Raw] = _decode(_raw_object, raw, what)
    out: dict[str, msgspec.Raw] = {}
    for k, v in obj.items():
        out.setdefault(k.lower(), v)  # Go: an exact match wins, else the first case-insensitive one
    return out


def _decode_message(e: msgspec.DecodeError | msgspec.ValidationError, what: str) -> str:
    """msgspec's "MESSAGE - at `$.a[0].b`" as a field error: "WHAT.a[0].b: MESSAGE"."""
    text = str(e)
    path = ""
    if text.endswith("`") and " - at `$" in text:
        text, _, at = text[:-1].rpartition(" - at `$")
        path = at
    if text.startswith("Expected `object`") and not path:
        text = "expected a JSON object"
    return f"{what}{path}: {text}"


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


def _check_bounds(obj: object, what: str) -> None:
    """Every integer in int64 and every string within MAX_STRING_BYTES, so no
    decoded value can overflow the core's arrays or blow up a message.
    (msgspec keeps arbitrary Python ints; one pod or a few victims walk in
    well under a millisecond.)"""
    stack: list[tuple[object, tuple[str, ...]]] = [(obj, ())]
    while stack:
        v, path = stack.pop()
        if isinstance(v, str):
            if len(v) > MAX_STRING_BYTES:
                raise errors.InvalidArgument(
                    f"{what}{''.join(path)}: Too long: may not be more than {MAX_STRING_BYTES} bytes"
                )
        elif isinstance(v, bool) or v is None or isinstance(v, float):
            continue
        elif isinstance(v, int):
            if not _INT64[0] <= v <= _INT64[1]:
                shown = str(v) if v.bit_length() < 200 else f"{str(v)[:40]}... ({len(str(v))} digits)"
                raise errors.InvalidArgument(
                    f"{what}{''.join(path)}: Invalid value: {shown}: must fit in a 64-bit signed integer"
                )
        elif isinstance(v, msgspec.Struct):
            for name, key in zip(v.__struct_fields__, v.__struct_encode_fields__, strict=True):
                stack.append((getattr(v, name), (*path, f".{key}")))
        elif isinstance(v, dict):
            for k, x in v.items():
                stack.append((k, (*path, "[key]")))
                stack.append((x, (*path, f"[{str(k)[:64]}]")))
        elif isinstance(v, list | tuple | set | frozenset):
            stack.extend((x, (*path, f"[{i}]")) for i, x in enumerate(v))


def _is_null(raw: msgspec.Raw | None) -> bool:
    return raw is None or bytes(raw).strip() == b"null"


def _decode(decoder: msgspec.json.Decoder[Any], raw: bytes | msgspec.Raw, what: str) -> Any:
    try:
        return decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise errors.InvalidArgument(_decode_message(e, what)) from None
    except RecursionError:
        # msgspec's C decoder guards its recursion (Py_EnterRecursiveCall), so
        # a document nested past Python's recursion limit fails cleanly here.
        # An explicit lower bound would need a scan of the whole body first:
        # a vectorised one costs more than decoding it (0.48 s vs 0.32 s on
        # the 30 MB full-NodeList benchmark body).
        raise errors.InvalidArgument(f"{what}: JSON nested too deeply") from None


def _pod_of(f: dict[str, msgspec.Raw]) -> model.Pod:
    raw = f.get("pod")
    if _is_null(raw):
        raise errors.InvalidArgument("Pod: required")
    assert raw is not None
    pod: model.Pod = _decode(_pod, raw, "Pod")
    _check_bounds(pod, "Pod")
    if not pod.metadata.name and not pod.metadata.uid:
        raise errors.InvalidArgument("Pod: metadata.name is required")
    return pod


class _Args:
    """ExtenderArgs: the pod and either node names or full nodes."""

    def __init__(self, body: bytes, *, images: bool = True) -> None:
        f = _fields(body, "ExtenderArgs")
        self.pod = _pod_of(f)
        self.names: list[str] | None = None
        self.raw_nodes: list[msgspec.Raw] | None = None
        self.nodes: list[model.Node] | None = None
        names_raw = f.get("nodenames")
        if not _is_null(names_raw):
            assert names_raw is not None
            self.names = _decode(_names, names_raw, "NodeNames") or []
            if self.names and max(map(len, self.names)) > MAX_STRING_BYTES:
                raise errors.InvalidArgument(f"NodeNames: Too long: may not be more than {MAX_STRING_BYTES} bytes")
            return
        nodes_raw = f.get("nodes")
        if _is_null(nodes_raw):
            raise errors.InvalidArgument("ExtenderArgs: either NodeNames or Nodes is required")
        assert nodes_raw is not None
        # Two passes over the same bytes, both in msgspec's C code: one keeps
        # each item's raw JSON (answered back unchanged), one decodes only
        # the scheduling fields. Cheaper than decoding everything once.
        node_list: _NodeList = _decode(_node_list, nodes_raw, "Nodes")
        self.raw_nodes = node_list.items or []
        if images:
            self.nodes = _decode(_full_nodes, nodes_raw, "Nodes").items or []
            # The one integer a Node carries besides its quantities (which
            # the core parses and range-checks itself).
            for i, n in enumerate(self.nodes):
                for j, image in enumerate(n.status.images):
                    _check_bounds(image.size_bytes, f"Nodes.items[{i}].status.images[{j}].sizeBytes")
        else:
            self.nodes = [n.to_model() for n in _decode(_lean_nodes, nodes_raw, "Nodes").items or []]


#: Each host's encoded ``,{"Host":"NAME","Score":`` piece, kept across
#: requests (kube-scheduler asks about the same nodes every cycle). Keyed by
#: request contents, so bounded by bytes as well as entries: emptied when
#: it would pass either (5000 nodes take ~250 KB).
_host_prefix: dict[str, bytes] = {}
_HOST_PREFIX_MAX_BYTES = 4 << 20
_HOST_PREFIX_MAX_ENTRIES = 65536
_host_prefix_bytes = 0
_score_suffix = {s: b"%d}" % s for s in range(11)}


def _host_priority_list(names: list[str], scores: list[int]) -> bytes:
    """``[{"Host":..,"Score":..},...]`` as encoding/json writes it.

    Hand-assembled from cached pieces (each node's ``,{"Host":"NAME","Score":``
    encoded once, scores are 0..10): a list of 5000 structs costs more to
    build than the answer is worth. Same bytes as msgspec would produce.
    """
    if not names:
        return b"[]"
    global _host_prefix_bytes
    prefix = _host_prefix
    for n in names:
        if n not in prefix:
            piece = b',{"Host":' + _encoder.encode(n) + b',"Score":'
            # What an entry weighs: its key and value objects, roughly.
            weight = len(piece) + len(n) + 120
            if _host_prefix_bytes + weight > _HOST_PREFIX_MAX_BYTES or len(prefix) >= _HOST_PREFIX_MAX_ENTRIES:
                prefix.clear()
                _host_prefix_bytes = 0
            prefix[n] = piece
            _host_prefix_bytes += weight
    suffix = _score_suffix
    if min(scores) < 0 or max(scores) > 10:  # outside MinExtenderPriority..MaxExtenderPriority
        suffix = {**suffix, **{v: b"%d}" % v for v in set(scores)}}
    # Every step below iterates in C: map/zip/chain/join, no Python frame per node.
    body = b"".join(
        itertools.chain.from_iterable(zip(map(prefix.__getitem__, names), map(suffix.__getitem__, scores), strict=True))
    )
    return b"[" + body[1:] + b"]"


def _filter_body(args: _Args, res: FilterResult) -> bytes:
    failed = res.failed
    unresolvable = res.unresolvable
    if args.names is not None:
        nodes: Any = None
        names: Any = res.passed
    else:
        assert args.nodes is not None and args.raw_nodes is not None
        passed = set(res.passed)
        keep = [raw for raw, n in zip(args.raw_nodes, args.nodes, strict=True) if n.metadata.name in passed]
        nodes = {"metadata": {}, "items": keep}
        names = None
    # FailedNodes maps are always objects ({} when empty), as an extender
    # that make()s them renders; kube-scheduler reads null and {} alike.
    return _encoder.encode(
        {
            "Nodes": nodes,
            "NodeNames": names,
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
                _check_bounds(victim, f"{what}.Pods[{i}]")
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
        _check_bounds(
            _decode(msgspec.json.Decoder(int), violations, f"{what}.NumPDBViolations"), f"{what}.NumPDBViolations"
        )
    return out


def _preempt_request(body: bytes) -> tuple[model.Pod, dict[str, VictimsRequest]]:
    f = _fields(body, "ExtenderPreemptionArgs")
    pod = _pod_of(f)
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


def _guard(core: Core, verb: str, handler: Callable[[bytes], Awaitable[web.Response]]) -> Handler:
    """Read the body within its limits, turn bad input into its 4xx (never a
    500 with a trace), and count and time every request."""
    requests = core.metrics.extender_requests
    duration = core.metrics.extender_duration.labels(verb)
    limit = core.cfg.http.max_body_bytes
    timeout = core.cfg.http.read_timeout_seconds

    async def answer(request: web.Request) -> web.Response:
        try:
            body = await http_body.read(request, limit=limit, seconds=timeout)
            if not body.strip():
                raise errors.InvalidArgument("request body: empty")
            _utf8(body)
            return await handler(body)
        except (errors.BerthError, web.HTTPException) as e:
            return http_errors.from_exception(e, f"{verb}: ")
        except Exception:  # a bug: logged once with its traceback; the service stays up
            log.exception("extender %s failed", verb)
            return http_errors.internal_error(f"{verb}: ")

    async def wrapped(request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        resp = await answer(request)
        duration.observe(time.perf_counter() - started)
        requests.labels(verb, str(resp.status)).inc()
        return resp

    return wrapped


def add_routes(app: web.Application, core: Core, verbs: Extender) -> None:
    prefix = "/" + core.cfg.extender.url_prefix.strip("/")
    prefix = "" if prefix == "/" else prefix

    async def filter_(body: bytes) -> web.Response:
        args = _Args(body, images=False)
        with _core_view({"Pod": args.pod}, args.nodes):
            res = verbs.filter(args.pod, names=args.names, nodes=args.nodes)
        return _response(_filter_body(args, res))

    async def prioritize(body: bytes) -> web.Response:
        args = _Args(body)
        with _core_view({"Pod": args.pod}, args.nodes):
            res = verbs.prioritize(args.pod, names=args.names, nodes=args.nodes)
        if res.error:  # the framework failed (a plugin's error), not the request
            return http_errors.answer(HTTPStatus.INTERNAL_SERVER_ERROR, f"prioritize: {res.error}")
        return _response(_host_priority_list(res.names, res.scores.tolist()))

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
        error = await verbs.bind(args["namespace"], args["name"], args["uid"], args["node"])
        return _response(_encoder.encode({"Error": error}))

    for verb, handler in (("filter", filter_), ("prioritize", prioritize), ("preempt", preempt), ("bind", bind)):
        app.router.add_post(f"{prefix}/{verb}", _guard(core, verb, handler))
