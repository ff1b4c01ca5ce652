"""The read-only web dashboard at ``/ui/``: nodes as a heat map, queues, the
pending pods with their ``why``, a pod's full explanation and the decisions
as they happen. This module computes the answers; :mod:`.dashboard` serves
them on the dashboard's own listener, behind its doors (who may see what).

The page is plain HTML, CSS and JavaScript shipped in the package
(``berth/adapters/http/ui/``; no framework, no CDN, no build step). It reads
JSON from ``/ui/api/*`` and the decision stream from server-sent events
(``/ui/api/decisions``, the WHATWG ``EventSource`` protocol). Every route is
a GET (but signing in and out): the dashboard changes nothing.

Sized for 5000 nodes and thousands of pending pods: the heat map's data is
one compact array per resource (each node's requested share in permille,
computed on the snapshot's arrays in one numpy step) that the page draws on
a ``<canvas>``; lists (pods, gangs, a pod's nodes) are grouped, sorted and
paged here and come a page at a time. The pods behind them are listed in
slices that give the event loop a turn (:func:`build_listing`), once for
all the requests of one refresh of the page (:data:`LISTING_MAX_AGE`).

::

    GET /ui/                             the page (and its app.js, app.css)
    GET /ui/api/nodes                    heat map: names, flags, permille per resource, totals
    GET /ui/api/nodes/{name}             one node: allocatable, requested, labels, taints, pods
    GET /ui/api/queues                   core.quota.status()
    GET /ui/api/pods?phase=&namespace=&queue=&q=&by=&group=&sort=&order=&offset=&limit=
                                         the listing filtered; by=reason|queue|gang: the groups and
                                         their counts, and with group=KEY that group's page; each
                                         row of a page with why().summary
    GET /ui/api/gangs?q=&sort=&order=&offset=&limit=
                                         visibility.list_pod_groups, with where the members wait
    GET /ui/api/pods/{namespace}/{name}?offset=&limit=&show=all|feasible|infeasible
                                         why() and explain(): per-node verdicts and plugin scores
    GET /ui/api/decisions?replay=N       text/event-stream of decisions (event "decision")
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import heapq
import importlib.resources
import pathlib
import re
import time
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np
from aiohttp import web

from berth.cluster import model
from berth.errors import InvalidArgument, NotFound
from berth.framework.decision import Decision, DecisionKind
from berth.scheduling import explain, reservations, visibility
from berth.scheduling.core import Core

__all__ = [
    "HEARTBEAT_SECONDS",
    "PENDING_PHASES",
    "Listing",
    "Listings",
    "close_streams",
    "event",
    "gangs_page",
    "gangs_params",
    "init_streams",
    "int_param",
    "json_response",
    "nodes_heatmap",
    "pod_page",
    "pod_params",
    "pods_page",
    "pods_params",
    "static_files",
    "streams_closing",
]

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


def init_streams(app: web.Application) -> None:
    """Give ``app`` the stop signal its decision streams share; it is set
    when the application shuts down."""
    app[_STREAMS] = _Streams()

    async def on_shutdown(_: web.Application) -> None:
        close_streams(app)

    app.on_shutdown.append(on_shutdown)


def streams_closing(app: web.Application) -> asyncio.Event:
    return app[_STREAMS].closing


def close_streams(app: web.Application) -> None:
    """End every open decision stream now (the server is stopping: a browser
    keeps an EventSource open for ever, and a graceful stop must not wait
    for it). Idempotent; streams opened afterwards end at once. An
    application without streams (the extender port's) has nothing to end."""
    if _STREAMS in app:
        app[_STREAMS].closing.set()


#: The page's file types (not the system's mime.types, which varies).
_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}


def static_files() -> dict[str, tuple[bytes, str]]:
    """The page's files, read once from the package: name -> (body, content type)."""
    out: dict[str, tuple[bytes, str]] = {}
    root = importlib.resources.files(__package__ or "berth.adapters.http").joinpath("ui")
    for entry in root.iterdir():
        ctype = _CONTENT_TYPES.get(pathlib.PurePath(entry.name).suffix)
        if ctype is not None and entry.is_file():
            out[entry.name] = (entry.read_bytes(), ctype)
    return out


def json_response(data: Any) -> web.Response:
    return web.Response(body=_encoder.encode(data), content_type="application/json")


def int_param(request: web.Request, name: str, default: int, low: int, high: int) -> int:
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
    value = request.query.get(name)
    if not value:
        return default
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
        # Queue -> a line per reservation it holds (berth.plugins.reservation).
        "reservations": reservations.by_queue(core),
    }


# ---------------------------------------------------------------- the pods listing

#: How long one listing of the pods answers requests: a refresh of the page
#: asks for the groups, each open group's page and the gangs at once, and
#: each would otherwise walk every pod again.
LISTING_MAX_AGE = 1.0
#: How long building a listing works before the event loop gets a turn
#: (as WhatIf's slices): 2000 pending pods are ~80 ms of rows.
SLICE_SECONDS = 0.01

_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[str | int, ...]:
    """Sorts ``heavy-2`` before ``heavy-10``: the runs of digits compare as
    numbers (strings and numbers alternate, so the tuples always compare)."""
    return tuple(int(p) if i % 2 else p for i, p in enumerate(_DIGITS.split(text)))


@dataclasses.dataclass(slots=True)
class Listed:
    """A pod as the dashboard lists it: visibility's row, its gang and its
    name's sort key (computed once per listing, not per request)."""

    row: visibility.PodRow
    gang: str  # its gang, as visibility.gang_id names it ("" none)
    key: tuple[str | int, ...]


@dataclasses.dataclass(slots=True)
class Listing:
    """One moment's pods: what every ``/ui/api/pods`` and ``/ui/api/gangs``
    request within :data:`LISTING_MAX_AGE` reads."""

    rows: list[Listed]
    by_key: dict[str, Listed]
    built: float


async def build_listing(core: Core) -> Listing:
    """Every pod Berth schedules, as :func:`visibility.list_pods` lists them,
    built a slice of :data:`SLICE_SECONDS` at a time: the loop goes on
    between slices, so a row is its pod's as the walk reached it."""
    loop = asyncio.get_running_loop()
    rows: list[Listed] = []
    async for p, row in visibility.walk_rows(core, core.pods.all(), slice_seconds=SLICE_SECONDS):
        gang = visibility.gang_of(core, p)
        rows.append(Listed(row, visibility.gang_id(gang) if gang else "", natural_key(row.key)))
    rows.sort(key=lambda i: i.key)
    return Listing(rows, {i.row.key: i for i in rows}, loop.time())


class Listings:
    """The latest listing and the lock that makes concurrent requests wait
    for one build instead of each starting its own."""

    def __init__(self) -> None:
        self.latest: Listing | None = None
        self.lock = asyncio.Lock()

    async def get(self, core: Core) -> Listing:
        async with self.lock:
            now = asyncio.get_running_loop().time()
            if self.latest is None or now - self.latest.built >= LISTING_MAX_AGE:
                self.latest = await build_listing(core)
            return self.latest


# ---------------------------------------------------------------- pods


#: What pending pods are grouped by: their last reason (the decision's
#: message: kube-scheduler's "0/N nodes are available: ..."), queue or gang.
GROUP_BY = ("reason", "queue", "gang")
#: The most groups one answer names (the largest; ``group_count`` says how many there are).
MAX_GROUPS = 200
_ORDERS = ("asc", "desc")
_PHASE_RANK = {p: i for i, p in enumerate(visibility.PHASES)}
#: Sort keys by column; names and nodes in natural order, ties by the pod's name.
_POD_SORTS: dict[str, Callable[[Listed], Any]] = {
    "name": lambda i: i.key,
    "queue": lambda i: (natural_key(i.row.queue), i.key),
    "phase": lambda i: (_PHASE_RANK.get(i.row.phase, len(_PHASE_RANK)), i.key),
    "position": lambda i: (i.row.position == 0, i.row.position, i.key),  # not waiting in a lane: last
    "node": lambda i: (natural_key(i.row.node), i.key),
    "attempts": lambda i: (i.row.attempts, i.key),
    "age": lambda i: (-i.row.created, i.key),  # youngest first
    "reason": lambda i: (i.row.reason, i.key),
}


def group_of(item: Listed, by: str) -> str:
    """The group ``item`` falls in when grouping ``by`` ("" : none)."""
    if by == "queue":
        return item.row.queue
    if by == "gang":
        return item.gang
    return item.row.reason


def _row(row: visibility.PodRow, now: float) -> dict[str, Any]:
    out = dataclasses.asdict(row)
    out["age"] = max(now - row.created, 0.0) if row.created else 0.0
    return out


async def pods_page(
    core: Core,
    listing: Listing,
    *,
    phase: str = "pending",
    namespace: str = "",
    queue: str = "",
    text: str = "",
    by: str = "",
    group: str | None = None,
    sort: str = "name",
    order: str = "asc",
    offset: int = 0,
    limit: int = PODS_LIMIT,
) -> dict[str, Any]:
    """The pods of ``listing``, filtered: grouped ``by`` a column (each
    group with its count, the largest first), and a page of them sorted by
    ``sort`` — of one ``group`` when grouped. ``phase`` is a phase name,
    ``pending`` (the waiting phases) or ``all``. Each row of the page (only
    those) carries its ``why`` summary; a grouped answer without ``group``
    has no page.

    A ``why`` judges every node (some 20 ms on 5000 nodes): the loop gets a
    turn between rows, so a page of them never stalls scheduling for long.
    Counts and order are the listing's; each row's ``why`` its own."""
    rows = listing.rows
    phases: dict[str, int] = {}
    for i in rows:
        phases[i.row.phase] = phases.get(i.row.phase, 0) + 1
    namespaces = sorted({i.row.namespace for i in rows}, key=natural_key)
    queue_names = sorted({i.row.queue for i in rows if i.row.queue}, key=natural_key)
    needle = text.lower()

    def keep(i: Listed) -> bool:
        r = i.row
        if phase == "pending" and r.phase not in PENDING_PHASES:
            return False
        if phase not in _PHASE_FILTERS and r.phase != phase:
            return False
        if namespace and r.namespace != namespace:
            return False
        if queue and r.queue != queue:
            return False
        return not needle or needle in r.key.lower() or needle in r.reason.lower()

    chosen = [i for i in rows if keep(i)]
    out: dict[str, Any] = {
        "total": len(chosen),
        "offset": offset,
        "limit": limit,
        "sort": sort,
        "order": order,
        "phases": phases,
        "namespaces": namespaces,
        "queues": queue_names,
        "pods": [],
    }
    if by:
        groups: dict[str, dict[str, int]] = {}
        for i in chosen:
            counts = groups.setdefault(group_of(i, by), {})
            counts[i.row.phase] = counts.get(i.row.phase, 0) + 1
        largest = heapq.nsmallest(MAX_GROUPS, groups.items(), key=lambda kv: (-sum(kv[1].values()), natural_key(kv[0])))
        out["by"] = by
        out["group_count"] = len(groups)
        out["groups"] = [{"key": k, "count": sum(c.values()), "phases": c} for k, c in largest]
        if group is None:
            return out
        chosen = [i for i in chosen if group_of(i, by) == group]
        out["group"] = group
        out["total"] = len(chosen)
    now = time.time()  # PodRow.created is unix seconds
    page = out["pods"]
    if (sort, order) != ("name", "asc"):  # else the listing's own order
        chosen.sort(key=_POD_SORTS[sort], reverse=order == "desc")
    for k, i in enumerate(chosen[offset : offset + limit]):
        if k:
            await asyncio.sleep(0)
        item = _row(i.row, now)
        item["gang"] = i.gang
        try:
            item["why"] = visibility.why(core, i.row.key).summary
        except NotFound:  # gone since the listing
            item["why"] = ""
        page.append(item)
    return out


def pod_page(
    core: Core, listing: Listing, key: str, *, offset: int = 0, limit: int = NODES_LIMIT, show: str = "all"
) -> dict[str, Any]:
    """A pod's full ``why`` and, while it waits, ``explain``: every node's
    verdict with each plugin's score (feasible nodes first, best score
    first), a page of them. Its row (attempts, age, requests) is the
    listing's."""
    answer = visibility.why(core, key)  # NotFound for an unknown pod
    pod = core.pods.by_key(key)
    listed = listing.by_key.get(key)
    out: dict[str, Any] = {
        "pod": key,
        "row": _row(listed.row, time.time()) if listed is not None else None,
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


# ---------------------------------------------------------------- gangs

GANGS_LIMIT = 50
MAX_GANGS_LIMIT = 200
#: Nodes named where a gang's members wait (the count is always exact).
GANG_NODES_SHOWN = 10

_GANG_SORTS: dict[str, Callable[[visibility.PodGroupRow], Any]] = {
    "name": lambda g: natural_key(f"{g.namespace}/{g.name}"),
    "members": lambda g: (g.members, natural_key(f"{g.namespace}/{g.name}")),
    "min": lambda g: (g.min_member, natural_key(f"{g.namespace}/{g.name}")),
    "placed": lambda g: (g.placed, natural_key(f"{g.namespace}/{g.name}")),
    "pending": lambda g: (g.pending, natural_key(f"{g.namespace}/{g.name}")),
}


def _where(members: list[Listed]) -> list[dict[str, Any]]:
    """Where a gang's members not bound wait: per phase, how many, on which
    nodes (those at Permit hold one; others may be nominated) and the
    commonest reason."""
    by_phase: dict[str, list[Listed]] = {}
    for i in members:
        if i.row.phase != "Bound":
            by_phase.setdefault(i.row.phase, []).append(i)
    out = []
    for phase in sorted(by_phase, key=lambda p: _PHASE_RANK.get(p, len(_PHASE_RANK))):
        ms = by_phase[phase]
        nodes = sorted({i.row.node for i in ms if i.row.node}, key=natural_key)
        reasons: dict[str, int] = {}
        for i in ms:
            if i.row.reason:
                reasons[i.row.reason] = reasons.get(i.row.reason, 0) + 1
        out.append(
            {
                "phase": phase,
                "count": len(ms),
                "nodes": nodes[:GANG_NODES_SHOWN],
                "node_count": len(nodes),
                "reason": max(reasons, key=lambda r: (reasons[r], r)) if reasons else "",
            }
        )
    return out


def gangs_page(
    core: Core,
    listing: Listing,
    *,
    text: str = "",
    sort: str = "name",
    order: str = "asc",
    offset: int = 0,
    limit: int = GANGS_LIMIT,
    namespaces: Callable[[str], bool] | None = None,
) -> dict[str, Any]:
    """Every PodGroup (:func:`visibility.list_pod_groups`: minMember,
    members present, placed, pending) and, from the listing, where its
    members wait; a page of them. ``namespaces``: which namespaces' groups
    are shown (None: all)."""
    members: dict[str, list[Listed]] = {}
    for i in listing.rows:
        if i.gang:
            members.setdefault(i.gang, []).append(i)
    needle = text.lower()
    groups = [
        g
        for g in visibility.list_pod_groups(core)
        if (namespaces is None or namespaces(g.namespace))
        and (not needle or needle in f"{g.namespace}/{g.name}".lower())
    ]
    groups.sort(key=_GANG_SORTS[sort], reverse=order == "desc")
    page = []
    for g in groups[offset : offset + limit]:
        item = dataclasses.asdict(g)
        item["gang"] = key = g.gang
        item["where"] = _where(members.get(key, []))
        page.append(item)
    return {
        "total": len(groups),
        "offset": offset,
        "limit": limit,
        "sort": sort,
        "order": order,
        "incomplete": sum(1 for g in groups if g.placed < g.min_member),
        "gangs": page,
    }


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


#: Decisions whose event bytes are kept: every open stream writes the same
#: bytes for one decision, encoded once (issue 28: with 2000 streams each
#: decision was encoded 2000 times, 19.5 s of CPU for 300 pods). A decision
#: is immutable and hashable: equal ones have equal bytes.
ENCODED_EVENTS = 4096


@functools.lru_cache(maxsize=ENCODED_EVENTS)
def event(d: Decision) -> bytes:
    return b"event: decision\ndata: " + _encoder.encode(decision_json(d)) + b"\n\n"


# ---------------------------------------------------------------- request parameters


def pods_params(request: web.Request) -> dict[str, Any]:
    """``/ui/api/pods``' parameters for :func:`pods_page`, each checked (400 naming it)."""
    kw: dict[str, Any] = {
        "phase": _choice(request, "phase", _PHASE_FILTERS + visibility.PHASES, "pending"),
        "namespace": request.query.get("namespace", ""),
        "queue": request.query.get("queue", ""),
        "text": request.query.get("q", ""),
        "by": _choice(request, "by", GROUP_BY, ""),
        "group": request.query.get("group"),
        "sort": _choice(request, "sort", tuple(_POD_SORTS), "name"),
        "order": _choice(request, "order", _ORDERS, "asc"),
        "offset": int_param(request, "offset", 0, 0, 1 << 31),
        "limit": int_param(request, "limit", PODS_LIMIT, 1, MAX_PODS_LIMIT),
    }
    if kw["group"] is not None and not kw["by"]:
        raise InvalidArgument("group: needs by (reason, queue or gang)")
    return kw


def pod_params(request: web.Request) -> dict[str, Any]:
    """``/ui/api/pods/{namespace}/{name}``'s parameters for :func:`pod_page`."""
    return {
        "offset": int_param(request, "offset", 0, 0, 1 << 31),
        "limit": int_param(request, "limit", NODES_LIMIT, 1, MAX_NODES_LIMIT),
        "show": _choice(request, "show", _SHOW, "all"),
    }


def gangs_params(request: web.Request) -> dict[str, Any]:
    """``/ui/api/gangs``' parameters for :func:`gangs_page`."""
    return {
        "text": request.query.get("q", ""),
        "sort": _choice(request, "sort", tuple(_GANG_SORTS), "name"),
        "order": _choice(request, "order", _ORDERS, "asc"),
        "offset": int_param(request, "offset", 0, 0, 1 << 31),
        "limit": int_param(request, "limit", GANGS_LIMIT, 1, MAX_GANGS_LIMIT),
    }
