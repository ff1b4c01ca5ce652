"""The Dockerfile's own install steps, run outside a container runtime so
they cannot rot where none exists (issue 27: the image the chart names was
never built anywhere).

The test reads the Dockerfile, copies what its COPY lines name into a
scratch build context, and runs each RUN line of both stages with the
image's paths (/src, /wheels, /opt/venv) mapped into a temporary directory
and its BuildKit ``--mount`` options dropped (the bind mount's source is
that same directory here). The final stage's venv must then run ``berth``.
The interpreter is this one (3.11, as the image's ``python:3.11-slim``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _logical_lines(text: str) -> list[str]:
    """Dockerfile instructions with their backslash continuations joined."""
    out: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.lstrip().startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        out.append(current + line)
        current = ""
    return out


def _steps(text: str) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """(COPY sources and their destinations, build-stage RUNs, final-stage RUNs)."""
    copies: list[tuple[str, str]] = []
    runs: list[list[str]] = []
    for line in _logical_lines(text):
        word, _, rest = line.strip().partition(" ")
        word = word.upper()
        if word == "FROM":
            runs.append([])
        elif word == "COPY" and "--from" not in rest:
            *sources, dest = rest.split()
            copies += [(s, dest) for s in sources]
        elif word == "RUN":
            runs[-1].append(re.sub(r"--mount=\S+\s*", "", rest).strip())
    assert len(runs) == 2, "a build stage and a final stage"
    return copies, runs[0], runs[1]


@pytest.mark.timeout(900)
def test_the_dockerfiles_steps_build_a_venv_that_runs_berth(tmp_path: Path) -> None:
    copies, build, final = _steps((ROOT / "Dockerfile").read_text())
    assert build and final
    src, wheels, venv = tmp_path / "src", tmp_path / "wheels", tmp_path / "opt-venv"
    src.mkdir()
    for source, dest in copies:
        # COPY into the working directory /src: `./` (keep the name) or a path of its own.
        target = src / dest
        origin = ROOT / source
        if origin.is_dir():
            shutil.copytree(origin, target, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
        else:
            into = target if dest.endswith("/") else target.parent
            into.mkdir(parents=True, exist_ok=True)
            shutil.copy(origin, into / source if dest.endswith("/") else target)
    python = Path(sys.executable)
    env = {
        **os.environ,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PATH": f"{venv}/bin:{python.parent}:{os.environ['PATH']}",
    }

    def run(command: str, cwd: Path) -> None:
        command = command.replace("/wheels", str(wheels)).replace("/opt/venv", str(venv))
        # The image's `python` where a command starts (not `--python`, an option of pip's).
        command = re.sub(r"(^|&&\s*|;\s*)python(?= )", lambda m: m.group(1) + str(python), command)
        proc = subprocess.run(["sh", "-ec", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=800)
        assert proc.returncode == 0, f"{command}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"

    for command in build:
        run(command, src)
    assert list(wheels.glob("berth-0*.whl")) and list(wheels.glob("berth_client-*.whl"))
    for command in final:
        run(command, tmp_path)
    out = subprocess.run([str(venv / "bin" / "berth"), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "serve" in out.stdout
    assert not (venv / "bin" / "pip").exists()  # the venv has no pip of its own
