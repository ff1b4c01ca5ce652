"""How read commands print: ``-o text|wide|json|yaml|name`` the same way
everywhere, tables in kubectl's shape, AGE in kubectl's words.

JSON and YAML are the API's messages as :func:`berth_client.to_dict` renders
them (camelCase names, quantities as Kubernetes strings): one object for
one named thing, a list for a listing, as ``kubectl get`` prints them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["OUTPUTS", "Columns", "add_output", "emit", "human_duration", "print_names", "print_table"]

OUTPUTS = ("text", "wide", "json", "yaml", "name")
#: Columns are this far apart (kubectl's tabwriter padding).
GAP = "   "


def add_output(p: argparse.ArgumentParser, *, text: str, wide: str, data: str, name: str) -> None:
    """``-o/--output`` with what each form prints for this command."""
    p.add_argument(
        "-o",
        "--output",
        choices=OUTPUTS,
        default="text",
        help=f"text (default): {text}; wide: {wide}; json, yaml: {data}; name: {name}",
    )


def emit(doc: Any, output: str) -> bool:
    """Print ``doc`` as JSON or YAML when asked; False for the other forms."""
    if output == "json":
        print(json.dumps(doc, indent=2))
        return True
    if output == "yaml":
        import yaml  # only here: 15 ms of start-up the other forms do without

        print(yaml.safe_dump(doc, sort_keys=False), end="")
        return True
    return False


def print_names(kind: str, names: Iterable[str]) -> None:
    """``-o name``: ``kind/NAME`` a line, as kubectl prints them."""
    for name in names:
        print(f"{kind}/{name}")


def print_table(table: Sequence[Sequence[str]]) -> None:
    """Rows under a header, columns padded to the widest cell plus three
    spaces (kubectl's tabwriter), trailing blanks trimmed."""
    Columns([len(c) for c in table[0]]).widen(table).print(table)


class Columns:
    """Column widths that only grow: a watch prints rows one at a time under
    a header printed once, each row padded like the ones before it."""

    def __init__(self, widths: Sequence[int]) -> None:
        self.widths = list(widths)

    def widen(self, rows: Iterable[Sequence[str]]) -> Columns:
        for row in rows:
            self.widths = [max(w, len(c)) for w, c in zip(self.widths, row, strict=True)]
        return self

    def line(self, row: Sequence[str]) -> str:
        self.widen([row])
        return GAP.join(cell.ljust(w) for cell, w in zip(row, self.widths, strict=True)).rstrip()

    def print(self, rows: Iterable[Sequence[str]]) -> None:
        for row in rows:
            print(self.line(row))
        sys.stdout.flush()


def human_duration(seconds: float) -> str:
    """kubectl's AGE column (``duration.HumanDuration`` in
    k8s.io/apimachinery/pkg/util/duration): 45s, 3m20s, 17m, 5h12m, 3d4h, 92d, 3y45d."""
    s = int(seconds)
    if s < 0:
        return "<invalid>"
    if s < 60 * 2:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 60 * 3:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if h < 24 * 8:
        return f"{h // 24}d{h % 24}h" if h % 24 else f"{h // 24}d"
    if h < 24 * 365 * 2:
        return f"{h // 24}d"
    if h < 24 * 365 * 8:
        days = (h // 24) % 365
        return f"{h // 24 // 365}y{days}d" if days else f"{h // 24 // 365}y"
    return f"{h // 24 // 365}y"
