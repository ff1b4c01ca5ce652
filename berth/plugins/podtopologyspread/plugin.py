"""PodTopologySpread: spread matching pods evenly over topology domains.

Mirrors kube-scheduler v1.37.2
``pkg/scheduler/framework/plugins/podtopologyspread/plugin.go``: the plugin
class (its filtering half from :mod:`~berth.plugins.podtopologyspread.filtering`,
``filtering.go``; its scoring half from
:mod:`~berth.plugins.podtopologyspread.scoring`, ``scoring.go``; what both
share in :mod:`~berth.plugins.podtopologyspread.common`, ``common.go``), its
arguments (``PodTopologySpreadArgs``) and the cluster events that may make a
pod it rejected schedulable. A pod with no ``topologySpreadConstraints``
gets the default constraints (``defaultingType: System``:
:data:`SYSTEM_DEFAULT_CONSTRAINTS`; ``List``: ``defaultConstraints``), each
selecting the pods of the Services and the controller that select it (the
Handle's ``workloads`` lister; :func:`~berth.plugins.podtopologyspread.common.default_selector`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import msgspec

from berth import errors, features
from berth.cache.table import HOSTNAME_LABEL, ZONE_LABEL
from berth.cluster import model, validation
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.plugins.podtopologyspread.common import DO_NOT_SCHEDULE_WHEN, SCHEDULE_ANYWAY
from berth.plugins.podtopologyspread.filtering import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    Filtering,
)
from berth.plugins.podtopologyspread.scoring import Scoring

__all__ = [
    "LIST_DEFAULTING",
    "SYSTEM_DEFAULTING",
    "SYSTEM_DEFAULT_CONSTRAINTS",
    "PodTopologySpread",
    "PodTopologySpreadArgs",
]

#: config.PodTopologySpreadConstraintsDefaulting.
SYSTEM_DEFAULTING, LIST_DEFAULTING = "System", "List"
_ACTIONS = (DO_NOT_SCHEDULE_WHEN, SCHEDULE_ANYWAY)  # sorted, as sets.List prints them

#: plugin.go systemDefaultConstraints: soft spreading over hostnames and zones.
SYSTEM_DEFAULT_CONSTRAINTS: tuple[model.TopologySpreadConstraint, ...] = (
    model.TopologySpreadConstraint(max_skew=3, topology_key=HOSTNAME_LABEL, when_unsatisfiable=SCHEDULE_ANYWAY),
    model.TopologySpreadConstraint(max_skew=5, topology_key=ZONE_LABEL, when_unsatisfiable=SCHEDULE_ANYWAY),
)


class PodTopologySpreadArgs(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """config.PodTopologySpreadArgs: the constraints applied to pods that have none.

    ``defaultingType`` is System (the default, as ``SetDefaults_PodTopologySpreadArgs``
    in ``apis/config/v1/defaults.go``: :data:`SYSTEM_DEFAULT_CONSTRAINTS`) or
    List (``defaultConstraints``, none by default). :meth:`validate` is
    ``ValidatePodTopologySpreadArgs`` (``apis/config/validation/validation_pluginargs.go``).
    """

    default_constraints: list[model.TopologySpreadConstraint] = []
    defaulting_type: str = SYSTEM_DEFAULTING

    def validate(self) -> None:
        """Raise InvalidArgument naming every invalid field, as upstream's aggregate does."""
        errs: list[str] = []
        if self.defaulting_type not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
            errs.append(
                str(
                    validation.not_supported(
                        "defaultingType", self.defaulting_type, (SYSTEM_DEFAULTING, LIST_DEFAULTING)
                    )
                )
            )
        elif self.defaulting_type == SYSTEM_DEFAULTING and self.default_constraints:
            errs.append(
                str(
                    validation.invalid("defaultingType", self.defaulting_type, "when .defaultConstraints are not empty")
                )
            )
        for i, c in enumerate(self.default_constraints):
            p = f"defaultConstraints[{i}]"
            if c.max_skew <= 0:
                errs.append(str(validation.invalid(f"{p}.maxSkew", c.max_skew, "not in valid range (0, inf)")))
            if not c.topology_key:
                errs.append(str(validation.required(f"{p}.topologyKey", "can not be empty")))
            else:
                errs.extend(
                    str(validation.invalid(f"{p}.topologyKey", c.topology_key, m))
                    for m in validation.is_qualified_name(c.topology_key)
                )
            if not c.when_unsatisfiable:
                errs.append(str(validation.required(f"{p}.whenUnsatisfiable", "can not be empty")))
            elif c.when_unsatisfiable not in _ACTIONS:
                errs.append(str(validation.not_supported(f"{p}.whenUnsatisfiable", c.when_unsatisfiable, _ACTIONS)))
            if c.label_selector is not None:
                errs.append(
                    str(
                        validation.forbidden(
                            f"{p}.labelSelector", "constraint must not define a selector, as they deduced for each pod"
                        )
                    )
                )
            # validateConstraintNotRepeat: one constraint per (topologyKey, whenUnsatisfiable).
            if any(
                (o.topology_key, o.when_unsatisfiable) == (c.topology_key, c.when_unsatisfiable)
                for o in self.default_constraints[:i]
            ):
                errs.append(str(validation.duplicate(p, f"{{{c.topology_key}, {c.when_unsatisfiable}}}")))
        if errs:
            # utilerrors.Aggregate: one error as is, several as "[a, b]".
            unique = list(dict.fromkeys(errs))
            raise errors.InvalidArgument(
                errors.bounded(unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]")
            )


class PodTopologySpread(Filtering, Scoring):
    NAME: ClassVar[str] = "PodTopologySpread"
    Args: ClassVar[type[PodTopologySpreadArgs]] = PodTopologySpreadArgs

    def __init__(self, args: PodTopologySpreadArgs | None = None, handle: Handle | None = None) -> None:
        self.args = args or PodTopologySpreadArgs()
        self.handle = handle
        feats = handle.features if handle is not None else features.Features.newest()
        self.comparison_operators = feats.taint_toleration_comparison_operators
        self.system_defaulted = self.args.defaulting_type == SYSTEM_DEFAULTING
        self.default_constraints = (
            SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted else tuple(self.args.default_constraints)
        )
        self._label_status = fw.Status.unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH, plugin=self.NAME)
        self._skew_status = fw.Status.unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH, plugin=self.NAME)

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        return (
            fw.ClusterEvent("AssignedPod", fw.ActionType.ALL),
            fw.ClusterEvent(
                "Node",
                fw.ActionType.ADD
                | fw.ActionType.DELETE
                | fw.ActionType.UPDATE_NODE_LABEL
                | fw.ActionType.UPDATE_NODE_TAINT,
            ),
            fw.ClusterEvent("Pod", fw.ActionType.UPDATE_POD_LABEL),
        )
