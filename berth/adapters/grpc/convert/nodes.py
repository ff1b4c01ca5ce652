"""Nodes: berth.v1 ``Node`` (protos/berth/v1/model.proto) and the model's
:class:`berth.cluster.model.Node` (core/v1 Node: taints, capacity,
allocatable, images)."""

from __future__ import annotations

from collections.abc import Iterable

from berth.adapters.grpc.convert._common import _at, _each, _meta_from_pb, _meta_to_pb, _rl_from_pb, _rl_to_pb
from berth.api.v1 import model_pb2 as pb
from berth.cluster import model

__all__ = ["node_from_pb", "node_to_pb", "nodes_from_pb", "taint_to_pb"]


def nodes_from_pb(nodes: Iterable[pb.Node], path: str) -> list[model.Node]:
    """:func:`node_from_pb` of each; errors name ``path[i]``."""
    return _each(nodes, node_from_pb, path)


def node_from_pb(n: pb.Node, path: str = "") -> model.Node:
    """The model's node; InvalidArgument names the field under ``path``."""
    with _at(path):
        return _node_from_pb(n)


def _node_from_pb(n: pb.Node) -> model.Node:
    return model.Node(
        metadata=_meta_from_pb(n.metadata),
        spec=model.NodeSpec(
            unschedulable=n.spec.unschedulable,
            taints=[model.Taint(key=t.key, value=t.value, effect=t.effect) for t in n.spec.taints],
        ),
        status=model.NodeStatus(
            capacity=_rl_from_pb(n.status.capacity, "status.capacity"),
            allocatable=_rl_from_pb(n.status.allocatable, "status.allocatable"),
            images=[model.ContainerImage(names=list(i.names), size_bytes=i.size_bytes) for i in n.status.images],
        ),
    )


def node_to_pb(n: model.Node) -> pb.Node:
    return pb.Node(
        metadata=_meta_to_pb(n.metadata),
        spec=pb.NodeSpec(
            unschedulable=n.spec.unschedulable,
            taints=[pb.Taint(key=t.key, value=t.value, effect=t.effect) for t in n.spec.taints],
        ),
        status=pb.NodeStatus(
            capacity=_rl_to_pb(n.status.capacity),
            allocatable=_rl_to_pb(n.status.allocatable),
            images=[pb.ContainerImage(names=i.names, size_bytes=i.size_bytes) for i in n.status.images],
        ),
    )


def taint_to_pb(t: model.Taint) -> pb.Taint:
    return pb.Taint(key=t.key, value=t.value, effect=t.effect)
