"""A LeaderWorkerSet gang-scheduled by Berth on the real control plane, made
by LWS's own controller (issue 26, item 5).

``lws-manager`` (sigs.k8s.io/lws, built by ``build-lws.sh`` beside the bed)
runs against the bed's API server with its Volcano scheduler provider
(``gangSchedulingManagement: {schedulerProvider: volcano}``, LWS v0.8.0+,
``pkg/schedulerprovider/volcano_provider.go``): for each group its pod
controller creates a Volcano PodGroup (minMember = the group's size) and its
pod webhook writes ``scheduling.k8s.io/group-name`` on every pod of the group.
The real StatefulSet controller makes the pods from LWS's StatefulSets, and
Berth binds them all or nothing through its Volcano dialect (berth/gangs/sources.py).

LWS's webhooks are served on 127.0.0.1 with a certificate tests/e2e/operators.py
makes (its internal cert rotation, which wants an in-cluster Secret and
Service, is off), and registered with ``url:`` clientConfigs built from the
module's own ``config/webhook`` manifests and kustomize patches, so the paths,
rules and objectSelectors are LWS's, not guessed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from tests.e2e import kubeutil, operators
from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed

pytestmark = pytest.mark.e2e

NS = "lws"
LWS_API = "leaderworkerset.x-k8s.io/v1"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"
#: leaderworkerset.x-k8s.io/v1 labels (api/leaderworkerset/v1/leaderworkerset_types.go, v0.9.0).
SET_NAME = "leaderworkerset.sigs.k8s.io/name"
REVISION = "leaderworkerset.sigs.k8s.io/template-revision-hash"
#: Volcano's KubeGroupNameAnnotationKey, which LWS's pod webhook writes.
GROUP_NAME = "scheduling.k8s.io/group-name"
VOLCANO_CRD = Path(__file__).parent / "crds" / "scheduling.volcano.sh_podgroups.yaml"
#: config.lws.x-k8s.io/v1alpha1 Configuration (api/config/v1alpha1/configuration_types.go, v0.9.0).
LWS = operators.Controller("lws", "sigs.k8s.io/lws", "lws-manager", "config.lws.x-k8s.io/v1alpha1")


@pytest.fixture(scope="module")
def lws(control_plane: bed.ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[bed.Kube]:
    """LWS's and Volcano's PodGroup CRDs, kube-controller-manager with the
    StatefulSet controller, and lws-manager with the Volcano provider and its
    webhooks registered; its webhooks answer before this yields."""
    kube = control_plane.kube()
    probe = leader_worker_set("probe", size=2)

    def answering() -> bool:
        # A dry-run create passes through both of LWS's LeaderWorkerSet webhooks.
        return kube.request("POST", f"/apis/{LWS_API}/namespaces/{NS}/leaderworkersets", probe, dryRun="All")[0] == 201

    with operators.running(
        control_plane,
        tmp_path_factory.mktemp("lws"),
        LWS,
        kinds=[(LWS_API, "LeaderWorkerSet"), (VOLCANO_API, "PodGroup")],
        namespace=NS,
        kcm_controllers=("statefulset-controller",),
        answering=answering,
        more_crds=[VOLCANO_CRD],
        extra_config={"gangSchedulingManagement": {"schedulerProvider": "volcano"}},
    ):
        yield kube


def leader_worker_set(name: str, *, size: int) -> dict[str, Any]:
    """One group of ``size`` pods (a leader and size-1 workers from one template) for Berth."""
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": size,
                # A pause container asking 1 cpu, on the nodes this module makes.
                "workerTemplate": {"spec": kubeutil.pod(name, cpu="1", nodeSelector={"pool": "lws"})["spec"]},
            },
        },
    }


def pods_of(kube: bed.Kube, name: str) -> list[dict[str, Any]]:
    out = kube.ok("GET", f"/api/v1/namespaces/{NS}/pods", labelSelector=f"{SET_NAME}={name}")
    return sorted(out["items"], key=lambda p: p["metadata"]["name"])


def test_a_leaderworkerset_group_binds_all_or_nothing(
    lws: bed.Kube, control_plane: bed.ControlPlane, start_berth: Any
) -> None:
    kube = lws
    control_plane.create_node("lws-0", cpu="3", labels={"pool": "lws"})  # room for 3 of the group's 4
    berth = start_berth({"grpc": {"auth": {"reads": "open"}}})
    kube.create(leader_worker_set("serve", size=4))

    # LWS's StatefulSets and the StatefulSet controller make the leader and 3
    # workers; LWS's webhook names their Volcano PodGroup on each.
    names = ["serve-0", "serve-0-1", "serve-0-2", "serve-0-3"]
    pods = wait_for("the group's 4 pods", lambda: (p := pods_of(kube, "serve")) and len(p) == 4 and p, 60)
    assert [p["metadata"]["name"] for p in pods] == names
    groups = {p["metadata"]["annotations"].get(GROUP_NAME) for p in pods}
    revision = pods[0]["metadata"]["labels"][REVISION]
    group = f"serve-0-{revision}"  # schedulerprovider.PodGroupNameFmt: <lws>-<group index>-<revision>
    assert groups == {group}
    pg_path = f"/apis/{VOLCANO_API}/namespaces/{NS}/podgroups/{group}"
    pg = wait_for(f"PodGroup {group}", lambda: kube.ok("GET", pg_path))
    assert pg["spec"]["minMember"] == 4
    assert pg["metadata"]["ownerReferences"][0]["name"] == "serve-0"  # owned by the leader pod

    # Three fit, the fourth does not: the PodGroup's minResources (LWS sums the
    # group's requests, utils.CalculatePGMinResources) are not free, so Berth
    # holds every member before placing any (Volcano's enqueue gate), and its
    # Why names the gang.
    held = f'volcano pod group "{NS}/{group}" waits for its minResources to be free: cpu 3 free of 4'
    with grpc.insecure_channel(f"127.0.0.1:{berth.grpc_port}") as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)

        def gated() -> list[str] | None:
            whys = [stub.Why(scheduler_pb2.WhyRequest(namespace=NS, name=n), timeout=10) for n in names]
            return [w.summary for w in whys] if all(w.phase == "Gated" for w in whys) else None

        assert wait_for("every member held by its gang", gated, 60) == [held] * 4
    wait_for("PodGroup phase Pending", lambda: kube.ok("GET", pg_path).get("status", {}).get("phase") == "Pending", 30)
    assert [p["spec"].get("nodeName") for p in pods_of(kube, "serve")] == [None] * 4

    control_plane.create_node("lws-1", cpu="1", labels={"pool": "lws"})  # room for the fourth

    def bound() -> list[str] | None:
        nodes = [p["spec"].get("nodeName") for p in pods_of(kube, "serve")]
        return sorted(nodes) if len(nodes) == 4 and all(nodes) else None

    assert wait_for("all 4 members bound", bound, 60) == ["lws-0", "lws-0", "lws-0", "lws-1"]
    # Running would need kubelets to run the pods; bound is as far as the bed goes.
    wait_for("PodGroup phase Inqueue", lambda: kube.ok("GET", pg_path).get("status", {}).get("phase") == "Inqueue", 30)
