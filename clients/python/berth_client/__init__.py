"""Berth's gRPC API for Python: the generated ``berth.v1`` stubs
(:mod:`berth_client.api.v1`) and a typed client over them, asyncio
(:class:`AsyncClient`) and blocking (:class:`Client`).

    import berth_client

    with berth_client.Client("berth.example", token=token) as berth:
        results = berth.submit([pod])          # Kubernetes manifests, quantity strings
        waited = berth.wait(results, timeout=60)
        print(berth.why("web-0").summary)

Depends on grpcio and protobuf only. See ``docs/grpc.md`` in Berth's
repository for the API guide (units, authentication, errors, what differs
when Berth schedules a Kubernetes cluster).
"""

from berth_client import api, objects, outcomes, quantity
from berth_client.aio import AsyncClient
from berth_client.connection import DEFAULT_PORT, Retry, Settings, Tls, target
from berth_client.errors import (
    AlreadyExists,
    BerthError,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    SettingsError,
    Unauthenticated,
    Unavailable,
)
from berth_client.objects import ManifestError, to_dict
from berth_client.outcomes import Outcome, Waited
from berth_client.quantity import QuantityError
from berth_client.sync import Client

__all__ = [
    "DEFAULT_PORT",
    "AlreadyExists",
    "AsyncClient",
    "BerthError",
    "Client",
    "DeadlineExceeded",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "ManifestError",
    "NotFound",
    "Outcome",
    "PermissionDenied",
    "QuantityError",
    "ResourceExhausted",
    "Retry",
    "Settings",
    "SettingsError",
    "Tls",
    "Unauthenticated",
    "Unavailable",
    "Waited",
    "api",
    "objects",
    "outcomes",
    "quantity",
    "target",
    "to_dict",
]
