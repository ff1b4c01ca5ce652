"""What one scheduling cycle reads: a copy of the cache's live table in which
only the rows whose generation moved since the last cycle are copied again
(``Cache.UpdateSnapshot`` in kube-scheduler's ``backend/cache/cache.go``).

Finding those rows costs what changed, not the cluster's size: the live
table keeps its rows ordered by generation (``NodeTable.recent``), and a
snapshot walks that order from the newest row back to the first one whose
generation it has already seen — as ``UpdateSnapshot`` walks its
generation-ordered ``headNode`` list and stops at the first node not newer
than the snapshot's generation. A snapshot meeting a table for the first
time, or one whose shape changed (capacity, resource columns), compares every
row's generation instead.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from berth.cache.table import NodeTable

__all__ = ["Snapshot"]

#: Up to this many changed rows are copied one by one (see sync_from).
_FEW = 16


class Snapshot(NodeTable):
    """What one scheduling cycle sees: a copy-on-generation view of the cache."""

    #: The table this snapshot last synced from, and its generation then:
    #: the rows stamped after it are the ones to copy.
    _source: NodeTable | None = None
    _source_generation: int = -1

    def sync_from(self, live: NodeTable) -> int:
        """Copy the rows that changed in ``live`` since the last sync; returns how many."""
        self.row_space = live.row_space
        self.derived = live.derived
        incremental = self._source is live
        if live.columns.names != self.columns.names:
            self.columns = live.columns.copy()
            self.alloc = np.zeros((0, len(self.columns)), dtype=np.int64)
            self.req = np.zeros((0, len(self.columns)), dtype=np.int64)
            self.req_nz = np.zeros((0, len(self.columns)), dtype=np.int64)
            self.gen = np.zeros(0, dtype=np.int64)
        cap = len(live.alive)
        if self.alloc.shape[0] != cap or self.alloc.shape[1] != live.alloc.shape[1]:
            self.alloc = live.alloc.copy()
            self.req = live.req.copy()
            self.req_nz = live.req_nz.copy()
            self.alive = live.alive.copy()
            self.unschedulable = live.unschedulable.copy()
            self.taint_group = live.taint_group.copy()
            self.gen = np.full(cap, -1, dtype=np.int64)
            self.infos = [None] * live.size
            incremental = False
        n = live.size
        old_size = self.size
        if len(self.infos) < n:
            self.infos.extend([None] * (n - len(self.infos)))
        changed = (
            self._stamped_since(live, old_size)
            if incremental
            else np.flatnonzero(live.gen[:n] != self.gen[:n]).tolist()
        )
        if len(changed) <= _FEW:
            # A cycle usually finds a row or two: plain indexing, several
            # times cheaper per row than fancy indexing's fixed cost.
            pairs = self._arrays(live)
            for i in changed:
                for mine, theirs in pairs:
                    mine[i] = theirs[i]
        else:
            at = np.asarray(changed, dtype=np.int64)
            for mine, theirs in self._arrays(live):
                mine[at] = theirs[at]
        for i in changed:
            src = live.infos[i]
            self.infos[i] = src.clone() if src is not None else None
        self.size = n
        if self.shape_version != live.shape_version:
            self.index = dict(live.index)
            self.taint_sets = list(live.taint_sets)
            self.shape_version = live.shape_version
        self._source = live
        self._source_generation = live.generation
        return len(changed)

    def _arrays(self, live: NodeTable) -> list[tuple[npt.NDArray[np.generic], npt.NDArray[np.generic]]]:
        """(this snapshot's, the live table's) per-row arrays, pairwise."""
        return [
            (self.alloc, live.alloc),
            (self.req, live.req),
            (self.req_nz, live.req_nz),
            (self.alive, live.alive),
            (self.unschedulable, live.unschedulable),
            (self.taint_group, live.taint_group),
            (self.gen, live.gen),
        ]

    def _stamped_since(self, live: NodeTable, old_size: int) -> list[int]:
        """The rows of ``live`` stamped after the last sync (newest first),
        plus rows added since then that were never stamped (a row is
        created before its first change, which may be refused): the same
        rows the full comparison of generations finds."""
        since = self._source_generation
        rows: list[int] = []
        for row, generation in reversed(live.recent.items()):
            if generation <= since:
                break
            rows.append(row)
        if live.size > old_size:
            seen = set(rows)
            rows.extend(r for r in range(old_size, live.size) if r not in seen and live.gen[r] != self.gen[r])
        return rows
