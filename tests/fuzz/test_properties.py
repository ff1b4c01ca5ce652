"""Property-based tests (Hypothesis) over the same target and checks as the
mutation fuzzers: any JSON value anywhere in a realistic extender request,
any string as a quantity, any bytes as any gRPC request. ``make test`` runs
the "default" profile's sample; ``make fuzz`` the "fuzz" profile's."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import mutate, runner
from tests.fuzz.corpus import GrpcCase, HttpCase, a_pod
from tests.fuzz.harness import POOL_NAMES, POOL_NODES, Tally, Target, serving
from tests.http.payloads import args

pytestmark = pytest.mark.fuzz


class Session:
    """One target for every example of a module: its event loop advances
    only inside :meth:`run`, which is all the servers need."""

    def __init__(self) -> None:
        self.runner = asyncio.Runner()
        self._serving = serving()
        self.target: Target = self.runner.run(self._serving.__aenter__())

    def run(self, coro: Any) -> Any:
        return self.runner.run(coro)

    def close(self) -> None:
        self.runner.run(self._serving.__aexit__(None, None, None))
        self.runner.close()


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    s = Session()
    yield s
    s.close()


def _check_http(session: Session, case: HttpCase) -> None:
    tally = Tally("property", 0)
    status, body = session.run(runner.send_http(session.target, case))
    runner.check_http(case, status, body, tally, 0)
    for v in session.target.invariants():
        tally.fail(f"invariant: {v}", index=0, what=case.what)
    assert not tally.failures, tally.report()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@given(value=json_values, where=st.integers(min_value=0), seed=st.integers(min_value=0, max_value=2**32))
def test_any_json_value_anywhere_in_a_request_gets_an_answer_below_500(
    session: Session, value: Any, where: int, seed: int
) -> None:
    rng = random.Random(seed)
    verb = rng.choice(("filter", "prioritize", "preempt"))
    tree: dict[str, Any] = (
        args(a_pod(rng), names=POOL_NAMES) if rng.random() < 0.5 else args(a_pod(rng), nodes=POOL_NODES[:3])
    )
    if verb == "preempt":
        tree = {"Pod": tree["Pod"], "NodeNameToMetaVictims": {"n0": {"Pods": [{"UID": "uid-default-resident-0"}]}}}
    slots = list(mutate.slots(tree))
    slot = slots[where % len(slots)]
    slot.container[slot.key] = value
    body = mutate.dumps(tree)
    _check_http(session, HttpCase(verb, "POST", f"/scheduler/{verb}", body, f"{slot.path} = {value!r:.80}"))


quantities = st.one_of(
    st.text(max_size=30),
    st.from_regex(r"\A[+-]?[0-9]{0,30}(\.[0-9]{0,30})?([eE][+-]?[0-9]{1,8}|[KMGTPE]i|[mkMGTPE])?\Z"),
)


@given(quantity=quantities, on_node=st.booleans(), verb=st.sampled_from(("filter", "prioritize")))
def test_any_string_as_a_quantity_gets_an_answer_below_500(
    session: Session, quantity: str, on_node: bool, verb: str
) -> None:
    rng = random.Random(0)
    if on_node:
        node = {**POOL_NODES[0], "status": {**POOL_NODES[0]["status"], "allocatable": {"cpu": quantity}}}
        tree = args(a_pod(rng), nodes=[node, POOL_NODES[1]])
    else:
        pod = a_pod(rng)
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = quantity
        tree = args(pod, names=POOL_NAMES)
    body = mutate.dumps(tree)
    _check_http(session, HttpCase(verb, "POST", f"/scheduler/{verb}", body, f"quantity {quantity!r}"))


@given(method=st.sampled_from(sorted(runner.RESPONSES)), data=st.binary(max_size=256))
def test_any_bytes_as_a_grpc_request_are_never_unknown_or_internal(session: Session, method: str, data: bytes) -> None:
    tally = Tally("property", 0)
    case = GrpcCase(method, data, "bytes", method.endswith(("WatchDecisions", "WatchDecisionBatches")))
    code, details, resp = session.run(runner.send_grpc(session.target, case))
    runner.check_grpc(session.target, case, code, details, resp, tally, 0)
    for v in session.target.invariants():
        tally.fail(f"invariant: {v}", index=0, what=case.what)
    assert not tally.failures, tally.report()
