"""NodePorts: a pod's host ports must be free on the node.

Mirrors kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/nodeports/node_ports.go``
(unchanged since v1.34 but for SignPod and the deferred-resize skip of the
alpha InPlacePodVerticalScalingSchedulerPreemption, not followed) with
``HostPortInfo.CheckConflict`` (``k8s.io/kube-scheduler/framework/types.go``)
and ``schedutil.GetHostPorts`` (``pkg/scheduler/util/utils.go``):

- PreFilter collects the pod's host ports — those of its containers and of
  its sidecars (init containers with ``restartPolicy: Always``); other init
  containers have finished before the pod runs, so their ports do not count.
  No host ports: Skip (the Filter is not run).
- Filter: a wanted ``(hostIP, protocol, port)`` conflicts with a port in use
  on the node with the same protocol and port when either side binds
  0.0.0.0 (an empty hostIP means 0.0.0.0, an empty protocol TCP) or both bind
  the same IP. Reason ``node(s) didn't have free ports for the requested pod
  ports``, code Unschedulable.

Only rows whose ``NodeInfo.used_ports`` is non-empty can conflict, so the
Filter looks at those alone; every other row passes untouched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from berth.cache.infos import PodInfo
from berth.cache.table import NodeTable
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework.handle import Handle

__all__ = ["ERR_REASON", "STATE_KEY", "NodePorts", "host_ports"]

IntArray = npt.NDArray[np.int64]

#: node_ports.go ErrReason.
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
#: framework.DefaultBindAllHostIP.
BIND_ALL = "0.0.0.0"

HostPort = tuple[str, str, int]


def host_ports(pod: model.Pod) -> list[HostPort]:
    """schedutil.GetHostPorts, sanitised as HostPortInfo stores them: (hostIP, protocol, port)."""
    ports: list[HostPort] = []
    sidecars = [c for c in pod.spec.init_containers if c.restart_policy == "Always"]
    for c in (*sidecars, *pod.spec.containers):
        for p in c.ports:
            if p.host_port > 0:
                ports.append((p.host_ip or BIND_ALL, p.protocol or "TCP", p.host_port))
    return ports


@dataclasses.dataclass(frozen=True, slots=True)
class _PreFilterState:
    """What a used port must not be, for one of the wanted ports to conflict.

    ``exact``: (ip, protocol, port) keys that conflict outright — a wanted
    specific IP against the same IP or 0.0.0.0. ``any_ip``: (protocol, port)
    wanted on 0.0.0.0, which conflicts with that pair on any IP.
    """

    ports: tuple[HostPort, ...]
    exact: frozenset[HostPort]
    any_ip: frozenset[tuple[str, int]]


#: node_ports.go preFilterStateKey.
STATE_KEY: fw.StateKey[_PreFilterState] = fw.StateKey("PreFilterNodePorts")


class NodePorts:
    """kube-scheduler's NodePorts plugin: PreFilter and Filter."""

    NAME: ClassVar[str] = "NodePorts"
    Args: ClassVar[None] = None

    def __init__(self, args: None = None, handle: Handle | None = None) -> None:
        self.handle = handle

    def events_to_register(self) -> Sequence[fw.ClusterEvent]:
        """node_ports.go EventsToRegister (no queueing hints: Node updates included)."""
        return (
            fw.ClusterEvent("AssignedPod", fw.ActionType.DELETE),
            fw.ClusterEvent(
                "Node", fw.ActionType.ADD | fw.ActionType.UPDATE_NODE_TAINT | fw.ActionType.UPDATE_NODE_LABEL
            ),
        )

    def pre_filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable) -> fw.PreFilterResult:
        ports = host_ports(pod.pod)
        if not ports:
            return fw.PreFilterResult(fw.Status.skip())
        exact: set[HostPort] = set()
        any_ip: set[tuple[str, int]] = set()
        for ip, proto, port in ports:
            if ip == BIND_ALL:
                any_ip.add((proto, port))
            else:
                exact.add((ip, proto, port))
                exact.add((BIND_ALL, proto, port))
        state.write(STATE_KEY, _PreFilterState(tuple(ports), frozenset(exact), frozenset(any_ip)))
        return fw.PreFilterResult()

    def filter(self, state: fw.CycleState, pod: PodInfo, nodes: NodeTable, rows: IntArray) -> fw.NodeVerdicts:
        s = state.get(STATE_KEY)
        n = len(rows)
        if s is None:
            err = fw.Status.error(f'reading "{STATE_KEY.name}" from cycleState: not found', plugin=self.NAME)
            return fw.NodeVerdicts.fail_where(np.ones(n, dtype=bool), err)
        infos = nodes.infos
        conflict = np.zeros(n, dtype=bool)
        for k, row in enumerate(rows.tolist()):
            info = infos[row]
            if info is None:
                continue
            used = info.used_ports
            if not used:
                continue
            if any(key in used for key in s.exact) or (
                s.any_ip and any((proto, port) in s.any_ip for _, proto, port in used)
            ):
                conflict[k] = True
        return fw.NodeVerdicts.fail_where(conflict, fw.Status.unschedulable(ERR_REASON, plugin=self.NAME))
