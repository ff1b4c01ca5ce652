"""Which decisions a watch passes on after it reconnects.

A server that numbers its decisions (``Decision.serial``, with its
``epoch``) is asked to resume exactly after the last serial passed on
(``WatchDecisionsRequest.since_serial`` and ``epoch``): nothing is missed
and nothing repeated, across reconnects and across restarts of a Berth
that keeps its state. When it answers OUT_OF_RANGE (that serial was
compacted, or its state was lost: another epoch) the watch relists — it
subscribes again with ``replay`` and passes on the replayed decisions
newer than what it passed on (below) — and then resumes by serial again, as a Kubernetes reflector relists after
410 Gone (``k8s.io/client-go/tools/cache/reflector.go``).

Without serials (an older server) the server keeps each pod's latest
decision and replays them to a new stream that asks for it
(``WatchDecisionsRequest.replay``). So a watch that lost its stream
(Berth restarted, a network break, ``UNAVAILABLE`` at shutdown, a stream
ended as "too slow") subscribes again with replay, and :class:`Resume`
passes on only what is new: a replayed decision made after the newest one
the watch had passed on (by the server's timestamps; one passed on already
is not passed on again). Before any decision was seen, every replayed one
passes: a relist, as a Kubernetes reflector relists after its watch breaks.

What it resumes: each pod's state — a watcher never misses where a pod
ended up while it was away, as long as the server still holds the pod.
What it cannot: the decisions a pod went through meanwhile (only the
latest of each is kept), pods deleted meanwhile beyond the server's history
of deleted pods (4 MiB), and anything before a restart of a server that
keeps no state (the pods themselves are gone then).
"""

from __future__ import annotations

import dataclasses
import random

from berth_client.api.v1 import scheduler_pb2 as spb

__all__ = ["Backoff", "Resume"]

_Key = tuple[str, str, int, int, int, str]


def _key(d: spb.Decision) -> _Key:
    return (d.pod, d.uid, d.kind, d.timestamp_ms, d.attempts, d.node)


@dataclasses.dataclass(slots=True)
class Resume:
    """What a watch has passed on: the newest server timestamp, and the
    decisions passed on at that millisecond (several share one)."""

    newest_ms: int | None = None
    at_newest: set[_Key] = dataclasses.field(default_factory=set)
    #: True once the stream broke: decisions are then checked before they pass.
    resumed: bool = False
    #: The newest serial passed on (0: none, or a server without serials), and its epoch.
    serial: int = 0
    epoch: str = ""

    def since(self) -> int | None:
        """The serial to resume after, when there is one to resume from."""
        return self.serial if self.resumed and self.serial and self.epoch else None

    def relist(self) -> None:
        """The server cannot resume (OUT_OF_RANGE): take its replay next,
        passing on what is newer than the newest decision passed on (by the
        server's clock: after a restart that lost the state, all of it)."""
        self.serial, self.epoch = 0, ""
        self.resumed = True

    def admit(self, d: spb.Decision, epoch: str = "") -> bool:
        """Whether to pass ``d`` (of the server's ``epoch``) on; remembers it if so."""
        if d.serial:
            epoch = epoch or d.epoch
            if epoch == self.epoch and d.serial <= self.serial:
                return False  # already passed on
            self.serial, self.epoch = d.serial, epoch
        if (
            self.resumed
            and self.newest_ms is not None
            and (d.timestamp_ms < self.newest_ms or (d.timestamp_ms == self.newest_ms and _key(d) in self.at_newest))
        ):
            return False
        if self.newest_ms is None or d.timestamp_ms > self.newest_ms:
            self.newest_ms = d.timestamp_ms
            self.at_newest = set()
        if d.timestamp_ms == self.newest_ms:
            self.at_newest.add(_key(d))
        return True


@dataclasses.dataclass(slots=True)
class Backoff:
    """Exponential backoff with full jitter (gRPC's reconnect backoff shape)."""

    initial: float
    maximum: float
    multiplier: float
    failures: int = 0

    def next(self) -> float:
        """Seconds to wait before the next attempt."""
        ceiling = min(self.maximum, self.initial * self.multiplier**self.failures)
        self.failures += 1
        return random.uniform(0.5 * ceiling, ceiling)

    def reset(self) -> None:
        self.failures = 0
