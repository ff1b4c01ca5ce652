"""The CLI's gRPC clients send the bearer token: --token-file, else $BERTH_TOKEN."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from berth.cli import main as cli
from tests.grpc.conftest import serving

TOKEN = "cli-token-0123456789abcdef"

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: job, namespace: default}
spec:
  schedulerName: berth
  containers:
  - name: c
    image: busybox
    resources: {requests: {cpu: 100m}}
"""


@pytest.mark.parametrize(
    ("how", "status", "said"),
    [
        ("none", 1, "unauthenticated: /berth.v1.Scheduler/Submit changes state"),
        ("wrong file", 1, "unauthenticated: /berth.v1.Scheduler/Submit: the bearer token is not the one"),
        ("file", 0, "default/job"),
        ("env", 0, "default/job"),
        ("missing file", 1, "--token-file: cannot read"),
    ],
)
async def test_submit_authenticates_with_the_token(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    how: str,
    status: int,
    said: str,
) -> None:
    server_token = tmp_path / "server-token"
    server_token.write_text(TOKEN)
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-it\n")
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD)
    monkeypatch.delenv("BERTH_TOKEN", raising=False)
    extra = {
        "none": [],
        "wrong file": ["--token-file", str(wrong)],
        "file": ["--token-file", str(server_token)],
        "env": [],
        "missing file": ["--token-file", str(tmp_path / "absent")],
    }[how]
    if how == "env":
        monkeypatch.setenv("BERTH_TOKEN", TOKEN)
    async with serving({"auth": {"tokenFile": str(server_token)}}) as s:
        argv = ["submit", "-f", str(manifest), "--server", s.address, "-o", "json", *extra]
        assert await asyncio.to_thread(cli.main, argv) == status
    out, err = capsys.readouterr()
    assert said in (out if status == 0 else err)


async def test_read_only_commands_need_no_token(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    server_token = tmp_path / "server-token"
    server_token.write_text(TOKEN)
    async with serving({"auth": {"tokenFile": str(server_token)}}) as s:
        assert await asyncio.to_thread(cli.main, ["nodes", "--server", s.address, "-o", "json"]) == 0
    assert '"name": "a"' in capsys.readouterr().out
