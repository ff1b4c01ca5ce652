"""`berth serve` on the demo cluster, driven by the CLI clients, as `make run` does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.controlplane.bed import free_port
from tests.support import demo_berth_serve

ROOT = Path(__file__).parents[2]
BERTH = [sys.executable, "-m", "berth.cli.main"]


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BERTH, *args], capture_output=True, text=True, cwd=ROOT, timeout=60, check=check)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with demo_berth_serve() as (_, http, grpc_port, output):
        yield f"127.0.0.1:{grpc_port}|{http}"
    assert "shutting down" in output()


def test_nodes_lists_the_demo_cluster_as_json(server: str) -> None:
    addr = server.split("|")[0]
    out = json.loads(cli("nodes", "--server", addr, "-o", "json").stdout)
    assert len(out) == 50
    assert {"name", "allocatable", "requested"} <= set(out[0])
    assert any(n["requested"] for n in out)


def test_explain_sends_the_gpu_pod_to_gpu_nodes_only(server: str) -> None:
    addr = server.split("|")[0]
    out = json.loads(cli("explain", "-f", "examples/pods/gpu.yaml", "--server", addr, "-o", "json").stdout)
    feasible = [n["node"] for n in out["nodes"] if n["feasible"]]
    assert feasible and len(feasible) <= 3
    assert all(isinstance(n["score"], int) for n in out["nodes"])
    reasons = {r["reason"] for n in out["nodes"] if not n["feasible"] for r in n["reasons"]}
    assert "Insufficient nvidia.com/gpu" in reasons or any("taint" in r for r in reasons)


def test_submit_wait_places_the_batch_gang_and_reports_the_gated_pod(server: str) -> None:
    """The report pod's scheduling gate is never lifted: --wait reports it
    Gated when the timeout passes, and exits 2 (not every pod Scheduled)."""
    addr = server.split("|")[0]
    res = cli(
        "submit",
        "-f",
        "examples/pods/batch.yaml",
        "--wait",
        "--timeout",
        "5",
        "--server",
        addr,
        "-o",
        "json",
        check=False,
    )
    assert res.returncode == 2, res.stderr
    out = {r["pod"]: r for r in json.loads(res.stdout)}
    assert {out[f"batch/train-{i}"]["status"] for i in range(4)} == {"Bound"}
    assert out["batch/report"]["status"] == "Gated"
    assert res.stderr == "berth: timed out after 5s waiting for batch/report (Gated)\n"


def test_metrics_use_kube_scheduler_names(server: str) -> None:
    http = server.split("|")[1]
    with urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=5) as r:
        text = r.read().decode()
    for name in ("scheduler_schedule_attempts_total", "scheduler_pending_pods", "scheduler_cache_size"):
        assert name in text


def test_get_profiles_lists_the_running_plugins(server: str) -> None:
    addr = server.split("|")[0]
    table = cli("get", "profiles", "--server", addr).stdout.splitlines()
    assert table[0].split() == ["NAME", "ALIASES", "PLUGINS", "SCORE", "WEIGHTS"]
    assert table[1].split()[0] == "berth"
    wide = cli("get", "profile", "berth", "-o", "wide", "--server", addr).stdout
    assert "  filter" in wide and "NodeResourcesFit" in wide
    [doc] = [json.loads(cli("get", "profiles", "-o", "json", "--server", addr).stdout)[0]]
    points = {e["extensionPoint"]: e["plugins"] for e in doc["extensionPoints"]}
    assert "NodeResourcesFit" in points["filter"] and doc["weights"]["NodeResourcesFit"] >= 1
    missing = cli("get", "profile", "nope", "--server", addr, check=False)
    assert missing.returncode == 1 and "profile 'nope' not found" in missing.stderr


def test_client_errors_are_clear() -> None:
    res = cli("nodes", "--server", f"127.0.0.1:{free_port()}", check=False)
    assert res.returncode == 1 and "cannot reach Berth" in res.stderr
    res = cli("explain", "-f", "does-not-exist.yaml", check=False)
    assert res.returncode == 2 and "No such file" in res.stderr  # a usage error, like a bad manifest


def test_serve_refuses_an_invalid_config(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: berth.dev/v1\nkind: BerthConfiguration\nprofiles: [{schedulerName: berth, randomizeTopN: -1}]\n"
    )
    res = cli("serve", "--config", str(bad), check=False)
    assert res.returncode == 2
    assert "invalid configuration" in res.stderr and "profiles[0].randomizeTopN" in res.stderr
    env = dict(os.environ)
    assert env  # keep the environment untouched


@pytest.mark.parametrize("which", ["http", "grpc"])
def test_a_port_in_use_is_one_line_and_exit_2(server: str, which: str) -> None:
    """A second `berth serve` on the first one's port stops with one line
    naming the address and what to change (for gRPC this needs
    grpc.so_reuseport=0: with grpc's default both would listen)."""
    grpc_addr, http = server.split("|")
    grpc_port = grpc_addr.rsplit(":", 1)[1]
    ports = {"http": (http, str(free_port())), "grpc": (str(free_port()), grpc_port)}[which]
    res = cli(
        "serve",
        "--cluster",
        "examples/cluster.yaml",
        "--http-port",
        ports[0],
        "--grpc-port",
        ports[1],
        check=False,
    )
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    port = ports[0] if which == "http" else ports[1]
    assert last.startswith(f"berth: {which}.port: 127.0.0.1:{port} is already in use"), last
    assert f"--{which}-port" in last


def test_serve_listens_on_loopback_by_default() -> None:
    """Outside a cluster nothing is exposed beyond this machine unless asked
    (the Helm chart sets 0.0.0.0 and turns authentication on)."""
    from berth import config

    cfg = config.parse({})
    assert (cfg.http.host, cfg.grpc.host) == ("127.0.0.1", "127.0.0.1")
