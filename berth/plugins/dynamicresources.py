"""DynamicResources: a pod's ResourceClaims must be allocated, on the node it gets.

A port of kube-scheduler v1.37.2's
``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go`` (with
``dra_manager.go`` and ``allocateddevices.go``, whose state lives in
:class:`berth.scheduling.dra_state.DraStore`, the Handle's ``dra``), over
Berth's structured allocator (:mod:`berth.dra`), following the feature
gates of the cluster's release (the Handle's ``features``; the allocator's
switches are built from them in one place, :func:`allocator_features`).
Where 1.35, 1.36 and 1.37 differ without a gate, the code compares
``features.version`` and cites the release.

- **PreEnqueue**: every claim of the pod exists (a templated claim is named
  in ``status.resourceClaimStatuses`` by kube-controller-manager), is not
  being deleted and, when generated, is owned by the pod; else the pod waits
  gated, with upstream's message, until a claim event for it.
- **PreFilter**: collects the claims (Skip without any). An allocated claim
  pins the pod to its ``status.allocation.nodeSelector``; one reserved by
  the maximum of consumers already is "resourceclaim in use"; an
  unallocated one needs its device classes and must not be in flight for
  another pod. The allocator is built once per snapshot of classes and
  slices (upstream builds one per cycle; Berth keeps it while they do not
  change, so CEL results stay memoised), and the devices in use are read
  once: allocated by any claim — another scheduler's too, as the claims'
  status says — plus this scheduler's in-flight allocations, with the
  shares and consumed capacity of devices allocated more than once
  (DRAConsumableCapacity). The claims to allocate are read and validated
  here once (``Allocator.prepare``), as upstream's PreFilter builds its
  allocator state once per cycle.
- **Filter**, per node: allocated claims' node selectors match (and, with
  binding conditions, their devices have not failed or timed out binding);
  the unallocated claims can be allocated there (the node's pools only; the
  framework stops handing out nodes once it has enough feasible ones, as
  ``findNodesThatPassFilters`` does). Upstream says only "cannot allocate
  all claims"; Berth adds which claim and request fail and why (no matching
  device, all matching devices allocated, taints, constraint unmet) as a
  second reason, which Explain, ``berth why`` and the FitError show. A node
  whose search runs past ``filterTimeout`` is an error (DRASchedulerFilterTimeout);
  a node where nothing fits and some pool is invalid says so
  ("invalid resource pools were encountered").
- **Score** (since 1.35, weight 2 in the default set): ``8 - index`` of each
  firstAvailable subrequest allocated, summed over the pod's claims, then
  normalised to 0..100 (DRAPrioritizedList).
- **Reserve** puts the node's allocation in flight (the DraStore's
  in-flight map by claim uid), so no later cycle hands its devices out;
  **Unreserve** drops it and, for a claim PreBind already reserved, removes
  the pod from ``reservedFor`` in the background.
- **PreBind**, through the Handle's client (the claim's source: the API
  server or the embedded cluster): the ``resource.kubernetes.io/delete-protection``
  finalizer, then ``status.allocation`` (with its ``allocationTimestamp``
  when binding conditions are on) and the pod in ``status.reservedFor`` in
  one status update, retried on conflict as ``retry.RetryOnConflict`` does;
  the written claim is assumed (used before its informer event). When an
  allocated device has binding conditions, PreBind then records the pod's
  ``BindingConditionsPending`` event (Normal, action ``Scheduling``,
  "waiting for binding conditions for device on node <node>") and waits
  (polling every 5 s, up to ``bindingTimeout``) until the driver reports
  them all true, and fails on a binding failure condition or the timeout.
- **PostFilter** deallocates a claim that is allocated, reserved by no other
  pod and unavailable on some node, before DefaultPreemption (which comes
  after this plugin) evicts anyone.

- **Extended resources backed by DRA** (DRAExtendedResource, on from 1.36;
  ``extendeddynamicresources.go``): a pod requesting an extended resource a
  DeviceClass names (:mod:`berth.dra.extended`) gets one more claim, after
  its own: the one an earlier cycle created for it (annotated, owned by the
  pod), else an in-memory claim without requests. Filter gives it, per
  node, a request per container for each such resource the node has no
  allocatable of (NodeResourcesFit left those to this plugin), allocated
  with the pod's own claims; "cannot fit resource" where a resource is
  neither advertised nor backed. PreBind creates it (``generateName``
  ``<pod>-extended-resources-``, the ``resource.kubernetes.io/extended-resource-claim``
  annotation, the pod as controller) through the Handle's client — the API
  server, or the embedded cluster's model — then writes its allocation and
  reservation and the pod's ``status.extendedResourceClaimStatus``;
  Unreserve deletes a claim it created. A claim of an earlier cycle that
  has requests and no allocation makes the pod unschedulable ("cannot
  schedule extended resource claim"); PostFilter deletes it.

Messages are upstream's byte for byte where upstream has one (cited inline).
Not ported: the PodGroup paths
(``PodGroupPostFilter``, pending allocations shared in a PodGroup cycle,
GenericWorkload), node-allocatable resources (alpha).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import Awaitable, Sequence
from datetime import UTC, datetime
from typing import ClassVar

import msgspec
import numpy as np
import numpy.typing as npt

from berth import dra as allocation
from berth import features as gates
from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import dra, model, resources
from berth.cluster.sources import Conflict, EventType
from berth.dra import extended, pools
from berth.framework import interface as fw
from berth.framework.handle import DraLister, Handle
from berth.plugins.helpers import default_normalize_score

__all__ = [
    "BINDING_CONDITIONS_PENDING",
    "NAME",
    "REASON_CANNOT_ALLOCATE",
    "REASON_INVALID_POOLS",
    "REASON_NOT_AVAILABLE",
    "DynamicResources",
    "DynamicResourcesArgs",
    "allocated_state",
    "allocator_features",
    "compute_score",
    "pod_claim_name",
]

IntArray = npt.NDArray[np.int64]

NAME = "DynamicResources"
#: dynamicresources.go Filter's reasons.
REASON_CANNOT_ALLOCATE = "cannot allocate all claims"
REASON_NOT_AVAILABLE = "resourceclaim not available on the node"
#: Filter's reason where nothing fits and a pool the node reaches is invalid
#: (structured.ErrFailedAllocationOnNode, k8s.io/dynamic-resource-allocation v0.35+).
REASON_INVALID_POOLS = allocation.REASON_INVALID_POOLS
#: retry.DefaultRetry (client-go): 5 steps, 10 ms apart.
RETRY_STEPS = 5
RETRY_DELAY_SECONDS = 0.01
#: config.DynamicResourcesFilterTimeoutDefault, DynamicResourcesBindingTimeoutDefault (v1.37.2).
FILTER_TIMEOUT_DEFAULT_SECONDS = 10.0
BINDING_TIMEOUT_DEFAULT_SECONDS = 600.0
#: AssumeExtendedResourceTimeoutDefaultSeconds (extendeddynamicresources.go v1.37.2).
ASSUME_EXTENDED_CLAIM_TIMEOUT_SECONDS = 120
#: PreBind's poll interval while binding conditions are pending (wait.PollUntilContextTimeout).
BINDING_POLL_SECONDS = 5.0
#: The event PreBind records before it waits for binding conditions
#: (dynamicresources.go v1.37.2: Normal, action "Scheduling").
BINDING_CONDITIONS_PENDING = "BindingConditionsPending"

_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Go's ``time.ParseDuration`` (a ``metav1.Duration`` in the configuration), in seconds."""
    body = text.strip()
    sign = -1.0 if body.startswith("-") else 1.0
    body = body.lstrip("+-")
    if body == "0":
        return 0.0
    total, at = 0.0, 0
    for m in _DURATION_PART.finditer(body):
        if m.start() != at:
            break
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        at = m.end()
    if not body or at != len(body):
        raise ValueError(f'time: invalid duration "{text}"')
    return sign * total


class DynamicResourcesArgs(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """DynamicResourcesArgs (kubescheduler.config.k8s.io/v1, v1.37.2): durations as Go writes them ("10s")."""

    filter_timeout: str | None = None
    binding_timeout: str | None = None

    def validate(self) -> None:
        """The durations parse; the gate-dependent checks (ValidateDynamicResourcesArgs)
        are the plugin's, which knows the gates."""
        for value in (self.filter_timeout, self.binding_timeout):
            if value is not None:
                parse_duration(value)


def allocated_state(store: DraLister, *, consumable_capacity: bool) -> allocation.AllocatedState:
    """GatherAllocatedState / ListAllAllocatedDevices (dynamicresources.go
    PreFilter, v1.37.2): with consumable capacity, results with a ``shareID``
    are shares (the device stays allocatable while capacity is left);
    without it every result holds its device whole."""
    whole = store.allocated_devices()
    shared = store.shared_devices()
    if consumable_capacity:
        return allocation.AllocatedState(devices=whole, shared=shared, capacity=store.consumed_capacity())
    return allocation.AllocatedState(devices=whole | shared if shared else whole)


def allocator_features(f: gates.Features) -> allocation.Features:
    """AllocatorFeatures (dynamicresources.go v1.37.2): the allocator's switches from the gates."""
    return allocation.Features(
        admin_access=f.dra_admin_access,
        prioritized_list=f.dra_prioritized_list,
        partitionable_devices=f.dra_partitionable_devices,
        device_taints=f.dra_device_taints,
        device_binding_and_status=f.dra_device_binding_conditions and f.dra_resource_claim_device_status,
        consumable_capacity=f.dra_consumable_capacity,
        fractional_capacity_range=f.dra_fractional_capacity_range,
        release=f.version.minor,
    )


def compute_score(
    claims: Sequence[dra.ResourceClaim], allocated: Sequence[Sequence[str]], version: gates.KubeVersion
) -> int:
    """computeScore (dynamicresources.go): per claim, ``8 - i`` for the i-th
    firstAvailable subrequest its allocation took. ``allocated`` lists, per
    claim allocated in this cycle (in order), the request names of its
    devices; a claim allocated before counts its ``status.allocation``.
    v1.35.4 indexes ``allocated`` by the claim's position among all claims
    (fixed in 1.36: a claim allocated before has no entry there). Raises
    ValueError where upstream's Score fails."""
    score = 0
    pending = 0
    for i, claim in enumerate(claims):
        if version < gates.KubeVersion(1, 36):
            if i >= len(allocated):
                raise ValueError(f"number of allocations {len(allocated)} is smaller than number of claims")
            names: Sequence[str] = allocated[i]
        elif claim.status.allocation is not None:
            names = [r.request for r in claim.status.allocation.devices.results]
        else:
            if pending >= len(allocated):
                raise ValueError(
                    f"number of allocations {len(allocated)} is smaller than number of claims needing allocation"
                )
            names = allocated[pending]
            pending += 1
        subrequests = {n for n in names if "/" in n}  # resourceclaim.IsSubRequestRef
        for request in claim.spec.devices.requests:
            if request.exactly is not None:
                continue
            for j, sub in enumerate(request.first_available):
                if f"{request.name}/{sub.name}" in subrequests:
                    score += dra.FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE - j
    return score


def _timeouts(args: DynamicResourcesArgs, f: gates.Features) -> tuple[float, float]:
    """The filter and binding timeouts, seconds: SetDefaults_DynamicResourcesArgs
    then ValidateDynamicResourcesArgs (v1.37.2), which depend on the gates."""
    binding_gates = f.dra_device_binding_conditions and f.dra_resource_claim_device_status
    problems = []
    filter_timeout = 0.0
    if f.dra_scheduler_filter_timeout:
        filter_timeout = FILTER_TIMEOUT_DEFAULT_SECONDS
        if args.filter_timeout is not None:
            filter_timeout = parse_duration(args.filter_timeout)
            if filter_timeout < 0:
                problems.append(f"filterTimeout: Invalid value: {args.filter_timeout!r}: must be zero or positive")
    elif args.filter_timeout is not None:
        problems.append("filterTimeout: Forbidden: DRASchedulingFilterTimeout feature gate is disabled")
    binding_timeout = BINDING_TIMEOUT_DEFAULT_SECONDS
    if binding_gates:
        if args.binding_timeout is not None:
            binding_timeout = parse_duration(args.binding_timeout)
            if binding_timeout < 1:
                problems.append(f"bindingTimeout: Invalid value: {args.binding_timeout!r}: must be at least 1 second")
    elif args.binding_timeout is not None:
        problems.append(
            "bindingTimeout: Forbidden: "
            "DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled"
        )
    if problems:
        raise ValueError("; ".join(problems))
    return filter_timeout, binding_timeout


class _Unschedulable(Exception):
    """A claim the pod cannot use now (foreachPodResourceClaim's errors)."""


def pod_claim_name(pod: model.Pod, ref: model.PodResourceClaim) -> tuple[str | None, bool]:
    """``resourceclaim.Name`` (k8s.io/dynamic-resource-allocation v0.37.2): the
    claim's name (None: intentionally not created, skip it) and whether it
    must be checked to belong to the pod. Raises _Unschedulable."""
    if ref.resource_claim_name is not None:
        return ref.resource_claim_name, False
    if ref.resource_claim_template_name is not None:
        for status in pod.status.resource_claim_statuses:
            if status.name == ref.name:
                return status.resource_claim_name, True
        raise _Unschedulable(f'pod "{pod.metadata.namespace}/{pod.metadata.name}": ResourceClaim not created yet')
    raise _Unschedulable(
        f'pod "{pod.metadata.namespace}/{pod.metadata.name}", spec.resourceClaim "{ref.name}": '
        "none of the supported fields are set"
    )


def _kobj(claim: dra.ResourceClaim) -> str:
    """klog.KObj: ``namespace/name``."""
    return f"{claim.metadata.namespace}/{claim.metadata.name}"


def _reserved_for(pod: PodInfo, claim: dra.ResourceClaim) -> bool:
    """resourceclaim.IsReservedForPod."""
    return any(r.uid == pod.uid for r in claim.status.reserved_for)


@dataclasses.dataclass(slots=True)
class _State:
    """stateData: the pod's claims (1:1 with spec.resourceClaims that have one)."""

    claims: list[dra.ResourceClaim] = dataclasses.field(default_factory=list)
    #: Allocated claims: where their devices are reachable (None: anywhere).
    available_on: list[model.NodeSelector | None] = dataclasses.field(default_factory=list)
    #: Set by Reserve for the claims this scheduler allocates.
    allocations: list[dra.AllocationResult | None] = dataclasses.field(default_factory=list)
    to_allocate: list[int] = dataclasses.field(default_factory=list)
    #: The claims to allocate, read and validated once (PreFilter) for every node.
    prepared: allocation.Prepared | None = None
    #: Filter's solutions by node name (AllocationResults in the order of
    #: ``to_allocate``, built by Reserve for the chosen node only).
    node_allocations: dict[str, allocation.Solution] = dataclasses.field(default_factory=dict)
    #: Allocated claims not available on at least one node (PostFilter deallocates one).
    unavailable: set[int] = dataclasses.field(default_factory=set)
    #: Allocated claims whose devices failed binding or timed out binding
    #: (binding conditions): unavailable on every node.
    not_bound: set[int] = dataclasses.field(default_factory=set)
    #: Index in ``claims`` of the claim for extended resources backed by DRA
    #: (always the last), None without one; its uid at PreFilter (a
    #: temporary one for the in-memory claim: the in-flight map's key).
    extended: int | None = None
    extended_uid: str = ""
    #: The pod's scalar requests (draExtendedResource.podScalarResources).
    scalar_requests: dict[str, int] = dataclasses.field(default_factory=dict)
    #: Per node Filter passed: its variant of the extended claim (None: the
    #: node serves every such resource through a device plugin) and the
    #: container mappings PreBind writes into the pod's status.
    node_extended: dict[str, tuple[dra.ResourceClaim | None, list[model.ContainerExtendedResourceRequest]]] = (
        dataclasses.field(default_factory=dict)
    )
    #: With an unallocated extended claim, the claims to allocate are
    #: prepared per distinct variant of it (nodes share few): by its requests.
    prepared_for: dict[tuple[tuple[str, str, int], ...], allocation.Prepared | None] = dataclasses.field(
        default_factory=dict
    )
    allocated: allocation.AllocatedState | None = None
    #: Filter's statuses by Unsatisfiable (many nodes share one): (outcome, status) by id.
    _statuses: dict[int, tuple[allocation.Unsatisfiable, fw.Status]] = dataclasses.field(default_factory=dict)

    def unsatisfiable_status(self, outcome: allocation.Unsatisfiable) -> fw.Status:
        """Filter's status for a node where the claims cannot be allocated."""
        got = self._statuses.get(id(outcome))
        if got is None or got[0] is not outcome:
            if outcome.reason == allocation.REASON_INVALID_POOLS:
                # ErrFailedAllocationOnNode: upstream's own reason, nothing to add.
                st = fw.Status.unresolvable(REASON_INVALID_POOLS, plugin=NAME)
            else:
                st = fw.Status.unresolvable(REASON_CANNOT_ALLOCATE, outcome.message, plugin=NAME)
            got = self._statuses[id(outcome)] = (outcome, st)
        return got[1]


STATE_KEY: fw.StateKey[_State] = fw.StateKey(NAME)


class DynamicResources:
    """kube-scheduler's DynamicResources plugin; see the module docstring."""

    NAME: ClassVar[str] = NAME
    Args: ClassVar[type[DynamicResourcesArgs]] = DynamicResourcesArgs
    #: Filter judges node by node (an allocation per node): the framework
    #: hands it only the rows it still needs (``Framework.run_filter``).
    FILTER_PER_NODE: ClassVar[bool] = True

    def __init__(self, args: DynamicResourcesArgs | None = None, handle: Handle | None = None) -> None:
        if handle is None:
            raise ValueError(f"{NAME} needs the Handle (its DRA listers and client)")
        self.handle = handle
        self.gates = handle.features
        self.features = allocator_features(handle.features)
        self.filter_timeout, self.binding_timeout = _timeouts(args or DynamicResourcesArgs(), handle.features)
        # dynamicresources.go New: "a LRU cache for compiled CEL expressions".
        self.cel_cache = allocation.CelCache()
        self._allocator: allocation.Allocator | None = None
        self._allocator_generation = -1
        self._classes = extended.ResolverCache()

    @property
    def store(self) -> DraLister:
        if self.handle.dra is None:
            raise RuntimeError(f"{NAME}: the Handle has no DRA lister")
        return self.handle.dra

    # ------------------------------------------------------------ queueing

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        """EventsToRegister with SchedulingQueueHint on (the default). The
        ``Pod/UpdatePodGeneratedResourceClaim`` event needs no entry: a pod's
        own update re-runs PreEnqueue (and retries an unschedulable pod)."""
        add_update = fw.ActionType.ADD | fw.ActionType.UPDATE
        return (
            fw.ClusterEvent(
                "Node", fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_LABEL | fw.ActionType.UPDATE_NODE_ALLOCATABLE
            ),
            fw.ClusterEvent("ResourceClaim", add_update),
            fw.ClusterEvent("DeviceClass", add_update),
            fw.ClusterEvent("ResourceSlice", add_update),
        )

    def pre_enqueue(self, pod: PodInfo) -> fw.Status:
        if not pod.pod.spec.resource_claims:
            return fw.SUCCESS
        try:
            self._pod_claims(pod.pod)
        except _Unschedulable as e:
            return fw.Status.unresolvable(str(e), plugin=NAME)
        return fw.SUCCESS

    def _pod_claims(self, pod: model.Pod) -> list[dra.ResourceClaim]:
        """podResourceClaims / foreachPodResourceClaim."""
        claims = []
        for ref in pod.spec.resource_claims:
            name, must_check_owner = pod_claim_name(pod, ref)
            if name is None:
                continue
            namespace = pod.metadata.namespace or "default"
            claim = self.store.claim(namespace, name)
            if claim is None:
                # assumecache.NotFoundError for the "ResourceClaim" cache.
                raise _Unschedulable(f'could not find ResourceClaim "{namespace}/{name}"')
            if claim.metadata.deletion_timestamp:
                raise _Unschedulable(f'resourceclaim "{claim.metadata.name}" is being deleted')
            if must_check_owner and not _controlled_by(claim, pod):
                # resourceclaim.IsForPod
                raise _Unschedulable(
                    f"ResourceClaim {claim.metadata.namespace}/{claim.metadata.name} was not created for pod "
                    f"{namespace}/{pod.metadata.name} (pod is not owner)"
                )
            claims.append(claim)
        return claims

    # ------------------------------------------------------------ filtering

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        s = _State()
        state.write(STATE_KEY, s)
        claims: list[dra.ResourceClaim] = []
        if pod.pod.spec.resource_claims:
            try:
                claims = self._pod_claims(pod.pod)
            except _Unschedulable as e:
                return fw.PreFilterResult(fw.Status.unresolvable(str(e), plugin=NAME))
        extended_claim = self._pre_filter_extended(pod, s)
        if extended_claim is not None:
            s.extended, s.extended_uid = len(claims), extended_claim.metadata.uid
            claims = [*claims, extended_claim]
        if not claims:
            return fw.PreFilterResult(fw.Status.skip())
        store = self.store
        s.available_on = [None] * len(claims)
        s.allocations = [None] * len(claims)
        for i, claim in enumerate(claims):
            alloc = claim.status.allocation
            if alloc is not None:
                # resourceclaim.CanBeReserved returns true (v0.35 to v0.37; the API
                # server refuses a 257th consumer); Berth checks the limit
                # here, as upstream did before, so the pod waits instead of
                # failing in PreBind.
                full = len(claim.status.reserved_for) >= dra.RESOURCE_CLAIM_RESERVED_FOR_MAX_SIZE
                if full and not _reserved_for(pod, claim):
                    return fw.PreFilterResult(fw.Status.unresolvable("resourceclaim in use", plugin=NAME))
                s.available_on[i] = alloc.node_selector
                if self._binding_gates:
                    # Filter's binding-conditions check: failed, or still pending past
                    # bindingTimeout, makes the claim a candidate for PostFilter's deallocation.
                    try:
                        pending = not _ready_for_binding(claim) and self._binding_timed_out(claim)
                    except _BindingError:
                        pending = True
                    if pending:
                        s.not_bound.add(i)
                continue
            s.to_allocate.append(i)
            if store.has_pending_allocation(claim.metadata.uid):
                return fw.PreFilterResult(
                    fw.Status.unresolvable(
                        f"resource claim {_kobj(claim)} is in the process of being allocated", plugin=NAME
                    )
                )
            if i == s.extended:
                # "Continue without validating the special claim for extended
                # resource backed by DRA": Filter gives it its requests per node.
                continue
            for request in claim.spec.devices.requests:
                if request.exactly is not None:
                    st = self._validate_class(request.exactly.device_class_name, request.name)
                elif request.first_available and not self.gates.dra_prioritized_list:
                    st = fw.Status.unresolvable(
                        f"resource claim {_kobj(claim)}, request {request.name}: has subrequests, "
                        "but the DRAPrioritizedList feature is disabled",
                        plugin=NAME,
                    )
                elif request.first_available:
                    st = fw.SUCCESS
                    for sub in request.first_available:
                        st = self._validate_class(sub.device_class_name, f"{request.name}/{sub.name}")
                        if not st.ok:
                            break
                else:
                    st = fw.Status.unresolvable(
                        f"resource claim {_kobj(claim)}, request {request.name}: unknown request type", plugin=NAME
                    )
                if not st.ok:
                    return fw.PreFilterResult(st)
        s.claims = claims
        if s.extended is not None and s.extended in s.to_allocate:
            # The extended claim's requests depend on the node: Filter prepares per variant.
            s.allocated = allocated_state(store, consumable_capacity=self.gates.dra_consumable_capacity)
        elif s.to_allocate:
            # dynamicresources.go PreFilter: NewAllocator once per cycle, over
            # the devices in use now; Filter then only runs Allocate per node.
            timeout = self.filter_timeout if self.gates.dra_scheduler_filter_timeout else 0.0
            s.prepared = self._current_allocator(store).prepare(
                [claims[i] for i in s.to_allocate],
                allocated_state(store, consumable_capacity=self.gates.dra_consumable_capacity),
                versions=store.pool_versions,
                timeout=timeout or None,
            )
        return fw.PreFilterResult()

    def _pre_filter_extended(self, pod: PodInfo, s: _State) -> dra.ResourceClaim | None:
        """preFilterExtendedResources: the pod's claim for extended resources
        backed by DRA (one of an earlier cycle, else a new in-memory one), or
        None when the gate is off or no class backs what the pod requests."""
        if not self.gates.dra_extended_resource:
            return None
        resolver = self._classes.get(self.store)
        if not resolver.backs_any(pod.requests):
            return None
        s.scalar_requests = {n: v for n, v in pod.requests.items() if resources.is_scalar(n)}
        found = extended.find_claim(pod.pod, self.store.claims())
        return found if found is not None else extended.special_claim(pod.pod)

    def _filter_extended(
        self, s: _State, pod: model.Pod, node: model.Node
    ) -> fw.Status | tuple[dra.ResourceClaim | None, list[model.ContainerExtendedResourceRequest]]:
        """filterExtendedResources: the node's variant of the extended claim
        (None: nothing to allocate for it there) and its mappings, or why the
        pod cannot use the node."""
        if s.extended is None:
            return None, []
        claim = s.claims[s.extended]
        if claim.spec.devices.requests:
            # "The claim is from the prior scheduling cycle, return unschedulable
            # such that it can be deleted at the PostFilter phase, and retry anew."
            return fw.Status.unresolvable("cannot schedule extended resource claim", plugin=NAME)
        resolver = self._classes.get(self.store)
        allocatable = resources.node_allocatable(node)
        through_dra = []
        for name, amount in s.scalar_requests.items():
            if not amount or not extended.is_dra_extended_resource_name(name):
                continue
            backed = resolver.device_class(name) is not None
            if backed and allocatable.get(name, 0) == 0:
                through_dra.append(name)
            elif name not in allocatable:
                return fw.Status.unresolvable("cannot fit resource", plugin=NAME)
        if not through_dra or claim.status.allocation is not None:
            return None, []
        requests, mappings = extended.requests_and_mappings(pod, through_dra, resolver)
        spec = dra.ResourceClaimSpec(devices=dra.DeviceClaim(requests=requests))
        return msgspec.structs.replace(claim, spec=spec), mappings

    def _prepared_for(self, s: _State, node_claim: dra.ResourceClaim | None) -> allocation.Prepared | None:
        """The claims to allocate on a node whose extended claim is ``node_claim``, prepared once per variant."""
        key = tuple(
            (r.name, r.exactly.device_class_name, r.exactly.count)
            for r in (node_claim.spec.devices.requests if node_claim is not None else ())
            if r.exactly is not None
        )
        if key in s.prepared_for:
            return s.prepared_for[key]
        claims = [s.claims[i] for i in s.to_allocate if i != s.extended]
        if node_claim is not None:
            claims.append(node_claim)
        prepared = None
        if claims:
            timeout = self.filter_timeout if self.gates.dra_scheduler_filter_timeout else 0.0
            store = self.store
            prepared = self._current_allocator(store).prepare(
                claims,
                s.allocated if s.allocated is not None else allocation.AllocatedState(devices=frozenset()),
                versions=store.pool_versions,
                timeout=timeout or None,
            )
        s.prepared_for[key] = prepared
        return prepared

    def _allocating(self, s: _State, node: str) -> list[int]:
        """The indices of the claims whose allocations Filter found on ``node``, in their order."""
        if s.extended is None or s.extended not in s.to_allocate:
            return s.to_allocate
        user = [i for i in s.to_allocate if i != s.extended]
        node_claim = s.node_extended.get(node, (None, []))[0]
        return [*user, s.extended] if node_claim is not None else user

    def _validate_class(self, class_name: str, request: str) -> fw.Status:
        if not class_name:
            return fw.Status.error(f"request {request}: unsupported request type", plugin=NAME)
        if self.store.device_class(class_name) is None:
            return fw.Status.unresolvable(f"request {request}: device class {class_name} does not exist", plugin=NAME)
        return fw.SUCCESS

    def _current_allocator(self, store: DraLister) -> allocation.Allocator:
        """One Allocator per snapshot of classes and slices (see the module docstring)."""
        if self._allocator is None or self._allocator_generation != store.generation:
            self._allocator = allocation.Allocator(
                classes=store.device_class,
                slices=list(store.resource_slices()),
                features=self.features,
                cel_cache=self.cel_cache,
            )
            self._allocator_generation = store.generation
        return self._allocator

    def filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.NodeVerdicts:
        s = state.get(STATE_KEY)
        n = len(rows)
        if s is None:
            err = fw.Status.error(f'reading "{STATE_KEY.name}" from cycleState: not found', plugin=NAME)
            return fw.NodeVerdicts.fail_where(np.ones(n, dtype=bool), err)
        if not s.claims:
            return fw.NodeVerdicts.all_ok(n)
        if s.prepared is not None and len(s.to_allocate) == len(s.claims):
            return self._filter_allocate(s, s.prepared, nodes, rows)
        return fw.NodeVerdicts.per_node(self._filter_node(s, pod.pod, nodes.node(row)) for row in rows.tolist())

    def _filter_allocate(
        self, s: _State, prepared: allocation.Prepared, nodes: NodeTable, rows: IntArray
    ) -> fw.NodeVerdicts:
        """:meth:`_filter_node` for the usual case, every claim to allocate
        (no node selector of an allocated claim to check), over the rows in
        one loop: the same statuses, with one Status per distinct Unsatisfiable."""
        ok = np.ones(len(rows), dtype=bool)
        reason = np.zeros(len(rows), dtype=np.int32)
        statuses: list[fw.Status] = []
        index: dict[fw.Status, int] = {}
        solve, found, infos = prepared.solve, s.node_allocations, nodes.infos
        for k, row in enumerate(rows.tolist()):
            info = infos[row]
            assert info is not None and info.node is not None
            try:
                outcome = solve(info.node)
            except allocation.AllocationError as e:
                st = fw.Status.error(str(e), plugin=NAME)
            except allocation.FilterTimeout:
                st = _timed_out(info.name)
            else:
                if isinstance(outcome, allocation.Solution):
                    found[info.name] = outcome
                    continue
                st = s.unsatisfiable_status(outcome)
            i = index.get(st)
            if i is None:
                i = index[st] = len(statuses)
                statuses.append(st)
            ok[k] = False
            reason[k] = i
        return fw.NodeVerdicts(ok, statuses, reason)

    def _filter_node(self, s: _State, pod: model.Pod, node: model.Node) -> fw.Status:
        got = self._filter_extended(s, pod, node)
        if isinstance(got, fw.Status):
            return got
        node_claim, mappings = got
        # "The pod has no user claim, it may have extended resource claim that
        # is satisfied by device plugin. Then there is nothing left to do."
        if node_claim is None and s.extended == 0:
            return fw.SUCCESS
        prepared = s.prepared
        if s.extended is not None and s.extended in s.to_allocate:
            prepared = self._prepared_for(s, node_claim)
        unavailable = (
            [
                i
                for i, selector in enumerate(s.available_on)
                if (selector is not None and not pools.node_matches(node, None, None, selector)) or i in s.not_bound
            ]
            if len(s.to_allocate) < len(s.claims)
            else []
        )
        results: allocation.Solution | None = None
        if prepared is not None:
            try:
                outcome = prepared.solve(node)
            except allocation.AllocationError as e:
                # "This should only fail if there is something wrong with the
                # claim or class": an error, retried with backoff.
                return fw.Status.error(str(e), plugin=NAME)
            except allocation.FilterTimeout:
                return _timed_out(node.metadata.name)
            if isinstance(outcome, allocation.Unsatisfiable):
                return s.unsatisfiable_status(outcome)
            results = outcome
        if unavailable:
            s.unavailable.update(unavailable)
            return fw.Status.unresolvable(REASON_NOT_AVAILABLE, plugin=NAME)
        if results is not None:
            s.node_allocations[node.metadata.name] = results
        if s.extended is not None:
            s.node_extended[node.metadata.name] = (node_claim, mappings)
        return fw.SUCCESS

    def post_filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, failures: dict[int, fw.Status]
    ) -> fw.PostFilterResult:
        # v1.37.2 gives these two outcomes no message (deallocateOrDeletePodClaims);
        # v1.35.4 and v1.36.3 said "no new claims to deallocate" and "still
        # not schedulable", which the FitError put before the nodes' reasons.
        quiet = self.gates.version >= gates.KubeVersion(1, 37)
        s = state.get(STATE_KEY)
        if s is None or not s.claims:
            return fw.PostFilterResult(_unschedulable(() if quiet else ("no new claims to deallocate",)))
        # Upstream picks one at random ("there is no better heuristic"); the
        # first, here, so that a run is reproducible.
        stale = s.extended is not None and not extended.is_special(s.claims[s.extended])
        for i in sorted(s.unavailable):
            if i == s.extended:
                if stale:
                    break
                continue
            claim = s.claims[i]
            reserved = claim.status.reserved_for
            if not reserved or (len(reserved) == 1 and reserved[0].uid == pod.uid):
                self.handle.client.deallocate_claim(claim)
                return fw.PostFilterResult(_unschedulable(("deallocation of ResourceClaim completed",)))
        if stale and s.extended is not None:
            # "If the special resource claim for extended resource backed by DRA
            # is reserved or allocated at prior scheduling cycle, then it should be deleted."
            self.handle.client.delete_claim(s.claims[s.extended])
            return fw.PostFilterResult(_unschedulable(("deletion of ResourceClaim completed",)))
        return fw.PostFilterResult(_unschedulable(() if quiet else ("still not schedulable",)))

    # ------------------------------------------------------------ scoring

    def score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> IntArray:
        """Score (dynamicresources.go, since v1.35): :func:`compute_score` of
        the node's allocation; 0 where Filter found none to make (every claim
        allocated already). Off without DRAPrioritizedList since 1.36."""
        out = np.zeros(len(rows), dtype=np.int64)
        s = state.get(STATE_KEY)
        if s is None or not s.claims or not s.node_allocations:
            return out
        if self.gates.version >= gates.KubeVersion(1, 36) and not self.gates.dra_prioritized_list:
            return out
        found = s.node_allocations
        for k, row in enumerate(rows.tolist()):
            name = nodes.name(row)
            solution = found.get(name)
            if solution is None:
                continue
            try:
                out[k] = compute_score(self._claims_on(s, name), solution.request_names(), self.gates.version)
            except ValueError as e:
                # An error status from Score fails the attempt (RunScorePlugins).
                raise RuntimeError(f'running Score plugins: plugin "{NAME}" failed with: {e}') from None
        return out

    def _claims_on(self, s: _State, node: str) -> list[dra.ResourceClaim]:
        """The pod's claims as allocated on ``node``: the extended claim is the
        node's variant, left out where the node needs none."""
        if s.extended is None or s.extended not in s.to_allocate:
            return s.claims
        node_claim = s.node_extended.get(node, (None, []))[0]
        user = s.claims[: s.extended]
        return [*user, node_claim] if node_claim is not None else user

    def normalize_score(self, state: fw.CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        """NormalizeScore: helper.DefaultNormalizeScore(MaxNodeScore, false)."""
        if not scores.any():
            return scores
        return default_normalize_score(scores, fw.MAX_NODE_SCORE)

    # ------------------------------------------------------------ reserve

    def reserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        s = state.get(STATE_KEY)
        if s is None or not s.claims or not s.to_allocate:
            return fw.SUCCESS
        allocating = self._allocating(s, node)
        if not allocating:
            # Only the extended claim, and the node's device plugins serve it.
            return fw.SUCCESS
        solution = s.node_allocations.get(node)
        results = solution.results() if solution is not None else None
        if not results:
            # "We checked before that the node is suitable."
            return fw.Status.error("claim allocation not found for node", plugin=NAME)
        if len(results) != len(allocating):
            return fw.Status.error(
                f"internal error, have {len(results)} allocations, {len(allocating)} claims to allocate, "
                f"want {len(allocating)} claims",
                plugin=NAME,
            )
        store = self.store
        if s.extended in allocating:
            # "replace the special claim template for extended resource backed
            # by DRA with the real instantiated claim" (the node's variant).
            node_claim = s.node_extended[node][0]
            assert node_claim is not None
            s.claims[s.extended] = node_claim
        for i, result in zip(allocating, results, strict=True):
            s.allocations[i] = result
            claim = s.claims[i]
            finalizers = claim.metadata.finalizers
            if dra.DELETE_PROTECTION_FINALIZER not in finalizers:
                finalizers = [*finalizers, dra.DELETE_PROTECTION_FINALIZER]
            allocated = msgspec.structs.replace(
                claim,
                metadata=msgspec.structs.replace(claim.metadata, finalizers=finalizers),
                status=msgspec.structs.replace(claim.status, allocation=result),
            )
            store.signal_pending_allocation(claim.metadata.uid, allocated)
        return fw.SUCCESS

    def unreserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> None:
        s = state.get(STATE_KEY)
        if s is None:
            return
        store = self.store
        for i, claim in enumerate(s.claims):
            if i == s.extended:
                continue
            # In flight no more: the claim is what its source says again.
            if store.remove_pending_allocation(claim.metadata.uid):
                store.restore_claim(claim.metadata.namespace, claim.metadata.name)
            if claim.status.allocation is not None and _reserved_for(pod, claim):
                self.handle.client.unreserve_claim(claim, pod.uid)
        if s.extended is not None:
            # unreserveExtendedResourceClaim: out of flight by the uid it had at
            # PreFilter; deleted when PreBind had created it.
            claim = s.claims[s.extended]
            if store.remove_pending_allocation(s.extended_uid):
                store.restore_claim(claim.metadata.namespace, claim.metadata.name)
            if not extended.is_special(claim):
                self.handle.client.delete_claim(claim)

    # ------------------------------------------------------------ binding

    def pre_bind_pre_flight(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        """PreBindPreFlight (``dynamicresources.go`` v1.37.2): Skip when the
        pod has no claims, Success when PreBind has some to write."""
        s = state.get(STATE_KEY)
        return fw.SUCCESS if s is not None and s.claims else fw.Status.skip()

    async def pre_bind(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        s = state.get(STATE_KEY)
        if s is None or not s.claims:
            return fw.SUCCESS
        for i, claim in enumerate(s.claims):
            if _reserved_for(pod, claim):
                continue
            if i == s.extended and s.allocations[i] is None and not claim.spec.devices.requests:
                continue  # "extended resource requests satisfied by device plugin"
            try:
                if i == s.extended:
                    await self._bind_extended_claim(s, i, pod, node)
                else:
                    s.claims[i] = await self._bind_claim(s, i, pod)
            except Exception as e:  # statusError: retried with backoff, after Unreserve
                return fw.Status.error(str(e), plugin=NAME)
        if not self._binding_gates or not any(_has_binding_conditions(c) for c in s.claims):
            return fw.SUCCESS
        # "We need to wait for the device to be attached to the node."
        self.handle.client.record_event(
            pod.pod,
            None,
            EventType.NORMAL,
            BINDING_CONDITIONS_PENDING,
            "Scheduling",
            f"waiting for binding conditions for device on node {node}",
        )
        loop = asyncio.get_running_loop()
        began = loop.time()
        try:
            await self._wait_for_binding(s)
        except _BindingError as e:
            self._observe_binding(s, loop.time() - began, e.status)
            # "Returning an error here causes another scheduling attempt. In that next
            # attempt, PreFilter will detect the timeout or error and try to recover."
            return fw.Status.error(str(e), plugin=NAME)
        self._observe_binding(s, loop.time() - began, "success")
        return fw.SUCCESS

    def _observe_binding(self, s: _State, seconds: float, status: str) -> None:
        """The binding-conditions metrics (PreBind, ``dynamicresources.go``
        v1.37.2): the wait per allocated device's driver, and one count per
        device with binding conditions (``listBindingConditionsStatus``)."""
        m = self.handle.metrics
        if m.dra_binding_conditions_wait is None or m.dra_binding_conditions_allocations is None:
            return
        profile = self.handle.profile
        for claim in s.claims:
            allocation = claim.status.allocation
            if allocation is None:
                continue
            for r in allocation.devices.results:
                m.dra_binding_conditions_wait.labels(profile, r.driver, status).observe(seconds)
                if r.binding_conditions:
                    m.dra_binding_conditions_allocations.labels(profile, r.driver, status).inc()

    @property
    def _binding_gates(self) -> bool:
        return self.gates.dra_device_binding_conditions and self.gates.dra_resource_claim_device_status

    async def _wait_for_binding(self, s: _State) -> None:
        """wait.PollUntilContextTimeout(5 s, bindingTimeout, immediate) over
        isPodReadyForBinding; raises _BindingError on a failure condition or
        the timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.binding_timeout
        while True:
            if self._pod_ready_for_binding(s):
                return
            left = deadline - loop.time()
            if left <= 0:
                raise _BindingError("device binding timeout: context deadline exceeded", "timeout")
            await asyncio.sleep(min(BINDING_POLL_SECONDS, left))

    def _pod_ready_for_binding(self, s: _State) -> bool:
        """isPodReadyForBinding: every claim's binding conditions true, none failed."""
        for i, claim in enumerate(s.claims):
            latest = self.store.claim(claim.metadata.namespace, claim.metadata.name)
            if latest is None:
                raise _BindingError(f'resourceclaim "{claim.metadata.name}" not found')
            s.claims[i] = latest
            if not _ready_for_binding(latest):
                if self._binding_timed_out(latest):
                    raise _BindingError(f"device binding timeout: claim={latest.metadata.name}", "timeout")
                return False
        return True

    def _binding_timed_out(self, claim: dra.ResourceClaim) -> bool:
        """isClaimTimeout: a device with binding conditions, allocated longer ago than bindingTimeout."""
        allocation = claim.status.allocation
        if not self._binding_gates or allocation is None or not allocation.allocation_timestamp:
            return False
        if not any(r.binding_conditions for r in allocation.devices.results):
            return False
        since = datetime.fromisoformat(allocation.allocation_timestamp)
        return (datetime.now(UTC) - since).total_seconds() > self.binding_timeout

    async def _bind_extended_claim(self, s: _State, i: int, pod: PodInfo, node: str) -> None:
        """bindClaim for the extended claim: created first when it exists in
        memory only (createExtendedResourceClaimInAPI), then bound as any
        claim; then the pod's ``status.extendedResourceClaimStatus``
        (patchPodExtendedResourceClaimStatus)."""
        client = self.handle.client
        claim = s.claims[i]
        if extended.is_special(claim):
            node_claim, _ = s.node_extended.get(node, (None, []))
            if node_claim is None:
                raise RuntimeError(f"extended resource claim not found for node {node}")
            # "Clear fields which must or can not be set during creation."
            md = msgspec.structs.replace(node_claim.metadata, name="", uid="")
            fresh = msgspec.structs.replace(node_claim, metadata=md, status=dra.ResourceClaimStatus())
            creates = self.handle.metrics.resourceclaim_creates
            try:
                created = await client.create_claim(fresh)
            except Exception as e:
                if creates is not None:  # createExtendedResourceClaimInAPI's labels (v1.37.2)
                    creates.labels("failure", "false", "", "Pod").inc()
                raise RuntimeError(
                    f"create claim for extended resources {claim.metadata.namespace}/{claim.metadata.name}: {e}"
                ) from e
            if creates is not None:
                creates.labels("success", "false", "", "Pod").inc()
            # The in-flight entry stays under the PreFilter uid (removed below).
            s.claims[i] = created
        try:
            s.claims[i] = await self._bind_claim(s, i, pod)
            await self._wait_for_claim(s.claims[i])
        finally:
            self.store.remove_pending_allocation(s.extended_uid)
        mappings = s.node_extended.get(node, (None, []))[1]
        if not mappings:
            md = pod.pod.metadata
            raise RuntimeError(
                f"nil or empty request mappings, no update of pod {md.namespace}/{md.name} ExtendedResourceClaimStatus"
            )
        status = model.PodExtendedResourceClaimStatus(
            request_mappings=list(mappings), resource_claim_name=s.claims[i].metadata.name
        )
        try:
            await client.set_extended_resource_claim_status(pod.pod, status)
        except Exception as e:
            md = pod.pod.metadata
            raise RuntimeError(f"update pod {md.namespace}/{md.name} ExtendedResourceClaimStatus: {e}") from e

    async def _wait_for_claim(self, claim: dra.ResourceClaim) -> None:
        """waitForExtendedClaimInAssumeCache: the created claim reaches the
        store through its informer; until then its devices stay in flight.
        Polled every second for up to 120 s; not finding it is only logged
        upstream, and PreBind carries on."""
        store = self.store
        md = claim.metadata
        for _ in range(ASSUME_EXTENDED_CLAIM_TIMEOUT_SECONDS):
            if store.claim(md.namespace, md.name) is not None:
                store.assume_claim(claim)
                return
            await asyncio.sleep(1.0)

    async def _bind_claim(self, s: _State, i: int, pod: PodInfo) -> dra.ResourceClaim:
        """bindClaim: finalizer, allocation and reservation, with conflict retries."""
        claim = s.claims[i]
        result = s.allocations[i]
        store, client = self.store, self.handle.client
        written: dra.ResourceClaim | None = None
        try:
            for step in range(RETRY_STEPS):
                if step:
                    await asyncio.sleep(RETRY_DELAY_SECONDS)
                    try:
                        claim = await client.get_claim(claim.metadata.namespace, claim.metadata.name)
                    except Exception as e:
                        raise RuntimeError(f"get updated claim {_kobj(claim)} after conflict: {e}") from e
                try:
                    written = await self._write_claim(claim, result, pod)
                    return written
                except Conflict as e:
                    if step == RETRY_STEPS - 1:
                        raise RuntimeError(str(e)) from e
            raise AssertionError("unreachable")
        finally:
            if result is not None:
                if written is not None:
                    store.assume_claim(written)
                store.remove_pending_allocation(claim.metadata.uid)

    async def _write_claim(
        self, claim: dra.ResourceClaim, result: dra.AllocationResult | None, pod: PodInfo
    ) -> dra.ResourceClaim:
        """One try of bindClaim's RetryOnConflict body; raises Conflict to retry."""
        client = self.handle.client
        if claim.metadata.deletion_timestamp:
            raise RuntimeError(f"claim {_kobj(claim)} got deleted in the meantime")
        status = claim.status
        if result is not None:
            if status.allocation is not None:
                raise RuntimeError(f"claim {_kobj(claim)} got allocated elsewhere in the meantime")
            # "The finalizer needs to be added in a normal update."
            if dra.DELETE_PROTECTION_FINALIZER not in claim.metadata.finalizers:
                finalizers = [*claim.metadata.finalizers, dra.DELETE_PROTECTION_FINALIZER]
                with_finalizer = msgspec.structs.replace(
                    claim, metadata=msgspec.structs.replace(claim.metadata, finalizers=finalizers)
                )
                claim = await _wrapped(client.update_claim(with_finalizer), f"add finalizer to claim {_kobj(claim)}")
            status = msgspec.structs.replace(claim.status, allocation=result)
        consumer = dra.ResourceClaimConsumerReference(resource="pods", name=pod.pod.metadata.name, uid=pod.uid)
        status = msgspec.structs.replace(status, reserved_for=[*status.reserved_for, consumer])
        if self._binding_gates:
            if status.allocation is None:
                raise RuntimeError(f"claim {_kobj(claim)} got deallocated elsewhere in the meantime")
            if status.allocation.allocation_timestamp is None:
                now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                status = msgspec.structs.replace(
                    status, allocation=msgspec.structs.replace(status.allocation, allocation_timestamp=now)
                )
        what = "add allocation and reservation to" if result is not None else "add reservation to"
        return await _wrapped(
            client.update_claim_status(msgspec.structs.replace(claim, status=status)), f"{what} claim {_kobj(claim)}"
        )


class _BindingError(Exception):
    """ErrDeviceBindingFailed / ErrDeviceBindingTimeout, or another error
    while waiting; ``status`` is the binding-conditions metrics' label
    (metrics.go v1.37.2: success, failure, timeout, error)."""

    def __init__(self, message: str, status: str = "error") -> None:
        super().__init__(message)
        self.status = status


def _has_binding_conditions(claim: dra.ResourceClaim) -> bool:
    """hasBindingConditions, for one claim."""
    allocation = claim.status.allocation
    return allocation is not None and any(r.binding_conditions for r in allocation.devices.results)


def _condition(conditions: Sequence[dict[str, object]], kind: str) -> dict[str, object] | None:
    """apimeta.FindStatusCondition."""
    return next((c for c in conditions if c.get("type") == kind), None)


def _ready_for_binding(claim: dra.ResourceClaim) -> bool:
    """isClaimReadyForBinding (dynamicresources.go v1.37.2): every device with
    binding conditions has a status whose conditions are all true; raises
    _BindingError when one of its binding failure conditions is true."""
    allocation = claim.status.allocation
    if allocation is None:
        return False
    for result in allocation.devices.results:
        if not result.binding_conditions:
            continue
        status = next(
            (
                d
                for d in claim.status.devices
                if (d.driver, d.pool, d.device) == (result.driver, result.pool, result.device)
            ),
            None,
        )
        if status is None:
            return False
        for kind in result.binding_failure_conditions:
            failed = _condition(status.conditions, kind)
            if failed is not None and failed.get("status") == "True":
                message = json.dumps(str(failed.get("message", "")))
                raise _BindingError(
                    f"device binding failed: claim={claim.metadata.name}, reason={failed.get('reason', '')}, "
                    f"message={message}",
                    "failure",
                )
        for kind in result.binding_conditions:
            cond = _condition(status.conditions, kind)
            if cond is None or cond.get("status") != "True":
                return False
    return True


def _unschedulable(reasons: Sequence[str]) -> fw.Status:
    return fw.Status.unschedulable(*reasons, plugin=NAME)


def _timed_out(node: str) -> fw.Status:
    """Filter's error when the node's search ran past filterTimeout (v1.37.2):
    "Timeouts are potentially transient", so the pod retries with backoff."""
    return fw.Status.error(f"node {node}: timed out trying to allocate devices", plugin=NAME)


async def _wrapped(call: Awaitable[dra.ResourceClaim], what: str) -> dra.ResourceClaim:
    """``fmt.Errorf("<what>: %w", err)``; a Conflict stays a Conflict (retried)."""
    try:
        return await call
    except Conflict as e:
        raise Conflict(f"{what}: {e}") from e
    except Exception as e:
        raise RuntimeError(f"{what}: {e}") from e


def _controlled_by(claim: dra.ResourceClaim, pod: model.Pod) -> bool:
    """metav1.IsControlledBy, and the namespaces match (resourceclaim.IsForPod)."""
    if claim.metadata.namespace != (pod.metadata.namespace or "default"):
        return False
    return any(ref.controller and ref.uid == pod.metadata.uid for ref in claim.metadata.owner_references)
