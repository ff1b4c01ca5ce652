"""What the generated-docs scripts share: write the file, or with
``--check`` say whether it is stale (``make docs``; the scripts are
``gen_config_doc.py`` and ``gen_cli_doc.py``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def main(out: Path, render: Callable[[], str], description: str, argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--check", action="store_true", help="exit 1 when the file is stale; write nothing")
    args = p.parse_args(argv)
    text = render()
    if args.check:
        if not out.exists() or out.read_text() != text:
            print(f"{out.relative_to(Path(__file__).resolve().parents[1])} is stale: run `make docs`", file=sys.stderr)
            return 1
        return 0
    out.write_text(text)
    return 0
