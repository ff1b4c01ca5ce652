"""Topologies (the configuration's ``topologies:``, or one unnamed
``topology:``) and the constraint a gang puts on them, in every dialect.

A topology is Kueue's ``Topology`` (kueue ``apis/kueue/v1beta2/topology_types.go``
at ff69552e): named ``levels``, each a node label, from the widest (a block, a
zone) to the narrowest (a rack, the host). A *domain* of a level is the set
of nodes that share that label's value (``rack=r3``).

A member asks, with Kueue's pod-template annotations (same file):

- ``kueue.x-k8s.io/podset-required-topology: <nodeLabel>``: every member in
  one domain of that level, or none placed;
- ``kueue.x-k8s.io/podset-preferred-topology: <nodeLabel>``: one domain of
  that level if one holds the gang, else of the next level up, else anywhere;
- ``kueue.x-k8s.io/podset-unconstrained-topology: "true"``: no constraint;
- ``kueue.x-k8s.io/podset-slice-required-topology`` + ``podset-slice-size``:
  every ``slice-size`` members in one domain of the slice level.

KAI's, Volcano's, the Workload API's and Berth's own dialects map onto the
same :class:`Constraint` (:func:`constraint_of` cites each);
:class:`berth.plugins.topology_gang.TopologyGang` enforces it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import overload

import msgspec

from berth.cluster import hypernodes, topologies
from berth.cluster.model import NetworkTopologySpec as NetworkTopology
from berth.gangs.model import InvalidGang

__all__ = [
    "BERTH_PREFERRED_ANNOTATION",
    "BERTH_REQUIRED_ANNOTATION",
    "COMPLETION_INDEX_ANNOTATION",
    "HOSTNAME",
    "KAI_PREFERRED_ANNOTATION",
    "KAI_REQUIRED_ANNOTATION",
    "KAI_TOPOLOGY_ANNOTATION",
    "PREFERRED_ANNOTATION",
    "REQUIRED_ANNOTATION",
    "SLICE_REQUIRED_ANNOTATION",
    "SLICE_SIZE_ANNOTATION",
    "UNCONSTRAINED_ANNOTATION",
    "Constraint",
    "HyperNodeTopologySpec",
    "TopologyLevelSpec",
    "TopologySet",
    "TopologySpec",
    "UnnamedTopologySpec",
    "constraint_of",
    "from_hypernodes",
    "from_kueue",
    "validate_topologies",
    "volcano_constraint",
    "volcano_tiers",
    "workload_constraint",
]

REQUIRED_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED_ANNOTATION = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED_ANNOTATION = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE_ANNOTATION = "kueue.x-k8s.io/podset-slice-size"
#: KAI-Scheduler's job annotations (``docs/developer/designs/topology-awareness``;
#: ``pkg/podgrouper`` reads them into the PodGroup's TopologyConstraint).
KAI_REQUIRED_ANNOTATION = "kai.scheduler/topology-required-placement"
KAI_PREFERRED_ANNOTATION = "kai.scheduler/topology-preferred-placement"
KAI_TOPOLOGY_ANNOTATION = "kai.scheduler/topology"
#: Berth's own: the value is a level's node label.
BERTH_REQUIRED_ANNOTATION = "berth.dev/topology-required"
BERTH_PREFERRED_ANNOTATION = "berth.dev/topology-preferred"
#: batch/v1 Job's completion index: a slice member's rank.
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"

#: Kueue's TopologyLevel.nodeLabel pattern (topology_types.go), a qualified label key.
_NODE_LABEL = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
#: Kueue's limits: nodeLabel at most 316 characters, at most 16 levels.
_MAX_LABEL = 316
_MAX_LEVELS = 16
HOSTNAME = "kubernetes.io/hostname"
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


class HyperNodeTopologySpec(TopologySpec, kw_only=True):
    """The topology Volcano HyperNodes make (:func:`from_hypernodes`): levels
    ``topology.volcano.sh/tier-<N>``, highest tier first, then the host;
    ``tier_names``: their ``spec.tierName`` -> tier."""

    tier_names: dict[str, int] = {}


class UnnamedTopologySpec(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """``topology: {levels: [...]}``: one topology, named ``default``."""

    levels: list[TopologyLevelSpec]

    def named(self) -> TopologySpec:
        return TopologySpec(name="default", levels=list(self.levels))


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
            if label == HOSTNAME and j != len(spec.levels) - 1:
                raise ValueError(f"{path}: {HOSTNAME} can only be the lowest (last) level")


@dataclasses.dataclass(frozen=True, slots=True)
class Constraint:
    """What a gang asks, in every dialect's terms.

    - ``levels``: the node labels to try, narrowest first (Kueue required: the
      one level; Kueue preferred: that level then every wider one; KAI
      preferred+required: from the preferred level up to the required one;
      Volcano: tier 1 up to ``highestTierAllowed``).
    - ``required``: the last of ``levels`` must hold the whole gang, or none
      of it is placed; else the gang goes anywhere as a last resort.
    - ``slice_level``/``slice_size``: Kueue's slices — every ``slice_size``
      members (by completion index, else name) in one domain of
      ``slice_level``, every slice inside the chosen domain.
    - ``annotation``: the key or field that asked (for messages); ``level``:
      the level it named.
    """

    annotation: str
    level: str
    levels: tuple[str, ...]
    required: bool
    slice_level: str | None = None
    slice_size: int = 0


def _spec_with(label: str, topologies: Sequence[TopologySpec], where: str) -> TopologySpec:
    for spec in topologies:
        if label in spec.labels:
            return spec
    known = sorted({lv for spec in topologies for lv in spec.labels})
    raise InvalidGang(
        f"{where}: {label!r} is not a level of any configured topology (levels: {', '.join(known) or 'none'})"
    )


def _named(name: str, topologies: Sequence[TopologySpec], where: str) -> Sequence[TopologySpec]:
    """KAI's ``kai.scheduler/topology``: the one topology of that name ("": any)."""
    if not name:
        return topologies
    found = [t for t in topologies if t.name == name]
    if not found:
        raise InvalidGang(f"{where}: no topology named {name!r} (topologies: {', '.join(t.name for t in topologies)})")
    return found


def _up_from(spec: TopologySpec, narrow: str, wide: str | None) -> tuple[str, ...]:
    """``narrow`` and every wider level up to ``wide`` (None: the widest), narrowest first."""
    labels = spec.labels
    i = labels.index(narrow)
    j = labels.index(wide) if wide is not None else 0
    return tuple(reversed(labels[j : i + 1]))


def _pair(annotations: Mapping[str, str], required_key: str, preferred_key: str) -> tuple[str | None, str | None]:
    return annotations.get(required_key) or None, annotations.get(preferred_key) or None


def _from_required_preferred(
    required: str | None,
    preferred: str | None,
    topologies: Sequence[TopologySpec],
    *,
    required_key: str,
    preferred_key: str,
    both: str,
) -> Constraint | None:
    """``both``: "conflict" (Kueue: one of the two) or "range" (KAI: preferred
    within required, ``topology-required-placement`` being the widest level)."""
    if required is None and preferred is None:
        return None
    if required is not None and preferred is not None:
        if both == "conflict":
            raise InvalidGang(f"{required_key} and {preferred_key} are both set: keep one")
        spec = _spec_with(preferred, topologies, preferred_key)
        if required not in spec.labels:
            raise InvalidGang(
                f"{required_key}: {required!r} is not a level of topology {spec.name!r}, as {preferred!r} is"
            )
        if spec.labels.index(required) > spec.labels.index(preferred):
            raise InvalidGang(f"{preferred_key}: {preferred!r} is wider than the required level {required!r}")
        return Constraint(preferred_key, preferred, _up_from(spec, preferred, required), required=True)
    if required is not None:
        _spec_with(required, topologies, required_key)
        return Constraint(required_key, required, (required,), required=True)
    assert preferred is not None
    spec = _spec_with(preferred, topologies, preferred_key)
    return Constraint(preferred_key, preferred, _up_from(spec, preferred, None), required=False)


def _with_slices(
    base: Constraint | None, annotations: Mapping[str, str], topologies: Sequence[TopologySpec]
) -> Constraint | None:
    """Kueue's ``podset-slice-required-topology`` + ``podset-slice-size``
    (kueue ``apis/kueue/v1beta2/topology_types.go``; validated together by
    its webhook, ``pkg/controller/jobframework/tas_validation.go``: the slice
    level at or below the podset's level, a size > 0)."""
    level = annotations.get(SLICE_REQUIRED_ANNOTATION)
    size_text = annotations.get(SLICE_SIZE_ANNOTATION)
    if level is None and size_text is None:
        return base
    if level is None or size_text is None:
        missing = SLICE_SIZE_ANNOTATION if level is not None else SLICE_REQUIRED_ANNOTATION
        raise InvalidGang(
            f"{missing}: required with {SLICE_REQUIRED_ANNOTATION if level is None else SLICE_SIZE_ANNOTATION}"
        )
    if not size_text.isdigit() or int(size_text) < 1:
        raise InvalidGang(f"{SLICE_SIZE_ANNOTATION}: {size_text!r} must be an integer greater than 0")
    size = int(size_text)
    spec = _spec_with(level, topologies, SLICE_REQUIRED_ANNOTATION)
    if base is None:
        # Slices alone: each slice in one domain, the gang anywhere (Kueue
        # treats the podset as unconstrained at the top level).
        base = Constraint(SLICE_REQUIRED_ANNOTATION, level, (spec.labels[0],), required=False)
    else:
        widest = base.levels[-1] if base.required else base.levels[0]
        if widest not in spec.labels:
            raise InvalidGang(f"{SLICE_REQUIRED_ANNOTATION}: {level!r} is not in the topology of {base.level!r}")
        if spec.labels.index(level) < spec.labels.index(base.levels[0]):
            raise InvalidGang(
                f"{SLICE_REQUIRED_ANNOTATION}: {level!r} must be at or below the podset's level {base.levels[0]!r}"
            )
    return dataclasses.replace(base, slice_level=level, slice_size=size)


def volcano_tiers(spec: TopologySpec) -> tuple[str, ...]:
    """A label topology's levels as Volcano tiers, tier 1 first: Volcano's
    HyperNode tiers count up from the leaf switch (tier 1: the hypernodes
    whose members are nodes), so tier 1 is the narrowest level that is not
    the host (a host is a node, never a hypernode)."""
    return tuple(lv for lv in reversed(spec.labels) if lv != HOSTNAME)


def volcano_constraint(nt: NetworkTopology, topologies: Sequence[TopologySpec]) -> Constraint:
    """Volcano's PodGroup ``spec.networkTopology`` (volcano-sh/apis
    ``pkg/apis/scheduling/v1beta1/types.go`` NetworkTopologySpec): ``hard``
    (the default): every member within one domain of a tier ≤
    ``highestTierAllowed`` (default 1), lower tiers first; ``soft``: as low
    a tier as fits, else anywhere. Tiers count the first configured
    topology's levels from the narrowest non-host level up."""
    where = "spec.networkTopology"
    if not topologies:
        raise InvalidGang(f"{where}: no topology is configured")
    spec = next((t for t in topologies if isinstance(t, HyperNodeTopologySpec)), topologies[0])
    if isinstance(spec, HyperNodeTopologySpec):
        # HyperNodes read from the cluster: tier N is exactly the HyperNodes of tier N.
        by_tier = {t: lv for lv in spec.labels if (t := hypernodes.tier_of_label(lv)) is not None}
    else:
        by_tier = dict(enumerate(volcano_tiers(spec), start=1))
    if not by_tier:
        raise InvalidGang(f"{where}: topology {spec.name!r} has no level but the host, so no tier")
    mode = nt.mode or "hard"
    if mode not in ("hard", "soft"):
        raise InvalidGang(f"{where}.mode: {mode!r} must be hard or soft")
    highest = nt.highest_tier_allowed
    if highest is None and nt.highest_tier_name:
        # Volcano's session translateHighestTierNameToAllowed (pkg/scheduler/
        # framework/session.go, ed72c7c8): the name only counts without highestTierAllowed.
        if not isinstance(spec, HyperNodeTopologySpec):
            raise InvalidGang(
                f"{where}.highestTierName: tier names come from HyperNodes, and none are read "
                "(volcanoHyperNodes: true reads them); use highestTierAllowed"
            )
        names = spec.tier_names
        if nt.highest_tier_name not in names:
            known = ", ".join(f"{n} (tier {t})" for n, t in sorted(names.items())) or "none"
            raise InvalidGang(
                f"{where}.highestTierName: failed to find hypernode tier name {nt.highest_tier_name!r} "
                f"(tier names of the HyperNodes read: {known})"
            )
        highest = names[nt.highest_tier_name]
    if highest is None:
        highest = min(by_tier) if mode == "hard" else max(by_tier)
    allowed = [by_tier[t] for t in sorted(by_tier) if t <= highest]
    if not allowed or highest > max(by_tier):
        shown = f"{min(by_tier)}..{max(by_tier)}: {', '.join(by_tier[t] for t in sorted(by_tier))}"
        raise InvalidGang(f"{where}.highestTierAllowed: {highest} is not a tier ({shown})")
    tiers = tuple(allowed)
    if mode == "hard":
        return Constraint(f"{where} (hard)", tiers[-1], tiers, required=True)
    return Constraint(f"{where} (soft)", tiers[0], tiers, required=False)


def workload_constraint(keys: Sequence[str], topologies: Sequence[TopologySpec]) -> Constraint | None:
    """The Workload API's PodGroup ``spec.schedulingConstraints.topology[].key``
    (k8s.io/api v0.37.2 ``scheduling/v1alpha3/types.go`` TopologyConstraint:
    at most one; "all pods within the PodGroup must be colocated within the
    same domain instance")."""
    where = "spec.schedulingConstraints.topology"
    if not keys:
        return None
    if len(keys) > 1:
        raise InvalidGang(f"{where}: at most 1 item, got {len(keys)}")
    _spec_with(keys[0], topologies, f"{where}[0].key")
    return Constraint(f"{where}[0].key", keys[0], (keys[0],), required=True)


def constraint_of(
    annotations: Mapping[str, str],
    topologies: Sequence[TopologySpec],
    *,
    network_topology: NetworkTopology | None = None,
    workload_keys: Sequence[str] = (),
) -> Constraint | None:
    """The member's constraint, None for none; raises InvalidGang naming the
    annotation or field when it names no configured level, asks two things
    at once, or when two dialects ask different things.

    The dialects, each read as its anchor reads it: Berth's
    ``berth.dev/topology-required``/``-preferred``; Kueue's
    ``podset-required-topology``/``podset-preferred-topology`` (one of the
    two) and slices; KAI's ``kai.scheduler/topology-required-placement``/
    ``-preferred-placement`` within ``kai.scheduler/topology`` (KAI
    ``pkg/podgrouper`` copies them to the PodGroup's TopologyConstraint:
    preferred within required); Volcano's PodGroup ``networkTopology``; the
    Workload API's ``schedulingConstraints.topology``."""
    found: list[Constraint] = []
    berth = _from_required_preferred(
        *_pair(annotations, BERTH_REQUIRED_ANNOTATION, BERTH_PREFERRED_ANNOTATION),
        topologies,
        required_key=BERTH_REQUIRED_ANNOTATION,
        preferred_key=BERTH_PREFERRED_ANNOTATION,
        both="conflict",
    )
    kueue = _from_required_preferred(
        annotations.get(REQUIRED_ANNOTATION),
        annotations.get(PREFERRED_ANNOTATION),
        topologies,
        required_key=REQUIRED_ANNOTATION,
        preferred_key=PREFERRED_ANNOTATION,
        both="conflict",
    )
    kueue = _with_slices(kueue, annotations, topologies)
    kai_topologies = topologies
    if KAI_REQUIRED_ANNOTATION in annotations or KAI_PREFERRED_ANNOTATION in annotations:
        kai_topologies = _named(annotations.get(KAI_TOPOLOGY_ANNOTATION, ""), topologies, KAI_TOPOLOGY_ANNOTATION)
    kai = _from_required_preferred(
        *_pair(annotations, KAI_REQUIRED_ANNOTATION, KAI_PREFERRED_ANNOTATION),
        kai_topologies,
        required_key=KAI_REQUIRED_ANNOTATION,
        preferred_key=KAI_PREFERRED_ANNOTATION,
        both="range",
    )
    volcano = volcano_constraint(network_topology, topologies) if network_topology is not None else None
    workload = workload_constraint(workload_keys, topologies)
    found = [c for c in (berth, kueue, kai, volcano, workload) if c is not None]
    if not found:
        return None  # unconstrained, with or without podset-unconstrained-topology
    first = found[0]
    for other in found[1:]:
        if (other.levels, other.required, other.slice_level) != (first.levels, first.required, first.slice_level):
            raise InvalidGang(f"{first.annotation} and {other.annotation} ask for different topologies: keep one")
    return first


# ---------------------------------------------------------------- topologies from the cluster


def from_kueue(obj: topologies.KueueTopology) -> TopologySpec:
    """The Topology object as a :class:`TopologySpec`; raises ValueError with
    Kueue's validation message (``Topology rack: levels[1].nodeLabel: ...``)."""
    levels = [TopologyLevelSpec(node_label=lv.node_label) for lv in obj.spec.levels]
    spec = TopologySpec(name=obj.metadata.name, levels=levels)
    try:
        validate_topologies([spec])
    except ValueError as e:
        raise ValueError(f"Topology {obj.metadata.name}: {str(e).removeprefix('[0].')}") from None
    return spec


def from_hypernodes(tiers: Sequence[int], tier_names: Mapping[str, int]) -> HyperNodeTopologySpec:
    """The topology of the HyperNodes' tiers (:mod:`berth.cluster.hypernodes`):
    highest tier first, tier 1 last but the host."""
    levels = [TopologyLevelSpec(node_label=hypernodes.tier_label(t)) for t in sorted(tiers, reverse=True)]
    return HyperNodeTopologySpec(
        name=hypernodes.TOPOLOGY_NAME,
        levels=[*levels, TopologyLevelSpec(node_label=HOSTNAME)],
        tier_names=dict(tier_names),
    )


class TopologySet(Sequence[TopologySpec]):
    """The topologies gangs may ask for: the configuration's, then Kueue
    ``Topology`` objects read from the cluster (a name the configuration
    already uses stays the configuration's). Shared by every profile's
    TopologyGang; changes as the objects do."""

    def __init__(self, configured: Sequence[TopologySpec] = ()) -> None:
        self._configured = tuple(configured)
        self._objects: dict[str, TopologySpec] = {}
        self._all: tuple[TopologySpec, ...] = self._configured

    def put(self, spec: TopologySpec) -> bool:
        """Add or replace a cluster topology; False when the configuration owns its name."""
        if any(t.name == spec.name for t in self._configured):
            return False
        self._objects[spec.name] = spec
        self._rebuild()
        return True

    def remove(self, name: str) -> bool:
        if self._objects.pop(name, None) is None:
            return False
        self._rebuild()
        return True

    def _rebuild(self) -> None:
        self._all = (*self._configured, *(self._objects[n] for n in sorted(self._objects)))

    @overload
    def __getitem__(self, i: int) -> TopologySpec: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[TopologySpec]: ...
    def __getitem__(self, i: int | slice) -> TopologySpec | Sequence[TopologySpec]:
        return self._all[i]

    def __len__(self) -> int:
        return len(self._all)
