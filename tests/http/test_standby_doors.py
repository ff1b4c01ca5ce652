"""A replica that stands by answers only what it knows: the HTTP doors
refuse the leader's state with 503 naming the leader, as gRPC does with
UNAVAILABLE (berth/adapters/grpc/security.py ``admit``). A postgres standby
(``standby_holds_nothing``: no state until it leads) refuses everything; a
Kubernetes standby, whose informers keep its cache, still answers the
extender's verbs and the node heat map."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from berth.adapters.http import dashboard
from berth.adapters.http.server import build_app
from berth.scheduling.core import Core
from tests.http.payloads import api_pod, args, dumps
from tests.http.test_extender_wire import NODES, make_berth

NOT_THE_LEADER = "not the leader (leader is berth-1): ask the leader"

#: (path, answered by a Kubernetes standby, answered by a postgres standby)
DASHBOARD = [
    ("/ui/api/whoami", True, False),
    ("/ui/api/nodes", True, False),
    ("/ui/api/queues", False, False),
    ("/ui/api/pods", False, False),
    ("/ui/api/gangs", False, False),
    ("/ui/api/decisions", False, False),
]


@pytest.fixture
def berth() -> Any:
    b = make_berth()
    b.core.leader = "berth-1"
    return b


@pytest.mark.parametrize("holds_nothing", [False, True], ids=["kubernetes standby", "postgres standby"])
async def test_the_extender_answers_on_a_kubernetes_standby_and_not_on_a_postgres_one(
    berth: Any, holds_nothing: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Core, "standby", property(lambda _: True))
    berth.core.standby_holds_nothing = holds_nothing
    async with TestClient(TestServer(build_app(berth.core, berth.extender))) as c:
        r = await c.post(
            "/scheduler/filter",
            data=dumps(args(api_pod(cpu="500m"), nodes=NODES)),
            headers={"Content-Type": "application/json"},
        )
        if holds_nothing:
            assert (r.status, NOT_THE_LEADER in await r.text()) == (503, True)
        else:
            assert r.status == 200, await r.text()


@pytest.mark.parametrize(("path", "kubernetes", "postgres"), DASHBOARD)
@pytest.mark.parametrize("holds_nothing", [False, True], ids=["kubernetes standby", "postgres standby"])
async def test_the_dashboard_refuses_the_leaders_state_on_a_standby(
    berth: Any, path: str, kubernetes: bool, postgres: bool, holds_nothing: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Core, "standby", property(lambda _: True))
    berth.core.standby_holds_nothing = holds_nothing
    async with TestClient(TestServer(dashboard.build_app(berth.core))) as c:
        r = await c.get(path)
        answered = postgres if holds_nothing else kubernetes
        if answered:
            assert r.status == 200, await r.text()
        else:
            assert r.status == 503 and NOT_THE_LEADER in await r.text()


async def test_the_leader_answers_every_door(berth: Any) -> None:
    berth.core.leader = None  # no election here: this replica leads
    async with TestClient(TestServer(dashboard.build_app(berth.core))) as c:
        for path, _, _ in DASHBOARD[:-1]:  # the stream would stay open
            assert (await c.get(path)).status == 200, path
