"""Which kube-scheduler release Berth follows in Kubernetes mode: the API
server's ``/version``, clamped to the supported releases, with a bounded wait
for an API server that is not up yet (virtual time, the fake API server)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from kubernetes_asyncio import client

from berth import features
from berth.adapters.kubernetes import discovery
from tests.kubernetes.fakeapi import FakeApiServer

pytestmark = pytest.mark.looptime

V35, V36, V37 = features.SUPPORTED


@pytest.fixture
async def fake() -> FakeApiServer:
    return FakeApiServer()


@pytest.mark.parametrize(
    ("major", "minor", "git", "follows", "warns"),
    [
        ("1", "37", "v1.37.2", V37, False),
        ("1", "36", "v1.36.3", V36, False),
        ("1", "35", "v1.35.4", V35, False),
        # Managed clusters report a "+" on the minor and a vendor suffix.
        ("1", "36+", "v1.36.3-eks-1a2b3c", V36, False),
        # Outside the supported range: the nearest release, and a warning.
        ("1", "34", "v1.34.4", V35, True),
        ("1", "38", "v1.38.0", V37, True),
    ],
)
async def test_berth_follows_the_api_servers_release(
    fake: FakeApiServer,
    api: client.ApiClient,
    caplog: pytest.LogCaptureFixture,
    major: str,
    minor: str,
    git: str,
    follows: features.KubeVersion,
    warns: bool,
) -> None:
    fake.version = {"major": major, "minor": minor, "gitVersion": git}
    with caplog.at_level(logging.INFO, logger=discovery.__name__):
        assert await discovery.cluster_version(api) == follows
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert bool(warnings) is warns
    if warns:
        assert f"Berth follows {follows}, the nearest release it supports" in warnings[0].getMessage()


async def test_an_api_server_that_comes_up_within_the_wait_is_read(fake: FakeApiServer, api: client.ApiClient) -> None:
    fake.go_down()
    fake.version = {"major": "1", "minor": "36", "gitVersion": "v1.36.3"}
    loop = asyncio.get_running_loop()
    loop.call_later(5, fake.come_up)
    assert await discovery.cluster_version(api, wait=30) == V36


async def test_an_api_server_down_for_the_whole_wait_gives_none_within_it(
    fake: FakeApiServer, api: client.ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    fake.go_down()
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert await discovery.cluster_version(api, wait=30) is None
    assert loop.time() - start <= 30
    assert "giving up after 30s" in caplog.text
