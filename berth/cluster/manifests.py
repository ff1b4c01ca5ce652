"""Kubernetes manifests in, Berth's model out: for the embedded cluster file,
``berth submit`` / ``berth explain`` and tests.

Accepts multi-document YAML or JSON, each document an object or a ``List``
(``kind: List`` or ``*List`` with ``items``). Kinds: Namespace, Node, Pod,
PodGroup (``scheduling.x-k8s.io``), PodDisruptionBudget, Service,
ReplicationController, ReplicaSet and StatefulSet (only their selectors are
kept: PodTopologySpread's default constraints), and DeviceClass,
ResourceSlice, ResourceClaim and ResourceClaimTemplate (``resource.k8s.io/v1``). Every object is checked the
way the API server would reject it (names, quantities, selector operators),
and errors name the document and the field: ``cluster.yaml: document 3
(Pod default/web-0): spec.containers[0].resources.requests.cpu: invalid
quantity 'lots'``.

Fields are checked first, against the Kubernetes OpenAPI schema of the
pinned version (:mod:`berth.cluster.openapi`), as ``kubectl
--validate=strict`` has the API server do: a misspelt field is an error, not
a different pod (``spec.containers[0].resource: unknown field; did you mean
"resources"?``), and so is a field written twice. ``validate="warn"`` logs
each such field and leaves it out; ``"ignore"`` skips the check.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import yaml

from berth import errors
from berth.cluster import (
    documents,
    dra,
    dra_validation,
    hypernodes,
    labels,
    model,
    openapi,
    queues,
    resources,
    storage,
    topologies,
    validation,
    workload_api,
)
from berth.cluster.documents import VALIDATION_MODES, ManifestError, ValidationMode

__all__ = [
    "VALIDATION_MODES",
    "ManifestError",
    "Manifests",
    "ValidationMode",
    "load",
    "loads",
    "parse_documents",
    "validate_node",
    "validate_pod",
]

_UID_NAMESPACE = uuid.UUID("6f1d2c1e-3b7a-4c55-9a57-1f0a6b2d7e11")

# Decoding, walking Lists and checking fields are berth.cluster.documents';
# the names this module has always had stay.
_describe = documents.describe
_check_fields = documents.check_fields
_json_object = documents.json_object


@dataclasses.dataclass(slots=True)
class Manifests:
    namespaces: list[model.Namespace] = dataclasses.field(default_factory=list)
    nodes: list[model.Node] = dataclasses.field(default_factory=list)
    pods: list[model.Pod] = dataclasses.field(default_factory=list)
    pod_groups: list[model.PodGroup] = dataclasses.field(default_factory=list)
    #: The Workload API's PodGroups and Workloads (``scheduling.k8s.io``, GenericWorkload).
    scheduling_groups: list[workload_api.PodGroup | workload_api.Workload] = dataclasses.field(default_factory=list)
    pdbs: list[model.PodDisruptionBudget] = dataclasses.field(default_factory=list)
    workloads: list[model.Workload] = dataclasses.field(default_factory=list)
    device_classes: list[dra.DeviceClass] = dataclasses.field(default_factory=list)
    resource_slices: list[dra.ResourceSlice] = dataclasses.field(default_factory=list)
    resource_claims: list[dra.ResourceClaim] = dataclasses.field(default_factory=list)
    resource_claim_templates: list[dra.ResourceClaimTemplate] = dataclasses.field(default_factory=list)
    persistent_volumes: list[storage.PersistentVolume] = dataclasses.field(default_factory=list)
    persistent_volume_claims: list[storage.PersistentVolumeClaim] = dataclasses.field(default_factory=list)
    storage_classes: list[storage.StorageClass] = dataclasses.field(default_factory=list)
    csi_nodes: list[storage.CSINode] = dataclasses.field(default_factory=list)
    csi_drivers: list[storage.CSIDriver] = dataclasses.field(default_factory=list)
    csi_storage_capacities: list[storage.CSIStorageCapacity] = dataclasses.field(default_factory=list)
    #: Batch queues as objects (berth.dev/v1alpha1); their specs are judged
    #: when loaded (:meth:`berth.scheduling.core.Core.load_queue_objects`).
    queues: list[queues.Queue] = dataclasses.field(default_factory=list)
    #: Kueue Topology objects (kueue.x-k8s.io v1beta2, v1beta1): levels gangs may ask for.
    topologies: list[topologies.KueueTopology] = dataclasses.field(default_factory=list)
    #: Volcano HyperNode objects (topology.volcano.sh/v1alpha1): tiers gangs may ask for.
    hypernodes: list[hypernodes.HyperNode] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(slots=True)
class _JSONList:
    """A JSON ``List`` document whose items are still text: ``envelope`` is
    the document decoded with ``"items": []``, each item is decoded when its
    turn comes (:func:`_json_documents`)."""

    envelope: openapi.DecodedMapping
    items: list[msgspec.Raw]


def _convert(obj: Mapping[str, Any], typ: type[Any], where: str) -> Any:
    try:
        return msgspec.convert(dict(obj), typ)
    except msgspec.ValidationError as e:
        msg, _, at = str(e).partition(" - at `")
        path = at.rstrip("`").removeprefix("$").removeprefix(".")
        raise ManifestError(f"{where}: {path + ': ' if path else ''}{msg}") from None


def _hypernode(obj: Mapping[str, Any], label: str) -> hypernodes.HyperNode:
    """A HyperNode, refused as Volcano's admission refuses it (the tree —
    cycles, parents — is judged when loaded, as Volcano's scheduler does)."""
    hn: hypernodes.HyperNode = _convert(obj, hypernodes.HyperNode, label)
    if not hn.metadata.name:
        raise ManifestError("metadata.name: required")
    try:
        hypernodes.check(hn)
    except errors.InvalidArgument as e:
        raise ManifestError(str(e)) from None
    return hn


def _check_resources(rl: Mapping[str, Any], path: str) -> None:
    for name, v in rl.items():
        try:
            resources.canonical(name, v)  # refuses negative amounts too
        except resources.QuantityError as e:
            raise ManifestError(str(e.at(f"{path}[{name}]"))) from None


def _check_selector(sel: model.LabelSelector | None, path: str) -> None:
    try:
        labels.validate_label_selector(sel, path)
    except labels.SelectorError as e:
        raise ManifestError(str(e)) from None


def validate_pod(pod: model.Pod) -> None:
    """The checks the API server's validation would make that scheduling relies on."""
    md = pod.metadata
    if not md.name:
        raise ManifestError("metadata.name: required")
    spec = pod.spec
    if not spec.containers:
        raise ManifestError("spec.containers: at least one container is required")
    for field, containers in (("containers", spec.containers), ("initContainers", spec.init_containers)):
        for i, c in enumerate(containers):
            if c.resources is not None:
                _check_resources(c.resources.requests, f"spec.{field}[{i}].resources.requests")
                _check_resources(c.resources.limits, f"spec.{field}[{i}].resources.limits")
            for j, p in enumerate(c.ports):
                if not 0 <= p.host_port <= 65535:
                    raise ManifestError(f"spec.{field}[{i}].ports[{j}].hostPort: out of range")
    _check_resources(spec.overhead, "spec.overhead")
    aff = spec.affinity
    if aff is not None and aff.node_affinity is not None:
        req = aff.node_affinity.required_during_scheduling_ignored_during_execution
        terms = req.node_selector_terms if req else []
        prefs = [p.preference for p in aff.node_affinity.preferred_during_scheduling_ignored_during_execution]
        for kind, ts in (
            ("requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms", terms),
            ("preferredDuringSchedulingIgnoredDuringExecution", prefs),
        ):
            for i, t in enumerate(ts):
                for j, r in enumerate([*t.match_expressions, *t.match_fields]):
                    try:
                        labels.validate_node_requirement(
                            r, f"spec.affinity.nodeAffinity.{kind}[{i}].matchExpressions[{j}]"
                        )
                    except labels.SelectorError as e:
                        raise ManifestError(str(e)) from None
    for field, pa in (
        ("podAffinity", aff.pod_affinity if aff else None),
        ("podAntiAffinity", aff.pod_anti_affinity if aff else None),
    ):
        if pa is None:
            continue
        for i, term in enumerate(pa.required_during_scheduling_ignored_during_execution):
            base = f"spec.affinity.{field}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"
            if not term.topology_key:
                raise ManifestError(f"{base}.topologyKey: required")
            _check_selector(term.label_selector, f"{base}.labelSelector")
            _check_selector(term.namespace_selector, f"{base}.namespaceSelector")
        for i, w in enumerate(pa.preferred_during_scheduling_ignored_during_execution):
            base = f"spec.affinity.{field}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            if not 1 <= w.weight <= 100:
                raise ManifestError(f"{base}.weight: must be in the range 1-100")
            if not w.pod_affinity_term.topology_key:
                raise ManifestError(f"{base}.podAffinityTerm.topologyKey: required")
            _check_selector(w.pod_affinity_term.label_selector, f"{base}.podAffinityTerm.labelSelector")
            _check_selector(w.pod_affinity_term.namespace_selector, f"{base}.podAffinityTerm.namespaceSelector")
    for i, tsc in enumerate(spec.topology_spread_constraints):
        base = f"spec.topologySpreadConstraints[{i}]"
        if tsc.max_skew <= 0:
            raise ManifestError(f"{base}.maxSkew: must be greater than zero")
        if not tsc.topology_key:
            raise ManifestError(f"{base}.topologyKey: required")
        if tsc.when_unsatisfiable not in ("DoNotSchedule", "ScheduleAnyway"):
            raise ManifestError(f"{base}.whenUnsatisfiable: unsupported value {tsc.when_unsatisfiable!r}")
        if tsc.min_domains is not None and (tsc.min_domains <= 0 or tsc.when_unsatisfiable != "DoNotSchedule"):
            raise ManifestError(f"{base}.minDomains: must be > 0 and only with whenUnsatisfiable=DoNotSchedule")
        _check_selector(tsc.label_selector, f"{base}.labelSelector")
    for i, tol in enumerate(spec.tolerations):
        if tol.operator not in ("", "Equal", "Exists"):
            raise ManifestError(f"spec.tolerations[{i}].operator: unsupported value {tol.operator!r}")
        if tol.operator == "Exists" and tol.value:
            raise ManifestError(f"spec.tolerations[{i}].value: must be empty when operator is Exists")


def validate_node(node: model.Node) -> None:
    if not node.metadata.name:
        raise ManifestError("metadata.name: required")
    _check_resources(node.status.capacity, "status.capacity")
    _check_resources(node.status.allocatable, "status.allocatable")
    for i, t in enumerate(node.spec.taints):
        if t.effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise ManifestError(f"spec.taints[{i}].effect: unsupported value {t.effect!r}")


def default_uid(namespace: str, name: str) -> str:
    """A stable UID for objects that were written without one."""
    return str(uuid.uuid5(_UID_NAMESPACE, f"{namespace}/{name}"))


_DRA_KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")
_KINDS = ("Namespace", "Node", "Pod", "PodGroup", "PodDisruptionBudget", *model.WORKLOAD_KINDS, *_DRA_KINDS)


def parse_documents(
    docs: list[Any],
    *,
    default_namespace: str = "default",
    validate: ValidationMode = "strict",
    source: str = "",
) -> Manifests:
    """Decoded documents (what ``yaml.safe_load_all`` or ``json.loads``
    return) into Berth's model; ``validate`` says what an unknown field does
    (see the module docstring). Duplicate fields are found only in documents
    :func:`loads` decoded. ``source`` only prefixes warnings."""
    return _parse(docs, default_namespace, validate, source)


def _parse(docs: Iterable[Any], default_namespace: str, validate: ValidationMode, source: str) -> Manifests:
    """:func:`parse_documents` over documents that may be :class:`_JSONList`."""
    if validate not in VALIDATION_MODES:
        raise errors.InvalidArgument(f"validate: {validate!r} is not one of {', '.join(VALIDATION_MODES)}")
    out = Manifests()
    lazy = (documents.LazyList(d.envelope, map(_json_item, d.items)) if isinstance(d, _JSONList) else d for d in docs)
    for where, item in documents.iter_objects(lazy, validate, source):
        kind = item.get("kind")
        label = f"{where} ({_describe(item)})"
        # The Workload API's kinds are checked by workload_api.decode (the schema has none of them).
        workload_api_kind = str(item.get("apiVersion", "")).startswith(f"{workload_api.API_GROUP}/")
        obj = _check_fields(item, kind, label, validate, source) if kind in _KINDS and not workload_api_kind else item
        try:
            if kind == "Namespace":
                ns = _convert(obj, model.Namespace, label)
                if not ns.metadata.name:
                    raise ManifestError("metadata.name: required")
                out.namespaces.append(ns)
            elif kind == "Node":
                node = _convert(obj, model.Node, label)
                validate_node(node)
                node.metadata.namespace = ""
                node.metadata.uid = node.metadata.uid or default_uid("", node.metadata.name)
                out.nodes.append(node)
            elif kind == "Pod":
                pod = _convert(obj, model.Pod, label)
                validate_pod(pod)
                md = pod.metadata
                md.namespace = md.namespace or default_namespace
                md.uid = md.uid or default_uid(md.namespace, md.name)
                # Decoded here, so not yet anyone's to change: its equal and
                # empty containers are shared (nothing downstream changes a pod in place).
                out.pods.append(model.share_containers(pod))
            elif kind in ("PodGroup", "Workload") and workload_api_kind:
                try:
                    out.scheduling_groups.append(workload_api.decode(item, default_namespace=default_namespace))
                except errors.InvalidArgument as e:
                    raise ManifestError(str(e)) from None
            elif kind == "PodGroup":
                # scheduler-plugins' (the default apiVersion), Volcano's or
                # KAI's: berth/gangs reads each dialect.
                group = _convert(obj, model.PodGroup, label)
                if not group.metadata.name:
                    raise ManifestError("metadata.name: required")
                group.metadata.namespace = group.metadata.namespace or default_namespace
                try:
                    validation.validate_pod_group(group)
                except errors.InvalidArgument as e:
                    raise ManifestError(str(e)) from None
                out.pod_groups.append(group)
            elif kind == "PodDisruptionBudget":
                pdb = _convert(obj, model.PodDisruptionBudget, label)
                pdb.metadata.namespace = pdb.metadata.namespace or default_namespace
                out.pdbs.append(pdb)
            elif kind in model.WORKLOAD_KINDS:
                workload: model.Workload = _convert(obj, model.WORKLOAD_KINDS[kind], label)
                workload.metadata.namespace = workload.metadata.namespace or default_namespace
                _checked_workload(workload)
                out.workloads.append(workload)
            elif kind in _DRA_KINDS:
                _dra_object(obj, kind, label, default_namespace, out)
            elif kind in _STORAGE_KINDS:
                _storage_object(obj, kind, label, default_namespace, out)
            elif kind == queues.KIND:
                out.queues.append(_queue_object(obj, label))
            elif kind == topologies.KIND and obj.get("apiVersion") in topologies.VERSIONS:
                # Kueue's Topology: its levels are judged when loaded (berth.gangs.topology.from_kueue).
                out.topologies.append(_convert(obj, topologies.KueueTopology, label))
            elif kind == hypernodes.KIND and obj.get("apiVersion") == hypernodes.API_VERSION:
                out.hypernodes.append(_hypernode(obj, label))
            elif kind is None:
                raise ManifestError("kind: required")
            else:
                raise ManifestError(f"kind: {kind!r} is not supported ({', '.join(_KINDS)})")
        except ManifestError as e:
            text = str(e)
            raise ManifestError(text if text.startswith(label) else f"{label}: {text}") from None
    return out


#: kind -> (type, namespaced, validation, the Manifests list it goes to).
_STORAGE_KINDS: dict[str, tuple[type[Any], bool, Any, str]] = {
    "PersistentVolume": (storage.PersistentVolume, False, storage.validate_pv, "persistent_volumes"),
    "PersistentVolumeClaim": (storage.PersistentVolumeClaim, True, storage.validate_pvc, "persistent_volume_claims"),
    "StorageClass": (storage.StorageClass, False, storage.validate_storage_class, "storage_classes"),
    "CSINode": (storage.CSINode, False, storage.validate_csi_node, "csi_nodes"),
    "CSIDriver": (storage.CSIDriver, False, storage.validate_csi_driver, "csi_drivers"),
    "CSIStorageCapacity": (
        storage.CSIStorageCapacity,
        True,
        storage.validate_csi_storage_capacity,
        "csi_storage_capacities",
    ),
}


def _storage_object(obj: Any, kind: str, label: str, default_namespace: str, out: Manifests) -> None:
    """A PV, PVC, StorageClass or CSI object, validated as the API server does
    (:mod:`berth.cluster.storage`); namespaced ones defaulted."""
    typ, namespaced, check, field = _STORAGE_KINDS[kind]
    item = _convert(obj, typ, label)
    md = item.metadata
    if namespaced:
        md.namespace = md.namespace or default_namespace
    try:
        check(item)
    except errors.InvalidArgument as e:
        raise ManifestError(str(e)) from None
    getattr(out, field).append(item)


def _dra_object(obj: Any, kind: str, label: str, default_namespace: str, out: Manifests) -> None:
    """A resource.k8s.io/v1 object, validated as the API server does
    (:mod:`berth.cluster.dra_validation`); namespaced ones defaulted."""
    try:
        if kind == "DeviceClass":
            device_class = _convert(obj, dra.DeviceClass, label)
            dra_validation.validate_device_class(device_class)
            out.device_classes.append(device_class)
        elif kind == "ResourceSlice":
            resource_slice = _convert(obj, dra.ResourceSlice, label)
            dra_validation.validate_resource_slice(resource_slice)
            out.resource_slices.append(resource_slice)
        elif kind == "ResourceClaim":
            claim = _convert(obj, dra.ResourceClaim, label)
            md = claim.metadata
            md.namespace = md.namespace or default_namespace
            md.uid = md.uid or default_uid(md.namespace, md.name)
            dra_validation.validate_resource_claim(claim)
            out.resource_claims.append(claim)
        else:
            template = _convert(obj, dra.ResourceClaimTemplate, label)
            template.metadata.namespace = template.metadata.namespace or default_namespace
            dra_validation.validate_resource_claim_template(template)
            out.resource_claim_templates.append(template)
    except errors.InvalidArgument as e:
        if isinstance(e, ManifestError):
            raise
        raise ManifestError(str(e)) from None


def _queue_object(obj: Mapping[str, Any], label: str) -> queues.Queue:
    """A ``Queue`` (berth.dev/v1alpha1): the envelope here, as the API server
    checks a cluster-scoped custom object's; the spec when it is loaded."""
    if obj.get("apiVersion") != queues.API_VERSION:
        raise ManifestError(f"apiVersion: {obj.get('apiVersion')!r}: kind Queue is served as {queues.API_VERSION}")
    q: queues.Queue = _convert(obj, queues.Queue, label)
    problems = validation.is_dns1123_subdomain(q.metadata.name) if q.metadata.name else ["required"]
    if problems:
        raise ManifestError(f"metadata.name: {'; '.join(problems)}")
    if q.status:
        raise ManifestError("status: written by Berth, not declared")
    q.metadata.generation = q.metadata.generation or 1
    return q


def _checked_workload(obj: model.Workload) -> None:
    try:
        validation.validate_workload(obj)
    except errors.InvalidArgument as e:
        raise ManifestError(str(e)) from None


#: A ``List`` whose items take more text than this is decoded item by item.
_LAZY_ITEMS_BYTES = 4096
_TopLevel = list[msgspec.Raw] | dict[str, msgspec.Raw]


def _json_item(raw: msgspec.Raw) -> Any:
    return json.loads(bytes(raw), object_pairs_hook=_json_object)


def _json_document(raw: bytes) -> Any:
    """One JSON document: decoded whole, or, for a big ``List``, as a
    :class:`_JSONList` whose items are decoded one at a time.

    Memory: decoding a 5000-node NodeList into dicts first peaked at ~550
    MiB, and the strings the nodes kept pinned the parser's freed arenas
    (RSS ~30 KiB per node for 10 KiB of live objects). Item by item, one
    item's dicts are alive at a time and the next item reuses their memory.
    Items are still decoded by ``json`` with the duplicate-key hook, so every
    check and message is the same as for a document decoded whole.
    """
    try:
        top = msgspec.json.decode(raw, type=dict[str, msgspec.Raw])
    except msgspec.ValidationError:  # not an object: "expected an object" below
        return json.loads(raw, object_pairs_hook=_json_object)
    items = top.get("items")
    kind = msgspec.json.decode(top["kind"]) if "kind" in top else None
    if (
        items is None
        or not (isinstance(kind, str) and kind.endswith("List"))
        or len(items) <= _LAZY_ITEMS_BYTES
        or not bytes(items).startswith(b"[")
    ):
        return json.loads(raw, object_pairs_hook=_json_object)
    text = bytes(items)
    at = raw.find(text)
    envelope_text = raw[:at] + b"[]" + raw[at + len(text) :]
    # ``find`` may have hit the same text under another key first: then the
    # envelope still holds it, and the document is decoded whole.
    check = msgspec.json.decode(envelope_text, type=dict[str, msgspec.Raw])
    if bytes(check["items"]) != b"[]":
        return json.loads(raw, object_pairs_hook=_json_object)
    envelope = json.loads(envelope_text, object_pairs_hook=_json_object)
    return _JSONList(envelope, msgspec.json.decode(text, type=list[msgspec.Raw]))


def _json_documents(text: str) -> list[Any] | None:
    """The documents of JSON ``text`` (an object or an array of them), big
    Lists left for item-by-item decoding; None when msgspec refuses the text
    (malformed, or NaN that ``json`` takes): the caller decodes it with
    ``json`` for the same result and message as before."""
    try:
        data = text.encode()
        top = msgspec.json.decode(data, type=_TopLevel)
    except (UnicodeEncodeError, msgspec.DecodeError):  # a scalar too (ValidationError)
        return None
    if isinstance(top, dict):
        return [_json_document(data)]
    return [_json_document(bytes(doc)) for doc in top]


def loads(
    text: str,
    *,
    source: str = "<input>",
    default_namespace: str = "default",
    validate: ValidationMode = "strict",
) -> Manifests:
    """Parse YAML (any number of documents) or JSON text."""
    stripped = text.lstrip()
    docs: list[Any] | None = None
    try:
        if stripped.startswith(("{", "[")):
            docs = _json_documents(text)
            if docs is None:  # not JSON to msgspec: json's verdict (and its message, or NaN taken)
                data = json.loads(text, object_pairs_hook=_json_object)
                docs = data if isinstance(data, list) else [data]
        else:
            docs = list(yaml.load_all(text, Loader=documents.yaml_loader()))  # a SafeLoader subclass
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise ManifestError(errors.bounded(f"{source}: not valid YAML or JSON: {e}")) from None
    except RecursionError:
        raise ManifestError(f"{source}: nested too deeply") from None
    try:
        return _parse(docs, default_namespace, validate, source)
    except RecursionError:  # a List item decoded in its turn
        raise ManifestError(f"{source}: nested too deeply") from None
    except ManifestError as e:
        raise ManifestError(f"{source}: {e}") from None


def load(path: str | Path, *, default_namespace: str = "default", validate: ValidationMode = "strict") -> Manifests:
    """A manifest file: the embedded cluster (``berth serve --cluster``),
    ``berth explain/submit -f``; ``validate`` as in :func:`parse_documents`."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ManifestError(f"{p}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ManifestError(f"{p}: not UTF-8 text: {e.reason} at byte {e.start}") from None
    return loads(text, source=str(p), default_namespace=default_namespace, validate=validate)
