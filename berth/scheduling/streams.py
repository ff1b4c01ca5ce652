"""How many decision streams are open, per caller and in total.

Every open stream costs the event loop work per decision (filtering it for
the caller, writing it), and a stream is cheap to open: issue 28 opened
2000 of the dashboard's without a credential and binding 300 pods went from
0.35 s to 19.9 s. The API server bounds the same (API Priority and
Fairness counts a watch against its flow's seats, and
``--max-requests-inflight`` in total); Berth counts streams per caller (its
authenticated user, else its address) and in total, and refuses the one
too many with a clear ResourceExhausted instead of slowing everyone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from berth.errors import ResourceExhausted

__all__ = ["MAX_STREAMS", "MAX_STREAMS_PER_CALLER", "StreamBudget"]

#: Decision streams one caller may hold open at once (a dashboard tab holds one).
MAX_STREAMS_PER_CALLER = 16
#: Decision streams open at once, every caller together.
MAX_STREAMS = 512


class StreamBudget:
    """Counts open streams per caller; :meth:`open` refuses past the bounds."""

    def __init__(self, per_caller: int = MAX_STREAMS_PER_CALLER, total: int = MAX_STREAMS) -> None:
        self.per_caller = per_caller
        self.total = total
        self.open_by: dict[str, int] = {}

    @property
    def open_count(self) -> int:
        return sum(self.open_by.values())

    @contextlib.contextmanager
    def open(self, caller: str) -> Iterator[None]:
        """Hold one stream slot for ``caller`` while the block runs."""
        mine = self.open_by.get(caller, 0)
        if mine >= self.per_caller:
            raise ResourceExhausted(
                f"too many decision streams: {caller} has {mine} open (at most {self.per_caller} per caller); "
                "close one, or share one stream"
            )
        if self.open_count >= self.total:
            raise ResourceExhausted(f"too many decision streams: {self.total} open (the server's bound); retry later")
        self.open_by[caller] = mine + 1
        try:
            yield
        finally:
            left = self.open_by[caller] - 1
            if left:
                self.open_by[caller] = left
            else:
                del self.open_by[caller]
