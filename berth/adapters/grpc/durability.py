"""The gRPC side of standalone Berth's durable state (:mod:`berth.scheduling.durable`):

- :class:`EpochInterceptor` stamps the server's epoch on every response and
  stream message of ``berth.v1`` that has an ``epoch`` field (found from
  the message's descriptor, once per type: a new response with the field
  needs nothing here).
- :func:`durable_feeds` makes each Cluster feed call durable before it
  answers (one commit for the whole batch) and carries out ``resync``.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from berth.adapters.grpc.edge import WrappingInterceptor
from berth.scheduling.durable import Durable

__all__ = ["EpochInterceptor", "durable_feeds", "kind_of"]


def _has_epoch(cls: type) -> bool:
    descriptor = getattr(cls, "DESCRIPTOR", None)
    return descriptor is not None and "epoch" in descriptor.fields_by_name


class EpochInterceptor(WrappingInterceptor):
    """Sets ``epoch`` on what ``berth.v1`` services answer (innermost: it
    sees the decoded request and the response before they are encoded)."""

    def __init__(self, epoch: Callable[[], str]) -> None:
        super().__init__()
        self.epoch = epoch
        self._stamps: dict[type, bool] = {}

    def _stamp(self, message: Any) -> Any:
        cls = type(message)
        has = self._stamps.get(cls)
        if has is None:
            has = self._stamps[cls] = _has_epoch(cls)
        if has and not message.epoch:
            message.epoch = self.epoch()
        return message

    def wants(self, method: str, handler: grpc.RpcMethodHandler) -> bool:
        return method.startswith("/berth.v1.") and not handler.request_streaming

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        stamp = self._stamp
        if handler.response_streaming:
            behavior = handler.unary_stream
            if not inspect.isasyncgenfunction(behavior):
                return handler

            async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                async for message in behavior(request, context):
                    yield stamp(message)

            return grpc.unary_stream_rpc_method_handler(
                stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        unary_behavior = handler.unary_unary

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            return stamp(await unary_behavior(request, context))

        return grpc.unary_unary_rpc_method_handler(
            unary, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )


#: Method-name words whose snake_case is not the cluster attribute's.
_ATTRIBUTE = {
    "pod_disruption_budgets": "pdbs",
    "resource_claim_templates": "claim_templates",
}


def kind_of(method: str) -> str:
    """The embedded cluster's attribute an Upsert/Delete method feeds:
    ``UpsertCSINodes`` -> ``csi_nodes``, ``UpsertPodDisruptionBudgets`` -> ``pdbs``."""
    name = re.sub(r"^(Upsert|Delete)", "", method)
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    return _ATTRIBUTE.get(snake, snake)


def durable_feeds(servicer: Any, durable: Durable) -> None:
    """Wrap each ``Upsert*``/``Delete*`` method of ``servicer`` (a Cluster
    servicer) so that it answers once its changes are committed, and an
    upsert with ``resync`` deletes what its request lacks."""
    for name in dir(type(servicer)):
        if name.startswith(("Upsert", "Delete")) and callable(getattr(servicer, name)):
            setattr(servicer, name, _durable(getattr(servicer, name), kind_of(name), durable))


def _durable(method: Callable[[Any, Any], Awaitable[Any]], kind: str, durable: Durable) -> Any:
    @functools.wraps(method)
    async def call(request: Any, context: Any) -> Any:
        if getattr(request, "resync", False):
            with durable.resync(kind) as result:
                response = await method(request, context)
            response.resync_deleted = result.deleted
        else:
            response = await method(request, context)
        await durable.sync()
        return response

    return call
