"""RunPreBindPreFlights: whether any PreBind plugin has work for the pod
(``framework/runtime/framework_test.go`` v1.37.2, TestPreBindPreFlightPlugins)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from berth import testing
from berth.cache.infos import PodInfo
from berth.framework import interface as fw
from berth.framework.handle import Handle

INJECTED = "injected status"


def pre_bind_plugin(name: str, code: fw.Code | None) -> type:
    """A PreBind plugin whose pre-flight answers ``code`` (None: it has no pre-flight)."""

    class Plugin:
        NAME: ClassVar[str] = name
        Args: ClassVar[None] = None

        def __init__(self, args: None, handle: Handle) -> None:
            pass

        async def pre_bind(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
            return fw.SUCCESS

    if code is not None:

        def pre_bind_pre_flight(self: Any, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
            return fw.Status(code, (INJECTED,) if code != fw.Code.SUCCESS else ())

        Plugin.pre_bind_pre_flight = pre_bind_pre_flight  # type: ignore[attr-defined]
    return Plugin


CASES = [
    pytest.param([], fw.Status(fw.Code.SKIP), set(), id="Skip when there's no PreBind Plugin"),
    pytest.param(
        [("TestPlugin1", fw.Code.SKIP), ("TestPlugin2", fw.Code.SUCCESS)],
        fw.SUCCESS,
        {"TestPlugin1"},
        id="Success when PreBindPreFlight returns Success",
    ),
    pytest.param(
        [("TestPlugin1", fw.Code.SKIP), ("TestPlugin2", fw.Code.SKIP)],
        fw.Status(fw.Code.SKIP),
        {"TestPlugin1", "TestPlugin2"},
        id="Skip when all PreBindPreFlight returns Skip",
    ),
    pytest.param(
        [("TestPlugin1", fw.Code.SKIP), ("TestPlugin2", fw.Code.ERROR)],
        fw.Status.error(f'running PreBindPreFlight "TestPlugin2": {INJECTED}'),
        None,
        id="Error when PreBindPreFlight returns Error",
    ),
    pytest.param(
        [("TestPlugin", fw.Code.UNSCHEDULABLE)],
        fw.Status.error(
            'PreBindPreFlight TestPlugin returned "Unschedulable", which is unsupported. '
            "It is supposed to return Success, Skip, or Error status"
        ),
        None,
        id="Error when PreBindPreFlight returns Unschedulable",
    ),
    # Berth's own: a PreBind plugin without a pre-flight may have work.
    pytest.param(
        [("TestPlugin1", fw.Code.SKIP), ("NoPreFlight", None)],
        fw.SUCCESS,
        {"TestPlugin1"},
        id="Success when a PreBind plugin has no pre-flight",
    ),
]


@pytest.mark.parametrize(("plugins", "want", "skipped"), CASES)
def test_pre_bind_pre_flights(
    plugins: list[tuple[str, fw.Code | None]], want: fw.Status, skipped: set[str] | None
) -> None:
    for name, code in plugins:
        testing.register(pre_bind_plugin(name, code))
    profile = {
        "schedulerName": "berth",
        "plugins": {"preBind": {"enabled": [{"name": n} for n, _ in plugins], "disabled": [{"name": "*"}]}},
    }
    cluster = testing.Cluster(config=testing.parse_config({"profiles": [profile]}))
    fwk = cluster.berth.core.framework_for("berth")
    state = fw.CycleState()
    got = fwk.run_pre_bind_pre_flights(state, PodInfo.of(testing.make_pod("p")), "")
    assert got == want
    if skipped is not None:
        # RunPreBindPlugins then skips what said Skip (SetSkipPreBindPlugins).
        assert state.skip_pre_bind == skipped
