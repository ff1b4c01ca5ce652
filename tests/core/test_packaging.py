"""Every package of the product is installed (pyproject lists them explicitly)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_every_product_package_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("service", "adapters")
        for init in (ROOT / top).rglob("__init__.py")
    }
    found |= {"berth", "berth.v1"}
    assert found <= listed, f"add to [tool.setuptools].packages: {sorted(found - listed)}"
