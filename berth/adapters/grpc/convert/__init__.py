"""Translate between the contract (``berth.v1`` protobuf) and the core's model.

The only place that knows both shapes. Quantities become canonical integers
on the way out (``resources.canonical``) and exact quantity strings on the
way in (``resources.format_quantity``).

On the way in, every value the model cannot hold is
:class:`berth.errors.InvalidArgument` whose message starts with the
protobuf field path (``pods[3].spec.containers[0].requests[cpu]: ...``), as
the API server's field errors do (``k8s.io/apimachinery/pkg/util/validation/field``,
``path: Invalid value: value: detail``). Helpers raise paths relative to the
object they convert; each level prefixes its own field (``_under``).

One module a subject, each importing only those below it:

- :mod:`._common`: field paths, and what many objects carry (metadata,
  resource lists, selectors, enumerations, quantities, times, JSON);
- :mod:`.nodes`, :mod:`.groups` (PodGroups, PodDisruptionBudgets,
  Namespaces), :mod:`.storage`, :mod:`.dra` (resource.k8s.io/v1);
- :mod:`.pods` (a pod's ephemeral volume holds a :mod:`.storage` claim spec);
- :mod:`.results`: the verbs' answers, on the way out only.

Callers import this package and call ``convert.<name>``.
"""

from __future__ import annotations

from berth.adapters.grpc.convert.dra import (
    device_class_from_pb,
    device_class_to_pb,
    resource_claim_from_pb,
    resource_claim_to_pb,
    resource_slice_from_pb,
    resource_slice_to_pb,
)
from berth.adapters.grpc.convert.groups import namespace_from_pb, pdb_from_pb, podgroup_from_pb
from berth.adapters.grpc.convert.nodes import node_from_pb, node_to_pb, nodes_from_pb
from berth.adapters.grpc.convert.nodes import taint_to_pb as taint_to_pb
from berth.adapters.grpc.convert.pods import pod_from_pb, pod_to_pb, pods_from_pb
from berth.adapters.grpc.convert.results import decision_batch_to_pb as decision_batch_to_pb
from berth.adapters.grpc.convert.results import (
    decision_to_pb,
    explanation_to_pb,
    node_summaries_to_pb,
    pod_group_rows_to_pb,
    pod_row_to_pb,
    queue_status_to_pb,
    whatif_to_pb,
    why_to_pb,
)
from berth.adapters.grpc.convert.results import queue_state_to_pb as queue_state_to_pb
from berth.adapters.grpc.convert.storage import (
    csi_node_from_pb,
    csi_node_to_pb,
    pv_from_pb,
    pv_to_pb,
    pvc_from_pb,
    pvc_to_pb,
    storage_class_from_pb,
    storage_class_to_pb,
)

__all__ = [
    "csi_node_from_pb",
    "csi_node_to_pb",
    "decision_to_pb",
    "device_class_from_pb",
    "device_class_to_pb",
    "explanation_to_pb",
    "namespace_from_pb",
    "node_from_pb",
    "node_summaries_to_pb",
    "node_to_pb",
    "nodes_from_pb",
    "pdb_from_pb",
    "pod_from_pb",
    "pod_group_rows_to_pb",
    "pod_row_to_pb",
    "pod_to_pb",
    "podgroup_from_pb",
    "pods_from_pb",
    "pv_from_pb",
    "pv_to_pb",
    "pvc_from_pb",
    "pvc_to_pb",
    "queue_status_to_pb",
    "resource_claim_from_pb",
    "resource_claim_to_pb",
    "resource_slice_from_pb",
    "resource_slice_to_pb",
    "storage_class_from_pb",
    "storage_class_to_pb",
    "whatif_to_pb",
    "why_to_pb",
]
