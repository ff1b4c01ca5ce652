"""Extended resources backed by DRA: the class resolver and the special
claim's device requests (berth/dra/extended.py).

The request table is upstream's ``Test_createRequestsAndMappings_requests``
(kube-scheduler v1.37.2,
``pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources_test.go``),
case by case; its mock resolver is a :class:`ClassResolver` over the same mapping.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from berth.cluster import dra, model
from berth.dra import extended

GPU = "example.com/gpu"


def _cls(name: str, created: str | None = None, resource: str | None = None) -> dra.DeviceClass:
    return dra.DeviceClass(
        metadata=model.ObjectMeta(name=name, creation_timestamp=created),
        spec=dra.DeviceClassSpec(extended_resource_name=resource),
    )


def _container(name: str, reqs: dict[str, str], *, sidecar: bool = False) -> model.Container:
    return model.Container(
        name=name,
        resources=model.ResourceRequirements(requests=dict[str, model.Quantity](reqs)),
        restart_policy="Always" if sidecar else None,
    )


def _pod(containers: Sequence[dict[str, str]], inits: Sequence[tuple[dict[str, str], bool]] = ()) -> model.Pod:
    """st.MakePod().Res(...) / InitReq(...) / SidecarReq(...): containers con<i>, init-con<i>."""
    return model.Pod(
        metadata=model.ObjectMeta(name="pod", namespace="default", uid="1234"),
        spec=model.PodSpec(
            containers=[_container(f"con{i}", r) for i, r in enumerate(containers)],
            init_containers=[_container(f"init-con{i}", r, sidecar=s) for i, (r, s) in enumerate(inits)],
        ),
    )


POD1 = _pod([{GPU: "1", GPU + "1": "2"}])
POD2 = _pod([{GPU: "1"}, {GPU + "1": "2"}])
POD_INIT = _pod([{GPU: "1"}], [({GPU + "init": "2"}, False)])
POD_INIT2 = _pod([{GPU: "1"}], [({GPU + "init": "1"}, False), ({GPU + "init": "2"}, False)])
POD_INIT3 = _pod(
    [{GPU: "1"}], [({GPU + "init": "1"}, False), ({GPU + "init": "1"}, True), ({GPU + "init": "2"}, False)]
)
RES = [GPU]
RES2 = [GPU, GPU + "1"]
RES_INIT = [GPU, GPU + "init"]
MAP = {GPU: _cls("class")}
MAP2 = {GPU: _cls("class"), GPU + "1": _cls("class1")}
MAP_INIT = {GPU: _cls("class"), GPU + "init": _cls("classInit")}


#: Test_createRequestsAndMappings_requests: case -> pod, resources, resolver
#: mapping, and the requests wanted ("name class count", one per request).
REQUEST_CASES: dict[str, tuple[model.Pod, list[str], dict[str, dra.DeviceClass], list[str]]] = {
    "nil": (POD1, [], {}, []),
    "one resource match": (POD1, RES, MAP, ["container-0-request-0 class 1"]),
    "one resource match, one resource not match": (POD1, RES2, MAP, ["container-0-request-0 class 1"]),
    "two resources match": (POD1, RES2, MAP2, ["container-0-request-0 class 1", "container-0-request-1 class1 2"]),
    "two containers match": (POD2, RES2, MAP2, ["container-0-request-0 class 1", "container-1-request-0 class1 2"]),
    "one init container, one regular container": (
        POD_INIT,
        RES_INIT,
        MAP_INIT,
        ["container-0-request-0 classInit 2", "container-1-request-0 class 1"],
    ),
    "two init containers, one regular container": (
        POD_INIT2,
        RES_INIT,
        MAP_INIT,
        ["container-1-request-0 classInit 2", "container-2-request-0 class 1"],
    ),
    "three init containers, one sidecar, one regular container": (
        POD_INIT3,
        RES_INIT,
        MAP_INIT,
        ["container-1-request-0 classInit 1", "container-2-request-0 classInit 2", "container-3-request-0 class 1"],
    ),
}


@pytest.mark.parametrize("name", list(REQUEST_CASES))
def test_the_special_claim_asks_for_what_each_container_needs_beyond_what_it_can_reuse(name: str) -> None:
    pod, resources, mapping, want = REQUEST_CASES[name]
    requests, _ = extended.requests_and_mappings(pod, resources, extended.ClassResolver(mapping))
    got = [f"{r.name} {r.exactly.device_class_name} {r.exactly.count}" for r in requests if r.exactly is not None]
    assert got == want
    assert all(r.exactly is not None and r.exactly.allocation_mode == "ExactCount" for r in requests)


def test_init_containers_are_mapped_to_the_largest_init_request_and_to_the_sidecars_they_reuse() -> None:
    _, mappings = extended.requests_and_mappings(POD_INIT3, RES_INIT, extended.ClassResolver(MAP_INIT))
    assert [(m.container_name, m.resource_name, m.request_name) for m in mappings] == [
        ("con0", GPU, "container-3-request-0"),
        ("init-con1", GPU + "init", "container-1-request-0"),
        # init-con0 reuses the sidecar's one device; init-con2 needs 2: its own request.
        ("init-con0", GPU + "init", "container-1-request-0"),
        ("init-con2", GPU + "init", "container-2-request-0"),
    ]


DAY2, DAY3 = "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"
IMPLICIT_B = "deviceclass.resource.kubernetes.io/b"


@pytest.mark.parametrize(
    ("classes", "resource", "want"),
    [
        pytest.param([_cls("a", resource=GPU)], GPU, "a", id="explicit name"),
        pytest.param([_cls("a")], "deviceclass.resource.kubernetes.io/a", "a", id="implicit name"),
        pytest.param([_cls("a")], GPU, None, id="no class names it"),
        pytest.param([_cls("b", DAY2, GPU), _cls("a", DAY3, GPU)], GPU, "b", id="the oldest class wins"),
        pytest.param([_cls("b", DAY2, GPU), _cls("a", DAY2, GPU)], GPU, "a", id="created together: smaller name wins"),
        pytest.param([_cls("b", DAY2, GPU), _cls("a", None, GPU)], IMPLICIT_B, "b", id="loser keeps its implicit name"),
    ],
)
def test_a_resource_resolves_to_the_class_the_extended_resource_cache_would_hold(
    classes: list[dra.DeviceClass], resource: str, want: str | None
) -> None:
    got = extended.ClassResolver.of(classes).device_class(resource)
    assert (got.metadata.name if got is not None else None) == want


def test_the_special_claim_carries_kube_schedulers_metadata_and_is_found_again_by_owner() -> None:
    claim = extended.special_claim(POD1)
    md = claim.metadata
    assert (md.name, md.generate_name, md.annotations) == (
        "<extended-resources>",
        "pod-extended-resources-",
        {"resource.kubernetes.io/extended-resource-claim": "true"},
    )
    assert [(r.api_version, r.kind, r.name, r.uid, r.controller) for r in md.owner_references] == [
        ("v1", "Pod", "pod", "1234", True)
    ]
    assert not claim.spec.devices.requests
    assert extended.find_claim(POD1, [claim]) is claim
    other = model.Pod(metadata=model.ObjectMeta(name="pod", namespace="default", uid="other"))
    assert extended.find_claim(other, [claim]) is None
