"""Builders for tests: nodes, pods and tables in a line each."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec
import numpy as np

from berth.cache.cache import Cache
from berth.cache.table import NodeTable, PodInfo
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework.handle import Handle

__all__ = ["cached", "filter_statuses", "make_node", "make_pod", "run_filter", "scores", "table"]


def make_node(
    name: str,
    *,
    cpu: str | int | None = None,
    memory: str | int | None = None,
    pods: int | None = None,
    allocatable: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[model.Taint] = (),
    unschedulable: bool = False,
    images: Sequence[model.ContainerImage] = (),
) -> model.Node:
    alloc: dict[str, Any] = dict(allocatable or {})
    if cpu is not None:
        alloc["cpu"] = cpu
    if memory is not None:
        alloc["memory"] = memory
    if pods is not None:
        alloc["pods"] = pods
    return model.Node(
        metadata=model.ObjectMeta(name=name, labels=dict(labels or {})),
        spec=model.NodeSpec(unschedulable=unschedulable, taints=list(taints)),
        status=model.NodeStatus(allocatable=alloc, capacity=dict(alloc), images=list(images)),
    )


def make_pod(
    name: str = "p",
    *,
    namespace: str = "default",
    uid: str | None = None,
    requests: Mapping[str, Any] | None = None,
    containers: Sequence[Mapping[str, Any]] | None = None,
    node_name: str = "",
    labels: Mapping[str, str] | None = None,
    priority: int | None = None,
    spec: Mapping[str, Any] | None = None,
    scheduler_name: str = "",
) -> model.Pod:
    """A pod; ``spec`` is merged in as Kubernetes JSON (camelCase) for anything else."""
    raw_spec: dict[str, Any] = dict(spec or {})
    if containers is None:
        containers = [{"name": "c", "resources": {"requests": dict(requests)}}] if requests else [{"name": "c"}]
    raw_spec.setdefault("containers", list(containers))
    if node_name:
        raw_spec["nodeName"] = node_name
    if priority is not None:
        raw_spec["priority"] = priority
    if scheduler_name:
        raw_spec["schedulerName"] = scheduler_name
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": uid or f"uid-{namespace}-{name}",
                "labels": dict(labels or {}),
            },
            "spec": raw_spec,
        },
        model.Pod,
    )


def table(nodes: Iterable[model.Node], pods: Iterable[model.Pod] = ()) -> NodeTable:
    """A snapshot holding ``nodes`` and the bound ``pods`` (spec.nodeName set)."""
    cache = Cache()
    for n in nodes:
        cache.add_node(n)
    for p in pods:
        cache.add_pod(PodInfo.of(p))
    return cache.new_snapshot()


def cached(nodes: Iterable[model.Node], pods: Iterable[model.Pod] = ()) -> tuple[NodeTable, Handle]:
    """A snapshot of a live cache holding ``nodes`` and bound ``pods``, and a
    Handle on that cache (so plugins use the cache's pod indexes)."""
    cache = Cache()
    for n in nodes:
        cache.add_node(n)
    for p in pods:
        cache.add_pod(PodInfo.of(p))
    return cache.new_snapshot(), Handle(cache=cache)


def run_filter(plugin: Any, pod: model.Pod, nodes: NodeTable, state: fw.CycleState | None = None) -> list[fw.Status]:
    """PreFilter (when the plugin has one) then Filter over every alive row; a status per row."""
    state = state or fw.CycleState()
    pi = PodInfo.of(pod)
    if isinstance(plugin, fw.PreFilterPlugin):
        res = plugin.pre_filter(state, pi, nodes)
        if res.status.code == fw.Code.SKIP:
            return [fw.Status() for _ in range(len(nodes.alive_rows()))]
        if not res.status.ok:
            return [res.status for _ in range(len(nodes.alive_rows()))]
    rows = nodes.alive_rows()
    verdicts = plugin.filter(state, pi, nodes, rows)
    return [verdicts.status_at(k) for k in range(len(rows))]


def filter_statuses(plugin: Any, pod: model.Pod, nodes: NodeTable) -> dict[str, fw.Status]:
    rows = nodes.alive_rows().tolist()
    return {nodes.name(r): st for r, st in zip(rows, run_filter(plugin, pod, nodes), strict=True)}


def scores(plugin: Any, pod: model.Pod, nodes: NodeTable, *, normalize: bool = True) -> dict[str, int]:
    """PreScore (if any), Score and NormalizeScore over every alive row."""
    state = fw.CycleState()
    pi = PodInfo.of(pod)
    rows = nodes.alive_rows()
    if isinstance(plugin, fw.PreFilterPlugin):
        plugin.pre_filter(state, pi, nodes)
    if isinstance(plugin, fw.PreScorePlugin):
        st = plugin.pre_score(state, pi, nodes, rows)
        if st.code == fw.Code.SKIP:
            return {nodes.name(r): 0 for r in rows.tolist()}
    raw = np.asarray(plugin.score(state, pi, nodes, rows), dtype=np.int64)
    if normalize and isinstance(plugin, fw.ScoreNormalizer):
        raw = plugin.normalize_score(state, pi, raw)
    return {nodes.name(r): int(s) for r, s in zip(rows.tolist(), raw.tolist(), strict=True)}
