"""The fuzzers' generators: a seed replays a request exactly, and a bounded
sample already produces every kind of input of the attacker's report."""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable

import pytest

from tests.fuzz import corpus, mutate
from tests.fuzz.corpus import HttpCase
from tests.fuzz.harness import MAX_BODY

pytestmark = pytest.mark.fuzz

SAMPLE = 1500  # the bounded HTTP sample `make test` sends


@functools.cache
def sample() -> list[HttpCase]:
    return [corpus.http_case(random.Random(f"20261123:{i}")) for i in range(SAMPLE)]


def test_a_seed_and_an_index_replay_the_same_request() -> None:
    for i in range(50):
        a, b = corpus.http_case(random.Random(f"7:{i}")), corpus.http_case(random.Random(f"7:{i}"))
        assert (a.body, a.headers, a.what, a.raw) == (b.body, b.headers, b.what, b.raw)
        strings = corpus.grpc_strings([])
        g, h = corpus.grpc_case(random.Random(f"7:{i}"), strings), corpus.grpc_case(random.Random(f"7:{i}"), strings)
        assert (g.method, g.request, g.what) == (h.method, h.request, h.what)


@pytest.mark.parametrize(
    ("kind", "found"),
    [
        ("invalid quantity strings", lambda c: b'"1.5.3Gi"' in c.body or b'"1e400"' in c.body),
        ("1e300000", lambda c: b"1e300000" in c.body),
        ("deeply nested JSON", lambda c: b"[" * 1000 in c.body or b'{"a":' * 1000 in c.body),
        ("integers beyond int64", lambda c: b"9223372036854775808" in c.body or b"18446744073709551616" in c.body),
        ("integers beyond 4300 digits", lambda c: b"0" * 4300 in c.body or b"9" * 4400 in c.body),
        ("non-UTF-8 bytes", lambda c: "non-UTF-8" in c.what),
        ("lone surrogates", lambda c: b"\\ud800" in c.body),
        ("duplicated keys", lambda c: "duplicate key" in c.what),
        ("oversized bodies", lambda c: c.plain_length > MAX_BODY),
        ("gzip bombs", lambda c: "gzip bomb" in c.what),
        ("truncated bodies", lambda c: "truncate" in c.what),
        ("protocol-level errors", lambda c: c.raw is not None),
    ],
)
def test_the_bounded_sample_produces_every_kind_of_attack(kind: str, found: Callable[[HttpCase], bool]) -> None:
    assert any(found(c) for c in sample()), f"no {kind} in {SAMPLE} requests"


def test_duplicated_nodes_in_full_object_mode_are_generated() -> None:
    for case in sample():
        if case.what != "valid" or case.verb not in ("filter", "prioritize"):
            continue
        doc = json.loads(case.body)
        items = (doc.get("Nodes") or {}).get("items") or []
        names = [n["metadata"]["name"] for n in items]
        if len(names) != len(set(names)):
            return
    raise AssertionError("no valid full-object request with a node listed twice")


def test_dumps_writes_what_json_cannot() -> None:
    tree = {"a": mutate.Raw("1e400"), "b": mutate.Pairs([("k", 1), ("k", 2)]), "c": "\ud800", "d": 2**64}
    assert mutate.dumps(tree) == b'{"a":1e400,"b":{"k":1,"k":2},"c":"\\ud800","d":18446744073709551616}'


def test_every_grpc_method_is_fuzzed() -> None:
    """A method added to the protos without a fuzz builder would go untested."""
    from berth.api.v1 import cluster_pb2, scheduler_pb2

    methods = {
        f"{svc}/{m.name}"
        for svc, mod in (("Scheduler", scheduler_pb2), ("Cluster", cluster_pb2))
        for m in mod.DESCRIPTOR.services_by_name[svc].methods
    }
    assert set(corpus._BUILDERS) == methods
    assert set(corpus._WEIGHTS) == methods
