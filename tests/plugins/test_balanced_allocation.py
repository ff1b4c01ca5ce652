"""NodeResourcesBalancedAllocation, per Kubernetes release: v1.37.2's
pkg/scheduler/framework/plugins/noderesources/balanced_allocation_test.go
(TestNodeResourcesBalancedAllocation: the score of 1.36 and 1.37, how much
the pod improves the node's balance) and v1.35.4's (the balance with the pod),
plus the args validation of apis/config/validation/validation_pluginargs.go.

Not ported: the DRA extended-resource cases ("include DRA resource on a node
...": Berth does not count DRA-backed extended resources in scores) and
TestBalancedAllocationSignPod (Berth has no SignPod / opportunistic batching).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from berth import features
from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework import registry
from berth.framework.handle import Handle
from berth.plugins.noderesources import (
    NodeResourcesBalancedAllocation,
    NodeResourcesBalancedAllocationArgs,
    ResourceSpec,
)
from berth.plugins.noderesources.balanced_allocation import (
    balanced_resource_score,
    balanced_resource_scorer,
    balanced_resource_scorer_v1_35,
)
from berth.testing import Cluster, make_node, make_pod
from tests.support import table

V35, V36, V37 = features.SUPPORTED
GPU = "nvidia.com/gpu"


def cpu_only(cpu: str) -> dict[str, str]:
    return {"cpu": cpu}


def cpu_and_memory(cpu: str, memory: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": memory}


def cpu_and_memory_and_gpu(cpu: str, memory: str, gpu: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": memory, GPU: gpu}


def pod(reqs: Sequence[Mapping[str, Any]], name: str = "p", node: str = "") -> model.Pod:
    """st.MakePod().Req(r0).Req(r1)...: one container per request list."""
    containers = [{"name": f"c{k}", "resources": {"requests": dict(r)}} for k, r in enumerate(reqs)]
    return make_pod(name, containers=containers, node_name=node)


def node(name: str, milli_cpu: int, memory: int, scalars: Mapping[str, int] | None = None) -> model.Node:
    """test_util.go makeNode: cpu in millicores, memory in bytes, extended resources."""
    return make_node(name, cpu=f"{milli_cpu}m", memory=memory, allocatable=dict(scalars or {}))


def specs(*names: str) -> list[ResourceSpec]:
    return [ResourceSpec(name=n, weight=1) for n in names]


def handle(version: features.KubeVersion) -> Handle:
    """A Handle whose features are ``version``'s defaults."""
    return dataclasses.replace(Cluster().handle(), features=features.Features.of(version))


DEFAULT = specs("cpu", "memory")
WITH_GPU = specs("cpu", "memory", GPU)
# v1.35.4's PodSpecs (cpuOnly and cpuAndMemory name their requests' memory explicitly).
CPU_AND_MEMORY = [cpu_and_memory("1000m", "2000"), cpu_and_memory("2000m", "3000")]
CPU_ONLY = [cpu_and_memory("1000m", "0"), cpu_and_memory("2000m", "0")]
CPU_AND_MEMORY_AND_GPU = [cpu_and_memory("1000m", "2000"), cpu_and_memory_and_gpu("2000m", "3000", "3")]

# (Go case, pod, existing pods, nodes, resources, runPreScore, expected scores or "skip")
V1_37_CASES = [
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
        # node1 100 -> 87: 68; node2 100 -> 100: 75.
        "nothing scheduled, resources requested, differently sized nodes",
        pod([cpu_and_memory("1000m", "2000"), cpu_and_memory("2000m", "3000")]),
        [],
        [node("node1", 4000, 10000), node("node2", 6000, 10000)],
        DEFAULT,
        True,
        [68, 75],
    ),
    (
        # node1 85 -> 82: 73; node2 97 -> 95: 74.
        "resources requested, pods scheduled with resources",
        pod([cpu_and_memory("1000m", "2000"), cpu_and_memory("2000m", "3000")]),
        [
            pod([cpu_only("1000m"), cpu_only("2000m")], "e1", "node1"),
            pod([cpu_and_memory("1000m", "2000"), cpu_and_memory("2000m", "3000")], "e2", "node2"),
        ],
        [node("node1", 10000, 20000), node("node2", 10000, 20000)],
        DEFAULT,
        True,
        [73, 74],
    ),
    (
        # node1 85 -> 82: 73; node2 90 -> 80: 70.
        "resources requested, pods scheduled with resources, differently sized nodes",
        pod([cpu_and_memory("1000m", "2000"), cpu_and_memory("2000m", "3000")]),
        [
            pod([cpu_only("1000m"), cpu_only("2000m")], "e1", "node1"),
            pod([cpu_and_memory("1000m", "2000"), cpu_and_memory("2000m", "3000")], "e2", "node2"),
        ],
        [node("node1", 10000, 20000), node("node2", 10000, 50000)],
        DEFAULT,
        True,
        [73, 70],
    ),
    (
        # node1 50 -> 100: 100; node2 100 -> 50: 50.
        "resources requested, pods scheduled with resources, nodes to reach min/max score",
        pod([{"memory": "2000"}, {"memory": "3000"}]),
        [pod([cpu_only("1000m"), cpu_only("2000m")], "e1", "node1")],
        [node("node1", 3000, 5000), node("node2", 3000, 5000)],
        DEFAULT,
        True,
        [100, 50],
    ),
    (
        # node1 75 -> 50: 62; node2 100 -> 75: 62.
        "requested resources at node capacity",
        pod([cpu_only("1000m"), cpu_only("2000m")]),
        [
            pod([cpu_only("1000m"), cpu_only("2000m")], "e1", "node1"),
            pod([cpu_and_memory("1000m", "2000"), cpu_and_memory("2000m", "3000")], "e2", "node2"),
        ],
        [node("node1", 6000, 10000), node("node2", 6000, 10000)],
        DEFAULT,
        True,
        [62, 62],
    ),
    (
        # node1 69 -> 70: 75; node2 62 -> 65: 76.
        "scalar resource is included in the score computation if pod requests the scalar resource",
        pod([cpu_and_memory_and_gpu("0", "0", "1")]),
        [
            pod([cpu_and_memory("1000m", "2000"), cpu_and_memory_and_gpu("2000m", "3000", "3")], "e1", "node1"),
            pod([cpu_and_memory("1000m", "2000"), cpu_and_memory("2000m", "3000")], "e2", "node2"),
        ],
        [node("node1", 3500, 40000, {GPU: 8}), node("node2", 3500, 40000, {GPU: 8})],
        WITH_GPU,
        True,
        [75, 76],
    ),
    (
        # both 100 -> 63: 56.
        "scalar resource is not included in the score computation if pod doesn't request the scalar resource",
        pod([cpu_and_memory("1000m", "2000"), cpu_and_memory("2000m", "3000")]),
        [],
        [node("node1", 3500, 40000, {GPU: 8}), node("node2", 3500, 40000)],
        WITH_GPU,
        True,
        [56, 56],
    ),
    (
        "resources requested, pods scheduled with resources if PreScore not called",
        pod([cpu_and_memory("1000m", "2000"), cpu_and_memory("2000m", "3000")]),
        [
            pod([cpu_only("1000m"), cpu_only("2000m")], "e1", "node1"),
            pod([cpu_and_memory("1000m", "2000"), cpu_and_memory("2000m", "3000")], "e2", "node2"),
        ],
        [node("node1", 10000, 20000), node("node2", 10000, 20000)],
        DEFAULT,
        False,
        [73, 74],
    ),
]

V1_35_CASES = [
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
]

# Berth's own cases: (name, pod, existing pods, nodes, resources, runPreScore, {release: scores}).
BERTH_CASES = [
    (
        # Score's fallback in Go returns 0 for a best-effort pod.
        "best-effort pod scores zero if PreScore not called",
        make_pod(containers=[]),
        [],
        [node("node1", 4000, 10000), node("node2", 4000, 10000)],
        DEFAULT,
        False,
        {V35: [0, 0], V36: [0, 0], V37: [0, 0]},
    ),
    (
        # More than two resources: the population standard deviation, left-out
        # ones skipped. node1: fractions (0.25, 0.25, 0.5) -> 88, before (0, 0, 0)
        # -> 100; node2: (0.25, 0.25) -> 100 either way.
        "three resources on one node, two on the other",
        pod([{"cpu": "1", "memory": "1000", GPU: "2"}]),
        [],
        [node("node1", 4000, 4000, {GPU: 4}), node("node2", 4000, 4000)],
        WITH_GPU,
        True,
        {V35: [88, 100], V36: [69, 75], V37: [69, 75]},
    ),
    (
        # One configured resource: both balances are 100, so 75 since 1.36.
        "one resource",
        pod([cpu_only("1")]),
        [],
        [node("node1", 4000, 4000)],
        specs("cpu"),
        True,
        {V35: [100], V36: [75], V37: [75]},
    ),
]


def _run(
    version: features.KubeVersion,
    incoming: model.Pod,
    placed: list[model.Pod],
    nodes: list[model.Node],
    resources: list[ResourceSpec],
    pre_score: bool,
) -> list[int] | str:
    plugin = NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs(resources=resources), handle(version))
    t = table(nodes, placed)
    state, pi, rows = fw.CycleState(), PodInfo.of(incoming), t.alive_rows()
    if pre_score:
        st_ = plugin.pre_score(state, pi, t, rows)
        if st_.code == fw.Code.SKIP:
            return "skip"
        assert st_.ok
    scores: list[int] = plugin.score(state, pi, t, rows).tolist()
    return scores


@pytest.mark.parametrize("version", [V36, V37], ids=str)
@pytest.mark.parametrize(
    ("name", "incoming", "placed", "nodes", "resources", "pre_score", "want"),
    V1_37_CASES,
    ids=[c[0] for c in V1_37_CASES],
)
def test_balanced_allocation_scores_the_change_in_balance_since_1_36(
    version: features.KubeVersion,
    name: str,
    incoming: model.Pod,
    placed: list[model.Pod],
    nodes: list[model.Node],
    resources: list[ResourceSpec],
    pre_score: bool,
    want: list[int] | str,
) -> None:
    # v1.37.2 balanced_allocation_test.go TestNodeResourcesBalancedAllocation (1.36.3's code is the same).
    assert _run(version, incoming, placed, nodes, resources, pre_score) == want


@pytest.mark.parametrize(
    ("name", "incoming", "placed", "nodes", "resources", "pre_score", "want"),
    V1_35_CASES,
    ids=[c[0] for c in V1_35_CASES],
)
def test_balanced_allocation_scores_the_balance_with_the_pod_in_1_35(
    name: str,
    incoming: model.Pod,
    placed: list[model.Pod],
    nodes: list[model.Node],
    resources: list[ResourceSpec],
    pre_score: bool,
    want: list[int] | str,
) -> None:
    # v1.35.4 balanced_allocation_test.go TestNodeResourcesBalancedAllocation
    assert _run(V35, incoming, placed, nodes, resources, pre_score) == want


@pytest.mark.parametrize(
    ("name", "incoming", "placed", "nodes", "resources", "pre_score", "want"),
    BERTH_CASES,
    ids=[c[0] for c in BERTH_CASES],
)
def test_balanced_allocation_berth_cases(
    name: str,
    incoming: model.Pod,
    placed: list[model.Pod],
    nodes: list[model.Node],
    resources: list[ResourceSpec],
    pre_score: bool,
    want: dict[features.KubeVersion, list[int]],
) -> None:
    for version, scores in want.items():
        assert _run(version, incoming, placed, nodes, resources, pre_score) == scores, version


def test_the_newest_release_is_the_default_without_a_handle() -> None:
    plugin = NodeResourcesBalancedAllocation()
    assert plugin.scorer.scorer is balanced_resource_scorer


def test_two_fractions_use_half_their_difference() -> None:
    # balanced_allocation.go balancedResourceScore: len(fractions) == 2 -> std = |f0 - f1| / 2;
    # fractions above 1 are capped.
    req = np.asarray([[3, 5], [8, 1], [0, 0]], dtype=np.int64)
    alloc = np.asarray([[4, 10], [4, 10], [0, 10]], dtype=np.int64)
    # row 0: |0.75 - 0.5| / 2 = 0.125 -> 87; row 1: |1 - 0.1| / 2 = 0.45 -> 55; row 2: one fraction -> std 0.
    assert balanced_resource_score(req, alloc).tolist() == [87, 55, 100]


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


def _go_balanced_score(requested: list[int], allocatable: list[int]) -> int:
    """balanced_allocation.go balancedResourceScore (v1.37.2), line for line (one node)."""
    fractions: list[float] = []
    total = 0.0
    for req, alloc in zip(requested, allocatable, strict=True):
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


def _go_div(a: int, b: int) -> int:
    """Go's int64 division: truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _go_balanced_scorer(requested: list[int], allocated: list[int], allocatable: list[int]) -> int:
    """balanced_allocation.go balancedResourceScorer (v1.37.2), line for line."""
    with_pod = _go_balanced_score(requested, allocatable)
    without_pod = _go_balanced_score(allocated, allocatable)
    half = fw.MAX_NODE_SCORE // 2
    return half + _go_div(half + with_pod - without_pod, 2)


def test_vectorised_scorers_match_the_per_node_go_loop() -> None:
    # Berth: the numpy versions must agree bit for bit with Go's float64 loop and int64 arithmetic.
    rng = np.random.default_rng(7)
    alloc = rng.integers(0, 5, size=(500, 4)) * rng.integers(1, 10**9, size=(500, 4))
    allocated = rng.integers(0, 2 * 10**9, size=(500, 4))
    req = allocated + rng.integers(0, 10**9, size=(500, 4))
    req[alloc == 0] = 0
    allocated[alloc == 0] = 0
    ones = np.ones(4, dtype=np.int64)
    rows = [
        (list(map(int, q)), list(map(int, d)), list(map(int, a))) for q, d, a in zip(req, allocated, alloc, strict=True)
    ]
    assert balanced_resource_scorer(req, allocated, alloc, ones).tolist() == [_go_balanced_scorer(*r) for r in rows]
    assert balanced_resource_scorer_v1_35(req, allocated, alloc, ones).tolist() == [
        _go_balanced_score(q, a) for q, _, a in rows
    ]


AMOUNT = st.one_of(st.integers(min_value=0, max_value=10**12), st.sampled_from([0, 1, 2**53 + 1, 2**62]))


@settings(max_examples=300, deadline=None)
@given(
    data=st.integers(min_value=1, max_value=12).flatmap(
        lambda n: st.integers(min_value=1, max_value=5).flatmap(
            lambda r: st.tuples(
                hnp.arrays(np.int64, (n, r), elements=AMOUNT),
                hnp.arrays(np.int64, (n, r), elements=AMOUNT),
                hnp.arrays(np.int64, (n, r), elements=st.one_of(st.just(0), AMOUNT)),
            )
        )
    )
)
def test_scorer_is_the_go_scorer_on_any_amounts(data: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    # Berth: every row, every count of resources counted (0 to 5), fractions at and over 1.
    allocated, extra, alloc = data
    req = allocated + np.minimum(extra, 2**62 - allocated)
    weights = np.ones(alloc.shape[1], dtype=np.int64)
    got = balanced_resource_scorer(req, allocated, alloc, weights).tolist()
    want = [
        _go_balanced_scorer(list(map(int, q)), list(map(int, d)), list(map(int, a)))
        for q, d, a in zip(req, allocated, alloc, strict=True)
    ]
    assert got == want
