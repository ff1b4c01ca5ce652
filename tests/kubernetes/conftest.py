"""Fixtures of the Kubernetes adapter's tests: a kubernetes-asyncio client
whose requests go to the module's ``fake`` API server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client

from tests.kubernetes.fakeapi import FakeApiServer


@pytest.fixture
async def api(fake: FakeApiServer) -> AsyncIterator[client.ApiClient]:
    api = client.ApiClient(client.Configuration(host="https://fake-apiserver"))
    await api.rest_client.pool_manager.close()
    fake.plug_into(api)
    yield api
    await api.close()
