"""docs/metrics.md lists every metric Berth exports, with its type and
labels, generated from the registry here so that it cannot drift: a metric
added without a row (or a row left after its metric went) fails."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry

from berth import app, config
from berth.store import MemoryStore

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
#: The most metrics one configuration registers: Kubernetes 1.37 with the
#: GenericWorkload gate (the preemption evaluation metrics) and a batch queue.
FULL = {"featureGates": {"GenericWorkload": True}, "queues": [{"name": "default"}]}


def exported(registry: CollectorRegistry) -> dict[str, tuple[str, tuple[str, ...]]]:
    """name as scraped (counters with _total) -> (type, label names)."""
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for collector in list(registry._collector_to_names):
        labelnames = getattr(collector, "_labelnames", None)
        for family in collector.collect() if labelnames is None else collector.describe():
            name = family.name + ("_total" if family.type == "counter" else "")
            if labelnames is not None:
                labels = tuple(labelnames)
            else:
                labels = tuple(sorted({k for s in family.samples for k in s.labels if k != "le"}))
            out[name] = (family.type, labels)
    return out


def documented() -> dict[str, tuple[str, tuple[str, ...]]]:
    rows = re.findall(r"^\| `([a-z_]+)` \| (\w+) \| ([^|]*) \|", DOC.read_text(), flags=re.M)
    return {
        name: (kind, tuple(x.strip() for x in labels.split(",") if x.strip() not in ("", "—")))
        for name, kind, labels in rows
    }


def test_every_exported_metric_is_documented_with_its_type_and_labels() -> None:
    # With a state store (standalone `berth serve`): its metric too.
    registry = app.build(config.parse(FULL), run_loop=False, store=MemoryStore()).core.metrics.registry
    assert exported(registry) == documented()
