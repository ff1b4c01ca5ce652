"""The real control plane of the end-to-end suite: etcd and kube-apiserver on
loopback, nodes as plain API objects (no kubelets), kube-scheduler on demand.

The binaries come from ``build.sh`` beside this file (``make e2e-deps``),
built from their Go modules at :data:`KUBERNETES_VERSION` into a per-machine
cache. Certificates (a CA, the apiserver's serving certificate, client
certificates, the service-account signing key) are made per run.

Facts this relies on (checked against v1.34.4 and v1.37.2 here):

- the apiserver needs an ``--advertise-address`` that is not loopback; with
  ``--endpoint-reconciler-type=none`` it never has to be reachable, so a
  documentation address (192.0.2.10) is used while it listens on 127.0.0.1;
- Nodes accept their ``status`` on create, so capacity and allocatable need
  no kubelet; the ``TaintNodesByCondition`` admission plugin would add
  ``node.kubernetes.io/not-ready`` to every new Node (no kubelet will ever
  clear it), so it is disabled;
- without a controller manager nobody creates the ``default``
  ServiceAccount the ServiceAccount admission plugin requires for pods, so
  :meth:`ControlPlane.ensure_namespace` creates it;
- kube-controller-manager (:meth:`ControlPlane.start_controller_manager`,
  opt-in: the ``controller_manager`` fixture) runs on loopback with only the
  controllers asked for; v1.34 names them with a ``-controller`` suffix
  (``persistentvolume-binder-controller``, ``namespace-controller``, ...).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.certs import CA

__all__ = ["KUBERNETES_VERSION", "SUPPORTED_VERSIONS", "ControlPlane", "Kube", "find_binaries", "free_port"]

#: The releases the bed can run (one wrapper module each under k8s/); the
#: suite runs ``BERTH_K8S_VERSION``, by default the newest (``make
#: test-matrix`` runs each).
SUPPORTED_VERSIONS = ("v1.35.4", "v1.36.3", "v1.37.2")
KUBERNETES_VERSION = os.environ.get("BERTH_K8S_VERSION") or SUPPORTED_VERSIONS[-1]
BINARIES = ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "etcd", "helm")
#: The controllers the scenarios need (``kube-controller-manager --help``
#: lists v1.34's names): PV/PVC binding, namespace deletion, garbage
#: collection, the ``default`` ServiceAccount and its tokens, and the claims
#: made from ResourceClaimTemplates.
DEFAULT_CONTROLLERS = (
    "persistentvolume-binder-controller",
    "namespace-controller",
    "garbage-collector-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "resourceclaim-controller",
)
HERE = Path(__file__).resolve().parent


def cache_dir() -> Path:
    root = os.environ.get("BERTH_E2E_CACHE") or str(Path.home() / ".cache" / "berth-e2e")
    return Path(root) / KUBERNETES_VERSION / "bin"


def find_binaries() -> dict[str, Path]:
    """The built binaries by name; LookupError says what is missing."""
    bin_dir = cache_dir()
    missing = [n for n in BINARIES if not (bin_dir / n).is_file()]
    if missing:
        raise LookupError(
            f"{', '.join(missing)} not built in {bin_dir}: run `make e2e-deps K8S_VERSION={KUBERNETES_VERSION}`"
        )
    return {n: bin_dir / n for n in BINARIES}


def free_port() -> int:
    """A free loopback port *below* the kernel's ephemeral range.

    Binding port 0 returns an ephemeral port, and the many outbound
    connections of a running control plane draw from that same range, so
    such a port can be taken between our check and the server's bind. Ports
    under the range are only ever taken by explicit binds.
    """
    low = 32768
    with contextlib.suppress(OSError, ValueError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(200):
        port = random.randint(10000, max(10001, low - 1))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Kube:
    """A small synchronous client of the test bed's kube-apiserver: enough to
    create, dry-run and review objects without a generated client."""

    def __init__(
        self,
        server: str,
        *,
        ca_file: str | None = None,
        insecure: bool = False,
        client_cert: tuple[str, str] | None = None,
        token: str | None = None,
    ) -> None:
        self.server = server.rstrip("/")
        self.ca_file = ca_file
        self.insecure = insecure
        self.token = token
        self.ctx = ssl.create_default_context(cafile=ca_file)
        if insecure:
            self.ctx.check_hostname = False
            self.ctx.verify_mode = ssl.CERT_NONE
        if client_cert:
            self.ctx.load_cert_chain(*client_cert)
        self._served: dict[tuple[str, str], tuple[str, bool]] | None = None

    @classmethod
    def from_kubeconfig(cls, path: Path, workdir: Path) -> Kube:
        kc = yaml.safe_load(path.read_text())
        ctx_name = kc.get("current-context") or kc["contexts"][0]["name"]
        context = next(c["context"] for c in kc["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in kc["clusters"] if c["name"] == context["cluster"])
        user: dict[str, Any] = next((u["user"] for u in kc.get("users", []) if u["name"] == context.get("user")), {})

        def file_of(key: str, obj: Mapping[str, Any]) -> str | None:
            if obj.get(f"{key}-data"):
                out = workdir / f"{path.stem}-{key}"
                out.write_bytes(base64.b64decode(obj[f"{key}-data"]))
                return str(out)
            if obj.get(key):
                return str((path.parent / obj[key]).resolve())
            return None

        cert, key = file_of("client-certificate", user), file_of("client-key", user)
        return cls(
            cluster["server"],
            ca_file=file_of("certificate-authority", cluster),
            insecure=bool(cluster.get("insecure-skip-tls-verify")),
            client_cert=(cert, key) if cert and key else None,
            token=user.get("token"),
        )

    def with_token(self, token: str) -> Kube:
        """The same server, authenticated only by a bearer token (no client certificate)."""
        return Kube(self.server, ca_file=self.ca_file, insecure=self.insecure, token=token)

    def kubeconfig(self, path: Path) -> Path:
        """A kubeconfig for this client's server and token (for Berth and kube-scheduler)."""
        assert self.token, "only token clients can be written as a kubeconfig"
        cluster: dict[str, Any] = {"server": self.server}
        if self.ca_file:
            cluster["certificate-authority"] = self.ca_file
        if self.insecure:
            cluster["insecure-skip-tls-verify"] = True
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "bed", "cluster": cluster}],
                    "users": [{"name": "sa", "user": {"token": self.token}}],
                    "contexts": [{"name": "bed", "context": {"cluster": "bed", "user": "sa"}}],
                    "current-context": "bed",
                }
            )
        )
        return path

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        **query: str,
    ) -> tuple[int, Any]:
        url = self.server + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=30) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def ok(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        status, out = self.request(method, path, body, **kw)
        if not 200 <= status < 300:
            raise AssertionError(f"{method} {path}: HTTP {status}: {out}")
        return out

    def rediscover(self) -> None:
        """Forget what discovery said (a CRD was installed since)."""
        self._served = None

    def served(self) -> dict[tuple[str, str], tuple[str, bool]]:
        """(apiVersion, kind) -> (plural, namespaced), from discovery."""
        if self._served is None:
            served: dict[tuple[str, str], tuple[str, bool]] = {}
            versions = [("/api/v1", "v1")]
            for group in self.ok("GET", "/apis")["groups"]:
                versions += [(f"/apis/{v['groupVersion']}", v["groupVersion"]) for v in group["versions"]]
            for path, gv in versions:
                for res in self.ok("GET", path)["resources"]:
                    if "/" not in res["name"]:
                        served[(gv, res["kind"])] = (res["name"], res["namespaced"])
            self._served = served
        return self._served

    def collection(self, obj: Mapping[str, Any]) -> str:
        api_version, kind = obj["apiVersion"], obj["kind"]
        plural, namespaced = self.served()[(api_version, kind)]
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if namespaced:
            return f"{base}/namespaces/{obj['metadata']['namespace']}/{plural}"
        return f"{base}/{plural}"

    def create(self, obj: Mapping[str, Any], *, exist_ok: bool = False) -> Any:
        status, out = self.request("POST", self.collection(obj), obj)
        if status == 409 and exist_ok:
            return out
        if not 200 <= status < 300:
            raise AssertionError(f"creating {obj['kind']} {obj['metadata']['name']}: HTTP {status}: {out}")
        return out

    def delete(self, obj: Mapping[str, Any]) -> None:
        self.request("DELETE", f"{self.collection(obj)}/{obj['metadata']['name']}", gracePeriodSeconds="0")


class Process:
    """A child process whose output goes to a log file; its tail explains failures."""

    def __init__(self, name: str, argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.log = log
        self._out = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            list(argv), stdout=self._out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._out.close()

    def kill(self) -> None:
        """SIGKILL: a crash, not a graceful shutdown."""
        if self.alive():
            self.proc.kill()
            self.proc.wait(5)
        self._out.close()


def _wait(what: str, check: Any, timeout: float, proc: Process | None = None) -> None:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            raise RuntimeError(f"{proc.name} exited ({proc.proc.returncode}) before {what}:\n{proc.tail()}")
        try:
            if check():
                return
        except Exception as e:  # not up yet
            last = e
        time.sleep(0.2)
    tail = f"\n{proc.tail()}" if proc is not None else ""
    raise TimeoutError(f"{what} not within {timeout:.0f}s (last: {last}){tail}")


class ControlPlane:
    """etcd + kube-apiserver; a context manager that always cleans up."""

    def __init__(
        self,
        binaries: Mapping[str, Path] | None = None,
        workdir: Path | None = None,
        *,
        feature_gates: Mapping[str, bool] | None = None,
        runtime_config: Sequence[str] = (),
    ) -> None:
        """``feature_gates`` and ``runtime_config``: kube-apiserver's
        ``--feature-gates`` and ``--runtime-config`` (e.g. ``{"GenericWorkload":
        True}`` and ``["scheduling.k8s.io/v1beta1=true"]`` for the Workload API)."""
        self.binaries = dict(binaries or find_binaries())
        self.feature_gates = dict(feature_gates or {})
        self.runtime_config = list(runtime_config)
        self.workdir = (
            Path(workdir)
            if workdir is not None
            else Path(os.environ.get("TMPDIR", "/tmp")) / f"berth-bed-{os.getpid()}"
        )
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.processes: list[Process] = []
        self.port = 0
        self.server = ""
        self.admin_kubeconfig = self.workdir / "admin.kubeconfig"
        self.ca: CA | None = None
        self.admin: Kube | None = None
        self._api_argv: list[str] = []
        self.apiserver: Process
        self.sa_key = self.workdir / "sa.key"

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> ControlPlane:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Process:
        p = Process(name, argv, self.workdir / f"{name}.log", env)
        self.processes.append(p)
        return p

    def start(self) -> None:
        d = self.workdir
        self.ca = ca = CA(d, "bed-ca")
        self.port = free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        serving = ca.issue(
            "kube-apiserver",
            server=True,
            hosts=("127.0.0.1", "localhost", "10.0.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
        )
        admin = ca.issue("admin", client=True, organizations=("system:masters",))
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        sa_path = self.sa_key
        sa_path.write_bytes(
            sa_key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )

        shutil.rmtree(d / "etcd", ignore_errors=True)  # a fresh cluster every time
        etcd_port, peer_port = free_port(), free_port()
        etcd = self._spawn(
            "etcd",
            [
                str(self.binaries["etcd"]),
                "--name=bed",
                f"--data-dir={d / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=bed=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        _wait(
            "etcd /health",
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{etcd_port}/health", timeout=1).status == 200,
            60,
            etcd,
        )
        self._api_argv = [
            str(self.binaries["kube-apiserver"]),
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            "--advertise-address=192.0.2.10",
            "--endpoint-reconciler-type=none",
            f"--cert-dir={d / 'apiserver-certs'}",
            f"--tls-cert-file={serving.cert}",
            f"--tls-private-key-file={serving.key}",
            f"--client-ca-file={ca.path}",
            "--service-cluster-ip-range=10.0.0.0/24",
            f"--service-account-issuer={self.server}",
            f"--service-account-key-file={sa_path}",
            f"--service-account-signing-key-file={sa_path}",
            "--authorization-mode=RBAC",
            "--allow-privileged=true",
            "--disable-admission-plugins=TaintNodesByCondition",
            "--enable-priority-and-fairness=false",
            "--profiling=false",
            "--v=1",
        ]
        self._api_argv += self._feature_gate_flags()
        if self.runtime_config:
            self._api_argv.append(f"--runtime-config={','.join(self.runtime_config)}")
        api = self._spawn("kube-apiserver", self._api_argv)
        self.apiserver = api
        self.admin = Kube(self.server, ca_file=str(ca.path), client_cert=(str(admin.cert), str(admin.key)))
        _wait("kube-apiserver /readyz", lambda: self.admin.request("GET", "/readyz")[0] == 200, 120, api)  # type: ignore[union-attr]
        self.write_kubeconfig(self.admin_kubeconfig, cert=admin.cert, key=admin.key)
        self.ensure_namespace("default")

    def _feature_gate_flags(self) -> list[str]:
        """``--feature-gates`` for kube-apiserver and kube-controller-manager (the same set)."""
        if not self.feature_gates:
            return []
        return ["--feature-gates=" + ",".join(f"{k}={str(v).lower()}" for k, v in sorted(self.feature_gates.items()))]

    def stop_apiserver(self) -> None:
        """The API server goes away (etcd and everything else stay)."""
        self.apiserver.kill()

    def start_apiserver(self) -> None:
        """The API server comes back on the same port with the same data."""
        self.apiserver = self._spawn(f"kube-apiserver-{len(self.processes)}", self._api_argv)
        _wait("kube-apiserver /readyz", lambda: self.kube().request("GET", "/readyz")[0] == 200, 120, self.apiserver)

    def stop(self) -> None:
        for p in reversed(self.processes):
            with contextlib.suppress(Exception):
                p.stop()
        self.processes.clear()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} ({p.log})\n{p.tail()}" for p in self.processes)

    # ------------------------------------------------------------ clients

    def write_kubeconfig(
        self, path: Path, *, cert: Path | None = None, key: Path | None = None, token: str | None = None
    ) -> Path:
        assert self.ca is not None
        user: dict[str, Any] = {}
        if cert is not None and key is not None:
            user = {"client-certificate": str(cert), "client-key": str(key)}
        if token is not None:
            user["token"] = token
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {"name": "bed", "cluster": {"server": self.server, "certificate-authority": str(self.ca.path)}}
                    ],
                    "users": [{"name": "user", "user": user}],
                    "contexts": [{"name": "bed", "context": {"cluster": "bed", "user": "user"}}],
                    "current-context": "bed",
                }
            )
        )
        return path

    def kubeconfig_for_user(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig authenticating as ``user`` in ``groups`` (a client certificate)."""
        assert self.ca is not None
        leaf = self.ca.issue(user, client=True, organizations=tuple(groups))
        return self.write_kubeconfig(
            self.workdir / f"{user.replace(':', '_')}.kubeconfig", cert=leaf.cert, key=leaf.key
        )

    def kube(self) -> Kube:
        assert self.admin is not None
        return self.admin

    # ------------------------------------------------------------ objects

    def ensure_namespace(self, name: str) -> None:
        kube = self.kube()
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, exist_ok=True)
        kube.create(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": name}},
            exist_ok=True,
        )

    def create_node(
        self,
        name: str,
        *,
        cpu: str = "4",
        memory: str = "16Gi",
        pods: int = 110,
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, str]] = (),
        extra: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """A Node with capacity, allocatable and a Ready condition, as a kubelet would report it."""
        resources = {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "100Gi", **(extra or {})}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})},
            },
            "spec": {"taints": list(taints)} if taints else {},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "bed node",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                ],
            },
        }
        out: dict[str, Any] = self.kube().create(node)
        return out

    def start_kube_scheduler(
        self, config: Mapping[str, Any], name: str = "kube-scheduler", args: Sequence[str] = ("--v=2",)
    ) -> Process:
        """kube-scheduler with ``config`` (a KubeSchedulerConfiguration; its
        kubeconfig defaults to the admin's, leader election off) and ``args``
        (its log verbosity by default)."""
        cfg = dict(config)
        cfg.setdefault("apiVersion", "kubescheduler.config.k8s.io/v1")
        cfg.setdefault("kind", "KubeSchedulerConfiguration")
        cfg.setdefault("clientConnection", {}).setdefault("kubeconfig", str(self.admin_kubeconfig))
        cfg.setdefault("leaderElection", {"leaderElect": False})
        path = self.workdir / f"{name}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return self._spawn(name, [str(self.binaries["kube-scheduler"]), f"--config={path}", "--secure-port=0", *args])

    def start_controller_manager(self, controllers: Sequence[str] = DEFAULT_CONTROLLERS) -> Process:
        """kube-controller-manager running only ``controllers``, ready (its /healthz) on return.

        It authenticates with a client certificate of its own
        (``system:kube-controller-manager``). With
        ``--use-service-account-credentials=false`` every controller acts as
        that one user, whose bootstrap ClusterRole does not cover what e.g. the
        namespace and garbage collectors delete, so the certificate also
        carries ``system:masters``; real clusters give each controller its
        own ServiceAccount instead. Loopback only (serving on a free port,
        which only /healthz is asked of), leader election off.
        """
        assert self.ca is not None
        leaf = self.ca.issue("system:kube-controller-manager", client=True, organizations=("system:masters",))
        kubeconfig = self.write_kubeconfig(
            self.workdir / "kube-controller-manager.kubeconfig", cert=leaf.cert, key=leaf.key
        )
        port = free_port()
        proc = self._spawn(
            "kube-controller-manager",
            [
                str(self.binaries["kube-controller-manager"]),
                f"--kubeconfig={kubeconfig}",
                f"--controllers={','.join(controllers)}",
                "--use-service-account-credentials=false",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.workdir / 'kcm-certs'}",
                f"--service-account-private-key-file={self.sa_key}",
                f"--root-ca-file={self.ca.path}",
                "--profiling=false",
                "--v=2",
                *self._feature_gate_flags(),
            ],
        )
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        _wait(
            "kube-controller-manager /healthz",
            lambda: (
                urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=insecure, timeout=1).status == 200
            ),
            60,
            proc,
        )
        return proc
