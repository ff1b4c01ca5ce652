"""Bytes a pod from the Kubernetes door costs a Core (issue 16: halve the
per-pod footprint), in process, before and after sharing its containers.

    python -m bench.informer_memory --pods 20000 --nodes 1000

Each measurement runs in a fresh child process: a Core with ``--nodes``
nodes and a scheduling loop attached (not running, as a leader between
cycles), then one LIST of ``--pods`` pod JSON objects through the pod
informer's decode and ``Core.on_pod`` (:class:`~berth.adapters.kubernetes.informer.Informer`
over an in-memory list call, its body made beforehand), garbage collected; then
the RSS delta (``/proc/self/status``) and, in another child, the Python
heap delta (``tracemalloc``), each divided by the pod count. The reference
is the informer as it was before pods were shared (no ``prepare``, its own
copy of each pod's NAMESPACE/NAME key), in the same invocation, runs
alternating.

Shapes: ``deployment`` is ``bench.memory.realistic_pod`` (pending: queued);
``apiserver`` is the same pod as a real API server holds it once it runs:
bound (``nodeName``), the two tolerations ``DefaultTolerationSeconds``
admission adds, the service-account token volume (its name unique per
pod), ``Running`` with conditions and container statuses (decoded past).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc
from typing import Any

import msgspec

from bench.memory import realistic_pod
from berth import app, config
from berth.adapters.kubernetes import informer as informer_module
from berth.adapters.kubernetes.informer import Handlers, Informer
from berth.cluster import model
from berth.scheduling.loop import Scheduler
from berth.testing import make_node

SHAPES = ("deployment", "apiserver")


def apiserver_pod(i: int, nodes: int) -> dict[str, Any]:
    doc = realistic_pod(i)
    md, spec = doc["metadata"], doc["spec"]
    md.update(resourceVersion=str(1000 + i), creationTimestamp="2026-01-01T00:00:00Z")
    spec.update(
        nodeName=f"node-{i % nodes}",
        schedulerName="default-scheduler",
        tolerations=[
            {"key": f"node.kubernetes.io/{k}", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            for k in ("not-ready", "unreachable")
        ],
        volumes=[{"name": f"kube-api-access-{i:05x}", "projected": {"defaultMode": 420}}],
    )
    doc["status"] = {
        "phase": "Running",
        "podIP": f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}",
        "conditions": [
            {"type": t, "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "containerStatuses": [
            {"name": "app", "ready": True, "restartCount": 0, "image": spec["containers"][0]["image"]}
        ],
    }
    return doc


class _Response:
    status = 200

    def __init__(self, body: bytes) -> None:
        self._body = body

    async def read(self) -> bytes:
        return self._body

    def release(self) -> None:
        pass


def _copied_key(meta: Any) -> str:
    return f"{meta.namespace}/{meta.name}" if meta.namespace else str(meta.name)


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def _one(shared: bool, pods: int, nodes: int, shape: str, traced: bool) -> dict[str, Any]:
    berth = app.build(config.parse({}), run_loop=False)
    core = berth.core
    for i in range(nodes):
        core.on_node(make_node(f"node-{i}", cpu="64", memory="256Gi", pods=1000))
    Scheduler(core).attach()
    make = realistic_pod if shape == "deployment" else (lambda i: apiserver_pod(i, nodes))
    body = msgspec.json.encode(
        {"kind": "PodList", "metadata": {"resourceVersion": "1"}, "items": [make(i) for i in range(pods)]}
    )

    async def list_call(**_kw: Any) -> _Response:
        return _Response(body)

    if not shared:
        # The informer as it was: its own NAMESPACE/NAME string per object.
        informer_module.Informer._key = staticmethod(_copied_key)  # type: ignore[method-assign]
    source: Any = object()  # the KubernetesSource's place: the core only keeps it
    informer: Informer[model.Pod] = Informer(
        "pods",
        list_call,
        model.Pod,
        Handlers.mirror(lambda p: core.on_pod(p, source=source), core.on_pod_delete),
        prepare=model.share_containers if shared else None,
    )
    gc.collect()
    if traced:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0] if traced else _rss_bytes()
    cpu = time.process_time()
    await informer._list()
    cpu = time.process_time() - cpu
    gc.collect()  # the body stays alive until after the reading: freeing it would hide its size
    after = tracemalloc.get_traced_memory()[0] if traced else _rss_bytes()
    assert len(core.pods) == pods, (len(core.pods), pods)
    return {"bytes_per_pod": (after - before) / pods, "decode_cpu_s": cpu}


def _child(shared: bool, args: argparse.Namespace, traced: bool) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.informer_memory", "--child", "shared" if shared else "unshared"]
    argv += ["--pods", str(args.pods), "--nodes", str(args.nodes), "--shape", args.shape]
    argv += ["--traced"] if traced else []
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.informer_memory")
    p.add_argument("--pods", type=int, default=20000)
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--shape", choices=SHAPES, default="deployment")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--child", choices=("shared", "unshared"), help=argparse.SUPPRESS)
    p.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.pods <= 0 or args.nodes <= 0:
        p.error("--pods and --nodes must be positive")
    if args.child:
        got = asyncio.run(_one(args.child == "shared", args.pods, args.nodes, args.shape, args.traced))
        print(json.dumps(got))
        return 0
    runs: dict[tuple[bool, bool], list[dict[str, Any]]] = {}
    for r in range(args.repeats):
        order = (False, True) if r % 2 == 0 else (True, False)  # alternating A B / B A
        for traced in (False, True):
            for shared in order:
                runs.setdefault((shared, traced), []).append(_child(shared, args, traced))
    print(f"{args.pods} {args.shape} pods through the pod informer into a Core with {args.nodes} nodes")
    for traced, what in ((False, "RSS"), (True, "Python heap (tracemalloc)")):
        a = sorted(x["bytes_per_pod"] for x in runs[(False, traced)])
        b = sorted(x["bytes_per_pod"] for x in runs[(True, traced)])
        ma, mb = a[len(a) // 2], b[len(b) // 2]
        print(
            f"  {what}: unshared {ma:.0f} B/pod {[round(x) for x in a]}; shared {mb:.0f} B/pod "
            f"{[round(x) for x in b]}; shared/unshared {mb / ma:.2f}"
        )
    cpu_a = sorted(x["decode_cpu_s"] for x in runs[(False, False)])
    cpu_b = sorted(x["decode_cpu_s"] for x in runs[(True, False)])
    print(f"  decode + on_pod CPU s: unshared {cpu_a}; shared {cpu_b}; load {[round(x, 2) for x in os.getloadavg()]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
