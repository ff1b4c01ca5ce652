"""The leader labels its own Pod ``berth.dev/leader=true`` (the chart's
leader-only Service selects on it), removes the label when its term ends and
before it releases the Lease, and sweeps the label off replicas that could
not remove their own; every replica keeps ``Core.leader`` and
``leader_election_master_status`` from the Lease. In virtual time against
:class:`tests.kubernetes.fakeapi.FakeApiServer`, with Pod label patches and
label-selected lists served by :class:`PodLabels`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from typing import Any
from urllib.parse import parse_qs

import pytest
from kubernetes_asyncio import client

from berth.adapters.kubernetes.backoff import Backoff
from berth.adapters.kubernetes.leaderlabel import LABEL, LeaderLabel
from tests.kubernetes.fakeapi import FakeApiServer, Response
from tests.kubernetes.test_runner import LEASE, kube_runner, running, until

pytestmark = pytest.mark.looptime

NS = "berth-system"
CHART_LABELS = {"app.kubernetes.io/name": "berth", "app.kubernetes.io/instance": "prod"}


class PodLabels(FakeApiServer):
    """The fake API server, plus Pods' labels: merge patches of
    ``metadata.labels`` on ``pods/<name>`` and lists by label selector."""

    def __init__(self) -> None:
        super().__init__()
        self.labels: dict[str, dict[str, str]] = {}
        #: ("label", pod, value) of every label patch and ("release", lease holder before) of every Lease PUT
        #: that empties the holder, in order.
        self.log: list[tuple[str, str, Any]] = []
        #: HTTP statuses the next label patches get instead of being served.
        self.fail_patches: list[int] = []

    async def request(self, *, method: str, url: str, data: Any = None, **kw: Any) -> Response:
        path, _, query = url.partition("://")[2].partition("/")[2].partition("?")
        m = re.fullmatch(rf"api/v1/namespaces/{NS}/pods(?:/([^/]+))?", path)
        if self.up and m and m.group(1) and method == "PATCH":
            await asyncio.sleep(0)
            assert kw.get("headers", {}).get("Content-Type") == "application/merge-patch+json"
            if self.fail_patches:
                code = self.fail_patches.pop(0)
                return Response(code, {"kind": "Status", "code": code, "message": "injected"})
            labels = self.labels.setdefault(m.group(1), dict(CHART_LABELS))
            for k, v in json.loads(data)["metadata"]["labels"].items():
                if v is None:
                    labels.pop(k, None)
                else:
                    labels[k] = v
            self.log.append(("label", m.group(1), labels.get(LABEL)))
            return Response(200, {"metadata": {"name": m.group(1), "namespace": NS, "labels": labels}})
        if self.up and m and not m.group(1) and method == "GET":
            await asyncio.sleep(0)
            wanted = dict(t.split("=") for t in parse_qs(query)["labelSelector"][0].split(","))
            items = [
                {"metadata": {"name": n, "namespace": NS, "labels": ls}}
                for n, ls in self.labels.items()
                if all(ls.get(k) == v for k, v in wanted.items())
            ]
            return Response(200, {"kind": "PodList", "metadata": {"resourceVersion": "1"}, "items": items})
        if self.up and method == "PUT" and "/leases/" in path and json.loads(data)["spec"].get("holderIdentity") == "":
            self.log.append(("release", "", None))
        return await super().request(method=method, url=url, data=data, **kw)


@pytest.fixture
async def fake() -> FakeApiServer:
    return PodLabels()


def leader_runner(api: client.ApiClient, identity: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("POD_NAME", identity)
    monkeypatch.setenv("POD_NAMESPACE", NS)
    return kube_runner(api, LEASE, identity)


def status(runner: Any) -> float:
    value = runner.core.metrics.registry.get_sample_value("leader_election_master_status", {"name": "berth"})
    assert value is not None, "leader_election_master_status{name=berth} is exported"
    return float(value)


async def test_the_leader_labels_its_pod_and_every_replica_knows_who_leads(
    fake: PodLabels, api: client.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = leader_runner(api, "a", monkeypatch)
    b = leader_runner(api, "b", monkeypatch)
    leader = asyncio.create_task(a.run())
    await until("a leads", a.leading.is_set)
    async with running(b.run()):
        await until("a's pod labelled", lambda: fake.labels.get("a", {}).get(LABEL) == "true")
        await until("b sees a lead", lambda: b.core.leader == "a")
        assert a.core.leader == "a"
        assert (status(a), status(b)) == (1.0, 0.0)
        assert b.core.standby and not a.core.standby

        leader.cancel()  # SIGTERM
        with contextlib.suppress(asyncio.CancelledError):
            await leader
        assert LABEL not in fake.labels["a"], "the label goes when the term ends"
        first_unlabel = fake.log.index(("label", "a", None))
        assert ("release", "", None) in fake.log[first_unlabel:], "the label is removed before the Lease is released"
        assert status(a) == 0.0

        await until("b leads and labels itself", lambda: fake.labels.get("b", {}).get(LABEL) == "true")
        assert b.core.leader == "b" and status(b) == 1.0


async def test_a_new_leader_removes_the_label_a_lost_leader_left_behind(fake: PodLabels, api: client.ApiClient) -> None:
    fake.labels["old"] = {**CHART_LABELS, LABEL: "true"}
    fake.labels["other-release"] = {
        "app.kubernetes.io/name": "berth",
        "app.kubernetes.io/instance": "dev",
        LABEL: "true",
    }
    label = LeaderLabel(api, pod="new", namespace=NS)
    await label.set()
    assert fake.labels["new"][LABEL] == "true"
    assert LABEL not in fake.labels["old"], "a stale label of the same Berth is removed"
    assert fake.labels["other-release"][LABEL] == "true", "another release's leader is left alone"


async def test_a_failed_label_patch_is_retried_with_backoff(fake: PodLabels, api: client.ApiClient) -> None:
    fake.fail_patches = [500, 503]
    label = LeaderLabel(api, pod="a", namespace=NS)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await label.set(Backoff(clock=loop.time))
    assert fake.labels["a"][LABEL] == "true" and label.labelled
    assert loop.time() - start > 0, "it waited between attempts"
    assert not fake.fail_patches


async def test_clear_reports_a_failure_and_keeps_going(fake: PodLabels, api: client.ApiClient) -> None:
    label = LeaderLabel(api, pod="a", namespace=NS)
    await label.set()
    fake.fail_patches = [500]
    assert await label.clear() is False
    assert await label.clear() is True
    assert LABEL not in fake.labels["a"]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"POD_NAMESPACE": NS}, None),
        ({"POD_NAME": "berth-0", "POD_NAMESPACE": NS}, ("berth-0", NS)),
        ({"POD_NAME": "berth-0"}, ValueError),
    ],
    ids=["not-in-a-pod", "namespace-only", "both", "name-without-namespace"],
)
def test_from_env(env: dict[str, str], expected: Any) -> None:
    api: Any = object()
    if expected is ValueError:
        with pytest.raises(ValueError, match="POD_NAMESPACE is not"):
            LeaderLabel.from_env(api, env)
        return
    got = LeaderLabel.from_env(api, env)
    assert (None if got is None else (got.pod, got.namespace)) == expected
