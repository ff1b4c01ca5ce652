"""The plugin SDK end to end: the example out-of-tree plugin
(``examples/plugins/berth-gpu-affinity``) installed for real into its own
directory, found by ``berth serve`` through its entry point, and visible in
``berth explain``; and a plugin that fails to import, reported with its own
traceback. The example's unit tests live beside it (its ``tests/``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.controlplane.bed import Process, _wait, free_port

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "plugins" / "berth-gpu-affinity"
BERTH = Path(sys.executable).parent / "berth"
GPU = "nvidia.com/gpu"
#: The node label the example is configured to read (not its default, so the
#: test also shows pluginConfig args reaching the plugin).
LABEL = "example.com/gpu-model"
ANNOTATION = "gpu.berth.dev/model"
REASON = "node(s) didn't have the requested GPU model"


def pip_install(project: Path, target: Path) -> None:
    """``pip install --target``: the distribution and its entry points land in
    ``target`` only, importable through PYTHONPATH; nothing is fetched."""
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "--quiet"]
    res = subprocess.run(
        [*pip, "--target", str(target), str(project)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert res.returncode == 0, res.stdout + res.stderr


def write_yaml(path: Path, *docs: Mapping[str, Any]) -> Path:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def config(plugin: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """A BerthConfiguration enabling ``plugin`` (weight 2) with ``args``, on loopback."""
    return {
        "apiVersion": "berth.dev/v1",
        "kind": "BerthConfiguration",
        "http": {"host": "127.0.0.1"},
        "grpc": {"host": "127.0.0.1"},
        "profiles": [
            {
                "schedulerName": "berth",
                "plugins": {"multiPoint": {"enabled": [{"name": plugin, "weight": 2}]}},
                "pluginConfig": [{"name": plugin, "args": dict(args)}],
            }
        ],
    }


def serve_argv(config_file: Path, cluster_file: Path | None = None) -> tuple[list[str], int, int]:
    """``berth serve`` on free loopback ports below the ephemeral range."""
    http, grpc = free_port(), free_port()
    argv = [str(BERTH), "serve", "--config", str(config_file), "--http-port", str(http), "--grpc-port", str(grpc)]
    argv += ["--ui-port", str(free_port())]
    if cluster_file is not None:
        argv += ["--cluster", str(cluster_file)]
    return argv, http, grpc


def gpu_node(name: str, model: str) -> dict[str, Any]:
    alloc = {"cpu": "32", "memory": "256Gi", "pods": "110", GPU: "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, LABEL: model}},
        "status": {"capacity": alloc, "allocatable": alloc},
    }


def gpu_pod(name: str, *, gpus: int, annotations: Mapping[str, str] | None = None, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "berth",
        "containers": [{"name": "c", "image": "trainer:1", "resources": {"requests": {"cpu": "1", GPU: str(gpus)}}}],
    }
    if node:
        spec["nodeName"] = node
    meta = {"name": name, "namespace": "ml", "annotations": dict(annotations or {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sdk")


@pytest.fixture(scope="module")
def installed(workdir: Path) -> Path:
    """The example installed into its own directory (from a copy: a local
    build writes build/ and *.egg-info next to the sources)."""
    source = workdir / "berth-gpu-affinity"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = workdir / "site-gpu"
    pip_install(source, target)
    return target


@pytest.fixture(scope="module")
def server(workdir: Path, installed: Path) -> Iterator[tuple[str, Process]]:
    """``berth serve`` with GpuModelAffinity: two A100 nodes (one with 6 of
    its 8 GPUs taken) and an H100 node. Yields the gRPC address and the process."""
    cluster = write_yaml(
        workdir / "cluster.yaml",
        gpu_node("a100-busy", "a100"),
        gpu_node("a100-idle", "a100"),
        gpu_node("h100", "h100"),
        gpu_pod("running", gpus=6, node="a100-busy"),
    )
    cfg = write_yaml(workdir / "berth.yaml", config("GpuModelAffinity", {"labelKey": LABEL, "strategy": "MostFree"}))
    argv, http, grpc = serve_argv(cfg, cluster)
    proc = Process("berth", argv, workdir / "berth.log", env={"PYTHONPATH": str(installed)})
    try:
        _wait("berth /readyz", lambda: ready(http), 60, proc)
        yield f"127.0.0.1:{grpc}", proc
    finally:
        proc.stop()


def ready(http: int) -> bool:
    with urllib.request.urlopen(f"http://127.0.0.1:{http}/readyz", timeout=2) as r:
        return bool(r.status == 200)


def explain(workdir: Path, server: str, pod: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``berth explain -o json``'s verdicts, by node name."""
    pod_file = write_yaml(workdir / f"{pod['metadata']['name']}.yaml", pod)
    res = subprocess.run(
        [str(BERTH), "explain", "-f", str(pod_file), "--server", server, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    return {n["node"]: n for n in json.loads(res.stdout)["nodes"]}


def test_berth_serve_finds_the_installed_plugin(server: tuple[str, Process]) -> None:
    _, proc = server
    log = proc.log.read_text()
    assert "plugin GpuModelAffinity from berth_gpu_affinity.plugin:GpuModelAffinity (berth-gpu-affinity 0.1.0)" in log
    assert "cannot be used" not in log


def test_explain_shows_the_plugin_filtering_and_scoring(workdir: Path, server: tuple[str, Process]) -> None:
    addr, _ = server
    nodes = explain(workdir, addr, gpu_pod("wants-a100", gpus=1, annotations={ANNOTATION: "a100"}))
    h100 = nodes["h100"]
    assert not h100["feasible"]
    assert h100["reasons"] == [{"plugin": "GpuModelAffinity", "reason": REASON, "unresolvable": True}]
    assert nodes["a100-busy"]["feasible"] and nodes["a100-idle"]["feasible"]
    # Free GPUs 2 and 8 of 8: normalised to 25 and 100, times the weight 2.
    assert nodes["a100-idle"]["pluginScores"]["GpuModelAffinity"] == 200
    assert nodes["a100-busy"]["pluginScores"]["GpuModelAffinity"] == 50


def test_a_pod_without_the_annotation_is_not_filtered(workdir: Path, server: tuple[str, Process]) -> None:
    addr, _ = server
    nodes = explain(workdir, addr, gpu_pod("any-gpu", gpus=1))
    assert all(n["feasible"] for n in nodes.values()), nodes
    assert nodes["h100"]["pluginScores"]["GpuModelAffinity"] == 200


def test_invalid_plugin_args_stop_start_up(workdir: Path, installed: Path) -> None:
    cfg = write_yaml(workdir / "bad-args.yaml", config("GpuModelAffinity", {"labelKey": "not a key"}))
    argv, _, _ = serve_argv(cfg)
    res = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(installed)}
    )
    assert res.returncode == 2  # a configuration berth serve cannot start with
    assert "profiles[0].pluginConfig[0].args: labelKey: 'not a key' is not a valid qualified name" in res.stderr


def test_a_plugin_that_fails_to_import_is_reported_with_its_traceback(workdir: Path) -> None:
    project = workdir / "broken-plugin"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        textwrap.dedent(
            """\
            [build-system]
            requires = ["setuptools>=69"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "berth-broken-plugin"
            version = "0.0.1"

            [project.entry-points."berth.plugins"]
            Broken = "berth_broken_plugin:Broken"

            [tool.setuptools]
            py-modules = ["berth_broken_plugin"]
            """
        )
    )
    (project / "berth_broken_plugin.py").write_text(
        'def _load() -> None:\n    raise RuntimeError("boom from broken plugin")\n\n\n_load()\n'
    )
    target = workdir / "site-broken"
    pip_install(project, target)
    cfg = write_yaml(workdir / "broken.yaml", config("Broken", {}))
    argv, _, _ = serve_argv(cfg)
    # subprocess.run kills the server should it ever start serving instead.
    res = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(target)}
    )
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "boom from broken plugin" in out and "Traceback" in out, out
    assert 'berth_broken_plugin.py", line' in out, out  # the plugin's own frame
    assert "unknown plugin" not in out, out
