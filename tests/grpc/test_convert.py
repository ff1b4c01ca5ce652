"""protobuf -> model: every value the model cannot hold is InvalidArgument
whose message starts with the protobuf field path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from berth import errors
from berth.adapters.grpc import convert
from berth.api.v1 import model_pb2 as pb
from berth.testing import make_node, make_pod


def pod(**spec: Any) -> pb.Pod:
    p = convert.pod_to_pb(make_pod("p", requests={"cpu": "1"}))
    for field, value in spec.items():
        getattr(p.spec, field).extend(value) if isinstance(value, list) else getattr(p.spec, field).update(value)
    return p


CASES: list[tuple[str, Callable[[], object], str]] = [
    (
        "init container limit",
        lambda: convert.pod_from_pb(pod(init_containers=[pb.Container(), pb.Container(limits={"memory": -1})])),
        "spec.init_containers[1].limits[memory]: Invalid value: -1: must be greater than or equal to 0",
    ),
    (
        "overhead under a path",
        lambda: convert.pod_from_pb(pod(overhead={"cpu": -3}), "pods[4]"),
        "pods[4].spec.overhead[cpu]: Invalid value: -3",
    ),
    (
        "pod-level resources",
        lambda: convert.pods_from_pb([pod(), pod(resources_requests={"memory": -1})], "pods"),
        "pods[1].spec.resources_requests[memory]: Invalid value: -1",
    ),
    (
        "node capacity in a list",
        lambda: convert.nodes_from_pb(
            [convert.node_to_pb(make_node("a")), pb.Node(status=pb.NodeStatus(capacity={"cpu": -1}))], "nodes"
        ),
        "nodes[1].status.capacity[cpu]: Invalid value: -1",
    ),
    (
        "timestamp before year 1",
        lambda: convert.node_from_pb(pb.Node(metadata=pb.ObjectMeta(creation_timestamp_ms=-(2**62)))),
        f"metadata.creation_timestamp_ms: Invalid value: {-(2**62)}: not a time between the years 1 and 9999",
    ),
    (
        "pod group",
        lambda: convert.podgroup_from_pb(pb.PodGroup(min_resources={"nvidia.com/gpu": -1}), "group"),
        "group.min_resources[nvidia.com/gpu]: Invalid value: -1",
    ),
    (
        "disruption budget",
        lambda: convert.pdb_from_pb(
            pb.PodDisruptionBudget(metadata=pb.ObjectMeta(creation_timestamp_ms=2**63 - 1)), "budgets[0]"
        ),
        "budgets[0].metadata.creation_timestamp_ms: Invalid value",
    ),
]


@pytest.mark.parametrize(("name", "convert_", "message"), CASES, ids=[c[0] for c in CASES])
def test_bad_values_name_their_field(name: str, convert_: Callable[[], object], message: str) -> None:
    with pytest.raises(errors.InvalidArgument) as err:
        convert_()
    assert str(err.value).startswith(message)


def test_valid_objects_survive_the_round_trip() -> None:
    p = convert.pod_to_pb(make_pod("p", requests={"cpu": "250m", "memory": "1Gi"}, node_name="a"))
    assert convert.pod_to_pb(convert.pod_from_pb(p, "pod")) == p
    n = convert.node_to_pb(make_node("a", cpu="4", memory="8Gi", pods=10))
    assert convert.node_to_pb(convert.node_from_pb(n)) == n
