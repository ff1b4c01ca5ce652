"""`--validate=strict|warn|ignore` on every command that reads manifests
(kubectl's flag): a misspelt field stops `berth explain/submit -f` and
`berth serve --cluster` with one line and exit status 2, before any
connection or port."""

from __future__ import annotations

from pathlib import Path

import pytest

from berth.cli.main import main
from tests.e2e.controlplane.bed import free_port

TYPO = """\
apiVersion: v1
kind: Pod
metadata: {name: big}
spec:
  containers:
  - name: c
    resources:
      requets: {cpu: '64'}
"""
MESSAGE = 'document 1 (Pod big): spec.containers[0].resources.requets: unknown field; did you mean "requests"?'


@pytest.fixture
def typo(tmp_path: Path) -> Path:
    path = tmp_path / "typo.yaml"
    path.write_text(TYPO)
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["explain", "-f", "{file}"],
        ["explain", "-f", "{file}", "--validate=strict"],
        ["submit", "-f", "{file}", "--wait"],
    ],
    ids=["explain", "explain strict", "submit"],
)
def test_a_misspelt_field_is_one_line_and_exit_2(
    typo: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    server = f"127.0.0.1:{free_port()}"  # nothing listens: loading must fail first
    code = main([a.format(file=typo) for a in argv] + ["--server", server])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines() == [f"berth: {typo}: {MESSAGE}"]


def test_serve_refuses_a_misspelt_cluster_file_before_binding(typo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["serve", "--cluster", str(typo), "--http-port", "0", "--grpc-port", "0"])
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [f"berth: invalid cluster file: {typo}: {MESSAGE}"]


@pytest.mark.parametrize("mode", ["warn", "ignore"])
def test_warn_and_ignore_get_past_the_manifest(
    typo: Path, mode: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The pod loads (the misspelt field left out) and the command goes on to
    call Berth, which is not there."""
    server = f"127.0.0.1:{free_port()}"
    code = main(["explain", "-f", str(typo), f"--validate={mode}", "--server", server])
    assert code == 1
    assert "cannot reach Berth" in capsys.readouterr().err
    warnings = [r.getMessage() for r in caplog.records if r.name == "berth.cluster.manifests"]
    assert warnings == ([f"{typo}: {MESSAGE} (--validate=warn: left out)"] if mode == "warn" else [])


def test_an_unknown_validate_value_is_a_usage_error(typo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["explain", "-f", str(typo), "--validate=lenient"])
    assert exit_.value.code == 2
    assert "invalid choice: 'lenient'" in capsys.readouterr().err
