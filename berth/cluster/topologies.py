"""Kueue's ``Topology`` objects as Berth reads them (kueue
``apis/kueue/v1beta2/topology_types.go``; v1beta1 has the same
``spec.levels[].nodeLabel``): the wire shape only. Their levels become
topologies gangs may ask for in :mod:`berth.gangs.topology`."""

from __future__ import annotations

import msgspec

from berth.cluster.model import ObjectMeta

__all__ = ["KIND", "VERSIONS", "KueueTopology", "KueueTopologyLevel", "KueueTopologySpec"]

KIND = "Topology"
#: The versions Berth reads, newest first.
VERSIONS = ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1")


class KueueTopologyLevel(msgspec.Struct, kw_only=True, rename="camel"):
    node_label: str = ""


class KueueTopologySpec(msgspec.Struct, kw_only=True, rename="camel"):
    levels: list[KueueTopologyLevel] = []


class KueueTopology(msgspec.Struct, kw_only=True, rename="camel"):
    """One cluster-scoped Topology object."""

    api_version: str = VERSIONS[0]
    kind: str = KIND
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: KueueTopologySpec = msgspec.field(default_factory=KueueTopologySpec)
