"""The DRA CEL environment against Kubernetes' (``dynamic-resource-allocation/cel``
compile.go and compile_test.go, v0.34.4; ``apiserver/pkg/cel/library``
quantity.go and semverlib.go). Rows named after a compile_test.go case
keep its name."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from berth.cluster import dra
from berth.dra import cel

DRIVER = "dra.example.com"


def make_device(
    attributes: dict[str, dict[str, Any]] | None = None, capacity: dict[str, str] | None = None
) -> cel.DeviceInput:
    d = dra.Device(
        name="dev",
        attributes={k: msgspec.convert(v, dra.DeviceAttribute) for k, v in (attributes or {}).items()},
        capacity={k: dra.DeviceCapacity(value=v) for k, v in (capacity or {}).items()},
    )
    return cel.device_input(DRIVER, d)


DEVICE = make_device(
    attributes={
        "name": {"string": "gpu-0"},
        "count": {"int": 4},
        "on": {"bool": True},
        "driverVersion": {"version": "1.2.3-rc.1+build.5"},
        "other.example.com/model": {"string": "x"},
    },
    capacity={"memory": "10Gi", "cores": "1500m", "other.example.com/slots": "2"},
)


@pytest.mark.parametrize(
    ("name", "expression", "want"),
    [
        # compile_test.go
        ("true", "true", True),
        ("driver_name", f'device.driver == "{DRIVER}"', True),
        ("domain_attribute", f'device.attributes["{DRIVER}"].name == "gpu-0"', True),
        ("int_attribute", f'device.attributes["{DRIVER}"].count == 4', True),
        ("bool_attribute", f'device.attributes["{DRIVER}"].on', True),
        ("other_domain", 'device.attributes["other.example.com"].model == "x"', True),
        ("cel.bind", f'cel.bind(dra, device.attributes["{DRIVER}"], dra.on && dra.count > 2)', True),
        ("has", f'has(device.attributes["{DRIVER}"].name)', True),
        ("has_not", f'has(device.attributes["{DRIVER}"].nope)', False),
        ("missing_domain_is_empty", 'has(device.attributes["unknown.example.com"].x)', False),
        ("missing_domain_in", '"x" in device.attributes["unknown.example.com"]', False),
        ("missing_capacity_domain", 'has(device.capacity["unknown.example.com"].memory)', False),
        ("short-circuit-error", f'device.attributes["{DRIVER}"].nope == 1 || true', True),
        ("strings_ext", f'device.attributes["{DRIVER}"].name.split("-")[0] == "gpu"', True),
        # quantities
        ("quantity", f'device.capacity["{DRIVER}"].memory.compareTo(quantity("1Gi")) >= 0', True),
        ("quantity_less", f'device.capacity["{DRIVER}"].memory.compareTo(quantity("11Gi")) < 0', True),
        ("quantity_equal_other_unit", f'device.capacity["{DRIVER}"].memory == quantity("10240Mi")', True),
        ("quantity_greater", f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("9Gi"))', True),
        ("quantity_lessthan", f'device.capacity["{DRIVER}"].cores.isLessThan(quantity("2"))', True),
        ("quantity_milli", f'device.capacity["{DRIVER}"].cores == quantity("1.5")', True),
        ("quantity_other_domain", 'device.capacity["other.example.com"].slots.asInteger() == 2', True),
        ("quantity_add", 'quantity("1Gi").add(quantity("1Gi")) == quantity("2Gi")', True),
        ("quantity_add_int", 'quantity("1").add(2).asInteger() == 3', True),
        ("quantity_sub", 'quantity("1").sub(quantity("500m")) == quantity("0.5")', True),
        ("quantity_is_integer", 'quantity("1500m").isInteger()', False),
        ("quantity_float", 'quantity("1500m").asApproximateFloat() == 1.5', True),
        ("quantity_sign", 'quantity("-1").sign() == -1', True),
        ("is_quantity", 'isQuantity("1Gi") && !isQuantity("1 Gi")', True),
        # semantic versions
        ("version_compare", f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("1.2.2"))', True),
        ("version_prerelease", f'device.attributes["{DRIVER}"].driverVersion.isLessThan(semver("1.2.3"))', True),
        ("version_build_ignored", f'device.attributes["{DRIVER}"].driverVersion == semver("1.2.3-rc.1")', True),
        (
            "version_parts",
            f'cel.bind(v, device.attributes["{DRIVER}"].driverVersion, '
            "v.major() == 1 && v.minor() == 2 && v.patch() == 3)",
            True,
        ),
        ("version_compare_to", 'semver("2.0.0").compareTo(semver("10.0.0")) == -1', True),
        ("is_semver", 'isSemver("1.2.3") && !isSemver("v1.2.3") && !isSemver("1.2")', True),
        ("semver_normalize", 'semver("v01.2", true) == semver("1.2.0")', True),
        ("is_semver_normalize", 'isSemver("v1.2", true) && !isSemver("v1.2-rc.1", true)', True),
    ],
)
def test_selector_evaluates(name: str, expression: str, want: bool) -> None:
    compiled = cel.Cache().get_or_compile(expression)
    assert compiled.error is None, (name, compiled.error)
    assert compiled.device_matches(DEVICE) is want, name


@pytest.mark.parametrize(
    ("name", "expression", "error"),
    [
        ("undeclared", "noSuchVar", "undeclared reference"),
        ("syntax", "device.driver ==", "compilation failed"),
        ("type_mismatch", '"1" == 1', "no matching overload"),
        ("int_result", "1 + 2", "must evaluate to bool"),
        ("string_result", 'device.driver + "x"', "must evaluate to bool"),
        # An attribute is of unknown type in Kubernetes too: compiles, fails at run time.
        ("dyn_result", f'device.attributes["{DRIVER}"].name', None),
    ],
)
def test_compile_errors(name: str, expression: str, error: str | None) -> None:
    compiled = cel.Cache().get_or_compile(expression)
    if error is None:
        assert compiled.error is None, name
        with pytest.raises(cel.CelRuntimeError, match="could not be converted to bool"):
            compiled.device_matches(DEVICE)
    else:
        assert compiled.error is not None and error in compiled.error, (name, compiled.error)
        with pytest.raises(cel.CelRuntimeError):
            compiled.device_matches(DEVICE)


@pytest.mark.parametrize(
    ("name", "expression", "error"),
    [
        ("missing_attribute", f'device.attributes["{DRIVER}"].nope == 1', "nope"),
        ("missing_capacity", f'device.capacity["{DRIVER}"].nope.isInteger()', "nope"),
        ("computed_missing_domain", 'device.attributes["unknown." + "example.com"].x == 1', "unknown.example.com"),
        ("bad_quantity", 'quantity("1 Gi").isInteger()', "quantit"),
        ("bad_semver", 'semver("1.2").major() == 1', "1.2"),
        ("quantity_vs_version", f'device.capacity["{DRIVER}"].memory.compareTo(semver("1.0.0")) == 0', "overload"),
        ("as_integer_fraction", 'quantity("1500m").asInteger() == 1', "cannot convert value to integer"),
        ("division_by_zero", "1 / (device.attributes['dra.example.com'].count - 4) == 1", "divide by zero"),
    ],
)
def test_runtime_errors(name: str, expression: str, error: str) -> None:
    compiled = cel.Cache().get_or_compile(expression)
    assert compiled.error is None, (name, compiled.error)
    with pytest.raises(cel.CelRuntimeError) as err:
        compiled.device_matches(DEVICE)
    assert error.lower() in str(err.value).lower(), (name, str(err.value))


def test_bad_version_attribute_is_an_error() -> None:
    """compile.go getAttributeValue: a version attribute that is not semver."""
    with pytest.raises(cel.CelRuntimeError, match="attribute driverVersion: parse semantic version"):
        make_device(attributes={"driverVersion": {"version": "1.2"}})


def test_attribute_without_value_is_an_error() -> None:
    with pytest.raises(cel.CelRuntimeError, match="unsupported attribute value"):
        make_device(attributes={"empty": {}})


def test_cache_compiles_once_and_is_bounded() -> None:
    cache = cel.Cache(max_size=2)
    first = cache.get_or_compile("true")
    assert cache.get_or_compile("true") is first
    cache.get_or_compile("false")
    cache.get_or_compile("1 == 1")
    assert len(cache) == 2
    assert cache.get_or_compile("true") is not first  # evicted, compiled again


def test_devices_keep_their_own_domain_defaults() -> None:
    """The empty default map for a domain is per device, and the device's own
    domains are never replaced by it."""
    compiled = cel.Cache().get_or_compile(
        f'has(device.attributes["{DRIVER}"].name) && !has(device.attributes["x.example.com"].name)'
    )
    assert compiled.device_matches(DEVICE)
    assert not compiled.device_matches(make_device())
