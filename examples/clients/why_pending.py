"""Ask Berth why a pod waits: submit one bigger than any node, print what
`berth why` prints (as data), then cancel it.

    python examples/clients/why_pending.py [HOST[:PORT]]
"""

from __future__ import annotations

import json
import sys
import time

import berth_client

HUGE = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "huge", "namespace": "examples"},
    "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1000"}}}]},
}


def main(server: str) -> int:
    with berth_client.Client(server) as berth:
        (result,) = berth.submit([HUGE])
        if not result.accepted:
            print(f"refused: {result.message}")
            return 1
        for _ in range(100):  # until its first attempt is over
            answer = berth.why("huge", "examples")
            if answer.blockers:
                break
            time.sleep(0.1)
        print(json.dumps(berth_client.to_dict(answer), indent=2))
        print("cancelled" if berth.cancel("huge", "examples").cancelled else "not cancelled")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "localhost"))
