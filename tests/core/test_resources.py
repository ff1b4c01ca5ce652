"""Quantities and pod requests (apimachinery Quantity, component-helpers PodRequests)."""

from __future__ import annotations

import contextlib
import decimal
import math
import re
import time
from fractions import Fraction
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from berth import errors, features
from berth.cluster import model, resources
from berth.testing import make_node, make_pod


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


@pytest.mark.parametrize("bad", ["lots", "1Gb", "", "1.2.3", "--1", True, None, [], {}, float("inf"), float("nan")])
def test_invalid_quantity_is_rejected(bad: object) -> None:
    with pytest.raises(resources.QuantityError):
        resources.canonical("memory", bad)  # type: ignore[arg-type]


def test_quantity_error_is_a_client_error_with_the_api_servers_field_message() -> None:
    with pytest.raises(errors.InvalidArgument) as e:
        resources.canonical("memory", "1.5.3Gi")
    assert str(e.value) == (
        'Invalid value: "1.5.3Gi": quantities must match the regular expression '
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )
    assert isinstance(e.value, ValueError)


# -------------------------------------------------------------- apimachinery's ParseQuantity
#
# Ported from k8s.io/apimachinery/pkg/api/resource/quantity_test.go
# (TestQuantityParse, TestParseQuantityString, TestParseQuantity) at
# kubernetes/apimachinery@eed236ce. Values are exact (Fraction), after
# ParseQuantity's rounding up to nano-units.

_N = Fraction(1, 10**9)
_UPSTREAM_VALID: list[tuple[str, Fraction]] = [
    ("0", Fraction(0)),
    ("0n", Fraction(0)),
    ("0u", Fraction(0)),
    ("0m", Fraction(0)),
    ("0Ki", Fraction(0)),
    ("0k", Fraction(0)),
    ("0Mi", Fraction(0)),
    ("0M", Fraction(0)),
    ("0Gi", Fraction(0)),
    ("0G", Fraction(0)),
    ("0Ti", Fraction(0)),
    ("0T", Fraction(0)),
    # Quantity less numbers are allowed
    ("1", Fraction(1)),
    # Binary suffixes
    ("1Ki", Fraction(1024)),
    ("8Ki", Fraction(8 * 1024)),
    ("7Mi", Fraction(7 * 1024**2)),
    ("6Gi", Fraction(6 * 1024**3)),
    ("5Ti", Fraction(5 * 1024**4)),
    ("4Pi", Fraction(4 * 1024**5)),
    ("10Ti", Fraction(10 * 1024**4)),
    ("100Ti", Fraction(100 * 1024**4)),
    # Decimal suffixes
    ("5n", 5 * _N),
    ("4u", Fraction(4, 10**6)),
    ("3m", Fraction(3, 1000)),
    ("9", Fraction(9)),
    ("8k", Fraction(8000)),
    ("50k", Fraction(50_000)),
    ("7M", Fraction(7 * 10**6)),
    ("6G", Fraction(6 * 10**9)),
    ("5T", Fraction(5 * 10**12)),
    ("40T", Fraction(40 * 10**12)),
    ("300T", Fraction(300 * 10**12)),
    ("2P", Fraction(2 * 10**15)),
    # Decimal exponents
    ("1E-3", Fraction(1, 1000)),
    ("1e3", Fraction(1000)),
    ("1E6", Fraction(10**6)),
    ("1e9", Fraction(10**9)),
    ("1E12", Fraction(10**12)),
    ("1e15", Fraction(10**15)),
    # Nonstandard but still parsable
    ("1e14", Fraction(10**14)),
    ("1e13", Fraction(10**13)),
    ("100.035k", Fraction(100_035)),
    # Things that look like floating point
    ("0.001", Fraction(1, 1000)),
    ("0.0005k", Fraction(1, 2)),
    ("0.005", Fraction(5, 1000)),
    ("0.05", Fraction(5, 100)),
    ("0.5", Fraction(1, 2)),
    ("0.00050k", Fraction(1, 2)),
    ("0.00500", Fraction(5, 1000)),
    ("0.05000", Fraction(5, 100)),
    ("0.50000", Fraction(1, 2)),
    ("0.5e0", Fraction(1, 2)),
    ("0.5e-1", Fraction(5, 100)),
    ("0.5e-2", Fraction(5, 1000)),
    ("10.035M", Fraction(10_035_000)),
    ("1.2e3", Fraction(1200)),
    ("1.3E+6", Fraction(1_300_000)),
    ("1.40e9", Fraction(1_400_000_000)),
    ("1.53E12", Fraction(153 * 10**10)),
    ("1.6e15", Fraction(16 * 10**14)),
    ("9.01", Fraction(901, 100)),
    ("8.1k", Fraction(8100)),
    ("7.123456M", Fraction(7_123_456)),
    ("6.987654321G", Fraction(6_987_654_321)),
    ("5.444T", Fraction(5444 * 10**9)),
    ("40.1T", Fraction(401 * 10**11)),
    ("300.2T", Fraction(3002 * 10**11)),
    ("2.5P", Fraction(25 * 10**14)),
    # Things that saturate/round
    ("3.001n", 4 * _N),
    ("1.1E-9", 2 * _N),
    ("0.0000000001", _N),
    ("0.0000000005", _N),
    ("0.00000000050", _N),
    ("0.5e-9", _N),
    ("0.9n", _N),
    ("0.00000012345", 124 * _N),
    ("0.00000012354", 124 * _N),
    # We'll accept fractional binary stuff, too.
    ("100.035Ki", Fraction(10243584, 100)),
    ("0.5Mi", Fraction(1024**2, 2)),
    ("0.05Gi", Fraction(536870912, 10)),
    ("0.025Ti", Fraction(274877906944, 10)),
    # Things written by trolls
    ("0.000000000001Ki", 2 * _N),  # rounds up, changes format
    (".001", Fraction(1, 1000)),
    (".0001k", Fraction(1, 10)),
    ("1.", Fraction(1)),
    ("1.G", Fraction(10**9)),
    # TestParseQuantityString: a lone "." (or sign) is zero
    (".", Fraction(0)),
    ("-.", Fraction(0)),
    ("1.025Ti", Fraction(1025 * 1024**4, 1000)),
]


@pytest.mark.parametrize(("text", "want"), _UPSTREAM_VALID)
def test_parse_quantity_matches_apimachinery(text: str, want: Fraction) -> None:
    assert resources.parse_quantity(text) == want
    # "Try the negative version of everything", "Try everything with an explicit +"
    assert resources.parse_quantity("-" + text.lstrip("-")) == (want if text.startswith("-") else -want)
    if not text.startswith("-"):
        assert resources.parse_quantity("+" + text) == want


_ERR_FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_ERR_SUFFIX = "unable to parse quantity's suffix"
_ERR_RANGE = "must be between -9223372036854775.807 and 9223372036854775.807, inclusive"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # quantity_test.go's invalid list (its " 1" / "1 " are trimmed by
        # Quantity.UnmarshalJSON, the path every Berth quantity takes).
        ("1.1.M", _ERR_FORMAT),
        ("1+1.0M", _ERR_FORMAT),
        ("0.1mi", _ERR_SUFFIX),
        ("0.1am", _ERR_FORMAT),
        ("aoeu", _ERR_FORMAT),
        (".5i", _ERR_SUFFIX),
        ("1i", _ERR_SUFFIX),
        ("-3.01i", _ERR_SUFFIX),
        ("-3.01e-", _ERR_SUFFIX),
        ("Non-Numeric", _ERR_FORMAT),
        ("", _ERR_FORMAT),
        # the attacker's report
        ("1.5.3Gi", _ERR_FORMAT),
        ("1e400", _ERR_RANGE),
        ("1e300000", _ERR_RANGE),
        ("-1e300000", _ERR_RANGE),
        # the exponent must be an int64 (strconv.ParseInt)
        ("1e", _ERR_SUFFIX),
        ("1e99999999999999999999", _ERR_SUFFIX),
        ("1e+-3", _ERR_FORMAT),
        ("1Ee3", _ERR_SUFFIX),
        ("1K", _ERR_SUFFIX),
        ("1Mi5", _ERR_SUFFIX),
        # upstream truncates the exponent to int32 (1e4294967296 parses as 1): Berth refuses it
        ("1e4294967296", _ERR_RANGE),
        # Beyond the int64 milli range: upstream accepts these (and caps binary
        # SI at 2^63-1, "9Ei"), then MilliValue() wraps; Berth refuses them.
        ("9Ei", _ERR_RANGE),
        ("3Ei", _ERR_RANGE),
        ("9223372036854775807Ki", _ERR_RANGE),
        ("12E", _ERR_RANGE),
        ("1E", _ERR_RANGE),
        ("1E18", _ERR_RANGE),
        ("1.7E18", _ERR_RANGE),
        ("1.01E", _ERR_RANGE),
        ("999999999999999999", _ERR_RANGE),
        ("9223372036854775807", _ERR_RANGE),
        ("-9223372036854775808", _ERR_RANGE),
        ("10000000000000000000.1", _ERR_RANGE),
        ("9223372036854775808m", _ERR_RANGE),
        ("9223372036854775.8071", _ERR_RANGE),
        ("8Pi", None),  # 2^53: fits
    ],
)
def test_parse_quantity_rejects_what_kubernetes_rejects(text: str, message: str | None) -> None:
    if message is None:
        resources.parse_quantity(text)
        return
    with pytest.raises(resources.QuantityError) as e:
        resources.parse_quantity(text)
    assert e.value.detail.startswith(message)
    assert str(e.value).startswith(f'Invalid value: "{text}": {message}')


@pytest.mark.parametrize(
    ("name", "value", "want"),
    [
        ("cpu", "9223372036854775.807", 2**63 - 1),
        ("cpu", "9223372036854775807m", 2**63 - 1),
        ("cpu", 9223372036854775, 9223372036854775000),
        ("memory", "9223372036854775.807", 9223372036854776),  # Value() rounds up
        ("memory", "8Pi", 2**53),
        ("cpu", "1e-300000", 1),  # non-zero rounds up to 1n, then to 1m
        ("memory", "0." + "0" * 5000 + "1", 1),
        ("cpu", "1." + "0" * 5000 + "1", 1001),
        ("cpu", "1e000", 1000),
        ("cpu", "-0", 0),
        ("cpu", 1e-07, 1),
        ("memory", 1e15, 10**15),
    ],
)
def test_canonical_accepts_the_whole_int64_milli_range(name: str, value: str | int | float, want: int) -> None:
    assert resources.canonical(name, value) == want


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (9223372036854776, _ERR_RANGE),
        (-9223372036854776, _ERR_RANGE),
        pytest.param(10**5000, _ERR_RANGE, id="10**5000"),  # beyond int()'s 4300-digit str limit: never printed
        (1e300, _ERR_RANGE),
        ("-1", "must be greater than or equal to 0"),
        (-1, "must be greater than or equal to 0"),
        ("-1n", "must be greater than or equal to 0"),
    ],
)
def test_canonical_rejects_out_of_range_and_negative_amounts(value: object, message: str) -> None:
    with pytest.raises(resources.QuantityError) as e:
        resources.canonical("cpu", value)  # type: ignore[arg-type]
    assert e.value.detail.startswith(message)
    assert len(str(e.value)) < 300


@pytest.mark.parametrize(
    "text", ["1e300000", "1e-300000", "9" * 100_000, "0." + "0" * 100_000 + "1", "1" * 100_000 + "x"]
)
def test_huge_exponents_and_digit_strings_cost_microseconds(text: str) -> None:
    start = time.perf_counter()
    for _ in range(10):
        with contextlib.suppress(resources.QuantityError):
            resources.canonical("cpu", text)
    assert time.perf_counter() - start < 0.5  # 10 calls; `1e300000` alone took 3 s


def test_errors_name_the_field_of_the_bad_quantity() -> None:
    pod = make_pod(
        containers=[
            {"name": "a", "resources": {"requests": {"cpu": "1"}}},
            {"name": "b", "resources": {"requests": {"cpu": "1", "memory": "1.5.3Gi"}}},
        ]
    )
    with pytest.raises(resources.QuantityError, match=r"^spec\.containers\[1\]\.resources\.requests\[memory\]: "):
        resources.pod_requests(pod)
    init = make_pod(spec={"initContainers": [{"name": "i", "resources": {"limits": {"cpu": "1e400"}}}]})
    with pytest.raises(resources.QuantityError, match=r"^spec\.initContainers\[0\]\.resources\.limits\[cpu\]: "):
        resources.pod_requests(init)
    overhead = make_pod(spec={"overhead": {"cpu": "-1"}})
    with pytest.raises(resources.QuantityError, match=r"^spec\.overhead\[cpu\]: Invalid value: \"-1\": must be"):
        resources.pod_requests(overhead)
    node = make_node("n1", allocatable={"cpu": "lots"})
    with pytest.raises(resources.QuantityError, match=r"^status\.allocatable\[cpu\]: "):
        resources.node_allocatable(node)
    assert str(resources.QuantityError("x" * 10_000, "bad")).startswith('Invalid value: "' + "x" * 64 + '..."')


def test_a_pod_total_beyond_int64_is_rejected() -> None:
    big = "9223372036854775.807"  # each fits; two do not
    pod = make_pod(containers=[{"name": n, "resources": {"requests": {"cpu": big}}} for n in ("a", "b")])
    with pytest.raises(resources.QuantityError, match=r"^spec: .*total cpu request must fit an int64"):
        resources.pod_requests(pod)


def test_the_parse_cache_keeps_only_short_strings() -> None:
    resources._canonical_cached.cache_clear()
    for i in range(5000):
        resources.canonical("cpu", f"{i}m")
        resources.canonical("memory", f"{i}.{'0' * 100}1")  # too long to cache
    info = resources._canonical_cached.cache_info()
    assert info.maxsize == 2048
    assert info.currsize <= 2048
    # What one entry can weigh: a key of at most 64 characters and a small int.
    assert resources._CACHE_MAX_CHARS == 64


# -------------------------------------------------------------- properties

_LIMITS = {"cpu": 2**63 - 1, "memory": (2**63 - 1) // 1000, "pods": (2**63 - 1) // 1000}


@given(
    name=st.sampled_from(["cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "pods", "example.com/gpu"]),
    fraction=st.fractions(min_value=0, max_value=1),
    small=st.integers(min_value=0, max_value=10**7),
)
def test_canonical_values_round_trip_through_format(name: str, fraction: Fraction, small: int) -> None:
    top = _LIMITS.get(name, _LIMITS["memory"])
    for value in (small, int(fraction * top), top):
        assert resources.canonical(name, resources.format_quantity(name, value)) == value


_QUANTITY_TEXT = st.from_regex(
    r"\A[+-]?[0-9]{0,25}(\.[0-9]{0,25})?([eE][+-]?[0-9]{1,2}|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?\Z", fullmatch=True
)


def _reference(text: str) -> Fraction | None:
    """ParseQuantity's value the slow way (exact Decimal), None when out of Berth's range (or empty)."""
    m = re.fullmatch(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)", text)
    assert m is not None
    sign, num, denom, suffix = m[1], m[2] or "0", m[3] or "", m[4]
    binary = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
    decimal_ = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
    exact = Fraction(decimal.Decimal(f"{num}.{denom or '0'}"))
    if suffix in binary:
        exact *= 2 ** binary[suffix]
    elif suffix in decimal_:
        exact *= Fraction(10) ** decimal_[suffix]
    else:
        exact *= Fraction(10) ** int(suffix[1:])
    nano = math.ceil(exact * 10**9)
    if nano > (2**63 - 1) * 10**6:
        return None
    return Fraction(-nano if sign == "-" else nano, 10**9)


@given(_QUANTITY_TEXT)
def test_parse_quantity_agrees_with_exact_arithmetic(text: str) -> None:
    want = _reference(text) if text else None
    if want is None:
        with pytest.raises(resources.QuantityError):
            resources.parse_quantity(text)
    else:
        assert resources.parse_quantity(text) == want


@given(st.one_of(st.text(alphabet="0123456789.+-eEinumkKMGTPi x", max_size=40), st.text(max_size=40)))
def test_random_strings_only_ever_raise_quantity_error(text: str) -> None:
    start = time.perf_counter()
    try:
        value = resources.canonical("cpu", text)
    except resources.QuantityError:
        pass
    else:
        assert 0 <= value <= 2**63 - 1
    # Generous for a loaded 2-core machine; `1e300000` used to take 3 s.
    assert time.perf_counter() - start < 1.0


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


# -------------------------------------------------------------- in-place resize

V35, V36, V37 = features.SUPPORTED
INFEASIBLE = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]


def _resized(spec: dict[str, Any], status: dict[str, Any]) -> model.Pod:
    """A pod as the kubelet reports it during a resize (Kubernetes JSON)."""
    return msgspec.convert({"metadata": {"name": "p"}, "spec": spec, "status": status}, model.Pod)


def _c(name: str, requests: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": requests or {}}, **extra}


def _cs(
    name: str, *, allocated: dict[str, str] | None = None, actuated: dict[str, str] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if allocated is not None:
        out["allocatedResources"] = allocated
    if actuated is not None:
        out["resources"] = {"requests": actuated}
    return out


def _with_pod_status_sums(status: dict[str, Any]) -> dict[str, Any]:
    """helpers_test.go populatePodStatusResourcesForTest: pod-level status as the
    sums of the containers' (read only with InPlacePodLevelResourcesVerticalScaling)."""
    return {**status, "resources": {"requests": {}}, "allocatedResources": {}}


USE_STATUS = {v: resources.PodResourcesOptions(use_status_resources=True, version=v) for v in features.SUPPORTED}
SIDECAR = {"restartPolicy": "Always"}

# component-helpers resource/helpers_test.go TestPodResourceRequests (v0.37.2;
# the same cases and answers in v0.35.4 and v0.36.3): (case, spec, status, use status, cpu in milli).
RESIZE_CASES = [
    (
        "resized, infeasible",
        {"containers": [_c("container-1", {"cpu": "4"})]},
        {"conditions": INFEASIBLE, "containerStatuses": [_cs("container-1", actuated={"cpu": "2"})]},
        True,
        2000,
    ),
    (
        "resized, infeasible & in-progress",
        {"containers": [_c("container-1", {"cpu": "6"})]},
        {
            "conditions": INFEASIBLE,
            "containerStatuses": [_cs("container-1", allocated={"cpu": "4"}, actuated={"cpu": "2"})],
        },
        True,
        4000,
    ),
    (
        "resized, no resize status",
        {"containers": [_c("container-1", {"cpu": "4"})]},
        {"containerStatuses": [_cs("container-1", actuated={"cpu": "2"})]},
        True,
        4000,
    ),
    (
        "resized, infeasible, but don't use status",
        {"containers": [_c("container-1", {"cpu": "4"})]},
        {"conditions": INFEASIBLE, "containerStatuses": [_cs("container-1", actuated={"cpu": "2"})]},
        False,
        4000,
    ),
    (
        "resized, restartable init container, infeasible",
        {"initContainers": [_c("restartable-init-1", {"cpu": "4"}, **SIDECAR)]},
        {"conditions": INFEASIBLE, "initContainerStatuses": [_cs("restartable-init-1", actuated={"cpu": "2"})]},
        True,
        2000,
    ),
    (
        "resized, restartable init container, no resize status",
        {"initContainers": [_c("restartable-init-1", {"cpu": "4"}, **SIDECAR)]},
        {"initContainerStatuses": [_cs("restartable-init-1", actuated={"cpu": "2"})]},
        True,
        4000,
    ),
    (
        "resized, restartable init container, infeasible, but don't use status",
        {"initContainers": [_c("restartable-init-1", {"cpu": "4"}, **SIDECAR)]},
        {"conditions": INFEASIBLE, "initContainerStatuses": [_cs("restartable-init-1", actuated={"cpu": "2"})]},
        False,
        4000,
    ),
    (
        # TestAggregateContainerRequestsAndLimits (also in v0.35.4 / v0.36.3)
        "regularcontainers with empty requests, but status with non-empty requests",
        {"containers": [_c("container-1")]},
        {"containerStatuses": [_cs("container-1", actuated={"cpu": "2"})]},
        True,
        2000,
    ),
    (
        "always-restart init containers with empty requests, but status with non-empty requests",
        {"initContainers": [_c("container-1", **SIDECAR)]},
        {"initContainerStatuses": [_cs("container-1", actuated={"cpu": "2"})]},
        True,
        2000,
    ),
    (
        # v0.37.2 only; v0.35.4 gives 3 as well: statuses without resources count the spec.
        "aggregate request resolves max of sums instead of sum of maxes",
        {"containers": [_c("c1", {"cpu": "1"}), _c("c2", {"cpu": "2"})]},
        {"containerStatuses": [_cs("c1", allocated={"cpu": "2"}), _cs("c2", allocated={"cpu": "1"})]},
        True,
        3000,
    ),
]


@pytest.mark.parametrize("version", features.SUPPORTED, ids=str)
@pytest.mark.parametrize(
    ("name", "spec", "status", "use_status", "cpu"), RESIZE_CASES, ids=[c[0] for c in RESIZE_CASES]
)
def test_pod_requests_during_an_in_place_resize(
    version: features.KubeVersion, name: str, spec: dict[str, Any], status: dict[str, Any], use_status: bool, cpu: int
) -> None:
    pod = _resized(spec, _with_pod_status_sums(status))
    options = USE_STATUS[version] if use_status else resources.PodResourcesOptions(version=version)
    assert resources.pod_requests(pod, options=options) == {"cpu": cpu}


def test_resize_takes_the_largest_of_spec_allocated_and_actuated_per_resource() -> None:
    # helpers_test.go "resized: per-resource 3-way maximum" (every release)
    pod = _resized(
        {"containers": [_c("container-1", {"cpu": "30m", "memory": "20M", "ephemeral-storage": "10G"})]},
        {
            "containerStatuses": [
                _cs(
                    "container-1",
                    allocated={"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"},
                    actuated={"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"},
                )
            ]
        },
    )
    for version in features.SUPPORTED:
        got = resources.pod_requests(pod, options=USE_STATUS[version])
        assert got == {"cpu": 30, "memory": 30 * 10**6, "ephemeral-storage": 30 * 10**9}, version


def test_1_37_takes_the_largest_sum_where_1_35_and_1_36_sum_the_largest() -> None:
    # One container grows, the other shrinks. v0.35.4/v0.36.3
    # determineEffectiveRequests per container: max(1, 2) + max(2, 1) = 4;
    # v0.37.2 AggregateContainerRequests: max(spec 1 + 2, actuated 2 + 1) = 3.
    pod = _resized(
        {"containers": [_c("c1", {"cpu": "1"}), _c("c2", {"cpu": "2"})]},
        {"containerStatuses": [_cs("c1", actuated={"cpu": "2"}), _cs("c2", actuated={"cpu": "1"})]},
    )
    got = {v: resources.pod_requests(pod, options=USE_STATUS[v])["cpu"] for v in features.SUPPORTED}
    assert got == {V35: 4000, V36: 4000, V37: 3000}


def test_1_37_counts_every_init_container_status_1_35_only_sidecars() -> None:
    # A regular init container's status: v0.35.4 counts it for sidecars only;
    # v0.37.2 aggregates every container's allocated resources.
    pod = _resized(
        {"initContainers": [_c("init", {"cpu": "1"})], "containers": [_c("c", {"cpu": "500m"})]},
        {"initContainerStatuses": [_cs("init", allocated={"cpu": "3"}, actuated={"cpu": "3"})]},
    )
    got = {v: resources.pod_requests(pod, options=USE_STATUS[v])["cpu"] for v in features.SUPPORTED}
    assert got == {V35: 1000, V36: 1000, V37: 3000}


PLR = {
    v: resources.PodResourcesOptions(
        use_status_resources=True, in_place_pod_level_resources_vertical_scaling=True, version=v
    )
    for v in features.SUPPORTED
}


@pytest.mark.parametrize(
    ("name", "spec", "status", "cpu"),
    [
        (
            # TestAggregateContainerRequestsAndLimits: the containers' sums from the pod's status
            "aggregate container request resolves directly from pod status when PLR vertical scaling enabled",
            {"containers": [_c("c1", {"cpu": "1"})]},
            {"allocatedResources": {"cpu": "4"}, "resources": {"requests": {"cpu": "3"}}},
            4000,
        ),
        (
            "falls back to container status aggregation when PLR vertical scaling enabled "
            "but podAllocatedResources is nil",
            {"containers": [_c("c1", {"cpu": "1"})]},
            {
                "containerStatuses": [_cs("c1", allocated={"cpu": "6"}, actuated={"cpu": "5"})],
                "resources": {"requests": {"cpu": "3"}},
            },
            6000,
        ),
        (
            "falls back to container status aggregation when PLR vertical scaling enabled but podResources is nil",
            {"containers": [_c("c1", {"cpu": "1"})]},
            {
                "containerStatuses": [_cs("c1", allocated={"cpu": "6"}, actuated={"cpu": "5"})],
                "allocatedResources": {"cpu": "6"},
            },
            6000,
        ),
        (
            # TestPodRequestsAndLimitsVerticalScalingWrappers
            "pod level requests/limits with PLR vertical scaling enabled and status populated",
            {"resources": {"requests": {"cpu": "2"}}, "containers": [_c("c1", {"cpu": "1"})]},
            {"allocatedResources": {"cpu": "3"}, "resources": {"requests": {"cpu": "3.5"}}},
            3500,
        ),
        (
            "pod level requests/limits with PLR vertical scaling enabled and infeasible resize",
            {"resources": {"requests": {"cpu": "10"}}, "containers": [_c("c1", {"cpu": "1"})]},
            {"conditions": INFEASIBLE, "allocatedResources": {"cpu": "3"}, "resources": {"requests": {"cpu": "4"}}},
            4000,
        ),
    ],
)
def test_pod_level_status_in_1_37(name: str, spec: dict[str, Any], status: dict[str, Any], cpu: int) -> None:
    # component-helpers v0.37.2 helpers_test.go
    assert resources.pod_requests(_resized(spec, status), options=PLR[V37]) == {"cpu": cpu}


def test_pod_level_status_before_1_37_sets_the_names_the_spec_sets() -> None:
    # v0.35.4 / v0.36.3 PodRequests: determineEffectiveRequests over the pod
    # level for the names spec.resources.requests sets; the containers' sums
    # from their own statuses (none here: the spec, 1).
    pod = _resized(
        {"resources": {"requests": {"cpu": "2"}}, "containers": [_c("c1", {"cpu": "1", "memory": "1Gi"})]},
        {"allocatedResources": {"cpu": "3", "memory": "4Gi"}, "resources": {"requests": {"cpu": "3500m"}}},
    )
    for version in (V35, V36):
        assert resources.pod_requests(pod, options=PLR[version]) == {"cpu": 3500, "memory": 2**30}, version
    # v0.37.2: every supported name of max(spec, actuated, allocated), and the containers' sums from the pod's status.
    assert resources.pod_requests(pod, options=PLR[V37]) == {"cpu": 3500, "memory": 4 * 2**30}
    # Without the gate the pod-level status is not read in any release.
    for version in features.SUPPORTED:
        assert resources.pod_requests(pod, options=USE_STATUS[version]) == {"cpu": 2000, "memory": 2**30}


def test_the_scheduler_counts_pods_with_its_releases_options() -> None:
    # framework/types.go PodInfo.CalculateResource (v1.37.2): UseStatusResources
    # from InPlacePodVerticalScaling, pod-level status from its own gate (off in 1.35).
    o35, o37 = (resources.node_info_options(features.Features.of(v)) for v in (V35, V37))
    assert (o35.use_status_resources, o35.in_place_pod_level_resources_vertical_scaling) == (True, False)
    assert (o37.use_status_resources, o37.in_place_pod_level_resources_vertical_scaling) == (True, True)
    assert not o37.skip_pod_level_resources and o37.version == V37
    off = features.Features.of(V37, {"PodLevelResources": False})
    assert resources.node_info_options(off).skip_pod_level_resources


def test_non_zero_defaults_apply_to_each_status_list() -> None:
    # NonMissingContainerRequests is applied to spec, allocated and actuated
    # lists alike (v0.37.2 aggregateContainerResourcesByFn): a status without
    # memory still counts the 200Mi default.
    pod = _resized({"containers": [_c("c", {"cpu": "1"})]}, {"containerStatuses": [_cs("c", actuated={"cpu": "2"})]})
    got = resources.pod_requests(pod, non_zero=True, options=USE_STATUS[V37])
    assert got == {"cpu": 2000, "memory": resources.DEFAULT_MEMORY_REQUEST}


def test_status_quantities_name_their_field() -> None:
    pod = _resized({"containers": [_c("c", {"cpu": "1"})]}, {"containerStatuses": [_cs("c", allocated={"cpu": "x"})]})
    with pytest.raises(resources.QuantityError, match=r"^status\.containerStatuses\[0\]\.allocatedResources\[cpu\]: "):
        resources.pod_requests(pod, options=USE_STATUS[V37])


@pytest.mark.parametrize(("version", "memory"), [("1.35", 2**30), ("1.36", 2**30), ("1.37", 4 * 2**30)])
def test_a_bound_pod_resized_in_place_is_counted_as_the_release_counts_it(version: str, memory: int) -> None:
    # The core's cache (a bound pod fed in) takes the release's options, as
    # the plugins do: v0.35/v0.36 read the pod-level status only for the names
    # spec.resources.requests sets, v0.37 for every name.
    from berth import app, config
    from berth.testing import make_node

    berth = app.build(config.parse({"kubernetesVersion": version}), run_loop=False)
    berth.cluster.upsert_nodes([make_node("n0", cpu="8", memory="16Gi")])
    pod = _resized(
        {
            "nodeName": "n0",
            "schedulerName": "berth",
            "resources": {"requests": {"cpu": "2"}},
            "containers": [_c("c1", {"cpu": "1", "memory": "1Gi"})],
        },
        {"allocatedResources": {"cpu": "3", "memory": "4Gi"}, "resources": {"requests": {"cpu": "3500m"}}},
    )
    pod = msgspec.structs.replace(pod, metadata=msgspec.structs.replace(pod.metadata, namespace="default", uid="u1"))
    berth.cluster.upsert_pods([pod])
    info = berth.core.cache.get_pod("u1")
    assert info is not None and info.requests.get("memory") == memory
