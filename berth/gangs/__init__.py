"""Gangs, whatever dialect a job framework writes them in: one model
(:mod:`.model`), one registry of dialects (:mod:`.sources`), one index of who
is in which gang (:mod:`.index`). See docs/batch-on-kubernetes.md."""

from __future__ import annotations

from berth.gangs.index import GangIndex, validate_sources
from berth.gangs.model import Gang, GangKey, InvalidGang, Membership, PhaseCounts
from berth.gangs.sources import SOURCES, GangContext, GangSource

__all__ = [
    "SOURCES",
    "Gang",
    "GangContext",
    "GangIndex",
    "GangKey",
    "GangSource",
    "InvalidGang",
    "Membership",
    "PhaseCounts",
    "validate_sources",
]
