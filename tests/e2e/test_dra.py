"""Dynamic Resource Allocation (issue 15) on the real control plane:
kube-apiserver serving ``resource.k8s.io/v1`` (GA and on by default in
v1.34), kube-controller-manager's ``resourceclaim-controller`` making each
pod's claim from its ResourceClaimTemplate, and Berth (``schedulerName:
berth``) allocating the devices — alone, and beside kube-scheduler's own
DynamicResources plugin.

No kubelet and no DRA driver process run. The test plays the driver's
control-plane part only: it publishes the ResourceSlices a driver
``gpu.example.com`` would publish for its node-local pools (one pool per
node, named after it; 8 "A100" GPUs with 80Gi of memory on each, plus two
"T4"s with 16Gi that the claims' CEL selector must skip) and a DeviceClass
selecting the driver's devices. What the driver's kubelet plugin does
(NodePrepareResources once the pod is bound) is not needed to schedule.

Each scenario has its own namespace and its own three nodes (label
``dra-scenario``, which its pods select), so the scenarios do not share
devices and may run in any order. Checked on every claim: the allocation
names devices that exist and match the selector, is reachable from the
node the pod is bound to (``nodeSelector`` on ``metadata.name``), the pod
is in ``reservedFor``, and no (driver, pool, device) is allocated to two
claims.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import bed
from tests.e2e.kubeutil import condition, pod

DRIVER = "gpu.example.com"
CLASS = "gpu.example.com"
RESOURCE = "/apis/resource.k8s.io/v1"
GPUS_PER_NODE = 8
NODES_PER_SCENARIO = 3
#: The request every pod makes: one GPU, by its attributes (CEL, with the
#: driver's attribute domain and a capacity comparison).
A100_40GI = (
    f'device.attributes["{DRIVER}"].model == "A100" && '
    f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'
)


# ---------------------------------------------------------------- objects


def device_class() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def resource_slice(node: str) -> dict[str, Any]:
    """What the driver's kubelet plugin would publish for ``node``."""

    def gpu(name: str, model: str, memory: str, index: int) -> dict[str, Any]:
        return {
            "name": name,
            "attributes": {"model": {"string": model}, "index": {"int": index}},
            "capacity": {"memory": {"value": memory}},
        }

    devices = [gpu(f"gpu-{i}", "A100", "80Gi", i) for i in range(GPUS_PER_NODE)]
    devices += [gpu(f"t4-{i}", "T4", "16Gi", GPUS_PER_NODE + i) for i in range(2)]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def claim_template(namespace: str, name: str, *, count: int = 1, expression: str = A100_40GI) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": CLASS,
                                "count": count,
                                "selectors": [{"cel": {"expression": expression}}],
                            },
                        }
                    ]
                }
            }
        },
    }


def gpu_pod(name: str, namespace: str, template: str, scenario: str, scheduler: str = "berth") -> dict[str, Any]:
    p = pod(
        name,
        namespace=namespace,
        scheduler=scheduler,
        nodeSelector={"dra-scenario": scenario},
        resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": template}],
    )
    p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return p


# ---------------------------------------------------------------- reading state


def list_pods(kube: bed.Kube, namespace: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in kube.ok("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]}


def list_claims(kube: bed.Kube, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kube.ok("GET", f"{RESOURCE}/namespaces/{namespace}/resourceclaims")["items"]
    return items


def bound(pods: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {n: p["spec"]["nodeName"] for n, p in pods.items() if p["spec"].get("nodeName")}


def unschedulable(pods: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Unbound pods whose PodScheduled=False condition has been written."""
    out = {}
    for n, p in pods.items():
        c = condition(p)
        if not p["spec"].get("nodeName") and c and c["status"] == "False":
            out[n] = c
    return out


def allocated(claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in claims if (c.get("status") or {}).get("allocation")]


def device_ids(claim: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(r["driver"], r["pool"], r["device"]) for r in claim["status"]["allocation"]["devices"]["results"]]


def check_allocations(
    claims: list[dict[str, Any]], pods: dict[str, dict[str, Any]], *, gpus_each: int = 1
) -> dict[tuple[str, str, str], str]:
    """Every allocation is sound and no device is in two claims; the owner of each device."""
    owner: dict[tuple[str, str, str], str] = {}
    by_uid = {p["metadata"]["uid"]: n for n, p in pods.items()}
    for c in allocated(claims):
        name = c["metadata"]["name"]
        ids = device_ids(c)
        assert len(ids) == gpus_each, f"claim {name}: {ids}"
        for dev in ids:
            assert dev not in owner, f"device {dev} allocated to both {owner[dev]} and {name}"
            owner[dev] = name
        reserved = c["status"].get("reservedFor") or []
        assert len(reserved) == 1 and reserved[0]["resource"] == "pods", f"claim {name}: reservedFor {reserved}"
        pod_name = by_uid.get(reserved[0]["uid"])
        assert pod_name is not None and pod_name == reserved[0]["name"], f"claim {name} reserved for {reserved[0]}"
        node = pods[pod_name]["spec"].get("nodeName")
        assert node, f"claim {name} is allocated but its pod {pod_name} is not bound"
        # The owner is the pod, which names the claim in its status.
        assert any(r["uid"] == reserved[0]["uid"] for r in c["metadata"]["ownerReferences"])
        statuses = pods[pod_name]["status"].get("resourceClaimStatuses") or []
        assert [s["resourceClaimName"] for s in statuses] == [name]
        # Node-local pool: the devices are the node's, reachable from it only.
        for driver, pool, device in ids:
            assert driver == DRIVER and pool == node and device.startswith("gpu-"), (name, node, ids)
        terms = c["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
        assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}], terms
        assert "resource.kubernetes.io/delete-protection" in c["metadata"].get("finalizers", [])
    return owner


def create_all(kube: bed.Kube, objs: list[dict[str, Any]]) -> None:
    """All at once: 16 client threads."""
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(kube.create, objs))


# ---------------------------------------------------------------- fixtures

_scenarios = itertools.count()


@pytest.fixture(scope="module")
def dra(control_plane: bed.ControlPlane, kube: bed.Kube, controller_manager: bed.Process) -> bed.Kube:
    """The driver's DeviceClass, with kube-controller-manager making the claims."""
    served = {gv for gv, _ in kube.served()}
    assert "resource.k8s.io/v1" in served, "kube-apiserver does not serve resource.k8s.io/v1"
    kube.create(device_class())
    return kube


@pytest.fixture
def scenario(control_plane: bed.ControlPlane, dra: bed.Kube) -> Iterator[str]:
    """A namespace and three GPU nodes of the test's own (both named after
    it), with the driver's slices and the one-A100 claim template."""
    name = f"dra-{next(_scenarios)}"
    control_plane.ensure_namespace(name)
    for i in range(NODES_PER_SCENARIO):
        node = f"{name}-gpu-{i}"
        control_plane.create_node(node, cpu="32", memory="128Gi", labels={"dra-scenario": name})
        dra.create(resource_slice(node))
    dra.create(claim_template(name, "one-a100"))
    yield name
    dra.request("DELETE", f"/api/v1/namespaces/{name}/pods", gracePeriodSeconds="0")


# ---------------------------------------------------------------- scenarios


def test_100_pods_at_once_get_the_24_gpus_and_no_device_twice(dra: bed.Kube, scenario: str, start_berth: Any) -> None:
    """100 pods asking for one A100 each, created at once, 24 A100s: exactly
    24 are bound, each with its own device and its claim reserved for it;
    the other 76 wait, unschedulable."""
    kube, ns = dra, scenario
    start_berth()
    create_all(kube, [gpu_pod(f"burst-{i:03d}", ns, "one-a100", ns) for i in range(100)])

    def settled() -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]] | None:
        pods, claims = list_pods(kube, ns), list_claims(kube, ns)
        if len(bound(pods)) == 24 and len(unschedulable(pods)) == 76 and len(allocated(claims)) == 24:
            return pods, claims
        return None

    pods, claims = wait_for("24 bound, 76 unschedulable", settled, 60, interval=0.5)
    assert len(claims) == 100, "kube-controller-manager made one claim per pod"
    owner = check_allocations(claims, pods)
    assert len(owner) == 24
    assert collections.Counter(pool for _, pool, _ in owner) == {
        f"{ns}-gpu-{i}": GPUS_PER_NODE for i in range(NODES_PER_SCENARIO)
    }
    assert all(c["reason"] == "Unschedulable" for c in unschedulable(pods).values())
    # Nothing changes afterwards: no 25th pod is bound once the rest is unschedulable.
    assert len(bound(list_pods(kube, ns))) == 24


@pytest.mark.parametrize(
    ("template", "count", "expression", "why"),
    [
        # More GPUs than any node has.
        ("nine-a100", 9, A100_40GI, "9 devices needed, 8 of 8 matching devices are free"),
        # A model no node has.
        ("one-h100", 1, f'device.attributes["{DRIVER}"].model == "H100"', "no device matches the selectors"),
    ],
)
def test_a_pod_asking_for_more_than_exists_waits_with_the_reason(
    dra: bed.Kube, scenario: str, start_berth: Any, template: str, count: int, expression: str, why: str
) -> None:
    kube, ns = dra, scenario
    start_berth()
    kube.create(claim_template(ns, template, count=count, expression=expression))
    kube.create(gpu_pod("greedy", ns, template, ns))

    def waiting() -> dict[str, Any] | None:
        return unschedulable(list_pods(kube, ns)).get("greedy")

    c = wait_for("greedy to be unschedulable", waiting, 30)
    assert c["reason"] == "Unschedulable"
    message = c["message"]
    assert message.startswith("0/"), message
    # kube-scheduler's reason, then Berth's: which claim and request, and why.
    assert f"{NODES_PER_SCENARIO} cannot allocate all claims" in message, message
    claim = list_claims(kube, ns)[0]["metadata"]["name"]
    assert f"claim {ns}/{claim}, request gpu: {why}" in message, message
    assert not allocated(list_claims(kube, ns))


def test_berth_and_kube_scheduler_share_nodes_and_never_double_book(
    control_plane: bed.ControlPlane, dra: bed.Kube, scenario: str, start_berth: Any
) -> None:
    """Both schedulers run all along on the same three nodes (24 A100s);
    each wave of pods is created at once for one of them: kube-scheduler 8,
    Berth 12 (all fit beside kube-scheduler's 8), kube-scheduler 8 more
    (only 4 fit), Berth 2 more (none fit). Each sees the other's allocations
    through the claims' status, the only channel between two schedulers.

    Waves, not one burst for both: neither scheduler can see the other's
    in-flight allocations (chosen, not yet written to the claim), so two
    schedulers allocating from the same pools *at the same moment* can
    hand one device to two claims (kubernetes/kubernetes#128980); measured
    here with 20 + 20 interleaved pods created at once, 1 to 12 of the 24
    devices were doubly allocated in 3 of 4 rounds. The guarantee is only
    that a written allocation is never handed out again."""
    kube, ns = dra, scenario
    start_berth()
    ks = control_plane.start_kube_scheduler({}, name=f"kube-scheduler-{ns}")
    try:
        waves = [("default-scheduler", 8, 8), ("berth", 12, 12), ("default-scheduler", 8, 4), ("berth", 2, 0)]
        for w, (scheduler, n, fit) in enumerate(waves):
            names = [f"w{w}-{scheduler.split('-')[0]}-{i}" for i in range(n)]
            create_all(kube, [gpu_pod(name, ns, "one-a100", ns, scheduler=scheduler) for name in names])

            def settled(names: list[str] = names, fit: int = fit) -> dict[str, dict[str, Any]] | None:
                pods = list_pods(kube, ns)
                mine = {k: v for k, v in pods.items() if k in names}
                ok = len(bound(mine)) == fit and len(unschedulable(mine)) == len(names) - fit
                return pods if ok else None

            pods = wait_for(f"wave {w} ({scheduler}): {fit}/{n} bound", settled, 45, interval=0.5)
            owner = check_allocations(list_claims(kube, ns), pods)
            assert len(owner) == sum(f for _, _, f in waves[: w + 1])
        assert len(owner) == 24
        by = collections.Counter(pods[n]["spec"]["schedulerName"] for n in bound(pods))
        assert by == {"default-scheduler": 12, "berth": 12}
        # kube-scheduler's and Berth's reasons for the pods that did not fit.
        for name, c in unschedulable(pods).items():
            assert "cannot allocate all claims" in c["message"], (name, c)
    finally:
        ks.stop()


@pytest.mark.skipif(bed.KUBERNETES_VERSION < "v1.37", reason="DeviceTaintRule is served from 1.37")
def test_device_taint_rules_keep_pods_off_tainted_devices_until_deleted(
    dra: bed.Kube, scenario: str, start_berth: Any
) -> None:
    """DeviceTaintRules (resource.k8s.io/v1, DRADeviceTaints GA in 1.37) taint
    every device of the scenario's pools: a pod asking for one waits; the
    rules deleted, it binds (the informer's delete requeues it)."""
    kube, ns = dra, scenario
    rules = [f"{ns}-taint-{i}" for i in range(NODES_PER_SCENARIO)]
    for i, name in enumerate(rules):
        kube.create(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceTaintRule",
                "metadata": {"name": name},
                "spec": {
                    "deviceSelector": {"driver": DRIVER, "pool": f"{ns}-gpu-{i}"},
                    "taint": {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"},
                },
            }
        )
    start_berth()
    kube.create(gpu_pod("careful", ns, "one-a100", ns))
    c = wait_for("careful to be unschedulable", lambda: unschedulable(list_pods(kube, ns)).get("careful"), 30)
    assert f"{NODES_PER_SCENARIO} cannot allocate all claims" in c["message"], c["message"]
    for name in rules:
        kube.ok("DELETE", f"{RESOURCE}/devicetaintrules/{name}")
    pods = wait_for("careful to bind", lambda: bound(list_pods(kube, ns)) or None, 30)
    assert set(pods) == {"careful"}


@pytest.mark.skipif(
    bed.KUBERNETES_VERSION < "v1.36",
    reason="DRAExtendedResource is alpha and off in 1.35: the API server drops DeviceClass.extendedResourceName",
)
def test_an_extended_resource_a_device_class_names_is_allocated_through_a_claim_berth_creates(
    dra: bed.Kube, scenario: str, start_berth: Any
) -> None:
    """DRAExtendedResource (GA in 1.37): a pod asking for ``gpu.example.com/a100: 2``,
    which no node advertises but a DeviceClass names, is bound with two
    A100s through the claim Berth creates at PreBind as kube-scheduler does
    (``generateName`` ``<pod>-extended-resources-``, the annotation, the pod
    as controller), and the pod's ``status.extendedResourceClaimStatus`` names it."""
    kube, ns = dra, scenario
    name = f"a100-{ns}"
    kube.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {
                "selectors": [{"cel": {"expression": A100_40GI}}],
                "extendedResourceName": f"gpu.example.com/{name}",
            },
        }
    )
    start_berth()
    p = pod("extended", namespace=ns, scheduler="berth", nodeSelector={"dra-scenario": ns})
    p["spec"]["containers"][0]["resources"] = {
        "requests": {f"gpu.example.com/{name}": "2"},
        "limits": {f"gpu.example.com/{name}": "2"},
    }
    kube.create(p)

    def scheduled() -> dict[str, Any] | None:
        got = list_pods(kube, ns).get("extended")
        ok = got and got["spec"].get("nodeName") and got.get("status", {}).get("extendedResourceClaimStatus")
        return got if ok else None

    got = wait_for("the pod bound with its extended-resource claim", scheduled, 60)
    status = got["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"] == [
        {"containerName": "c", "resourceName": f"gpu.example.com/{name}", "requestName": "container-0-request-0"}
    ]
    (claim,) = [c for c in list_claims(kube, ns) if c["metadata"]["name"] == status["resourceClaimName"]]
    md = claim["metadata"]
    assert md["generateName"] == "extended-extended-resources-"
    assert md["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    (owner,) = md["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Pod",
        "extended",
        got["metadata"]["uid"],
        True,
    )
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 2 and {r["pool"] for r in results} == {got["spec"]["nodeName"]}
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["extended"]
