"""Berth and the real kube-scheduler on the same API server, side by side.

    python -m bench.kube                                  # the full matrix
    python -m bench.kube --shapes SchedulingBasic --repeat 3
    python -m bench.kube --nodes 200 --measure 300 --repeat 1   # a smoke run

The end-to-end bed (tests/e2e/controlplane: etcd and kube-apiserver v1.37.2
built from their Go modules) gets the nodes and pods of kube-scheduler's own
scheduler_perf shapes (``test/integration/scheduler_perf/*/performance-config.yaml``
at v1.37.2, templates ported in bench/workloads.py): SchedulingBasic,
TopologySpreading, SchedulingPodAntiAffinity, PreemptionBasic, PreemptionAsync,
Unschedulable and SchedulingWithMixedChurn.

Each shape's ``initPods`` are created already bound (``spec.nodeName``), as
scheduler_perf's first createPods step leaves them. Then, alternating Berth,
kube-scheduler, Berth, ... (``--repeat`` pairs), the ``measurePods`` are
created pending for that scheduler, the scheduler process is started, the
shape's churn (if any) runs while it works, and the run ends when every
measured pod is bound (or ``--timeout``). The scheduler is stopped and the
measured pods (and churn objects; PreemptionBasic's init pods too, since
preemption deleted some) are deleted before the next run.

Throughput comes from the API server, not from client polling: the Binding
subresource makes the API server set the pod's PodScheduled=True condition
with *its* clock (``lastTransitionTime``), for Berth and kube-scheduler alike.
That time has one-second resolution (metav1.Time; managedFields times are
metav1.Time too, and watch events carry no server time at all, only a
resourceVersion), so the rate is taken over the whole seconds strictly
inside the run: pods bound in seconds first+1 .. last-1 divided by
(last - first - 1) s. That window is exact, not an estimate, and it leaves
out the scheduler's start-up (informer sync) and the tail second. Beside it,
the collection window runs from the first attempt to the last bind
(:func:`throughput`); PreemptionBasic's ratio is taken on that one.

CPU: the bench samples utime+stime of the scheduler process (and any child
processes) from /proc/<pid>/stat every 0.25 s with its wall-clock time; CPU
seconds per 1000 pods is the CPU spent inside the same interior window
(interpolated) per 1000 pods bound in it. The whole-run figure (start-up
included) is recorded too.

Client limits: Berth's Kubernetes client (kubernetes-asyncio, one aiohttp
session, up to 100 connections) has no client-side rate limiter, so
kube-scheduler gets ``clientConnection.qps: -1`` (client-go then builds no
token bucket, rest/config.go) and a large burst: neither is throttled by its
client. ``percentageOfNodesToScore`` is left at both schedulers' default
(adaptive), and kube-scheduler runs at its default log verbosity.
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import contextlib
import dataclasses
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from bench import server, stats, workloads

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.e2e.controlplane import bed  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
RUN_LABEL = "bench.berth.dev/run"
CHURN_LABEL = "bench.berth.dev/churn"


@dataclasses.dataclass(frozen=True)
class Shape:
    """One scheduler_perf test case (its 5000-node workload unless noted)."""

    name: str
    nodes: int
    init_template: str | None
    init_pods: int
    measure_template: str
    measure_pods: int
    measure_ns: str = "measure"
    init_ns: str = "init"
    churn: str | None = None  # "create" (Unschedulable, PreemptionAsync) or "recreate" (SchedulingWithMixedChurn)
    churn_template: str = "high-priority-large-cpu"  # the pod ``create`` makes every 200 ms
    reinit: bool = False  # missing init pods are created again before every run (preemption deletes some)
    target: float | None = None  # Berth/kube-scheduler pods/s
    # Which pods/s the ratio compares: "interior" (the whole seconds strictly
    # inside the binds) or "collection" (first attempt to last bind, what
    # scheduler_perf's Average covers; see throughput()).
    headline: str = "interior"


SHAPES = {
    s.name: s
    for s in (
        # misc/performance-config.yaml SchedulingBasic 5000Nodes_10000Pods (threshold 680 in v1.37.2; 270 in v1.34.4)
        Shape("SchedulingBasic", 5000, "default", 1000, "default", 10000, target=1.5),
        # topology_spreading/performance-config.yaml TopologySpreading 5000Nodes_5000Pods
        # (threshold 460 in v1.37.2; 85 in v1.34.4)
        Shape("TopologySpreading", 5000, "default", 5000, "topology-spreading", 5000, target=3),
        # affinity/performance-config.yaml SchedulingPodAntiAffinity 5000Nodes (1000 init in sched-0, 1000 in sched-1;
        # no threshold for it, 180 for 5000Nodes_2000Pods in v1.37.2)
        Shape(
            "SchedulingPodAntiAffinity",
            5000,
            "anti-affinity",
            1000,
            "anti-affinity",
            1000,
            measure_ns="sched-1",
            init_ns="sched-0",
            target=3,
        ),
        # default_preemption/performance-config.yaml (misc/ before 1.37) PreemptionBasic 1000Nodes
        # (its 5000-node case is commented out upstream: "always seems to fail").
        # Both schedulers try (nominate, evict) every preemptor before binding
        # any, so the binds come in one burst of 1-2 s: the interior window is
        # a second or none, and the collection window is the figure.
        Shape(
            "PreemptionBasic",
            1000,
            "low-priority",
            4000,
            "high-priority",
            1000,
            reinit=True,
            target=1,
            headline="collection",
        ),
        # default_preemption PreemptionAsync 5000Nodes: default pods measured while a
        # high-priority pod that must evict 3 of a node's 4 low-priority pods
        # arrives every 200 ms (threshold 570)
        Shape(
            "PreemptionAsync",
            5000,
            "low-priority",
            20000,
            "default",
            5000,
            churn="create",
            churn_template="high-priority",
            reinit=True,
            target=1,
        ),
        # default_preemption Unschedulable 5kNodes/100Init/10kPods (threshold 590 in v1.37.2):
        # a 9-CPU high-priority pod every 200 ms
        Shape("Unschedulable", 5000, "default", 100, "default", 10000, churn="create"),
        # misc SchedulingWithMixedChurn 5000Nodes (2000 pods): node, 9-CPU pod and service recreated every 1 s
        Shape("SchedulingWithMixedChurn", 5000, None, 0, "default", 2000, churn="recreate"),
    )
}


# ------------------------------------------------------------------ API calls


class Api:
    """Bulk requests to the bed's API server over keep-alive connections."""

    def __init__(self, kube: bed.Kube, concurrency: int = 24) -> None:
        self.kube = kube
        self.concurrency = concurrency
        self.session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Api:
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.kube.ctx, limit=self.concurrency),
            timeout=aiohttp.ClientTimeout(total=300),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.session is not None
        await self.session.close()

    async def call(
        self, method: str, path: str, body: Any = None, *, accept: str = "application/json", ok: Iterable[int] = ()
    ) -> Any:
        assert self.session is not None
        headers = {"Accept": accept}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        async with self.session.request(method, self.kube.server + path, data=data, headers=headers) as r:
            raw = await r.read()
            if not (200 <= r.status < 300 or r.status in ok):
                raise RuntimeError(f"{method} {path}: HTTP {r.status}: {raw[:300]!r}")
            return json.loads(raw) if raw and r.status < 300 else None

    async def create_all(self, objs: list[dict[str, Any]]) -> float:
        """POST every object (409 tolerated); the seconds it took."""
        t0 = time.monotonic()
        sem = asyncio.Semaphore(self.concurrency)

        async def one(o: dict[str, Any]) -> None:
            async with sem:
                await self.call("POST", self.kube.collection(o), o, ok=(409,))

        await asyncio.gather(*(one(o) for o in objs))
        return time.monotonic() - t0

    async def delete_pods(self, namespace: str, selector: str | None = None) -> None:
        q = "gracePeriodSeconds=0" + (f"&labelSelector={selector}" if selector else "")
        # A deletecollection of 20 000 pods (PreemptionAsync's init pods) can
        # outlast the API server's 60 s request timeout (504): it is sent
        # again until no pod is left.
        for _ in range(10):
            await self.call("DELETE", f"/api/v1/namespaces/{namespace}/pods?{q}", ok=(504,))
            for _ in range(120):  # deletecollection returns before the last pod is gone
                if not await self.pods(namespace, selector, metadata_only=True):
                    return
                await asyncio.sleep(0.5)
        raise RuntimeError(f"pods in {namespace} ({selector}) not deleted after 10 deletecollections")

    async def first_event(self, namespace: str, names: set[str]) -> int | None:
        """The API server's time (epoch seconds) of the first event about
        any of the pods ``names``: a scheduler's first attempt at them
        (FailedScheduling, or Scheduled). Events written through
        events.k8s.io/v1 (kube-scheduler's) are listed here too, their
        ``regarding`` as ``involvedObject``."""
        body = await self.call("GET", f"/api/v1/namespaces/{namespace}/events")
        times = [
            _event_time(e)
            for e in body.get("items") or ()
            if (e.get("involvedObject") or {}).get("name") in names and e["metadata"].get("creationTimestamp")
        ]
        return min(times) if times else None

    async def delete_events(self, namespace: str) -> None:
        await self.call("DELETE", f"/api/v1/namespaces/{namespace}/events")

    async def pods(
        self, namespace: str, selector: str | None = None, *, unbound: bool = False, metadata_only: bool = False
    ) -> list[dict[str, Any]]:
        q = []
        if selector:
            q.append(f"labelSelector={selector}")
        if unbound:
            q.append("fieldSelector=spec.nodeName%3D")
        accept = (
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1" if metadata_only else "application/json"
        )
        body = await self.call("GET", f"/api/v1/namespaces/{namespace}/pods?{'&'.join(q)}", accept=accept)
        items: list[dict[str, Any]] = body.get("items") or []
        return items


class BoundCounter:
    """The measured pods bound so far, from a watch (scheduler_perf's
    throughputCollector counts from its informer: "polling causes more
    overhead"). Listing every unbound pod each second cost the API server a
    serialization of up to 10 000 pods a second, which slows the faster
    scheduler more where the API server is the bottleneck. The watch
    resumes from its last resourceVersion and lists again after a 410."""

    def __init__(self, api: Api, namespace: str, selector: str) -> None:
        self.api, self.namespace, self.selector = api, namespace, selector
        self.bound: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> BoundCounter:
        rv = await self._list()
        self._task = asyncio.ensure_future(self._run(rv))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _list(self) -> str:
        body = await self.api.call("GET", f"/api/v1/namespaces/{self.namespace}/pods?labelSelector={self.selector}")
        self.bound = {p["metadata"]["name"] for p in body.get("items") or () if p["spec"].get("nodeName")}
        return str(body["metadata"]["resourceVersion"])

    async def _run(self, rv: str) -> None:
        assert self.api.session is not None
        while True:
            url = (
                f"{self.api.kube.server}/api/v1/namespaces/{self.namespace}/pods?watch=1"
                f"&labelSelector={self.selector}&resourceVersion={rv}&allowWatchBookmarks=true"
            )
            gone = False
            try:
                async with self.api.session.get(url, timeout=aiohttp.ClientTimeout(total=None)) as r:
                    async for line in r.content:
                        ev = json.loads(line)
                        obj = ev.get("object") or {}
                        if ev.get("type") == "ERROR":
                            gone = True
                            break
                        rv = obj.get("metadata", {}).get("resourceVersion", rv)
                        if ev.get("type") in ("ADDED", "MODIFIED") and obj.get("spec", {}).get("nodeName"):
                            self.bound.add(obj["metadata"]["name"])
            except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError):
                await asyncio.sleep(0.2)
            if gone:
                rv = await self._list()


def _ensure_namespace(cp: bed.ControlPlane, name: str) -> None:
    cp.ensure_namespace(name)


# ------------------------------------------------------------------ process CPU


def _proc_tree_ticks(root: int) -> int:
    """utime+stime (clock ticks) of ``root`` and its descendants, all threads."""
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        ticks[pid] = int(fields[11]) + int(fields[12])
    total, stack = 0, [root]
    seen = set()
    while stack:
        p = stack.pop()
        if p in seen or p not in ticks:
            continue
        seen.add(p)
        total += ticks[p]
        stack.extend(c for c, pp in parent.items() if pp == p)
    return total


class CpuSampler:
    """(wall time, CPU seconds) of a process tree every ``period`` s, in a thread."""

    def __init__(self, pid: int, period: float = 0.25) -> None:
        self.pid, self.period = pid, period
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.time(), _proc_tree_ticks(self.pid) / CLK_TCK))
            self._stop.wait(self.period)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        with contextlib.suppress(Exception):
            self.samples.append((time.time(), _proc_tree_ticks(self.pid) / CLK_TCK))

    def at(self, t: float) -> float:
        """CPU seconds at wall time ``t``, interpolated between samples."""
        s = self.samples
        if not s:
            return 0.0
        if t <= s[0][0]:
            return s[0][1]
        for (t0, c0), (t1, c1) in itertools.pairwise(s):
            if t0 <= t <= t1:
                return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0)
        return s[-1][1]


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ------------------------------------------------------------------ measurement


def _scheduled_at(pod: dict[str, Any]) -> int | None:
    """The API server's PodScheduled=True time (epoch seconds) of a bound pod."""
    if not pod["spec"].get("nodeName"):
        return None
    for c in pod.get("status", {}).get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "True" and c.get("lastTransitionTime"):
            return calendar.timegm(time.strptime(c["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ"))
    return None


def throughput(times: list[int], cpu: CpuSampler | None = None, first_attempt: int | None = None) -> dict[str, Any]:
    """Pods/s over the whole seconds strictly inside the run (see the module
    docstring), and CPU seconds per 1000 pods over the same window.

    Beside it, the collection window: from the scheduler's first attempt at
    a measured pod (``first_attempt``: the API server's time of the first
    event about one, else the first bind) to the last bind. That is what
    scheduler_perf's SchedulingThroughput Average covers (one sample a
    second from the measured pods' creation, the scheduler running, until
    all are scheduled; their mean is pods over the whole collection). It is
    the figure where the binds come in one burst after every pod was tried,
    as in PreemptionBasic. Both ends are whole seconds, each instant taken
    at the middle of its second: the span is last - first, at least 1 s.
    """
    out: dict[str, Any] = {"bound": len(times)}
    if not times:
        return {**out, "pods_per_second": 0.0, "window_s": 0, "window_pods": 0, "collection_pods_per_second": 0.0}
    first, last = min(times), max(times)
    if last - first >= 2:
        lo, hi = first + 1, last
        n = sum(1 for t in times if lo <= t < hi)
        out.update(window_s=hi - lo, window_pods=n, pods_per_second=n / (hi - lo), exact=True)
    else:  # too short for an interior window: a lower bound over the whole seconds touched
        lo, hi = first, last + 1
        n = len(times)
        out.update(window_s=hi - lo, window_pods=n, pods_per_second=n / (hi - lo), exact=False)
    out["span_s"] = last - first + 1
    start = first if first_attempt is None else min(first, first_attempt)
    span = max(1, last - start)
    out.update(first_attempt_s=start, collection_s=span, collection_pods_per_second=len(times) / span)
    if cpu is not None and cpu.samples and n:
        used = cpu.at(hi) - cpu.at(lo)
        out["cpu_s_window"] = used
        out["cpu_s_per_1000"] = used / n * 1000
        used_c = cpu.at(start + 0.5 + span) - cpu.at(start + 0.5)
        out["cpu_s_per_1000_collection"] = used_c / len(times) * 1000
        out["cpu_s_total"] = cpu.samples[-1][1] - cpu.samples[0][1]
        out["cpu_s_per_1000_total"] = out["cpu_s_total"] / len(times) * 1000
    return out


def _event_time(event: dict[str, Any]) -> int:
    return calendar.timegm(time.strptime(event["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ"))


class Churn:
    """scheduler_perf's churn op, in a thread: ``create`` makes a pod of
    ``template`` every 200 ms (Unschedulable: a 9-CPU high-priority pod;
    PreemptionAsync: a 3-CPU one that preempts); ``recreate`` keeps one node
    (0 pods), one 9-CPU pod and one service, deleting and creating them again
    every 1 s."""

    def __init__(
        self,
        kube: bed.Kube,
        mode: str,
        namespace: str,
        scheduler: str,
        tag: str,
        template: str = "high-priority-large-cpu",
    ) -> None:
        self.kube, self.mode, self.ns, self.scheduler, self.tag = kube, mode, namespace, scheduler, tag
        self.template = template
        self.created = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _pod(self, k: int) -> dict[str, Any]:
        p = workloads.perf_pod(self.template, f"churn-{self.tag}-{k}", self.ns, self.scheduler)
        p["metadata"]["labels"][CHURN_LABEL] = self.tag
        return p

    def _loop(self) -> None:
        k = 0
        prev: list[dict[str, Any]] = []
        interval = 0.2 if self.mode == "create" else 1.0
        while not self._stop.wait(0 if k == 0 else interval):
            if self.mode == "create":
                objs = [self._pod(k)]
            else:
                for o in prev:
                    self.kube.delete(o)
                objs = [
                    workloads.perf_churn_node(f"churn-{self.tag}-{k}"),
                    self._pod(k),
                    workloads.perf_churn_service(f"churn-{self.tag}-{k}", self.ns),
                ]
                prev = objs
            for o in objs:
                self.kube.create(o, exist_ok=True)
                self.created += 1
            k += 1
        for o in prev:
            self.kube.delete(o)

    def __enter__(self) -> Churn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# ------------------------------------------------------------------ schedulers


def _start(cp: bed.ControlPlane, which: str, tag: str) -> bed.Process:
    if which == "kube-scheduler":
        return cp.start_kube_scheduler({"clientConnection": {"qps": -1, "burst": 100000}}, name=f"ks-{tag}", args=())
    cfg_path = cp.workdir / f"berth-{tag}.yaml"
    cfg_path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "berth.dev/v1",
                "kind": "BerthConfiguration",
                "http": {"host": "127.0.0.1", "port": server.free_port()},
                "grpc": {"host": "127.0.0.1", "port": server.free_port()},
                "leaderElection": {"leaderElect": False},
            }
        )
    )
    exe = Path(sys.executable).parent / "berth"
    return cp._spawn(
        f"berth-{tag}", [str(exe), "serve", "--config", str(cfg_path), "--kubeconfig", str(cp.admin_kubeconfig)]
    )


#: ``BENCH_KUBE_PYSPY=DIR`` samples every Berth run with py-spy (``--subprocesses``,
#: collapsed stacks in DIR/<run>.txt; py-spy runs beside Berth, so its own CPU
#: is not counted in Berth's).
PYSPY_ENV = "BENCH_KUBE_PYSPY"


def _profile(proc: bed.Process, which: str, tag: str) -> subprocess.Popen[bytes] | None:
    out = os.environ.get(PYSPY_ENV)
    if not out or which != "berth":
        return None
    Path(out).mkdir(parents=True, exist_ok=True)
    exe = Path(sys.executable).parent / "py-spy"
    return subprocess.Popen(
        [
            *(str(exe), "record", "--pid", str(proc.proc.pid), "--subprocesses", "--rate", "200"),
            *("--format", "raw", "--output", str(Path(out) / f"{tag}.txt"), "--nonblocking"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def _run(
    cp: bed.ControlPlane, api: Api, shape: Shape, which: str, rep: int, args: argparse.Namespace
) -> dict[str, Any]:
    tag = f"{shape.name.lower()}-{which[0]}{rep}"
    scheduler = "default-scheduler" if which == "kube-scheduler" else "berth"
    nodes = _node_count(shape, args)
    if shape.reinit and shape.init_template:
        await _init_pods(api, shape, nodes, args)
    n = _measure_count(shape, args)
    pods = []
    for i in range(n):
        p = workloads.perf_pod(shape.measure_template, f"m-{tag}-{i}", shape.measure_ns, scheduler)
        p["metadata"]["labels"][RUN_LABEL] = tag
        pods.append(p)
    created_s = await api.create_all(pods)
    requests_before = await _request_counts(api) if os.environ.get(REQUESTS_ENV) else None
    load_before = loadavg()
    t_start = time.time()
    proc = _start(cp, which, tag)
    profiler = _profile(proc, which, tag)
    timed_out = False
    churn = (
        Churn(api.kube, shape.churn, shape.measure_ns, scheduler, tag, shape.churn_template)
        if shape.churn
        else contextlib.nullcontext()
    )
    with CpuSampler(proc.proc.pid) as cpu, churn:
        deadline = time.monotonic() + args.timeout
        left_before, still_since = -1, time.monotonic()
        async with BoundCounter(api, shape.measure_ns, f"{RUN_LABEL}={tag}") as counter:
            while True:
                await asyncio.sleep(0.25)
                if not proc.alive():
                    raise RuntimeError(f"{which} exited:\n{proc.tail()}")
                left = n - len(counter.bound)
                if not left:
                    break
                now = time.monotonic()
                # A stall is counted from the first bind: before it, the
                # scheduler is starting (its LISTs take ~20 s at 5000 nodes and
                # 11000 pods on a loaded machine) and only --timeout applies.
                if left != left_before or left == n:
                    left_before, still_since = left, now
                if now > deadline or now - still_since > args.stall:
                    timed_out = True
                    break
    t_end = time.time()
    load_after = loadavg()
    if requests_before is not None:
        after = await _request_counts(api)
        diff = sorted(((v - requests_before.get(k, 0), k) for k, v in after.items()), reverse=True)
        print(
            f"    {which}: API requests during the run: "
            + ", ".join(f"{' '.join(k)} {d:.0f}" for d, k in diff[:8] if d)
        )
    proc.stop()
    dropped = [line for line in proc.tail(100000).splitlines() if "events dropped" in line]
    if dropped:
        print(f"    {which}: {dropped[-1].strip()[-120:]}", flush=True)
    if profiler is not None:
        profiler.wait(30)
    items = await api.pods(shape.measure_ns, f"{RUN_LABEL}={tag}")
    times = [t for t in map(_scheduled_at, items) if t is not None]
    # Bound but without PodScheduled=True: a status write that landed after the Binding.
    odd = [p["metadata"]["name"] for p in items if p["spec"].get("nodeName") and _scheduled_at(p) is None]
    if odd:
        print(f"    {which}: {len(odd)} pod(s) bound without PodScheduled=True, e.g. {odd[:3]}", flush=True)
    first_attempt = await api.first_event(shape.measure_ns, {p["metadata"]["name"] for p in items})
    result = throughput(times, cpu, first_attempt)
    result.update(
        scheduler=which,
        rep=rep,
        pods=n,
        timed_out=timed_out,
        created_s=round(created_s, 1),
        wall_s=round(t_end - t_start, 1),
        first_bind_after_start_s=(min(times) - t_start) if times else None,
        # The whole run as its pods see it: from the scheduler's start (its
        # informers' LISTs included) to the last PodScheduled (whole seconds,
        # server time; the bench runs on the same clock). Where a shape binds
        # in one burst at the end (PreemptionBasic: every preemptor is tried,
        # nominated and requeued behind those not yet tried before any binds,
        # in both schedulers) the interior window measures only the burst.
        end_to_end_pods_per_second=(len(times) / max(1.0, max(times) + 1 - t_start)) if times else 0.0,
        load_before=load_before,
        load_after=load_after,
    )
    await api.delete_pods(shape.measure_ns, f"{RUN_LABEL}={tag}")
    if shape.churn:
        await api.delete_pods(shape.measure_ns, f"{CHURN_LABEL}={tag}")
    # This run's events would weigh on the next runs' API server and etcd.
    for ns in {shape.measure_ns, shape.init_ns}:
        await api.delete_events(ns)
    cpu_txt = f", CPU {result['cpu_s_per_1000']:.2f} s/1000 pods" if "cpu_s_per_1000" in result else ""
    print(
        f"    {which:<14} run {rep + 1}: {result['bound']}/{n} bound{' (TIMED OUT)' if timed_out else ''}, "
        f"{result['pods_per_second']:.0f} pods/s over {result['window_s']} s"
        f"{'' if result.get('exact') else ' (short run: lower bound)'}"
        f"{cpu_txt}; first attempt to last bind {result['collection_pods_per_second']:.0f} pods/s "
        f"over {result.get('collection_s', 0)} s; load {load_before} -> {load_after}",
        flush=True,
    )
    return result


#: ``BENCH_KUBE_REQUESTS=1`` prints the API server's requests of each run by
#: verb, resource and subresource (its ``apiserver_request_total``), to see
#: what each scheduler asks of the API server.
REQUESTS_ENV = "BENCH_KUBE_REQUESTS"


async def _request_counts(api: Api) -> dict[tuple[str, str, str], float]:
    assert api.session is not None
    async with api.session.get(api.kube.server + "/metrics") as r:
        text = await r.text()
    out: dict[tuple[str, str, str], float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels, _, value = line.rpartition(" ")
        fields = dict(kv.split("=", 1) for kv in labels[len("apiserver_request_total{") : -1].split(","))
        key = tuple(fields.get(f, '""').strip('"') for f in ("verb", "resource", "subresource"))
        out[key] = out.get(key, 0.0) + float(value)  # type: ignore[index]
    return out  # type: ignore[return-value]


def _node_count(shape: Shape, args: argparse.Namespace) -> int:
    return min(shape.nodes, args.basic_nodes if shape.name == "SchedulingBasic" else args.nodes)


def _measure_count(shape: Shape, args: argparse.Namespace) -> int:
    cap = args.measure_preemption if shape.name == "PreemptionBasic" and args.measure_preemption else args.measure
    n = min(shape.measure_pods, cap) if cap else shape.measure_pods
    if shape.measure_template == "anti-affinity":  # one pod per node: only the nodes the init pods left free
        n = min(n, _node_count(shape, args) - _init_count(shape, _node_count(shape, args)))
    return n


def _init_count(shape: Shape, nodes: int) -> int:
    """The shape's init pods, scaled down with its node count."""
    return min(shape.init_pods, max(1, shape.init_pods * nodes // shape.nodes)) if shape.init_template else 0


async def _init_pods(api: Api, shape: Shape, nodes: int, args: argparse.Namespace) -> None:
    """The shape's init pods, bound round-robin. Before a run of a shape
    whose preemptions delete some (``reinit``), only the missing ones are
    created again: the survivors are exactly as created (same name, same
    node), and deleting 20 000 pods to create them again took minutes."""
    assert shape.init_template
    have = {p["metadata"]["name"] for p in await api.pods(shape.init_ns, metadata_only=True)}
    count = _init_count(shape, nodes)
    objs = []
    for i in range(count):
        if f"init-{i}" in have:
            continue
        p = workloads.perf_pod(shape.init_template, f"init-{i}", shape.init_ns, "default-scheduler")
        p["spec"]["nodeName"] = workloads.perf_node(i % nodes)["metadata"]["name"]
        objs.append(p)
    await api.create_all(objs)


# ------------------------------------------------------------------ report


def _summary(runs: list[dict[str, Any]], key: str) -> dict[str, float] | None:
    vals = sorted(r[key] for r in runs if key in r)
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": vals[0], "max": vals[-1]}


def _fmt(s: dict[str, float] | None, f: str = "{:.0f}") -> str:
    if s is None:
        return "n/a"
    return f"{f.format(s['median'])} ({f.format(s['min'])}-{f.format(s['max'])})"


def _headline_keys(headline: str) -> tuple[str, str]:
    """The pods/s and CPU figures a shape's ratio compares (:attr:`Shape.headline`)."""
    if headline == "collection":
        return "collection_pods_per_second", "cpu_s_per_1000_collection"
    return "pods_per_second", "cpu_s_per_1000"


def _r(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def report(result: dict[str, Any]) -> list[str]:
    """The side-by-side table: one line per shape on its headline window
    (marked ``*`` where that is the collection window), then the other
    windows: interior, collection (first attempt to last bind), end to end
    (scheduler start to last bind) and the whole run's CPU."""
    lines = [
        "  shape                      nodes  pods | Berth pods/s      kube-scheduler    ratio (pairs)       "
        "| CPU s/1000: Berth  kube-sched   ratio | target",
    ]
    for name, sh in result["shapes"].items():
        b, k = sh["berth"], sh["kube-scheduler"]
        collection = sh.get("headline") == "collection"
        rate, cpu = _headline_keys(sh.get("headline", "interior"))
        ratio, cpu_ratio = sh.get("ratio"), sh.get("cpu_ratio")
        pairs = sh.get("pair_ratios") or []
        pr = f"{min(pairs):.2f}-{max(pairs):.2f}" if pairs else "-"
        target = sh.get("target")
        verdict = "-" if target is None or ratio is None else ("met" if ratio >= target else "MISSED")
        tgt = f">= {target:g}: {verdict}" if target is not None else "no target"
        if name == "SchedulingBasic" and cpu_ratio is not None:
            tgt += f"; CPU <= 1.5x: {'met' if cpu_ratio <= 1.5 else 'MISSED'}"
        label = f"{name}{' *' if collection else ''}"
        lines.append(
            f"  {label:<26} {sh['nodes']:>5} {sh['pods']:>5} | {_fmt(b.get(rate)):<17} "
            f"{_fmt(k.get(rate)):<17} {_r(ratio):>5} ({pr:<11}) "
            f"| {_fmt(b.get(cpu), '{:.2f}'):<18} {_fmt(k.get(cpu), '{:.2f}'):<18} "
            f"{_r(cpu_ratio):>5} | {tgt}"
        )
        lines.append(
            f"  {'':<26} {'':>5} {'':>5} | interior {_fmt(b.get('pods_per_second'))} vs "
            f"{_fmt(k.get('pods_per_second'))} ({_r(sh.get('interior_ratio'))}); first attempt to last bind "
            f"{_fmt(b.get('collection_pods_per_second'))} vs {_fmt(k.get('collection_pods_per_second'))} "
            f"({_r(sh.get('collection_ratio'))})"
        )
        lines.append(
            f"  {'':<26} {'':>5} {'':>5} | end to end (start to last bind) "
            f"{_fmt(b.get('end_to_end_pods_per_second'))} vs {_fmt(k.get('end_to_end_pods_per_second'))} "
            f"({_r(sh.get('end_to_end_ratio'))}); whole-run CPU s/1000 "
            f"{_fmt(b.get('cpu_s_per_1000_total'), '{:.1f}')} vs {_fmt(k.get('cpu_s_per_1000_total'), '{:.1f}')} "
            f"({_r(sh.get('cpu_ratio_total'))})"
        )
    if any(sh.get("headline") == "collection" for sh in result["shapes"].values()):
        lines.append(
            "  * pods/s and CPU from the first attempt to the last bind (scheduler_perf's Average): "
            "the binds come in one burst after every pod was tried"
        )
    return lines


# ------------------------------------------------------------------ scheduler_perf

#: kube-scheduler's own benchmark cases run beside Berth's in-process figures
#: (bench.core): (test package, benchmark path, Berth's bench.core workload).
REFERENCE_CASES = (
    ("misc", "SchedulingBasic/5000Nodes_10000Pods_QueueingHintsEnabled", "basic"),
    ("topology_spreading", "TopologySpreading/5000Nodes_5000Pods_QueueingHintsEnabled", "spread"),
)


def scheduler_perf(timeout: float = 900) -> list[dict[str, Any]]:
    """Build (bench/reference/build.sh scheduler_perf) and run kube-scheduler's
    scheduler_perf benchmark for :data:`REFERENCE_CASES`; its own
    SchedulingThroughput (pods/s, sampled every second in process) per case."""
    import shutil
    import subprocess

    out = subprocess.run(
        ["bash", str(ROOT / "bench/reference/build.sh"), "scheduler_perf"], capture_output=True, text=True, check=False
    )
    if out.returncode:
        raise RuntimeError(f"bench/reference/build.sh scheduler_perf failed:\n{out.stderr[-3000:]}")
    bin_dir = Path(out.stdout.strip().splitlines()[-1])
    src = (
        Path(
            subprocess.run(
                ["go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes"],
                cwd=ROOT / "bench/reference/scheduler_perf",
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "GOFLAGS": "-mod=mod"},
            ).stdout.strip()
        )
        / "test/integration/scheduler_perf"
    )
    etcd_dir = bed.cache_dir()
    results = []
    with tempfile.TemporaryDirectory(prefix="berth-scheduler-perf-") as tmp:
        for d in ("templates", *{c[0] for c in REFERENCE_CASES}):
            shutil.copytree(src / d, Path(tmp) / d)
        for pkg, case, workload in REFERENCE_CASES:
            items = Path(tmp) / "items" / case.replace("/", "_")
            t0, load = time.monotonic(), loadavg()
            proc = subprocess.run(
                [
                    str(bin_dir / f"scheduler_perf_{pkg}.test"),
                    "-test.run=^$",
                    f"-test.bench=BenchmarkPerfScheduling/{case}$",
                    "-test.benchtime=1x",
                    f"-data-items-dir={items}",
                ],
                cwd=Path(tmp) / pkg,
                env={**os.environ, "PATH": f"{etcd_dir}:{os.environ['PATH']}"},
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
            row: dict[str, Any] = {"case": case, "workload": workload, "seconds": time.monotonic() - t0, "load": load}
            for f in sorted(items.glob("*.json")) if items.exists() else ():
                for item in json.loads(f.read_text()).get("dataItems") or []:
                    if item.get("labels", {}).get("Metric") == "SchedulingThroughput":
                        row["throughput"] = item["data"]
            if "throughput" not in row:
                row["error"] = (proc.stdout + proc.stderr)[-2000:]
            results.append(row)
            tp = row.get("throughput", {})
            print(
                f"  scheduler_perf {case}: SchedulingThroughput average {tp.get('Average', float('nan')):.0f} pods/s "
                f"(p50 {tp.get('Perc50', float('nan')):.0f}) in {row['seconds']:.0f} s; load {load}"
                + ("" if tp else f"\n{row['error']}"),
                flush=True,
            )
    return results


# ------------------------------------------------------------------ main


def _ratio(b: dict[str, float] | None, k: dict[str, float] | None) -> float | None:
    return b["median"] / k["median"] if b and k and k["median"] else None


def summarize(shape: Shape, nodes: int, n: int, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians (and spread) of each scheduler's runs, and Berth over
    kube-scheduler: ``ratio`` and ``cpu_ratio`` on the shape's headline
    window (:attr:`Shape.headline`), the other figures beside them."""
    sh: dict[str, Any] = {"nodes": nodes, "pods": n, "target": shape.target, "headline": shape.headline}
    keys = (
        "pods_per_second",
        "collection_pods_per_second",
        "end_to_end_pods_per_second",
        "cpu_s_per_1000",
        "cpu_s_per_1000_collection",
        "cpu_s_per_1000_total",
    )
    for which, rs in runs.items():
        sh[which] = {key: _summary(rs, key) for key in keys} | {"runs": rs}
    b, k = sh["berth"], sh["kube-scheduler"]
    rate, cpu = _headline_keys(shape.headline)
    for name, key in (
        ("ratio", rate),
        ("cpu_ratio", cpu),
        ("interior_ratio", "pods_per_second"),
        ("collection_ratio", "collection_pods_per_second"),
        ("end_to_end_ratio", "end_to_end_pods_per_second"),
        ("cpu_ratio_total", "cpu_s_per_1000_total"),
    ):
        r = _ratio(b[key], k[key])
        if r is not None:
            sh[name] = r
    sh["pair_ratios"] = [
        x[rate] / y[rate]
        for x, y in zip(runs["berth"], runs["kube-scheduler"], strict=False)
        if x.get(rate) is not None and y.get(rate)
    ]
    return sh


async def _main(args: argparse.Namespace, cp: bed.ControlPlane, result: dict[str, Any]) -> None:
    kube = cp.kube()
    async with Api(kube) as api:
        for cls, value in workloads.PERF_PRIORITY_CLASSES.items():
            await api.call(
                "POST",
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": cls},
                    "value": value,
                },
                ok=(409,),
            )
        shapes = sorted((SHAPES[s] for s in args.shapes), key=lambda s: _node_count(s, args))
        have = 0
        for shape in shapes:
            nodes = _node_count(shape, args)
            if nodes > have:
                secs = await api.create_all([workloads.perf_node(i) for i in range(have, nodes)])
                print(
                    f"  nodes {have}..{nodes - 1} created in {secs:.1f} s ({(nodes - have) / secs:.0f}/s)", flush=True
                )
                result.setdefault("node_creation", []).append({"nodes": nodes - have, "seconds": secs})
                have = nodes
            elif nodes < have:
                raise RuntimeError("shapes run in ascending node counts")
            for ns in {shape.measure_ns, shape.init_ns}:
                _ensure_namespace(cp, ns)
            n = _measure_count(shape, args)
            print(
                f"\n  {shape.name}: {nodes} nodes, {_init_count(shape, nodes)} init pods, "
                f"{n} measured pods [{shape.measure_template}]{f', churn {shape.churn}' if shape.churn else ''}",
                flush=True,
            )
            if shape.init_template and not shape.reinit:
                await _init_pods(api, shape, nodes, args)
            runs: dict[str, list[dict[str, Any]]] = {"berth": [], "kube-scheduler": []}
            for rep in range(args.repeat):
                for which in ("berth", "kube-scheduler") if rep % 2 == 0 else ("kube-scheduler", "berth"):
                    runs[which].append(await _run(cp, api, shape, which, rep, args))
            if shape.init_template:
                await api.delete_pods(shape.init_ns)
            result["shapes"][shape.name] = sh = summarize(shape, nodes, n, runs)
            for line in report({"shapes": {shape.name: sh}})[1:]:
                print(line, flush=True)
            stats.write(result["benchmark"], result)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.kube")
    p.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    p.add_argument("--nodes", type=int, default=5000, help="cap on the node count of every shape but SchedulingBasic")
    p.add_argument("--basic-nodes", type=int, default=5000, help="SchedulingBasic's node count")
    p.add_argument(
        "--measure", type=int, default=0, help="cap on every shape's measured pods (init pods scale with nodes)"
    )
    p.add_argument("--measure-preemption", type=int, default=0, help="PreemptionBasic's cap instead of --measure")
    p.add_argument("--stall", type=float, default=20, help="end a run when no pod was bound for this many seconds")
    p.add_argument("--repeat", type=int, default=3, help="alternating pairs: Berth, kube-scheduler, then the reverse")
    p.add_argument("--timeout", type=float, default=180, help="seconds per run")
    p.add_argument(
        "--reference",
        action="store_true",
        help="also run kube-scheduler's scheduler_perf (bench.reference.scheduler_perf)",
    )
    args = p.parse_args(argv)
    try:
        binaries = bed.find_binaries()
    except LookupError as e:
        print(f"bench.kube: {e}", file=sys.stderr)
        return 1
    print(
        f"Berth vs kube-scheduler v{bed.KUBERNETES_VERSION[1:]} on one API server (scheduler_perf shapes); "
        f"load {loadavg()}",
        flush=True,
    )
    result: dict[str, Any] = {"benchmark": "kube-side-by-side", "shapes": {}, "args": vars(args)}
    with tempfile.TemporaryDirectory(prefix="berth-kube-bench-") as tmp, bed.ControlPlane(binaries, Path(tmp)) as cp:
        try:
            asyncio.run(_main(args, cp, result))
        except BaseException:
            print(cp.logs()[-4000:], file=sys.stderr)
            raise
    if args.reference:
        print("\nkube-scheduler's scheduler_perf (in process, its own apiserver and etcd), beside bench.core:")
        result["scheduler_perf"] = refs = scheduler_perf()
        for r in refs:
            core = stats.RESULTS / f"core-throughput-{r['workload']}.json"
            r["berth_in_process"] = (
                json.loads(core.read_text()).get("median_pods_per_second") if core.exists() else None
            )
    print("\nSide by side (median (min-max) over alternating runs; pods/s from the API server's PodScheduled times):")
    for line in report(result):
        print(line)
    for r in result.get("scheduler_perf", ()):
        tp, berth = r.get("throughput", {}).get("Average"), r.get("berth_in_process")
        print(
            f"  scheduler_perf {r['case']}: {tp if tp is None else f'{tp:.0f}'} pods/s; Berth in process "
            f"(bench.core {r['workload']}, last run): {berth if berth is None else f'{berth:.0f}'} pods/s"
        )
    print(f"  -> {stats.write(result['benchmark'], result)}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
