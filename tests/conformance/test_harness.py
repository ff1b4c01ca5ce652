"""The conformance harness's own logic, without a control plane: the
generator is deterministic and makes valid objects (its DRA section's pass
Berth's own decoders and validation), kube-scheduler's log lines parse, and
a Case reports exactly what differs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth.cluster import manifests
from tests.conformance import generator, harness


def test_generator_is_deterministic_per_seed() -> None:
    a, b, c = generator.generate(3), generator.generate(3), generator.generate(4)
    assert a.all_objects() + a.test_pods == b.all_objects() + b.test_pods
    assert a.test_pods != c.test_pods


def test_generated_names_are_unique_and_pods_land_on_generated_nodes() -> None:
    c = generator.generate(5, nodes_count=12, pods=60)
    names = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in c.all_objects() + c.test_pods]
    assert len(names) == len(set(names))
    node_names = {n["metadata"]["name"] for n in c.nodes}
    assert all(p["spec"]["nodeName"] in node_names for p in c.running_pods)
    assert all("nodeName" not in p["spec"] for p in c.test_pods)


def test_scored_log_line_parses() -> None:
    # A line of kube-scheduler v1.34.4 at --vmodule=schedule_one=10 (schedule_one.go:815).
    line = (
        'I1123 06:45:35.067939   17000 schedule_one.go:815] "Plugin scored node for pod" '
        'pod="ns-a/t-1-004" plugin="NodeResourcesFit" node="node-03" score=73'
    )
    m = harness._SCORED.search(line)
    assert m is not None and m.groups() == ("ns-a/t-1-004", "NodeResourcesFit", "node-03", "73")


def test_log_tail_reads_only_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_text("one\ntw")
    tail = harness.LogTail(path)
    assert not tail.seen("tw")
    with path.open("a") as f:
        f.write("o\n")
    assert tail.seen("two") and tail.lines == ["one", "two"]


POD = {"metadata": {"name": "p", "namespace": "ns"}}
V = harness.Verdict


@pytest.mark.parametrize(
    ("kube", "berth", "want"),
    [
        pytest.param(V({"a", "b"}, {"a": {"X": 1}, "b": {"X": 2}}), V({"a", "b"}, {"a": {"X": 1}, "b": {"X": 2}}), []),
        pytest.param(
            V({"a", "b"}),
            V({"b", "c"}),
            ["feasible: only kube-scheduler ['a'], only Berth ['c']"],
            id="feasible sets differ: scores are not compared",
        ),
        pytest.param(
            V({"a", "b"}, {"a": {"X": 1}, "b": {"X": 2}}),
            V({"a", "b"}, {"a": {"X": 1}, "b": {"X": 3}}),
            ["b X: kube-scheduler 2, Berth 3"],
            id="one score differs",
        ),
        pytest.param(
            V({"a", "b"}, {"a": {"X": 1}, "b": {"X": 2}}),
            V({"a", "b"}, {"a": {"X": 1, "Skipped": 0}, "b": {"X": 2, "Skipped": 0}}),
            [],
            id="a plugin kube-scheduler skipped at PreScore counts as 0",
        ),
        pytest.param(
            V({"a"}, {}), V({"a"}, {"a": {"X": 7}}), [], id="one feasible node: kube-scheduler does not score"
        ),
        pytest.param(
            V(set(), message="0/2 nodes are available: 2 Insufficient cpu. preemption: ..."),
            V(set(), message="0/2 nodes are available: 2 Insufficient cpu."),
            [],
            id="unschedulable: the PostFilter tail is not Berth's",
        ),
        pytest.param(
            V(set(), message="0/2 nodes are available: 2 Insufficient cpu. preemption: ..."),
            V(set(), message="0/2 nodes are available: 2 Insufficient memory."),
            [
                "message: kube-scheduler '0/2 nodes are available: 2 Insufficient cpu. preemption: ...', "
                "Berth '0/2 nodes are available: 2 Insufficient memory.'"
            ],
            id="unschedulable for another reason",
        ),
    ],
)
def test_case_reports_what_differs(kube: harness.Verdict, berth: harness.Verdict, want: list[str]) -> None:
    assert harness.Case(POD, kube, berth).disagreements() == want


def test_repro_holds_the_pod_the_nodes_in_question_and_both_verdicts() -> None:
    c = generator.generate(2)
    node = c.nodes[0]["metadata"]["name"]
    case = harness.Case(c.test_pods[0], V({node}), V(set()))
    docs = list(yaml.safe_load_all(harness.repro(c, case)))
    assert docs[0]["disagreements"] == [f"feasible: only kube-scheduler ['{node}'], only Berth []"]
    assert docs[1]["metadata"]["name"] == c.test_pods[0]["metadata"]["name"]
    assert [d["metadata"]["name"] for d in docs if d.get("kind") == "Node"] == [node]
    assert all(d["spec"]["nodeName"] == node for d in docs if d.get("kind") == "Pod" and d is not docs[1])


def test_volume_pods_mount_claims_of_their_namespace_that_never_change() -> None:
    c = generator.generate(2, nodes_count=12, pods=60)
    claims = {o["metadata"]["name"]: o for o in c.objects if o["kind"] == "PersistentVolumeClaim"}
    volumes = {o["metadata"]["name"]: o for o in c.objects if o["kind"] == "PersistentVolume"}
    mounted = [
        (p, v["persistentVolumeClaim"]["claimName"])
        for p in c.test_pods + c.running_pods
        for v in p["spec"].get("volumes", [])
        if "persistentVolumeClaim" in v
    ]
    assert mounted
    for p, name in mounted:
        assert p["metadata"]["namespace"] == generator.VOLUME_NAMESPACE
        own = {v["metadata"]["name"]: v for v in c.pod_volumes.get(p["metadata"]["name"], [])}
        if name in own:  # a claim of its own, provisioned where storage capacity allows
            assert own[name]["spec"]["storageClassName"] == generator.CAPACITY_CLASS
            continue
        claim = claims[name]
        # Pre-bound both ways (the PV controller binds it before judging), or unbindable (no volume that big).
        if claim["spec"].get("volumeName"):
            ref = volumes[claim["spec"]["volumeName"]]["spec"]["claimRef"]
            assert (ref["namespace"], ref["name"]) == (generator.VOLUME_NAMESPACE, name)
        else:
            assert claim["spec"]["resources"]["requests"]["storage"] == "500Gi"
    assert {o["metadata"]["name"] for o in c.bound_claims()} == {
        n for n, o in claims.items() if o["spec"].get("volumeName")
    }


# ---------------------------------------------------------------- DRA

DRA_KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")


def _dra_objects(c: generator.Cluster) -> list[dict[str, Any]]:
    own = [claim for claims in c.pod_claims.values() for claim in claims]
    return [o for o in c.all_objects() if o["kind"] in DRA_KINDS] + own


def _claim_pods(c: generator.Cluster) -> list[dict[str, Any]]:
    return [p for p in c.test_pods if p["spec"].get("resourceClaims")]


def test_dra_section_is_deterministic_per_seed() -> None:
    a, b, other = (generator.generate(s, pods=40) for s in (7, 7, 8))
    assert _dra_objects(a) == _dra_objects(b) and _claim_pods(a) == _claim_pods(b)
    assert a.devices == b.devices and a.held == b.held
    assert _dra_objects(a) != _dra_objects(other)


def test_dra_objects_and_claim_pods_pass_berths_own_decoders_and_validation() -> None:
    c = generator.generate(3, nodes_count=12, pods=60)
    docs = _dra_objects(c) + _claim_pods(c)
    m = manifests.loads(json.dumps(docs), source="generated")
    assert [d.metadata.name for d in m.device_classes] == [*generator.DEVICE_CLASSES, "part", "share", "dgpu"]
    assert len(m.resource_slices) == sum(o["kind"] == "ResourceSlice" for o in docs)
    assert len(m.pods) == len(_claim_pods(c)) > 0
    allocated = [claim for claim in m.resource_claims if claim.status.allocation is not None]
    assert allocated, "some claims are allocated before any pod is judged"
    assert len(m.resource_claim_templates) > 0


def test_claim_pods_name_claims_and_templates_of_their_namespace_and_use_them() -> None:
    c = generator.generate(4, nodes_count=12, pods=60)
    templates = {o["metadata"]["name"] for o in c.objects if o["kind"] == "ResourceClaimTemplate"}
    for pod in _claim_pods(c):
        name = pod["metadata"]["name"]
        assert pod["metadata"]["namespace"] == generator.DRA_NAMESPACE
        own = {claim["metadata"]["name"] for claim in c.pod_claims.get(name, [])}
        for ref in pod["spec"]["resourceClaims"]:
            assert ref.get("resourceClaimTemplateName") in templates or ref.get("resourceClaimName") in own, ref
        used = [k["name"] for k in pod["spec"]["containers"][0]["resources"]["claims"]]
        assert used == [ref["name"] for ref in pod["spec"]["resourceClaims"]]
    pre_created = [claim for claims in c.pod_claims.values() for claim in claims]
    assert pre_created and all(claim["metadata"]["namespace"] == generator.DRA_NAMESPACE for claim in pre_created)
    assert set(c.pod_claims) <= {p["metadata"]["name"] for p in _claim_pods(c)}


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_allocated_claims_hold_devices_that_exist_once_and_pin_pods_where_they_are(seed: int) -> None:
    c = generator.generate(seed, nodes_count=12, pods=60)
    devices = {d.key: d for d in c.devices}
    # The GPUs, NICs and ports (partitions and links are held by claims of their own, below).
    held = [o for o in c.objects if o["kind"] == "ResourceClaim" and _results(o)[0][0] in _OLDER_DRIVERS]
    assert {_results(o)[0] for o in held} == c.held and len(held) == len(c.held)
    for claims in [held, *c.pod_claims.values()]:
        keys = [k for claim in claims if "status" in claim for k in _results(claim)]
        assert len(keys) == len(set(keys)), "no device twice"
        if claims is not held:
            assert not set(keys) & c.held, "a pod's pre-allocated claim takes a free device"
        for claim in claims:
            if "status" not in claim:
                continue
            (key,) = _results(claim)
            device = devices[key]
            selector = claim["status"]["allocation"].get("nodeSelector")
            if device.node:
                fields = selector["nodeSelectorTerms"][0]["matchFields"][0]
                assert fields == {"key": "metadata.name", "operator": "In", "values": [device.node]}
            else:
                assert selector == device.node_selector  # the pool's, or none: all nodes
            assert claim["metadata"].get("finalizers", [generator.DELETE_PROTECTION]) == [generator.DELETE_PROTECTION]


_OLDER_DRIVERS = (generator.GPU_DRIVER, generator.NIC_DRIVER, generator.NET_DRIVER)


def _results(claim: dict[str, Any]) -> list[tuple[str, str, str]]:
    results = claim["status"]["allocation"]["devices"]["results"]
    return [(r["driver"], r["pool"], r["device"]) for r in results]


def test_claim_shapes_cover_every_kind_of_request() -> None:
    seen: set[str] = set()
    for seed in range(1, 6):
        c = generator.generate(seed, nodes_count=12, pods=60)
        specs = [o["spec"]["spec"]["devices"] for o in c.objects if o["kind"] == "ResourceClaimTemplate"]
        specs += [claim["spec"]["devices"] for claims in c.pod_claims.values() for claim in claims]
        seen |= {"template"} if any(o["kind"] == "ResourceClaimTemplate" for o in c.objects) else set()
        seen |= {"pre-allocated"} if any("status" in x for v in c.pod_claims.values() for x in v) else set()
        for spec in specs:
            seen |= {"constraint"} if spec.get("constraints") else set()
            for req in spec["requests"]:
                ex = req.get("exactly", {})
                seen |= {"firstAvailable"} if "firstAvailable" in req else set()
                seen |= {"All"} if ex.get("allocationMode") == "All" else set()
                seen |= {f"count {ex.get('count', 1)}"} if ex else set()
                seen |= {"selector"} if ex.get("selectors") else set()
                seen |= {"no such class"} if ex.get("deviceClassName") == "tpu" else set()
                seen |= {"matches nothing"} if "B200" in json.dumps(ex) else set()
        slices = [o["spec"] for o in c.objects if o["kind"] == "ResourceSlice"]
        seen |= {"allNodes"} if any(s.get("allNodes") for s in slices) else set()
        seen |= {"nodeSelector"} if any(s.get("nodeSelector") for s in slices) else set()
    want = {"template", "pre-allocated", "constraint", "firstAvailable", "All", "count 1", "count 2", "count 8"}
    want |= {"selector", "no such class", "matches nothing", "allNodes", "nodeSelector"}
    assert want <= seen, want - seen


def test_the_make_test_sample_has_pods_with_each_kind_of_claim() -> None:
    # test_differential's defaults: seed 1, 10 nodes, 20 pods.
    refs = [r for p in _claim_pods(generator.generate(1, nodes_count=10, pods=20)) for r in p["spec"]["resourceClaims"]]
    assert any("resourceClaimTemplateName" in r for r in refs) and any("resourceClaimName" in r for r in refs)


@pytest.mark.parametrize(("share", "want"), [(0.0, 0), (1.0, 30)])
def test_claim_share_sets_how_many_pods_have_claims(share: float, want: int) -> None:
    assert len(_claim_pods(generator.generate(2, pods=30, claim_share=share))) == want


@pytest.mark.parametrize("share", [-0.1, 1.5])
def test_a_claim_share_outside_0_to_1_is_refused(share: float) -> None:
    with pytest.raises(ValueError, match="claim_share must be within"):
        generator.generate(2, claim_share=share)


DETAIL = "claim ns-a/c, request gpu: 9 devices needed, 8 of 8 matching devices are free"


@pytest.mark.parametrize(
    ("message", "details", "want"),
    [
        pytest.param("0/3 nodes are available: 3 Insufficient cpu.", set(), None, id="no details"),
        pytest.param(
            f"0/3 nodes are available: 2 cannot allocate all claims, 2 {DETAIL}, 1 Insufficient cpu.",
            {DETAIL},
            "0/3 nodes are available: 2 cannot allocate all claims, 1 Insufficient cpu.",
            id="a detail with commas, in the middle",
        ),
        pytest.param(
            f"0/3 nodes are available: 3 cannot allocate all claims, 3 {DETAIL}.",
            {DETAIL},
            "0/3 nodes are available: 3 cannot allocate all claims.",
            id="last",
        ),
        pytest.param(
            f"0/12 nodes are available: 1 {DETAIL}, 1 node(s) were unschedulable, 10 cannot allocate all claims, "
            "10 claim ns-a/c, request gpu: no device matches the selectors (class and request).",
            {DETAIL, "claim ns-a/c, request gpu: no device matches the selectors (class and request)"},
            "0/12 nodes are available: 1 node(s) were unschedulable, 10 cannot allocate all claims.",
            id="first, and two of them",
        ),
    ],
)
def test_upstream_message_leaves_out_berths_dra_details(message: str, details: set[str], want: str | None) -> None:
    assert V(set(), message=message, dra_details=details).upstream_message() == (want or message)


@pytest.mark.parametrize(
    ("reason", "want"),
    [
        ("cannot allocate all claims", []),
        (f"cannot allocate all claims, {DETAIL}", [DETAIL]),
        ("resourceclaim not available on the node", []),
        ('could not find ResourceClaim "ns-a/x"', []),  # PreFilter's: kube-scheduler's too
    ],
)
def test_dra_details_are_what_berth_adds_to_an_upstream_reason(reason: str, want: list[str]) -> None:
    assert harness.dra_details(reason) == want


def test_a_claim_pods_message_agrees_without_berths_details() -> None:
    kube = V(set(), message="0/3 nodes are available: 3 cannot allocate all claims. still not schedulable, ...")
    berth = V(
        set(), message=f"0/3 nodes are available: 3 cannot allocate all claims, 3 {DETAIL}.", dra_details={DETAIL}
    )
    assert harness.Case(POD, kube, berth).disagreements() == []
    berth.dra_details = set()  # not known to be Berth's: a disagreement
    assert harness.Case(POD, kube, berth).disagreements()


def test_no_fit_log_line_parses_with_go_quoting() -> None:
    # schedule_one.go:1077 at V(2); the message quoted as %q does.
    line = (
        'I1123 08:27:02.469579   24845 schedule_one.go:1077] "Unable to schedule pod; no fit; waiting" '
        'pod="ns-a/t-1-018" err="0/10 nodes are available: could not find ResourceClaim \\"ns-a/x\\". '
        'no new claims to deallocate"'
    )
    m = harness._NO_FIT.search(line)
    assert m is not None and m.group(1) == "ns-a/t-1-018"
    assert json.loads(f'"{m.group(2)}"') == (
        '0/10 nodes are available: could not find ResourceClaim "ns-a/x". no new claims to deallocate'
    )


def test_figures_count_claim_pods() -> None:
    claim_pod = {"metadata": {"name": "q", "namespace": "ns"}, "spec": {"resourceClaims": [{"name": "c"}]}}
    f = harness.Figures()
    f.add([harness.Case(claim_pod, V({"a"}), V({"a"})), harness.Case(claim_pod, V({"a"}), V(set()))])
    f.add([harness.Case({**POD, "spec": {}}, V({"a"}), V({"a"}))])
    assert (f.pods, f.claim_pods, f.claim_pods_agree) == (3, 2, 1)
    assert "2 pods with ResourceClaims, 1 of them agree completely" in str(f)


# ---------------------------------------------------------------- Kubernetes 1.37's kinds


def _kinds_of(c: generator.Cluster, pod: dict[str, Any]) -> set[str]:
    """Which of generator.NEW_KINDS a test pod has."""
    kinds = {r["name"].removesuffix("-claim") for r in pod["spec"].get("resourceClaims", [])} & set(generator.NEW_KINDS)
    requests = {n for ctr in pod["spec"]["containers"] for n in (ctr.get("resources") or {}).get("requests", {})}
    if requests & set(generator.DRA_EXTENDED):
        kinds.add("extended")
    if c.pod_volumes.get(pod["metadata"]["name"]):
        kinds.add("capacity")
    return kinds


def test_the_make_test_sample_has_a_pod_of_each_new_kind() -> None:
    c = generator.generate(1, nodes_count=10, pods=20)
    seen = set().union(*(_kinds_of(c, p) for p in c.test_pods))
    assert seen == set(generator.NEW_KINDS)
    assert all(harness.needs_own_pass(c, p) for p in c.test_pods if _kinds_of(c, p))


def _is_new(o: dict[str, Any]) -> bool:
    name, kind = o["metadata"]["name"], o["kind"]
    return (
        kind in ("CSIDriver", "CSIStorageCapacity")
        or (kind == "StorageClass" and name == generator.CAPACITY_CLASS)
        or (kind == "DeviceClass" and name in ("part", "share", "dgpu"))
        or (kind == "ResourceSlice" and o["spec"]["driver"] in (generator.PART_DRIVER, generator.SHARE_DRIVER))
        or (kind == "ResourceClaim" and name.startswith(("held-part-", "held-share-")))
        or (kind == "ResourceClaimTemplate" and name.endswith(generator.NEW_KINDS))
    )


def test_the_new_kinds_leave_the_older_pods_and_objects_as_they_were(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 1.37 sections draw from their own stream: what the older features
    make for a seed is what they made before."""
    full = generator.generate(3, nodes_count=12, pods=40)
    monkeypatch.setattr(generator, "SECTIONS", generator.SECTIONS[:-2])
    monkeypatch.setattr(generator, "with_new_kind", lambda c, pod, kind: pod)
    base = generator.generate(3, nodes_count=12, pods=40)
    assert [o for o in full.objects if not _is_new(o)] == base.objects
    assert [n["metadata"]["name"] for n in full.nodes] == [n["metadata"]["name"] for n in base.nodes]
    for a, b in zip(full.test_pods, base.test_pods, strict=True):
        if not _kinds_of(full, a):
            assert a == b


def test_partitions_share_counters_in_a_slice_of_their_own() -> None:
    c = generator.generate(2, nodes_count=12, pods=10)
    slices = [o for o in c.objects if o["kind"] == "ResourceSlice" and o["spec"]["driver"] == generator.PART_DRIVER]
    assert slices
    pools: dict[str, list[dict[str, Any]]] = {}
    for s in slices:
        pools.setdefault(s["spec"]["pool"]["name"], []).append(s["spec"])
    for specs in pools.values():
        counters, devices = specs
        assert "sharedCounters" in counters and "devices" not in counters
        assert "devices" in devices and "sharedCounters" not in devices
        assert all(spec["pool"]["resourceSliceCount"] == 2 for spec in specs)
        used = sum(int(d["consumesCounters"][0]["counters"]["memory"]["value"][:-2]) for d in devices["devices"])
        assert used == 3 * 40, "whole, halves and quarters each use the GPU's 40Gi"


def test_new_objects_pass_berths_own_decoders_and_validation() -> None:
    c = generator.generate(5, nodes_count=12, pods=40)
    docs = [o for o in c.objects if o["kind"] in (*DRA_KINDS, "CSIDriver", "CSIStorageCapacity", "StorageClass")]
    docs += [v for vs in c.pod_volumes.values() for v in vs]
    docs += [p for p in c.test_pods if _kinds_of(c, p)]
    m = manifests.loads(json.dumps(docs), source="generated")
    assert any(cls.spec.extended_resource_name == generator.DGPU for cls in m.device_classes)
    shares = [
        r for claim in m.resource_claims if claim.status.allocation for r in claim.status.allocation.devices.results
    ]
    assert any(r.share_id for r in shares), "a link is shared before any pod is judged"
    tainted = [d for s in m.resource_slices for d in s.spec.devices if d.taints]
    assert {t.effect for d in tainted for t in d.taints} <= {"NoSchedule", "None"} and tainted
