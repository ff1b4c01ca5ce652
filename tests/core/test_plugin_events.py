"""A plugin's event (the Handle's ``client.record_event``, kube-scheduler's
``EventRecorder().Eventf``): written through the pod's source in the
background; what an API server would refuse (``ValidateEventCreate``,
``pkg/apis/core/validation/events.go`` v1.37.2) is a ValueError at the call
and writes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from berth import testing
from berth.cluster.sources import EventType


@pytest.mark.parametrize(
    ("case", "event", "error"),
    [
        ("a Normal event", ("Normal", "BindingConditionsPending", "Scheduling", "waiting"), None),
        ("a Warning event", (EventType.WARNING, "FailedScheduling", "Scheduling", "0/1 nodes"), None),
        ("an empty note", ("Normal", "Pending", "Scheduling", ""), None),
        (
            "a type neither Normal nor Warning",
            ("Info", "Pending", "Scheduling", "n"),
            "event type: Unsupported value: 'Info': supported values: Normal, Warning",
        ),
        ("no reason", ("Normal", "", "Scheduling", "n"), "event reason: Required value"),
        ("no action", ("Normal", "Pending", "", "n"), "event action: Required value"),
        (
            "a reason past 128 characters",
            ("Normal", "r" * 129, "Scheduling", "n"),
            "event reason: Invalid value: can have at most 128 characters",
        ),
        (
            "an action past 128 characters",
            ("Normal", "Pending", "a" * 129, "n"),
            "event action: Invalid value: can have at most 128 characters",
        ),
    ],
)
async def test_an_event_is_recorded_through_the_pods_source_or_refused_whole(
    case: str, event: tuple[Any, str, str, str], error: str | None
) -> None:
    pod = testing.make_pod("p")
    cluster = testing.Cluster(nodes=[testing.make_node("a")], pods=[pod])
    client = cluster.handle().client
    type_, reason, action, note = event
    if error is not None:
        with pytest.raises(ValueError, match=f"^{error}$"):
            client.record_event(pod, None, type_, reason, action, note)
    else:
        client.record_event(pod, None, type_, reason, action, note)
    await cluster.berth.core.client.drain()
    assert cluster.berth.cluster.events == ([] if error is not None else [("default/p", reason, note)])
