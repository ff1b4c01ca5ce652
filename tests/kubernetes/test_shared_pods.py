"""Pods from the Kubernetes door share their empty and repeated containers
(issue 16: the per-pod footprint), and nothing on the Kubernetes-mode path
changes a shared one: pods listed or watched by the pod informer, bound,
nominated, marked and evicted as preemption victims, updated and deleted
by the API server keep exactly what they were decoded with — in virtual
time, against :class:`tests.kubernetes.fakeapi.FakeApiServer` extended with
a pod collection that answers writes with watch events, as the API server
does (``berth.cluster.model``, "A pod is the object Berth holds")."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from kubernetes_asyncio import client

from bench import memory as bench_memory
from berth import app, config
from berth.adapters.kubernetes.runner import KubernetesRunner
from berth.cluster import model
from tests.kubernetes.fakeapi import FakeApiServer, Response, node
from tests.kubernetes.test_runner import kube_runner, running, until

pytestmark = pytest.mark.looptime

_POD_PATH = re.compile(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)(/binding|/status)?")


class PodApiServer(FakeApiServer):
    """The fake API server with pods: a LIST of ``/api/v1/pods`` and a WATCH
    that streams what happens to them — created or changed here, bound,
    patched (``nominatedNodeName``, conditions) or deleted by Berth's writes."""

    def __init__(self) -> None:
        super().__init__()
        self.docs: dict[tuple[str, str], dict[str, Any]] = {}
        self._pod_rv = 1000
        self._pod_events: asyncio.Queue[bytes] = asyncio.Queue()

    # ------------------------------------------------------------ what the cluster's users do

    def create(self, doc: dict[str, Any]) -> None:
        md = doc["metadata"]
        key = (md["namespace"], md["name"])
        self.add_pod(md["namespace"], md["name"], md["uid"], doc["spec"].get("nodeName", ""))
        self._changed("ADDED", key, copy.deepcopy(doc))

    def relabel(self, namespace: str, name: str, **labels: str) -> None:
        doc = copy.deepcopy(self.docs[(namespace, name)])
        doc["metadata"]["labels"] = {**doc["metadata"]["labels"], **labels}
        self._changed("MODIFIED", (namespace, name), doc)

    def delete(self, namespace: str, name: str) -> None:
        self.pods.pop((namespace, name), None)
        self._emit("DELETED", self.docs.pop((namespace, name)))

    # ------------------------------------------------------------ serving

    def _changed(self, kind: str, key: tuple[str, str], doc: dict[str, Any]) -> None:
        self._pod_rv += 1
        doc["metadata"]["resourceVersion"] = str(self._pod_rv)
        self.docs[key] = doc
        self._emit(kind, doc)

    def _emit(self, kind: str, doc: dict[str, Any]) -> None:
        # Queued until the pod informer watches: an event is never lost.
        self._pod_events.put_nowait(json.dumps({"type": kind, "object": doc}).encode() + b"\n")

    async def _pod_stream(self) -> AsyncIterator[bytes]:
        while True:
            yield await self._pod_events.get()

    async def request(self, *, method: str, url: str, data: Any = None, **kw: Any) -> Response:
        path, _, query = url.partition("://")[2].partition("/")[2].partition("?")
        path = "/" + path
        if self.up and path == "/api/v1/pods":
            await asyncio.sleep(0)
            self.requests.append((method, path))
            if "watch=True" in query or "watch=true" in query:
                return Response(200, stream=self._pod_stream())
            items = list(self.docs.values())
            return Response(200, {"kind": "PodList", "metadata": {"resourceVersion": str(self._rv)}, "items": items})
        resp = await super().request(method=method, url=url, data=data, **kw)
        m = _POD_PATH.fullmatch(path)
        if m is not None and 200 <= resp.status <= 299 and (m.group(1), m.group(2)) in self.docs:
            self._written(method, (m.group(1), m.group(2)), m.group(3) or "", json.loads(data) if data else {})
        return resp

    def _written(self, method: str, key: tuple[str, str], sub: str, body: dict[str, Any]) -> None:
        """What the API server's watch says after a write it accepted."""
        if method == "DELETE":
            self.delete(*key)
            return
        doc = copy.deepcopy(self.docs[key])
        if sub == "/binding":
            doc["spec"]["nodeName"] = body["target"]["name"]
        elif sub == "/status":
            status = doc.setdefault("status", {})
            for k, v in body["status"].items():
                if k == "conditions":
                    have = {c["type"]: c for c in status.get("conditions", [])}
                    status["conditions"] = list({**have, **{c["type"]: c for c in v}}.values())
                elif v is None:
                    status.pop(k, None)
                else:
                    status[k] = v
        else:
            return
        self._changed("MODIFIED", key, doc)


#: What the API server's DefaultTolerationSeconds admission adds to every pod.
DEFAULT_TOLERATIONS = [
    {"key": f"node.kubernetes.io/{k}", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    for k in ("not-ready", "unreachable")
]


def deployment_pod(i: int, *, prefix: str = "", priority: int = 0) -> dict[str, Any]:
    """bench.memory's Deployment-shaped pod (labels, annotations, owner
    reference, a container with requests, limits and a port) of one of two
    ReplicaSets, with what the API server adds (a uid, a resourceVersion, the
    default tolerations)."""
    doc = bench_memory.realistic_pod(i, replica_sets=2)
    doc["metadata"]["name"] = prefix + doc["metadata"]["name"]
    doc["metadata"]["uid"] = f"{prefix}{doc['metadata']['uid']}"
    doc["spec"]["priority"] = priority
    doc["spec"]["tolerations"] = DEFAULT_TOLERATIONS
    return doc


def decoded(doc: dict[str, Any]) -> dict[str, Any]:
    """What Berth's model keeps of ``doc``, rendered (metadata.resourceVersion aside)."""
    out: dict[str, Any] = msgspec.to_builtins(msgspec.json.decode(json.dumps(doc).encode(), type=model.Pod))
    out["metadata"].pop("resourceVersion", None)
    return out


@pytest.fixture
async def fake() -> PodApiServer:
    return PodApiServer()


@contextlib.asynccontextmanager
async def closing(runner: KubernetesRunner) -> AsyncIterator[None]:
    """The runner's writers stopped once its run is over."""
    try:
        yield
    finally:
        await runner.close()


def _held(runner: KubernetesRunner, namespace: str, name: str) -> model.Pod | None:
    return runner.core.pods.by_key(model.pod_key(namespace, name))


def _labels(runner: KubernetesRunner, namespace: str, name: str) -> dict[str, str]:
    pod = _held(runner, namespace, name)
    return {} if pod is None else pod.metadata.labels


def _bound(runner: KubernetesRunner, docs: list[dict[str, Any]]) -> bool:
    pods = [_held(runner, d["metadata"]["namespace"], d["metadata"]["name"]) for d in docs]
    return all(p is not None and p.spec.node_name for p in pods)


# ---------------------------------------------------------------- what is shared


@pytest.mark.parametrize("delivered_by", ["list", "watch"])
async def test_pods_the_informer_decodes_share_their_containers_with_equal_pods(
    fake: PodApiServer, api: client.ApiClient, delivered_by: str
) -> None:
    docs = [deployment_pod(i) for i in range(4)]  # ReplicaSets 0, 1, 0, 1
    if delivered_by == "list":
        for d in docs:
            fake.create(d)
    # Informers only (no scheduling loop): the pods stay as the API server has them.
    cfg = config.parse({"leaderElection": {"leaderElect": False}, "runSchedulingLoop": False})
    runner = KubernetesRunner(app.build(cfg, run_loop=False).core, api, identity="a")
    async with closing(runner), running(runner.run()):
        await until("/readyz", lambda: runner.core.ready)
        if delivered_by == "watch":
            for d in docs:
                fake.create(d)
        await until("every pod", lambda: len(runner.core.pods) == 4)
        a, b, c, _ = (_held(runner, d["metadata"]["namespace"], d["metadata"]["name"]) for d in docs)
    assert a is not None and b is not None and c is not None
    assert a.metadata.name != c.metadata.name
    assert a.metadata.labels is c.metadata.labels and type(a.metadata.labels) is model.FrozenDict
    assert a.metadata.annotations is c.metadata.annotations
    assert a.metadata.owner_references is c.metadata.owner_references
    assert a.spec.containers is c.spec.containers
    assert a.spec.tolerations is b.spec.tolerations and len(a.spec.tolerations) == 2  # every pod's two
    assert a.spec.volumes is model._EMPTY_LIST and b.spec.init_containers is model._EMPTY_LIST  # one shared empty
    assert a.spec.node_selector is b.spec.node_selector  # the one shared empty dict
    assert b.metadata.labels is not a.metadata.labels and b.metadata.labels["app"] == "web-1"
    assert b.metadata.owner_references is not a.metadata.owner_references
    for doc in docs:  # and each is exactly what it was decoded from
        pod = _held(runner, doc["metadata"]["namespace"], doc["metadata"]["name"])
        assert pod is not None
        now = msgspec.to_builtins(pod)
        now["metadata"].pop("resourceVersion")
        assert now == decoded(doc)


# ---------------------------------------------------------------- nothing changes them


async def test_binding_preemption_updates_and_deletes_in_kubernetes_mode_leave_shared_containers_unchanged(
    fake: PodApiServer, api: client.ApiClient
) -> None:
    """Eight low-priority pods fill two nodes; four high-priority pods of the
    same shapes preempt four of them (nominated, DisruptionTarget, DELETE);
    then a pod is relabelled and another deleted by the cluster's users.
    Every write comes back as a watch event, decoded and shared afresh."""
    fake.nodes = [node("n0", cpu="400m"), node("n1", cpu="400m")]  # room for four 100m pods each
    low = [deployment_pod(i) for i in range(8)]
    high = [deployment_pod(100 + i, prefix="hi-", priority=1000) for i in range(4)]
    pristine = {(d["metadata"]["namespace"], d["metadata"]["name"]): decoded(d) for d in low + high}
    for d in low:
        fake.create(d)
    runner = kube_runner(api, {"leaderElect": False})
    async with closing(runner), running(runner.run()):
        await until("the low-priority pods bound", lambda: _bound(runner, low))
        for d in high:
            fake.create(d)
        await until("the preemptors bound", lambda: _bound(runner, high))
        ns, name = high[0]["metadata"]["namespace"], high[0]["metadata"]["name"]
        fake.relabel(ns, name, release="canary")
        pristine[(ns, name)]["metadata"]["labels"]["release"] = "canary"
        await until("the relabelled pod", lambda: "release" in _labels(runner, ns, name))
        gone = high[1]["metadata"]
        fake.delete(gone["namespace"], gone["name"])
        await until("the deleted pod gone", lambda: _held(runner, gone["namespace"], gone["name"]) is None)
        held = runner.core.pods.all()
        cached = [pi.pod for pi, _node, _assumed in runner.core.cache.pods()]

    victims = {w[1] for w in fake.writes if w[0] == "DELETE"}
    assert len(victims) >= 4, fake.writes
    nominated = [w for w in fake.writes if w[0] == "status" and "nominatedNodeName" in w[2]]
    marked = [w for w in fake.writes if w[0] == "status" and "conditions" in w[2]]
    assert nominated and marked
    assert model._EMPTY_LIST == [] and model._EMPTY_DICT == {}
    assert len(held) == len(low) + len(high) - len(victims) - 1 >= 3
    for pod in [*held, *cached]:
        now = msgspec.to_builtins(pod)
        was = pristine[(pod.metadata.namespace, pod.metadata.name)]
        now["metadata"].pop("resourceVersion")
        assert now["metadata"] == was["metadata"]
        assert {k: v for k, v in now["spec"].items() if k != "nodeName"} == was["spec"]
        # What Berth keeps of a status: the nomination, and the conditions
        # (PodResizePending counts for a resizing pod's requests).
        assert now.get("status", {}).keys() <= {"nominatedNodeName", "conditions"}
    # The pods still held still share: one ReplicaSet's containers and labels are one object.
    by_rs: dict[str, list[model.Pod]] = {}
    for pod in held:
        by_rs.setdefault(pod.metadata.owner_references[0].name, []).append(pod)
    for pods in by_rs.values():
        assert len({id(p.spec.containers) for p in pods}) == 1
        assert len({id(p.metadata.owner_references) for p in pods}) == 1
    # A fresh decode still gives what the first did.
    for doc in low + high:
        key = (doc["metadata"]["namespace"], doc["metadata"]["name"])
        if key != (ns, name):
            assert decoded(doc) == pristine[key]
