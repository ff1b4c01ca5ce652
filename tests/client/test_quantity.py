"""berth_client.quantity parses as apimachinery's ParseQuantity does, and
exactly as the server's parser (berth.cluster.resources) does: the table
holds cases of k8s.io/apimachinery/pkg/api/resource/quantity_test.go
(TestQuantityParse, TestQuantityParseZero, TestQuantityParseNonNumericPanic)
and the canonical integers of MilliValue()/Value(); Hypothesis holds the
two parsers to the same answers on any input."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from berth.cluster import resources
from berth_client import quantity

PARSE_CASES: list[tuple[str, Fraction]] = [
    ("0", Fraction(0)),
    ("0n", Fraction(0)),
    ("0Mi", Fraction(0)),
    (".", Fraction(0)),  # upstream: zero, not an error
    ("+", Fraction(0)),
    ("Mi", Fraction(0)),  # a bare suffix is zero
    ("1.", Fraction(1)),
    ("1", Fraction(1)),
    ("1n", Fraction(1, 10**9)),
    ("1u", Fraction(1, 10**6)),
    ("1m", Fraction(1, 1000)),
    ("1k", Fraction(1000)),
    ("1M", Fraction(10**6)),
    ("1P", Fraction(10**15)),
    ("1Ki", Fraction(1024)),
    ("1Mi", Fraction(2**20)),
    ("1.5Gi", Fraction(3 * 2**29)),
    ("100m", Fraction(1, 10)),
    ("0.1", Fraction(1, 10)),
    ("1e3", Fraction(1000)),
    ("1E-3", Fraction(1, 1000)),
    ("-1m", Fraction(-1, 1000)),
    ("1.1Mi", Fraction(11 * 2**20, 10)),
    ("0.0000000001", Fraction(1, 10**9)),  # below a nano-unit: rounded up to 1n
    ("1.0000000001", Fraction(10**9 + 1, 10**9)),  # rounded up, away from zero
    ("-1.0000000001", -Fraction(10**9 + 1, 10**9)),
    (" 5 ", Fraction(5)),  # UnmarshalJSON trims
]


@pytest.mark.parametrize(("text", "value"), PARSE_CASES, ids=[c[0] for c in PARSE_CASES])
def test_parses_as_kubernetes_does(text: str, value: Fraction) -> None:
    assert quantity.parse(text) == value


ERROR_CASES: list[tuple[object, str]] = [
    ("", quantity.ERR_FORMAT),
    ("1.5.3Gi", quantity.ERR_FORMAT),
    ("lots", quantity.ERR_FORMAT),
    ("1KiB", quantity.ERR_FORMAT),
    ("1e", quantity.ERR_SUFFIX),
    ("1kk", quantity.ERR_SUFFIX),
    ("1e99999999999999999999", quantity.ERR_SUFFIX),  # not an int64 exponent
    ("1e300000", quantity.ERR_RANGE),  # refused from the digit count, at once
    ("9223372036854776", quantity.ERR_RANGE),
    (True, quantity.ERR_FORMAT),
    (float("inf"), quantity.ERR_FORMAT),
]


@pytest.mark.parametrize(("value", "detail"), ERROR_CASES, ids=[repr(c[0]) for c in ERROR_CASES])
def test_refuses_what_kubernetes_refuses_with_its_words(value: object, detail: str) -> None:
    with pytest.raises(quantity.QuantityError) as e:
        quantity.parse(value)  # type: ignore[arg-type]
    assert e.value.detail == detail
    assert str(e.value).startswith("Invalid value: ")


CANONICAL_CASES: list[tuple[str, object, int]] = [
    ("cpu", "500m", 500),
    ("cpu", "2", 2000),
    ("cpu", 2, 2000),
    ("cpu", 0.5, 500),
    ("cpu", "1n", 1),  # MilliValue rounds up
    ("memory", "16Gi", 16 * 2**30),
    ("memory", "1.5", 2),  # Value rounds up
    ("memory", "100m", 1),
    ("nvidia.com/gpu", "1", 1),
    ("pods", "110", 110),
]


@pytest.mark.parametrize(("resource", "value", "canonical"), CANONICAL_CASES)
def test_canonical_integers_are_milli_for_cpu_and_base_units_else(resource: str, value: object, canonical: int) -> None:
    assert quantity.canonical(resource, value) == canonical  # type: ignore[arg-type]


def test_a_negative_amount_is_refused_naming_its_resource() -> None:
    with pytest.raises(quantity.QuantityError) as e:
        quantity.canonical_map({"cpu": "-1"}, "requests")
    assert str(e.value) == 'requests[cpu]: Invalid value: "-1": must be greater than or equal to 0'


FORMAT_CASES = [("cpu", 500, "500m"), ("cpu", 2000, "2"), ("memory", 2**34, "16Gi"), ("memory", 1000, "1000")]


@pytest.mark.parametrize(("resource", "value", "text"), FORMAT_CASES)
def test_formats_canonical_integers_as_exact_quantities(resource: str, value: int, text: str) -> None:
    assert quantity.format(resource, value) == text
    assert quantity.canonical(resource, text) == value


# ---------------------------------------------------------------- the same answers as the server's parser

_quantity_text = st.builds(
    "{}{}{}{}".format,
    st.sampled_from(["", "+", "-"]),
    st.from_regex(r"[0-9]{0,25}", fullmatch=True),
    st.sampled_from(["", "."]).flatmap(lambda dot: st.from_regex(r"[0-9]{0,25}", fullmatch=True).map(dot.__add__)),
    st.sampled_from(
        ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e", "E"]
    ).flatmap(lambda s: st.from_regex(r"[-+]?[0-9]{0,4}", fullmatch=True).map(s.__add__) if s in "eE" else st.just(s)),
)


def _server(value: object) -> tuple[str, object]:
    try:
        return "ok", resources.parse_quantity(value)  # type: ignore[arg-type]
    except resources.QuantityError as e:
        return "error", e.detail


def _client(value: object) -> tuple[str, object]:
    try:
        return "ok", quantity.parse(value)  # type: ignore[arg-type]
    except quantity.QuantityError as e:
        return "error", e.detail


@given(st.one_of(_quantity_text, st.text(max_size=12), st.integers(), st.floats()))
def test_the_client_and_the_server_parse_every_quantity_alike(value: object) -> None:
    assert _client(value) == _server(value)


@given(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), st.integers(min_value=0, max_value=2**63 - 1))
def test_the_client_formats_as_the_server_does(resource: str, value: int) -> None:
    assert quantity.format(resource, value) == resources.format_quantity(resource, value)


@pytest.mark.parametrize(
    ("resource", "a", "b", "want"),
    [
        # One unit for both sides of a requested/allocatable cell.
        ("cpu", 1000, 1900, ("1000m", "1900m")),
        ("cpu", 2000, 4000, ("2", "4")),
        ("cpu", 0, 1900, ("0", "1900m")),
        ("cpu", 0, 0, ("0", "0")),
        ("memory", 6 * 2**30, 7464 * 2**20, ("6144Mi", "7464Mi")),
        ("memory", 0, 16 * 2**30, ("0", "16Gi")),
        ("memory", 512, 2**30, ("512", "1073741824")),
        ("nvidia.com/gpu", 1, 4, ("1", "4")),
    ],
)
def test_a_pair_is_formatted_in_one_unit(resource: str, a: int, b: int, want: tuple[str, str]) -> None:
    assert quantity.format_pair(resource, a, b) == want
