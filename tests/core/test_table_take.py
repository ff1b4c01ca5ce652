"""NodeTable.take (preemption's scratch tables): a copy of some rows equals
the table of_nodes builds from those nodes plus their pods' usage, and
changing the copy changes nothing in the source."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model
from berth.testing import make_node, make_pod

TAINTS = [[], [model.Taint(key="gpu", value="yes", effect="NoSchedule")]]


def _table(specs: list[tuple[int, int, bool, int]]) -> NodeTable:
    t = NodeTable()
    for i, (cpu, pods, cordoned, taint) in enumerate(specs):
        node = make_node(
            f"n{i}",
            cpu=str(cpu),
            memory="8Gi",
            pods=110,
            allocatable={"example.com/dev": i % 3},
            unschedulable=cordoned,
            taints=TAINTS[taint],
        )
        row = t.row(node.metadata.name)
        t.set_node(row, node)
        for k in range(pods):
            t.add_pod_usage(row, PodInfo.of(make_pod(f"p{i}-{k}", requests={"cpu": "100m"}, node_name=f"n{i}")), 1)
    return t


@given(
    specs=st.lists(st.tuples(st.integers(1, 8), st.integers(0, 3), st.booleans(), st.integers(0, 1)), min_size=1),
    data=st.data(),
)
def test_taken_rows_equal_a_table_built_from_their_nodes_with_their_usage(
    specs: list[tuple[int, int, bool, int]], data: st.DataObject
) -> None:
    src = _table(specs)
    rows = data.draw(st.permutations(range(len(specs))).map(lambda p: p[: max(1, len(p) // 2)]))
    before = (src.req.copy(), src.alloc.copy())

    got = src.take(rows)

    built = NodeTable.of_nodes([src.node(r) for r in rows], src.columns)
    built.ensure_columns()
    n = len(rows)
    assert got.size == n and [got.name(i) for i in range(n)] == [src.name(r) for r in rows]
    assert got.index == {src.name(r): i for i, r in enumerate(rows)}
    w = built.alloc.shape[1]
    assert np.array_equal(got.alloc[:n, :w], built.alloc[:n, :w])
    assert np.array_equal(got.req[:n], src.req[rows][:, : got.req.shape[1]])
    assert got.unschedulable[:n].tolist() == built.unschedulable[:n].tolist()
    assert [got.taint_sets[g] for g in got.taint_group[:n]] == [built.taint_sets[g] for g in built.taint_group[:n]]
    assert got.alive[:n].all()

    got.add_pod_usage(0, PodInfo.of(make_pod("more", requests={"cpu": "1", "example.com/new": "1"})), 1)
    assert np.array_equal(src.req, before[0]) and np.array_equal(src.alloc, before[1])
    assert "example.com/new" not in src.columns.index
