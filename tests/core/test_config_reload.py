"""Hot reload of the configuration file (berth/reload.py): a running Berth
re-reads ``berth serve --config FILE`` on change and on SIGHUP and applies its
``queues``; an invalid file is refused with one line naming the field and the
running configuration stays; other fields are reported, not applied."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth import app, config, reload
from berth.quota.tree import LABEL_QUEUE
from berth.testing import make_node, make_pod
from tests.loop.conftest import running

RESEARCH = [{"name": "research", "guaranteed": {"cpu": "8"}, "max": {"cpu": "16"}}]
TWO_QUEUES = [*RESEARCH, {"name": "batch", "weight": 2}]


def write(path: Path, doc: Any) -> None:
    """Replace the file as editors and `kubectl cp` do: a new inode, atomically."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    os.replace(tmp, path)


def queue_names(berth: app.Berth) -> list[str]:
    return [s.name for s in berth.core.quota.status()]


@pytest.fixture
def started(tmp_path: Path) -> tuple[Path, app.Berth, reload.ConfigReloader]:
    """A Berth built from a file with one queue, and the reloader of that file."""
    path = tmp_path / "berth.yaml"
    write(path, {"queues": RESEARCH})
    berth = app.build(config.load(path), run_loop=False)
    return path, berth, reload.ConfigReloader(path, berth.core)


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]


def test_an_unchanged_file_is_not_read_again(started: tuple[Path, app.Berth, reload.ConfigReloader]) -> None:
    _, berth, reloader = started
    assert reloader.check() is False
    assert queue_names(berth) == ["research"]


@pytest.mark.parametrize(
    ("queues", "want"),
    [
        (TWO_QUEUES, ["research", "batch"]),
        ([{"name": "research", "guaranteed": {"cpu": "2"}}, {"name": "vision", "parent": "research"}], None),
        ([], []),  # no queues: Berth schedules as without them
    ],
    ids=["a queue added", "a child added and the guarantee shrunk", "every queue removed"],
)
def test_a_valid_change_is_applied(
    started: tuple[Path, app.Berth, reload.ConfigReloader],
    caplog: pytest.LogCaptureFixture,
    queues: list[dict[str, Any]],
    want: list[str] | None,
) -> None:
    path, berth, reloader = started
    write(path, {"queues": queues})
    with caplog.at_level(logging.INFO, logger="berth.reload"):
        assert reloader.check() is True
    assert queue_names(berth) == (want if want is not None else [q["name"] for q in queues])
    assert berth.core.cfg.queues == config.parse({"queues": queues}).queues
    assert f"queues reloaded from {path}: {len(queues)} queues" in caplog.messages
    assert reloader.check() is False  # applied once


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("queues: [name: research\n", "not valid YAML"),
        (yaml.safe_dump({"queues": [{"name": "research", "weight": 0}]}), "queues[0].weight: must be greater than 0"),
        (yaml.safe_dump({"queues": [{"name": "a", "parent": "nope"}]}), "queues[0].parent: no queue named 'nope'"),
        (yaml.safe_dump({"queues": [{"name": "bad_name"}]}), "queues[0].name: 'bad_name' is not a valid queue name"),
        (
            yaml.safe_dump(
                {
                    "queues": [
                        {"name": "p", "guaranteed": {"cpu": "1"}},
                        {"name": "c", "parent": "p", "guaranteed": {"cpu": "2"}},
                    ]
                }
            ),
            "queues[1].guaranteed[cpu]: the children of 'p' are guaranteed 2 in all",
        ),
        (yaml.safe_dump({"queues": [{"name": "research", "colour": "red"}]}), "colour"),
        (yaml.safe_dump({"queues": RESEARCH, "podMaxBackofSeconds": 5}), "podMaxBackofSeconds"),
    ],
    ids=[
        "invalid YAML",
        "weight 0",
        "unknown parent",
        "bad name",
        "children over the parent",
        "unknown queue field",
        "unknown top-level field",
    ],
)
def test_an_invalid_file_is_refused_naming_the_field_and_the_queues_stay(
    started: tuple[Path, app.Berth, reload.ConfigReloader],
    caplog: pytest.LogCaptureFixture,
    text: str,
    names: str,
) -> None:
    path, berth, reloader = started
    before = berth.core.cfg.queues
    write(path, text)
    with caplog.at_level(logging.INFO, logger="berth.reload"):
        assert reloader.check() is False
        assert reloader.check() is False  # refused once, not at every poll
    [line] = refusals(caplog)
    assert "\n" not in line
    assert line.startswith(f"configuration {path} refused: ")
    assert line.endswith("; keeping the running configuration")
    assert names in line
    assert f"refused: {path}:" not in line  # the file is named once
    assert berth.core.cfg.queues is before
    assert queue_names(berth) == ["research"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "queues: [name: research\n",
            "line 2, column 1: expected ',' or ']', but got '<stream end>' "
            "(while parsing a flow sequence at line 1, column 9)",
        ),
        ("queues: a: b\n", "line 1, column 10: mapping values are not allowed here"),
        (
            "queues:\n\t- name: a\n",
            "line 2, column 1: found character '\\t' that cannot start any token (while scanning for the next token)",
        ),
        (
            'queues: [{name: "\\q"}]\n',
            "line 1, column 19: found unknown escape character 'q' "
            "(while scanning a double-quoted scalar at line 1, column 17)",
        ),
        ("queues: *q\n", "line 1, column 9: found undefined alias 'q'"),
    ],
    ids=["an unclosed sequence", "a mapping in a scalar", "a tab", "a bad escape", "an undefined alias"],
)
def test_invalid_yaml_is_refused_in_one_line_with_its_line_and_column(
    started: tuple[Path, app.Berth, reload.ConfigReloader], caplog: pytest.LogCaptureFixture, text: str, problem: str
) -> None:
    path, _, reloader = started
    write(path, text)
    with caplog.at_level(logging.INFO, logger="berth.reload"):
        assert reloader.check() is False
    assert caplog.messages == [
        f"configuration {path} refused: not valid YAML: {problem}; keeping the running configuration"
    ]


def test_a_missing_file_is_refused_and_its_return_is_applied(
    started: tuple[Path, app.Berth, reload.ConfigReloader], caplog: pytest.LogCaptureFixture
) -> None:
    path, berth, reloader = started
    path.unlink()
    with caplog.at_level(logging.INFO, logger="berth.reload"):
        assert reloader.check() is False
        write(path, {"queues": TWO_QUEUES})
        assert reloader.check() is True
    assert refusals(caplog) == [
        f"configuration {path} refused: No such file or directory; keeping the running configuration"
    ]
    assert queue_names(berth) == ["research", "batch"]


def test_other_fields_are_reported_and_not_applied(
    started: tuple[Path, app.Berth, reload.ConfigReloader], caplog: pytest.LogCaptureFixture
) -> None:
    path, berth, reloader = started
    write(
        path,
        {
            "queues": TWO_QUEUES,
            "percentageOfNodesToScore": 50,
            "http": {"port": 9999},
            "profiles": [{"schedulerName": "other"}],
            "extender": {"profile": "other"},
        },
    )
    with caplog.at_level(logging.INFO, logger="berth.reload"):
        assert reloader.check() is True  # the queues are
    assert queue_names(berth) == ["research", "batch"]
    cfg = berth.core.cfg
    assert (cfg.percentage_of_nodes_to_score, cfg.http.port, cfg.profiles[0].scheduler_name) == (0, 8888, "berth")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"configuration {path}: profiles, percentageOfNodesToScore, http, extender changed: "
        "restart Berth to apply them (only queues are reloaded)"
    ]


def test_a_change_of_other_fields_alone_leaves_the_queues_untouched(
    started: tuple[Path, app.Berth, reload.ConfigReloader], caplog: pytest.LogCaptureFixture
) -> None:
    path, berth, reloader = started
    before = berth.core.cfg.queues
    write(path, {"queues": RESEARCH, "podMaxBackoffSeconds": 20})
    with caplog.at_level(logging.INFO, logger="berth.reload"):
        assert reloader.check() is False
    assert berth.core.cfg.queues is before
    assert berth.core.cfg.pod_max_backoff_seconds == 10
    assert f"configuration {path} re-read: queues unchanged" in caplog.messages
    assert any("podMaxBackoffSeconds changed: restart Berth" in m for m in caplog.messages)


def test_a_field_needing_a_restart_is_reported_once_per_new_value(
    started: tuple[Path, app.Berth, reload.ConfigReloader], caplog: pytest.LogCaptureFixture
) -> None:
    """Berth runs with podMaxBackoffSeconds 10 (the default); each step writes
    the file (or, for None, re-reads it unchanged as SIGHUP does)."""
    path, _, reloader = started
    steps: list[tuple[int | None, list[str]]] = [
        (20, ["podMaxBackoffSeconds"]),
        (None, []),  # SIGHUP: the same file
        (None, []),
        (20, []),  # rewritten with the same value
        (30, ["podMaxBackoffSeconds"]),
        (10, []),  # back to the running value
        (20, ["podMaxBackoffSeconds"]),
    ]
    for value, want in steps:
        caplog.clear()
        if value is not None:
            write(path, {"queues": RESEARCH, "podMaxBackoffSeconds": value})
        with caplog.at_level(logging.INFO, logger="berth.reload"):
            reloader.check(force=True)
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert warnings == [
            f"configuration {path}: {name} changed: restart Berth to apply them (only queues are reloaded)"
            for name in want
        ], value


def test_command_line_overrides_are_not_taken_for_changes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`berth serve --http-port` changes the running configuration, not the file."""
    path = tmp_path / "berth.yaml"
    write(path, {"queues": RESEARCH})
    cfg = config.load(path)
    cfg.http.port = 18888
    berth = app.build(cfg, run_loop=False)
    reloader = reload.ConfigReloader(path, berth.core)
    write(path, {"queues": TWO_QUEUES})
    with caplog.at_level(logging.INFO, logger="berth.reload"):
        assert reloader.check() is True
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_file_changed_before_the_reloader_started_is_applied_at_the_first_check(tmp_path: Path) -> None:
    path = tmp_path / "berth.yaml"
    write(path, {"queues": RESEARCH})
    berth = app.build(config.load(path), run_loop=False)
    write(path, {"queues": TWO_QUEUES})
    reloader = reload.ConfigReloader(path, berth.core)
    assert reloader.check() is True
    assert queue_names(berth) == ["research", "batch"]


# ---------------------------------------------------------------- the kubelet's ConfigMap volume


class ConfigMapVolume:
    """A ConfigMap volume as the kubelet writes it (pkg/volume/util/atomic_writer.go):
    ``config.yaml -> ..data/config.yaml``, ``..data -> ..<timestamp>``; an
    update writes a new timestamped directory, points ``..data_tmp`` at it,
    renames that over ``..data`` and removes the old directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.generation = 0
        root.mkdir()
        (root / "config.yaml").symlink_to("..data/config.yaml")

    @property
    def path(self) -> Path:
        return self.root / "config.yaml"

    def publish(self, doc: Any) -> None:
        self.generation += 1
        old = (self.root / "..data").resolve() if (self.root / "..data").exists() else None
        new = self.root / f"..2026_01_01_00_00_{self.generation:02d}.000000001"
        new.mkdir()
        (new / "config.yaml").write_text(yaml.safe_dump(doc))
        (self.root / "..data_tmp").symlink_to(new.name)
        os.rename(self.root / "..data_tmp", self.root / "..data")
        if old is not None:
            (old / "config.yaml").unlink()
            old.rmdir()


def test_a_configmap_update_swapping_the_data_symlink_is_seen(tmp_path: Path) -> None:
    volume = ConfigMapVolume(tmp_path / "config")
    volume.publish({"queues": RESEARCH})
    berth = app.build(config.load(volume.path), run_loop=False)
    reloader = reload.ConfigReloader(volume.path, berth.core)
    assert reloader.check() is False
    volume.publish({"queues": TWO_QUEUES})
    assert reloader.check() is True
    assert queue_names(berth) == ["research", "batch"]
    volume.publish({"queues": [{"name": "batch"}]})
    assert reloader.check() is True
    assert queue_names(berth) == ["batch"]


# ---------------------------------------------------------------- polling, in virtual time


@pytest.mark.looptime
async def test_the_poll_sees_a_change_within_one_interval(
    started: tuple[Path, app.Berth, reload.ConfigReloader],
) -> None:
    path, berth, reloader = started
    task = asyncio.create_task(reloader.run(), name="config-reload")
    try:
        await asyncio.sleep(reload.POLL_INTERVAL_SECONDS * 1.5)  # virtual
        assert queue_names(berth) == ["research"]
        write(path, {"queues": TWO_QUEUES})
        await asyncio.sleep(reload.POLL_INTERVAL_SECONDS)
        assert queue_names(berth) == ["research", "batch"]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.mark.looptime
async def test_a_request_re_reads_at_once_even_when_the_file_looks_unchanged(
    started: tuple[Path, app.Berth, reload.ConfigReloader], caplog: pytest.LogCaptureFixture
) -> None:
    path, _, reloader = started
    task = asyncio.create_task(reloader.run(interval=3600), name="config-reload")
    try:
        with caplog.at_level(logging.INFO, logger="berth.reload"):
            reloader.request()
            await asyncio.sleep(0.001)  # virtual: every task has run
        assert caplog.messages == [f"configuration {path} re-read: queues unchanged"]
        assert asyncio.get_running_loop().time() < 1
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.mark.looptime
async def test_shrinking_a_queue_below_its_usage_evicts_nothing_and_stops_new_placements(tmp_path: Path) -> None:
    path = tmp_path / "berth.yaml"
    write(path, {"queues": [{"name": "c", "max": {"cpu": "8"}}]})
    async with running(config.load(path)) as berth:
        berth.nodes(*(make_node(f"n{i}", cpu="4", memory="16Gi", pods=110) for i in range(4)))

        def pod(name: str) -> Any:
            return make_pod(name, scheduler_name="berth", labels={LABEL_QUEUE: "c"}, requests={"cpu": "1"})

        berth.pods(*(pod(f"c{i}") for i in range(8)))
        await berth.settle()
        assert len(berth.bound()) == 8
        reloader = reload.ConfigReloader(path, berth.core)
        write(path, {"queues": [{"name": "c", "max": {"cpu": "4"}}]})
        assert reloader.check() is True
        await berth.settle()
        assert len(berth.bound()) == 8 and berth.cluster.evictions == []
        berth.pods(pod("c-new"))
        await berth.settle()
        assert berth.node_of("default/c-new") == ""
        assert "queue c" in berth.decision("default/c-new").message


# ---------------------------------------------------------------- berth serve and SIGHUP


class _Await(logging.Handler):
    """Sets an event when a record's message contains ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.seen.set()


@contextlib.contextmanager
def _awaiting(*texts: str) -> Iterator[list[_Await]]:
    handlers = [_Await(t) for t in texts]
    root = logging.getLogger("berth")
    level = root.level
    root.setLevel(logging.INFO)
    for h in handlers:
        root.addHandler(h)
    try:
        yield handlers
    finally:
        for h in handlers:
            root.removeHandler(h)
        root.setLevel(level)


@contextlib.asynccontextmanager
async def _serving(cfg: config.BerthConfiguration, **options: Any) -> AsyncIterator[Callable[[], None]]:
    """app.serve() on loopback port 0, until the block ends; yields a check
    that it is still running."""
    cfg.http.port = cfg.grpc.port = cfg.ui.port = 0
    stop = asyncio.Event()
    with _awaiting("Berth serving") as [serving]:
        task = asyncio.create_task(app.serve(cfg, stop=stop, **options), name="serve")
        try:
            await asyncio.wait_for(serving.seen.wait(), 30)

            # Never SIGHUP a test process whose handler is not Berth's: it would end the run.
            assert signal.getsignal(signal.SIGHUP) not in (signal.SIG_DFL, signal.SIG_IGN)

            def alive() -> None:
                assert not task.done(), task

            yield alive
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
            gc.unfreeze()  # serve() froze the objects of this test process


async def test_sighup_makes_berth_serve_reload_its_queues(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reload, "POLL_INTERVAL_SECONDS", 3600.0)  # only SIGHUP can do it
    path = tmp_path / "berth.yaml"
    write(path, {"queues": RESEARCH})
    async with _serving(config.load(path), config_file=path) as alive:
        with _awaiting(f"queues reloaded from {path}: 2 queues") as [reloaded]:
            write(path, {"queues": TWO_QUEUES})
            os.kill(os.getpid(), signal.SIGHUP)
            await asyncio.wait_for(reloaded.seen.wait(), 30)
        alive()
    # serve() gave SIGHUP back: the test process must not meet its handler again.
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_DFL


async def test_sighup_without_a_configuration_file_is_logged_and_berth_keeps_running() -> None:
    async with _serving(config.parse({})) as alive:
        with _awaiting("SIGHUP: no configuration file to re-read") as [warned]:
            os.kill(os.getpid(), signal.SIGHUP)
            await asyncio.wait_for(warned.seen.wait(), 30)
        alive()


# ---------------------------------------------------------------- off the loop (issue 28)


def test_a_file_past_the_size_bound_is_refused_before_it_is_parsed(
    started: tuple[Path, app.Berth, reload.ConfigReloader], caplog: pytest.LogCaptureFixture
) -> None:
    path, berth, reloader = started
    path.write_text("queues: []\n# " + "x" * config.MAX_CONFIG_BYTES + "\n")
    assert reloader.check() is False
    assert refusals(caplog) == [
        f"configuration {path} refused: larger than 4 MiB; a configuration is far smaller; "
        "keeping the running configuration"
    ]
    assert queue_names(berth) == ["research"]


async def test_the_file_is_parsed_in_a_thread_and_applied_on_the_loop(
    started: tuple[Path, app.Berth, reload.ConfigReloader], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, berth, reloader = started
    loop_thread = threading.get_ident()
    parsed_in: list[int] = []
    real_load = config.load

    def load(p: Any) -> config.BerthConfiguration:
        parsed_in.append(threading.get_ident())
        return real_load(p)

    monkeypatch.setattr(config, "load", load)
    write(path, {"queues": TWO_QUEUES})
    assert await reloader.check_off_loop() is True
    assert parsed_in and parsed_in[0] != loop_thread
    assert queue_names(berth) == ["research", "batch"]
