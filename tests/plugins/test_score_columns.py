"""The Score fast paths give the general computation's scores exactly.

- The resource scorers' column forms (``least_allocated_columns``,
  ``balanced_resource_columns``) against the general scorers, on every input
  they are meant for.
- ``ResourceAllocationScorer.score`` (which takes the column path when the
  rows' amounts allow it, sharing gathered columns through a memo) against
  the general ``allocatable_requested`` + scorer, on tables with any int64
  amounts: zeros, negatives and amounts near the int64 maximum must fall back.
- ``Framework.run_score`` (plugins sharing a ``ScoreScratch``, weight 1 kept
  unmultiplied) against each plugin scored, normalized and weighted alone.
- TaintToleration's "nothing to count" answer against DefaultNormalizeScore.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from berth import features
from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework.plugin_errors import PluginError
from berth.plugins.helpers import default_normalize_score
from berth.plugins.image_locality import ImageLocality
from berth.plugins.noderesources import (
    NodeResourcesBalancedAllocation,
    NodeResourcesFit,
    NodeResourcesFitArgs,
    ResourceSpec,
    ScoringStrategy,
    strategies,
)
from berth.plugins.noderesources.balanced_allocation import (
    balanced_resource_columns,
    balanced_resource_columns_v1_35,
    balanced_resource_scorer,
    balanced_resource_scorer_v1_35,
)
from berth.plugins.taint_toleration import TaintToleration
from berth.testing import Cluster, make_node, make_pod

SAFE = strategies._SAFE
INT64_MAX = int(np.iinfo(np.int64).max)


# -------------------------------------------------------------- column scorers


@settings(max_examples=300, deadline=None)
@given(
    data=st.integers(min_value=1, max_value=30).flatmap(
        lambda n: st.integers(min_value=1, max_value=2).flatmap(
            lambda r: st.tuples(
                hnp.arrays(np.int64, (n, r), elements=st.integers(min_value=0, max_value=SAFE // 2)),
                hnp.arrays(np.int64, (n, r), elements=st.integers(min_value=0, max_value=SAFE // 2)),
                hnp.arrays(np.int64, (n, r), elements=st.integers(min_value=1, max_value=SAFE)),
                st.lists(st.integers(min_value=1, max_value=100), min_size=r, max_size=r),
            )
        )
    )
)
def test_column_scorers_equal_the_general_scorers(data: tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]) -> None:
    allocated, pod, alloc, weights = data
    req = allocated + pod
    req_cols = [np.ascontiguousarray(req[:, j]) for j in range(req.shape[1])]
    allocated_cols = [np.ascontiguousarray(allocated[:, j]) for j in range(allocated.shape[1])]
    alloc_cols = [np.ascontiguousarray(alloc[:, j]) for j in range(alloc.shape[1])]
    w = np.asarray(weights, dtype=np.int64)
    least = strategies.least_allocated_columns(req_cols, allocated_cols, alloc_cols, weights)
    assert least.tolist() == strategies._least_allocated(req, allocated, alloc, w).tolist()
    for columns, general in (
        (balanced_resource_columns, balanced_resource_scorer),
        (balanced_resource_columns_v1_35, balanced_resource_scorer_v1_35),
    ):
        balanced = columns(req_cols, allocated_cols, alloc_cols, weights)
        assert balanced.tolist() == general(req, allocated, alloc, w).tolist(), columns.__name__


@pytest.mark.parametrize(
    ("req", "allocated", "alloc", "least", "balanced", "balanced_v1_35"),
    [
        ([[0, 0]], [[0, 0]], [[4000, 8 << 30]], [100], [75], [100]),
        ([[2000, 4 << 30]], [[0, 0]], [[4000, 8 << 30]], [50], [75], [100]),
        ([[8000, 16 << 30]], [[0, 0]], [[4000, 8 << 30]], [0], [75], [100]),  # over capacity
        ([[4001, 0]], [[0, 0]], [[4000, 8 << 30]], [50], [50], [50]),  # one over by 1: 0 on cpu, not -1
        ([[1000, 6 << 30]], [[0, 0]], [[4000, 8 << 30]], [50], [62], [75]),
        ([[2000, 4 << 30]], [[2000, 0]], [[4000, 8 << 30]], [50], [87], [100]),  # the pod evens the node out
    ],
    ids=["empty", "half", "over", "just-over", "uneven", "evened"],
)
def test_column_scorers_by_hand(
    req: list[list[int]],
    allocated: list[list[int]],
    alloc: list[list[int]],
    least: list[int],
    balanced: list[int],
    balanced_v1_35: list[int],
) -> None:
    r, d, a = (np.asarray(x, dtype=np.int64) for x in (req, allocated, alloc))
    cols_r, cols_d, cols_a = ([x[:, 0].copy(), x[:, 1].copy()] for x in (r, d, a))
    assert strategies.least_allocated_columns(cols_r, cols_d, cols_a, (1, 1)).tolist() == least
    assert balanced_resource_columns(cols_r, cols_d, cols_a, (1, 1)).tolist() == balanced
    assert balanced_resource_columns_v1_35(cols_r, cols_d, cols_a, (1, 1)).tolist() == balanced_v1_35


def test_the_column_scorers_leave_their_inputs_alone() -> None:
    # The scorers' inputs can be columns another scorer shares (the memo).
    req = [np.asarray([1, 2, 9], dtype=np.int64), np.asarray([3, 0, 4], dtype=np.int64)]
    allocated = [np.asarray([0, 2, 5], dtype=np.int64), np.asarray([1, 0, 4], dtype=np.int64)]
    alloc = [np.asarray([4, 4, 4], dtype=np.int64), np.asarray([8, 8, 8], dtype=np.int64)]
    before = [c.copy() for c in (*req, *allocated, *alloc)]
    strategies.least_allocated_columns(req, allocated, alloc, (2, 3))
    balanced_resource_columns(req, allocated, alloc, (1, 1))
    balanced_resource_columns_v1_35(req, allocated, alloc, (1, 1))
    assert all((c == b).all() for c, b in zip((*req, *allocated, *alloc), before, strict=True))


# -------------------------------------------------------------- the scorer on a table

#: Amounts the table may hold: ordinary ones, the edges of the fast path
#: (0, 1, SAFE, SAFE + 1), negatives and the int64 extremes.
AMOUNT = st.one_of(
    st.integers(min_value=0, max_value=10**12),
    st.sampled_from([0, 1, SAFE - 1, SAFE, SAFE + 1, INT64_MAX, -1, -(2**63)]),
)
POD_REQUEST = st.one_of(
    st.integers(min_value=0, max_value=10**12),
    st.sampled_from([0, SAFE, SAFE + 1, INT64_MAX, -1]),
)
ROWS = 8


def _fit(weights: tuple[int, int]) -> NodeResourcesFit:
    specs = [ResourceSpec(name="cpu", weight=weights[0]), ResourceSpec(name="memory", weight=weights[1])]
    return NodeResourcesFit(
        NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(type="LeastAllocated", resources=specs))
    )


_CLUSTER = Cluster([make_node(f"n{i}", cpu="4", memory="8Gi") for i in range(ROWS)])
_HANDLE_V1_35 = dataclasses.replace(_CLUSTER.handle(), features=features.Features.of(features.KubeVersion(1, 35)))


@settings(max_examples=200, deadline=None)
@given(
    alloc=hnp.arrays(np.int64, (ROWS, 2), elements=AMOUNT),
    req=hnp.arrays(np.int64, (ROWS, 2), elements=AMOUNT),
    req_nz=hnp.arrays(np.int64, (ROWS, 2), elements=AMOUNT),
    rows=st.lists(st.integers(min_value=0, max_value=ROWS - 1), min_size=1, max_size=ROWS, unique=True),
    pod=st.tuples(POD_REQUEST, POD_REQUEST),
    weights=st.tuples(st.integers(min_value=1, max_value=100), st.integers(min_value=1, max_value=100)),
)
def test_scorer_equals_the_general_path_on_any_table(
    alloc: np.ndarray,
    req: np.ndarray,
    req_nz: np.ndarray,
    rows: list[int],
    pod: tuple[int, int],
    weights: tuple[int, int],
) -> None:
    nodes = _CLUSTER.snapshot  # its cpu and memory columns are overwritten below, whole
    cpu, memory = nodes.columns.index["cpu"], nodes.columns.index["memory"]
    at = np.asarray(sorted(nodes.alive_rows().tolist()), dtype=np.int64)
    for table, values in ((nodes.alloc, alloc), (nodes.req, req), (nodes.req_nz, req_nz)):
        table[at, cpu], table[at, memory] = values[:, 0], values[:, 1]
    picked = at[np.asarray(rows, dtype=np.int64)]
    memo: dict[Any, Any] = {}  # shared by every scorer, as one run_score call shares it
    scorers = (
        _fit((1, 1)).scorer,
        _fit(weights).scorer,
        NodeResourcesBalancedAllocation(handle=_HANDLE_V1_35).scorer,
        NodeResourcesBalancedAllocation().scorer,
    )
    for scorer in scorers:
        general_req, general_allocated, general_alloc = scorer.node_allocatable_request(nodes, picked, pod)
        general = np.asarray(
            scorer.scorer(general_req, general_allocated, general_alloc, scorer.weights), dtype=np.int64
        )
        assert scorer.score(nodes, picked, pod, memo).tolist() == general.tolist()
        assert scorer.score(nodes, picked, pod).tolist() == general.tolist()


# -------------------------------------------------------------- the framework

TAINTED = [make_node(f"t{i}", cpu=str(2 + i), memory=f"{4 + i}Gi", labels={"zone": "ab"[i % 2]}) for i in range(6)] + [
    make_node("prefer", cpu="8", memory="16Gi", taints=[model.Taint(key="k", value="v", effect="PreferNoSchedule")]),
    make_node("prefer2", cpu="8", memory="16Gi", taints=[model.Taint(key="q", effect="PreferNoSchedule")]),
]
EXISTING = [make_pod(f"e{i}", requests={"cpu": f"{i}00m", "memory": f"{i}00Mi"}, node_name=f"t{i}") for i in range(5)]
PODS = {
    "plain": make_pod("p", requests={"cpu": "500m", "memory": "1Gi"}),
    "best effort": make_pod("b"),
    "tolerates k": make_pod("tol", requests={"cpu": "1"}, spec={"tolerations": [{"key": "k", "operator": "Exists"}]}),
    "over every node": make_pod("big", requests={"cpu": "64", "memory": "1Ti"}),
}


def _one_by_one(fwk: Any, state: fw.CycleState, pi: PodInfo, nodes: Any, rows: np.ndarray) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for p in fwk.score:
        if p.NAME in state.skip_score:
            continue
        raw = np.asarray(p.score(state, pi, nodes, rows), dtype=np.int64)
        if isinstance(p, fw.ScoreNormalizer):
            raw = np.asarray(p.normalize_score(state, pi, raw), dtype=np.int64)
        out[p.NAME] = (raw * fwk.weights.get(p.NAME, 1)).tolist()
    return out


@pytest.mark.parametrize("tainted", [False, True], ids=["no taints", "some PreferNoSchedule"])
@pytest.mark.parametrize("pod", PODS)
@pytest.mark.parametrize("subset", ["all", "untainted", "one"])
def test_run_score_equals_each_plugin_scored_alone(tainted: bool, pod: str, subset: str) -> None:
    cluster = Cluster(TAINTED if tainted else TAINTED[:6], EXISTING)
    fwk = cluster.berth.core.framework_for("")
    nodes = cluster.snapshot
    pi = PodInfo.of(PODS[pod])
    rows = nodes.alive_rows()
    if subset == "untainted":
        rows = np.asarray([r for r in rows.tolist() if not nodes.name(r).startswith("prefer")], dtype=np.int64)
    elif subset == "one":
        rows = rows[:1]
    state = fw.CycleState()
    fwk.run_pre_filter(state, pi, nodes)
    fwk.run_pre_score(state, pi, nodes, rows)
    outcome = fwk.run_score(state, pi, nodes, rows)
    want = _one_by_one(fwk, state, pi, nodes, rows)
    assert {k: v.tolist() for k, v in outcome.by_plugin.items()} == want
    assert outcome.total.tolist() == [sum(col) for col in zip(*want.values(), strict=True)]
    # The scratch lives for the call only.
    assert state.get(fw.SCORE_SCRATCH) is None
    # The total is its own array: by_plugin keeps its scores whatever happens to it.
    outcome.total += 1
    assert {k: v.tolist() for k, v in outcome.by_plugin.items()} == want


def test_run_score_drops_its_scratch_when_a_plugin_fails() -> None:
    cluster = Cluster(TAINTED[:2])
    fwk = cluster.berth.core.framework_for("")
    nodes = cluster.snapshot
    state = fw.CycleState()
    pi = PodInfo.of(PODS["plain"])
    rows = nodes.alive_rows()
    fwk.run_pre_score(state, pi, nodes, rows)
    # Rows naming no row of the table: a gather fails mid-call, reported with the plugin's name.
    with pytest.raises(PluginError, match=r'plugin "NodeResourcesFit" failed with: IndexError'):
        fwk.run_score(state, pi, nodes, np.asarray([10**6], dtype=np.int64))
    assert state.get(fw.SCORE_SCRATCH) is None


def test_score_memo_is_for_the_same_rows_and_table_only() -> None:
    nodes = Cluster(TAINTED[:2]).snapshot
    rows = nodes.alive_rows()
    state = fw.CycleState()
    state.write(fw.SCORE_SCRATCH, fw.ScoreScratch(nodes, rows))
    assert fw.score_memo(state, nodes, rows) is not None
    assert fw.score_memo(state, nodes, rows.copy()) is None
    assert fw.score_memo(fw.CycleState(), nodes, rows) is None


# -------------------------------------------------------------- TaintToleration


@pytest.mark.parametrize(
    ("nodes", "tolerations", "want"),
    [
        (TAINTED[:3], [], {"t0": 100, "t1": 100, "t2": 100}),
        (TAINTED[:1] + TAINTED[6:], [], {"t0": 100, "prefer": 0, "prefer2": 0}),
        (TAINTED[:1] + TAINTED[6:], [{"key": "k", "operator": "Exists"}], {"t0": 100, "prefer": 100, "prefer2": 0}),
    ],
    ids=["no node tainted", "two tainted", "one tolerated"],
)
def test_taint_toleration_scores(nodes: list[Any], tolerations: list[dict[str, Any]], want: dict[str, int]) -> None:
    pod = make_pod("p", spec={"tolerations": tolerations})
    assert Cluster(nodes).scores(TaintToleration(), pod) == want


def test_taint_toleration_nothing_counted_normalizes_as_default_normalize_score() -> None:
    plugin = TaintToleration()
    nodes = Cluster(TAINTED[:3]).snapshot
    state = fw.CycleState()
    pi = PodInfo.of(make_pod("p"))
    raw = plugin.score(state, pi, nodes, nodes.alive_rows())
    assert plugin.normalize_score(state, pi, raw).tolist() == default_normalize_score(raw, 100, reverse=True).tolist()
    # Other all-zero scores (not this Score's answer) take the general path, same result.
    other = np.zeros(3, dtype=np.int64)
    assert plugin.normalize_score(state, pi, other).tolist() == [100, 100, 100]
    assert plugin.normalize_score(state, pi, np.asarray([0, 1, 2], dtype=np.int64)).tolist() == [100, 50, 0]


# -------------------------------------------------------------- ImageLocality

IMAGE_NAMES = ["a", "b:v1", "c@sha256:00", "d:latest"]


def _images_node(name: str, held: list[tuple[int, int]]) -> model.Node:
    images = [
        model.ContainerImage(names=[IMAGE_NAMES[k], IMAGE_NAMES[k]] if dup else [IMAGE_NAMES[k]], size_bytes=size)
        for k, size, dup in ((k, size, size % 3 == 0) for k, size in held)
    ]
    return make_node(name, cpu="1", memory="1Gi", images=images)


NODE_IMAGES = st.lists(
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=3), st.integers(min_value=0, max_value=3000 * 2**20)),
        max_size=4,
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(first=NODE_IMAGES, second=NODE_IMAGES, pod_images=st.lists(st.sampled_from([*IMAGE_NAMES, "zz"]), min_size=1))
def test_image_locality_remembered_terms_equal_a_fresh_plugin(
    first: list[list[tuple[int, int]]], second: list[list[tuple[int, int]]], pod_images: list[str]
) -> None:
    # One plugin scores pods on one cluster, then on another, then on the
    # first grown by a node: always what a plugin with nothing remembered scores.
    pod = make_pod("p", containers=[{"name": f"c{i}", "image": img} for i, img in enumerate(pod_images)])
    single = make_pod("q", containers=[{"name": "c", "image": pod_images[0]}])
    kept = ImageLocality()
    one = Cluster([_images_node(f"a{i}", held) for i, held in enumerate(first)])
    two = Cluster([_images_node(f"b{i}", held) for i, held in enumerate(second)])
    for cluster in (one, two, one):
        for p in (pod, single, pod):
            assert cluster.scores(kept, p) == cluster.scores(ImageLocality(), p)
        cluster.add(_images_node(f"x{len(cluster.snapshot.alive_rows())}", [(0, 500 * 2**20)]))
