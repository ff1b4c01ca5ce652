"""A Berth gRPC server on a free loopback port, configured per test."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import grpc

from berth import app, config
from berth.adapters.grpc.server import GrpcServer
from berth.cluster.embedded import EmbeddedCluster
from berth.scheduling.core import Core
from berth.testing import make_node


@dataclass
class Served:
    server: GrpcServer
    core: Core
    feed: EmbeddedCluster

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def channel(self, credentials: grpc.ChannelCredentials | None = None, **options: Any) -> grpc.aio.Channel:
        if credentials is None:
            return grpc.aio.insecure_channel(self.address, **options)
        # The test certificates name 127.0.0.1 and localhost.
        return grpc.aio.secure_channel(self.address, credentials, **options)


@contextlib.asynccontextmanager
async def serving(grpc_cfg: Mapping[str, Any] | None = None, **top: Any) -> AsyncIterator[Served]:
    """``berth serve``'s gRPC server over a two-node embedded cluster
    (a: 4 cpu, b: 1 cpu); ``grpc_cfg`` is merged into ``grpc:``."""
    doc = {"grpc": {"host": "127.0.0.1", "port": 0, **(grpc_cfg or {})}, **top}
    berth = app.build(config.parse(doc))
    berth.cluster.upsert_nodes(
        [make_node("a", cpu="4", memory="8Gi", pods=10), make_node("b", cpu="1", memory="1Gi", pods=10)]
    )
    server = GrpcServer(berth.core, berth.extender, berth.cluster)
    await server.start()
    try:
        yield Served(server, berth.core, berth.cluster)
    finally:
        await server.stop(0)
