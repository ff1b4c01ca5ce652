"""Differential conformance: the real kube-scheduler (the bed's release) and Berth judge
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
   once bound (or found unschedulable: its first attempt logged ``"Unable
   to schedule pod; no fit; waiting"`` with the FitError message,
   schedule_one.go, V(2)) the pod is deleted at once and the
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

3. **Pods with ResourceClaims** are judged by both in turn, Berth first,
   since kube-scheduler changes their claims (allocation, ``reservedFor``)
   and the templated ones go with the pod. The pod's pre-created claims
   are created (a pre-allocated one gets its ``status`` written), then the
   pod with a scheduling gate, so kube-scheduler holds it while
   kube-controller-manager's resourceclaim controller makes its claims from
   templates and names them in ``status.resourceClaimStatuses``. A claim
   barrier (:func:`claims_barrier`) then ensures both schedulers have seen
   every claim event so far; Berth explains the pod as it is now (without
   its gate), the gate is removed, kube-scheduler judges it as above, and
   the pod and all its claims are deleted — the next pod waits until they
   are gone (the controller removes kube-scheduler's allocation and
   finalizer first). Claims held by nobody stay allocated all along.

   Pods whose binding changes what the next pods see take the same path:
   a pod requesting an extended resource a DeviceClass backs (kube-scheduler
   creates a claim for it at PreBind, deleted with the pod), and a pod with
   a claim of its own for a volume to provision where a CSIStorageCapacity
   has room (:func:`needs_own_pass`). No CSI provisioner runs on the bed:
   :class:`Provisioner` creates the volume once kube-scheduler chose the
   node, so that its PreBind's wait ends and it binds the pod.

   Berth's DynamicResources adds a second reason to "cannot allocate all
   claims" (which claim and request, and why); kube-scheduler has none, so
   those reasons are taken out of Berth's summary before the messages are
   compared (:meth:`Verdict.upstream_message`). DynamicResources has no
   Score extension in v1.34.4 (``dynamicresources.go``), so scores compare
   as for any pod.
"""

from __future__ import annotations

import dataclasses
import http.server
import itertools
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
from berth.plugins import dynamicresources
from tests.conformance import generator
from tests.e2e import kubeutil
from tests.e2e.conftest import launch_berth
from tests.e2e.controlplane import bed

__all__ = ["BerthClient", "Case", "Figures", "Verdict", "claims_barrier", "dra_details", "repro", "run_cluster"]

Obj = dict[str, Any]

RESOURCE = "/apis/resource.k8s.io/v1"
#: The scheduling gate that holds a claim pod while Berth judges it.
GATE = "conformance.berth.dev/berth-first"
#: DynamicResources' Filter reasons that kube-scheduler has too (dynamicresources.go Filter).
_UPSTREAM_DRA_REASONS = (dynamicresources.REASON_CANNOT_ALLOCATE, dynamicresources.REASON_NOT_AVAILABLE)


def dra_details(reason: str) -> list[str]:
    """Berth's own part of a DynamicResources reason as Explain gives it (the
    status's reasons joined by ", "): what follows an upstream reason."""
    for upstream in _UPSTREAM_DRA_REASONS:
        if reason == upstream:
            return []
        if reason.startswith(upstream + ", "):
            return [reason[len(upstream) + 2 :]]
    return []


#: schedule_one.go handleSchedulingFailure (V(2)); ``err`` is quoted as Go's %q does.
_NO_FIT = re.compile(r'"Unable to schedule pod; no fit; waiting" pod="([^"]+)" err="((?:[^"\\]|\\.)*)"')
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
    #: Berth only: DynamicResources' reasons kube-scheduler does not give.
    dra_details: set[str] = dataclasses.field(default_factory=set)

    def upstream_message(self) -> str:
        """The message without Berth's DynamicResources details: each is one
        "<count> <detail>" entry of the sorted, comma-separated histogram of
        FitError.Error(), and the detail is known exactly (it may contain
        commas itself)."""
        msg = self.message
        for detail in sorted(self.dra_details, key=len, reverse=True):
            msg = re.sub(rf"\d+ {re.escape(detail)}(, |(?=\.$))", "", msg)
        return msg.replace(", .", ".")

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
        berth = self.berth.upstream_message()
        return not self.unschedulable or (bool(berth) and self.kube.message.startswith(berth))

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


def _unschedulable(kube: bed.Kube, pod: Obj, *, reason: str) -> str | None:
    """The message of the pod's PodScheduled=False condition with ``reason``."""
    m = pod["metadata"]
    status, out = kube.request("GET", f"/api/v1/namespaces/{m['namespace']}/pods/{m['name']}")
    if status != 200:
        return None
    for cond in out.get("status", {}).get("conditions", []):
        if cond["type"] == "PodScheduled" and cond["status"] == "False" and cond.get("reason") == reason:
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
    return created, _kube_verdict(kube, recorder, log, scheduler, pod, start)


def _kube_verdict(
    kube: bed.Kube, recorder: FilterRecorder, log: LogTail, scheduler: bed.Process, pod: Obj, start: int
) -> Verdict:
    """kube-scheduler's verdict on the created ``pod`` (its log read from
    line ``start``); then the pod is deleted, and kube-scheduler has seen it go."""
    key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
    outcome = _wait(f"kube-scheduler's verdict on {key}", lambda: _first_outcome(kube, log, pod, start), 60, scheduler)
    if outcome[0] == "filtered":
        _wait(f"{key} bound", lambda: _bound(kube, pod), 60, scheduler)
    # The first attempt's: a pod found unschedulable may be retried at once
    # and bound (DynamicResources' PostFilter deallocated its claim, and
    # v1.34 pops a pod from the backoff queue when nothing else waits).
    feasible = set(recorder.get(key) or []) if outcome[0] == "filtered" else set()
    kube.request(
        "DELETE",
        f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}",
        gracePeriodSeconds="0",
    )
    _wait(
        f"kube-scheduler's delete event of {key}",
        lambda: _delete_seen(log, key, start),
        60,
        scheduler,
    )
    verdict = Verdict(feasible, message=outcome[1])
    for line in log.lines[start:] if outcome[0] == "filtered" else []:
        m = _SCORED.search(line)
        if m and m.group(1) == key:
            verdict.scores.setdefault(m.group(3), {})[m.group(2)] = int(m.group(4))
    return verdict


def _delete_seen(log: LogTail, key: str, start: int) -> bool:
    """ "Delete event for scheduled pod" or "... unscheduled pod" (eventhandlers.go):
    either, as a pod found unschedulable may be bound by a retry before it goes."""
    log.poll()
    return any(
        f'"Delete event for {which} pod" pod="{key}"' in ln
        for ln in log.lines[start:]
        for which in ("scheduled", "unscheduled")
    )


def judge_claim_pod(
    kube: bed.Kube,
    recorder: FilterRecorder,
    log: LogTail,
    scheduler: bed.Process,
    berth: BerthClient,
    cluster: generator.Cluster,
    pod: Obj,
) -> Case:
    """A pod with ResourceClaims: Berth first, then kube-scheduler (see the module docstring)."""
    m = pod["metadata"]
    ns, key = m["namespace"], f"{m['namespace']}/{m['name']}"
    for claim in cluster.pod_claims.get(m["name"], []):
        create_claim(kube, claim)
    volumes = [kube.create(v)["metadata"]["name"] for v in cluster.pod_volumes.get(m["name"], [])]
    log.poll()
    start = len(log.lines)
    gated = {**pod, "spec": {**pod["spec"], "schedulingGates": [{"name": GATE}]}}
    kube.create(gated)
    refs = pod["spec"].get("resourceClaims", [])
    templated = [r["name"] for r in refs if "resourceClaimTemplateName" in r]
    created = _wait(f"the claims of {key} from templates", lambda: _claims_made(kube, pod, templated), 30, scheduler)
    names = [r["resourceClaimName"] for r in refs if "resourceClaimName" in r]
    names += [s["resourceClaimName"] for s in created.get("status", {}).get("resourceClaimStatuses") or []]
    claims_barrier(kube, log, scheduler, berth, cluster)
    created["spec"].pop("schedulingGates", None)
    berth_verdict = _wait(
        f"Berth's cache to hold the claims of {key}",
        lambda: _berth_verdict_with_volumes(berth.scheduler, created, volumes),
        30,
        berth.process,
    )
    kube.ok(
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/{m['name']}",
        {"spec": {"schedulingGates": None}},
        content_type="application/merge-patch+json",
    )
    kube_verdict = _kube_verdict(kube, recorder, log, scheduler, pod, start)
    # The claim kube-scheduler created for extended resources backed by DRA goes too.
    names += [c["metadata"]["name"] for c in _extended_claims(kube, ns, m["name"])]
    for name in names:
        kube.request("DELETE", f"{RESOURCE}/namespaces/{ns}/resourceclaims/{name}")
    for name in volumes:
        _delete_volume_claim(kube, ns, name)
    _wait(f"the claims of {key} deleted", lambda: not any(_exists(kube, ns, n) for n in names), 60, scheduler)
    return Case(created, kube_verdict, berth_verdict)


def needs_own_pass(cluster: generator.Cluster, pod: Obj) -> bool:
    """Whether kube-scheduler's binding of ``pod`` changes objects the next
    pods see (its ResourceClaims, the claim for extended resources backed by
    DRA, its own volume claims): then it is judged alone, Berth first
    (:func:`judge_claim_pod`), and what it changed is deleted with it."""
    if pod["spec"].get("resourceClaims") or cluster.pod_volumes.get(pod["metadata"]["name"]):
        return True
    return any(
        name in generator.DRA_EXTENDED
        for c in pod["spec"]["containers"]
        for name in (c.get("resources") or {}).get("requests", {})
    )


def _extended_claims(kube: bed.Kube, ns: str, pod: str) -> list[Obj]:
    """The claims kube-scheduler made for the extended resources of ``pod``
    (annotated, the pod their controller; findExtendedResourceClaim)."""
    items: list[Obj] = kube.ok("GET", f"{RESOURCE}/namespaces/{ns}/resourceclaims")["items"]
    return [
        c
        for c in items
        if (c["metadata"].get("annotations") or {}).get("resource.kubernetes.io/extended-resource-claim") == "true"
        and any(r.get("name") == pod and r.get("controller") for r in c["metadata"].get("ownerReferences") or [])
    ]


def _berth_verdict_with_volumes(stub: scheduler_pb2_grpc.SchedulerStub, pod: Obj, volumes: list[str]) -> Verdict | None:
    """Berth's verdict once its cache holds the pod's own volume claims
    (before, VolumeBinding's PreFilter says the claim is not found)."""
    verdict = judge_with_berth(stub, pod)
    missing = any(
        f'persistentvolumeclaim "{v}" not found' in r for v in volumes for r in verdict.reasons.get("(PreFilter)", [])
    )
    return None if missing else verdict


def _delete_volume_claim(kube: bed.Kube, ns: str, name: str) -> None:
    """Delete a test pod's own claim and the volume the harness provisioned
    for it; their protection finalizers go first (no protection controller
    runs on the bed)."""
    status, pvc = kube.request("GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}")
    if status != 200:
        return
    unprotect = {"metadata": {"finalizers": None}}
    merge = "application/merge-patch+json"
    kube.request("PATCH", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}", unprotect, content_type=merge)
    kube.request("DELETE", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}")
    volume = pvc.get("spec", {}).get("volumeName") or _provisioned_name(pvc)
    kube.request("PATCH", f"/api/v1/persistentvolumes/{volume}", unprotect, content_type=merge)
    kube.request("DELETE", f"/api/v1/persistentvolumes/{volume}")


def _provisioned_name(pvc: Obj) -> str:
    return f"pv-{pvc['metadata']['uid']}"


class Provisioner:
    """The CSI provisioner of :data:`generator.CAPACITY_CLASS` that the bed
    does not run: once kube-scheduler's VolumeBinding PreBind has written a
    claim's ``volume.kubernetes.io/selected-node``, a PersistentVolume of the
    requested size is created for it, pre-bound by ``claimRef``, and the PV
    controller binds the two, so PreBind's wait ends and the pod is bound."""

    def __init__(self, kube: bed.Kube) -> None:
        self.kube = kube
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="provisioner", daemon=True)

    def __enter__(self) -> Provisioner:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        done: set[str] = set()
        path = f"/api/v1/namespaces/{generator.VOLUME_NAMESPACE}/persistentvolumeclaims"
        while not self._stop.wait(0.2):
            try:
                status, out = self.kube.request("GET", path)
            except Exception:  # the bed is going away
                continue
            for pvc in out.get("items", []) if status == 200 else []:
                md, spec = pvc["metadata"], pvc["spec"]
                node = (md.get("annotations") or {}).get("volume.kubernetes.io/selected-node")
                if spec.get("storageClassName") != generator.CAPACITY_CLASS or not node or spec.get("volumeName"):
                    continue
                if md["uid"] in done:
                    continue
                done.add(md["uid"])
                self.kube.request("POST", "/api/v1/persistentvolumes", self._volume(pvc))

    @staticmethod
    def _volume(pvc: Obj) -> Obj:
        md, spec = pvc["metadata"], pvc["spec"]
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": _provisioned_name(pvc)},
            "spec": {
                "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                "accessModes": spec["accessModes"],
                "storageClassName": generator.CAPACITY_CLASS,
                "persistentVolumeReclaimPolicy": "Retain",
                "csi": {"driver": generator.CAPACITY_DRIVER, "volumeHandle": md["uid"]},
                "claimRef": {
                    "kind": "PersistentVolumeClaim",
                    "apiVersion": "v1",
                    "namespace": md["namespace"],
                    "name": md["name"],
                    "uid": md["uid"],
                },
            },
        }


def create_claim(kube: bed.Kube, claim: Obj) -> None:
    """Create a ResourceClaim, then write its ``status`` if it has one (as
    kube-scheduler would have: the API server ignores status on create)."""
    created = kube.create(generator.without_status(claim))
    if "status" in claim:
        m = claim["metadata"]
        kube.ok(
            "PUT",
            f"{RESOURCE}/namespaces/{m['namespace']}/resourceclaims/{m['name']}/status",
            {**created, "status": claim["status"]},
        )


def _claims_made(kube: bed.Kube, pod: Obj, templated: list[str]) -> Obj | None:
    """The pod once every templated claim of it is named in its status and exists."""
    m = pod["metadata"]
    status, out = kube.request("GET", f"/api/v1/namespaces/{m['namespace']}/pods/{m['name']}")
    if status != 200:
        return None
    made = {s["name"]: s.get("resourceClaimName") for s in out.get("status", {}).get("resourceClaimStatuses") or []}
    if not all(made.get(t) and _exists(kube, m["namespace"], made[t]) for t in templated):
        return None
    return dict(out)


def _exists(kube: bed.Kube, ns: str, claim: str) -> bool:
    return kube.request("GET", f"{RESOURCE}/namespaces/{ns}/resourceclaims/{claim}")[0] == 200


_barriers = itertools.count()


def claims_barrier(
    kube: bed.Kube, log: LogTail, scheduler: bed.Process, berth: BerthClient, cluster: generator.Cluster
) -> None:
    """Both schedulers have seen every ResourceClaim event so far, and Berth's
    cache holds the cluster's nodes and running pods (:func:`_berth_synced`).

    Each informer delivers one kind's events in order, so a new claim
    (``sync-N``) that both have seen proves the rest: kube-scheduler logs
    its claim cache's add (``assume_cache.go``, V(10)), and Berth's Explain
    of a pod naming it no longer says "could not find ResourceClaim". The
    claim is deleted again (never allocated: nothing waits for that). It
    asks for a device: a claim without requests is stored with
    ``"requests": null``, which Berth's informer cannot decode."""
    name = f"sync-{next(_barriers)}"
    sentinel = generator.resource_claim(name, generator.DRA_NAMESPACE, {"requests": [generator.exactly("dev", "gpu")]})
    kube.create(sentinel)
    key = f"{generator.DRA_NAMESPACE}/{name}"
    _wait(f"kube-scheduler's claim cache to hold {key}", lambda: log.seen(f'cacheKey="{key}"'), 30, scheduler)
    _wait(
        f"Berth's cache to hold the cluster and {key}",
        lambda: _berth_synced(berth, cluster, claim=name),
        30,
        berth.process,
    )
    kube.request("DELETE", f"{RESOURCE}/namespaces/{generator.DRA_NAMESPACE}/resourceclaims/{name}")


def _claim_bound(kube: bed.Kube, claim: Obj) -> bool:
    m = claim["metadata"]
    status, out = kube.request("GET", f"/api/v1/namespaces/{m['namespace']}/persistentvolumeclaims/{m['name']}")
    return status == 200 and out.get("status", {}).get("phase") == "Bound"


def _first_outcome(kube: bed.Kube, log: LogTail, pod: Obj, start: int) -> tuple[str, str] | None:
    """How kube-scheduler's first attempt at ``pod`` ended, from its log
    since line ``start``: ("filtered", "") once it binds (the extender has
    the feasible set), ("unschedulable", FitError message) for no fit; or,
    from the pod's condition, ("unschedulable", error) for a scheduler error."""
    key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
    log.poll()
    for line in log.lines[start:]:
        if f'pod="{key}"' not in line:
            continue
        m = _NO_FIT.search(line)
        if m and m.group(1) == key:
            return ("unschedulable", json.loads(f'"{m.group(2)}"'))
        if '"Attempting to bind pod to node"' in line:
            return ("filtered", "")
    msg = _unschedulable(kube, pod, reason="SchedulerError")
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
            v.dra_details |= {d for r in n.reasons if r.plugin == dynamicresources.NAME for d in dra_details(r.reason)}
    if resp.pre_filter_reasons:
        v.reasons["(PreFilter)"] = [f"{r.plugin}: {r.reason}" for r in resp.pre_filter_reasons]
    return v


@dataclasses.dataclass
class BerthClient:
    """The Berth under test: its process and gRPC stubs."""

    process: bed.Process
    cluster: cluster_pb2_grpc.ClusterStub
    scheduler: scheduler_pb2_grpc.SchedulerStub


def _berth_synced(berth: BerthClient, cluster: generator.Cluster, *, claim: str = "") -> bool:
    """Berth's cache holds exactly the cluster's nodes and running pods (and,
    with ``claim``, that ResourceClaim of :data:`generator.DRA_NAMESPACE`)."""
    nodes = berth.cluster.ListNodes(cluster_pb2.ListNodesRequest(), timeout=10).nodes
    if len(nodes) != len(cluster.nodes) or sum(n.pods for n in nodes) != len(cluster.running_pods):
        return False
    return not claim or _berth_has_claim(berth.scheduler, claim)


def _berth_has_claim(stub: scheduler_pb2_grpc.SchedulerStub, claim: str) -> bool:
    """Whether Berth's DynamicResources finds ``claim``: Explain a probe pod naming it."""
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"probe-{claim}", "namespace": generator.DRA_NAMESPACE},
        "spec": {
            "containers": [{"name": "c", "image": "busybox:1.36"}],
            "resourceClaims": [{"name": "c", "resourceClaimName": claim}],
        },
    }
    reasons = judge_with_berth(stub, probe).reasons.get("(PreFilter)", [])
    return not any("could not find ResourceClaim" in r for r in reasons)


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
    pod_claims = [c for claims in cluster.pod_claims.values() for c in claims]
    (workdir / "cluster.yaml").write_text(
        yaml.safe_dump_all([*cluster.all_objects(), *pod_claims, *cluster.test_pods], sort_keys=False)
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
        if obj["kind"] == "ResourceClaim":
            create_claim(kube, obj)
        else:
            kube.create(generator.without_status(obj))
    # The PV controller binds the pre-bound claims before either scheduler looks.
    for claim in cluster.bound_claims():
        _wait(f"claim {claim['metadata']['name']} bound", lambda c=claim: _claim_bound(kube, c), 60, cp.apiserver)
    scheduler = cp.start_kube_scheduler(
        scheduler_config(recorder.url), args=("--v=3", "--vmodule=schedule_one=10,assume_cache=10")
    )
    launched = launch_berth(cp, berth_config)
    log = LogTail(scheduler.log)
    # Berth's reads in Kubernetes mode need a caller the API server knows.
    token = kubeutil.service_account_token(kube, "default", "conformance-reader", cluster_rules=kubeutil.READER_RULES)

    with grpc.insecure_channel(f"127.0.0.1:{launched.grpc_port}") as raw_channel, Provisioner(kube):
        channel = kubeutil.bearer_channel(raw_channel, token)
        berth = BerthClient(
            launched.process, cluster_pb2_grpc.ClusterStub(channel), scheduler_pb2_grpc.SchedulerStub(channel)
        )
        cases: list[Case | None] = []
        judged: list[tuple[int, Obj, Verdict]] = []
        for pod in cluster.test_pods:
            if needs_own_pass(cluster, pod):
                cases.append(judge_claim_pod(kube, recorder, log, scheduler, berth, cluster, pod))
            else:
                judged.append((len(cases), *judge_with_kube_scheduler(kube, recorder, log, scheduler, pod)))
                cases.append(None)
        _wait("Berth's cache to hold the cluster again", lambda: _berth_synced(berth, cluster), 60, berth.process)
        for i, created, verdict in judged:
            cases[i] = Case(created, verdict, judge_with_berth(berth.scheduler, created))
    return [c for c in cases if c is not None]


# ---------------------------------------------------------------- reports


_STORAGE_KINDS = (
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CSINode",
    "CSIDriver",
    "CSIStorageCapacity",
)
_DRA_KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim")


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
    storage += cluster.pod_volumes.get(case.pod["metadata"]["name"], [])
    # The devices, the claims holding some, and the pod's own claims and templates.
    own = {r.get("resourceClaimTemplateName") for r in case.pod["spec"].get("resourceClaims", [])}
    dra = [
        o
        for o in cluster.objects
        if o["kind"] in _DRA_KINDS or (o["kind"] == "ResourceClaimTemplate" and o["metadata"]["name"] in own)
    ]
    dra += cluster.pod_claims.get(case.pod["metadata"]["name"], [])
    docs = [verdicts, pod, *cluster.namespaces, *nodes, *on_them, *storage, *dra]
    return yaml.safe_dump_all(docs, sort_keys=False)


@dataclasses.dataclass
class Figures:
    pods: int = 0
    #: Pods with ResourceClaims, and how many of them agree completely.
    claim_pods: int = 0
    claim_pods_agree: int = 0
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
            if c.pod["spec"].get("resourceClaims"):
                self.claim_pods += 1
                self.claim_pods_agree += not c.disagreements()

    def __str__(self) -> str:
        def pct(a: int, b: int) -> str:
            return f"{100 * a / b:.1f} %" if b else "n/a"

        return (
            f"{self.pods} pods compared; feasible sets agree for {self.feasible_agree} "
            f"({pct(self.feasible_agree, self.pods)}); per-plugin scores agree for {self.scores_agree} "
            f"of {self.scored} scored pods ({pct(self.scores_agree, self.scored)}); unschedulable-diagnosis "
            f"messages agree for {self.messages_agree} of {self.unschedulable} "
            f"({pct(self.messages_agree, self.unschedulable)}); {self.claim_pods} pods with ResourceClaims, "
            f"{self.claim_pods_agree} of them agree completely"
        )
