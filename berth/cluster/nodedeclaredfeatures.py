"""Which node-declared features a pod needs to be scheduled: the part of
``k8s.io/component-helpers/nodedeclaredfeatures`` kube-scheduler uses.

A kubelet publishes the features it implements in the Node's
``status.declaredFeatures`` (sorted names); the scheduler infers from a pod's
spec the features it requires and places it only where all are declared.
Each release's scheduler links the library of its own release, so the
registry of features differs per release (:func:`registry`):

- 1.35 (component-helpers v0.35.4): RestartAllContainersOnContainerExits,
  GuaranteedQoSPodCPUResize, InPlacePodLevelResourcesVerticalScaling;
- 1.36 (v0.36.3): GuaranteedQoSPodCPUResize is gone;
  ExtendWebSocketsToKubelet, InPlacePodVerticalScalingInitContainers and
  UserNamespacesHostNetworkSupport join;
- 1.37 (v0.37.2): InPlacePodVerticalScalingMemoryBackedVolumes,
  DRANodeAllocatableResources, VolumeBindMountOptions and
  DRAOptionalNodeOperations join.

Only three features are ever required for scheduling (``InferForScheduling``):
a container or init container with a ``restartPolicyRules`` action
``RestartAllContainers``; a pod on the host network in a user namespace
(``hostNetwork`` and ``hostUsers: false``); a volume mount with
``bindMountOptions``. The others matter only to pod updates (resizes), which
the scheduler does not judge. No feature sets a ``MaxVersion`` yet; the
bound is kept because the framework honours it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from berth.cluster import model
from berth.features import KubeVersion

__all__ = ["Feature", "infer_for_pod_scheduling", "registry", "unsatisfied"]


@dataclasses.dataclass(frozen=True, slots=True)
class Feature:
    """types.Feature as far as scheduling goes."""

    name: str
    #: InferForScheduling: whether placing a pod with this spec needs a node
    #: declaring the feature. None: never (the feature matters to pod updates,
    #: resizes, or to nothing the scheduler infers).
    infer_for_scheduling: Callable[[model.PodSpec], bool] | None = None
    #: MaxVersion (inclusive): past it the feature is everywhere and no longer required.
    max_version: KubeVersion | None = None


def _restart_all_containers(spec: model.PodSpec) -> bool:
    """restartallcontainers/restart_all_containers.go."""
    for containers in (spec.containers, spec.init_containers):
        for c in containers:
            for rule in c.restart_policy_rules:
                if rule.action == "RestartAllContainers":
                    return True
    return False


def _user_namespaces_host_network(spec: model.PodSpec) -> bool:
    """usernamespaceshostnetwork/user_namespaces_host_network.go."""
    return spec.host_network and spec.host_users is False


def _volume_bind_mount_options(spec: model.PodSpec) -> bool:
    """volumebindmountoptions/feature.go: containers, init and ephemeral containers."""
    for containers in (spec.containers, spec.init_containers, spec.ephemeral_containers):
        for c in containers:
            for m in c.volume_mounts:
                if m.bind_mount_options:
                    return True
    return False


_RESTART_ALL = Feature("RestartAllContainersOnContainerExits", _restart_all_containers)
_POD_LEVEL_RESIZE = Feature("InPlacePodLevelResourcesVerticalScaling")
_USERNS_HOST_NETWORK = Feature("UserNamespacesHostNetworkSupport", _user_namespaces_host_network)

#: features.AllFeatures of each release's component-helpers, sorted by name as ndf.New sorts them.
_REGISTRIES: dict[KubeVersion, tuple[Feature, ...]] = {
    KubeVersion(1, 35): (
        Feature("GuaranteedQoSPodCPUResize"),
        _POD_LEVEL_RESIZE,
        _RESTART_ALL,
    ),
    KubeVersion(1, 36): (
        Feature("ExtendWebSocketsToKubelet"),
        _POD_LEVEL_RESIZE,
        Feature("InPlacePodVerticalScalingInitContainers"),
        _RESTART_ALL,
        _USERNS_HOST_NETWORK,
    ),
    KubeVersion(1, 37): (
        Feature("DRANodeAllocatableResources"),
        # Required of a claim's allocation, which PreFilter cannot see: DynamicResources checks it.
        Feature("DRAOptionalNodeOperations"),
        Feature("ExtendWebSocketsToKubelet"),
        _POD_LEVEL_RESIZE,
        Feature("InPlacePodVerticalScalingInitContainers"),
        Feature("InPlacePodVerticalScalingMemoryBackedVolumes"),
        _RESTART_ALL,
        _USERNS_HOST_NETWORK,
        Feature("VolumeBindMountOptions", _volume_bind_mount_options),
    ),
}


_NONE: frozenset[str] = frozenset()


def registry(version: KubeVersion) -> tuple[Feature, ...]:
    """The features ``version``'s scheduler knows (``features.AllFeatures``)."""
    return _REGISTRIES[version]


def infer_for_pod_scheduling(spec: model.PodSpec, features: Sequence[Feature], version: KubeVersion) -> frozenset[str]:
    """Framework.InferForPodScheduling: the features the pod needs on the
    node, for a scheduler of ``version`` (a feature past its MaxVersion is
    assumed everywhere)."""
    required = [
        f.name
        for f in features
        if f.infer_for_scheduling is not None
        and (f.max_version is None or version <= f.max_version)
        and f.infer_for_scheduling(spec)
    ]
    return frozenset(required) if required else _NONE


def unsatisfied(required: frozenset[str], declared: Sequence[str]) -> list[str]:
    """The required features ``declared`` lacks, sorted (MatchNodeFeatureSet's
    UnsatisfiedRequirements); empty when the node fits."""
    return sorted(required.difference(declared)) if required else []
