"""NodePorts, ported from kube-scheduler v1.34's
pkg/scheduler/framework/plugins/nodeports/node_ports_test.go (TestNodePorts,
TestPreFilterDisabled, TestFits) with HostPortInfo.CheckConflict's rules.

Not ported: Test_isSchedulableAfterPodDeleted (queueing hints; Berth has
none) — the events the plugin registers are checked instead.
"""

from __future__ import annotations

from typing import Any

import pytest

from berth.cache.infos import PodInfo
from berth.cluster import model
from berth.framework import interface as fw
from berth.framework import registry
from berth.plugins.node_ports import ERR_REASON, NodePorts, host_ports
from berth.testing import make_node, make_pod, run_filter
from tests.support import table


def ports(*specs: str) -> list[dict[str, Any]]:
    """node_ports_test.go newPod's "PROTOCOL/hostIP/hostPort" strings as ContainerPorts."""
    out = []
    for spec in specs:
        proto, ip, port = spec.split("/")
        out.append({"protocol": proto, "hostIP": ip, "hostPort": int(port)})
    return out


def port_pod(*specs: str, name: str = "p", node: str = "") -> model.Pod:
    return make_pod(name, containers=[{"name": "c", "ports": ports(*specs)}], node_name=node)


def init_port_pod(sidecar: bool, port: int, name: str = "p", node: str = "") -> model.Pod:
    """st.MakePod().InitContainerPort(sidecar, [{ContainerPort, HostPort, TCP}])."""
    init: dict[str, Any] = {"name": "init", "ports": [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]}
    if sidecar:
        init["restartPolicy"] = "Always"
    return make_pod(name, containers=[], node_name=node, spec={"initContainers": [init]})


def verdict(incoming: model.Pod, placed: model.Pod | None) -> fw.Status:
    t = table([make_node("m1")], [placed] if placed is not None else [])
    (status,) = run_filter(NodePorts(), incoming, t)
    return status


CONFLICT = fw.Status(fw.Code.UNSCHEDULABLE, (ERR_REASON,), "NodePorts")

CASES = [
    # (Go case, incoming pod, pod on the node, expected: "skip" | None (fits) | CONFLICT)
    ("skip filter", make_pod(containers=[]), None, "skip"),
    ("other port", port_pod("UDP/127.0.0.1/8080"), port_pod("UDP/127.0.0.1/9090", name="e", node="m1"), None),
    ("same udp port", port_pod("UDP/127.0.0.1/8080"), port_pod("UDP/127.0.0.1/8080", name="e", node="m1"), CONFLICT),
    ("same tcp port", port_pod("TCP/127.0.0.1/8080"), port_pod("TCP/127.0.0.1/8080", name="e", node="m1"), CONFLICT),
    ("different host ip", port_pod("TCP/127.0.0.1/8080"), port_pod("TCP/127.0.0.2/8080", name="e", node="m1"), None),
    ("different protocol", port_pod("UDP/127.0.0.1/8080"), port_pod("TCP/127.0.0.1/8080", name="e", node="m1"), None),
    (
        "second udp port conflict",
        port_pod("UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"),
        port_pod("UDP/127.0.0.1/8080", name="e", node="m1"),
        CONFLICT,
    ),
    (
        "first tcp port conflict",
        port_pod("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"),
        port_pod("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081", name="e", node="m1"),
        CONFLICT,
    ),
    (
        "first tcp port conflict due to 0.0.0.0 hostIP",
        port_pod("TCP/0.0.0.0/8001"),
        port_pod("TCP/127.0.0.1/8001", name="e", node="m1"),
        CONFLICT,
    ),
    (
        "TCP hostPort conflict due to 0.0.0.0 hostIP",
        port_pod("TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"),
        port_pod("TCP/127.0.0.1/8001", name="e", node="m1"),
        CONFLICT,
    ),
    (
        "second tcp port conflict to 0.0.0.0 hostIP",
        port_pod("TCP/127.0.0.1/8001"),
        port_pod("TCP/0.0.0.0/8001", name="e", node="m1"),
        CONFLICT,
    ),
    (
        "second different protocol",
        port_pod("UDP/127.0.0.1/8001"),
        port_pod("TCP/0.0.0.0/8001", name="e", node="m1"),
        None,
    ),
    (
        "UDP hostPort conflict due to 0.0.0.0 hostIP",
        port_pod("UDP/127.0.0.1/8001"),
        port_pod("TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001", name="e", node="m1"),
        CONFLICT,
    ),
    (
        "non-sidecar initContainer using hostPort",
        init_port_pod(False, 8001),
        port_pod("TCP/0.0.0.0/8001", name="e", node="m1"),
        "skip",
    ),
    (
        "TCP hostPort conflict from sidecar initContainer",
        init_port_pod(True, 8001),
        port_pod("TCP/0.0.0.0/8001", name="e", node="m1"),
        CONFLICT,
    ),
    # Berth: an empty hostIP binds 0.0.0.0 and an empty protocol is TCP (HostPortInfo sanitize).
    (
        "empty hostIP and protocol mean 0.0.0.0 and TCP",
        make_pod(containers=[{"name": "c", "ports": [{"hostPort": 8001}]}]),
        port_pod("TCP/127.0.0.1/8001", name="e", node="m1"),
        CONFLICT,
    ),
    (
        "a node without pods always fits",
        port_pod("TCP/0.0.0.0/8001"),
        None,
        None,
    ),
]


@pytest.mark.parametrize(("name", "incoming", "placed", "want"), CASES, ids=[c[0] for c in CASES])
def test_node_ports(name: str, incoming: model.Pod, placed: model.Pod | None, want: fw.Status | str | None) -> None:
    # node_ports_test.go TestNodePorts
    plugin = NodePorts()
    t = table([make_node("m1")], [placed] if placed is not None else [])
    state = fw.CycleState()
    pre = plugin.pre_filter(state, PodInfo.of(incoming), t)
    if want == "skip":
        assert pre.status.code == fw.Code.SKIP
        return
    assert pre.status.ok
    status = plugin.filter(state, PodInfo.of(incoming), t, t.alive_rows()).status_at(0)
    assert status == (want if want is not None else fw.SUCCESS)


def test_filter_without_prefilter_is_an_error() -> None:
    # node_ports_test.go TestPreFilterDisabled
    t = table([make_node("m1")])
    st = NodePorts().filter(fw.CycleState(), PodInfo.of(make_pod()), t, t.alive_rows()).status_at(0)
    assert st.code == fw.Code.ERROR


FITS_CASES = [
    ("non-conflicting ports", ["TCP/127.0.0.1/80"], ["TCP/127.0.0.1/9090"], True),
    (
        "multiple non-conflicting ports",
        ["TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"],
        ["TCP/127.0.0.1/9090", "TCP/127.0.0.1/9191", "TCP/127.0.1.1/8080"],
        True,
    ),
    ("same ports on different protocols", ["TCP/127.0.0.1/80"], ["UDP/127.0.0.1/80"], True),
    ("conflicting ports", ["TCP/127.0.0.1/80"], ["TCP/127.0.0.1/80"], False),
    (
        "multiple ports, some conflicting",
        ["TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"],
        ["TCP/127.0.0.1/9090", "TCP/127.0.1.1/90", "TCP/127.0.1.1/8080"],
        False,
    ),
]


@pytest.mark.parametrize(("name", "wanted", "used", "fits"), FITS_CASES, ids=[c[0] for c in FITS_CASES])
def test_fits(name: str, wanted: list[str], used: list[str], fits: bool) -> None:
    # node_ports_test.go TestFits
    assert verdict(port_pod(*wanted), port_pod(*used, name="e", node="m1")).ok is fits


def test_only_rows_with_ports_in_use_can_conflict() -> None:
    # Berth: many rows, a few holding the port; every row is judged in one call.
    nodes = [make_node(f"n{k}") for k in range(50)]
    placed = [port_pod("TCP/0.0.0.0/80", name=f"e{k}", node=f"n{k}") for k in (3, 17, 42)]
    placed.append(port_pod("TCP/0.0.0.0/81", name="other", node="n5"))
    t = table(nodes, placed)
    statuses = run_filter(NodePorts(), port_pod("TCP/10.0.0.1/80"), t)
    bad = [t.name(int(r)) for r, st in zip(t.alive_rows(), statuses, strict=True) if not st.ok]
    assert bad == ["n3", "n17", "n42"]
    assert all(st == CONFLICT for st in statuses if not st.ok)


def test_a_pod_leaving_frees_its_port() -> None:
    t = table([make_node("m1")], [port_pod("TCP/0.0.0.0/80", name="e", node="m1")])
    info = t.infos[0]
    assert info is not None
    (pi,) = info.pods.values()
    info.remove_pod(pi)
    assert run_filter(NodePorts(), port_pod("TCP/0.0.0.0/80"), t) == [fw.SUCCESS]


def test_a_placed_pods_finished_init_container_holds_no_port() -> None:
    # node_ports_test.go semantics of "non-sidecar initContainer using hostPort", seen from the node's side.
    placed = init_port_pod(False, 8001, name="e", node="m1")
    assert verdict(port_pod("TCP/0.0.0.0/8001"), placed).ok


def test_host_ports_are_containers_and_sidecars() -> None:
    # schedutil.GetHostPorts
    p = make_pod(
        containers=[{"name": "c", "ports": [{"hostPort": 80}, {"containerPort": 9000}]}],
        spec={
            "initContainers": [
                {"name": "i", "ports": [{"hostPort": 81}]},
                {"name": "s", "restartPolicy": "Always", "ports": [{"hostPort": 82, "protocol": "UDP"}]},
            ]
        },
    )
    assert host_ports(p) == [("0.0.0.0", "UDP", 82), ("0.0.0.0", "TCP", 80)]


def test_events_to_register() -> None:
    # node_ports.go EventsToRegister without queueing hints
    A = fw.ActionType
    assert list(NodePorts().events_to_register()) == [
        fw.ClusterEvent("AssignedPod", A.DELETE),
        fw.ClusterEvent("Node", A.ADD | A.UPDATE_NODE_TAINT | A.UPDATE_NODE_LABEL),
    ]


def test_plugin_is_registered_in_tree() -> None:
    assert registry.plugin_class("NodePorts") is NodePorts
