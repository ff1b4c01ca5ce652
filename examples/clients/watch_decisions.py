"""Follow Berth's decisions as they happen (the asyncio client): submit a
pod, then print every decision about it until it is bound. The watch
reconnects by itself if Berth restarts meanwhile.

    python examples/clients/watch_decisions.py [HOST[:PORT]]
"""

from __future__ import annotations

import asyncio
import sys

import berth_client

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "watched", "namespace": "examples"},
    "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]},
}


async def main(server: str) -> int:
    async with berth_client.AsyncClient(server) as berth:
        # Subscribed first (replay: the latest decision of each pod, so nothing is missed).
        decisions = berth.watch(["examples/watched"], replay=True)
        await berth.submit([POD])
        async with asyncio.timeout(30):
            async for d in decisions:
                kind = berth_client.api.v1.scheduler_pb2.Decision.Kind.Name(d.kind)
                print(f"{d.pod} {kind} {d.node or '-'}")
                if kind == "BOUND":
                    break
        await decisions.aclose()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "localhost")))
