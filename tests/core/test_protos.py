"""The committed protobuf stubs are what `make protos` generates, and there
is one copy of them: the client library's (``berth_client.api.v1``), which
``berth.api.v1`` re-exports."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
COMMITTED = ROOT / "clients" / "python" / "berth_client" / "api" / "v1"


def test_generated_stubs_are_up_to_date(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("gen_protos", ROOT / "scripts" / "gen_protos.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert Path(sys.executable).parent.joinpath("protoc-gen-mypy").exists(), "mypy-protobuf missing (make install)"
    assert gen.DEFAULT_OUT == COMMITTED
    written = gen.generate(tmp_path)
    assert written
    stale = [
        p.name
        for p in written
        if not (COMMITTED / p.name).exists() or (COMMITTED / p.name).read_bytes() != p.read_bytes()
    ]
    assert not stale, f"stale generated stubs (run `make protos`): {stale}"


def test_the_server_holds_no_second_copy_of_the_stubs() -> None:
    from berth.api.v1 import model_pb2, scheduler_pb2
    from berth_client.api.v1 import model_pb2 as client_model_pb2
    from berth_client.api.v1 import scheduler_pb2 as client_scheduler_pb2

    assert not list((ROOT / "berth" / "api" / "v1").glob("*_pb2*"))
    assert (model_pb2, scheduler_pb2) == (client_model_pb2, client_scheduler_pb2)
