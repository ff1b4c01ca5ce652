"""kube-scheduler's PodTopologySpread plugin: spread matching pods evenly over topology domains.

Mirrors kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/podtopologyspread``
file by file: :mod:`~berth.plugins.podtopologyspread.plugin` (``plugin.go``: the
class, its arguments, its events), :mod:`~berth.plugins.podtopologyspread.common`
(``common.go``), :mod:`~berth.plugins.podtopologyspread.filtering`
(``filtering.go``) and :mod:`~berth.plugins.podtopologyspread.scoring`
(``scoring.go``). This package exports the plugin class, its arguments and
Filter's failure reasons.
"""

from berth.plugins.podtopologyspread.filtering import ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH
from berth.plugins.podtopologyspread.plugin import PodTopologySpread, PodTopologySpreadArgs

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "PodTopologySpread",
    "PodTopologySpreadArgs",
]
