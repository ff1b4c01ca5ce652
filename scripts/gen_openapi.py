"""Generate ``berth/cluster/openapi/v1.MINOR.json`` (the bed's release, by
default v1.37): the known fields of every
kind a Berth manifest may hold, from a real kube-apiserver's OpenAPI v3.

It starts the e2e bed's etcd + kube-apiserver (``tests/e2e/controlplane``,
binaries from ``make e2e-deps``), installs the PodGroup CRD (scheduler-plugins'
``scheduling.x-k8s.io/v1alpha1``, which no API server serves by itself), reads
``/openapi/v3/api/v1``, ``/openapi/v3/apis/policy/v1``,
``/openapi/v3/apis/apps/v1``, ``/openapi/v3/apis/resource.k8s.io/v1`` and
``/openapi/v3/apis/scheduling.x-k8s.io/v1alpha1``, and reduces each kind to a
tree of field names and shapes (the format is described in
``berth/cluster/openapi/__init__.py``). ``berth.cluster.manifests`` checks
documents against it the way the API server's strict field validation does.

    python scripts/gen_openapi.py [OUT]     # make openapi

Run it when the pinned Kubernetes version (``KUBERNETES_VERSION`` in
``tests/e2e/controlplane/bed.py``) moves, and commit the output.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.controlplane import bed  # noqa: E402 - after the path is set

DEFAULT_OUT = ROOT / "berth" / "cluster" / "openapi" / (".".join(bed.KUBERNETES_VERSION.split(".")[:2]) + ".json")

#: kind -> (group, version, OpenAPI v3 document of that group-version).
KINDS: dict[str, tuple[str, str, str]] = {
    "Namespace": ("", "v1", "/openapi/v3/api/v1"),
    "Node": ("", "v1", "/openapi/v3/api/v1"),
    "Pod": ("", "v1", "/openapi/v3/api/v1"),
    "PodDisruptionBudget": ("policy", "v1", "/openapi/v3/apis/policy/v1"),
    "PodGroup": ("scheduling.x-k8s.io", "v1alpha1", "/openapi/v3/apis/scheduling.x-k8s.io/v1alpha1"),
    # Their selectors feed PodTopologySpread's default constraints.
    "Service": ("", "v1", "/openapi/v3/api/v1"),
    "ReplicationController": ("", "v1", "/openapi/v3/api/v1"),
    "ReplicaSet": ("apps", "v1", "/openapi/v3/apis/apps/v1"),
    "StatefulSet": ("apps", "v1", "/openapi/v3/apis/apps/v1"),
    # Dynamic Resource Allocation (GA, served by default since v1.34).
    "DeviceClass": ("resource.k8s.io", "v1", "/openapi/v3/apis/resource.k8s.io/v1"),
    "ResourceSlice": ("resource.k8s.io", "v1", "/openapi/v3/apis/resource.k8s.io/v1"),
    "ResourceClaim": ("resource.k8s.io", "v1", "/openapi/v3/apis/resource.k8s.io/v1"),
    "ResourceClaimTemplate": ("resource.k8s.io", "v1", "/openapi/v3/apis/resource.k8s.io/v1"),
    # Storage: the volume plugins (VolumeBinding, VolumeZone, VolumeRestrictions, NodeVolumeLimits).
    "PersistentVolume": ("", "v1", "/openapi/v3/api/v1"),
    "PersistentVolumeClaim": ("", "v1", "/openapi/v3/api/v1"),
    "StorageClass": ("storage.k8s.io", "v1", "/openapi/v3/apis/storage.k8s.io/v1"),
    "CSINode": ("storage.k8s.io", "v1", "/openapi/v3/apis/storage.k8s.io/v1"),
    "CSIDriver": ("storage.k8s.io", "v1", "/openapi/v3/apis/storage.k8s.io/v1"),
    "CSIStorageCapacity": ("storage.k8s.io", "v1", "/openapi/v3/apis/storage.k8s.io/v1"),
}

#: scheduler-plugins' PodGroup, v1alpha1: the fields of its Go types
#: (kubernetes-sigs/scheduler-plugins apis/scheduling/v1alpha1/types.go, as
#: published in manifests/coscheduling/crd.yaml), written as a structural
#: schema so the API server publishes it (with ObjectMeta) like a built-in.
_INT32 = {"type": "integer", "format": "int32"}
_QUANTITY = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
PODGROUP_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
    "spec": {
        "group": "scheduling.x-k8s.io",
        "names": {"kind": "PodGroup", "listKind": "PodGroupList", "plural": "podgroups", "singular": "podgroup"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "apiVersion": {"type": "string"},
                            "kind": {"type": "string"},
                            "metadata": {"type": "object"},
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "minMember": _INT32,
                                    "minResources": {"type": "object", "additionalProperties": _QUANTITY},
                                    "scheduleTimeoutSeconds": _INT32,
                                    # The other dialects' PodGroups Berth reads under the
                                    # same kind (berth/gangs): Volcano's (volcano-sh/apis
                                    # pkg/apis/scheduling/v1beta1/types.go) and KAI's
                                    # (NVIDIA/KAI-Scheduler pkg/apis/scheduling/v2alpha2).
                                    "minTaskMember": {"type": "object", "additionalProperties": _INT32},
                                    "queue": {"type": "string"},
                                    "priorityClassName": {"type": "string"},
                                    # Volcano's networkTopology (TopologyGang, berth/gangs/topology.py).
                                    "networkTopology": {
                                        "type": "object",
                                        "properties": {
                                            "mode": {"type": "string"},
                                            "highestTierAllowed": {"type": "integer"},
                                            "highestTierName": {"type": "string"},
                                        },
                                    },
                                    "subGroups": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "properties": {
                                                "name": {"type": "string"},
                                                "minMember": _INT32,
                                                "parent": {"type": "string"},
                                            },
                                        },
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "phase": {"type": "string"},
                                    "occupiedBy": {"type": "string"},
                                    "running": _INT32,
                                    "succeeded": _INT32,
                                    "failed": _INT32,
                                    "scheduleStartTime": {"type": "string", "format": "date-time"},
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}

_SCALARS = {"string", "integer", "number", "boolean"}


class Reducer:
    """OpenAPI v3 schemas -> ``{type name: {field: shape}}`` (see the package docstring)."""

    def __init__(self) -> None:
        self.types: dict[str, dict[str, str]] = {}

    def named(self, name: str, components: Mapping[str, Any]) -> str:
        if name in self.types:
            return "@" + name
        schema = components[name]
        if schema.get("properties") and not schema.get("x-kubernetes-preserve-unknown-fields"):
            self.types[name] = {}  # placeholder: recursive types end here
            self.types[name] = self.fields(name, schema, components)
            return "@" + name
        return self.shape(name, schema, components)

    def fields(self, name: str, schema: Mapping[str, Any], components: Mapping[str, Any]) -> dict[str, str]:
        return {
            field: self.shape(f"{name}.{field}", sub, components)
            for field, sub in sorted(schema.get("properties", {}).items())
        }

    def shape(self, where: str, schema: Mapping[str, Any], components: Mapping[str, Any]) -> str:
        ref = schema.get("$ref")
        if ref is None and len(schema.get("allOf", ())) == 1:
            ref = schema["allOf"][0].get("$ref")
        if ref is not None:
            return self.named(ref.removeprefix("#/components/schemas/"), components)
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return "*"
        if schema.get("x-kubernetes-int-or-string") or schema.get("format") == "int-or-string":
            return "s"
        typ = schema.get("type")
        if typ in _SCALARS:
            return "s"
        # Quantity, IntOrString: one of several scalar types.
        branches = schema.get("oneOf") or schema.get("anyOf") or ()
        if branches and all(self.shape(where, b, components) == "s" for b in branches):
            return "s"
        if typ == "array":
            return "[]" + self.shape(where + "[]", schema.get("items") or {}, components)
        if typ == "object" and schema.get("properties"):
            # An inline object (CRDs): named after its place in the tree.
            self.types[where] = self.fields(where, schema, components)
            return "@" + where
        extra = schema.get("additionalProperties")
        if typ == "object" and isinstance(extra, Mapping) and extra:
            return "{}" + self.shape(where + "{}", extra, components)
        # `type: object` alone, `additionalProperties: true`, no type at all:
        # free-form (FieldsV1, RawExtension), never checked.
        return "*"


def _by_gvk(components: Mapping[str, Any], group: str, version: str, kind: str) -> str:
    for name, schema in components.items():
        for gvk in schema.get("x-kubernetes-group-version-kind", ()):
            if (gvk.get("group", ""), gvk["version"], gvk["kind"]) == (group, version, kind):
                return str(name)
    raise LookupError(f"{group}/{version} {kind}: not in the API server's OpenAPI")


def _wait_for(kube: bed.Kube, path: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        status, out = kube.request("GET", path)
        if status == 200:
            return out
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path}: HTTP {status}: {out}")
        time.sleep(0.5)


def generate(kube: bed.Kube) -> dict[str, Any]:
    kube.create(PODGROUP_CRD)
    reducer = Reducer()
    kinds: dict[str, Any] = {}
    docs: dict[str, Any] = {}
    for kind, (group, version, path) in KINDS.items():
        if path not in docs:
            docs[path] = _wait_for(kube, path)["components"]["schemas"]
        components = docs[path]
        api_version = f"{group}/{version}" if group else version
        kinds[kind] = {
            "apiVersion": api_version,
            "type": reducer.named(_by_gvk(components, group, version, kind), components),
        }
        list_kind = kind + "List"
        kinds[list_kind] = {
            "apiVersion": api_version,
            "type": reducer.named(_by_gvk(components, group, version, list_kind), components),
        }
    return {
        "$comment": (
            f"Generated by scripts/gen_openapi.py (make openapi) from kube-apiserver {bed.KUBERNETES_VERSION}'s "
            "/openapi/v3 (api/v1, apis/policy/v1, apis/apps/v1, apis/resource.k8s.io/v1) and scheduler-plugins' "
            "PodGroup CRD (scheduling.x-k8s.io/v1alpha1) served by it. Do not edit. Shapes: 's' scalar, '@T' object of "
            "type T, '[]X' list of X, '{}X' map to X, '*' anything (x-kubernetes-preserve-unknown-fields, "
            "free-form objects)."
        ),
        "kubernetesVersion": bed.KUBERNETES_VERSION,
        "kinds": kinds,
        "types": dict(sorted(reducer.types.items())),
    }


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT
    with tempfile.TemporaryDirectory(prefix="berth-openapi-") as tmp, bed.ControlPlane(workdir=Path(tmp)) as cp:
        schema = generate(cp.kube())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(schema, indent=1, sort_keys=False) + "\n")
    print(f"{out}: {len(schema['kinds'])} kinds, {len(schema['types'])} types, {out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
