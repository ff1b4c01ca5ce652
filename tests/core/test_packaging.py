"""Berth installs as exactly one top-level package, ``berth``."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_the_wheel_holds_one_top_level_package_with_the_stubs_and_no_tests(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("berth-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"berth"}
    for needed in (
        "berth/api/v1/__init__.py",  # re-exports berth_client.api.v1, the one copy of the stubs
        "berth/api/v1/py.typed",
        "berth/cluster/openapi/v1.37.json",
        "berth/framework/__init__.py",
        "berth/testing/__init__.py",
        "berth/py.typed",
        "berth/adapters/http/ui/index.html",  # the dashboard (/ui/)
        "berth/adapters/http/ui/app.js",
        "berth/adapters/http/ui/app.css",
    ):
        assert needed in names, needed
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "berth = berth.cli.main:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
