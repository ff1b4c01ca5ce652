"""bench.kube's throughput windows: the interior seconds of the binds, and
the collection window from the first attempt to the last bind (what
scheduler_perf's SchedulingThroughput Average covers), on the API server's
whole-second times."""

from __future__ import annotations

from typing import Any

import pytest

from bench import kube


class _Cpu:
    """A CpuSampler stand-in: one CPU second per wall second from t=0."""

    samples = [(0.0, 0.0), (100.0, 100.0)]

    @staticmethod
    def at(t: float) -> float:
        return t


@pytest.mark.parametrize(
    ("name", "times", "first_attempt", "interior", "collection", "span"),
    [
        # 10 pods a second in seconds 0..4: the interior is seconds 1..3.
        ("steady binds", [s for s in range(5) for _ in range(10)], None, 10.0, 50 / 4, 4),
        # Every pod tried from second 0, all bound in seconds 20 and 21
        # (PreemptionBasic): no interior second, the collection is 21 s.
        ("one burst after every attempt", [20] * 500 + [21] * 500, 0, 1000 / 2, 1000 / 21, 21),
        # An event after the first bind does not move the start.
        ("first attempt after the first bind", [3, 4, 5, 6], 5, 1.0, 4 / 3, 3),
        # All in one second: the span is at least a second.
        ("one second", [7] * 30, 7, 30.0, 30.0, 1),
    ],
)
def test_throughput_windows(
    name: str, times: list[int], first_attempt: int | None, interior: float, collection: float, span: int
) -> None:
    out = kube.throughput(times, _Cpu(), first_attempt)  # type: ignore[arg-type]
    assert out["pods_per_second"] == pytest.approx(interior)
    assert out["collection_pods_per_second"] == pytest.approx(collection)
    assert out["collection_s"] == span
    # CPU over the collection: from the middle of the first second to the middle of the last.
    assert out["cpu_s_per_1000_collection"] == pytest.approx(span / len(times) * 1000)


def test_no_binds_give_zero_rates() -> None:
    out = kube.throughput([], None, 3)
    assert out["pods_per_second"] == 0.0
    assert out["collection_pods_per_second"] == 0.0


def _run(interior: float, collection: float, cpu: float, cpu_c: float) -> dict[str, Any]:
    return {
        "pods_per_second": interior,
        "collection_pods_per_second": collection,
        "end_to_end_pods_per_second": collection / 2,
        "cpu_s_per_1000": cpu,
        "cpu_s_per_1000_collection": cpu_c,
        "cpu_s_per_1000_total": cpu_c * 2,
    }


@pytest.mark.parametrize(
    ("headline", "ratio", "cpu_ratio", "pairs"),
    [
        ("interior", 400 / 500, 1.0 / 2.0, [400 / 500, 400 / 500]),
        ("collection", 40 / 20, 20.0 / 40.0, [40 / 20, 40 / 20]),
    ],
)
def test_the_ratio_is_taken_on_the_shapes_headline_window(
    headline: str, ratio: float, cpu_ratio: float, pairs: list[float]
) -> None:
    shape = kube.Shape("S", 10, None, 0, "default", 10, headline=headline)
    runs = {
        "berth": [_run(400, 40, 1.0, 20.0), _run(400, 40, 1.0, 20.0)],
        "kube-scheduler": [_run(500, 20, 2.0, 40.0), _run(500, 20, 2.0, 40.0)],
    }
    sh = kube.summarize(shape, 10, 10, runs)
    assert sh["ratio"] == pytest.approx(ratio)
    assert sh["cpu_ratio"] == pytest.approx(cpu_ratio)
    assert sh["pair_ratios"] == pytest.approx(pairs)
    assert sh["interior_ratio"] == pytest.approx(0.8)
    assert sh["collection_ratio"] == pytest.approx(2.0)
    assert sh["end_to_end_ratio"] == pytest.approx(2.0)
    # The report marks a collection headline.
    lines = kube.report({"shapes": {"S": sh}})
    assert ("S *" in lines[1]) == (headline == "collection")
