"""The ``Queue`` kind (``queues.berth.dev``, version ``v1alpha1``, cluster
scoped) as Berth reads it: a batch queue declared as a Kubernetes object
instead of in the configuration file's ``queues:``.

Only the envelope is typed here. ``spec`` stays a plain mapping until
:mod:`berth.quota.objects` turns it into a :class:`~berth.quota.spec.QueueSpec`
(whose fields it has, ``name`` aside: that is ``metadata.name``), so an
object the CRD's schema let through but Berth refuses is a condition on the
object, never an informer that cannot decode its LIST. The CRD itself is
``helm/berth/templates/queues-crd.yaml`` (a plain copy in
``helm/crds/queues.berth.dev.yaml``).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["API_VERSION", "GROUP", "KIND", "PLURAL", "VERSION", "Queue", "QueueMeta"]

GROUP = "berth.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "Queue"
PLURAL = "queues"


class QueueMeta(msgspec.Struct, kw_only=True, rename="camel"):
    name: str = ""
    uid: str = ""
    #: Bumped by the API server on every spec change (not on status writes):
    #: the conditions' ``observedGeneration``.
    generation: int = 0
    resource_version: str = ""
    creation_timestamp: str = ""


class Queue(msgspec.Struct, kw_only=True, rename="camel"):
    api_version: str = API_VERSION
    kind: str = KIND
    metadata: QueueMeta = msgspec.field(default_factory=QueueMeta)
    #: As written; checked by :func:`berth.quota.objects.spec_of`.
    spec: dict[str, Any] = {}
    #: What the leader last wrote (compared before writing again).
    status: dict[str, Any] = {}
