"""berth-client is its own distribution: the generated stubs and the client,
needing grpcio and protobuf only; the berth distribution depends on it."""

from __future__ import annotations

import email
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _wheel(project: Path, out: Path) -> zipfile.ZipFile:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(project)],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("*.whl")
    return zipfile.ZipFile(wheel)


def _requires(wheel: zipfile.ZipFile) -> list[str]:
    metadata = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    return email.message_from_bytes(wheel.read(metadata)).get_all("Requires-Dist") or []


def test_the_client_wheel_holds_the_stubs_and_the_client_and_needs_grpcio_and_protobuf(tmp_path: Path) -> None:
    wheel = _wheel(ROOT / "clients" / "python", tmp_path)
    names = wheel.namelist()
    assert {n.split("/")[0] for n in names if ".dist-info" not in n.split("/")[0]} == {"berth_client"}
    for needed in (
        "berth_client/__init__.py",
        "berth_client/py.typed",
        "berth_client/api/v1/scheduler_pb2.py",
        "berth_client/api/v1/scheduler_pb2.pyi",
        "berth_client/api/v1/scheduler_pb2_grpc.py",
        "berth_client/api/v1/py.typed",
    ):
        assert needed in names, needed
    assert sorted(r.split(">")[0].split("<")[0].split("=")[0] for r in _requires(wheel)) == ["grpcio", "protobuf"]


def test_the_berth_wheel_depends_on_the_client(tmp_path: Path) -> None:
    assert "berth-client==0.1.0" in _requires(_wheel(ROOT, tmp_path))


def test_importing_the_client_loads_nothing_of_the_server() -> None:
    server = {"berth", "numpy", "msgspec", "yaml", "kubernetes_asyncio"}
    probe = (
        "import sys, berth_client, berth_client.aio, berth_client.sync; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {server!r}))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd="/").stdout
    assert out.strip() == "[]"
