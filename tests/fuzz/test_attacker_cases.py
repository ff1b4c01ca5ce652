"""Every input of the attacker's report (issue 11), sent exactly, through the
fuzzers' checks: no 5xx and a JSON ``{"Error": ...}`` on every HTTP error,
no UNKNOWN/INTERNAL over gRPC, a rejected request changes nothing, and
afterwards the invariants hold and the canary answers as before."""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import msgspec
import pytest

from berth.adapters.grpc import convert
from berth.api.v1 import cluster_pb2, model_pb2, scheduler_pb2
from berth.cluster import model
from tests.fuzz import mutate, runner
from tests.fuzz.corpus import GrpcCase, HttpCase
from tests.fuzz.harness import MAX_BODY, POOL_NAMES, POOL_NODES, RESIDENTS, Tally, Target, serving
from tests.http.payloads import api_node, api_pod, args

pytestmark = pytest.mark.fuzz


class Probe:
    """Sends one request at a time through the fuzzers' checks."""

    def __init__(self, target: Target, tally: Tally, canary: dict[str, Any]) -> None:
        self.target = target
        self.tally = tally
        self.n = 0
        self.checker = runner.Checker(target, tally, canary)

    async def http(
        self, verb: str, body: Any, *, headers: dict[str, str] | None = None, method: str = "POST", path: str = ""
    ) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else mutate.dumps(body)
        # As kube-scheduler sends them (a verb refuses any other type with 415).
        headers = {"Content-Type": "application/json", **(headers or {})}
        case = HttpCase(verb, method, path or f"/scheduler/{verb}", data, verb, headers, plain_length=len(data))
        return await self.send_http(case)

    async def send_http(self, case: HttpCase) -> tuple[int, Any]:
        before = self.target.state()
        status, answer = await runner.send_http(self.target, case)
        runner.check_http(case, status, answer, self.tally, self.n)
        if status >= 400 and self.target.state() != before:
            self.tally.fail(f"a rejected {case.verb} changed the cluster", index=self.n, what=case.what)
        self.checker.invariants(self.n, case.what, case.body)
        self.n += 1
        try:
            return status, json.loads(answer)
        except ValueError:
            return status, answer

    async def rpc(self, method: str, request: bytes | Any, *, streaming: bool = False) -> tuple[grpc.StatusCode, str]:
        data = request if isinstance(request, bytes) else request.SerializeToString()
        case = GrpcCase(method, data, method.rsplit("/", 1)[1], streaming)
        before = self.target.state()
        code, details, resp = await runner.send_grpc(self.target, case)
        runner.check_grpc(self.target, case, code, details, resp, self.tally, self.n)
        if code != grpc.StatusCode.OK and self.target.state() != before:
            self.tally.fail(f"a rejected {case.what} ({code.name}) changed the cluster", index=self.n, what=case.what)
        self.checker.invariants(self.n, case.what, case.request)
        self.n += 1
        return code, details


def _pod(**kw: Any) -> dict[str, Any]:
    return api_pod("attacker", **kw)


def _pb_pod(name: str = "attacker", **kw: Any) -> model_pb2.Pod:
    return convert.pod_to_pb(msgspec.convert(api_pod(name, **kw), type=model.Pod))


def _with_cpu(value: Any) -> dict[str, Any]:
    pod = _pod()
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = value
    return pod


async def _quantity_everywhere(p: Probe, value: Any) -> None:
    for verb in ("filter", "prioritize"):
        await p.http(verb, args(_with_cpu(value), names=POOL_NAMES))
        node = copy.deepcopy(POOL_NODES[0])
        node["status"]["allocatable"]["cpu"] = value
        await p.http(verb, args(_pod(), nodes=[node, POOL_NODES[1]]))
    await p.http("preempt", {"Pod": _with_cpu(value), "NodeNameToMetaVictims": {}})


async def bad_quantity_strings(p: Probe) -> None:
    for q in ("1.5.3Gi", "1e400", "1e300000", mutate.Raw("1e300000"), "99999999999999999999999999Ei", "1 Gi"):
        await _quantity_everywhere(p, q)


async def deeply_nested_json(p: Probe) -> None:
    for nest in ("[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000):
        pod = _pod()
        pod["metadata"]["labels"] = mutate.Raw(nest)
        await p.http("filter", args(pod, names=POOL_NAMES))
        await p.http("bind", mutate.Raw(nest))


async def integers_beyond_int64(p: Probe) -> None:
    for big in (2**63, -(2**63) - 1, 2**64):
        await p.http("filter", args(_pod(priority=big), names=POOL_NAMES))
        await p.http("preempt", {"Pod": _pod(), "NodeNameToMetaVictims": {"n0": {"Pods": [], "NumPDBViolations": big}}})
        await _quantity_everywhere(p, big)


async def integers_beyond_4300_digits(p: Probe) -> None:
    for digits in ("1" + "0" * 4300, "9" * 20_000):
        await p.http("filter", args(_pod(priority=mutate.Raw(digits)), names=POOL_NAMES))
        await _quantity_everywhere(p, mutate.Raw(digits))
        await _quantity_everywhere(p, digits)


async def non_utf8_bytes(p: Probe) -> None:
    body = mutate.dumps(args(_pod(), names=POOL_NAMES))
    for bad in (b"\xff", b"\xc3\x28", b"\xed\xa0\x80"):
        await p.http("filter", body.replace(b'"attacker"', b'"att' + bad + b'acker"'))
        await p.http("bind", b'{"PodName": "' + bad + b'", "Node": "n0"}')
    await p.http("filter", args(api_pod("\ud800"), names=POOL_NAMES))  # a lone surrogate, escaped


async def duplicated_nodes_in_full_object_mode(p: Probe) -> None:
    busy = copy.deepcopy(POOL_NODES[2])
    for verb in ("filter", "prioritize"):
        for nodes in (
            [POOL_NODES[0], POOL_NODES[0]],
            [busy, POOL_NODES[1], busy],
            [POOL_NODES[3]] * 3 + [POOL_NODES[5]],
        ):
            status, answer = await p.http(verb, args(_pod(cpu="1"), nodes=nodes))
            if status == 200 and verb == "filter" and isinstance(answer, dict):
                sent = {json.dumps(n, sort_keys=True) for n in nodes}
                back = answer["Nodes"]["items"] if answer.get("Nodes") else []
                assert all(json.dumps(n, sort_keys=True) in sent for n in back), (
                    "filter answered a node it was not sent"
                )


async def absurd_but_well_formed_requests(p: Probe) -> None:
    for cpu, memory in (("100000", "1Ei"), ("9223372036854775", "8Ei"), ("1m", "1"), ("0", "0")):
        pod = _pod(cpu=cpu, memory=memory)
        await p.http("prioritize", args(pod, names=POOL_NAMES))
        await p.http("prioritize", args(pod, nodes=POOL_NODES))
    for cpu_milli, memory_bytes in ((2**62, 2**63 - 1), (10**17, 2**60), (1, 1)):
        message = _pb_pod()
        message.spec.containers[0].requests.update({"cpu": cpu_milli, "memory": memory_bytes})
        await p.rpc(
            "/berth.v1.Scheduler/Prioritize",
            scheduler_pb2.PrioritizeRequest(pod=message, nodes=scheduler_pb2.NodeSet(node_names=POOL_NAMES)),
        )
        huge = api_node("huge", cpu="9223372036854775", memory="8Ei")
        await p.http("prioritize", args(_pod(cpu="1m"), nodes=[huge, POOL_NODES[0]]))


async def oversized_bodies(p: Probe) -> None:
    body = mutate.dumps(args(_pod(), names=POOL_NAMES))
    for over in (1, 1000, 64 * 1024 - 1, 64 * 1024 + 1):
        status, _ = await p.http("filter", body + b" " * (MAX_BODY - len(body) + over))
        assert status == 413, f"a body {over} bytes over the limit got {status}"
    await p.http("filter", args(_pod(), nodes=[api_node(f"n{i}") for i in range(2000)]))


async def gzip_bombs(p: Probe) -> None:
    for inflated in (2 * MAX_BODY, 16 * MAX_BODY):
        status, _ = await p.http("filter", mutate.gzip_bomb(inflated), headers={"Content-Encoding": "gzip"})
        assert status == 413, f"a gzip body inflating to {inflated} bytes got {status}"
    ok = mutate.gzip_body(mutate.dumps(args(_pod(), names=POOL_NAMES)))
    status, _ = await p.http("filter", ok, headers={"Content-Encoding": "gzip"})
    assert status == 200
    await p.http("filter", b"not gzip at all", headers={"Content-Encoding": "gzip"})


async def uid_and_name_collisions_in_the_grpc_feed(p: Probe) -> None:
    resident = RESIDENTS[0]
    uid = resident["metadata"]["uid"]
    # Another name, the same uid, on another node.
    other = _pb_pod("impostor", uid=uid, node_name=POOL_NAMES[3], cpu="2")
    await p.rpc("/berth.v1.Cluster/UpsertPods", cluster_pb2.UpsertPodsRequest(pods=[other]))
    # Two pods in one batch with one uid, and two with one name.
    twins = [_pb_pod("twin-a", uid="uid-twin", node_name="n0"), _pb_pod("twin-b", uid="uid-twin", node_name="n1")]
    await p.rpc("/berth.v1.Cluster/UpsertPods", cluster_pb2.UpsertPodsRequest(pods=twins))
    same = [_pb_pod("same", uid="uid-same-1", node_name="n0"), _pb_pod("same", uid="uid-same-2", node_name="n1")]
    await p.rpc("/berth.v1.Cluster/UpsertPods", cluster_pb2.UpsertPodsRequest(pods=same))
    node = convert.node_to_pb(msgspec.convert(POOL_NODES[0], type=model.Node))
    await p.rpc("/berth.v1.Cluster/UpsertNodes", cluster_pb2.UpsertNodesRequest(nodes=[node, node]))


async def invalid_pdb_selector(p: Probe) -> None:
    pdb = model_pb2.PodDisruptionBudget(
        metadata=model_pb2.ObjectMeta(name="bogus", namespace="default"),
        selector=model_pb2.LabelSelector(
            match_expressions=[model_pb2.LabelSelectorRequirement(key="app", operator="Bogus", values=["web"])]
        ),
        disruptions_allowed=0,
    )
    await p.rpc(
        "/berth.v1.Cluster/UpsertPodDisruptionBudgets", cluster_pb2.UpsertPodDisruptionBudgetsRequest(budgets=[pdb])
    )
    # n0 (8 cpu) holds resident-0 and resident-4 (700m each): a 7-cpu pod
    # fits after one eviction, so the budgets over the victims are counted.
    uids = [RESIDENTS[0]["metadata"]["uid"], RESIDENTS[4]["metadata"]["uid"]]
    victims = {"n0": {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": 0}}
    await p.http("preempt", {"Pod": _pod(cpu="7", priority=1000), "NodeNameToMetaVictims": victims})
    await p.rpc(
        "/berth.v1.Scheduler/Preempt",
        scheduler_pb2.PreemptRequest(
            pod=_pb_pod(cpu="7", priority=1000), node_name_to_victims={"n0": scheduler_pb2.Victims(pod_uids=uids)}
        ),
    )


async def requests_summing_past_int64(p: Probe) -> None:
    pods = []
    for i in range(3):
        pod = _pb_pod(f"heavy-{i}", node_name="n0")
        pod.spec.containers[0].requests["cpu"] = 2**62
        pods.append(pod)
    await p.rpc("/berth.v1.Cluster/UpsertPods", cluster_pb2.UpsertPodsRequest(pods=pods))
    for pod in pods:  # one by one: each fits alone, the sum does not
        await p.rpc("/berth.v1.Cluster/UpsertPods", cluster_pb2.UpsertPodsRequest(pods=[pod]))
    await p.http("filter", args(_pod(), names=POOL_NAMES))


async def clearing_node_name_of_a_bound_pod(p: Probe) -> None:
    pod = msgspec.convert(RESIDENTS[1], type=model.Pod)
    unbound = convert.pod_to_pb(msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name="")))
    await p.rpc("/berth.v1.Cluster/UpsertPods", cluster_pb2.UpsertPodsRequest(pods=[unbound]))
    moved = convert.pod_to_pb(msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name="n5")))
    await p.rpc("/berth.v1.Cluster/UpsertPods", cluster_pb2.UpsertPodsRequest(pods=[moved]))


async def two_pods_with_one_name_in_submit(p: Probe) -> None:
    a, b = _pb_pod("dup", uid="uid-dup-1"), _pb_pod("dup", uid="uid-dup-2")
    for pod in (a, b):
        pod.spec.scheduler_name = "berth"
    await p.rpc("/berth.v1.Scheduler/Submit", scheduler_pb2.SubmitRequest(pods=[a, b]))
    await p.rpc("/berth.v1.Scheduler/Submit", scheduler_pb2.SubmitRequest(pods=[b]))


async def explain_with_10000_unknown_nodes(p: Probe) -> None:
    names = [f"unknown-node-{i:05d}" for i in range(10_000)]
    for profile in ("", "berth"):
        request = scheduler_pb2.ExplainRequest(pod=_pb_pod(), node_names=names, profile=profile)
        await p.rpc("/berth.v1.Scheduler/Explain", request)
    await p.http("filter", args(_pod(), names=names))
    await p.http("prioritize", args(_pod(), names=names))


async def undecodable_protobuf_bytes(p: Probe) -> None:
    for method in runner.RESPONSES:
        for junk in (
            b"\xff\xff\xff\xff",
            b"\x0a\xff\x01",
            b"\x08" + b"\xff" * 11,
            b"\x0a\x02\xc3\x28",
            b"\x9b\x06" * 5000,
        ):
            await p.rpc(method, junk, streaming=method.endswith(("WatchDecisions", "WatchDecisionBatches")))


async def a_rejected_batch_changes_nothing(p: Probe) -> None:
    good = convert.node_to_pb(msgspec.convert(api_node("n9"), type=model.Node))
    await p.rpc("/berth.v1.Cluster/UpsertNodes", cluster_pb2.UpsertNodesRequest(nodes=[good, model_pb2.Node()]))
    bad_taint = convert.node_to_pb(msgspec.convert(api_node("n8"), type=model.Node))
    bad_taint.spec.taints.add(key="k", value="v", effect="Bogus")
    await p.rpc("/berth.v1.Cluster/UpsertNodes", cluster_pb2.UpsertNodesRequest(nodes=[good, bad_taint]))
    pods = [_pb_pod("fine", node_name="n0"), model_pb2.Pod(metadata=model_pb2.ObjectMeta(name="no-containers"))]
    await p.rpc("/berth.v1.Cluster/UpsertPods", cluster_pb2.UpsertPodsRequest(pods=pods))


async def default_404_405_and_protocol_errors_answer_json(p: Probe) -> None:
    await p.http("odd", b"", method="GET", path="/scheduler/filter")
    await p.http("odd", b"{}", path="/scheduler/unknown")
    await p.http("odd", b"{}", path="/nope")
    raw = b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}"
    await p.send_http(HttpCase("raw", "RAW", "", b"", "bad Content-Length", raw=raw))


CASES: dict[str, Callable[[Probe], Awaitable[None]]] = {
    f.__name__: f
    for f in (
        bad_quantity_strings,
        deeply_nested_json,
        integers_beyond_int64,
        integers_beyond_4300_digits,
        non_utf8_bytes,
        duplicated_nodes_in_full_object_mode,
        absurd_but_well_formed_requests,
        oversized_bodies,
        gzip_bombs,
        uid_and_name_collisions_in_the_grpc_feed,
        invalid_pdb_selector,
        requests_summing_past_int64,
        clearing_node_name_of_a_bound_pod,
        two_pods_with_one_name_in_submit,
        explain_with_10000_unknown_nodes,
        undecodable_protobuf_bytes,
        a_rejected_batch_changes_nothing,
        default_404_405_and_protocol_errors_answer_json,
    )
}


@pytest.mark.parametrize("case", list(CASES), ids=[c.replace("_", " ") for c in CASES])
async def test_attacker_input_gets_a_client_error_and_corrupts_nothing(case: str) -> None:
    tally = Tally(case, 0)
    async with serving() as target:
        probe = Probe(target, tally, await target.canary())
        await CASES[case](probe)
        await probe.checker.canary(probe.n)
    assert not tally.failures, tally.report()
