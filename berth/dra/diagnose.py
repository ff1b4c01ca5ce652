"""Berth: why the claims cannot be allocated on a node (upstream only says
"cannot allocate all claims"). Runs only after the search failed and never
changes its outcome: it names the first claim that cannot join the ones
before it, and in it the first request that cannot be met, and why.
"""

from __future__ import annotations

from berth.cluster import dra
from berth.dra.common import (
    ALL,
    REASON_CONSTRAINT,
    REASON_DEVICES_ALLOCATED,
    REASON_NO_MATCHING_DEVICE,
    REASON_POOL_INCOMPLETE,
    REASON_TAINTED,
    Request,
    Unsatisfiable,
    taint_prevents_allocation,
)
from berth.dra.pools import DeviceID, device_matches_node
from berth.dra.search import Run, taken_by

__all__ = ["diagnose"]


def diagnose(run: Run) -> Unsatisfiable:
    """The first claim that cannot join the ones before it, and why."""
    for ci, claim in enumerate(run.claims[:-1]):
        if not Run(run.p, run.node, ci + 1, deadline=run.deadline).search():
            return _why_claim(run, ci, claim)
    # The whole list failed (that is why we are here): the last claim needs no search.
    return _why_claim(run, len(run.claims) - 1, run.claims[-1])


def _why_claim(run: Run, ci: int, claim: dra.ResourceClaim) -> Unsatisfiable:
    taken = {d for d, owners in taken_by(run, ci).items() if owners}
    for ri, request in enumerate(claim.spec.devices.requests):
        # A firstAvailable request fails when every alternative does; the
        # last alternative's reason is the one reported.
        verdict = None
        rd = run.requests[(ci, ri, 0)]
        for si in range(max(1, len(request.first_available))):
            rd = run.requests[(ci, ri, si)]
            verdict = _why_request(run, (ci, ri, si), rd, taken)
            if verdict is None:
                break
        if verdict is not None:
            reason, message = verdict
            return Unsatisfiable(
                claim.key, rd.full_name, reason, f"claim {claim.key}, request {rd.full_name}: {message}"
            )
    for spec in claim.spec.devices.constraints:
        if not Run(run.p, run.node, ci + 1, [spec], deadline=run.deadline).search():
            names = ", ".join(spec.requests) or "all requests"
            kind, attribute = (
                ("matchAttribute", spec.match_attribute)
                if spec.match_attribute is not None
                else ("distinctAttribute", spec.distinct_attribute)
            )
            common = "a common value" if spec.match_attribute is not None else "distinct values"
            return Unsatisfiable(
                claim.key,
                ",".join(spec.requests),
                REASON_CONSTRAINT,
                f"claim {claim.key}: constraint {kind} {attribute} ({names}) unmet: no free devices with {common}",
            )
    return Unsatisfiable(
        claim.key,
        "",
        REASON_DEVICES_ALLOCATED,
        f"claim {claim.key}: not enough free devices for all its requests and constraints together",
    )


def _why_request(run: Run, key: tuple[int, int, int], rd: Request, taken: set[DeviceID]) -> tuple[str, str] | None:
    """Whether the request alone can be met by free devices, and if not why."""
    usable = [p for p in run.pools if not p.invalid and not p.incomplete]
    matching = [
        c
        for p in usable
        for c in p.devices
        if run._selectable(key, rd, c) and (not c.per_device or device_matches_node(run.node, c.device))
    ]
    incomplete = [str(p) for p in run.pools if p.incomplete]
    if not matching:
        if incomplete:
            return (
                REASON_POOL_INCOMPLETE,
                f"no device matches the selectors, and resource pool {incomplete[0]} is being updated",
            )
        return REASON_NO_MATCHING_DEVICE, "no device matches the selectors (class and request)"
    features = run.features
    if features.device_taints:
        tolerated = [c for c in matching if not taint_prevents_allocation(c.device, rd.tolerations)]
        if not tolerated:
            return REASON_TAINTED, f"all {len(matching)} matching devices have taints the request does not tolerate"
        matching = tolerated
    if rd.admin_access:
        return None
    multi = features.consumable_capacity
    free = [
        c
        for c in matching
        if (multi and c.device.allow_multiple_allocations) or (c.id not in run.allocated and c.id not in taken)
    ]
    need = len(matching) if rd.mode == ALL else rd.count
    if len(free) < need:
        if not free:
            return REASON_DEVICES_ALLOCATED, f"all {len(matching)} matching devices are allocated"
        return (
            REASON_DEVICES_ALLOCATED,
            f"{need} devices needed, {len(free)} of {len(matching)} matching devices are free",
        )
    return None
