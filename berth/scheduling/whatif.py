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

Bounded, and never in one piece (issue 28: 1000 replicas on 2050 nodes held
the event loop for 23-40 s):

- **Cost.** A question costs what the simulation iterates: each replica one
  pass of every node through each Filter and Score plugin of the profile
  (``nodes x plugins`` node evaluations), each preemption dry run one pass
  of the candidate nodes' pods through the Filter plugins. A question whose
  replicas cost more than :data:`MAX_COST` is refused (ResourceExhausted,
  naming the bound and the cost); "until the first that does not fit" stops
  at the most replicas within the bound; preemption dry runs are charged as
  they run and stop the count at the bound.
- **Slices.** The work runs in steps (copying the table, placing one
  replica, one node's preemption dry run) and gives the event loop a turn
  whenever :data:`SLICE_SECONDS` have gone (at least one step per turn), so
  ``/healthz``, the extender and the scheduling loop go on meanwhile. A step
  is consistent in itself (one replica sees one state of the copy); between
  steps the live cluster may move, so the answer is the cluster's as the
  replicas were placed, as cluster-capacity's is.
- **Deadline and cancellation.** Between slices the caller's deadline is
  checked (DeadlineExceeded) and a cancelled task stops at once: nothing is
  computed for a caller who left.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Generator, Iterator

import msgspec

from berth.cache.infos import PodInfo
from berth.cache.snapshot import Snapshot
from berth.cluster import model
from berth.errors import DeadlineExceeded, InvalidArgument, ResourceExhausted
from berth.framework import interface as fw
from berth.framework import preemption
from berth.plugins import topology_gang
from berth.plugins.default_preemption import Candidate, pick_one_node
from berth.quota.tree import Verdict
from berth.scheduling import algorithm, turnstile
from berth.scheduling.core import Core, scheduler_name_of
from berth.scheduling.verbs import pod_info

__all__ = ["MAX_COST", "MAX_REPLICAS", "SLICE_SECONDS", "Placement", "WhatIf", "whatif"]

#: The most replicas one question may place ("until the first that does not
#: fit" stops here too).
MAX_REPLICAS = 1000
#: The most node evaluations (one node through one Filter or Score plugin)
#: one question may cost: ~1 us each on a 2-core machine under load, so a
#: few seconds of CPU, spread over slices (2050 nodes and 23 plugins: 84
#: replicas; 100 nodes: the replica limit).
MAX_COST = 4_000_000
#: How long the simulation works before the event loop gets a turn.
SLICE_SECONDS = 0.01
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


class _OverBudget(Exception):
    """The preemption dry runs took the question past :data:`MAX_COST`."""


def _over_bound(replicas: int, nodes: int, plugins: int) -> ResourceExhausted:
    cost = replicas * nodes * plugins
    most = MAX_COST // (nodes * plugins)
    return ResourceExhausted(
        f"replicas: {replicas} replicas x {nodes} nodes x {plugins} Filter and Score plugins = {cost} node "
        f"evaluations, over the bound of {MAX_COST} per question (at most {most} replicas on this cluster)"
    )


class _Simulation:
    """One question: checked and costed when built, then run in steps by
    :meth:`steps` (a generator that yields after each), filling ``out``."""

    def __init__(self, core: Core, pod: model.Pod, replicas: int, profile: str) -> None:
        if replicas < 0 or replicas > MAX_REPLICAS:
            raise InvalidArgument(f"replicas: must be between 0 and {MAX_REPLICAS}, got {replicas}")
        profile = profile or (scheduler_name_of(pod) if core.responsible_for(pod) else "")
        self.core = core
        self.fwk = core.framework_for(profile)
        self.template = pod_info(pod)
        self.queued = core.quota.enabled and core.responsible_for(pod) is not None
        self.out = WhatIf(
            pod=self.template.key,
            replicas=replicas,
            fit=0,
            placements=[],
            limited_by="",
            queue=core.quota.leaf_of(pod)[0] if self.queued else "",
            profile=self.fwk.name,
        )
        nodes = max(core.cache.node_count, 1)
        plugins = max(len(self.fwk.filter) + len(self.fwk.score), 1)
        self.per_replica = nodes * plugins
        self.limit = replicas or min(MAX_REPLICAS, MAX_COST // self.per_replica)
        gated = bool(pod.spec.scheduling_gates)  # answered without any work
        if not gated and (self.limit == 0 or self.limit * self.per_replica > MAX_COST):
            raise _over_bound(replicas or 1, nodes, plugins)
        self.spent = 0

    def steps(self) -> Iterator[None]:
        out = self.out
        pod = self.template.pod
        if pod.spec.scheduling_gates:
            names = ", ".join(g.name for g in pod.spec.scheduling_gates)
            out.limited_by = f"waiting for scheduling gates: [{names}]"
            return
        copy = _scratch(self.core)
        yield
        # A topology gang's replicas go into the one domain the whole gang
        # (``replicas``, else the gang's size) would be given (TopologyGang).
        domain = self._domain(copy)
        if isinstance(domain, str):
            out.limited_by = domain
            return
        rng = random.Random(0)  # ties broken reproducibly, without touching core.rng
        placed: list[PodInfo] = []
        quota = self.core.quota
        for i in range(self.limit):
            pi = _replica(pod, i)
            if self.queued:
                verdict: Verdict = quota.check([*placed, pi])
                if not verdict.ok:
                    out.quota_ok, out.quota_message, out.limited_by = False, verdict.message, verdict.message
                    break
            state = fw.CycleState()
            if domain is not None:
                topology_gang.TopologyGang.pin_cycle(state, domain)
            victims: list[PodInfo] = []
            self.spent += self.per_replica
            try:
                node = algorithm.schedule_pod(self.fwk, state, pi, copy, percentage=100, sampler=None, rng=rng).node
            except algorithm.FitError as err:
                try:
                    cand = yield from self._preempt(state, pi, copy, err)
                except _OverBudget:
                    out.limited_by = f"the bound of {MAX_COST} node evaluations per question"
                    break
                if cand is None:
                    out.limited_by = str(err)
                    break
                node, victims = cand.node, list(cand.victims.victims)
                _evict(copy, node, victims)
            _place(copy, pi, node)
            placed.append(pi)
            out.placements.append(Placement(node, sorted(v.key for v in victims)))
            yield
        else:
            out.limited_by = LIMITED_BY_REPLICAS if out.replicas else f"the limit of {self.limit} replicas per question"

    def _domain(self, copy: Snapshot) -> topology_gang.Choice | str | None:
        plugin = self.fwk.plugins.get(topology_gang.TopologyGang.NAME)
        if not isinstance(plugin, topology_gang.TopologyGang):
            return None
        pod = self.template.pod
        count = self.out.replicas or plugin.gang_size(pod) or 1
        return plugin.whatif_domain(pod, count, copy)

    def _preempt(
        self, state: fw.CycleState, pi: PodInfo, copy: Snapshot, err: algorithm.FitError
    ) -> Generator[None, None, Candidate | None]:
        """The profile's preemption as a dry run: DefaultPreemption's candidates
        over every node that failed with Unschedulable, and its pick — nothing
        evicted, nobody nominated. A step per node; raises _OverBudget past
        :data:`MAX_COST`."""
        fwk = self.fwk
        if not any(p.NAME == _PREEMPTION for p in fwk.post_filter) or err.diagnosis.pre_filter_msg:
            return None
        if pi.pod.spec.preemption_policy == "Never":
            return None
        pdbs = self.core.pdbs.list()
        quota = self.core.quota if self.core.quota.enabled else None
        candidates: list[Candidate] = []
        for name, st in sorted(err.diagnosis.node_to_status.items()):
            if st.code != fw.Code.UNSCHEDULABLE or name not in copy.index:
                continue
            info = copy.infos[copy.index[name]]
            if info is None:
                continue
            self.spent += max(len(info.pods), 1) * max(len(fwk.filter), 1)
            if self.spent > MAX_COST:
                raise _OverBudget
            allowed = None
            if quota is not None:
                allowed = [p for p in info.pods.values() if quota.within_queue(pi, p)]
                if not allowed:
                    continue
            v = preemption.select_victims_on_node(fwk, pi, copy, info, allowed, pdbs, state=state)
            if v is not None and v.victims:
                candidates.append(Candidate(name, v))
            yield
        return pick_one_node(candidates) if candidates else None


def _slice(steps: Iterator[None]) -> bool:
    """Run ``steps`` for :data:`SLICE_SECONDS` (at least one); True once they are all done."""
    started = time.perf_counter()
    return all(time.perf_counter() - started < SLICE_SECONDS for _ in steps)


async def whatif(
    core: Core,
    pod: model.Pod,
    replicas: int = 0,
    *,
    profile: str = "",
    deadline: float | None = None,
    turns: turnstile.Turnstile | None = None,
) -> WhatIf:
    """How many replicas of ``pod`` fit now (up to ``replicas``; 0: until
    the first that does not, at most :data:`MAX_REPLICAS` and
    :data:`MAX_COST`), where, by which preemptions, and what stopped the
    count. Changes nothing in ``core``.

    Runs in slices of :data:`SLICE_SECONDS`, each taken through ``turns``
    (the door's turnstile) when given, with a turn of the event loop between
    them. ``deadline`` (``time.monotonic()``) passed between two slices is
    DeadlineExceeded; cancelling the task stops the work at once. A question
    over :data:`MAX_COST` is ResourceExhausted before any work."""
    sim = _Simulation(core, pod, replicas, profile)
    steps = sim.steps()
    while True:
        if deadline is not None and time.monotonic() >= deadline:
            raise DeadlineExceeded(
                f"whatif: the deadline passed after {len(sim.out.placements)} of "
                f"{replicas or sim.limit} replicas; nothing more is computed"
            )
        if turns is None:
            done = _slice(steps)
        else:
            async with turns:  # each slice queues with the door's other calls
                done = _slice(steps)
        if done:
            break
        await asyncio.sleep(0)
    sim.out.fit = len(sim.out.placements)
    return sim.out
