"""A real PostgreSQL server for the tests and the benchmark: Debian's
``postgresql`` package (``make postgres-deps`` installs it when missing),
``initdb`` in a temporary directory, listening on 127.0.0.1 at a free port
and on a unix socket in that directory, with ``trust`` authentication for
loopback only; stopped (``pg_ctl stop -m immediate``) and removed after.

PostgreSQL refuses to run as root, so as root the server runs as the
``postgres`` user the package creates (``runuser``), the directory handed
to it; as anyone else, as that user.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["BIN", "PgServer", "available", "running"]

#: Debian's layout: /usr/lib/postgresql/<major>/bin; the newest installed wins.
_ROOT = Path("/usr/lib/postgresql")


def _bin() -> Path | None:
    if not _ROOT.is_dir():
        return None
    majors = sorted((p for p in _ROOT.iterdir() if (p / "bin" / "initdb").exists()), key=lambda p: int(p.name))
    return majors[-1] / "bin" if majors else None


BIN = _bin()


def available() -> str:
    """Why no server can be started here ("" when one can)."""
    if BIN is None:
        return "PostgreSQL is not installed (make postgres-deps: apt-get install postgresql)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: PostgreSQL refuses to run as root"
    return ""


class PgServer:
    def __init__(self, directory: Path, port: int) -> None:
        self.dir = directory
        self.port = port

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def database(self, name: str) -> str:
        """A new, empty database's DSN (``createdb``)."""
        self.run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)
        return self.dsn.rsplit("/", 1)[0] + "/" + name

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert BIN is not None
        cmd = [str(BIN / argv[0]), *argv[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=60)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running() -> Iterator[PgServer]:
    """A started server for the block; stopped and removed after it."""
    why = available()
    if why:
        raise RuntimeError(why)
    top = Path(tempfile.mkdtemp(prefix="berth-pg-"))
    try:
        if os.geteuid() == 0:
            shutil.chown(top, "postgres", "postgres")
        server = PgServer(top, _free_port())
        data = top / "data"
        init = server.run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", check=False)
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed: {init.stderr.strip()}")
        # Durable as a production server (fsync on), small, loopback only.
        opts = f"-c listen_addresses=127.0.0.1 -p {server.port} -k {top} -c shared_buffers=32MB -c max_connections=50"
        start = server.run("pg_ctl", "-D", str(data), "-l", str(top / "log"), "-o", opts, "-w", "start", check=False)
        if start.returncode != 0:
            log = (top / "log").read_text(errors="replace") if (top / "log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {start.stderr.strip()} {log[-2000:]}")
        try:
            yield server
        finally:
            server.run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop", check=False)
    finally:
        shutil.rmtree(top, ignore_errors=True)
