"""The committed protobuf stubs are what `make protos` generates."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def test_generated_stubs_are_up_to_date(tmp_path: Path) -> None:
    if shutil.which("protoc-gen-mypy", path=str(Path(sys.executable).parent)) is None:
        pytest.fail("mypy-protobuf is not installed in the test environment (make install)")
    protos = sorted(str(p.relative_to(ROOT / "protos")) for p in (ROOT / "protos" / "berth" / "v1").glob("*.proto"))
    env_path = f"{Path(sys.executable).parent}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-I",
            str(ROOT / "protos"),
            f"--python_out={tmp_path}",
            f"--mypy_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            f"--mypy_grpc_out={tmp_path}",
            *protos,
        ],
        check=True,
        env={"PATH": env_path},
        cwd=ROOT,
    )
    stale = []
    for generated in sorted((tmp_path / "berth" / "v1").iterdir()):
        committed = ROOT / "protos" / "berth" / "v1" / generated.name
        if not committed.exists() or committed.read_bytes() != generated.read_bytes():
            stale.append(generated.name)
    assert not stale, f"stale generated stubs (run `make protos`): {stale}"
