"""PodInfo.of(pod, like=...) takes what derives from the containers from
``like`` only when the pod's spec shares them (a copy that replaced other
fields, as a confirmed binding's); otherwise it computes them."""

from __future__ import annotations

import msgspec

from berth.cache.infos import PodInfo
from berth.testing import make_pod


def test_a_bound_copy_of_the_assumed_pod_reuses_its_requests() -> None:
    pod = make_pod("p", requests={"cpu": "500m", "memory": "1Gi"})
    assumed = PodInfo.of(pod)
    bound = msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name="a"))
    info = PodInfo.of(bound, like=assumed)
    assert info.pod is bound and info.requests is assumed.requests
    assert info.requests == PodInfo.of(bound).requests
    assert (info.uid, info.key, info.non_zero, info.host_ports) == (
        assumed.uid,
        assumed.key,
        assumed.non_zero,
        assumed.host_ports,
    )


def test_a_pod_with_other_containers_is_computed_afresh() -> None:
    small = PodInfo.of(make_pod("p", requests={"cpu": "100m"}))
    big = make_pod("p", requests={"cpu": "2"})
    info = PodInfo.of(big, like=small)
    assert info.requests["cpu"] == 2000
    overhead = msgspec.structs.replace(big, spec=msgspec.structs.replace(big.spec, overhead={"cpu": "1"}))
    assert PodInfo.of(overhead, like=PodInfo.of(big)).requests["cpu"] == 3000
