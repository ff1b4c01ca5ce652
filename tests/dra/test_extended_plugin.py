"""Extended resources backed by DRA through the plugins: NodeResourcesFit's
handoff and DynamicResources' special claim, walked through the extension
points on the embedded cluster (which plays the API server).

The cases are upstream's ``extended-resource-*`` cases of ``TestPlugin``
(kube-scheduler v1.37.2,
``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources_test.go``),
with their objects (``podWithExtendedResourceName``,
``deviceClassWithExtendResourceName``, ``workerNodeSlice``, ...); the
metrics checks are not ported. The Fit cases follow ``fit.go``'s
``shouldDelegateResourceToDRA``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np
import pytest

from berth import testing
from berth.cache.infos import PodInfo
from berth.cluster import dra, model
from berth.framework import interface as fw
from berth.plugins.dynamicresources import NAME, DynamicResources
from berth.plugins.noderesources.args import (
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    ResourceSpec,
    ScoringStrategy,
)
from berth.plugins.noderesources.balanced_allocation import NodeResourcesBalancedAllocation
from berth.plugins.noderesources.fit import NodeResourcesFit
from tests.plugins.test_dynamicresources import device_slice

NODE, NODE2, DRIVER, CLASS = "worker", "worker-2", "some-driver", "my-resource-class"
POD, POD_UID = "my-pod", "1234"
GPU, GPU2 = "example.com/gpu", "example.com/gpu2"
IMPLICIT = f"deviceclass.resource.kubernetes.io/{CLASS}"
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
Obj = dict[str, Any]


def device_class(name: str = CLASS, resource: str | None = GPU) -> Obj:
    return {"metadata": {"name": name}, "spec": {"extendedResourceName": resource} if resource else {}}


WORKER_SLICE = device_slice(NODE, "instance-1")
LARGE_WORKER_SLICE = device_slice(NODE, "instance-1", "instance-2", "instance-3", "instance-4")


def pod(*containers: dict[str, str]) -> model.Pod:
    """st.MakePod().Req(...): one container per map."""
    return testing.make_pod(
        POD,
        uid=POD_UID,
        containers=[{"name": f"con{i}", "resources": {"requests": r}} for i, r in enumerate(containers)],
    )


def stale_claim(node: str) -> Obj:
    """extendedResourceClaim / extendedResourceClaimNode2: made by an earlier cycle, allocated on ``node``."""
    return {
        "metadata": {
            "name": "my-pod-extended-resources-0",
            "namespace": "default",
            "generateName": "my-pod-extended-resources-",
            "annotations": {ANNOTATION: "true"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": POD, "uid": POD_UID, "controller": True}],
        },
        "spec": {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {"deviceClassName": CLASS}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "container-0-request-0", "driver": DRIVER, "pool": node, "device": "instance-1"}
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                    ]
                },
            }
        },
    }


@dataclasses.dataclass
class Case:
    pod: model.Pod
    classes: list[Obj]
    slices: list[Obj] = dataclasses.field(default_factory=list)
    claims: list[Obj] = dataclasses.field(default_factory=list)
    #: The node's extended-resource allocatable (a device plugin's).
    allocatable: dict[str, int] = dataclasses.field(default_factory=dict)
    prefilter_skip: bool = False
    filter: tuple[str, ...] = ()
    postfilter: tuple[str, ...] = ()
    #: The created claim's device requests: (request, class, count), and the
    #: request of each device allocated (instance-1, instance-2, ... in order).
    created: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)
    devices: list[str] = dataclasses.field(default_factory=list)
    mappings: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)


CASES = {
    "extended-resource-name-with-node-resource": Case(pod({GPU: "1"}), [device_class()], allocatable={GPU: 1}),
    "extended-resource-one-device-plugin-one-dra": Case(
        pod({GPU: "1", GPU2: "1"}),
        [device_class(), device_class(CLASS + "2", GPU2)],
        [WORKER_SLICE],
        allocatable={GPU: 1},
        created=[("container-0-request-1", CLASS + "2", 1)],
        devices=["container-0-request-1"],
        mappings=[("con0", GPU2, "container-0-request-1")],
    ),
    "extended-resource-name-with-zero-allocatable": Case(
        pod({GPU: "1"}),
        [device_class()],
        [WORKER_SLICE],
        allocatable={GPU: 0},
        created=[("container-0-request-0", CLASS, 1)],
        devices=["container-0-request-0"],
        mappings=[("con0", GPU, "container-0-request-0")],
    ),
    "non-DRA-extended-resource-name-with-zero-allocatable": Case(
        pod({GPU: "1"}), [device_class(resource=None)], [WORKER_SLICE], allocatable={GPU: 0}, prefilter_skip=True
    ),
    "extended-resource-name-no-resource": Case(
        pod({GPU: "1"}), [device_class()], filter=("cannot allocate all claims",)
    ),
    "extended-resource-name-with-resources": Case(
        pod({GPU: "1"}),
        [device_class()],
        [WORKER_SLICE],
        created=[("container-0-request-0", CLASS, 1)],
        devices=["container-0-request-0"],
        mappings=[("con0", GPU, "container-0-request-0")],
    ),
    # The container's request names sort "deviceclass..." before "example.com/...".
    "implicit-extended-resource-name-with-resources": Case(
        pod({IMPLICIT: "1", GPU: "2"}),
        [device_class()],
        [LARGE_WORKER_SLICE],
        created=[("container-0-request-0", CLASS, 1), ("container-0-request-1", CLASS, 2)],
        devices=["container-0-request-0", *["container-0-request-1"] * 2],
        mappings=[("con0", IMPLICIT, "container-0-request-0"), ("con0", GPU, "container-0-request-1")],
    ),
    "implicit-extended-resource-name-two-containers-with-resources": Case(
        pod({IMPLICIT: "1"}, {GPU: "2"}),
        [device_class()],
        [LARGE_WORKER_SLICE],
        created=[("container-0-request-0", CLASS, 1), ("container-1-request-0", CLASS, 2)],
        devices=["container-0-request-0", *["container-1-request-0"] * 2],
        mappings=[("con0", IMPLICIT, "container-0-request-0"), ("con1", GPU, "container-1-request-0")],
    ),
    "extended-resource-name-with-resources-has-claim": Case(
        pod({GPU: "1"}),
        [device_class()],
        [WORKER_SLICE],
        claims=[stale_claim(NODE)],
        filter=("cannot schedule extended resource claim",),
        postfilter=("deletion of ResourceClaim completed",),
    ),
    "extended-resource-name-with-resources-delete-claim": Case(
        pod({GPU: "1"}),
        [device_class()],
        [WORKER_SLICE],
        claims=[stale_claim(NODE2)],
        filter=("cannot schedule extended resource claim",),
        postfilter=("deletion of ResourceClaim completed",),
    ),
}


class Walk:
    def __init__(self, case: Case) -> None:
        node = testing.make_node(NODE, pods=110, labels={"kubernetes.io/hostname": NODE}, allocatable=case.allocatable)
        self.cluster = testing.Cluster(nodes=[node], config=testing.parse_config({"kubernetesVersion": "1.37"}))
        embedded = self.cluster.berth.cluster
        embedded.upsert_device_classes(msgspec.convert(c, dra.DeviceClass) for c in case.classes)
        embedded.upsert_resource_slices(msgspec.convert(s, dra.ResourceSlice) for s in case.slices)
        embedded.upsert_resource_claims(msgspec.convert(c, dra.ResourceClaim) for c in case.claims)
        self.cluster.add(case.pod)
        self.embedded = embedded
        fwk = self.cluster.berth.core.frameworks[self.cluster.berth.cfg.profiles[0].scheduler_name]
        self.plugin: DynamicResources = fwk.plugins[NAME]
        self.fit: NodeResourcesFit = fwk.plugins[NodeResourcesFit.NAME]
        self.store = self.cluster.berth.core.dra

    def extended_claims(self) -> list[dra.ResourceClaim]:
        return [c for c in self.embedded.resource_claims.values() if c.metadata.annotations.get(ANNOTATION)]


@pytest.mark.parametrize("name", list(CASES))
async def test_plugin(name: str) -> None:
    case = CASES[name]
    w = Walk(case)
    p, pi = w.plugin, PodInfo.of(case.pod)
    nodes = w.cluster.snapshot
    row = np.asarray([nodes.alive_rows()[0]], dtype=np.int64)
    state = fw.CycleState()
    assert w.fit.pre_filter(state, pi, nodes).status.ok
    fit = w.fit.filter(state, pi, nodes, row).status_at(0)
    # NodeResourcesFit leaves it to DynamicResources, unless no class names it.
    assert fit.ok == (not case.prefilter_skip), fit
    res = p.pre_filter(state, pi, nodes)
    if case.prefilter_skip:
        assert res.status.code == fw.Code.SKIP
        return
    assert res.status.ok, res.status
    verdict = p.filter(state, pi, nodes, row).status_at(0)
    if case.filter:
        assert verdict.code == fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert verdict.reasons[: len(case.filter)] == case.filter
        before = {c.metadata.name for c in w.extended_claims()}
        post = p.post_filter(state, pi, nodes, {})
        assert post.status.code == fw.Code.UNSCHEDULABLE
        assert post.status.reasons == case.postfilter
        await w.cluster.berth.core.client.drain()
        if case.postfilter:
            assert before and not w.extended_claims()  # the stale claim went
        return
    assert verdict.ok, verdict
    assert p.reserve(state, pi, NODE).ok
    assert not w.extended_claims()  # Reserve writes nothing
    in_flight = w.store.pending_allocations()
    if not case.created:
        assert not in_flight
        assert (await p.pre_bind(state, pi, NODE)).ok
        assert not w.extended_claims()
        return
    (claim,) = in_flight
    assert claim.metadata.name == "<extended-resources>"
    status = await p.pre_bind(state, pi, NODE)
    assert status.ok, status
    assert w.store.pending_allocations() == []
    (created,) = w.extended_claims()
    md = created.metadata
    assert md.name.startswith("my-pod-extended-resources-") and len(md.name) == len("my-pod-extended-resources-") + 5
    assert md.generate_name == "my-pod-extended-resources-"
    assert [(r.kind, r.name, r.uid, r.controller) for r in md.owner_references] == [("Pod", POD, POD_UID, True)]
    assert dra.DELETE_PROTECTION_FINALIZER in md.finalizers
    got = [(r.name, r.exactly.device_class_name, r.exactly.count) for r in created.spec.devices.requests if r.exactly]
    assert got == case.created
    alloc = created.status.allocation
    assert alloc is not None and alloc.allocation_timestamp is not None
    want = [(request, f"instance-{k}") for k, request in enumerate(case.devices, 1)]
    assert [(r.request, r.device) for r in alloc.devices.results] == want
    assert [(r.name, r.uid) for r in created.status.reserved_for] == [(POD, POD_UID)]
    stored_pod = w.embedded.pods[f"default/{POD}"]
    ers = stored_pod.status.extended_resource_claim_status
    assert ers is not None and ers.resource_claim_name == md.name
    assert [(m.container_name, m.resource_name, m.request_name) for m in ers.request_mappings] == case.mappings


def _reserved() -> tuple[Walk, PodInfo, fw.CycleState]:
    """extended-resource-name-with-resources, walked up to Reserve on the node."""
    case = CASES["extended-resource-name-with-resources"]
    w = Walk(case)
    p, pi, nodes, state = w.plugin, PodInfo.of(case.pod), w.cluster.snapshot, fw.CycleState()
    assert p.pre_filter(state, pi, nodes).status.ok
    assert p.filter(state, pi, nodes, np.asarray([nodes.alive_rows()[0]], dtype=np.int64)).status_at(0).ok
    assert p.reserve(state, pi, NODE).ok
    assert len(w.store.pending_allocations()) == 1
    return w, pi, state


async def test_unreserve_after_the_claim_was_created_deletes_it() -> None:
    """extended-resource-name-bind-failure: Unreserve after PreBind removes the claim it created."""
    w, pi, state = _reserved()
    assert (await w.plugin.pre_bind(state, pi, NODE)).ok
    assert len(w.extended_claims()) == 1
    w.plugin.unreserve(state, pi, NODE)
    await w.cluster.berth.core.client.drain()
    assert w.extended_claims() == [] and w.store.pending_allocations() == []


async def test_unreserve_before_pre_bind_only_drops_the_claim_in_flight() -> None:
    """extended-resource-name-skip-bind."""
    w, pi, state = _reserved()
    w.plugin.unreserve(state, pi, NODE)
    await w.cluster.berth.core.client.drain()
    assert w.store.pending_allocations() == [] and w.extended_claims() == []


#: fitsRequest's DRA cases of fit_test.go (v1.37.2) by their names; the pod asks for 2.
#: Upstream's "extended resource backed by DRA not enabled" is the 1.35 test below.
@pytest.mark.parametrize(
    ("classes", "allocatable", "want"),
    [
        pytest.param([device_class()], {GPU: 4}, (), id="extended resource backed by device plugin"),
        pytest.param([device_class()], {}, (), id="extended resource backed by DRA"),
        pytest.param([], {}, ("Insufficient example.com/gpu",), id="extended resource NOT backed by DRA"),
        pytest.param(
            [device_class()], {GPU: 0}, (), id="extended resource was backed by Device Plugin (Allocatable: 0)"
        ),
        # Berth's: a device plugin provides some, not enough: Fit's, not DRA's.
        pytest.param([device_class()], {GPU: 1}, ("Insufficient example.com/gpu",), id="device plugin short of it"),
    ],
)
def test_fit_hands_a_resource_a_class_names_to_dynamic_resources_where_no_device_plugin_provides_it(
    classes: list[Obj], allocatable: dict[str, int], want: tuple[str, ...]
) -> None:
    w = Walk(Case(pod({GPU: "2"}), classes, allocatable=allocatable))
    got = w.cluster.filter(w.fit, pod({GPU: "2"}))[NODE]
    assert got.reasons == want


def test_the_gate_off_leaves_extended_resources_to_fit() -> None:
    """1.35: DRAExtendedResource is off (alpha); the resource is Fit's and DynamicResources skips."""
    node = testing.make_node(NODE, pods=110)
    cluster = testing.Cluster(nodes=[node], config=testing.parse_config({"kubernetesVersion": "1.35"}))
    cluster.berth.cluster.upsert_device_classes([msgspec.convert(device_class(), dra.DeviceClass)])
    fwk = cluster.berth.core.frameworks[cluster.berth.cfg.profiles[0].scheduler_name]
    p = pod({GPU: "1"})
    assert cluster.filter(fwk.plugins[NodeResourcesFit.NAME], p)[NODE].reasons == ("Insufficient example.com/gpu",)
    res = fwk.plugins[NAME].pre_filter(fw.CycleState(), PodInfo.of(p), cluster.snapshot)
    assert res.status.code == fw.Code.SKIP


# ---------------------------------------------------------------- scoring in devices
# fit_test.go "test case for ScoringStrategy LeastAllocated with Extended
# resources" (and "... if PreScore is not called"), balanced_allocation_test.go
# "include DRA resource on a node for balanced resource allocation" (and
# "... if PreScore not called"), v1.37.2: extendedResourceDRA =
# "extended.resource.dra.io/something", named by deviceClassWithExtendResourceName.

DRA_RESOURCE = "extended.resource.dra.io/something"


def _scoring_cluster(nodes: list[model.Node], slices: list[Obj], pods: Sequence[model.Pod] = ()) -> testing.Cluster:
    cluster = testing.Cluster(nodes=nodes, pods=pods, config=testing.parse_config({"kubernetesVersion": "1.37"}))
    cluster.berth.cluster.upsert_device_classes(
        [msgspec.convert(device_class("device-class-name", DRA_RESOURCE), dra.DeviceClass)]
    )
    cluster.berth.cluster.upsert_resource_slices(msgspec.convert(s, dra.ResourceSlice) for s in slices)
    return cluster


def _score(plugin: Any, pod: model.Pod, cluster: testing.Cluster, *, pre_score: bool) -> dict[str, int]:
    nodes, pi, state = cluster.snapshot, PodInfo.of(pod), fw.CycleState()
    rows = nodes.alive_rows()
    if pre_score:
        assert plugin.pre_score(state, pi, nodes, rows).ok
    got = plugin.score(state, pi, nodes, rows)
    return {nodes.name(r): int(s) for r, s in zip(rows.tolist(), got.tolist(), strict=True)}


@pytest.mark.parametrize("pre_score", [True, False], ids=["PreScore", "PreScore not called"])
def test_least_allocated_counts_a_dra_backed_resource_in_devices(pre_score: bool) -> None:
    cluster = _scoring_cluster(
        [testing.make_node("node1"), testing.make_node("node2")],
        [device_slice("node1", "device-1", "device-2", "device-3"), device_slice("node2", "device-1", "device-2")],
    )
    args = NodeResourcesFitArgs(
        scoring_strategy=ScoringStrategy(type="LeastAllocated", resources=[ResourceSpec(name=DRA_RESOURCE, weight=1)])
    )
    fit = NodeResourcesFit(args, cluster.handle())
    pod = testing.make_pod(requests={DRA_RESOURCE: "1"})
    assert _score(fit, pod, cluster, pre_score=pre_score) == {"node1": 66, "node2": 50}


@pytest.mark.parametrize("pre_score", [True, False], ids=["PreScore", "PreScore not called"])
def test_balanced_allocation_counts_a_dra_backed_resource_in_devices(pre_score: bool) -> None:
    def node(name: str) -> model.Node:
        return testing.make_node(name, cpu="3500m", memory="40000")

    def running(name: str, node_name: str, *requests: dict[str, str]) -> model.Pod:
        containers = [{"name": f"c{i}", "resources": {"requests": r}} for i, r in enumerate(requests)]
        return testing.make_pod(name, node_name=node_name, containers=containers)

    cluster = _scoring_cluster(
        [node("node1"), node("node2")],
        [device_slice("node1", *(f"device-{i}" for i in range(1, 9)))],
        [
            running("a", "node1", {"cpu": "1000m"}, {"cpu": "2000m"}),
            running("b", "node2", {"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"}),
        ],
    )
    args = NodeResourcesBalancedAllocationArgs(
        resources=[ResourceSpec(name=n, weight=1) for n in ("cpu", "memory", DRA_RESOURCE)]
    )
    balanced = NodeResourcesBalancedAllocation(args, cluster.handle())
    pod = testing.make_pod(requests={DRA_RESOURCE: "1"})
    assert _score(balanced, pod, cluster, pre_score=pre_score) == {"node1": 76, "node2": 75}
