"""DefaultPreemption's dry runs over a batch of nodes
(``preemption.select_victims_on_nodes``, all nodes in lockstep over one
scratch table) give exactly the victims the one-node dry run
(``select_victims_on_node``, upstream's SelectVictimsOnNode) gives node by
node — with PDBs, nominated pods and victims of mixed priorities — and
change nothing in the snapshot."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework import preemption
from berth.testing import Cluster, make_node, make_pod, parse_config

PRIORITIES = (0, 10, 100, 1000)

node_st = st.fixed_dictionaries(
    {
        "cpu": st.integers(2, 8),
        # (cpu, priority, labelled "app=guarded") of the pods bound there; as many as fit
        "pods": st.lists(st.tuples(st.integers(1, 3), st.sampled_from(PRIORITIES), st.booleans()), max_size=5),
        # a pod nominated there: (cpu, priority) or none
        "nominated": st.none() | st.tuples(st.integers(1, 2), st.sampled_from(PRIORITIES)),
    }
)


#: A few nodes, an incoming pod's CPU and priority, with or without spread.
CASES = {
    "nodes": st.lists(node_st, min_size=1, max_size=6),
    "cpu": st.integers(1, 4),
    "priority": st.sampled_from((5, 50, 500)),
    "spread": st.booleans(),
}


def _pdb(allowed: int) -> model.PodDisruptionBudget:
    return msgspec.convert(
        {
            "metadata": {"name": "guard", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "guarded"}}, "minAvailable": 1},
            "status": {"disruptionsAllowed": allowed},
        },
        model.PodDisruptionBudget,
    )


def _setup(nodes: list[dict[str, Any]], cpu: int, priority: int, spread: bool) -> tuple[Any, ...]:
    ns, pods = [], []
    for i, n in enumerate(nodes):
        ns.append(make_node(f"n{i}", cpu=str(n["cpu"]), memory="64Gi", pods=110, labels={"zone": f"z{i % 2}"}))
        free = n["cpu"]
        for j, (c, prio, guarded) in enumerate(n["pods"]):
            if c > free:
                continue
            free -= c
            labels = {"app": "guarded"} if guarded else {"app": "other"}
            pods.append(
                make_pod(f"p{i}-{j}", requests={"cpu": str(c)}, node_name=f"n{i}", priority=prio, labels=labels)
            )
    c = Cluster(ns, pods)
    core = c.berth.core
    core.on_pdb(_pdb(1))
    for i, n in enumerate(nodes):
        if n["nominated"] is not None:
            ncpu, nprio = n["nominated"]
            waiting = make_pod(f"nominated-{i}", requests={"cpu": str(ncpu)}, priority=nprio)
            waiting.metadata.uid = f"uid-nominated-{i}"
            core.nominator.add(PodInfo.of(waiting), f"n{i}")
    spec: dict[str, Any] = {}
    if spread:  # an active PreFilterExtension: the batch falls back to node by node
        spec = {
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "guarded"}},
                }
            ]
        }
    incoming = make_pod("incoming", requests={"cpu": str(cpu)}, priority=priority, labels={"app": "guarded"}, spec=spec)
    incoming.metadata.uid = "uid-incoming"
    fwk = core.framework_for(core.cfg.profiles[0].scheduler_name)
    snap = core.snapshot()
    pod = PodInfo.of(incoming)
    return core, fwk, snap, pod


@given(**CASES)
def test_the_batch_dry_run_finds_the_victims_the_one_node_dry_run_finds(
    nodes: list[dict[str, Any]], cpu: int, priority: int, spread: bool
) -> None:
    core, fwk, snap, pod = _setup(nodes, cpu, priority, spread)
    state = fw.CycleState()
    fwk.run_pre_filter(state, pod, snap)
    rows = snap.alive_rows().tolist()
    infos = [snap.infos[r] for r in rows]
    pdbs = core.pdbs.list()
    before = snap.req[: snap.size].tolist()

    one_by_one = [preemption.select_victims_on_node(fwk, pod, snap, info, None, pdbs, state=state) for info in infos]
    batch = preemption.select_victims_on_nodes(fwk, pod, snap, infos, [None] * len(infos), pdbs, state=state)

    def key(v: preemption.Victims | None) -> Any:
        return None if v is None else ([p.uid for p in v.victims], v.num_pdb_violations)

    assert [key(v) for v in batch] == [key(v) for v in one_by_one]
    assert snap.req[: snap.size].tolist() == before
    # A second batch on the same state answers the same: the state was restored.
    again = preemption.select_victims_on_nodes(fwk, pod, snap, infos, [None] * len(infos), pdbs, state=state)
    assert [key(v) for v in again] == [key(v) for v in batch]


def test_candidates_restricted_per_node_are_honoured() -> None:
    nodes = [{"cpu": 4, "pods": [(2, 0, False), (2, 0, False)], "nominated": None}] * 2
    core, fwk, snap, pod = _setup(nodes, 2, 50, False)
    state = fw.CycleState()
    fwk.run_pre_filter(state, pod, snap)
    infos = [snap.infos[r] for r in snap.alive_rows().tolist()]
    [second] = [p for p in infos[0].pods.values() if p.pod.metadata.name == "p0-1"]
    only: list[list[PodInfo] | None] = [[second], []]
    got = preemption.select_victims_on_nodes(fwk, pod, snap, infos, only, core.pdbs.list(), state=state)
    assert got[0] is not None and [v.pod.metadata.name for v in got[0].victims] == ["p0-1"]
    assert got[1] is None  # no pod of that node may go


@given(**CASES)
def test_the_batch_nominated_pods_check_answers_as_the_one_node_check(
    nodes: list[dict[str, Any]], cpu: int, priority: int, spread: bool
) -> None:
    """RunFilterPluginsWithNominatedPods for many rows on one scratch table
    (``fits_with_nominated_rows``) gives each row the status the one-node
    check gives it, with nominated pods of lower, equal and higher priority,
    and changes nothing in the snapshot."""
    core, fwk, snap, pod = _setup(nodes, cpu, priority, spread)
    state = fw.CycleState()
    fwk.run_pre_filter(state, pod, snap)
    rows = snap.alive_rows().tolist()
    before = snap.req[: snap.size].tolist()

    one_by_one = []
    for r in rows:
        info = snap.infos[r]
        assert info is not None
        one_by_one.append(
            preemption.fits_with_nominated(fwk, state, pod, snap, info, core.nominator.pods_on(info.name))
        )

    def key(s: fw.Status) -> Any:
        return (s.code, s.reasons, s.plugin)

    def failures(statuses: list[fw.Status]) -> dict[int, Any]:
        return {k: key(s) for k, s in enumerate(statuses) if not s.ok}

    # Only the failures come back, by position in the rows given.
    batch = preemption.fits_with_nominated_rows(fwk, state, pod, snap, rows)
    assert {k: key(s) for k, s in batch.items()} == failures(one_by_one)
    assert snap.req[: snap.size].tolist() == before
    # Rows given in another order (and twice, as an array) answer the same, row for row.
    again = preemption.fits_with_nominated_rows(fwk, state, pod, snap, np.asarray(rows[::-1] * 2))
    assert {k: key(s) for k, s in again.items()} == failures(one_by_one[::-1] * 2)


# ---------------------------------------------------------------- PostFilter's result, per release


async def _post_filter(version: str, incoming: model.Pod) -> fw.PostFilterResult:
    cluster = Cluster(
        [make_node("n0", cpu="2", pods=110)],
        [make_pod("low", requests={"cpu": "2"}, node_name="n0", priority=1)],
        config=parse_config({"kubernetesVersion": version}),
    )
    core = cluster.berth.core
    fwk = core.framework_for(core.cfg.profiles[0].scheduler_name)
    plugin = fwk.plugins["DefaultPreemption"]
    snap = core.snapshot()
    pod = PodInfo.of(incoming)
    state = fw.CycleState()
    fwk.run_pre_filter(state, pod, snap)
    failures = {snap.index["n0"]: fw.Status.unschedulable("Insufficient cpu", plugin="NodeResourcesFit")}
    result: fw.PostFilterResult = plugin.post_filter(state, pod, snap, failures)
    await core.client.drain()  # the victim's eviction
    return result


@pytest.mark.parametrize(
    ("version", "reasons"),
    [
        ("1.35", ()),
        ("1.36", ()),
        # preemption.go Preempt (v1.37.2), prefixed by DefaultPreemption.PostFilter.
        ("1.37", ("preemption: found a potential placement for pod on node n0, preempting 1 victims",)),
    ],
)
async def test_a_preemption_nominates_its_node_and_says_so_from_1_37(version: str, reasons: tuple[str, ...]) -> None:
    result = await _post_filter(version, make_pod("vip", requests={"cpu": "2"}, priority=100))
    assert result == fw.PostFilterResult(fw.Status(fw.Code.SUCCESS, reasons), nominated_node="n0")


async def test_no_candidate_clears_the_nomination_and_an_ineligible_pod_keeps_it() -> None:
    """Evaluate: no candidate is NewPostFilterResultWithNominatedNode("");
    a pod not eligible to preempt gets no result (its nomination stays)."""
    equal = await _post_filter("1.37", make_pod("peer", requests={"cpu": "2"}, priority=1))
    assert equal.nominated_node == "" and not equal.status.ok
    never = await _post_filter(
        "1.37", make_pod("polite", requests={"cpu": "2"}, priority=100, spec={"preemptionPolicy": "Never"})
    )
    assert never.nominated_node is None
    assert never.status.message() == "preemption: not eligible due to preemptionPolicy=Never."
