"""The scorers' per-pod requests read the PodInfo's NonZero requests,
computed once, where they equal ``non_missing_requests`` (resource_allocation.go
``calculatePodResourceRequest`` with ``NonMissingContainerRequests``): the
same numbers as copying the pod with defaulted containers, for any pod."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from berth.cache.infos import PodInfo
from berth.plugins.noderesources.args import ResourceSpec
from berth.plugins.noderesources.strategies import (
    ResourceAllocationScorer,
    _least_allocated,
    non_missing_requests,
)
from berth.testing import make_pod

NAMES = ["cpu", "memory", "ephemeral-storage", "example.com/gpu", "hugepages-2Mi"]
AMOUNT = {
    "cpu": st.sampled_from(["0", "100m", "1", "2500m"]),
    "memory": st.sampled_from(["0", "64Mi", "1Gi"]),
    "ephemeral-storage": st.sampled_from(["0", "1Gi"]),
    "example.com/gpu": st.sampled_from(["0", "1", "2"]),
    "hugepages-2Mi": st.sampled_from(["0", "2Mi"]),
}


def _resources() -> st.SearchStrategy[dict[str, str]]:
    return st.dictionaries(st.sampled_from(NAMES), st.just("")).flatmap(
        lambda keys: st.fixed_dictionaries({k: AMOUNT[k] for k in keys})
    )


def _container(name: str, *, sidecar: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    def build(requests: dict[str, str], limits: dict[str, str]) -> dict[str, Any]:
        c: dict[str, Any] = {"name": name, "resources": {"requests": requests, "limits": limits}}
        if sidecar:
            c["restartPolicy"] = "Always"
        return c

    return st.builds(build, _resources(), _resources())


pods = st.builds(
    lambda containers, inits, sidecars, overhead, level: make_pod(
        "p",
        containers=containers,
        spec={
            "initContainers": [*inits, *sidecars],
            **({"overhead": overhead} if overhead else {}),
            **({"resources": {"requests": level}} if level else {}),
        },
    ),
    st.lists(_container("c"), min_size=1, max_size=3).map(
        lambda cs: [{**c, "name": f"c{i}"} for i, c in enumerate(cs)]
    ),
    st.lists(_container("i"), max_size=2).map(lambda cs: [{**c, "name": f"i{i}"} for i, c in enumerate(cs)]),
    st.lists(_container("s", sidecar=True), max_size=2).map(
        lambda cs: [{**c, "name": f"s{i}"} for i, c in enumerate(cs)]
    ),
    st.one_of(st.none(), st.fixed_dictionaries({"cpu": st.sampled_from(["10m", "1"])})),
    st.one_of(st.none(), st.fixed_dictionaries({"cpu": st.sampled_from(["3", "500m"])})),
)


@settings(max_examples=300, deadline=None)
@given(pods)
def test_scorer_requests_equal_the_non_missing_requests_of_the_pod(pod: Any) -> None:
    specs = [ResourceSpec(name=n, weight=1) for n in NAMES]
    pi = PodInfo.of(pod)
    for pod_level in (False, True):
        scorer = ResourceAllocationScorer(specs, _least_allocated, use_requested=False, pod_level=pod_level)
        want = non_missing_requests(pod, skip_pod_level=not pod_level)
        assert scorer.pod_requests(pi) == [want.get(n, 0) for n in NAMES]
