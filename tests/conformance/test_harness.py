"""The conformance harness's own logic, without a control plane: the
generator is deterministic and makes valid-looking objects, kube-scheduler's
log lines parse, and a Case reports exactly what differs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

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
