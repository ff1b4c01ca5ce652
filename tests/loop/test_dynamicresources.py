"""Dynamic Resource Allocation through the running loop, in virtual time: the
embedded cluster holds the DeviceClass, the ResourceSlices and the claims;
DynamicResources allocates in Filter/Reserve and writes the claims in
PreBind, and the claims are the only record of who holds a device."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, ClassVar

import msgspec

from berth.cache.infos import PodInfo
from berth.cluster import dra, model
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.testing import make_node, make_pod, register
from tests.loop.conftest import Berth, make_config, running

DRIVER = "gpu.example.com"
GPU_CLASS = dra.DeviceClass(
    metadata=model.ObjectMeta(name="gpu"),
    spec=dra.DeviceClassSpec(selectors=[dra.DeviceSelector(cel=dra.CELDeviceSelector(f'device.driver == "{DRIVER}"'))]),
)


def gpu_slice(node: str, gpus: int, **device: Any) -> dra.ResourceSlice:
    """``gpus`` GPUs on ``node``, each with ``device``'s fields too."""
    return msgspec.convert(
        {
            "metadata": {"name": f"{node}-gpus"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "resourceSliceCount": 1},
                "devices": [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}, **device} for i in range(gpus)],
            },
        },
        dra.ResourceSlice,
    )


def gpu_claim(name: str, **status: Any) -> dra.ResourceClaim:
    return msgspec.convert(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
            "status": status,
        },
        dra.ResourceClaim,
    )


def claiming_pod(name: str, claim: str) -> model.Pod:
    return make_pod(
        name,
        scheduler_name="berth",
        requests={"cpu": "100m"},
        spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]},
    )


def devices(berth: Berth) -> list[tuple[str, str, str]]:
    """Every device any claim's allocation holds, once per claim holding it."""
    out = []
    for c in berth.cluster.resource_claims.values():
        if c.status.allocation is not None:
            out.extend((r.driver, r.pool, r.device) for r in c.status.allocation.devices.results)
    return out


def gpu_nodes(berth: Berth, *names: str, gpus: int = 8) -> None:
    berth.nodes(*(make_node(n, cpu="64", memory="256Gi", pods=110) for n in names))
    berth.cluster.upsert_device_classes([GPU_CLASS])
    berth.cluster.upsert_resource_slices([gpu_slice(n, gpus) for n in names])


async def test_twenty_pods_share_sixteen_gpus_without_double_booking(berth: Berth) -> None:
    gpu_nodes(berth, "a", "b")
    berth.cluster.upsert_resource_claims([gpu_claim(f"c{i:02}") for i in range(20)])
    berth.pods(*(claiming_pod(f"p{i:02}", f"c{i:02}") for i in range(20)))
    await berth.settle()

    bound = berth.bound()
    assert len(bound) == 16
    assert Counter(bound.values()) == {"a": 8, "b": 8}
    held = devices(berth)
    assert len(held) == 16 and len(set(held)) == 16  # never a device twice
    assert berth.core.dra.pending_allocations() == []
    for key, node in bound.items():
        claim = berth.cluster.resource_claims[key.replace("/p", "/c")]
        assert claim.status.reserved_for == [
            dra.ResourceClaimConsumerReference(
                resource="pods", name=key.split("/")[1], uid=f"uid-{key.replace('/', '-')}"
            )
        ]
        assert dra.DELETE_PROTECTION_FINALIZER in claim.metadata.finalizers
        (result,) = claim.status.allocation.devices.results  # type: ignore[union-attr]
        assert result.pool == node  # the device is on the node the pod got
    pending = sorted(k for k in berth.cluster.pods if k not in bound)
    assert len(pending) == 4
    for key in pending:
        assert berth.phase(key) == "Unschedulable"
        claim = key.replace("/p", "/c")
        message = berth.decision(key).message
        assert message.startswith(
            f"0/2 nodes are available: 2 cannot allocate all claims, "
            f"2 claim {claim}, request gpu: all 8 matching devices are allocated."
        ), message
        assert berth.cluster.resource_claims[claim].status.allocation is None


async def test_an_allocated_claim_pins_its_pod_to_the_claims_node(berth: Berth) -> None:
    gpu_nodes(berth, "a", "b")
    # Allocated elsewhere (kube-scheduler, say) to gpu-3 on b; not yet reserved.
    selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}
    allocation = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "b", "device": "gpu-3"}]}}
    berth.cluster.upsert_resource_claims([gpu_claim("pinned", allocation={**allocation, "nodeSelector": selector})])
    berth.pods(claiming_pod("p", "pinned"), *(make_pod(f"filler-{i}", scheduler_name="berth") for i in range(2)))
    await berth.settle()
    assert berth.node_of("default/p") == "b"
    claim = berth.cluster.resource_claims["default/pinned"]
    assert [r.name for r in claim.status.reserved_for] == ["p"]
    assert claim.status.allocation is not None and claim.status.allocation.devices.results[0].device == "gpu-3"
    # ... and that device is not handed to anyone else.
    berth.cluster.upsert_resource_claims([gpu_claim(f"more{i}") for i in range(8)])
    berth.pods(*(claiming_pod(f"q{i}", f"more{i}") for i in range(8)))
    await berth.settle()
    held = devices(berth)
    assert len(held) == len(set(held)) == 9
    assert sum(1 for k in berth.bound() if k.startswith("default/q")) == 8


class RejectFirstAttempt:
    """Permit rejects each pod once: its Reserve happened, so Unreserve must undo it."""

    NAME: ClassVar[str] = "RejectFirstAttempt"
    Args: ClassVar[None] = None
    seen: ClassVar[set[str]] = set()

    def __init__(self, args: None = None, handle: Handle | None = None) -> None:
        pass

    def events_to_register(self) -> list[fw.ClusterEvent]:
        return [fw.ClusterEvent("ResourceSlice", fw.ActionType.ADD | fw.ActionType.UPDATE)]

    def permit(self, state: fw.CycleState, pod: PodInfo, node: str) -> tuple[fw.Status, float]:
        if pod.uid in self.seen:
            return fw.SUCCESS, 0.0
        self.seen.add(pod.uid)
        return fw.Status.unschedulable("rejected once", plugin=self.NAME), 0.0


async def test_unreserve_releases_the_in_flight_device() -> None:
    register(RejectFirstAttempt)
    RejectFirstAttempt.seen = set()
    profile = {"schedulerName": "berth", "plugins": {"multiPoint": {"enabled": [{"name": RejectFirstAttempt.NAME}]}}}
    async with running(make_config(profiles=[profile])) as berth:
        gpu_nodes(berth, "a", gpus=1)
        berth.cluster.upsert_resource_claims([gpu_claim("first"), gpu_claim("second")])
        berth.pods(claiming_pod("first", "first"))
        await berth.settle()
        # Rejected at Permit after Reserve put the GPU in flight: Unreserve
        # gave it back, and nothing was written.
        assert berth.node_of("default/first") == ""
        # A Permit rejection reads as a FitError on the node (schedule_one.go).
        assert berth.decision("default/first").message == "0/1 nodes are available: 1 rejected once."
        assert berth.core.dra.pending_allocations() == []
        assert berth.core.dra.allocated_devices() == set()
        assert devices(berth) == []
        # Retried (a slice event): the same GPU, allocated once.
        berth.cluster.upsert_resource_slices([gpu_slice("a", 1)])
        await berth.settle()
        assert berth.node_of("default/first") == "a"
        assert berth.core.dra.pending_allocations() == []
        # The second pod finds the device taken (by the claim), not in flight.
        berth.pods(claiming_pod("second", "second"))
        await berth.settle()
        assert berth.node_of("default/second") == ""
        assert "all 1 matching devices are allocated" in berth.decision("default/second").message
        assert devices(berth) == [(DRIVER, "a", "gpu-0")]


async def test_a_rejected_reservation_lets_the_next_pod_take_the_device() -> None:
    register(RejectFirstAttempt)
    RejectFirstAttempt.seen = set()
    profile = {"schedulerName": "berth", "plugins": {"multiPoint": {"enabled": [{"name": RejectFirstAttempt.NAME}]}}}
    async with running(make_config(profiles=[profile])) as berth:
        gpu_nodes(berth, "a", gpus=1)
        berth.cluster.upsert_resource_claims([gpu_claim("first"), gpu_claim("second")])
        # "second" was seen already: only "first" is rejected, after Reserve
        # put the GPU in flight for it; Unreserve must give it back at once.
        RejectFirstAttempt.seen.add("uid-default-second")
        berth.pods(claiming_pod("first", "first"), claiming_pod("second", "second"))
        await berth.settle()
        assert berth.node_of("default/second") == "a"
        assert berth.node_of("default/first") == ""
        assert devices(berth) == [(DRIVER, "a", "gpu-0")]
        assert berth.core.dra.pending_allocations() == []


async def test_a_pod_waiting_for_binding_conditions_has_the_binding_conditions_pending_event(berth: Berth) -> None:
    """PreBind records BindingConditionsPending before it waits
    (dynamicresources.go v1.37.2), in the pod's events with Scheduled."""
    berth.nodes(make_node("a", cpu="64", memory="256Gi", pods=110))
    berth.cluster.upsert_device_classes([GPU_CLASS])
    # One GPU its driver must attach before a pod may bind.
    berth.cluster.upsert_resource_slices(
        [gpu_slice("a", 1, bindingConditions=["attached"], bindingFailureConditions=["failed"])]
    )
    berth.cluster.upsert_resource_claims([gpu_claim("c")])
    berth.pods(claiming_pod("p", "c"))
    pending = ("default/p", "BindingConditionsPending", "waiting for binding conditions for device on node a")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while pending not in berth.cluster.events:
        assert loop.time() < deadline, berth.cluster.events
        await asyncio.sleep(1)
    assert berth.node_of("default/p") == ""  # PreBind waits for the driver
    # The driver attaches the device: its binding condition is true.
    claim = berth.cluster.resource_claims["default/c"]
    attached = dra.AllocatedDeviceStatus(
        driver=DRIVER, pool="a", device="gpu-0", conditions=[{"type": "attached", "status": "True"}]
    )
    berth.cluster.upsert_resource_claims(
        [msgspec.structs.replace(claim, status=msgspec.structs.replace(claim.status, devices=[attached]))]
    )
    await berth.settle()
    assert berth.node_of("default/p") == "a"
    scheduled = ("default/p", "Scheduled", "Successfully assigned default/p to a")
    assert [e for e in berth.cluster.events if e[0] == "default/p"] == [pending, scheduled]


async def test_a_pod_waits_at_pre_enqueue_until_its_claim_exists(berth: Berth) -> None:
    gpu_nodes(berth, "a")
    berth.pods(claiming_pod("p", "later"))
    await berth.settle()
    assert berth.phase("default/p") == "Gated"
    assert berth.decision("default/p").message == 'could not find ResourceClaim "default/later"'
    berth.cluster.upsert_resource_claims([gpu_claim("later")])
    await berth.settle()
    assert berth.node_of("default/p") == "a"
    assert [r.name for r in berth.cluster.resource_claims["default/later"].status.reserved_for] == ["p"]


async def test_a_templated_claim_waits_for_the_controller_to_name_it(berth: Berth) -> None:
    gpu_nodes(berth, "a")
    pod = make_pod(
        "p", scheduler_name="berth", spec={"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-t"}]}
    )
    berth.pods(pod)
    await berth.settle()
    assert berth.decision("default/p").message == 'pod "default/p": ResourceClaim not created yet'
    # What kube-controller-manager's resourceclaim controller does: the
    # claim, owned by the pod, then the pod's status naming it.
    owned = gpu_claim("p-gpu-x1")
    owned.metadata.owner_references = [
        model.OwnerReference(api_version="v1", kind="Pod", name="p", uid=pod.metadata.uid, controller=True)
    ]
    berth.cluster.upsert_resource_claims([owned])
    named = msgspec.structs.replace(
        berth.cluster.pods["default/p"],
        status=model.PodStatus(
            resource_claim_statuses=[model.PodResourceClaimStatus(name="gpu", resource_claim_name="p-gpu-x1")]
        ),
    )
    berth.pods(named)
    await berth.settle()
    assert berth.node_of("default/p") == "a"


async def test_pods_asking_for_an_extended_resource_a_class_names_get_devices_through_claims_of_their_own(
    berth: Berth,
) -> None:
    """DRAExtendedResource, embedded: no node advertises example.com/gpu, the
    class ``gpu`` names it; each bound pod got a claim created at PreBind
    (kept in the cluster model), named in its ``status.extendedResourceClaimStatus``,
    and no device is held twice."""
    gpu_nodes(berth, "a", "b", gpus=4)
    spec = msgspec.structs.replace(GPU_CLASS.spec, extended_resource_name="example.com/gpu")
    named = msgspec.structs.replace(GPU_CLASS, spec=spec)
    berth.cluster.upsert_device_classes([named])
    berth.pods(
        *(make_pod(f"e{i}", scheduler_name="berth", requests={"cpu": "100m", "example.com/gpu": 2}) for i in range(5))
    )
    await berth.settle()

    bound = berth.bound()
    assert len(bound) == 4
    held = devices(berth)
    assert len(held) == 8 and len(set(held)) == 8
    for key, node in bound.items():
        status = berth.cluster.pods[key].status.extended_resource_claim_status
        assert status is not None
        claim = berth.cluster.resource_claims[f"default/{status.resource_claim_name}"]
        assert claim.metadata.annotations == {"resource.kubernetes.io/extended-resource-claim": "true"}
        assert {r.pool for r in claim.status.allocation.devices.results} == {node}  # type: ignore[union-attr]
        assert [r.name for r in claim.status.reserved_for] == [key.split("/")[1]]
    assert berth.core.dra.pending_allocations() == []
