"""A plugin that fails names itself and its extension point (issue 31).

Whether it raises or returns an Error status, the pod's decision, ``berth
why``, the FailedScheduling event and the gRPC status (INTERNAL, never
INVALID_ARGUMENT) carry kube-scheduler's wording for that extension point
(``pkg/scheduler/framework/runtime/framework.go`` v1.37.2: ``running
PreFilter plugin %q: %w``, ``running %q filter plugin: %w``, ...).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

import grpc
import numpy as np
import pytest

from berth import testing
from berth.adapters.grpc import edge
from berth.framework import interface as fw
from berth.framework.decision import DecisionKind
from berth.framework.plugin_errors import PluginError
from berth.scheduling import visibility
from berth.testing import make_node, make_pod
from tests.loop.conftest import make_config, running


class Boom(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class Case:
    point: str  # the configuration's extension point key
    method: str
    want: str  # the message's plugin part, {message} standing for what the plugin said
    fits: bool = True  # False: the pod fits no node (PostFilter runs only then)


CASES = [
    Case("preEnqueue", "pre_enqueue", 'running PreEnqueue plugin "Faulty": {message}'),
    Case("preFilter", "pre_filter", 'running PreFilter plugin "Faulty": {message}'),
    Case("filter", "filter", 'running "Faulty" filter plugin: {message}'),
    Case("postFilter", "post_filter", 'running PostFilter plugin "Faulty": {message}', fits=False),
    Case("preScore", "pre_score", 'running PreScore plugin "Faulty": {message}'),
    Case("score", "score", 'running Score plugins: plugin "Faulty" failed with: {message}'),
    Case("reserve", "reserve", 'running Reserve plugin "Faulty": {message}'),
    Case("permit", "permit", 'running Permit plugin "Faulty": {message}'),
    Case("preBind", "pre_bind", 'running PreBind plugin "Faulty": {message}'),
    Case("bind", "bind", 'running Bind plugin "Faulty": {message}'),
]

ERROR = fw.Status.error("disk on fire")


def _faulty(method: str, raises: bool) -> type:
    """A plugin named Faulty extending one point, failing there."""

    def fail() -> fw.Status:
        if raises:
            raise Boom("disk on fire")
        return ERROR

    impls: dict[str, Callable[..., Any]] = {
        "pre_enqueue": lambda self, pod: fail(),
        "pre_filter": lambda self, state, pod, nodes: fw.PreFilterResult(fail()),
        "filter": lambda self, state, pod, nodes, rows: fw.NodeVerdicts.fail_where(np.ones(len(rows), bool), fail()),
        "post_filter": lambda self, state, pod, nodes, failures: fw.PostFilterResult(fail()),
        "pre_score": lambda self, state, pod, nodes, rows: fail(),
        "reserve": lambda self, state, pod, node: fail(),
        "unreserve": lambda self, state, pod, node: None,
        "permit": lambda self, state, pod, node: (fail(), 0.0),
    }

    async def pre_bind(self: object, state: fw.CycleState, pod: object, node: str) -> fw.Status:
        return fail()

    def score(self: object, state: fw.CycleState, pod: object, nodes: object, rows: Any) -> Any:
        fail()
        raise Boom("disk on fire")  # a Score plugin has no status to return

    attrs: dict[str, Any] = {"NAME": "Faulty", "Args": None, "__init__": lambda self, args, handle: None}
    if method == "score":
        attrs["score"] = score
    elif method in ("pre_bind", "bind"):
        attrs[method] = pre_bind
    else:
        attrs[method] = impls[method]
        if method == "reserve":
            attrs["unreserve"] = impls["unreserve"]
    return type("Faulty", (), attrs)


#: Every point, raising and returning an Error status; a Score plugin returns scores, not a status.
FAILURES = [
    pytest.param(case, raises, id=f"{case.point}-{'raises' if raises else 'returns Error'}")
    for case in CASES
    for raises in (True, False)
    if raises or case.method != "score"
]


@pytest.mark.parametrize(("case", "raises"), FAILURES)
async def test_a_failing_plugin_is_named_with_its_extension_point(case: Case, raises: bool) -> None:
    testing.register(_faulty(case.method, raises))
    cfg = make_config(profiles=[{"schedulerName": "berth", "plugins": {case.point: {"enabled": [{"name": "Faulty"}]}}}])
    said = "Boom: disk on fire" if raises else "disk on fire"
    want = case.want.format(message=said)
    async with running(cfg) as berth:
        berth.nodes(*(make_node(f"n{i}", cpu="2", memory="8Gi", pods=110) for i in range(2)))
        berth.pods(make_pod("p", scheduler_name="berth", requests={"cpu": "1" if case.fits else "3"}))
        await asyncio.sleep(0.5)  # one attempt (virtual time); the error's backoff is 1 s
        d = berth.decision("default/p")
        assert want in d.message, d
        assert berth.node_of("default/p") == ""
        if case.point != "postFilter":  # PostFilter's message ends a FitError, as upstream's
            assert d.message == want
            assert [(r.plugin, r.error) for r in d.reasons] == [("Faulty", True)], d.reasons
        if case.point == "preEnqueue":
            assert d.kind == DecisionKind.GATED  # a gated pod gets no FailedScheduling event
        else:
            assert ("default/p", "FailedScheduling", d.message) in berth.cluster.events
        why = visibility.why(berth.core, "default/p")
        assert any(want in b.message for b in why.blockers), why
        assert want in why.summary, why


@pytest.mark.parametrize(
    ("method", "answer", "want"),
    [
        pytest.param(
            "score",
            lambda rows: np.zeros(len(rows) + 1, dtype=np.int64),
            'running Score plugins: plugin "Faulty" failed with: returned 3 scores for 2 nodes',
            id="more scores than nodes",
        ),
        pytest.param(
            "score",
            lambda rows: np.full(len(rows), 49.5),
            'running Score plugins: plugin "Faulty" failed with: returned np.float64(49.5): '
            "scores are whole numbers (round them)",
            id="fractional scores are refused, not truncated",
        ),
        pytest.param(
            "score",
            lambda rows: ["high"] * len(rows),
            'running Score plugins: plugin "Faulty" failed with: returned <U4 scores, not integers',
            id="scores that are not numbers",
        ),
        pytest.param(
            "score",
            lambda rows: np.full(len(rows), 101),
            'applying score defaultWeights on Score plugins: plugin "Faulty" returns an invalid score 101, '
            "it should in the range of [0, 100] after normalizing (scores 101..101)",
            id="scores out of range",
        ),
        pytest.param(
            "filter",
            lambda rows: fw.NodeVerdicts(np.ones(len(rows) + 3, dtype=bool)),
            'running "Faulty" filter plugin: returned 5 verdicts for 2 nodes',
            id="more verdicts than nodes",
        ),
        pytest.param(
            "filter",
            lambda rows: [True] * len(rows),
            'running "Faulty" filter plugin: returned list, not NodeVerdicts',
            id="not NodeVerdicts",
        ),
    ],
)
async def test_a_wrong_shaped_answer_is_the_plugins_error(method: str, answer: Callable[[Any], Any], want: str) -> None:
    def run(self: object, state: object, pod: object, nodes: object, rows: Any) -> Any:
        return answer(rows)

    testing.register(
        type("Faulty", (), {"NAME": "Faulty", "Args": None, "__init__": lambda s, a, h: None, method: run})
    )
    cfg = make_config(profiles=[{"schedulerName": "berth", "plugins": {method: {"enabled": [{"name": "Faulty"}]}}}])
    async with running(cfg) as berth:
        berth.nodes(*(make_node(f"n{i}", cpu="2", memory="8Gi", pods=110) for i in range(2)))
        berth.pods(make_pod("p", scheduler_name="berth", requests={"cpu": "1"}))
        await asyncio.sleep(0.5)
        assert berth.decision("default/p").message == want
        # Explain (gRPC Explain, berth explain) fails the same way, answered INTERNAL.
        with pytest.raises(PluginError) as e:
            testing.Cluster(config=cfg, nodes=list(berth.cluster.nodes.values())).explain(
                make_pod("q", scheduler_name="berth", requests={"cpu": "1"})
            )
        assert str(e.value) == want
        assert edge.status_of(e.value) == (grpc.StatusCode.INTERNAL, f"internal error: PluginError: {want}")


def test_a_plugin_error_is_not_a_client_error() -> None:
    err = PluginError(fw.Status.error('running "Faulty" filter plugin: boom', plugin="Faulty"), "Filter")
    assert not isinstance(err, ValueError)
    assert (err.plugin, err.point) == ("Faulty", "Filter")
    assert edge.status_of(err)[0] == grpc.StatusCode.INTERNAL


async def test_a_raising_plugin_is_logged_once_with_its_own_traceback(caplog: pytest.LogCaptureFixture) -> None:
    testing.register(_faulty("filter", raises=True))
    cfg = make_config(profiles=[{"schedulerName": "berth", "plugins": {"filter": {"enabled": [{"name": "Faulty"}]}}}])
    async with running(cfg) as berth:
        berth.nodes(make_node("n0", cpu="2", memory="8Gi", pods=110))
        berth.pods(make_pod("p", scheduler_name="berth", requests={"cpu": "1"}))
        await asyncio.sleep(0.5)  # one attempt
    traced = [r for r in caplog.records if r.exc_info]
    assert len(traced) == 1, [r.getMessage() for r in traced]
    assert traced[0].getMessage() == "Filter plugin Faulty failed for pod default/p"
    assert traced[0].exc_info is not None and isinstance(traced[0].exc_info[1], Boom)
    lines = [r.getMessage() for r in caplog.records if r.name == "berth.scheduling.loop"]
    assert lines == ['error scheduling pod default/p; retrying: running "Faulty" filter plugin: Boom: disk on fire']
