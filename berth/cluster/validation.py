"""The API server's validation of names, labels and the objects the Cluster
feed takes, with its messages.

Ported from ``k8s.io/apimachinery`` — ``pkg/util/validation`` and
``pkg/api/validate/content/kube.go`` (IsDNS1123Subdomain, IsDNS1123Label,
IsQualifiedName/IsLabelKey, IsValidLabelValue), ``pkg/apis/meta/v1/validation``
(ValidateLabels, ValidateLabelSelector) — and from ``pkg/apis/core/validation``
(node names, taints, annotations) and ``pkg/apis/policy/validation``
(ValidatePodDisruptionBudgetSpec). A failure is an
:class:`~berth.errors.InvalidArgument` whose message is a field error as the
API server prints it (``field.Error.Error()`` in
``apimachinery/pkg/util/validation/field/errors.go``)::

    metadata.name: Invalid value: "Foo_": a lowercase RFC 1123 subdomain must consist of ...

Validation stops at the first error: one line says what to fix, and the
message stays small whatever the request holds.

What Berth needs beyond the API server's rules lives here too: a pod's total
request of any resource must fit the int64 columns of the node table (the sum
over the pods of a node is the cache's to check, before it counts them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

import numpy as np

from berth.cluster import model, resources
from berth.errors import InvalidArgument

__all__ = [
    "MAX_JSON_DEPTH",
    "duplicate",
    "forbidden",
    "invalid",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_qualified_name",
    "is_valid_label_value",
    "not_supported",
    "required",
    "validate_annotations",
    "validate_json_depth",
    "validate_label_name",
    "validate_label_selector",
    "validate_labels",
    "validate_namespace",
    "validate_node",
    "validate_node_selector_requirement",
    "validate_object_meta",
    "validate_pdb",
    "validate_pod",
    "validate_pod_group",
    "validate_workload",
]

# ---------------------------------------------------------------- field errors

_MAX_VALUE_CHARS = 128


def _show(value: object) -> str:
    """A bad value as field.Error prints it (strings quoted), cut short."""
    text = json.dumps(value) if isinstance(value, str) else str(value)
    if len(text) > _MAX_VALUE_CHARS:
        text = f"{text[:_MAX_VALUE_CHARS]}...({len(text) - _MAX_VALUE_CHARS} more characters)"
    return text


def invalid(path: str, value: object, detail: str) -> InvalidArgument:
    """field.Invalid: ``path: Invalid value: "v": detail``."""
    return InvalidArgument(f"{path}: Invalid value: {_show(value)}: {detail}")


def required(path: str, detail: str = "") -> InvalidArgument:
    """field.Required: ``path: Required value[: detail]``."""
    return InvalidArgument(f"{path}: Required value{': ' + detail if detail else ''}")


def forbidden(path: str, detail: str) -> InvalidArgument:
    """field.Forbidden: ``path: Forbidden: detail``."""
    return InvalidArgument(f"{path}: Forbidden: {detail}")


def duplicate(path: str, value: object, detail: str = "") -> InvalidArgument:
    """field.Duplicate: ``path: Duplicate value: "v"[: detail]``."""
    return InvalidArgument(f"{path}: Duplicate value: {_show(value)}{': ' + detail if detail else ''}")


def not_supported(path: str, value: object, supported: Iterable[str]) -> InvalidArgument:
    """field.NotSupported: ``path: Unsupported value: "v": supported values: "a", "b"``."""
    values = ", ".join(json.dumps(s) for s in supported)
    return InvalidArgument(f"{path}: Unsupported value: {_show(value)}: supported values: {values}")


# ---------------------------------------------------------------- strings (apimachinery)


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """validation.RegexError."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FMT = "(" + _LABEL_KEY_FMT + ")?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
# Python's $ also matches before a trailing newline; \Z does not (Go's $ in these patterns).
_DNS1123_LABEL_RE = re.compile(f"^{_DNS1123_LABEL_FMT}\\Z")
_DNS1123_SUBDOMAIN_RE = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}\\Z")
_LABEL_KEY_RE = re.compile(f"^{_LABEL_KEY_FMT}\\Z")
_LABEL_VALUE_RE = re.compile(f"^{_LABEL_VALUE_FMT}\\Z")

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
LABEL_KEY_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 63
#: core/validation's TotalAnnotationSizeLimitB.
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


def is_dns1123_label(value: str) -> list[str]:
    """validation.IsDNS1123Label: the messages for ``value``, empty when valid."""
    errs: list[str] = []
    if len(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(_max_len(DNS1123_LABEL_MAX_LENGTH))
    if not _DNS1123_LABEL_RE.match(value):
        if _DNS1123_SUBDOMAIN_RE.match(value):
            errs.append("must not contain dots")
        else:
            errs.append(_regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """validation.IsDNS1123Subdomain."""
    errs: list[str] = []
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(_max_len(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _DNS1123_SUBDOMAIN_RE.match(value):
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """validation.IsQualifiedName (content.IsLabelKey): ``[prefix/]name``."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return [
            "a valid label key "
            + _regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > LABEL_KEY_MAX_LENGTH:
        errs.append("name part " + _max_len(LABEL_KEY_MAX_LENGTH))
    if not _LABEL_KEY_RE.match(name):
        errs.append("name part " + _regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_valid_label_value(value: str) -> list[str]:
    """validation.IsValidLabelValue."""
    errs: list[str] = []
    if len(value) > LABEL_VALUE_MAX_LENGTH:
        errs.append(_max_len(LABEL_VALUE_MAX_LENGTH))
    if not _LABEL_VALUE_RE.match(value):
        errs.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def _check(path: str, value: str, messages: list[str]) -> None:
    if messages:
        raise invalid(path, value, messages[0])


# ---------------------------------------------------------------- JSON

#: How deep arrays and objects may nest in JSON a client sends (opaque DRA
#: parameters). The API server allows 10 000 (apimachinery
#: ``pkg/util/json`` maxDepth, encoding/json's maxNestingDepth); Python
#: cannot hold that: decoding, comparing and encoding each recurse once per
#: level, within a recursion limit of 1000 frames shared with the call
#: stack, so a document deeper than ~800 fails with a RecursionError
#: depending on where it is handled. A fixed bound well inside that answers
#: the same wherever it is checked.
MAX_JSON_DEPTH = 256

# A JSON string (its escapes included), matched without backtracking.
_JSON_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def json_depth(raw: bytes) -> int:
    """How deep arrays and objects nest in the JSON document ``raw`` (``[]``
    is 1), counted without recursing: strings dropped, then brackets counted."""
    brackets = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    opens = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((opens == ord("[")) | (opens == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


def validate_json_depth(raw: bytes, path: str) -> None:
    """Refuse JSON nested deeper than :data:`MAX_JSON_DEPTH`, before anything
    decodes it (a RecursionError would otherwise depend on the stack)."""
    if len(raw) > MAX_JSON_DEPTH and json_depth(raw) > MAX_JSON_DEPTH:
        raise invalid(path, "<value omitted>", f"error parsing data as JSON: exceeded max depth of {MAX_JSON_DEPTH}")


# ---------------------------------------------------------------- metadata


def validate_label_name(key: str, path: str) -> None:
    """metav1validation.ValidateLabelName."""
    _check(path, key, is_qualified_name(key))


def validate_labels(labels: Mapping[str, str], path: str) -> None:
    """metav1validation.ValidateLabels (the error's path is the map's, as upstream's)."""
    for k, v in labels.items():
        validate_label_name(k, path)
        _check(path, v, is_valid_label_value(v))


def validate_annotations(annotations: Mapping[str, str], path: str) -> None:
    """apimachinery ValidateAnnotations: qualified keys, at most 256 KiB in all."""
    total = 0
    for k, v in annotations.items():
        _check(path, k, is_qualified_name(k.lower()))
        total += len(k) + len(v)
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        raise InvalidArgument(f"{path}: Too long: must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes")


def validate_object_meta(md: model.ObjectMeta, *, namespaced: bool, path: str = "metadata") -> None:
    """ValidateObjectMeta with NameIsDNSSubdomain (pods, nodes, PDBs, pod groups)."""
    if not md.name:
        raise required(f"{path}.name", "name or generateName is required")
    _check(f"{path}.name", md.name, is_dns1123_subdomain(md.name))
    if namespaced and md.namespace:
        # ValidateNamespaceName is a DNS-1123 label.
        _check(f"{path}.namespace", md.namespace, is_dns1123_label(md.namespace))
    validate_labels(md.labels, f"{path}.labels")
    validate_annotations(md.annotations, f"{path}.annotations")


# ---------------------------------------------------------------- selectors


def validate_label_selector(sel: model.LabelSelector | None, path: str) -> None:
    """metav1validation.ValidateLabelSelector (values checked as label values:
    AllowInvalidLabelValueInSelector is false for new objects)."""
    if sel is None:
        return
    validate_labels(sel.match_labels, f"{path}.matchLabels")
    for i, r in enumerate(sel.match_expressions):
        at = f"{path}.matchExpressions[{i}]"
        if r.operator in ("In", "NotIn"):
            if not r.values:
                raise required(f"{at}.values", "must be specified when `operator` is 'In' or 'NotIn'")
        elif r.operator in ("Exists", "DoesNotExist"):
            if r.values:
                raise forbidden(f"{at}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        else:
            raise invalid(f"{at}.operator", r.operator, "not a valid selector operator")
        validate_label_name(r.key, f"{at}.key")
        for j, v in enumerate(r.values):
            _check(f"{at}.values[{j}]", v, is_valid_label_value(v))


def validate_node_selector_requirement(r: model.NodeSelectorRequirement, path: str) -> None:
    """core validation's ValidateNodeSelectorRequirement (Gt/Lt take one integer)."""
    if r.operator in ("In", "NotIn"):
        if not r.values:
            raise required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'")
    elif r.operator in ("Exists", "DoesNotExist"):
        if r.values:
            raise forbidden(f"{path}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
    elif r.operator in ("Gt", "Lt"):
        if len(r.values) != 1:
            raise required(f"{path}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'")
        try:
            int(r.values[0])
        except ValueError:
            raise invalid(f"{path}.values[0]", r.values[0], "must be an integer") from None
    else:
        raise invalid(f"{path}.operator", r.operator, "not a valid selector operator")
    validate_label_name(r.key, f"{path}.key")


# ---------------------------------------------------------------- objects


_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def validate_node(node: model.Node) -> None:
    """What core validation's ValidateNode checks that scheduling relies on:
    the name (ValidateNodeName = NameIsDNSSubdomain), labels, taints; the
    quantities are :func:`berth.cluster.manifests.validate_node`'s."""
    validate_object_meta(node.metadata, namespaced=False)
    seen: set[tuple[str, str]] = set()
    for i, t in enumerate(node.spec.taints):
        at = f"spec.taints[{i}]"
        validate_label_name(t.key, f"{at}.key")
        if t.value:
            _check(f"{at}.value", t.value, is_valid_label_value(t.value))
        if t.effect not in _TAINT_EFFECTS:
            raise not_supported(f"{at}.effect", t.effect, _TAINT_EFFECTS)
        if (t.key, t.effect) in seen:
            raise duplicate(at, f"{t.key}:{t.effect}", "taints must be unique by key and effect pair")
        seen.add((t.key, t.effect))


def validate_pod(pod: model.Pod) -> None:
    """Names and labels as ValidatePodCreate checks them, the names and
    values of the spec's fields that name things (:func:`_validate_pod_spec`),
    and every resource's total request within int64 (the node table's
    columns; the API server bounds each quantity, Berth also sums them).
    Containers, quantities and selectors are
    :func:`berth.cluster.manifests.validate_pod`'s."""
    validate_object_meta(pod.metadata, namespaced=True)
    _validate_pod_spec(pod.spec, "spec")
    for non_zero in (False, True):
        # Each total (scoring's non-zero one too) must fit the node table's
        # int64 columns: resources.pod_requests raises QuantityError when one does not.
        resources.pod_requests(pod, non_zero=non_zero)


def _validate_pod_spec(spec: model.PodSpec, path: str) -> None:
    """core validation's ValidatePodSpec, in its order, for the fields that
    name things: ``resourceClaims`` (validatePodResourceClaims), container
    resource names (ValidateContainerResourceName), ``nodeSelector``
    (ValidateLabels), ``schedulingGates`` (validateSchedulingGates),
    ``nodeName`` (ValidateNodeName), ``tolerations`` (ValidateTolerations:
    keys, values and effects; operators other than Equal and Exists are
    :func:`berth.cluster.manifests.validate_pod`'s) and
    ``priorityClassName`` (ValidatePriorityClassName)."""
    claim_names: set[str] = set()
    for i, c in enumerate(spec.resource_claims):
        at = f"{path}.resourceClaims[{i}]"
        if not c.name:
            raise required(f"{at}.name")
        if c.name in claim_names:
            raise duplicate(f"{at}.name", c.name)
        _check(f"{at}.name", c.name, is_dns1123_label(c.name))
        claim_names.add(c.name)
        if (c.resource_claim_name is None) == (c.resource_claim_template_name is None):
            detail = (
                "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"
                if c.resource_claim_name is not None
                else "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"
            )
            raise invalid(at, _claim_shown(c), detail)
        for field, name in (
            ("resourceClaimName", c.resource_claim_name),
            ("resourceClaimTemplateName", c.resource_claim_template_name),
        ):
            if name is not None:
                _check(f"{at}.{field}", name, is_dns1123_subdomain(name))
    for field, containers in (("containers", spec.containers), ("initContainers", spec.init_containers)):
        for i, container in enumerate(containers):
            if container.resources is None:
                continue
            for kind, amounts in (("limits", container.resources.limits), ("requests", container.resources.requests)):
                for name in amounts:
                    _validate_container_resource_name(name, f"{path}.{field}[{i}].resources.{kind}[{name}]")
    validate_labels(spec.node_selector, f"{path}.nodeSelector")
    gates: set[str] = set()
    for i, g in enumerate(spec.scheduling_gates):
        _check(f"{path}.schedulingGates[{i}]", g.name, is_qualified_name(g.name))
        if g.name in gates:
            raise duplicate(f"{path}.schedulingGates[{i}]", g.name)
        gates.add(g.name)
    if spec.node_name:
        _check(f"{path}.nodeName", spec.node_name, is_dns1123_subdomain(spec.node_name))
    for i, t in enumerate(spec.tolerations):
        _validate_toleration(t, f"{path}.tolerations[{i}]")
    if spec.priority_class_name:
        _check(f"{path}.priorityClassName", spec.priority_class_name, is_dns1123_subdomain(spec.priority_class_name))


class _Marshalled:
    """A struct as field.Error prints one: encoding/json's rendering, unquoted."""

    def __init__(self, value: object) -> None:
        self.text = json.dumps(value, separators=(",", ":"))

    def __str__(self) -> str:
        return self.text


def _claim_shown(c: model.PodResourceClaim) -> _Marshalled:
    """A PodResourceClaim (the internal type: no JSON tags, Go's field names)."""
    return _Marshalled(
        {
            "Name": c.name,
            "ResourceClaimName": c.resource_claim_name,
            "ResourceClaimTemplateName": c.resource_claim_template_name,
        }
    )


#: helper.IsStandardResourceName (standardResources) and IsStandardContainerResourceName.
_STANDARD_RESOURCES = frozenset(
    {
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "storage",
        "requests.storage",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})


def _validate_container_resource_name(name: str, path: str) -> None:
    """core validation's ValidateContainerResourceName (validateResourceName first)."""
    _check(path, name, is_qualified_name(name))
    if "/" not in name:
        if name not in _STANDARD_RESOURCES and not name.startswith(("hugepages-", "requests.hugepages-")):
            raise invalid(path, name, "must be a standard resource type or fully qualified")
        if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            raise invalid(path, name, "must be a standard resource for containers")
    elif "kubernetes.io/" not in name and (name.startswith("requests.") or is_qualified_name("requests." + name)):
        # helper.IsExtendedResourceName: not native, no "requests." prefix, and
        # its quota name ("requests." + name) a qualified name.
        raise invalid(path, name, "doesn't follow extended resource name standard")


def _validate_toleration(t: model.Toleration, path: str) -> None:
    """core validation's ValidateTolerations for one toleration (the value
    of an Equal toleration is reported at ``operator``, as upstream does)."""
    if t.key:
        validate_label_name(t.key, f"{path}.key")
    if not t.key and t.operator != "Exists":
        raise invalid(
            f"{path}.operator",
            t.operator,
            'operator must be Exists when `key` is empty, which means "match all values and all keys"',
        )
    if t.toleration_seconds is not None and t.effect != "NoExecute":
        raise invalid(f"{path}.effect", t.effect, "effect must be 'NoExecute' when `tolerationSeconds` is set")
    if t.operator in ("", "Equal"):
        errs = is_valid_label_value(t.value)
        if errs:
            raise invalid(f"{path}.operator", t.value, ";".join(errs))
    elif t.operator == "Exists" and t.value:
        raise invalid(f"{path}.operator", t.value, "value must be empty when `operator` is 'Exists'")
    if t.effect and t.effect not in _TAINT_EFFECTS:
        raise not_supported(f"{path}.effect", t.effect, _TAINT_EFFECTS)


def validate_namespace(ns: model.Namespace) -> None:
    """core validation's ValidateNamespace: ValidateObjectMeta with
    ValidateNamespaceName (a DNS-1123 label), no ``metadata.namespace`` (the
    kind is cluster-scoped), valid labels and annotations."""
    md = ns.metadata
    if not md.name:
        raise required("metadata.name", "name or generateName is required")
    _check("metadata.name", md.name, is_dns1123_label(md.name))
    if md.namespace:
        raise forbidden("metadata.namespace", "not allowed on this type")
    validate_labels(md.labels, "metadata.labels")
    validate_annotations(md.annotations, "metadata.annotations")


def validate_pod_group(group: model.PodGroup) -> None:
    """scheduler-plugins' PodGroup CRD: a named object, minMember >= 1,
    scheduleTimeoutSeconds >= 0, valid minResources."""
    validate_object_meta(group.metadata, namespaced=True)
    if group.api_version not in model.POD_GROUP_API_VERSIONS:
        raise not_supported("apiVersion", group.api_version, model.POD_GROUP_API_VERSIONS)
    # Volcano's CRD sets no minimum (a resource gang: minMember 0 or 1 and
    # minResources); scheduler-plugins' and KAI's say 1.
    least = 0 if group.api_group == "scheduling.volcano.sh" else 1
    if group.spec.min_member < least:
        raise invalid("spec.minMember", group.spec.min_member, f"must be greater than or equal to {least}")
    for task, count in group.spec.min_task_member.items():
        if count < 0:
            raise invalid(f"spec.minTaskMember[{task}]", count, "must be greater than or equal to 0")
    for i, sub in enumerate(group.spec.sub_groups):
        if not sub.name:
            raise required(f"spec.subGroups[{i}].name", "")
        if sub.min_member < 0:
            raise invalid(f"spec.subGroups[{i}].minMember", sub.min_member, "must be greater than or equal to 0")
    timeout = group.spec.schedule_timeout_seconds
    if timeout is not None and timeout < 0:
        raise invalid("spec.scheduleTimeoutSeconds", timeout, "must be greater than or equal to 0")
    for name, v in group.spec.min_resources.items():
        try:
            amount = resources.canonical(name, v)
        except resources.QuantityError as e:
            raise e.at(f"spec.minResources[{name}]") from None
        if amount < 0:
            raise invalid(f"spec.minResources[{name}]", v, "must be greater than or equal to 0")


_PERCENT_RE = re.compile(r"^[0-9]+%\Z")


def _int_or_percent(value: int | str | None, path: str) -> None:
    """ValidatePositiveIntOrPercent and IsNotMoreThan100Percent."""
    if value is None:
        return
    if isinstance(value, str):
        if not _PERCENT_RE.match(value):
            raise invalid(
                path,
                value,
                _regex_error(
                    "a valid percent string must be a numeric string followed by an ending '%'", "[0-9]+%", "1%", "93%"
                ),
            )
        if int(value[:-1]) > 100:
            raise invalid(path, value, "must not be greater than 100%")
    elif value < 0:
        raise invalid(path, value, "must be greater than or equal to 0")


def validate_pdb(pdb: model.PodDisruptionBudget) -> None:
    """policy validation's ValidatePodDisruptionBudget: name, spec (one of
    minAvailable/maxUnavailable, each a non-negative int or a percentage up
    to 100%, a valid selector) and status.disruptionsAllowed >= 0."""
    validate_object_meta(pdb.metadata, namespaced=True)
    spec = pdb.spec
    if spec.min_available is not None and spec.max_unavailable is not None:
        raise invalid("spec", "", "minAvailable and maxUnavailable cannot be both set")
    _int_or_percent(spec.min_available, "spec.minAvailable")
    _int_or_percent(spec.max_unavailable, "spec.maxUnavailable")
    validate_label_selector(spec.selector, "spec.selector")
    if pdb.status.disruptions_allowed < 0:
        raise invalid("status.disruptionsAllowed", pdb.status.disruptions_allowed, "must be greater than or equal to 0")


def validate_workload(obj: model.Workload) -> None:
    """The parts of a Service, ReplicationController, ReplicaSet or StatefulSet
    Berth keeps: metadata and the selector (a label map for Services and
    ReplicationControllers, ``ValidateLabels``; a LabelSelector for
    ReplicaSets and StatefulSets, ``ValidateLabelSelector``)."""
    validate_object_meta(obj.metadata, namespaced=True)
    if isinstance(obj, model.Service | model.ReplicationController):
        validate_labels(obj.spec.selector or {}, "spec.selector")
    else:
        validate_label_selector(obj.spec.selector, "spec.selector")
