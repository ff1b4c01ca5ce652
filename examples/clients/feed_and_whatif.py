"""Feed a machine Kubernetes does not know into Berth (the Cluster
service), ask how many pods of a shape would fit now, then take it away.

    python examples/clients/feed_and_whatif.py [HOST[:PORT]]
"""

from __future__ import annotations

import sys

import berth_client

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "batch-box-1", "labels": {"example.com/pool": "batch"}},
    "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110", "example.com/fpga": "2"}},
}
FPGA_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "fpga-job"},
    "spec": {
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"example.com/fpga": "1"}}}]
    },
}


def main(server: str) -> int:
    with berth_client.Client(server) as berth:
        print("fed", berth.feed([NODE]))
        node = berth.get_node("batch-box-1")
        print("allocatable", berth_client.quantity.format_map(node.allocatable))
        answer = berth.whatif(FPGA_POD)  # places nothing
        print(
            f"{answer.fit} would fit, on {sorted({p.node for p in answer.placements})}; stopped by: {answer.limited_by}"
        )
        print("deleted", berth.delete("Node", ["batch-box-1"]))
    return 0 if answer.fit == 2 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "localhost"))
