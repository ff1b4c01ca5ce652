"""Submit sends each pod as written too (``SubmitRequest.pod_manifests``,
a v1 Pod as JSON each, in the order of ``pods``), so a Kubernetes-backed
Berth can create the caller's whole Pod; ``pods`` is sent as before."""

from __future__ import annotations

import json
from typing import Any

import pytest

from berth_client.aio import AsyncClient, submit_requests
from berth_client.api.v1 import model_pb2 as pb
from berth_client.api.v1 import scheduler_pb2 as spb


def pod(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", **extra.pop("metadata", {})},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1"]}], **extra},
    }


def test_each_pod_goes_as_its_manifest_in_order_beside_the_pod_message() -> None:
    pods = [pod(f"p{i}") for i in range(3)]
    (request,) = submit_requests(pods)
    assert [p.metadata.name for p in request.pods] == ["p0", "p1", "p2"]
    assert [json.loads(m) for m in request.pod_manifests] == pods


def test_a_gang_sends_its_members_manifests_with_the_group() -> None:
    member = {"scheduling.x-k8s.io/pod-group": "g"}
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "team"},
    }
    items = [group, pod("m0", metadata={"labels": member}), pod("solo"), pod("m1", metadata={"labels": member})]
    gang, plain = submit_requests(items)
    assert gang.group.metadata.name == "g"
    assert [json.loads(m)["metadata"]["name"] for m in gang.pod_manifests] == ["m0", "m1"]
    assert [json.loads(m)["metadata"]["name"] for m in plain.pod_manifests] == ["solo"]


def test_batches_keep_manifests_beside_their_pods() -> None:
    requests = list(submit_requests([pod(f"p{i}") for i in range(5)], batch=2))
    assert [len(r.pods) for r in requests] == [2, 2, 1]
    for r in requests:
        assert [json.loads(m)["metadata"]["name"] for m in r.pod_manifests] == [p.metadata.name for p in r.pods]


def test_pod_messages_have_no_manifest_to_send() -> None:
    # The field holds one per pod or none: a request with a Pod message sends none.
    message = pb.Pod(metadata=pb.ObjectMeta(name="msg", namespace="team"))
    (request,) = submit_requests([pod("manifest"), message])
    assert len(request.pods) == 2
    assert list(request.pod_manifests) == []


async def test_submit_gang_sends_the_manifests_too(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[spb.SubmitRequest] = []

    async def call(self: AsyncClient, method: Any, request: spb.SubmitRequest) -> spb.SubmitResponse:
        sent.append(request)
        return spb.SubmitResponse()

    monkeypatch.setattr(AsyncClient, "_call", call)
    monkeypatch.setattr(AsyncClient, "scheduler", property(lambda self: type("S", (), {"Submit": None})()))
    client = AsyncClient("localhost")
    await client.submit_gang("g", [pod("a"), pod("b")], namespace="team")
    (request,) = sent
    assert request.group.min_member == 2
    assert [json.loads(m)["metadata"]["name"] for m in request.pod_manifests] == ["a", "b"]
