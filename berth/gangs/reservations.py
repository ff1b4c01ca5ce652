"""Reservations with backfill: capacity held for a gang (or a pod) that has
waited too long, so that a stream of small pods cannot starve it for ever.

The semantics asked by the users of the anchors, none of which ships them:
kai-scheduler#1969 ("hold capacity as it frees up ... small jobs keep using
the held capacity as long as they finish before the big job needs it") and
kueue#8309 ("gang jobs can starve indefinitely").

- A gang or pod whose queue sets ``reservation.after`` and that has waited
  longer than that gets one :class:`Reservation`: a set of nodes (its
  topology domain, or the smallest set of the freest nodes whose
  allocatable covers it) on which free capacity, up to what it still needs,
  is *held*: other pods may not use it.
- Backfill: a pod that declares how long it runs (:func:`declared_runtime`)
  may use held capacity when it ends before the reservation can start
  (:func:`estimate_start`). A pod that declares nothing never backfills.
- Released when the owner is placed whole, when it is gone (cancelled),
  and when it times out (``reservation.timeout``).

:class:`berth.plugins.reservation.Reservation` (the plugin) keeps the book
and enforces it; :mod:`berth.scheduling.reservations` shows it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping

from berth.cluster import model, resources
from berth.gangs.model import GangKey

__all__ = [
    "KUEUE_MAX_EXEC_TIME",
    "MAX_RUNTIME",
    "Reservation",
    "ReservationPolicy",
    "declared_runtime",
    "estimate_start",
    "parse_duration",
]

#: Berth's own runtime declaration: seconds, or a duration (``90s``, ``10m``, ``1h30m``).
MAX_RUNTIME = "berth.dev/max-runtime"
#: Kueue's (``kueue.x-k8s.io/max-exec-time-seconds``, integer seconds).
KUEUE_MAX_EXEC_TIME = "kueue.x-k8s.io/max-exec-time-seconds"

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$")


def parse_duration(text: str | float) -> float:
    """Seconds from a number or a duration string (``45``, ``90s``, ``10m``,
    ``1h30m``); raises ValueError for anything else or a negative value."""
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        s = text.strip()
        try:
            seconds = float(s)
        except ValueError:
            m = _DURATION.match(s)
            if not s or m is None:
                raise ValueError(f"{text!r} is not a duration (seconds, or like 90s, 10m, 1h30m)") from None
            h, mi, se = (float(g) if g else 0.0 for g in m.groups())
            seconds = h * 3600 + mi * 60 + se
    if not seconds >= 0 or seconds == float("inf"):
        raise ValueError(f"{text!r}: a duration must be a finite number of seconds, at least 0")
    return seconds


def declared_runtime(pod: model.Pod) -> float | None:
    """The longest the pod says it runs, in seconds: the shortest of
    ``spec.activeDeadlineSeconds`` (the kubelet kills it then),
    ``kueue.x-k8s.io/max-exec-time-seconds`` and ``berth.dev/max-runtime``.
    None when it declares none, or only malformed ones (it never backfills)."""
    found: list[float] = []
    deadline = pod.spec.active_deadline_seconds
    if deadline is not None and deadline > 0:
        found.append(float(deadline))
    annotations = pod.metadata.annotations or {}
    for key in (KUEUE_MAX_EXEC_TIME, MAX_RUNTIME):
        raw = annotations.get(key)
        if raw is None:
            continue
        try:
            value = parse_duration(raw) if key == MAX_RUNTIME else float(int(raw))
        except ValueError:
            continue
        if value > 0:
            found.append(value)
    return min(found) if found else None


@dataclasses.dataclass(frozen=True, slots=True)
class ReservationPolicy:
    """A queue's ``reservation`` (:class:`berth.quota.spec.ReservationSpec`), in seconds."""

    queue: str
    after: float
    max_per_queue: int = 1
    timeout: float = 3600.0


@dataclasses.dataclass(slots=True)
class Reservation:
    """Capacity held for ``owner`` (``research/train-64``) on ``nodes``.

    ``need``: what its unplaced pods request in all (canonical amounts);
    ``held``: node -> resource -> the free amount held there now (refreshed
    every cycle: what frees on the nodes is taken, up to ``need``);
    ``starts_at``: when enough will be free, on the clock (None: unknown).
    """

    owner: str
    kind: str  # "gang" or "pod"
    queue: str
    need: dict[str, int]
    nodes: tuple[str, ...]
    domain: str  # "block=b2"; "" for a node set chosen without topology
    since: float
    expires: float
    held: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    starts_at: float | None = None
    gang: GangKey | None = None

    def held_total(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for amounts in self.held.values():
            for name, amount in amounts.items():
                total[name] = total.get(name, 0) + amount
        return total

    def bottleneck(self) -> str:
        """The resource least held relative to the need (cpu on a tie)."""
        held = self.held_total()
        names = [n for n, a in self.need.items() if a > 0 and n != resources.PODS]
        if not names:
            return resources.PODS
        return min(names, key=lambda n: (held.get(n, 0) / self.need[n], n != resources.CPU, n))

    def reserved(self) -> str:
        """``48 of 64 cpu``: the bottleneck resource, held of needed."""
        name = self.bottleneck()
        held = self.held_total().get(name, 0)
        return f"{resources.format_quantity(name, held)} of {resources.format_quantity(name, self.need[name])} {name}"

    def where(self) -> str:
        return f"in {self.domain}" if self.domain else f"on {len(self.nodes)} node(s)"

    def holding(self) -> str:
        """``holding 48 of 64 cpu in block=b2``."""
        return f"holding {self.reserved()} {self.where()}"

    def starts(self, now: float) -> str:
        """``starts when 16 more cpu free (estimated in 120s)``; ``all it
        needs is held`` once it is."""
        name = self.bottleneck()
        short = max(0, self.need.get(name, 0) - self.held_total().get(name, 0))
        if not short:
            return "all it needs is held"
        text = f"starts when {resources.format_quantity(name, short)} more {name} free"
        if self.starts_at is None:
            return text + " (no estimate: a pod there declares no runtime)"
        return text + f" (estimated in {max(0.0, self.starts_at - now):.0f}s)"

    def summary(self, now: float) -> str:
        """``holding 48 of 64 cpu in block=b2; starts when 16 more cpu free (estimated in 120s)``."""
        return f"{self.holding()}; {self.starts(now)}"

    def refresh(self, free: Mapping[str, Mapping[str, int]]) -> None:
        """Hold what is free on the reservation's nodes (``free``: node ->
        resource -> free amount), node by node in order, up to the need."""
        left = dict(self.need)
        held: dict[str, dict[str, int]] = {}
        for node in self.nodes:
            amounts = free.get(node)
            if amounts is None:
                continue
            mine = {n: min(max(0, amounts.get(n, 0)), left[n]) for n in left if left[n] > 0}
            mine = {n: a for n, a in mine.items() if a > 0}
            if mine:
                held[node] = mine
                for n, a in mine.items():
                    left[n] -= a
        self.held = held


def estimate_start(
    need: Mapping[str, int],
    free: Mapping[str, int],
    ends: Iterable[tuple[float | None, Mapping[str, int]]],
    now: float,
) -> float | None:
    """When ``need`` can start on the reservation's nodes: ``free`` is what
    is free there now (summed over the nodes), ``ends`` each pod bound there
    with its end (when it was placed plus its declared runtime; None:
    unknown) and its requests.

    Pods are taken in order of their ends; the start is the first end at
    which the free amounts plus what the ended pods release cover the need,
    resource by resource (``now`` if they already do). Pods without an end
    are never counted: when the ones with ends do not free enough, the start
    is unknown (None) and nothing may backfill. Summing over the nodes
    ignores fragmentation, so the estimate is never late: a pod that ends
    before it also ends before the real start."""
    have = {n: free.get(n, 0) for n in need}
    if all(have[n] >= a for n, a in need.items()):
        return now
    known = sorted(((end, req) for end, req in ends if end is not None), key=lambda e: e[0])
    for end, req in known:
        for n in have:
            have[n] += req.get(n, 0)
        if all(have[n] >= a for n, a in need.items()):
            return max(end, now)
    return None
