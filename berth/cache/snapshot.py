"""What one scheduling cycle reads: a copy of the cache's live table in which
only the rows whose generation moved since the last cycle are copied again
(``Cache.UpdateSnapshot`` in kube-scheduler's ``backend/cache/cache.go``)."""

from __future__ import annotations

import numpy as np

from berth.cache.table import NodeTable

__all__ = ["Snapshot"]


class Snapshot(NodeTable):
    """What one scheduling cycle sees: a copy-on-generation view of the cache."""

    def sync_from(self, live: NodeTable) -> int:
        """Copy the rows that changed in ``live`` since the last sync; returns how many."""
        self.row_space = live.row_space
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
        n = live.size
        if len(self.infos) < n:
            self.infos.extend([None] * (n - len(self.infos)))
        changed = np.flatnonzero(live.gen[:n] != self.gen[:n])
        if changed.size:
            self.alloc[changed] = live.alloc[changed]
            self.req[changed] = live.req[changed]
            self.req_nz[changed] = live.req_nz[changed]
            self.alive[changed] = live.alive[changed]
            self.unschedulable[changed] = live.unschedulable[changed]
            self.taint_group[changed] = live.taint_group[changed]
            self.gen[changed] = live.gen[changed]
            for i in changed.tolist():
                src = live.infos[i]
                self.infos[i] = src.clone() if src is not None else None
        self.size = n
        if self.shape_version != live.shape_version:
            self.index = dict(live.index)
            self.taint_sets = list(live.taint_sets)
            self.shape_version = live.shape_version
        return int(changed.size)
