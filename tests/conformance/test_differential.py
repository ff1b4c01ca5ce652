"""Berth against the real kube-scheduler (the bed's release) on seeded random clusters
(:mod:`tests.conformance.harness` says how each side is read).

``make test`` runs the small sample (one cluster, 20 pods, six of them with
ResourceClaims), which must agree completely; ``make conformance`` runs the large one (``BERTH_CONFORMANCE_*``
below) and prints its figures. Every disagreement is written as a YAML repro
into the test's tmp dir and shown in the failure. Replay one cluster with
``BERTH_CONFORMANCE_SEED=N BERTH_CONFORMANCE_CLUSTERS=1``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conformance import generator, harness
from tests.e2e.conftest import unavailable
from tests.e2e.controlplane import bed

pytestmark = [pytest.mark.e2e, pytest.mark.conformance]

CLUSTERS = int(os.environ.get("BERTH_CONFORMANCE_CLUSTERS", "1"))
PODS = int(os.environ.get("BERTH_CONFORMANCE_PODS", "20"))  # per cluster
NODES = int(os.environ.get("BERTH_CONFORMANCE_NODES", "10"))
SEED = int(os.environ.get("BERTH_CONFORMANCE_SEED", "1"))
#: The share of test pods with ResourceClaims (a DRA-heavy sample: 0.8).
CLAIMS = float(os.environ.get("BERTH_CONFORMANCE_CLAIMS", "0.3"))
#: The share of test pods with one of Kubernetes 1.37's kinds (partitionable or
#: consumable devices, device taints, extended resources backed by DRA, storage
#: capacity: generator.NEW_KINDS); each kind is in every cluster at least once.
NEW = float(os.environ.get("BERTH_CONFORMANCE_NEW", "0.25"))


@pytest.mark.timeout(120 + CLUSTERS * (60 + PODS * 3))
def test_berth_agrees_with_kube_scheduler(tmp_path: Path) -> None:
    try:
        bed.find_binaries()
    except LookupError as e:
        unavailable(str(e))
    figures = harness.Figures()
    failures: list[str] = []
    for seed in range(SEED, SEED + CLUSTERS):
        cluster = generator.generate(seed, nodes_count=NODES, pods=PODS, claim_share=CLAIMS, new_share=NEW)
        workdir = tmp_path / f"cluster-{seed}"
        cases = harness.run_cluster(cluster, workdir)
        figures.add(cases)
        for case in cases:
            if case.disagreements():
                path = workdir / f"repro-{case.pod['metadata']['name']}.yaml"
                path.write_text(harness.repro(cluster, case))
                failures.append(f"--- {path}\n{path.read_text()}")
    print(f"\nconformance (seeds {SEED}..{SEED + CLUSTERS - 1}, {NODES} nodes each): {figures}")
    assert not failures, f"{len(failures)} disagreement(s); {figures}\n" + "\n".join(failures)
