"""The pod writes of a binding or a failed cycle, as HTTP requests: the
Binding, the ``PodScheduled`` condition of a pod that stays pending, and the
``Scheduled`` / ``FailedScheduling`` events.

They run either in :mod:`.writer`'s subprocess (the default of ``berth
serve --kubeconfig``: the scheduling loop's core is then not spent on
request building, TLS and response parsing) or in the loop's own process
(tests with an in-process fake API server, or when the subprocess cannot
run). Nothing here reads the scheduler's state; what the loop must know —
the outcome of a Binding — is returned.

Events follow client-go's ``tools/events`` broadcaster (``event_broadcaster.go``
v0.34.4, the one kube-scheduler uses), see :class:`EventRecorder`.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

import aiohttp
import msgspec
from kubernetes_asyncio import client

from berth.adapters.kubernetes.deadlines import timeout_for
from berth.cluster import model
from berth.cluster.sources import BindConflict, BindError, BindRetriable

__all__ = ["REQUEST_TIMEOUT_SECONDS", "EventRecorder", "PodRef", "PodWrites"]

log = logging.getLogger(__name__)

#: Every write gives up after this: kubernetes-asyncio sets no timeout, and a
#: hung API server must not hold a binding cycle (or a shutdown) forever. A
#: bind that timed out but did happen is found on the retry (409, same node).
REQUEST_TIMEOUT_SECONDS = 30.0

# client-go tools/events/event_broadcaster.go (v0.34.4).
#: Events waiting to be written; more are dropped. client-go's broadcaster
#: drops past 1000 in its channel (``watch.NewBroadcaster(maxQueuedEvents,
#: watch.DropIfChannelFull)``), but that channel drains at once into a
#: goroutine per event, which may wait on the API server without limit;
#: Berth's writers are fewer than that, so its waiting line is longer: a
#: burst of 10 000 bindings keeps all its Scheduled events (~2 KB each
#: waiting: ~20 MB at the bound).
MAX_QUEUED_EVENTS = 10000
#: Tries per event while the API server cannot be reached (``maxTriesPerEvent``)...
MAX_TRIES_PER_EVENT = 12
#: ...apart by this, jittered by up to 25 % (``defaultSleepDuration``, ``wait.Jitter(.., 0.25)``).
RETRY_SLEEP_SECONDS = 10.0
#: A series not observed for this long is finished: the next event starts anew (``finishTime``).
FINISH_SECONDS = 6 * 60.0
#: Series still running have their count written this often (``refreshTime``).
REFRESH_SECONDS = 30 * 60.0
#: Events written at once. client-go's broadcaster writes each event in a
#: goroutine of its own (``recordToSink``), so its queue of 1000 only fills
#: when the API server stalls, and the API server sees every Scheduled
#: event beside its Binding. With 4 and then 32 writers Berth's events fell
#: behind its Bindings (thousands of 10 000 dropped at ~700 pods/s,
#: bench.kube SchedulingBasic with BENCH_KUBE_REQUESTS=1), so the API server
#: did less for Berth than for kube-scheduler. 96 keeps pace; Bindings share
#: the client's 100 connections with them first come, first served, as
#: kube-scheduler's share its HTTP/2 connection.
EVENT_WRITERS = 96
#: Isomorphic-event keys remembered at most (upstream's cache is bounded only
#: by ``finishTime``; at 2000 pods/s that would be 720 000 Scheduled events).
MAX_CACHED_EVENTS = 20000
#: PodScheduled messages remembered at most (forgetting one costs one patch).
MAX_CONDITIONS = 10000


def _now_micro() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


#: How a queue's reclaim names its victims' reason (berth/scheduling/loop.py).
RECLAIMED_FOR_QUEUE = ": reclaimed for queue "


def disruption_message(reason: str, scheduler_name: str) -> str:
    """The victim's ``DisruptionTarget`` message: kube-scheduler's words
    (``executor.go`` v1.37.2: ``"<scheduler>: preempting to accommodate a
    higher priority pod"``; the event carries ``reason``, "Preempted by pod
    <uid> on node <node>"); a queue's reclaim, which kube-scheduler has
    not, says so in the same shape."""
    _, reclaim, queue = reason.partition(RECLAIMED_FOR_QUEUE)
    if reclaim:
        return f"{scheduler_name}: preempting to reclaim resources for queue {queue}"
    return f"{scheduler_name}: preempting to accommodate a higher priority pod"


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _connection_refused(e: BaseException) -> bool:
    """``net.IsConnectionRefused``: ECONNREFUSED anywhere in the chain."""
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return True
        if isinstance(seen, aiohttp.ClientConnectorError) and isinstance(seen.os_error, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class _BoundPod(msgspec.Struct):
    spec: model.PodSpec = msgspec.field(default_factory=model.PodSpec)


Request = Callable[[str, str, Any, str], Awaitable[tuple[int, bytes]]]


class RawRequests:
    """``request(method, path, body, content_type) -> (status, body)``
    through kubernetes-asyncio's session, authentication and TLS, without
    its generated layer: that layer sanitises every body, serialises it with
    the json module and checks each parameter, about a fifth of the writer's
    CPU per Binding (py-spy). The body is encoded with msgspec; the answer
    is returned raw, whatever its status (nothing is raised for a 4xx/5xx)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api
        self._host = (api.configuration.host or "").rstrip("/")
        # A total, a connect and a read-idle bound: a Binding on a connection
        # gone silent is abandoned (and the connection closed) well before the total.
        self._timeout = timeout_for(REQUEST_TIMEOUT_SECONDS, watch=False)

    async def __call__(self, method: str, path: str, body: Any, content_type: str) -> tuple[int, bytes]:
        api = self._api
        headers = {"Accept": "application/json", "Content-Type": content_type, **api.default_headers}
        await api.update_params_for_auth(headers, [], ["BearerToken"])
        rest = api.rest_client
        kw: dict[str, Any] = {"method": method, "url": self._host + path, "timeout": self._timeout, "headers": headers}
        if body is not None:
            kw["data"] = msgspec.json.encode(body)
        if rest.proxy:
            kw["proxy"] = rest.proxy
        if rest.proxy_headers:
            kw["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            kw["server_hostname"] = rest.server_hostname
        resp = await rest.pool_manager.request(**kw)
        try:
            return resp.status, await resp.read()
        finally:
            resp.release()


_JSON = "application/json"
_MERGE = "application/merge-patch+json"
_STRATEGIC = "application/strategic-merge-patch+json"


def _pod_path(namespace: str, name: str, sub: str = "") -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}{sub}"


class PodRef(msgspec.Struct, frozen=True, array_like=True):
    """The pod a write is about: what the requests name."""

    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, pod: model.Pod) -> PodRef:
        md = pod.metadata
        return cls(md.namespace, md.name, md.uid)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _pod_reference(pod: PodRef) -> dict[str, str]:
    """The pod as an event's ObjectReference (``reference.GetReference``)."""
    return {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "namespace": pod.namespace, "uid": pod.uid}


class _Series:
    """One isomorphic event as written: its name and how often it was seen."""

    __slots__ = ("body", "count", "last")

    def __init__(self, body: dict[str, Any], last: float) -> None:
        self.body = body
        self.count = 1
        self.last = last


class EventRecorder:
    """client-go's ``eventBroadcasterImpl.recordToSink``, for events.k8s.io/v1.

    An event isomorphic to one already written — same type, action, reason,
    regarding and related object (``getKey``; the note is not part of the key) — is
    not written again: the second occurrence patches ``series: {count: 2,
    lastObservedTime}`` onto the first, later ones only count, and running
    series have their count written every :data:`REFRESH_SECONDS`; a series
    not seen for :data:`FINISH_SECONDS` is finished. Writes wait in a queue
    of :data:`MAX_QUEUED_EVENTS` (newer events are dropped when it is full)
    and are retried while the API server cannot be reached, at most
    :data:`MAX_TRIES_PER_EVENT` times; an event the server rejects is
    dropped. Events are best effort: nothing waits for them.
    """

    def __init__(
        self,
        request: Request,
        *,
        controller: str,
        instance: str,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        writers: int = EVENT_WRITERS,
    ) -> None:
        self._request = request
        self.controller = controller
        self.instance = instance
        self._clock = clock
        self._sleep = sleep
        self._writers = writers
        self._cache: collections.OrderedDict[tuple[str, str, str, str, str], _Series] = collections.OrderedDict()
        self._queue: collections.deque[tuple[dict[str, Any], bool]] = collections.deque()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.dropped = 0
        #: Called with 1 for every dropped event (berth_events_dropped_total).
        self.on_drop: Callable[[int], None] | None = None
        self._last_refresh = clock()
        self._last_finish = clock()

    # ------------------------------------------------------------ record

    def record(
        self, pod: PodRef, type_: str, reason: str, action: str, note: str, related: PodRef | None = None
    ) -> None:
        """``Eventf(pod, related, type_, reason, action, note)``."""
        now = self._clock()
        self._housekeeping(now)
        key = (type_, action, reason, pod.uid, related.uid if related is not None else "")
        have = self._cache.get(key)
        if have is not None:
            have.count += 1
            have.last = now
            self._cache.move_to_end(key)
            if have.count == 2:  # the first repeat makes it a series (later ones only count)
                self._enqueue(self._series_patch(have), True)
            return
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            # client-go's recorder names events "<object>.<unix nanos in hex>";
            # a generateName ending in "." is rejected by validation.
            "metadata": {"name": f"{pod.name}.{time.time_ns():x}", "namespace": pod.namespace},
            "eventTime": _now_micro(),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": action,
            "reason": reason,
            "type": type_,
            "note": note[:1024],
            "regarding": _pod_reference(pod),
        }
        if related is not None:
            body["related"] = _pod_reference(related)
        self._cache[key] = _Series(body, now)
        if len(self._cache) > MAX_CACHED_EVENTS:
            self._cache.popitem(last=False)
        self._enqueue(body, False)

    def _series_patch(self, s: _Series) -> dict[str, Any]:
        return {**s.body, "series": {"count": s.count, "lastObservedTime": _now_micro()}}

    def _housekeeping(self, now: float) -> None:
        """``finishSeries`` and ``refreshExistingEventSeries``, run as events arrive."""
        if now - self._last_finish >= FINISH_SECONDS:
            self._last_finish = now
            for key in [k for k, s in self._cache.items() if now - s.last >= FINISH_SECONDS]:
                del self._cache[key]
        if now - self._last_refresh >= REFRESH_SECONDS:
            self._last_refresh = now
            for s in self._cache.values():
                if s.count > 1:
                    self._enqueue(self._series_patch(s), True)

    def _enqueue(self, body: dict[str, Any], series: bool) -> None:
        if len(self._queue) >= MAX_QUEUED_EVENTS:
            self.dropped += 1
            if self.on_drop is not None:
                self.on_drop(1)
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("%d events dropped: more than %d waiting to be written", self.dropped, MAX_QUEUED_EVENTS)
            return
        self._queue.append((body, series))
        self._wake.set()
        self._idle.clear()
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [loop.create_task(self._write_loop(), name="event-writer") for _ in range(self._writers)]

    # ------------------------------------------------------------ write

    @property
    def idle(self) -> bool:
        return not self._queue and not self._busy

    async def flush(self) -> None:
        """Wait until every queued event was written or given up (tests, shutdown)."""
        await self._idle.wait()

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _write_loop(self) -> None:
        while True:
            if not self._queue:
                if not self._busy:
                    self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            body, series = self._queue.popleft()
            self._busy += 1
            try:
                await self._attempt(body, series)
            except asyncio.CancelledError:
                raise
            except Exception:  # best effort: a bug here must not stop the writer
                log.exception("writing event %s", body["metadata"]["name"])
            finally:
                self._busy -= 1

    async def _attempt(self, body: dict[str, Any], series: bool) -> None:
        """``attemptRecording``: retry while the server cannot be reached."""
        for tries in range(1, MAX_TRIES_PER_EVENT + 1):
            retry = await self._record_once(body, series)
            if not retry:
                return
            if tries < MAX_TRIES_PER_EVENT:
                await self._sleep(RETRY_SLEEP_SECONDS * (1 + 0.25 * random.random()))
        log.error("unable to write event %s (retry limit exceeded)", body["metadata"]["name"])

    async def _record_once(self, body: dict[str, Any], series: bool) -> bool:
        """``recordEvent``: True when worth retrying."""
        md = body["metadata"]
        events = f"/apis/events.k8s.io/v1/namespaces/{quote(md['namespace'], safe='')}/events"
        try:
            status = 404
            if series:
                path = f"{events}/{quote(md['name'], safe='')}"
                status, _ = await self._request("PATCH", path, {"series": body["series"]}, _MERGE)
            if status == 404:  # not a series, or its first event is gone: create
                status, _ = await self._request("POST", events, body, _JSON)
                if status == 409 and series:
                    return True  # created meanwhile by the first write: patch it next time
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            log.warning("unable to write event %s (may retry): %s", md["name"], e)
            return True
        if status >= 300:
            log.warning("event %s %s rejected: HTTP %d", body["reason"], md["name"], status)
        return False


class PodWrites:
    """The Binding, PodScheduled condition and events of one scheduler identity."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        identity: str,
        scheduler_name: str,
        request: Request | None = None,
    ) -> None:
        self._request: Request = request or RawRequests(api)
        self.events = EventRecorder(self._request, controller=scheduler_name, instance=identity)
        #: The PodScheduled message last written, by pod uid. The condition
        #: always shows the latest reason — kube-scheduler's ``updatePod``
        #: patches whenever the condition differs — while events aggregate.
        self._condition: collections.OrderedDict[str, str] = collections.OrderedDict()
        #: The unschedulable report in flight per pod: the next waits for it,
        #: so the condition ends with the latest reason.
        self._reporting: dict[str, asyncio.Future[None]] = {}

    # ------------------------------------------------------------ bind

    async def bind(self, pod: PodRef, node: str) -> None:
        """``POST pods/{name}/binding`` with the UID as precondition
        (``defaultbinder``); :class:`BindConflict` when the pod is bound
        elsewhere or gone, :class:`BindRetriable` for what ``util.Retriable``
        retries (500, 503, a refused connection), :class:`BindError` otherwise."""
        # A PodScheduled=False report of an earlier attempt still in flight
        # lands first: patched after the Binding, it would leave a bound pod
        # saying Unschedulable. kube-scheduler orders them the same way
        # (handleSchedulingFailure's status update precedes the retry; with
        # SchedulerAsyncAPICalls its dispatcher lets a Binding supersede
        # a pending status patch of the same pod).
        before = self._reporting.get(pod.uid)
        if before is not None:
            await asyncio.shield(before)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            status, text = await self._request("POST", _pod_path(pod.namespace, pod.name, "/binding"), body, _JSON)
            if 200 <= status <= 299:
                return
            if status == 409:
                current = await self._current_node(pod)
                if current == node:
                    return  # a retried bind that had happened
                raise BindConflict(f"pod {pod.key} is already assigned to node {current!r}")
        except BindError:
            raise
        except Exception as e:
            if _connection_refused(e):
                raise BindRetriable(f"binding {pod.key} to {node}: {e}") from e
            raise BindError(f"binding {pod.key} to {node}: {e}") from e
        if status == 404:
            raise BindConflict(f'pods "{pod.name}" not found')
        failed = BindRetriable if status in (500, 503) else BindError
        raise failed(f"binding {pod.key} to {node}: HTTP {status}: {text.decode(errors='replace')[:300]}")

    async def _current_node(self, pod: PodRef) -> str:
        status, data = await self._request("GET", _pod_path(pod.namespace, pod.name), None, _JSON)
        if status != 200:
            return ""
        return msgspec.json.decode(data, type=_BoundPod).spec.node_name

    # ------------------------------------------------------------ preemption

    async def evict(self, pod: PodRef, reason: str, scheduler_name: str) -> None:
        """A preemption victim: the ``DisruptionTarget`` condition, then
        ``DELETE`` with the UID as precondition, then a ``Preempted`` event
        (``preemption.go: PrepareCandidate``). A pod already gone is fine."""
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": disruption_message(reason, scheduler_name),
            "lastTransitionTime": _now(),
        }
        await self.patch_status(pod, {"conditions": [condition]}, "marking victim")
        body = {"preconditions": {"uid": pod.uid}}
        status, text = await self._request("DELETE", _pod_path(pod.namespace, pod.name), body, _JSON)
        if not (200 <= status <= 299 or status in (404, 409)):
            raise RuntimeError(f"deleting victim {pod.key}: HTTP {status}: {text.decode(errors='replace')[:300]}")
        self.events.record(pod, "Normal", "Preempted", "Preempting", reason)

    def report_preempted(self, pod: PodRef, message: str) -> None:
        """A victim preempted in the scheduler's memory: the ``Preempted``
        event alone, no condition and no deletion (``executor.go`` v1.37.2)."""
        self.events.record(pod, "Normal", "Preempted", "Preempting", message)

    async def nominate(self, pod: PodRef, node: str) -> None:
        await self.patch_status(pod, {"nominatedNodeName": node or None}, "setting nominatedNodeName of")

    def record_event(
        self, regarding: PodRef, related: PodRef | None, type_: str, reason: str, action: str, note: str
    ) -> None:
        """A plugin's event (``EventRecorder().Eventf``), nothing else written."""
        self.events.record(regarding, type_, reason, action, note, related)

    # ------------------------------------------------------------ reports

    def report_scheduled(self, pod: PodRef, node: str) -> None:
        self.events.record(pod, "Normal", "Scheduled", "Binding", f"Successfully assigned {pod.key} to {node}")

    async def report_unschedulable(self, pod: PodRef, message: str, nominated: str | None = None) -> None:
        """``PodScheduled=False`` with the message (when it changed) and,
        with ``nominated``, ``nominatedNodeName`` ("" clears it) in the same
        status patch (``updatePod``: one patch for both), and a
        ``FailedScheduling`` event; reports of one pod are written in order."""
        before = self._reporting.get(pod.uid)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reporting[pod.uid] = done
        try:
            if before is not None:
                await asyncio.shield(before)
            await self._report(pod, message, nominated)
        finally:
            done.set_result(None)
            if self._reporting.get(pod.uid) is done:
                del self._reporting[pod.uid]

    async def _report(self, pod: PodRef, message: str, nominated: str | None) -> None:
        status: dict[str, Any] = {}
        if self._condition.get(pod.uid) != message:
            status["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastProbeTime": None,
                    "lastTransitionTime": _now(),
                }
            ]
        if nominated is not None:
            status["nominatedNodeName"] = nominated or None
        written = bool(status) and await self.patch_status(pod, status, "updating PodScheduled of")
        if written and "conditions" in status:
            self._condition[pod.uid] = message
            self._condition.move_to_end(pod.uid)
            if len(self._condition) > MAX_CONDITIONS:
                self._condition.popitem(last=False)
        self.events.record(pod, "Warning", "FailedScheduling", "Scheduling", message)

    async def patch_status(self, pod: PodRef, status: dict[str, Any], what: str) -> bool:
        """Strategic-merge ``status`` into the pod's status; a pod already
        gone is fine. False when the API refused it or went away."""
        try:
            code, text = await self._request(
                "PATCH", _pod_path(pod.namespace, pod.name, "/status"), {"status": status}, _STRATEGIC
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as e:  # the API server went away: best effort
            log.warning("%s %s: %s", what, pod.key, e)
            return False
        if 200 <= code <= 299 or code == 404:
            return True
        log.warning("%s %s: HTTP %d: %s", what, pod.key, code, text.decode(errors="replace")[:300])
        return False

    @property
    def idle(self) -> bool:
        return not self._reporting and self.events.idle

    async def close(self) -> None:
        await self.events.close()
