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

Bad requests (malformed JSON, a body that is not an object, no Pod) get 400
with ``{"Error": "..."}``; bodies over ``http.maxBodyBytes`` get 413.

Decoding is msgspec's (top level as raw fields so keys can be matched
without regard to case, nested objects decoded straight into the core's
structs); nodes in full mode are kept as raw bytes to be echoed unchanged.
Every verb calls the core's model-level door
(:class:`berth.scheduling.verbs.Extender`), the same one the gRPC adapter
uses; no protobuf is involved.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from aiohttp import web

from berth.cluster import model
from berth.scheduling.core import Core, VerbError
from berth.scheduling.verbs import Extender, FilterResult, VictimsRequest

__all__ = ["ExtenderError", "add_routes"]

log = logging.getLogger(__name__)

_JSON = "application/json"


class ExtenderError(ValueError):
    """A request kube-scheduler's types cannot describe (-> 400)."""


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
    try:
        obj = _raw_object.decode(raw)
    except msgspec.DecodeError as e:
        raise ExtenderError(f"{what}: {_decode_message(e)}") from None
    out: dict[str, msgspec.Raw] = {}
    for k, v in obj.items():
        out.setdefault(k.lower(), v)  # Go: an exact match wins, else the first case-insensitive one
    return out


def _decode_message(e: msgspec.DecodeError | msgspec.ValidationError) -> str:
    text = str(e)
    if text.startswith("Expected `object`"):
        return "expected a JSON object"
    return text


def _is_null(raw: msgspec.Raw | None) -> bool:
    return raw is None or bytes(raw).strip() == b"null"


def _decode(decoder: msgspec.json.Decoder[Any], raw: msgspec.Raw, what: str) -> Any:
    try:
        return decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise ExtenderError(f"{what}: {_decode_message(e)}") from None


def _pod_of(f: dict[str, msgspec.Raw]) -> model.Pod:
    raw = f.get("pod")
    if _is_null(raw):
        raise ExtenderError("Pod: required")
    assert raw is not None
    pod: model.Pod = _decode(_pod, raw, "Pod")
    if not pod.metadata.name and not pod.metadata.uid:
        raise ExtenderError("Pod: metadata.name is required")
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
            return
        nodes_raw = f.get("nodes")
        if _is_null(nodes_raw):
            raise ExtenderError("ExtenderArgs: either NodeNames or Nodes is required")
        assert nodes_raw is not None
        # Two passes over the same bytes, both in msgspec's C code: one keeps
        # each item's raw JSON (answered back unchanged), one decodes only
        # the scheduling fields. Cheaper than decoding everything once.
        node_list: _NodeList = _decode(_node_list, nodes_raw, "Nodes")
        self.raw_nodes = node_list.items or []
        if images:
            self.nodes = _decode(_full_nodes, nodes_raw, "Nodes").items or []
        else:
            self.nodes = [n.to_model() for n in _decode(_lean_nodes, nodes_raw, "Nodes").items or []]


_host_prefix: dict[str, bytes] = {}
_score_suffix = {s: b"%d}" % s for s in range(11)}


def _host_priority_list(names: list[str], scores: list[int]) -> bytes:
    """``[{"Host":..,"Score":..},...]`` as encoding/json writes it.

    Hand-assembled from cached pieces (each node's ``,{"Host":"NAME","Score":``
    encoded once, scores are 0..10): a list of 5000 structs costs more to
    build than the answer is worth. Same bytes as msgspec would produce.
    """
    if not names:
        return b"[]"
    prefix = _host_prefix
    if len(prefix) > 200_000:
        prefix.clear()
    for n in names:
        if n not in prefix:
            prefix[n] = b',{"Host":' + _encoder.encode(n) + b',"Score":'
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
                out.pods.append(_decode(_pod, item, f"{what}.Pods[{i}]"))
            else:
                uid = _fields(item, f"{what}.Pods[{i}]").get("uid")
                if _is_null(uid):
                    raise ExtenderError(f"{what}.Pods[{i}].UID: required")
                assert uid is not None
                out.uids.append(_decode(msgspec.json.Decoder(str), uid, f"{what}.Pods[{i}].UID"))
    violations = f.get("numpdbviolations")
    if not _is_null(violations):
        assert violations is not None
        # Decoded to reject a malformed count; Berth recounts violations itself.
        _decode(msgspec.json.Decoder(int), violations, f"{what}.NumPDBViolations")
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
        raise ExtenderError("PodName: required")
    if not out["node"]:
        raise ExtenderError("Node: required")
    out["namespace"] = out["namespace"] or "default"
    return out


def _response(body: bytes, status: int = 200) -> web.Response:
    return web.Response(body=body, status=status, content_type=_JSON)


def _error(message: str, status: int = 400) -> web.Response:
    return _response(_encoder.encode({"Error": message}), status)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _guard(core: Core, verb: str, handler: Callable[[bytes], Awaitable[web.Response]]) -> Handler:
    """Read the body, turn bad input into a clear 400 (never a 500 with a
    trace), and count and time every request."""
    requests = core.metrics.extender_requests
    duration = core.metrics.extender_duration.labels(verb)

    async def answer(request: web.Request) -> web.Response:
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge as e:
            return _error(f"{verb}: request body too large: {e.text}", 413)
        if not body.strip():
            return _error(f"{verb}: empty request body")
        try:
            return await handler(body)
        except (ExtenderError, VerbError) as e:
            return _error(f"{verb}: {e}")
        except Exception as e:  # the service must stay up whatever a request holds
            log.exception("extender %s failed", verb)
            return _error(f"{verb}: internal error: {e}", 500)

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
        return _response(_filter_body(args, verbs.filter(args.pod, names=args.names, nodes=args.nodes)))

    async def prioritize(body: bytes) -> web.Response:
        args = _Args(body)
        res = verbs.prioritize(args.pod, names=args.names, nodes=args.nodes)
        if res.error:
            return _error(res.error, 500)
        return _response(_host_priority_list(res.names, res.scores.tolist()))

    async def preempt(body: bytes) -> web.Response:
        pod, victims = _preempt_request(body)
        meta = {
            node: {"Pods": [{"UID": uid} for uid in v.uids], "NumPDBViolations": v.num_pdb_violations}
            for node, v in verbs.preempt(pod, victims).items()
        }
        return _response(_encoder.encode({"NodeNameToMetaVictims": meta}))

    async def bind(body: bytes) -> web.Response:
        args = _bind_request(body)
        error = await verbs.bind(args["namespace"], args["name"], args["uid"], args["node"])
        return _response(_encoder.encode({"Error": error}))

    for verb, handler in (("filter", filter_), ("prioritize", prioritize), ("preempt", preempt), ("bind", bind)):
        app.router.add_post(f"{prefix}/{verb}", _guard(core, verb, handler))
