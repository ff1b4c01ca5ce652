"""The objects that group pods or bound them, on the way in: PodGroups (in
each gang dialect Berth reads, :data:`berth.gangs.SOURCES`),
PodDisruptionBudgets and Namespaces (berth.v1 ``PodGroup``,
``PodDisruptionBudget`` in protos/berth/v1/model.proto, ``Namespace`` in
cluster.proto)."""

from __future__ import annotations

from berth import errors, gangs
from berth.adapters.grpc.convert._common import _at, _ls_from_pb, _meta_from_pb, _rl_from_pb
from berth.api.v1 import cluster_pb2 as cpb
from berth.api.v1 import model_pb2 as pb
from berth.cluster import model

__all__ = ["namespace_from_pb", "pdb_from_pb", "podgroup_from_pb"]


#: A PodGroup message's ``dialect`` -> the apiVersion of that dialect's PodGroup.
_POD_GROUP_DIALECTS = {"": model.PodGroup().api_version} | {
    s.name: s.api_version for s in gangs.SOURCES.values() if s.api_version
}


def podgroup_from_pb(g: pb.PodGroup, path: str = "") -> model.PodGroup:
    with _at(path):
        api_version = _POD_GROUP_DIALECTS.get(g.dialect)
        if api_version is None:
            known = ", ".join(sorted(n for n in _POD_GROUP_DIALECTS if n))
            raise errors.InvalidArgument(
                f"dialect: {g.dialect!r} has no PodGroup object Berth reads (one of {known}, or empty)"
            )
        return model.PodGroup(
            api_version=api_version,
            metadata=_meta_from_pb(g.metadata),
            spec=model.PodGroupSpec(
                min_member=g.min_member,
                schedule_timeout_seconds=g.schedule_timeout_seconds or None,
                min_resources=_rl_from_pb(g.min_resources, "min_resources"),
                min_task_member=dict(g.min_task_member),
                queue=g.queue,
            ),
        )


def pdb_from_pb(b: pb.PodDisruptionBudget, path: str = "") -> model.PodDisruptionBudget:
    with _at(path):
        return model.PodDisruptionBudget(
            metadata=_meta_from_pb(b.metadata),
            spec=model.PodDisruptionBudgetSpec(selector=_ls_from_pb(b.selector, b.HasField("selector"))),
            status=model.PodDisruptionBudgetStatus(disruptions_allowed=b.disruptions_allowed),
        )


def namespace_from_pb(n: cpb.Namespace, path: str = "") -> model.Namespace:
    with _at(path):
        return model.Namespace(metadata=_meta_from_pb(n.metadata))
