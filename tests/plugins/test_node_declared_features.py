"""NodeDeclaredFeatures and the inference it uses, ported from
kube-scheduler v1.37.2's
pkg/scheduler/framework/plugins/nodedeclaredfeatures/nodedeclaredfeatures_test.go
(TestPreFilter, TestFilter, TestEventsToRegister; v1.35.4's message) and
k8s.io/component-helpers v0.37.2's nodedeclaredfeatures (framework_test.go
TestInferForPodScheduling and TestMatchNode, each feature's
TestInferForScheduling), with each release's registry.

Not ported: the queueing-hint tests (Berth has no queueing hints: the
registered events are checked), TestNodeDeclaredFeatures_DeferredResizeSkipped
(the alpha InPlacePodVerticalScalingSchedulerPreemption is not ported) and
the ``target version cannot be nil`` cases (Berth always knows its release).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
import pytest

from berth import features
from berth.adapters.http import nodelist
from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.cluster import nodedeclaredfeatures as ndf
from berth.framework import interface as fw
from berth.framework import registry
from berth.plugins.node_declared_features import (
    ERR_REASON_UNSATISFIED_REQUIREMENTS,
    STATE_KEY,
    NodeDeclaredFeatures,
    _State,
)
from berth.testing import Cluster, make_node, make_pod, run_filter

NAME = "NodeDeclaredFeatures"
V1_35, V1_36, V1_37 = features.KubeVersion(1, 35), features.KubeVersion(1, 36), features.KubeVersion(1, 37)
UNSATISFIED = fw.Status(fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_UNSATISFIED_REQUIREMENTS,), NAME)


def pod(**spec: Any) -> model.Pod:
    return make_pod("test-pod", spec=spec)


def node(name: str, *declared: str) -> model.Node:
    n = make_node(name, cpu=4, memory="8Gi", pods=110)
    n.status.declared_features = list(declared)
    return n


def plugin(version: features.KubeVersion = V1_37, **gates: bool) -> NodeDeclaredFeatures:
    cluster = Cluster()
    handle = dataclasses.replace(cluster.handle(), features=features.Features.of(version, gates))
    return NodeDeclaredFeatures(None, handle)


RESTART_ALL = {"containers": [{"name": "c", "restartPolicyRules": [{"action": "RestartAllContainers"}]}]}
USERNS_HOST_NETWORK = {"containers": [{"name": "c"}], "hostNetwork": True, "hostUsers": False}
BIND_MOUNT_OPTIONS = {
    "containers": [{"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/v", "bindMountOptions": ["noexec"]}]}]
}


# ---------------------------------------------------------------- the inference library


def _feature(name: str, infer: bool, max_version: features.KubeVersion | None = None) -> ndf.Feature:
    """createMockFeature."""
    return ndf.Feature(name, lambda spec: infer, max_version)


# nodedeclaredfeatures_test.go TestPreFilter's registries (the plugin's
# "disabled" case is test_the_plugin_is_inert_without_its_gate): (case,
# features, scheduler version, required).
INFER_CASES = [
    (
        "Pod with feature requirements",
        [_feature("TestFeature1", True), _feature("TestFeature2", False)],
        V1_35,
        {"TestFeature1"},
    ),
    (
        "Pod with multiple feature requirements",
        [
            _feature("TestFeature1", True, features.KubeVersion(1, 38)),
            _feature("TestFeature2", True, features.KubeVersion(1, 38)),
        ],
        V1_35,
        {"TestFeature1", "TestFeature2"},
    ),
    ("Pod with no requirements", [_feature("TestFeature1", False), _feature("TestFeature2", False)], V1_35, set()),
    (
        "Feature not required, version > MaxVersion",
        [_feature("TestFeature1", True, features.KubeVersion(1, 33)), _feature("TestFeature2", False)],
        features.KubeVersion(1, 34),
        set(),
    ),
    # framework_test.go TestInferForPodScheduling.
    ("exceeds max version", [_feature("PodLevelResources", True, features.KubeVersion(1, 30))], V1_37, set()),
    (
        "at max version",
        [_feature("PodLevelResources", True, features.KubeVersion(1, 37))],
        V1_37,
        {"PodLevelResources"},
    ),
]


@pytest.mark.parametrize(
    ("registered", "version", "want"), [c[1:] for c in INFER_CASES], ids=[c[0] for c in INFER_CASES]
)
def test_infer_for_pod_scheduling(registered: list[ndf.Feature], version: features.KubeVersion, want: set[str]) -> None:
    assert ndf.infer_for_pod_scheduling(make_pod("p").spec, registered, version) == want


# framework_test.go TestMatchNode: (case, required, node's features, unsatisfied).
MATCH_CASES = [
    ("all features match", {"feature-a", "feature-b"}, ["feature-a", "feature-b", "feature-c"], []),
    ("some features missing", {"feature-a", "feature-b"}, ["feature-a", "feature-c"], ["feature-b"]),
    ("all features missing", {"feature-a", "feature-b"}, ["feature-c"], ["feature-a", "feature-b"]),
    ("no node features", {"feature-a", "feature-b"}, [], ["feature-a", "feature-b"]),
    ("no requirements", set(), ["feature-a", "feature-b", "feature-c"], []),
]


@pytest.mark.parametrize(
    ("required", "declared", "want"), [c[1:] for c in MATCH_CASES], ids=[c[0] for c in MATCH_CASES]
)
def test_match_node(required: set[str], declared: list[str], want: list[str]) -> None:
    assert ndf.unsatisfied(frozenset(required), declared) == want


# Each feature's TestInferForScheduling, through each release's registry:
# (case, pod spec, required in 1.35, 1.36, 1.37).
SPEC_CASES = [
    (
        "restartallcontainers: init container with rules",
        {
            "initContainers": [{"name": "i", "restartPolicyRules": [{"action": "RestartAllContainers"}]}],
            "containers": [{"name": "c"}],
        },
        {"RestartAllContainersOnContainerExits"},
    ),
    ("restartallcontainers: regular container with rules", RESTART_ALL, {"RestartAllContainersOnContainerExits"}),
    (
        "restartallcontainers: a Restart rule is not RestartAllContainers",
        {"containers": [{"name": "c", "restartPolicyRules": [{"action": "Restart"}]}]},
        set(),
    ),
    ("restartallcontainers: no rules", {"initContainers": [{"name": "i"}], "containers": [{"name": "c"}]}, set()),
    (
        "usernamespaceshostnetwork: HostNetwork true, HostUsers false",
        USERNS_HOST_NETWORK,
        {"UserNamespacesHostNetworkSupport"},
    ),
    ("usernamespaceshostnetwork: HostNetwork true, HostUsers nil", {"hostNetwork": True}, set()),
    ("usernamespaceshostnetwork: HostNetwork true, HostUsers true", {"hostNetwork": True, "hostUsers": True}, set()),
    ("usernamespaceshostnetwork: HostNetwork false, HostUsers false", {"hostUsers": False}, set()),
    ("volumebindmountoptions: a container's mount", BIND_MOUNT_OPTIONS, {"VolumeBindMountOptions"}),
    (
        "volumebindmountoptions: an init container's mount",
        {"initContainers": [{"name": "i", "volumeMounts": [{"name": "v", "bindMountOptions": ["nodev"]}]}]},
        {"VolumeBindMountOptions"},
    ),
    (
        "volumebindmountoptions: an ephemeral container's mount",
        {"ephemeralContainers": [{"name": "e", "volumeMounts": [{"name": "v", "bindMountOptions": ["nosuid"]}]}]},
        {"VolumeBindMountOptions"},
    ),
    (
        "volumebindmountoptions: mounts without options",
        {"containers": [{"name": "c", "volumeMounts": [{"name": "v"}]}]},
        set(),
    ),
]

#: The release whose registry first holds each feature that scheduling infers.
SINCE = {
    "RestartAllContainersOnContainerExits": V1_35,
    "UserNamespacesHostNetworkSupport": V1_36,
    "VolumeBindMountOptions": V1_37,
}


@pytest.mark.parametrize("version", [V1_35, V1_36, V1_37])
@pytest.mark.parametrize(("spec", "want"), [c[1:] for c in SPEC_CASES], ids=[c[0] for c in SPEC_CASES])
def test_infer_for_scheduling_per_release(spec: dict[str, Any], want: set[str], version: features.KubeVersion) -> None:
    """A feature is required only by the releases whose component-helpers register it."""
    got = ndf.infer_for_pod_scheduling(pod(**spec).spec, ndf.registry(version), version)
    assert got == {f for f in want if SINCE[f] <= version}


def test_each_release_registers_its_component_helpers_features() -> None:
    names = {v: [f.name for f in ndf.registry(v)] for v in (V1_35, V1_36, V1_37)}
    assert names[V1_35] == [
        "GuaranteedQoSPodCPUResize",
        "InPlacePodLevelResourcesVerticalScaling",
        "RestartAllContainersOnContainerExits",
    ]
    assert "GuaranteedQoSPodCPUResize" not in names[V1_36]
    assert set(names[V1_37]) - set(names[V1_36]) == {
        "DRANodeAllocatableResources",
        "DRAOptionalNodeOperations",
        "InPlacePodVerticalScalingMemoryBackedVolumes",
        "VolumeBindMountOptions",
    }
    assert all(n == sorted(n) for n in names.values())


# ---------------------------------------------------------------- the plugin


def test_pre_filter_writes_the_required_features_or_skips() -> None:
    """TestPreFilter on the plugin: requirements go to the cycle state, none: Skip."""
    p, nodes = plugin(), Cluster().snapshot
    state = fw.CycleState()
    assert p.pre_filter(state, PodInfo.of(pod(**RESTART_ALL)), nodes) == fw.PreFilterResult()
    assert state.read(STATE_KEY) == _State(frozenset({"RestartAllContainersOnContainerExits"}))
    state = fw.CycleState()
    assert p.pre_filter(state, PodInfo.of(make_pod("plain")), nodes).status.code == fw.Code.SKIP
    assert state.get(STATE_KEY) is None


# TestFilter: (case, required features written at PreFilter (None: no state), node's features, want).
FILTER_CASES = [
    ("Node matches requirements", {"FeatureA"}, ["FeatureA", "FeatureB"], fw.SUCCESS),
    ("Node does not match requirements", {"FeatureA"}, ["FeatureB"], UNSATISFIED),
    (
        "Node with multiple features, pod requires subset",
        {"FeatureA", "FeatureC"},
        ["FeatureA", "FeatureB", "FeatureC"],
        fw.SUCCESS,
    ),
    ("Node has no declared features", {"FeatureA"}, [], UNSATISFIED),
    ("Node with some but not all required features", {"FeatureA", "FeatureB"}, ["FeatureA"], UNSATISFIED),
    (
        "Error getting pre-filter state",
        None,
        [],
        fw.Status.error('error reading "PreFilterNodeDeclaredFeatures" from cycle-state: not found', plugin=NAME),
    ),
]


@pytest.mark.parametrize(
    ("required", "declared", "want"), [c[1:] for c in FILTER_CASES], ids=[c[0] for c in FILTER_CASES]
)
def test_filter(required: set[str] | None, declared: list[str], want: fw.Status) -> None:
    cluster = Cluster([node("node-1", *declared)])
    p = NodeDeclaredFeatures(None, cluster.handle())
    state = fw.CycleState()
    if required is not None:
        state.write(STATE_KEY, _State(frozenset(required)))
    snap = cluster.snapshot
    rows = snap.alive_rows()
    assert p.filter(state, PodInfo.of(make_pod("test-pod")), snap, rows).status_at(0) == want


def test_the_plugin_is_inert_without_its_gate() -> None:
    """TestPreFilter / TestFilter / TestEventsToRegister "plugin disabled"."""
    p = plugin(V1_36, NodeDeclaredFeatures=False)
    cluster = Cluster([node("node-1")])
    assert run_filter(p, pod(**RESTART_ALL), cluster.snapshot) == [fw.SUCCESS]
    state = fw.CycleState()
    state.write(STATE_KEY, _State(frozenset({"FeatureA"})))
    snap = cluster.snapshot
    assert p.filter(state, PodInfo.of(make_pod("p")), snap, snap.alive_rows()).status_at(0) == fw.SUCCESS
    assert p.events_to_register() == ()


def test_events_to_register() -> None:
    """TestEventsToRegister "plugin enabled": a node added or updated, the pod updated."""
    assert plugin().events_to_register() == (
        fw.ClusterEvent("Node", fw.ActionType.ADD | fw.ActionType.UPDATE),
        fw.ClusterEvent("Pod", fw.ActionType.UPDATE),
    )


@pytest.mark.parametrize(
    ("version", "want"),
    [
        (V1_35, "node declared features check failed - unsatisfied requirements: RestartAllContainersOnContainerExits"),
        (V1_36, ERR_REASON_UNSATISFIED_REQUIREMENTS),
        (V1_37, ERR_REASON_UNSATISFIED_REQUIREMENTS),
    ],
)
def test_the_rejection_per_release(version: features.KubeVersion, want: str) -> None:
    """v1.35.4 named the missing features; v1.36.3 and later give one reason."""
    cluster = Cluster([node("bare"), node("ready", "RestartAllContainersOnContainerExits")])
    p = plugin(version, NodeDeclaredFeatures=True)
    assert run_filter(p, pod(**RESTART_ALL), cluster.snapshot) == [
        fw.Status(fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (want,), NAME),
        fw.SUCCESS,
    ]


@pytest.mark.parametrize(("version", "default"), [(V1_35, False), (V1_36, True), (V1_37, True)])
def test_the_default_profile_runs_it_where_the_gate_is_on(version: features.KubeVersion, default: bool) -> None:
    """default_plugins.go: appended when NodeDeclaredFeatures is on (alpha in 1.35, beta in 1.36, GA in 1.37)."""
    names = [n for n, _ in registry.default_multi_point(features.Features.of(version))]
    assert ("NodeDeclaredFeatures" in names) is default
    if default:
        assert names[-1] == "NodeDeclaredFeatures"
    assert plugin(version).enabled is default


def test_a_pod_goes_only_where_its_features_are_declared() -> None:
    """The default 1.37 profile, end to end: the pod needing RestartAllContainers
    skips the node that does not declare it."""
    cluster = Cluster(
        [node("bare"), node("ready", "InPlacePodLevelResourcesVerticalScaling", "RestartAllContainersOnContainerExits")]
    )
    verdict = cluster.explain(pod(**RESTART_ALL))
    assert {n.node: (n.feasible, [r.reason for r in n.reasons]) for n in verdict.nodes} == {
        "bare": (False, [ERR_REASON_UNSATISFIED_REQUIREMENTS]),
        "ready": (True, []),
    }


def test_the_fields_arrive_from_the_api_server() -> None:
    """The informers decode with msgspec into the model: Node status.declaredFeatures,
    and the pod fields the inference reads."""
    raw = b'{"metadata":{"name":"n"},"status":{"declaredFeatures":["A","B/c"],"nodeInfo":{"kubeletVersion":"v1.37.2"}}}'
    assert msgspec.json.decode(raw, type=model.Node).status.declared_features == ["A", "B/c"]
    spec = msgspec.json.decode(
        b'{"hostNetwork":true,"hostUsers":false,"containers":[{"name":"c","restartPolicyRules":'
        b'[{"action":"RestartAllContainers","exitCodes":{"operator":"In","values":[42]}}]}]}',
        type=model.PodSpec,
    )
    assert spec.containers[0].restart_policy_rules[0].action == "RestartAllContainers"
    assert spec.host_users is False
    mounts = msgspec.convert(BIND_MOUNT_OPTIONS, model.PodSpec).containers[0].volume_mounts
    assert mounts[0].bind_mount_options == ["noexec"]


@pytest.mark.parametrize("images", [False, True])
def test_the_extenders_full_node_list_keeps_declared_features(images: bool) -> None:
    """The extender decodes NodeLists into lean rows (berth.adapters.http.nodelist):
    they must keep status.declaredFeatures, or every pod needing a feature would fail there."""
    raw = b'{"metadata":{"name":"n","resourceVersion":"1"},"status":{"declaredFeatures":["A"],"capacity":{"pods":"1"}}}'
    rows = nodelist.NodeListReader().read([msgspec.Raw(raw)], images=images)
    assert rows.nodes[0].status.declared_features == ["A"]
