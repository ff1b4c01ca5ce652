"""Submit a gang and a pod to Berth and wait for where they land (the
blocking client; manifests are plain dicts with Kubernetes quantities).

    python examples/clients/submit_and_wait.py [HOST[:PORT]]    # default localhost:50051

Exit status 0 when every pod is Bound.
"""

from __future__ import annotations

import sys
from typing import Any

import berth_client


def pod(name: str, cpu: str, memory: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "examples", "labels": labels},
        "spec": {
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
            ]
        },
    }


def main(server: str) -> int:
    with berth_client.Client(server) as berth:
        # Two workers placed together or not at all, and a report pod on its own.
        gang = berth.submit_gang("train", [pod(f"worker-{i}", "500m", "1Gi") for i in range(2)], namespace="examples")
        single = berth.submit([pod("report", "250m", "256Mi")])
        waited = berth.wait([*gang, *single], timeout=30)
    for o in waited.outcomes:
        print(f"{o.pod} {o.status} {o.node or '-'} {o.reason}".rstrip())
    return 0 if all(o.status == berth_client.outcomes.BOUND for o in waited.outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "localhost"))
