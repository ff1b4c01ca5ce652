"""Dynamic Resource Allocation throughput (issue 15): pods/s with one
ResourceClaim per pod, Berth in process and the real kube-scheduler.

    python -m bench.dra --nodes 500 --init-pods 2500 --pods 2500

The workload is scheduler_perf's ``SchedulingWithResourceClaimTemplate``
(``test/integration/scheduler_perf/dra/performance-config.yaml`` at
v1.37.2, case ``5000pods_500nodes``, threshold 56 pods/s; 40 in v1.34.4): ``--nodes``
nodes, each with a ResourceSlice of ``--devices`` devices of the driver
``test-driver.cdi.k8s.io`` (``dra.go`` ``resourceSlice``: ``instance-N``
with model/family/driverVersion/numa attributes and 1Gi of memory), the
DeviceClass ``test-class`` selecting the driver by CEL, a
ResourceClaimTemplate with one ``exactly`` request in namespaces ``init``
and ``test``, ``--init-pods`` pods scheduled first (not measured), then
``--pods`` measured pods; node, pod and device counts fill the cluster.

- **Berth in process** (embedded cluster, as bench/core.py): the feeder
  plays kube-controller-manager's resourceclaim controller — one claim per
  pod from the template, owned by the pod and named in its
  ``status.resourceClaimStatuses``. The init pods are placed first; the
  measured pods are then handed over at once and timed from then to their
  last binding (PreBind writes the claims to the embedded cluster).
- **On the real API server**, each scheduler on a fresh bed
  (tests/e2e/controlplane, v1.37.2) with the same objects:
  kube-controller-manager's resourceclaim controller makes the claims
  (client QPS raised: its default 20 would take minutes); all pods and
  claims exist before the scheduler starts (as bench/kube.py does), init
  pods created first so both schedulers take them first. Throughput is
  measured server-side: the measured pods' ``PodScheduled``
  ``lastTransitionTime`` (set by the API server's Binding; one-second
  resolution, so (n-1)/(last-first) over a span of many seconds).
  kube-scheduler's client QPS/burst are raised to ``--qps``; Berth's client
  is not rate-limited. Every run checks that no device is in two claims
  and that every bound pod's claim is allocated and reserved for it.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import contextlib
import gc
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from bench import stats, workloads
from berth import app, config
from berth.cluster import dra, model

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.e2e.controlplane import bed  # noqa: E402

DRIVER = "test-driver.cdi.k8s.io"
CLASS = "test-class"
TEMPLATE = "test-claim-template"
THRESHOLD = 40  # performance-config.yaml, 5000pods_500nodes
NAMESPACES = ("init", "test")


# ---------------------------------------------------------------- objects (scheduler_perf's templates)


def node(i: int) -> dict[str, Any]:
    """templates/node-with-dra-test-driver.yaml, on bench/workloads.py's node."""
    n = workloads.node(i)
    n["metadata"]["labels"]["node-with-dra"] = "true"
    n["status"]["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "bench"}]
    return n


def device_class() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def resource_slice(node_name: str, capacity: int) -> dict[str, Any]:
    """dra.go ``resourceSlice``."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": node_name},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"instance-{i}",
                    "attributes": {
                        "model": {"string": "A100"},
                        "family": {"string": "GPU"},
                        "driverVersion": {"version": "1.2.3"},
                        "dra.example.com/numa": {"int": i},
                    },
                    "capacity": {"memory": {"value": "1Gi"}},
                }
                for i in range(capacity)
            ],
        },
    }


def claim_spec() -> dict[str, Any]:
    return {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": CLASS}}]}}


def claim_template(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": TEMPLATE, "namespace": namespace},
        "spec": {"spec": claim_spec()},
    }


def pod(name: str, namespace: str, scheduler: str = "berth") -> dict[str, Any]:
    """templates/pod-with-claim-template.yaml."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "pause",
                    "image": "registry.k8s.io/pause:3.10.1",
                    "resources": {"claims": [{"name": "resource"}]},
                }
            ],
            "resourceClaims": [{"name": "resource", "resourceClaimTemplateName": TEMPLATE}],
        },
    }


def _names(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(namespace, name) of every pod, init pods first."""
    return [("init", f"init-{i:05d}") for i in range(args.init_pods)] + [
        ("test", f"test-{i:05d}") for i in range(args.pods)
    ]


# ---------------------------------------------------------------- Berth in process


def _claimed_pod(namespace: str, name: str) -> tuple[model.Pod, dra.ResourceClaim]:
    """The pod and the claim the resourceclaim controller would make for it."""
    uid = f"uid-{namespace}-{name}"
    claim_name = f"{name}-resource"
    doc = pod(name, namespace)
    doc["metadata"]["uid"] = uid
    doc["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "100m", "memory": "500Mi"}
    doc["status"] = {"resourceClaimStatuses": [{"name": "resource", "resourceClaimName": claim_name}]}
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": claim_name,
            "namespace": namespace,
            "uid": f"claim-{uid}",
            "annotations": {"resource.kubernetes.io/pod-claim-name": "resource"},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": claim_spec(),
    }
    return msgspec.convert(doc, model.Pod), msgspec.convert(claim, dra.ResourceClaim)


async def _inprocess_once(args: argparse.Namespace) -> dict[str, Any]:
    berth = app.build(config.parse({}))
    cluster = berth.cluster
    cluster.upsert_namespaces(msgspec.convert({"metadata": {"name": ns}}, model.Namespace) for ns in NAMESPACES)
    cluster.upsert_nodes(msgspec.convert(node(i), model.Node) for i in range(args.nodes))
    cluster.upsert_device_classes([msgspec.convert(device_class(), dra.DeviceClass)])
    cluster.upsert_resource_slices(
        msgspec.convert(resource_slice(f"node-{i:05d}", args.devices), dra.ResourceSlice) for i in range(args.nodes)
    )
    cluster.upsert_resource_claim_templates(
        msgspec.convert(claim_template(ns), dra.ResourceClaimTemplate) for ns in NAMESPACES
    )
    made = [_claimed_pod(ns, name) for ns, name in _names(args)]
    init, measured = made[: args.init_pods], made[args.init_pods :]

    bound = 0
    target = 0
    done = asyncio.Event()
    real_bind = cluster.bind

    async def counting_bind(p: model.Pod, node_name: str) -> None:
        nonlocal bound
        await real_bind(p, node_name)
        bound += 1
        if bound >= target:
            done.set()

    cluster.bind = counting_bind  # type: ignore[method-assign,assignment]
    task = asyncio.create_task(berth.run_loop())

    async def phase(batch: list[tuple[model.Pod, dra.ResourceClaim]]) -> float:
        nonlocal target
        target = bound + len(batch)
        done.clear()
        gc.collect()
        start = time.perf_counter()
        cluster.upsert_resource_claims(c for _, c in batch)
        cluster.upsert_pods(p for p, _ in batch)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), timeout=args.timeout)
        return time.perf_counter() - start

    if init:
        await phase(init)
    before = bound
    elapsed = await phase(measured)
    n = bound - before
    owners: dict[tuple[str, str, str], str] = {}
    for claim in cluster.resource_claims.values():
        alloc = claim.status.allocation
        if alloc is None:
            continue
        assert len(claim.status.reserved_for) == 1, claim.key
        for r in alloc.devices.results:
            dev = (r.driver, r.pool, r.device)
            assert dev not in owners, f"{dev} allocated to {owners[dev]} and {claim.key}"
            owners[dev] = claim.key
    assert len(owners) == bound, (len(owners), bound)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return {"bound": n, "of": len(measured), "seconds": elapsed, "pods_per_second": n / elapsed if elapsed else 0.0}


# ---------------------------------------------------------------- the real API server


def _create_all(kube: bed.Kube, objs: list[dict[str, Any]], workers: int = 16) -> None:
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(kube.create, objs))


def _metadata_list(kube: bed.Kube, path: str, **query: str) -> list[dict[str, Any]]:
    """Objects' metadata only (PartialObjectMetadataList): cheap to poll."""
    url = kube.server + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
    req = urllib.request.Request(
        url, headers={"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"}
    )
    with urllib.request.urlopen(req, context=kube.ctx, timeout=60) as r:
        items: list[dict[str, Any]] = json.load(r)["items"] or []
    return items


def _start_claim_controller(cp: bed.ControlPlane, qps: int) -> bed.Process:
    """kube-controller-manager with only the resourceclaim controller, its
    client QPS raised (the bed's :meth:`start_controller_manager` keeps the
    default 20 QPS, which would need ~2 requests per pod)."""
    assert cp.ca is not None
    leaf = cp.ca.issue("system:kube-controller-manager", client=True, organizations=("system:masters",))
    kubeconfig = cp.write_kubeconfig(cp.workdir / "kcm-bench.kubeconfig", cert=leaf.cert, key=leaf.key)
    return cp._spawn(
        "kube-controller-manager",
        [
            str(cp.binaries["kube-controller-manager"]),
            f"--kubeconfig={kubeconfig}",
            "--controllers=resourceclaim-controller",
            "--use-service-account-credentials=false",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={bed.free_port()}",
            f"--cert-dir={cp.workdir / 'kcm-certs'}",
            f"--kube-api-qps={qps}",
            f"--kube-api-burst={qps}",
            "--profiling=false",
        ],
    )


def _wait(what: str, check: Any, timeout: float, every: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(every)
    raise TimeoutError(f"{what}: not within {timeout:.0f}s")


def _ts(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def _real_once(binaries: dict[str, Path], which: str, args: argparse.Namespace) -> dict[str, Any]:
    scheduler = "default-scheduler" if which == "kube-scheduler" else "berth"
    with tempfile.TemporaryDirectory(prefix="berth-dra-bench-") as tmp, bed.ControlPlane(binaries, Path(tmp)) as cp:
        kube = cp.kube()
        t0 = time.monotonic()
        _create_all(kube, [node(i) for i in range(args.nodes)])
        kube.create(device_class())
        _create_all(kube, [resource_slice(f"node-{i:05d}", args.devices) for i in range(args.nodes)])
        for ns in NAMESPACES:
            cp.ensure_namespace(ns)
            kube.create(claim_template(ns))
        kcm = _start_claim_controller(cp, args.qps)
        names = _names(args)
        _create_all(kube, [pod(name, ns, scheduler) for ns, name in names])

        def claims_made() -> bool:
            if not kcm.alive():
                raise RuntimeError(f"kube-controller-manager exited:\n{kcm.tail()}")
            return sum(
                len(_metadata_list(kube, f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"))
                for ns in NAMESPACES
            ) >= len(names)

        _wait("the resourceclaim controller to make every claim", claims_made, args.timeout)
        # The pods name their claims in status once the claims exist; give
        # the controller the time to write them all.
        _wait(
            "every pod to name its claim",
            lambda: all(
                p["status"].get("resourceClaimStatuses")
                for ns in NAMESPACES
                for p in kube.ok("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
            ),
            args.timeout,
            every=2.0,
        )
        setup = time.monotonic() - t0
        if which == "kube-scheduler":
            proc = cp.start_kube_scheduler(
                {"clientConnection": {"qps": args.qps, "burst": args.qps}}, name="kube-scheduler", args=("--v=1",)
            )
        else:
            cfg_path = cp.workdir / "berth-bench.yaml"
            cfg_path.write_text(
                json.dumps(
                    {
                        "apiVersion": "berth.dev/v1",
                        "kind": "BerthConfiguration",
                        "http": {"host": "127.0.0.1", "port": bed.free_port()},
                        "grpc": {"host": "127.0.0.1", "port": bed.free_port()},
                        "leaderElection": {"leaderElect": False},
                    }
                )
            )
            exe = Path(sys.executable).parent / "berth"
            proc = cp._spawn(
                "berth", [str(exe), "serve", "--config", str(cfg_path), "--kubeconfig", str(cp.admin_kubeconfig)]
            )
        start = time.monotonic()
        expected = min(len(names), int(args.nodes) * int(args.devices))

        def all_bound() -> bool:
            if not proc.alive():
                raise RuntimeError(f"{which} exited:\n{proc.tail()}")
            unbound = sum(
                len(_metadata_list(kube, f"/api/v1/namespaces/{ns}/pods", fieldSelector="spec.nodeName="))
                for ns in NAMESPACES
            )
            return len(names) - unbound >= expected

        with contextlib.suppress(TimeoutError):
            _wait(f"{which} to bind {expected} pods", all_bound, args.timeout)
        wall = time.monotonic() - start
        proc.stop()
        pods = {
            (ns, p["metadata"]["name"]): p
            for ns in NAMESPACES
            for p in kube.ok("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
        }
        claims = [
            c
            for ns in NAMESPACES
            for c in kube.ok("GET", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims")["items"]
        ]
    # Soundness: no device twice, every bound pod's claim allocated and reserved for it.
    owners: dict[tuple[str, str, str], str] = {}
    by_claim = {}
    for c in claims:
        alloc = (c.get("status") or {}).get("allocation")
        by_claim[(c["metadata"]["namespace"], c["metadata"]["name"])] = c
        for r in (alloc or {}).get("devices", {}).get("results", []):
            dev = (r["driver"], r["pool"], r["device"])
            assert dev not in owners, f"{which}: {dev} allocated to {owners[dev]} and {c['metadata']['name']}"
            owners[dev] = c["metadata"]["name"]
    times: dict[str, list[float]] = collections.defaultdict(list)
    for (ns, _), p in pods.items():
        if not p["spec"].get("nodeName"):
            continue
        claim = by_claim[(ns, p["status"]["resourceClaimStatuses"][0]["resourceClaimName"])]
        reserved = [r["uid"] for r in claim["status"].get("reservedFor", [])]
        assert reserved == [p["metadata"]["uid"]], (
            f"{which}: {p['metadata']['name']} bound, claim reserved for {reserved}"
        )
        cond = next(c for c in p["status"]["conditions"] if c["type"] == "PodScheduled")
        times[ns].append(_ts(cond["lastTransitionTime"]))
    assert len(owners) == sum(len(t) for t in times.values())

    def rate(ts: list[float]) -> float:
        return (len(ts) - 1) / (max(ts) - min(ts)) if len(ts) > 1 and max(ts) > min(ts) else 0.0

    measured = sorted(times["test"])
    everything = sorted(times["init"] + times["test"])
    return {
        "bound": len(measured),
        "of": args.pods,
        "pods_per_second": rate(measured),
        "all_pods_per_second": rate(everything),
        "seconds": (measured[-1] - measured[0]) if measured else 0.0,
        "wall_seconds": wall,
        "setup_seconds": setup,
    }


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.dra")
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--devices", type=int, default=10, help="devices per node (maxClaimsPerNode)")
    p.add_argument("--init-pods", type=int, default=2500)
    p.add_argument("--pods", type=int, default=2500, help="measured pods")
    p.add_argument("--repeat", type=int, default=3, help="in-process runs (the real API server runs once each)")
    p.add_argument("--qps", type=int, default=5000, help="client QPS of kube-scheduler and the claim controller")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--no-kube", action="store_true", help="Berth in process only")
    args = p.parse_args(argv)
    print(
        f"DRA, one claim per pod: {args.nodes} nodes x {args.devices} devices, "
        f"{args.init_pods} init + {args.pods} measured pods (scheduler_perf floor {THRESHOLD} pods/s)",
        flush=True,
    )
    result: dict[str, Any] = {
        "benchmark": "dra-throughput",
        "nodes": args.nodes,
        "devices_per_node": args.devices,
        "init_pods": args.init_pods,
        "pods": args.pods,
        "threshold_pods_per_second": THRESHOLD,
    }
    runs = []
    for r in range(args.repeat):
        run = asyncio.run(_inprocess_once(args))
        runs.append(run)
        print(
            f"  Berth in process run {r + 1}: {run['bound']}/{run['of']} bound in {run['seconds']:.2f}s "
            f"= {run['pods_per_second']:.0f} pods/s",
            flush=True,
        )
    rates = sorted(x["pods_per_second"] for x in runs)
    result["berth_in_process"] = {
        "median_pods_per_second": statistics.median(rates),
        "min": rates[0],
        "max": rates[-1],
        "runs": runs,
    }
    if not args.no_kube:
        try:
            binaries = bed.find_binaries()
        except LookupError as e:
            print(f"bench.dra: {e}", file=sys.stderr)
            return 1
        for which in ("kube-scheduler", "berth"):
            run = _real_once(binaries, which, args)
            result[f"{which}_api_server"] = run
            print(
                f"  {which} on the API server: {run['bound']}/{run['of']} measured pods bound, "
                f"{run['pods_per_second']:.0f} pods/s ({run['all_pods_per_second']:.0f} over all "
                f"{args.init_pods + args.pods}; setup {run['setup_seconds']:.0f}s, "
                f"scheduling {run['wall_seconds']:.0f}s)",
                flush=True,
            )
        ks = result["kube-scheduler_api_server"]["pods_per_second"]
        b = result["berth_api_server"]["pods_per_second"]
        result["ratio_berth_over_kube_scheduler"] = b / ks if ks else None
    bip = result["berth_in_process"]["median_pods_per_second"]
    line = f"  Berth in process {bip:.0f} pods/s (floor {THRESHOLD})"
    if not args.no_kube:
        line += (
            f"; on the API server: kube-scheduler {ks:.0f} pods/s, Berth {b:.0f} pods/s, "
            f"Berth/kube-scheduler {b / ks if ks else float('nan'):.2f}"
        )
    print(line)
    print(f"  -> {stats.write(result['benchmark'], result)}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
