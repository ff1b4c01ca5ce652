"""A test kit for plugin authors (and Berth's own tests): build nodes, pods
and a cluster in a line each, then run one plugin or a whole profile against
them — what ``kopf.testing`` is for operators.

::

    from berth import testing

    cluster = testing.Cluster(
        nodes=[testing.make_node("n1", cpu="4", labels={"gpu": "a100"})],
        pods=[testing.make_pod("busy", requests={"cpu": "3"}, node_name="n1")],
    )
    plugin = MyPlugin(None, cluster.handle())
    assert cluster.filter(plugin, testing.make_pod(requests={"cpu": "2"})) == {"n1": Status.unschedulable(...)}

    # A whole profile, with the plugin registered without installing it:
    testing.register(MyPlugin)
    cfg = testing.parse_config({"profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "MyPlugin"}]}}}]})
    print(testing.Cluster(nodes, pods, config=cfg).explain(testing.make_pod()).summary)

Everything is built by :func:`berth.app.build`, the same composition root
``berth serve`` uses, so a plugin sees exactly the Handle it gets in
production (a live cache, the pod index, listers, the nominator).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec
import numpy as np

from berth import app
from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model
from berth.config import BerthConfiguration
from berth.config import parse as parse_config
from berth.framework import interface as fw
from berth.framework.handle import Handle
from berth.framework.registry import register
from berth.scheduling import explain as explaining

__all__ = [
    "BerthConfiguration",
    "Cluster",
    "filter_statuses",
    "make_node",
    "make_pod",
    "parse_config",
    "register",
    "run_filter",
    "scores",
]


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
    """A Node; ``allocatable`` takes any other resource (``{"nvidia.com/gpu": 8}``)."""
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
    annotations: Mapping[str, str] | None = None,
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
                "annotations": dict(annotations or {}),
            },
            "spec": raw_spec,
        },
        model.Pod,
    )


class Cluster:
    """Nodes and pods (bound ones with ``spec.nodeName``) in a Berth built
    without a running loop; ``config`` chooses the profiles."""

    def __init__(
        self,
        nodes: Iterable[model.Node] = (),
        pods: Iterable[model.Pod] = (),
        *,
        config: BerthConfiguration | None = None,
    ) -> None:
        self.berth = app.build(config, run_loop=False)
        self.add(*nodes, *pods)

    def add(self, *objects: model.Node | model.Pod | model.Namespace) -> None:
        """Nodes, pods and namespaces as an informer reports them: taken as
        they are, without the embedded cluster's manifest checks (upstream's
        plugin test tables hold pods a real API server would default or
        reject). A namespace's labels are what ``namespaceSelector`` sees."""
        embedded, core = self.berth.cluster, self.berth.core
        for obj in objects:
            if isinstance(obj, model.Namespace):
                core.on_namespace(obj)
            elif isinstance(obj, model.Node):
                embedded.nodes[obj.metadata.name] = obj
                core.on_node(obj)
            else:
                obj.metadata.namespace = obj.metadata.namespace or "default"
                obj.metadata.uid = obj.metadata.uid or obj.key
                embedded.pods[obj.key] = obj
                core.on_pod(obj, source=embedded)

    def delete(self, *pods: model.Pod) -> None:
        self.berth.cluster.delete_pods(p.key for p in pods)

    @property
    def snapshot(self) -> NodeTable:
        """The cache's current snapshot: what a scheduling cycle judges."""
        return self.berth.core.snapshot()

    def handle(self, profile: str = "") -> Handle:
        """The Handle plugins of ``profile`` (default: the first) receive."""
        fwk = self.berth.core.framework_for(profile or self.berth.cfg.profiles[0].scheduler_name)
        return fwk.handle

    def filter(self, plugin: Any, pod: model.Pod) -> dict[str, fw.Status]:
        """One plugin's PreFilter (if any) and Filter: a status per node."""
        return filter_statuses(plugin, pod, self.snapshot)

    def scores(self, plugin: Any, pod: model.Pod, *, normalize: bool = True) -> dict[str, int]:
        """One plugin's PreScore, Score and NormalizeScore: a score per node."""
        return scores(plugin, pod, self.snapshot, normalize=normalize)

    def explain(self, pod: model.Pod, *, profile: str = "") -> explaining.Explanation:
        """The whole profile's verdict, per node and plugin (``berth explain``)."""
        return explaining.explain(self.berth.core, pod, profile=profile)


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
    """:func:`run_filter` keyed by node name."""
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
