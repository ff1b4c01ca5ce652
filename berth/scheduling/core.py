"""The core: Berth's state and verbs, spoken in protobuf at its boundary.

Adapters call these methods with ``berth.v1`` messages; sources (embedded
cluster, Kubernetes informers, the gRPC Cluster feed) report changes through
``on_*``. Everything runs on one event loop: a verb's evaluation never awaits,
so it sees one consistent snapshot.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from berth.adapters.grpc import convert
from berth.api.v1 import cluster_pb2, model_pb2, scheduler_pb2
from berth.cache.cache import Cache
from berth.cache.table import NodeTable, PodInfo, Snapshot
from berth.cluster import labels, model
from berth.cluster.sources import BindError, Source
from berth.config import BerthConfiguration
from berth.framework import interface as fw
from berth.framework import preemption, registry
from berth.framework.handle import Handle
from berth.framework.runtime import Framework
from berth.metrics import Metrics
from berth.scheduling import algorithm

__all__ = ["Core", "FilterResult", "PrioritizeResult", "VerbError"]

log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]

#: k8s.io/kube-scheduler/extender/v1: MinExtenderPriority..MaxExtenderPriority.
MAX_EXTENDER_PRIORITY = 10

LEGACY_SCHEDULER_ANNOTATION = "scheduler.alpha.kubernetes.io/name"
DEFAULT_SCHEDULER_NAME = "default-scheduler"


@dataclasses.dataclass(slots=True)
class FilterResult:
    """The extender Filter's answer before any wire format: names that pass
    (in input order) and, for the others, why."""

    passed: list[str] = dataclasses.field(default_factory=list)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)
    unresolvable: dict[str, str] = dataclasses.field(default_factory=dict)
    error: str = ""


@dataclasses.dataclass(slots=True)
class PrioritizeResult:
    """Scores (0..MAX_EXTENDER_PRIORITY) aligned with ``names``."""

    names: list[str]
    scores: IntArray
    error: str = ""


class VerbError(ValueError):
    """A request the core cannot evaluate (bad pod, unknown profile); a client error."""


def scheduler_name_of(pod: model.Pod) -> str:
    """spec.schedulerName, else the legacy annotation, else default-scheduler."""
    return (
        pod.spec.scheduler_name
        or pod.metadata.annotations.get(LEGACY_SCHEDULER_ANNOTATION, "")
        or DEFAULT_SCHEDULER_NAME
    )


class Core:
    def __init__(
        self,
        cfg: BerthConfiguration,
        *,
        clock: Any = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.cfg = cfg
        self.clock = clock
        self.rng = rng or random.Random()
        self.metrics = Metrics()
        self.cache = Cache(assumed_ttl=cfg.assumed_pod_ttl_seconds, clock=clock)
        self.frameworks: dict[str, Framework] = {}
        for prof in cfg.profiles:
            handle = Handle(profile=prof.scheduler_name, cache=self.cache, clock=clock)
            handle.extras["core"] = self
            self.frameworks[prof.scheduler_name] = Framework(registry.resolve_profile(prof), handle)
        self.samplers = {name: algorithm.Sampler() for name in self.frameworks}
        self.pods: dict[str, model.Pod] = {}  # uid -> latest pod object
        self.pod_sources: dict[str, Source] = {}  # uid -> the source that owns it
        self.uid_by_key: dict[str, str] = {}
        self.pod_groups: dict[str, model.PodGroup] = {}
        self.pdbs: dict[str, model.PodDisruptionBudget] = {}
        # (table, names, rows): the last node-name resolution, reused by the verb that asked for it.
        self._resolved: tuple[NodeTable, list[str], IntArray] | None = None
        self._resolutions: dict[tuple[int, tuple[str, ...]], tuple[IntArray, dict[str, str]]] = {}
        self.default_source: Source | None = None
        self._snapshot: Snapshot = self.cache.new_snapshot()
        self.ready = False
        # The scheduling loop (berth.scheduling.loop) hooks in here when it runs.
        self.scheduler: Any = None

    # ------------------------------------------------------------ sources

    def snapshot(self) -> Snapshot:
        self.cache.update_snapshot(self._snapshot)
        return self._snapshot

    def framework_for(self, profile: str) -> Framework:
        fwk = self.frameworks.get(profile or self.cfg.extender.profile)
        if fwk is None:
            raise VerbError(f"unknown profile {profile!r} (profiles: {', '.join(self.frameworks)})")
        return fwk

    def responsible_for(self, pod: model.Pod) -> Framework | None:
        """The profile that schedules this pod, or None when it is another scheduler's."""
        return self.frameworks.get(scheduler_name_of(pod))

    def on_node(self, node: model.Node) -> None:
        self.cache.add_node(node)
        if self.scheduler is not None:
            self.scheduler.on_node(node)
        self._cache_metrics()

    def on_node_delete(self, name: str) -> None:
        self.cache.remove_node(name)
        self._cache_metrics()

    def on_pod(self, pod: model.Pod, *, source: Source) -> None:
        uid = pod.metadata.uid
        old = self.pods.get(uid)
        self.pods[uid] = pod
        self.pod_sources[uid] = source
        self.uid_by_key[pod.key] = uid
        terminal = pod.status.phase in ("Succeeded", "Failed")
        if pod.spec.node_name and not terminal:
            self.cache.add_pod(PodInfo.of(pod))
        elif terminal:
            self.cache.remove_pod(uid)
        if self.scheduler is not None:
            self.scheduler.on_pod(old, pod)
        self._cache_metrics()

    def on_pod_delete(self, pod: model.Pod) -> None:
        uid = pod.metadata.uid
        self.pods.pop(uid, None)
        self.pod_sources.pop(uid, None)
        if self.uid_by_key.get(pod.key) == uid:
            del self.uid_by_key[pod.key]
        removed = self.cache.remove_pod(uid)
        if self.scheduler is not None:
            self.scheduler.on_pod_delete(pod, removed)
        self._cache_metrics()

    def on_pod_group(self, group: model.PodGroup) -> None:
        self.pod_groups[group.key] = group
        if self.scheduler is not None:
            self.scheduler.on_pod_group(group)

    def on_pdb(self, pdb: model.PodDisruptionBudget) -> None:
        self.pdbs[pdb.metadata.namespace + "/" + pdb.metadata.name] = pdb

    def on_pdb_delete(self, namespace: str, name: str) -> None:
        self.pdbs.pop(namespace + "/" + name, None)

    def _cache_metrics(self) -> None:
        self.metrics.set_cache_size(self.cache.node_count, self.cache.pod_count, self.cache.assumed_count)

    def pod_by_key(self, key: str) -> model.Pod | None:
        uid = self.uid_by_key.get(key)
        return None if uid is None else self.pods.get(uid)

    # ------------------------------------------------------------ node sets

    def _table_for(
        self, nodes: model_pb2.Node | Any, node_set: scheduler_pb2.NodeSet
    ) -> tuple[NodeTable, list[str], dict[str, str]]:
        """The table a verb evaluates, its input node names in order, and names it could not resolve."""
        if node_set.full_objects or len(node_set.nodes):
            objs = [convert.node_from_pb(n) for n in node_set.nodes]
            return self.table_of_nodes(objs), [n.metadata.name for n in objs], {}
        snap = self.snapshot()
        names = list(node_set.node_names)
        return snap, names, self._unknown(snap, names)

    def _unknown(self, snap: NodeTable, names: list[str]) -> dict[str, str]:
        """Names that are not alive nodes of the cache; the rows of the known
        ones are remembered for the evaluation that follows.

        kube-scheduler sends the same node list again and again (every pod's
        filter, then its prioritize with the survivors), so resolutions are
        memoised per list while the set of nodes (``shape_version``) holds.
        """
        key = (snap.shape_version, tuple(names))
        hit = self._resolutions.get(key)
        if hit is None:
            rows = np.fromiter((snap.index.get(n, -1) for n in names), dtype=np.int64, count=len(names))
            known = rows >= 0
            known[known] = snap.alive[rows[known]]
            missing = (
                {}
                if known.all()
                else {names[k]: "node is unknown to Berth's cache" for k in np.flatnonzero(~known).tolist()}
            )
            hit = (rows[known], missing)
            if len(self._resolutions) >= 8:
                del self._resolutions[next(iter(self._resolutions))]
            self._resolutions[key] = hit
        self._resolved = (snap, names, hit[0])
        return dict(hit[1])

    def table_of_nodes(self, nodes: list[model.Node]) -> NodeTable:
        """A table of exactly ``nodes`` (the extender's full-object mode), with
        the pods Berth knows on each of them counted, as an informer-fed
        extender would."""
        snap = self.snapshot()
        table = NodeTable.of_nodes(nodes, snap.columns)
        table.ensure_columns()
        known = [(i, snap.index[n.metadata.name]) for i, n in enumerate(nodes) if n.metadata.name in snap.index]
        if known:
            dst = np.asarray([k for k, _ in known], dtype=np.int64)
            src = np.asarray([s for _, s in known], dtype=np.int64)
            width = min(table.req.shape[1], snap.req.shape[1])
            table.req[dst, :width] = snap.req[src, :width]
            table.req_nz[dst, :width] = snap.req_nz[src, :width]
            for d, s in known:
                src_info = snap.infos[s]
                dst_info = table.infos[d]
                if src_info is not None and dst_info is not None:
                    dst_info.pods = src_info.pods
                    dst_info.used_ports = src_info.used_ports
        return table

    def _rows(self, table: NodeTable, names: list[str]) -> IntArray:
        resolved = self._resolved
        if resolved is not None and resolved[0] is table and resolved[1] is names:
            return resolved[2]
        return np.asarray([table.index[n] for n in names], dtype=np.int64)

    def _pod_info(self, pod_pb: model_pb2.Pod) -> PodInfo:
        if not pod_pb.metadata.name and not pod_pb.metadata.uid:
            raise VerbError("pod: required (a pod with metadata.name)")
        return self._pod_info_of(convert.pod_from_pb(pod_pb))

    @staticmethod
    def _pod_info_of(pod: model.Pod) -> PodInfo:
        if not pod.metadata.name and not pod.metadata.uid:
            raise VerbError("pod: required (a pod with metadata.name)")
        if not pod.metadata.namespace:
            pod.metadata.namespace = "default"
        return PodInfo.of(pod)

    def _pass_through(self, pod: PodInfo) -> bool:
        ext = self.cfg.extender
        if not ext.pass_through_unmanaged or not ext.managed_resources:
            return False
        return not any(r in pod.requests for r in ext.managed_resources)

    # ------------------------------------------------------------ extender verbs

    def filter(self, req: scheduler_pb2.FilterRequest) -> scheduler_pb2.FilterResponse:
        """kube-scheduler's extender Filter (findNodesThatPassExtenders' peer)."""
        pod = self._pod_info(req.pod)
        table, names, missing = self._table_for(None, req.nodes)
        res = self._filter(pod, req.profile, table, names, missing)
        return scheduler_pb2.FilterResponse(
            node_names=res.passed,
            failed_nodes=res.failed,
            failed_and_unresolvable_nodes=res.unresolvable,
            error=res.error,
        )

    def filter_model(
        self,
        pod: model.Pod,
        *,
        names: list[str] | None = None,
        nodes: list[model.Node] | None = None,
        profile: str = "",
    ) -> FilterResult:
        """:meth:`filter` without protobuf: node names resolved in the cache,
        or full node objects already decoded (the HTTP extender's two modes).
        Building a protobuf message per node would cost more than judging it."""
        pi, table, names, missing = self._model_inputs(pod, names, nodes)
        return self._filter(pi, profile, table, names, missing)

    def _model_inputs(
        self, pod: model.Pod, names: list[str] | None, nodes: list[model.Node] | None
    ) -> tuple[PodInfo, NodeTable, list[str], dict[str, str]]:
        """The pod, the table to judge on, the input names in order, and the unknown ones."""
        pi = self._pod_info_of(pod)
        if nodes is not None:
            return pi, self.table_of_nodes(nodes), [n.metadata.name for n in nodes], {}
        snap = self.snapshot()
        names = names or []
        return pi, snap, names, self._unknown(snap, names)

    def _filter(
        self, pod: PodInfo, profile: str, table: NodeTable, names: list[str], missing: dict[str, str]
    ) -> FilterResult:
        fwk = self.framework_for(profile)
        res = FilterResult(unresolvable=dict(missing))
        known = [n for n in names if n not in missing] if missing else names
        if missing:
            self._resolved = None
        if self._pass_through(pod):
            res.passed = list(known)
            return res
        state = fw.CycleState()
        status, allowed = fwk.run_pre_filter(state, pod, table)
        if not status.ok:
            if status.code == fw.Code.ERROR:
                res.error = f"{status.plugin}: {status.message()}"
                return res
            unresolvable = status.code == fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            target = res.unresolvable if unresolvable else res.failed
            for n in known:
                target[n] = status.message()
            return res
        if allowed is not None:
            for n in known:
                if n not in allowed:
                    res.unresolvable[n] = "node(s) didn't satisfy plugin(s) [PreFilter]"
            known = [n for n in known if n in allowed]
        rows = self._rows(table, known)
        out = fwk.run_filter(state, pod, table, rows)
        if out.ok.all():
            res.passed = list(known)
            return res
        res.passed = [known[k] for k in np.flatnonzero(out.ok).tolist()]
        for k in np.flatnonzero(~out.ok).tolist():
            st = out.statuses[int(out.reason[k])]
            target = res.unresolvable if st.code == fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE else res.failed
            target[known[k]] = st.message()
        return res

    def prioritize(self, req: scheduler_pb2.PrioritizeRequest) -> scheduler_pb2.PrioritizeResponse:
        """Scores in 0..10: Berth's weighted total scaled from 0..max to 0..10."""
        pod = self._pod_info(req.pod)
        table, names, missing = self._table_for(None, req.nodes)
        res = self._prioritize(pod, req.profile, table, names, missing)
        resp = scheduler_pb2.PrioritizeResponse(error=res.error)
        for n, score in zip(res.names, res.scores.tolist(), strict=True):
            resp.host_priorities.add(host=n, score=score)
        return resp

    def prioritize_model(
        self,
        pod: model.Pod,
        *,
        names: list[str] | None = None,
        nodes: list[model.Node] | None = None,
        profile: str = "",
    ) -> PrioritizeResult:
        """:meth:`prioritize` without protobuf (see :meth:`filter_model`)."""
        pi, table, names, missing = self._model_inputs(pod, names, nodes)
        return self._prioritize(pi, profile, table, names, missing)

    def _prioritize(
        self, pod: PodInfo, profile: str, table: NodeTable, names: list[str], missing: dict[str, str]
    ) -> PrioritizeResult:
        fwk = self.framework_for(profile)
        scores = np.zeros(len(names), dtype=np.int64)
        res = PrioritizeResult(names, scores)
        known_at = np.asarray([k for k, n in enumerate(names) if n not in missing], dtype=np.int64) if missing else None
        known = [names[k] for k in known_at.tolist()] if known_at is not None else names
        if not known or self._pass_through(pod):
            return res
        state = fw.CycleState()
        status, _ = fwk.run_pre_filter(state, pod, table)
        if not (status.ok or status.code == fw.Code.SKIP):
            return res
        rows = self._rows(table, known)
        st = fwk.run_pre_score(state, pod, table, rows)
        if not st.ok:
            res.error = f"{st.plugin}: {st.message()}"
            return res
        total = fwk.run_score(state, pod, table, rows).total
        top = max(fwk.max_total_score, 1)
        scaled = (total * MAX_EXTENDER_PRIORITY + top // 2) // top
        if known_at is None:
            res.scores = scaled
        else:
            scores[known_at] = scaled
        return res

    def preempt(self, req: scheduler_pb2.PreemptRequest) -> scheduler_pb2.PreemptResponse:
        """Keep the candidates where removing (some of) the victims makes the pod fit."""
        pod = self._pod_info(req.pod)
        fwk = self.framework_for(req.profile)
        snap = self.snapshot()
        resp = scheduler_pb2.PreemptResponse()
        for node, victims in req.node_name_to_victims.items():
            if node not in snap.index or not snap.alive[snap.index[node]]:
                continue
            info = snap.infos[snap.index[node]]
            assert info is not None
            uids = list(victims.pod_uids) or [p.metadata.uid for p in victims.pods]
            candidates = [info.pods[u] for u in uids if u in info.pods]
            # Victims Berth does not know on this node (full pods only) still count as removable.
            known = {c.uid for c in candidates}
            extra = [PodInfo.of(convert.pod_from_pb(p)) for p in victims.pods if p.metadata.uid not in known]
            result = preemption.select_victims_on_node(
                fwk, pod, snap, info, candidates + extra, list(self.pdbs.values()), restrict_to_candidates=True
            )
            if result is None or not result.victims:
                continue
            resp.node_name_to_meta_victims[node].pod_uids.extend(v.uid for v in result.victims)
            resp.node_name_to_meta_victims[node].num_pdb_violations = result.num_pdb_violations
        return resp

    async def bind(self, req: scheduler_pb2.BindRequest) -> scheduler_pb2.BindResponse:
        key = model.pod_key(req.pod_namespace, req.pod_name)
        pod = self.pods.get(req.pod_uid) if req.pod_uid else None
        if pod is None:
            pod = self.pod_by_key(key)
        source = self.pod_sources.get(pod.metadata.uid) if pod is not None else self.default_source
        if source is None:
            return scheduler_pb2.BindResponse(error=f'pods "{req.pod_name}" not found')
        if pod is None:
            pod = model.Pod(metadata=model.ObjectMeta(name=req.pod_name, namespace=req.pod_namespace, uid=req.pod_uid))
        if req.pod_uid and pod.metadata.uid and pod.metadata.uid != req.pod_uid:
            return scheduler_pb2.BindResponse(error=f"pod {key} has UID {pod.metadata.uid}, not {req.pod_uid}")
        try:
            await source.bind(pod, req.node)
        except BindError as e:
            return scheduler_pb2.BindResponse(error=str(e))
        return scheduler_pb2.BindResponse()

    # ------------------------------------------------------------ explain

    def explain(self, req: scheduler_pb2.ExplainRequest) -> scheduler_pb2.ExplainResponse:
        pod_model = convert.pod_from_pb(req.pod)
        profile = req.profile or (scheduler_name_of(pod_model) if self.responsible_for(pod_model) else "")
        fwk = self.framework_for(profile)
        pod = self._pod_info(req.pod)
        snap = self.snapshot()
        rows = snap.order()
        if req.node_names:
            unknown = [n for n in req.node_names if n not in snap.index]
            if unknown:
                raise VerbError(f"node_names: unknown node(s) {', '.join(unknown)}")
            rows = self._rows(snap, list(req.node_names))
        resp = scheduler_pb2.ExplainResponse(profile=fwk.name)
        if self.scheduler is not None:
            resp.queue.CopyFrom(self.scheduler.queue_state(pod.uid))
        state = fw.CycleState()
        status, allowed = fwk.run_pre_filter(state, pod, snap)
        diagnosis = algorithm.Diagnosis(num_all_nodes=len(rows))
        if not status.ok:
            diagnosis.pre_filter_msg = status.message()
            resp.pre_filter_reasons.add(
                plugin=status.plugin,
                reason=status.message(),
                unresolvable=status.code == fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            )
            for r in rows.tolist():
                e = resp.nodes.add(node=snap.name(r), feasible=False)
                e.reasons.add(
                    plugin=status.plugin,
                    reason=status.message(),
                    unresolvable=status.code == fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                )
            resp.summary = str(algorithm.FitError(pod, diagnosis))
            return resp
        out = fwk.run_filter(state, pod, snap, rows, all_reasons=True)
        feasible = out.feasible()
        per_plugin: dict[int, dict[str, int]] = {}
        totals: dict[int, int] = {}
        if len(feasible):
            st = fwk.run_pre_score(state, pod, snap, feasible)
            if st.ok:
                scores = fwk.run_score(state, pod, snap, feasible)
                for k, r in enumerate(feasible.tolist()):
                    per_plugin[r] = {name: int(a[k]) for name, a in scores.by_plugin.items()}
                    totals[r] = int(scores.total[k])
        for k, r in enumerate(rows.tolist()):
            name = snap.name(r)
            e = resp.nodes.add(node=name, feasible=bool(out.ok[k]))
            if allowed is not None and name not in allowed:
                e.feasible = False
                e.reasons.add(
                    plugin="PreFilter", reason="node(s) didn't satisfy plugin(s) [PreFilter]", unresolvable=True
                )
            for st in out.all_failures(r):
                e.reasons.add(
                    plugin=st.plugin,
                    reason=st.message(),
                    unresolvable=st.code == fw.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                )
            if out.ok[k]:
                for pname, v in per_plugin.get(r, {}).items():
                    e.plugin_scores[pname] = v
                e.score = totals.get(r, 0)
            elif out.statuses:
                diagnosis.node_to_status[name] = out.statuses[int(out.reason[k])]
        resp.feasible_nodes = sum(1 for e in resp.nodes if e.feasible)
        if resp.feasible_nodes == 0:
            resp.summary = str(algorithm.FitError(pod, diagnosis))
        else:
            resp.summary = f"{resp.feasible_nodes}/{len(rows)} nodes are available"
        return resp

    # ------------------------------------------------------------ cluster reads

    def list_nodes(self, req: cluster_pb2.ListNodesRequest) -> cluster_pb2.ListNodesResponse:
        snap = self.snapshot()
        resp = cluster_pb2.ListNodesResponse()
        names = snap.columns.names
        pods_col = snap.columns.index["pods"]
        for r in sorted(snap.alive_rows().tolist(), key=snap.name):
            node = snap.node(r)
            info = snap.infos[r]
            assert info is not None
            alloc = {names[c]: int(v) for c, v in enumerate(snap.alloc[r].tolist()) if v}
            requested = {names[c]: int(v) for c, v in enumerate(snap.req[r].tolist()) if v and c != pods_col}
            resp.nodes.add(
                name=node.metadata.name,
                allocatable=alloc,
                requested=requested,
                pods=len(info.pods),
                labels=node.metadata.labels,
                unschedulable=node.spec.unschedulable,
                taints=[convert.taint_to_pb(t) for t in node.spec.taints],
            )
        return resp

    def pods_matching(self, namespace: str, selector: model.LabelSelector | None) -> list[model.Pod]:
        return [
            p
            for p in self.pods.values()
            if p.metadata.namespace == namespace and labels.match_label_selector(selector, p.metadata.labels)
        ]
