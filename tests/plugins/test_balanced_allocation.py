"""NodeResourcesBalancedAllocation, ported from kube-scheduler v1.34's
pkg/scheduler/framework/plugins/noderesources/balanced_allocation_test.go
(TestNodeResourcesBalancedAllocation) plus the args validation of
apis/config/validation/validation_pluginargs.go.

Not ported: the DRA extended-resource cases (DRAExtendedResource is alpha and
off in v1.34; Berth has no DRA) and TestBalancedAllocationSignPod (SignPod is
not in v1.34).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import numpy as np
import pytest

from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework import registry
from berth.plugins.noderesources import (
    NodeResourcesBalancedAllocation,
    NodeResourcesBalancedAllocationArgs,
    ResourceSpec,
)
from berth.plugins.noderesources.balanced_allocation import balanced_resource_scorer
from berth.testing import make_node, make_pod
from tests.support import table

GPU = "nvidia.com/gpu"

# The PodSpecs of TestNodeResourcesBalancedAllocation.
CPU_AND_MEMORY = [{"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"}]
CPU_ONLY = [{"cpu": "1000m", "memory": "0"}, {"cpu": "2000m", "memory": "0"}]
CPU_AND_MEMORY_AND_GPU = [{"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000", GPU: "3"}]


def pod(reqs: Sequence[Mapping[str, Any]], name: str = "p", node: str = "") -> model.Pod:
    containers = [{"name": f"c{k}", "resources": {"requests": dict(r)}} for k, r in enumerate(reqs)]
    return make_pod(name, containers=containers, node_name=node)


def node(name: str, milli_cpu: int, memory: int, scalars: Mapping[str, int] | None = None) -> model.Node:
    """test_util.go makeNode: cpu in millicores, memory in bytes, extended resources."""
    return make_node(name, cpu=f"{milli_cpu}m", memory=memory, allocatable=dict(scalars or {}))


def specs(*names: str) -> list[ResourceSpec]:
    return [ResourceSpec(name=n, weight=1) for n in names]


DEFAULT = specs("cpu", "memory")
WITH_GPU = specs("cpu", "memory", GPU)

CASES = [
    # (Go case, pod, placed pods, nodes, resources, runPreScore, expected scores or "skip")
    (
        "nothing scheduled, nothing requested, skip in PreScore",
        make_pod(containers=[]),
        [],
        [node("node1", 4000, 10000), node("node2", 4000, 10000)],
        DEFAULT,
        True,
        "skip",
    ),
    (
        "nothing scheduled, resources requested, differently sized nodes",
        pod(CPU_AND_MEMORY),
        [],
        [node("node1", 4000, 10000), node("node2", 6000, 10000)],
        DEFAULT,
        True,
        [87, 100],
    ),
    (
        "resources requested, pods scheduled with resources",
        pod(CPU_AND_MEMORY),
        [pod(CPU_ONLY, "e1", "node1"), pod(CPU_AND_MEMORY, "e2", "node2")],
        [node("node1", 10000, 20000), node("node2", 10000, 20000)],
        DEFAULT,
        True,
        [82, 95],
    ),
    (
        "resources requested, pods scheduled with resources, differently sized nodes",
        pod(CPU_AND_MEMORY),
        [pod(CPU_ONLY, "e1", "node1"), pod(CPU_AND_MEMORY, "e2", "node2")],
        [node("node1", 10000, 20000), node("node2", 10000, 50000)],
        DEFAULT,
        True,
        [82, 80],
    ),
    (
        "requested resources at node capacity",
        pod(CPU_ONLY),
        [pod(CPU_ONLY, "e1", "node1"), pod(CPU_AND_MEMORY, "e2", "node2")],
        [node("node1", 6000, 10000), node("node2", 6000, 10000)],
        DEFAULT,
        True,
        [50, 75],
    ),
    (
        "include scalar resource on a node for balanced resource allocation",
        pod([{"memory": "0", GPU: "1"}]),
        [pod(CPU_AND_MEMORY, "e1", "node2"), pod(CPU_AND_MEMORY_AND_GPU, "e2", "node1")],
        [node("node1", 3500, 40000, {GPU: 8}), node("node2", 3500, 40000, {GPU: 8})],
        WITH_GPU,
        True,
        [70, 65],
    ),
    (
        "node without the scalar resource should skip the scalar resource",
        pod(CPU_AND_MEMORY),
        [],
        [node("node1", 3500, 40000, {GPU: 8}), node("node2", 3500, 40000)],
        WITH_GPU,
        True,
        [63, 63],
    ),
    (
        "resources requested, pods scheduled with resources if PreScore not called",
        pod(CPU_AND_MEMORY),
        [pod(CPU_ONLY, "e1", "node1"), pod(CPU_AND_MEMORY, "e2", "node2")],
        [node("node1", 10000, 20000), node("node2", 10000, 20000)],
        DEFAULT,
        False,
        [82, 95],
    ),
    # Berth: a best-effort pod scores 0 when PreScore did not run (Score's fallback in Go).
    (
        "best-effort pod scores zero if PreScore not called",
        make_pod(containers=[]),
        [],
        [node("node1", 4000, 10000), node("node2", 4000, 10000)],
        DEFAULT,
        False,
        [0, 0],
    ),
    # Berth: more than two resources use the population standard deviation, left-out ones skipped.
    (
        "three resources on one node, two on the other",
        pod([{"cpu": "1", "memory": "1000", GPU: "2"}]),
        [],
        [node("node1", 4000, 4000, {GPU: 4}), node("node2", 4000, 4000)],
        WITH_GPU,
        True,
        [88, 100],
    ),
]


@pytest.mark.parametrize(
    ("name", "incoming", "placed", "nodes", "resources", "pre_score", "want"), CASES, ids=[c[0] for c in CASES]
)
def test_balanced_allocation(
    name: str,
    incoming: model.Pod,
    placed: list[model.Pod],
    nodes: list[model.Node],
    resources: list[ResourceSpec],
    pre_score: bool,
    want: list[int] | str,
) -> None:
    # balanced_allocation_test.go TestNodeResourcesBalancedAllocation
    plugin = NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs(resources=resources))
    t = table(nodes, placed)
    state, pi, rows = fw.CycleState(), PodInfo.of(incoming), t.alive_rows()
    if pre_score:
        st = plugin.pre_score(state, pi, t, rows)
        if want == "skip":
            assert st.code == fw.Code.SKIP
            return
        assert st.ok
    assert plugin.score(state, pi, t, rows).tolist() == want


def test_two_fractions_use_half_their_difference() -> None:
    # balanced_allocation.go: len(fractions) == 2 -> std = |f0 - f1| / 2; fractions above 1 are capped.
    req = np.asarray([[3, 5], [8, 1], [0, 0]], dtype=np.int64)
    alloc = np.asarray([[4, 10], [4, 10], [0, 10]], dtype=np.int64)
    # row 0: |0.75 - 0.5| / 2 = 0.125 -> 87; row 1: |1 - 0.1| / 2 = 0.45 -> 55; row 2: one fraction -> std 0.
    assert balanced_resource_scorer(req, alloc, np.ones(2, dtype=np.int64)).tolist() == [87, 55, 100]


ARG_ERRORS = [
    (
        "weight other than 1",
        {"resources": [{"name": "cpu", "weight": 2}]},
        "resources[0].weight: Invalid value: 2: must be 1",
    ),
    (
        "duplicate resource",
        {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "cpu"}]},
        'resources[2].name: Duplicate value: "cpu"',
    ),
]


@pytest.mark.parametrize(("name", "raw", "message"), ARG_ERRORS, ids=[c[0] for c in ARG_ERRORS])
def test_invalid_args_name_the_field(name: str, raw: dict[str, Any], message: str) -> None:
    # validation_pluginargs.go ValidateNodeResourcesBalancedAllocationArgs
    args = msgspec.convert(raw, NodeResourcesBalancedAllocationArgs)
    with pytest.raises(ValueError) as err:
        args.validate()
    assert message in str(err.value)
    with pytest.raises(registry.RegistryError, match=r"^pluginConfig\[0\]\.args: "):
        registry._decode_args(NodeResourcesBalancedAllocation, raw, "pluginConfig[0].args")


@pytest.mark.parametrize(
    ("name", "raw", "want"),
    [
        ("no resources: cpu and memory", {}, [("cpu", 1), ("memory", 1)]),
        (
            "weight omitted or 0 defaults to 1",
            {"resources": [{"name": GPU}, {"name": "cpu", "weight": 0}]},
            [(GPU, 1), ("cpu", 1)],
        ),
    ],
    ids=["no resources", "weight defaults to 1"],
)
def test_args_defaults(name: str, raw: dict[str, Any], want: list[tuple[str, int]]) -> None:
    # v1 SetDefaults_NodeResourcesBalancedAllocationArgs
    args = msgspec.convert(raw, NodeResourcesBalancedAllocationArgs)
    args.validate()
    assert [(r.name, r.weight) for r in args.resources] == want


def test_plugin_is_registered_in_tree() -> None:
    assert registry.plugin_class("NodeResourcesBalancedAllocation") is NodeResourcesBalancedAllocation


def _go_balanced(requested: list[int], allocable: list[int]) -> int:
    """balanced_allocation.go balancedResourceScorer, line for line (one node)."""
    fractions: list[float] = []
    total = 0.0
    for req, alloc in zip(requested, allocable, strict=True):
        if alloc == 0:
            continue
        fraction = min(req / alloc, 1.0)
        total += fraction
        fractions.append(fraction)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / len(fractions)
        acc = 0.0
        for f in fractions:
            acc = acc + (f - mean) * (f - mean)
        std = math.sqrt(acc / len(fractions))
    return int((1 - std) * fw.MAX_NODE_SCORE)


def test_vectorised_scorer_matches_the_per_node_go_loop() -> None:
    # Berth: the numpy version must agree bit for bit with Go's float64 loop.
    rng = np.random.default_rng(7)
    alloc = rng.integers(0, 5, size=(500, 4)) * rng.integers(1, 10**9, size=(500, 4))
    req = rng.integers(0, 2 * 10**9, size=(500, 4))
    req[alloc == 0] = 0
    got = balanced_resource_scorer(req, alloc, np.ones(4, dtype=np.int64)).tolist()
    assert got == [_go_balanced(list(map(int, q)), list(map(int, a))) for q, a in zip(req, alloc, strict=True)]
