"""Generate the Python stubs of ``protos/berth/v1/*.proto`` into the client
library, ``clients/python/berth_client/api/v1``.

protoc writes imports from the proto package path (``from berth.v1 import
model_pb2``); the stubs live at ``berth_client.api.v1``, so the imports are
rewritten after generation — the way temporalio's ``scripts/gen_protos.py``
moves its stubs under ``temporalio.api``. Wire names (``berth.v1.Scheduler``)
are untouched.

There is one copy of the generated code: the ``berth-client`` distribution
carries it, and the server's ``berth.api.v1`` re-exports those modules
(``berth/api/v1/__init__.py``), so a process that imports both holds one set
of message classes.

    python scripts/gen_protos.py [OUT_DIR]    # default: clients/python/berth_client/api/v1
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROTOS = ROOT / "protos"
PACKAGE = "berth_client.api.v1"
DEFAULT_OUT = ROOT / "clients" / "python" / Path(*PACKAGE.split("."))

#: ``from berth.v1 import x`` / ``import berth.v1.x`` (only imports: strings name wire types).
_IMPORT = re.compile(r"^(\s*)(from|import) berth\.v1(?=[ .])", re.MULTILINE)


def generate(out: Path) -> list[Path]:
    """Run protoc (with mypy-protobuf) and write the rewritten stubs into ``out``."""
    protos = sorted(str(p.relative_to(PROTOS)) for p in (PROTOS / "berth" / "v1").glob("*.proto"))
    bindir = str(Path(sys.executable).parent)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                "-I",
                str(PROTOS),
                f"--python_out={tmp}",
                f"--mypy_out={tmp}",
                f"--grpc_python_out={tmp}",
                f"--mypy_grpc_out={tmp}",
                *protos,
            ],
            check=True,
            env={"PATH": bindir},  # protoc-gen-mypy from this environment
            cwd=ROOT,
        )
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for generated in sorted((Path(tmp) / "berth" / "v1").iterdir()):
            text = _IMPORT.sub(rf"\1\2 {PACKAGE}", generated.read_text())
            target = out / generated.name
            target.write_text(text)
            written.append(target)
    return written


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    for p in generate(out):
        print(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p)
    shutil.rmtree(out / "__pycache__", ignore_errors=True)
