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

LWS's webhooks are served on 127.0.0.1 with a certificate this module
makes (its internal cert rotation, which wants an in-cluster Secret and
Service, is off), and registered with ``url:`` clientConfigs built from the
module's own ``config/webhook`` manifests and kustomize patches, so the paths,
rules and objectSelectors are LWS's, not guessed.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from berth.api.v1 import scheduler_pb2, scheduler_pb2_grpc
from tests.certs import CA
from tests.e2e import kubeutil
from tests.e2e.conftest import unavailable, wait_for
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
#: The wrapper module build-lws.sh builds from; it pins LWS's version.
WRAPPER = Path(__file__).parent / "controlplane" / "lws" / "go.mod"
VOLCANO_CRD = Path(__file__).parent / "crds" / "scheduling.volcano.sh_podgroups.yaml"


def lws_dir() -> Path:
    """build-lws.sh's output for the pinned version (the binary, CRDs, webhook manifests)."""
    pinned = re.search(r"^require sigs\.k8s\.io/lws (v\S+)$", WRAPPER.read_text(), re.M)
    assert pinned, f"{WRAPPER} does not require sigs.k8s.io/lws"
    root = os.environ.get("BERTH_E2E_CACHE") or str(Path.home() / ".cache" / "berth-e2e")
    return Path(root) / "shared" / "lws" / pinned.group(1)


def webhook_configurations(webhook_dir: Path, url: str, ca_bundle: bytes) -> list[dict[str, Any]]:
    """LWS's Mutating/ValidatingWebhookConfigurations as its kustomization
    builds them (manifests.yaml with the patches that add objectSelectors),
    each webhook's ``service`` replaced by ``url`` + its path."""
    docs = [d for d in yaml.safe_load_all((webhook_dir / "manifests.yaml").read_text()) if d]
    kustomization = yaml.safe_load((webhook_dir / "kustomization.yaml").read_text())
    for patch in kustomization.get("patches", []):
        target = next(d for d in docs if d["kind"] == patch["target"]["kind"])
        for op in yaml.safe_load((webhook_dir / patch["path"]).read_text()):
            prefix = "/webhooks/"
            assert op["op"] == "replace" and op["path"].startswith(prefix), f"unexpected patch {op}"
            target["webhooks"][int(op["path"][len(prefix) :])] = op["value"]
    for doc in docs:
        doc["metadata"]["name"] = f"lws-{doc['metadata']['name']}"
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"{url}{path}", "caBundle": base64.b64encode(ca_bundle).decode()}
    return docs


def established(kube: bed.Kube, crd: dict[str, Any]) -> None:
    name = crd["metadata"]["name"]

    def check() -> bool:
        got = kube.ok("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        return any(
            c["type"] == "Established" and c["status"] == "True" for c in got.get("status", {}).get("conditions", [])
        )

    wait_for(f"CRD {name} established", check)


@pytest.fixture(scope="module")
def lws(control_plane: bed.ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[bed.Kube]:
    """LWS's and Volcano's PodGroup CRDs, kube-controller-manager with the
    StatefulSet controller, and lws-manager with the Volcano provider and its
    webhooks registered; its webhooks answer before this yields."""
    home = lws_dir()
    if not (home / "lws-manager").is_file():
        unavailable(f"lws-manager not built in {home}: run `make e2e-deps` (tests/e2e/controlplane/build-lws.sh)")
    kube = control_plane.kube()
    for path in [*sorted((home / "crd").glob("*.yaml")), VOLCANO_CRD]:
        crd = yaml.safe_load(path.read_text())
        kube.create(crd)
        established(kube, crd)

    def discovered() -> bool:
        kube.rediscover()
        served = kube.served()
        return (LWS_API, "LeaderWorkerSet") in served and (VOLCANO_API, "PodGroup") in served

    wait_for("LeaderWorkerSet and PodGroup in discovery", discovered)
    control_plane.ensure_namespace(NS)
    kcm = control_plane.start_controller_manager(("statefulset-controller",))

    work = tmp_path_factory.mktemp("lws")
    ca = CA(work, "lws-webhook-ca")
    serving = ca.issue("lws-webhook", server=True, hosts=("127.0.0.1",))
    certs = work / "certs"
    certs.mkdir()
    # controller-runtime's webhook server reads tls.crt and tls.key from certDir.
    (certs / "tls.crt").write_bytes(serving.cert.read_bytes())
    (certs / "tls.key").write_bytes(serving.key.read_bytes())
    webhook_port, probe_port = bed.free_port(), bed.free_port()
    # config.lws.x-k8s.io/v1alpha1 Configuration (api/config/v1alpha1/configuration_types.go, v0.9.0).
    config = {
        "apiVersion": "config.lws.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(certs)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe_port}"},
        "metrics": {"bindAddress": "0"},  # controller-runtime: "0" serves no metrics
        "gangSchedulingManagement": {"schedulerProvider": "volcano"},
    }
    config_path = work / "lws-config.yaml"
    config_path.write_text(yaml.safe_dump(config))
    manager = control_plane._spawn(
        "lws-manager",
        [str(home / "lws-manager"), f"--config={config_path}", "--zap-log-level=info"],
        {"KUBECONFIG": str(control_plane.admin_kubeconfig)},
    )
    registered: list[dict[str, Any]] = []
    try:
        wait_for(
            "lws-manager /readyz",
            lambda: (
                _alive(manager)
                and urllib.request.urlopen(f"http://127.0.0.1:{probe_port}/readyz", timeout=1).status == 200
            ),
            60,
        )
        configs = webhook_configurations(home / "webhook", f"https://127.0.0.1:{webhook_port}", ca.path.read_bytes())
        for cfg in configs:
            kube.create(cfg)
            registered.append(cfg)
        # Ready is not serving: a dry-run create passes through both of
        # LWS's LeaderWorkerSet webhooks only once the webhook server answers.
        probe = leader_worker_set("probe", size=2)
        wait_for(
            "LWS's webhooks answering",
            lambda: (
                _alive(manager)
                and kube.request("POST", f"/apis/{LWS_API}/namespaces/{NS}/leaderworkersets", probe, dryRun="All")[0]
                == 201
            ),
            60,
        )
        yield kube
    finally:
        for cfg in registered:
            with contextlib.suppress(Exception):
                kube.delete(cfg)
        manager.stop()
        kcm.stop()


def _alive(proc: bed.Process) -> bool:
    if not proc.alive():
        raise AssertionError(f"{proc.name} exited ({proc.proc.returncode}):\n{proc.tail()}")
    return True


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
