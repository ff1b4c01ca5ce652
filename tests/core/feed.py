"""Shared by the Cluster feed's tests: a Berth on its embedded cluster, the
whole state a refused batch must leave as it was, and what the cache must
hold for the pods the cluster has."""

from __future__ import annotations

import collections
from collections.abc import Coroutine
from typing import Any

import msgspec

from berth import app
from berth.cache.infos import PodInfo
from berth.cluster import model


def build(*, run_loop: bool = False) -> app.Berth:
    return app.build(run_loop=run_loop)


def run_now(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never suspends (the embedded cluster's bind/evict) to its end."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise AssertionError("the coroutine suspended")


def state(berth: app.Berth) -> dict[str, Any]:
    """Everything a feed call may change, as plain data (deep-comparable)."""
    cluster, core, cache = berth.cluster, berth.core, berth.core.cache
    table = cache.table
    n = table.size
    return {
        "nodes": msgspec.to_builtins(cluster.nodes),
        "pods": msgspec.to_builtins(cluster.pods),
        "groups": msgspec.to_builtins(cluster.pod_groups),
        "pdbs": msgspec.to_builtins(cluster.pdbs),
        "bindings": list(cluster.bindings),
        "store": sorted((p.metadata.uid, p.key) for p in core.pods.all()),
        "store_pdbs": msgspec.to_builtins(core.pdbs.list()),
        "cache_pods": sorted((pi.uid, node, assumed) for pi, node, assumed in cache.pods()),
        "columns": list(table.columns.names),
        "index": dict(table.index),
        "alive": table.alive[:n].tolist(),
        "alloc": table.alloc[:n].tolist(),
        "req": table.req[:n].tolist(),
        "req_nz": table.req_nz[:n].tolist(),
        "infos": [
            None if info is None else (info.name, sorted(info.pods), sorted(info.used_ports.items()))
            for info in table.infos
        ],
        "pod_index": sorted(cache.pod_index.entries),
    }


def counted(pod: model.Pod) -> bool:
    """Whether a pod the cluster holds counts on a node."""
    return bool(pod.spec.node_name) and pod.status.phase not in ("Succeeded", "Failed")


def check_accounting(berth: app.Berth) -> None:
    """Per node, the cache's requested, non-zero requested, pod count and host
    ports equal the sums over the pods the cluster holds there; every pod
    counts once, on its own node."""
    cluster, cache = berth.cluster, berth.core.cache
    table = cache.table
    bound = [p for p in cluster.pods.values() if counted(p)]
    by_node: dict[str, list[PodInfo]] = collections.defaultdict(list)
    for p in bound:
        by_node[p.spec.node_name].append(PodInfo.of(p))
    assert sorted((pi.uid, node) for pi, node, _ in cache.pods()) == sorted(
        (p.metadata.uid, p.spec.node_name) for p in bound
    )
    seen: list[str] = []
    for row in range(table.size):
        name = table.name(row)
        want_req = [0] * len(table.columns)
        want_nz = [0] * len(table.columns)
        ports: collections.Counter[tuple[str, str, int]] = collections.Counter()
        for pi in by_node.get(name, []):
            for resource, (req, nz) in pi.usage.items():
                c = table.columns.index[resource]
                want_req[c] += req
                want_nz[c] += nz
            ports.update(pi.host_ports)
        width = table.req.shape[1]
        assert table.req[row, :width].tolist() == want_req[:width], name
        assert table.req_nz[row, :width].tolist() == want_nz[:width], name
        assert all(v == 0 for v in want_req[width:] + want_nz[width:]), name
        info = table.infos[row]
        assert info is not None
        assert sorted(info.pods) == sorted(pi.uid for pi in by_node.get(name, [])), name
        assert dict(info.used_ports) == dict(ports), name
        assert bool(table.alive[row]) == (name in cluster.nodes), name
        seen.extend(info.pods)
    assert sorted(seen) == sorted(p.metadata.uid for p in bound)
    assert set(cache.pod_index.entries) == {p.metadata.uid for p in bound}
    assert sorted(p.metadata.uid for p in berth.core.pods.all()) == sorted(
        p.metadata.uid for p in cluster.pods.values()
    )
