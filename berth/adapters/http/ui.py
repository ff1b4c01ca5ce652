"""The read-only web dashboard at ``/ui/``: nodes as a heat map, queues, the
pending pods with their ``why``, a pod's full explanation and the decisions
as they happen.

The page is plain HTML, CSS and JavaScript shipped in the package
(``berth/adapters/http/ui/``; no framework, no CDN, no build step). It reads
JSON from ``/ui/api/*`` and the decision stream from server-sent events
(``/ui/api/decisions``, the WHATWG ``EventSource`` protocol). Every route is
a GET: the dashboard changes nothing.

Sized for 5000 nodes: the heat map's data is one compact array per resource
(each node's requested share in permille, computed on the snapshot's arrays
in one numpy step) that the page draws on a ``<canvas>``; lists (pods, a
pod's nodes) come a page at a time.

::

    GET /ui/                             the page (and its app.js, app.css)
    GET /ui/api/nodes                    heat map: names, flags, permille per resource, totals
    GET /ui/api/nodes/{name}             one node: allocatable, requested, labels, taints, pods
    GET /ui/api/queues                   core.quota.status()
    GET /ui/api/pods?phase=&namespace=&queue=&q=&offset=&limit=
                                         visibility.list_pods, each row with why().summary
    GET /ui/api/pods/{namespace}/{name}?offset=&limit=&show=all|feasible|infeasible
                                         why() and explain(): per-node verdicts and plugin scores
    GET /ui/api/decisions?replay=N       text/event-stream of decisions (event "decision")
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import heapq
import importlib.resources
import pathlib
import time
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np
from aiohttp import web

from berth.cluster import model
from berth.errors import InvalidArgument, NotFound, ResourceExhausted
from berth.framework.decision import Decision, DecisionKind
from berth.scheduling import explain, visibility
from berth.scheduling.core import Core

__all__ = ["HEARTBEAT_SECONDS", "PENDING_PHASES", "add_routes", "close_streams"]

#: A comment line on an idle event stream this often, so proxies and the
#: browser keep the connection (and a client gone away is noticed).
HEARTBEAT_SECONDS = 15.0

#: The phases of a pod not placed yet (the page's default filter): waiting,
#: and refused until the queues change (Rejected).
PENDING_PHASES = frozenset({"Gated", "Active", "Backoff", "Unschedulable", "WaitingOnPermit", "Rejected"})

#: Pages: the pods list (each row with its ``why``) and a pod's node verdicts.
PODS_LIMIT = 25
MAX_PODS_LIMIT = 100
NODES_LIMIT = 50
MAX_NODES_LIMIT = 500
#: Decisions sent first on a new stream (the most recent, oldest first).
DEFAULT_REPLAY = 50
MAX_REPLAY = 500
#: A node's pods listed on its detail (the count is always exact).
NODE_PODS_SHOWN = 100

_SHOW = ("all", "feasible", "infeasible")
_PHASE_FILTERS = ("pending", "all")

_encoder = msgspec.json.Encoder()


class _Streams:
    """The open event streams' shared stop signal (set when the server stops)."""

    def __init__(self) -> None:
        self.closing = asyncio.Event()


_STREAMS = web.AppKey("berth_ui_streams", _Streams)


def close_streams(app: web.Application) -> None:
    """End every open decision stream now (the server is stopping: a browser
    keeps an EventSource open for ever, and a graceful stop must not wait
    for it). Idempotent; streams opened afterwards end at once."""
    app[_STREAMS].closing.set()


#: The page's file types (not the system's mime.types, which varies).
_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}


def _static_files() -> dict[str, tuple[bytes, str]]:
    """The page's files, read once from the package: name -> (body, content type)."""
    out: dict[str, tuple[bytes, str]] = {}
    root = importlib.resources.files(__package__ or "berth.adapters.http").joinpath("ui")
    for entry in root.iterdir():
        ctype = _CONTENT_TYPES.get(pathlib.PurePath(entry.name).suffix)
        if ctype is not None and entry.is_file():
            out[entry.name] = (entry.read_bytes(), ctype)
    return out


def _json(data: Any) -> web.Response:
    return web.Response(body=_encoder.encode(data), content_type="application/json")


def _int_param(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgument(f"{name}: {raw[:40]!r} is not an integer") from None
    if not low <= value <= high:
        raise InvalidArgument(f"{name}: {value} is out of range [{low}, {high}]")
    return value


def _choice(request: web.Request, name: str, choices: tuple[str, ...], default: str) -> str:
    value = request.query.get(name) or default
    if value not in choices:
        raise InvalidArgument(f"{name}: {value[:40]!r} is not one of {', '.join(choices)}")
    return value


# ---------------------------------------------------------------- nodes


def nodes_heatmap(core: Core) -> dict[str, Any]:
    """Every alive node by name, with each resource's requested share in
    permille (-1 where the node has none of it) and the cluster totals.

    ``flags``: bit 1 cordoned (spec.unschedulable), bit 2 tainted."""
    snap = core.snapshot()
    rows = snap.alive_rows()
    names = [snap.name(r) for r in rows.tolist()]
    order = np.argsort(np.asarray(names, dtype=object), kind="stable") if names else np.zeros(0, dtype=np.int64)
    rows = rows[order]
    names = [names[i] for i in order.tolist()]
    alloc = snap.alloc[rows]
    req = snap.req[rows]
    cols = snap.columns.names
    present = [c for c in range(min(len(cols), alloc.shape[1])) if alloc.shape[0] and bool(alloc[:, c].any())]
    # cpu, memory, pods first (what a person looks at), then the rest in column order.
    first = [cols.index(n) for n in ("cpu", "memory", "pods") if n in cols]
    columns = [c for c in first if c in present] + [c for c in present if c not in first]
    used: dict[str, list[int]] = {}
    totals: dict[str, dict[str, int]] = {}
    for c in columns:
        a, q = alloc[:, c], req[:, c]
        with np.errstate(divide="ignore", invalid="ignore"):
            permille = np.where(a > 0, np.minimum(q * 1000 // np.maximum(a, 1), 9999), -1)
        used[cols[c]] = permille.tolist()
        totals[cols[c]] = {"allocatable": int(a.sum()), "requested": int(q.sum())}
    flags = snap.unschedulable[rows].astype(np.int64) | ((snap.taint_group[rows] != 0).astype(np.int64) << 1)
    return {
        "count": len(names),
        "resources": [cols[c] for c in columns],
        "names": names,
        "flags": flags.tolist(),
        "used": used,
        "totals": totals,
    }


def node_detail(core: Core, name: str) -> dict[str, Any]:
    snap = core.snapshot()
    r = snap.index.get(name)
    if r is None or not snap.alive[r]:
        raise NotFound(f"node {name!r} not found")
    node = snap.node(r)
    info = snap.infos[r]
    assert info is not None
    cols = snap.columns.names
    keys = sorted(p.pod.key for p in info.pods.values())
    return {
        "name": name,
        "allocatable": {cols[c]: int(v) for c, v in enumerate(snap.alloc[r].tolist()) if v},
        "requested": {cols[c]: int(v) for c, v in enumerate(snap.req[r].tolist()) if v},
        "labels": node.metadata.labels,
        "unschedulable": node.spec.unschedulable,
        "taints": [_taint(t) for t in node.spec.taints],
        "pod_count": len(keys),
        "pods": keys[:NODE_PODS_SHOWN],
    }


def _taint(t: model.Taint) -> str:
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


# ---------------------------------------------------------------- queues


def queues(core: Core) -> dict[str, Any]:
    return {
        "enabled": core.quota.enabled,
        "queues": [dataclasses.asdict(q) for q in core.quota.status()],
        # What a bar of a resource no max bounds is drawn against.
        "capacity": core.cache.allocatable_total(),
        "reclaims": dict(core.quota.reclaims),
    }


# ---------------------------------------------------------------- pods


def _row(row: visibility.PodRow, now: float) -> dict[str, Any]:
    out = dataclasses.asdict(row)
    out["age"] = max(now - row.created, 0.0) if row.created else 0.0
    return out


async def pods_page(
    core: Core,
    *,
    phase: str = "pending",
    namespace: str = "",
    queue: str = "",
    text: str = "",
    offset: int = 0,
    limit: int = PODS_LIMIT,
) -> dict[str, Any]:
    """A page of :func:`visibility.list_pods`, filtered; each row of the page
    (only those) carries its ``why`` summary. ``phase`` is a phase name,
    ``pending`` (the waiting phases) or ``all``.

    A ``why`` judges every node (some 20 ms on 5000 nodes): the loop gets a
    turn between rows, so a page of them never stalls scheduling for long.
    The listing and its counts are one moment's; each row's ``why`` its own."""
    rows = visibility.list_pods(core)
    phases: dict[str, int] = {}
    for r in rows:
        phases[r.phase] = phases.get(r.phase, 0) + 1
    namespaces = sorted({r.namespace for r in rows})
    queue_names = sorted({r.queue for r in rows if r.queue})
    needle = text.lower()

    def keep(r: visibility.PodRow) -> bool:
        if phase == "pending" and r.phase not in PENDING_PHASES:
            return False
        if phase not in _PHASE_FILTERS and r.phase != phase:
            return False
        if namespace and r.namespace != namespace:
            return False
        if queue and r.queue != queue:
            return False
        return not needle or needle in f"{r.namespace}/{r.name}".lower() or needle in r.reason.lower()

    chosen = [r for r in rows if keep(r)]
    now = time.time()  # PodRow.created is unix seconds
    page = []
    for k, r in enumerate(chosen[offset : offset + limit]):
        if k:
            await asyncio.sleep(0)
        item = _row(r, now)
        try:
            item["why"] = visibility.why(core, f"{r.namespace}/{r.name}").summary
        except NotFound:  # gone between the listing and now
            item["why"] = ""
        page.append(item)
    return {
        "total": len(chosen),
        "offset": offset,
        "limit": limit,
        "phases": phases,
        "namespaces": namespaces,
        "queues": queue_names,
        "pods": page,
    }


def pod_page(core: Core, key: str, *, offset: int = 0, limit: int = NODES_LIMIT, show: str = "all") -> dict[str, Any]:
    """A pod's full ``why`` and, while it waits, ``explain``: every node's
    verdict with each plugin's score (feasible nodes first, best score
    first), a page of them."""
    answer = visibility.why(core, key)  # NotFound for an unknown pod
    pod = core.pods.by_key(key)
    row = next(
        (r for r in visibility.list_pods(core, namespace=key.split("/", 1)[0]) if f"{r.namespace}/{r.name}" == key),
        None,
    )
    out: dict[str, Any] = {
        "pod": key,
        "row": _row(row, time.time()) if row is not None else None,
        "why": dataclasses.asdict(answer),
        "explain": None,
    }
    if pod is None or answer.phase not in PENDING_PHASES:
        return out  # placed: where it went is the answer
    e = explain.explain(core, pod)
    nodes = sorted(e.nodes, key=lambda n: (not n.feasible, -n.score, n.node))
    if show == "feasible":
        nodes = [n for n in nodes if n.feasible]
    elif show == "infeasible":
        nodes = [n for n in nodes if not n.feasible]
    plugins = sorted({p for n in e.nodes for p in n.plugin_scores})
    out["explain"] = {
        "profile": e.profile,
        "summary": e.summary,
        "feasible_nodes": e.feasible_nodes,
        "total_nodes": len(e.nodes),
        "pre_filter_reasons": [dataclasses.asdict(r) for r in e.pre_filter_reasons],
        "queue": dataclasses.asdict(e.queue),
        "plugins": plugins,
        "total": len(nodes),
        "offset": offset,
        "limit": limit,
        "nodes": [dataclasses.asdict(n) for n in nodes[offset : offset + limit]],
    }
    return out


# ---------------------------------------------------------------- decisions

_KIND_NAMES = {k: "".join(w.title() for w in k.name.split("_")) for k in DecisionKind}  # BIND_FAILED -> BindFailed


def decision_json(d: Decision) -> dict[str, Any]:
    return {
        "kind": _KIND_NAMES.get(d.kind, str(d.kind)),
        "pod": d.pod,
        "node": d.node,
        "message": d.message,
        "reasons": [{"plugin": r.plugin, "reason": r.reason} for r in d.reasons],
        "attempts": d.attempts,
        "time": d.timestamp_ms,
    }


def _event(d: Decision) -> bytes:
    return b"event: decision\ndata: " + _encoder.encode(decision_json(d)) + b"\n\n"


# ---------------------------------------------------------------- routes


def add_routes(app: web.Application, core: Core) -> None:
    """Register ``/ui/`` and its API on ``app`` (read-only GETs)."""
    files = _static_files()
    app[_STREAMS] = _Streams()

    async def on_shutdown(_: web.Application) -> None:
        close_streams(app)

    app.on_shutdown.append(on_shutdown)

    async def root(_: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/ui/")

    async def static(request: web.Request) -> web.Response:
        name = request.match_info.get("file") or "index.html"
        found = files.get(name)
        if found is None:
            raise NotFound(f"no file {name[:64]!r} in the dashboard")
        body, ctype = found
        # Shipped with this version of Berth; revalidated on each load (small files).
        return web.Response(body=body, headers={"Content-Type": ctype, "Cache-Control": "no-cache"})

    def api(build: Callable[[web.Request], Any]) -> Callable[[web.Request], Any]:
        async def handler(request: web.Request) -> web.Response:
            # No await between here and the answer: one consistent state.
            return _json(build(request))

        return handler

    async def get_pods(request: web.Request) -> web.Response:
        page = await pods_page(
            core,
            phase=_choice(request, "phase", _PHASE_FILTERS + visibility.PHASES, "pending"),
            namespace=request.query.get("namespace", ""),
            queue=request.query.get("queue", ""),
            text=request.query.get("q", ""),
            offset=_int_param(request, "offset", 0, 0, 1 << 31),
            limit=_int_param(request, "limit", PODS_LIMIT, 1, MAX_PODS_LIMIT),
        )
        return _json(page)

    def get_pod(request: web.Request) -> Any:
        key = f"{request.match_info['namespace']}/{request.match_info['name']}"
        return pod_page(
            core,
            key,
            offset=_int_param(request, "offset", 0, 0, 1 << 31),
            limit=_int_param(request, "limit", NODES_LIMIT, 1, MAX_NODES_LIMIT),
            show=_choice(request, "show", _SHOW, "all"),
        )

    async def decisions(request: web.Request) -> web.StreamResponse:
        replay = _int_param(request, "replay", DEFAULT_REPLAY, 0, MAX_REPLAY)
        closing = app[_STREAMS].closing
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )
        await resp.prepare(request)
        # The most recent decisions first (the log keeps each pod's latest),
        # then the live ones; subscribed before the first write, so none is missed.
        stream = core.decisions.watch()
        nxt: asyncio.Future[Decision] = asyncio.ensure_future(anext(stream))
        stop: asyncio.Future[Any] = asyncio.ensure_future(closing.wait())
        await asyncio.sleep(0)  # the watch subscribes (its first step) before the replay is taken
        recent = heapq.nlargest(replay, core.decisions.latest.values(), key=lambda d: d.timestamp_ms)
        try:
            await resp.write(b"retry: 2000\n\n" + b"".join(_event(d) for d in reversed(recent)))
            while not closing.is_set():
                waiting: set[asyncio.Future[Any]] = {nxt, stop}
                done, _ = await asyncio.wait(waiting, timeout=HEARTBEAT_SECONDS, return_when=asyncio.FIRST_COMPLETED)
                if nxt in done:
                    await resp.write(_event(nxt.result()))
                    nxt = asyncio.ensure_future(anext(stream))
                elif not done:
                    await resp.write(b": keep-alive\n\n")
        except (ConnectionError, RuntimeError):
            pass  # the browser went away (aiohttp: "Cannot write to closing transport")
        except ResourceExhausted:
            pass  # it fell too far behind (decisions.MAX_BACKLOG_BYTES): it reconnects and replays
        finally:
            # A pending next() is always there: cancelling it ends the watch
            # (its generator's finally unsubscribes).
            for fut in (nxt, stop):
                fut.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await fut
        with contextlib.suppress(ConnectionError, RuntimeError):
            await resp.write_eof()
        return resp

    app.router.add_get("/ui", root)
    app.router.add_get("/ui/", static)
    app.router.add_get("/ui/api/nodes", api(lambda _: nodes_heatmap(core)))
    app.router.add_get("/ui/api/nodes/{name}", api(lambda r: node_detail(core, r.match_info["name"])))
    app.router.add_get("/ui/api/queues", api(lambda _: queues(core)))
    app.router.add_get("/ui/api/pods", get_pods)
    app.router.add_get("/ui/api/pods/{namespace}/{name}", api(get_pod))
    app.router.add_get("/ui/api/decisions", decisions)
    app.router.add_get("/ui/{file}", static)
