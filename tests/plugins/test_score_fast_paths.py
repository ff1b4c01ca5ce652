"""The resource scorers' shortcuts for the common case (every configured
resource allocatable on every row) give the general computation's scores
exactly. The general path is forced by adding a resource no row has
(allocatable 0: left out of every row's score)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from berth.plugins.noderesources import strategies
from berth.plugins.noderesources.balanced_allocation import balanced_resource_scorer, balanced_resource_scorer_v1_35

AMOUNT = st.integers(min_value=0, max_value=10**12)


def _with_left_out(
    req: np.ndarray, allocated: np.ndarray, alloc: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, ...]:
    n = req.shape[0]
    zeros = np.zeros((n, 1), dtype=np.int64)
    return np.hstack([req, zeros]), np.hstack([allocated, zeros]), np.hstack([alloc, zeros]), np.append(weights, 1)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.integers(min_value=1, max_value=20).flatmap(
        lambda n: st.tuples(
            hnp.arrays(np.int64, (n, 2), elements=AMOUNT),
            hnp.arrays(np.int64, (n, 2), elements=AMOUNT),
            hnp.arrays(np.int64, (n, 2), elements=st.integers(min_value=1, max_value=10**12)),
        )
    ),
    weights=hnp.arrays(np.int64, 2, elements=st.integers(min_value=1, max_value=100)),
)
def test_shortcuts_score_as_the_general_path(
    rows: tuple[np.ndarray, np.ndarray, np.ndarray], weights: np.ndarray
) -> None:
    allocated, pod, alloc = rows
    req = allocated + pod
    for scorer in (balanced_resource_scorer, balanced_resource_scorer_v1_35, strategies._least_allocated):
        fast = scorer(req, allocated, alloc, weights)
        general = scorer(*_with_left_out(req, allocated, alloc, weights))
        assert fast.tolist() == general.tolist(), scorer.__name__


@pytest.mark.parametrize(
    ("req", "allocated", "alloc", "balanced", "balanced_v1_35", "least"),
    [
        ([[0, 0]], [[0, 0]], [[4000, 8 << 30]], [75], [100], [100]),
        ([[2000, 4 << 30]], [[0, 0]], [[4000, 8 << 30]], [75], [100], [50]),
        ([[4000, 0]], [[0, 0]], [[4000, 8 << 30]], [50], [50], [50]),
        ([[4000, 8 << 30]], [[4000, 0]], [[4000, 8 << 30]], [100], [100], [0]),  # the pod evens the node out
        # over capacity: fractions capped at 1, least 0
        ([[8000, 16 << 30]], [[0, 0]], [[4000, 8 << 30]], [75], [100], [0]),
        ([[1000, 6 << 30]], [[0, 0]], [[4000, 8 << 30]], [62], [75], [50]),
    ],
    ids=["empty", "half", "one-sided", "evened", "over", "uneven"],
)
def test_shortcut_scores_by_hand(
    req: list[list[int]],
    allocated: list[list[int]],
    alloc: list[list[int]],
    balanced: list[int],
    balanced_v1_35: list[int],
    least: list[int],
) -> None:
    r, d = np.asarray(req, dtype=np.int64), np.asarray(allocated, dtype=np.int64)
    a, w = np.asarray(alloc, dtype=np.int64), np.ones(2, dtype=np.int64)
    assert balanced_resource_scorer(r, d, a, w).tolist() == balanced
    assert balanced_resource_scorer_v1_35(r, d, a, w).tolist() == balanced_v1_35
    assert strategies._least_allocated(r, d, a, w).tolist() == least
