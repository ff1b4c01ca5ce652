"""Every code sample in ``docs/plugins.md`` runs against today's API (issue 31).

Each fenced block is found by its position and checked by the entry of
:data:`CHECKS` for it: Python samples run in the example plugin's module
namespace and must behave as the example plugin does (which its own tests
cover); the configuration samples are parsed by Berth; the error lines
quoted are the ones Berth prints. A block added to the page without a check
fails :func:`test_every_sample_has_a_check`.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
import yaml

from berth import config, testing
from berth.framework import CycleState, PodInfo, registry

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "plugins.md"
EXAMPLE = ROOT / "examples" / "plugins" / "berth-gpu-affinity"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)


def blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(DOC.read_text())]


@pytest.fixture(scope="module")
def example() -> Iterator[types.ModuleType]:
    """The example plugin's module, and its tests' helpers as ``example.tests``."""
    sys.path.insert(0, str(EXAMPLE / "src"))
    try:
        plugin = importlib.import_module("berth_gpu_affinity.plugin")
        spec = importlib.util.spec_from_file_location("gpu_affinity_tests", EXAMPLE / "tests" / "test_plugin.py")
        assert spec is not None and spec.loader is not None
        tests = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(tests)
        plugin.tests = tests  # type: ignore[attr-defined]
        yield plugin
    finally:
        sys.path.remove(str(EXAMPLE / "src"))


def run(code: str, module: types.ModuleType, **extra: Any) -> dict[str, Any]:
    ns = dict(vars(module))
    ns.update(extra)
    exec(compile(code, str(DOC), "exec"), ns)
    return ns


def cluster(module: types.ModuleType) -> testing.Cluster:
    t = module.tests
    return testing.Cluster(
        nodes=[t.gpu_node("a100-busy", "a100"), t.gpu_node("a100-idle", "a100"), t.gpu_node("h100", "h100", gpus=4)],
        pods=[t.gpu_pod("taken", gpus=6, node_name="a100-busy")],
    )


# ---------------------------------------------------------------- the checks, one per block


def shape(code: str, m: types.ModuleType) -> None:
    doc_cls = run(code, m)["GpuModelAffinity"]
    real = m.GpuModelAffinity
    assert (doc_cls.NAME, doc_cls.Args) == (real.NAME, real.Args)
    methods = {n for n, v in vars(doc_cls).items() if isinstance(v, types.FunctionType) and not n.startswith("_")}
    assert methods <= set(vars(real)), methods - set(vars(real))
    assert all(name in registry.EXTENSION_POINTS.values() for name in methods)


def state_key(code: str, m: types.ModuleType) -> None:
    state = CycleState()
    ns = run(code, m, state=state, models=("a100", "h100"))
    assert ns["MODELS"].name == m.MODELS.name
    assert ns["models"] == ("a100", "h100") and state.read(ns["MODELS"]) == ("a100", "h100")


def same_method(code: str, m: types.ModuleType, *names: str) -> None:
    """The sample's functions, as methods of the real plugin, answer as its own do."""
    ns = run(code, m)
    c = cluster(m)
    for strategy in ("MostFree", "LeastFree"):
        plugin = m.GpuModelAffinity(m.GpuModelAffinityArgs(strategy=strategy), c.handle())
        pod = PodInfo.of(m.tests.gpu_pod(models="a100,h100", gpus=1))
        nodes = c.snapshot
        rows = nodes.alive_rows()
        for name in names:
            mine = types.MethodType(ns[name], plugin)
            state = CycleState()
            plugin.pre_filter(state, pod, nodes)
            if name == "filter":
                got, want = mine(state, pod, nodes, rows), plugin.filter(state, pod, nodes, rows)
                assert got.ok.tolist() == want.ok.tolist() and got.statuses == want.statuses
            elif name == "score":
                assert mine(state, pod, nodes, rows).tolist() == plugin.score(state, pod, nodes, rows).tolist()
            else:
                raw = np.asarray([0, 3, 8], dtype=np.int64)
                assert mine(state, pod, raw).tolist() == plugin.normalize_score(state, pod, raw).tolist()
                zeros = np.zeros(3, dtype=np.int64)
                assert mine(state, pod, zeros).tolist() == [0, 0, 0]


def args(code: str, m: types.ModuleType) -> None:
    doc_args = run(code, m)["GpuModelAffinityArgs"]
    real = m.GpuModelAffinityArgs
    assert doc_args.__struct_fields__ == real.__struct_fields__
    assert doc_args.__struct_encode_fields__ == real.__struct_encode_fields__  # camelCase in YAML
    for bad in ({"labelKey": "not a key"}, {"resourceName": "/x"}):
        errors = []
        for cls in (doc_args, real):
            with pytest.raises(ValueError) as e:
                msgspec.convert(bad, cls).validate()
            errors.append(str(e.value))
        assert errors[0] == errors[1]


def config_error(code: str, m: types.ModuleType) -> None:
    """The quoted start-up error is what Berth says for that args."""
    line = code.strip()
    prefix = "berth: invalid configuration: berth.yaml: "
    assert line.startswith(prefix)
    registry.register(m.GpuModelAffinity)
    doc = {
        "profiles": [
            {
                "plugins": {"multiPoint": {"enabled": [{"name": "GpuModelAffinity"}]}},
                "pluginConfig": [{"name": "GpuModelAffinity", "args": {"labelKey": "not a key"}}],
            }
        ]
    }
    with pytest.raises(config.ConfigError) as e:
        config.parse(doc)
    assert line.removeprefix(prefix) == str(e.value)


def pyproject(code: str, m: types.ModuleType) -> None:
    shown = tomllib.loads(code)
    real = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    for key, value in shown["project"].items():
        assert real["project"][key] == value, key


def profile_yaml(code: str, m: types.ModuleType) -> None:
    registry.register(m.GpuModelAffinity)
    cfg = config.parse(yaml.safe_load(code))
    resolved = registry.resolve_profile(cfg.profiles[0])
    assert "GpuModelAffinity" in resolved.points["filter"] and resolved.weights["GpuModelAffinity"] == 2


def the_testing_sample(code: str, m: types.ModuleType) -> None:
    ns = run(code, m, gpu_node=m.tests.gpu_node, GPU=m.tests.GPU)
    ns["test_only_nodes_of_the_requested_model_fit"]()


def prose(code: str, m: types.ModuleType) -> None:
    """Shell sessions and trees: read, not run (the commands are the CLI's, tested elsewhere)."""


CHECKS: list[tuple[str, Callable[[str, types.ModuleType], None]]] = [
    ("the shape of a plugin", shape),
    ("CycleState's typed keys", state_key),
    ("filter", lambda c, m: same_method(c, m, "filter")),
    ("score and normalize_score", lambda c, m: same_method(c, m, "score", "normalize_score")),
    ("Args", args),
    ("the args' start-up error", config_error),
    ("pyproject.toml", pyproject),
    ("the start-up log", prose),
    ("a profile enabling it", profile_yaml),
    ("a berth.testing test", the_testing_sample),
    ("the development loop", prose),
    ("the example's tree", prose),
    ("berth explain's answer", prose),
]


def test_every_sample_has_a_check() -> None:
    found = blocks()
    assert len(found) == len(CHECKS), [lang + ": " + code.splitlines()[0] for lang, code in found]


@pytest.mark.parametrize("index", range(len(CHECKS)), ids=[c[0] for c in CHECKS])
def test_the_sample_runs_against_todays_api(index: int, example: types.ModuleType) -> None:
    lang, code = blocks()[index]
    check = CHECKS[index][1]
    if check is prose:
        assert lang in ("text", "sh"), f"block {index} ({lang}) is code: give it a check"
    check(code, example)
