"""``berth cancel``, ``version``, ``completion``, ``nodes``' table, and the
TLS flags every client command takes (against a real TLS gRPC port)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from berth.cli import main as cli
from berth.testing import make_node, make_pod
from tests.certs import CA
from tests.grpc.conftest import Served, serving

ROOT = Path(__file__).parents[2]
TOKEN = "cli-misc-token-0123456789abcdef"


async def berth(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The command in a thread (its gRPC client blocks; the server runs on this loop)."""
    status = await asyncio.to_thread(cli.main, list(argv))
    out, err = capsys.readouterr()
    return status, out, err


# ---------------------------------------------------------------- cancel


@pytest.fixture
async def pods() -> AsyncIterator[Served]:
    """Pending pods p1, p2 and q (namespace team), b bound to node a, and
    theirs and nosched, pending for another scheduler and for none."""
    async with serving() as s:
        s.feed.upsert_pods(
            [
                make_pod("p1", scheduler_name="berth"),
                make_pod("p2", scheduler_name="berth"),
                make_pod("q", namespace="team", scheduler_name="berth"),
                make_pod("b", scheduler_name="berth", node_name="a"),
                make_pod("theirs", scheduler_name="other"),
                make_pod("nosched", scheduler_name=""),
            ]
        )
        yield s


CANCEL_CASES: list[tuple[str, list[str], int, str, str, set[str]]] = [
    ("one pod", ["default/p1"], 0, "pod/p1 cancelled\n", "", {"default/p1"}),
    (
        "several, NAME in -n",
        ["default/p1", "q", "-n", "team"],
        0,
        "pod/p1 cancelled\npod/q cancelled\n",
        "",
        {"default/p1", "team/q"},
    ),
    ("kubectl's pod/ prefix", ["pod/p2"], 0, "pod/p2 cancelled\n", "", {"default/p2"}),
    (
        "a bound pod is refused, the others still go",
        ["default/b", "default/p1"],
        1,
        "pod/p1 cancelled\n",
        "berth: pod/b not cancelled: pod default/b is already bound to a\n",
        {"default/p1"},
    ),
    ("unknown pod", ["default/ghost"], 1, "", "berth: pod/ghost not cancelled: pod default/ghost not found\n", set()),
    (
        "a pod of another scheduler is not Berth's to cancel",
        ["theirs"],
        1,
        "",
        "berth: pod/theirs not cancelled: pod default/theirs is not scheduled by Berth (schedulerName 'other')\n",
        set(),
    ),
    (
        "nor a pod of no scheduler",
        ["nosched"],
        1,
        "",
        "berth: pod/nosched not cancelled: pod default/nosched is not scheduled by Berth (schedulerName '')\n",
        set(),
    ),
    (
        "malformed name changes nothing",
        ["default/p1", "a/b/c"],
        1,
        "",
        "berth: 'a/b/c': expected NAMESPACE/NAME or NAME\n",
        set(),
    ),
    ("empty name", ["default/"], 1, "", "berth: 'default/': expected NAMESPACE/NAME or NAME\n", set()),
]


@pytest.mark.parametrize(
    ("argv", "status", "out", "err", "gone"), [c[1:] for c in CANCEL_CASES], ids=[c[0] for c in CANCEL_CASES]
)
async def test_cancel_withdraws_pending_pods_and_says_why_not_per_pod(
    pods: Served,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    status: int,
    out: str,
    err: str,
    gone: set[str],
) -> None:
    got = await berth(capsys, "cancel", *argv, "--server", pods.address)
    assert got == (status, out, err)
    for key in ("default/p1", "default/p2", "team/q", "default/b", "default/theirs", "default/nosched"):
        assert (pods.core.pods.by_key(key) is None) == (key in gone), key


async def test_cancel_json_lists_every_verdict(pods: Served, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = await berth(capsys, "cancel", "default/p1", "default/b", "--server", pods.address, "-o", "json")
    assert status == 1
    assert json.loads(out) == [
        {"pod": "default/p1", "cancelled": True, "message": ""},
        {"pod": "default/b", "cancelled": False, "message": "pod default/b is already bound to a"},
    ]


@pytest.mark.parametrize(("with_token", "status"), [(False, 1), (True, 0)], ids=["no token", "token"])
async def test_cancel_carries_the_bearer_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], with_token: bool, status: int
) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    monkeypatch.delenv("BERTH_TOKEN", raising=False)
    async with serving({"auth": {"tokenFile": str(token)}}) as s:
        s.feed.upsert_pods([make_pod("p1", scheduler_name="berth")])
        extra = ["--token-file", str(token)] if with_token else []
        got, out, err = await berth(capsys, "cancel", "default/p1", "--server", s.address, *extra)
        assert (s.core.pods.by_key("default/p1") is None) == with_token
    assert got == status
    if with_token:
        assert out == "pod/p1 cancelled\n"
    else:
        assert err.startswith("berth: unauthenticated: /berth.v1.Scheduler/Cancel changes state")


# ---------------------------------------------------------------- version


def test_version_prints_the_client_version_from_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.metadata

    assert cli.main(["version", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["clientVersion"]["version"] == importlib.metadata.version("berth")
    assert set(doc) == {"clientVersion"}
    assert cli.main(["version"]) == 0
    assert capsys.readouterr().out.startswith(f"Client Version: {importlib.metadata.version('berth')} (python ")


async def test_version_with_server_reports_that_it_serves(capsys: pytest.CaptureFixture[str]) -> None:
    async with serving() as s:
        status, out, _ = await berth(capsys, "version", "--server", s.address, "-o", "json")
    assert status == 0
    assert json.loads(out)["server"] == {"address": s.address, "status": "SERVING"}


# ---------------------------------------------------------------- completion


def subcommands() -> list[str]:
    import argparse

    parser = cli._parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_names_every_subcommand(capsys: pytest.CaptureFixture[str], shell: str) -> None:
    assert cli.main(["completion", shell]) == 0
    script = capsys.readouterr().out
    assert {"serve", "nodes", "submit", "cancel", "version", "completion"} <= set(subcommands())
    for name in subcommands():
        assert name in script, name
    assert "--ca-file" in script and "--wait" in script


def test_bash_accepts_the_bash_script_and_completes_subcommands(tmp_path: Path) -> None:
    bash = shutil.which("bash")
    assert bash is not None
    script = tmp_path / "berth.bash"
    res = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "completion", "bash"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    script.write_text(res.stdout)
    subprocess.run([bash, "-n", str(script)], check=True)
    # Drive the completion function as bash would for `berth ca<TAB>`.
    probe = (
        f"source {script}; COMP_WORDS=(berth ca); COMP_CWORD=1; COMP_LINE='berth ca'; COMP_POINT=8; "
        "_shtab_berth; printf '%s\\n' \"${COMPREPLY[@]}\""
    )
    out = subprocess.run([bash, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["cancel"]


def test_completion_of_an_unknown_shell_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["completion", "tcsh"])
    assert exit_.value.code == 2
    assert "invalid choice: 'tcsh'" in capsys.readouterr().err


# ---------------------------------------------------------------- nodes


async def test_nodes_table_shows_extended_resources_in_quantities_and_aligns_long_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with serving() as s:
        s.feed.upsert_nodes(
            [
                make_node(
                    "gpu-node-with-a-rather-long-name-0001",
                    cpu="32",
                    memory="128Gi",
                    pods=110,
                    allocatable={"nvidia.com/gpu": 8},
                ),
            ]
        )
        s.feed.upsert_pods(
            [
                make_pod(
                    "train",
                    scheduler_name="berth",
                    node_name="gpu-node-with-a-rather-long-name-0001",
                    requests={"cpu": "2500m", "memory": "1536Mi", "nvidia.com/gpu": 2},
                )
            ]
        )
        status, out, _ = await berth(capsys, "nodes", "--server", s.address)
    assert status == 0
    lines = out.splitlines()
    assert [line.split() for line in lines] == [
        ["NAME", "CPU(REQ/ALLOC)", "MEMORY(REQ/ALLOC)", "NVIDIA.COM/GPU(REQ/ALLOC)", "PODS", "TAINTS"],
        ["a", "0/4", "0/8Gi", "-", "0/10", "<none>"],
        ["b", "0/1", "0/1Gi", "-", "0/10", "<none>"],
        # Both sides of a cell in one unit (issue 31: not 2500m/32).
        ["gpu-node-with-a-rather-long-name-0001", "2500m/32000m", "1536Mi/131072Mi", "2/8", "1/110", "<none>"],
    ]
    # Every column starts where its header does, three spaces after the widest cell before it.
    starts = [[m.start() for m in re.finditer(r"\S+", line)] for line in lines]
    assert all(row == starts[0] for row in starts), out
    assert starts[0][1] == len("gpu-node-with-a-rather-long-name-0001") + 3


# ---------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("pki")
    ca = CA(d)
    (d / "other").mkdir()
    other = CA(d / "other", "other-ca")
    junk = d / "junk.pem"
    junk.write_text("not a certificate\n")
    return {
        "ca": str(ca.path),
        "other-ca": str(other.path),
        "junk": str(junk),
        "server": ca.issue("berth", server=True),
        "named": ca.issue("named", server=True, hosts=("berth.example",)),
        "client": ca.issue("batch-system", client=True),
        "stranger": other.issue("stranger", client=True),
        "missing": str(d / "nowhere.pem"),
    }


def server_tls(pki: dict[str, Any], kind: str) -> dict[str, Any] | None:
    if kind == "plain":
        return None
    leaf = pki["named"] if kind == "named" else pki["server"]
    tls = {"certFile": str(leaf.cert), "keyFile": str(leaf.key)}
    if kind == "mtls":
        tls["clientCAFile"] = pki["ca"]
    return {"tls": tls}


def client_flags(pki: dict[str, Any], flags: list[str]) -> list[str]:
    """``{ca}``, ``{client.cert}`` and the like filled in from the pki."""
    out = []
    for f in flags:
        if f.startswith("{") and f.endswith("}"):
            name, _, attr = f[1:-1].partition(".")
            value = pki[name]
            out.append(str(getattr(value, attr)) if attr else str(value))
        else:
            out.append(f)
    return out


TLS_CASES: list[tuple[str, str, list[str], str]] = [
    ("CA given", "tls", ["--ca-file", "{ca}"], ""),
    ("--tls and a CA", "tls", ["--tls", "--ca-file", "{ca}"], ""),
    ("server name override", "named", ["--ca-file", "{ca}", "--server-name", "berth.example"], ""),
    (
        "mTLS with a client certificate",
        "mtls",
        ["--ca-file", "{ca}", "--cert-file", "{client.cert}", "--key-file", "{client.key}"],
        "",
    ),
    (
        "the system's CAs do not know the test CA",
        "tls",
        ["--tls"],
        "TLS handshake with {addr} failed: its certificate is not signed by a CA this client trusts "
        "(give the CA that signed it with --ca-file)",
    ),
    (
        "another CA",
        "tls",
        ["--ca-file", "{other-ca}"],
        "TLS handshake with {addr} failed: its certificate is not signed by a CA this client trusts "
        "(give the CA that signed it with --ca-file)",
    ),
    (
        "wrong server name",
        "tls",
        ["--ca-file", "{ca}", "--server-name", "elsewhere.example"],
        "TLS handshake with {addr} failed: its certificate does not name the host connected to "
        "(connect by a name the certificate holds, or set --server-name)",
    ),
    (
        "certificate for another host",
        "named",
        ["--ca-file", "{ca}"],
        "TLS handshake with {addr} failed: its certificate does not name the host connected to "
        "(connect by a name the certificate holds, or set --server-name)",
    ),
    (
        "plaintext client, TLS port",
        "tls",
        [],
        "cannot reach Berth at {addr}: the connection was closed (a TLS port needs --tls/--ca-file, "
        "and with grpc.tls.clientCAFile a client certificate it trusts: --cert-file/--key-file)",
    ),
    (
        "mTLS without a client certificate",
        "mtls",
        ["--ca-file", "{ca}"],
        "cannot reach Berth at {addr}: the connection was closed (a TLS port needs --tls/--ca-file, "
        "and with grpc.tls.clientCAFile a client certificate it trusts: --cert-file/--key-file)",
    ),
    (
        "mTLS with another CA's client certificate",
        "mtls",
        ["--ca-file", "{ca}", "--cert-file", "{stranger.cert}", "--key-file", "{stranger.key}"],
        "cannot reach Berth at {addr}: the connection was closed (a TLS port needs --tls/--ca-file, "
        "and with grpc.tls.clientCAFile a client certificate it trusts: --cert-file/--key-file)",
    ),
    (
        "TLS client, plaintext port",
        "plain",
        ["--ca-file", "{ca}"],
        "TLS handshake with {addr} failed: the port does not speak TLS (leave out --tls and --ca-file)",
    ),
    (
        "unreadable CA file",
        "tls",
        ["--ca-file", "{missing}"],
        "--ca-file: cannot read {missing}: No such file or directory",
    ),
    ("junk CA file", "tls", ["--ca-file", "{junk}"], "--ca-file: {junk} is not a PEM CA certificate: "),
    (
        "certificate without its key",
        "mtls",
        ["--ca-file", "{ca}", "--cert-file", "{client.cert}"],
        "--cert-file and --key-file go together: a client certificate needs its key",
    ),
    (
        "key of another certificate",
        "mtls",
        ["--ca-file", "{ca}", "--cert-file", "{client.cert}", "--key-file", "{stranger.key}"],
        "--cert-file/--key-file: not a matching PEM certificate and key: ",
    ),
]


@pytest.mark.parametrize(("server", "flags", "error"), [c[1:] for c in TLS_CASES], ids=[c[0] for c in TLS_CASES])
async def test_client_commands_reach_a_tls_port_or_say_why_not_in_one_line(
    pki: dict[str, Any], capsys: pytest.CaptureFixture[str], server: str, flags: list[str], error: str
) -> None:
    async with serving(server_tls(pki, server)) as s:
        status, out, err = await berth(capsys, "nodes", "--server", s.address, "-o", "json", *client_flags(pki, flags))
    if not error:
        assert status == 0, err
        assert [n["name"] for n in json.loads(out)] == ["a", "b"]
        return
    assert status == 1
    want = "berth: " + error.format(addr=s.address, **{k: v for k, v in pki.items() if isinstance(v, str)})
    assert err.startswith(want), err
    assert err.count("\n") == 1, err


@pytest.mark.parametrize("command", ["queues", "version", "cancel", "submit"])
async def test_every_client_command_takes_the_tls_flags(
    pki: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\n"
        "spec: {schedulerName: berth, containers: [{name: c, image: busybox}]}\n"
    )
    argv = {"queues": [], "version": [], "cancel": ["default/p"], "submit": ["-f", str(pod)]}[command]
    flags = client_flags(pki, ["--ca-file", "{ca}", "--cert-file", "{client.cert}", "--key-file", "{client.key}"])
    async with serving(server_tls(pki, "mtls")) as s:
        if command == "cancel":
            s.feed.upsert_pods([make_pod("p", scheduler_name="berth")])
        status, _, err = await berth(capsys, command, *argv, "--server", s.address, *flags)
    assert status == 0, err


def test_a_tls_failure_is_one_line_on_the_real_stderr(pki: dict[str, Any]) -> None:
    """grpc core logs a failed handshake to stderr itself; the CLI keeps
    that quiet so the user reads one line."""

    async def run() -> subprocess.CompletedProcess[str]:
        async with serving(server_tls(pki, "tls")) as s:
            argv = [
                sys.executable,
                "-m",
                "berth.cli.main",
                "nodes",
                "--server",
                s.address,
                "--ca-file",
                pki["other-ca"],
            ]
            env = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
            return await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, cwd=ROOT, env=env)

    res = asyncio.run(run())
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("berth: TLS handshake with "), res.stderr
