"""What becomes of a submitted pod, told in one set of words.

A pod's status is always one of the server's phases — the words
``ListPods`` (``berth get pods``) and ``Why`` (``berth why``) answer with —
or, once it has left Berth, what took it away:

=================  ============================================================
``Gated``          held by a scheduling gate or an incomplete gang (PreEnqueue)
``Active``         queued, to be attempted
``Backoff``        waiting out its backoff after a failed bind
``Unschedulable``  its last attempt found no node; done when every reason is
                   UnschedulableAndUnresolvable (preemption cannot help; it
                   waits for the cluster to change)
``WaitingOnPermit`` placed, waiting for the rest of its gang
``Assumed``        placed, binding
``Bound``          on its node — done
``Rejected``       refused: at submission (the message says why), or by the
                   batch queues until they change — done
``Cancelled``      withdrawn (``Cancel``) — done
``Preempted``      evicted for a pod of higher priority — done
=================  ============================================================

:class:`Outcome` follows one pod through the decision stream
(``WatchDecisions``) through nomination, preemption and retries;
:class:`Waiter` follows many and knows the pods they preempted. Neither
does any I/O: :meth:`berth_client.AsyncClient.wait` feeds them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from berth_client.api.v1 import scheduler_pb2 as spb

__all__ = [
    "ACTIVE",
    "ASSUMED",
    "BACKOFF",
    "BOUND",
    "CANCELLED",
    "GATED",
    "PHASES",
    "PREEMPTED",
    "REJECTED",
    "UNSCHEDULABLE",
    "WAITING_ON_PERMIT",
    "Outcome",
    "Waited",
    "Waiter",
]

GATED = "Gated"
ACTIVE = "Active"
BACKOFF = "Backoff"
UNSCHEDULABLE = "Unschedulable"
WAITING_ON_PERMIT = "WaitingOnPermit"
ASSUMED = "Assumed"
BOUND = "Bound"
REJECTED = "Rejected"
CANCELLED = "Cancelled"
PREEMPTED = "Preempted"

#: The server's phases (ListPods, Why), in the order a pod passes them.
PHASES = (GATED, ACTIVE, BACKOFF, UNSCHEDULABLE, WAITING_ON_PERMIT, ASSUMED, BOUND, REJECTED)

#: The batch queues' plugin: a verdict of only its unresolvable reasons is
#: the server's Rejected phase (``berth.scheduling.visibility``).
QUEUES_PLUGIN = "BerthQueues"

Kind = spb.Decision

#: The status a decision leaves a pod in (UNSCHEDULABLE is judged on its reasons).
_STATUS = {
    Kind.QUEUED: ACTIVE,
    Kind.GATED: GATED,
    Kind.UNSCHEDULABLE: UNSCHEDULABLE,
    Kind.NOMINATED: UNSCHEDULABLE,
    Kind.ASSUMED: ASSUMED,
    Kind.BIND_FAILED: BACKOFF,
    Kind.BOUND: BOUND,
    Kind.CANCELLED: CANCELLED,
    Kind.PREEMPTED: PREEMPTED,
}


@dataclasses.dataclass(slots=True)
class Outcome:
    """Where one pod stands, from the decisions seen so far.

    ``node`` is where it is bound or assumed, or the node its preemption
    nominated while it waits for the victims to leave; ``done`` says the
    status will not change by waiting (see the module's table).
    """

    pod: str  # NAMESPACE/NAME
    uid: str
    status: str = ACTIVE
    node: str = ""
    reason: str = ""
    done: bool = False

    def follow(self, d: spb.Decision) -> None:
        """Take the next decision about this pod."""
        status = _STATUS.get(d.kind)
        if status is None or self.done:
            return
        reason = d.message or ", ".join(r.reason for r in d.reasons)
        node = d.node if d.kind in (Kind.BOUND, Kind.ASSUMED, Kind.NOMINATED) else ""
        if d.kind == Kind.UNSCHEDULABLE:
            unresolvable = bool(d.reasons) and all(r.unresolvable for r in d.reasons)
            if unresolvable and all(r.plugin == QUEUES_PLUGIN for r in d.reasons):
                status = REJECTED
            self.done = unresolvable
            if self.node and not self.done:
                # The attempt that nominated fails too: the pod stays
                # nominated while the victims leave.
                node = self.node
        self.done = self.done or status in (BOUND, CANCELLED, PREEMPTED)
        if d.kind == Kind.CANCELLED:
            reason = reason or "cancelled"
        self.status = status
        self.reason = "" if status == BOUND else reason
        self.node = node

    def to_dict(self) -> dict[str, object]:
        """``{"pod", "status", "node" (None when none), "reason"}``."""
        return {"pod": self.pod, "status": self.status, "node": self.node or None, "reason": self.reason}


@dataclasses.dataclass(slots=True)
class Waited:
    """What :meth:`AsyncClient.wait` saw: every submitted pod's outcome in
    submission order, the pods they preempted meanwhile (``Preempted``),
    and whether the timeout passed with pods not done."""

    outcomes: list[Outcome]
    victims: list[Outcome]
    timed_out: bool

    @property
    def waiting(self) -> list[Outcome]:
        """The pods still not done."""
        return [o for o in self.outcomes if not o.done]

    @property
    def failed(self) -> list[Outcome]:
        """The pods done without a node."""
        return [o for o in self.outcomes if o.done and o.status != BOUND]

    def counts(self) -> dict[str, int]:
        """How many submitted pods are in each status, the most first (ties
        in :data:`PHASES` order)."""
        order = {s: i for i, s in enumerate((*PHASES, CANCELLED, PREEMPTED))}
        out: dict[str, int] = {}
        for o in self.outcomes:
            out[o.status] = out.get(o.status, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], order.get(kv[0], len(order)))))


class Waiter:
    """Follows submitted pods through decisions (no I/O): feed it every
    decision of a watch with replay (:meth:`feed`) until :attr:`left` is 0."""

    def __init__(self, results: Iterable[spb.SubmitResult]) -> None:
        self.outcomes: dict[str, Outcome] = {}
        for r in results:
            if r.accepted:  # with what Submit said of it, if anything ("spec.schedulerName defaulted ...")
                self.outcomes[r.pod] = Outcome(r.pod, r.uid, reason=r.message)
            else:
                self.outcomes[r.pod] = Outcome(r.pod, r.uid, REJECTED, reason=r.message, done=True)
        self.uids = {o.uid for o in self.outcomes.values() if o.uid}
        self.victims: dict[str, Outcome] = {}
        #: Pods not done yet, counted as decisions arrive.
        self.left = sum(not o.done for o in self.outcomes.values())

    def feed(self, decisions: Iterable[spb.Decision]) -> None:
        for d in decisions:
            o = self.outcomes.get(d.pod)
            if o is not None:
                # A replayed decision about an earlier pod of the same name is not this one's.
                if (not d.uid or d.uid == o.uid) and not o.done:
                    o.follow(d)
                    self.left -= o.done
            elif d.kind == Kind.PREEMPTED and _preemptor(d.message) in self.uids:
                self.victims[d.pod] = Outcome(d.pod, d.uid, PREEMPTED, d.node, d.message, done=True)

    def result(self, timed_out: bool) -> Waited:
        return Waited(list(self.outcomes.values()), list(self.victims.values()), timed_out and self.left > 0)


def _preemptor(message: str) -> str:
    """The uid in a victim's "Preempted by pod UID on node N" (what
    DefaultPreemption and reclaim both say, as kube-scheduler's event does)."""
    rest = message.removeprefix("Preempted by pod ")
    return rest.split(" ", 1)[0] if rest != message else ""
