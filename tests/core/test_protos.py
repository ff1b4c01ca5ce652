"""The committed protobuf stubs are what `make protos` generates."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_generated_stubs_are_up_to_date(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("gen_protos", ROOT / "scripts" / "gen_protos.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert Path(sys.executable).parent.joinpath("protoc-gen-mypy").exists(), "mypy-protobuf missing (make install)"
    written = gen.generate(tmp_path)
    assert written
    committed = ROOT / "berth" / "api" / "v1"
    stale = [
        p.name
        for p in written
        if not (committed / p.name).exists() or (committed / p.name).read_bytes() != p.read_bytes()
    ]
    assert not stale, f"stale generated stubs (run `make protos`): {stale}"
