"""The pod writes off the scheduling loop (berth/adapters/kubernetes/writer.py
and writes.py): each Binding's outcome comes back to the binding cycle
(assume before bind, forget on failure stay the loop's), a writer that dies
fails what waited on it and is replaced, bad frames change nothing, and
events aggregate into series as client-go's events broadcaster does."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from berth.adapters.kubernetes import writer as writer_mod
from berth.adapters.kubernetes import writes as writes_mod
from berth.adapters.kubernetes.source import KubernetesSource
from berth.adapters.kubernetes.writer import Recipe, WriterProcess
from berth.adapters.kubernetes.writes import EventRecorder, PodRef, PodWrites
from berth.cluster.sources import BindConflict, BindError, BindRetriable, EventType
from berth.testing import make_pod
from tests.kubernetes.fakeapi import FakeApiServer
from tests.support import ManualClock

POD = PodRef("default", "p", "uid-p")


@contextlib.asynccontextmanager
async def plugged(fake: FakeApiServer) -> AsyncIterator[client.ApiClient]:
    api = client.ApiClient(client.Configuration(host="https://fake-apiserver"))
    await api.rest_client.pool_manager.close()
    fake.plug_into(api)
    try:
        yield api
    finally:
        await api.close()


Spawn = Callable[[], Awaitable[tuple[socket.socket, Callable[[], Awaitable[None]]]]]


def in_loop(fake: FakeApiServer, started: list[PodWrites]) -> Spawn:
    """A 'writer process' that is :func:`writer.serve` on this loop, over a
    real socketpair, writing to ``fake``."""

    async def spawn() -> tuple[socket.socket, Callable[[], Awaitable[None]]]:
        ours, theirs = socket.socketpair()
        cm = plugged(fake)
        api = await cm.__aenter__()
        writes = PodWrites(api, identity="t", scheduler_name="berth")
        started.append(writes)
        reader, w = await asyncio.open_connection(sock=theirs)
        task = asyncio.ensure_future(writer_mod.serve(reader, w, writes))

        async def wait() -> None:
            try:
                await task
            finally:
                await cm.__aexit__(None, None, None)

        return ours, wait

    return spawn


def dying(times: list[int]) -> Spawn:
    """A writer that reads its first bytes, then exits without answering."""

    async def spawn() -> tuple[socket.socket, Callable[[], Awaitable[None]]]:
        ours, theirs = socket.socketpair()
        times.append(1)

        async def die() -> None:
            reader, w = await asyncio.open_connection(sock=theirs)
            await reader.read(1)
            w.close()
            await w.wait_closed()

        task = asyncio.ensure_future(die())

        async def wait() -> None:
            await task

        return ours, wait

    return spawn


# ------------------------------------------------------------------ Bindings


@pytest.mark.parametrize(
    ("case", "pod_node", "injected", "outcome", "message"),
    [
        ("pending pod: bound", "", None, None, ""),
        # A bind that happened but whose answer was lost: found on the retry.
        ("already on the same node: success", "node-a", None, None, ""),
        ("bound elsewhere meanwhile: conflict", "node-b", None, BindConflict, "already assigned to node 'node-b'"),
        ("pod deleted: conflict", None, None, BindConflict, 'pods "p" not found'),
        # util.Retriable (utils.go): an internal error or unavailable may pass if asked again ...
        ("server error: retriable", "", 500, BindRetriable, "HTTP 500"),
        ("unavailable: retriable", "", 503, BindRetriable, "HTTP 503"),
        # ... anything else is not.
        ("forbidden: error", "", 403, BindError, "HTTP 403"),
    ],
)
async def test_a_binding_through_the_writer_answers_with_its_outcome(
    case: str, pod_node: str | None, injected: int | None, outcome: type[Exception] | None, message: str
) -> None:
    fake = FakeApiServer()
    if pod_node is not None:
        fake.add_pod("default", "p", "uid-p", pod_node)
    fake.binding_status = injected
    wp = WriterProcess(in_loop(fake, []))
    try:
        if outcome is None:
            await wp.bind(POD, "node-a")
            assert fake.pods[("default", "p")]["nodeName"] == "node-a"
        else:
            with pytest.raises(outcome, match=message) as raised:
                await wp.bind(POD, "node-a")
            assert type(raised.value) is outcome
            if pod_node is not None:
                assert fake.pods[("default", "p")]["nodeName"] == pod_node  # unchanged
    finally:
        await wp.close()


async def test_an_api_server_gone_away_fails_the_binding_and_the_next_one_binds() -> None:
    fake = FakeApiServer()
    fake.add_pod("default", "p", "uid-p")
    wp = WriterProcess(in_loop(fake, []))
    try:
        fake.up = False
        with pytest.raises(BindError, match="Connection refused"):
            await wp.bind(POD, "node-a")
        assert fake.pods[("default", "p")]["nodeName"] == ""
        fake.up = True
        await wp.bind(POD, "node-a")
        assert fake.pods[("default", "p")]["nodeName"] == "node-a"
    finally:
        await wp.close()


async def test_a_binding_whose_connection_is_refused_is_retriable() -> None:
    """net.IsConnectionRefused (util.Retriable): a real refused connection,
    to a local port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the bind below
    api = client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{port}"))
    try:
        with pytest.raises(BindRetriable, match="binding default/p to node-a"):
            await PodWrites(api, identity="t", scheduler_name="berth").bind(POD, "node-a")
    finally:
        await api.close()


async def test_bindings_waiting_on_a_writer_that_died_fail_and_the_next_write_starts_a_new_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeApiServer()
    fake.add_pod("default", "p", "uid-p")
    starts: list[int] = []
    good = in_loop(fake, [])

    async def spawn() -> tuple[socket.socket, Callable[[], Awaitable[None]]]:
        return await (dying(starts) if not starts else good)()

    wp = WriterProcess(spawn)
    try:
        with caplog.at_level(logging.WARNING), pytest.raises(BindError, match="exited before answering"):
            await wp.bind(POD, "node-a")
        assert "writer process exited" in caplog.text
        assert fake.writes == []  # it never reached the API server: the loop forgets and requeues
        await wp.bind(POD, "node-a")
        assert wp.starts == 2
        assert fake.pods[("default", "p")]["nodeName"] == "node-a"
    finally:
        await wp.close()


async def test_a_writer_that_keeps_dying_at_start_is_given_up_for_writes_from_the_loops_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeApiServer()
    fake.add_pod("default", "p", "uid-p")
    starts: list[int] = []
    wp = WriterProcess(dying(starts), clock=lambda: 0.0)
    async with plugged(fake) as api:
        source = KubernetesSource(api, identity="t", writer=wp)
        try:
            pod = make_pod("p", uid="uid-p")
            with caplog.at_level(logging.ERROR):
                for _ in range(writer_mod.MAX_QUICK_DEATHS):
                    with pytest.raises(BindError):
                        await source.bind(pod, "node-a")
            assert wp.broken
            assert "keeps exiting at start" in caplog.text
            await source.bind(pod, "node-a")  # in process now
            assert len(starts) == writer_mod.MAX_QUICK_DEATHS
            assert fake.pods[("default", "p")]["nodeName"] == "node-a"
        finally:
            await source.close()


def _frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


@pytest.mark.parametrize(
    ("case", "garbage"),
    [
        ("not msgpack", _frame(b"\xc1\xc1\xc1")),
        ("an unknown message", _frame(b"\x91\x92\x63\x01")),  # [[99, 1]]
        ("a message with a wrong field", _frame(b"\x91\x94\x01\xa1x\xc0\xc0")),  # [[1, "x", nil, nil]]
    ],
)
async def test_an_undecodable_frame_is_logged_and_changes_nothing(
    case: str, garbage: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeApiServer()
    fake.add_pod("default", "p", "uid-p")
    async with plugged(fake) as api:
        writes = PodWrites(api, identity="t", scheduler_name="berth")
        ours, theirs = socket.socketpair()
        reader, w = await asyncio.open_connection(sock=theirs)
        served = asyncio.ensure_future(writer_mod.serve(reader, w, writes))
        r, ow = await asyncio.open_connection(sock=ours)
        with caplog.at_level(logging.ERROR):
            ow.write(garbage)
            # Then a good Bind: the stream is still in step.
            ow.write(_frame(writer_mod._encoder.encode([writer_mod.Bind(7, POD, "node-a")])))
            ow.write_eof()
            answer = await r.read()
            await served
        ow.close()
        assert "undecodable message from the scheduler ignored" in caplog.text
        assert fake.writes == [("bind", "default/p", "node-a")]
        assert writer_mod._decoder.decode(answer[4:]) == [writer_mod.Done(7, writer_mod.OK)]


async def test_closing_waits_for_the_writes_in_flight() -> None:
    fake = FakeApiServer()
    for i in range(20):
        fake.add_pod("default", f"p{i}", f"uid-{i}")
    wp = WriterProcess(in_loop(fake, started := []))
    binds = [asyncio.ensure_future(wp.bind(PodRef("default", f"p{i}", f"uid-{i}"), "node-a")) for i in range(20)]
    await asyncio.sleep(0)
    await wp.report_scheduled(POD, "node-a")
    await asyncio.gather(*binds)
    await wp.close()
    assert all(p["nodeName"] == "node-a" for p in fake.pods.values())
    assert [b["reason"] for _, _, b in fake.event_writes] == ["Scheduled"]
    assert started[0].idle
    with pytest.raises(BindError, match="shutting down"):
        await wp.bind(POD, "node-a")


async def test_the_writer_subprocess_binds_reports_and_exits_when_its_socket_closes() -> None:
    fake = FakeApiServer()
    fake.add_pod("default", "p", "uid-p")
    fake.add_pod("default", "q", "uid-q", "node-b")
    async with fake.serving_http() as url:
        spawn = writer_mod.subprocess_spawner(Recipe(host=url), identity="t", scheduler_name="berth")
        wp = WriterProcess(spawn)
        try:
            await wp.bind(POD, "node-a")
            with pytest.raises(BindConflict, match="node-b"):
                await wp.bind(PodRef("default", "q", "uid-q"), "node-a")
            await wp.report_scheduled(POD, "node-a")
            await wp.report_unschedulable(PodRef("default", "q", "uid-q"), "0/1 nodes are available")
        finally:
            await asyncio.wait_for(wp.close(), 60)
    assert fake.pods[("default", "p")]["nodeName"] == "node-a"
    # close() returned after the writer exited, having written what it was sent.
    assert sorted(b["reason"] for _, _, b in fake.event_writes) == ["FailedScheduling", "Scheduled"]
    [status] = [w for w in fake.writes if w[0] == "status"]
    assert status[2]["conditions"][0]["message"] == "0/1 nodes are available"


@pytest.mark.parametrize(
    ("case", "present", "injected", "gone", "logged"),
    [
        ("a victim is marked, deleted and reported", True, None, True, ""),
        ("a victim already gone is fine", False, None, True, ""),
        ("a delete the server refuses is logged", True, 500, False, "evicting default/p failed: deleting victim"),
    ],
)
async def test_a_victim_is_evicted_through_the_writer(
    case: str, present: bool, injected: int | None, gone: bool, logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeApiServer()
    if present:
        fake.add_pod("default", "p", "uid-p", "node-a")
    fake.delete_status = injected
    wp = WriterProcess(in_loop(fake, []))
    with caplog.at_level(logging.ERROR):
        await wp.evict(POD, "Preempted by pod u on node node-a", "berth")
        await wp.nominate(PodRef("default", "high", "uid-high"), "node-a")
        await wp.close()
    assert [w[0] for w in fake.writes if w[1] == "default/p"] == ["status", "DELETE"]
    [(_, _, marked)] = [w for w in fake.writes if w[0] == "status" and w[1] == "default/p"]
    assert marked["conditions"][0]["reason"] == "PreemptionByScheduler"
    assert marked["conditions"][0]["message"] == "berth: preempting to accommodate a higher priority pod"
    assert ("DELETE", "default/p", {"uid": "uid-p"}) in fake.writes
    assert (("default", "p") not in fake.pods) == gone
    assert [b["reason"] for _, _, b in fake.event_writes] == ([] if logged else ["Preempted"])
    assert ("status", "default/high", {"nominatedNodeName": "node-a"}) in fake.writes
    assert (logged in caplog.text) if logged else "failed" not in caplog.text


async def test_a_victim_preempted_in_memory_gets_the_event_alone() -> None:
    """executor.go v1.37.2: a victim stopped at Permit or in PreBind is not
    marked nor deleted; its Preempted event says so."""
    fake = FakeApiServer()
    fake.add_pod("default", "p", "uid-p", "")
    wp = WriterProcess(in_loop(fake, []))
    message = "Preempted by pod u on node node-a (in kube-scheduler memory)."
    await wp.report_preempted(POD, message)
    await wp.close()
    assert fake.writes == []
    assert ("default", "p") in fake.pods
    assert [(b["reason"], b["note"]) for _, _, b in fake.event_writes] == [("Preempted", message)]


PENDING_NOTE = "waiting for binding conditions for device on node node-a"


@pytest.mark.parametrize("through", ["the writer process", "the loop's process"])
async def test_a_plugins_event_is_written_as_an_events_k8s_io_event(through: str) -> None:
    """A plugin's ``Eventf`` (DynamicResources' BindingConditionsPending):
    one events.k8s.io/v1 Event about the pod, Berth's scheduler name as its
    reportingController, and nothing else written; repeats aggregate into a
    series as the other events do."""
    fake = FakeApiServer()
    fake.add_pod("default", "p", "uid-p", "")
    wp = WriterProcess(in_loop(fake, [])) if through == "the writer process" else None
    async with plugged(fake) as api:
        source = KubernetesSource(api, identity="t", scheduler_name="berth", writer=wp)
        try:
            pod = make_pod("p", uid="uid-p")
            for _ in range(2):
                await source.record_event(
                    pod, None, EventType.NORMAL, "BindingConditionsPending", "Scheduling", PENDING_NOTE
                )
        finally:
            await source.close()
    assert fake.writes == []
    [(method, name, body), (again, patched, series)] = fake.event_writes
    assert (method, again, patched) == ("POST", "PATCH", name)
    assert series["series"]["count"] == 2
    assert {k: body[k] for k in ("type", "reason", "action", "note", "reportingController")} == {
        "type": "Normal",
        "reason": "BindingConditionsPending",
        "action": "Scheduling",
        "note": PENDING_NOTE,
        "reportingController": "berth",
    }
    assert body["regarding"] == {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "default", "uid": "uid-p"}
    assert "related" not in body


async def test_an_event_with_a_related_pod_names_it_and_is_a_series_of_its_own() -> None:
    """client-go's ``getKey`` holds the related object: the same event about
    a victim for two preemptors is two events, each naming its preemptor."""
    req = Requests()
    rec = EventRecorder(req, controller="berth", instance="t")
    try:
        for preemptor in (PodRef("default", "high", "uid-high"), PodRef("default", "other", "uid-other")):
            rec.record(POD, "Normal", "Preempted", "Preempting", "Preempted", related=preemptor)
        await rec.flush()
    finally:
        await rec.close()
    assert [(m, b["related"]["uid"]) for m, _, b in req.calls] == [("POST", "uid-high"), ("POST", "uid-other")]
    assert req.calls[0][2]["related"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "high",
        "namespace": "default",
        "uid": "uid-high",
    }


# ------------------------------------------------------------------ PodScheduled condition and events


QUOTA = "0/2 nodes are available: queue c: cpu 2/1 over max."
NODES = "0/2 nodes are available: 2 Insufficient cpu."


@pytest.mark.parametrize(
    ("reasons", "conditions"),
    [
        # The same reason again: nothing new to write.
        ([QUOTA, QUOTA], [QUOTA]),
        # A reason that comes back: the condition follows it.
        ([QUOTA, NODES, QUOTA], [QUOTA, NODES, QUOTA]),
    ],
)
async def test_the_condition_shows_the_latest_reason(reasons: list[str], conditions: list[str]) -> None:
    fake = FakeApiServer()
    fake.add_pod("default", "p", "uid-p")
    async with plugged(fake) as api:
        writes = PodWrites(api, identity="t", scheduler_name="berth")
        # Reports of one pod started together are written in order.
        await asyncio.gather(*(writes.report_unschedulable(POD, m) for m in reasons))
        await writes.events.flush()
        await writes.close()
    assert [w[2]["conditions"][0]["message"] for w in fake.writes if w[0] == "status"] == conditions
    # One FailedScheduling event, then a series on it (client-go: the note is not part of the key).
    assert [(m, b.get("series", {}).get("count")) for m, _, b in fake.event_writes] == [("POST", None), ("PATCH", 2)]


async def test_a_condition_the_api_refused_is_written_on_the_next_report() -> None:
    fake = FakeApiServer()
    fake.add_pod("default", "p", "uid-p")
    async with plugged(fake) as api:
        writes = PodWrites(api, identity="t", scheduler_name="berth")
        fake.status_status = 500
        await writes.report_unschedulable(POD, QUOTA)
        fake.status_status = None
        await writes.report_unschedulable(POD, QUOTA)
        await writes.events.flush()
        await writes.close()
    assert [w[0] for w in fake.writes] == ["status", "status"]


class Requests:
    """EventRecorder's request function: answers from a script, records calls."""

    def __init__(self, answers: list[int | Exception] | None = None) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.answers = list(answers or [])

    async def __call__(self, method: str, path: str, body: Any, content_type: str) -> tuple[int, bytes]:
        self.calls.append((method, path.rsplit("/", 1)[-1], body))
        answer = self.answers.pop(0) if self.answers else (201 if method == "POST" else 200)
        if isinstance(answer, Exception):
            raise answer
        return answer, b"{}"


@pytest.mark.parametrize(
    ("case", "steps", "calls"),
    [
        ("one event", [0], [("POST", None)]),
        ("a repeat starts a series", [0, 1], [("POST", None), ("PATCH", 2)]),
        ("later repeats only count", [0, 1, 1, 1], [("POST", None), ("PATCH", 2)]),
        (
            "a running series is refreshed every 30 minutes",
            [0, 1, 1, 240, 240, 240, 240, 240, 240, 240, 240],  # 1802 s: seen every 4 minutes
            [("POST", None), ("PATCH", 2), ("PATCH", 10)],
        ),
        (
            "a series unseen for 6 minutes is finished: the next one starts anew",
            [0, 1, 361],
            [("POST", None), ("PATCH", 2), ("POST", None)],
        ),
    ],
)
async def test_isomorphic_events_become_a_series_as_in_client_go(
    case: str, steps: list[float], calls: list[tuple[str, int | None]]
) -> None:
    req, clock = Requests(), ManualClock(1000.0)
    rec = EventRecorder(req, controller="berth", instance="t", clock=clock)
    try:
        for dt in steps:
            clock.now += dt
            rec.record(POD, "Warning", "FailedScheduling", "Scheduling", f"message at {clock.now}")
            await rec.flush()
    finally:
        await rec.close()
    assert [(m, (b.get("series") or {}).get("count")) for m, _, b in req.calls] == calls
    posted = [b["metadata"]["name"] for m, _, b in req.calls if m == "POST"]
    assert all(name in posted for m, name, _ in req.calls if m == "PATCH")  # a series patches its first event


@pytest.mark.parametrize(
    ("case", "answers", "tries", "sleeps"),
    [
        ("written", [201], 1, 0),
        ("API server unreachable, then back: retried", [aiohttp.ClientConnectionError("refused")] * 2 + [201], 3, 2),
        ("rejected by the server: dropped", [422], 1, 0),
        ("unreachable 12 times: given up", [aiohttp.ClientConnectionError("refused")] * 12, 12, 11),
    ],
)
async def test_an_event_is_retried_only_while_the_server_cannot_be_reached(
    case: str, answers: list[int | Exception], tries: int, sleeps: int
) -> None:
    req = Requests(answers)
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    rec = EventRecorder(req, controller="berth", instance="t", sleep=sleep)
    try:
        rec.record(POD, "Normal", "Scheduled", "Binding", "Successfully assigned default/p to n")
        await rec.flush()
    finally:
        await rec.close()
    assert len(req.calls) == tries
    assert len(slept) == sleeps
    assert all(writes_mod.RETRY_SLEEP_SECONDS <= s <= 1.25 * writes_mod.RETRY_SLEEP_SECONDS for s in slept)


async def test_events_beyond_the_queue_are_dropped_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    req = Requests()
    rec = EventRecorder(req, controller="berth", instance="t")
    try:
        with caplog.at_level(logging.WARNING):
            for i in range(writes_mod.MAX_QUEUED_EVENTS + 5):
                rec.record(PodRef("default", f"p{i}", f"u{i}"), "Normal", "Scheduled", "Binding", "ok")
        assert rec.dropped == 5
        assert "events dropped" in caplog.text
        await rec.flush()
    finally:
        await rec.close()
    assert len(req.calls) == writes_mod.MAX_QUEUED_EVENTS


async def test_a_binding_waits_for_the_unschedulable_report_of_an_earlier_attempt() -> None:
    """A preemptor's PodScheduled=False (attempt 1) still in flight when its
    Binding (attempt 2) comes: the Binding goes second, so the bound pod's
    condition is not overwritten with Unschedulable."""
    fake = FakeApiServer()
    fake.add_pod("default", "p", "uid-p")
    fake.status_gate = asyncio.Event()
    async with plugged(fake) as api:
        writes = PodWrites(api, identity="t", scheduler_name="berth")
        report = asyncio.ensure_future(writes.report_unschedulable(POD, NODES))
        bind = asyncio.ensure_future(writes.bind(POD, "node-a"))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not bind.done() and [w[0] for w in fake.writes] == []
        fake.status_gate.set()
        await asyncio.gather(report, bind)
        await writes.close()
    assert [w[0] for w in fake.writes] == ["status", "bind"]
    assert fake.pods[("default", "p")]["nodeName"] == "node-a"


@pytest.mark.parametrize(
    ("reports", "patches"),
    [
        # A preemptor: the condition and its nomination in one patch (updatePod).
        ([(NODES, "node-a")], [{"conditions": NODES, "nominatedNodeName": "node-a"}]),
        # The same reason again with another nomination: only the nomination.
        (
            [(NODES, "node-a"), (NODES, "node-b")],
            [{"conditions": NODES, "nominatedNodeName": "node-a"}, {"nominatedNodeName": "node-b"}],
        ),
        # No nomination: the condition alone; "" clears the nomination (null in the patch).
        ([(QUOTA, None), (QUOTA, "")], [{"conditions": QUOTA}, {"nominatedNodeName": None}]),
        # Nothing new: no patch.
        ([(QUOTA, None), (QUOTA, None)], [{"conditions": QUOTA}]),
    ],
)
async def test_a_nomination_is_written_with_the_podscheduled_condition_in_one_patch(
    reports: list[tuple[str, str | None]], patches: list[dict[str, Any]]
) -> None:
    fake = FakeApiServer()
    fake.add_pod("default", "p", "uid-p")
    async with plugged(fake) as api:
        writes = PodWrites(api, identity="t", scheduler_name="berth")
        for message, nominated in reports:
            await writes.report_unschedulable(POD, message, nominated)
        await writes.events.flush()
        await writes.close()
    got = [
        {k: (v[0]["message"] if k == "conditions" else v) for k, v in w[2].items()}
        for w in fake.writes
        if w[0] == "status"
    ]
    assert got == patches


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("Preempted by pod u on node n", "berth: preempting to accommodate a higher priority pod"),
        (
            "Preempted by pod u on node n: reclaimed for queue research",
            "berth: preempting to reclaim resources for queue research",
        ),
    ],
)
def test_a_victims_disruption_message_is_kube_schedulers_or_names_the_reclaiming_queue(
    reason: str, message: str
) -> None:
    assert writes_mod.disruption_message(reason, "berth") == message
