"""Whatever sequence of upserts, deletes, binds, evictions and refused batches
the Cluster feed receives, the cache's per-node accounting equals the sum over
the pods the cluster holds on each node, every pod counts once, and a refused
batch leaves the whole state as it was (a Hypothesis state machine).

The number of examples comes from the loaded Hypothesis profile (``default``
in ``make test``, ``fuzz`` under ``HYPOTHESIS_PROFILE=fuzz``)."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from hypothesis import event, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from berth import errors
from berth.cache.table import INT64_MAX
from berth.cluster import model
from berth.cluster.sources import BindError
from berth.testing import make_node, make_pod
from tests.core.feed import build, check_accounting, run_now, state

NODES = ["n1", "n2", "n3"]
NAMES = ["p0", "p1", "p2", "p3", "p4", "p5"]
UIDS = ["u0", "u1"]

# Small amounts, and amounts near int64 so sums overflow now and then.
milli = st.one_of(st.integers(0, 4000), st.integers(INT64_MAX // 2 - 1000, INT64_MAX // 1000 * 1000))
# Quantities are bounded by their milli value (resource.Quantity.MilliValue fits an int64).
memory = st.one_of(st.integers(0, 2**30), st.integers(2**52, INT64_MAX // 1000))
host_port = st.sampled_from([0, 0, 80, 443])


@st.composite
def pods(draw: st.DrawFn) -> model.Pod:
    name = draw(st.sampled_from(NAMES))
    containers: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 2))):
        requests: dict[str, Any] = {}
        if draw(st.booleans()):
            requests["cpu"] = f"{draw(milli)}m"
        if draw(st.booleans()):
            requests["memory"] = draw(memory)
        if draw(st.booleans()):
            requests["example.com/gpu"] = draw(st.integers(0, 4))
        c: dict[str, Any] = {"name": f"c{i}", "resources": {"requests": requests}}
        port = draw(host_port)
        if port:
            c["ports"] = [{"containerPort": port, "hostPort": port}]
        containers.append(c)
    pod = make_pod(
        name,
        # Mostly the name's own uid (updates, moves), sometimes another (collisions, re-creations).
        uid=draw(st.sampled_from([f"u-{name}"] * 3 + UIDS[:2])),
        containers=containers,
        node_name=draw(st.sampled_from(["", "", "n1", "n1", *NODES, "ghost"])),
        labels={"app": draw(st.sampled_from(["web", "db"]))},
    )
    if draw(st.integers(0, 9)) == 0:
        pod.status.phase = "Succeeded"
    return pod


def bad_pods() -> st.SearchStrategy[model.Pod]:
    """A pod the API server would reject."""
    return st.sampled_from(["Bad_Name", "-x", "x" * 254]).map(lambda n: make_pod(n)) | st.builds(
        lambda: make_pod("ok", labels={"bad key": "v"})
    )


class Feed(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.berth = build()
        self.cluster = self.berth.cluster

    def refused(self, call: Any, *kinds: type[Exception]) -> bool:
        """Run a feed call; if it is refused (with one of ``kinds``) nothing changed."""
        before = state(self.berth)
        try:
            call()
        except kinds as e:
            event(f"refused: {type(e).__name__}")
            assert state(self.berth) == before
            return True
        event("applied")
        return False

    @rule(names=st.lists(st.sampled_from(NODES), min_size=1, max_size=3), cpu=milli)
    def upsert_nodes(self, names: list[str], cpu: int) -> None:
        nodes = [make_node(n, cpu=f"{cpu}m", memory="64Gi", pods=110) for n in names]
        refused = self.refused(lambda: self.cluster.upsert_nodes(nodes), errors.InvalidArgument)
        assert refused == (len(set(names)) < len(names))

    @rule(names=st.lists(st.sampled_from([*NODES, "ghost"]), max_size=3))
    def delete_nodes(self, names: list[str]) -> None:
        self.cluster.delete_nodes(names)
        assert not set(names) & set(self.cluster.nodes)

    @rule(batch=st.lists(pods(), min_size=1, max_size=4))
    def upsert_pods(self, batch: list[model.Pod]) -> None:
        expect_refusal = self.must_refuse(batch)
        refused = self.refused(lambda: self.cluster.upsert_pods(batch), errors.BerthError)
        if expect_refusal:
            assert refused, expect_refusal
        if not refused:
            for pod in batch:
                assert self.cluster.pods[pod.key].metadata.uid == pod.metadata.uid

    def must_refuse(self, batch: list[model.Pod]) -> str:
        """Why the batch must be refused (a name or uid twice, a uid another
        pod holds, a bound pod moved); "" when it may be accepted — it may
        still be refused for an int64 overflow."""
        keys = [p.key for p in batch]
        uids = [p.metadata.uid for p in batch]
        if len(set(keys)) < len(keys) or len(set(uids)) < len(uids):
            return "duplicate"
        for pod in batch:
            for held in self.cluster.pods.values():
                if held.metadata.uid == pod.metadata.uid and held.key != pod.key:
                    return "uid held"
            old = self.cluster.pods.get(pod.key)
            if (
                old is not None
                and old.metadata.uid == pod.metadata.uid
                and old.spec.node_name
                and old.spec.node_name != pod.spec.node_name
            ):
                return "moved"
        return ""

    @rule(good=st.lists(pods(), max_size=2), bad=bad_pods(), at=st.integers(0, 2))
    def upsert_an_invalid_batch(self, good: list[model.Pod], bad: model.Pod, at: int) -> None:
        batch = [*good]
        batch.insert(min(at, len(batch)), bad)
        assert self.refused(lambda: self.cluster.upsert_pods(batch), errors.BerthError)

    @rule(names=st.lists(st.sampled_from(NAMES), max_size=3))
    def delete_pods(self, names: list[str]) -> None:
        self.cluster.delete_pods(f"default/{n}" for n in names)

    @rule(name=st.sampled_from(NAMES), node=st.sampled_from([*NODES, "ghost"]))
    def bind(self, name: str, node: str) -> None:
        pod = self.cluster.pods.get(f"default/{name}")
        if pod is None:
            return
        before = state(self.berth)
        try:
            run_now(self.cluster.bind(pod, node))
        except BindError:
            event("bind refused")
            assert state(self.berth) == before
            return
        event("bound")
        assert self.cluster.pods[pod.key].spec.node_name == node

    @rule(name=st.sampled_from(NAMES))
    def evict(self, name: str) -> None:
        pod = self.cluster.pods.get(f"default/{name}")
        if pod is not None:
            run_now(self.cluster.evict(pod, "test"))
            assert pod.key not in self.cluster.pods

    @invariant()
    def accounting_is_exact(self) -> None:
        check_accounting(self.berth)


# Examples come from the profile; each runs a short sequence so the default
# profile stays within a few seconds.
Feed.TestCase.settings = settings(settings(), stateful_step_count=25)
test_cluster_feed_keeps_exact_accounting = Feed.TestCase
