"""Start a ``berth serve`` (or a reference extender) as a separate process on
loopback, so the client's CPU is not the server's event loop."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.controlplane.bed import free_port  # one port picker for benches and tests

ROOT = Path(__file__).resolve().parents[1]


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f}s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)
    if proc.poll() is None:
        proc.kill()


def _berth() -> str:
    exe = Path(sys.executable).parent / "berth"
    return str(exe) if exe.exists() else shutil.which("berth") or "berth"


@contextlib.contextmanager
def berth(nodes: Sequence[dict[str, Any]], config: dict[str, Any] | None = None) -> Iterator[dict[str, int]]:
    """``berth serve`` on an embedded cluster of ``nodes``; yields its ports."""
    with tempfile.TemporaryDirectory(prefix="berth-bench-") as tmp:
        cluster = Path(tmp) / "cluster.json"
        cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(nodes)}))
        http_port, grpc_port = free_port(), free_port()
        cfg = {"apiVersion": "berth.dev/v1", "kind": "BerthConfiguration", **(config or {})}
        cfg.setdefault("http", {}).update({"host": "127.0.0.1", "port": http_port})
        cfg.setdefault("grpc", {}).update({"host": "127.0.0.1", "port": grpc_port})
        cfg_file = Path(tmp) / "berth.yaml"
        cfg_file.write_text(yaml.safe_dump(cfg))
        log = open(Path(tmp) / "berth.log", "wb")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(
            [_berth(), "serve", "--config", str(cfg_file), "--cluster", str(cluster)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            wait_http(f"http://127.0.0.1:{http_port}/readyz", proc)
            yield {"http": http_port, "grpc": grpc_port, "pid": proc.pid}
        except BaseException:
            log.flush()
            sys.stderr.write((Path(tmp) / "berth.log").read_text()[-4000:])
            raise
        finally:
            _stop(proc)
            log.close()


@contextlib.contextmanager
def topolvm(binary: Path, pids: list[int] | None = None) -> Iterator[int]:
    """TopoLVM's scheduler extender (real Go code) listening on loopback
    (its process id appended to ``pids``, for CPU accounting)."""
    with tempfile.TemporaryDirectory(prefix="topolvm-bench-") as tmp:
        port = free_port()
        cfg = Path(tmp) / "config.yaml"
        cfg.write_text(yaml.safe_dump({"listen": f"127.0.0.1:{port}"}))
        proc = subprocess.Popen(
            [str(binary), "--config", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        if pids is not None:
            pids.append(proc.pid)
        try:
            wait_http(f"http://127.0.0.1:{port}/status", proc, timeout=30)
            yield port
        finally:
            _stop(proc)


def reference_binary(name: str) -> Path | None:
    """Build (once per machine) and find a Go reference extender; None when Go is missing."""
    try:
        out = subprocess.run(
            [str(ROOT / "bench" / "reference" / "build.sh")], check=True, capture_output=True, text=True
        )
    except (OSError, subprocess.CalledProcessError) as e:
        err = getattr(e, "stderr", "") or str(e)
        print(f"  reference {name} unavailable: {err.strip()[-500:]}", file=sys.stderr)
        return None
    path = Path(out.stdout.strip().splitlines()[-1]) / name
    return path if path.exists() else None
