"""What the scheduler decided about a pod: the record behind the gRPC
decision stream, ``berth explain``'s queue state and Kubernetes events.

A core dataclass; the gRPC adapter turns it into ``berth.v1.Decision``
(``berth.adapters.grpc.convert``). The kinds and their order are the proto's.
"""

from __future__ import annotations

import dataclasses
import enum

__all__ = ["Decision", "DecisionKind", "Reason"]


class DecisionKind(enum.IntEnum):
    """Where a pod stands after a step of the scheduler (``berth.v1.Decision.Kind``)."""

    ASSUMED = 1
    BOUND = 2
    UNSCHEDULABLE = 3
    GATED = 4
    NOMINATED = 5
    PREEMPTED = 6
    BIND_FAILED = 7
    QUEUED = 8
    CANCELLED = 9


@dataclasses.dataclass(frozen=True, slots=True)
class Reason:
    """One plugin's reason (a Status's message), as decisions and Explain report it."""

    plugin: str
    reason: str
    unresolvable: bool = False
    #: The plugin failed (an Error status: it raised or returned one), not the pod.
    error: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    kind: DecisionKind
    pod: str  # NAMESPACE/NAME
    uid: str
    node: str = ""
    message: str = ""
    reasons: tuple[Reason, ...] = ()
    attempts: int = 0
    timestamp_ms: int = 0
