"""Filter stops once it has enough feasible nodes (``findNodesThatPassFilters``).

kube-scheduler v1.34.4 (``pkg/scheduler/schedule_one.go``) filters the nodes
of the rotating window in parallel and cancels once ``feasibleNodesLen >=
numNodesToFind``; ``nextStartNodeIndex`` then advances by the nodes processed.
Berth's vectorised plugins judge every row at once, and the plugins that judge
node by node (``FILTER_PER_NODE``) get only the rows still needed, in the
window's order. These tables check that such a plugin sees exactly the rows
that upstream's per-node loop would give it, and that the feasible set, the
statuses of the processed rows and the window are what filtering every row
gives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt
import pytest

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.framework import interface as fw
from berth.framework.runtime import FilterOutcome, Framework
from berth.scheduling import algorithm
from berth.testing import Cluster, make_node, make_pod

U = fw.Code.UNSCHEDULABLE
UU = fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE

Rejects = Callable[[int], bool]


def _index(name: str) -> int:
    return int(name[1:])


class _Vector:
    """A vectorised Filter plugin rejecting the nodes ``rejects`` picks."""

    def __init__(self, name: str, rejects: Rejects, code: fw.Code = U) -> None:
        self.NAME = name
        self.rejects = rejects
        self.code = code
        self.calls = 0

    def filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: np.ndarray) -> fw.NodeVerdicts:
        self.calls += 1
        failed = np.array([self.rejects(_index(nodes.name(r))) for r in rows.tolist()], dtype=bool)
        return fw.NodeVerdicts.fail_where(failed, fw.Status(self.code, (f"{self.NAME} says no",)))


class _PerNode:
    """A Filter plugin judging node by node; records the rows it was given,
    and rejects with one of two reasons (so reasons are per row)."""

    FILTER_PER_NODE: ClassVar[bool] = True

    def __init__(self, name: str, rejects: Rejects) -> None:
        self.NAME = name
        self.rejects = rejects
        self.seen: list[int] = []

    def filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: np.ndarray) -> fw.NodeVerdicts:
        self.seen.extend(rows.tolist())

        def judge(row: int) -> fw.Status | None:
            i = _index(nodes.name(row))
            if not self.rejects(i):
                return None
            return fw.Status(UU if i % 2 else U, (f"{self.NAME} rejects {'odd' if i % 2 else 'even'}",))

        return fw.NodeVerdicts.per_node(judge(r) for r in rows.tolist())


class _Vectorised(_PerNode):
    """The same verdicts, but judged all rows at once (the reference)."""

    FILTER_PER_NODE: ClassVar[bool] = False


def never(i: int) -> bool:
    return False


def always(i: int) -> bool:
    return True


def every(k: int, offset: int = 0) -> Rejects:
    return lambda i: i % k == offset


def below(k: int) -> Rejects:
    return lambda i: i < k


# (id, plugins in order as (kind, rejects), nodes, want)
#   kind: "vec" vectorised, "node" per node
RUN_FILTER_CASES = [
    ("per-node plugin last, nothing rejected", [("vec", never), ("node", never)], 20, 5),
    ("vectorised rejects evens, per-node every third", [("vec", every(2)), ("node", every(3))], 30, 4),
    ("per-node plugin first, a vectorised one after it", [("node", every(3)), ("vec", every(2, 1))], 30, 5),
    (
        "two per-node plugins around a vectorised one",
        [("node", every(5)), ("vec", every(4)), ("node", every(3))],
        40,
        6,
    ),
    ("fewer feasible than wanted: every row processed", [("vec", every(2)), ("node", below(25))], 30, 10),
    (
        "the vectorised plugins reject everything: per-node plugin never called",
        [("vec", always), ("node", never)],
        12,
        3,
    ),
    ("the per-node plugin rejects everything", [("vec", never), ("node", always)], 12, 3),
    ("want equals the number of rows", [("vec", every(7)), ("node", every(4))], 16, 16),
    ("want of one", [("vec", below(3)), ("node", every(2))], 10, 1),
]


def _framework(c: Cluster, specs: Sequence[tuple[str, Rejects]], *, reference: bool) -> Framework:
    fwk = c.berth.core.framework_for("berth")
    plugins: list[object] = []
    for i, (kind, rejects) in enumerate(specs):
        name = f"P{i}"
        if kind == "vec":
            plugins.append(_Vector(name, rejects))
        else:
            plugins.append((_Vectorised if reference else _PerNode)(name, rejects))
    fwk.filter = plugins  # type: ignore[assignment]
    return fwk


def _statuses(out: FilterOutcome, limit: int) -> dict[int, tuple[int, tuple[str, ...], str]]:
    return {r: (st.code, st.reasons, st.plugin) for r, st in out.failures(limit).items()}


def _expected_seen(reference: FilterOutcome, plugin: int, processed: int) -> list[int]:
    """The rows a per-node loop hands plugin ``plugin`` (named ``P<plugin>``):
    the processed rows no plugin before it rejected."""
    seen = []
    for k in range(processed):
        if reference.ok[k] or int(reference.statuses[int(reference.reason[k])].plugin[1:]) >= plugin:
            seen.append(int(reference.rows[k]))
    return seen


@pytest.mark.parametrize(("name", "specs", "n", "want"), RUN_FILTER_CASES, ids=[c[0] for c in RUN_FILTER_CASES])
@pytest.mark.parametrize("start", [0, 7], ids=["window from 0", "rotated window"])
def test_per_node_filter_sees_only_the_rows_needed_and_agrees_with_filtering_all(
    name: str, specs: list[tuple[str, Rejects]], n: int, want: int, start: int
) -> None:
    c = Cluster([make_node(f"n{i:03d}") for i in range(n)])
    pod = PodInfo.of(make_pod("p"))
    order = c.snapshot.order()
    order = np.concatenate((order[start % n :], order[: start % n]))

    ref_fwk = _framework(c, specs, reference=True)
    reference = ref_fwk.run_filter(fw.CycleState(), pod, c.snapshot, order)
    processed = algorithm._feasible_window(reference.ok, want)

    fwk = _framework(c, specs, reference=False)
    got = fwk.run_filter(fw.CycleState(), pod, c.snapshot, order, want=want)

    assert len(got.rows) == processed
    assert np.array_equal(got.rows, order[:processed])
    assert np.array_equal(got.ok, reference.ok[:processed])
    assert _statuses(got, processed) == _statuses(reference, processed)
    for i, plugin in enumerate(fwk.filter):
        if isinstance(plugin, _PerNode):
            assert plugin.seen == _expected_seen(reference, i, processed)


def test_without_want_every_row_is_processed_but_rejected_rows_skip_per_node_plugins() -> None:
    specs: list[tuple[str, Rejects]] = [("vec", every(2)), ("node", every(3))]
    c = Cluster([make_node(f"n{i:03d}") for i in range(12)])
    pod = PodInfo.of(make_pod("p"))
    fwk = _framework(c, specs, reference=False)
    rows = c.snapshot.order()
    out = fwk.run_filter(fw.CycleState(), pod, c.snapshot, rows)
    assert len(out.rows) == 12
    assert [c.snapshot.name(r) for r in out.feasible().tolist()] == ["n001", "n005", "n007", "n011"]
    plugin = fwk.filter[1]
    assert isinstance(plugin, _PerNode)
    assert [c.snapshot.name(r) for r in plugin.seen] == ["n001", "n003", "n005", "n007", "n009", "n011"]


def test_all_reasons_still_runs_every_plugin_on_every_row() -> None:
    specs: list[tuple[str, Rejects]] = [("vec", every(2)), ("node", every(3))]
    c = Cluster([make_node(f"n{i:03d}") for i in range(6)])
    fwk = _framework(c, specs, reference=False)
    out = fwk.run_filter(fw.CycleState(), PodInfo.of(make_pod("p")), c.snapshot, c.snapshot.order(), all_reasons=True)
    plugin = fwk.filter[1]
    assert isinstance(plugin, _PerNode)
    assert len(plugin.seen) == 6
    row0 = c.snapshot.index["n000"]
    assert [st.plugin for st in out.all_failures(row0)] == ["P0", "P1"]


# A final per-row check (the nominated pods'): it counts like a plugin after all others.
LAST_CASES = [
    ("rejects a third of the rows", every(3), 30, 8),
    ("rejects every row", always, 10, 3),
    ("rejects none", never, 10, 4),
]


@pytest.mark.parametrize(("name", "rejects", "n", "want"), LAST_CASES, ids=[c[0] for c in LAST_CASES])
def test_the_last_check_runs_only_on_rows_that_passed_and_counts_towards_want(
    name: str, rejects: Rejects, n: int, want: int
) -> None:
    c = Cluster([make_node(f"n{i:03d}") for i in range(n)])
    pod = PodInfo.of(make_pod("p"))
    specs: list[tuple[str, Rejects]] = [("vec", every(4, 1)), ("node", every(5))]
    checked: list[int] = []
    no = fw.Status(U, ("nominated pods would not fit",))

    def last(batch: npt.NDArray[np.int64]) -> dict[int, fw.Status]:
        checked.extend(batch.tolist())
        return {k: no for k, row in enumerate(batch.tolist()) if rejects(_index(c.snapshot.name(row)))}

    rows = c.snapshot.order()
    # The reference: everything filtered, then the last check over the feasible rows.
    reference = _framework(c, specs, reference=True).run_filter(fw.CycleState(), pod, c.snapshot, rows)
    for k in np.flatnonzero(reference.ok).tolist():
        if rejects(_index(c.snapshot.name(int(rows[k])))):
            reference.ok[k] = False
            reference.reason[k] = len(reference.statuses)
            reference.statuses.append(no)
    processed = algorithm._feasible_window(reference.ok, want)
    checked.clear()

    got = _framework(c, specs, reference=False).run_filter(fw.CycleState(), pod, c.snapshot, rows, want=want, last=last)
    assert len(got.rows) == processed
    assert np.array_equal(got.ok, reference.ok[:processed])
    assert _statuses(got, processed) == _statuses(reference, processed)
    passed_plugins = [
        int(rows[k])
        for k in range(processed)
        if not (every(4, 1)(_index(c.snapshot.name(int(rows[k])))) or every(5)(_index(c.snapshot.name(int(rows[k])))))
    ]
    assert checked == passed_plugins


# find_nodes_that_fit over 250 nodes (want = numFeasibleNodesToFind = 100
# at the default percentage): the window, the feasible rows, the diagnosis
# and nextStartNodeIndex are the same with and without the early stop.
WINDOW_CASES = [
    ("most nodes fit", [("vec", every(10)), ("node", every(7))], 0),
    ("few nodes fit", [("vec", every(2)), ("node", lambda i: i % 9 != 0)], 0),
    ("from a rotated start", [("vec", every(3)), ("node", every(4))], 180),
    ("no node fits", [("vec", every(2)), ("node", always)], 42),
]


@pytest.mark.parametrize(("name", "specs", "start"), WINDOW_CASES, ids=[c[0] for c in WINDOW_CASES])
def test_find_nodes_that_fit_keeps_the_window_and_the_diagnosis(
    name: str, specs: list[tuple[str, Rejects]], start: int
) -> None:
    c = Cluster([make_node(f"n{i:03d}") for i in range(250)])
    pod = PodInfo.of(make_pod("p"))

    def run(reference: bool) -> tuple[list[str], algorithm.Diagnosis, int, Framework]:
        fwk = _framework(c, specs, reference=reference)
        sampler = algorithm.Sampler()
        sampler.next_start = start
        feasible, diag, _ = algorithm.find_nodes_that_fit(
            fwk, fw.CycleState(), pod, c.snapshot, percentage=0, sampler=sampler
        )
        return [c.snapshot.name(r) for r in feasible.tolist()], diag, sampler.next_start, fwk

    want_names, want_diag, want_next, _ = run(reference=True)
    got_names, got_diag, got_next, fwk = run(reference=False)
    assert got_names == want_names
    assert len(got_names) <= algorithm.num_feasible_nodes_to_find(0, 250)
    assert got_next == want_next
    assert got_diag.node_to_status == want_diag.node_to_status
    assert got_diag.unschedulable_plugins == want_diag.unschedulable_plugins
    per_node = fwk.filter[1]
    assert isinstance(per_node, _PerNode)
    processed = (want_next - start) % 250 or 250
    assert len(per_node.seen) <= processed
    if len(got_names) == 0:
        with pytest.raises(algorithm.FitError) as err:
            algorithm.schedule_pod(fwk, fw.CycleState(), pod, c.snapshot, percentage=0, sampler=algorithm.Sampler())
        assert str(err.value).startswith("0/250 nodes are available: ")
