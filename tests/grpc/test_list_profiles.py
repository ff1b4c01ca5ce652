"""ListProfiles / `berth get profiles`: the plugins a running Berth runs,
as it resolved them (issue 31: there was no way to list them short of a
95-line configuration dump)."""

from __future__ import annotations

import json

import pytest

from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from tests.grpc.conftest import serving

pytestmark = pytest.mark.asyncio

PROFILES = [
    {"schedulerName": "berth", "aliases": ["volcano"]},
    {
        "schedulerName": "packer",
        "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}],
        "plugins": {"multiPoint": {"disabled": [{"name": "ImageLocality"}]}},
    },
]


async def test_profiles_are_listed_as_resolved_with_their_plugins_weights_and_args() -> None:
    async with serving(None, profiles=PROFILES, extender={"profile": "berth"}) as s, s.channel() as ch:
        resp = await scheduler_pb2_grpc.SchedulerStub(ch).ListProfiles(scheduler_pb2.ListProfilesRequest())
    by_name = {p.scheduler_name: p for p in resp.profiles}
    assert list(by_name) == ["berth", "packer"]
    berth, packer = by_name["berth"], by_name["packer"]
    assert list(berth.aliases) == ["volcano"] and list(packer.aliases) == []
    points = {e.extension_point: list(e.plugins) for e in berth.extension_points}
    assert points["filter"][:2] == ["NodeName", "NodeUnschedulable"]  # v1.37's order
    assert "ImageLocality" in points["score"]
    assert "ImageLocality" not in {n for e in packer.extension_points for n in e.plugins}
    assert dict(berth.weights)["TaintToleration"] == 3
    args = json.loads(packer.args_json["NodeResourcesFit"])
    assert args["scoringStrategy"]["type"] == "MostAllocated"
