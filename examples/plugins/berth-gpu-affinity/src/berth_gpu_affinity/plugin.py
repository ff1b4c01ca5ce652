"""GpuModelAffinity: a pod asks for a GPU model by annotation; only nodes of
that model take it, and among them the ones with the most free GPUs win.

A pod annotated ``gpu.berth.dev/model: a100`` (or ``a100,h100``: any of
these) fits only nodes labelled ``gpu.berth.dev/model`` with one of those
values. Pods without the annotation are not filtered (PreFilter answers
Skip). Pods that request the GPU resource (``nvidia.com/gpu``) are scored by
the GPUs still free on each feasible node.

Extension points: PreFilter, Filter, PreScore, Score (with NormalizeScore),
and EnqueueExtensions. Filter and Score work on the whole NodeTable at once:
a label column and the allocatable/requested arrays, no loop over nodes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar, Literal

import msgspec
import numpy as np
import numpy.typing as npt

from berth.framework import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    CycleState,
    Handle,
    NodeTable,
    NodeVerdicts,
    PodInfo,
    PreFilterResult,
    StateKey,
    Status,
)

__all__ = ["DEFAULT_KEY", "ERR_REASON", "GpuModelAffinity", "GpuModelAffinityArgs"]

IntArray = npt.NDArray[np.int64]

#: The pod annotation and the node label this plugin reads by default.
DEFAULT_KEY = "gpu.berth.dev/model"
ERR_REASON = "node(s) didn't have the requested GPU model"

# A Kubernetes qualified name: an optional DNS-subdomain prefix and "/", then
# a name of at most 63 alphanumerics, "-", "_" or "." (alphanumeric at both ends).
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_QUALIFIED = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}$")


class GpuModelAffinityArgs(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """``pluginConfig`` args of GpuModelAffinity (every field optional)."""

    #: The node label that names a node's GPU model.
    label_key: str = DEFAULT_KEY
    #: The pod annotation listing the acceptable models, comma-separated.
    annotation_key: str = DEFAULT_KEY
    #: The extended resource counted as GPUs by Score.
    resource_name: str = "nvidia.com/gpu"
    #: MostFree spreads GPU pods (the node with the most free GPUs scores
    #: 100); LeastFree packs them (the fullest node that still fits wins).
    strategy: Literal["MostFree", "LeastFree"] = "MostFree"

    def validate(self) -> None:
        """Called by Berth after decoding; a ValueError names the bad field."""
        for field, value in (
            ("labelKey", self.label_key),
            ("annotationKey", self.annotation_key),
            ("resourceName", self.resource_name),
        ):
            if not _QUALIFIED.match(value):
                raise ValueError(f"{field}: {value!r} is not a valid qualified name (e.g. {DEFAULT_KEY!r})")


#: The models the pod accepts, from PreFilter to Filter.
MODELS: StateKey[tuple[str, ...]] = StateKey("GpuModelAffinity/models")


class GpuModelAffinity:
    NAME: ClassVar[str] = "GpuModelAffinity"
    Args: ClassVar[type[GpuModelAffinityArgs]] = GpuModelAffinityArgs

    def __init__(self, args: GpuModelAffinityArgs | None = None, handle: Handle | None = None) -> None:
        self.args = args if args is not None else GpuModelAffinityArgs()
        self.handle = handle
        self._status = Status.unresolvable(ERR_REASON, plugin=self.NAME)

    def requested_models(self, pod: PodInfo) -> tuple[str, ...]:
        """The annotation's models; () when the pod names none."""
        raw = pod.pod.metadata.annotations.get(self.args.annotation_key, "")
        return tuple(m for m in (part.strip() for part in raw.split(",")) if m)

    def events_to_register(self) -> Sequence[ClusterEvent]:
        # A new node, or a node relabelled with a GPU model, may fit a rejected pod.
        return (ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE_LABEL),)

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> PreFilterResult:
        models = self.requested_models(pod)
        if not models:
            return PreFilterResult(Status.skip())
        state.write(MODELS, models)
        return PreFilterResult()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> NodeVerdicts:
        models = state.get(MODELS)
        if models is None:  # called without PreFilter
            models = self.requested_models(pod)
        if not models:
            return NodeVerdicts.all_ok(len(rows))
        has_model = nodes.label_column(self.args.label_key).mask_in(models)[rows]
        return NodeVerdicts.fail_where(~has_model, self._status)

    # ------------------------------------------------------------ score

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> Status:
        if pod.requests.get(self.args.resource_name, 0) <= 0:
            return Status.skip()  # not a GPU pod: no opinion
        return Status()

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> IntArray:
        col = nodes.columns.index.get(self.args.resource_name)
        if col is None:  # no node and no pod has ever named the resource
            return np.zeros(len(rows), dtype=np.int64)
        free: IntArray = np.maximum(nodes.alloc[rows, col] - nodes.req[rows, col], 0)
        if self.args.strategy == "LeastFree":
            free = free.max(initial=0) - free
        return free

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        top = int(scores.max(initial=0))
        if top == 0:
            return np.zeros_like(scores)
        out: IntArray = scores * MAX_NODE_SCORE // top
        return out
