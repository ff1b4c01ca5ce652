"""Reservations as the scheduler's views show them: ``berth why`` (the
owner's line), ``berth get queues`` and the dashboard (per queue), read from
the Reservation plugin of each profile (:mod:`berth.plugins.reservation`
keeps the book; :mod:`berth.gangs.reservations` says what one holds)."""

from __future__ import annotations

from berth.cluster import model
from berth.framework.decision import Reason
from berth.gangs import reservations as rsv
from berth.plugins.reservation import Reservation
from berth.scheduling.core import Core

__all__ = ["by_queue", "held", "line", "of_pod", "reason_for"]


def _plugins(core: Core) -> list[Reservation]:
    out: list[Reservation] = []
    for fwk in core.frameworks.values():
        out.extend(p for p in fwk.post_filter if isinstance(p, Reservation))
    return out


def held(core: Core) -> list[rsv.Reservation]:
    """Every reservation held now, oldest first."""
    return sorted((r for p in _plugins(core) for r in p.reservations()), key=lambda r: (r.since, r.owner))


def line(r: rsv.Reservation, now: float) -> str:
    """``gang research/train-64: holding 48 of 64 cpu in block=b2; starts when 16 more cpu free``."""
    return f"{r.kind} {r.owner}: {r.summary(now)}"


def by_queue(core: Core) -> dict[str, list[str]]:
    """Queue -> a line per reservation it holds."""
    out: dict[str, list[str]] = {}
    for p in _plugins(core):
        now = p.handle.clock()
        for r in p.reservations():
            out.setdefault(r.queue, []).append(line(r, now))
    return out


def of_pod(core: Core, pod: model.Pod) -> tuple[str, str] | None:
    """What is held for ``pod``'s gang (or itself) and when it starts
    (``berth why``'s blocker); None when nothing is."""
    for p in _plugins(core):
        r = p.reservation_of(pod)
        if r is not None:
            return r.holding(), r.starts(p.handle.clock())
    return None


def reason_for(core: Core, pod: model.Pod) -> Reason | None:
    """The line ``berth explain`` shows for such a pod; None for any other."""
    found = of_pod(core, pod)
    return Reason(Reservation.NAME, "; ".join(found), False) if found is not None else None
