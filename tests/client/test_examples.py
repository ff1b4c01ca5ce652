"""The runnable examples of examples/clients, each against `berth serve` on
the demo cluster (as `make run` starts it), as a user would run them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import demo_berth_serve

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "examples" / "clients"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with demo_berth_serve() as (_, _, grpc_port, _):
        yield f"127.0.0.1:{grpc_port}"


def run(example: str, server: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / example), server], capture_output=True, text=True, cwd="/", timeout=90
    )


EXAMPLE_CASES: list[tuple[str, list[str]]] = [
    ("submit_and_wait.py", ["examples/worker-0 Bound ", "examples/worker-1 Bound ", "examples/report Bound "]),
    ("watch_decisions.py", ["examples/watched BOUND "]),
    (
        "feed_and_whatif.py",
        [
            "fed {'Node': 1}",
            "allocatable {'cpu': '16', 'example.com/fpga': '2', 'memory': '64Gi', 'pods': '110'}",
            "2 would fit, on ['batch-box-1']; stopped by: 0/51 nodes are available",
            "deleted 1",
        ],
    ),
    ("why_pending.py", ['"phase": "Unschedulable"', "runs only on a node with at least 1000 cpu", "cancelled"]),
    ("retry_and_resume.py", ["retry answers the same: True", "examples/retried BOUND "]),
]


@pytest.mark.parametrize(("example", "said"), EXAMPLE_CASES, ids=[c[0] for c in EXAMPLE_CASES])
def test_the_example_runs_and_says_what_it_should(server: str, example: str, said: list[str]) -> None:
    res = run(example, server)
    assert res.returncode == 0, res.stdout + res.stderr
    for words in said:
        assert words in res.stdout, res.stdout


def test_every_example_is_exercised() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(c[0] for c in EXAMPLE_CASES)
