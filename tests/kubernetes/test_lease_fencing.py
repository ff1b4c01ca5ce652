"""A leader whose last Lease renewal is older than renewDeadline writes no
Binding, and a read of the Lease naming another holder ends its term at once
(issue 28: a leader paused past its Lease went on binding for a renew
deadline after it resumed, as kube-scheduler does)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from berth.adapters.kubernetes.election import LeaderElector
from berth.adapters.kubernetes.source import KubernetesSource
from berth.cluster.sources import BindError
from berth.testing import make_pod

pytestmark = [pytest.mark.asyncio, pytest.mark.looptime]


def elector(lead: Any = None, *, api: Any = None, on_unanswered: Any = None) -> LeaderElector:
    """An elector of Lease kube-system/berth as "me" (``api``: none is called unless given)."""

    async def idle() -> None:
        await asyncio.Event().wait()

    return LeaderElector(
        api if api is not None else object(),  # type: ignore[arg-type]  # never called unless given
        name="berth",
        namespace="kube-system",
        identity="me",
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
        lead=lead or idle,
        on_unanswered=on_unanswered,
    )


@pytest.mark.parametrize(
    ("renewed_ago", "fenced"),
    [(None, "never acquired"), (0.0, None), (9.9, None), (10.1, "last renewed 10.1s ago (renewDeadline 10s)")],
)
async def test_writes_are_fenced_past_the_renew_deadline(renewed_ago: float | None, fenced: str | None) -> None:
    el = elector()
    if renewed_ago is not None:
        el.renewed()
        await asyncio.sleep(renewed_ago)
    reason = el.fence()
    assert (reason is None) == (fenced is None)
    if fenced is not None:
        assert reason is not None and fenced in reason


async def test_a_lease_held_by_another_ends_the_term_at_once() -> None:
    el = elector()
    el.renewed()
    await el._start_term()
    assert el.leading
    el.check_usurped(SimpleNamespace(holder_identity="someone-else"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not el.leading
    assert el.fence() is not None


async def test_our_own_record_changes_nothing() -> None:
    el = elector()
    el.renewed()
    await el._start_term()
    el.check_usurped(SimpleNamespace(holder_identity="me"))
    await asyncio.sleep(0)
    assert el.leading and el.fence() is None
    await el._end_term()


async def test_a_fenced_source_refuses_the_binding_before_any_request() -> None:
    source = KubernetesSource.__new__(KubernetesSource)
    source.fence = lambda: "the Lease was last renewed 25.0s ago (renewDeadline 10s)"
    with pytest.raises(BindError, match=r"not binding default/p: the Lease was last renewed 25\.0s ago"):
        await source.bind(make_pod("p"), "n1")
