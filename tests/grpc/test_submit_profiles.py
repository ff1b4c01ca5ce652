"""Standalone Submit takes only pods one of Berth's profiles schedules: a
pod naming no scheduler gets the only profile's name (as the API server
defaults schedulerName to the default scheduler's), and the answer says so;
a name no profile has — or no name when Berth has several profiles — is
refused naming the profiles, since nothing else would ever schedule it."""

from __future__ import annotations

from typing import Any

import pytest

from berth.api.v1 import model_pb2, scheduler_pb2, scheduler_pb2_grpc
from tests.grpc.conftest import serving

ONE = [{"schedulerName": "berth"}]
TWO = [{"schedulerName": "berth"}, {"schedulerName": "gpu"}]


def pod(name: str, scheduler: str = "", annotations: dict[str, str] | None = None) -> model_pb2.Pod:
    return model_pb2.Pod(
        metadata=model_pb2.ObjectMeta(name=name, annotations=annotations or {}),
        spec=model_pb2.PodSpec(scheduler_name=scheduler, containers=[model_pb2.Container(name="c")]),
    )


PROFILE_CASES: list[tuple[str, list[dict[str, Any]], model_pb2.Pod, bool, str, str]] = [
    (
        "no name, one profile: defaulted, and said",
        ONE,
        pod("p"),
        True,
        'spec.schedulerName defaulted to "berth", the only profile',
        "berth",
    ),
    ("a profile's name", TWO, pod("p", "gpu"), True, "", "gpu"),
    (
        "no name, several profiles: refused naming them",
        TWO,
        pod("p"),
        False,
        "pods[0].spec.schedulerName: Required value: Berth has several profiles (berth, gpu); name one",
        "",
    ),
    (
        "a name no profile has",
        ONE,
        pod("p", "default-scheduler"),
        False,
        'pods[0].spec.schedulerName: Unsupported value: "default-scheduler": supported values: "berth"',
        "",
    ),
    (
        "the legacy annotation names another scheduler",
        ONE,
        pod("p", annotations={"scheduler.alpha.kubernetes.io/name": "other"}),
        False,
        'pods[0].spec.schedulerName: Unsupported value: "other": supported values: "berth"',
        "",
    ),
]


@pytest.mark.parametrize(
    ("profiles", "sent", "accepted", "message", "scheduler"),
    [c[1:] for c in PROFILE_CASES],
    ids=[c[0] for c in PROFILE_CASES],
)
async def test_submit_takes_pods_only_for_berths_profiles(
    profiles: list[dict[str, Any]], sent: model_pb2.Pod, accepted: bool, message: str, scheduler: str
) -> None:
    async with serving(None, profiles=profiles) as s:
        async with s.channel() as ch:
            resp = await scheduler_pb2_grpc.SchedulerStub(ch).Submit(scheduler_pb2.SubmitRequest(pods=[sent]))
        (result,) = resp.results
        assert (result.accepted, result.message) == (accepted, message)
        held = s.core.pods.by_key("default/p")
        assert (held.spec.scheduler_name if held is not None else "") == scheduler
