"""Fixtures of the end-to-end suite: the real control plane and Berth
processes talking to it. Every test here is marked ``e2e``.

Without the binaries (``make e2e-deps``) these tests skip — except under
``CI=true``, where that is a failure: CI must run them.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
import yaml

from tests.e2e.controlplane import bed

CI = os.environ.get("CI", "").lower() == "true"
ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


def unavailable(reason: str) -> NoReturn:
    if CI:
        pytest.fail(f"{reason} (CI=true: the end-to-end binaries must be built; run `make e2e-deps`)")
    pytest.skip(reason)


def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0, interval: float = 0.2) -> Any:
    """Poll ``check`` until it returns something truthy; its value is returned."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
            last = value
        except Exception as e:  # not there yet
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[bed.ControlPlane]:
    try:
        binaries = bed.find_binaries()
    except LookupError as e:
        unavailable(str(e))
    cp = bed.ControlPlane(binaries, tmp_path_factory.mktemp("bed"))
    with cp:
        yield cp


@pytest.fixture(scope="module")
def kube(control_plane: bed.ControlPlane) -> bed.Kube:
    return control_plane.kube()


class Berth:
    """A ``berth serve`` process against the bed."""

    def __init__(self, proc: bed.Process, http_port: int, grpc_port: int) -> None:
        self.process = proc
        self.http_port = http_port
        self.grpc_port = grpc_port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()


def launch_berth(
    control_plane: bed.ControlPlane,
    config: dict[str, Any] | None = None,
    *,
    kubeconfig: Path | None = None,
    name: str = "berth",
    ready: bool = True,
    env: dict[str, str] | None = None,
) -> Berth:
    """``berth serve`` against the bed on free loopback ports (the bed stops
    it with itself); ``ready`` waits for its /readyz."""
    http_port, grpc_port = bed.free_port(), bed.free_port()
    cfg: dict[str, Any] = {"apiVersion": "berth.dev/v1", "kind": "BerthConfiguration", **(config or {})}
    cfg["http"] = {**cfg.get("http", {}), "host": "127.0.0.1", "port": http_port}
    cfg["grpc"] = {**cfg.get("grpc", {}), "host": "127.0.0.1", "port": grpc_port}
    cfg["ui"] = {"host": "127.0.0.1", "port": bed.free_port(), **cfg.get("ui", {})}
    cfg.setdefault("leaderElection", {"leaderElect": False})
    n = len(control_plane.processes)
    path = control_plane.workdir / f"{name}-{n}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    exe = Path(sys.executable).parent / "berth"
    argv = [str(exe), "serve", "--config", str(path), "--kubeconfig", str(kubeconfig or control_plane.admin_kubeconfig)]
    proc = control_plane._spawn(f"{name}-{n}", argv, env)
    b = Berth(proc, http_port, grpc_port)
    if ready:
        wait_for(f"{name} /readyz", lambda: (proc.alive() and b.get("/readyz")[0] == 200) or _dead(proc), 60)
    return b


@pytest.fixture
def start_berth(control_plane: bed.ControlPlane) -> Iterator[Callable[..., Berth]]:
    """Start Berth processes (killed at teardown): ``start_berth(config=..., kubeconfig=...)``."""
    started: list[Berth] = []

    def start(config: dict[str, Any] | None = None, **kw: Any) -> Berth:
        b = launch_berth(control_plane, config, **kw)
        started.append(b)
        return b

    yield start
    for b in started:
        with contextlib.suppress(Exception):
            b.process.stop()


@pytest.fixture(scope="module")
def controller_manager(control_plane: bed.ControlPlane) -> Iterator[bed.Process]:
    """kube-controller-manager with :data:`bed.DEFAULT_CONTROLLERS` (PV binder,
    namespace, garbage collector, service accounts, resource claims), for the
    tests that ask for it; about 0.7 s to become healthy here."""
    proc = control_plane.start_controller_manager()
    yield proc
    proc.stop()


def _dead(proc: bed.Process) -> bool:
    if not proc.alive():
        raise AssertionError(f"{proc.name} exited ({proc.proc.returncode}):\n{proc.tail()}")
    return False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """On failure, attach the tails of every component's log."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        cp = item.funcargs.get("control_plane") if hasattr(item, "funcargs") else None
        if isinstance(cp, bed.ControlPlane):
            report.sections.append(("component logs", cp.logs()))
