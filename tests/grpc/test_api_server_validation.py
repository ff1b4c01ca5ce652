"""What the API server refuses, the gRPC doors refuse with its messages:
``Submit``'s pods (names and values of the fields that name things, from
``pkg/apis/core/validation`` ValidatePodSpec and apimachinery's
``pkg/util/validation``), and JSON nested past a fixed depth in the Cluster
feed's opaque DRA parameters (``INVALID_ARGUMENT`` naming the field, never
``INTERNAL: RecursionError``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from berth.adapters.grpc import convert
from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, model_pb2, scheduler_pb2, scheduler_pb2_grpc
from berth.cluster import validation
from berth.testing import make_pod
from tests.grpc.conftest import serving
from tests.grpc.test_storage_dra_feed import DRIVER, gpu_claim, gpu_class

# ---------------------------------------------------------------- deep JSON

DEPTH = validation.MAX_JSON_DEPTH


def _arrays(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def _objects(depth: int) -> bytes:
    return b'{"a":' * (depth - 1) + b'{"a":"[[[["}' + b"}" * (depth - 1)  # brackets in a string do not count


def _class(parameters: bytes) -> tuple[str, Any]:
    c = gpu_class()
    c.spec.config.append(
        model_pb2.DeviceClassConfiguration(
            opaque=model_pb2.OpaqueDeviceConfiguration(driver=DRIVER, parameters=parameters)
        )
    )
    return "device_classes[0].spec.config[0]", cluster_pb2.UpsertDeviceClassesRequest(device_classes=[c])


def _claim(parameters: bytes) -> tuple[str, Any]:
    c = gpu_claim("gpu-claim")
    opaque = model_pb2.OpaqueDeviceConfiguration(driver=DRIVER, parameters=parameters)
    c.spec.devices.config.append(model_pb2.DeviceClaimConfiguration(requests=["gpu"], opaque=opaque))
    return "resource_claims[0].spec.devices.config[0]", cluster_pb2.UpsertResourceClaimsRequest(resource_claims=[c])


def _allocated_claim(parameters: bytes) -> tuple[str, Any]:
    c = gpu_claim("gpu-claim")
    opaque = model_pb2.OpaqueDeviceConfiguration(driver=DRIVER, parameters=parameters)
    c.status.allocation.devices.config.append(
        model_pb2.DeviceAllocationConfiguration(source="FromClaim", requests=["gpu"], opaque=opaque)
    )
    path = "resource_claims[0].status.allocation.devices.config[0]"
    return path, cluster_pb2.UpsertResourceClaimsRequest(resource_claims=[c])


UPSERTS: list[tuple[str, str, Callable[[bytes], tuple[str, Any]]]] = [
    ("a DeviceClass's config", "UpsertDeviceClasses", _class),
    ("a ResourceClaim's config", "UpsertResourceClaims", _claim),
    ("a ResourceClaim's allocated config", "UpsertResourceClaims", _allocated_claim),
]
DOCUMENTS: list[tuple[str, bytes, bool]] = [
    ("arrays at the bound", _arrays(DEPTH), True),
    ("objects at the bound", _objects(DEPTH), True),
    ("arrays one past the bound", _arrays(DEPTH + 1), False),
    ("objects one past the bound", _objects(DEPTH + 1), False),
    ("1000 deep", _arrays(1000), False),
    ("past the API server's own bound", _arrays(10_001), False),
]


@pytest.mark.parametrize(("rpc", "build"), [u[1:] for u in UPSERTS], ids=[u[0] for u in UPSERTS])
async def test_opaque_parameters_nested_past_the_bound_are_invalid_argument_naming_the_field(
    rpc: str, build: Callable[[bytes], tuple[str, Any]]
) -> None:
    async with serving() as served:
        channel = served.channel()
        call = getattr(cluster_pb2_grpc.ClusterStub(channel), rpc)
        for what, parameters, accepted in DOCUMENTS:
            path, request = build(parameters)
            if accepted:
                assert (await call(request)).upserted == 1, what
                continue
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call(request)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, what
            assert refused.value.details() == (
                f'{path}.opaque.parameters: Invalid value: "<value omitted>": '
                f"error parsing data as JSON: exceeded max depth of {DEPTH}"
            ), what
        await channel.close()


# ---------------------------------------------------------------- Submit

LABEL_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
DNS_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def _pod(change: Callable[[model_pb2.Pod], object]) -> model_pb2.Pod:
    p = convert.pod_to_pb(make_pod("web", requests={"cpu": "100m"}, scheduler_name="berth"))
    change(p)
    return p


def _claims(*claims: model_pb2.PodResourceClaim) -> Callable[[model_pb2.Pod], object]:
    return lambda p: p.spec.resource_claims.extend(claims)


def _gates(*names: str) -> Callable[[model_pb2.Pod], object]:
    return lambda p: p.spec.scheduling_gates.extend(model_pb2.SchedulingGate(name=n) for n in names)


def _request(name: str) -> Callable[[model_pb2.Pod], object]:
    return lambda p: p.spec.containers[0].requests.__setitem__(name, 1)


def _resources(amounts: dict[str, int]) -> Callable[[model_pb2.Pod], object]:
    """Requested and limited alike (extended resources and hugepages cannot be overcommitted)."""

    def change(p: model_pb2.Pod) -> None:
        p.spec.containers[0].requests.update(amounts)
        p.spec.containers[0].limits.update(amounts)

    return change


def _toleration(**fields: Any) -> Callable[[model_pb2.Pod], object]:
    return lambda p: p.spec.tolerations.append(model_pb2.Toleration(**fields))


#: A DNS subdomain of 251 characters: "requests." + it is longer than one may be.
LONG_PREFIX = ("a" * 60 + ".") * 4 + "example"
# Shown as Berth shows a long bad value: its first 128 characters (berth.cluster.validation).
LONG_SHOWN = f'"{LONG_PREFIX}/gpu"'[:128] + f"...({len(LONG_PREFIX) + 6 - 128} more characters)"

# (what, the change, the API server's field error for it)
REFUSED: list[tuple[str, Callable[[model_pb2.Pod], object], str]] = [
    (
        "a scheduling gate that is not a qualified name",
        _gates("bad gate"),
        f'spec.schedulingGates[0]: Invalid value: "bad gate": name part {LABEL_MSG}',
    ),
    (
        "a scheduling gate with an empty prefix",
        _gates("/wait"),
        'spec.schedulingGates[0]: Invalid value: "/wait": prefix part must be non-empty',
    ),
    (
        "a repeated scheduling gate",
        _gates("example.com/wait", "example.com/wait"),
        'spec.schedulingGates[1]: Duplicate value: "example.com/wait"',
    ),
    (
        "a claim name that is not a DNS label",
        _claims(model_pb2.PodResourceClaim(name="GPU", resource_claim_name="gpu-claim")),
        f'spec.resourceClaims[0].name: Invalid value: "GPU": {DNS_LABEL_MSG}',
    ),
    (
        "a claim name with a dot",
        _claims(model_pb2.PodResourceClaim(name="gpu.0", resource_claim_name="gpu-claim")),
        'spec.resourceClaims[0].name: Invalid value: "gpu.0": must not contain dots',
    ),
    (
        "a claim without a name",
        _claims(model_pb2.PodResourceClaim(resource_claim_name="gpu-claim")),
        "spec.resourceClaims[0].name: Required value",
    ),
    (
        "a repeated claim name",
        _claims(
            model_pb2.PodResourceClaim(name="gpu", resource_claim_name="a"),
            model_pb2.PodResourceClaim(name="gpu", resource_claim_name="b"),
        ),
        'spec.resourceClaims[1].name: Duplicate value: "gpu"',
    ),
    (
        "a resourceClaimName that is not a DNS subdomain",
        _claims(model_pb2.PodResourceClaim(name="gpu", resource_claim_name="Claim_1")),
        f'spec.resourceClaims[0].resourceClaimName: Invalid value: "Claim_1": {DNS_SUBDOMAIN_MSG}',
    ),
    (
        "a resourceClaimTemplateName that is not a DNS subdomain",
        _claims(model_pb2.PodResourceClaim(name="gpu", resource_claim_template_name="-t")),
        f'spec.resourceClaims[0].resourceClaimTemplateName: Invalid value: "-t": {DNS_SUBDOMAIN_MSG}',
    ),
    (
        "a claim naming neither a claim nor a template",
        _claims(model_pb2.PodResourceClaim(name="gpu")),
        'spec.resourceClaims[0]: Invalid value: {"Name":"gpu","ResourceClaimName":null,'
        '"ResourceClaimTemplateName":null}: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`',
    ),
    (
        "a nodeSelector value that is not a label value",
        lambda p: p.spec.node_selector.__setitem__("disk", "not valid!"),
        f'spec.nodeSelector: Invalid value: "not valid!": {LABEL_VALUE_MSG}',
    ),
    (
        "a nodeSelector key that is not a qualified name",
        lambda p: p.spec.node_selector.__setitem__("a/b/c", "x"),
        f'spec.nodeSelector: Invalid value: "a/b/c": a valid label key {LABEL_MSG} '
        "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
    ),
    (
        "a toleration value that is not a label value",
        _toleration(key="dedicated", operator="Equal", value="a b", effect="NoSchedule"),
        f'spec.tolerations[0].operator: Invalid value: "a b": {LABEL_VALUE_MSG}',
    ),
    (
        "a toleration value with the default operator",
        _toleration(key="dedicated", value="x" * 64),
        'spec.tolerations[0].operator: Invalid value: "' + "x" * 64 + '": must be no more than 63 characters',
    ),
    (
        "a toleration key that is not a qualified name",
        _toleration(key="bad key", operator="Exists"),
        f'spec.tolerations[0].key: Invalid value: "bad key": name part {LABEL_MSG}',
    ),
    (
        "a toleration without a key that is not Exists",
        _toleration(operator="Equal", value="x"),
        'spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is empty, '
        'which means "match all values and all keys"',
    ),
    (
        "a toleration with seconds but not NoExecute",
        _toleration(key="k", operator="Exists", effect="NoSchedule", toleration_seconds=5),
        "spec.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when "
        "`tolerationSeconds` is set",
    ),
    (
        "a toleration with an unknown effect",
        _toleration(key="k", operator="Exists", effect="NoRun"),
        'spec.tolerations[0].effect: Unsupported value: "NoRun": supported values: '
        '"NoSchedule", "PreferNoSchedule", "NoExecute"',
    ),
    (
        "an unprefixed extended resource",
        _request("gpu"),
        'spec.containers[0].resources.requests[gpu]: Invalid value: "gpu": '
        "must be a standard resource type or fully qualified",
    ),
    (
        "a standard resource that is not a container's",
        _request("pods"),
        'spec.containers[0].resources.requests[pods]: Invalid value: "pods": '
        "must be a standard resource for containers",
    ),
    (
        "an extended resource that is not a qualified name",
        _request("example.com/bad name"),
        'spec.containers[0].resources.requests[example.com/bad name]: Invalid value: "example.com/bad name": '
        f"name part {LABEL_MSG}",
    ),
    (
        "an extended resource whose quota name is not a qualified name",
        _request("requests.example.com/gpu"),
        'spec.containers[0].resources.requests[requests.example.com/gpu]: Invalid value: "requests.example.com/gpu": '
        "doesn't follow extended resource name standard",
    ),
    (
        "an extended resource limit whose quota name is too long",
        lambda p: p.spec.containers[0].limits.__setitem__(LONG_PREFIX + "/gpu", 1),
        f"spec.containers[0].resources.limits[{LONG_PREFIX}/gpu]: Invalid value: {LONG_SHOWN}: "
        "doesn't follow extended resource name standard",
    ),
    (
        "a priorityClassName that is not a DNS subdomain",
        lambda p: setattr(p.spec, "priority_class_name", "High"),
        f'spec.priorityClassName: Invalid value: "High": {DNS_SUBDOMAIN_MSG}',
    ),
]

ACCEPTED: list[tuple[str, Callable[[model_pb2.Pod], object]]] = [
    ("qualified scheduling gates", _gates("example.com/wait", "wait")),
    (
        "a claim by name and one by template",
        _claims(
            model_pb2.PodResourceClaim(name="gpu", resource_claim_name="gpu-claim.v1"),
            model_pb2.PodResourceClaim(name="nic", resource_claim_template_name="nic"),
        ),
    ),
    ("label values in nodeSelector", lambda p: p.spec.node_selector.update({"example.com/disk": "ssd", "empty": ""})),
    (
        "tolerations of every kind",
        lambda p: p.spec.tolerations.extend(
            [
                model_pb2.Toleration(key="k", operator="Equal", value="v", effect="NoExecute", toleration_seconds=5),
                model_pb2.Toleration(key="k2", value=""),
                model_pb2.Toleration(operator="Exists"),
            ]
        ),
    ),
    (
        "standard and extended resources",
        _resources(
            {
                "memory": 1 << 20,
                "ephemeral-storage": 1 << 20,
                "hugepages-2Mi": 2 << 20,
                "example.com/gpu": 1,
                "kubernetes.io/batch-cpu": 1,
            }
        ),
    ),
    ("a priorityClassName", lambda p: setattr(p.spec, "priority_class_name", "system-node-critical")),
]


async def _submit(change: Callable[[model_pb2.Pod], object]) -> scheduler_pb2.SubmitResult:
    async with serving() as served:
        channel = served.channel()
        resp = await scheduler_pb2_grpc.SchedulerStub(channel).Submit(scheduler_pb2.SubmitRequest(pods=[_pod(change)]))
        await channel.close()
    [result] = resp.results
    return result


@pytest.mark.parametrize(("change", "message"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
async def test_submit_refuses_what_the_api_server_refuses_with_its_message(
    change: Callable[[model_pb2.Pod], object], message: str
) -> None:
    result = await _submit(change)
    assert not result.accepted
    assert result.message == f"pods[0].{message}"


@pytest.mark.parametrize("change", [a[1] for a in ACCEPTED], ids=[a[0] for a in ACCEPTED])
async def test_submit_accepts_what_the_api_server_accepts(change: Callable[[model_pb2.Pod], object]) -> None:
    result = await _submit(change)
    assert result.accepted, result.message
