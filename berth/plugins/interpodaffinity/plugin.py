"""InterPodAffinity: required and preferred pod (anti-)affinity.

Mirrors kube-scheduler v1.37.2
``pkg/scheduler/framework/plugins/interpodaffinity/plugin.go``: the plugin
class (its filtering half from :mod:`~berth.plugins.interpodaffinity.filtering`,
``filtering.go``; its scoring half from
:mod:`~berth.plugins.interpodaffinity.scoring`, ``scoring.go``; the terms
both match, ``framework.AffinityTerm``, in
:mod:`~berth.plugins.interpodaffinity.terms`), its arguments
(``InterPodAffinityArgs``: ``hardPodAffinityWeight`` in [0, 100],
``ignorePreferredTermsOfExistingPods``) and the cluster events that may make
a pod it rejected schedulable. Pods are found through the cache's pod index
(:mod:`berth.cache.podindex`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import msgspec

from berth import features
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.plugins.interpodaffinity.filtering import (
    ERR_REASON_AFFINITY,
    ERR_REASON_ANTI_AFFINITY,
    ERR_REASON_EXISTING_ANTI_AFFINITY,
    Filtering,
)
from berth.plugins.interpodaffinity.scoring import Scoring

__all__ = ["InterPodAffinity", "InterPodAffinityArgs"]


class InterPodAffinityArgs(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False

    def validate(self) -> None:
        if not 0 <= self.hard_pod_affinity_weight <= 100:
            raise ValueError(
                f"hardPodAffinityWeight: Invalid value: {self.hard_pod_affinity_weight}: not in valid range [0, 100]"
            )


class InterPodAffinity(Filtering, Scoring):
    NAME: ClassVar[str] = "InterPodAffinity"
    Args: ClassVar[type[InterPodAffinityArgs]] = InterPodAffinityArgs

    def __init__(self, args: InterPodAffinityArgs | None = None, handle: Handle | None = None) -> None:
        self.args = args or InterPodAffinityArgs()
        self.handle = handle
        version = handle.features.version if handle is not None else features.NEWEST
        # plugin.go: mergeAffinityTermNamespacesIfNotEmpty takes the term by
        # pointer from v1.37.0, by value in v1.35.4 and v1.36.3 (terms.py).
        self.merge_keeps_selector = version < features.KubeVersion(1, 37)
        self._anti_index = None
        self._statuses = [
            fw.Status.unresolvable(ERR_REASON_AFFINITY, plugin=self.NAME),
            fw.Status.unschedulable(ERR_REASON_ANTI_AFFINITY, plugin=self.NAME),
            fw.Status.unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY, plugin=self.NAME),
        ]

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        # No Namespace event, as upstream (plugin.go's EventsToRegister: Pod
        # and Node only): a pod rejected over its namespace's labels is retried
        # when a pod or node event brings it back, or after
        # podMaxInUnschedulablePodsDuration (the queue's flush).
        return (
            fw.ClusterEvent("AssignedPod", fw.ActionType.ALL),
            fw.ClusterEvent("Node", fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_LABEL),
        )
