"""The queue tree: usage, pending demand, dominant shares, the admission
check, the fair order, reclaim eligibility and the status ``berth queues``
shows.

Semantics, with the anchor each follows:

- **Leaf of a pod**: the queue it names (:mod:`berth.quota.naming`:
  ``queueKeys`` — ``berth.dev/queue`` and the frameworks' keys — then its
  PodGroup's ``spec.queue``, through ``queueAliases``), else the first leaf
  (in configuration order) whose ``namespaces`` match, else ``default`` when
  it exists, else none: the pod is *unqueued* and scheduled as without
  queues. A label naming an unknown or non-leaf queue is a verdict that never
  passes (YuniKorn rejects an application submitted to a parent queue).
- **Usage** of a queue: the requests (kube-scheduler's pod request rules —
  :func:`berth.cluster.resources.pod_requests`, init containers and overhead
  included) of its subtree's pods that are bound, assumed or nominated and
  not leaving (terminating, or chosen as a reclaim victim: Volcano marks an
  evicted task Releasing and deallocates it from its queue at once); a
  child's usage counts against every ancestor (YuniKorn).
- **Max**: after adding a pod no queue on its path may exceed ``max``
  (YuniKorn's max, Kueue's nominalQuota+borrowingLimit, Volcano's capability).
- **Borrowing**: what a pod puts above a path queue's ``guaranteed`` must
  come from capacity that other queues, below their guarantee and with pods
  waiting, are not owed (Kueue borrows only *unused* nominal quota of the
  cohort; YuniKorn and Volcano lend idle guarantees). Each waiting queue is
  owed ``min(guaranteed - usage, pending requests)``; a parent is owed at
  least what its children are.
- **Dominant share** (DRF, Ghodsi et al.; Volcano ``drf``, YuniKorn's
  ``fair`` sorting): max over resources of usage / cluster allocatable; the
  fair order divides it by ``weight``.
- **Fair share**: the dominant share a queue is entitled to —
  its parent's, split among siblings by weight, and never less than its
  guarantee's.
- **Reclaim** (Volcano ``reclaim``, Kueue ``reclaimWithinCohort``): a pod
  whose path stays within every guarantee after it is placed may evict pods
  of queues above their guarantee — furthest above fair share first, lowest
  priority first — never taking a victim's queue below its guarantee.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence

from berth.cache.infos import PodInfo
from berth.cluster import model, resources
from berth.gangs.reservations import ReservationPolicy
from berth.quota.naming import QueueNaming
from berth.quota.spec import DEFAULT_QUEUE, QueueSpec, reservation_policy, validate_queues

__all__ = ["LABEL_QUEUE", "QUOTA_PLUGIN", "QueueStatus", "QueueTree", "Verdict"]

#: The label a pod names its leaf queue with.
LABEL_QUEUE = "berth.dev/queue"
#: The name quota verdicts carry where plugins' names go (decisions, Explain,
#: the queue's wake-up bookkeeping).
QUOTA_PLUGIN = "BerthQueues"

Amounts = dict[str, int]


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    """The quota's answer for a pod (or a gang): ``ok``, or a message naming
    the queue and resource that block it."""

    ok: bool
    message: str = ""
    queue: str = ""
    resource: str = ""
    #: True when waiting cannot help (an unknown queue, a request above a max).
    unresolvable: bool = False


OK = Verdict(True)


@dataclasses.dataclass(slots=True)
class QueueStatus:
    """One queue as ``berth queues`` and ``ListQueues`` show it; amounts in
    canonical units (milli-cpu, bytes, counts)."""

    name: str
    parent: str
    leaf: bool
    guaranteed: Amounts
    max: Amounts
    weight: float
    allocated: Amounts
    pending_pods: int
    pending: Amounts
    dominant_share: float
    fair_share: float
    namespaces: list[str]
    children: list[str]


class _Queue:
    __slots__ = (
        "_owed",
        "_share",
        "children",
        "depth",
        "guaranteed",
        "max",
        "name",
        "parent",
        "path",
        "path_names",
        "pending",
        "pending_pods",
        "spec",
        "usage",
    )

    def __init__(self, spec: QueueSpec, guaranteed: Amounts, cap: Amounts) -> None:
        self.spec = spec
        self.name = spec.name
        self.parent: _Queue | None = None
        self.children: list[_Queue] = []
        self.guaranteed = guaranteed
        self.max = cap
        self.usage: Amounts = {}
        self.pending: Amounts = {}
        self.pending_pods = 0
        #: root-most first, this queue last
        self.path: tuple[_Queue, ...] = ()
        self.path_names: tuple[str, ...] = ()
        # Cached, dropped when usage or pending demand on this queue's
        # subtree changes (:meth:`QueueTree._touch`): a pod's change touches
        # only its path, so checks stay cheap with many queues.
        self._owed: Amounts | None = None
        self._share: float | None = None
        self.depth = 0

    @property
    def weight(self) -> float:
        return self.spec.weight

    @property
    def leaf(self) -> bool:
        return not self.children


def _add(into: Amounts, amounts: Mapping[str, int], sign: int) -> None:
    for name, v in amounts.items():
        if v:
            into[name] = into.get(name, 0) + sign * v


def _q(name: str, value: int) -> str:
    return resources.format_quantity(name, value)


class QueueTree:
    """See the module docstring. One event loop owns it.

    ``counts(pod)`` says whether a pod is one of Berth's (its scheduler is a
    Berth profile): only those are queued and counted. ``capacity()`` returns
    the cluster's allocatable amounts; it is called again after
    :meth:`capacity_changed`.
    """

    def __init__(
        self,
        specs: Sequence[QueueSpec],
        *,
        counts: Callable[[model.Pod], bool] = lambda pod: True,
        capacity: Callable[[], Amounts] = dict,
        naming: QueueNaming | None = None,
    ) -> None:
        self._counts = counts
        self._capacity_fn = capacity
        #: Where a pod names its queue (``queueKeys``, ``queueAliases``, its PodGroup).
        self.naming = naming if naming is not None else QueueNaming()
        self._capacity: Amounts | None = None
        #: Pods counted in usage: bound or assumed (the cache), nominated.
        self._placed: dict[str, PodInfo] = {}
        self._nominated: dict[str, PodInfo] = {}
        #: Pending pods the scheduling queue holds, by uid, with their leaf.
        self._pending: dict[str, tuple[PodInfo, str]] = {}
        #: Where each counted pod's usage went, and how much.
        self._usage_of: dict[str, tuple[str, Amounts]] = {}
        #: Reclaim victims chosen but not deleted yet: no longer counted in
        #: their queue (Volcano's Statement.Evict marks a task Releasing and
        #: the proportion plugin deallocates it at once), and the first to
        #: take again, so a victim still terminating is never replaced by a
        #: fresh one. Cleared when the pod is deleted.
        self._leaving: set[str] = set()
        #: Everything counted on nodes, every pod (queued or not, anyone's).
        self._node_usage: Amounts = {}
        #: Called when usage drops or a waiting queue's demand leaves, so
        #: pods waiting for quota are retried.
        self.on_release: Callable[[], None] = lambda: None
        self._queues: dict[str, _Queue] = {}
        self._roots: list[_Queue] = []
        self._leaves_in_order: list[_Queue] = []
        self._ns_memo: dict[str, str] = {}
        self.reclaims: dict[str, int] = {}
        self.load(specs)

    # ------------------------------------------------------------ structure

    def load(self, specs: Sequence[QueueSpec]) -> None:
        """(Re)build the tree from ``specs`` (raises InvalidArgument, leaving
        the running tree as it was) and recount every pod into it. Shrinking a
        queue below its usage evicts nothing: it only stops new placements."""
        amounts = validate_queues(specs)
        queues = {s.name: _Queue(s, *amounts[s.name]) for s in specs}
        roots: list[_Queue] = []
        for s in specs:
            q = queues[s.name]
            if s.parent:
                q.parent = queues[s.parent]
                q.parent.children.append(q)
            else:
                roots.append(q)

        def walk(q: _Queue, path: tuple[_Queue, ...]) -> None:
            q.path = (*path, q)
            q.path_names = tuple(a.name for a in q.path)
            q.depth = len(path)
            for c in q.children:
                walk(c, q.path)

        for r in roots:
            walk(r, ())
        self._queues, self._roots = queues, roots
        self._leaves_in_order = [queues[s.name] for s in specs if queues[s.name].leaf]
        self._ns_memo = {}
        self._usage_of = {}
        for uid in {**self._placed, **self._nominated}:
            self._recount(uid)
        pending = self._pending
        self._pending = {}
        for pi, _ in pending.values():
            self.pending_entered(pi)
        self.on_release()

    def reclassify(self) -> None:
        """Recount every pod after :attr:`naming` changed (``queueKeys``,
        ``queueAliases`` reloaded): the same queues, each pod in the one it names now."""
        self.load([q.spec for q in self._queues.values()])

    @property
    def names(self) -> list[str]:
        return list(self._queues)

    @property
    def enabled(self) -> bool:
        """Whether any queue is configured (else every check passes)."""
        return bool(self._queues)

    def capacity(self) -> Amounts:
        if self._capacity is None:
            self._capacity = {k: v for k, v in self._capacity_fn().items() if v > 0 and k != resources.PODS}
        return self._capacity

    def capacity_changed(self) -> None:
        self._capacity = None
        for q in self._queues.values():
            q._share = None

    @staticmethod
    def _touch(q: _Queue) -> None:
        """Usage or pending demand changed in ``q``'s subtree: drop the cached
        values of ``q`` and its ancestors."""
        for a in q.path:
            a._owed = None
            a._share = None

    # ------------------------------------------------------------ classification

    def leaf_of(self, pod: model.Pod) -> tuple[str, str]:
        """(leaf, "") for a queued pod; ("", "") for an unqueued one; ("",
        message) when the pod names a queue that cannot take it."""
        found = self.naming.named(pod)
        if found is not None:
            named, where = found
            q = self._queues.get(named)
            if q is None:
                return "", f'pod names queue "{named}" ({where}), which does not exist'
            if not q.leaf:
                kids = ", ".join(c.name for c in q.children)
                return "", f'pod names queue "{named}" ({where}), which is not a leaf (its children: {kids})'
            return named, ""
        ns = pod.metadata.namespace or "default"
        hit = self._ns_memo.get(ns)
        if hit is None:
            leaf = next((q for q in self._leaves_in_order if q.spec.matches_namespace(ns)), None)
            if leaf is None:
                d = self._queues.get(DEFAULT_QUEUE)
                leaf = d if d is not None and d.leaf else None
            hit = self._ns_memo[ns] = leaf.name if leaf is not None else ""
        return hit, ""

    def lane_of(self, pod: model.Pod) -> str:
        """The leaf a pending pod waits in ("" : unqueued or misnamed)."""
        return self.leaf_of(pod)[0] if self._queues and self._counts(pod) else ""

    # ------------------------------------------------------------ accounting

    def _recount(self, uid: str) -> None:
        """Move ``uid``'s usage to where it belongs now: nowhere when it is
        neither placed nor nominated, or not in a queue. What a pod leaves
        with is exactly what it was counted with, whatever changed since."""
        old = self._usage_of.pop(uid, None)
        if old is not None:
            q = self._queues.get(old[0])
            if q is not None:
                for a in q.path:
                    _add(a.usage, old[1], -1)
                self._touch(q)
        pi = self._placed.get(uid) or self._nominated.get(uid)
        leaving = pi is not None and (uid in self._leaving or bool(pi.pod.metadata.deletion_timestamp))
        leaf = self.lane_of(pi.pod) if pi is not None and not leaving else ""
        if pi is not None and leaf:
            self._usage_of[uid] = (leaf, pi.requests)
            q = self._queues[leaf]
            for a in q.path:
                _add(a.usage, pi.requests, 1)
            self._touch(q)
        elif old is not None:
            self.on_release()

    def on_cache(self, pi: PodInfo, node: str, sign: int) -> None:
        """The cache's listener: a pod starts (+1) or stops (-1) counting on a node."""
        _add(self._node_usage, pi.requests, sign)
        if sign > 0:
            self._placed[pi.uid] = pi
        else:
            self._placed.pop(pi.uid, None)
        self._recount(pi.uid)

    def mark_leaving(self, uid: str) -> None:
        """``uid`` was chosen as a reclaim victim: its usage leaves its queue now."""
        self._leaving.add(uid)
        self._recount(uid)

    def pod_deleted(self, uid: str) -> None:
        """The pod is gone from the cluster (not merely moved in the cache)."""
        self._leaving.discard(uid)

    def on_nominated(self, pi: PodInfo, node: str) -> None:
        """The nominator's listener: ``pi`` nominated to ``node`` ("" : no longer)."""
        if node:
            self._nominated[pi.uid] = pi
        else:
            self._nominated.pop(pi.uid, None)
        self._recount(pi.uid)

    def pending_entered(self, pi: PodInfo) -> None:
        """The scheduling queue holds ``pi`` (new, or a newer version).
        Without queues nothing is kept: a reload that adds some re-enters
        every pending pod (``Scheduler.queues_changed`` relanes the queue)."""
        if not self._queues:
            return
        self.pending_left(pi.uid, release=False)
        leaf = self.lane_of(pi.pod)
        self._pending[pi.uid] = (pi, leaf)
        if leaf:
            q = self._queues[leaf]
            for a in q.path:
                _add(a.pending, pi.requests, 1)
                a.pending_pods += 1
            self._touch(q)

    def pending_left(self, uid: str, *, release: bool = True) -> None:
        got = self._pending.pop(uid, None)
        if got is None:
            return
        pi, leaf = got
        q = self._queues.get(leaf) if leaf else None
        if q is None:
            return
        owed = release and any(self._owed(a) for a in q.path)
        for a in q.path:
            _add(a.pending, pi.requests, -1)
            a.pending_pods -= 1
        self._touch(q)
        if owed:
            self.on_release()

    # ------------------------------------------------------------ shares

    def dominant_share(self, q: _Queue) -> float:
        if q._share is not None:
            return q._share
        cap = self.capacity()
        share = 0.0
        for name, used in q.usage.items():
            total = cap.get(name)
            if total and used > 0:
                share = max(share, used / total)
        q._share = share
        return share

    def _guaranteed_share(self, q: _Queue) -> float:
        cap = self.capacity()
        return max((g / cap[n] for n, g in q.guaranteed.items() if cap.get(n)), default=0.0)

    def fair_share(self, q: _Queue) -> float:
        siblings = q.parent.children if q.parent is not None else self._roots
        parent_share = self.fair_share(q.parent) if q.parent is not None else 1.0
        split = parent_share * q.weight / sum(s.weight for s in siblings)
        return min(1.0, max(split, self._guaranteed_share(q)))

    def pick(self, lanes: Iterable[str]) -> str:
        """The lane the next pod comes from, among ``lanes`` (leaves with
        pods ready; "" for unqueued pods, which go first): from the root, the
        sibling with the lowest weighted dominant share, ties by name."""
        hot: set[str] = set()
        for lane in lanes:
            if not lane:
                return ""
            q = self._queues.get(lane)
            if q is not None:
                hot.update(q.path_names)
        level = self._roots
        chosen: _Queue | None = None
        while True:
            best: _Queue | None = None
            best_key = (0.0, "")
            for q in level:
                if q.name in hot:
                    key = (self.dominant_share(q) / q.weight, q.name)
                    if best is None or key < best_key:
                        best, best_key = q, key
            if best is None:
                break
            chosen = best
            if chosen.leaf:
                return chosen.name
            level = chosen.children
        return next(iter(hot), "") if chosen is None else chosen.name

    # ------------------------------------------------------------ admission

    def _owed(self, q: _Queue) -> Amounts:
        """What queue ``q`` is owed now: ``min(guaranteed - usage, pending)``
        per resource, and at least what its children are owed (cached until
        its subtree changes; callers must not modify the result)."""
        if q._owed is not None:
            return q._owed
        own: Amounts = {}
        for name, g in q.guaranteed.items():
            v = min(g - q.usage.get(name, 0), q.pending.get(name, 0))
            if v > 0:
                own[name] = v
        if q.children:
            kids: Amounts = {}
            for c in q.children:
                _add(kids, self._owed(c), 1)
            for name, v in kids.items():
                if v > own.get(name, 0):
                    own[name] = v
        q._owed = own
        return own

    def check(self, pods: Sequence[PodInfo]) -> Verdict:
        """Whether ``pods`` (one pod, or a gang's members still to place) may
        be placed together as far as quota goes."""
        if not self._queues:
            return OK
        deltas: dict[str, Amounts] = {}
        for pi in pods:
            if not self._counts(pi.pod):
                continue
            leaf, why = self.leaf_of(pi.pod)
            if why:
                return Verdict(False, why, unresolvable=True)
            if leaf:
                _add(deltas.setdefault(leaf, {}), pi.requests, 1)
        if not deltas:
            return OK
        # Every queue on some path, with what lands on it.
        landing: dict[str, Amounts] = {}
        order: list[_Queue] = []
        for leaf, amounts in deltas.items():
            for a in self._queues[leaf].path:
                if a.name not in landing:
                    landing[a.name] = {}
                    order.append(a)
                _add(landing[a.name], amounts, 1)
        order.sort(key=lambda q: (q.depth, q.name))
        # 1. max, root-most first.
        for q in order:
            add = landing[q.name]
            for name, cap in q.max.items():
                extra = add.get(name, 0)
                if extra <= 0:
                    continue
                after = q.usage.get(name, 0) + extra
                if after > cap:
                    if extra > cap:
                        msg = f"queue {q.name}: requests {_q(name, extra)} {name}, more than its max {_q(name, cap)}"
                        return Verdict(False, msg, q.name, name, unresolvable=True)
                    msg = f"queue {q.name}: {name} {_q(name, after)}/{_q(name, cap)} over max"
                    return Verdict(False, msg, q.name, name)
        # 2. borrowing: what lands above a path queue's guarantee must come
        # from capacity no waiting queue off the path is owed.
        borrow: Amounts = {}
        borrower: dict[str, _Queue] = {}
        for q in order:
            for name, extra in landing[q.name].items():
                if extra <= 0:
                    continue
                g = q.guaranteed.get(name, 0)
                used = q.usage.get(name, 0)
                above = max(0, used + extra - g) - max(0, used - g)
                if above > borrow.get(name, 0):
                    borrow[name] = above
                    borrower[name] = q
        if not borrow:
            return OK
        on_path = set(landing)
        owed: Amounts = {}
        owed_to: dict[str, list[str]] = {}
        for q in order:
            siblings = q.parent.children if q.parent is not None else self._roots
            for s in siblings:
                if s.name in on_path:
                    continue
                for name, v in self._owed(s).items():
                    owed[name] = owed.get(name, 0) + v
                    owed_to.setdefault(name, []).append(s.name)
        if not owed:
            return OK
        capacity = self.capacity()
        for name in sorted(borrow):
            need = borrow[name]
            if name not in owed:
                continue
            free = capacity.get(name, 0) - self._node_usage.get(name, 0) - self._nominated_only(name)
            spare = free - owed[name]
            if need > spare:
                q = borrower[name]
                g = q.guaranteed.get(name, 0)
                after = q.usage.get(name, 0) + landing[q.name].get(name, 0)
                waiting = ", ".join(sorted(set(owed_to[name])))
                msg = (
                    f"queue {q.name}: {name} {_q(name, after)}/{_q(name, g)} over guaranteed, and "
                    f"{_q(name, max(spare, 0))} {name} is free to borrow beyond the "
                    f"{_q(name, owed[name])} {name} held for queue {waiting} (waiting for its guarantee)"
                )
                return Verdict(False, msg, q.name, name)
        return OK

    def _nominated_only(self, name: str) -> int:
        return sum(pi.requests.get(name, 0) for uid, pi in self._nominated.items() if uid not in self._placed)

    # ------------------------------------------------------------ reclaim

    def may_reclaim(self, pi: PodInfo) -> bool:
        """Whether ``pi`` may evict other queues' borrowed pods (see
        :meth:`reclaim_refusal`)."""
        return not self.reclaim_refusal(pi)

    def reclaim_refusal(self, pi: PodInfo) -> str:
        """Why ``pi`` may not evict other queues' borrowed pods, "" when it
        may: its leaf reclaims, it requests a resource its leaf guarantees,
        and after it every queue on its path stays within its guarantee for
        each guaranteed resource it requests. "" too for an unqueued pod
        (nothing to say)."""
        leaf, _ = self.leaf_of(pi.pod)
        q = self._queues.get(leaf) if leaf else None
        if q is None:
            return "-"
        if not q.spec.preemption.reclaim:
            return f"queue {q.name} does not reclaim (preemption.reclaim: false)"
        if not any(pi.requests.get(n, 0) > 0 for n in q.guaranteed):
            return f"queue {q.name} has no guarantee for what the pod requests, so nothing is reclaimed for it"
        # The pod's own nomination (an earlier reclaim) is already in usage.
        own = self._usage_of.get(pi.uid)
        for a in q.path:
            for name, g in a.guaranteed.items():
                req = pi.requests.get(name, 0)
                counted = (
                    own[1].get(name, 0)
                    if own is not None and a.name in {x.name for x in self._queues[own[0]].path}
                    else 0
                )
                after = a.usage.get(name, 0) - counted + req
                if req > 0 and after > g:
                    return (
                        f"queue {a.name}: {name} {_q(name, after)}/{_q(name, g)} over guaranteed, "
                        "so nothing is reclaimed for it"
                    )
        return ""

    def reservation_of(self, pod: model.Pod) -> ReservationPolicy | None:
        """The reservation policy of the leaf queue ``pod`` waits in (None:
        unqueued, or its queue holds nothing)."""
        if not self._queues:
            return None
        leaf, _ = self.leaf_of(pod)
        q = self._queues.get(leaf) if leaf else None
        return reservation_policy(q.spec) if q is not None else None

    def reservation_policies(self) -> dict[str, ReservationPolicy]:
        """Every queue that holds reservations -> its policy."""
        return {n: p for n, q in self._queues.items() if (p := reservation_policy(q.spec)) is not None}

    def within_queue(self, preemptor: PodInfo, victim: PodInfo) -> bool:
        """Whether priority preemption may take ``victim`` for ``preemptor``:
        without queues, always; with them, only a pod of the same leaf whose
        ``withinQueue`` is LowerPriority (unqueued pods only unqueued ones)."""
        if not self._queues:
            return True
        mine = self.lane_of(preemptor.pod)
        if mine != self.lane_of(victim.pod):
            return False
        return not mine or self._queues[mine].spec.preemption.within_queue == "LowerPriority"

    def reclaim_order(self, preemptor: PodInfo, pods: Iterable[PodInfo]) -> list[PodInfo]:
        """The pods ``preemptor`` may reclaim, best victim first: those
        already terminating, then from the queue furthest above its fair
        share, lowest priority, newest. Only pods of queues (off the
        preemptor's path) above their guarantee."""
        mine = self.lane_of(preemptor.pod)
        path = {a.name for a in self._queues[mine].path} if mine else set()
        out: list[tuple[bool, float, int, str, str, PodInfo]] = []
        for v in pods:
            leaf = self.victim_leaf(v)
            if not leaf or leaf == mine:
                continue
            # Pods already leaving (earlier victims) first: taking them again
            # costs nothing, while giving them back would take a fresh one.
            leaving = self.is_leaving(v)
            own = [a for a in self._queues[leaf].path if a.name not in path]
            if not leaving and not any(self._above_guarantee(a) for a in own):
                continue
            over = 0.0 if leaving else max(self.dominant_share(a) - self.fair_share(a) for a in own)
            created = _invert(v.pod.metadata.creation_timestamp or "")
            out.append((not leaving, -over, v.priority, created, v.uid, v))
        # The uid breaks ties: a node's pod order shifts with every update.
        out.sort(key=lambda t: t[:5])
        return [t[5] for t in out]

    def _above_guarantee(self, q: _Queue) -> bool:
        return any(used > q.guaranteed.get(name, 0) for name, used in q.usage.items() if used > 0)

    def reclaimable(self, preemptor: PodInfo, ordered: Sequence[PodInfo]) -> list[PodInfo]:
        """The longest prefix-greedy choice from ``ordered`` whose eviction
        takes no victim's queue (off the preemptor's path) below its
        guarantee."""
        mine = self.lane_of(preemptor.pod)
        path = {a.name for a in self._queues[mine].path} if mine else set()
        taken: dict[str, Amounts] = {}
        out: list[PodInfo] = []
        for v in ordered:
            leaf = self.victim_leaf(v)
            if not leaf:
                continue
            if self.is_leaving(v):  # no longer counted: taking it again takes nothing
                out.append(v)
                continue
            own = [a for a in self._queues[leaf].path if a.name not in path]
            ok = True
            for a in own:
                t = taken.get(a.name, {})
                for name, g in a.guaranteed.items():
                    r = v.requests.get(name, 0)
                    if r and a.usage.get(name, 0) - t.get(name, 0) - r < g:
                        ok = False
            if ok:
                for a in own:
                    _add(taken.setdefault(a.name, {}), v.requests, 1)
                out.append(v)
        return out

    def is_leaving(self, v: PodInfo) -> bool:
        """Chosen as a reclaim victim, or terminating: no longer counted."""
        return v.uid in self._leaving or bool(v.pod.metadata.deletion_timestamp)

    def victim_leaf(self, v: PodInfo) -> str:
        """The leaf of a possible victim: where it is counted, or for one
        leaving (no longer counted) the leaf it belongs to."""
        leaf = self.leaf_of_counted(v.uid)
        if not leaf and self.is_leaving(v) and (v.uid in self._placed):
            leaf = self.lane_of(v.pod)
        return leaf

    def guaranteed_of(self, leaf: str) -> Amounts:
        q = self._queues.get(leaf)
        return dict(q.guaranteed) if q is not None else {}

    def leaf_of_counted(self, uid: str) -> str:
        """The leaf a counted (placed or nominated) pod's usage is in ("" none)."""
        got = self._usage_of.get(uid)
        return got[0] if got is not None else ""

    def count_reclaim(self, queue: str) -> None:
        self.reclaims[queue] = self.reclaims.get(queue, 0) + 1

    # ------------------------------------------------------------ status

    def status(self) -> list[QueueStatus]:
        """Every queue, parents before children, in configuration order."""
        out: list[QueueStatus] = []

        def walk(q: _Queue) -> None:
            out.append(
                QueueStatus(
                    name=q.name,
                    parent=q.parent.name if q.parent is not None else "",
                    leaf=q.leaf,
                    guaranteed=dict(q.guaranteed),
                    max=dict(q.max),
                    weight=q.weight,
                    allocated={k: v for k, v in q.usage.items() if v},
                    pending_pods=q.pending_pods,
                    pending={k: v for k, v in q.pending.items() if v},
                    dominant_share=self.dominant_share(q),
                    fair_share=self.fair_share(q),
                    namespaces=list(q.spec.namespaces),
                    children=[c.name for c in q.children],
                )
            )
            for c in q.children:
                walk(c)

        for r in self._roots:
            walk(r)
        return out

    def get(self, name: str) -> QueueStatus | None:
        return next((s for s in self.status() if s.name == name), None)


def _invert(ts: str) -> str:
    """A key that sorts later timestamps first (newest victims first)."""
    return "".join(chr(0x10FFFF - ord(ch)) for ch in ts)
