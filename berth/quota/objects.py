"""Queues declared as Kubernetes objects (``Queue``, berth.dev/v1alpha1),
merged with the configuration file's ``queues:``.

::

    configuration queues (file, hot reload) ──┐
                                              ├─► plan() ─► one list of QueueSpec ─► QueueTree.load
    Queue objects (informer, cluster file) ───┘        └─► an Accepted condition per object

Rules, in order:

1. The file's queues must be valid on their own (they are what Berth ran
   with before any object existed); an invalid file is refused as a hot
   reload always was, and nothing changes.
2. An object named as a file queue is refused (``DefinedInConfiguration``):
   the file's queue keeps working, the object changes nothing.
3. An object whose own fields are wrong (unknown field, bad quantity,
   weight, ``max`` below ``guaranteed``...) is refused (``InvalidSpec``).
4. The rest are admitted one by one, parents before children, objects that
   ran before first (so a newcomer never evicts a running queue from the
   tree), then by creation time and name; one whose admission would make the
   tree invalid (unknown parent, a cycle, children guaranteed more than
   their parent...) is refused (``InvalidHierarchy``).
5. A refused object that ran before keeps running with the spec it last ran
   with (``changes nothing``), and its condition says so; a refused new one
   is not in the tree at all.

The merged list holds the file's queues first, then the admitted objects:
a pod without the queue label goes to the first leaf whose ``namespaces``
match in that order, so the file wins a namespace both claim.

Deleting an object (or taking it out of the cluster file) is removing the
queue from ``queues:``: the tree is rebuilt without it, pods labelled for it
wait with "does not exist", pods it took by namespace fall through to the
next match, ``default`` or no queue — :meth:`QueueTree.load` does exactly
that for both paths. Children of a deleted object are refused until their
parent returns.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from berth.cluster import queues, resources
from berth.errors import InvalidArgument
from berth.quota.spec import QueueSpec, validate_queues
from berth.quota.tree import QueueStatus

__all__ = [
    "ACCEPTED",
    "Acceptance",
    "Plan",
    "QueueObjects",
    "plan",
    "spec_of",
    "status_of",
]

#: The condition type every Queue object carries.
ACCEPTED = "Accepted"
#: Reasons of the Accepted condition.
APPLIED = "Applied"
INVALID_SPEC = "InvalidSpec"
INVALID_HIERARCHY = "InvalidHierarchy"
DEFINED_IN_CONFIGURATION = "DefinedInConfiguration"

#: Status shares are rounded so that noise below this does not count as a change.
_SHARE_DIGITS = 4


@dataclasses.dataclass(frozen=True, slots=True)
class Acceptance:
    """What Berth made of one object's current generation."""

    accepted: bool
    reason: str
    message: str
    #: The ``metadata.generation`` judged (the condition's observedGeneration).
    generation: int
    #: The generation whose spec is in the tree (0: none).
    running: int


@dataclasses.dataclass(slots=True)
class Plan:
    #: The configuration's queues, then the admitted objects'.
    specs: list[QueueSpec]
    #: Object name -> (the spec in the tree, its generation).
    admitted: dict[str, tuple[QueueSpec, int]]
    verdicts: dict[str, Acceptance]


def spec_of(obj: queues.Queue) -> QueueSpec:
    """The QueueSpec ``obj`` declares; InvalidArgument naming the field
    (``spec.weight: ...``) when its fields are wrong on their own."""
    if obj.api_version != queues.API_VERSION:
        raise InvalidArgument(f"apiVersion: {obj.api_version!r} is not {queues.API_VERSION}")
    if "name" in obj.spec:
        raise InvalidArgument("spec.name: unknown field (the queue's name is metadata.name)")
    try:
        spec = msgspec.convert({**obj.spec, "name": obj.metadata.name}, QueueSpec)
    except msgspec.ValidationError as e:
        msg, _, at = str(e).partition(" - at `")
        path = at.rstrip("`").removeprefix("$").removeprefix(".")
        raise InvalidArgument(f"spec{'.' + path if path else ''}: {msg}") from None
    # The checks that need no other queue: the object alone, as a root.
    try:
        validate_queues([msgspec.structs.replace(spec, parent="")])
    except InvalidArgument as e:
        raise InvalidArgument(_rename(str(e), {0: "spec"})) from None
    return spec


_INDEX = re.compile(r"queues\[(\d+)\](\.name\b)?")


def _rename(message: str, labels: Mapping[int, str]) -> str:
    """``validate_queues``' ``queues[i]`` paths in terms an object's reader
    knows: ``spec`` (``metadata.name``) for the object itself, the other
    queues by name and origin."""

    def sub(m: re.Match[str]) -> str:
        label = labels.get(int(m.group(1)), m.group(0))
        if label == "spec":
            return "metadata.name" if m.group(2) else "spec"
        return label + (m.group(2) or "")

    return _INDEX.sub(sub, message)


def _labels(specs: Sequence[QueueSpec], n_config: int, own: int) -> dict[int, str]:
    out = {i: f'configuration queue "{s.name}"' for i, s in enumerate(specs[:n_config])}
    out.update({i: f'Queue "{s.name}"' for i, s in enumerate(specs) if i >= n_config})
    out[own] = "spec"
    return out


def _depth(name: str, parents: Mapping[str, str]) -> int:
    depth, seen = 0, {name}
    at = parents.get(name, "")
    while at and at in parents and at not in seen:
        seen.add(at)
        depth += 1
        at = parents[at]
    return depth


def plan(
    config: Sequence[QueueSpec],
    objects: Mapping[str, queues.Queue],
    before: Mapping[str, tuple[QueueSpec, int]],
) -> Plan:
    """The merged queues for ``config`` and ``objects`` (see the module
    docstring); ``before``: what was admitted last time. Raises
    InvalidArgument only when ``config`` alone is invalid."""
    validate_queues(config)
    names = {s.name for s in config}
    verdicts: dict[str, Acceptance] = {}
    current: dict[str, tuple[QueueSpec, int]] = {}
    for name, obj in objects.items():
        gen = obj.metadata.generation
        if name in names:
            msg = (
                f'a queue named "{name}" is defined in Berth\'s configuration file (queues:), which wins; '
                "rename this Queue or remove the file's queue"
            )
            verdicts[name] = Acceptance(False, DEFINED_IN_CONFIGURATION, msg, gen, 0)
            continue
        try:
            current[name] = (spec_of(obj), gen)
        except InvalidArgument as e:
            verdicts[name] = Acceptance(False, INVALID_SPEC, str(e), gen, 0)
    # Objects that ran before first, then the newcomers by age; parents
    # before children (by depth among everything declared).
    parents = {s.name: s.parent for s in config}
    parents.update({n: s.parent for n, (s, _) in current.items()})
    age = {n: (objects[n].metadata.creation_timestamp, n) for n in objects}
    order = sorted(current, key=lambda n: (_depth(n, parents), n not in before, age[n]))
    admitted: dict[str, tuple[QueueSpec, int]] = {}
    specs = list(config)

    def fits(spec: QueueSpec) -> str:
        trial = [*specs, spec]
        try:
            validate_queues(trial)
        except InvalidArgument as e:
            return _rename(str(e), _labels(trial, len(config), len(trial) - 1))
        return ""

    why: dict[str, str] = {}
    waiting = list(order)
    # Fast path: everything together (one validation when all is well).
    together = [*specs, *(current[n][0] for n in order)]
    try:
        validate_queues(together)
    except InvalidArgument:
        pass
    else:
        specs, waiting = together, []
        for n in order:
            admitted[n] = current[n]
            verdicts[n] = Acceptance(True, APPLIED, "", current[n][1], current[n][1])
    # Else one by one, passes until nothing more fits: a child sorted
    # before a parent that fits later still gets in.
    progress = True
    while waiting and progress:
        progress = False
        for n in list(waiting):
            msg = fits(current[n][0])
            if msg:
                why[n] = msg
                continue
            specs.append(current[n][0])
            admitted[n] = current[n]
            verdicts[n] = Acceptance(True, APPLIED, "", current[n][1], current[n][1])
            waiting.remove(n)
            progress = True
    # What is still refused keeps the spec it ran with, when that still fits.
    fallback = [n for n in objects if n not in admitted and n in before and n not in names]
    progress = True
    while fallback and progress:
        progress = False
        for n in list(fallback):
            old, old_gen = before[n]
            if not fits(old):
                specs.append(old)
                admitted[n] = (old, old_gen)
                fallback.remove(n)
                progress = True
    for n in objects:
        gen = objects[n].metadata.generation
        running = admitted[n][1] if n in admitted else 0
        if n in why and n not in verdicts:
            verdicts[n] = Acceptance(False, INVALID_HIERARCHY, why[n], gen, running)
        elif not verdicts[n].accepted and running:
            v = verdicts[n]
            verdicts[n] = Acceptance(False, v.reason, v.message, gen, running)
    return Plan(specs, admitted, verdicts)


class QueueObjects:
    """The Queue objects Berth knows, what of them runs, and their verdicts.
    The core owns one (:meth:`berth.scheduling.core.Core.on_queue_object`)."""

    def __init__(self) -> None:
        self.objects: dict[str, queues.Queue] = {}
        self.admitted: dict[str, tuple[QueueSpec, int]] = {}
        self.verdicts: dict[str, Acceptance] = {}
        #: The merged list last loaded into the tree.
        self.specs: list[QueueSpec] = []

    def plan(self, config: Sequence[QueueSpec], objects: Mapping[str, queues.Queue] | None = None) -> Plan:
        return plan(config, self.objects if objects is None else objects, self.admitted)

    def commit(self, p: Plan, objects: Mapping[str, queues.Queue] | None = None) -> None:
        if objects is not None:
            self.objects = dict(objects)
        self.admitted = p.admitted
        self.verdicts = p.verdicts
        self.specs = p.specs


# ------------------------------------------------------------ status


def _amounts(values: Mapping[str, int]) -> dict[str, str]:
    return {k: resources.format_quantity(k, v) for k, v in sorted(values.items())}


def condition_message(v: Acceptance) -> str:
    if v.accepted:
        return f"generation {v.generation} is applied"
    if v.running:
        return f"{v.message}; the queue keeps the spec of generation {v.running}"
    return f"{v.message}; the queue is not in Berth's tree"


def status_of(previous: Mapping[str, Any], verdict: Acceptance, queue: QueueStatus | None, now: str) -> dict[str, Any]:
    """The ``status`` the leader wants a Queue object to have, given the
    one it has (``previous``): the Accepted condition (its
    lastTransitionTime kept while its status does not change, as
    metav1.Condition asks) and, while the queue is in the tree (``queue``),
    what ``berth get queues`` shows of it."""
    state = "True" if verdict.accepted else "False"
    since = now
    for c in previous.get("conditions") or []:
        if isinstance(c, Mapping) and c.get("type") == ACCEPTED and c.get("status") == state:
            since = str(c.get("lastTransitionTime") or now)
    out: dict[str, Any] = {
        "conditions": [
            {
                "type": ACCEPTED,
                "status": state,
                "reason": verdict.reason,
                "message": condition_message(verdict),
                "lastTransitionTime": since,
                "observedGeneration": verdict.generation,
            }
        ]
    }
    if queue is not None:
        out.update(
            allocated=_amounts(queue.allocated),
            pending=_amounts(queue.pending),
            pendingPods=queue.pending_pods,
            dominantShare=round(queue.dominant_share, _SHARE_DIGITS),
            fairShare=round(queue.fair_share, _SHARE_DIGITS),
        )
    return out
