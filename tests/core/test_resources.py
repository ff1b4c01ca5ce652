"""Quantities and pod requests (apimachinery Quantity, component-helpers PodRequests)."""

from __future__ import annotations

import pytest

from berth.cluster import resources
from berth.testing import make_pod


@pytest.mark.parametrize(
    ("name", "text", "want"),
    [
        ("cpu", "500m", 500),
        ("cpu", "2", 2000),
        ("cpu", 1.5, 1500),
        ("cpu", "0.1", 100),
        ("cpu", "1n", 1),  # MilliValue rounds up
        ("memory", "1Gi", 2**30),
        ("memory", "128Mi", 128 * 2**20),
        ("memory", "1G", 10**9),
        ("memory", "1e3", 1000),
        ("memory", "1.5Ki", 1536),
        ("memory", 1024, 1024),
        ("nvidia.com/gpu", "2", 2),
        ("ephemeral-storage", "10k", 10_000),
    ],
)
def test_quantity_parses_to_canonical_units(name: str, text: str | float, want: int) -> None:
    assert resources.canonical(name, text) == want


@pytest.mark.parametrize("bad", ["lots", "1Gb", "", "1.2.3", "--1", True])
def test_invalid_quantity_is_rejected(bad: object) -> None:
    with pytest.raises(resources.QuantityError):
        resources.canonical("memory", bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "value", "want"),
    [
        ("cpu", 1500, "1500m"),
        ("cpu", 2000, "2"),
        ("memory", 2**30, "1Gi"),
        ("memory", 1000, "1000"),
        ("pods", 110, "110"),
    ],
)
def test_format_quantity_is_exact(name: str, value: int, want: str) -> None:
    assert resources.format_quantity(name, value) == want
    assert resources.canonical(name, want) == value


def test_pod_requests_sum_containers_and_take_the_largest_init_container() -> None:
    pod = make_pod(
        containers=[
            {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "500m"}}},
        ],
        spec={"initContainers": [{"name": "init", "resources": {"requests": {"cpu": "2", "memory": "512Mi"}}}]},
    )
    assert resources.pod_requests(pod) == {"cpu": 2000, "memory": 2**30}


def test_sidecars_add_to_containers_and_to_later_init_containers() -> None:
    # component-helpers resource/helpers_test.go "restartable init container"
    pod = make_pod(
        containers=[{"name": "a", "resources": {"requests": {"cpu": "1"}}}],
        spec={
            "initContainers": [
                {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                {"name": "init", "resources": {"requests": {"cpu": "3"}}},
            ]
        },
    )
    # containers 1 + sidecar 1 = 2; init phase: 3 + sidecar 1 = 4 -> max 4
    assert resources.pod_requests(pod)["cpu"] == 4000


def test_overhead_is_added_and_limits_default_requests() -> None:
    pod = make_pod(
        containers=[{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
        spec={"overhead": {"cpu": "250m"}},
    )
    assert resources.pod_requests(pod) == {"cpu": 1250, "memory": 2**30}


def test_non_zero_defaults_apply_per_container_for_scoring() -> None:
    pod = make_pod(containers=[{"name": "a"}, {"name": "b", "resources": {"requests": {"cpu": "1"}}}])
    assert resources.pod_requests(pod) == {"cpu": 1000}
    nz = resources.pod_requests(pod, non_zero=True)
    assert nz["cpu"] == 1000 + resources.DEFAULT_MILLI_CPU_REQUEST
    assert nz["memory"] == 2 * resources.DEFAULT_MEMORY_REQUEST
