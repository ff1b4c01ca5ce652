"""DynamicResources, ported from kube-scheduler v1.34.4's
pkg/scheduler/framework/plugins/dynamicresources/dynamicresources_test.go
(TestPlugin): the same objects (``podWithClaimName``, ``pendingClaim``,
``workerNodeSlice``, ...), cases by their Go names, and the same walk through
the extension points — PreEnqueue, PreFilter, Filter per node, Reserve on the
first node that passed, then PreBind (or Unreserve), or PostFilter when no
node did — checking each step's status and the claims as stored afterwards
(the embedded cluster plays the API server; ``resourceVersion`` and ``uid``
are ignored, as upstream's ``cmpopts.IgnoreFields`` does).

Statuses compare by message, as upstream's ``verify`` does (``ErrorContains``).
Berth's Filter adds which claim and request failed as a second reason after
upstream's "cannot allocate all claims"; the cases check both.

Not ported (features off by default in v1.34, which Berth has as fixed gates):
DRA-disabled, request-admin-access-without-DRAAdminAccess-featuregate,
claim-with-prioritized-list-feature-disabled, tainted-device-enabled, the
extended-resource-* cases (DRAExtendedResource), the binding-conditions
cases (DRADeviceBindingConditions), and the filter timeout/cancellation cases
(DRASchedulerFilterTimeout: Berth's Filter is not cancelled). The queueing
hints (TestIsSchedulableAfter*) are covered by the loop tests' requeueing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np
import pytest

from berth import testing
from berth.cache.infos import PodInfo
from berth.cluster import dra, model
from berth.errors import InvalidArgument
from berth.framework import interface as fw
from berth.plugins.dynamicresources import NAME, DynamicResources

NODE, NODE2, NODE3 = "worker", "worker-2", "worker-3"
DRIVER, DRIVER2 = "some-driver", "some-driver-2"
POD, POD_UID, NS = "my-pod", "1234", "default"
RESOURCE = "my-resource"
CLAIM, CLAIM2 = f"{POD}-{RESOURCE}", f"{POD}-{RESOURCE}-2"
CLASS = "my-resource-class"
ATTR = "healthy"
FINALIZER = dra.DELETE_PROTECTION_FINALIZER

Obj = dict[str, Any]


def node(name: str) -> model.Node:
    return testing.make_node(name, labels={"kubernetes.io/hostname": name})


def pod(*, template: bool = False, in_status: bool = False) -> model.Pod:
    ref: Obj = {"name": RESOURCE, ("resourceClaimTemplateName" if template else "resourceClaimName"): CLAIM}
    p = testing.make_pod(POD, uid=POD_UID, spec={"resourceClaims": [ref]})
    if in_status:
        p.status.resource_claim_statuses = [model.PodResourceClaimStatus(name=RESOURCE, resource_claim_name=CLAIM)]
    return p


POD_WITH_CLAIM_NAME = pod()
POD_WITH_CLAIM_TEMPLATE = pod(template=True)
POD_WITH_CLAIM_TEMPLATE_IN_STATUS = pod(template=True, in_status=True)


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


WORKER_SLICE = device_slice(NODE, "instance-1")
WORKER2_SLICE = device_slice(NODE2, "instance-1", attrs={ATTR: {"bool": True}})
WORKER3_SLICE = device_slice(NODE3, "instance-1", attrs={ATTR: {"bool": True}})
DEVICE_CLASS: Obj = {"metadata": {"name": CLASS}}
BROKEN_SELECTOR: Obj = {"cel": {"expression": f'device.attributes["{DRIVER}"].{ATTR}'}}


def name_selector(node_name: str) -> Obj:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}


def claim(name: str = CLAIM, *, owned: bool = False, prioritized: bool = False) -> Obj:
    request: Obj = (
        {"name": "req-1", "firstAvailable": [{"name": "subreq-1", "deviceClassName": CLASS, "count": 1}]}
        if prioritized
        else {"name": "req-1", "exactly": {"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1}}
    )
    md: Obj = {"name": name, "namespace": NS}
    if owned:
        md["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": POD, "uid": POD_UID, "controller": True}]
    return {"metadata": md, "spec": {"devices": {"requests": [request]}}}


def allocation_result(request: str = "req-1", device: str = "instance-1", driver: str = DRIVER) -> Obj:
    return {
        "devices": {"results": [{"request": request, "driver": driver, "pool": NODE, "device": device}]},
        "nodeSelector": name_selector(NODE),
    }


def with_allocation(c: Obj, allocation: Obj | None) -> Obj:
    """st.FromResourceClaim(c).Allocation(a): the finalizer comes with it."""
    out = msgspec.json.decode(msgspec.json.encode(c))
    finalizers = out["metadata"].setdefault("finalizers", [])
    if FINALIZER not in finalizers:
        finalizers.append(FINALIZER)
    out.setdefault("status", {})["allocation"] = allocation
    if allocation is None:
        out["status"].pop("allocation")
    return out


def reserved(c: Obj) -> Obj:
    out = msgspec.json.decode(msgspec.json.encode(c))
    out.setdefault("status", {}).setdefault("reservedFor", []).append({"resource": "pods", "name": POD, "uid": POD_UID})
    return out


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


PENDING = claim(owned=True)
PENDING_PRIORITIZED = claim(owned=True, prioritized=True)
OTHER = claim("not-my-claim")
ALLOCATED = with_allocation(PENDING, allocation_result())
ALLOCATED_PRIORITIZED = with_allocation(PENDING_PRIORITIZED, allocation_result("req-1/subreq-1"))
IN_USE = reserved(ALLOCATED)
OTHER_ALLOCATED = with_allocation(OTHER, allocation_result())
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
    #: Expected statuses (reasons; SKIP; () for success) per step; a step not listed must succeed or not run.
    preenqueue: tuple[str, ...] = ()
    prefilter: tuple[str, ...] = ()
    filter: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    filter_error: bool = False
    postfilter: tuple[str, ...] | None = None
    #: The claim Reserve puts in flight.
    in_flight: Obj | None = None
    #: The stored claims after PreBind (or PostFilter, or Unreserve), by name; None: unchanged.
    after: dict[str, Obj] | None = None
    #: Changes to the stored claim just before PreBind (a concurrent writer).
    before_prebind: Callable[[Obj], Obj] | None = None
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


def _not_owner(c: Obj) -> Obj:
    c = msgspec.json.decode(msgspec.json.encode(c))
    c["metadata"]["ownerReferences"][0]["uid"] += "123"
    return c


# Upstream's text after "CEL runtime error: " is cel-go's ("no such key:
# healthy"); Berth's CEL is cel-cpp's, whose words differ ("NOT_FOUND: Key
# not found in map : \"healthy\""): the cases compare up to that point and
# check that the key is named.
CEL_CLAIM_ERROR = f"claim {NS}/{CLAIM}: selector #0: CEL runtime error: "
CASES: dict[str, Case] = {
    "empty": Case(testing.make_pod("foo"), prefilter=(SKIP,), postfilter=st("no new claims to deallocate")),
    "claim-reference": Case(
        POD_WITH_CLAIM_NAME, claims=[ALLOCATED, OTHER], after={CLAIM: IN_USE, "not-my-claim": OTHER}
    ),
    "claim-template": Case(
        POD_WITH_CLAIM_TEMPLATE_IN_STATUS, claims=[ALLOCATED, OTHER], after={CLAIM: IN_USE, "not-my-claim": OTHER}
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
        postfilter=st("still not schedulable"),
    ),
    "with-resources": Case(
        POD_WITH_CLAIM_NAME,
        claims=[PENDING],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE],
        in_flight=ALLOCATED,
        after={CLAIM: IN_USE},
    ),
    "with-resources-has-finalizer": Case(
        POD_WITH_CLAIM_NAME,
        claims=[_add_finalizer(PENDING)],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE],
        in_flight=ALLOCATED,
        after={CLAIM: IN_USE},
    ),
    "with-resources-finalizer-gets-removed": Case(
        POD_WITH_CLAIM_NAME,
        claims=[_add_finalizer(PENDING)],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE],
        before_prebind=_drop_finalizer,
        in_flight=ALLOCATED,
        after={CLAIM: IN_USE},
    ),
    "with-resources-finalizer-gets-added": Case(
        POD_WITH_CLAIM_NAME,
        claims=[PENDING],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE],
        before_prebind=_add_finalizer,
        in_flight=ALLOCATED,
        after={CLAIM: IN_USE},
    ),
    "skip-bind": Case(
        POD_WITH_CLAIM_NAME,
        claims=[PENDING],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE],
        in_flight=ALLOCATED,
        unreserve_before_prebind=True,
    ),
    "exhausted-resources": Case(
        POD_WITH_CLAIM_NAME,
        claims=[PENDING, OTHER_ALLOCATED],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE],
        filter={NODE: st(CANNOT, f"claim {NS}/{CLAIM}, request req-1: all 1 matching devices are allocated")},
        postfilter=st("still not schedulable"),
    ),
    "tainted-device-disabled": Case(
        POD_WITH_CLAIM_NAME,
        claims=[PENDING],
        classes=[DEVICE_CLASS],
        slices=[
            {
                **WORKER_SLICE,
                "spec": {
                    **WORKER_SLICE["spec"],
                    "devices": [
                        {
                            "name": "instance-1",
                            "taints": [{"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}],
                        }
                    ],
                },
            }
        ],
        in_flight=ALLOCATED,
        after={CLAIM: IN_USE},
    ),
    "request-admin-access-with-DRAAdminAccess-featuregate": Case(
        POD_WITH_CLAIM_NAME,
        claims=[admin_access(PENDING), OTHER_ALLOCATED],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE],
        in_flight=admin_access(ALLOCATED),
        after={CLAIM: admin_access(IN_USE), "not-my-claim": OTHER_ALLOCATED},
    ),
    "structured-ignore-allocated-admin-access": Case(
        POD_WITH_CLAIM_NAME,
        claims=[PENDING, admin_access(OTHER_ALLOCATED)],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE],
        in_flight=ALLOCATED,
        after={CLAIM: IN_USE, "not-my-claim": admin_access(OTHER_ALLOCATED)},
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
        filter={NODE: st(f"class {CLASS}: selector #0: CEL runtime error: ")},
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
        postfilter=st("no new claims to deallocate"),
    ),
    "wrong-topology": Case(
        POD_WITH_CLAIM_NAME,
        claims=[WRONG_TOPOLOGY],
        filter={NODE: st("resourceclaim not available on the node")},
        postfilter=st("deallocation of ResourceClaim completed"),
        after={CLAIM: with_allocation(WRONG_TOPOLOGY, None)},
    ),
    "good-topology": Case(POD_WITH_CLAIM_NAME, claims=[GOOD_TOPOLOGY], after={CLAIM: reserved(GOOD_TOPOLOGY)}),
    "bind-failure": Case(
        POD_WITH_CLAIM_NAME,
        claims=[GOOD_TOPOLOGY],
        after={CLAIM: reserved(GOOD_TOPOLOGY)},
        unreserve_after_bind_failure={CLAIM: GOOD_TOPOLOGY},
    ),
    "reserved-okay": Case(POD_WITH_CLAIM_NAME, claims=[IN_USE], after={CLAIM: IN_USE}),
    "claim-with-request-with-unknown-device-class": Case(
        POD_WITH_CLAIM_NAME,
        claims=[with_class(claim(), "does-not-exist")],
        prefilter=st("request req-1: device class does-not-exist does not exist"),
        postfilter=st("no new claims to deallocate"),
    ),
    "claim-with-prioritized-list-unknown-device-class": Case(
        POD_WITH_CLAIM_NAME,
        claims=[with_class(claim(prioritized=True), "does-not-exist")],
        prefilter=st("request req-1/subreq-1: device class does-not-exist does not exist"),
        postfilter=st("no new claims to deallocate"),
    ),
    "claim-with-prioritized-list": Case(
        POD_WITH_CLAIM_NAME,
        claims=[PENDING_PRIORITIZED],
        classes=[DEVICE_CLASS],
        slices=[WORKER_SLICE],
        in_flight=ALLOCATED_PRIORITIZED,
        after={CLAIM: reserved(ALLOCATED_PRIORITIZED)},
    ),
}


# ---------------------------------------------------------------- the walk


def _comparable(c: dra.ResourceClaim | Obj) -> dra.ResourceClaim:
    """A claim without uid and resourceVersion (cmpopts.IgnoreFields), compared
    as a struct (field by field)."""
    obj = msgspec.convert(c, dra.ResourceClaim) if isinstance(c, dict) else c
    md = msgspec.structs.replace(obj.metadata, uid="", resource_version="")
    return msgspec.structs.replace(obj, metadata=md)


class Walk:
    def __init__(self, case: Case) -> None:
        self.cluster = testing.Cluster(nodes=[node(n) for n in case.nodes])
        embedded = self.cluster.berth.cluster
        embedded.upsert_device_classes(msgspec.convert(c, dra.DeviceClass) for c in case.classes)
        embedded.upsert_resource_slices(msgspec.convert(s, dra.ResourceSlice) for s in case.slices)
        embedded.upsert_resource_claims(msgspec.convert(c, dra.ResourceClaim) for c in case.claims)
        self.embedded = embedded
        fwk = self.cluster.berth.core.frameworks[self.cluster.berth.cfg.profiles[0].scheduler_name]
        self.plugin: DynamicResources = fwk.plugins[NAME]
        self.store = self.cluster.berth.core.dra

    def claims(self) -> dict[str, dra.ResourceClaim]:
        return {c.metadata.name: _comparable(c) for c in self.embedded.resource_claims.values()}

    def in_flight(self) -> list[dra.ResourceClaim]:
        return [_comparable(c) for c in self.store.pending_allocations()]

    async def drain(self) -> None:
        await self.cluster.berth.core.client.drain()


def _reasons(status: fw.Status) -> tuple[str, ...]:
    if status.code == fw.Code.SKIP:
        return (SKIP,)
    return status.reasons


@pytest.mark.parametrize("name", list(CASES))
async def test_plugin(name: str) -> None:
    case = CASES[name]
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
    passed: list[str] = []
    if res.status.ok:
        for row in nodes.alive_rows().tolist():
            rows = np.asarray([row], dtype=np.int64)
            verdict = p.filter(state, pi, nodes, rows).status_at(0)
            if verdict.code == fw.Code.ERROR:
                assert case.filter_error
                (want,) = case.filter[nodes.name(row)]
                assert verdict.message().startswith(want)
                assert ATTR in verdict.message()
                return  # "An error aborts scheduling."
            assert _reasons(verdict) == case.filter.get(nodes.name(row), ()), nodes.name(row)
            if verdict.ok:
                passed.append(nodes.name(row))
    if not passed:
        post = p.post_filter(state, pi, nodes, {})
        assert post.status.code == fw.Code.UNSCHEDULABLE
        assert _reasons(post.status) == (case.postfilter or ())
        await w.drain()
        assert w.claims() == (initial if case.after is None else {k: _comparable(v) for k, v in case.after.items()})
        return
    assert case.postfilter is None

    chosen = passed[0]
    assert p.reserve(state, pi, chosen).ok
    assert w.in_flight() == ([_comparable(case.in_flight)] if case.in_flight else [])
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
    status = await p.pre_bind(state, pi, chosen)
    assert status.ok, status
    assert w.in_flight() == []
    want = dict(initial)
    want.update({k: _comparable(v) for k, v in (case.after or {}).items()})
    assert w.claims() == want
    if case.unreserve_after_bind_failure is not None:
        p.unreserve(state, pi, chosen)
        await w.drain()
        want.update({k: _comparable(v) for k, v in case.unreserve_after_bind_failure.items()})
        assert w.claims() == want


# ---------------------------------------------------------------- beyond the table


def test_default_profile_runs_it_before_default_preemption() -> None:
    """default_plugins.go applyDynamicResources: just before DefaultPreemption."""
    from berth.framework import registry

    names = [n for n, _ in registry.DEFAULT_MULTI_POINT]
    assert names.index(NAME) == names.index("DefaultPreemption") - 1
    resolved = registry.resolve_profile(testing.parse_config({}).profiles[0])
    post = resolved.points["postFilter"]
    assert post.index(NAME) == post.index("DefaultPreemption") - 1
    for point in ("preEnqueue", "preFilter", "filter", "reserve", "preBind"):
        assert NAME in resolved.points[point], point


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
