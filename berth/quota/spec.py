"""The ``queues`` section of BerthConfiguration::

    queues:
    - name: research                  # unique; letters, digits, '-', '.'
      guaranteed: {cpu: "64", memory: 256Gi, nvidia.com/gpu: "8"}
      max: {cpu: "128"}               # hard cap; absent resources: capped by the parent / cluster
      weight: 1                       # share of what is above guarantees, among siblings
      preemption: {reclaim: true, withinQueue: LowerPriority}
      reservation: {after: 10m, maxPerQueue: 1, timeout: 1h}  # hold capacity for a gang waiting 10m
    - name: research-vision
      parent: research
      guaranteed: {cpu: "16"}
      namespaces: [vision, "vision-*"]

Semantics follow the anchors: YuniKorn's ``guaranteed``/``max`` per queue
(``docs/user_guide/queue_config.md``: a child's usage counts against every
ancestor, the sum of children's guarantees may not exceed the parent's),
Kueue's borrowing of idle nominal quota within a cohort
(``concepts/cohort.md``) and Volcano's ``weight`` for the share above
guarantees (``proportion`` plugin).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from typing import Literal

import msgspec

from berth.cluster import model, resources
from berth.errors import InvalidArgument
from berth.gangs import reservations

__all__ = [
    "DEFAULT_QUEUE",
    "NAME_RE",
    "PreemptionSpec",
    "QueueSpec",
    "ReservationSpec",
    "reservation_policy",
    "validate_queues",
]

#: Pods that name no queue and match no namespace go to this leaf when it exists.
DEFAULT_QUEUE = "default"
NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")
_MAX_NAME = 253
_NAMESPACE_PATTERN = re.compile(r"^[a-z0-9*?]([-a-z0-9*?]*[a-z0-9*?])?$")


class _Spec(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    pass


class PreemptionSpec(_Spec):
    #: A pending pod of this queue, below its guarantee, may preempt pods of
    #: queues above theirs (Volcano's reclaim, Kueue's reclaimWithinCohort).
    reclaim: bool = True
    #: Priority preemption among this queue's own pods (Kueue's
    #: ``withinClusterQueue``): LowerPriority as kube-scheduler does, or Never.
    within_queue: Literal["LowerPriority", "Never"] = "LowerPriority"


class ReservationSpec(_Spec):
    """Reservations with backfill (:mod:`berth.gangs.reservations`): a gang
    or pod of this queue that has waited longer than ``after`` gets capacity
    held for it; pods that declare a runtime ending before it can start
    still use it (backfill)."""

    #: How long a gang or pod waits before capacity is held for it
    #: (seconds, or a duration: ``90s``, ``10m``, ``1h``).
    after: str | float
    #: How many reservations the queue holds at once.
    max_per_queue: int = 1
    #: How long one is held before it is given up (the owner keeps waiting,
    #: behind another that has waited longer).
    timeout: str | float = "1h"


class QueueSpec(_Spec):
    name: str
    parent: str = ""
    guaranteed: dict[str, model.Quantity] = {}
    max: dict[str, model.Quantity] = {}
    weight: float = 1.0
    namespaces: list[str] = []
    preemption: PreemptionSpec = msgspec.field(default_factory=PreemptionSpec)
    #: None: nothing is held for this queue's gangs and pods.
    reservation: ReservationSpec | None = None

    def matches_namespace(self, namespace: str) -> bool:
        return any(fnmatch.fnmatchcase(namespace, pattern) for pattern in self.namespaces)


def _amounts(spec: QueueSpec, field: str, path: str) -> dict[str, int]:
    raw: Mapping[str, model.Quantity] = getattr(spec, field)
    for name in raw:
        if not name or name == resources.PODS:
            raise InvalidArgument(f"{path}.{field}[{name or '(empty)'}]: not a quota resource")
    return resources.canonical_list(raw, f"{path}.{field}")


def reservation_policy(spec: QueueSpec, path: str = "queue") -> reservations.ReservationPolicy | None:
    """The queue's reservation in seconds (None: none); raises
    InvalidArgument naming the field (``queues[0].reservation.after: ...``)."""
    r = spec.reservation
    if r is None:
        return None
    try:
        after = reservations.parse_duration(r.after)
    except ValueError as e:
        raise InvalidArgument(f"{path}.reservation.after: {e}") from None
    try:
        timeout = reservations.parse_duration(r.timeout)
    except ValueError as e:
        raise InvalidArgument(f"{path}.reservation.timeout: {e}") from None
    if r.max_per_queue < 1:
        raise InvalidArgument(f"{path}.reservation.maxPerQueue: must be at least 1, got {r.max_per_queue}")
    if timeout <= 0:
        raise InvalidArgument(f"{path}.reservation.timeout: must be more than 0")
    return reservations.ReservationPolicy(spec.name, after, r.max_per_queue, timeout)


def validate_queues(specs: Sequence[QueueSpec]) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
    """Check the ``queues`` section; raises InvalidArgument naming the field
    (``queues[1].guaranteed.cpu: ...``). Returns each queue's canonical
    (guaranteed, max) amounts."""
    index: dict[str, int] = {}
    amounts: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
    for i, q in enumerate(specs):
        path = f"queues[{i}]"
        if not NAME_RE.match(q.name) or len(q.name) > _MAX_NAME:
            raise InvalidArgument(f"{path}.name: {q.name!r} is not a valid queue name (letters, digits, '-', '.')")
        if q.name in index:
            raise InvalidArgument(f"{path}.name: duplicate queue {q.name!r} (also queues[{index[q.name]}])")
        index[q.name] = i
        if not q.weight > 0 or q.weight != q.weight or q.weight > 1e6:
            raise InvalidArgument(f"{path}.weight: must be greater than 0 and at most 1000000, got {q.weight}")
        for j, pattern in enumerate(q.namespaces):
            if not _NAMESPACE_PATTERN.match(pattern) or len(pattern) > 63:
                raise InvalidArgument(f"{path}.namespaces[{j}]: {pattern!r} is not a namespace name or pattern")
        try:
            guaranteed = _amounts(q, "guaranteed", path)
            cap = _amounts(q, "max", path)
        except resources.QuantityError as e:
            raise InvalidArgument(str(e)) from None
        for name, g in guaranteed.items():
            if name in cap and g > cap[name]:
                raise InvalidArgument(
                    f"{path}.guaranteed[{name}]: {resources.format_quantity(name, g)} is more than "
                    f"max {resources.format_quantity(name, cap[name])}"
                )
        amounts[q.name] = (guaranteed, cap)
        if q.reservation is not None:
            reservation_policy(q, path)
    children: dict[str, list[int]] = {}
    for i, q in enumerate(specs):
        if not q.parent:
            continue
        if q.parent not in index:
            raise InvalidArgument(f"queues[{i}].parent: no queue named {q.parent!r}")
        if q.parent == q.name:
            raise InvalidArgument(f"queues[{i}].parent: a queue cannot be its own parent")
        children.setdefault(q.parent, []).append(i)
    for i, q in enumerate(specs):  # a cycle never reaches a root
        seen = {q.name}
        at = q.parent
        while at:
            if at in seen:
                raise InvalidArgument(f"queues[{i}].parent: the parents of {q.name!r} form a cycle")
            seen.add(at)
            at = specs[index[at]].parent
    for parent, kids in children.items():
        pi = index[parent]
        p_guaranteed, p_max = amounts[parent]
        if specs[pi].namespaces:
            raise InvalidArgument(
                f"queues[{pi}].namespaces: only leaf queues take pods, and {parent!r} has child queues"
            )
        names = {n for k in kids for n in amounts[specs[k].name][0]}
        for name in sorted(names):
            total = sum(amounts[specs[k].name][0].get(name, 0) for k in kids)
            # YuniKorn: "the sum of the children's guaranteed resources may
            # not exceed the parent's guaranteed" (a parent without a
            # guarantee for the resource bounds nothing, but its max does).
            bound = p_guaranteed.get(name, p_max.get(name))
            if bound is not None and total > bound:
                what = "guaranteed" if name in p_guaranteed else "max"
                raise InvalidArgument(
                    f"queues[{kids[-1]}].guaranteed[{name}]: the children of {parent!r} are guaranteed "
                    f"{resources.format_quantity(name, total)} in all, more than its {what} "
                    f"{resources.format_quantity(name, bound)}"
                )
        for k in kids:
            for name, m in amounts[specs[k].name][1].items():
                if name in p_max and m > p_max[name]:
                    # Allowed by YuniKorn too, but pointless: say so early.
                    raise InvalidArgument(
                        f"queues[{k}].max[{name}]: {resources.format_quantity(name, m)} is more than the "
                        f"max of its parent {parent!r} ({resources.format_quantity(name, p_max[name])})"
                    )
    if DEFAULT_QUEUE in children:
        raise InvalidArgument(f"queues[{index[DEFAULT_QUEUE]}]: the {DEFAULT_QUEUE!r} queue must be a leaf")
    return amounts
