"""The embedded cluster: Kubernetes objects kept in memory, for running Berth
with no cluster at all (``berth serve --cluster FILE``) and for systems that
feed Berth through the gRPC Cluster service.

It is a :class:`~berth.cluster.sources.Source`: it owns its objects, tells
its :class:`~berth.cluster.sources.ClusterListener` (the core) about every
change, as informers would, and carries out bindings and evictions by
changing its own objects — a bind sets ``spec.nodeName`` and the
core then sees the pod confirmed, exactly as an informer update would make it.

Every feed call is a batch applied all or nothing, in two phases::

    validate every object  ->  check the batch  ->  admit (core)  ->  apply all
    (API server's rules,       (a name or uid       (uids across      (nothing
     berth.cluster.validation)  twice; a bound       sources; int64    left to
                                pod moved)           node sums)        fail)

so a refused batch raises a :mod:`berth.errors` kind whose message starts with
the object's place in the batch (``pods[3].metadata.uid: ...``) and leaves the
cluster and the core exactly as they were.

A pod's node changes only through :meth:`EmbeddedCluster.bind` (or a feed
upsert that binds a pending pod, as an external binder's informer update
would): like the API server, which lets ``spec.nodeName`` be set once (by the
``pods/binding`` subresource) and never changed, an upsert that moves a bound
pod or clears its node is FailedPrecondition; the pod is deleted and
re-created instead. A bound pod whose node Berth does not know is taken and
counted on a placeholder row, as kube-scheduler's cache does
(``cacheImpl.addPod`` creates a NodeInfo without a Node), until the node
arrives.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Generator, Iterable, Mapping
from typing import TypeVar

import msgspec

from berth.cluster import dra, dra_validation, manifests, model, resources, validation
from berth.cluster.embedded_storage import StorageObjects
from berth.cluster.manifests import Manifests, default_uid
from berth.cluster.sources import BindConflict, BindError, ClusterListener, Conflict, EventType, Source
from berth.errors import (
    AlreadyExists,
    BerthError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
)

__all__ = ["EmbeddedCluster"]

#: names.SimpleNameGenerator's alphabet (k8s.io/apiserver storage/names): no vowels, no 0/1/3.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

log = logging.getLogger(__name__)

T = TypeVar("T")
Namespaced = TypeVar("Namespaced", model.PodGroup, model.PodDisruptionBudget, dra.ResourceClaimTemplate)


def _checked(at: str, obj: T, *checks: Callable[[T], None]) -> None:
    """Run ``checks`` on one object of a batch; an error names its place (``pods[3].``)."""
    for check in checks:
        try:
            check(obj)
        except ValueError as e:
            raise _kind_of(e)(f"{at}.{e}") from None


_KINDS = (AlreadyExists, FailedPrecondition, NotFound, ResourceExhausted, InvalidArgument)


def _kind_of(e: ValueError) -> type[BerthError]:
    """The :mod:`berth.errors` kind of a validation error (a ManifestError, or
    any other ValueError, is InvalidArgument)."""
    return next((kind for kind in _KINDS if isinstance(e, kind)), InvalidArgument)


#: A feed call as steps (:mod:`berth.scheduling.feeding` runs them in
#: slices): its checks, then one step per object applied; the count applied.
Steps = Generator[None, None, int]


def _at_once(steps: Steps) -> int:
    """Every step of a feed call, now."""
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return int(stop.value)


def _first_seen(seen: dict[str, int], value: str, batch: str, i: int, field: str, what: str) -> None:
    """Within one batch a name or uid appears once (InvalidArgument, as field.Duplicate)."""
    j = seen.setdefault(value, i)
    if j != i:
        raise validation.duplicate(f"{batch}[{i}].{field}", value, f"{what} as {batch}[{j}]")


class EmbeddedCluster(StorageObjects):
    """In-memory namespaces, nodes, pods, pod groups, PDBs, workloads and DRA
    objects (DeviceClasses, ResourceSlices, ResourceClaims and their
    templates); see the module docstring."""

    name = "embedded"

    def __init__(self, core: ClusterListener) -> None:
        self.core = core
        self.namespaces: dict[str, model.Namespace] = {}
        self.nodes: dict[str, model.Node] = {}
        self.pods: dict[str, model.Pod] = {}  # NAMESPACE/NAME -> pod
        #: "APIVERSION NAMESPACE/NAME" -> group: a Volcano and a scheduler-plugins
        #: PodGroup of one name are two gangs (berth.gangs), kept apart.
        self.pod_groups: dict[str, model.PodGroup] = {}
        self.pdbs: dict[str, model.PodDisruptionBudget] = {}  # NAMESPACE/NAME -> budget
        #: Services, ReplicationControllers, ReplicaSets, StatefulSets: (kind, NAMESPACE/NAME) -> object.
        self.workloads: dict[tuple[str, str], model.Workload] = {}
        #: Dynamic Resource Allocation (resource.k8s.io/v1): classes and slices
        #: by name, claims and templates by NAMESPACE/NAME.
        self.device_classes: dict[str, dra.DeviceClass] = {}
        self.resource_slices: dict[str, dra.ResourceSlice] = {}
        self.resource_claims: dict[str, dra.ResourceClaim] = {}
        self.claim_templates: dict[str, dra.ResourceClaimTemplate] = {}
        self._claim_version = 0  # the claims' metadata.resourceVersion
        # The most recent of each, HISTORY_MAX_BYTES apiece (_remember).
        self.bindings: list[tuple[str, str]] = []  # (pod key, node), in order
        self.evictions: list[tuple[str, str]] = []  # (pod key, reason)
        self.events: list[tuple[str, str, str]] = []  # (pod key, reason, message)
        self._key_of_uid: dict[str, str] = {}  # uid -> NAMESPACE/NAME of the pod holding it
        # PVs, PVCs, StorageClasses, CSI objects, and the PV controller's part
        # (berth.cluster.embedded_storage: no PV controller runs here).
        self._init_storage()

    # ------------------------------------------------------------ feeding

    def load(self, objects: Manifests, *, validated: bool = False) -> None:
        """Load a manifest set, kind by kind, each kind one all-or-nothing batch.

        ``validated``: the nodes and pods passed Berth's validation when they
        were first fed (a state store's restore): their per-object checks are
        not run again — most of the cost of taking 50 000 pods back — while
        the checks against the state being built (names, uids, nodeName
        changes, int64 totals per node) still are."""
        # Namespaces and nodes first, so pods are judged with their namespaces'
        # labels and bound pods land on known nodes.
        self.upsert_namespaces(objects.namespaces)
        self.upsert_nodes(objects.nodes, validated=validated)
        for topology in objects.topologies:  # Kueue Topology objects: levels gangs may ask for
            self.core.on_topology(topology)
        for hypernode in objects.hypernodes:  # Volcano HyperNodes: tiers gangs may ask for
            self.core.on_hypernode(hypernode)
        self.upsert_pod_groups(objects.pod_groups)
        for group in objects.scheduling_groups:  # checked when decoded (workload_api.decode)
            self.core.on_scheduling_group(group)
        self.upsert_pdbs(objects.pdbs)
        self.upsert_workloads(objects.workloads)
        # Devices and claims before pods: a pod whose claim exists is not
        # held at PreEnqueue.
        self.upsert_device_classes(objects.device_classes)
        self.upsert_resource_slices(objects.resource_slices)
        self.upsert_resource_claim_templates(objects.resource_claim_templates)
        self.upsert_resource_claims(objects.resource_claims)
        # Storage before pods too: a pod whose claims exist is not rejected for a missing one.
        self.upsert_storage_classes(objects.storage_classes)
        self.upsert_csi_drivers(objects.csi_drivers)
        self.upsert_csi_nodes(objects.csi_nodes)
        self.upsert_csi_storage_capacities(objects.csi_storage_capacities)
        self.upsert_persistent_volumes(objects.persistent_volumes)
        self.upsert_persistent_volume_claims(objects.persistent_volume_claims)
        self.upsert_pods(objects.pods, validated=validated)

    def upsert_namespaces(self, namespaces: Iterable[model.Namespace]) -> int:
        """Create or replace namespaces, all or none. As the API server does
        (``SetDefaults_Namespace``), each carries the label
        ``kubernetes.io/metadata.name`` set to its name, whatever it was given."""
        batch = [_namespace_defaulted(ns) for ns in namespaces]
        seen: dict[str, int] = {}
        for i, ns in enumerate(batch):
            _checked(f"namespaces[{i}]", ns, validation.validate_namespace)
            _first_seen(seen, ns.metadata.name, "namespaces", i, "metadata.name", "the same name")
        for ns in batch:
            self.namespaces[ns.metadata.name] = ns
            self.core.on_namespace(ns)
        return len(batch)

    def delete_namespaces(self, names: Iterable[str]) -> int:
        """Delete namespaces by name; unknown names are skipped. Their pods stay
        (the API server's namespace controller would delete them; here that
        is the feeder's to do), judged as in a namespace without labels."""
        n = 0
        for name in names:
            if self.namespaces.pop(name, None) is not None:
                self.core.on_namespace_delete(name)
                n += 1
        return n

    def upsert_nodes(self, nodes: Iterable[model.Node], *, validated: bool = False) -> int:
        return _at_once(self.upsert_nodes_steps(nodes, validated=validated))

    def upsert_nodes_steps(self, nodes: Iterable[model.Node], *, validated: bool = False) -> Steps:
        """:meth:`upsert_nodes` a step per node: every check first, then the apply."""
        batch = list(nodes)
        seen: dict[str, int] = {}
        for i, node in enumerate(batch):
            at = f"nodes[{i}]"
            if not validated:
                _checked(at, node, validation.validate_node, manifests.validate_node)
            _first_seen(seen, node.metadata.name, "nodes", i, "metadata.name", "the same name")
            yield
        for node in batch:
            self.nodes[node.metadata.name] = node
            self.core.on_node(node)
            yield
        return len(batch)

    def delete_nodes(self, names: Iterable[str]) -> int:
        """Delete nodes by name; unknown names are skipped. Pods bound to a
        deleted node stay, counted on its placeholder row (as upstream's cache)."""
        n = 0
        for name in names:
            if self.nodes.pop(name, None) is not None:
                self.core.on_node_delete(name)
                n += 1
        return n

    def upsert_pods(self, pods: Iterable[model.Pod], *, validated: bool = False) -> int:
        return _at_once(self.upsert_pods_steps(pods, validated=validated))

    def upsert_pods_steps(self, pods: Iterable[model.Pod], *, validated: bool = False) -> Steps:
        """:meth:`upsert_pods` a step per pod: every check of the batch
        first (what raises changes nothing), then the apply."""
        batch: list[model.Pod] = []
        for p in pods:
            batch.append(_defaulted(p))
            yield
        keys: dict[str, int] = {}
        uids: dict[str, int] = {}
        for i, pod in enumerate(batch):
            at = f"pods[{i}]"
            if not validated:
                _checked(at, pod, validation.validate_pod, manifests.validate_pod)
            key, uid = pod.key, pod.metadata.uid
            _first_seen(keys, key, "pods", i, "metadata.name", "the same namespace and name")
            _first_seen(uids, uid, "pods", i, "metadata.uid", "the same uid")
            holder = self._key_of_uid.get(uid)
            if holder is not None and holder != key:
                raise AlreadyExists(f"{at}.metadata.uid: {uid!r} is already the uid of pod {holder}")
            old = self.pods.get(key)
            if old is not None and old.metadata.uid == uid:
                was, now = old.spec.node_name, pod.spec.node_name
                if was and now != was:
                    raise FailedPrecondition(
                        f"{at}.spec.nodeName: cannot change from {was!r} to {now!r} "
                        "(pods are moved by Bind, or deleted and re-created)"
                    )
            yield
        yield from self.core.admit_pods_steps(batch)
        for pod in batch:
            old = self.pods.get(pod.key)
            if old is not None and old.metadata.uid != pod.metadata.uid:
                # Same name, new object: the old one is gone.
                self._key_of_uid.pop(old.metadata.uid, None)
                self.core.on_pod_delete(old)
            self.pods[pod.key] = pod
            self._key_of_uid[pod.metadata.uid] = pod.key
            self.core.on_pod(pod, source=self)
            yield
        return len(batch)

    def delete_pods(self, keys: Iterable[str]) -> int:
        """Delete pods by ``NAMESPACE/NAME``; unknown keys are skipped."""
        return _at_once(self.delete_pods_steps(keys))

    def delete_pods_steps(self, keys: Iterable[str]) -> Steps:
        """:meth:`delete_pods` a step per key (nothing to check first)."""
        n = 0
        for key in keys:
            pod = self.pods.pop(key, None)
            if pod is not None:
                self._key_of_uid.pop(pod.metadata.uid, None)
                self.core.on_pod_delete(pod)
                n += 1
            yield
        return n

    def upsert_pod_groups(self, groups: Iterable[model.PodGroup]) -> int:
        return self._upsert_namespaced(
            "groups", groups, validation.validate_pod_group, self.pod_groups, self.core.on_pod_group, _api_version
        )

    def upsert_pdbs(self, budgets: Iterable[model.PodDisruptionBudget]) -> int:
        return self._upsert_namespaced("budgets", budgets, validation.validate_pdb, self.pdbs, self.core.on_pdb)

    def delete_pod_groups(self, keys: Iterable[str]) -> int:
        """Delete pod groups by their key here (``APIVERSION NAMESPACE/NAME``:
        a feeder's resync); unknown ones are skipped. Their pods stay, as
        the API server leaves a gang's pods when its PodGroup is deleted."""
        n = 0
        for key in keys:
            group = self.pod_groups.pop(key, None)
            if group is not None:
                self.core.on_pod_group_delete(group)
                n += 1
        return n

    def delete_pdbs(self, keys: Iterable[str]) -> int:
        """Delete PodDisruptionBudgets by ``NAMESPACE/NAME``; unknown ones are skipped."""
        n = 0
        for key in keys:
            pdb = self.pdbs.pop(key, None)
            if pdb is not None:
                self.core.on_pdb_delete(pdb.metadata.namespace or "default", pdb.metadata.name)
                n += 1
        return n

    def upsert_workloads(self, objects: Iterable[model.Workload]) -> int:
        """Services, ReplicationControllers, ReplicaSets and StatefulSets (their
        selectors: PodTopologySpread's default constraints), all or none:
        defaulted to ``default``, validated, unique by kind, namespace and name."""
        batch = [
            obj
            if obj.metadata.namespace
            else msgspec.structs.replace(obj, metadata=msgspec.structs.replace(obj.metadata, namespace="default"))
            for obj in objects
        ]
        seen: dict[str, int] = {}
        for i, obj in enumerate(batch):
            _checked(f"workloads[{i}]", obj, validation.validate_workload)
            key = f"{obj.kind} {model.pod_key(obj.metadata.namespace, obj.metadata.name)}"
            _first_seen(seen, key, "workloads", i, "metadata.name", "the same kind, namespace and name")
        for obj in batch:
            self.workloads[(obj.kind, model.pod_key(obj.metadata.namespace, obj.metadata.name))] = obj
            self.core.on_workload(obj)
        return len(batch)

    def delete_workloads(self, keys: Iterable[tuple[str, str]]) -> int:
        """Delete workloads by (kind, ``NAMESPACE/NAME``); unknown ones are skipped."""
        n = 0
        for kind, key in keys:
            obj = self.workloads.pop((kind, key), None)
            if obj is not None:
                self.core.on_workload_delete(kind, obj.metadata.namespace, obj.metadata.name)
                n += 1
        return n

    # ------------------------------------------------------------ resource.k8s.io/v1

    def upsert_device_classes(self, classes: Iterable[dra.DeviceClass]) -> int:
        """DeviceClasses, all or none (validated as the API server does)."""
        batch = list(classes)
        seen: dict[str, int] = {}
        for i, obj in enumerate(batch):
            _checked(f"deviceClasses[{i}]", obj, dra_validation.validate_device_class)
            _first_seen(seen, obj.metadata.name, "deviceClasses", i, "metadata.name", "the same name")
        for obj in batch:
            self.device_classes[obj.metadata.name] = obj
            self.core.on_device_class(obj)
        return len(batch)

    def delete_device_classes(self, names: Iterable[str]) -> int:
        """Delete DeviceClasses by name; unknown names are skipped."""
        n = 0
        for name in names:
            if self.device_classes.pop(name, None) is not None:
                self.core.on_device_class_delete(name)
                n += 1
        return n

    def upsert_resource_slices(self, slices: Iterable[dra.ResourceSlice]) -> int:
        """ResourceSlices (a driver's devices on a node, a node selection or all
        nodes), all or none."""
        batch = list(slices)
        seen: dict[str, int] = {}
        for i, obj in enumerate(batch):
            _checked(f"resourceSlices[{i}]", obj, dra_validation.validate_resource_slice)
            _first_seen(seen, obj.metadata.name, "resourceSlices", i, "metadata.name", "the same name")
        for obj in batch:
            self.resource_slices[obj.metadata.name] = obj
            self.core.on_resource_slice(obj)
        return len(batch)

    def delete_resource_slices(self, names: Iterable[str]) -> int:
        """Delete ResourceSlices by name; unknown names are skipped. Claims
        allocated from their devices keep their allocations (as in Kubernetes)."""
        n = 0
        for name in names:
            if self.resource_slices.pop(name, None) is not None:
                self.core.on_resource_slice_delete(name)
                n += 1
        return n

    def upsert_resource_claims(self, claims: Iterable[dra.ResourceClaim]) -> int:
        """ResourceClaims, all or none: defaulted to ``default`` and a uid,
        validated, unique by namespace and name. A claim may come allocated
        and reserved (another scheduler's work): its devices are then in use.
        Each write gets a new ``metadata.resourceVersion``."""
        batch = [_claim_defaulted(c) for c in claims]
        seen: dict[str, int] = {}
        for i, obj in enumerate(batch):
            _checked(f"resourceClaims[{i}]", obj, dra_validation.validate_resource_claim)
            _first_seen(seen, obj.key, "resourceClaims", i, "metadata.name", "the same namespace and name")
        for obj in batch:
            self._store_claim(obj)
        return len(batch)

    def delete_resource_claims(self, keys: Iterable[str]) -> int:
        """Delete ResourceClaims by ``NAMESPACE/NAME``; unknown keys are skipped.
        The claim goes at once (no finalizer holds it here): an allocated
        one frees its devices."""
        n = 0
        for key in keys:
            obj = self.resource_claims.pop(key, None)
            if obj is not None:
                self.core.on_resource_claim_delete(obj.metadata.namespace, obj.metadata.name)
                n += 1
        return n

    def upsert_resource_claim_templates(self, templates: Iterable[dra.ResourceClaimTemplate]) -> int:
        """ResourceClaimTemplates, all or none. Nothing stamps claims out of
        them here (kube-controller-manager does in Kubernetes): a feeder
        creates the claim and sets the pod's ``status.resourceClaimStatuses``."""
        batch = [_in_namespace(t) for t in templates]
        seen: dict[str, int] = {}
        for i, obj in enumerate(batch):
            _checked(f"resourceClaimTemplates[{i}]", obj, dra_validation.validate_resource_claim_template)
            _first_seen(seen, obj.key, "resourceClaimTemplates", i, "metadata.name", "the same namespace and name")
        for obj in batch:
            self.claim_templates[obj.key] = obj
            self.core.on_resource_claim_template(obj)
        return len(batch)

    def delete_resource_claim_templates(self, keys: Iterable[str]) -> int:
        n = 0
        for key in keys:
            obj = self.claim_templates.pop(key, None)
            if obj is not None:
                self.core.on_resource_claim_template_delete(obj.metadata.namespace, obj.metadata.name)
                n += 1
        return n

    def _store_claim(self, claim: dra.ResourceClaim) -> dra.ResourceClaim:
        self._claim_version += 1
        md = msgspec.structs.replace(claim.metadata, resource_version=str(self._claim_version))
        claim = msgspec.structs.replace(claim, metadata=md)
        self.resource_claims[claim.key] = claim
        self.core.on_resource_claim(claim, source=self)
        return claim

    def _current_claim(self, claim: dra.ResourceClaim) -> dra.ResourceClaim:
        """The stored claim a write replaces; NotFound, or Conflict (the API
        server's 409) when ``claim`` was read at another resourceVersion."""
        md = claim.metadata
        current = self.resource_claims.get(model.pod_key(md.namespace, md.name))
        if current is None or (md.uid and md.uid != current.metadata.uid):
            raise NotFound(f'resourceclaims.resource.k8s.io "{md.name}" not found')
        if md.resource_version != current.metadata.resource_version:
            raise Conflict(
                f'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "{md.name}": the object has '
                "been modified; please apply your changes to the latest version and try again"
            )
        return current

    # ------------------------------------------------------------ Source: ResourceClaims

    async def get_claim(self, namespace: str, name: str) -> dra.ResourceClaim:
        claim = self.resource_claims.get(model.pod_key(namespace, name))
        if claim is None:
            raise NotFound(f'resourceclaims.resource.k8s.io "{name}" not found')
        return claim

    async def update_claim(self, claim: dra.ResourceClaim) -> dra.ResourceClaim:
        """metadata only (the spec of a claim is immutable; status has its own verb)."""
        current = self._current_claim(claim)
        md = msgspec.structs.replace(claim.metadata, uid=current.metadata.uid)
        updated = msgspec.structs.replace(current, metadata=md)
        _checked("resourceclaim", updated, dra_validation.validate_resource_claim)
        return self._store_claim(updated)

    async def update_claim_status(self, claim: dra.ResourceClaim) -> dra.ResourceClaim:
        current = self._current_claim(claim)
        updated = msgspec.structs.replace(current, status=claim.status)
        _checked("resourceclaim", updated, dra_validation.validate_resource_claim)
        return self._store_claim(updated)

    async def create_claim(self, claim: dra.ResourceClaim) -> dra.ResourceClaim:
        """The API server's create with ``generateName``: the prefix and five
        random characters (names.SimpleNameGenerator), retried on a taken name."""
        md = claim.metadata
        namespace = md.namespace or "default"
        name = md.name
        while not name or model.pod_key(namespace, name) in self.resource_claims:
            name = md.generate_name + "".join(random.choices(_NAME_ALPHABET, k=5))
        md = msgspec.structs.replace(md, name=name, namespace=namespace, uid=str(uuid.uuid4()))
        created = msgspec.structs.replace(claim, metadata=md, status=dra.ResourceClaimStatus())
        _checked("resourceclaim", created, dra_validation.validate_resource_claim)
        return self._store_claim(created)

    async def delete_claim(self, namespace: str, name: str) -> None:
        self.delete_resource_claims([model.pod_key(namespace, name)])

    async def set_extended_resource_claim_status(
        self, pod: model.Pod, status: model.PodExtendedResourceClaimStatus
    ) -> None:
        current = self.pods.get(pod.key)
        if current is None or (pod.metadata.uid and current.metadata.uid != pod.metadata.uid):
            raise NotFound(f'pods "{pod.metadata.name}" not found')
        updated = msgspec.structs.replace(
            current, status=msgspec.structs.replace(current.status, extended_resource_claim_status=status)
        )
        self.pods[pod.key] = updated
        self.core.on_pod(updated, source=self)

    def _upsert_namespaced(
        self,
        batch_name: str,
        objects: Iterable[Namespaced],
        check: Callable[[Namespaced], None],
        store: dict[str, Namespaced],
        notify: Callable[[Namespaced], None],
        scope: Callable[[Namespaced], str] | None = None,
    ) -> int:
        """Pod groups and PDBs: defaulted to ``default``, validated, unique by
        NAMESPACE/NAME within their ``scope`` (PodGroups: their apiVersion,
        the dialect; the store's key is then ``SCOPE NAMESPACE/NAME``), then applied."""
        batch = [_in_namespace(obj) for obj in objects]
        seen: dict[str, dict[str, int]] = {}
        for i, obj in enumerate(batch):
            _checked(f"{batch_name}[{i}]", obj, check)
            within = seen.setdefault(scope(obj) if scope else "", {})
            _first_seen(within, _key(obj), batch_name, i, "metadata.name", "the same namespace and name")
        for obj in batch:
            store[f"{scope(obj)} {_key(obj)}" if scope else _key(obj)] = obj
            notify(obj)
        return len(batch)

    # ------------------------------------------------------------ Source

    async def bind(self, pod: model.Pod, node: str) -> None:
        current = self.pods.get(pod.key)
        if current is None or (pod.metadata.uid and current.metadata.uid != pod.metadata.uid):
            raise BindConflict(f'pods "{pod.metadata.name}" not found')
        bound = current.spec.node_name
        if bound == node:
            return  # a retried bind: already done
        if bound:
            raise BindConflict(f"pod {pod.key} is already assigned to node {bound!r}")
        if node not in self.nodes:
            raise BindError(f'nodes "{node}" not found')
        self._kubelet_admits(current, node)
        status = current.status
        if status.nominated_node_name:
            status = msgspec.structs.replace(status, nominated_node_name="")
        updated = msgspec.structs.replace(
            current, spec=msgspec.structs.replace(current.spec, node_name=node), status=status
        )
        try:
            self.core.admit_pods([updated])
        except (AlreadyExists, ResourceExhausted) as e:
            raise BindError(str(e).removeprefix("pods[0].")) from None
        self.pods[pod.key] = updated
        _remember(self.bindings, (pod.key, node))
        self.core.on_pod(updated, source=self)

    def _kubelet_admits(self, pod: model.Pod, node: str) -> None:
        """Refuse what the node's kubelet would refuse at admission, as a
        Binding of a pod that does not fit would end there
        (``pkg/kubelet/lifecycle/predicate.go``, v1.37.2: the resource fit of
        GeneralPredicates — pods first, then cpu, memory, ephemeral storage,
        then the other resources — reason ``OutOf<resource>`` and
        ``InsufficientResourceError``'s message). The scheduler's own binds
        fit by construction; this stops a bind from outside (the extender's
        ``bind`` verb, gRPC Bind) that nothing checked."""
        alloc = resources.node_allocatable(self.nodes[node])
        want = resources.pod_requests(_without_missing_extended_resources(pod, alloc))
        used, count = self.core.node_usage(node, excluding=pod.metadata.uid)
        checks = [("pods", 1, count)] + [
            (name, want[name], used.get(name, 0))
            for name in sorted(want, key=lambda n: (_ADMISSION_ORDER.get(n, len(_ADMISSION_ORDER)), n))
            if want[name] > 0
        ]
        for name, requested, in_use in checks:
            capacity = alloc.get(name, 0)
            if requested > capacity - in_use:
                raise BindError(
                    f"OutOf{name}: Node didn't have enough resource: {name}, "
                    f"requested: {requested}, used: {in_use}, capacity: {capacity}"
                )

    async def evict(self, pod: model.Pod, reason: str) -> None:
        current = self.pods.pop(pod.key, None)
        if current is None:
            return
        self._key_of_uid.pop(current.metadata.uid, None)
        _remember(self.evictions, (pod.key, reason))
        self.core.on_pod_delete(current)

    async def nominate(self, pod: model.Pod, node: str) -> None:
        current = self.pods.get(pod.key)
        if current is None or current.status.nominated_node_name == node:
            return
        updated = msgspec.structs.replace(
            current, status=msgspec.structs.replace(current.status, nominated_node_name=node)
        )
        self.pods[pod.key] = updated
        self.core.on_pod(updated, source=self)

    async def report_unschedulable(self, pod: model.Pod, message: str, nominated: str | None = None) -> None:
        if nominated is not None:
            await self.nominate(pod, nominated)
        _remember(self.events, (pod.key, "FailedScheduling", message))

    async def report_scheduled(self, pod: model.Pod, node: str) -> None:
        _remember(self.events, (pod.key, "Scheduled", f"Successfully assigned {pod.key} to {node}"))

    async def report_preempted(self, pod: model.Pod, message: str) -> None:
        _remember(self.events, (pod.key, "Preempted", message))

    async def record_event(
        self, regarding: model.Pod, related: model.Pod | None, type_: EventType, reason: str, action: str, note: str
    ) -> None:
        _remember(self.events, (regarding.key, reason, note))

    def _as_source(self) -> Source:
        return self

    def log_summary(self) -> None:
        bound = sum(1 for p in self.pods.values() if p.spec.node_name)
        log.info("embedded cluster: %d nodes, %d pods (%d bound)", len(self.nodes), len(self.pods), bound)


#: What each of the bindings, evictions and events histories may hold, at
#: an estimated _HISTORY_ENTRY_BYTES per entry (a tuple of short strings).
HISTORY_MAX_BYTES = 4 << 20
_HISTORY_ENTRY_BYTES = 256


def _remember(history: list[T], entry: T) -> None:
    """Append ``entry``; past HISTORY_MAX_BYTES the oldest quarter goes
    (a plain list, so tests compare it with ``==``; trimmed in steps, so
    appending stays O(1) amortised)."""
    history.append(entry)
    most = HISTORY_MAX_BYTES // _HISTORY_ENTRY_BYTES
    if len(history) > most:
        del history[: len(history) - most * 3 // 4]


def _defaulted(pod: model.Pod) -> model.Pod:
    """``pod`` with the API server's defaults for a missing namespace and uid
    (a copy of its metadata when one is missing; the caller's object is not changed)."""
    md = pod.metadata
    if md.namespace and md.uid:
        return pod
    namespace = md.namespace or "default"
    md = msgspec.structs.replace(md, namespace=namespace, uid=md.uid or default_uid(namespace, md.name))
    return msgspec.structs.replace(pod, metadata=md)


def _claim_defaulted(claim: dra.ResourceClaim) -> dra.ResourceClaim:
    """``claim`` in ``default`` and with a uid when it has none (a copy)."""
    md = claim.metadata
    if md.namespace and md.uid:
        return claim
    namespace = md.namespace or "default"
    md = msgspec.structs.replace(md, namespace=namespace, uid=md.uid or default_uid(namespace, md.name))
    return msgspec.structs.replace(claim, metadata=md)


def _namespace_defaulted(ns: model.Namespace) -> model.Namespace:
    """``ns`` labelled ``kubernetes.io/metadata.name: <name>`` (a copy; the caller's object is not changed)."""
    md = ns.metadata
    if not md.name or md.labels.get(model.LABEL_METADATA_NAME) == md.name:
        return ns
    labels = {**md.labels, model.LABEL_METADATA_NAME: md.name}
    return msgspec.structs.replace(ns, metadata=msgspec.structs.replace(md, labels=labels))


def _in_namespace(obj: Namespaced) -> Namespaced:
    """``obj`` in the ``default`` namespace when it names none."""
    if obj.metadata.namespace:
        return obj
    return msgspec.structs.replace(obj, metadata=msgspec.structs.replace(obj.metadata, namespace="default"))


def _key(obj: model.PodGroup | model.PodDisruptionBudget | dra.ResourceClaimTemplate) -> str:
    return model.pod_key(obj.metadata.namespace, obj.metadata.name)


def _api_version(group: model.PodGroup) -> str:
    return group.api_version


#: The order in which a kubelet checks a pod's requests (noderesources.Fits:
#: cpu, memory, ephemeral-storage, then the scalar resources by name).
_ADMISSION_ORDER = {"cpu": 0, "memory": 1, "ephemeral-storage": 2}


def _without_missing_extended_resources(pod: model.Pod, allocatable: Mapping[str, int]) -> model.Pod:
    """removeMissingExtendedResources (``pkg/kubelet/lifecycle/predicate.go``
    v1.37.2): the kubelet's admission ignores a container's extended
    resources the node does not list at all, and those the pod's
    ``status.extendedResourceClaimStatus`` maps to DRA devices."""
    status = pod.status.extended_resource_claim_status
    by_dra = {(m.container_name, m.resource_name) for m in status.request_mappings} if status is not None else set()

    def kept(c: model.Container) -> model.Container:
        if c.resources is None or not c.resources.requests:
            return c
        requests = {
            name: q
            for name, q in c.resources.requests.items()
            if (c.name, name) not in by_dra and (not resources.is_extended(name) or name in allocatable)
        }
        if len(requests) == len(c.resources.requests):
            return c
        return msgspec.structs.replace(c, resources=msgspec.structs.replace(c.resources, requests=requests))

    spec = pod.spec
    containers, inits = [kept(c) for c in spec.containers], [kept(c) for c in spec.init_containers]
    if all(a is b for a, b in zip([*containers, *inits], [*spec.containers, *spec.init_containers], strict=True)):
        return pod
    return msgspec.structs.replace(
        pod, spec=msgspec.structs.replace(spec, containers=containers, init_containers=inits)
    )
