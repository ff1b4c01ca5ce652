"""InterPodAffinity's scoring: PreScore, Score and NormalizeScore.

Mirrors kube-scheduler v1.37.2
``pkg/scheduler/framework/plugins/interpodaffinity/scoring.go``. PreScore
sums per (topologyKey, value): +weight for each existing pod matching a
preferred affinity term of the incoming pod, -weight for anti-affinity; and
the existing pods' own terms the incoming pod matches (required affinity x
``hardPodAffinityWeight``, preferred ± weight) unless
``ignorePreferredTermsOfExistingPods``. The incoming pod's preferred terms
are merged with the namespaces their ``namespaceSelector`` selects; existing
pods' terms are judged with the labels of the incoming pod's namespace
(``processExistingPod``). Score adds up a node's domains; NormalizeScore:
min-max to 0..100.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.framework import interface as fw
from berth.plugins.interpodaffinity.terms import AffinityPods, terms_of

if TYPE_CHECKING:
    from berth.plugins.interpodaffinity.plugin import InterPodAffinityArgs

__all__ = ["Scoring"]

IntArray = npt.NDArray[np.int64]

#: A domain's sum of int32 weights stays far below this unless ~500 000
#: pod-term pairs of maximal weight meet; bounding it keeps a node's sum over
#: thousands of topology keys, and max - min in NormalizeScore, in int64.
_DOMAIN_LIMIT = 2**50


@dataclasses.dataclass(slots=True)
class _PreScoreState:
    scores: dict[str, dict[str, int]]


PRE_SCORE_KEY: fw.StateKey[_PreScoreState] = fw.StateKey("PreScoreInterPodAffinity")


def _node_value(nodes: NodeTable, row: int, key: str) -> str | None:
    info = nodes.infos[row]
    if info is None or info.node is None:
        return None
    return info.node.metadata.labels.get(key)


class Scoring(AffinityPods):
    """InterPodAffinity's PreScore, Score and NormalizeScore (scoring.go's methods)."""

    args: InterPodAffinityArgs

    def pre_score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.Status:
        terms = terms_of(pod)
        has_constraints = terms.has_preferred
        if self.args.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return fw.Status.skip()
        terms = terms.merged(
            self._namespaces(), required=False, preferred=True, keeps_selector=self.merge_keeps_selector
        )
        ns_labels = self._ns_labels(pod)
        scores: dict[str, dict[str, int]] = {}

        def add(key: str, row: int, amount: int) -> None:
            v = _node_value(nodes, row, key)
            if v is not None:
                per = scores.setdefault(key, {})
                per[v] = per.get(v, 0) + amount

        # The incoming pod's preferred terms against existing pods.
        for sign, group in ((1, terms.preferred_affinity), (-1, terms.preferred_anti_affinity)):
            for t in group:
                for _other, row in self._matching(nodes, t):
                    add(t.topology_key, row, sign * t.weight)
        # Existing pods' terms against the incoming pod.
        if not self.args.ignore_preferred_terms_of_existing_pods:
            hard = self.args.hard_pod_affinity_weight
            for other, row in self._pods_with(nodes, "scoring"):
                ot = terms_of(other)
                if hard > 0:
                    for t in ot.required_affinity:
                        if t.matches(pod, ns_labels):
                            add(t.topology_key, row, hard)
                for t in ot.preferred_affinity:
                    if t.matches(pod, ns_labels):
                        add(t.topology_key, row, t.weight)
                for t in ot.preferred_anti_affinity:
                    if t.matches(pod, ns_labels):
                        add(t.topology_key, row, -t.weight)
        if not scores:
            return fw.Status.skip()
        state.write(PRE_SCORE_KEY, _PreScoreState(scores))
        return fw.SUCCESS

    def score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> IntArray:
        s = state.get(PRE_SCORE_KEY)
        out = np.zeros(len(rows), dtype=np.int64)
        if s is None:
            return out
        for key, per_value in s.scores.items():
            col = nodes.label_column(key)
            per_code = np.asarray(
                [min(max(per_value.get(v, 0), -_DOMAIN_LIMIT), _DOMAIN_LIMIT) for v in col.values] + [0],
                dtype=np.int64,
            )
            out += per_code[col.codes[rows]]
        return out

    def normalize_score(self, state: fw.CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        s = state.get(PRE_SCORE_KEY)
        if s is None or not s.scores or len(scores) == 0:
            return scores
        lo, hi = int(scores.min()), int(scores.max())
        if hi - lo <= 0:
            return np.zeros(len(scores), dtype=np.int64)
        # int64(float64(MaxNodeScore) * (float64(s - min) / float64(max - min))): truncation.
        out: IntArray = (fw.MAX_NODE_SCORE * ((scores - lo) / (hi - lo))).astype(np.int64)
        return out
