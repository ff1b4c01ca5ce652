"""DynamicResources, ported from kube-scheduler v1.37.2's
pkg/scheduler/framework/plugins/dynamicresources/dynamicresources_test.go
(TestPlugin, Test_computesScore, TestNormalizeScore, TestAllocatorSelection,
TestPostFilterNoOpStatusHasNoUserVisibleReason): the same objects
(``podWithClaimName``, ``pendingClaim``, ``workerNodeSlice``, ...), cases by
their Go names, and the same walk through the extension points —
PreEnqueue, PreFilter, Filter per node, Score and NormalizeScore over the
nodes that passed, Reserve on the best of them, then PreBind (or
Unreserve), or PostFilter when no node did — checking each step's status
and the claims as stored afterwards (the embedded cluster plays the API
server; ``resourceVersion`` and ``uid`` are ignored, as upstream's
``cmpopts.IgnoreFields`` does, and an ``allocationTimestamp`` compares as
set or not, as upstream's ``new(metav1.Time)`` marks it).

Each case runs on Kubernetes 1.37 with that release's gates, overridden
where the Go case sets one (``enableDRADeviceTaints`` ...). The behaviours
that differ per release are tested per release further down (PostFilter's
messages, the allocation timestamp, Score's gate and its 1.35 indexing).

Statuses compare by message, as upstream's ``verify`` does (``ErrorContains``).
Berth's Filter adds which claim and request failed as a second reason after
upstream's "cannot allocate all claims"; the cases check both.

Not ported: the PodGroup cases (GenericWorkload, DRAWorkloadResourceClaims:
off by default, not implemented), the node-allocatable-* and
skip-node-operations cases (alpha), DRA-disabled and
request-admin-access-without-DRAAdminAccess-featuregate (both gates are
locked on in 1.37), "canceled" (a Go context; Berth's Filter is not
cancelled). The binding-conditions metrics are checked after every case's
PreBind. The extended-resource-* cases
(DRAExtendedResource) are in ``tests/dra/test_extended_plugin.py``. The queueing hints
(TestIsSchedulableAfter*) are covered by the loop tests' requeueing.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import numpy as np
import pytest

from berth import dra as allocation
from berth import features, testing
from berth.cache.infos import PodInfo
from berth.cluster import dra, model
from berth.errors import InvalidArgument
from berth.framework import interface as fw
from berth.plugins.dynamicresources import (
    BINDING_CONDITIONS_PENDING,
    NAME,
    DynamicResources,
    allocator_features,
    compute_score,
)

NODE, NODE2, NODE3 = "worker", "worker-2", "worker-3"
DRIVER, DRIVER2 = "some-driver", "some-driver-2"
POD, POD_UID, NS = "my-pod", "1234", "default"
RESOURCE, RESOURCE2 = "my-resource", "my-resource-2"
CLAIM, CLAIM2 = f"{POD}-{RESOURCE}", f"{POD}-{RESOURCE}-2"
CLASS = "my-resource-class"
ATTR = "healthy"
FINALIZER = dra.DELETE_PROTECTION_FINALIZER
#: An allocationTimestamp that is set, whatever its value (upstream's new(metav1.Time)).
STAMPED = "<set>"

Obj = dict[str, Any]


def node(name: str) -> model.Node:
    return testing.make_node(name, labels={"kubernetes.io/hostname": name})


def pod(*, template: bool = False, in_status: bool = False, two: bool = False) -> model.Pod:
    ref: Obj = {"name": RESOURCE, ("resourceClaimTemplateName" if template else "resourceClaimName"): CLAIM}
    refs = [ref, {"name": RESOURCE2, "resourceClaimName": CLAIM2}] if two else [ref]
    p = testing.make_pod(POD, uid=POD_UID, spec={"resourceClaims": refs})
    if in_status:
        p.status.resource_claim_statuses = [model.PodResourceClaimStatus(name=RESOURCE, resource_claim_name=CLAIM)]
    return p


POD_WITH_CLAIM_NAME = pod()
POD_WITH_CLAIM_TEMPLATE = pod(template=True)
POD_WITH_CLAIM_TEMPLATE_IN_STATUS = pod(template=True, in_status=True)
POD_WITH_TWO_CLAIM_NAMES = pod(two=True)


def device_slice(node_name: str, *devices: str, attrs: Obj | None = None, driver: str = DRIVER) -> Obj:
    """st.MakeResourceSlice(node, driver).Device(...)."""
    return {
        "metadata": {"name": f"{node_name}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "resourceSliceCount": 1},
            "devices": [{"name": d, **({"attributes": attrs} if attrs else {})} for d in devices],
        },
    }


def name_selector(node_name: str) -> Obj:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}


def fabric_slice(device: str, driver: str = DRIVER) -> Obj:
    """fabricSlice: a device that binds to the node and has binding conditions
    (upstream's also sets nodeName, which API validation refuses next to a node selector)."""
    return {
        "metadata": {"name": f"{NODE}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeSelector": name_selector(NODE),
            "pool": {"name": NODE, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": device,
                    "bindsToNode": True,
                    "bindingConditions": ["condition"],
                    "bindingFailureConditions": ["failed"],
                }
            ],
        },
    }


def tainted(s: Obj) -> Obj:
    """taintDevices: a NoSchedule taint on every device."""
    out = msgspec.json.decode(msgspec.json.encode(s))
    for d in out["spec"]["devices"]:
        d["taints"] = [{"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}]
    return out


WORKER_SLICE = device_slice(NODE, "instance-1")
LARGE_WORKER_SLICE = device_slice(NODE, "instance-1", "instance-2", "instance-3", "instance-4")
WORKER2_SLICE = device_slice(NODE2, "instance-1", attrs={ATTR: {"bool": True}})
WORKER3_SLICE = device_slice(NODE3, "instance-1", attrs={ATTR: {"bool": True}})
DEVICE_CLASS: Obj = {"metadata": {"name": CLASS}}
BROKEN_SELECTOR: Obj = {"cel": {"expression": f'device.attributes["{DRIVER}"].{ATTR}'}}


def exact(name: str, count: int = 1) -> Obj:
    return {"name": name, "exactly": {"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": count}}


def first_available(name: str, *subs: Obj) -> Obj:
    return {"name": name, "firstAvailable": list(subs)}


def sub(name: str, count: int = 1, selector: str | None = None) -> Obj:
    out: Obj = {"name": name, "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": count}
    if selector is not None:
        out["selectors"] = [{"cel": {"expression": selector}}]
    return out


def claim(
    name: str = CLAIM, *, owned: bool = False, prioritized: bool = False, requests: list[Obj] | None = None
) -> Obj:
    if requests is None:
        requests = [first_available("req-1", sub("subreq-1"))] if prioritized else [exact("req-1")]
    md: Obj = {"name": name, "namespace": NS}
    if owned:
        md["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": POD, "uid": POD_UID, "controller": True}]
    return {"metadata": md, "spec": {"devices": {"requests": requests}}}


def results(*entries: tuple[str, str], driver: str = DRIVER) -> Obj:
    """An allocation of (request, device) pairs on the worker node."""
    return {
        "devices": {"results": [{"request": r, "driver": driver, "pool": NODE, "device": d} for r, d in entries]},
        "nodeSelector": name_selector(NODE),
    }


def allocation_result(request: str = "req-1", device: str = "instance-1", driver: str = DRIVER) -> Obj:
    return results((request, device), driver=driver)


def with_allocation(c: Obj, allocation: Obj | None) -> Obj:
    """st.FromResourceClaim(c).Allocation(a): the finalizer comes with it."""
    out = msgspec.json.decode(msgspec.json.encode(c))
    finalizers = out["metadata"].setdefault("finalizers", [])
    if FINALIZER not in finalizers:
        finalizers.append(FINALIZER)
    out.setdefault("status", {})["allocation"] = msgspec.json.decode(msgspec.json.encode(allocation))
    if allocation is None:
        out["status"].pop("allocation")
        out["status"].pop("devices", None)
    return out


def reserved(c: Obj) -> Obj:
    out = msgspec.json.decode(msgspec.json.encode(c))
    out.setdefault("status", {}).setdefault("reservedFor", []).append({"resource": "pods", "name": POD, "uid": POD_UID})
    return out


def stamped(c: Obj) -> Obj:
    """addAllocationTimestamp."""
    out = msgspec.json.decode(msgspec.json.encode(c))
    out["status"]["allocation"]["allocationTimestamp"] = STAMPED
    return out


def bound(c: Obj) -> Obj:
    """What PreBind writes with the binding gates on: reserved, and allocated at some time."""
    return stamped(reserved(c))


def admin_access(c: Obj) -> Obj:
    out = msgspec.json.decode(msgspec.json.encode(c))
    for r in out["spec"]["devices"]["requests"]:
        r["exactly"]["adminAccess"] = True
    for r in out.get("status", {}).get("allocation", {}).get("devices", {}).get("results", []):
        r["adminAccess"] = True
    return out


def break_cel_in_claim(c: Obj) -> Obj:
    out = msgspec.json.decode(msgspec.json.encode(c))
    for r in out["spec"]["devices"]["requests"]:
        r["exactly"]["selectors"] = [BROKEN_SELECTOR]
    return out


def with_class(c: Obj, class_name: str) -> Obj:
    out = msgspec.json.decode(msgspec.json.encode(c))
    for r in out["spec"]["devices"]["requests"]:
        for e in (r["exactly"],) if "exactly" in r else r["firstAvailable"]:
            e["deviceClassName"] = class_name
    return out


def deleted(c: Obj) -> Obj:
    out = msgspec.json.decode(msgspec.json.encode(c))
    out["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return out


def with_devices(c: Obj, *conditions: tuple[str, str], device: str = "instance-1", driver: str = DRIVER) -> Obj:
    """AllocatedDeviceStatuses: the driver's status of one device, conditions (type, status)."""
    out = msgspec.json.decode(msgspec.json.encode(c))
    out["status"]["devices"] = [
        {
            "driver": driver,
            "pool": NODE,
            "device": device,
            "conditions": [{"type": t, "status": st_} for t, st_ in conditions],
        }
    ]
    return out


def _ago(minutes: float) -> str:
    return (datetime.now(UTC) - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


PENDING = claim(owned=True)
PENDING_PRIORITIZED = claim(owned=True, prioritized=True)
OTHER = claim("not-my-claim")
ALLOCATED = with_allocation(PENDING, allocation_result())
ALLOCATED_PRIORITIZED = with_allocation(PENDING_PRIORITIZED, allocation_result("req-1/subreq-1"))
IN_USE = reserved(ALLOCATED)
OTHER_ALLOCATED = with_allocation(OTHER, allocation_result())
OTHER_ALLOCATED_OTHER_DEVICE = with_allocation(OTHER, allocation_result(device="instance-2"))
WRONG_TOPOLOGY = with_allocation(
    ALLOCATED,
    {
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "no-such-label", "operator": "In", "values": ["no-such-value"]}]}
            ]
        }
    },
)
GOOD_TOPOLOGY = with_allocation(
    ALLOCATED,
    {
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE]}]}
            ]
        }
    },
)
LARGE_CLAIM = claim(requests=[exact(f"req-{i}") for i in range(1, 6)])

#: allocationResultWithBindingConditions (its timestamp: see _ago / stamped).
BINDING_RESULT: Obj = {
    "devices": {
        "results": [
            {
                "request": "req-1",
                "driver": DRIVER,
                "pool": NODE,
                "device": "instance-1",
                "bindingConditions": ["condition"],
                "bindingFailureConditions": ["failed"],
            }
        ]
    },
    "nodeSelector": name_selector(NODE),
}
BIND_CLAIM = with_allocation(PENDING, BINDING_RESULT)
BOUND_CLAIM = with_devices(stamped(BIND_CLAIM), ("condition", "True"), ("failed", "False"))
FAILED_BINDING_CLAIM = with_devices(stamped(BIND_CLAIM), ("condition", "False"), ("failed", "True"))


def _binding_result2() -> Obj:
    r = msgspec.json.decode(msgspec.json.encode(BINDING_RESULT))
    r["devices"]["results"][0].update(request="req-2", driver=DRIVER2, device="instance-2")
    return r


BOUND_CLAIM2 = with_devices(
    stamped(with_allocation(claim(CLAIM2, owned=True), _binding_result2())),
    ("condition", "True"),
    ("failed", "False"),
    device="instance-2",
    driver=DRIVER2,
)
FAILED_BINDING_CLAIM2 = with_devices(
    stamped(with_allocation(claim(CLAIM2, owned=True), _binding_result2())),
    ("condition", "False"),
    ("failed", "True"),
    device="instance-2",
    driver=DRIVER2,
)


def _timed_out(conditions: tuple[tuple[str, str], ...] = ()) -> Obj:
    c = with_allocation(PENDING, BINDING_RESULT)
    c["status"]["allocation"]["allocationTimestamp"] = _ago(10)
    return with_devices(c, *conditions)


# The scoring cases' claims (dynamicresources_test.go v1.37.2).
HEALTHY = f'device.attributes["{DRIVER}"].{ATTR}'
PRIORITIZED_WITH_SELECTOR = claim(
    owned=True, requests=[first_available("req-1", sub("subreq-1", selector=HEALTHY), sub("subreq-2"))]
)
MULTIPLE_PRIORITIZED_REQUESTS = claim(
    owned=True,
    requests=[
        first_available("req-1", sub("subreq-1", 2), sub("subreq-2")),
        first_available("req-2", sub("subreq-1", 2), sub("subreq-2")),
    ],
)
CLAIM2_MULTIPLE_SUBREQUESTS = claim(
    CLAIM2,
    owned=True,
    requests=[first_available("req-1", *(sub(f"subreq-{i}", 5 - i) for i in range(1, 5)))],
)


def st(*reasons: str) -> tuple[str, ...]:
    return reasons


CANNOT = "cannot allocate all claims"
SKIP = "<skip>"


@dataclasses.dataclass
class Case:
    pod: model.Pod
    claims: list[Obj] = dataclasses.field(default_factory=list)
    classes: list[Obj] = dataclasses.field(default_factory=list)
    slices: list[Obj] = dataclasses.field(default_factory=list)
    nodes: list[str] = dataclasses.field(default_factory=lambda: [NODE])
    #: featureGates over 1.37's defaults (the Go case's enable*/disable* fields).
    gates: dict[str, bool] = dataclasses.field(default_factory=dict)
    #: DynamicResourcesArgs.
    args: Obj = dataclasses.field(default_factory=dict)
    #: Claims another pod's Reserve put in flight before this pod's cycle (inFlightClaims).
    in_flight_before: list[Obj] = dataclasses.field(default_factory=list)
    #: Expected statuses (reasons; SKIP; () for success) per step; a step not listed must succeed or not run.
    preenqueue: tuple[str, ...] = ()
    prefilter: tuple[str, ...] = ()
    filter: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    filter_error: bool = False
    #: Score's raw scores and NormalizeScore's, by node (scoreResult, normalizeScoreResult).
    score: dict[str, int] | None = None
    normalized: dict[str, int] | None = None
    postfilter: tuple[str, ...] | None = None
    #: The claims Reserve puts in flight (with those already there).
    in_flight: list[Obj] = dataclasses.field(default_factory=list)
    #: The claims still in flight after PreBind (another pod's).
    in_flight_after: list[Obj] = dataclasses.field(default_factory=list)
    #: The stored claims after PreBind (or PostFilter, or Unreserve), by name; None: unchanged.
    after: dict[str, Obj] | None = None
    #: Changes to the stored claim just before PreBind (a concurrent writer).
    before_prebind: Callable[[Obj], Obj] | None = None
    #: PreBind's error (a prefix of its message); None: PreBind succeeds.
    prebind_error: str | None = None
    #: PreBind waits for binding conditions, having recorded the pod's
    #: BindingConditionsPending event (not upstream's table: its fake
    #: recorder is not checked).
    waits: bool = False
    unreserve_before_prebind: bool = False
    unreserve_after_bind_failure: dict[str, Obj] | None = None


def _drop_finalizer(c: Obj) -> Obj:
    c = msgspec.json.decode(msgspec.json.encode(c))
    c["metadata"].pop("finalizers", None)
    return c


def _add_finalizer(c: Obj) -> Obj:
    c = msgspec.json.decode(msgspec.json.encode(c))
    c["metadata"]["finalizers"] = [FINALIZER]
    return c


def _deallocate(c: Obj) -> Obj:
    c = msgspec.json.decode(msgspec.json.encode(c))
    c["status"].pop("allocation", None)
    return c


def _not_owner(c: Obj) -> Obj:
    c = msgspec.json.decode(msgspec.json.encode(c))
    c["metadata"]["ownerReferences"][0]["uid"] += "123"
    return c


def allocates(**fields: Any) -> Case:
    """The common shape: the pending claim gets the worker's one device
    (in flight after Reserve, written by PreBind with its timestamp)."""
    base: dict[str, Any] = {
        "claims": [PENDING],
        "classes": [DEVICE_CLASS],
        "slices": [WORKER_SLICE],
        "in_flight": [ALLOCATED],
        "after": {CLAIM: bound(ALLOCATED)},
    }
    return Case(POD_WITH_CLAIM_NAME, **{**base, **fields})


# Upstream's text after "CEL runtime error: " is cel-go's ("no such key:
# healthy"); Berth's CEL is cel-cpp's, whose words differ ("NOT_FOUND: Key
# not found in map : \"healthy\""): the cases compare up to that point and
# check that the key is named.
CEL_CLAIM_ERROR = f"claim {NS}/{CLAIM}: selector #0 on device {DRIVER}/{NODE}/instance-1: CEL runtime error: "
CASES: dict[str, Case] = {
    "empty": Case(testing.make_pod("foo"), prefilter=(SKIP,), postfilter=()),
    "claim-reference": Case(
        POD_WITH_CLAIM_NAME, claims=[ALLOCATED, OTHER], after={CLAIM: stamped(IN_USE), "not-my-claim": OTHER}
    ),
    "claim-template": Case(
        POD_WITH_CLAIM_TEMPLATE_IN_STATUS,
        claims=[ALLOCATED, OTHER],
        after={CLAIM: stamped(IN_USE), "not-my-claim": OTHER},
    ),
    "missing-claim": Case(
        POD_WITH_CLAIM_TEMPLATE,
        claims=[ALLOCATED, OTHER],
        preenqueue=st('pod "default/my-pod": ResourceClaim not created yet'),
    ),
    "deleted-claim": Case(
        POD_WITH_CLAIM_TEMPLATE_IN_STATUS,
        claims=[deleted(ALLOCATED)],
        preenqueue=st('resourceclaim "my-pod-my-resource" is being deleted'),
    ),
    "wrong-claim": Case(
        POD_WITH_CLAIM_TEMPLATE_IN_STATUS,
        claims=[_not_owner(ALLOCATED)],
        preenqueue=st(
            "ResourceClaim default/my-pod-my-resource was not created for pod default/my-pod (pod is not owner)"
        ),
    ),
    "no-resources": Case(
        POD_WITH_CLAIM_NAME,
        claims=[PENDING],
        classes=[DEVICE_CLASS],
        filter={
            NODE: st(CANNOT, f"claim {NS}/{CLAIM}, request req-1: no device matches the selectors (class and request)")
        },
        postfilter=(),
    ),
    "with-resources": allocates(),
    "with-resources-has-finalizer": allocates(claims=[_add_finalizer(PENDING)]),
    "with-resources-finalizer-gets-removed": allocates(
        claims=[_add_finalizer(PENDING)], before_prebind=_drop_finalizer
    ),
    "with-resources-finalizer-gets-added": allocates(before_prebind=_add_finalizer),
    "skip-bind": allocates(after=None, unreserve_before_prebind=True),
    "exhausted-resources-in-informer-cache": Case(
        POD_WITH_CLAIM_NAME,
        claims=[PENDING, OTHER_ALLOCATED],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE],
        filter={NODE: st(CANNOT, f"claim {NS}/{CLAIM}, request req-1: all 1 matching devices are allocated")},
        postfilter=(),
    ),
    "exhausted-resources-in-flight-claim": Case(
        POD_WITH_CLAIM_NAME,
        claims=[PENDING, OTHER],
        in_flight_before=[OTHER_ALLOCATED],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE],
        filter={NODE: st(CANNOT, f"claim {NS}/{CLAIM}, request req-1: all 1 matching devices are allocated")},
        postfilter=(),
    ),
    "other-resources-in-flight-claim": Case(
        POD_WITH_CLAIM_NAME,
        claims=[PENDING, OTHER],
        in_flight_before=[OTHER_ALLOCATED_OTHER_DEVICE],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE],
        in_flight=[ALLOCATED, OTHER_ALLOCATED_OTHER_DEVICE],
        in_flight_after=[OTHER_ALLOCATED_OTHER_DEVICE],
        after={CLAIM: bound(ALLOCATED)},
    ),
    "tainted-device-disabled": allocates(gates={"DRADeviceTaints": False}, slices=[tainted(WORKER_SLICE)]),
    "tainted-device-enabled": Case(
        POD_WITH_CLAIM_NAME,
        gates={"DRADeviceTaints": True},
        claims=[PENDING],
        classes=[DEVICE_CLASS],
        slices=[tainted(WORKER_SLICE)],
        filter={
            NODE: st(
                CANNOT,
                f"claim {NS}/{CLAIM}, request req-1: all 1 matching devices have taints the request does not tolerate",
            )
        },
        postfilter=(),
    ),
    "request-admin-access-with-DRAAdminAccess-featuregate": Case(
        POD_WITH_CLAIM_NAME,
        claims=[admin_access(PENDING), OTHER_ALLOCATED],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE],
        in_flight=[admin_access(ALLOCATED)],
        after={CLAIM: bound(admin_access(ALLOCATED)), "not-my-claim": OTHER_ALLOCATED},
    ),
    "structured-ignore-allocated-admin-access": Case(
        POD_WITH_CLAIM_NAME,
        claims=[PENDING, admin_access(OTHER_ALLOCATED)],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE],
        in_flight=[ALLOCATED],
        after={CLAIM: bound(ALLOCATED), "not-my-claim": admin_access(OTHER_ALLOCATED)},
    ),
    "claim-parameters-CEL-runtime-error": Case(
        POD_WITH_CLAIM_NAME,
        claims=[break_cel_in_claim(PENDING)],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE],
        filter={NODE: st(CEL_CLAIM_ERROR)},
        filter_error=True,
    ),
    "class-parameters-CEL-runtime-error": Case(
        POD_WITH_CLAIM_NAME,
        claims=[PENDING],
        classes=[{**DEVICE_CLASS, "spec": {"selectors": [BROKEN_SELECTOR]}}],
        slices=[WORKER_SLICE],
        filter={NODE: st(f"class {CLASS}: selector #0 on device {DRIVER}/{NODE}/instance-1: CEL runtime error: ")},
        filter_error=True,
    ),
    "CEL-runtime-error-for-one-of-two-nodes": Case(
        POD_WITH_CLAIM_NAME,
        nodes=[NODE, NODE2],
        claims=[break_cel_in_claim(PENDING)],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE, WORKER2_SLICE],
        filter={NODE: st(CEL_CLAIM_ERROR)},
        filter_error=True,
    ),
    "CEL-runtime-error-for-one-of-three-nodes": Case(
        POD_WITH_CLAIM_NAME,
        nodes=[NODE, NODE2, NODE3],
        claims=[break_cel_in_claim(PENDING)],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE, WORKER2_SLICE, WORKER3_SLICE],
        filter={NODE: st(CEL_CLAIM_ERROR)},
        filter_error=True,
    ),
    "missing-class": Case(
        POD_WITH_CLAIM_NAME,
        claims=[PENDING],
        prefilter=st(f"request req-1: device class {CLASS} does not exist"),
        postfilter=(),
    ),
    "wrong-topology": Case(
        POD_WITH_CLAIM_NAME,
        claims=[WRONG_TOPOLOGY],
        filter={NODE: st("resourceclaim not available on the node")},
        postfilter=st("deallocation of ResourceClaim completed"),
        after={CLAIM: with_allocation(WRONG_TOPOLOGY, None)},
    ),
    "good-topology": Case(POD_WITH_CLAIM_NAME, claims=[GOOD_TOPOLOGY], after={CLAIM: bound(GOOD_TOPOLOGY)}),
    "bind-failure": Case(
        POD_WITH_CLAIM_NAME,
        claims=[GOOD_TOPOLOGY],
        after={CLAIM: bound(GOOD_TOPOLOGY)},
        unreserve_after_bind_failure={CLAIM: stamped(GOOD_TOPOLOGY)},
    ),
    "reserved-okay": Case(POD_WITH_CLAIM_NAME, claims=[stamped(IN_USE)], after={CLAIM: stamped(IN_USE)}),
    "claim-with-request-with-unknown-device-class": Case(
        POD_WITH_CLAIM_NAME,
        claims=[with_class(claim(), "does-not-exist")],
        prefilter=st("request req-1: device class does-not-exist does not exist"),
        postfilter=(),
    ),
    "claim-with-prioritized-list-unknown-device-class": Case(
        POD_WITH_CLAIM_NAME,
        claims=[with_class(claim(prioritized=True), "does-not-exist")],
        prefilter=st("request req-1/subreq-1: device class does-not-exist does not exist"),
        postfilter=(),
    ),
    "claim-with-prioritized-list": Case(
        POD_WITH_CLAIM_NAME,
        claims=[PENDING_PRIORITIZED],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE],
        in_flight=[ALLOCATED_PRIORITIZED],
        after={CLAIM: bound(ALLOCATED_PRIORITIZED)},
    ),
    "timeout": Case(
        POD_WITH_CLAIM_NAME,
        args={"filterTimeout": "1ns"},
        claims=[LARGE_CLAIM],
        classes=[DEVICE_CLASS],
        slices=[LARGE_WORKER_SLICE],
        # "Timeouts return Error so the pod retries via backoff."
        filter={NODE: st(f"node {NODE}: timed out trying to allocate devices")},
        filter_error=True,
    ),
    "timeout_disabled": allocates(gates={"DRASchedulerFilterTimeout": False}),
    "timeout_zero": allocates(args={"filterTimeout": "0s"}),
    "dont-add-allocation-timestamp": allocates(
        gates={"DRADeviceBindingConditions": False}, after={CLAIM: reserved(ALLOCATED)}
    ),
    "add-allocation-timestamp": allocates(),
    "add-allocation-timestamp-failure": Case(
        POD_WITH_CLAIM_NAME,
        claims=[ALLOCATED],
        before_prebind=_deallocate,
        prebind_error=f"claim {NS}/{CLAIM} got deallocated elsewhere in the meantime",
    ),
    "bind-claim-with-binding-conditions": Case(
        POD_WITH_CLAIM_NAME,
        # "Time out quickly in PreBind. There's no controller which sets the binding conditions."
        args={"bindingTimeout": "1s"},
        claims=[PENDING],
        classes=[DEVICE_CLASS],
        slices=[fabric_slice("instance-1")],
        in_flight=[BIND_CLAIM],
        after={CLAIM: bound(BIND_CLAIM)},
        prebind_error="device binding timeout",
        waits=True,
    ),
    "bound-claim-with-succeeded-binding-conditions": Case(
        POD_WITH_CLAIM_NAME, claims=[BOUND_CLAIM], after={CLAIM: reserved(BOUND_CLAIM)}, waits=True
    ),
    "bound-claim-with-failed-binding": Case(
        POD_WITH_CLAIM_NAME,
        claims=[FAILED_BINDING_CLAIM],
        slices=[WORKER_SLICE],
        filter={NODE: st("resourceclaim not available on the node")},
        postfilter=st("deallocation of ResourceClaim completed"),
        after={CLAIM: with_allocation(FAILED_BINDING_CLAIM, None)},
    ),
    "bound-claim-with-timed-out-binding": Case(
        POD_WITH_CLAIM_NAME,
        claims=[_timed_out()],
        filter={NODE: st("resourceclaim not available on the node")},
        postfilter=st("deallocation of ResourceClaim completed"),
        after={CLAIM: with_allocation(_timed_out(), None)},
    ),
    "bound-claim-with-mixed-binding-conditions": Case(
        POD_WITH_CLAIM_NAME,
        claims=[_timed_out((("condition1", "True"), ("condition2", "False")))],
        filter={NODE: st("resourceclaim not available on the node")},
        postfilter=st("deallocation of ResourceClaim completed"),
        after={CLAIM: with_allocation(_timed_out(), None)},
    ),
    "bound-claim-without-binding-conditions": Case(
        POD_WITH_CLAIM_TEMPLATE_IN_STATUS,
        claims=[ALLOCATED, OTHER],
        after={CLAIM: bound(ALLOCATED), "not-my-claim": OTHER},
    ),
    "multi-claims-binding-conditions-all-success": Case(
        POD_WITH_TWO_CLAIM_NAMES,
        claims=[BOUND_CLAIM, BOUND_CLAIM2],
        classes=[DEVICE_CLASS],
        slices=[fabric_slice("instance-1"), fabric_slice("instance-2", DRIVER2)],
        after={CLAIM: reserved(BOUND_CLAIM), CLAIM2: reserved(BOUND_CLAIM2)},
        waits=True,
    ),
    "multi-claims-binding-conditions-one-fail": Case(
        POD_WITH_TWO_CLAIM_NAMES,
        claims=[BOUND_CLAIM, FAILED_BINDING_CLAIM2],
        classes=[DEVICE_CLASS],
        slices=[fabric_slice("instance-1"), fabric_slice("instance-2", DRIVER2)],
        filter={NODE: st("resourceclaim not available on the node")},
        postfilter=st("deallocation of ResourceClaim completed"),
        after={CLAIM: BOUND_CLAIM, CLAIM2: with_allocation(FAILED_BINDING_CLAIM2, None)},
    ),
    "single-claim-prioritized-list-scoring": Case(
        POD_WITH_CLAIM_NAME,
        nodes=[NODE, NODE2],
        claims=[PRIORITIZED_WITH_SELECTOR],
        classes=[DEVICE_CLASS],
        slices=[
            device_slice(NODE, "instance-1", attrs={ATTR: {"bool": True}}),
            device_slice(NODE2, "instance-1", attrs={ATTR: {"bool": False}}),
        ],
        score={NODE: 8, NODE2: 7},
        normalized={NODE: 100, NODE2: 87},
        in_flight=[with_allocation(PRIORITIZED_WITH_SELECTOR, allocation_result("req-1/subreq-1"))],
        after={CLAIM: bound(with_allocation(PRIORITIZED_WITH_SELECTOR, allocation_result("req-1/subreq-1")))},
    ),
    "multiple-claims-prioritized-list-scoring": Case(
        POD_WITH_TWO_CLAIM_NAMES,
        nodes=[NODE, NODE2, NODE3],
        claims=[PENDING_PRIORITIZED, CLAIM2_MULTIPLE_SUBREQUESTS],
        classes=[DEVICE_CLASS],
        slices=[
            device_slice(NODE, *(f"instance-{i}" for i in range(1, 5))),
            device_slice(NODE2, "instance-1", "instance-2"),
            device_slice(NODE3, "instance-1"),
        ],
        filter={
            NODE3: st(
                CANNOT,
                f"claim {NS}/{CLAIM2}, request req-1/subreq-4: all 1 matching devices are allocated",
            )
        },
        score={NODE: 15, NODE2: 13},
        normalized={NODE: 100, NODE2: 86},
        in_flight=[
            ALLOCATED_PRIORITIZED,
            with_allocation(
                CLAIM2_MULTIPLE_SUBREQUESTS,
                results(*((("req-1/subreq-2", f"instance-{i}")) for i in range(2, 5))),
            ),
        ],
        after={
            CLAIM: bound(ALLOCATED_PRIORITIZED),
            CLAIM2: bound(
                with_allocation(
                    CLAIM2_MULTIPLE_SUBREQUESTS, results(*(("req-1/subreq-2", f"instance-{i}") for i in range(2, 5)))
                )
            ),
        },
    ),
    "multiple-requests-prioritized-list-scoring": Case(
        POD_WITH_CLAIM_NAME,
        nodes=[NODE, NODE2, NODE3],
        claims=[MULTIPLE_PRIORITIZED_REQUESTS],
        classes=[DEVICE_CLASS],
        slices=[
            device_slice(NODE, *(f"instance-{i}" for i in range(1, 5))),
            device_slice(NODE2, "instance-1", "instance-2", "instance-3"),
            device_slice(NODE3, "instance-1", "instance-2"),
        ],
        score={NODE: 16, NODE2: 15, NODE3: 14},
        normalized={NODE: 100, NODE2: 93, NODE3: 87},
        in_flight=[
            with_allocation(
                MULTIPLE_PRIORITIZED_REQUESTS,
                results(*((f"req-{r}/subreq-1", f"instance-{2 * r - 2 + i}") for r in (1, 2) for i in (1, 2))),
            )
        ],
        after={
            CLAIM: bound(
                with_allocation(
                    MULTIPLE_PRIORITIZED_REQUESTS,
                    results(*((f"req-{r}/subreq-1", f"instance-{2 * r - 2 + i}") for r in (1, 2) for i in (1, 2))),
                )
            )
        },
    ),
}


# ---------------------------------------------------------------- the walk


def _comparable(c: dra.ResourceClaim | Obj) -> dra.ResourceClaim:
    """A claim without uid and resourceVersion (cmpopts.IgnoreFields), its
    allocationTimestamp set or not (its value is not compared), compared as a
    struct (field by field)."""
    obj = msgspec.convert(c, dra.ResourceClaim) if isinstance(c, dict) else c
    md = msgspec.structs.replace(obj.metadata, uid="", resource_version="")
    status = obj.status
    if status.allocation is not None and status.allocation.allocation_timestamp is not None:
        status = msgspec.structs.replace(
            status, allocation=msgspec.structs.replace(status.allocation, allocation_timestamp=STAMPED)
        )
    return msgspec.structs.replace(obj, metadata=md, status=status)


def cluster(
    nodes: list[str], *, release: str = "1.37", gates: dict[str, bool] | None = None, args: Obj | None = None
) -> testing.Cluster:
    config: Obj = {"kubernetesVersion": release, "featureGates": gates or {}}
    if args:
        config["profiles"] = [{"pluginConfig": [{"name": NAME, "args": args}]}]
    return testing.Cluster(nodes=[node(n) for n in nodes], config=testing.parse_config(config))


class Walk:
    def __init__(self, case: Case, release: str = "1.37") -> None:
        self.cluster = cluster(case.nodes, release=release, gates=case.gates, args=case.args)
        embedded = self.cluster.berth.cluster
        embedded.upsert_device_classes(msgspec.convert(c, dra.DeviceClass) for c in case.classes)
        embedded.upsert_resource_slices(msgspec.convert(s, dra.ResourceSlice) for s in case.slices)
        embedded.upsert_resource_claims(msgspec.convert(c, dra.ResourceClaim) for c in case.claims)
        self.embedded = embedded
        fwk = self.cluster.berth.core.frameworks[self.cluster.berth.cfg.profiles[0].scheduler_name]
        self.plugin: DynamicResources = fwk.plugins[NAME]
        self.store = self.cluster.berth.core.dra
        for c in case.in_flight_before:
            claim_ = msgspec.convert(c, dra.ResourceClaim)
            stored = self.store.claim(claim_.metadata.namespace, claim_.metadata.name)
            assert stored is not None
            self.store.signal_pending_allocation(stored.metadata.uid, claim_)

    def claims(self) -> dict[str, dra.ResourceClaim]:
        return {c.metadata.name: _comparable(c) for c in self.embedded.resource_claims.values()}

    def in_flight(self) -> list[dra.ResourceClaim]:
        return sorted((_comparable(c) for c in self.store.pending_allocations()), key=lambda c: c.metadata.name)

    async def drain(self) -> None:
        await self.cluster.berth.core.client.drain()


def _reasons(status: fw.Status) -> tuple[str, ...]:
    if status.code == fw.Code.SKIP:
        return (SKIP,)
    return status.reasons


@pytest.mark.parametrize("name", list(CASES))
async def test_plugin(name: str) -> None:
    await walk(CASES[name])


async def test_pre_bind_neither_waits_nor_records_an_event_with_binding_conditions_off() -> None:
    """Berth's own: a device with binding conditions, DRADeviceBindingConditions
    off: PreBind returns before hasBindingConditions (dynamicresources.go v1.37.2)."""
    case = CASES["bound-claim-with-succeeded-binding-conditions"]
    await walk(dataclasses.replace(case, gates={"DRADeviceBindingConditions": False}, waits=False))


async def walk(case: Case) -> None:
    """The walk through the extension points, each step checked against ``case``."""
    w = Walk(case)
    p, pi = w.plugin, PodInfo.of(case.pod)
    initial = w.claims()

    status = p.pre_enqueue(pi)
    assert _reasons(status) == case.preenqueue
    if not status.ok:
        assert status.code == fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return

    state = fw.CycleState()
    nodes = w.cluster.snapshot
    res = p.pre_filter(state, pi, nodes)
    assert _reasons(res.status) == case.prefilter
    assert res.node_names is None
    passed: list[int] = []
    if res.status.ok:
        for row in nodes.alive_rows().tolist():
            rows = np.asarray([row], dtype=np.int64)
            verdict = p.filter(state, pi, nodes, rows).status_at(0)
            if verdict.code == fw.Code.ERROR:
                assert case.filter_error
                (want,) = case.filter[nodes.name(row)]
                assert verdict.message().startswith(want), verdict
                if "CEL" in want:
                    assert ATTR in verdict.message()
                return  # "An error aborts scheduling."
            assert _reasons(verdict) == case.filter.get(nodes.name(row), ()), nodes.name(row)
            if verdict.ok:
                passed.append(row)
    if not passed:
        post = p.post_filter(state, pi, nodes, {})
        assert post.status.code == fw.Code.UNSCHEDULABLE
        assert _reasons(post.status) == (case.postfilter or ())
        await w.drain()
        assert w.claims() == (initial if case.after is None else {k: _comparable(v) for k, v in case.after.items()})
        return
    assert case.postfilter is None

    names = [nodes.name(r) for r in passed]
    chosen = names[0]
    if len(passed) > 1:  # "When two nodes where found, PreScore gets called."
        rows = np.asarray(passed, dtype=np.int64)
        raw = p.score(state, pi, nodes, rows)
        normalized = p.normalize_score(state, pi, raw)
        assert dict(zip(names, raw.tolist(), strict=True)) == (case.score or dict.fromkeys(names, 0))
        assert dict(zip(names, normalized.tolist(), strict=True)) == (case.normalized or dict.fromkeys(names, 0))
        chosen = names[int(np.argmax(normalized))]  # the first of the best
    else:
        assert case.score is None

    assert p.reserve(state, pi, chosen).ok
    assert w.in_flight() == sorted((_comparable(c) for c in case.in_flight), key=lambda c: c.metadata.name)
    assert w.claims() == initial  # Reserve writes nothing
    if case.unreserve_before_prebind:
        p.unreserve(state, pi, chosen)
        await w.drain()
        assert w.in_flight() == []
        assert w.claims() == initial
        return
    if case.before_prebind is not None:
        current = msgspec.to_builtins(w.embedded.resource_claims[f"{NS}/{CLAIM}"])
        w.embedded.upsert_resource_claims([msgspec.convert(case.before_prebind(current), dra.ResourceClaim)])
        initial = w.claims()
    status = await p.pre_bind(state, pi, chosen)
    if case.prebind_error is not None:
        assert status.code == fw.Code.ERROR and status.message().startswith(case.prebind_error), status
    else:
        assert status.ok, status
    _check_binding_conditions_metrics(w, case)
    await _check_binding_conditions_event(w, case, chosen)
    assert w.in_flight() == [_comparable(c) for c in case.in_flight_after]
    want = dict(initial)
    want.update({k: _comparable(v) for k, v in (case.after or {}).items()})
    assert w.claims() == want
    if case.unreserve_after_bind_failure is not None:
        p.unreserve(state, pi, chosen)
        await w.drain()
        want.update({k: _comparable(v) for k, v in case.unreserve_after_bind_failure.items()})
        assert w.claims() == want


async def _check_binding_conditions_event(w: Walk, case: Case, chosen: str) -> None:
    """PreBind records BindingConditionsPending once, before it waits
    (dynamicresources.go v1.37.2: Normal, action Scheduling), and no event
    when it does not wait."""
    await w.drain()  # the event is written in the background
    pending = f"waiting for binding conditions for device on node {chosen}"
    want = [(case.pod.key, BINDING_CONDITIONS_PENDING, pending)] if case.waits else []
    assert w.embedded.events == want


def _check_binding_conditions_metrics(w: Walk, case: Case) -> None:
    """PreBind's binding-conditions metrics (dynamicresources.go v1.37.2):
    when PreBind waited, one count per allocated device with binding
    conditions, labelled with the wait's outcome; nothing otherwise."""
    m = w.cluster.berth.core.metrics
    if m.dra_binding_conditions_allocations is None:
        assert not w.plugin.handle.features.dra_device_binding_conditions  # registered with its gate only
        return
    error = case.prebind_error or ""
    outcome = (
        "timeout"
        if error.startswith("device binding timeout")
        else "failure"
        if error.startswith("device binding failed")
        else "success"
    )
    want: dict[tuple[str, ...], float] = {}
    if not error or outcome != "success":  # an error before the wait records nothing
        for claim in w.embedded.resource_claims.values():
            allocation = claim.status.allocation
            for r in allocation.devices.results if allocation is not None else ():
                if r.binding_conditions:
                    key = (w.plugin.handle.profile, r.driver, outcome)
                    want[key] = want.get(key, 0.0) + 1.0
    counted = {
        tuple(s.labels[k] for k in ("profile", "driver", "status")): s.value
        for fam in m.dra_binding_conditions_allocations.collect()
        for s in fam.samples
        if s.name.endswith("_total")
    }
    assert counted == want


# ---------------------------------------------------------------- scoring (dynamicresources.go)


def _scored_claim(*subrequests: int, name: str = CLAIM) -> dra.ResourceClaim:
    """st.MakeResourceClaim().NamedRequestWithPrioritizedList(...): one request per
    argument, with that many subrequests."""
    requests = [
        first_available(f"req-{r + 1}", *(sub(f"subreq-{i + 1}") for i in range(n))) for r, n in enumerate(subrequests)
    ]
    return msgspec.convert(claim(name, requests=requests), dra.ResourceClaim)


#: Test_computesScore (v1.37.2): claims, the request names of each allocation, the score (None: an error).
COMPUTE_SCORE_CASES = {
    "more-claims-than-allocations": ([_scored_claim(1), _scored_claim(1, name=CLAIM2)], [], None),
    "single-request-only-subrequest-allocated": ([_scored_claim(1)], [["req-1/subreq-1"]], 8),
    "single-request-last-subrequest-allocated": ([_scored_claim(8)], [["req-1/subreq-8"]], 1),
    "multiple-requests-with-middle-subrequests-allocated": (
        [_scored_claim(4, 5)],
        [["req-1/subreq-4", "req-2/subreq-5"]],
        9,
    ),
    "multiple-requests-with-top-subrequests-allocated": (
        [_scored_claim(8, 1)],
        [["req-1/subreq-8", "req-2/subreq-1"]],
        9,
    ),
    "multiple-claims-with-last-subrequests-allocated": (
        [_scored_claim(8), _scored_claim(8, name=CLAIM2)],
        [["req-1/subreq-8"], ["req-1/subreq-8"]],
        2,
    ),
    "multiple-claims-with-top-subrequests-allocated": (
        [_scored_claim(1), _scored_claim(1, name=CLAIM2)],
        [["req-1/subreq-1"], ["req-1/subreq-1"]],
        16,
    ),
}


@pytest.mark.parametrize("release", ["1.35", "1.36", "1.37"])
@pytest.mark.parametrize("name", list(COMPUTE_SCORE_CASES))
def test_compute_score(name: str, release: str) -> None:
    claims, allocated, want = COMPUTE_SCORE_CASES[name]
    version = features.parse_version(release)
    if want is None:
        with pytest.raises(ValueError, match="smaller than number of claims"):
            compute_score(claims, allocated, version)
    else:
        assert compute_score(claims, allocated, version) == want


@pytest.mark.parametrize(
    ("release", "want"),
    [
        # v1.35.4 indexes the allocations by the claim's position among all claims.
        ("1.35", "number of allocations 1 is smaller than number of claims"),
        # "mix-of-allocated-and-unallocated-claims" (v1.36.3, v1.37.2): the allocated
        # claim reads its own status, the other the allocation made in this cycle.
        ("1.36", 0),
        ("1.37", 0),
    ],
)
def test_compute_score_with_a_claim_allocated_before(release: str, want: int | str) -> None:
    allocated = msgspec.convert(ALLOCATED, dra.ResourceClaim)
    pending = msgspec.convert(claim(CLAIM2, owned=True), dra.ResourceClaim)
    version = features.parse_version(release)
    if isinstance(want, str):
        with pytest.raises(ValueError, match=want):
            compute_score([allocated, pending], [["req-1"]], version)
    else:
        assert compute_score([allocated, pending], [["req-1"]], version) == want


#: TestNormalizeScore (v1.37.2): helper.DefaultNormalizeScore(MaxNodeScore, false).
NORMALIZE_CASES = {
    "empty": ([], []),
    "single-score": ([42], [100]),
    "all-same": ([8, 8], [100, 100]),
    "all-same-very-large": ([2**31 - 1, 2**31 - 1], [100, 100]),
    "max-and-min-values": ([2**31 - 1, 0], [100, 0]),
    "mid-value": ([99, 98, 97], [100, 98, 97]),
    "large-spread-lost-precision": ([2**31 - 1, 2**31 - 2, 1, 0], [100, 99, 0, 0]),
    "all-zero": ([0, 0], [0, 0]),
}


@pytest.mark.parametrize("name", list(NORMALIZE_CASES))
def test_normalize_score(name: str) -> None:
    scores, want = NORMALIZE_CASES[name]
    w = Walk(Case(POD_WITH_CLAIM_NAME))
    got = w.plugin.normalize_score(fw.CycleState(), PodInfo.of(POD_WITH_CLAIM_NAME), np.asarray(scores, dtype=np.int64))
    assert got.tolist() == want


async def test_score_fails_the_attempt_on_1_35_with_a_claim_allocated_before() -> None:
    """A pod with an allocated claim and one to allocate, two feasible nodes:
    v1.35.4's Score fails ("running Score plugins"), v1.36+ scores 0."""
    pending = claim(CLAIM2, owned=True)
    for release, fails in (("1.35", True), ("1.36", False), ("1.37", False)):
        case = Case(
            POD_WITH_TWO_CLAIM_NAMES,
            nodes=[NODE, NODE2],
            claims=[GOOD_TOPOLOGY, pending],
            classes=[DEVICE_CLASS],
            slices=[WORKER_SLICE, device_slice(NODE2, "instance-1")],
        )
        w = Walk(case, release=release)
        pi = PodInfo.of(case.pod)
        state, nodes = fw.CycleState(), w.cluster.snapshot
        assert w.plugin.pre_filter(state, pi, nodes).status.ok
        rows = nodes.alive_rows()
        verdicts = w.plugin.filter(state, pi, nodes, rows)
        feasible = rows[verdicts.ok]
        assert len(feasible) == 1  # GOOD_TOPOLOGY pins the pod to NODE
        if fails:
            with pytest.raises(RuntimeError, match=r'running Score plugins: plugin "DynamicResources" failed with'):
                w.plugin.score(state, pi, nodes, feasible)
        else:
            assert w.plugin.score(state, pi, nodes, feasible).tolist() == [0]


def test_the_profile_prefers_the_node_with_the_first_subrequest() -> None:
    """Through the whole default profile: DynamicResources' weighted score (x2)
    is 200 on the node that gets subreq-1 and 174 on the one left with subreq-2."""
    w = Walk(CASES["single-claim-prioritized-list-scoring"])
    w.cluster.add(*(testing.make_node(n, pods=110, labels={"kubernetes.io/hostname": n}) for n in (NODE, NODE2)))
    e = w.cluster.explain(POD_WITH_CLAIM_NAME)
    scores = {n.node: n.plugin_scores.get(NAME) for n in e.nodes if n.feasible}
    assert scores == {NODE: 200, NODE2: 174}
    totals = {n.node: n.score for n in e.nodes}
    assert totals[NODE] > totals[NODE2]


# ---------------------------------------------------------------- per release


@pytest.mark.parametrize(
    ("release", "no_claims", "not_schedulable"),
    [
        ("1.35", ("no new claims to deallocate",), ("still not schedulable",)),
        ("1.36", ("no new claims to deallocate",), ("still not schedulable",)),
        # TestPostFilterNoOpStatusHasNoUserVisibleReason (v1.37.2).
        ("1.37", (), ()),
    ],
)
def test_post_filter_reasons_per_release(
    release: str, no_claims: tuple[str, ...], not_schedulable: tuple[str, ...]
) -> None:
    w = Walk(Case(POD_WITH_CLAIM_NAME, claims=[PENDING], classes=[DEVICE_CLASS]), release=release)
    plain = PodInfo.of(testing.make_pod("foo"))
    state = fw.CycleState()
    assert w.plugin.pre_filter(state, plain, w.cluster.snapshot).status.code == fw.Code.SKIP
    post = w.plugin.post_filter(state, plain, w.cluster.snapshot, {})
    assert (post.status.code, post.status.reasons) == (fw.Code.UNSCHEDULABLE, no_claims)
    pi, state = PodInfo.of(POD_WITH_CLAIM_NAME), fw.CycleState()
    assert w.plugin.pre_filter(state, pi, w.cluster.snapshot).status.ok
    post = w.plugin.post_filter(state, pi, w.cluster.snapshot, {})
    assert (post.status.code, post.status.reasons) == (fw.Code.UNSCHEDULABLE, not_schedulable)


@pytest.mark.parametrize(("release", "stamp"), [("1.35", False), ("1.36", True), ("1.37", True)])
async def test_pre_bind_stamps_the_allocation_where_binding_conditions_are_on(release: str, stamp: bool) -> None:
    """bindClaim: allocationTimestamp with DRADeviceBindingConditions and
    DRAResourceClaimDeviceStatus (on by default since 1.36)."""
    case = Case(POD_WITH_CLAIM_NAME, claims=[PENDING], classes=[DEVICE_CLASS], slices=[WORKER_SLICE])
    w = Walk(case, release=release)
    pi, state, nodes = PodInfo.of(case.pod), fw.CycleState(), w.cluster.snapshot
    assert w.plugin.pre_filter(state, pi, nodes).status.ok
    assert w.plugin.filter(state, pi, nodes, nodes.alive_rows()).ok.all()
    assert w.plugin.reserve(state, pi, NODE).ok
    assert (await w.plugin.pre_bind(state, pi, NODE)).ok
    written = w.claims()[CLAIM]
    assert written == _comparable(bound(ALLOCATED) if stamp else reserved(ALLOCATED))


@pytest.mark.parametrize("release", ["1.35", "1.36", "1.37"])
def test_allocator_features_follow_the_release(release: str) -> None:
    """AllocatorFeatures over each release's default gates: 1.35 runs admin
    access and prioritized lists; 1.36 and 1.37 add taints, partitionable
    devices, consumable capacity and binding conditions (the incubating
    allocator's set, structured/allocator.go)."""
    on_since_136 = release != "1.35"
    got = allocator_features(features.Features.of(features.parse_version(release)))
    assert got == allocation.Features(
        admin_access=True,
        prioritized_list=True,
        device_taints=on_since_136,
        partitionable_devices=on_since_136,
        consumable_capacity=on_since_136,
        device_binding_and_status=on_since_136,
        fractional_capacity_range=False,
        release=int(release.split(".")[1]),
    )


#: TestAllocatorSelection's single-feature cases: gate field(s) -> the allocator switch they turn on.
SELECTION = {
    "AdminAccess": ({"dra_admin_access"}, "admin_access"),
    "ConsumableCapacity": ({"dra_consumable_capacity"}, "consumable_capacity"),
    "DeviceBindingAndStatus": (
        {"dra_device_binding_conditions", "dra_resource_claim_device_status"},
        "device_binding_and_status",
    ),
    "DeviceTaints": ({"dra_device_taints"}, "device_taints"),
    "PartitionableDevices": ({"dra_partitionable_devices"}, "partitionable_devices"),
    "FractionalCapacityRange": ({"dra_fractional_capacity_range"}, "fractional_capacity_range"),
    "PrioritizedList": ({"dra_prioritized_list"}, "prioritized_list"),
}


@pytest.mark.parametrize("name", list(SELECTION))
def test_each_gate_reaches_the_allocator(name: str) -> None:
    gate_fields, switch = SELECTION[name]
    gates = dataclasses.replace(features.Features(), **dict.fromkeys(gate_fields, True))
    got = allocator_features(gates)
    on = {f.name for f in dataclasses.fields(got) if f.type in ("bool", bool) and getattr(got, f.name)}
    assert on == {switch}
    if len(gate_fields) > 1:  # both gates are needed
        for field_name in gate_fields:
            half = dataclasses.replace(gates, **{field_name: False})
            assert not getattr(allocator_features(half), switch)


def test_filter_says_invalid_resource_pools_where_nothing_else_fits() -> None:
    """ErrFailedAllocationOnNode (k8s.io/dynamic-resource-allocation v0.35+): a
    per-node reason of its own, with no Berth detail."""
    w = Walk(Case(POD_WITH_CLAIM_NAME, nodes=[NODE, NODE2], claims=[PENDING], classes=[DEVICE_CLASS]))
    # Two slices of one pool repeat a device name: the pool is invalid (the
    # embedded cluster validates one slice at a time, as the API server does).
    halves = [device_slice(NODE, "instance-1") for _ in range(2)]
    for i, half in enumerate(halves):
        half["metadata"]["name"] += f"-{i}"
        half["spec"]["pool"]["resourceSliceCount"] = 2
    w.embedded.upsert_resource_slices(msgspec.convert(h, dra.ResourceSlice) for h in halves)
    pi, state, nodes = PodInfo.of(POD_WITH_CLAIM_NAME), fw.CycleState(), w.cluster.snapshot
    assert w.plugin.pre_filter(state, pi, nodes).status.ok
    verdicts = w.plugin.filter(state, pi, nodes, nodes.alive_rows())
    got = {nodes.name(r): verdicts.status_at(k).reasons for k, r in enumerate(nodes.alive_rows().tolist())}
    assert got == {
        NODE: ("invalid resource pools were encountered",),
        NODE2: (CANNOT, f"claim {NS}/{CLAIM}, request req-1: no device matches the selectors (class and request)"),
    }


@pytest.mark.parametrize(
    ("gates", "args", "error"),
    [
        ({}, {"filterTimeout": "-1s"}, "filterTimeout: Invalid value: '-1s': must be zero or positive"),
        (
            {"DRASchedulerFilterTimeout": False},
            {"filterTimeout": "10s"},
            "filterTimeout: Forbidden: DRASchedulingFilterTimeout feature gate is disabled",
        ),
        ({}, {"bindingTimeout": "500ms"}, "bindingTimeout: Invalid value: '500ms': must be at least 1 second"),
        (
            {"DRADeviceBindingConditions": False},
            {"bindingTimeout": "10m"},
            "bindingTimeout: Forbidden: DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate "
            "is disabled",
        ),
        ({}, {"bindingTimeout": "ten minutes"}, 'time: invalid duration "ten minutes"'),
    ],
)
def test_dynamic_resources_args_are_validated_as_upstream(gates: dict[str, bool], args: Obj, error: str) -> None:
    """ValidateDynamicResourcesArgs (v1.37.2 validation_pluginargs.go)."""
    with pytest.raises(Exception, match=re.escape(error)):
        cluster([NODE], gates=gates, args=args)


@pytest.mark.parametrize(
    ("args", "gates", "want"),
    [
        ({}, {}, (10.0, 600.0)),
        ({"filterTimeout": "1m30s", "bindingTimeout": "2m"}, {}, (90.0, 120.0)),
        ({"filterTimeout": "0"}, {}, (0.0, 600.0)),
        ({}, {"DRASchedulerFilterTimeout": False}, (0.0, 600.0)),
    ],
)
def test_dynamic_resources_args_load_with_upstreams_defaults(
    args: Obj, gates: dict[str, bool], want: tuple[float, float]
) -> None:
    """SetDefaults_DynamicResourcesArgs: filterTimeout 10 s, bindingTimeout 600 s."""
    p = Walk(Case(POD_WITH_CLAIM_NAME, gates=gates, args=args)).plugin
    assert (p.filter_timeout, p.binding_timeout) == want


# ---------------------------------------------------------------- beyond the table


def test_default_profile_runs_it_before_default_preemption() -> None:
    """default_plugins.go applyDynamicResources: just before DefaultPreemption."""
    from berth.framework import registry

    names = [n for n, _ in registry.DEFAULT_MULTI_POINT]
    assert names.index(NAME) == names.index("DefaultPreemption") - 1
    resolved = registry.resolve_profile(testing.parse_config({}).profiles[0])
    post = resolved.points["postFilter"]
    assert post.index(NAME) == post.index("DefaultPreemption") - 1
    for point in ("preEnqueue", "preFilter", "filter", "score", "reserve", "preBind"):
        assert NAME in resolved.points[point], point
    # A Score since 1.35, weight 2 (applyDynamicResources).
    assert resolved.weights[NAME] == 2


def test_events_to_register() -> None:
    w = Walk(Case(POD_WITH_CLAIM_NAME))
    events = {e.resource: e.action for e in w.plugin.events_to_register()}
    add_update = fw.ActionType.ADD | fw.ActionType.UPDATE
    assert events == {
        "Node": fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_LABEL | fw.ActionType.UPDATE_NODE_ALLOCATABLE,
        "ResourceClaim": add_update,
        "DeviceClass": add_update,
        "ResourceSlice": add_update,
    }


def test_a_missing_claim_is_named_at_pre_enqueue() -> None:
    w = Walk(Case(POD_WITH_CLAIM_NAME))
    st_ = w.plugin.pre_enqueue(PodInfo.of(POD_WITH_CLAIM_NAME))
    assert st_ == fw.Status.unresolvable(f'could not find ResourceClaim "{NS}/{CLAIM}"', plugin=NAME)


def test_a_claim_reserved_by_the_maximum_of_consumers_is_in_use() -> None:
    full = with_allocation(PENDING, allocation_result())
    full["status"]["reservedFor"] = [
        {"resource": "pods", "name": f"other-{i}", "uid": f"u{i}"}
        for i in range(dra.RESOURCE_CLAIM_RESERVED_FOR_MAX_SIZE)
    ]
    w = Walk(Case(POD_WITH_CLAIM_NAME, claims=[full]))
    res = w.plugin.pre_filter(fw.CycleState(), PodInfo.of(POD_WITH_CLAIM_NAME), w.cluster.snapshot)
    assert res.status == fw.Status.unresolvable("resourceclaim in use", plugin=NAME)


def test_a_claim_in_flight_for_another_pod_makes_the_pod_wait() -> None:
    w = Walk(Case(POD_WITH_CLAIM_NAME, claims=[PENDING], classes=[DEVICE_CLASS], slices=[WORKER_SLICE]))
    refs = [{"name": RESOURCE, "resourceClaimName": CLAIM}]
    other = PodInfo.of(testing.make_pod("other", uid="5678", spec={"resourceClaims": refs}))
    state = fw.CycleState()
    nodes = w.cluster.snapshot
    assert w.plugin.pre_filter(state, other, nodes).status.ok
    assert w.plugin.filter(state, other, nodes, nodes.alive_rows()).ok.all()
    assert w.plugin.reserve(state, other, NODE).ok
    res = w.plugin.pre_filter(fw.CycleState(), PodInfo.of(POD_WITH_CLAIM_NAME), nodes)
    assert res.status == fw.Status.unresolvable(
        f"resource claim {NS}/{CLAIM} is in the process of being allocated", plugin=NAME
    )
    # The device is in use while in flight, and free again after Unreserve.
    assert w.store.allocated_devices() == {(DRIVER, NODE, "instance-1")}
    w.plugin.unreserve(state, other, NODE)
    assert w.store.allocated_devices() == set()


def test_explain_names_the_claim_and_request_that_fail_on_each_node() -> None:
    w = Walk(
        Case(
            POD_WITH_CLAIM_NAME,
            nodes=[NODE, NODE2],
            claims=[PENDING, OTHER_ALLOCATED],
            classes=[DEVICE_CLASS],
            slices=[WORKER_SLICE],
        )
    )
    w.cluster.add(*(testing.make_node(n, pods=110) for n in (NODE, NODE2)))  # room for the pod otherwise
    e = w.cluster.explain(POD_WITH_CLAIM_NAME)
    by_node = {n.node: [(r.plugin, r.reason) for r in n.reasons if r.plugin == NAME] for n in e.nodes}
    assert by_node == {
        NODE: [(NAME, f"{CANNOT}, claim {NS}/{CLAIM}, request req-1: all 1 matching devices are allocated")],
        NODE2: [
            (NAME, f"{CANNOT}, claim {NS}/{CLAIM}, request req-1: no device matches the selectors (class and request)")
        ],
    }
    # FitError's histogram, reasons sorted as strings: upstream's count, then Berth's detail.
    assert e.summary.startswith(
        f"0/2 nodes are available: 1 claim {NS}/{CLAIM}, request req-1: all 1 matching devices are allocated, "
        f"1 claim {NS}/{CLAIM}, request req-1: no device matches the selectors (class and request), 2 {CANNOT}."
    ), e.summary


@pytest.mark.parametrize(
    ("kind", "obj", "error"),
    [
        (
            "slice",
            {**WORKER_SLICE, "spec": {**WORKER_SLICE["spec"], "allNodes": True}},
            'resourceSlices[0].spec: Invalid value: "{`nodeName`, `allNodes`}": exactly one of `nodeName`, '
            "`nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set",
        ),
        (
            "slice",
            {**WORKER_SLICE, "spec": {**WORKER_SLICE["spec"], "devices": [{"name": "d"}, {"name": "d"}]}},
            'resourceSlices[0].spec.devices[1].name: Duplicate value: "d"',
        ),
        (
            "claim",
            {"metadata": {"name": "c"}, "spec": {"devices": {"requests": [{"name": "r"}]}}},
            "resourceClaims[0].spec.devices.requests[0]: Required value: exactly one of `exactly` or "
            "`firstAvailable` is required",
        ),
        (
            "claim",
            with_class(claim(), ""),
            "resourceClaims[0].spec.devices.requests[0].exactly.deviceClassName: Required value",
        ),
        (
            "class",
            {"metadata": {"name": "Bad_Name"}},
            'deviceClasses[0].metadata.name: Invalid value: "Bad_Name"',
        ),
        (
            "slice",
            {
                **WORKER_SLICE,
                "spec": {**WORKER_SLICE["spec"], "sharedCounters": [{"name": "cs", "counters": {"c": {"value": "1"}}}]},
            },
            'resourceSlices[0].spec: Invalid value: "": only one of `sharedCounters` or `devices` is allowed',
        ),
        (
            "slice",
            {
                **WORKER_SLICE,
                "spec": {
                    **WORKER_SLICE["spec"],
                    "devices": [{"name": "d", "taints": [{"key": "k", "effect": "Evict"}]}],
                },
            },
            'resourceSlices[0].spec.devices[0].taints[0].effect: Unsupported value: "Evict": supported values: '
            '"NoExecute", "NoSchedule", "None"',
        ),
        (
            "slice",
            {
                **WORKER_SLICE,
                "spec": {
                    **WORKER_SLICE["spec"],
                    "devices": [
                        {
                            "name": "d",
                            "capacity": {"mem": {"value": "1Gi", "requestPolicy": {"default": "1Mi"}}},
                        }
                    ],
                },
            },
            "resourceSlices[0].spec.devices[0].capacity[mem].requestPolicy: Forbidden: "
            "allowMultipleAllocations must be true",
        ),
        (
            "slice",
            {
                **WORKER_SLICE,
                "spec": {**WORKER_SLICE["spec"], "devices": [{"name": "d", "bindingConditions": ["ready"]}]},
            },
            "resourceSlices[0].spec.devices[0].bindingFailureConditions: Invalid value: []: bindingFailureConditions "
            "are required to use bindingConditions",
        ),
        (
            "slice",
            {**WORKER_SLICE, "spec": {**WORKER_SLICE["spec"], "devices": [{"name": "d", "nodeName": NODE}]}},
            "resourceSlices[0].spec.devices[0]: Invalid value: null: `nodeName`, `nodeSelector` and `allNodes` can "
            "only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec",
        ),
        (
            "claim",
            {
                "metadata": {"name": "c"},
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "r",
                                "exactly": {
                                    "deviceClassName": CLASS,
                                    "tolerations": [{"key": "k", "operator": "Exists", "value": "v"}],
                                },
                            }
                        ]
                    }
                },
            },
            'resourceClaims[0].spec.devices.requests[0].exactly.tolerations[0].value: Invalid value: "v": must be '
            "empty for operator `Exists`",
        ),
    ],
)
def test_the_embedded_cluster_refuses_invalid_objects_and_changes_nothing(kind: str, obj: Obj, error: str) -> None:
    w = Walk(Case(POD_WITH_CLAIM_NAME, claims=[PENDING], classes=[DEVICE_CLASS], slices=[WORKER_SLICE]))
    before = (dict(w.embedded.resource_claims), dict(w.embedded.resource_slices), w.store.generation)
    good = {"slice": device_slice(NODE2, "x"), "claim": claim("fine"), "class": {"metadata": {"name": "fine"}}}[kind]
    typ: Any = {"slice": dra.ResourceSlice, "claim": dra.ResourceClaim, "class": dra.DeviceClass}[kind]
    upsert = {
        "slice": w.embedded.upsert_resource_slices,
        "claim": w.embedded.upsert_resource_claims,
        "class": w.embedded.upsert_device_classes,
    }[kind]
    batch = [msgspec.convert(good, typ), msgspec.convert(obj, typ)] if kind != "class" else [msgspec.convert(obj, typ)]
    with pytest.raises(InvalidArgument) as info:
        upsert(batch)
    assert str(info.value).startswith(error.replace("[0]", "[1]", 1) if kind != "class" else error), str(info.value)
    assert (dict(w.embedded.resource_claims), dict(w.embedded.resource_slices), w.store.generation) == before


def test_manifests_load_the_dra_kinds() -> None:
    from berth.cluster import manifests

    text = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpus}
spec:
  driver: gpu.example.com
  nodeName: n1
  pool: {name: n1, resourceSliceCount: 1}
  devices: [{name: gpu-0, attributes: {model: {string: a100}}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c1}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu, allocationMode: ExactCount, count: 1}}]
"""
    m = manifests.loads(text)
    assert [c.metadata.name for c in m.device_classes] == ["gpu"]
    assert m.resource_slices[0].spec.devices[0].attributes["model"].string_value == "a100"
    assert m.resource_claim_templates[0].metadata.namespace == "default"
    assert m.resource_claims[0].metadata.namespace == "default" and m.resource_claims[0].metadata.uid
    with pytest.raises(manifests.ManifestError, match=r"spec.devices\[0\].atributes: unknown field"):
        manifests.loads(text.replace("devices: [{name: gpu-0, attributes", "devices: [{name: gpu-0, atributes"))
