"""Summaries every benchmark prints and writes the same way."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted sequence."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, round(q / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[k]


def latency_summary(samples_s: Sequence[float]) -> dict[str, float]:
    """Milliseconds: median, p99, min, max of one run's samples."""
    ms = sorted(s * 1000 for s in samples_s)
    return {
        "n": len(ms),
        "median_ms": statistics.median(ms) if ms else float("nan"),
        "p99_ms": percentile(ms, 99),
        "min_ms": ms[0] if ms else float("nan"),
        "max_ms": ms[-1] if ms else float("nan"),
    }


def over_runs(runs: Sequence[dict[str, float]], key: str) -> dict[str, float]:
    """Median, min and max of one figure over repeated runs."""
    vals = sorted(r[key] for r in runs)
    return {"median": statistics.median(vals), "min": vals[0], "max": vals[-1]}


def write(name: str, result: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(result, indent=2))
    return out


def compare(runs: dict[str, list[dict[str, float]]], measured: str, reference: str) -> dict[str, Any]:
    """Two configurations' alternating runs side by side: each one's pods/s
    and pods per CPU second over its runs, and ``measured`` / ``reference``
    of both medians."""
    per_wall = {name: over_runs(rs, "pods_per_second") for name, rs in runs.items()}
    per_cpu = {name: over_runs(rs, "pods_per_cpu_second") for name, rs in runs.items()}
    return {
        "pods_per_second": per_wall,
        "pods_per_cpu_second": per_cpu,
        "ratio": per_wall[measured]["median"] / per_wall[reference]["median"],
        "cpu_ratio": per_cpu[measured]["median"] / per_cpu[reference]["median"],
    }
