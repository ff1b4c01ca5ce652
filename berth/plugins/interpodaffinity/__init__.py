"""kube-scheduler's InterPodAffinity plugin: required and preferred pod (anti-)affinity.

Mirrors kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/interpodaffinity``
file by file: :mod:`~berth.plugins.interpodaffinity.plugin` (``plugin.go``: the
class, its arguments, its events), :mod:`~berth.plugins.interpodaffinity.filtering`
(``filtering.go``), :mod:`~berth.plugins.interpodaffinity.scoring`
(``scoring.go``), with the affinity terms (``framework.AffinityTerm``) in
:mod:`~berth.plugins.interpodaffinity.terms`. This package exports the plugin
class, its arguments and Filter's failure reasons.
"""

from berth.plugins.interpodaffinity.filtering import (
    ERR_REASON_AFFINITY,
    ERR_REASON_ANTI_AFFINITY,
    ERR_REASON_EXISTING_ANTI_AFFINITY,
)
from berth.plugins.interpodaffinity.plugin import InterPodAffinity, InterPodAffinityArgs

__all__ = [
    "ERR_REASON_AFFINITY",
    "ERR_REASON_ANTI_AFFINITY",
    "ERR_REASON_EXISTING_ANTI_AFFINITY",
    "InterPodAffinity",
    "InterPodAffinityArgs",
]
