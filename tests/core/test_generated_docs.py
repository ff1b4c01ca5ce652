"""docs/configuration.md and docs/cli.md are generated (``make docs``) from
the configuration's structs and the CLI's parser; they must not go stale."""

from __future__ import annotations

import importlib.util
import re
import types
from pathlib import Path

import pytest

from berth import config

ROOT = Path(__file__).resolve().parents[2]


def script(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["gen_config_doc", "gen_cli_doc"])
def test_the_generated_doc_is_current(name: str) -> None:
    gen = script(name)
    assert gen.OUT.read_text() == gen.render(), f"{gen.OUT.relative_to(ROOT)} is stale: run `make docs`"
    assert gen.main(["--check"]) == 0


def test_every_configuration_key_is_in_the_reference() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    for key in ("percentageOfNodesToScore", "clientCAFile", "leaderElection", "schedulerName", "queues"):
        assert f"`{key}`" in text
    assert "| `podInitialBackoffSeconds` | float | `1.0` | A pod that failed waits" in text
    # Each struct the configuration holds has its section.
    sections = set(re.findall(r"^## (\w+)$", text, re.M))
    assert {"BerthConfiguration", "TLSConfig", "Profile", "QueueSpec"} <= sections
    assert config.BerthConfiguration.__name__ in sections


def test_a_changed_field_comment_makes_it_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = script("gen_config_doc")
    before = gen.render()
    monkeypatch.setattr(gen, "_comments", lambda cls: {})
    assert gen.render() != before


def test_every_command_has_its_page() -> None:
    text = (ROOT / "docs" / "cli.md").read_text()
    for command in ("berth serve", "berth get", "berth why", "berth submit", "berth config set-context"):
        assert f"\n## {command}\n" in text
    assert "--token-file FILE" in text  # berth options: the flags help pages leave out
