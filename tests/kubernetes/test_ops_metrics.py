"""Operations metrics: events the recorder drops reach
``berth_events_dropped_total`` from the writer subprocess and from the
scheduler's own process; refused configuration re-reads count in
``berth_config_reload_failures_total``."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client

from berth import app, config, reload
from berth.adapters.kubernetes import writer as writer_mod
from berth.adapters.kubernetes import writes as writes_mod
from berth.adapters.kubernetes.writes import PodRef, PodWrites
from tests.kubernetes.fakeapi import FakeApiServer
from tests.kubernetes.test_runner import kube_runner
from tests.kubernetes.test_writer import in_loop


@pytest.fixture
async def fake() -> FakeApiServer:
    return FakeApiServer()


def pods(n: int) -> list[PodRef]:
    return [PodRef("default", f"p{i}", f"u{i}") for i in range(n)]


async def test_events_the_writer_process_drops_are_reported_to_the_scheduler(
    fake: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writes_mod, "MAX_QUEUED_EVENTS", 2)
    started: list[PodWrites] = []
    proc = writer_mod.WriterProcess(in_loop(fake, started))
    reported: list[int] = []
    proc.on_events_dropped = reported.append
    for p in pods(10):  # one frame: the writer records all ten before any is written
        await proc.report_scheduled(p, "n1")
    await proc.close()
    assert started[0].events.dropped == 8
    assert sum(reported) == 8
    assert len(reported) < 8, "a burst of drops is reported in one message"


async def test_the_runner_counts_dropped_events_in_berth_events_dropped_total(
    api: client.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writes_mod, "MAX_QUEUED_EVENTS", 1)
    runner = kube_runner(api, {"leaderElect": False})
    events = runner.source.writes.events
    try:
        for p in pods(4):
            events.record(p, "Normal", "Scheduled", "Binding", "ok")
    finally:
        await events.close()
    assert runner.core.metrics.registry.get_sample_value("berth_events_dropped_total") == 3


@pytest.mark.parametrize(
    ("case", "document", "failures", "successful"),
    [
        ("valid and applied", {"queues": [{"name": "research"}, {"name": "batch"}]}, 0, 1),
        ("not YAML", "queues: [", 1, 0),
        ("invalid field", {"queues": [{"name": "bad name!"}]}, 1, 0),
    ],
)
def test_a_refused_reload_is_counted(
    tmp_path: Path, case: str, document: object, failures: float, successful: float
) -> None:
    path = tmp_path / "berth.yaml"
    path.write_text(yaml.safe_dump({"queues": [{"name": "research"}]}))
    berth = app.build(config.load(path), run_loop=False)
    reloader = reload.ConfigReloader(path, berth.core)
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    reloader.check(force=True)
    registry = berth.core.metrics.registry
    assert registry.get_sample_value("berth_config_reload_failures_total") == failures
    assert registry.get_sample_value("berth_config_last_reload_successful") == successful
    stamp = registry.get_sample_value("berth_config_last_reload_success_timestamp_seconds")
    assert (stamp or 0) > 0 if successful else stamp == 0
