"""The Cluster feed's UpsertNamespaces / DeleteNamespaces: namespaces and
their labels for pod affinity's namespaceSelector, validated as the API
server would (INVALID_ARGUMENT naming the field)."""

from __future__ import annotations

import grpc
import pytest

from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, model_pb2
from tests.grpc.conftest import serving


def namespace(name: str, **labels: str) -> cluster_pb2.Namespace:
    return cluster_pb2.Namespace(metadata=model_pb2.ObjectMeta(name=name, labels=labels))


async def test_namespaces_are_upserted_with_their_labels_and_deleted() -> None:
    async with serving() as s, s.channel() as ch:
        stub = cluster_pb2_grpc.ClusterStub(ch)
        req = cluster_pb2.UpsertNamespacesRequest(namespaces=[namespace("team-a", team="a"), namespace("team-b")])
        assert (await stub.UpsertNamespaces(req)).upserted == 2
        assert s.core.namespaces.labels_of("team-a") == {"team": "a", "kubernetes.io/metadata.name": "team-a"}
        deleted = await stub.DeleteNamespaces(cluster_pb2.DeleteNamespacesRequest(names=["team-a", "nope"]))
        assert deleted.deleted == 1
        assert s.core.namespaces.get("team-a") is None and s.core.namespaces.get("team-b") is not None


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (namespace("Team"), 'namespaces[1].metadata.name: Invalid value: "Team"'),
        (namespace("team-c", team="a b"), 'namespaces[1].metadata.labels: Invalid value: "a b"'),
    ],
    ids=["a name that is no DNS-1123 label", "a bad label value"],
)
async def test_a_bad_namespace_is_invalid_argument_and_nothing_changes(
    bad: cluster_pb2.Namespace, message: str
) -> None:
    async with serving() as s, s.channel() as ch:
        stub = cluster_pb2_grpc.ClusterStub(ch)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.UpsertNamespaces(cluster_pb2.UpsertNamespacesRequest(namespaces=[namespace("ok"), bad]))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (err.value.details() or "").startswith(message), err.value.details()
        assert len(s.core.namespaces) == 0
