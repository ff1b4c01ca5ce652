"""Retry a Submit safely and follow decisions by serial (the asyncio
client): the second Submit under the same idempotency key answers the
first outcome and creates nothing; the watch numbers every decision, so
after a reconnect or a restart of Berth it resumes exactly where it was
(see docs/grpc.md, "State, epochs and restarts").

    python examples/clients/retry_and_resume.py [HOST[:PORT]]
"""

from __future__ import annotations

import asyncio
import sys

import berth_client

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "retried", "namespace": "examples"},
    "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]},
}
KEY = {"examples/retried": "order-4711"}


async def main(server: str) -> int:
    async with berth_client.AsyncClient(server) as berth:
        # Subscribed first (replay: the latest decision of each pod, serial 0; then live ones, numbered).
        decisions = berth.watch(["examples/retried"], replay=True)
        first = await berth.submit([POD], idempotency_keys=KEY)
        # A retry (say the first answer was lost to a deadline): the same key, the first outcome.
        again = await berth.submit([POD], idempotency_keys=KEY)
        print(f"epoch {berth.epoch}")
        print(f"first {first[0].pod} uid {first[0].uid}; retry answers the same: {again[0] == first[0]}")
        async with asyncio.timeout(30):
            async for d in decisions:
                kind = berth_client.api.v1.scheduler_pb2.Decision.Kind.Name(d.kind)
                print(f"serial {d.serial}: {d.pod} {kind} {d.node or '-'}")
                if kind == "BOUND":
                    break
        await decisions.aclose()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "localhost")))
