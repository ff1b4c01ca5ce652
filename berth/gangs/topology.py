"""Topologies (the configuration's ``topologies:``) and the constraint a
gang's members put on them.

A topology is Kueue's ``Topology`` (kueue ``apis/kueue/v1beta2/topology_types.go``
at ff69552e): named ``levels``, each a node label, from the widest (a block, a
zone) to the narrowest (a rack, the host). A *domain* of a level is the set
of nodes that share that label's value (``rack=r3``).

A member asks, with Kueue's pod-template annotations (same file):

- ``kueue.x-k8s.io/podset-required-topology: <nodeLabel>``: every member in
  one domain of that level, or none placed;
- ``kueue.x-k8s.io/podset-preferred-topology: <nodeLabel>``: one domain of
  that level if one holds the gang, else of the next level up, else anywhere;
- ``kueue.x-k8s.io/podset-unconstrained-topology: "true"``: no constraint.

:class:`berth.plugins.topology_gang.TopologyGang` enforces them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence

import msgspec

from berth.gangs.model import InvalidGang

__all__ = [
    "PREFERRED_ANNOTATION",
    "REQUIRED_ANNOTATION",
    "UNCONSTRAINED_ANNOTATION",
    "Constraint",
    "TopologyLevelSpec",
    "TopologySpec",
    "constraint_of",
    "validate_topologies",
]

REQUIRED_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED_ANNOTATION = "kueue.x-k8s.io/podset-unconstrained-topology"

#: Kueue's TopologyLevel.nodeLabel pattern (topology_types.go), a qualified label key.
_NODE_LABEL = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
#: Kueue's limits: nodeLabel at most 316 characters, at most 16 levels.
_MAX_LABEL = 316
_MAX_LEVELS = 16
_HOSTNAME = "kubernetes.io/hostname"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class TopologyLevelSpec(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    #: The node label whose values name this level's domains.
    node_label: str


class TopologySpec(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """One topology: ``levels`` from the widest to the narrowest."""

    name: str
    levels: list[TopologyLevelSpec]

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(level.node_label for level in self.levels)


def validate_topologies(specs: Sequence[TopologySpec]) -> None:
    """Kueue's Topology validation; raises ValueError whose message starts
    with the field path inside the list (``[0].levels[1].nodeLabel: ...``)."""
    names: set[str] = set()
    for i, spec in enumerate(specs):
        if not _NAME.match(spec.name):
            raise ValueError(f"[{i}].name: {spec.name!r} is not a valid name (lower-case letters, digits and '-')")
        if spec.name in names:
            raise ValueError(f"[{i}].name: duplicate topology {spec.name!r}")
        names.add(spec.name)
        if not 1 <= len(spec.levels) <= _MAX_LEVELS:
            raise ValueError(f"[{i}].levels: must have between 1 and {_MAX_LEVELS} levels, got {len(spec.levels)}")
        seen: dict[str, int] = {}
        for j, level in enumerate(spec.levels):
            path = f"[{i}].levels[{j}].nodeLabel"
            label = level.node_label
            if not label or len(label) > _MAX_LABEL or not _NODE_LABEL.match(label):
                raise ValueError(f"{path}: {label!r} is not a valid node label key")
            if label in seen:
                raise ValueError(f"{path}: {label!r} is already level {seen[label]}: levels must be unique")
            seen[label] = j
            if label == _HOSTNAME and j != len(spec.levels) - 1:
                raise ValueError(f"{path}: {_HOSTNAME} can only be the lowest (last) level")


@dataclasses.dataclass(frozen=True, slots=True)
class Constraint:
    """What a member asks: ``levels`` are the node labels to try, in order
    (one for required, the preferred one and every wider one for preferred);
    ``required``: no domain, no placement (else: anywhere as a last resort)."""

    annotation: str
    level: str
    levels: tuple[str, ...]
    required: bool


def constraint_of(annotations: Mapping[str, str], topologies: Sequence[TopologySpec]) -> Constraint | None:
    """The member's constraint, None for none; raises InvalidGang naming the
    annotation when it names no configured level or asks two things at once."""
    required = annotations.get(REQUIRED_ANNOTATION)
    preferred = annotations.get(PREFERRED_ANNOTATION)
    if required is not None and preferred is not None:
        raise InvalidGang(f"{REQUIRED_ANNOTATION} and {PREFERRED_ANNOTATION} are both set: keep one")
    if required is None and preferred is None:
        return None  # unconstrained, with or without podset-unconstrained-topology
    annotation = REQUIRED_ANNOTATION if required is not None else PREFERRED_ANNOTATION
    label = required if required is not None else preferred
    assert label is not None
    for spec in topologies:
        labels = spec.labels
        if label in labels:
            j = labels.index(label)
            if required is not None:
                return Constraint(annotation, label, (label,), required=True)
            return Constraint(annotation, label, tuple(reversed(labels[: j + 1])), required=False)
    known = sorted({label for spec in topologies for label in spec.labels})
    raise InvalidGang(
        f"{annotation}: {label!r} is not a level of any configured topology (levels: {', '.join(known) or 'none'})"
    )
