"""Differential conformance: the real kube-scheduler v1.34.4 and Berth judge
the same generated cluster and pods; every disagreement becomes a repro.

One cluster runs on its own test bed (etcd, kube-apiserver,
kube-controller-manager), where:

1. **kube-scheduler** (default profile, ``--v=3 --vmodule=schedule_one=10``)
   has one HTTP extender, served here by :class:`FilterRecorder`. Extenders
   filter after every filter plugin (``findNodesThatPassExtenders`` in
   ``pkg/scheduler/schedule_one.go``), so the node names a ``filter`` call
   receives are exactly the pod's feasible set. The recorder returns them
   all: an extender answering with no node would make the pod unschedulable
   before scoring, and the scores are the other half of the comparison.
   They come from the log lines ``"Plugin scored node for pod" pod=...
   plugin=... node=... score=N`` (schedule_one.go:815, written at V(10) after
   the framework has normalised and weighted them, framework.go
   ``RunScorePlugins``). With one feasible node kube-scheduler skips scoring
   (schedule_one.go:457), and a plugin whose PreScore returned Skip scores
   nothing (counted here as 0).

   So kube-scheduler does bind the pod. The pods are judged one at a time:
   once bound (or found unschedulable: no filter call and a
   ``PodScheduled=False`` condition) the pod is deleted at once and the
   next one is created only after kube-scheduler logged the pod's
   ``Delete event`` (eventhandlers.go, V(3)), so every pod sees the same
   cluster.

2. **Berth** runs as ``berth serve --kubeconfig`` against the same bed: its
   informers read nodes, pods and namespaces from the API server as in
   production. After kube-scheduler's pass, once Berth's cache holds exactly
   the cluster's nodes and running pods again, each pod — as the API server
   returned it on create, i.e. defaulted and admitted (requests from limits,
   RuntimeClass overhead, tolerations, merged matchLabelKeys) — is judged by
   Berth's gRPC ``Explain`` (the path of ``berth explain -f``): the feasible
   nodes and each plugin's weighted score per node.
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import yaml

from berth.adapters.grpc import convert
from berth.api.v1 import cluster_pb2, cluster_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc
from berth.cluster import manifests
from tests.conformance import generator
from tests.e2e.conftest import launch_berth
from tests.e2e.controlplane import bed

__all__ = ["Case", "Figures", "Verdict", "repro", "run_cluster"]

Obj = dict[str, Any]

_SCORED = re.compile(r'"Plugin scored node for pod" pod="([^"]+)" plugin="([^"]+)" node="([^"]+)" score=(-?\d+)')


@dataclasses.dataclass
class Verdict:
    """One scheduler's judgement of one pod."""

    feasible: set[str]
    #: node -> plugin -> normalised, weighted score (empty when not scored).
    scores: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    #: Why not, when nothing is feasible (kube-scheduler's FailedScheduling
    #: message, Berth's summary); shown in repros, not compared.
    message: str = ""
    #: Berth only: node -> "Plugin: reason" of infeasible nodes.
    reasons: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> Obj:
        out: Obj = {"feasible": sorted(self.feasible)}
        if self.scores:
            out["scores"] = {n: dict(sorted(s.items())) for n, s in sorted(self.scores.items())}
        if self.message:
            out["message"] = self.message
        if self.reasons:
            out["reasons"] = dict(sorted(self.reasons.items()))
        return out


@dataclasses.dataclass
class Case:
    """A pod, both verdicts and what differs between them."""

    pod: Obj
    kube: Verdict
    berth: Verdict

    @property
    def key(self) -> str:
        return f"{self.pod['metadata']['namespace']}/{self.pod['metadata']['name']}"

    @property
    def feasible_agree(self) -> bool:
        return self.kube.feasible == self.berth.feasible

    @property
    def scored(self) -> bool:
        """kube-scheduler scores only when more than one node is feasible."""
        return len(self.kube.feasible) > 1 and self.feasible_agree

    def score_diffs(self) -> list[str]:
        if not self.scored:
            return []
        out = []
        for node in sorted(self.kube.feasible):
            k, b = self.kube.scores.get(node, {}), self.berth.scores.get(node, {})
            for plugin in sorted(set(k) | set(b)):
                if k.get(plugin, 0) != b.get(plugin, 0):
                    out.append(f"{node} {plugin}: kube-scheduler {k.get(plugin, 0)}, Berth {b.get(plugin, 0)}")
        return out

    @property
    def unschedulable(self) -> bool:
        return not self.kube.feasible and not self.berth.feasible

    @property
    def message_agrees(self) -> bool:
        """kube-scheduler's FailedScheduling message begins with the filters'
        diagnosis, which Berth's Explain summary must equal byte for byte;
        what follows it comes from PostFilter plugins (preemption,
        DynamicResources), which Explain does not run."""
        return not self.unschedulable or (bool(self.berth.message) and self.kube.message.startswith(self.berth.message))

    def disagreements(self) -> list[str]:
        out = []
        if not self.message_agrees:
            out.append(f"message: kube-scheduler {self.kube.message!r}, Berth {self.berth.message!r}")
        if not self.feasible_agree:
            only_k = sorted(self.kube.feasible - self.berth.feasible)
            only_b = sorted(self.berth.feasible - self.kube.feasible)
            out.append(f"feasible: only kube-scheduler {only_k}, only Berth {only_b}")
        return out + self.score_diffs()


# ---------------------------------------------------------------- kube-scheduler's side


class FilterRecorder:
    """The extender: records the node names of each ``filter`` call by pod and returns them all."""

    def __init__(self) -> None:
        self.calls: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                args = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                # ExtenderArgs has no json tags (k8s.io/kube-scheduler/extender/v1/types.go):
                # Go writes the field names as they are.
                pod, names = args["Pod"]["metadata"], list(args.get("NodeNames") or [])
                with recorder._lock:
                    recorder.calls.setdefault(f"{pod['namespace']}/{pod['name']}", names)
                body = json.dumps({"NodeNames": names, "FailedNodes": {}, "Error": ""}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", bed.free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FilterRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def get(self, key: str) -> list[str] | None:
        with self._lock:
            return self.calls.get(key)


class LogTail:
    """A growing log file read incrementally."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.lines: list[str] = []

    def poll(self) -> None:
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        *complete, self._partial = (self._partial + data).split(b"\n")
        self.lines += [ln.decode(errors="replace") for ln in complete]

    def seen(self, needle: str, since: int = 0) -> bool:
        self.poll()
        return any(needle in ln for ln in self.lines[since:])


def _wait(what: str, check: Any, timeout: float, proc: bed.Process) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if not proc.alive():
            raise AssertionError(f"{proc.name} exited while waiting for {what}:\n{proc.tail()}")
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}:\n{proc.tail()}")


def _unschedulable(kube: bed.Kube, pod: Obj) -> str | None:
    m = pod["metadata"]
    status, out = kube.request("GET", f"/api/v1/namespaces/{m['namespace']}/pods/{m['name']}")
    if status != 200:
        return None
    for cond in out.get("status", {}).get("conditions", []):
        if cond["type"] == "PodScheduled" and cond["status"] == "False":
            return str(cond.get("message", ""))
    return None


def _bound(kube: bed.Kube, pod: Obj) -> bool:
    m = pod["metadata"]
    status, out = kube.request("GET", f"/api/v1/namespaces/{m['namespace']}/pods/{m['name']}")
    return status == 200 and bool(out["spec"].get("nodeName"))


def judge_with_kube_scheduler(
    kube: bed.Kube, recorder: FilterRecorder, log: LogTail, scheduler: bed.Process, pod: Obj
) -> tuple[Obj, Verdict]:
    """Create ``pod``, read kube-scheduler's verdict, delete it again; the pod as created is returned."""
    log.poll()
    start = len(log.lines)
    created: Obj = kube.create(pod)
    key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
    outcome = _wait(
        f"kube-scheduler's verdict on {key}",
        lambda: ("filtered", "") if recorder.get(key) is not None else _failed(kube, pod),
        60,
        scheduler,
    )
    if outcome[0] == "filtered":
        _wait(f"{key} bound", lambda: _bound(kube, pod), 60, scheduler)
    kube.request(
        "DELETE",
        f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}",
        gracePeriodSeconds="0",
    )
    which = "scheduled" if outcome[0] == "filtered" else "unscheduled"
    _wait(
        f"kube-scheduler's delete event of {key}",
        lambda: log.seen(f'"Delete event for {which} pod" pod="{key}"', start),
        60,
        scheduler,
    )
    verdict = Verdict(set(recorder.get(key) or []), message=outcome[1])
    for line in log.lines[start:]:
        m = _SCORED.search(line)
        if m and m.group(1) == key:
            verdict.scores.setdefault(m.group(3), {})[m.group(2)] = int(m.group(4))
    return created, verdict


def _claim_bound(kube: bed.Kube, claim: Obj) -> bool:
    m = claim["metadata"]
    status, out = kube.request("GET", f"/api/v1/namespaces/{m['namespace']}/persistentvolumeclaims/{m['name']}")
    return status == 200 and out.get("status", {}).get("phase") == "Bound"


def _failed(kube: bed.Kube, pod: Obj) -> tuple[str, str] | None:
    msg = _unschedulable(kube, pod)
    return ("unschedulable", msg) if msg is not None else None


# ---------------------------------------------------------------- Berth's side


def judge_with_berth(stub: scheduler_pb2_grpc.SchedulerStub, pod: Obj) -> Verdict:
    """Berth's Explain of ``pod`` (an API server object), as ``berth explain -f`` sends it."""
    model_pod = manifests.loads(json.dumps(pod), source=pod["metadata"]["name"]).pods[0]
    resp = stub.Explain(scheduler_pb2.ExplainRequest(pod=convert.pod_to_pb(model_pod)), timeout=30)
    v = Verdict({n.node for n in resp.nodes if n.feasible}, message=resp.summary)
    for n in resp.nodes:
        if n.feasible:
            v.scores[n.node] = dict(n.plugin_scores)
        else:
            v.reasons[n.node] = [f"{r.plugin}: {r.reason}" for r in n.reasons]
    if resp.pre_filter_reasons:
        v.reasons["(PreFilter)"] = [f"{r.plugin}: {r.reason}" for r in resp.pre_filter_reasons]
    return v


def _berth_synced(stub: cluster_pb2_grpc.ClusterStub, cluster: generator.Cluster) -> bool:
    nodes = stub.ListNodes(cluster_pb2.ListNodesRequest(), timeout=10).nodes
    return len(nodes) == len(cluster.nodes) and sum(n.pods for n in nodes) == len(cluster.running_pods)


# ---------------------------------------------------------------- one cluster


#: kube-scheduler's configuration: the default profile (every v1.34.4 default
#: plugin, volume and DRA ones included) plus the recording extender.
def scheduler_config(extender_url: str) -> Obj:
    return {
        "profiles": [{"schedulerName": "default-scheduler"}],
        "extenders": [
            {
                "urlPrefix": extender_url,
                "filterVerb": "filter",
                "nodeCacheCapable": True,
                "weight": 1,
                "ignorable": False,
                "httpTimeout": "30s",
            }
        ],
    }


def run_cluster(cluster: generator.Cluster, workdir: Path, *, berth_config: Obj | None = None) -> list[Case]:
    """Build ``cluster`` on a fresh bed and judge every test pod with both
    schedulers (Berth with its default profile unless ``berth_config``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "cluster.yaml").write_text(
        yaml.safe_dump_all([*cluster.all_objects(), *cluster.test_pods], sort_keys=False)
    )
    with bed.ControlPlane(workdir=workdir / "bed") as cp, FilterRecorder() as recorder:
        try:
            return _run(cp, recorder, cluster, berth_config)
        except BaseException as e:
            e.add_note(f"component logs:\n{cp.logs()}")
            raise


def _run(
    cp: bed.ControlPlane, recorder: FilterRecorder, cluster: generator.Cluster, berth_config: Obj | None
) -> list[Case]:
    cp.start_controller_manager()
    kube = cp.kube()
    for ns in cluster.namespaces:
        kube.create(ns)
        cp.ensure_namespace(ns["metadata"]["name"])  # its default ServiceAccount, whoever is first
    for obj in cluster.nodes + cluster.objects:
        kube.create(generator.without_status(obj))
    # The PV controller binds the pre-bound claims before either scheduler looks.
    for claim in cluster.bound_claims():
        _wait(f"claim {claim['metadata']['name']} bound", lambda c=claim: _claim_bound(kube, c), 60, cp.apiserver)
    scheduler = cp.start_kube_scheduler(scheduler_config(recorder.url), args=("--v=3", "--vmodule=schedule_one=10"))
    berth = launch_berth(cp, berth_config)
    log = LogTail(scheduler.log)

    judged: list[tuple[Obj, Verdict]] = []
    for pod in cluster.test_pods:
        judged.append(judge_with_kube_scheduler(kube, recorder, log, scheduler, pod))

    with grpc.insecure_channel(f"127.0.0.1:{berth.grpc_port}") as channel:
        cluster_stub = cluster_pb2_grpc.ClusterStub(channel)
        _wait(
            "Berth's cache to hold the cluster again", lambda: _berth_synced(cluster_stub, cluster), 60, berth.process
        )
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        return [Case(created, verdict, judge_with_berth(stub, created)) for created, verdict in judged]


# ---------------------------------------------------------------- reports


_STORAGE_KINDS = ("StorageClass", "PersistentVolume", "PersistentVolumeClaim", "CSINode")


def repro(cluster: generator.Cluster, case: Case) -> str:
    """A YAML repro of a disagreement: the pod as the API server stored it,
    the nodes in question with the pods running on them, the namespaces, and
    both verdicts (the whole cluster is ``cluster.yaml`` beside it)."""
    differing = (case.kube.feasible ^ case.berth.feasible) or case.kube.feasible
    nodes = [n for n in cluster.nodes if n["metadata"]["name"] in differing]
    on_them = [p for p in cluster.running_pods if p["spec"]["nodeName"] in differing]
    pod = {k: v for k, v in case.pod.items() if k != "status"}
    pod["metadata"] = {k: v for k, v in pod["metadata"].items() if k in ("name", "namespace", "labels")}
    verdicts = {
        "pod": case.key,
        "seed": cluster.seed,
        "disagreements": case.disagreements(),
        "kube-scheduler": case.kube.as_dict(),
        "berth": case.berth.as_dict(),
    }
    storage = [o for o in cluster.objects if o["kind"] in _STORAGE_KINDS]
    docs = [verdicts, pod, *cluster.namespaces, *nodes, *on_them, *storage]
    return yaml.safe_dump_all(docs, sort_keys=False)


@dataclasses.dataclass
class Figures:
    pods: int = 0
    feasible_agree: int = 0
    scored: int = 0
    scores_agree: int = 0
    unschedulable: int = 0
    messages_agree: int = 0

    def add(self, cases: list[Case]) -> None:
        for c in cases:
            self.pods += 1
            self.unschedulable += c.unschedulable
            self.messages_agree += c.unschedulable and c.message_agrees
            self.feasible_agree += c.feasible_agree
            self.scored += c.scored
            self.scores_agree += c.scored and not c.score_diffs()

    def __str__(self) -> str:
        def pct(a: int, b: int) -> str:
            return f"{100 * a / b:.1f} %" if b else "n/a"

        return (
            f"{self.pods} pods compared; feasible sets agree for {self.feasible_agree} "
            f"({pct(self.feasible_agree, self.pods)}); per-plugin scores agree for {self.scores_agree} "
            f"of {self.scored} scored pods ({pct(self.scores_agree, self.scored)}); unschedulable-diagnosis "
            f"messages agree for {self.messages_agree} of {self.unschedulable} "
            f"({pct(self.messages_agree, self.unschedulable)})"
        )
