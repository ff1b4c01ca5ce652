"""What if: how many replicas of a pod would fit now, and where — without
changing anything.

Cluster-capacity semantics (kubernetes-sigs/cluster-capacity: "simulates a
sequence of scheduling of new pods ... until the cluster runs out of
resources", and reports the reason the next one failed): replicas are placed
one after another on a private copy of the node table, each seeing the ones
before it, with the profile's own Filter and Score. A replica no node fits
gets the profile's preemption dry run (DefaultPreemption's
``select_victims_on_node`` and ``pickOneNodeForPreemption``) on the copy:
its victims leave the copy, nothing is evicted. The batch queues judge the
replicas placed so far plus the next (:meth:`QueueTree.check`), as their
usage would grow.

The core is only read: the copy is a fresh :class:`Snapshot` of the cache's
table with cloned node infos (and its own row space, so plugins scan its
pods rather than the cache's pod index); the random source is a private one.
"""

from __future__ import annotations

import dataclasses
import random

import msgspec

from berth.cache.infos import PodInfo
from berth.cache.snapshot import Snapshot
from berth.cluster import model
from berth.errors import InvalidArgument
from berth.framework import interface as fw
from berth.framework import preemption
from berth.framework.runtime import Framework
from berth.plugins.default_preemption import Candidate, pick_one_node
from berth.quota.tree import Verdict
from berth.scheduling import algorithm
from berth.scheduling.core import Core, scheduler_name_of
from berth.scheduling.verbs import pod_info

__all__ = ["MAX_REPLICAS", "Placement", "WhatIf", "whatif"]

#: The most replicas one question may place ("until the first that does not
#: fit" stops here too).
MAX_REPLICAS = 1000
LIMITED_BY_REPLICAS = "replicas"
_PREEMPTION = "DefaultPreemption"


@dataclasses.dataclass(slots=True)
class Placement:
    node: str
    preempts: list[str] = dataclasses.field(default_factory=list)  # victims' NAMESPACE/NAME


@dataclasses.dataclass(slots=True)
class WhatIf:
    pod: str  # NAMESPACE/NAME of the template
    replicas: int  # asked for; 0: until the first that does not fit
    fit: int
    placements: list[Placement]
    #: What stopped the count: the quota's message, the FitError message
    #: (kube-scheduler's ``0/N nodes are available: ...``), or "replicas".
    limited_by: str
    queue: str = ""  # the leaf queue the replicas would count in
    #: The batch queues' verdict on the replicas placed plus the next one
    #: (ok when quota did not stop the count).
    quota_ok: bool = True
    quota_message: str = ""
    profile: str = ""


def _scratch(core: Core) -> Snapshot:
    """A private copy of the cache's node table: arrays copied, node infos
    cloned, and its own row space (no shared pod index)."""
    copy = Snapshot()
    core.cache.update_snapshot(copy)
    copy.row_space = copy
    return copy


def _replica(template: model.Pod, i: int) -> PodInfo:
    md = template.metadata
    meta = msgspec.structs.replace(md, name=f"{md.name}-{i}", uid=f"whatif-{md.uid or md.name}-{i}")
    status = msgspec.structs.replace(template.status, nominated_node_name="")
    return PodInfo.of(msgspec.structs.replace(template, metadata=meta, status=status))


def _place(copy: Snapshot, pi: PodInfo, node: str) -> None:
    row = copy.index[node]
    placed = PodInfo.of(msgspec.structs.replace(pi.pod, spec=msgspec.structs.replace(pi.pod.spec, node_name=node)))
    copy.add_pod_usage(row, placed, 1)
    info = copy.infos[row]
    if info is not None:
        info.add_pod(placed)


def _evict(copy: Snapshot, node: str, victims: list[PodInfo]) -> None:
    row = copy.index[node]
    info = copy.infos[row]
    for v in victims:
        copy.add_pod_usage(row, v, -1)
        if info is not None:
            info.remove_pod(v)


def _preempt(
    core: Core, fwk: Framework, state: fw.CycleState, pi: PodInfo, copy: Snapshot, err: algorithm.FitError
) -> Candidate | None:
    """The profile's preemption as a dry run: DefaultPreemption's candidates
    over every node that failed with Unschedulable, and its pick — nothing
    evicted, nobody nominated."""
    if not any(p.NAME == _PREEMPTION for p in fwk.post_filter) or err.diagnosis.pre_filter_msg:
        return None
    if pi.pod.spec.preemption_policy == "Never":
        return None
    pdbs = core.pdbs.list()
    quota = core.quota if core.quota.enabled else None
    candidates: list[Candidate] = []
    for name, st in sorted(err.diagnosis.node_to_status.items()):
        if st.code != fw.Code.UNSCHEDULABLE or name not in copy.index:
            continue
        info = copy.infos[copy.index[name]]
        if info is None:
            continue
        allowed = None
        if quota is not None:
            allowed = [p for p in info.pods.values() if quota.within_queue(pi, p)]
            if not allowed:
                continue
        v = preemption.select_victims_on_node(fwk, pi, copy, info, allowed, pdbs, state=state)
        if v is not None and v.victims:
            candidates.append(Candidate(name, v))
    return pick_one_node(candidates) if candidates else None


def whatif(core: Core, pod: model.Pod, replicas: int = 0, *, profile: str = "") -> WhatIf:
    """How many replicas of ``pod`` fit now (up to ``replicas``; 0: until
    the first that does not, at most :data:`MAX_REPLICAS`), where, by which
    preemptions, and what stopped the count. Changes nothing in ``core``."""
    if replicas < 0 or replicas > MAX_REPLICAS:
        raise InvalidArgument(f"replicas: must be between 0 and {MAX_REPLICAS}, got {replicas}")
    profile = profile or (scheduler_name_of(pod) if core.responsible_for(pod) else "")
    fwk = core.framework_for(profile)
    template = pod_info(pod)
    queued = core.quota.enabled and core.responsible_for(pod) is not None
    out = WhatIf(
        pod=template.key,
        replicas=replicas,
        fit=0,
        placements=[],
        limited_by="",
        queue=core.quota.leaf_of(pod)[0] if queued else "",
        profile=fwk.name,
    )
    if pod.spec.scheduling_gates:
        names = ", ".join(g.name for g in pod.spec.scheduling_gates)
        out.limited_by = f"waiting for scheduling gates: [{names}]"
        return out
    copy = _scratch(core)
    rng = random.Random(0)  # ties broken reproducibly, without touching core.rng
    placed: list[PodInfo] = []
    limit = replicas or MAX_REPLICAS
    for i in range(limit):
        pi = _replica(template.pod, i)
        if queued:
            verdict: Verdict = core.quota.check([*placed, pi])
            if not verdict.ok:
                out.quota_ok, out.quota_message, out.limited_by = False, verdict.message, verdict.message
                break
        state = fw.CycleState()
        victims: list[PodInfo] = []
        try:
            node = algorithm.schedule_pod(fwk, state, pi, copy, percentage=100, sampler=None, rng=rng).node
        except algorithm.FitError as err:
            cand = _preempt(core, fwk, state, pi, copy, err)
            if cand is None:
                out.limited_by = str(err)
                break
            node, victims = cand.node, list(cand.victims.victims)
            _evict(copy, node, victims)
        _place(copy, pi, node)
        placed.append(pi)
        out.placements.append(Placement(node, sorted(v.key for v in victims)))
    else:
        out.limited_by = LIMITED_BY_REPLICAS if replicas else f"the limit of {MAX_REPLICAS} replicas per question"
    out.fit = len(out.placements)
    return out
