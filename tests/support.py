"""Shorthands of Berth's own plugin tests over :mod:`berth.testing`."""

from __future__ import annotations

from collections.abc import Iterable

from berth.cache.table import NodeTable
from berth.cluster import model
from berth.framework.handle import Handle
from berth.testing import Cluster

__all__ = ["cached", "table"]


def table(nodes: Iterable[model.Node], pods: Iterable[model.Pod] = ()) -> NodeTable:
    """A snapshot holding ``nodes`` and the bound ``pods`` (spec.nodeName set)."""
    return Cluster(nodes, pods).snapshot


def cached(nodes: Iterable[model.Node], pods: Iterable[model.Pod] = ()) -> tuple[NodeTable, Handle]:
    """A snapshot of a live cache holding ``nodes`` and bound ``pods``, and the
    Handle on that cache (so plugins use the cache's pod index)."""
    c = Cluster(nodes, pods)
    return c.snapshot, c.handle()
