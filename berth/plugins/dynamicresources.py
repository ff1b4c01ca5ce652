"""DynamicResources: a pod's ResourceClaims must be allocated, on the node it gets.

A port of kube-scheduler v1.34.4's
``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go`` (with
``dra_manager.go`` and ``allocateddevices.go``, whose state lives in
:class:`berth.scheduling.dra_state.DraStore`, the Handle's ``dra``), over
Berth's structured allocator (:mod:`berth.dra`). The feature gates are
v1.34's defaults: DRAAdminAccess and DRAPrioritizedList on; device taints,
binding conditions, extended resources backed by DRA, consumable capacity
and partitionable devices off (so their code paths are not ported).

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
  status says — plus this scheduler's in-flight allocations. The claims to
  allocate are read and validated here once (``Allocator.prepare``), as
  upstream's PreFilter builds its allocator state once per cycle.
- **Filter**, per node: allocated claims' node selectors match; the
  unallocated claims can be allocated there (the node's pools only; the
  framework stops handing out nodes once it has enough feasible ones, as
  ``findNodesThatPassFilters`` does). Upstream says only "cannot
  allocate all claims"; Berth adds which claim and request fail and why
  (no matching device, all matching devices allocated, constraint unmet) as
  a second reason, which Explain, ``berth why`` and the FitError show.
- **Reserve** puts the node's allocation in flight (the DraStore's
  in-flight map by claim uid), so no later cycle hands its devices out;
  **Unreserve** drops it and, for a claim PreBind already reserved, removes
  the pod from ``reservedFor`` in the background.
- **PreBind**, through the Handle's client (the claim's source: the API
  server or the embedded cluster): the ``resource.kubernetes.io/delete-protection``
  finalizer, then ``status.allocation`` and the pod in ``status.reservedFor``
  in one status update, retried on conflict as ``retry.RetryOnConflict``
  does; the written claim is assumed (used before its informer event).
- **PostFilter** deallocates a claim that is allocated, reserved by no other
  pod and unavailable on some node, before DefaultPreemption (which comes
  after this plugin) evicts anyone.

Messages are upstream's byte for byte where upstream has one (cited inline).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Sequence
from collections.abc import Set as AbstractSet
from typing import ClassVar, cast

import msgspec
import numpy as np
import numpy.typing as npt

from berth import dra as allocation
from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import dra, model
from berth.cluster.sources import Conflict
from berth.dra import pools
from berth.framework import interface as fw
from berth.framework.handle import DraLister, Handle

__all__ = ["NAME", "REASON_CANNOT_ALLOCATE", "REASON_NOT_AVAILABLE", "DynamicResources", "pod_claim_name"]

IntArray = npt.NDArray[np.int64]

NAME = "DynamicResources"
#: dynamicresources.go Filter's reasons.
REASON_CANNOT_ALLOCATE = "cannot allocate all claims"
REASON_NOT_AVAILABLE = "resourceclaim not available on the node"
#: retry.DefaultRetry (client-go): 5 steps, 10 ms apart.
RETRY_STEPS = 5
RETRY_DELAY_SECONDS = 0.01


class _Unschedulable(Exception):
    """A claim the pod cannot use now (foreachPodResourceClaim's errors)."""


def pod_claim_name(pod: model.Pod, ref: model.PodResourceClaim) -> tuple[str | None, bool]:
    """``resourceclaim.Name`` (k8s.io/dynamic-resource-allocation v0.34.4): the
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
    #: Filter's statuses by Unsatisfiable (many nodes share one): (outcome, status) by id.
    _statuses: dict[int, tuple[allocation.Unsatisfiable, fw.Status]] = dataclasses.field(default_factory=dict)

    def unsatisfiable_status(self, outcome: allocation.Unsatisfiable) -> fw.Status:
        """Filter's status for a node where the claims cannot be allocated."""
        got = self._statuses.get(id(outcome))
        if got is None or got[0] is not outcome:
            got = self._statuses[id(outcome)] = (
                outcome,
                fw.Status.unresolvable(REASON_CANNOT_ALLOCATE, outcome.message, plugin=NAME),
            )
        return got[1]


STATE_KEY: fw.StateKey[_State] = fw.StateKey(NAME)


class DynamicResources:
    """kube-scheduler's DynamicResources plugin; see the module docstring."""

    NAME: ClassVar[str] = NAME
    Args: ClassVar[None] = None
    #: Filter judges node by node (an allocation per node): the framework
    #: hands it only the rows it still needs (``Framework.run_filter``).
    FILTER_PER_NODE: ClassVar[bool] = True

    def __init__(self, args: None = None, handle: Handle | None = None) -> None:
        if handle is None:
            raise ValueError(f"{NAME} needs the Handle (its DRA listers and client)")
        self.handle = handle
        self.features = allocation.Features()
        # dynamicresources.go New: "a LRU cache for compiled CEL expressions".
        self.cel_cache = allocation.CelCache()
        self._allocator: allocation.Allocator | None = None
        self._allocator_generation = -1

    @property
    def store(self) -> DraLister:
        if self.handle.dra is None:
            raise RuntimeError(f"{NAME}: the Handle has no DRA lister")
        return self.handle.dra

    # ------------------------------------------------------------ queueing

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        """EventsToRegister with SchedulingQueueHint on (v1.34's default). The
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
        if not pod.pod.spec.resource_claims:
            return fw.PreFilterResult(fw.Status.skip())
        try:
            claims = self._pod_claims(pod.pod)
        except _Unschedulable as e:
            return fw.PreFilterResult(fw.Status.unresolvable(str(e), plugin=NAME))
        if not claims:
            return fw.PreFilterResult(fw.Status.skip())
        store = self.store
        s.available_on = [None] * len(claims)
        s.allocations = [None] * len(claims)
        for i, claim in enumerate(claims):
            alloc = claim.status.allocation
            if alloc is not None:
                # resourceclaim.CanBeReserved returns true in v0.34 (the API
                # server refuses a 257th consumer); Berth checks the limit
                # here, as upstream did before, so the pod waits instead of
                # failing in PreBind.
                full = len(claim.status.reserved_for) >= dra.RESOURCE_CLAIM_RESERVED_FOR_MAX_SIZE
                if full and not _reserved_for(pod, claim):
                    return fw.PreFilterResult(fw.Status.unresolvable("resourceclaim in use", plugin=NAME))
                s.available_on[i] = alloc.node_selector
                continue
            s.to_allocate.append(i)
            if store.has_pending_allocation(claim.metadata.uid):
                return fw.PreFilterResult(
                    fw.Status.unresolvable(
                        f"resource claim {_kobj(claim)} is in the process of being allocated", plugin=NAME
                    )
                )
            for request in claim.spec.devices.requests:
                if request.exactly is not None:
                    st = self._validate_class(request.exactly.device_class_name, request.name)
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
        if s.to_allocate:
            # dynamicresources.go PreFilter: NewAllocator once per cycle, over
            # the devices in use now; Filter then only runs Allocate per node.
            in_use = cast(AbstractSet[allocation.DeviceID], store.allocated_devices())
            s.prepared = self._current_allocator(store).prepare(
                [claims[i] for i in s.to_allocate], in_use, versions=store.pool_versions
            )
        return fw.PreFilterResult()

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
        return fw.NodeVerdicts.per_node(self._filter_node(s, nodes.node(row)) for row in rows.tolist())

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

    def _filter_node(self, s: _State, node: model.Node) -> fw.Status:
        unavailable = (
            [
                i
                for i, selector in enumerate(s.available_on)
                if selector is not None and not pools.node_matches(node, None, None, selector)
            ]
            if len(s.to_allocate) < len(s.claims)
            else []
        )
        results: allocation.Solution | None = None
        if s.prepared is not None:
            try:
                outcome = s.prepared.solve(node)
            except allocation.AllocationError as e:
                # "This should only fail if there is something wrong with the
                # claim or class": an error, retried with backoff.
                return fw.Status.error(str(e), plugin=NAME)
            if isinstance(outcome, allocation.Unsatisfiable):
                return s.unsatisfiable_status(outcome)
            results = outcome
        if unavailable:
            s.unavailable.update(unavailable)
            return fw.Status.unresolvable(REASON_NOT_AVAILABLE, plugin=NAME)
        if results is not None:
            s.node_allocations[node.metadata.name] = results
        return fw.SUCCESS

    def post_filter(
        self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, failures: dict[int, fw.Status]
    ) -> fw.PostFilterResult:
        s = state.get(STATE_KEY)
        if s is None or not s.claims:
            return fw.PostFilterResult(fw.Status.unschedulable("no new claims to deallocate", plugin=NAME))
        # Upstream picks one at random ("there is no better heuristic"); the
        # first, here, so that a run is reproducible.
        for i in sorted(s.unavailable):
            claim = s.claims[i]
            reserved = claim.status.reserved_for
            if not reserved or (len(reserved) == 1 and reserved[0].uid == pod.uid):
                self.handle.client.deallocate_claim(claim)
                return fw.PostFilterResult(
                    fw.Status.unschedulable("deallocation of ResourceClaim completed", plugin=NAME)
                )
        return fw.PostFilterResult(fw.Status.unschedulable("still not schedulable", plugin=NAME))

    # ------------------------------------------------------------ reserve

    def reserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        s = state.get(STATE_KEY)
        if s is None or not s.claims or not s.to_allocate:
            return fw.SUCCESS
        solution = s.node_allocations.get(node)
        results = solution.results() if solution is not None else None
        if not results:
            # "We checked before that the node is suitable."
            return fw.Status.error("claim allocation not found for node", plugin=NAME)
        if len(results) != len(s.to_allocate):
            return fw.Status.error(
                f"internal error, have {len(results)} allocations, {len(s.to_allocate)} claims to allocate, "
                f"want {len(s.to_allocate)} claims",
                plugin=NAME,
            )
        store = self.store
        for i, result in zip(s.to_allocate, results, strict=True):
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
        for claim in s.claims:
            # In flight no more: the claim is what its source says again.
            if store.remove_pending_allocation(claim.metadata.uid):
                store.restore_claim(claim.metadata.namespace, claim.metadata.name)
            if claim.status.allocation is not None and _reserved_for(pod, claim):
                self.handle.client.unreserve_claim(claim, pod.uid)

    # ------------------------------------------------------------ binding

    async def pre_bind(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        s = state.get(STATE_KEY)
        if s is None or not s.claims:
            return fw.SUCCESS
        for i, claim in enumerate(s.claims):
            if _reserved_for(pod, claim):
                continue
            try:
                s.claims[i] = await self._bind_claim(s, i, pod)
            except Exception as e:  # statusError: retried with backoff, after Unreserve
                return fw.Status.error(str(e), plugin=NAME)
        return fw.SUCCESS

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
        what = "add allocation and reservation to" if result is not None else "add reservation to"
        return await _wrapped(
            client.update_claim_status(msgspec.structs.replace(claim, status=status)), f"{what} claim {_kobj(claim)}"
        )


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
