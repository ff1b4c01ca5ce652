"""The embedded cluster refuses a bind its node's kubelet would refuse at
admission (issue 28: a 200-cpu pod bound through the extender onto a
1.9-cpu node was accepted, 600 cores requested of 1.9, permanently)."""

from __future__ import annotations

import pytest

from berth import app, config
from berth.cluster.sources import BindError
from berth.testing import make_node, make_pod

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize(
    ("requests", "message"),
    [
        # pkg/kubelet/lifecycle/predicate.go (v1.37.2): reason OutOf<resource>, InsufficientResourceError's words.
        (
            {"cpu": "200"},
            "OutOfcpu: Node didn't have enough resource: cpu, requested: 200000, used: 500, capacity: 1900",
        ),
        (
            {"cpu": "100m", "memory": "3Gi"},
            "OutOfmemory: Node didn't have enough resource: memory, "
            "requested: 3221225472, used: 0, capacity: 2147483648",
        ),
        (
            {"cpu": "100m", "example.com/gpu": "1"},
            "OutOfexample.com/gpu: Node didn't have enough resource: example.com/gpu, "
            "requested: 1, used: 0, capacity: 0",
        ),
        ({"cpu": "1400m"}, None),
        # removeMissingExtendedResources: an extended resource the node does not list at all is not checked.
        ({"cpu": "100m", "example.com/fpga": "1"}, None),
    ],
)
async def test_a_bind_from_outside_is_admitted_only_if_the_pod_fits(
    requests: dict[str, str], message: str | None
) -> None:
    berth = app.build(config.parse({}))
    node = make_node("small", cpu="1900m", memory="2Gi", pods=10, allocatable={"example.com/gpu": 0})
    berth.cluster.upsert_nodes([node])
    berth.cluster.upsert_pods([make_pod("busy", node_name="small", requests={"cpu": "500m"})])
    berth.cluster.upsert_pods([make_pod("big", scheduler_name="other", requests=requests)])
    pod = berth.cluster.pods["default/big"]
    if message is None:
        await berth.cluster.bind(pod, "small")
        assert berth.cluster.pods["default/big"].spec.node_name == "small"
        return
    with pytest.raises(BindError) as err:
        await berth.cluster.bind(pod, "small")
    assert str(err.value) == message
    assert berth.cluster.pods["default/big"].spec.node_name == ""  # nothing changed


async def test_a_full_node_refuses_one_pod_more() -> None:
    berth = app.build(config.parse({}))
    berth.cluster.upsert_nodes([make_node("n", cpu="4", memory="4Gi", pods=1)])
    berth.cluster.upsert_pods([make_pod("a", node_name="n"), make_pod("b", scheduler_name="other")])
    with pytest.raises(BindError) as err:
        await berth.cluster.bind(berth.cluster.pods["default/b"], "n")
    assert str(err.value) == "OutOfpods: Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1"
