"""Explain: every node's verdict for one pod, per plugin, with scores — what
kube-scheduler's ``-v=10`` log says for one attempt, as data — and the pod's
place in the queue; and the node listing behind ``berth nodes``."""

from __future__ import annotations

import dataclasses

from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.errors import NotFound, bounded
from berth.framework import interface as fw
from berth.framework.decision import Reason
from berth.quota.tree import QUOTA_PLUGIN
from berth.scheduling import algorithm, reservations
from berth.scheduling.core import Core, scheduler_name_of
from berth.scheduling.loop import QueueState, quota_verdict
from berth.scheduling.verbs import check_node_names, pod_info

__all__ = ["Explanation", "NodeExplanation", "NodeSummary", "explain", "list_nodes"]


@dataclasses.dataclass(slots=True)
class NodeExplanation:
    node: str
    feasible: bool
    reasons: list[Reason] = dataclasses.field(default_factory=list)
    plugin_scores: dict[str, int] = dataclasses.field(default_factory=dict)
    score: int = 0


@dataclasses.dataclass(slots=True)
class Explanation:
    profile: str
    nodes: list[NodeExplanation]
    feasible_nodes: int
    summary: str
    pre_filter_reasons: list[Reason] = dataclasses.field(default_factory=list)
    queue: QueueState = dataclasses.field(default_factory=QueueState)


def _reason(st: fw.Status) -> Reason:
    return Reason(st.plugin, st.message(), st.code == fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def explain(core: Core, pod: model.Pod, *, profile: str = "", node_names: list[str] | None = None) -> Explanation:
    profile = profile or (scheduler_name_of(pod) if core.responsible_for(pod) else "")
    fwk = core.framework_for(profile)
    pi = pod_info(pod)
    snap = core.snapshot()
    rows = snap.order()
    if node_names:
        # Once each: a name repeated 20 000 times would be judged (and scored
        # against every other copy) 20 000 times.
        check_node_names(node_names, "node_names")
        unknown = [n for n in node_names if n not in snap.index or not snap.alive[snap.index[n]]]
        if unknown:
            raise NotFound(f"node_names: unknown node(s) {_some(unknown)}")
        rows = snap.rows_of(node_names)
    queue = core.scheduler.queue_state(pi.uid) if core.scheduler is not None else QueueState()
    state = fw.CycleState()
    status, allowed = fwk.run_pre_filter(state, pi, snap)
    diagnosis = algorithm.Diagnosis(num_all_nodes=len(rows))
    if not status.ok:
        diagnosis.pre_filter_msg = status.message()
        reason = _reason(status)
        return Explanation(
            profile=fwk.name,
            nodes=[NodeExplanation(snap.name(r), False, [reason]) for r in rows.tolist()],
            feasible_nodes=0,
            summary=str(algorithm.FitError(pi, diagnosis)),
            pre_filter_reasons=[reason],
            queue=queue,
        )
    out = fwk.run_filter(state, pi, snap, rows, all_reasons=True)
    feasible = out.feasible()
    per_plugin: dict[int, dict[str, int]] = {}
    totals: dict[int, int] = {}
    if len(feasible) and fwk.run_pre_score(state, pi, snap, feasible).ok:
        scores = fwk.run_score(state, pi, snap, feasible)
        for k, r in enumerate(feasible.tolist()):
            per_plugin[r] = {name: int(a[k]) for name, a in scores.by_plugin.items()}
            totals[r] = int(scores.total[k])
    nodes: list[NodeExplanation] = []
    if allowed is not None:  # the summary counts the nodes PreFilter left out as kube-scheduler does
        diagnosis.absent_nodes_status = fw.Status.unresolvable(algorithm.absent_nodes_reason(state))
    for k, r in enumerate(rows.tolist()):
        name = snap.name(r)
        e = NodeExplanation(name, bool(out.ok[k]))
        if allowed is not None and name not in allowed:
            e.feasible = False
            e.reasons.append(Reason("PreFilter", algorithm.absent_nodes_reason(state), True))
        e.reasons.extend(_reason(st) for st in out.all_failures(r))
        if out.ok[k]:
            e.plugin_scores = per_plugin.get(r, {})
            e.score = totals.get(r, 0)
        elif out.statuses and (allowed is None or name in allowed):
            diagnosis.node_to_status[name] = out.statuses[int(out.reason[k])]
        nodes.append(e)
    n_feasible = sum(1 for e in nodes if e.feasible)
    summary = (
        str(algorithm.FitError(pi, diagnosis)) if n_feasible == 0 else f"{n_feasible}/{len(rows)} nodes are available"
    )
    quota = _quota_reason(core, pi)
    if quota is not None:
        # The queues hold the pod back whatever the nodes say: the summary
        # is the message the loop reports (a PreFilter-style rejection), and
        # the node verdicts stay, to show what would fit once quota allows.
        held = algorithm.Diagnosis(num_all_nodes=len(rows), pre_filter_msg=quota.reason)
        summary = f"{algorithm.FitError(pi, held)} {n_feasible}/{len(rows)} nodes would fit the pod."
        return Explanation(fwk.name, nodes, n_feasible, summary, pre_filter_reasons=[quota], queue=queue)
    # Capacity held for the pod's gang (or the pod): what it holds, and when it starts.
    holding = reservations.reason_for(core, pod)
    return Explanation(
        fwk.name, nodes, n_feasible, summary, pre_filter_reasons=[holding] if holding else [], queue=queue
    )


def _quota_reason(core: Core, pod: PodInfo) -> Reason | None:
    """The batch queues' verdict on placing ``pod`` now, when it is "no"
    (the same check the loop makes; a pod the queues do not hold passes)."""
    if not core.quota.enabled or not core.responsible_for(pod.pod):
        return None
    verdict = quota_verdict(core, pod)
    if verdict.ok:
        return None
    return Reason(QUOTA_PLUGIN, verdict.message, verdict.unresolvable)


_SHOWN_NAMES = 10
_SHOWN_NAME_CHARS = 64


def _some(names: list[str]) -> str:
    """The first few names, each cut short, and how many more: a message
    whose size does not grow with the request (gRPC carries it in metadata)."""
    shown = [n if len(n) <= _SHOWN_NAME_CHARS else n[:_SHOWN_NAME_CHARS] + "..." for n in names[:_SHOWN_NAMES]]
    more = len(names) - len(shown)
    return bounded(", ".join(shown) + (f" ... and {more} more" if more else ""))


@dataclasses.dataclass(slots=True)
class NodeSummary:
    name: str
    allocatable: dict[str, int]
    requested: dict[str, int]
    pods: int
    labels: dict[str, str]
    unschedulable: bool
    taints: list[model.Taint]


def list_nodes(core: Core) -> list[NodeSummary]:
    """Alive nodes by name, with allocatable and requested amounts (the pods column aside)."""
    snap = core.snapshot()
    names = snap.columns.names
    pods_col = snap.columns.index["pods"]
    out = []
    for r in sorted(snap.alive_rows().tolist(), key=snap.name):
        node = snap.node(r)
        info = snap.infos[r]
        assert info is not None
        out.append(
            NodeSummary(
                name=node.metadata.name,
                allocatable={names[c]: int(v) for c, v in enumerate(snap.alloc[r].tolist()) if v},
                requested={names[c]: int(v) for c, v in enumerate(snap.req[r].tolist()) if v and c != pods_col},
                pods=len(info.pods),
                labels=node.metadata.labels,
                unschedulable=node.spec.unschedulable,
                taints=list(node.spec.taints),
            )
        )
    return out
