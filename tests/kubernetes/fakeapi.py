"""An in-process stand-in for the API server, plugged in under
kubernetes-asyncio's REST client (its aiohttp session), so the Kubernetes
adapter's start-up, outage and shutdown paths run in virtual time without a
control plane.

It serves what the adapter asks at start-up — LISTs of nodes, pods and
PodDisruptionBudgets (PodGroups are not served: 404), WATCHes that stay open
until the server goes down, and Leases with resourceVersion
compare-and-swap. ``up = False`` refuses every request the way a stopped
apiserver does (a connection error); a going-down server also breaks the
open watches.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs

import aiohttp
from aiohttp import web
from kubernetes_asyncio import client
from multidict import CIMultiDict

#: The collections this fake lists and watches (empty unless seeded).
_LISTED = (
    "/api/v1/namespaces",
    "/api/v1/nodes",
    "/api/v1/pods",
    "/apis/policy/v1/poddisruptionbudgets",
    "/api/v1/services",
    "/api/v1/replicationcontrollers",
    "/apis/apps/v1/replicasets",
    "/apis/apps/v1/statefulsets",
    # The volume plugins' informers (served by every API server).
    "/api/v1/persistentvolumes",
    "/api/v1/persistentvolumeclaims",
    "/apis/storage.k8s.io/v1/storageclasses",
    "/apis/storage.k8s.io/v1/csinodes",
    "/apis/storage.k8s.io/v1/csidrivers",
    "/apis/storage.k8s.io/v1/csistoragecapacities",
)


class _Content:
    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks

    def iter_any(self) -> AsyncIterator[bytes]:
        return self._chunks


class Response:
    """The part of aiohttp.ClientResponse that kubernetes-asyncio and the informer read."""

    def __init__(self, status: int, body: Any = None, *, stream: AsyncIterator[bytes] | None = None) -> None:
        self.status = status
        self.reason = {200: "OK", 201: "Created", 404: "Not Found", 409: "Conflict", 503: "Service Unavailable"}.get(
            status, ""
        )
        self.headers = CIMultiDict({"Content-Type": "application/json"})
        self._body = b"" if body is None else json.dumps(body).encode()
        self.content = _Content(stream) if stream is not None else None

    async def read(self) -> bytes:
        return self._body

    def release(self) -> None:
        pass


def _status(code: int, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "message": message}


class FakeApiServer:
    """Routes by path; ``requests`` records (method, path) of every request that reached it."""

    def __init__(self) -> None:
        self.up = True
        self.nodes: list[dict[str, Any]] = []
        self.namespaces: list[dict[str, Any]] = []
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[tuple[str, str]] = []
        self.refused = 0
        #: Pods the writes act on: (namespace, name) -> {"uid", "nodeName"}.
        self.pods: dict[tuple[str, str], dict[str, str]] = {}
        #: An HTTP status every Binding (or status patch) gets instead of being served.
        self.binding_status: int | None = None
        self.status_status: int | None = None
        self.delete_status: int | None = None
        #: When set, every status patch waits for it before it is served (a slow write).
        self.status_gate: asyncio.Event | None = None
        #: When set, every Lease request waits for it (an API server that stopped answering).
        self.lease_gate: asyncio.Event | None = None
        #: What the pod writes did, in order: ("bind", pod, node), ("status", pod, status), ("GET", pod, "").
        self.writes: list[tuple[str, str, Any]] = []
        #: Events by (namespace, name), and ("POST"|"PATCH", name, body) of every event write.
        self.events: dict[tuple[str, str], dict[str, Any]] = {}
        self.event_writes: list[tuple[str, str, dict[str, Any]]] = []
        #: What ``GET /version`` answers (kube-apiserver's version.Info).
        self.version: dict[str, str] = {"major": "1", "minor": "37", "gitVersion": "v1.37.2"}
        #: Kueue Topology objects by served version ("v1beta2", "v1beta1"); a version absent: not served.
        self.kueue_topologies: dict[str, list[dict[str, Any]]] = {}
        #: Volcano HyperNode objects (topology.volcano.sh/v1alpha1); None: the kind is not served.
        self.hypernodes: list[dict[str, Any]] | None = None
        self._rv = 100
        self._down = asyncio.Event()

    # ------------------------------------------------------------ control

    def go_down(self) -> None:
        self.up = False
        self._down.set()

    def come_up(self) -> None:
        self.up = True
        self._down = asyncio.Event()

    def plug_into(self, api: client.ApiClient) -> None:
        api.rest_client.pool_manager = self  # type: ignore[assignment]

    def set_nodes(self, nodes: list[dict[str, Any]]) -> None:
        """Replace the nodes (a watch from before this answers 410 Gone)."""
        self.nodes = nodes
        self.next_rv()

    def next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    # ------------------------------------------------------------ aiohttp.ClientSession's surface

    async def close(self) -> None:
        pass

    async def request(self, *, method: str, url: str, data: Any = None, **_kw: Any) -> Response:
        await asyncio.sleep(0)
        if not self.up:
            self.refused += 1
            raise aiohttp.ClientConnectionError("Cannot connect to host fake-apiserver:443 [Connection refused]")
        path, _, query = url.partition("://")[2].partition("/")[2].partition("?")
        path = "/" + path
        self.requests.append((method, path))
        watch = "watch=True" in query or "watch=true" in query
        body = json.loads(data) if isinstance(data, (str, bytes)) and data else None
        if m := re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)(/binding|/status)?", path):
            if m.group(3) == "/status" and self.status_gate is not None:
                await self.status_gate.wait()
            return self._pod_write(method, (m.group(1), m.group(2)), m.group(3) or "", body)
        if m := re.fullmatch(r"/apis/events\.k8s\.io/v1/namespaces/([^/]+)/events(?:/([^/]+))?", path):
            return self._event(method, m.group(1), m.group(2), body)
        if m := re.fullmatch(r"/apis/coordination\.k8s\.io/v1/namespaces/([^/]+)/leases(?:/([^/]+))?", path):
            if self.lease_gate is not None:
                await self.lease_gate.wait()
            return self._lease(method, m.group(1), m.group(2), body)
        if path in ("/version", "/version/") and method == "GET":
            return Response(200, self.version)
        kueue = re.fullmatch(r"/apis/kueue\.x-k8s\.io/(v1beta[12])/topologies", path)
        hyper = path == "/apis/topology.volcano.sh/v1alpha1/hypernodes" and self.hypernodes is not None
        if path in _LISTED or hyper or (kueue is not None and kueue.group(1) in self.kueue_topologies):
            if watch:
                since = parse_qs(query).get("resourceVersion", ["0"])[0]
                if int(since or 0) < self._rv:
                    # Changes this fake cannot replay: "too old", as after an etcd compaction.
                    return Response(200, stream=self._gone())
                return Response(200, stream=self._watch())
            items = {"/api/v1/nodes": self.nodes, "/api/v1/namespaces": self.namespaces}.get(path, [])
            if kueue is not None:
                items = self.kueue_topologies[kueue.group(1)]
            if hyper and self.hypernodes is not None:
                items = self.hypernodes
            return Response(200, {"kind": "List", "metadata": {"resourceVersion": str(self._rv)}, "items": items})
        return Response(404, _status(404, f"the server could not find the requested resource ({path})"))

    async def _gone(self) -> AsyncIterator[bytes]:
        event = {"type": "ERROR", "object": _status(410, "too old resource version")}
        yield json.dumps(event).encode() + b"\n"

    async def _watch(self) -> AsyncIterator[bytes]:
        down = self._down
        await down.wait()
        raise aiohttp.ClientPayloadError("Response payload is not completed (the API server went away)")
        yield b""  # an async generator

    def _pod_write(self, method: str, key: tuple[str, str], sub: str, body: dict[str, Any] | None) -> Response:
        pod = self.pods.get(key)
        name = "/".join(key)
        if sub == "/binding" and method == "POST":
            assert body is not None
            self.writes.append(("bind", name, body["target"]["name"]))
            if self.binding_status is not None:
                return Response(self.binding_status, _status(self.binding_status, "injected"))
            if pod is None:
                return Response(404, _status(404, f'pods "{key[1]}" not found'))
            if body["metadata"].get("uid") != pod["uid"] or pod.get("nodeName"):
                return Response(409, _status(409, f"pod {key[1]} is already assigned to a node"))
            pod["nodeName"] = body["target"]["name"]
            return Response(201, _status(201, "") | {"status": "Success"})
        if sub == "/status" and method == "PATCH":
            assert body is not None
            self.writes.append(("status", name, body["status"]))
            if self.status_status is not None:
                return Response(self.status_status, _status(self.status_status, "injected"))
            if pod is None:
                return Response(404, _status(404, f'pods "{key[1]}" not found'))
            return Response(200, {"metadata": {"name": key[1]}})
        if sub == "" and method == "DELETE":
            self.writes.append(("DELETE", name, (body or {}).get("preconditions", {})))
            if self.delete_status is not None:
                return Response(self.delete_status, _status(self.delete_status, "injected"))
            if pod is None:
                return Response(404, _status(404, f'pods "{key[1]}" not found'))
            del self.pods[key]
            return Response(200, {"metadata": {"name": key[1]}})
        if sub == "" and method == "GET":
            self.writes.append(("GET", name, ""))
            if pod is None:
                return Response(404, _status(404, f'pods "{key[1]}" not found'))
            return Response(
                200, {"metadata": {"name": key[1], "uid": pod["uid"]}, "spec": {"nodeName": pod["nodeName"]}}
            )
        return Response(405, _status(405, method))

    def _event(self, method: str, ns: str, name: str | None, body: dict[str, Any] | None) -> Response:
        assert body is not None
        if method == "POST":
            name = body["metadata"]["name"]
            self.event_writes.append(("POST", name, body))
            if (ns, name) in self.events:
                return Response(409, _status(409, "already exists"))
            self.events[(ns, name)] = dict(body)
            return Response(201, body)
        assert name is not None
        self.event_writes.append((method, name, body))
        have = self.events.get((ns, name))
        if have is None:
            return Response(404, _status(404, f'events.events.k8s.io "{name}" not found'))
        have.update(body)
        return Response(200, have)

    def add_pod(self, namespace: str, name: str, uid: str, node: str = "") -> None:
        self.pods[(namespace, name)] = {"uid": uid, "nodeName": node}

    @contextlib.asynccontextmanager
    async def serving_http(self) -> AsyncIterator[str]:
        """This fake behind a real HTTP port on 127.0.0.1 (for a subprocess); yields its URL."""

        async def handle(req: web.Request) -> web.StreamResponse:
            try:
                resp = await self.request(method=req.method, url=f"http://fake{req.path_qs}", data=await req.read())
            except aiohttp.ClientConnectionError:
                assert req.transport is not None
                req.transport.abort()  # as a server gone away
                raise
            return web.Response(status=resp.status, body=await resp.read(), content_type="application/json")

        server = web.Server(handle)
        runner = web.ServerRunner(server)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            await runner.cleanup()

    def _lease(self, method: str, ns: str, name: str | None, body: dict[str, Any] | None) -> Response:
        if method == "POST":
            assert body is not None
            key = (ns, body["metadata"]["name"])
            if key in self.leases:
                return Response(409, _status(409, "already exists"))
            body["metadata"].update(namespace=ns, resourceVersion=self.next_rv())
            self.leases[key] = body
            return Response(201, body)
        assert name is not None
        have = self.leases.get((ns, name))
        if have is None:
            return Response(404, _status(404, f'leases.coordination.k8s.io "{name}" not found'))
        if method == "GET":
            return Response(200, have)
        if method == "PUT":
            assert body is not None
            if body["metadata"].get("resourceVersion") != have["metadata"]["resourceVersion"]:
                return Response(409, _status(409, "the object has been modified"))
            body["metadata"]["resourceVersion"] = self.next_rv()
            self.leases[(ns, name)] = body
            return Response(200, body)
        return Response(405, _status(405, method))

    def holder(self, ns: str, name: str) -> Any:
        lease = self.leases.get((ns, name))
        return None if lease is None else lease["spec"].get("holderIdentity")


def node(name: str, cpu: str = "4") -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1", "labels": {}},
        "status": {"capacity": resources, "allocatable": resources},
    }


def namespace(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "uid": f"uid-ns-{name}",
            "resourceVersion": "1",
            "labels": {"kubernetes.io/metadata.name": name, **labels},
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }
