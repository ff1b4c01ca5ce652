"""A pod and a node as plugins see them: kube-scheduler's ``framework.PodInfo``
and ``framework.NodeInfo`` (``staging/src/k8s.io/kube-scheduler/framework/types.go``),
with what scheduling derives from the objects computed once."""

from __future__ import annotations

import dataclasses

from berth import features
from berth.cluster import model, resources

__all__ = ["NodeInfo", "PodInfo"]

_COUNTED_APART = frozenset({resources.CPU, resources.MEMORY, resources.PODS})
#: The host ports of a pod that uses none (most pods): one list for all.
_NO_HOST_PORTS: list[tuple[str, str, int]] = []
#: The requests of a pod that requests nothing.
_NO_REQUESTS: dict[str, int] = model.FrozenDict()


@dataclasses.dataclass(slots=True, eq=False, weakref_slot=True)
class PodInfo:
    """A pod with what scheduling derives from it, computed once.

    (kube-scheduler's ``framework.PodInfo``.)
    """

    pod: model.Pod
    uid: str
    key: str
    requests: dict[str, int]
    non_zero: dict[str, int]
    host_ports: list[tuple[str, str, int]]
    _usage: dict[str, tuple[int, int]] | None = dataclasses.field(default=None, repr=False)

    @classmethod
    def of(cls, pod: model.Pod, *, like: PodInfo | None = None, feats: features.Features | None = None) -> PodInfo:
        """``pod``'s info. With ``like`` (an info of the same pod, e.g. the
        assumed one when its binding is confirmed) whose spec and status
        share ``pod``'s containers, init containers, overhead, pod-level
        resources and the status a resize reports (the very objects: a copy
        made by replacing other fields), what derives from them is taken
        from ``like``, not computed again. ``feats`` (default: the newest
        release's) chooses how a pod resized in place is counted
        (:func:`resources.node_info_options`, as ``PodInfo.CalculateResource``)."""
        if like is not None:
            a, b = like.pod.spec, pod.spec
            sa, sb = like.pod.status, pod.status
            if (
                a.containers is b.containers
                and a.init_containers is b.init_containers
                and a.overhead is b.overhead
                and a.resources is b.resources
                and sa.container_statuses is sb.container_statuses
                and sa.init_container_statuses is sb.init_container_statuses
                and sa.conditions is sb.conditions
                and sa.resources is sb.resources
                and sa.allocated_resources is sb.allocated_resources
            ):
                md = pod.metadata
                return cls(pod, md.uid or pod.key, pod.key, like.requests, like.non_zero, like.host_ports, like._usage)
        md = pod.metadata
        # schedutil.GetHostPorts: containers and sidecars (restartable init
        # containers); other init containers have exited before the pod runs.
        ports: list[tuple[str, str, int]] = []
        sidecars = [c for c in pod.spec.init_containers if c.restart_policy == "Always"]
        for c in (*sidecars, *pod.spec.containers):
            for p in c.ports:
                if p.host_port > 0:
                    ports.append((p.host_ip or "0.0.0.0", p.protocol or "TCP", p.host_port))
        # The derived maps are read-only and shared by every pod requesting
        # the same (model.shared_map): a ReplicaSet's pods hold one of each.
        options = resources.node_info_options(feats or features.Features.newest())
        return cls(
            pod=pod,
            uid=md.uid or pod.key,
            key=pod.key,
            requests=model.shared_map(resources.pod_requests(pod, options=options)) or _NO_REQUESTS,
            non_zero=model.shared_map(resources.pod_requests(pod, non_zero=True, options=options)),
            host_ports=ports or _NO_HOST_PORTS,
        )

    @property
    def usage(self) -> dict[str, tuple[int, int]]:
        """What the pod adds to its node's row: resource -> (requested,
        non-zero requested), computed once. Scoring's non-zero defaults apply
        to cpu and memory only (``NodeInfo.NonZeroRequested``); a pod counts
        as one pod, whatever it claims to request of ``pods``."""
        if self._usage is None:
            out: dict[str, tuple[int, int]] = {}
            for name, amount in self.requests.items():
                if name not in _COUNTED_APART:
                    out[name] = (amount, amount)
            for name in (resources.CPU, resources.MEMORY):
                req, nz = self.requests.get(name, 0), self.non_zero.get(name, 0)
                if req or nz:
                    out[name] = (req, nz)
            out[resources.PODS] = (1, 1)
            self._usage = model.shared_map(out)
        return self._usage

    @property
    def priority(self) -> int:
        return self.pod.spec.priority or 0

    @property
    def namespace(self) -> str:
        return self.pod.metadata.namespace or "default"

    @property
    def labels(self) -> dict[str, str]:
        return self.pod.metadata.labels


@dataclasses.dataclass(slots=True, eq=False)
class NodeInfo:
    """One node and the pods Berth knows on it (``framework.NodeInfo``).

    ``node`` is None for a node the cache has pods for but no Node object yet
    (informers can deliver a pod before its node).
    """

    name: str
    node: model.Node | None = None
    pods: dict[str, PodInfo] = dataclasses.field(default_factory=dict)
    # (hostIP, protocol, port) -> number of pods using it.
    used_ports: dict[tuple[str, str, int], int] = dataclasses.field(default_factory=dict)
    generation: int = 0

    def clone(self) -> NodeInfo:
        return NodeInfo(self.name, self.node, dict(self.pods), dict(self.used_ports), self.generation)

    def add_pod(self, pi: PodInfo) -> None:
        self.pods[pi.uid] = pi
        for port in pi.host_ports:
            self.used_ports[port] = self.used_ports.get(port, 0) + 1

    def remove_pod(self, pi: PodInfo) -> None:
        if self.pods.pop(pi.uid, None) is None:
            return
        for port in pi.host_ports:
            left = self.used_ports.get(port, 0) - 1
            if left > 0:
                self.used_ports[port] = left
            else:
                self.used_ports.pop(port, None)
