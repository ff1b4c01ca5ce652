"""Berth's one gang model, whatever dialect a job framework wrote it in.

A pod names its gang (:class:`Membership`: the source, the namespace, the
group's name, and the pod's task within it); the source builds the
:class:`Gang` from its PodGroup object or from the members' own annotations.
Coscheduling enforces a Gang; nothing downstream knows which dialect it came
from except to say so in messages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

__all__ = ["Gang", "GangKey", "InvalidGang", "Membership", "PhaseCounts"]


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class GangKey:
    """One gang: the source that defines it and the group's name in its namespace."""

    source: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def described(self) -> str:
        """``volcano group "ns/name"``, as messages name it."""
        return f'{self.source} group "{self.namespace}/{self.name}"'


@dataclasses.dataclass(frozen=True, slots=True)
class Membership:
    """What a pod says about its gang: which one, and its task in it (Volcano's
    ``volcano.sh/task-spec``, YuniKorn's task group, KAI's subgroup; "" for none)."""

    key: GangKey
    task: str = ""


class InvalidGang(ValueError):
    """A gang key or definition Berth cannot use: the message names the key
    (label, annotation or field) and why. The pod waits with this message;
    nothing else changes."""


@dataclasses.dataclass(frozen=True, slots=True)
class Gang:
    """A gang, in Berth's terms.

    - ``min_member``: members that must be placed together (all or nothing).
    - ``min_task_member``: of those, at least this many of each task.
    - ``min_resources``: canonical amounts (milli-cpu, bytes, counts) that must
      be free in the cluster before any member is placed (Volcano's enqueue
      gate; a *resource gang* when ``min_member`` ≤ 1).
    - ``hard``: a gang that cannot be completed within ``timeout_seconds``
      keeps failing (True) or, soft (YuniKorn's ``gangSchedulingStyle=Soft``),
      is scheduled from then on as if it were no gang.
    - ``timeout_seconds``: how long members wait for the rest at Permit (and,
      for a soft gang, until it stops being one); None: Coscheduling's default.
    - ``queue``: the batch queue the group names (Volcano's and KAI's
      ``spec.queue``), "" when it names none.
    - ``origin``: where the definition was read, for messages.
    """

    key: GangKey
    min_member: int
    min_task_member: Mapping[str, int] = dataclasses.field(default_factory=dict)
    min_resources: Mapping[str, int] = dataclasses.field(default_factory=dict)
    hard: bool = True
    timeout_seconds: float | None = None
    queue: str = ""
    origin: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class PhaseCounts:
    """What a gang's status phase is computed from: its members (pending or
    placed, neither terminal nor terminating), those placed (assumed or
    bound), those running, and the phase the object has now."""

    members: int
    placed: int
    running: int
    current: str = ""
