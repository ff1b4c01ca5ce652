"""The fuzzers' target and bookkeeping: one in-process Berth serving HTTP and
gRPC on loopback, seeded with a small cluster; the canary whose answers must
never change; the cluster's invariants; and a tally that groups failures by
kind and keeps, for each, the seed, index, mutation and payload that
reproduce it.

The canary lives on nodes and in a namespace the fuzzers never name
(``canary-*``, tainted ``berth-canary=only:NoSchedule``, zone ``canary``),
so nothing a correct Berth accepts from the fuzzers can change its answers:
a changed answer means a request corrupted shared state.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import re
import signal
import threading
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import grpc
import msgspec
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from google.protobuf import json_format

from berth import app, config, errors
from berth.adapters.grpc import convert
from berth.adapters.grpc.server import GrpcServer
from berth.adapters.http import server as http_server
from berth.adapters.http.server import build_app
from berth.api.v1 import cluster_pb2, scheduler_pb2
from berth.cluster import model, resources
from tests.http.payloads import api_node, api_pod, args

__all__ = [
    "CANARY_NODES",
    "MAX_BODY",
    "POOL_NODES",
    "Tally",
    "Target",
    "count",
    "run_seed",
    "serving",
]

#: Small limits, so oversized bodies and inflation bombs are cheap to make.
MAX_BODY = 1024 * 1024
MAX_MESSAGE = 4 * 1024 * 1024

CANARY_NODES = ("canary-a", "canary-b")
CANARY_TAINT = {"key": "berth-canary", "value": "only", "effect": "NoSchedule"}

#: Nodes the fuzzers may name, update and delete (zones z1, z2; one tainted, one small).
POOL_NODES: list[dict[str, Any]] = [
    api_node("n0", cpu="8", memory="16Gi", zone="z1"),
    api_node("n1", cpu="4", memory="8Gi", zone="z1"),
    api_node("n2", cpu="2", memory="4Gi", zone="z2"),
    api_node("n3", cpu="1", memory="2Gi", zone="z2", labels={"disk": "ssd"}),
    api_node(
        "n4", cpu="16", memory="64Gi", zone="z2", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    ),
    api_node("n5", cpu="500m", memory="1Gi", zone="z1", pods="3"),
]
POOL_NAMES = [n["metadata"]["name"] for n in POOL_NODES]

#: Pods bound in the pool at start (preemption has victims), and pending ones (bind has targets).
RESIDENTS = [api_pod(f"resident-{i}", cpu="700m", memory="512Mi", node_name=POOL_NAMES[i % 4]) for i in range(6)]
PENDING = [api_pod(f"pending-{i}", cpu="250m") for i in range(8)]


def canary_nodes() -> list[dict[str, Any]]:
    return [
        api_node(
            name,
            cpu="4",
            memory="8Gi",
            zone="canary",
            taints=[CANARY_TAINT],
            labels={"berth-canary": "yes"},
        )
        for name in CANARY_NODES
    ]


def canary_pod(name: str = "canary", *, node_name: str = "", cpu: str = "500m") -> dict[str, Any]:
    pod = api_pod(name, cpu=cpu, namespace="berth-canary", node_name=node_name)
    pod["metadata"]["labels"] = {"berth-canary": "yes"}
    pod["spec"]["tolerations"].append({**CANARY_TAINT, "operator": "Equal"})
    pod["spec"]["containers"][0]["image"] = "canary.invalid/none:1"
    return pod


def count(name: str, default: int) -> int:
    """A request count from the environment (``make fuzz`` raises them)."""
    return int(os.environ.get(name, default))


def run_seed(long_run: bool) -> int:
    """``BERTH_FUZZ_SEED``, else a fixed seed for the bounded sample (so
    ``make test`` is repeatable) and a fresh one for long runs."""
    if "BERTH_FUZZ_SEED" in os.environ:
        return int(os.environ["BERTH_FUZZ_SEED"])
    return int.from_bytes(os.urandom(4)) if long_run else 20261123


def fuzz_config() -> config.BerthConfiguration:
    return config.parse(
        {
            "http": {"host": "127.0.0.1", "port": 0, "maxBodyBytes": MAX_BODY},
            "grpc": {"host": "127.0.0.1", "port": 0, "maxMessageBytes": MAX_MESSAGE},
        }
    )


def _convert(obj: dict[str, Any], typ: type[Any]) -> Any:
    return msgspec.convert(obj, type=typ)


# ---------------------------------------------------------------- the target


@dataclasses.dataclass(slots=True, eq=False)
class Target:
    berth: app.Berth
    http: TestClient[Any, Any]
    channel: grpc.aio.Channel
    grpc_port: int

    @property
    def host(self) -> str:
        return str(self.http.server.host)

    @property
    def http_port(self) -> int:
        port = self.http.server.port
        assert port is not None
        return port

    # ------------------------------------------------------------ the canary

    async def canary(self) -> dict[str, Any]:
        """The canary requests' answers, in a form that compares exactly."""
        c = self.http
        names = [*CANARY_NODES, "canary-ghost"]
        out: dict[str, Any] = {}
        for verb, body in (
            ("filter", args(canary_pod(), names=names)),
            ("prioritize", args(canary_pod(), names=names)),
            ("filter full", args(canary_pod(), nodes=canary_nodes())),
        ):
            resp = await c.post(f"/scheduler/{verb.split()[0]}", data=json.dumps(body))
            out[verb] = (resp.status, json.loads(await resp.read()))
        out["healthz"] = (await c.get("/healthz")).status
        listed = await self.channel.unary_unary(
            "/berth.v1.Cluster/ListNodes",
            request_serializer=cluster_pb2.ListNodesRequest.SerializeToString,
            response_deserializer=cluster_pb2.ListNodesResponse.FromString,
        )(cluster_pb2.ListNodesRequest(), timeout=10)
        out["ListNodes"] = [json_format.MessageToDict(n) for n in listed.nodes if n.name in CANARY_NODES]
        explained = await self.channel.unary_unary(
            "/berth.v1.Scheduler/Explain",
            request_serializer=scheduler_pb2.ExplainRequest.SerializeToString,
            response_deserializer=scheduler_pb2.ExplainResponse.FromString,
        )(
            scheduler_pb2.ExplainRequest(
                pod=convert.pod_to_pb(_convert(canary_pod(), model.Pod)), node_names=list(CANARY_NODES)
            ),
            timeout=10,
        )
        out["Explain"] = json_format.MessageToDict(explained)
        return out

    # ------------------------------------------------------------ invariants

    def invariants(self) -> list[str]:
        """What must hold after any sequence of requests, accepted or not."""
        return invariants(self.berth)

    def state(self) -> tuple[dict[str, int], dict[str, int]]:
        """Identity of every object in the embedded cluster (to see that a
        rejected request changed nothing)."""
        cluster = self.berth.cluster
        return {k: id(v) for k, v in cluster.nodes.items()}, {k: id(v) for k, v in cluster.pods.items()}


def invariants(berth: app.Berth) -> list[str]:
    cache, cluster = berth.core.cache, berth.cluster
    out: list[str] = []
    table = cache.table
    by_node: dict[str, list[tuple[str, model.Pod, bool]]] = collections.defaultdict(list)
    for pi, node, assumed in cache.pods():
        by_node[node].append((pi.uid, pi.pod, assumed))
    # Per node: requested == the sum of its pods' requests (exact integers,
    # so a sum that wrapped int64 shows), and the node's pod list agrees.
    for name, row in table.index.items():
        want: dict[str, int] = collections.Counter()
        for _, pod, _ in by_node.get(name, ()):
            try:
                for res, amount in resources.pod_requests(pod).items():
                    if res != resources.PODS:
                        want[res] += amount
            except Exception as e:
                out.append(f"node {name}: a cached pod's requests do not parse: {e}")
        want[resources.PODS] = len(by_node.get(name, ()))
        have = {res: int(table.req[row, i]) for res, i in table.columns.index.items() if i < table.req.shape[1]}
        for res in set(want) | {r for r, v in have.items() if v}:
            if want.get(res, 0) != have.get(res, 0):
                out.append(f"node {name}: requested {res} is {have.get(res, 0)}, its pods sum to {want.get(res, 0)}")
        info = table.infos[row]
        uids = {uid for uid, _, _ in by_node.get(name, ())}
        if info is not None and set(info.pods) != uids:
            out.append(f"node {name}: NodeInfo holds {sorted(info.pods)[:5]}, the cache {sorted(uids)[:5]}")
    for node in by_node:
        if node not in table.index:
            out.append(f"pods counted on {node}, which has no row")
    # Cache and cluster agree: every bound, running pod is counted on its
    # node, and nothing else is (the fuzzers run no scheduling loop, so
    # nothing is assumed).
    alive = {table.name(i) for i in table.alive_rows().tolist()}
    if alive != set(cluster.nodes):
        out.append(f"cache nodes {sorted(alive ^ set(cluster.nodes))[:5]} disagree with the cluster's")
    bound = {
        p.metadata.uid: p
        for p in cluster.pods.values()
        if p.spec.node_name and p.status.phase not in ("Succeeded", "Failed")
    }
    for uid, pod in bound.items():
        counted_on = cache.pod_node(uid)
        if counted_on != pod.spec.node_name:
            out.append(f"pod {pod.key} is bound to {pod.spec.node_name} but counted on {counted_on}")
    for pi, node, assumed in cache.pods():
        if not assumed and pi.uid not in bound:
            out.append(f"pod {pi.key} ({pi.uid}) is counted on {node} but not bound there in the cluster")
    shared = collections.Counter(p.metadata.uid for p in cluster.pods.values())
    for uid, n in shared.items():
        if n > 1:
            out.append(f"uid {uid} is shared by {n} pods")
    for key, pod in cluster.pods.items():
        known = berth.core.pods.by_key(key)
        if known is None or known.metadata.uid != pod.metadata.uid:
            out.append(f"pod {key}: the core knows uid {known and known.metadata.uid}, the cluster {pod.metadata.uid}")
    return out


class _ServedAsBerth(TestServer):
    """aiohttp's TestServer on Berth's own runner, so connection-level
    answers (protocol errors, header timeouts) are what `berth serve` gives."""

    def __init__(self, application: web.Application, berth: app.Berth) -> None:
        super().__init__(application, host="127.0.0.1")
        self._berth = berth

    async def _make_runner(self, **kwargs: Any) -> web.BaseRunner:
        return http_server.make_runner(self.app, self._berth.core, **kwargs)


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[Target]:
    """A Berth with the pool and the canary loaded, serving HTTP and gRPC on loopback."""
    berth = app.build(fuzz_config())
    cluster = berth.cluster
    cluster.upsert_nodes(_convert(n, model.Node) for n in [*POOL_NODES, *canary_nodes()])
    cluster.upsert_pods(
        _convert(p, model.Pod)
        for p in [*RESIDENTS, *PENDING, canary_pod("canary-resident", node_name=CANARY_NODES[0], cpu="1")]
    )
    berth.core.ready = True
    server = GrpcServer(berth.core, berth.extender, cluster)
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}", options=[("grpc.max_receive_message_length", -1)])
    try:
        async with TestClient(_ServedAsBerth(build_app(berth.core, berth.extender), berth)) as http:
            yield Target(berth, http, channel, server.port)
    finally:
        await channel.close()
        await server.stop(0)


# ---------------------------------------------------------------- the watchdog


class Runaway(Exception):
    """Raised in the main thread when one request takes too long or too much memory."""


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Watchdog:
    """Interrupts a request that runs away: the in-process server shares the
    fuzzer's event loop, so a handler that loops or allocates without bound
    would otherwise hang the run (or exhaust the machine's memory) without
    saying which request did it. A thread watches RSS and the current
    request's age and raises :class:`Runaway` in the main thread, naming it.
    """

    def __init__(self, *, seconds: float = 20.0, extra_bytes: int = 2 << 30) -> None:
        self.seconds = seconds
        self.limit = _rss_bytes() + extra_bytes
        self.current = ""
        self.since = time.monotonic()
        self._fired = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="fuzz-watchdog", daemon=True)

    def request(self, description: str) -> None:
        self.current, self.since = description, time.monotonic()

    def _watch(self) -> None:
        while not self._stop.wait(0.1):
            age = time.monotonic() - self.since
            rss = _rss_bytes()
            if self.current and self.current != self._fired and (age > self.seconds or rss > self.limit):
                self._fired = self.current
                self.reason = f"{self.current}: {age:.1f}s, RSS {rss >> 20} MB"
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR1)

    def _raise(self, signum: int, frame: object) -> None:
        raise Runaway(f"runaway request {self.reason}")

    def __enter__(self) -> Watchdog:
        self._previous = signal.signal(signal.SIGUSR1, self._raise)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        signal.signal(signal.SIGUSR1, self._previous)


# ---------------------------------------------------------------- the tally


@dataclasses.dataclass(slots=True)
class Example:
    index: int
    what: str
    payload: str
    detail: str


@dataclasses.dataclass(slots=True)
class Kind:
    count: int = 0
    examples: list[Example] = dataclasses.field(default_factory=list)


def excerpt(data: bytes | str, limit: int = 300) -> str:
    text = repr(data)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(data)} bytes)"


def _kind(message: str) -> str:
    """A failure's kind: its message with numbers and quoted parts blanked."""
    message = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", message)
    message = re.sub(r"\d+", "N", message)
    return message[:160]


class Tally:
    """Requests per verb, statuses, failures by kind; see the module docstring."""

    def __init__(self, name: str, seed: int) -> None:
        self.name = name
        self.seed = seed
        self.started = time.perf_counter()
        self.verbs: collections.Counter[str] = collections.Counter()
        self.statuses: collections.Counter[str] = collections.Counter()
        self.kinds: dict[str, Kind] = {}
        self.requests = 0

    def record(self, verb: str, status: str) -> None:
        self.requests += 1
        self.verbs[verb] += 1
        self.statuses[status] += 1

    def fail(self, message: str, *, index: int, what: str, payload: bytes | str = b"", detail: str = "") -> None:
        kind = self.kinds.setdefault(_kind(message), Kind())
        kind.count += 1
        if len(kind.examples) < 3:
            kind.examples.append(Example(index, what, excerpt(payload), errors.bounded(detail or message, 600)))

    @property
    def failures(self) -> int:
        return sum(k.count for k in self.kinds.values())

    def summary(self) -> str:
        seconds = time.perf_counter() - self.started
        verbs = " ".join(f"{v}={n}" for v, n in sorted(self.verbs.items()))
        statuses = " ".join(f"{s}={n}" for s, n in sorted(self.statuses.items()))
        return (
            f"{self.name} fuzz: {self.requests} requests in {seconds:.1f}s "
            f"({self.requests / max(seconds, 1e-9):.0f}/s), seed {self.seed}; "
            f"verbs: {verbs}; statuses: {statuses}; failures: {self.failures} in {len(self.kinds)} kinds"
        )

    def report(self) -> str:
        lines = [self.summary(), f"replay with BERTH_FUZZ_SEED={self.seed}"]
        for message, kind in sorted(self.kinds.items(), key=lambda kv: -kv[1].count):
            lines.append(f"- {kind.count} x {message}")
            for ex in kind.examples:
                lines.append(f"    #{ex.index} [{ex.what}] {ex.detail}")
                lines.append(f"        payload: {ex.payload}")
        return "\n".join(lines)


def diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    changed = [k for k in before if before[k] != after.get(k)]
    return "; ".join(
        f"{k}: {excerpt(json.dumps(before[k]), 200)} -> {excerpt(json.dumps(after.get(k)), 200)}" for k in changed
    )
