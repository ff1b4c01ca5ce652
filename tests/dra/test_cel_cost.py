"""CEL selector cost: the API server's estimate and limit when a selector
arrives, a bounded evaluation when it runs (issue 28: a 617-character
selector of nested ``cel.bind`` doublings allocated 128 MiB per evaluation;
three nested ``.all`` over 40-element lists made Explain answer INTERNAL)."""

from __future__ import annotations

import contextlib
import time

import grpc
import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from berth import errors
from berth.adapters.grpc import convert
from berth.api.v1 import cluster_pb2, cluster_pb2_grpc
from berth.cluster import dra, model
from berth.dra import AllocationError, Allocator, cel, cel_cost

from ..grpc.conftest import serving
from . import test_allocator as ta

DEVICE = cel.DeviceInput(
    {"driver": "gpu.example.com", "allowMultipleAllocations": False, "attributes": {}, "capacity": {}}
)
FORTY = "[" + ",".join(str(i) for i in range(40)) + "]"
#: Three nested .all over 40-element lists: 64 000 iterations.
NESTED_ALL = f"{FORTY}.all(x, {FORTY}.all(y, {FORTY}.all(z, x + y + z >= 0)))"


def doubling(levels: int) -> str:
    """A 32-character string doubled ``levels`` times through nested cel.bind
    (22 levels, 607 characters: 128 MiB, as the issue's 617-character selector)."""
    expression = f"a{levels}.size() > 0"
    for i in range(levels, 0, -1):
        expression = f"cel.bind(a{i}, a{i - 1} + a{i - 1}, {expression})"
    return f'cel.bind(a0, "{"x" * 32}", {expression})'


# MaxCost as k8s.io/dynamic-resource-allocation v0.37.2's CompileCELExpression
# computes it (cel-go v0.29.2; features ConsumableCapacity and
# ListTypeAttributes on), one expression per row, run through a small Go
# program against the module cache.
@pytest.mark.parametrize(
    ("expression", "cost"),
    [
        ('device.driver == "gpu.example.com"', 4),
        ('device.attributes["gpu.example.com"].model == "a100"', 5),
        ('device.attributes["gpu.example.com"].model.startsWith("a1")', 5),
        ('device.capacity["gpu.example.com"].memory.compareTo(quantity("10Gi")) >= 0', 7),
        (
            'has(device.attributes["gpu.example.com"].model) && device.attributes["gpu.example.com"].model == "x"',
            8,
        ),
        ('device.attributes["gpu.example.com"].model in ["a", "b", "c"]', 17),
        ("[1, 2, 3].all(x, x > 0)", 26),
        ('cel.bind(a, "xxxxxxxxxxxxxxxx", cel.bind(b, a + a, cel.bind(c, b + b, c.size() > 0)))', 48),
        ("device.attributes.all(d, device.attributes[d].all(k, k.size() < 10))", 6403),
        ('device.attributes["gpu.example.com"].model.contains("100")', 11),
        ('device.attributes["gpu.example.com"].model.lowerAscii().contains("100")', 18),
        ('device.attributes["gpu.example.com"].model.matches("^a[0-9]+$")', 25),
        ('device.attributes["gpu.example.com"].model + "x" == "a100x"', 12),
        ('device.allowMultipleAllocations == false ? true : device.driver.endsWith(".com")', 6),
        ('{"a": 1, "b": 2}["a"] == 1', 32),
        ('device.attributes["gpu.example.com"].version.isGreaterThan(semver("1.0.0"))', 6),
        ('["a", "b"].exists(x, device.attributes["gpu.example.com"].model == x)', 31),
        ('device.attributes["gpu.example.com"].model.split(",").size() > 0', 19),
        ('device.attributes["x.com"].list.exists(v, v == 3)', 389),
        ("[device.driver, device.driver].map(x, x + x).all(y, y.size() > 1)", 92),
        (NESTED_ALL, 598971),
        (doubling(22), 26843827),
    ],
)
def test_the_estimate_is_the_api_servers(expression: str, cost: int) -> None:
    compiled = cel.Cache().get_or_compile(expression)
    assert compiled.error is None
    assert compiled.max_cost == cost


def test_the_doubling_selector_is_refused_when_it_arrives_and_never_evaluated() -> None:
    expression = doubling(22)
    assert cel.too_complex(expression) == "too complex, exceeds cost limit"
    selector = dra.DeviceSelector(cel=dra.CELDeviceSelector(expression=expression))
    with pytest.raises(errors.InvalidArgument) as err:
        cel.refuse_too_complex(cel.class_selectors(dra.DeviceClassSpec(selectors=[selector]), "spec"))
    assert str(err.value) == "spec.selectors[0].cel.expression: Forbidden: too complex, exceeds cost limit"
    compiled = cel.Cache().get_or_compile(expression)
    started = time.perf_counter()
    with pytest.raises(cel.CelRuntimeError, match=r"estimated cost 26843827 exceeds the cost limit 1000000"):
        compiled.device_matches(DEVICE)
    assert time.perf_counter() - started < 0.05  # not the 128 MiB evaluation


def test_cel_cpps_iteration_budget_is_a_runtime_error_not_a_crash() -> None:
    compiled = cel.Cache().get_or_compile(NESTED_ALL)
    assert compiled.max_cost <= cel_cost.MAX_COST  # the API server accepts it
    assert cel.too_complex(NESTED_ALL) is None
    with pytest.raises(cel.CelRuntimeError, match="Iteration budget exceeded"):
        compiled.device_matches(DEVICE)


def test_a_claims_selectors_are_named_by_their_paths() -> None:
    def sel(expression: str) -> dra.DeviceSelector:
        return dra.DeviceSelector(cel=dra.CELDeviceSelector(expression=expression))

    spec = dra.ResourceClaimSpec(
        devices=dra.DeviceClaim(
            requests=[
                dra.DeviceRequest(
                    name="a", exactly=dra.ExactDeviceRequest(device_class_name="c", selectors=[sel("true")])
                ),
                dra.DeviceRequest(
                    name="b",
                    first_available=[
                        dra.DeviceSubRequest(
                            name="x", device_class_name="c", selectors=[sel("true"), sel(doubling(22))]
                        )
                    ],
                ),
            ]
        )
    )
    paths = [p for p, _ in cel.claim_selectors(spec, "spec")]
    assert paths == [
        "spec.devices.requests[0].exactly.selectors[0]",
        "spec.devices.requests[1].firstAvailable[0].selectors[0]",
        "spec.devices.requests[1].firstAvailable[0].selectors[1]",
    ]
    with pytest.raises(errors.InvalidArgument, match=r"^spec.devices.requests\[1\].firstAvailable\[0\].selectors\[1\]"):
        cel.refuse_too_complex(cel.claim_selectors(spec, "spec"))


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        (NESTED_ALL, "Iteration budget exceeded"),
        (doubling(22), "operation cancelled: estimated cost 26843827 exceeds the cost limit 1000000"),
    ],
)
def test_an_expensive_selector_is_the_pods_reason_when_allocating(expression: str, reason: str) -> None:
    # A claim that reached the allocator without the API server's check (an informer, a cluster file).
    c = ta.with_selectors(ta.claim(ta.claim0, ta.req0, ta.classA), ta.selector(expression))
    allocator = Allocator(
        classes={ta.classA: ta.device_class(ta.classA, ta.driverA)}, slices=[ta._gpu_slice(ta.node1, "a100")]
    )
    with pytest.raises(AllocationError) as err:
        allocator.allocate(ta.node(ta.node1, ta.region1), [c])
    assert str(err.value).endswith(f"CEL runtime error: {reason}")


async def test_a_feed_refuses_a_too_complex_device_class_and_stores_nothing() -> None:
    too_complex = dra.DeviceClass(
        metadata=model.ObjectMeta(name="greedy"),
        spec=dra.DeviceClassSpec(selectors=[dra.DeviceSelector(cel=dra.CELDeviceSelector(expression=doubling(22)))]),
    )
    fine = dra.DeviceClass(metadata=model.ObjectMeta(name="fine"))
    request = cluster_pb2.UpsertDeviceClassesRequest(
        device_classes=[convert.device_class_to_pb(fine), convert.device_class_to_pb(too_complex)]
    )
    async with serving() as s, s.channel() as ch:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await cluster_pb2_grpc.ClusterStub(ch).UpsertDeviceClasses(request)
        assert s.feed.device_classes == {}
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == (
        "device_classes[1].spec.selectors[0].cel.expression: Forbidden: too complex, exceeds cost limit"
    )


# Random selectors from a small grammar: the estimate always comes out (a
# number, never an exception), `&&` costs its two sides (cel-go's
# logical_and: no cost of its own), and an evaluation fails only as a
# CelRuntimeError (the pod's reason), whatever the selector does.
_ATOMS = st.sampled_from(
    [
        "true",
        'device.driver == "gpu.example.com"',
        'device.attributes["gpu.example.com"].model.startsWith("a")',
        "[1, 2, 3].exists(v, v > 2)",
        'cel.bind(s, "ab" + "cd", s.size() == 4)',
        f"{FORTY}.all(x, {FORTY}.all(y, x <= y || y < x))",
    ]
)


def _nest(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, inner).map(lambda p: f"({p[0]} || {p[1]})"),
        inner.map(lambda e: f"!({e})"),
        inner.map(lambda e: f"{FORTY}.exists(q, {e})"),
        inner.map(lambda e: f'cel.bind(t, "xy" + "xy", t.size() == 4 && ({e}))'),
    )


@settings(max_examples=60, deadline=None)
@given(a=st.recursive(_ATOMS, _nest, max_leaves=6), b=_ATOMS)
def test_random_selectors_are_estimated_and_fail_only_as_runtime_errors(a: str, b: str) -> None:
    cache = cel.Cache()
    left, right, both = (cache.get_or_compile(e) for e in (a, b, f"({a}) && ({b})"))
    assert left.error is None and right.error is None and both.error is None
    assert 0 <= left.max_cost <= cel_cost.UNBOUNDED
    assert both.max_cost == min(left.max_cost + right.max_cost, cel_cost.UNBOUNDED)
    with contextlib.suppress(cel.CelRuntimeError):
        both.device_matches(DEVICE)
