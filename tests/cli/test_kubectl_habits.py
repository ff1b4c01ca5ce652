"""The CLI as a kubectl user expects it: ``berth get pods|pod NAME|nodes|
queues|podgroups``, ``-o json|yaml|wide|name`` on every read command,
``--server HOST`` meaning port 50051, ``$BERTH_SERVER`` and a contexts file,
connection flags kept out of the way, examples and exit codes on every help
page — and client commands that never load the scheduler."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml

from berth.cli import common, contexts
from berth.cli import main as cli
from berth.cluster import model
from berth.testing import make_pod
from tests.cli.test_inspect_cli import berth
from tests.grpc.conftest import Served, serving

ROOT = Path(__file__).parents[2]


@pytest.fixture
async def cluster() -> AsyncIterator[Served]:
    """Nodes a (4 cpu) and b (1 cpu); pods p (pending) and b (on a) in
    default, t in team; a gang g of two in team."""
    async with serving(None, queues=[{"name": "q", "max": {"cpu": "2"}}]) as s:
        s.core.on_pod_group(
            model.PodGroup(metadata=model.ObjectMeta(name="g", namespace="team"), spec=model.PodGroupSpec(min_member=2))
        )
        s.feed.upsert_pods(
            [
                make_pod("p", scheduler_name="berth", requests={"cpu": "1"}),
                make_pod("b", scheduler_name="berth", node_name="a"),
                make_pod("t", namespace="team", scheduler_name="berth"),
                make_pod("g0", namespace="team", scheduler_name="berth", labels={"scheduling.x-k8s.io/pod-group": "g"}),
            ]
        )
        yield s


# ---------------------------------------------------------------- berth get

GET_CASES: list[tuple[str, list[str], list[str]]] = [
    ("pods, the default namespace", ["get", "pods", "-o", "name"], ["pod/p"]),
    ("pods everywhere, by namespace then name", ["get", "po", "-A", "-o", "name"], ["pod/p", "pod/g0", "pod/t"]),
    ("one pod by NAME", ["get", "pod", "p", "-o", "name"], ["pod/p"]),
    ("one pod by NAMESPACE/NAME", ["get", "pod", "team/t", "-o", "name"], ["pod/t"]),
    ("one pod in -n", ["get", "pod", "t", "-n", "team", "-o", "name"], ["pod/t"]),
    ("nodes", ["get", "nodes", "-o", "name"], ["node/a", "node/b"]),
    ("one node", ["get", "no", "b", "-o", "name"], ["node/b"]),
    ("queues", ["get", "queues", "-o", "name"], ["queue/q"]),
    ("pod groups", ["get", "podgroups", "-n", "team", "-o", "name"], ["podgroup/g"]),
    ("the old spelling of get nodes", ["nodes", "-o", "name"], ["node/a", "node/b"]),
    ("the old spelling of get queues", ["queues", "q", "-o", "name"], ["queue/q"]),
]


@pytest.mark.parametrize(("argv", "lines"), [c[1:] for c in GET_CASES], ids=[c[0] for c in GET_CASES])
async def test_get_lists_and_names_every_resource(
    cluster: Served, capsys: pytest.CaptureFixture[str], argv: list[str], lines: list[str]
) -> None:
    status, out, err = await berth(capsys, *argv, "--server", cluster.address)
    assert (status, out.splitlines()) == (0, lines), err


async def test_get_one_thing_prints_an_object_and_a_listing_a_list(
    cluster: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    _, one, _ = await berth(capsys, "get", "pod", "p", "-o", "json", "--server", cluster.address)
    _, many, _ = await berth(capsys, "get", "pods", "-o", "yaml", "--server", cluster.address)
    assert json.loads(one)["name"] == "p" and json.loads(one)["requests"] == {"cpu": "1"}
    assert [d["name"] for d in yaml.safe_load(many)] == ["p"]


async def test_get_podgroups_shows_members_present_placed_and_waiting(
    cluster: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = await berth(capsys, "get", "podgroups", "-A", "--server", cluster.address)
    header, row = (line.split(None, 10) for line in out.splitlines())
    assert status == 0
    assert header[:3] == ["NAMESPACE", "NAME", "DIALECT"]
    assert header[3:] == ["PHASE", "MIN", "MEMBERS", "PLACED", "WAITING", "BOUND", "PENDING", "REASON"]
    assert row[:10] == ["team", "g", "scheduler-plugins", "Pending", "2", "1", "0", "0", "0", "1"]
    assert row[10].startswith("pod group")  # Coscheduling's word on the member held back


async def test_a_pod_that_is_not_there_is_not_found(cluster: Served, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = await berth(capsys, "get", "pod", "ghost", "--server", cluster.address)
    assert (status, out) == (1, "")
    assert err == "berth: not_found: pod default/ghost not found among the pods Berth schedules\n"


# ---------------------------------------------------------------- help pages


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield " ".join(("berth", *path)), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


PAGES = dict(_parsers(cli._parser()))
READ_COMMANDS = ["berth get", "berth nodes", "berth queues", "berth why", "berth whatif", "berth explain"]


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_help_page_has_examples(page: str) -> None:
    text = PAGES[page].format_help()
    examples = text[text.index("\nExamples:\n") :] if "\nExamples:\n" in text else ""
    assert "berth " in examples, page


@pytest.mark.parametrize("page", READ_COMMANDS)
def test_every_read_command_prints_json_yaml_wide_and_name_and_says_what(page: str) -> None:
    (output,) = (a for a in PAGES[page]._actions if "-o" in a.option_strings)
    assert {"json", "yaml", "wide", "name"} <= set(output.choices or ())
    assert output.help and all(f"{o}:" in output.help or f"{o}," in output.help for o in ("wide", "json", "name"))


@pytest.mark.parametrize(
    ("page", "words"),
    [
        ("berth", ["Exit status:", "  0 ", "  1 ", "  2 "]),
        ("berth why", ["Exit status: 0 when the pod is Bound, 1"]),
        ("berth submit", ["Exit status: 0"]),
    ],
)
def test_exit_codes_are_documented(page: str, words: list[str]) -> None:
    text = PAGES[page].format_help()
    assert all(w in text for w in words), text


def test_tls_and_token_flags_stay_off_the_help_pages_but_parse_and_are_listed_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = PAGES["berth get"].format_help()
    assert "--server" in text and "--context" in text
    assert not any(flag in text for flag in ("--ca-file", "--cert-file", "--key-file", "--token-file", "--tls "))
    args = cli._parser().parse_args(["get", "pods", "--ca-file", "ca.pem", "--token-file", "t"])
    assert (args.ca_file, args.token_file) == ("ca.pem", "t")
    assert cli.main(["options"]) == 0
    listed = capsys.readouterr().out
    assert all(
        flag in listed for flag in ("--ca-file", "--cert-file", "--key-file", "--token-file", "--tls", "BERTH_SERVER")
    )


# ---------------------------------------------------------------- where the server is


@pytest.fixture
def config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "berth" / "config"
    monkeypatch.setenv(contexts.PATH_ENV, str(path))
    monkeypatch.delenv(common.SERVER_ENV, raising=False)
    monkeypatch.delenv(common.TOKEN_ENV, raising=False)
    return path


SETTINGS_CASES: list[tuple[str, list[str], dict[str, str], str, str | None]] = [
    ("nothing: localhost", [], {}, "localhost:50051", None),
    ("--server HOST means port 50051", ["--server", "127.0.0.1"], {}, "127.0.0.1:50051", None),
    ("--server HOST:PORT", ["--server", "127.0.0.1:7"], {}, "127.0.0.1:7", None),
    ("$BERTH_SERVER", [], {"BERTH_SERVER": "berth.example"}, "berth.example:50051", None),
    ("--server over $BERTH_SERVER", ["--server", "h:1"], {"BERTH_SERVER": "berth.example"}, "h:1", None),
    ("the current context", [], {"context": "prod"}, "prod.example:443", "ca.pem"),
    ("$BERTH_SERVER over the current context", [], {"context": "prod", "BERTH_SERVER": "e:1"}, "e:1", None),
    (
        "--context over $BERTH_SERVER",
        ["--context", "local"],
        {"context": "prod", "BERTH_SERVER": "e:1"},
        "localhost:50051",
        None,
    ),
    ("--server keeps a named context's TLS", ["--context", "prod", "--server", "h:2"], {}, "h:2", "ca.pem"),
    ("TLS flags over the context's", ["--ca-file", "mine.pem"], {"context": "prod"}, "prod.example:443", "mine.pem"),
]


@pytest.mark.parametrize(
    ("flags", "env", "target", "ca"), [c[1:] for c in SETTINGS_CASES], ids=[c[0] for c in SETTINGS_CASES]
)
def test_the_server_comes_from_flags_then_environment_then_contexts(
    config_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    flags: list[str],
    env: dict[str, str],
    target: str,
    ca: str | None,
) -> None:
    cli.main(["config", "set-context", "prod", "--server", "prod.example:443", "--ca-file", "ca.pem"])
    cli.main(["config", "set-context", "local", "--server", "localhost"])
    cli.main(["config", "use-context", env.get("context", "local")])
    if "context" not in env:
        cli.main(["config", "delete-context", "local"])  # no current context
    if "BERTH_SERVER" in env:
        monkeypatch.setenv("BERTH_SERVER", env["BERTH_SERVER"])
    s = common.settings(cli._parser().parse_args(["get", "pods", *flags]))
    assert (berth_client_target(s.server), s.tls.ca_file if s.tls else None) == (target, ca)


def berth_client_target(server: str) -> str:
    import berth_client

    return berth_client.target(server)


async def test_berth_server_and_a_context_reach_berth_without_server_flags(
    cluster: Served, config_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BERTH_SERVER", cluster.address)
    status, out, _ = await berth(capsys, "get", "nodes", "-o", "name")
    assert (status, out) == (0, "node/a\nnode/b\n")
    monkeypatch.delenv("BERTH_SERVER")
    assert cli.main(["config", "set-context", "here", "--server", cluster.address]) == 0
    capsys.readouterr()
    status, out, _ = await berth(capsys, "get", "nodes", "-o", "name", "--context", "here")
    assert (status, out) == (0, "node/a\nnode/b\n")


def test_contexts_are_kept_as_kubectl_keeps_them(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        cli.main(["config", "set-context", "prod", "--server", "berth.example:443", "--tls", "--token-file", "/t"]) == 0
    )
    assert cli.main(["config", "set-context", "local", "--server", "localhost", "--current"]) == 0
    capsys.readouterr()
    assert cli.main(["config", "get-contexts"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert rows == [
        ["CURRENT", "NAME", "SERVER", "TLS", "TOKEN"],
        ["prod", "berth.example:443", "system", "CAs", "/t"],
        ["*", "local", "localhost", "-", "-"],
    ]
    assert cli.main(["config", "use-context", "prod"]) == 0
    assert cli.main(["config", "current-context"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "prod"
    doc = yaml.safe_load(config_file.read_text())
    assert doc["currentContext"] == "prod" and doc["contexts"][0]["tls"] == {}
    assert oct(config_file.stat().st_mode & 0o777) == "0o600"
    assert cli.main(["config", "use-context", "nowhere"]) == 1
    assert (
        capsys.readouterr().err
        == "berth: context 'nowhere' not found (contexts: prod, local; berth config set-context)\n"
    )


def test_a_contexts_file_berth_cannot_read_is_one_line(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config_file.parent.mkdir(parents=True)
    config_file.write_text("contexts:\n- name: x\n  sever: h\n")
    assert cli.main(["get", "pods"]) == 1
    err = capsys.readouterr().err
    assert err == f"berth: {config_file}: contexts[0].sever: unknown field (fields: name, server, tls, tokenFile)\n"


# ---------------------------------------------------------------- start-up

CLIENT_COMMANDS = [
    ["version"],
    ["get", "nodes"],
    ["get", "pods", "-A", "-o", "yaml"],
    ["nodes", "-o", "json"],
    ["queues"],
    ["why", "p"],
    ["explain", "-f", "examples/pods/web.yaml"],
    ["whatif", "-f", "examples/pods/web.yaml", "--replicas", "1"],
    ["submit", "-f", "examples/pods/batch.yaml", "-o", "json"],
    ["cancel", "default/p"],
]
#: What a client command must never load: the scheduler (numpy, the
#: framework, the configuration) and the msgspec model behind manifests.
SCHEDULER = (
    "numpy",
    "msgspec",
    "berth.config",
    "berth.framework",
    "berth.app",
    "berth.scheduling",
    "berth.cluster.model",
    "berth.cluster.manifests",
    "berth.adapters",
)


async def test_client_commands_load_no_scheduler(cluster: Served, tmp_path: Path) -> None:
    """Each command in a fresh interpreter, against a running Berth; what
    it imported is read from sys.modules (the time it takes is bench's)."""
    probe = (
        "import sys, json\n"
        "from berth.cli import main\n"
        "status = main.main(sys.argv[1:])\n"
        f"loaded = sorted(m for m in sys.modules if m.startswith({SCHEDULER!r}))\n"
        "print(json.dumps([status, loaded]), file=sys.stderr)\n"
    )
    env = {**os.environ, "BERTH_CONFIG": str(tmp_path / "none")}
    for argv in CLIENT_COMMANDS:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", probe, *argv, "--server", cluster.address,
            cwd=ROOT, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await proc.communicate()
        status, loaded = json.loads(err.decode().splitlines()[-1])
        assert (argv, loaded) == (argv, []), err.decode()
        assert status in (0, 1), (argv, err.decode())


def test_serve_still_loads_the_service_when_it_runs(tmp_path: Path) -> None:
    """The other side of the lazy import: `serve` reaches the configuration."""
    code = (
        "import sys; from berth.cli import main; "
        f"status = main.main(['serve', '--config', {str(tmp_path / 'missing.yaml')!r}]); "
        "print(status, 'berth.config' in sys.modules)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert res.stdout.split() == ["2", "True"], res.stderr
    assert res.stderr.startswith("berth: invalid configuration: ")
