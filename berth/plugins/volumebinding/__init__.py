"""VolumeBinding: a pod's PersistentVolumeClaims must be bound, or bindable
(or provisionable) on the node; Score prefers the nodes whose storage the
pod's volumes fill most snugly; Reserve assumes the bindings and PreBind
makes them.

Mirrors kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/volumebinding/volume_binding.go``
(the binder is :mod:`berth.plugins.volumebinding.binder`, the scorer
:mod:`berth.plugins.volumebinding.scorer`):

- PreFilter: a pod without claims (``persistentVolumeClaim`` or ``ephemeral``
  volumes) is skipped at once. A missing claim is UnschedulableAndUnresolvable
  ``persistentvolumeclaim "NAME" not found`` (for an ephemeral volume:
  ``waiting for ephemeral volume controller to create the
  persistentvolumeclaim "NAME"``); so are a Lost claim, one being deleted,
  and unbound claims whose class binds Immediately (``pod has unbound
  immediate PersistentVolumeClaims``: the PV controller binds them first).
- Filter (UnschedulableAndUnresolvable, upstream's reasons in its order):
  ``node(s) didn't match PersistentVolume's node affinity`` (a bound PV),
  ``node(s) didn't find available persistent volumes to bind`` (an unbound
  WaitForFirstConsumer claim finds no PV of its class, size, access modes
  and affinity here, and its class cannot provision here),
  ``node(s) did not have enough free storage`` (CSIStorageCapacity) and
  ``node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)``.
- PreScore / Score, only with the StorageCapacityScoring gate (beta and on
  since 1.37, alpha and off in 1.35 and 1.36): every pod is scored, 0 on a
  node where it binds nothing; see :mod:`~berth.plugins.volumebinding.scorer`.
  Without the gate PreScore skips.
- Reserve assumes the chosen PVs' claimRef and the claims' ``selected-node``
  (the Handle's assume caches); Unreserve reverts them.
- PreBind writes them through the objects' source and waits, up to
  ``bindTimeoutSeconds`` (default 600), until the PV controller has bound
  every claim; a claim whose provisioning failed (``selected-node``
  removed), a reset claimRef or the timeout fail the binding cycle.

Args (``VolumeBindingArgs``) are defaulted and validated as
``apis/config/v1/defaults.go`` and ``validation_pluginargs.go`` do for the
release's gates: with StorageCapacityScoring on, a missing or empty
``shape`` is ``[{utilization: 0, score: 10}, {utilization: 100, score: 0}]``
(emptier volumes score higher) and a given one must be a valid function
shape; with the gate off any ``shape`` is refused.

- PreBindPreFlight: Skip when every claim was bound already, so the
  binding cycle knows PreBind has no work for the pod.

Not ported: the InPlacePodVerticalScalingSchedulerPreemption skip for pods
whose resize is deferred (alpha, off in every release Berth follows) and
SignPod (Berth's framework has no pod signatures).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from typing import ClassVar

import msgspec
import numpy as np
import numpy.typing as npt

from berth import features as feature_gates
from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import storage
from berth.framework import interface as fw
from berth.framework.handle import Handle, VolumeLister
from berth.plugins.noderesources import args as nr_args
from berth.plugins.volumebinding import binder, scorer
from berth.plugins.volumebinding.binder import BinderError, PodVolumeClaims, PodVolumes

__all__ = ["STATE_KEY", "VolumeBinding", "VolumeBindingArgs", "default_shape", "validate_args", "with_defaults"]

log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]

ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"


class VolumeBindingArgs(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """VolumeBindingArgs (kubescheduler.config.k8s.io/v1)."""

    bind_timeout_seconds: int = 600
    shape: list[nr_args.UtilizationShapePoint] | None = None

    def validate(self, *, features: feature_gates.Features) -> None:
        """Defaulted for ``features`` (:func:`with_defaults`), then :func:`validate_args`."""
        validate_args(with_defaults(self, features), allow_storage_capacity_scoring=features.storage_capacity_scoring)


def default_shape() -> list[nr_args.UtilizationShapePoint]:
    """defaults.go: emptier volumes score higher."""
    return [
        nr_args.UtilizationShapePoint(utilization=0, score=nr_args.MAX_CUSTOM_PRIORITY_SCORE),
        nr_args.UtilizationShapePoint(utilization=100, score=0),
    ]


def with_defaults(args: VolumeBindingArgs, features: feature_gates.Features) -> VolumeBindingArgs:
    """SetDefaults_VolumeBindingArgs (v1.37.2 ``apis/config/v1/defaults.go``):
    with StorageCapacityScoring on, no shape (or an empty one) is :func:`default_shape`."""
    if not args.shape and features.storage_capacity_scoring:
        return msgspec.structs.replace(args, shape=default_shape())
    return args


def validate_args(args: VolumeBindingArgs, *, allow_storage_capacity_scoring: bool) -> None:
    """ValidateVolumeBindingArgsWithOptions (v1.37.2 ``validation_pluginargs.go``);
    raises ValueError naming every invalid field."""
    errs: list[str] = []
    if args.bind_timeout_seconds < 0:
        errs.append(
            f"bindTimeoutSeconds: Invalid value: {args.bind_timeout_seconds}: "
            "invalid BindTimeoutSeconds, should not be a negative value"
        )
    if allow_storage_capacity_scoring:
        errs.extend(nr_args.validate_function_shape(args.shape or [], "shape"))
    elif args.shape is not None:
        # The gate off refuses a shape, so none takes effect unseen when it turns on.
        # field.Invalid prints the internal config's points as Go's json.Marshal does.
        shown = json.dumps(
            [{"Utilization": p.utilization, "Score": p.score} for p in args.shape], separators=(",", ":")
        )
        errs.append(
            f"shape: Invalid value: {shown}: unexpected field `shape`, remove it or turn on the feature gate "
            "StorageCapacityScoring"
        )
    nr_args.raise_aggregate(errs)


@dataclasses.dataclass(slots=True)
class _State:
    """stateData: the claims sorted in PreFilter, each node's volumes found in Filter."""

    claims: PodVolumeClaims | None = None
    by_node: dict[str, PodVolumes] = dataclasses.field(default_factory=dict)
    all_bound: bool = False


#: volume_binding.go stateKey (the plugin's name).
STATE_KEY: fw.StateKey[_State] = fw.StateKey("VolumeBinding")


def pod_has_claims(pod: PodInfo, volumes: VolumeLister) -> tuple[bool, str | None]:
    """podHasPVCs: whether the pod uses a claim, and why it cannot be scheduled
    (a claim missing, lost, being deleted, or an ephemeral one not the pod's)."""
    p = pod.pod
    has = False
    for _vol, name, ephemeral in storage.pod_claims(p):
        has = True
        pvc = volumes.api_pvc(p.metadata.namespace, name)
        if pvc is None:
            if ephemeral:
                return has, f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
            return has, f'persistentvolumeclaim "{name}" not found'
        if pvc.status.phase == "Lost":
            return has, (
                f'persistentvolumeclaim "{pvc.metadata.name}" bound to non-existent persistentvolume '
                f'"{pvc.spec.volume_name}"'
            )
        if pvc.metadata.deletion_timestamp is not None:
            return has, f'persistentvolumeclaim "{pvc.metadata.name}" is being deleted'
        if ephemeral:
            err = storage.volume_is_for_pod(p, pvc)
            if err is not None:
                return has, err
    return has, None


class VolumeBinding:
    NAME: ClassVar[str] = "VolumeBinding"
    #: Filter judges node by node: run_filter hands it only the rows it still needs.
    FILTER_PER_NODE: ClassVar[bool] = True
    Args: ClassVar[type[VolumeBindingArgs]] = VolumeBindingArgs

    def __init__(self, args: VolumeBindingArgs | None = None, handle: Handle | None = None) -> None:
        self.handle = handle
        feats = handle.features if handle is not None else feature_gates.Features.newest()
        args = with_defaults(args or VolumeBindingArgs(), feats)
        self.bind_timeout = float(args.bind_timeout_seconds)
        #: New builds the scorer only with StorageCapacityScoring; validation saw to the shape.
        self._scorer = scorer.build_scorer(args.shape) if feats.storage_capacity_scoring and args.shape else None

    @property
    def _volumes(self) -> VolumeLister | None:
        return self.handle.volumes if self.handle is not None else None

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        """volume_binding.go EventsToRegister (its queueing hints aside; node
        taint updates were registered only without SchedulerQueueingHints,
        GA and on in 1.35 and 1.36 and gone from v1.37.2's code)."""
        add_update = fw.ActionType.ADD | fw.ActionType.UPDATE
        return (
            fw.ClusterEvent("StorageClass", add_update),
            fw.ClusterEvent("PersistentVolumeClaim", add_update),
            fw.ClusterEvent("PersistentVolume", add_update),
            fw.ClusterEvent("Node", fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_LABEL),
            fw.ClusterEvent("CSINode", add_update),
            fw.ClusterEvent("CSIDriver", fw.ActionType.UPDATE),
            fw.ClusterEvent("CSIStorageCapacity", add_update),
        )

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        if not pod.pod.spec.volumes:
            state.write(STATE_KEY, _State())
            return fw.PreFilterResult(fw.Status.skip())
        volumes = self._volumes
        claimed = storage.pod_claims(pod.pod)
        if not claimed:
            state.write(STATE_KEY, _State())
            return fw.PreFilterResult(fw.Status.skip())
        if volumes is None:  # no storage is known: no claim exists
            return fw.PreFilterResult(
                fw.Status.unresolvable(f'persistentvolumeclaim "{claimed[0][1]}" not found', plugin=self.NAME)
            )
        has, err = pod_has_claims(pod, volumes)
        if err is not None:
            return fw.PreFilterResult(fw.Status.unresolvable(err, plugin=self.NAME))
        if not has:
            state.write(STATE_KEY, _State())
            return fw.PreFilterResult(fw.Status.skip())
        try:
            claims = binder.get_pod_volume_claims(pod.pod, volumes)
        except BinderError as e:
            return fw.PreFilterResult(fw.Status.error(str(e), plugin=self.NAME))
        if claims.unbound_immediate:
            return fw.PreFilterResult(fw.Status.unresolvable(ERR_UNBOUND_IMMEDIATE, plugin=self.NAME))
        state.write(STATE_KEY, _State(claims))
        return fw.PreFilterResult()

    def filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.NodeVerdicts:
        n = len(rows)
        s = state.get(STATE_KEY)
        volumes = self._volumes
        if s is None or s.claims is None or volumes is None:
            return fw.NodeVerdicts.fail_where(np.ones(n, dtype=bool), self._no_state())
        claims = s.claims
        statuses: list[fw.Status] = []
        index: dict[tuple[str, ...], int] = {}
        ok = np.ones(n, dtype=bool)
        reason = np.zeros(n, dtype=np.int32)
        for k, row in enumerate(rows.tolist()):
            info = nodes.infos[row]
            if info is None or info.node is None:
                continue
            try:
                found, reasons = binder.find_pod_volumes(claims, info.node, volumes)
            except BinderError as e:
                st: fw.Status | None = fw.Status.error(str(e), plugin=self.NAME)
                key: tuple[str, ...] = ("\0error", str(e))
            else:
                if not reasons:
                    s.by_node[info.name] = found
                    continue
                st, key = None, tuple(reasons)
            i = index.get(key)
            if i is None:
                i = index[key] = len(statuses)
                statuses.append(st or fw.Status.unresolvable(*reasons, plugin=self.NAME))
            ok[k] = False
            reason[k] = i
        return fw.NodeVerdicts(ok, statuses, reason)

    def _no_state(self) -> fw.Status:
        return fw.Status.error(f'reading "{STATE_KEY.name}" from cycleState: not found', plugin=self.NAME)

    # ------------------------------------------------------------ score

    def pre_score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.Status:
        """Skip without a scorer (the gate off). Upstream also scores only
        when the pod has static bindings or the gate is on: with a scorer
        the gate is on, so every pod is scored."""
        if self._scorer is None:
            return fw.Status.skip()
        if state.get(STATE_KEY) is None:
            return self._no_state()
        return fw.SUCCESS

    def score(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> IntArray:
        out = np.zeros(len(rows), dtype=np.int64)
        s = state.get(STATE_KEY)
        if self._scorer is None or s is None or not s.by_node:
            return out
        for k, row in enumerate(rows.tolist()):
            found = s.by_node.get(nodes.name(row))
            if found is not None:
                out[k] = self._scorer(scorer.class_resources(found))
        return out

    # ------------------------------------------------------------ reserve / bind

    def reserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        s = state.get(STATE_KEY)
        if s is None:
            return fw.SUCCESS
        found = s.by_node.get(node)
        volumes = self._volumes
        if found is None or volumes is None:
            s.all_bound = True  # the pod references no claim
            return fw.SUCCESS
        try:
            s.all_bound = binder.assume_pod_volumes(pod.pod, node, found, volumes)
        except BinderError as e:
            return fw.Status.error(str(e), plugin=self.NAME)
        return fw.SUCCESS

    def unreserve(self, state: fw.CycleState, pod: PodInfo, node: str) -> None:
        s = state.get(STATE_KEY)
        volumes = self._volumes
        if s is None or volumes is None:
            return
        found = s.by_node.get(node)
        if found is not None:
            binder.revert_assumed_pod_volumes(found, volumes)

    def pre_bind_pre_flight(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        """PreBindPreFlight: Skip when every claim was bound already (PreBind
        has nothing to write or wait for), an error when Filter found no
        volumes for ``node``. (Upstream's AllowParallel result: Berth runs
        PreBind plugins one after another.)"""
        s = state.get(STATE_KEY)
        if s is None:
            return self._no_state()
        if s.all_bound:
            return fw.Status.skip()
        if node not in s.by_node:
            return fw.Status.error(f'no pod volume found for node "{node}"', plugin=self.NAME)
        return fw.SUCCESS

    async def pre_bind(self, state: fw.CycleState, pod: PodInfo, node: str) -> fw.Status:
        s = state.get(STATE_KEY)
        if s is None or s.all_bound or self.handle is None:
            return fw.SUCCESS
        found = s.by_node.get(node)
        if found is None:
            return fw.Status.error(f'no pod volume found for node "{node}"', plugin=self.NAME)
        try:
            await binder.bind_pod_volumes(pod.pod, node, found, self.handle, bind_timeout=self.bind_timeout)
        except BinderError as e:
            log.info("binding volumes of pod %s failed: %s", pod.key, e)
            return fw.Status.error(str(e), plugin=self.NAME)
        return fw.SUCCESS
